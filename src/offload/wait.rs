//! Waiting for an offloaded request: the ASYNC job pauses until its wake-up fires (and is
//! resumed), or the calling thread blocks. A request the stopping offloader refuses or cancels
//! is computed inline.

use super::inline::inline;
use super::offloader::Offloader;
use crate::completion::{OpKind, Outcome, Request, Waiter, WaiterWake};
use crate::error::{KaeError, KaeResult};
use crate::ffi::async_job::AsyncJob;
use crate::rsa::RsaKey;
use crate::stats;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Consecutive resumes without a result after which we stop trusting pause (e.g. the
/// application blocked pausing with ASYNC_block_pause, which makes pause return at once) and
/// wait on the thread instead.
const MAX_SPURIOUS: u32 = 1000;

/// Submits and pauses the job until done.
pub(super) fn run_async(
    pool: &Offloader,
    job: &AsyncJob,
    kind: OpKind,
    key: &Arc<RsaKey>,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    if out.len() != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let waiter = Arc::new(Waiter::new(None));
    let mut req = Request::new(kind, key.clone(), input, waiter.clone());
    // 1. Submit. Every queue full: register for a free slot and retry once (a slot may have
    //    freed before we registered); only when the retry fails too, attach our wake-up and
    //    pause at once. Attaching earlier would put a wait fd in the ASYNC_WAIT_CTX that no
    //    pause announces whenever the retry succeeds. A slot wake-up that comes before the
    //    attachment is kept by the waiter and fires at attachment.
    let mut registered = false;
    loop {
        req = match pool.submit(req) {
            Ok(()) => break,
            Err(back) => back,
        };
        if pool.stopping() {
            return fall_back(pool, &waiter, registered, kind, key, input, out);
        }
        stats::note_queue_full();
        pool.wait_for_slot(&waiter);
        registered = true;
        req = match pool.submit(req) {
            Ok(()) => break,
            Err(back) => back,
        };
        if pool.stopping() {
            return fall_back(pool, &waiter, registered, kind, key, input, out);
        }
        waiter.set_wake(WaiterWake::Job(job.wake()?));
        job.set_status(crate::ffi::sys::ASYNC_STATUS_EAGAIN);
        stats::note_pause();
        job.pause()?;
        job.drain_wait_fd();
        job.set_status(crate::ffi::sys::ASYNC_STATUS_OK);
    }
    if registered {
        pool.cancel_slot_wait(&waiter);
        waiter.clear_missed();
    }
    // 2. Wait for the result. The wake-up is attached only now, so an operation that is
    //    already done never announces a wait fd it will not pause on; once attached, pause at
    //    least once (set_wake fires at once if the result landed in between).
    if !waiter.is_done() {
        waiter.set_wake(WaiterWake::Job(job.wake()?));
        let mut spurious = 0u32;
        loop {
            stats::note_pause();
            job.pause()?;
            job.drain_wait_fd();
            if waiter.is_done() {
                break;
            }
            stats::note_spurious();
            spurious += 1;
            if spurious >= MAX_SPURIOUS {
                waiter.block_until_done();
            }
        }
    }
    let Outcome { result, output } = waiter.take().ok_or(KaeError::Internal)?;
    if result.is_err() && pool.stopping() {
        // Failed because the offloader shut down under it (queued requests are cancelled).
        return fall_back(pool, &waiter, false, kind, key, input, out);
    }
    if kind != OpKind::ExponentiateBlinded {
        stats::record(kind, stats::Path::Offload, result.is_ok());
    }
    result?;
    out.copy_from_slice(&output);
    Ok(())
}

/// The offloader is shutting down: compute on the caller's thread instead.
fn fall_back(
    pool: &Offloader,
    waiter: &Arc<Waiter>,
    registered: bool,
    kind: OpKind,
    key: &RsaKey,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    if registered {
        pool.cancel_slot_wait(waiter);
    }
    stats::note_fallback();
    inline(kind, key, input, out)
}

/// Submits and blocks the calling thread until done (for hardware backends in sync mode and
/// for benchmarks of the queue round trip). Never used inside an ASYNC job.
pub fn run_blocking(
    pool: &Offloader,
    kind: OpKind,
    key: &Arc<RsaKey>,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    let waiter = Arc::new(Waiter::new(Some(
        WaiterWake::Thread(std::thread::current()),
    )));
    let mut req = Request::new(kind, key.clone(), input, waiter.clone());
    loop {
        match pool.submit(req) {
            Ok(()) => break,
            Err(back) => {
                if pool.stop.load(Ordering::Acquire) {
                    return Err(KaeError::BackendFailure);
                }
                req = back;
                pool.wait_for_slot(&waiter);
                std::thread::park_timeout(std::time::Duration::from_millis(1));
            }
        }
    }
    pool.cancel_slot_wait(&waiter);
    if pool.backend.needs_polling() {
        waiter.park_until_done(); // hardware: wait without spinning
    } else {
        waiter.block_until_done();
    }
    let Outcome { result, output } = waiter.take().ok_or(KaeError::Internal)?;
    result?;
    out.copy_from_slice(&output);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{self, Backend};
    use crate::completion::Completer;
    use crate::offload::testing::*;
    use crate::settings::OffloadConfig;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    #[test]
    fn round_trip_through_pool() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 4,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, echo).unwrap();
        let k = key();
        for tag in 1..50u8 {
            let mut out = vec![0u8; k.size()];
            run_blocking(&pool, OpKind::Private, &k, &input(k.size(), tag), &mut out).unwrap();
            assert_eq!(out, input(k.size(), tag));
        }
        pool.shutdown();
    }

    #[test]
    fn real_rsa_through_pool_matches_inline() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 8,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, backend::compute).unwrap();
        let k = key();
        let m = input(k.size(), 9);
        let mut a = vec![0u8; k.size()];
        run_blocking(&pool, OpKind::Private, &k, &m, &mut a).unwrap();
        assert_eq!(a, crate::rsa::ops::oracle_private(&k, &m));
        pool.shutdown();
    }

    #[test]
    fn depth_one_with_many_submitters_completes_everything() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 1,
            depth: 1,
            ..OffloadConfig::default()
        };
        let pool = Offloader::start_cpu(&cfg, slow_echo).unwrap();
        let k = key();
        std::thread::scope(|s| {
            for t in 0..6u8 {
                let pool = &pool;
                let k = &k;
                s.spawn(move || {
                    for i in 0..5u8 {
                        let tag = t * 10 + i + 1;
                        let mut out = vec![0u8; k.size()];
                        run_blocking(pool, OpKind::Private, k, &input(k.size(), tag), &mut out)
                            .unwrap();
                        assert_eq!(out, input(k.size(), tag));
                    }
                });
            }
        });
        assert!(pool.high_water() <= 1, "queue never deeper than its depth");
        pool.shutdown();
    }

    /// A backend whose submits follow a script: `false` = "every queue is full", `true` =
    /// accepted and completed at once (the result lands before the submitter could pause).
    struct Scripted {
        script: Mutex<std::collections::VecDeque<bool>>,
        submits: AtomicUsize,
    }

    impl Backend for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn submit(&self, mut req: Request) -> Result<(), Request> {
            self.submits.fetch_add(1, Ordering::AcqRel);
            if !self.script.lock().unwrap().pop_front().unwrap_or(true) {
                return Err(req);
            }
            echo(&mut req);
            req.complete();
            Ok(())
        }
        fn poll(&self, _out: &mut Vec<Request>, _max: usize) -> usize {
            0
        }
        fn in_flight(&self) -> usize {
            0
        }
        fn shutdown(&self) {}
    }

    fn scripted_pool(script: &[bool]) -> Arc<Offloader> {
        let b = Scripted {
            script: Mutex::new(script.iter().copied().collect()),
            submits: AtomicUsize::new(0),
        };
        Offloader::start_with(Box::new(b), Arc::new(Completer::new())).unwrap()
    }

    type JobOutcome = Arc<Mutex<Option<(KaeResult<()>, Vec<u8>)>>>;

    /// A job that runs one private operation through `run_async` on `pool`.
    fn pool_job(
        pool: &Arc<Offloader>,
        tag: u8,
    ) -> (crate::ffi::async_job::testing::TestJob, JobOutcome) {
        let outcome: JobOutcome = Arc::new(Mutex::new(None));
        let (pool, o) = (pool.clone(), outcome.clone());
        let k = key();
        let m = input(k.size(), tag);
        let job = crate::ffi::async_job::testing::TestJob::new(move |job| {
            let mut out = vec![0u8; k.size()];
            let r = run_async(&pool, job, OpKind::Private, &k, &m, &mut out);
            *o.lock().unwrap() = Some((r, out));
        });
        (job, outcome)
    }

    #[test]
    fn queue_full_then_accepted_without_a_pause_leaves_no_wait_fd() {
        use crate::ffi::async_job::testing::Step;
        let _serial = serial();
        let k = key();
        // Full, then the retry succeeds and the result is there at once: nothing to pause for.
        let pool = scripted_pool(&[false, true]);
        let (mut job, outcome) = pool_job(&pool, 5);
        assert_eq!(job.step(), Step::Finished, "no pause was needed");
        let (r, out) = outcome.lock().unwrap().take().unwrap();
        assert_eq!(r, Ok(()));
        assert_eq!(out, input(k.size(), 5));
        assert_eq!(
            job.fds(),
            0,
            "a wait fd was attached but the job never paused (HAProxy would crash on it)"
        );
    }

    #[test]
    fn queue_full_twice_pauses_with_the_wait_fd_attached_then_completes() {
        use crate::ffi::async_job::testing::Step;
        let _serial = serial();
        let k = key();
        let pool = scripted_pool(&[false, false, true]);
        let (mut job, outcome) = pool_job(&pool, 6);
        assert_eq!(job.step(), Step::Paused, "both tries found the queues full");
        assert_eq!(job.fds(), 1, "the pause announces the wait fd");
        assert!(outcome.lock().unwrap().is_none());
        assert_eq!(
            job.step(),
            Step::Finished,
            "the retry after the resume succeeds"
        );
        let (r, out) = outcome.lock().unwrap().take().unwrap();
        assert_eq!(r, Ok(()));
        assert_eq!(out, input(k.size(), 6));
    }
}
