//! Computing on the caller's thread: every operation that is not offloaded, and the fallback
//! of one that could not be.

use crate::completion::OpKind;
use crate::error::KaeResult;
use crate::rsa::RsaKey;
use crate::stats;

pub(super) fn inline(kind: OpKind, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    let r = match kind {
        OpKind::Private => {
            let checked = crate::rsa::ops::private_op(key, input, out);
            stats::note_crt_faults(checked.crt_faults);
            checked.result
        }
        OpKind::Public => crate::rsa::ops::public_op(key, input, out),
        // Counted once by `offload`, which finishes it.
        OpKind::ExponentiateBlinded => {
            return crate::rsa::ops::exponentiate_blinded(key, input, out)
        }
    };
    stats::record(kind, stats::Path::Inline, r.is_ok());
    r
}
