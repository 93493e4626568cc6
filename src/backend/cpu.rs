//! CPU backend: the worker pool, bounded queues with one worker thread per queue. A worker
//! takes up to `BATCH` queued requests at once, computes them, and hands each to the
//! `Completer` as soon as it is done (no head-of-line wait for the rest of the batch): the
//! worker already runs when the result exists, so a poller thread would only add a hop.

use super::{Backend, ComputeFn};
use crate::completion::{Completer, Request, Sleeper};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Most requests a worker takes from its queue at once.
pub const BATCH: usize = 8;

struct Queue {
    items: Mutex<VecDeque<Request>>,
    len: AtomicUsize,
    /// Requests queued here or being computed by this queue's worker.
    load: AtomicUsize,
    worker: Sleeper,
}

struct Shared {
    queues: Vec<Queue>,
    depth: usize,
    completer: Arc<Completer>,
    in_flight: AtomicUsize,
    high_water: AtomicUsize,
    stop: AtomicBool,
    compute: ComputeFn,
}

pub struct WorkerPool {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl WorkerPool {
    /// Starts `queues` workers with queues of `depth` requests each.
    pub fn start(
        queues: usize,
        depth: usize,
        completer: Arc<Completer>,
        compute: ComputeFn,
    ) -> std::io::Result<WorkerPool> {
        let queues = queues.max(1);
        let shared = Arc::new(Shared {
            queues: (0..queues)
                .map(|_| Queue {
                    items: Mutex::new(VecDeque::with_capacity(depth)),
                    len: AtomicUsize::new(0),
                    load: AtomicUsize::new(0),
                    worker: Sleeper::new(),
                })
                .collect(),
            depth: depth.max(1),
            completer,
            in_flight: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            compute,
        });
        let mut workers = Vec::with_capacity(queues);
        for i in 0..queues {
            let s = shared.clone();
            let h = crate::ffi::fork::spawn_settled(format!("kae-cpu-{i}"), move || {
                worker_loop(&s, i)
            })?;
            workers.push(h);
        }
        Ok(WorkerPool {
            shared,
            workers: Mutex::new(workers),
        })
    }
}

fn worker_loop(s: &Shared, idx: usize) {
    let q = &s.queues[idx];
    q.worker.register_current();
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut one: Vec<Request> = Vec::with_capacity(1);
    loop {
        {
            let mut items = q.items.lock().unwrap_or_else(|e| e.into_inner());
            while batch.len() < BATCH {
                match items.pop_front() {
                    Some(r) => batch.push(r),
                    None => break,
                }
            }
            q.len.store(items.len(), Ordering::Release);
        }
        if batch.is_empty() {
            if s.stop.load(Ordering::Acquire) {
                return;
            }
            q.worker.sleep_unless(|| {
                q.len.load(Ordering::Acquire) > 0 || s.stop.load(Ordering::Acquire)
            });
            continue;
        }
        let compute = s.compute;
        // Each request completes as soon as it is computed: the first of a batch never waits
        // for the others (no head-of-line wait).
        for mut r in batch.drain(..) {
            if s.stop.load(Ordering::Acquire) {
                r.result = Err(crate::error::KaeError::BackendFailure);
            } else {
                compute_caught(compute, &mut r);
            }
            // Out of flight before the waiter wakes: whoever it wakes sees consistent counts.
            q.load.fetch_sub(1, Ordering::AcqRel);
            s.in_flight.fetch_sub(1, Ordering::AcqRel);
            crate::stats::in_flight_sub(1);
            one.push(r);
            s.completer.complete_all(&mut one);
        }
    }
}

/// Runs `compute` on one request; a panic fails that request only (`KaeError::Panic`, no
/// partial output) instead of unwinding out of the worker, which would leave the rest of its
/// batch and everything queued behind it waiting forever.
pub fn compute_caught(compute: ComputeFn, r: &mut Request) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compute(r)));
    if caught.is_err() {
        r.output.fill(0);
        r.result = Err(crate::error::KaeError::Panic);
        crate::logging::warn_rate_limited(
            "worker-panic",
            format_args!("a pool computation panicked; its request fails, the worker goes on"),
        );
    }
}

/// Test hook: how long `submit` stalls before taking a queue lock (µs), so tests can hold a
/// submission inside the window a shutdown might race with.
#[cfg(test)]
pub(crate) static SUBMIT_STALL_US: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
fn stall_for_test() {
    let us = SUBMIT_STALL_US.load(Ordering::Relaxed);
    if us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

impl Backend for WorkerPool {
    /// "cpu"; the multi-buffer backend, which runs batches on these workers, names itself.
    fn name(&self) -> &'static str {
        crate::settings::BackendKind::Cpu.name()
    }

    fn submit(&self, req: Request) -> Result<(), Request> {
        let s = &self.shared;
        // Fast path only; the check that counts is the one under the queue lock below.
        if s.stop.load(Ordering::Acquire) {
            return Err(req);
        }
        // The least loaded queue, ties to the lowest index: a lone request in flight (one
        // connection, one async job) keeps going to the same worker, which is still spinning
        // from the previous one, instead of waking a parked worker each time (round robin
        // measured 0.80x of inline at -async_jobs 1 on two vCPUs). More requests spread.
        let n = s.queues.len();
        let first = (0..n)
            .min_by_key(|&i| (s.queues[i].load.load(Ordering::Acquire), i))
            .unwrap_or(0);
        let mut req = req;
        #[cfg(test)]
        stall_for_test();
        for i in 0..n {
            let q = &s.queues[(first + i) % n];
            let mut items = q.items.lock().unwrap_or_else(|e| e.into_inner());
            // Under the queue lock: `shutdown` sets `stop` before it drains each queue under
            // this same lock, so a request pushed here is either drained (and failed) by it or
            // refused; none lands in a queue nobody empties any more.
            if s.stop.load(Ordering::Acquire) {
                drop(items);
                return Err(req);
            }
            if items.len() >= s.depth {
                continue;
            }
            items.push_back(req);
            let len = items.len();
            q.len.store(len, Ordering::Release);
            q.load.fetch_add(1, Ordering::AcqRel);
            drop(items);
            s.in_flight.fetch_add(1, Ordering::AcqRel);
            s.high_water.fetch_max(len, Ordering::Relaxed);
            crate::stats::note_queue_depth(len);
            crate::stats::in_flight_add(1);
            q.worker.wake();
            return Ok(());
        }
        // All full: hand it back (the caller pauses its job and retries).
        req.result = Err(crate::error::KaeError::BackendFailure);
        Err(req)
    }

    /// Workers complete requests themselves; nothing is ever left to poll.
    fn poll(&self, _out: &mut Vec<Request>, _max: usize) -> usize {
        0
    }

    fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Acquire)
    }

    fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        for q in &self.shared.queues {
            q.worker.wake();
        }
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|e| e.into_inner()));
        for h in workers {
            let _ = h.join();
        }
        // Whatever is still queued completes with an error so its waiter is woken. Submits
        // that check `stop` after this drain (under the same lock) see it set and refuse.
        let mut rest = Vec::new();
        for q in &self.shared.queues {
            rest.extend(q.items.lock().unwrap_or_else(|e| e.into_inner()).drain(..));
        }
        for r in rest.iter_mut() {
            r.result = Err(crate::error::KaeError::BackendFailure);
        }
        let n = rest.len();
        self.shared.in_flight.fetch_sub(n, Ordering::AcqRel);
        crate::stats::in_flight_sub(n);
        self.shared.completer.complete_all(&mut rest);
    }

    fn high_water(&self) -> usize {
        self.shared.high_water.load(Ordering::Relaxed)
    }
}
