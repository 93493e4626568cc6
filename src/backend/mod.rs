//! The seam between the RSA operations and whatever computes them.
//!
//! A `Backend` takes `Request`s (`submit`) and produces completions. The CPU backend
//! (`cpu.rs`) drains its queues on worker threads and hands each finished request to the
//! `Completer`; a hardware backend (HPRE) reports `needs_polling` and the offloader's poller
//! thread fetches its completions with `poll` and hands them to the same `Completer`.

pub mod cpu;
pub mod gather;
pub mod hpre;
pub mod mb;
pub mod registry;

use crate::completion::{OpKind, Request};
use crate::rsa::RsaKey;

/// How a backend serves operations outside async jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Compute on the caller's thread (CPU arithmetic: a thread hop would only add cost).
    Inline,
    /// Submit to the queues and put the caller to sleep until the completion (hardware).
    SubmitAndWait,
    /// The backend's own blocking call on the caller's thread (`compute_direct`).
    Direct,
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
    /// Completions the backend still waits for although no request is in flight (HPRE's
    /// timed-out requests, whose buffers the device may still write): the poller keeps
    /// polling, with `poll_pause` between polls, until they come.
    fn awaits_late_completions(&self) -> bool {
        false
    }
    /// True when completions must be fetched with `poll` by the offloader's poller thread
    /// (hardware queues); false when the backend hands finished requests to the `Completer`
    /// itself (CPU workers).
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
    /// Whether this backend takes `kind` for `key` now (a size it supports, a healthy
    /// device). When it does not, the operation is computed on the CPU.
    fn takes(&self, _key: &RsaKey, _kind: OpKind) -> bool {
        true
    }
    /// True when private operations must reach this backend blinded (`ExponentiateBlinded`), with
    /// the fault check and unblinding done by the caller on the CPU; false when the backend
    /// runs the whole private operation with the CPU code (`Private`).
    fn blinds_on_caller(&self) -> bool {
        false
    }
    /// How operations outside async jobs are served.
    fn sync_policy(&self) -> SyncPolicy {
        SyncPolicy::Inline
    }
    /// Computes `req` on the calling thread with the backend's blocking call
    /// (`SyncPolicy::Direct`); false when it cannot (the caller then uses the CPU).
    fn compute_direct(&self, _req: &mut Request) -> bool {
        false
    }
    /// For polled backends: how long the poller pauses after a poll that found nothing while
    /// requests are in flight (None: yield only).
    fn poll_pause(&self) -> Option<std::time::Duration> {
        None
    }
    /// Called once the poller has stopped (nothing polls or submits any more): release what
    /// the device library holds.
    fn after_poller_stopped(&self) {}
}

/// The function CPU workers apply to each request (real RSA, or a stand-in in tests and
/// benchmarks).
pub type ComputeFn = fn(&mut Request);

/// Computes one request on the calling thread with libcrypto's constant-time arithmetic.
pub fn compute(req: &mut Request) {
    req.result = match req.kind {
        OpKind::Private => {
            let checked = crate::rsa::ops::private_op(&req.key, &req.input, &mut req.output);
            crate::stats::note_crt_faults(checked.crt_faults);
            checked.result
        }
        OpKind::Public => crate::rsa::ops::public_op(&req.key, &req.input, &mut req.output),
        OpKind::ExponentiateBlinded => {
            crate::rsa::ops::exponentiate_blinded(&req.key, &req.input, &mut req.output)
        }
    };
}
