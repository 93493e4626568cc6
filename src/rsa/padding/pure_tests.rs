//! Padding tests that never call libcrypto, so that miri can run them
//! (`cargo +nightly miri test --lib rsa::padding::pure_tests`; see scripts/sanitizers.sh).
//! SHA-256 and the random source are plain Rust here; outside miri the SHA-256 is checked
//! against libcrypto as well. Sizes are small because miri is slow.

use super::pss::SaltLen;
use super::*;
use crate::error::KaeError;
use std::cell::Cell;

/// SHA-256 (FIPS 180-4), straightforward and slow: test use only.
struct Sha256Pure;

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

fn sha256(msg: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut m = msg.to_vec();
    m.push(0x80);
    while m.len() % 64 != 56 {
        m.push(0);
    }
    m.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in m.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_exact_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

impl Hasher for Sha256Pure {
    fn id(&self) -> DigestId {
        DigestId::Sha256
    }
    fn output_len(&self) -> usize {
        32
    }
    fn hash(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
        if out.len() != 32 {
            return Err(KaeError::InvalidDigestLength);
        }
        out.copy_from_slice(&sha256(&parts.concat()));
        Ok(())
    }
}

/// Counter-based bytes (never zero, so PKCS#1 padding needs no redraw).
struct CountingRng(Cell<u8>);
impl RandomSource for CountingRng {
    fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
        for b in buf {
            let v = self.0.get().wrapping_mul(37).wrapping_add(11);
            self.0.set(v);
            *b = v | 1;
        }
        Ok(())
    }
}

fn rng() -> CountingRng {
    CountingRng(Cell::new(5))
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn sha256_known_answers() {
    assert_eq!(
        sha256(b"abc").to_vec(),
        hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(
        sha256(b"").to_vec(),
        hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    );
    // HMAC-SHA256, RFC 4231 test case 2, through the padding module's HMAC.
    let mut mac = [0u8; 32];
    hmac(
        &Sha256Pure,
        b"Jefe",
        &[b"what do ya want for nothing?"],
        &mut mac,
    )
    .unwrap();
    assert_eq!(
        mac.to_vec(),
        hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    );
}

#[cfg(not(miri))]
#[test]
fn sha256_matches_libcrypto() {
    for len in [0usize, 1, 55, 56, 63, 64, 65, 119, 120, 200] {
        let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(
            sha256(&msg).to_vec(),
            testutil::digest(DigestId::Sha256, &msg),
            "len {len}"
        );
    }
}

#[test]
fn ct_helpers() {
    let vals = [
        0usize,
        1,
        2,
        127,
        128,
        255,
        usize::MAX / 2,
        usize::MAX - 1,
        usize::MAX,
    ];
    for &a in &vals {
        for &b in &vals {
            assert_eq!(ct::lt(a, b) == ct::TRUE, a < b);
            assert_eq!(ct::ge(a, b) == ct::TRUE, a >= b);
            assert_eq!(ct::eq(a, b) == ct::TRUE, a == b);
            assert_eq!(ct::select(ct::lt(a, b), a, b), a.min(b));
        }
    }
    let mut d = [1u8, 2, 3];
    ct::copy_if(ct::FALSE, &mut d, &[9, 9, 9]);
    assert_eq!(d, [1, 2, 3]);
    ct::copy_if(ct::TRUE, &mut d, &[9, 8, 7]);
    assert_eq!(d, [9, 8, 7]);
    assert_eq!(ct::bytes_eq(&d, &[9, 8, 7]), ct::TRUE);
    assert_eq!(ct::bytes_eq(&d, &[9, 8, 6]), ct::FALSE);
    assert_eq!(ct::all_zero(&[0, 0]), ct::TRUE);
    assert_eq!(ct::all_zero(&[0, 1]), ct::FALSE);
}

#[test]
fn pkcs1_type1_and_digest_info() {
    let digest = sha256(b"message");
    let mut em = vec![0u8; 64];
    pkcs1::encode_signature(DigestId::Sha256, &digest, &mut em).unwrap();
    pkcs1::verify_signature(DigestId::Sha256, &digest, &em).unwrap();
    let payload = pkcs1::unpad_type1(&em).unwrap();
    assert_eq!(
        pkcs1::strip_digest_info(DigestId::Sha256, payload).unwrap(),
        digest
    );
    let mut out = [0u8; 64];
    let n = pkcs1::decode_type1(&em, &mut out).unwrap();
    assert_eq!(&out[..n], payload);
    for i in 0..em.len() {
        let mut bad = em.clone();
        bad[i] ^= 0x40;
        assert!(
            pkcs1::verify_signature(DigestId::Sha256, &digest, &bad).is_err(),
            "byte {i}"
        );
    }
    // Too small a block for this DigestInfo.
    assert!(pkcs1::encode_signature(DigestId::Sha256, &digest, &mut [0u8; 40]).is_err());
}

#[test]
fn pkcs1_type2_decode() {
    let k = 48;
    for mlen in [0usize, 1, 20, k - 11] {
        let msg: Vec<u8> = (0..mlen).map(|i| i as u8 ^ 0x5a).collect();
        let mut em = vec![0u8; k];
        pkcs1::encode_type2(&msg, &mut em, &rng()).unwrap();
        let mut out = vec![0xEEu8; k];
        let n = pkcs1::decode_type2(&em, &mut out).unwrap();
        assert_eq!(&out[..n], &msg[..]);
        // Output one byte too small: the single padding error, output untouched.
        if mlen > 0 {
            let mut small = vec![0xEEu8; mlen - 1];
            assert_eq!(
                pkcs1::decode_type2(&em, &mut small),
                Err(KaeError::PaddingCheckFailed)
            );
            assert!(small.iter().all(|&b| b == 0xEE));
        }
    }
    let mut em = vec![0u8; k];
    pkcs1::encode_type2(b"hello", &mut em, &rng()).unwrap();
    let mut out = [0u8; 48];
    for bad in [
        {
            let mut e = em.clone();
            e[0] = 1;
            e
        },
        {
            let mut e = em.clone();
            e[1] = 1;
            e
        },
        {
            // Separator inside the first 8 padding bytes.
            let mut e = em.clone();
            e[5] = 0;
            e
        },
        {
            // No separator at all.
            let mut e = em.clone();
            let sep = k - 6;
            e[sep] = 7;
            e[2..].iter_mut().for_each(|b| *b |= 1);
            e
        },
    ] {
        assert_eq!(
            pkcs1::decode_type2(&bad, &mut out),
            Err(KaeError::PaddingCheckFailed)
        );
    }
    assert!(pkcs1::decode_type2(&em[..10], &mut out).is_err());
}

#[test]
fn pkcs1_implicit_rejection() {
    let k = 64;
    let d = [0x42u8; 60];
    let c1 = [0x17u8; 64];
    let c2 = [0x18u8; 64];
    let kdk1 = pkcs1::derive_kdk(&Sha256Pure, &d, &c1, k).unwrap();
    let kdk2 = pkcs1::derive_kdk(&Sha256Pure, &d, &c2, k).unwrap();
    assert_ne!(*kdk1, *kdk2);
    let mut em = vec![0u8; k];
    pkcs1::encode_type2(b"real message", &mut em, &rng()).unwrap();
    let mut out = [0u8; 64];
    let n = pkcs1::decode_type2_implicit(&Sha256Pure, &kdk1, &em, &mut out).unwrap();
    assert_eq!(&out[..n], b"real message");
    // Broken padding: a synthetic message, the same each time, different per ciphertext.
    em[1] = 3;
    let mut a = [0u8; 64];
    let mut b = [0u8; 64];
    let mut c = [0u8; 64];
    let na = pkcs1::decode_type2_implicit(&Sha256Pure, &kdk1, &em, &mut a).unwrap();
    let nb = pkcs1::decode_type2_implicit(&Sha256Pure, &kdk1, &em, &mut b).unwrap();
    let nc = pkcs1::decode_type2_implicit(&Sha256Pure, &kdk2, &em, &mut c).unwrap();
    assert_eq!((na, &a[..na]), (nb, &b[..nb]));
    assert!(na <= k - 11 && nc <= k - 11);
    assert_ne!((na, &a[..na]), (nc, &c[..nc]));
    // Invalid arguments are errors (never the padding).
    assert!(pkcs1::decode_type2_implicit(&Sha256Pure, &kdk1, &em[..10], &mut a).is_err());
    assert!(pkcs1::decode_type2_implicit(&Sha256Pure, &kdk1, &em, &mut []).is_err());
}

#[test]
fn tls_premaster() {
    let k = 64;
    let mut pm = [0u8; 48];
    pm[0] = 3;
    pm[1] = 3;
    pm[2..]
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    let mut em = vec![0u8; k];
    pkcs1::encode_type2(&pm, &mut em, &rng()).unwrap();
    let fake = [0xAAu8; 48];
    let mut out = [0u8; 48];
    pkcs1::decode_tls_premaster(&em, 0x0303, None, &fake, &mut out).unwrap();
    assert_eq!(out, pm);
    pkcs1::decode_tls_premaster(&em, 0x0302, None, &fake, &mut out).unwrap();
    assert_eq!(out, fake);
    pkcs1::decode_tls_premaster(&em, 0x0302, Some(0x0303), &fake, &mut out).unwrap();
    assert_eq!(out, pm);
    let mut short = vec![0u8; k];
    pkcs1::encode_type2(&pm[..47], &mut short, &rng()).unwrap();
    pkcs1::decode_tls_premaster(&short, 0x0303, None, &fake, &mut out).unwrap();
    assert_eq!(out, fake);
    assert!(pkcs1::decode_tls_premaster(&em[..58], 0x0303, None, &fake, &mut out).is_err());
}

#[test]
fn oaep_round_trip_and_rejections() {
    let k = 100;
    for (label, msg) in [(&b""[..], &b"m"[..]), (b"label", &[7u8; 34][..])] {
        let mut em = vec![0u8; k];
        oaep::encode(&Sha256Pure, &Sha256Pure, label, msg, &rng(), &mut em).unwrap();
        let mut out = vec![0u8; k];
        let n = oaep::decode(&Sha256Pure, &Sha256Pure, label, &em, &mut out).unwrap();
        assert_eq!(&out[..n], msg);
        for i in [0usize, 1, 40, k - 1] {
            let mut bad = em.clone();
            bad[i] ^= 1;
            let mut o = vec![0x33u8; k];
            assert_eq!(
                oaep::decode(&Sha256Pure, &Sha256Pure, label, &bad, &mut o),
                Err(KaeError::OaepDecodingError)
            );
            assert!(o.iter().all(|&b| b == 0x33));
        }
        assert!(oaep::decode(&Sha256Pure, &Sha256Pure, b"other", &em, &mut out).is_err());
    }
    // Message too long, block too small.
    assert!(oaep::encode(
        &Sha256Pure,
        &Sha256Pure,
        b"",
        &[0; 35],
        &rng(),
        &mut [0u8; 100]
    )
    .is_err());
    assert!(oaep::decode(&Sha256Pure, &Sha256Pure, b"", &[0u8; 65], &mut [0u8; 65]).is_err());
}

#[test]
fn pss_round_trip_and_rejections() {
    let m_hash = sha256(b"to be signed");
    // Modulus sizes around a byte boundary (EM one byte shorter, or a partial top byte).
    for mod_bits in [769usize, 775, 776] {
        let k = mod_bits.div_ceil(8);
        for policy in [SaltLen::Digest, SaltLen::Max, SaltLen::Fixed(0)] {
            let mut em = vec![0u8; k];
            let s = pss::encode(
                &Sha256Pure,
                &Sha256Pure,
                &m_hash,
                policy,
                mod_bits,
                &rng(),
                &mut em,
            )
            .unwrap();
            assert_eq!(
                pss::verify(
                    &Sha256Pure,
                    &Sha256Pure,
                    &m_hash,
                    SaltLen::Auto,
                    mod_bits,
                    &em
                ),
                Ok(s)
            );
            assert_eq!(
                pss::verify(
                    &Sha256Pure,
                    &Sha256Pure,
                    &m_hash,
                    SaltLen::Fixed(s),
                    mod_bits,
                    &em
                ),
                Ok(s)
            );
            assert!(pss::verify(
                &Sha256Pure,
                &Sha256Pure,
                &m_hash,
                SaltLen::Fixed(s + 1),
                mod_bits,
                &em
            )
            .is_err());
            let mut bad = em.clone();
            bad[k / 2] ^= 0x10;
            assert!(pss::verify(
                &Sha256Pure,
                &Sha256Pure,
                &m_hash,
                SaltLen::Auto,
                mod_bits,
                &bad
            )
            .is_err());
        }
    }
}

#[test]
fn x931_round_trip() {
    let digest = sha256(b"x931");
    // 35: the 0x6A form; 37: one 0xBB (k = 36 encodes 6B BA with no 0xBB, which the
    // decoder refuses as OpenSSL does).
    for k in [35usize, 37, 64] {
        let mut em = vec![0u8; k];
        x931::encode_signature(DigestId::Sha256, &digest, &mut em).unwrap();
        x931::verify_signature(DigestId::Sha256, &digest, &em).unwrap();
        let data = x931::unpad(&em).unwrap();
        assert_eq!(&data[..32], digest);
        let mut bad = em.clone();
        bad[k - 1] = 0xCD;
        assert!(x931::unpad(&bad).is_err());
    }
    assert!(x931::encode_signature(DigestId::Sha256, &digest, &mut [0u8; 33]).is_err());
}
