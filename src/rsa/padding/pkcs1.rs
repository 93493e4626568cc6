//! PKCS#1 v1.5 padding (RFC 8017 §7.2 RSAES-PKCS1-v1_5 and §9.2 EMSA-PKCS1-v1_5).
//!
//! * Block type 1 (signatures): [`encode_type1`], [`decode_type1`], plus the DigestInfo
//!   helpers [`encode_signature`], [`verify_signature`], [`strip_digest_info`].
//! * Block type 2 (encryption): [`encode_type2`], the constant-time [`decode_type2`],
//!   implicit rejection ([`derive_kdk`], [`decode_type2_implicit`],
//!   [`decode_type2_implicit_rejection`]) and the TLS premaster decode
//!   ([`decode_tls_premaster`]).
//!
//! All decoders take the decrypted block `em` at exactly the modulus length `k`.

use zeroize::{Zeroize, Zeroizing};

use super::ct;
use super::{DigestId, Hasher, RandomSource};
use crate::error::{KaeError, KaeResult};

/// Minimum overhead of PKCS#1 v1.5: 0x00, block type, 8 padding bytes, 0x00.
pub const PKCS1_PADDING_SIZE: usize = 11;
/// Length of a TLS premaster secret.
pub const TLS_PREMASTER_LEN: usize = 48;

/// Largest message that fits a `k`-byte block.
pub fn max_message_len(k: usize) -> usize {
    k.saturating_sub(PKCS1_PADDING_SIZE)
}

// --------------------------------------------------------------------------------------
// Block type 1
// --------------------------------------------------------------------------------------

/// EM = 0x00 || 0x01 || 0xFF… || 0x00 || msg, filling all of `em` (length k).
pub fn encode_type1(msg: &[u8], em: &mut [u8]) -> KaeResult<()> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE || msg.len() > k - PKCS1_PADDING_SIZE {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    let ps_end = k - msg.len() - 1;
    em[0] = 0x00;
    em[1] = 0x01;
    em[2..ps_end].fill(0xFF);
    em[ps_end] = 0x00;
    em[ps_end + 1..].copy_from_slice(msg);
    Ok(())
}

/// Strips block-type-1 padding from a public (signature) block and returns the payload.
/// Strict: leading 0x00, 0x01, at least 8 bytes of 0xFF, then 0x00.
/// Not constant time: the block is public.
pub fn unpad_type1(em: &[u8]) -> KaeResult<&[u8]> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE {
        return Err(KaeError::InvalidLength);
    }
    if em[0] != 0x00 || em[1] != 0x01 {
        return Err(KaeError::InvalidHeader);
    }
    let ps_len = em[2..].iter().take_while(|&&b| b == 0xFF).count();
    let sep = 2 + ps_len;
    if sep >= k || em[sep] != 0x00 {
        // Either a byte other than 0xFF/0x00 in PS or no separator at all.
        return Err(KaeError::PaddingCheckFailed);
    }
    if ps_len < 8 {
        return Err(KaeError::PaddingCheckFailed);
    }
    Ok(&em[sep + 1..])
}

/// Like [`unpad_type1`], copying the payload into `out`; returns its length.
pub fn decode_type1(em: &[u8], out: &mut [u8]) -> KaeResult<usize> {
    let payload = unpad_type1(em)?;
    if payload.len() > out.len() {
        return Err(KaeError::BufferTooSmall);
    }
    out[..payload.len()].copy_from_slice(payload);
    Ok(payload.len())
}

/// The bytes EMSA-PKCS1-v1_5 signs for `digest`: DigestInfo, or the bare 36 bytes for
/// MD5-SHA1.
pub fn digest_info(id: DigestId, digest: &[u8]) -> KaeResult<Vec<u8>> {
    if digest.len() != id.output_len() {
        return Err(KaeError::InvalidDigestLength);
    }
    let prefix = id.digest_info_prefix().unwrap_or(&[]);
    let mut t = Vec::with_capacity(prefix.len() + digest.len());
    t.extend_from_slice(prefix);
    t.extend_from_slice(digest);
    Ok(t)
}

/// EMSA-PKCS1-v1_5 encoding of `digest` into `em` (length k).
pub fn encode_signature(id: DigestId, digest: &[u8], em: &mut [u8]) -> KaeResult<()> {
    let t = digest_info(id, digest)?;
    encode_type1(&t, em).map_err(|_| KaeError::DigestTooBigForKey)
}

/// Verifies a recovered block `em` (length k) against `digest`, by re-encoding and
/// comparing the whole block (so any malleability in the DigestInfo is rejected).
pub fn verify_signature(id: DigestId, digest: &[u8], em: &[u8]) -> KaeResult<()> {
    let mut expect = Zeroizing::new(vec![0u8; em.len()]);
    encode_signature(id, digest, &mut expect)?;
    if ct::declassify(ct::bytes_eq(&expect, em)) {
        Ok(())
    } else {
        Err(KaeError::BadSignature)
    }
}

/// Checks that `payload` (a type-1 payload) is a DigestInfo for `id` and returns the digest.
/// For MD5-SHA1 the payload must be exactly the 36-byte digest.
pub fn strip_digest_info(id: DigestId, payload: &[u8]) -> KaeResult<&[u8]> {
    let prefix = id.digest_info_prefix().unwrap_or(&[]);
    if payload.len() != prefix.len() + id.output_len() {
        return Err(KaeError::InvalidDigestLength);
    }
    if &payload[..prefix.len()] != prefix {
        return Err(KaeError::BadSignature);
    }
    Ok(&payload[prefix.len()..])
}

// --------------------------------------------------------------------------------------
// Block type 2
// --------------------------------------------------------------------------------------

/// EM = 0x00 || 0x02 || PS (nonzero random) || 0x00 || msg, filling all of `em` (length k).
pub fn encode_type2(msg: &[u8], em: &mut [u8], rng: &dyn RandomSource) -> KaeResult<()> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE || msg.len() > k - PKCS1_PADDING_SIZE {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    let ps_end = k - msg.len() - 1;
    em[0] = 0x00;
    em[1] = 0x02;
    {
        let ps = &mut em[2..ps_end];
        rng.fill(ps)?;
        // Replace zero bytes by fresh random bytes until none is left.
        let mut spare = Zeroizing::new([0u8; 64]);
        let mut spare_pos = spare.len();
        let mut budget = 1usize << 16; // guards against a broken RNG that only yields zeros
        for b in ps.iter_mut() {
            while *b == 0 {
                if spare_pos == spare.len() {
                    if budget == 0 {
                        return Err(KaeError::RandomFailure);
                    }
                    budget -= 1;
                    rng.fill(&mut spare[..])?;
                    spare_pos = 0;
                }
                *b = spare[spare_pos];
                spare_pos += 1;
            }
        }
    }
    em[ps_end] = 0x00;
    em[ps_end + 1..].copy_from_slice(msg);
    Ok(())
}

/// Finds the message in a type-2 block in constant time.
/// Returns (good mask, index of the first message byte). When good is false the index is
/// meaningless (but within 1..=k).
fn scan_type2(em: &[u8]) -> (usize, usize) {
    let k = em.len();
    let mut good = ct::is_zero_u8(em[0]) & ct::eq_u8(em[1], 2);
    let mut zero_index = 0usize;
    let mut found = ct::FALSE;
    for (i, &b) in em.iter().enumerate().skip(2) {
        let is0 = ct::is_zero_u8(b);
        zero_index = ct::select(!found & is0, i, zero_index);
        found |= is0;
    }
    // PS is at least 8 bytes: the separator is at index >= 10 (and found, since the
    // initial zero_index of 0 fails this test).
    good &= ct::ge(zero_index, 2 + 8);
    let msg_index = zero_index + 1;
    debug_assert!(msg_index <= k);
    (good, msg_index)
}

/// Constant-time RSAES-PKCS1-v1_5 decode without implicit rejection.
///
/// `em` is the decrypted block (length k). On success the message is in `out[..len]` and
/// `Ok(len)` is returned; on any padding error (including `out` too small for the
/// message) the single error [`KaeError::PaddingCheckFailed`] is returned and `out` is
/// left unchanged. Timing and memory access pattern depend only on `k` and `out.len()`.
pub fn decode_type2(em: &[u8], out: &mut [u8]) -> KaeResult<usize> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE {
        return Err(KaeError::PaddingCheckFailed);
    }
    let (mut good, msg_index) = scan_type2(em);
    let mlen = k - msg_index;
    good &= ct::ge(out.len(), mlen);

    let mut buf = Zeroizing::new(em.to_vec());
    let start = PKCS1_PADDING_SIZE;
    let max = k - start;
    // Shift the message left so it starts at `start`, by (max - mlen) positions, doing
    // one conditional pass per bit of the shift so the access pattern is fixed.
    let shift = max.wrapping_sub(mlen);
    let mut step = 1usize;
    while step < max {
        let m = !ct::is_zero(step & shift);
        for i in start..k - step {
            buf[i] = ct::select_u8(m, buf[i + step], buf[i]);
        }
        step <<= 1;
    }
    let tlen = out.len().min(max);
    for (i, o) in out[..tlen].iter_mut().enumerate() {
        let m = good & ct::lt(i, mlen);
        *o = ct::select_u8(m, buf[start + i], *o);
    }
    if ct::declassify(good) {
        Ok(mlen)
    } else {
        Err(KaeError::PaddingCheckFailed)
    }
}

// --------------------------------------------------------------------------------------
// Implicit rejection (draft-irtf-cfrg-rsa-guidance, as OpenSSL >= 3.2 implements it)
// --------------------------------------------------------------------------------------

/// Length of the key-derivation key.
pub const KDK_LEN: usize = 32;
/// Number of 16-bit candidate lengths drawn for the synthetic message.
const LEN_CANDIDATES: usize = 128;

fn require_sha256(h: &dyn Hasher) -> KaeResult<()> {
    if h.id() != DigestId::Sha256 || h.output_len() != 32 || h.block_len() != 64 {
        return Err(KaeError::InvalidDigest);
    }
    Ok(())
}

/// KDK = HMAC-SHA256(key = SHA256(d), msg = ciphertext), with the private exponent `d`
/// and the `ciphertext` both left-padded with zeros to the modulus length `k`.
pub fn derive_kdk(
    sha256: &dyn Hasher,
    d: &[u8],
    ciphertext: &[u8],
    k: usize,
) -> KaeResult<Zeroizing<[u8; KDK_LEN]>> {
    require_sha256(sha256)?;
    // Drop leading zero bytes of d beyond the modulus length (not secret: a length).
    let mut d = d;
    while d.len() > k && d[0] == 0 {
        d = &d[1..];
    }
    if d.len() > k {
        return Err(KaeError::InvalidKey);
    }
    if ciphertext.len() > k {
        return Err(KaeError::DataTooLargeForModulus);
    }
    let zeros = vec![0u8; k];
    let mut d_hash = Zeroizing::new([0u8; 32]);
    sha256.hash(&[&zeros[..k - d.len()], d], &mut d_hash[..])?;
    let mut kdk = Zeroizing::new([0u8; KDK_LEN]);
    super::hmac(
        sha256,
        &d_hash[..],
        &[&zeros[..k - ciphertext.len()], ciphertext],
        &mut kdk[..],
    )?;
    Ok(kdk)
}

/// The implicit-rejection PRF: output block i (32 bytes each, last one truncated) is
/// HMAC-SHA256(kdk, be16(i) || label || be16(8 * out.len())).
pub fn rsa_prf(sha256: &dyn Hasher, kdk: &[u8], label: &[u8], out: &mut [u8]) -> KaeResult<()> {
    require_sha256(sha256)?;
    let bits = out
        .len()
        .checked_mul(8)
        .and_then(|b| u16::try_from(b).ok())
        .ok_or(KaeError::InvalidLength)?;
    let bits = bits.to_be_bytes();
    let mut block = Zeroizing::new([0u8; 32]);
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let iter = u16::try_from(i)
            .map_err(|_| KaeError::InvalidLength)?
            .to_be_bytes();
        super::hmac(sha256, kdk, &[&iter, label, &bits], &mut block[..])?;
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
    Ok(())
}

/// Constant-time RSAES-PKCS1-v1_5 decode with implicit rejection.
///
/// `em` is the decrypted block (length k ≥ 11), `kdk` comes from [`derive_kdk`]. When the
/// padding is valid and the message fits in `out`, the message is written to `out` and
/// its length returned. Otherwise a synthetic message, derived deterministically from
/// `kdk` (that is, from the key and the ciphertext), is returned instead — with no
/// observable difference. Errors are only returned for invalid arguments, never for
/// invalid padding.
pub fn decode_type2_implicit(
    sha256: &dyn Hasher,
    kdk: &[u8; KDK_LEN],
    em: &[u8],
    out: &mut [u8],
) -> KaeResult<usize> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE || out.is_empty() {
        return Err(KaeError::InvalidArgument);
    }

    // Synthetic message, indexed like `em`: its last `synth_len` bytes are used.
    let mut synthetic = Zeroizing::new(vec![0u8; k]);
    rsa_prf(sha256, kdk, b"message", &mut synthetic)?;

    // Choose the synthetic length: the last of 128 masked candidates below the maximum.
    let mut candidates = Zeroizing::new([0u8; LEN_CANDIDATES * 2]);
    rsa_prf(sha256, kdk, b"length", &mut candidates[..])?;
    let max_sep_offset = k - 2 - 8;
    let mut len_mask = max_sep_offset;
    len_mask |= len_mask >> 1;
    len_mask |= len_mask >> 2;
    len_mask |= len_mask >> 4;
    len_mask |= len_mask >> 8;
    len_mask |= len_mask >> 16;
    let mut synth_len = 0usize;
    for pair in candidates.chunks_exact(2) {
        let cand = ((usize::from(pair[0]) << 8) | usize::from(pair[1])) & len_mask;
        synth_len = ct::select(ct::lt(cand, max_sep_offset), cand, synth_len);
    }
    let synth_index = k - synth_len;

    // Check the real padding.
    let (mut good, msg_index) = scan_type2(em);
    good &= ct::ge(out.len(), k - msg_index);
    // Declassified: k - msg_index is the length handed back to the caller, so it is public,
    // and it reveals nothing about `good` (the synthetic length is pseudo-random, derived
    // from the key and the ciphertext). Both buffers are read on every step.
    let msg_index = crate::ffi::memcheck::public_usize(ct::select(good, msg_index, synth_index));

    let mut written = 0usize;
    for (o, i) in out.iter_mut().zip(msg_index..k) {
        *o = ct::select_u8(good, em[i], synthetic[i]);
        written += 1;
    }
    synth_len.zeroize();
    Ok(written)
}

/// Convenience: [`derive_kdk`] then [`decode_type2_implicit`].
/// `d` is the private exponent (big-endian), `ciphertext` the input of the decryption.
pub fn decode_type2_implicit_rejection(
    sha256: &dyn Hasher,
    d: &[u8],
    ciphertext: &[u8],
    em: &[u8],
    out: &mut [u8],
) -> KaeResult<usize> {
    let kdk = derive_kdk(sha256, d, ciphertext, em.len())?;
    decode_type2_implicit(sha256, &kdk, em, out)
}

// --------------------------------------------------------------------------------------
// TLS premaster secret (RFC 5246 §7.4.7.1)
// --------------------------------------------------------------------------------------

/// Decodes an RSA-encrypted TLS premaster secret in constant time.
///
/// `em` is the decrypted block (length k ≥ 11 + 48). The result written to `out` is the
/// 48-byte premaster from the block if the block is a valid type-2 block with a 48-byte
/// message whose first two bytes equal `client_version` — or, when `negotiated_version`
/// is given (and nonzero), equal that version instead (the rollback-bug workaround) —
/// and otherwise `random_premaster`, which the caller generated beforehand. Padding
/// problems are never reported as errors; the only error is an `em` that is too short.
pub fn decode_tls_premaster(
    em: &[u8],
    client_version: u16,
    negotiated_version: Option<u16>,
    random_premaster: &[u8; TLS_PREMASTER_LEN],
    out: &mut [u8; TLS_PREMASTER_LEN],
) -> KaeResult<()> {
    let k = em.len();
    if k < PKCS1_PADDING_SIZE + TLS_PREMASTER_LEN {
        return Err(KaeError::InvalidLength);
    }
    let sep = k - TLS_PREMASTER_LEN - 1;
    let mut good = ct::is_zero_u8(em[0]) & ct::eq_u8(em[1], 2);
    for &b in &em[2..sep] {
        good &= !ct::is_zero_u8(b);
    }
    good &= ct::is_zero_u8(em[sep]);

    let pm = &em[sep + 1..];
    let [cv_hi, cv_lo] = client_version.to_be_bytes();
    let mut version_good = ct::eq_u8(pm[0], cv_hi) & ct::eq_u8(pm[1], cv_lo);
    if let Some(alt) = negotiated_version.filter(|&v| v != 0) {
        let [a_hi, a_lo] = alt.to_be_bytes();
        version_good |= ct::eq_u8(pm[0], a_hi) & ct::eq_u8(pm[1], a_lo);
    }
    good &= version_good;

    for ((o, &real), &fake) in out.iter_mut().zip(pm.iter()).zip(random_premaster.iter()) {
        *o = ct::select_u8(good, real, fake);
    }
    Ok(())
}

/// [`decode_tls_premaster`] drawing the fallback premaster from `rng` first (the draw
/// happens whatever the block contains).
pub fn decode_tls_premaster_rng(
    em: &[u8],
    client_version: u16,
    negotiated_version: Option<u16>,
    rng: &dyn RandomSource,
    out: &mut [u8; TLS_PREMASTER_LEN],
) -> KaeResult<()> {
    if em.len() < PKCS1_PADDING_SIZE + TLS_PREMASTER_LEN {
        return Err(KaeError::InvalidLength);
    }
    let mut fallback = Zeroizing::new([0u8; TLS_PREMASTER_LEN]);
    rng.fill(&mut fallback[..])?;
    decode_tls_premaster(em, client_version, negotiated_version, &fallback, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::padding::testutil::*;
    use openssl::hash::MessageDigest;
    use openssl::pkey::PKey;
    use openssl::rsa::{Padding, Rsa};
    use openssl::sign::{Signer, Verifier};

    fn sha256() -> OsslHasher {
        hasher(DigestId::Sha256)
    }

    // ---------------- type 1 ----------------

    #[test]
    fn type1_roundtrip_and_layout() {
        let mut em = [0u8; 64];
        encode_type1(b"hello", &mut em).unwrap();
        assert_eq!(&em[..2], &[0, 1]);
        assert!(em[2..58].iter().all(|&b| b == 0xFF));
        assert_eq!(em[58], 0);
        assert_eq!(&em[59..], b"hello");
        assert_eq!(unpad_type1(&em).unwrap(), b"hello");
        let mut out = [0u8; 5];
        assert_eq!(decode_type1(&em, &mut out), Ok(5));
        assert_eq!(&out, b"hello");
        let mut small = [0u8; 4];
        assert_eq!(decode_type1(&em, &mut small), Err(KaeError::BufferTooSmall));
        // Max size message, and one too many.
        let msg = [7u8; 53];
        encode_type1(&msg, &mut em).unwrap();
        assert_eq!(unpad_type1(&em).unwrap(), &msg[..]);
        assert_eq!(
            encode_type1(&[7u8; 54], &mut em),
            Err(KaeError::DataTooLargeForKeySize)
        );
        assert_eq!(
            encode_type1(b"", &mut [0u8; 10]),
            Err(KaeError::DataTooLargeForKeySize)
        );
        // Empty message is valid.
        encode_type1(b"", &mut em).unwrap();
        assert_eq!(unpad_type1(&em).unwrap(), b"");
    }

    #[test]
    fn type1_rejects_malformed() {
        let mut good = [0u8; 64];
        encode_type1(b"payload", &mut good).unwrap();
        let bad = |f: &dyn Fn(&mut [u8; 64])| {
            let mut e = good;
            f(&mut e);
            unpad_type1(&e).map(|p| p.to_vec())
        };
        assert_eq!(bad(&|e| e[0] = 1), Err(KaeError::InvalidHeader));
        assert_eq!(bad(&|e| e[1] = 2), Err(KaeError::InvalidHeader));
        assert_eq!(bad(&|e| e[5] = 0xFE), Err(KaeError::PaddingCheckFailed));
        // Separator too early: only 7 bytes of 0xFF.
        assert_eq!(bad(&|e| e[9] = 0), Err(KaeError::PaddingCheckFailed));
        // Exactly 8 bytes of 0xFF is fine.
        assert!(bad(&|e| e[10] = 0).is_ok());
        // No separator.
        assert_eq!(
            unpad_type1(&[0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
            Err(KaeError::PaddingCheckFailed)
        );
        assert_eq!(unpad_type1(&[0, 1, 0xFF]), Err(KaeError::InvalidLength));
    }

    #[test]
    fn signature_cross_check_with_openssl() {
        let key = gen_key(1024);
        let pkey = PKey::from_rsa(key.clone()).unwrap();
        let k = key.size() as usize;
        for &id in DigestId::ALL {
            if id == DigestId::Sm3 {
                continue; // OpenSSL 3.0's RSA signature provider refuses SM3
            }
            let msg = random_bytes(100);
            let dgst = digest(id, &msg);
            // Ours → openssl verifies.
            let mut em = vec![0u8; k];
            encode_signature(id, &dgst, &mut em).unwrap();
            let sig = raw_private(&key, &em);
            let mut v = Verifier::new(md(id), &pkey).unwrap();
            v.set_rsa_padding(Padding::PKCS1).unwrap();
            v.update(&msg).unwrap();
            assert!(v.verify(&sig).unwrap(), "{id:?}");
            // openssl signs → we verify.
            let mut s = Signer::new(md(id), &pkey).unwrap();
            s.set_rsa_padding(Padding::PKCS1).unwrap();
            s.update(&msg).unwrap();
            let sig = s.sign_to_vec().unwrap();
            let em = raw_public(&key, &sig);
            verify_signature(id, &dgst, &em).unwrap();
            let payload = unpad_type1(&em).unwrap();
            assert_eq!(strip_digest_info(id, payload).unwrap(), &dgst[..]);
            // Wrong digest fails.
            let mut other = dgst.clone();
            other[0] ^= 1;
            assert_eq!(
                verify_signature(id, &other, &em),
                Err(KaeError::BadSignature)
            );
            // Another digest's DigestInfo fails.
            let wrong = if id == DigestId::Sha256 {
                DigestId::Sha3_256
            } else {
                DigestId::Sha256
            };
            if wrong.output_len() == dgst.len() {
                assert!(verify_signature(wrong, &dgst, &em).is_err());
                assert!(strip_digest_info(wrong, payload).is_err());
            }
        }
    }

    #[test]
    fn signature_error_paths() {
        let mut em = [0u8; 64];
        assert_eq!(
            encode_signature(DigestId::Sha256, &[0u8; 31], &mut em),
            Err(KaeError::InvalidDigestLength)
        );
        assert_eq!(
            encode_signature(DigestId::Sha512, &[0u8; 64], &mut em),
            Err(KaeError::DigestTooBigForKey)
        );
        encode_signature(DigestId::Sha256, &[1u8; 32], &mut em).unwrap();
        let payload = unpad_type1(&em).unwrap();
        assert_eq!(
            strip_digest_info(DigestId::Sha256, &payload[1..]),
            Err(KaeError::InvalidDigestLength)
        );
        let mut tampered = payload.to_vec();
        tampered[3] ^= 1;
        assert_eq!(
            strip_digest_info(DigestId::Sha256, &tampered),
            Err(KaeError::BadSignature)
        );
        // MD5-SHA1 is bare.
        encode_signature(DigestId::Md5Sha1, &[9u8; 36], &mut em).unwrap();
        assert_eq!(unpad_type1(&em).unwrap(), &[9u8; 36]);
        assert_eq!(
            strip_digest_info(DigestId::Md5Sha1, &[9u8; 36]).unwrap(),
            &[9u8; 36]
        );
    }

    // ---------------- type 2 ----------------

    #[test]
    fn type2_encode_layout_and_nonzero_ps() {
        // An RNG that produces many zeros must still give a nonzero PS.
        let rng = FixedRng {
            bytes: vec![0, 0, 5, 0, 0, 0, 9, 0],
            pos: Default::default(),
        };
        let mut em = [0u8; 64];
        encode_type2(b"msg", &mut em, &rng).unwrap();
        assert_eq!(&em[..2], &[0, 2]);
        assert!(em[2..60].iter().all(|&b| b != 0));
        assert_eq!(em[60], 0);
        assert_eq!(&em[61..], b"msg");
        assert_eq!(
            encode_type2(&[1u8; 54], &mut em, &OsslRng),
            Err(KaeError::DataTooLargeForKeySize)
        );
        assert_eq!(
            encode_type2(b"x", &mut em, &FailingRng),
            Err(KaeError::RandomFailure)
        );
        let zeros = FixedRng {
            bytes: vec![0],
            pos: Default::default(),
        };
        assert_eq!(
            encode_type2(b"x", &mut em, &zeros),
            Err(KaeError::RandomFailure)
        );
    }

    #[test]
    fn type2_cross_check_with_openssl() {
        for bits in [1024u32, 1032, 2048] {
            let key = gen_key(bits);
            let k = key.size() as usize;
            for _ in 0..20 {
                let len = random_below(k - 10);
                let msg = random_bytes(len);
                // Ours → openssl decrypts.
                let mut em = vec![0u8; k];
                encode_type2(&msg, &mut em, &OsslRng).unwrap();
                let ct_ = raw_public(&key, &em);
                let mut out = vec![0u8; k];
                let n = key.private_decrypt(&ct_, &mut out, Padding::PKCS1).unwrap();
                assert_eq!(&out[..n], &msg[..]);
                // openssl encrypts → we decode (both modes).
                let mut c = vec![0u8; k];
                key.public_encrypt(&msg, &mut c, Padding::PKCS1).unwrap();
                let em = raw_private(&key, &c);
                let mut out = vec![0xEEu8; k];
                assert_eq!(decode_type2(&em, &mut out), Ok(len));
                assert_eq!(&out[..len], &msg[..]);
                let mut out2 = vec![0u8; k];
                let n =
                    decode_type2_implicit_rejection(&sha256(), &d_bytes(&key), &c, &em, &mut out2)
                        .unwrap();
                assert_eq!(&out2[..n], &msg[..]);
            }
        }
    }

    fn valid_block(k: usize, msg: &[u8]) -> Vec<u8> {
        let mut em = vec![0u8; k];
        encode_type2(msg, &mut em, &OsslRng).unwrap();
        em
    }

    #[test]
    fn type2_decode_all_lengths_and_errors() {
        let k = 64;
        for len in 0..=k - 11 {
            let msg = random_bytes(len);
            let em = valid_block(k, &msg);
            let mut out = vec![0xA5u8; k];
            assert_eq!(decode_type2(&em, &mut out), Ok(len), "len {len}");
            assert_eq!(&out[..len], &msg[..]);
            assert!(
                out[len..].iter().all(|&b| b == 0xA5),
                "bytes past the message untouched"
            );
            // Exactly-sized output works; one byte short fails without touching `out`.
            let mut exact = vec![0u8; len];
            assert_eq!(decode_type2(&em, &mut exact), Ok(len));
            assert_eq!(exact, msg);
            if len > 0 {
                let mut short = vec![0x11u8; len - 1];
                assert_eq!(
                    decode_type2(&em, &mut short),
                    Err(KaeError::PaddingCheckFailed)
                );
                assert!(short.iter().all(|&b| b == 0x11));
            }
        }
        let em = valid_block(k, b"hello");
        let check_bad = |e: Vec<u8>| {
            let mut out = vec![0x33u8; k];
            assert_eq!(
                decode_type2(&e, &mut out),
                Err(KaeError::PaddingCheckFailed)
            );
            assert!(out.iter().all(|&b| b == 0x33), "out untouched on error");
        };
        let mut e = em.clone();
        e[0] = 1;
        check_bad(e);
        let mut e = em.clone();
        e[1] = 1;
        check_bad(e);
        // Separator within the first 8 PS bytes.
        for pos in 2..10 {
            let mut e = em.clone();
            e[pos] = 0;
            check_bad(e);
        }
        // No separator at all.
        let mut e = em.clone();
        for b in e[2..].iter_mut() {
            if *b == 0 {
                *b = 1;
            }
        }
        check_bad(e);
        assert_eq!(
            decode_type2(&[0, 2, 1, 1, 1, 1, 1, 1, 1, 1], &mut [0u8; 10]),
            Err(KaeError::PaddingCheckFailed)
        );
        // Separator exactly after 8 PS bytes is valid.
        let mut e = vec![0u8; 20];
        e[1] = 2;
        e[2..10].fill(0x55);
        e[10] = 0;
        e[11..].fill(0x77);
        let mut out = [0u8; 20];
        assert_eq!(decode_type2(&e, &mut out), Ok(9));
        assert_eq!(&out[..9], &[0x77u8; 9]);
    }

    // ---------------- implicit rejection ----------------

    /// OpenSSL's RSA-2048-2 test key (evppkey_rsa_common.txt, Bleichenbacher workaround vectors).
    const RSA_2048_2: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAyMyDlxQJjaVsqiNkD5PciZfBY3KWj8Gwxt9RE8HJTosh5IrS
KX5lQZARtObY9ec7G3iyV0ADIdHva2AtTsjOjRQclJBetK0wZjmkkgZTS25/JgdC
Ppff/RM8iNchOZ3vvH6WzNy9fzquH+iScSv7SSmBfVEWZkQKH6y3ogj16hZZEK3Y
o/LUlyAjYMy2MgJPDQcWnBkY8xb3lLFDrvVOyHUipMApePlomYC/+/ZJwwfoGBm/
+IQJY41IvZS+FStZ/2SfoL1inQ/6GBPDq/S1a9PC6lRl3/oUWJKSqdiiStJr5+4F
EHQbY4LUPIPVv6QKRmE9BivkRVF9vK8MtOGnaQIDAQABAoIBABRVAQ4PLVh2Y6Zm
pv8czbvw7dgQBkbQKgI5IpCJksStOeVWWSlybvZQjDpxFY7wtv91HTnQdYC7LS8G
MhBELQYD/1DbvXs1/iybsZpHoa+FpMJJAeAsqLWLeRmyDt8yqs+/Ua20vEthubfp
aMqk1XD3DvGNgGMiiJPkfUOe/KeTJZvPLNEIo9hojN8HjnrHmZafIznSwfUiuWlo
RimpM7quwmgWJeq4T05W9ER+nYj7mhmc9xAj4OJXsURBszyE07xnyoAx0mEmGBA6
egpAhEJi912IkM1hblH5A1SI/W4Jnej/bWWk/xGCVIB8n1jS+7qLoVHcjGi+NJyX
eiBOBMECgYEA+PWta6gokxvqRZuKP23AQdI0gkCcJXHpY/MfdIYColY3GziD7UWe
z5cFJkWe3RbgVSL1pF2UdRsuwtrycsf4gWpSwA0YCAFxY02omdeXMiL1G5N2MFSG
lqn32MJKWUl8HvzUVc+5fuhtK200lyszL9owPwSZm062tcwLsz53Yd0CgYEAznou
O0mpC5YzChLcaCvfvfuujdbcA7YUeu+9V1dD8PbaTYYjUGG3Gv2crS00Al5WrIaw
93Q+s14ay8ojeJVCRGW3Bu0iF15XGMjHC2cD6o9rUQ+UW+SOWja7PDyRcytYnfwF
1y2AkDGURSvaITSGR+xylD8RqEbmL66+jrU2sP0CgYB2/hXxiuI5zfHfa0RcpLxr
uWjXiMIZM6T13NKAAz1nEgYswIpt8gTB+9C+RjB0Q+bdSmRWN1Qp1OA4yiVvrxyb
3pHGsXt2+BmV+RxIy768e/DjSUwINZ5OjNalh9e5bWIh/X4PtcVXXwgu5XdpeYBx
sru0oyI4FRtHMUu2VHkDEQKBgQCZiEiwVUmaEAnLx9KUs2sf/fICDm5zZAU+lN4a
AA3JNAWH9+JydvaM32CNdTtjN3sDtvQITSwCfEs4lgpiM7qe2XOLdvEOp1vkVgeL
9wH2fMaz8/3BhuZDNsdrNy6AkQ7ICwrcwj0C+5rhBIaigkgHW06n5W3fzziC5FFW
FHGikQKBgGQ790ZCn32DZnoGUwITR++/wF5jUfghqd67YODszeUAWtnp7DHlWPfp
LCkyjnRWnXzvfHTKvCs1XtQBoaCRS048uwZITlgZYFEWntFMqi76bqBE4FTSYUTM
FinFUBBVigThM/RLfCRNrCW/kTxXuJDuSfVIJZzWNAT+9oWdz5da
-----END RSA PRIVATE KEY-----
";

    /// (ciphertext hex, expected output: Ok(hex) for raw bytes).
    const IR_VECTORS: &[(&str, &str)] = &[
        // a random positive test case: "lorem ipsum dolor sit amet"
        ("8bfe264e85d3bdeaa6b8851b8e3b956ee3d226fd3f69063a86880173a273d9f283b2eebdd1ed35f7e02d91c571981b6737d5320bd8396b0f3ad5b019daec1b0aab3cbbc026395f4fd14f13673f2dfc81f9b660ec26ac381e6db3299b4e460b43fab9955df2b3cfaa20e900e19c856238fd371899c2bf2ce8c868b76754e5db3b036533fd603746be13c10d4e3e6022ebc905d20c2a7f32b215a4cd53b3f44ca1c327d2c2b651145821c08396c89071f665349c25e44d2733cd9305985ceef6430c3cf57af5fa224089221218fa34737c79c446d28a94c41c96e4e92ac53fbcf384dea8419ea089f8784445a492c812eb0d409467f75afd7d4d1078886205a066",
         "6c6f72656d20697073756d20646f6c6f722073697420616d6574"),
        // a random negative test case decrypting to empty
        ("20aaa8adbbc593a924ba1c5c7990b5c2242ae4b99d0fe636a19a4cf754edbcee774e472fe028160ed42634f8864900cb514006da642cae6ae8c7d087caebcfa6dad1551301e130344989a1d462d4164505f6393933450c67bc6d39d8f5160907cabc251b737925a1cf21e5c6aa5781b7769f6a2a583d97cce008c0f8b6add5f0b2bd80bee60237aa39bb20719fe75749f4bc4e42466ef5a861ae3a92395c7d858d430bfe38040f445ea93fa2958b503539800ffa5ce5f8cf51fa8171a91f36cb4f4575e8de6b4d3f096ee140b938fd2f50ee13f0d050222e2a72b0a3069ff3a6738e82c87090caa5aed4fcbe882c49646aa250b98f12f83c8d528113614a29e7",
         ""),
        // invalid decrypting to max length message
        ("48cceab10f39a4db32f60074feea473cbcdb7accf92e150417f76b44756b190e843e79ec12aa85083a21f5437e7bad0a60482e601198f9d86923239c8786ee728285afd0937f7dde12717f28389843d7375912b07b991f4fdb0190fced8ba665314367e8c5f9d2981d0f5128feeb46cb50fc237e64438a86df198dd0209364ae3a842d77532b66b7ef263b83b1541ed671b120dfd660462e2107a4ee7b964e734a7bd68d90dda61770658a3c242948532da32648687e0318286473f675b412d6468f013f14d760a358dfcad3cda2afeec5e268a37d250c37f722f468a70dfd92d7294c3c1ee1e7f8843b7d16f9f37ef35748c3ae93aa155cdcdfeb4e78567303",
         "22d850137b9eebe092b24f602dc5bb7918c16bd89ddbf20467b119d205f9c2e4bd7d2592cf1e532106e0f33557565923c73a02d4f09c0c22bea89148183e60317f7028b3aa1f261f91c979393101d7e15f4067e63979b32751658ef769610fe97cf9cef3278b3117d384051c3b1d82c251c2305418c8f6840530e631aad63e70e20e025bcd8efb54c92ec6d3b106a2f8e64eeff7d38495b0fc50c97138af4b1c0a67a1c4e27b077b8439332edfa8608dfeae653cd6a628ac550395f7e74390e42c11682234870925eeaa1fa71b76cf1f2ee3bda69f6717033ff8b7c95c9799e7a3bea5e7e4a1c359772fb6b1c6e6c516661dfe30c3"),
        // invalid decrypting to message with length specified by second to last value from PRF
        ("1439e08c3f84c1a7fec74ce07614b20e01f6fa4e8c2a6cffdc3520d8889e5d9a950c6425798f85d4be38d300ea5695f13ecd4cb389d1ff5b82484b494d6280ab7fa78e645933981cb934cce8bfcd114cc0e6811eefa47aae20af638a1cd163d2d3366186d0a07df0c81f6c9f3171cf3561472e98a6006bf75ddb457bed036dcce199369de7d94ef2c68e8467ee0604eea2b3009479162a7891ba5c40cab17f49e1c438cb6eaea4f76ce23cce0e483ff0e96fa790ea15be67671814342d0a23f4a20262b6182e72f3a67cd289711503c85516a9ed225422f98b116f1ab080a80abd6f0216df88d8cfd67c139243be8dd78502a7aaf6bc99d7da71bcdf627e7354",
         "0f9b"),
        // invalid decrypting to message with length specified by third to last value from PRF
        ("1690ebcceece2ce024f382e467cf8510e74514120937978576caf684d4a02ad569e8d76cbe365a060e00779de2f0865ccf0d923de3b4783a4e2c74f422e2f326086c390b658ba47f31ab013aa80f468c71256e5fa5679b24e83cd82c3d1e05e398208155de2212993cd2b8bab6987cf4cc1293f19909219439d74127545e9ed8a706961b8ee2119f6bfacafbef91b75a789ba65b8b833bc6149cf49b5c4d2c6359f62808659ba6541e1cd24bf7f7410486b5103f6c0ea29334ea6f4975b17387474fe920710ea61568d7b7c0a7916acf21665ad5a31c4eabcde44f8fb6120d8457afa1f3c85d517cda364af620113ae5a3c52a048821731922737307f77a1081",
         "4f02"),
        // positive test with 11 byte long value: "lorem ipsum"
        ("6213634593332c485cef783ea2846e3d6e8b0e005cd8293eaebbaa5079712fd681579bdfbbda138ae4d9d952917a03c92398ec0cb2bb0c6b5a8d55061fed0d0d8d72473563152648cfe640b335dc95331c21cb133a91790fa93ae44497c128708970d2beeb77e8721b061b1c44034143734a77be8220877415a6dba073c3871605380542a9f25252a4babe8331cdd53cf828423f3cc70b560624d0581fb126b2ed4f4ed358f0eb8065cf176399ac1a846a31055f9ae8c9c24a1ba050bc20842125bc1753158f8065f3adb9cc16bfdf83816bdf38b624f12022c5a6fbfe29bc91542be8c0208a770bcd677dc597f5557dc2ce28a11bf3e3857f158717a33f6592",
         "6c6f72656d20697073756d"),
        // positive test with 11 byte long value and zero padded ciphertext
        ("00a2e8f114ea8d05d12dc843e3cc3b2edc8229ff2a028bda29ba9d55e3cd02911902fef1f42a075bf05e8016e8567213d6f260fa49e360779dd81aeea3e04c2cb567e0d72b98bf754014561b7511e083d20e0bfb9cd23f8a0d3c88900c49d2fcd5843ff0765607b2026f28202a87aa94678aed22a0c20724541394cd8f44e373eba1d2bae98f516c1e2ba3d86852d064f856b1daf24795e767a2b90396e50743e3150664afab131fe40ea405dcf572dd1079af1d3f0392ccadcca0a12740dbb213b925ca2a06b1bc1383e83a658c82ba2e7427342379084d5f66b544579f07664cb26edd4f10fd913fdbc0de05ef887d4d1ec1ac95652397ea7fd4e4759fda8b",
         "6c6f72656d20697073756d"),
        // positive test with 11 byte long value and zero truncated ciphertext
        ("a2e8f114ea8d05d12dc843e3cc3b2edc8229ff2a028bda29ba9d55e3cd02911902fef1f42a075bf05e8016e8567213d6f260fa49e360779dd81aeea3e04c2cb567e0d72b98bf754014561b7511e083d20e0bfb9cd23f8a0d3c88900c49d2fcd5843ff0765607b2026f28202a87aa94678aed22a0c20724541394cd8f44e373eba1d2bae98f516c1e2ba3d86852d064f856b1daf24795e767a2b90396e50743e3150664afab131fe40ea405dcf572dd1079af1d3f0392ccadcca0a12740dbb213b925ca2a06b1bc1383e83a658c82ba2e7427342379084d5f66b544579f07664cb26edd4f10fd913fdbc0de05ef887d4d1ec1ac95652397ea7fd4e4759fda8b",
         "6c6f72656d20697073756d"),
        // positive that generates a 0 byte long synthetic message internally
        ("b5e49308f6e9590014ffaffc5b8560755739dd501f1d4e9227a7d291408cf4b753f292322ff8bead613bf2caa181b221bc38caf6392deafb28eb21ad60930841ed02fd6225cc9c463409adbe7d8f32440212fbe3881c51375bb09565efb22e62b071472fb38676e5b4e23a0617db5d14d93519ac0007a30a9c822eb31c38b57fcb1be29608fcf1ca2abdcaf5d5752bbc2b5ac7dba5afcff4a5641da360dd01f7112539b1ed46cdb550a3b1006559b9fe1891030ec80f0727c42401ddd6cbb5e3c80f312df6ec89394c5a7118f573105e7ab00fe57833c126141b50a935224842addfb479f75160659ba28877b512bb9a93084ad8bec540f92640f63a11a010e0",
         "6c6f72656d20697073756d"),
        // positive that generates a 245 byte long synthetic message internally
        ("1ea0b50ca65203d0a09280d39704b24fe6e47800189db5033f202761a78bafb270c5e25abd1f7ecc6e7abc4f26d1b0cd9b8c648d529416ee64ccbdd7aa72a771d0353262b543f0e436076f40a1095f5c7dfd10dcf0059ccb30e92dfa5e0156618215f1c3ff3aa997a9d999e506924f5289e3ac72e5e2086cc7b499d71583ed561028671155db4005bee01800a7cdbdae781dd32199b8914b5d4011dd6ff11cd26d46aad54934d293b0bc403dd211bf13b5a5c6836a5e769930f437ffd8634fb7371776f4bc88fa6c271d8aa6013df89ae6470154497c4ac861be2a1c65ebffec139bf7aaba3a81c7c5cdd84da9af5d3edfb957848074686b5837ecbcb6a41c50",
         "6c6f72656d20697073756d"),
        // a random negative test that generates an 11 byte long message
        ("5f02f4b1f46935c742ebe62b6f05aa0a3286aab91a49b34780adde6410ab46f7386e05748331864ac98e1da63686e4babe3a19ed40a7f5ceefb89179596aab07ab1015e03b8f825084dab028b6731288f2e511a4b314b6ea3997d2e8fe2825cef8897cbbdfb6c939d441d6e04948414bb69e682927ef8576c9a7090d4aad0e74c520d6d5ce63a154720f00b76de8cc550b1aa14f016d63a7b6d6eaa1f7dbe9e50200d3159b3d099c900116bf4eba3b94204f18b1317b07529751abf64a26b0a0bf1c8ce757333b3d673211b67cc0653f2fe2620d57c8b6ee574a0323a167eab1106d9bc7fd90d415be5f1e9891a0e6c709f4fc0404e8226f8477b4e939b36eb2",
         "af9ac70191c92413cb9f2d"),
        // otherwise correct plaintext, but with wrong first byte (0x01 instead of 0x00)
        ("9b2ec9c0c917c98f1ad3d0119aec6be51ae3106e9af1914d48600ab6a2c0c0c8ae02a2dc3039906ff3aac904af32ec798fd65f3ad1afa2e69400e7c1de81f5728f3b3291f38263bc7a90a0563e43ce7a0d4ee9c0d8a716621ca5d3d081188769ce1b131af7d35b13dea99153579c86db31fe07d5a2c14d621b77854e48a8df41b5798563af489a291e417b6a334c63222627376118c02c53b6e86310f728734ffc86ef9d7c8bf56c0c841b24b82b59f51aee4526ba1c4268506d301e4ebc498c6aebb6fd5258c876bf900bac8ca4d309dd522f6a6343599a8bc3760f422c10c72d0ad527ce4af1874124ace3d99bb74db8d69d2528db22c3a37644640f95c05f",
         "a1f8c9255c35cfba403ccc"),
        // otherwise correct plaintext, but with wrong second byte (0x01 instead of 0x02)
        ("782c2b59a21a511243820acedd567c136f6d3090c115232a82a5efb0b178285f55b5ec2d2bac96bf00d6592ea7cdc3341610c8fb07e527e5e2d20cfaf2c7f23e375431f45e998929a02f25fd95354c33838090bca838502259e92d86d568bc2cdb132fab2a399593ca60a015dc2bb1afcd64fef8a3834e17e5358d822980dc446e845b3ab4702b1ee41fe5db716d92348d5091c15d35a110555a35deb4650a5a1d2c98025d42d4544f8b32aa6a5e02dc02deaed9a7313b73b49b0d4772a3768b0ea0db5846ace6569cae677bf67fb0acf3c255dc01ec8400c963b6e49b1067728b4e563d7e1e1515664347b92ee64db7efb5452357a02fff7fcb7437abc2e579",
         "e6d700309ca0ed62452254"),
        // invalid ciphertext with a zero byte in first byte of ciphertext
        ("0096136621faf36d5290b16bd26295de27f895d1faa51c800dafce73d001d60796cd4e2ac3fa2162131d859cd9da5a0c8a42281d9a63e5f353971b72e36b5722e4ac444d77f892a5443deb3dca49fa732fe855727196e23c26eeac55eeced8267a209ebc0f92f4656d64a6c13f7f7ce544ebeb0f668fe3a6c0f189e4bcd5ea12b73cf63e0c8350ee130dd62f01e5c97a1e13f52fde96a9a1bc9936ce734fdd61f27b18216f1d6de87f49cf4f2ea821fb8efd1f92cdad529baf7e31aff9bff4074f2cad2b4243dd15a711adcf7de900851fbd6bcb53dac399d7c880531d06f25f7002e1aaf1722765865d2c2b902c7736acd27bc6cbd3e38b560e2eecf7d4b576",
         "ba27b1842e7c21c0e7ef6a"),
        // the same with the zero byte removed
        ("96136621faf36d5290b16bd26295de27f895d1faa51c800dafce73d001d60796cd4e2ac3fa2162131d859cd9da5a0c8a42281d9a63e5f353971b72e36b5722e4ac444d77f892a5443deb3dca49fa732fe855727196e23c26eeac55eeced8267a209ebc0f92f4656d64a6c13f7f7ce544ebeb0f668fe3a6c0f189e4bcd5ea12b73cf63e0c8350ee130dd62f01e5c97a1e13f52fde96a9a1bc9936ce734fdd61f27b18216f1d6de87f49cf4f2ea821fb8efd1f92cdad529baf7e31aff9bff4074f2cad2b4243dd15a711adcf7de900851fbd6bcb53dac399d7c880531d06f25f7002e1aaf1722765865d2c2b902c7736acd27bc6cbd3e38b560e2eecf7d4b576",
         "ba27b1842e7c21c0e7ef6a"),
        // invalid ciphertext with two zero bytes in first bytes of ciphertext
        ("0000587cccc6b264bdfe0dc2149a988047fa921801f3502ea64624c510c6033d2f427e3f136c26e88ea9f6519e86a542cec96aad1e5e9013c3cc203b6de15a69183050813af5c9ad79703136d4b92f50ce171eefc6aa7988ecf02f319ffc5eafd6ee7a137f8fce64b255bb1b8dd19cfe767d64fdb468b9b2e9e7a0c24dae03239c8c714d3f40b7ee9c4e59ac15b17e4d328f1100756bce17133e8e7493b54e5006c3cbcdacd134130c5132a1edebdbd01a0c41452d16ed7a0788003c34730d0808e7e14c797a21f2b45a8aa1644357fd5e988f99b017d9df37563a354c788dc0e2f9466045622fa3f3e17db63414d27761f57392623a2bef6467501c63e8d645",
         "d5cf555b1d6151029a429a"),
        // the same with the two zero bytes removed
        ("587cccc6b264bdfe0dc2149a988047fa921801f3502ea64624c510c6033d2f427e3f136c26e88ea9f6519e86a542cec96aad1e5e9013c3cc203b6de15a69183050813af5c9ad79703136d4b92f50ce171eefc6aa7988ecf02f319ffc5eafd6ee7a137f8fce64b255bb1b8dd19cfe767d64fdb468b9b2e9e7a0c24dae03239c8c714d3f40b7ee9c4e59ac15b17e4d328f1100756bce17133e8e7493b54e5006c3cbcdacd134130c5132a1edebdbd01a0c41452d16ed7a0788003c34730d0808e7e14c797a21f2b45a8aa1644357fd5e988f99b017d9df37563a354c788dc0e2f9466045622fa3f3e17db63414d27761f57392623a2bef6467501c63e8d645",
         "d5cf555b1d6151029a429a"),
    ];

    #[test]
    fn implicit_rejection_openssl_known_answers() {
        let key = Rsa::private_key_from_pem(RSA_2048_2.as_bytes()).unwrap();
        let k = key.size() as usize;
        let d = d_bytes(&key);
        for (i, (c_hex, expect_hex)) in IR_VECTORS.iter().enumerate() {
            let c = hex(c_hex);
            let em = raw_private(&key, &c);
            let mut out = vec![0u8; k];
            let n = decode_type2_implicit_rejection(&sha256(), &d, &c, &em, &mut out).unwrap();
            assert_eq!(&out[..n], &hex(expect_hex)[..], "vector {i}");
        }
    }

    /// OpenSSL's RSA-2048 test key and its "corrupted ciphertext" vector.
    #[test]
    fn implicit_rejection_openssl_known_answer_rsa2048() {
        const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQDNAIHqeyrh6gbV
n3xz2f+5SglhXC5Lp8Y2zvCN01M+wxhVJbAVx2m5mnfWclv5w1Mqm25fZifV+4UW
B2jT3anL01l0URcX3D0wnS/EfuQfl+Mq23+d2GShxHZ6Zm7NcbwarPXnUX9LOFlP
6psF5C1a2pkSAIAT5FMWpNm7jtCGuI0odYusr5ItRqhotIXSOcm66w4rZFknEPQr
LR6gpLSALAvsqzKPimiwBzvbVG/uqYCdKEmRKzkMFTK8finHZY+BdfrkbzQzL/h7
yrPkBkm5hXeGnaDqcYNT8HInVIhpE2SHYNEivmduD8SD3SD/wxvalqMZZsmqLnWt
A95H4cRPAgMBAAECggEAYCl6x5kbFnoG1rJHWLjL4gi+ubLZ7Jc4vYD5Ci41AF3X
ziktnim6iFvTFv7x8gkTvArJDWsICLJBTYIQREHYYkozzgIzyPeApIs3Wv8C12cS
IopwJITbP56+zM+77hcJ26GCgA2Unp5CFuC/81WDiPi9kNo3Oh2CdD7D+90UJ/0W
glplejFpEuhpU2URfKL4RckJQF/KxV+JX8FdIDhsJu54yemQdQKaF4psHkzwwgDo
qc+yfp0Vb4bmwq3CKxqEoc1cpbJ5CHXXlAfISzUjlcuBzD/tW7BDtp7eDAcgRVAC
XO6MX0QBcLYSC7SOD3R7zY9SIRCFDfBDxCjf0YcFMQKBgQD2+WG0fLwDXTrt68fe
hQqVa2Xs25z2B2QGPxWqSFU8WNly/mZ1BW413f3De/O58vYi7icTNyVoScm+8hdv
6PfD+LuRujdN1TuvPeyBTSvewQwf3IjN0Wh28mse36PwlBl+301C/x+ylxEDuJjK
hZxCcocIaoQqtBC7ac8tNa9r4wKBgQDUfnJKf/QQSLJwwlJKQQGHi3MVm7c9PbwY
eyIOY1s1NPluJDoYTZP4YLa/u2txwe2aHh9FhYMCPDAelqaSwaCLU9DsnKkQEA2A
RR47fcagG6xK7O+N95iEa8I1oIy7os9MBoBMwRIZ6VYIxxTj8UMNSR+tu6MqV1Gg
T5d0WDTJpQKBgCHyRSu5uV39AoyRS/eZ8cp36JqV1Q08FtOE+EVfi9evnrPfo9WR
2YQt7yNfdjCo5IwIj/ZkLhAXlFNakz4el2+oUJ/HKLLaDEoaCNf883q6rh/zABrK
HcG7sF2d/7qhoJ9/se7zgjfZ68zHIrkzhDbd5xGREnmMJoCcGo3sQyBhAoGAH3UQ
qmLC2N5KPFMoJ4H0HgLQ6LQCrnhDLkScSBEBYaEUA/AtAYgKjcyTgVLXlyGkcRpg
esRHHr+WSBD5W+R6ReYEmeKfTJdzyDdzQE9gZjdyjC0DUbsDwybIu3OnIef6VEDq
IXK7oUZfzDDcsNn4mTDoFaoff5cpqFfgDgM43VkCgYBNHw11b+d+AQmaZS9QqIt7
aF3FvwCYHV0jdv0Mb+Kc1bY4c0R5MFpzrTwVmdOerjuuA1+9b+0Hwo3nBZM4eaBu
SOamA2hu2OJWCl9q8fLCT69KqWDjghhvFe7c6aJJGucwaA3Uz3eLcPqoaCarMiNH
fMkTd7GabVourqIZdgvu1Q==
-----END PRIVATE KEY-----
";
        let key = PKey::private_key_from_pem(KEY.as_bytes())
            .unwrap()
            .rsa()
            .unwrap();
        let k = key.size() as usize;
        let d = d_bytes(&key);
        let good_c = hex("550AF55A2904E7B9762352F8FB7FA235A9CB053AACB2D5FCB8CA48453CB2EE3619746C701ABF2D4CC67003471A187900B05AA812BD25ED05C675DFC8C97A24A7BF49BD6214992CAD766D05A9A2B57B74F26A737E0237B8B76C45F1F226A836D7CFBC75BA999BDBE48DBC09227AA46C88F21DCCBA7840141AD5A5D71FD122E6BD6AC3E564780DFE623FC1CA9B995A6037BF0BBD43B205A84AC5444F34202C05CE9113087176432476576DE6FFFF9A52EA57C08BE3EC2F49676CB8E12F762AC71FA3C321E00AC988910C85FF52F93825666CE0D40FFAA0592078919D4493F46D95CCF76364C6D57760DD0B64805F9AFC76A2365A5575CA301D5103F0EA76CB9A78");
        let mut bad_c = good_c.clone();
        *bad_c.last_mut().unwrap() = 0x79;
        let mut out = vec![0u8; k];
        let em = raw_private(&key, &good_c);
        let n = decode_type2_implicit_rejection(&sha256(), &d, &good_c, &em, &mut out).unwrap();
        assert_eq!(&out[..n], b"Hello World");
        let em = raw_private(&key, &bad_c);
        assert_eq!(
            decode_type2(&em, &mut out),
            Err(KaeError::PaddingCheckFailed)
        );
        let n = decode_type2_implicit_rejection(&sha256(), &d, &bad_c, &em, &mut out).unwrap();
        assert_eq!(
            &out[..n],
            &hex("4cbb988d6a46228379132b0b5f8c249b3860043848c93632fb982c807c7c82fffc7a9ef83f4908f890373ac181ffea6381e103bcaa27e65638b6ecebef38b59ed4226a9d12af675cfcb634d8c40e7a7aff")[..]
        );
    }

    #[test]
    fn implicit_rejection_synthetic_properties() {
        let key = gen_key(1024);
        let k = key.size() as usize;
        let d = d_bytes(&key);
        let other = gen_key(1024);
        let mut lengths = std::collections::HashSet::new();
        for _ in 0..30 {
            // A random "ciphertext" decrypts to garbage (almost surely invalid padding).
            let mut c = random_bytes(k);
            c[0] &= 0x3f;
            let em = raw_private(&key, &c);
            let mut out1 = vec![0u8; k];
            let mut out2 = vec![0u8; k];
            let n1 = decode_type2_implicit_rejection(&sha256(), &d, &c, &em, &mut out1).unwrap();
            let n2 = decode_type2_implicit_rejection(&sha256(), &d, &c, &em, &mut out2).unwrap();
            assert_eq!((n1, &out1[..n1]), (n2, &out2[..n2]), "deterministic");
            assert!(n1 <= k - 11);
            lengths.insert(n1);
            // Depends on the ciphertext…
            let mut c2 = c.clone();
            c2[k - 1] ^= 1;
            let mut out3 = vec![0u8; k];
            let n3 = decode_type2_implicit_rejection(&sha256(), &d, &c2, &em, &mut out3).unwrap();
            // Two empty synthetic messages (length 0 has probability 1/(k−10) each) are
            // equal by nature: then compare the key derivation instead.
            if n1 + n3 > 0 {
                assert!(n3 != n1 || out3[..n3] != out1[..n1]);
            }
            assert_ne!(
                derive_kdk(&sha256(), &d, &c, k).unwrap()[..],
                derive_kdk(&sha256(), &d, &c2, k).unwrap()[..]
            );
            // …and on the key.
            let mut out4 = vec![0u8; k];
            let n4 =
                decode_type2_implicit_rejection(&sha256(), &d_bytes(&other), &c, &em, &mut out4)
                    .unwrap();
            if n1 + n4 > 0 {
                assert!(n4 != n1 || out4[..n4] != out1[..n1]);
            }
            assert_ne!(
                derive_kdk(&sha256(), &d, &c, k).unwrap()[..],
                derive_kdk(&sha256(), &d_bytes(&other), &c, k).unwrap()[..]
            );
            // Matches the PRF definition.
            let kdk = derive_kdk(&sha256(), &d, &c, k).unwrap();
            let mut synth = vec![0u8; k];
            rsa_prf(&sha256(), &kdk[..], b"message", &mut synth).unwrap();
            assert_eq!(&out1[..n1], &synth[k - n1..]);
        }
        assert!(lengths.len() > 10, "synthetic lengths vary: {lengths:?}");
    }

    #[test]
    fn implicit_rejection_small_output_buffer_gives_synthetic() {
        let key = gen_key(1024);
        let k = key.size() as usize;
        let d = d_bytes(&key);
        let msg = random_bytes(40);
        let mut c = vec![0u8; k];
        key.public_encrypt(&msg, &mut c, Padding::PKCS1).unwrap();
        let em = raw_private(&key, &c);
        let mut out = vec![0u8; 39];
        let n = decode_type2_implicit_rejection(&sha256(), &d, &c, &em, &mut out).unwrap();
        assert!(n <= 39);
        // A synthetic message may be empty (probability about 1/(k−10)); two empty slices
        // are equal by nature, so compare only a non-empty one.
        if n > 0 {
            assert_ne!(&out[..n], &msg[..n]);
        }
        let mut big = vec![0u8; 40];
        assert_eq!(
            decode_type2_implicit_rejection(&sha256(), &d, &c, &em, &mut big),
            Ok(40)
        );
        assert_eq!(big, msg);
    }

    #[test]
    fn implicit_rejection_argument_errors() {
        let h = sha256();
        let kdk = [0u8; 32];
        assert_eq!(
            decode_type2_implicit(&h, &kdk, &[0u8; 10], &mut [0u8; 10]),
            Err(KaeError::InvalidArgument)
        );
        assert_eq!(
            decode_type2_implicit(&h, &kdk, &[0u8; 64], &mut []),
            Err(KaeError::InvalidArgument)
        );
        let sha1 = hasher(DigestId::Sha1);
        assert_eq!(
            decode_type2_implicit(&sha1, &kdk, &[0u8; 64], &mut [0u8; 64]),
            Err(KaeError::InvalidDigest)
        );
        assert_eq!(
            derive_kdk(&sha1, &[1], &[1], 64).err(),
            Some(KaeError::InvalidDigest)
        );
        assert_eq!(
            derive_kdk(&h, &[1u8; 65], &[1], 64).err(),
            Some(KaeError::InvalidKey)
        );
        assert_eq!(
            derive_kdk(&h, &[1], &[1u8; 65], 64).err(),
            Some(KaeError::DataTooLargeForModulus)
        );
        // Leading zeros beyond k in d are tolerated.
        let mut d = vec![0u8; 2];
        d.extend_from_slice(&[5u8; 64]);
        assert_eq!(
            *derive_kdk(&h, &d, &[1], 64).unwrap(),
            *derive_kdk(&h, &[5u8; 64], &[1], 64).unwrap()
        );
        assert_eq!(
            rsa_prf(&h, &kdk, b"x", &mut vec![0u8; 8192]),
            Err(KaeError::InvalidLength)
        );
    }

    #[test]
    fn kdk_and_prf_definitions() {
        use openssl::sign::Signer;
        let h = sha256();
        let d = random_bytes(60);
        let c = random_bytes(62);
        let k = 64;
        let kdk = derive_kdk(&h, &d, &c, k).unwrap();
        // Independent computation with openssl HMAC.
        let mut dpad = vec![0u8; 4];
        dpad.extend_from_slice(&d);
        let dh = digest(DigestId::Sha256, &dpad);
        let mut cpad = vec![0u8; 2];
        cpad.extend_from_slice(&c);
        let hk = PKey::hmac(&dh).unwrap();
        let mut s = Signer::new(MessageDigest::sha256(), &hk).unwrap();
        s.update(&cpad).unwrap();
        assert_eq!(&kdk[..], &s.sign_to_vec().unwrap()[..]);
        // PRF block 1 of a 40-byte output.
        let mut out = [0u8; 40];
        rsa_prf(&h, &kdk[..], b"length", &mut out).unwrap();
        let hk = PKey::hmac(&kdk[..]).unwrap();
        let mut s = Signer::new(MessageDigest::sha256(), &hk).unwrap();
        s.update(&[0, 1]).unwrap();
        s.update(b"length").unwrap();
        s.update(&(320u16).to_be_bytes()).unwrap();
        assert_eq!(&out[32..], &s.sign_to_vec().unwrap()[..8]);
    }

    // ---------------- TLS ----------------

    fn tls_block(k: usize, version: u16) -> (Vec<u8>, [u8; 48]) {
        let mut pm = [0u8; 48];
        openssl::rand::rand_bytes(&mut pm).unwrap();
        pm[..2].copy_from_slice(&version.to_be_bytes());
        (valid_block(k, &pm), pm)
    }

    #[test]
    fn tls_premaster() {
        let k = 128;
        let fake = [0x5Au8; 48];
        let mut out = [0u8; 48];
        let (em, pm) = tls_block(k, 0x0303);
        // Valid.
        decode_tls_premaster(&em, 0x0303, None, &fake, &mut out).unwrap();
        assert_eq!(out, pm);
        decode_tls_premaster(&em, 0x0303, Some(0x0301), &fake, &mut out).unwrap();
        assert_eq!(out, pm);
        // Version mismatch → fake, unless the negotiated version matches.
        decode_tls_premaster(&em, 0x0302, None, &fake, &mut out).unwrap();
        assert_eq!(out, fake);
        decode_tls_premaster(&em, 0x0302, Some(0), &fake, &mut out).unwrap();
        assert_eq!(out, fake);
        decode_tls_premaster(&em, 0x0302, Some(0x0303), &fake, &mut out).unwrap();
        assert_eq!(out, pm);
        decode_tls_premaster(&em, 0x0302, Some(0x0301), &fake, &mut out).unwrap();
        assert_eq!(out, fake);
        // Only the low byte or the high byte matching is not enough.
        decode_tls_premaster(&em, 0x0203, None, &fake, &mut out).unwrap();
        assert_eq!(out, fake);
        // Bad padding → fake.
        for tamper in [0usize, 1, 5, k - 49] {
            let mut e = em.clone();
            e[tamper] = if tamper == k - 49 {
                1
            } else if tamper == 5 {
                0
            } else {
                7
            };
            decode_tls_premaster(&e, 0x0303, None, &fake, &mut out).unwrap();
            assert_eq!(out, fake, "tamper {tamper}");
        }
        // Wrong message length → fake.
        let em47 = valid_block(k, &pm[..47]);
        decode_tls_premaster(&em47, 0x0303, None, &fake, &mut out).unwrap();
        assert_eq!(out, fake);
        // Too short block is the only error.
        assert_eq!(
            decode_tls_premaster(&em[..58], 0x0303, None, &fake, &mut out),
            Err(KaeError::InvalidLength)
        );
        decode_tls_premaster(&valid_block(59, &pm), 0x0303, None, &fake, &mut out).unwrap();
        assert_eq!(out, pm);
        // RNG variant.
        decode_tls_premaster_rng(&em, 0x0303, None, &OsslRng, &mut out).unwrap();
        assert_eq!(out, pm);
        let rng = FixedRng {
            bytes: vec![0x42],
            pos: Default::default(),
        };
        decode_tls_premaster_rng(&em, 0x0300, None, &rng, &mut out).unwrap();
        assert_eq!(out, [0x42u8; 48]);
        assert_eq!(rng.pos.get(), 48, "always draws the fallback");
        assert_eq!(
            decode_tls_premaster_rng(&em, 0x0303, None, &FailingRng, &mut out),
            Err(KaeError::RandomFailure)
        );
    }

    #[test]
    fn tls_premaster_with_openssl_encryption() {
        let key = gen_key(2048);
        let k = key.size() as usize;
        let mut pm = [0u8; 48];
        openssl::rand::rand_bytes(&mut pm).unwrap();
        pm[0] = 3;
        pm[1] = 3;
        let mut c = vec![0u8; k];
        key.public_encrypt(&pm, &mut c, Padding::PKCS1).unwrap();
        let em = raw_private(&key, &c);
        let mut out = [0u8; 48];
        decode_tls_premaster(&em, 0x0303, None, &[0u8; 48], &mut out).unwrap();
        assert_eq!(out, pm);
    }
}
