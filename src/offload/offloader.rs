//! One running backend with its completer and, for backends whose completions must be polled,
//! the poller thread; shutdown in the order that strands no request.

use crate::backend::{registry, Backend, ComputeFn};
use crate::completion::{Completer, OpKind, Request, Sleeper, Waiter};
use crate::rsa::RsaKey;
use crate::settings::OffloadConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A running backend, its completer, and (for polled backends) the poller thread.
pub struct Offloader {
    pub(super) backend: Box<dyn Backend>,
    completer: Arc<Completer>,
    poller_sleeper: Arc<Sleeper>,
    poller: Mutex<Option<JoinHandle<()>>>,
    /// Shutdown has begun: submits are refused (callers compute inline).
    pub(super) stop: AtomicBool,
    /// `Backend::shutdown` has returned: nothing more can be accepted, so once nothing is in
    /// flight the poller may leave.
    backend_stopped: AtomicBool,
    /// Process that started this offloader (a forked child starts its own).
    pub(super) pid: u32,
}

impl Offloader {
    /// Starts an offloader with the CPU backend computing with `compute`.
    pub fn start_cpu(cfg: &OffloadConfig, compute: ComputeFn) -> std::io::Result<Arc<Offloader>> {
        let completer = Arc::new(Completer::new());
        let backend = registry::start_cpu(cfg, completer.clone(), compute)?;
        Offloader::start_with(backend, completer)
    }

    /// Starts an offloader around a backend; a poller thread is started when the backend needs
    /// polling (its completions are not delivered by the backend itself).
    pub fn start_with(
        backend: Box<dyn Backend>,
        completer: Arc<Completer>,
    ) -> std::io::Result<Arc<Offloader>> {
        let polled = backend.needs_polling();
        let pool = Arc::new(Offloader {
            backend,
            completer,
            poller_sleeper: Arc::new(Sleeper::new()),
            poller: Mutex::new(None),
            stop: AtomicBool::new(false),
            backend_stopped: AtomicBool::new(false),
            pid: std::process::id(),
        });
        if polled {
            let p = pool.clone();
            match crate::ffi::fork::spawn_settled("kae-poller".into(), move || p.poller_loop()) {
                Ok(h) => *pool.poller.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
                Err(e) => {
                    pool.backend.shutdown();
                    pool.backend.after_poller_stopped();
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    pub fn high_water(&self) -> usize {
        self.backend.high_water()
    }

    pub fn submit(&self, req: Request) -> Result<(), Request> {
        if self.stop.load(Ordering::Acquire) {
            return Err(req);
        }
        let r = self.backend.submit(req);
        if r.is_ok() && self.backend.needs_polling() {
            self.poller_sleeper.wake();
        }
        r
    }

    /// The poller of backends that must be polled: polls while requests are in flight,
    /// sleeps (no CPU) when none are.
    fn poller_loop(&self) {
        self.poller_sleeper.register_current();
        // Short pauses between polls should be short.
        crate::ffi::sched::tighten_timer_slack();
        let mut done: Vec<Request> = Vec::with_capacity(64);
        loop {
            // A panicking poll must not end the poller: every later completion would be lost.
            let n = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.backend.poll(&mut done, 64)
            }))
            .unwrap_or_else(|_| {
                crate::logging::warn_rate_limited(
                    "poller-panic",
                    format_args!("the {} backend's poll panicked", self.backend.name()),
                );
                0
            });
            self.completer.complete_all(&mut done);
            if n > 0 {
                continue;
            }
            // Not on `stop` alone: a submit that passed its check just before `stop` was set
            // may still be accepted until `Backend::shutdown` returns.
            if self.backend_stopped.load(Ordering::Acquire) && self.backend.in_flight() == 0 {
                return;
            }
            if self.backend.in_flight() > 0 || self.backend.awaits_late_completions() {
                // Hardware needs time: pause between empty polls instead of spinning.
                match self.backend.poll_pause() {
                    Some(d) if !d.is_zero() => std::thread::sleep(d),
                    _ => std::thread::yield_now(),
                }
                continue;
            }
            let ready =
                || self.backend.in_flight() > 0 || self.backend_stopped.load(Ordering::Acquire);
            if self.backend.poll_pause().is_some() {
                // Hardware: nothing arrives sooner than a park takes; idle, it uses no CPU.
                self.poller_sleeper.park_unless(ready);
            } else {
                self.poller_sleeper.sleep_unless(ready);
            }
        }
    }

    /// Stops the backend and the poller; queued requests complete with an error, and jobs
    /// waiting for a free slot are woken (their retry is refused and they compute inline).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.backend.shutdown();
        self.backend_stopped.store(true, Ordering::Release);
        self.poller_sleeper.wake();
        if let Some(h) = self.poller.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        self.backend.after_poller_stopped();
        self.completer.wake_all_slot_waiters();
    }

    /// Whether shutdown has begun (a refused submit then means "compute it yourself").
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(super) fn wait_for_slot(&self, w: &Arc<Waiter>) {
        self.completer.wait_for_slot(w);
    }

    pub(super) fn cancel_slot_wait(&self, w: &Arc<Waiter>) {
        self.completer.cancel_slot_wait(w);
    }
}

impl Offloader {
    /// Whether the backend takes this operation for this key now (what it receives).
    pub(super) fn takes(&self, key: &RsaKey, kind: OpKind) -> bool {
        self.backend.takes(key, self.wire_kind(kind))
    }

    /// What the backend receives for `kind`: private operations arrive blinded at backends
    /// whose results the caller checks.
    pub(super) fn wire_kind(&self, kind: OpKind) -> OpKind {
        if kind == OpKind::Private && self.backend.blinds_on_caller() {
            OpKind::ExponentiateBlinded
        } else {
            kind
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::WaiterWake;
    use crate::error::KaeError;
    use crate::offload::testing::*;
    use crate::offload::wait::run_blocking;
    use std::time::{Duration, Instant};

    /// A worker takes several queued requests at once, but each completes as soon as it is
    /// computed: the first is answered while the others still wait for the worker.
    #[test]
    fn the_first_request_of_a_batch_does_not_wait_for_the_others() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 1,
            depth: 16,
            ..OffloadConfig::default()
        };
        // A first request keeps the worker busy (2 ms) while 8 more queue up behind it: the
        // worker then takes those 8 as one batch.
        let pool = Offloader::start_cpu(&cfg, slow_echo).unwrap();
        let k = key();
        let blocker = Arc::new(Waiter::new(None));
        let req = Request::new(
            OpKind::Private,
            k.clone(),
            &input(k.size(), 99),
            blocker.clone(),
        );
        assert!(pool.submit(req).is_ok());
        let waiters: Vec<Arc<Waiter>> = (0..8).map(|_| Arc::new(Waiter::new(None))).collect();
        for (i, w) in waiters.iter().enumerate() {
            let req = Request::new(
                OpKind::Private,
                k.clone(),
                &input(k.size(), i as u8),
                w.clone(),
            );
            assert!(pool.submit(req).is_ok());
        }
        let t0 = Instant::now();
        while !waiters[0].is_done() {
            assert!(t0.elapsed() < HANG, "the first request never finished");
            std::thread::sleep(Duration::from_micros(100));
        }
        let still_waiting = waiters.iter().filter(|w| !w.is_done()).count();
        assert!(
            still_waiting >= 6,
            "the first request of the batch was answered only with the rest of it ({still_waiting} left)"
        );
        blocker.block_until_done();
        for w in &waiters {
            w.block_until_done();
        }
        pool.shutdown();
    }

    /// A backend whose completions must be polled (as hardware queues are): exercises the
    /// poller thread.
    struct PolledEcho {
        /// Requests waiting to be polled, and whether the backend was shut down.
        pending: Mutex<(std::collections::VecDeque<Request>, bool)>,
        in_flight: std::sync::atomic::AtomicUsize,
    }

    impl Backend for PolledEcho {
        fn name(&self) -> &'static str {
            "polled-echo"
        }
        fn submit(&self, req: Request) -> Result<(), Request> {
            let mut p = self.pending.lock().unwrap();
            if p.1 {
                return Err(req);
            }
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            p.0.push_back(req);
            Ok(())
        }
        fn poll(&self, out: &mut Vec<Request>, max: usize) -> usize {
            let mut p = self.pending.lock().unwrap();
            let n = p.0.len().min(max);
            for mut r in p.0.drain(..n) {
                echo(&mut r);
                out.push(r);
            }
            self.in_flight.fetch_sub(n, Ordering::AcqRel);
            n
        }
        fn in_flight(&self) -> usize {
            self.in_flight.load(Ordering::Acquire)
        }
        fn needs_polling(&self) -> bool {
            true
        }
        fn shutdown(&self) {
            self.pending.lock().unwrap().1 = true;
        }
    }

    #[test]
    fn polled_backend_completes_through_the_poller_thread() {
        let _serial = serial();
        let backend = PolledEcho {
            pending: Mutex::new(Default::default()),
            in_flight: Default::default(),
        };
        let pool = Offloader::start_with(Box::new(backend), Arc::new(Completer::new())).unwrap();
        assert!(
            pool.poller.lock().unwrap().is_some(),
            "a polled backend gets a poller thread"
        );
        let k = key();
        for tag in 1..40u8 {
            let mut out = vec![0u8; k.size()];
            run_blocking(&pool, OpKind::Private, &k, &input(k.size(), tag), &mut out).unwrap();
            assert_eq!(out, input(k.size(), tag));
        }
        std::thread::sleep(Duration::from_millis(50));
        let before = pool_threads_cpu("kae-poller");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            pool_threads_cpu("kae-poller") - before < 0.03,
            "an idle poller sleeps"
        );
        pool.shutdown();
        assert!(
            pool.poller.lock().unwrap().is_none(),
            "shutdown joins the poller"
        );
    }

    #[test]
    fn cpu_pool_has_no_poller_thread() {
        let _serial = serial();
        let pool = Offloader::start_cpu(
            &OffloadConfig {
                queues: 1,
                depth: 4,
                ..OffloadConfig::default()
            },
            echo,
        )
        .unwrap();
        assert!(
            pool.poller.lock().unwrap().is_none(),
            "CPU workers complete requests themselves"
        );
        pool.shutdown();
    }

    #[test]
    fn shutdown_with_requests_in_flight_does_not_hang() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 1,
            depth: 64,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, slow_echo).unwrap();
        let k = key();
        let waiters: Vec<Arc<Waiter>> = (0..20)
            .map(|i| {
                let w = Arc::new(Waiter::new(Some(
                    WaiterWake::Thread(std::thread::current()),
                )));
                let req = Request::new(
                    OpKind::Private,
                    k.clone(),
                    &input(k.size(), i as u8 + 1),
                    w.clone(),
                );
                assert!(pool.submit(req).is_ok());
                w
            })
            .collect();
        let start = Instant::now();
        pool.shutdown();
        assert!(start.elapsed() < HANG);
        // Every waiter got an outcome: computed, or an error for what was still queued.
        assert!(waiters.iter().all(|w| w.is_done()));
        assert!(
            waiters
                .iter()
                .any(|w| matches!(w.take(), Some(o) if o.result.is_err())),
            "queued requests fail at shutdown"
        );
        // A stopped offloader refuses new work instead of accepting it into the void.
        let w = Arc::new(Waiter::new(Some(
            WaiterWake::Thread(std::thread::current()),
        )));
        assert!(pool
            .submit(Request::new(
                OpKind::Private,
                k.clone(),
                &input(k.size(), 1),
                w
            ))
            .is_err());
    }

    /// Input byte 1 marks a request whose computation panics.
    const PANIC_MARK: u8 = 0xEE;

    fn echo_or_panic(r: &mut Request) {
        if r.input[1] == PANIC_MARK {
            panic!("injected panic in a pool computation");
        }
        echo(r);
    }

    #[test]
    fn a_panicking_computation_fails_its_request_and_the_worker_carries_on() {
        let _serial = serial();
        // One worker, so the requests queued behind the panicking one depend on it surviving.
        let cfg = OffloadConfig {
            queues: 1,
            depth: 16,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, echo_or_panic).unwrap();
        let k = key();
        let inputs: Vec<Vec<u8>> = (1..=12u8)
            .map(|t| {
                let mut v = input(k.size(), t);
                if t == 4 || t == 9 {
                    v[1] = PANIC_MARK;
                }
                v
            })
            .collect();
        let waiters: Vec<Arc<Waiter>> = inputs
            .iter()
            .map(|m| {
                let w = Arc::new(Waiter::new(None));
                let req = Request::new(OpKind::Private, k.clone(), m, w.clone());
                assert!(pool.submit(req).is_ok(), "queue has room for all 12");
                w
            })
            .collect();
        for (i, (w, m)) in waiters.iter().zip(&inputs).enumerate() {
            assert!(
                w.done_within(HANG),
                "request {i} never completed (a panic killed its worker?)"
            );
            let crate::completion::Outcome { result, output, .. } = w.take().unwrap();
            if m[1] == PANIC_MARK {
                assert_eq!(result, Err(KaeError::Panic), "request {i}");
                assert!(
                    output.iter().all(|&b| b == 0),
                    "a failed request hands back no partial output"
                );
            } else {
                assert_eq!(result, Ok(()), "request {i}");
                assert_eq!(&output[..], &m[..], "request {i}");
            }
        }
        // The worker is still there for new work.
        let mut out = vec![0u8; k.size()];
        run_blocking(&pool, OpKind::Private, &k, &input(k.size(), 77), &mut out).unwrap();
        assert_eq!(out, input(k.size(), 77));
        pool.shutdown();
    }

    /// What became of one submission made while the offloader shut down.
    #[derive(Debug, PartialEq)]
    enum Fate {
        Completed,
        Refused,
        Stranded,
    }

    /// Submits one request (retrying while the queues are full but the offloader runs) and waits
    /// for it: a request the offloader accepted must complete, with a result or an error.
    fn submit_once(pool: &Offloader, k: &Arc<RsaKey>, tag: u8) -> Fate {
        let w = Arc::new(Waiter::new(None));
        let mut req = Request::new(OpKind::Private, k.clone(), &input(k.size(), tag), w.clone());
        loop {
            match pool.submit(req) {
                Ok(()) => break,
                Err(back) if pool.stop.load(Ordering::Acquire) => {
                    drop(back);
                    return Fate::Refused;
                }
                Err(back) => {
                    req = back;
                    std::thread::yield_now();
                }
            }
        }
        if w.done_within(HANG) {
            Fate::Completed
        } else {
            Fate::Stranded
        }
    }

    /// Resets the submit stall hook even when the test fails.
    struct StallHook;
    impl StallHook {
        fn set(us: u64) -> StallHook {
            crate::backend::cpu::SUBMIT_STALL_US.store(us, Ordering::Relaxed);
            StallHook
        }
    }
    impl Drop for StallHook {
        fn drop(&mut self) {
            crate::backend::cpu::SUBMIT_STALL_US.store(0, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_submission_held_up_across_shutdown_is_refused_not_stranded() {
        let _serial = serial();
        let k = key();
        let pool = Offloader::start_cpu(
            &OffloadConfig {
                queues: 2,
                depth: 8,
                ..OffloadConfig::default()
            },
            echo,
        )
        .unwrap();
        // Every submission stalls 30 ms on its way to a queue lock; shutdown runs meanwhile.
        let _hook = StallHook::set(30_000);
        let fates: Vec<Fate> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u8)
                .map(|t| {
                    let (pool, k) = (&pool, &k);
                    s.spawn(move || submit_once(pool, k, t + 1))
                })
                .collect();
            std::thread::sleep(Duration::from_millis(5));
            pool.shutdown();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            !fates.contains(&Fate::Stranded),
            "a request accepted after shutdown was never completed: {fates:?}"
        );
        assert!(fates.contains(&Fate::Refused), "{fates:?}");
    }

    #[test]
    fn teardown_racing_submissions_strands_nothing() {
        let _serial = serial();
        let k = key();
        let mut seen = [0usize; 3];
        for round in 0..30u64 {
            let pool = Offloader::start_cpu(
                &OffloadConfig {
                    queues: 2,
                    depth: 2,
                    ..OffloadConfig::default()
                },
                echo,
            )
            .unwrap();
            let fates: Vec<Fate> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..6u8)
                    .map(|t| {
                        let (pool, k) = (&pool, &k);
                        s.spawn(move || {
                            let mut f = Vec::new();
                            loop {
                                let fate = submit_once(pool, k, t + 1);
                                let last = fate != Fate::Completed;
                                f.push(fate);
                                if last {
                                    return f;
                                }
                            }
                        })
                    })
                    .collect();
                std::thread::sleep(Duration::from_micros(200 + round * 100));
                pool.shutdown();
                hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            for f in &fates {
                seen[match f {
                    Fate::Completed => 0,
                    Fate::Refused => 1,
                    Fate::Stranded => 2,
                }] += 1;
            }
        }
        assert_eq!(
            seen[2], 0,
            "stranded requests (completed, refused, stranded): {seen:?}"
        );
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
    }

    #[test]
    fn idle_pool_threads_sleep() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 4,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, echo).unwrap();
        let k = key();
        let mut out = vec![0u8; k.size()];
        run_blocking(&pool, OpKind::Private, &k, &input(k.size(), 3), &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // All worker threads parked: their CPU time barely moves while idle.
        let before = pool_threads_cpu("kae-cpu-");
        std::thread::sleep(Duration::from_millis(300));
        let used = pool_threads_cpu("kae-cpu-") - before;
        assert!(used < 0.03, "idle pool threads used {used:.3}s CPU in 0.3s");
        pool.shutdown();
    }
}
