//! The rendezvous between a request and whoever waits for it. Shared (`Arc`) by the request
//! and the waiting job: if the application frees the job or its connection while the request
//! is in flight, the waiter and the request's buffers stay valid until the completion lands,
//! and the completion only touches memory the request owns.

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

type Outcome = (KaeResult<()>, Zeroizing<Vec<u8>>);

pub struct Waiter {
    done: AtomicBool,
    slot: Mutex<Option<Outcome>>,
    wake: WaiterWake,
    /// A thread that fell back to blocking (see `block_until_done`).
    blocked: Mutex<Option<Thread>>,
}

impl Waiter {
    pub fn new(wake: WaiterWake) -> Waiter {
        Waiter {
            done: AtomicBool::new(false),
            slot: Mutex::new(None),
            wake,
            blocked: Mutex::new(None),
        }
    }

    /// Stores the outcome, then wakes the waiter.
    pub fn complete(&self, result: KaeResult<()>, output: Zeroizing<Vec<u8>>) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((result, output));
        self.done.store(true, Ordering::Release);
        self.wake();
        if let Some(t) = self
            .blocked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// Wakes the waiter without an outcome (e.g. a queue slot became free).
    pub fn wake(&self) {
        match &self.wake {
            WaiterWake::Job(j) => j.wake(),
            WaiterWake::Thread(t) => t.unpark(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    pub fn take(&self) -> Option<Outcome> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Blocks the calling thread until the outcome is there (a short spin first: the round
    /// trip through an idle pool is a few microseconds, less than a park/unpark).
    pub fn block_until_done(&self) {
        let spin = super::sleeper::spin_budget();
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
        *self.blocked.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        while !self.is_done() {
            std::thread::park_timeout(std::time::Duration::from_millis(10));
        }
    }
}
