//! The rendezvous between a request and whoever waits for it. Shared (`Arc`) by the request
//! and the waiting job: if the application frees the job or its connection while the request
//! is in flight, the waiter and the request's buffers stay valid until the completion lands,
//! and the completion only touches memory the request owns.
//!
//! The wake-up is attached late (`set_wake`), only once the waiter knows it must pause: an
//! application such as HAProxy expects every wait fd it finds in the ASYNC_WAIT_CTX to have
//! been announced by a pause (SSL_ERROR_WANT_ASYNC), so an operation that finished before
//! pausing must not register one. The wake-up is released at completion, so a job that is
//! never resumed does not keep the fd alive.

use crate::error::KaeResult;
use crate::ffi::async_job::JobWake;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::Thread;
use zeroize::Zeroizing;

pub enum WaiterWake {
    /// An ASYNC job: its wait fd or the application's callback.
    Job(JobWake),
    /// A thread blocked in `block_until_done`.
    Thread(Thread),
}

impl WaiterWake {
    fn fire(&self) {
        match self {
            WaiterWake::Job(j) => j.wake(),
            WaiterWake::Thread(t) => t.unpark(),
        }
    }
}

/// What a finished request hands back: see the fields of `Request` of the same names.
pub struct Outcome {
    pub result: KaeResult<()>,
    pub output: Zeroizing<Vec<u8>>,
}

struct WakeState {
    wake: Option<WaiterWake>,
    /// A wake-up (free slot) came while no wake-up was attached: fired at attachment, so a
    /// waiter that registers for a slot before attaching (to attach only when it really
    /// pauses) loses nothing.
    missed: bool,
}

pub struct Waiter {
    done: AtomicBool,
    slot: Mutex<Option<Outcome>>,
    wake: Mutex<WakeState>,
}

impl Waiter {
    pub fn new(wake: Option<WaiterWake>) -> Waiter {
        Waiter {
            done: AtomicBool::new(false),
            slot: Mutex::new(None),
            wake: Mutex::new(WakeState {
                wake,
                missed: false,
            }),
        }
    }

    /// Attaches the wake-up. When the outcome is already there, or a wake-up came while none
    /// was attached, it fires at once (the caller is about to pause and must be resumed).
    pub fn set_wake(&self, w: WaiterWake) {
        let mut g = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_done() {
            drop(g);
            w.fire();
            return;
        }
        if std::mem::take(&mut g.missed) {
            w.fire();
        }
        g.wake = Some(w);
    }

    /// Stores the outcome, then wakes the waiter and releases the wake-up.
    pub fn complete(&self, outcome: Outcome) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        self.done.store(true, Ordering::Release);
        let w = self
            .wake
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wake
            .take();
        if let Some(w) = w {
            w.fire();
        }
    }

    /// Wakes the waiter without an outcome (e.g. a queue slot became free); kept for later
    /// when no wake-up is attached yet.
    pub fn wake(&self) {
        let mut g = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        match g.wake.as_ref() {
            Some(w) => w.fire(),
            None => g.missed = true,
        }
    }

    /// Drops a kept wake-up that is no longer needed (the submit it was for succeeded).
    pub fn clear_missed(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).missed = false;
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Tests: polls until this waiter has an outcome, at most `limit`.
    #[cfg(test)]
    pub(crate) fn done_within(&self, limit: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        while !self.is_done() {
            if t0.elapsed() > limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        true
    }

    pub fn take(&self) -> Option<Outcome> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Blocks the calling thread until the outcome is there (a short spin first: the round
    /// trip through an idle pool is a few microseconds, less than a park/unpark).
    pub fn block_until_done(&self) {
        self.block_until_done_after(super::sleeper::spin_budget())
    }

    /// Blocks the calling thread until the outcome is there without spinning (a request on
    /// hardware takes far longer than a park/unpark).
    pub fn park_until_done(&self) {
        self.block_until_done_after(std::time::Duration::ZERO)
    }

    fn block_until_done_after(&self, spin: std::time::Duration) {
        let start = std::time::Instant::now();
        let mut i = 0u32;
        while start.elapsed() < spin {
            if self.is_done() {
                return;
            }
            i += 1;
            if i % 64 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        self.set_wake(WaiterWake::Thread(std::thread::current()));
        while !self.is_done() {
            std::thread::park_timeout(std::time::Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
#[allow(unsafe_code)] // a C callback standing in for an application's
mod tests {
    use super::*;
    use crate::ffi::async_job::JobWake;
    use core::ffi::{c_int, c_void};
    use std::sync::atomic::AtomicUsize;

    unsafe extern "C" fn count(arg: *mut c_void) -> c_int {
        // SAFETY: arg is the address of the test's static counter.
        unsafe { &*(arg as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
        1
    }

    fn counting_wake(n: &'static AtomicUsize) -> WaiterWake {
        // SAFETY: count only increments the AtomicUsize at arg, and n is a static one: the call
        // is sound from any thread, at any time.
        WaiterWake::Job(unsafe { JobWake::callback(count, n as *const AtomicUsize as *mut c_void) })
    }

    #[test]
    fn a_wake_up_before_the_wake_is_attached_fires_at_attachment() {
        static FIRED: AtomicUsize = AtomicUsize::new(0);
        let w = Waiter::new(None);
        w.wake(); // a slot freed before the waiter attached its wake-up
        assert_eq!(FIRED.load(Ordering::SeqCst), 0);
        w.set_wake(counting_wake(&FIRED));
        assert_eq!(
            FIRED.load(Ordering::SeqCst),
            1,
            "the early wake-up was lost"
        );
        w.wake();
        assert_eq!(
            FIRED.load(Ordering::SeqCst),
            2,
            "attached: wakes fire directly"
        );
    }

    #[test]
    fn a_cleared_early_wake_up_does_not_fire() {
        static FIRED: AtomicUsize = AtomicUsize::new(0);
        let w = Waiter::new(None);
        w.wake();
        w.clear_missed();
        w.set_wake(counting_wake(&FIRED));
        assert_eq!(FIRED.load(Ordering::SeqCst), 0);
        w.complete(Outcome {
            result: Ok(()),
            output: Zeroizing::new(vec![1]),
        });
        assert_eq!(
            FIRED.load(Ordering::SeqCst),
            1,
            "completion fires the wake-up"
        );
    }
}
