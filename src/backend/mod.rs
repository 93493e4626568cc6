//! The seam between the RSA operations and whatever computes them.
//!
//! Today there is one backend, the CPU. The queue pool (next issue) submits requests to a
//! `Backend` and the HPRE backend (later) implements the same trait over UADK queues.

pub mod cpu;

use crate::error::KaeResult;
use crate::rsa::RsaKey;

/// Something that can compute raw RSA exponentiations for a key.
pub trait Backend: Send + Sync {
    /// Short name shown to operators ("cpu", "hpre").
    fn name(&self) -> &'static str;
    /// RSADP/RSASP1: `out = input^d mod n` with blinding, CRT and the fault check.
    fn private_op(&self, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()>;
    /// RSAEP/RSAVP1: `out = input^e mod n`.
    fn public_op(&self, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()>;
}

/// The backend used by the operations (the CPU, computing inline on the caller's thread).
pub fn active() -> &'static dyn Backend {
    &cpu::CpuBackend
}
