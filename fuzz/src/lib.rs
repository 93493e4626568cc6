//! Shared pieces of kae's fuzz targets: an input reader, a [`Hasher`] and RNG for the padding
//! code, reference (plain, non-constant-time) decoders written from RFC 8017 / X9.31 to
//! compare kae's constant-time ones with, and an in-process kae provider (the instrumented
//! rlib registered as a built-in provider) whose dispatch tables the provider targets call.
#![allow(clippy::missing_safety_doc)]

pub mod prov;
pub mod reference;

use kae::error::{KaeError, KaeResult};
use kae::rsa::padding::{DigestId, Hasher, RandomSource};
use openssl::hash::MessageDigest;

/// Reads fuzz input front to back; past the end every read yields zeros / empty slices.
pub struct Rd<'a>(pub &'a [u8]);

impl<'a> Rd<'a> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    /// A length-prefixed (one byte) slice.
    pub fn bytes(&mut self) -> &'a [u8] {
        let n = self.u8() as usize;
        self.take(n)
    }
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.0.len())
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.u8() as usize % from.len()]
    }
}

/// The digests libcrypto's default provider implements (every `DigestId`).
pub fn digest(b: u8) -> DigestId {
    DigestId::ALL[b as usize % DigestId::ALL.len()]
}

fn md(id: DigestId) -> MessageDigest {
    MessageDigest::from_name(id.name()).unwrap_or_else(|| panic!("libcrypto lacks {}", id.name()))
}

/// [`Hasher`] over libcrypto (through the `openssl` crate, default library context).
pub struct Md(pub DigestId);

impl Hasher for Md {
    fn id(&self) -> DigestId {
        self.0
    }
    fn output_len(&self) -> usize {
        self.0.output_len()
    }
    fn hash(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
        let mut h = openssl::hash::Hasher::new(md(self.0)).map_err(|_| KaeError::BackendFailure)?;
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

/// Deterministic "random" bytes (a counter mixed with a seed), so a crash input replays.
pub struct SeedRng(pub u64);

impl RandomSource for SeedRng {
    fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
        let mut x = self.0 | 1;
        for b in buf.iter_mut() {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            *b = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8;
        }
        Ok(())
    }
}
