//! Park/unpark for the pool's threads: a short spin (work comes in bursts, and a futex wake
//! costs more than the round trip we aim for), then park, so an idle pool uses no CPU.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long a thread spins for new work before parking.
pub(crate) fn spin_budget() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("KAE_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10u64);
        Duration::from_micros(us)
    })
}

pub struct Sleeper {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Default for Sleeper {
    fn default() -> Self {
        Self::new()
    }
}

impl Sleeper {
    pub fn new() -> Sleeper {
        Sleeper {
            sleeping: AtomicBool::new(false),
            thread: OnceLock::new(),
        }
    }

    /// Binds the sleeper to the calling thread (the one that will sleep).
    pub fn register_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wakes the thread if it sleeps (call after publishing the work it waits for).
    pub fn wake(&self) {
        // Pairs with the fence in `sleep_unless`: either the sleeper sees our work, or we see
        // it sleeping.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Spins briefly, then parks until woken, unless `ready()` turns true.
    pub fn sleep_unless(&self, ready: impl Fn() -> bool) {
        let budget = spin_budget();
        if !budget.is_zero() {
            let start = Instant::now();
            let mut i = 0u32;
            while start.elapsed() < budget {
                if ready() {
                    return;
                }
                i += 1;
                if i % 64 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !ready() {
            // The timeout only bounds the damage of a bug; wakes come from `wake`.
            std::thread::park_timeout(Duration::from_millis(500));
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }
}
