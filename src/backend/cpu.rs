//! CPU backend: libcrypto's constant-time Montgomery arithmetic, inline on the caller's thread.

use super::Backend;
use crate::error::KaeResult;
use crate::rsa::{ops, RsaKey};
use crate::stats;

pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn private_op(&self, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
        let r = ops::private_op(key, input, out);
        stats::record(stats::Op::Private, r.is_ok());
        r
    }

    fn public_op(&self, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
        let r = ops::public_op(key, input, out);
        stats::record(stats::Op::Public, r.is_ok());
        r
    }
}
