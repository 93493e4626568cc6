//! Park/unpark for kae's worker and poller threads: a spin (work comes in bursts, and a futex
//! wake costs more than the round trip we aim for), then park, so idle threads use no CPU.
//!
//! The spin adapts to the gaps between pieces of work. One application thread with one job in
//! flight (HAProxy at one connection, `openssl speed -async_jobs 1`) hands the worker its next
//! operation 50–300 µs after the previous result; a worker that parked meanwhile costs a wake-up
//! of a halted CPU on top (measured on a 2-vCPU VM: `-async_jobs 1` at 0.80x of inline with a
//! 10 µs spin, 0.95–1.0x when the spin covered the gap). So the spin lasts 1.5x the recent gap
//! when that is short, and only the minimum when work comes rarely (spinning would be waste).

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Shortest spin before parking, µs (`KAE_SPIN_US`, default 10; 0 = park at once).
fn min_spin_us() -> u64 {
    static SPIN: OnceLock<u64> = OnceLock::new();
    *SPIN.get_or_init(|| crate::settings::spin_bounds().0)
}

/// Longest adaptive spin, µs (`KAE_SPIN_MAX_US`, default 300): gaps longer than this are idle
/// time, not the hand-back of a single in-flight job. Both are checked at provider init.
fn max_spin_us() -> u64 {
    static SPIN: OnceLock<u64> = OnceLock::new();
    *SPIN.get_or_init(|| crate::settings::spin_bounds().1)
}

/// The minimum spin, for other waits on the offload hot path.
pub(crate) fn spin_budget() -> Duration {
    Duration::from_micros(min_spin_us())
}

/// Spin budget for a recent gap average (µs): 1.5x the gap when it is at most `max`, else
/// `min`; never below `min` nor above `max`.
fn spin_for_gap(avg_gap_us: u64, min: u64, max: u64) -> u64 {
    if avg_gap_us > max {
        min
    } else {
        (avg_gap_us + avg_gap_us / 2).clamp(min, max)
    }
}

/// The gap a new sleeper assumes, and the most one wait counts for (1 s: "idle").
const IDLE_GAP_US: u64 = 1_000_000;

pub struct Sleeper {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
    /// Moving average (weight 1/4) of the waits for work, µs. Only the sleeping thread
    /// updates it.
    avg_gap_us: AtomicU64,
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
            avg_gap_us: AtomicU64::new(IDLE_GAP_US),
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

    /// Spins for a while (see the module comment), then parks until woken, unless `ready()`
    /// turns true.
    pub fn sleep_unless(&self, ready: impl Fn() -> bool) {
        let (min, max) = (min_spin_us(), max_spin_us());
        let avg = self.avg_gap_us.load(Ordering::Relaxed);
        let budget = Duration::from_micros(spin_for_gap(avg, min, max));
        let start = Instant::now();
        if !budget.is_zero() {
            let mut i = 0u32;
            while start.elapsed() < budget {
                if ready() {
                    self.note_gap(avg, start);
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
        self.park_unless(ready);
        self.note_gap(avg, start);
    }

    /// Parks until woken, unless `ready()` turns true; never spins (a poller waiting for
    /// hardware: the device takes far longer than a park/unpark).
    pub fn park_unless(&self, ready: impl Fn() -> bool) {
        // The timeout only bounds the damage of a bug; wakes come from `wake`.
        self.park_for(Duration::from_millis(500), ready);
    }

    /// Parks for at most `d` (a timed wait that [`Self::wake`] can cut short), unless
    /// `ready()` turns true.
    pub fn park_for(&self, d: Duration, ready: impl Fn() -> bool) {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !ready() {
            std::thread::park_timeout(d);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }

    fn note_gap(&self, avg: u64, start: Instant) {
        let gap =
            u64::try_from(start.elapsed().as_micros()).map_or(IDLE_GAP_US, |g| g.min(IDLE_GAP_US));
        self.avg_gap_us
            .store(avg - avg / 4 + gap / 4, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_follows_short_gaps_and_stops_for_idle_ones() {
        assert_eq!(spin_for_gap(100, 10, 300), 150);
        assert_eq!(spin_for_gap(2, 10, 300), 10, "never below the minimum");
        assert_eq!(spin_for_gap(250, 10, 300), 300, "never above the maximum");
        assert_eq!(spin_for_gap(301, 10, 300), 10, "idle gaps: minimum only");
        assert_eq!(spin_for_gap(IDLE_GAP_US, 10, 300), 10);
        assert_eq!(
            spin_for_gap(100, 0, 0),
            0,
            "KAE_SPIN_US=0 with KAE_SPIN_MAX_US=0 turns spinning off"
        );
    }

    #[test]
    fn average_gap_tracks_recent_waits() {
        let s = std::sync::Arc::new(Sleeper::new());
        s.register_current();
        // Work is ready at once: the average falls from "idle" towards 0.
        for _ in 0..64 {
            s.sleep_unless(|| true);
        }
        assert!(s.avg_gap_us.load(Ordering::Relaxed) < 10);
        // Work arrives 2 ms after the sleeper starts waiting: the average rises above the
        // spin maximum again, so the sleeper goes back to the minimum spin.
        for _ in 0..8 {
            let ready = std::sync::Arc::new(AtomicBool::new(false));
            let (r2, s2) = (ready.clone(), s.clone());
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(2));
                r2.store(true, Ordering::SeqCst);
                s2.wake();
            });
            s.sleep_unless(|| ready.load(Ordering::SeqCst));
            t.join().unwrap();
        }
        assert!(s.avg_gap_us.load(Ordering::Relaxed) > 300);
    }
}
