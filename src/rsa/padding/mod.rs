//! RSA padding schemes and the DER pieces that describe them.
//!
//! Everything here is safe Rust and works on byte buffers only: the RSA arithmetic,
//! digests and randomness are supplied by the caller through [`Hasher`] and
//! [`RandomSource`], which `rsa::libcrypto` implements with `EVP_MD` and `RAND_*_ex`.
//!
//! * [`pkcs1`] — PKCS#1 v1.5 block types 1 and 2 (RFC 8017 §7.2, §9.2), including
//!   implicit rejection (Marvin countermeasure) and the TLS premaster-secret decode.
//! * [`oaep`] — RSAES-OAEP (RFC 8017 §7.1).
//! * [`pss`] — EMSA-PSS (RFC 8017 §9.1) and salt-length policies.
//! * [`x931`] — ANSI X9.31 signature padding.
//! * [`der`] — AlgorithmIdentifier encodings.
//! * [`ct`] — constant-time helpers used by the decoders.
//! * [`digests`] — the digests the padding code knows about.

use zeroize::{Zeroize, Zeroizing};

use crate::error::{KaeError, KaeResult};

pub mod ct;
pub mod der;
pub mod digests;
pub mod oaep;
pub mod pkcs1;
pub mod pss;
pub mod x931;

pub use digests::DigestId;
pub use pss::SaltLen;

/// Largest digest output any [`DigestId`] produces (SHA-512).
pub const MAX_DIGEST_LEN: usize = 64;

/// A hash function the padding code can use; `rsa::libcrypto` implements it with EVP_MD.
pub trait Hasher {
    fn id(&self) -> DigestId;
    fn output_len(&self) -> usize;
    /// Input block size in bytes (64 for SHA-256), needed for HMAC.
    /// The default takes it from [`DigestId::block_len`].
    fn block_len(&self) -> usize {
        self.id().block_len()
    }
    /// Hash the concatenation of `parts` into `out` (out.len() == output_len()).
    fn hash(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()>;
}

/// Randomness source; `rsa::libcrypto` implements it with RAND_bytes_ex / RAND_priv_bytes_ex.
pub trait RandomSource {
    fn fill(&self, buf: &mut [u8]) -> KaeResult<()>;
}

/// Checks the hasher's claimed output length is usable with our fixed-size scratch buffers.
pub(crate) fn checked_output_len(h: &dyn Hasher) -> KaeResult<usize> {
    let len = h.output_len();
    if len == 0 || len > MAX_DIGEST_LEN {
        return Err(KaeError::InvalidDigest);
    }
    Ok(len)
}

/// MGF1 (RFC 8017 §B.2.1): writes `mask.len()` bytes of
/// `Hash(seed || C)` for C = 0, 1, 2, … (4-byte big-endian counter) into `mask`.
pub fn mgf1(hasher: &dyn Hasher, seed: &[u8], mask: &mut [u8]) -> KaeResult<()> {
    let hlen = checked_output_len(hasher)?;
    let mut block = Zeroizing::new([0u8; MAX_DIGEST_LEN]);
    for (counter, chunk) in mask.chunks_mut(hlen).enumerate() {
        let c = u32::try_from(counter).map_err(|_| KaeError::InvalidLength)?;
        let cbytes = c.to_be_bytes();
        if chunk.len() == hlen {
            hasher.hash(&[seed, &cbytes], chunk)?;
        } else {
            hasher.hash(&[seed, &cbytes], &mut block[..hlen])?;
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
    }
    Ok(())
}

/// XORs the MGF1 mask derived from `seed` into `data` in place.
pub fn mgf1_xor(hasher: &dyn Hasher, seed: &[u8], data: &mut [u8]) -> KaeResult<()> {
    let mut mask = Zeroizing::new(vec![0u8; data.len()]);
    mgf1(hasher, seed, &mut mask)?;
    for (d, m) in data.iter_mut().zip(mask.iter()) {
        *d ^= *m;
    }
    Ok(())
}

/// HMAC (RFC 2104) over any [`Hasher`]: writes `HMAC(key, parts[0] || parts[1] || …)`
/// into `out` (`out.len() == hasher.output_len()`).
pub fn hmac(hasher: &dyn Hasher, key: &[u8], parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
    let hlen = checked_output_len(hasher)?;
    let block = hasher.block_len();
    if block < hlen || out.len() != hlen {
        return Err(KaeError::InvalidArgument);
    }
    let mut k0 = Zeroizing::new(vec![0u8; block]);
    if key.len() > block {
        hasher.hash(&[key], &mut k0[..hlen])?;
    } else {
        k0[..key.len()].copy_from_slice(key);
    }
    let mut pad = Zeroizing::new(vec![0u8; block]);
    for (p, k) in pad.iter_mut().zip(k0.iter()) {
        *p = *k ^ 0x36;
    }
    let mut inner = Zeroizing::new([0u8; MAX_DIGEST_LEN]);
    {
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.push(&pad);
        all.extend_from_slice(parts);
        hasher.hash(&all, &mut inner[..hlen])?;
    }
    for (p, k) in pad.iter_mut().zip(k0.iter()) {
        *p = *k ^ 0x5c;
    }
    hasher.hash(&[&pad, &inner[..hlen]], out)?;
    k0.zeroize();
    Ok(())
}

#[cfg(test)]
mod pure_tests;

#[cfg(test)]
pub(crate) mod testutil {
    //! Test implementations of the traits on top of the `openssl` crate, plus RSA helpers.
    use super::*;
    use openssl::bn::BigNum;
    use openssl::hash::MessageDigest;
    use openssl::pkey::Private;
    use openssl::rsa::{Padding, Rsa};
    use std::cell::Cell;

    pub fn md(id: DigestId) -> MessageDigest {
        match id {
            DigestId::Md5 => MessageDigest::md5(),
            DigestId::Sha1 => MessageDigest::sha1(),
            DigestId::Sha224 => MessageDigest::sha224(),
            DigestId::Sha256 => MessageDigest::sha256(),
            DigestId::Sha384 => MessageDigest::sha384(),
            DigestId::Sha512 => MessageDigest::sha512(),
            DigestId::Sha3_224 => MessageDigest::sha3_224(),
            DigestId::Sha3_256 => MessageDigest::sha3_256(),
            DigestId::Sha3_384 => MessageDigest::sha3_384(),
            DigestId::Sha3_512 => MessageDigest::sha3_512(),
            DigestId::Ripemd160 => MessageDigest::ripemd160(),
            other => MessageDigest::from_name(other.name())
                .unwrap_or_else(|| panic!("openssl lacks {}", other.name())),
        }
    }

    pub struct OsslHasher(pub DigestId);

    impl Hasher for OsslHasher {
        fn id(&self) -> DigestId {
            self.0
        }
        fn output_len(&self) -> usize {
            self.0.output_len()
        }
        fn hash(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
            let mut h =
                openssl::hash::Hasher::new(md(self.0)).map_err(|_| KaeError::BackendFailure)?;
            for p in parts {
                h.update(p).map_err(|_| KaeError::BackendFailure)?;
            }
            let d = h.finish().map_err(|_| KaeError::BackendFailure)?;
            if d.len() != out.len() {
                return Err(KaeError::InvalidDigestLength);
            }
            out.copy_from_slice(&d);
            Ok(())
        }
    }

    pub fn hasher(id: DigestId) -> OsslHasher {
        OsslHasher(id)
    }

    pub fn digest(id: DigestId, data: &[u8]) -> Vec<u8> {
        openssl::hash::hash(md(id), data).unwrap().to_vec()
    }

    pub struct OsslRng;
    impl RandomSource for OsslRng {
        fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
            openssl::rand::rand_bytes(buf).map_err(|_| KaeError::RandomFailure)
        }
    }

    /// Deterministic generator that emits a fixed byte sequence (cycled), counting calls.
    pub struct FixedRng {
        pub bytes: Vec<u8>,
        pub pos: Cell<usize>,
    }
    impl RandomSource for FixedRng {
        fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
            for b in buf.iter_mut() {
                let p = self.pos.get();
                *b = self.bytes[p % self.bytes.len()];
                self.pos.set(p + 1);
            }
            Ok(())
        }
    }

    pub struct FailingRng;
    impl RandomSource for FailingRng {
        fn fill(&self, _buf: &mut [u8]) -> KaeResult<()> {
            Err(KaeError::RandomFailure)
        }
    }

    pub fn random_bytes(n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        openssl::rand::rand_bytes(&mut v).unwrap();
        v
    }

    pub fn random_below(n: usize) -> usize {
        let mut b = [0u8; 8];
        openssl::rand::rand_bytes(&mut b).unwrap();
        (u64::from_le_bytes(b) % n as u64) as usize
    }

    pub fn gen_key(bits: u32) -> Rsa<Private> {
        Rsa::generate(bits).unwrap()
    }

    /// Raw RSA private operation (m^d mod n), result left-padded to the modulus length.
    pub fn raw_private(key: &Rsa<Private>, input: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; key.size() as usize];
        let n = key.private_decrypt(input, &mut out, Padding::NONE).unwrap();
        assert_eq!(n, out.len());
        out
    }

    /// Raw RSA public operation (m^e mod n), result left-padded to the modulus length.
    pub fn raw_public(key: &Rsa<Private>, input: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; key.size() as usize];
        let n = key.public_encrypt(input, &mut out, Padding::NONE).unwrap();
        assert_eq!(n, out.len());
        out
    }

    pub fn d_bytes(key: &Rsa<Private>) -> Vec<u8> {
        key.d().to_vec()
    }

    pub fn bn(bytes: &[u8]) -> BigNum {
        BigNum::from_slice(bytes).unwrap()
    }

    pub fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(s.len() & 1 == 0, "odd hex length");
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn mgf1_matches_manual_construction() {
        let h = hasher(DigestId::Sha256);
        let seed = b"seed value";
        let mut mask = vec![0u8; 100];
        mgf1(&h, seed, &mut mask).unwrap();
        let mut expect = Vec::new();
        for c in 0u32..4 {
            let mut input = seed.to_vec();
            input.extend_from_slice(&c.to_be_bytes());
            expect.extend_from_slice(&digest(DigestId::Sha256, &input));
        }
        assert_eq!(mask, expect[..100]);
        // Empty mask is fine.
        mgf1(&h, seed, &mut []).unwrap();
        // XOR variant.
        let mut data = vec![0xAAu8; 100];
        mgf1_xor(&h, seed, &mut data).unwrap();
        for (d, m) in data.iter().zip(mask.iter()) {
            assert_eq!(*d, 0xAA ^ *m);
        }
    }

    #[test]
    fn hmac_matches_openssl() {
        use openssl::pkey::PKey;
        use openssl::sign::Signer;
        for id in [
            DigestId::Sha1,
            DigestId::Sha256,
            DigestId::Sha384,
            DigestId::Sha512,
            DigestId::Sha3_256,
        ] {
            // (OpenSSL refuses an empty HMAC key, so 0 is checked separately below.)
            for key_len in [1usize, 32, 64, 65, 128, 129, 200] {
                let key = random_bytes(key_len);
                let msg = random_bytes(77);
                let mut out = vec![0u8; id.output_len()];
                hmac(&hasher(id), &key, &[&msg[..10], &msg[10..]], &mut out).unwrap();
                let pkey = PKey::hmac(&key).unwrap();
                let mut s = Signer::new(md(id), &pkey).unwrap();
                s.update(&msg).unwrap();
                assert_eq!(out, s.sign_to_vec().unwrap(), "{id:?} key_len {key_len}");
            }
        }
        // An empty key is the all-zero block-sized key.
        let h = hasher(DigestId::Sha256);
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        hmac(&h, b"", &[b"msg"], &mut a).unwrap();
        hmac(&h, &[0u8; 64], &[b"msg"], &mut b).unwrap();
        assert_eq!(a, b);
        // RFC 4231 test case 2.
        hmac(&h, b"Jefe", &[b"what do ya want ", b"for nothing?"], &mut a).unwrap();
        assert_eq!(
            a[..],
            hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")[..]
        );
        let mut short = [0u8; 10];
        assert_eq!(
            hmac(&hasher(DigestId::Sha256), b"k", &[b"m"], &mut short),
            Err(KaeError::InvalidArgument)
        );
    }

    #[test]
    fn hasher_with_bad_length_is_rejected() {
        struct Bad;
        impl Hasher for Bad {
            fn id(&self) -> DigestId {
                DigestId::Sha256
            }
            fn output_len(&self) -> usize {
                65
            }
            fn hash(&self, _: &[&[u8]], _: &mut [u8]) -> KaeResult<()> {
                Ok(())
            }
        }
        assert_eq!(
            mgf1(&Bad, b"x", &mut [0u8; 4]),
            Err(KaeError::InvalidDigest)
        );
    }
}
