//! What travels between the offload router and a backend, and back: the request, the
//! completer that hands a finished request to its waiter, the waiter a job or thread waits
//! on, and the sleeper that lets worker and poller threads spin and then park.

pub mod sleeper;
pub mod waiter;

pub use sleeper::Sleeper;
pub use waiter::{Outcome, Waiter, WaiterWake};

use crate::error::KaeResult;
use crate::rsa::RsaKey;
use std::sync::{Arc, Mutex};
use zeroize::Zeroizing;

/// Which RSA computation a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// RSADP / RSASP1 with blinding, CRT and the fault check.
    Private,
    /// RSAEP / RSAVP1.
    Public,
    /// Only the exponentiation y = x^d mod n of an input the caller already blinded
    /// (`rsa::ops::prepare_private`); the caller checks the result with e and unblinds it
    /// (`finish_private`), so a backend's result is never released unchecked.
    ExponentiateBlinded,
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

    /// Hands the outcome to the request's waiter (which wakes whoever waits).
    pub fn complete(self) {
        let Request {
            result,
            output,
            waiter,
            ..
        } = self;
        waiter.complete(Outcome { result, output });
    }

    /// Size class used to group requests for multi-buffer batches (same modulus size).
    pub fn size_class(&self) -> usize {
        self.key.bits()
    }
}

/// Moves finished requests to their waiters, and lets jobs that met a full queue retry.
/// Called by CPU workers directly, or by the poller thread for backends that must be polled.
#[derive(Default)]
pub struct Completer {
    /// Waiters of jobs that found every queue full; woken when completions free slots.
    slot_waiters: Mutex<Vec<Arc<Waiter>>>,
}

impl Completer {
    pub fn new() -> Completer {
        Completer::default()
    }

    /// Completes every request of `done` (draining it), then wakes the slot waiters.
    pub fn complete_all(&self, done: &mut Vec<Request>) {
        if done.is_empty() {
            return;
        }
        let freed = done.len();
        for r in done.drain(..) {
            r.complete();
        }
        // One waiter per freed slot, oldest first: waking every waiter on each completion
        // made most of them find the queue full again (a thundering herd of retries).
        let woken: Vec<Arc<Waiter>> = {
            let mut w = self.slot_waiters.lock().unwrap_or_else(|e| e.into_inner());
            let n = freed.min(w.len());
            w.drain(..n).collect()
        };
        for w in woken {
            w.wake();
        }
    }

    /// Registers `w` to be woken when a slot frees (once: a waiter listed twice would take
    /// two of the wake-ups meant for others).
    pub(crate) fn wait_for_slot(&self, w: &Arc<Waiter>) {
        let mut list = self.slot_waiters.lock().unwrap_or_else(|e| e.into_inner());
        if !list.iter().any(|x| Arc::ptr_eq(x, w)) {
            list.push(w.clone());
        }
    }

    /// Wakes every slot waiter (at shutdown: no slot will free any more).
    pub(crate) fn wake_all_slot_waiters(&self) {
        let all = std::mem::take(&mut *self.slot_waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for w in all {
            w.wake();
        }
    }

    /// Withdraws a registration whose submit succeeded: left in the list it would absorb a
    /// wake-up (one per freed slot) that another waiter needs, and that waiter could stall.
    pub(crate) fn cancel_slot_wait(&self, w: &Arc<Waiter>) {
        self.slot_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|x| !Arc::ptr_eq(x, w));
    }
}
