//! The simulated device: configuration knobs, async queues ("ctxs"), device threads, the
//! completion list that `wd_rsa_poll` drains, fault injection, and the counters.

use crate::abi::{wd_rsa_req, KaeSimStats, STATUS_IN_EPARA, STATUS_NOT_RUN};
use crate::math::{self, Computed, KeyMaterial};
use core::ffi::c_int;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Locks `m`, ignoring poisoning (a panic elsewhere must not wedge the simulator).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

/// Indexes into [`STATS`], in the order of [`KaeSimStats`].
#[derive(Clone, Copy)]
pub enum Stat {
    InitCalls,
    UninitCalls,
    SessionsAllocated,
    SessionsFreed,
    Submitted,
    CompletedOk,
    Ebusy,
    ErrorCompletions,
    Dropped,
    WrongResults,
    Misuse,
    InFlight,
    MaxInFlight,
    SyncCalls,
    Polls,
    Callbacks,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static STATS: [AtomicU64; 16] = [ZERO; 16];

pub fn bump(s: Stat) {
    STATS[s as usize].fetch_add(1, Relaxed);
}

/// Counters outside `struct KaeSimStats` (whose layout stays 16 `u64`), each read by a
/// simulator-only function of its own: `kae_sim_isolations`, `kae_sim_isolated_refusals`.
pub static ISOLATIONS: AtomicU64 = AtomicU64::new(0);
pub static ISOLATED_REFUSALS: AtomicU64 = AtomicU64::new(0);

/// One more request is in flight (accepted by `wd_do_rsa_async`, not yet delivered).
pub fn in_flight_up() {
    let now = STATS[Stat::InFlight as usize].fetch_add(1, SeqCst) + 1;
    STATS[Stat::MaxInFlight as usize].fetch_max(now, SeqCst);
}

/// One request left flight (delivered, dropped, or discarded).
pub fn in_flight_down() {
    let _ = STATS[Stat::InFlight as usize].fetch_update(SeqCst, SeqCst, |v| v.checked_sub(1));
}

/// In a forked child: the parent's requests are not this process's.
pub fn in_flight_reset() {
    STATS[Stat::InFlight as usize].store(0, SeqCst);
}

pub fn snapshot() -> KaeSimStats {
    let g = |s: Stat| STATS[s as usize].load(SeqCst);
    KaeSimStats {
        init_calls: g(Stat::InitCalls),
        uninit_calls: g(Stat::UninitCalls),
        sessions_allocated: g(Stat::SessionsAllocated),
        sessions_freed: g(Stat::SessionsFreed),
        submitted: g(Stat::Submitted),
        completed_ok: g(Stat::CompletedOk),
        ebusy: g(Stat::Ebusy),
        error_completions: g(Stat::ErrorCompletions),
        dropped: g(Stat::Dropped),
        wrong_results: g(Stat::WrongResults),
        misuse: g(Stat::Misuse),
        in_flight: g(Stat::InFlight),
        max_in_flight: g(Stat::MaxInFlight),
        sync_calls: g(Stat::SyncCalls),
        polls: g(Stat::Polls),
        callbacks: g(Stat::Callbacks),
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// The knobs, read from the environment at each successful `wd_rsa_init2_`.
#[derive(Clone, Debug)]
pub struct Config {
    pub device_threads: usize,
    pub latency: Duration,
    pub depth: u32,
    pub ebusy_every: u64,
    pub error_every: u64,
    pub drop_every: u64,
    pub wrong_every: u64,
    pub isolate_after: u64,
    pub sysfs: Option<PathBuf>,
    pub compute: bool,
    pub async_ctxs: u32,
    pub sync_ctxs: u32,
}

pub(crate) fn knob(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().unwrap_or_else(|_| {
            eprintln!("kae-hpre-sim: ignoring {name}={v:?} (not a number); using {default}");
            default
        }),
        _ => default,
    }
}

impl Config {
    pub fn from_env(async_ctxs: u32, sync_ctxs: u32) -> Config {
        Config {
            device_threads: knob("KAE_SIM_DEVICE_THREADS", 1).min(64) as usize,
            latency: Duration::from_micros(knob("KAE_SIM_LATENCY_US", 0)),
            depth: knob("KAE_SIM_DEPTH", 1024).min(u32::MAX as u64) as u32,
            ebusy_every: knob("KAE_SIM_EBUSY_EVERY", 0),
            error_every: knob("KAE_SIM_ERROR_EVERY", 0),
            drop_every: knob("KAE_SIM_DROP_EVERY", 0),
            wrong_every: knob("KAE_SIM_WRONG_EVERY", 0),
            isolate_after: knob("KAE_SIM_ISOLATE_AFTER", 0),
            sysfs: std::env::var_os("KAE_SIM_SYSFS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            compute: knob("KAE_SIM_COMPUTE", 1) != 0,
            async_ctxs,
            sync_ctxs,
        }
    }
}

fn every(n: u64, count: u64) -> bool {
    n != 0 && count % n == 0
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// The simulator's own copy of a submitted request, on the heap; the callback gets its address.
pub struct ReqCopy(Box<wd_rsa_req>);

// SAFETY: the raw pointers inside are the caller's buffers, which the API contract keeps alive
// and untouched until the callback; the simulator only dereferences them as the hardware would
// (src once on a device thread, dst once on the polling thread).
unsafe impl Send for ReqCopy {}

impl ReqCopy {
    pub fn new(req: wd_rsa_req) -> ReqCopy {
        ReqCopy(Box::new(req))
    }

    pub fn req(&self) -> &wd_rsa_req {
        &self.0
    }

    pub fn as_mut_ptr(&mut self) -> *mut wd_rsa_req {
        &mut *self.0
    }
}

impl Drop for ReqCopy {
    fn drop(&mut self) {
        // Poison the copy before it is freed, so that a caller keeping the callback's pointer
        // reads 0xA5 garbage (or trips a sanitizer) rather than plausible values.
        let p: *mut wd_rsa_req = &mut *self.0;
        // SAFETY: `p` points to the live, exclusively owned box; wd_rsa_req is plain data
        // without validity constraints the pattern could break except `cb`, whose 0xA5..
        // pattern is a non-null (never called) function pointer value.
        unsafe { core::ptr::write_bytes(p.cast::<u8>(), 0xA5, core::mem::size_of::<wd_rsa_req>()) };
    }
}

/// An accepted asynchronous request.
pub struct Job {
    pub req: ReqCopy,
    pub key: Arc<Mutex<KeyMaterial>>,
    pub key_bytes: usize,
    pub ctx: usize,
    pub submitted_at: Instant,
    /// The session's count of undelivered requests.
    pub session_pending: Arc<AtomicU32>,
}

/// A computed request waiting for `wd_rsa_poll`.
pub struct Done {
    pub job: Job,
    pub status: c_int,
    pub result: Option<Vec<u8>>,
    pub ready_at: Instant,
}

/// What happens to a computed request.
pub enum Fate {
    Deliver {
        status: c_int,
        result: Option<Vec<u8>>,
    },
    Drop,
}

/// Reads `len` bytes at `src` and runs the operation (or echoes, with KAE_SIM_COMPUTE=0).
///
/// # Safety
/// `src` must be readable for `len` bytes.
pub unsafe fn run_op(
    compute: bool,
    op: u8,
    key: &Mutex<KeyMaterial>,
    src: *const u8,
    len: usize,
) -> Result<Computed, c_int> {
    if src.is_null() {
        return Err(STATUS_IN_EPARA);
    }
    // SAFETY: the caller guarantees `src` is readable for `len` bytes.
    let input = unsafe { core::slice::from_raw_parts(src, len) }.to_vec();
    let r = if compute {
        // A snapshot, so that submissions on the same session do not wait for the arithmetic.
        let key = lock(key).clone();
        math::compute(op, &key, &input, len)
    } else {
        Ok(math::echo(&input))
    };
    if matches!(&r, Ok(c) if c.input_not_below_n) {
        bump(Stat::Misuse);
    }
    r
}

// ---------------------------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------------------------

struct Work {
    jobs: VecDeque<Job>,
    stop: bool,
}

/// One initialisation's device: queues, threads, fault-injection counters.
pub struct Runtime {
    pub cfg: Config,
    submits: AtomicU64,
    completions: AtomicU64,
    isolated: AtomicBool,
    ctx_in_flight: Vec<AtomicU32>,
    work: Mutex<Work>,
    work_cv: Condvar,
    done: Mutex<VecDeque<Done>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Why a submission was refused (the value to return, negated by the caller).
pub enum Refused {
    Busy,
    Isolated,
}

impl Runtime {
    /// Builds the runtime and starts its device threads.
    pub fn start(cfg: Config) -> std::io::Result<Arc<Runtime>> {
        let rt = Arc::new(Runtime {
            ctx_in_flight: (0..cfg.async_ctxs).map(|_| AtomicU32::new(0)).collect(),
            cfg,
            submits: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            isolated: AtomicBool::new(false),
            work: Mutex::new(Work {
                jobs: VecDeque::new(),
                stop: false,
            }),
            work_cv: Condvar::new(),
            done: Mutex::new(VecDeque::new()),
            threads: Mutex::new(Vec::new()),
        });
        for i in 0..rt.cfg.device_threads {
            let me = Arc::clone(&rt);
            let spawned = std::thread::Builder::new()
                .name(format!("kae-sim-dev{i}"))
                .spawn(move || me.device_loop());
            match spawned {
                Ok(h) => lock(&rt.threads).push(h),
                Err(e) => {
                    rt.stop();
                    return Err(e);
                }
            }
        }
        Ok(rt)
    }

    pub fn is_isolated(&self) -> bool {
        self.isolated.load(SeqCst)
    }

    /// The submit-side checks shared by sync and async: isolation, then KAE_SIM_EBUSY_EVERY.
    pub fn admit(&self) -> Result<(), Refused> {
        if self.is_isolated() {
            ISOLATED_REFUSALS.fetch_add(1, SeqCst);
            return Err(Refused::Isolated);
        }
        let n = self.submits.fetch_add(1, SeqCst) + 1;
        if every(self.cfg.ebusy_every, n) {
            bump(Stat::Ebusy);
            return Err(Refused::Busy);
        }
        Ok(())
    }

    /// Queues an async job unless its ctx is at depth (then EBUSY).
    pub fn submit(&self, job: Job) -> Result<(), (Refused, Job)> {
        let Some(slots) = self.ctx_in_flight.get(job.ctx) else {
            return Err((Refused::Busy, job));
        };
        let depth = self.cfg.depth;
        if slots
            .fetch_update(SeqCst, SeqCst, |v| (v < depth).then_some(v + 1))
            .is_err()
        {
            bump(Stat::Ebusy);
            return Err((Refused::Busy, job));
        }
        job.session_pending.fetch_add(1, SeqCst);
        bump(Stat::Submitted);
        in_flight_up();
        if self.cfg.device_threads == 0 {
            // An instantaneous device: the work is done on the submitting thread (no thread
            // hop, so a caller's own overhead can be measured).
            self.process(job);
            return Ok(());
        }
        lock(&self.work).jobs.push_back(job);
        self.work_cv.notify_one();
        Ok(())
    }

    /// Decides a computed request's fate (counting completions for the *_EVERY knobs and
    /// isolating the device after KAE_SIM_ISOLATE_AFTER). `may_drop` is false for sync calls.
    pub fn finish(&self, computed: Result<Computed, c_int>, may_drop: bool) -> Fate {
        if self.is_isolated() {
            return Fate::Deliver {
                status: STATUS_NOT_RUN,
                result: None,
            };
        }
        let n = self.completions.fetch_add(1, SeqCst) + 1;
        let fate = if may_drop && every(self.cfg.drop_every, n) {
            Fate::Drop
        } else if every(self.cfg.error_every, n) {
            Fate::Deliver {
                status: STATUS_IN_EPARA,
                result: None,
            }
        } else {
            match computed {
                Err(status) => Fate::Deliver {
                    status,
                    result: None,
                },
                Ok(mut c) => {
                    if every(self.cfg.wrong_every, n) {
                        if let Some(last) = c.out.last_mut() {
                            *last ^= 1;
                        }
                        bump(Stat::WrongResults);
                    }
                    Fate::Deliver {
                        status: 0,
                        result: Some(c.out),
                    }
                }
            }
        };
        if self.cfg.isolate_after != 0
            && n >= self.cfg.isolate_after
            && !self.isolated.swap(true, SeqCst)
        {
            ISOLATIONS.fetch_add(1, SeqCst);
            if let Some(root) = &self.cfg.sysfs {
                let dir = root.join("hisi_hpre-0");
                let _ = std::fs::create_dir_all(&dir);
                if let Err(e) = std::fs::write(dir.join("isolate"), "1\n") {
                    eprintln!("kae-hpre-sim: cannot write {}/isolate: {e}", dir.display());
                }
            }
        }
        fate
    }

    /// A request leaves flight (delivered, dropped or discarded): frees its ctx slot.
    pub fn release(&self, job: &Job) {
        if let Some(slots) = self.ctx_in_flight.get(job.ctx) {
            let _ = slots.fetch_update(SeqCst, SeqCst, |v| v.checked_sub(1));
        }
        let _ = job
            .session_pending
            .fetch_update(SeqCst, SeqCst, |v| v.checked_sub(1));
        in_flight_down();
    }

    fn device_loop(&self) {
        loop {
            let job = {
                let mut w = lock(&self.work);
                loop {
                    if w.stop {
                        return;
                    }
                    if let Some(j) = w.jobs.pop_front() {
                        break j;
                    }
                    w = self.work_cv.wait(w).unwrap_or_else(|e| e.into_inner());
                }
            };
            self.process(job);
        }
    }

    /// Computes one job and queues its completion (or drops it).
    fn process(&self, job: Job) {
        {
            let r = job.req.req();
            // SAFETY: the API contract keeps `src` (src_bytes == key_bytes, checked at submit)
            // alive until the callback; like the hardware, the device reads it now.
            let computed = unsafe {
                run_op(
                    self.cfg.compute,
                    r.op_type,
                    &job.key,
                    r.src as *const u8,
                    job.key_bytes,
                )
            };
            match self.finish(computed, true) {
                Fate::Drop => {
                    bump(Stat::Dropped);
                    self.release(&job);
                }
                Fate::Deliver { status, result } => {
                    let ready_at = (job.submitted_at + self.cfg.latency).max(Instant::now());
                    lock(&self.done).push_back(Done {
                        job,
                        status,
                        result,
                        ready_at,
                    });
                }
            }
        }
    }

    /// Takes up to `max` completions whose time has come, oldest first.
    pub fn take_ready(&self, max: usize) -> Vec<Done> {
        let now = Instant::now();
        let mut done = lock(&self.done);
        let mut out = Vec::new();
        let mut i = 0;
        while i < done.len() && out.len() < max {
            if done[i].ready_at <= now {
                out.extend(done.remove(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// Stops and joins the device threads.
    pub fn stop(&self) {
        lock(&self.work).stop = true;
        self.work_cv.notify_all();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    /// After [`Runtime::stop`]: throws away every undelivered request, without callbacks.
    pub fn discard_pending(&self) {
        let jobs: Vec<Job> = lock(&self.work).jobs.drain(..).collect();
        let done: Vec<Done> = lock(&self.done).drain(..).collect();
        for j in jobs.iter().chain(done.iter().map(|d| &d.job)) {
            self.release(j);
        }
    }
}
