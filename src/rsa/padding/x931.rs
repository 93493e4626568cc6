//! ANSI X9.31 signature padding as OpenSSL implements it.
//!
//! Block layout (length k): `0x6B 0xBB… 0xBA || data || 0xCC`, or `0x6A || data || 0xCC`
//! when there is no room for padding. For signatures `data` is `hash || hash-id`
//! (see [`DigestId::x931_hash_id`]). The RSA layer (not this module) is responsible for
//! X9.31's "min(s, n - s)" on signing and the "12 mod 16" fix-up on verification.

use super::{ct, DigestId};
use crate::error::{KaeError, KaeResult};

/// Pads `data` into `em` (length k).
pub fn encode(data: &[u8], em: &mut [u8]) -> KaeResult<()> {
    let k = em.len();
    if k < 2 || data.len() > k - 2 {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    let pad = k - data.len() - 2; // bytes between the header nibble and the data, inclusive of 0xBA
    let mut p = 0;
    if pad == 0 {
        em[0] = 0x6A;
        p = 1;
    } else {
        em[0] = 0x6B;
        p += 1;
        em[p..p + pad - 1].fill(0xBB);
        p += pad - 1;
        em[p] = 0xBA;
        p += 1;
    }
    em[p..p + data.len()].copy_from_slice(data);
    em[k - 1] = 0xCC;
    Ok(())
}

/// Strips X9.31 padding from a public block and returns the data (hash || hash-id for
/// signatures). Errors: `InvalidHeader`, `PaddingCheckFailed`, `InvalidTrailer`.
pub fn unpad(em: &[u8]) -> KaeResult<&[u8]> {
    let k = em.len();
    if k < 2 {
        return Err(KaeError::InvalidLength);
    }
    if em[k - 1] != 0xCC {
        return Err(KaeError::InvalidTrailer);
    }
    let data_start = match em[0] {
        0x6A => 1,
        0x6B => {
            let fill = em[1..k - 1].iter().take_while(|&&b| b == 0xBB).count();
            // At least one 0xBB (as OpenSSL requires), then 0xBA.
            if fill == 0 || 1 + fill >= k - 1 || em[1 + fill] != 0xBA {
                return Err(KaeError::PaddingCheckFailed);
            }
            fill + 2
        }
        _ => return Err(KaeError::InvalidHeader),
    };
    Ok(&em[data_start..k - 1])
}

/// Like [`unpad`], copying the data into `out`; returns its length.
pub fn decode(em: &[u8], out: &mut [u8]) -> KaeResult<usize> {
    let data = unpad(em)?;
    if data.len() > out.len() {
        return Err(KaeError::BufferTooSmall);
    }
    out[..data.len()].copy_from_slice(data);
    Ok(data.len())
}

/// Encodes a digest for an X9.31 signature: pads `digest || hash-id`.
pub fn encode_signature(id: DigestId, digest: &[u8], em: &mut [u8]) -> KaeResult<()> {
    let hid = id.x931_hash_id().ok_or(KaeError::DigestNotAllowed)?;
    if digest.len() != id.output_len() {
        return Err(KaeError::InvalidDigestLength);
    }
    let mut data = Vec::with_capacity(digest.len() + 1);
    data.extend_from_slice(digest);
    data.push(hid);
    encode(&data, em).map_err(|_| KaeError::DigestTooBigForKey)
}

/// Verifies a recovered X9.31 block against `digest`.
pub fn verify_signature(id: DigestId, digest: &[u8], em: &[u8]) -> KaeResult<()> {
    let hid = id.x931_hash_id().ok_or(KaeError::DigestNotAllowed)?;
    let data = unpad(em)?;
    let Some((&got_id, got_digest)) = data.split_last() else {
        return Err(KaeError::InvalidDigestLength);
    };
    if got_id != hid {
        return Err(KaeError::DigestMismatch);
    }
    if got_digest.len() != digest.len() || digest.len() != id.output_len() {
        return Err(KaeError::InvalidDigestLength);
    }
    if !ct::declassify(ct::bytes_eq(got_digest, digest)) {
        return Err(KaeError::BadSignature);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::padding::testutil::*;
    use openssl::bn::BigNum;
    use openssl::rsa::Padding;

    #[test]
    fn layout_known_answers() {
        let mut em = [0u8; 8];
        encode(&[1, 2, 3], &mut em).unwrap();
        assert_eq!(em, [0x6B, 0xBB, 0xBB, 0xBA, 1, 2, 3, 0xCC]);
        assert_eq!(unpad(&em).unwrap(), &[1, 2, 3]);
        let mut em = [0u8; 5];
        encode(&[1, 2, 3], &mut em).unwrap();
        assert_eq!(em, [0x6A, 1, 2, 3, 0xCC]);
        assert_eq!(unpad(&em).unwrap(), &[1, 2, 3]);
        // One byte of room: header and 0xBA with no 0xBB (OpenSSL's decoder rejects this form).
        let mut em = [0u8; 6];
        encode(&[1, 2, 3], &mut em).unwrap();
        assert_eq!(em, [0x6B, 0xBA, 1, 2, 3, 0xCC]);
        assert_eq!(unpad(&em), Err(KaeError::PaddingCheckFailed));
        assert_eq!(
            encode(&[1, 2, 3, 4], &mut [0u8; 5]),
            Err(KaeError::DataTooLargeForKeySize)
        );
        let mut out = [0u8; 2];
        assert_eq!(
            decode(&[0x6A, 1, 2, 3, 0xCC], &mut out),
            Err(KaeError::BufferTooSmall)
        );
        let mut out = [0u8; 3];
        assert_eq!(decode(&[0x6A, 1, 2, 3, 0xCC], &mut out), Ok(3));
    }

    #[test]
    fn malformed_blocks() {
        let mut em = [0u8; 16];
        encode(&[9u8; 6], &mut em).unwrap();
        let mut e = em;
        e[0] = 0x6C;
        assert_eq!(unpad(&e), Err(KaeError::InvalidHeader));
        let mut e = em;
        e[15] = 0xCD;
        assert_eq!(unpad(&e), Err(KaeError::InvalidTrailer));
        let mut e = em;
        e[2] = 0xBC;
        assert_eq!(unpad(&e), Err(KaeError::PaddingCheckFailed));
        // No 0xBA at all.
        let mut e = [0xBBu8; 16];
        e[0] = 0x6B;
        e[15] = 0xCC;
        assert_eq!(unpad(&e), Err(KaeError::PaddingCheckFailed));
        assert_eq!(unpad(&[0x6A]), Err(KaeError::InvalidLength));
        assert_eq!(unpad(&[0x6A, 0xCC]).unwrap(), &[] as &[u8]);
    }

    /// Undo X9.31's "min(s, n - s)": the public result must be 12 mod 16.
    fn x931_public(key: &openssl::rsa::Rsa<openssl::pkey::Private>, sig: &[u8]) -> Vec<u8> {
        let k = key.size() as usize;
        let r = raw_public(key, sig);
        if r[k - 1] & 0x0F == 12 {
            r
        } else {
            let mut t = BigNum::new().unwrap();
            t.checked_sub(key.n(), &bn(&r)).unwrap();
            t.to_vec_padded(k as i32).unwrap()
        }
    }

    #[test]
    fn cross_check_with_openssl() {
        let key = gen_key(1024);
        let k = key.size() as usize;
        for id in [
            DigestId::Sha1,
            DigestId::Sha256,
            DigestId::Sha384,
            DigestId::Sha512,
            DigestId::Ripemd160,
        ] {
            let dg = digest(id, b"x9.31 message");
            // openssl pads (RSA_X931_PADDING = 5) → we verify.
            let mut data = dg.clone();
            data.push(id.x931_hash_id().unwrap());
            let mut sig = vec![0u8; k];
            let n = key
                .private_encrypt(&data, &mut sig, Padding::from_raw(5))
                .unwrap();
            assert_eq!(n, k);
            let em = x931_public(&key, &sig);
            verify_signature(id, &dg, &em).unwrap();
            // Exact block equality with our encoder.
            let mut ours = vec![0u8; k];
            encode_signature(id, &dg, &mut ours).unwrap();
            assert_eq!(ours, em, "{id:?}");
            // Ours → openssl's X9.31 check.
            let sig = raw_private(&key, &ours);
            let mut out = vec![0u8; k];
            let n = key
                .public_decrypt(&sig, &mut out, Padding::from_raw(5))
                .unwrap();
            assert_eq!(&out[..n], &data[..]);
            // Wrong digest / wrong id.
            let mut bad = dg.clone();
            bad[3] ^= 4;
            assert_eq!(verify_signature(id, &bad, &em), Err(KaeError::BadSignature));
            let other = if id == DigestId::Sha256 {
                DigestId::Sha1
            } else {
                DigestId::Sha256
            };
            assert!(verify_signature(other, &digest(other, b"x9.31 message"), &em).is_err());
        }
    }

    #[test]
    fn signature_helpers_errors() {
        let mut em = [0u8; 64];
        assert_eq!(
            encode_signature(DigestId::Sha224, &[0u8; 28], &mut em),
            Err(KaeError::DigestNotAllowed)
        );
        assert_eq!(
            encode_signature(DigestId::Sha256, &[0u8; 31], &mut em),
            Err(KaeError::InvalidDigestLength)
        );
        assert_eq!(
            encode_signature(DigestId::Sha512, &[0u8; 64], &mut em),
            Err(KaeError::DigestTooBigForKey)
        );
        encode_signature(DigestId::Sha256, &[5u8; 32], &mut em).unwrap();
        assert_eq!(verify_signature(DigestId::Sha256, &[5u8; 32], &em), Ok(()));
        assert_eq!(
            verify_signature(DigestId::Sha1, &[5u8; 20], &em),
            Err(KaeError::DigestMismatch)
        );
        assert_eq!(
            verify_signature(DigestId::Md5, &[5u8; 16], &em),
            Err(KaeError::DigestNotAllowed)
        );
        assert_eq!(
            verify_signature(DigestId::Sha256, &[5u8; 31], &em),
            Err(KaeError::InvalidDigestLength)
        );
        let mut e = [0u8; 64];
        encode(&[0x34], &mut e).unwrap();
        assert_eq!(
            verify_signature(DigestId::Sha256, &[5u8; 32], &e),
            Err(KaeError::InvalidDigestLength)
        );
        encode(&[], &mut e).unwrap();
        assert_eq!(
            verify_signature(DigestId::Sha256, &[5u8; 32], &e),
            Err(KaeError::InvalidDigestLength)
        );
    }
}
