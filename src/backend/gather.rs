//! Gathering requests into batches without idle-priority threads or timers on the fast path.
//!
//! Requests wait in one pending list. The submit that makes a size class reach a full batch
//! takes that batch out and computes it on its own thread (the application's thread, inside
//! its async job): nothing waits for a scheduler to find a worker CPU. What never fills is
//! computed by the flusher, an ordinary-priority thread that takes everything pending once
//! submissions stop arriving for a few of their usual gaps and the thread that submitted last
//! is not runnable (it waits for its jobs: nothing more is coming from it), and at the latest
//! [`MAX_WAIT`] after the first one: a bounded delay, also when every CPU is busy.
//!
//! When the submitter may run on more than one CPU and the flusher is idle, a full batch goes
//! to the flusher instead (`Shape::hand_off`): the submitter goes back to its application,
//! which fills the next batch meanwhile, so one process with many async jobs computes on two
//! CPUs. A busy flusher, or a submitter pinned to one CPU, computes as before.
//!
//! A caller with too little else in flight would only wait for company that never fills a
//! call (one connection, `-async_jobs 1` or 2): after [`SOLO_FLUSHES`] flushes in a row that
//! held fewer requests of each class than [`Shape::least`], all their submitters waiting for
//! them, [`Gather::wants`] sends lone requests back to be computed inline, and lets a probe
//! through now and then to notice when company returns: the first after [`PROBE_FIRST`] lone
//! requests, then twice as many after each probe that was flushed alone, up to [`PROBE_MAX`].
//! A server whose load comes and goes (HAProxy between bursts of handshakes) thus leaves solo
//! mode within a few requests, and a caller that really is alone pays for a probe rarely. A
//! submit that finds enough others of its class pending ends solo mode at once.

use crate::completion::{Completer, Request, Sleeper};
use crate::error::KaeError;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest a pending request waits for its batch to fill.
pub const MAX_WAIT: Duration = Duration::from_millis(2);
/// Shortest and longest quiet time (no new submission) after which the flusher takes what is
/// pending; between them, four times the recent gap between submissions.
const QUIET_MIN_US: u64 = 60;
const QUIET_MAX_US: u64 = 1_000;
/// Flushes in a row of requests that came alone (too few to be worth a call) after which
/// lone requests compute inline.
pub const SOLO_FLUSHES: u32 = 3;
/// In solo mode, lone requests before the first probe (a request gathered to notice company).
pub const PROBE_FIRST: u32 = 8;
/// Most lone requests between two probes: each probe flushed alone doubles the gap up to this.
pub const PROBE_MAX: u32 = 128;

/// Computes a batch (all requests of one call complete together afterwards).
pub type BatchFn = Arc<dyn Fn(&mut [Request]) + Send + Sync>;

/// What a gatherer needs to know about its requests.
pub struct Shape {
    /// The size class a request belongs to (requests of one class share a batch).
    pub class: fn(&Request) -> usize,
    /// Requests of `class` that make a full batch.
    pub full: fn(usize) -> usize,
    /// Fewest requests of `class` worth a batch: fewer are computed as if alone.
    pub least: fn(usize) -> usize,
    /// Most requests pending before submits are refused (the caller waits for a slot).
    pub depth: usize,
    /// Whether a full batch may go to the idle flusher (see the module comment).
    pub hand_off: bool,
}

struct Shared {
    pending: Mutex<Vec<Request>>,
    /// `pending.len()`, readable without the lock.
    len: AtomicUsize,
    /// Pending plus being computed.
    in_flight: AtomicUsize,
    high_water: AtomicUsize,
    stop: AtomicBool,
    flusher: Sleeper,
    /// The flusher is not computing (parked, or waiting for quiet); a submitter that clears
    /// it may hand it a full batch in `handed`.
    flusher_idle: AtomicBool,
    handed: Mutex<Option<Vec<Request>>>,
    has_handed: AtomicBool,
    /// Moving average (weight 1/4) of the gap between submissions that joined others, µs.
    gap_us: AtomicU64,
    /// When the last submission arrived, µs since `epoch`, and from which thread.
    last_submit_us: AtomicU64,
    last_submitter: AtomicI32,
    epoch: Instant,
    /// Consecutive flushes of a single request that came alone (nothing else was submitted
    /// since the flush before).
    solo: AtomicU32,
    /// Submissions since the flusher last took a batch.
    since_flush: AtomicU32,
    /// Lone requests refused since the last probe, and how many make the next one.
    refused: AtomicU32,
    probe_gap: AtomicU32,
    /// Tests: the flusher takes nothing while set (what is pending stays pending).
    #[cfg(test)]
    hold: AtomicBool,
    /// Tests: the flusher takes the last submitter as waiting, whatever the scheduler says (a
    /// test thread preempted on a loaded host is runnable while it means to wait).
    #[cfg(test)]
    assume_waiting: AtomicBool,
    /// Tests: how many times the flusher asked whether the submitter waits.
    #[cfg(test)]
    waits_asked: AtomicU32,
    shape: Shape,
    compute: BatchFn,
    completer: Arc<Completer>,
}

pub struct Gather {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

fn lock(m: &Mutex<Vec<Request>>) -> MutexGuard<'_, Vec<Request>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gather {
    /// Starts the flusher thread (named `name`).
    pub fn start(
        name: &str,
        shape: Shape,
        compute: BatchFn,
        completer: Arc<Completer>,
    ) -> std::io::Result<Gather> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::with_capacity(shape.depth)),
            len: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            flusher: Sleeper::new(),
            flusher_idle: AtomicBool::new(false),
            handed: Mutex::new(None),
            has_handed: AtomicBool::new(false),
            gap_us: AtomicU64::new(QUIET_MIN_US),
            last_submit_us: AtomicU64::new(0),
            last_submitter: AtomicI32::new(0),
            epoch: Instant::now(),
            solo: AtomicU32::new(0),
            since_flush: AtomicU32::new(0),
            refused: AtomicU32::new(0),
            probe_gap: AtomicU32::new(PROBE_FIRST),
            #[cfg(test)]
            hold: AtomicBool::new(false),
            #[cfg(test)]
            assume_waiting: AtomicBool::new(false),
            #[cfg(test)]
            waits_asked: AtomicU32::new(0),
            shape,
            compute,
            completer,
        });
        let s = shared.clone();
        let h = crate::ffi::fork::spawn_settled(name.to_string(), move || flusher_loop(&s))?;
        Ok(Gather {
            shared,
            flusher: Mutex::new(Some(h)),
        })
    }

    /// Whether a request should be gathered now; false means "compute it inline": nothing
    /// else is pending and recent requests came alone (except the probes).
    pub fn wants(&self) -> bool {
        let s = &self.shared;
        if s.solo.load(Ordering::Relaxed) < SOLO_FLUSHES || s.len.load(Ordering::Acquire) > 0 {
            return true;
        }
        let refused = s.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if refused < s.probe_gap.load(Ordering::Relaxed) {
            return false;
        }
        s.refused.store(0, Ordering::Relaxed);
        true
    }

    /// Queues `req`; when it completes a full batch of its class, computes that batch on the
    /// calling thread before returning. Hands the request back when the list is full or the
    /// gatherer stopped.
    pub fn submit(&self, mut req: Request) -> Result<(), Request> {
        let s = &self.shared;
        if s.stop.load(Ordering::Acquire) {
            return Err(req);
        }
        let class = (s.shape.class)(&req);
        let now = s.now_us();
        let mut pending = lock(&s.pending);
        // Under the lock `shutdown` drains under: pushed here means drained or computed.
        if s.stop.load(Ordering::Acquire) {
            return Err(req);
        }
        if pending.len() >= s.shape.depth {
            req.result = Err(KaeError::BackendFailure);
            return Err(req);
        }
        let was_empty = pending.is_empty();
        let same = 1 + pending
            .iter()
            .filter(|r| (s.shape.class)(r) == class)
            .count();
        if same >= (s.shape.least)(class) {
            s.company(); // enough to fill a call
        }
        if !was_empty {
            let gap = now.saturating_sub(s.last_submit_us.load(Ordering::Relaxed));
            let avg = s.gap_us.load(Ordering::Relaxed);
            s.gap_us
                .store(avg - avg / 4 + gap.min(QUIET_MAX_US) / 4, Ordering::Relaxed);
        }
        s.last_submit_us.store(now, Ordering::Relaxed);
        s.since_flush.fetch_add(1, Ordering::Relaxed);
        s.last_submitter
            .store(crate::ffi::sched::current_tid(), Ordering::Relaxed);
        pending.push(req);
        s.in_flight.fetch_add(1, Ordering::AcqRel);
        crate::stats::in_flight_add(1);
        let batch = if same >= (s.shape.full)(class) {
            take_class(&mut pending, s.shape.class, class)
        } else {
            Vec::new()
        };
        let len = pending.len();
        s.len.store(len, Ordering::Release);
        drop(pending);
        s.high_water.fetch_max(len + batch.len(), Ordering::Relaxed);
        crate::stats::note_queue_depth(len + batch.len());
        if !batch.is_empty() {
            if let Some(mut mine) = s.hand_off(batch) {
                s.run(&mut mine);
            }
        } else if was_empty {
            s.flusher.wake();
        }
        Ok(())
    }

    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Acquire)
    }

    pub fn high_water(&self) -> usize {
        self.shared.high_water.load(Ordering::Relaxed)
    }

    /// Stops the flusher; what is still pending completes with an error (its callers compute
    /// inline). Batches being computed by submitters complete normally.
    pub fn shutdown(&self) {
        let s = &self.shared;
        let mut rest = {
            let mut pending = lock(&s.pending);
            s.stop.store(true, Ordering::Release);
            s.len.store(0, Ordering::Release);
            std::mem::take(&mut *pending)
        };
        s.flusher.wake();
        if let Some(h) = self
            .flusher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = h.join();
        }
        // A batch handed over as the flusher stopped: computed here (it was accepted).
        if let Some(mut b) = s.take_handed() {
            s.run(&mut b);
        }
        for r in rest.iter_mut() {
            r.result = Err(KaeError::BackendFailure);
        }
        s.finish(&mut rest);
    }
}

/// Takes the requests of `class` out of `pending`, oldest first.
fn take_class(pending: &mut Vec<Request>, class: fn(&Request) -> usize, c: usize) -> Vec<Request> {
    let mut taken = Vec::new();
    let mut i = 0;
    while i < pending.len() {
        if class(&pending[i]) == c {
            taken.push(pending.remove(i));
        } else {
            i += 1;
        }
    }
    taken
}

impl Shared {
    /// Company came (enough requests of a class to fill a call): out of solo mode, and a
    /// later solo mode probes soon again. Written only when it changes (a submit's hot path).
    fn company(&self) {
        if self.solo.load(Ordering::Relaxed) != 0 {
            self.solo.store(0, Ordering::Relaxed);
            self.probe_gap.store(PROBE_FIRST, Ordering::Relaxed);
            self.refused.store(0, Ordering::Relaxed);
        }
    }

    /// Whether the thread that submitted last is not runnable: it waits for its requests, so
    /// nothing more is coming from it now.
    fn submitter_waits(&self) -> bool {
        #[cfg(test)]
        {
            self.waits_asked.fetch_add(1, Ordering::Relaxed);
            if self.assume_waiting.load(Ordering::Acquire) {
                return true;
            }
        }
        crate::ffi::sched::thread_is_runnable(self.last_submitter.load(Ordering::Relaxed))
            != Some(true)
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Parks the flusher for at most `d`, free meanwhile: a full batch handed over wakes it.
    fn park_free(&self, d: Duration) {
        self.flusher_idle.store(true, Ordering::Release);
        self.flusher
            .park_for(d, || self.has_handed.load(Ordering::Acquire));
        self.flusher_idle.store(false, Ordering::Release);
    }

    /// Quiet time after which the flusher takes what is pending.
    fn quiet(&self) -> Duration {
        let gap = self.gap_us.load(Ordering::Relaxed);
        Duration::from_micros((4 * gap).clamp(QUIET_MIN_US, QUIET_MAX_US))
    }

    /// Gives a full batch to the idle flusher when that can run it on another CPU; returns
    /// it when the caller must compute it.
    fn hand_off(&self, batch: Vec<Request>) -> Option<Vec<Request>> {
        if !self.shape.hand_off
            || !self.flusher_idle.load(Ordering::Acquire)
            || crate::ffi::sched::cpus_allowed() < 2
            || !self.flusher_idle.swap(false, Ordering::AcqRel)
        {
            return Some(batch);
        }
        let mut slot = self.handed.lock().unwrap_or_else(|e| e.into_inner());
        // Checked under the slot's lock: `shutdown` sets `stop` before it empties the slot.
        if self.stop.load(Ordering::Acquire) {
            return Some(batch);
        }
        *slot = Some(batch);
        self.has_handed.store(true, Ordering::Release);
        drop(slot);
        self.flusher.wake();
        None
    }

    fn take_handed(&self) -> Option<Vec<Request>> {
        if !self.has_handed.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self.handed.lock().unwrap_or_else(|e| e.into_inner());
        self.has_handed.store(false, Ordering::Release);
        slot.take()
    }

    /// Computes `batch` (a panic fails all of it) and completes it.
    fn run(&self, batch: &mut Vec<Request>) {
        let f = &self.compute;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(batch))).is_err() {
            for r in batch.iter_mut() {
                r.output.fill(0);
                r.result = Err(KaeError::Panic);
            }
            crate::logging::warn_rate_limited(
                "worker-panic",
                format_args!("a batch computation panicked; its requests fail, kae goes on"),
            );
        }
        self.finish(batch);
    }

    /// Out of flight, then completed: whoever the completion wakes sees consistent counts.
    fn finish(&self, batch: &mut Vec<Request>) {
        let n = batch.len();
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
        crate::stats::in_flight_sub(n);
        self.completer.complete_all(batch);
    }
}

fn flusher_loop(s: &Shared) {
    s.flusher.register_current();
    crate::ffi::sched::tighten_timer_slack();
    // Its wake-ups (a first request, a timer) must not interrupt a server pinned to the same
    // CPU: it has nothing to flush until that server waits anyway.
    crate::ffi::sched::no_wakeup_preemption();
    let mut batch: Vec<Request> = Vec::new();
    loop {
        s.flusher_idle.store(true, Ordering::Release);
        s.flusher.park_unless(|| {
            s.len.load(Ordering::Acquire) > 0
                || s.stop.load(Ordering::Acquire)
                || s.has_handed.load(Ordering::Acquire)
        });
        s.flusher_idle.store(false, Ordering::Release);
        if let Some(mut b) = s.take_handed() {
            s.run(&mut b);
            continue;
        }
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        let first = Instant::now();
        // Times in a row the quiet time had passed but the submitter was still working.
        let mut working = 0u32;
        loop {
            // Handed over while it waited for quiet, or as it left the park.
            if let Some(mut b) = s.take_handed() {
                s.run(&mut b);
            }
            if s.len.load(Ordering::Acquire) == 0 || s.stop.load(Ordering::Acquire) {
                break; // a submitter filled the batch and took it, or shutdown drains
            }
            #[cfg(test)]
            if s.hold.load(Ordering::Acquire) {
                // Held: flushes nothing, but is free for a full batch, as in its real wait.
                s.park_free(Duration::from_millis(5));
                continue;
            }
            let since_last = s
                .now_us()
                .saturating_sub(s.last_submit_us.load(Ordering::Relaxed));
            // A probe in solo mode asks whether company is there now: it waits the shortest
            // quiet time, and for its submitter to wait too (a server that goes on working
            // after it submitted is about to bring company: its next handshake).
            let probing = s.solo.load(Ordering::Relaxed) >= SOLO_FLUSHES;
            let quiet = if probing {
                Duration::from_micros(QUIET_MIN_US)
            } else {
                s.quiet()
            };
            let waited = first.elapsed();
            let quiet_passed = Duration::from_micros(since_last) >= quiet;
            let quiet_now = quiet_passed && s.submitter_waits();
            if quiet_now || waited >= MAX_WAIT {
                let submitted = {
                    let mut pending = lock(&s.pending);
                    batch.append(&mut pending);
                    s.len.store(0, Ordering::Release);
                    s.since_flush.swap(0, Ordering::Relaxed)
                };
                if batch.is_empty() {
                    break;
                }
                // Alone: too few of every class to be worth a call, all there was since the
                // last flush, and their submitter waiting for them (a flush forced by MAX_WAIT
                // while it was still runnable, preempted on a busy host or working on, is not).
                let too_few = |r: &Request| {
                    let class = (s.shape.class)(r);
                    batch.iter().filter(|o| (s.shape.class)(o) == class).count()
                        < (s.shape.least)(class)
                };
                if batch.iter().all(too_few) && submitted as usize == batch.len() && quiet_now {
                    let _ = s
                        .solo
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            Some(n.saturating_add(1))
                        });
                    if probing {
                        // A probe that found nobody: wait twice as long for the next.
                        let _ =
                            s.probe_gap
                                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |g| {
                                    Some(g.saturating_mul(2).min(PROBE_MAX))
                                });
                    }
                } else {
                    s.company();
                }
                s.run(&mut batch);
                break;
            }
            let left = if quiet_passed {
                // Its submitter works on (a server between handshakes): look again later each
                // time. Every look wakes this thread, on the server's own CPU when pinned, and
                // reads procfs; MAX_WAIT still bounds the wait.
                working = working.saturating_add(1);
                Duration::from_micros((QUIET_MIN_US / 2) << working.min(6))
            } else {
                working = 0;
                quiet.saturating_sub(Duration::from_micros(since_last))
            };
            let left = left.max(Duration::from_micros(QUIET_MIN_US / 2));
            s.park_free(left.min(MAX_WAIT.saturating_sub(waited)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::{OpKind, Waiter};
    use crate::rsa::{KeyType, RsaKey};

    fn key() -> Arc<RsaKey> {
        static K: std::sync::OnceLock<Arc<RsaKey>> = std::sync::OnceLock::new();
        K.get_or_init(|| {
            let e = crate::ffi::bn::BigNum::from_u64(65537).unwrap();
            Arc::new(crate::rsa::ops::generate(KeyType::Rsa, 1024, &e).unwrap())
        })
        .clone()
    }

    /// Each batch's size and the name of the thread that ran it.
    type Seen = Arc<Mutex<Vec<(usize, String)>>>;

    /// A gatherer whose batches record their size and the thread that ran them.
    fn gather(full: usize) -> (Gather, Seen) {
        gather_with(full, false)
    }

    fn gather_with(full: usize, hand_off: bool) -> (Gather, Seen) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let compute: BatchFn = Arc::new(move |b: &mut [Request]| {
            let who = std::thread::current().name().unwrap_or("?").to_string();
            log.lock().unwrap().push((b.len(), who));
            for r in b.iter_mut() {
                r.output.copy_from_slice(&r.input);
                r.result = Ok(());
            }
        });
        let shape = Shape {
            class: |_| 0,
            full: match full {
                4 => |_| 4,
                _ => |_| 8,
            },
            least: |_| 2,
            depth: 64,
            hand_off,
        };
        let g =
            Gather::start("kae-test-flush", shape, compute, Arc::new(Completer::new())).unwrap();
        (g, seen)
    }

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let t0 = Instant::now();
        while !done() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{what}: not within 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Submits one full batch of 4 from a thread named `name`, pinned to one CPU when `pin`,
    /// once the flusher is idle; returns the name of the thread that computed it.
    fn full_batch_from(
        g: &Gather,
        seen: &Mutex<Vec<(usize, String)>>,
        name: &str,
        pin: bool,
    ) -> String {
        wait_until("the flusher parks", || {
            g.shared.flusher_idle.load(Ordering::Acquire)
        });
        let k = key();
        // Held, the flusher takes no partial batch: a submitter blocked between two submits
        // (a page fault, a lock on a loaded host) would otherwise split the four.
        g.shared.hold.store(true, Ordering::Release);
        std::thread::scope(|sc| {
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn_scoped(sc, || {
                    if pin {
                        crate::ffi::sched::pin_current_thread_to_one_cpu().unwrap();
                    }
                    let ws: Vec<_> = (0..4u8)
                        .map(|t| {
                            let (r, w) = request(&k, t);
                            assert!(g.submit(r).is_ok());
                            w
                        })
                        .collect();
                    wait_until("the batch completes", || ws.iter().all(|w| w.is_done()));
                })
                .unwrap();
        });
        g.shared.hold.store(false, Ordering::Release);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "one batch: {seen:?}");
        assert_eq!(seen[0].0, 4);
        seen[0].1.clone()
    }

    #[test]
    fn a_full_batch_goes_to_the_idle_flusher_when_another_cpu_is_allowed() {
        if crate::ffi::sched::cpus_allowed() < 2 {
            eprintln!("skipped: this test runs on one CPU (nothing to hand a batch to)");
            return;
        }
        let (g, seen) = gather_with(4, true);
        assert_eq!(
            full_batch_from(&g, &seen, "kae-test-app", false),
            "kae-test-flush"
        );
        g.shutdown();
        // The same submitter pinned to one CPU computes its batch itself.
        let (g, seen) = gather_with(4, true);
        assert_eq!(
            full_batch_from(&g, &seen, "kae-test-pinned", true),
            "kae-test-pinned"
        );
        g.shutdown();
        // Without hand-off, never.
        let (g, seen) = gather_with(4, false);
        assert_eq!(
            full_batch_from(&g, &seen, "kae-test-app", false),
            "kae-test-app"
        );
        g.shutdown();
    }

    fn request(k: &Arc<RsaKey>, tag: u8) -> (Request, Arc<Waiter>) {
        let w = Arc::new(Waiter::new(None));
        let input = vec![tag; k.size()];
        (
            Request::new(OpKind::ExponentiateBlinded, k.clone(), &input, w.clone()),
            w,
        )
    }

    #[test]
    fn the_request_that_fills_a_batch_computes_it_on_its_own_thread() {
        let (g, seen) = gather(4);
        let k = key();
        let mut ws = Vec::new();
        for t in 0..4u8 {
            let (r, w) = request(&k, t);
            assert!(g.submit(r).is_ok());
            ws.push(w);
        }
        // The fourth submit returned with all four done: no thread hop, no wait.
        assert!(ws.iter().all(|w| w.is_done()));
        let me = std::thread::current().name().unwrap_or("?").to_string();
        assert_eq!(*seen.lock().unwrap(), vec![(4, me)]);
        for (t, w) in ws.iter().enumerate() {
            let crate::completion::Outcome {
                result: res,
                output: out,
                ..
            } = w.take().unwrap();
            assert!(res.is_ok());
            assert!(out.iter().all(|&b| b == t as u8));
        }
        assert_eq!(g.in_flight(), 0);
        g.shutdown();
    }

    #[test]
    fn a_partial_batch_is_flushed_within_the_bounded_delay_even_on_a_busy_machine() {
        let (g, seen) = gather(8);
        let k = key();
        // Busy loops on every CPU, at the flusher's own priority.
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let busy: Vec<_> = (0..cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let (r1, w1) = request(&k, 1);
        let (r2, w2) = request(&k, 2);
        let t = Instant::now();
        assert!(g.submit(r1).is_ok());
        assert!(g.submit(r2).is_ok());
        // MAX_WAIT plus scheduling; a starved idle-priority thread never got here.
        let done =
            w1.done_within(Duration::from_secs(20)) && w2.done_within(Duration::from_secs(20));
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        busy.into_iter().for_each(|h| h.join().unwrap());
        assert!(done, "partial batch not flushed under load");
        let s = seen.lock().unwrap().clone();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].0, 2);
        assert_eq!(s[0].1, "kae-test-flush");
        println!("partial batch of 2 flushed after {took:?} with {cpus} busy loops");
        g.shutdown();
    }

    /// Lone requests until `g` is in solo mode. A flush forced while this thread was runnable
    /// (a loaded host) does not count as alone: they go on until SOLO_FLUSHES of them did (a
    /// few more at most).
    fn until_solo(g: &Gather, k: &Arc<RsaKey>) {
        let mut lone = 0;
        while g.shared.solo.load(Ordering::Relaxed) < SOLO_FLUSHES {
            assert!(
                lone < 10 * SOLO_FLUSHES,
                "lone requests never counted as alone"
            );
            let (r, w) = request(k, lone as u8);
            assert!(g.wants());
            assert!(g.submit(r).is_ok());
            assert!(w.done_within(Duration::from_secs(20)));
            lone += 1;
        }
    }

    #[test]
    fn lone_requests_go_inline_after_solo_flushes_and_company_ends_it() {
        let (g, _seen) = gather(8);
        let k = key();
        assert!(g.wants());
        until_solo(&g, &k);
        // From here this thread means to wait for each of its requests.
        g.shared.assume_waiting.store(true, Ordering::Release);
        // Solo now: most lone requests are refused, one in PROBE_FIRST is let through while
        // no probe is flushed alone.
        let wanted = (0..PROBE_FIRST * 4).filter(|_| g.wants()).count();
        assert_eq!(wanted, 4);
        // Each probe flushed alone doubles the gap before the next, up to PROBE_MAX.
        let mut gaps = Vec::new();
        let mut expected = Vec::new();
        let mut gap = PROBE_FIRST;
        for t in 0..6u8 {
            let mut asked = 1;
            while !g.wants() {
                asked += 1;
                assert!(asked <= 2 * PROBE_MAX, "no probe in {asked} lone requests");
            }
            gaps.push(asked);
            expected.push(gap);
            gap = (2 * gap).min(PROBE_MAX);
            let (r, w) = request(&k, 200 + t);
            assert!(g.submit(r).is_ok());
            assert!(w.done_within(Duration::from_secs(20)));
        }
        assert_eq!(gaps, expected);
        // A probe that finds company ends solo mode at once (the flusher held meanwhile: a
        // probe is flushed after 60 µs, which a loaded host can take between two lines).
        let (r1, w1) = request(&k, 1);
        let (r2, w2) = request(&k, 2);
        g.shared.hold.store(true, Ordering::Release);
        assert!(g.submit(r1).is_ok());
        assert!(g.wants(), "others pending: gather");
        assert!(g.submit(r2).is_ok());
        g.shared.hold.store(false, Ordering::Release);
        assert!(w1.done_within(Duration::from_secs(20)) && w2.done_within(Duration::from_secs(20)));
        assert!(g.wants(), "company ended solo mode");
        assert_eq!(
            g.shared.probe_gap.load(Ordering::Relaxed),
            PROBE_FIRST,
            "a later solo mode probes soon again"
        );
        g.shutdown();
    }

    #[test]
    fn a_probe_whose_submitter_goes_on_working_ends_solo_mode() {
        let (g, _seen) = gather(8);
        let k = key();
        until_solo(&g, &k);
        let mut asked = 1;
        while !g.wants() {
            asked += 1;
            assert!(asked <= PROBE_FIRST, "no probe after {asked} lone requests");
        }
        // A server between handshakes: its thread stays runnable while the probe waits, so
        // the probe waits with it (at most MAX_WAIT) and does not count as alone.
        let (r, w) = request(&k, 7);
        assert!(g.submit(r).is_ok());
        let t0 = Instant::now();
        while !w.is_done() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the probe was never flushed"
            );
            std::hint::spin_loop();
        }
        assert_eq!(
            g.shared.solo.load(Ordering::Relaxed),
            0,
            "still in solo mode"
        );
        assert!(g.wants());
        g.shutdown();
    }

    #[test]
    fn the_flusher_looks_at_a_working_submitter_less_and_less_often() {
        let (g, _seen) = gather(8);
        let k = key();
        let (r, w) = request(&k, 3);
        assert!(g.submit(r).is_ok());
        // This thread spins (runnable) until its request is done: the flusher waits for it
        // to wait, up to MAX_WAIT. Looking every QUIET_MIN_US / 2 meant about 60 looks.
        let t0 = Instant::now();
        while !w.is_done() {
            assert!(t0.elapsed() < Duration::from_secs(20), "never flushed");
            std::hint::spin_loop();
        }
        let asked = g.shared.waits_asked.load(Ordering::Relaxed);
        assert!(asked <= 12, "the flusher looked {asked} times");
        g.shutdown();
    }

    /// A gatherer of one class, 8 requests to a call, `least` worth one, no hand-off; each
    /// batch is shown to `record`, then answered.
    fn one_class(
        name: &str,
        least: fn(usize) -> usize,
        record: impl Fn(&[Request]) + Send + Sync + 'static,
    ) -> Gather {
        let compute: BatchFn = Arc::new(move |b: &mut [Request]| {
            record(b);
            for r in b.iter_mut() {
                r.result = Ok(());
            }
        });
        let shape = Shape {
            class: |_| 0,
            full: |_| 8,
            least,
            depth: 64,
            hand_off: false,
        };
        Gather::start(name, shape, compute, Arc::new(Completer::new())).unwrap()
    }

    #[test]
    fn the_flusher_runs_without_wakeup_preemption() {
        let policy = Arc::new(Mutex::new(None));
        let log = policy.clone();
        let g = one_class(
            "kae-test-policy",
            |_| 1,
            move |_| {
                *log.lock().unwrap() = Some(crate::ffi::sched::current_policy());
            },
        );
        g.shared.assume_waiting.store(true, Ordering::Release);
        // One request of eight: the flusher computes it.
        let (r, w) = request(&key(), 1);
        assert!(g.submit(r).is_ok());
        assert!(w.done_within(Duration::from_secs(20)), "never flushed");
        assert_eq!(*policy.lock().unwrap(), Some(libc::SCHED_BATCH));
        g.shutdown();
    }

    #[test]
    fn requests_too_few_to_fill_a_call_go_inline_like_lone_ones() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let g = one_class(
            "kae-test-few",
            |_| 3,
            move |b| log.lock().unwrap().push(b.len()),
        );
        let k = key();
        // Pairs (two async jobs): each flush holds 2, fewer than the 3 worth a call. The
        // flusher is held while a pair arrives (a loaded host may pause this thread between
        // the two submits); a flush forced while this thread was runnable does not count as
        // alone, so pairs go on until SOLO_FLUSHES of them did (a few more at most).
        let mut pairs = 0;
        while g.shared.solo.load(Ordering::Relaxed) < SOLO_FLUSHES {
            assert!(pairs < 10 * SOLO_FLUSHES, "pairs never counted as alone");
            let (r1, w1) = request(&k, 2 * pairs as u8);
            let (r2, w2) = request(&k, 2 * pairs as u8 + 1);
            assert!(g.wants());
            g.shared.hold.store(true, Ordering::Release);
            assert!(g.submit(r1).is_ok() && g.submit(r2).is_ok());
            g.shared.hold.store(false, Ordering::Release);
            assert!(w1.done_within(Duration::from_secs(20)));
            assert!(w2.done_within(Duration::from_secs(20)));
            pairs += 1;
        }
        assert!(
            seen.lock().unwrap().iter().all(|&n| n == 2),
            "{:?}",
            seen.lock().unwrap()
        );
        let wanted = (0..PROBE_FIRST * 4).filter(|_| g.wants()).count();
        assert_eq!(
            wanted, 4,
            "pairs that never fill a call compute inline but for probes"
        );
        // A probe meeting one other request is still too few: solo mode stays (this thread
        // waits for both)...
        g.shared.assume_waiting.store(true, Ordering::Release);
        let (r1, w1) = request(&k, 100);
        let (r2, w2) = request(&k, 101);
        assert!(g.submit(r1).is_ok() && g.submit(r2).is_ok());
        assert!(w1.done_within(Duration::from_secs(20)) && w2.done_within(Duration::from_secs(20)));
        // (and, flushed alone while probing, doubled the gap before the next probe)
        let wanted = (0..2 * PROBE_FIRST).filter(|_| g.wants()).count();
        assert_eq!(wanted, 1, "one more pair did not end solo mode");
        // ...three of a class end it at once (the flusher held while they arrive).
        g.shared.hold.store(true, Ordering::Release);
        let reqs: Vec<_> = (0..3).map(|t| request(&k, 110 + t)).collect();
        let waiters: Vec<_> = reqs
            .into_iter()
            .map(|(r, w)| {
                assert!(g.submit(r).is_ok());
                w
            })
            .collect();
        assert!(g.wants(), "company enough to fill a call ended solo mode");
        g.shared.hold.store(false, Ordering::Release);
        for w in waiters {
            assert!(w.done_within(Duration::from_secs(20)));
        }
        g.shutdown();
    }

    #[test]
    fn shutdown_fails_what_is_pending_and_refuses_more() {
        let (g, _seen) = gather(8);
        let k = key();
        // Hold the flusher off (it parks until woken, and nothing wakes it): the request is
        // still pending when shutdown drains.
        g.shared.stop.store(false, Ordering::Release);
        let (r, w) = request(&k, 7);
        {
            let mut p = lock(&g.shared.pending);
            p.push(r);
            g.shared.in_flight.fetch_add(1, Ordering::AcqRel);
            crate::stats::in_flight_add(1);
        }
        g.shutdown();
        assert!(w.is_done(), "drained by shutdown");
        assert_eq!(w.take().unwrap().result, Err(KaeError::BackendFailure));
        assert_eq!(g.in_flight(), 0);
        let (r, _) = request(&k, 8);
        assert!(g.submit(r).is_err());
    }

    #[test]
    fn a_full_list_hands_the_request_back() {
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        let compute: BatchFn = Arc::new(move |b: &mut [Request]| {
            s2.fetch_add(b.len(), Ordering::Relaxed);
            b.iter_mut().for_each(|r| r.result = Ok(()));
        });
        let shape = Shape {
            class: |_| 0,
            full: |_| 8,
            least: |_| 2,
            depth: 2,
            hand_off: false,
        };
        let g = Gather::start("kae-test-full", shape, compute, Arc::new(Completer::new())).unwrap();
        g.shared.gap_us.store(QUIET_MAX_US, Ordering::Relaxed);
        let k = key();
        let (a, _) = request(&k, 1);
        let (b, _) = request(&k, 2);
        let (c, _) = request(&k, 3);
        assert!(g.submit(a).is_ok());
        assert!(g.submit(b).is_ok());
        let back = g.submit(c).unwrap_err();
        assert!(back.result.is_err());
        g.shutdown();
    }
}
