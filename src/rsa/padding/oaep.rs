//! RSAES-OAEP encoding (RFC 8017 §7.1) with MGF1, label, and separately chosen label
//! hash and MGF1 hash.

use zeroize::Zeroizing;

use super::{checked_output_len, ct, mgf1_xor, Hasher, RandomSource, MAX_DIGEST_LEN};
use crate::error::{KaeError, KaeResult};

/// Largest message OAEP can carry in a `k`-byte block with an `hlen`-byte hash.
pub fn max_message_len(k: usize, hlen: usize) -> usize {
    k.saturating_sub(2 * hlen + 2)
}

/// EME-OAEP encoding of `msg` into `em` (length k):
/// EM = 0x00 || maskedSeed || maskedDB, DB = lHash || PS || 0x01 || msg.
pub fn encode(
    hash: &dyn Hasher,
    mgf1_hash: &dyn Hasher,
    label: &[u8],
    msg: &[u8],
    rng: &dyn RandomSource,
    em: &mut [u8],
) -> KaeResult<()> {
    let hlen = checked_output_len(hash)?;
    checked_output_len(mgf1_hash)?;
    let k = em.len();
    if k < 2 * hlen + 2 {
        return Err(KaeError::KeyTooSmall);
    }
    if msg.len() > k - 2 * hlen - 2 {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    em[0] = 0;
    let (seed, db) = em[1..].split_at_mut(hlen);
    // DB = lHash || PS || 0x01 || M
    hash.hash(&[label], &mut db[..hlen])?;
    let one = db.len() - msg.len() - 1;
    db[hlen..one].fill(0);
    db[one] = 0x01;
    db[one + 1..].copy_from_slice(msg);
    rng.fill(seed)?;
    mgf1_xor(mgf1_hash, seed, db)?;
    mgf1_xor(mgf1_hash, db, seed)?;
    Ok(())
}

/// Constant-time EME-OAEP decoding of `em` (the decrypted block, length k).
///
/// On success the message is written to `out[..len]` and `Ok(len)` returned. Every
/// failure — bad leading byte, label hash mismatch, missing 0x01 separator, `out` too
/// small — yields the same [`KaeError::OaepDecodingError`], after the same work, and
/// leaves `out` unchanged. Only a modulus too small for the hash (public) fails early,
/// with the same error.
pub fn decode(
    hash: &dyn Hasher,
    mgf1_hash: &dyn Hasher,
    label: &[u8],
    em: &[u8],
    out: &mut [u8],
) -> KaeResult<usize> {
    let hlen = checked_output_len(hash)?;
    checked_output_len(mgf1_hash)?;
    let k = em.len();
    if k < 2 * hlen + 2 {
        return Err(KaeError::OaepDecodingError);
    }
    let dblen = k - hlen - 1;
    let mut good = ct::is_zero_u8(em[0]);

    let mut seed = Zeroizing::new([0u8; MAX_DIGEST_LEN]);
    let seed = &mut seed[..hlen];
    seed.copy_from_slice(&em[1..1 + hlen]);
    let mut db = Zeroizing::new(em[1 + hlen..].to_vec());
    mgf1_xor(mgf1_hash, &db, seed)?;
    mgf1_xor(mgf1_hash, seed, &mut db)?;

    let mut lhash = [0u8; MAX_DIGEST_LEN];
    hash.hash(&[label], &mut lhash[..hlen])?;
    good &= ct::bytes_eq(&db[..hlen], &lhash[..hlen]);

    // After lHash: zero bytes, then 0x01, then the message.
    let mut found_one = ct::FALSE;
    let mut one_index = 0usize;
    for (i, &b) in db.iter().enumerate().skip(hlen) {
        let is1 = ct::eq_u8(b, 1);
        let is0 = ct::is_zero_u8(b);
        one_index = ct::select(!found_one & is1, i, one_index);
        found_one |= is1;
        good &= found_one | is0;
    }
    good &= found_one;

    let msg_index = one_index + 1;
    let mlen = dblen.wrapping_sub(msg_index);
    good &= ct::ge(out.len(), mlen);

    // Move the message to db[hlen + 1..] with a fixed access pattern (one conditional
    // pass per bit of the shift), then copy out under the mask.
    let start = hlen + 1;
    let max = dblen - start;
    let shift = max.wrapping_sub(mlen);
    let mut step = 1usize;
    while step < max {
        let m = !ct::is_zero(step & shift);
        for i in start..dblen - step {
            db[i] = ct::select_u8(m, db[i + step], db[i]);
        }
        step <<= 1;
    }
    let tlen = out.len().min(max);
    for (i, o) in out[..tlen].iter_mut().enumerate() {
        let m = good & ct::lt(i, mlen);
        *o = ct::select_u8(m, db[start + i], *o);
    }
    if ct::declassify(good) {
        Ok(mlen)
    } else {
        Err(KaeError::OaepDecodingError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::padding::testutil::*;
    use crate::rsa::padding::DigestId;
    use openssl::encrypt::{Decrypter, Encrypter};
    use openssl::pkey::PKey;
    use openssl::rsa::Padding;

    const PAIRS: &[(DigestId, DigestId)] = &[
        (DigestId::Sha1, DigestId::Sha1),
        (DigestId::Sha256, DigestId::Sha256),
        (DigestId::Sha256, DigestId::Sha1),
        (DigestId::Sha1, DigestId::Sha512),
        (DigestId::Sha384, DigestId::Sha256),
        (DigestId::Sha512, DigestId::Sha512),
        (DigestId::Sha224, DigestId::Sha3_256),
        (DigestId::Sha3_512, DigestId::Sha1),
    ];

    #[test]
    fn cross_check_with_openssl() {
        let key = gen_key(2048);
        let pkey = PKey::from_rsa(key.clone()).unwrap();
        let k = key.size() as usize;
        for &(h, m) in PAIRS {
            let hh = hasher(h);
            let mh = hasher(m);
            for label in [&b""[..], &b"a label"[..], &random_bytes(300)[..]] {
                for len in [0usize, 1, 17, max_message_len(k, h.output_len())] {
                    let msg = random_bytes(len);
                    // Ours → openssl decrypts.
                    let mut em = vec![0u8; k];
                    encode(&hh, &mh, label, &msg, &OsslRng, &mut em).unwrap();
                    let c = raw_public(&key, &em);
                    let mut dec = Decrypter::new(&pkey).unwrap();
                    dec.set_rsa_padding(Padding::PKCS1_OAEP).unwrap();
                    dec.set_rsa_oaep_md(md(h)).unwrap();
                    dec.set_rsa_mgf1_md(md(m)).unwrap();
                    if !label.is_empty() {
                        // (the openssl crate cannot set an empty label; empty is the default)
                        dec.set_rsa_oaep_label(label).unwrap();
                    }
                    let mut out = vec![0u8; dec.decrypt_len(&c).unwrap()];
                    let n = dec.decrypt(&c, &mut out).unwrap();
                    assert_eq!(&out[..n], &msg[..], "{h:?}/{m:?} len {len}");
                    // openssl encrypts → we decode.
                    let mut enc = Encrypter::new(&pkey).unwrap();
                    enc.set_rsa_padding(Padding::PKCS1_OAEP).unwrap();
                    enc.set_rsa_oaep_md(md(h)).unwrap();
                    enc.set_rsa_mgf1_md(md(m)).unwrap();
                    if !label.is_empty() {
                        enc.set_rsa_oaep_label(label).unwrap();
                    }
                    let mut c = vec![0u8; enc.encrypt_len(&msg).unwrap()];
                    let n = enc.encrypt(&msg, &mut c).unwrap();
                    let em = raw_private(&key, &c[..n]);
                    let mut out = vec![0u8; k];
                    assert_eq!(decode(&hh, &mh, label, &em, &mut out), Ok(len));
                    assert_eq!(&out[..len], &msg[..]);
                    // Wrong label, wrong hash, wrong MGF hash all fail.
                    assert_eq!(
                        decode(&hh, &mh, b"other", &em, &mut out),
                        Err(KaeError::OaepDecodingError)
                    );
                    let h2 = hasher(if h == DigestId::Sha256 {
                        DigestId::Sha1
                    } else {
                        DigestId::Sha256
                    });
                    assert_eq!(
                        decode(&h2, &mh, label, &em, &mut out),
                        Err(KaeError::OaepDecodingError)
                    );
                    let m2 = hasher(if m == DigestId::Sha256 {
                        DigestId::Sha1
                    } else {
                        DigestId::Sha256
                    });
                    assert_eq!(
                        decode(&hh, &m2, label, &em, &mut out),
                        Err(KaeError::OaepDecodingError)
                    );
                }
            }
        }
    }

    const OAEP_1_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBAKizsoSvjrULOHA0
qGDxRsSRnzGHY81sVZjIrkgRoeCrxMfgsILWk6Xn/O1nXPRmhRJ3LAy8ZKdCxsYw
9TPIzHL2KugzxAvyWELphLt4vb+XwBB9Vb22YvXE4Pq5hFy1FI73OS3Tqv+Trh5r
Znuz1CR2FtT1uhDUz9Im3ojTnxb7AgMBAAECgYBTM5z9t5/IRmplXHMWrKhcVf2P
bdiY/a8RlRfvT1Lo/Y4ljfk/7hgPoOSrKWk82DsVKlU9SsTRgSuLn6WvDn9V/nME
30FXCSbzMR8VxNZacyxIMRbuPT0tCvNUmtm/fL+3itiE+E1b6wRyTcc2mzHe830M
9Tnpz83T3mU3KerV0QJBANMnN+cmf/4TQbLVwNFQqBtYb7MTK+0vjVJihkqcufMK
84vkSFmNQToXLvuALCGs8cEcUgwvJqRx3K0hLqx8o50CQQDMiFPR1U2mMPrABPRx
8oHHuJgtgiSkkO2+sz0+PVzJPEdlcD0d15FkLx8Rag3YUr4kGbKvcr/poDDoYLAo
i113AkAOEr8XGOnO9VmbocOIL+gEapCHTu/OjyzMIOTydB+wozo4SK7JyTBfvsvS
12gZln1GcazGQx5AN5aNs3h45pXBAkEAlSl7D5Wi+mfQBwfWCd/U/AXIna/C721u
pVvsdx6jM3NNklHnkILs2oZu/vE8RZ4aYxOGt+NUyJn18RLKhdcVgwJAT0VsUCST
vcDtKrdWo6btTWc1Kml9QhbpMhKxJ6Y9VBHOb6mNXb79cyY+NygUJ0OBgWbtfdY2
h90qjKHS9PvY4Q==
-----END PRIVATE KEY-----
";

    /// RFC 8017 / PKCS#1 v2.1 test vector "RSAES-OAEP Encryption Example 1.1" (SHA-1):
    /// fixed seed, so the encoded block is exactly reproducible.
    #[test]
    fn known_answer_encoding() {
        let msg = hex("6628194e12073db03ba94cda9ef9532397d50dba79b987004afefe34");
        let seed = hex("18b776ea21069d69776a33e96bad48e1dda0a5ef");
        let rng = FixedRng {
            bytes: seed.clone(),
            pos: Default::default(),
        };
        let h = hasher(DigestId::Sha1);
        let mut em = vec![0u8; 128];
        encode(&h, &h, b"", &msg, &rng, &mut em).unwrap();
        // Independent construction from the RFC definition.
        let mut db = digest(DigestId::Sha1, b"");
        db.resize(128 - 20 - 1 - msg.len() - 1, 0);
        db.push(1);
        db.extend_from_slice(&msg);
        let mut dbmask = vec![0u8; db.len()];
        crate::rsa::padding::mgf1(&h, &seed, &mut dbmask).unwrap();
        let masked_db: Vec<u8> = db.iter().zip(&dbmask).map(|(a, b)| a ^ b).collect();
        let mut seedmask = vec![0u8; 20];
        crate::rsa::padding::mgf1(&h, &masked_db, &mut seedmask).unwrap();
        let masked_seed: Vec<u8> = seed.iter().zip(&seedmask).map(|(a, b)| a ^ b).collect();
        assert_eq!(em[0], 0);
        assert_eq!(&em[1..21], &masked_seed[..]);
        assert_eq!(&em[21..], &masked_db[..]);
        // Encrypting the block with the example's key gives the published ciphertext
        // (OpenSSL's evppkey_rsa_common.txt, key RSA-OAEP-1).
        let key = openssl::rsa::Rsa::private_key_from_pem(OAEP_1_KEY.as_bytes())
            .or_else(|_| PKey::private_key_from_pem(OAEP_1_KEY.as_bytes()).and_then(|p| p.rsa()))
            .unwrap();
        assert_eq!(
            raw_public(&key, &em),
            hex("354fe67b4a126d5d35fe36c777791a3f7ba13def484e2d3908aff722fad468fb21696de95d0be911c2d3174f8afcc201035f7b6d8e69402de5451618c21a535fa9d7bfc5b8dd9fc243f8cf927db31322d6e881eaa91a996170e657a05a266426d98c88003f8477c1227094a0d9fa1e8c4024309ce1ecccb5210035d47ac72e8a")
        );
        let mut out = [0u8; 128];
        assert_eq!(decode(&h, &h, b"", &em, &mut out), Ok(msg.len()));
        assert_eq!(&out[..msg.len()], &msg[..]);
    }

    #[test]
    fn all_lengths_and_tampering() {
        let h = hasher(DigestId::Sha256);
        let k = 100;
        let max = max_message_len(k, 32);
        assert_eq!(max, 34);
        for len in 0..=max {
            let msg = random_bytes(len);
            let mut em = vec![0u8; k];
            encode(&h, &h, b"L", &msg, &OsslRng, &mut em).unwrap();
            let mut out = vec![0xC3u8; k];
            assert_eq!(decode(&h, &h, b"L", &em, &mut out), Ok(len));
            assert_eq!(&out[..len], &msg[..]);
            assert!(out[len..].iter().all(|&b| b == 0xC3));
            let mut exact = vec![0u8; len];
            assert_eq!(decode(&h, &h, b"L", &em, &mut exact), Ok(len));
            if len > 0 {
                let mut short = vec![0x11u8; len - 1];
                assert_eq!(
                    decode(&h, &h, b"L", &em, &mut short),
                    Err(KaeError::OaepDecodingError)
                );
                assert!(short.iter().all(|&b| b == 0x11));
            }
            // Flip every byte position: always the one error, out untouched.
            for pos in 0..k {
                let mut e = em.clone();
                e[pos] ^= 0x01;
                let mut o = vec![0x77u8; k];
                assert_eq!(
                    decode(&h, &h, b"L", &e, &mut o),
                    Err(KaeError::OaepDecodingError),
                    "pos {pos}"
                );
                assert!(o.iter().all(|&b| b == 0x77));
            }
        }
        let mut em = vec![0u8; k];
        assert_eq!(
            encode(&h, &h, b"", &[0u8; 35], &OsslRng, &mut em),
            Err(KaeError::DataTooLargeForKeySize)
        );
        assert_eq!(
            encode(&h, &h, b"", b"", &OsslRng, &mut [0u8; 65]),
            Err(KaeError::KeyTooSmall)
        );
        assert_eq!(
            encode(&h, &h, b"", b"", &FailingRng, &mut em),
            Err(KaeError::RandomFailure)
        );
        assert_eq!(
            decode(&h, &h, b"", &[0u8; 65], &mut [0u8; 65]),
            Err(KaeError::OaepDecodingError)
        );
        // Separator missing: DB after lHash is all zeros.
        let mut zeros_db = vec![0u8; k - 33];
        zeros_db[..32].copy_from_slice(&digest(DigestId::Sha256, b""));
        let seed = random_bytes(32);
        let mut em = vec![0u8; k];
        em[1..33].copy_from_slice(&seed);
        em[33..].copy_from_slice(&zeros_db);
        crate::rsa::padding::mgf1_xor(&h, &seed, &mut em[33..]).unwrap();
        let masked = em[33..].to_vec();
        crate::rsa::padding::mgf1_xor(&h, &masked, &mut em[1..33]).unwrap();
        assert_eq!(
            decode(&h, &h, b"", &em, &mut [0u8; 100]),
            Err(KaeError::OaepDecodingError)
        );
        // Nonzero byte before the separator.
        let mut db = digest(DigestId::Sha256, b"");
        db.extend_from_slice(&[0, 0, 2, 0, 1, 0xAB]);
        db.resize(k - 33, 0);
        let mut em = vec![0u8; k];
        em[1..33].copy_from_slice(&seed);
        em[33..].copy_from_slice(&db);
        crate::rsa::padding::mgf1_xor(&h, &seed, &mut em[33..]).unwrap();
        let masked = em[33..].to_vec();
        crate::rsa::padding::mgf1_xor(&h, &masked, &mut em[1..33]).unwrap();
        assert_eq!(
            decode(&h, &h, b"", &em, &mut [0u8; 100]),
            Err(KaeError::OaepDecodingError)
        );
    }
}
