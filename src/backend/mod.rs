//! The seam between the RSA operations and whatever computes them.
//!
//! A `Backend` takes `Request`s (`submit`) and produces completions. The CPU backend
//! (`cpu.rs`) drains its queues on worker threads and hands each finished request to the
//! pool's `Completer`; a hardware backend (HPRE, later) reports `needs_polling` and the pool's
//! poller thread fetches its completions with `poll` and hands them to the same `Completer`.

pub mod cpu;
pub mod hpre;
pub mod key_state;
pub mod registry;

use crate::error::KaeResult;
use crate::pool::Waiter;
use crate::rsa::RsaKey;
use std::sync::Arc;
use zeroize::Zeroizing;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// RSADP / RSASP1 with blinding, CRT and the fault check.
    Private,
    /// RSAEP / RSAVP1.
    Public,
}

/// One RSA exponentiation in flight. The request owns its key reference and buffers until it
/// completes, so nothing it touches can be freed under it (a paused job may be freed).
pub struct Request {
    pub kind: OpKind,
    pub key: Arc<RsaKey>,
    pub input: Zeroizing<Vec<u8>>,
    pub output: Zeroizing<Vec<u8>>,
    pub result: KaeResult<()>,
    pub waiter: Arc<Waiter>,
}

impl Request {
    pub fn new(kind: OpKind, key: Arc<RsaKey>, input: &[u8], waiter: Arc<Waiter>) -> Request {
        let k = key.size();
        Request {
            kind,
            key,
            input: Zeroizing::new(input.to_vec()),
            output: Zeroizing::new(vec![0u8; k]),
            result: Err(crate::error::KaeError::OperationNotInitialized),
            waiter,
        }
    }

    /// Size class used to group requests for multi-buffer batches (same modulus size).
    pub fn size_class(&self) -> usize {
        self.key.bits()
    }
}

/// Something that computes queued RSA requests.
pub trait Backend: Send + Sync {
    /// Short name shown to operators ("cpu", "hpre").
    fn name(&self) -> &'static str;
    /// Queues a request; hands it back when every queue is full (or the backend stopped).
    /// Once `shutdown` has begun, every submit must be refused or its request drained by
    /// that shutdown: check the stop flag under the lock the shutdown drains under.
    fn submit(&self, req: Request) -> Result<(), Request>;
    /// Moves up to `max` finished requests into `out`; returns how many. Only called for
    /// backends that `needs_polling`.
    fn poll(&self, out: &mut Vec<Request>, max: usize) -> usize;
    /// Requests submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// True when completions must be fetched with `poll` by the pool's poller thread
    /// (hardware queues); false when the backend hands finished requests to the pool's
    /// `Completer` itself (CPU workers).
    fn needs_polling(&self) -> bool {
        false
    }
    /// Stops worker threads; queued requests complete with an error. After it returns every
    /// submit is refused, so `in_flight` only goes down.
    fn shutdown(&self);
    /// Deepest any queue has been (for operators).
    fn high_water(&self) -> usize {
        0
    }
}

/// Computes one request on the calling thread with libcrypto's constant-time arithmetic.
pub fn compute(req: &mut Request) {
    req.result = match req.kind {
        OpKind::Private => crate::rsa::ops::private_op(&req.key, &req.input, &mut req.output),
        OpKind::Public => crate::rsa::ops::public_op(&req.key, &req.input, &mut req.output),
    };
}
