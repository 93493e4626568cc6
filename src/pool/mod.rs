//! The queue pool: a backend's queues, the completer that moves finished requests to their
//! waiters (called by CPU workers directly, or by a poller thread for backends whose
//! completions must be polled), async offload through OpenSSL's ASYNC pause/resume, lazy
//! start, fork safety.
//!
//! Request flow in async mode (inside an `ASYNC_JOB`):
//! submit → (queue full: register for a free slot, retry once, then attach the wake-up and
//! pause, retry) → attach the wake-up, pause until our wait fd or the application's callback
//! fires → drain the fd → result (a resume without a result is spurious: pause again). The
//! wake-up (wait fd) is attached only right before a pause that really happens.
//! Without a job the CPU backend computes inline on the caller's thread (no thread hop).
//!
//! Lifecycle: the process-wide pool is an `Arc` handed out under a lock (teardown takes it
//! out under the same lock, so it never frees what a caller holds); a submit after shutdown
//! began is refused (the caller computes inline); fork handlers keep the pool's locks free
//! in a child; a panicking computation fails its request, not its worker.

use crate::backend::{self, registry, Backend, ComputeFn, SyncPolicy};
use crate::completion::{Completer, OpKind, Request, Sleeper, Waiter, WaiterWake};
use crate::error::{KaeError, KaeResult};
use crate::ffi::async_job::AsyncJob;
use crate::ffi::fork::ForkMutex;
use crate::rsa::RsaKey;
use crate::stats;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use crate::settings::{AsyncMode, BackendKind, OffloadConfig};

static CONFIG: OnceLock<OffloadConfig> = OnceLock::new();

/// Sets the pool configuration (first provider instance wins; the pool is per process).
pub fn configure(cfg: OffloadConfig) {
    if CONFIG.set(cfg.clone()).is_err()
        && CONFIG.get().map(|c| format!("{c:?}")) != Some(format!("{cfg:?}"))
    {
        log::warn!(
            "pool already configured as {:?}; ignoring {:?}",
            CONFIG.get(),
            cfg
        );
    }
}

pub fn config() -> OffloadConfig {
    CONFIG.get().cloned().unwrap_or_default()
}

/// A running pool: one backend, its completer, and (for polled backends) the poller thread.
pub struct Pool {
    backend: Box<dyn Backend>,
    completer: Arc<Completer>,
    poller_sleeper: Arc<Sleeper>,
    poller: Mutex<Option<JoinHandle<()>>>,
    /// Shutdown has begun: submits are refused (callers compute inline).
    stop: AtomicBool,
    /// `Backend::shutdown` has returned: nothing more can be accepted, so once nothing is in
    /// flight the poller may leave.
    backend_stopped: AtomicBool,
    /// Process that started this pool (a forked child starts its own).
    pid: u32,
}

impl Pool {
    /// Starts a pool with the CPU backend computing with `compute`.
    pub fn start_cpu(cfg: &OffloadConfig, compute: ComputeFn) -> std::io::Result<Arc<Pool>> {
        let completer = Arc::new(Completer::new());
        let backend = registry::start_cpu(cfg, completer.clone(), compute)?;
        Pool::start_with(backend, completer)
    }

    /// Starts a pool around a backend; a poller thread is started when the backend needs
    /// polling (its completions are not delivered by the backend itself).
    pub fn start_with(
        backend: Box<dyn Backend>,
        completer: Arc<Completer>,
    ) -> std::io::Result<Arc<Pool>> {
        let polled = backend.needs_polling();
        let pool = Arc::new(Pool {
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
        // Short pauses between polls should be short: 1 µs timer slack instead of 50 µs.
        // SAFETY: prctl with an integer argument; affects this thread only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
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
                // Hardware: nothing arrives sooner than a park takes; an idle pool uses no CPU.
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

    fn wait_for_slot(&self, w: &Arc<Waiter>) {
        self.completer.wait_for_slot(w);
    }

    fn cancel_slot_wait(&self, w: &Arc<Waiter>) {
        self.completer.cancel_slot_wait(w);
    }
}

// ---- the process-wide pool -------------------------------------------------------------------

/// The running pool, started on first use in each process (never in OSSL_provider_init).
/// Readers take an `Arc` clone under the lock, so teardown (which takes the pool out under the
/// same lock) can never free what a reader uses; the hot path is one uncontended lock.
static CURRENT: ForkMutex<Option<Arc<Pool>>> = ForkMutex::new(None);
/// Serialises starting and stopping the pool. Taken before `CURRENT` when both are held.
static START_LOCK: ForkMutex<()> = ForkMutex::new(());
/// Held while a stopping pool joins its threads, so a fork waits until they are gone: a
/// thread's exit, like its start (`ffi::fork::spawn_settled`), passes through a lock inside
/// std that the child must not inherit held. Taken by fork first, before `START_LOCK`.
static JOIN_LOCK: ForkMutex<()> = ForkMutex::new(());
/// Live provider instances; the last teardown stops the pool.
static USERS: AtomicUsize = AtomicUsize::new(0);
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);

/// A fork waits until no other thread holds the pool's locks, so a child never inherits one
/// held by a thread it does not have (it would block on it forever).
extern "C" fn before_fork() {
    JOIN_LOCK.lock_for_fork();
    START_LOCK.lock_for_fork();
    CURRENT.lock_for_fork();
    for h in &registry::FORK_HOOKS {
        (h.prepare)();
    }
}

extern "C" fn after_fork_parent() {
    // SAFETY: this thread took them in `before_fork` and holds no guard.
    unsafe {
        for h in registry::FORK_HOOKS.iter().rev() {
            (h.parent)();
        }
        CURRENT.unlock_in_parent();
        START_LOCK.unlock_in_parent();
        JOIN_LOCK.unlock_in_parent();
    }
}

extern "C" fn after_fork_child() {
    // SAFETY: in the child right after fork; `before_fork` took them; no guard is alive.
    unsafe {
        for h in registry::FORK_HOOKS.iter().rev() {
            (h.child)();
        }
        CURRENT.reset_in_child();
        START_LOCK.reset_in_child();
        JOIN_LOCK.reset_in_child();
    }
}

/// Registers the fork handlers once per process (children inherit them). Called before
/// taking START_LOCK: pthread_atfork waits for a fork in progress, whose prepare handler may
/// be waiting for START_LOCK.
fn register_fork_handlers() {
    if !FORK_HANDLERS.load(Ordering::Acquire)
        && !FORK_HANDLERS.swap(true, Ordering::AcqRel)
        && !crate::ffi::fork::register_atfork(before_fork, after_fork_parent, after_fork_child)
    {
        log::warn!("could not register fork handlers for the queue pool");
    }
}

pub fn add_user() {
    register_fork_handlers();
    USERS.fetch_add(1, Ordering::AcqRel);
}

/// Called at provider teardown; stops the pool when the last instance goes.
pub fn remove_user() {
    if USERS.fetch_sub(1, Ordering::AcqRel) == 1 {
        stop_current();
    }
}

fn stop_current() {
    let pool = {
        let _g = START_LOCK.lock();
        CURRENT.lock().take()
    };
    let Some(pool) = pool else {
        return;
    };
    // Outside the pool's locks (a request may finish meanwhile), but a fork waits for the
    // threads to be gone (`JOIN_LOCK`).
    if pool.pid == std::process::id() {
        let _joining = JOIN_LOCK.lock();
        pool.shutdown();
    } else {
        // Started by our parent before fork: its threads do not exist here and its locks may
        // be in any state; never join them, never drop it.
        std::mem::forget(pool);
    }
}

/// The pool of this process, started on first call. After `fork()` the child sees the
/// parent's pool (whose threads were not copied), leaves it alone and starts its own.
pub fn current() -> Option<Arc<Pool>> {
    current_with(backend::compute)
}

fn current_with(compute: ComputeFn) -> Option<Arc<Pool>> {
    let pid = std::process::id();
    if let Some(p) = running_in(pid) {
        return Some(p);
    }
    register_fork_handlers();
    let _g = START_LOCK.lock();
    let inherited = {
        let mut cur = CURRENT.lock();
        match cur.as_ref() {
            Some(p) if p.pid == pid => return Some(p.clone()),
            // Inherited from the parent: leak it (its mutexes may be in any state, its
            // threads are gone) and start ours.
            Some(_) => {
                std::mem::forget(cur.take());
                true
            }
            None => false,
        }
    };
    if inherited {
        log::info!("forked child starts its own queue pool");
    }
    let cfg = config();
    match start_selected(&cfg, compute) {
        Ok(pool) => {
            log::info!(
                "queue pool started: backend {}, {} queues × depth {}",
                pool.backend_name(),
                cfg.queues,
                cfg.depth
            );
            *CURRENT.lock() = Some(pool.clone());
            Some(pool)
        }
        Err(e) => {
            crate::logging::warn_rate_limited(
                "pool-start",
                format_args!("could not start the queue pool ({e}); computing inline"),
            );
            None
        }
    }
}

/// Starts the pool on the selected backend; a backend other than the CPU that cannot start
/// (library, init, threads) is reported once and replaced by CPU workers.
fn start_selected(cfg: &OffloadConfig, compute: ComputeFn) -> std::io::Result<Arc<Pool>> {
    let kind = selected_kind();
    if kind != BackendKind::Cpu {
        let completer = Arc::new(Completer::new());
        match registry::start(kind, cfg, completer.clone(), compute) {
            Ok(b) => return Pool::start_with(b, completer),
            Err(why) => {
                stats::note_fallback();
                crate::logging::warn_rate_limited(
                    "backend-start",
                    format_args!(
                        "the {} backend did not start ({why}); CPU workers take its place",
                        registry::title(kind)
                    ),
                );
            }
        }
    }
    Pool::start_cpu(cfg, compute)
}

/// This process's pool, if it runs (a clone taken under the lock).
fn running_in(pid: u32) -> Option<Arc<Pool>> {
    CURRENT.lock().as_ref().filter(|p| p.pid == pid).cloned()
}

/// The backend the configuration selects here (see `backend::registry`). Probing reads sysfs
/// and loads libraries, and the private-operation path asks on every call: decided once per
/// process (a forked child decides again), then only the kind is copied out.
pub fn selected_kind() -> BackendKind {
    static CACHE: Mutex<Option<(u32, BackendKind)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    match *c {
        Some((p, kind)) if p == pid => kind,
        _ => {
            let kind = registry::select(&config()).kind;
            *c = Some((pid, kind));
            kind
        }
    }
}

/// What operators see as the active backend: the running pool's, else the selected one (sync
/// operations compute inline with it).
pub fn backend_label() -> &'static core::ffi::CStr {
    running()
        .and_then(|p| BackendKind::from_name(p.backend_name()))
        .unwrap_or_else(selected_kind)
        .c_name()
}

/// Pool of this process if one is running (for counters; never starts one).
pub fn running() -> Option<Arc<Pool>> {
    running_in(std::process::id())
}

// ---- operations ----------------------------------------------------------------------------

/// RSADP/RSASP1 for the operations: offloaded through the pool inside an ASYNC job, inline on
/// the caller's thread otherwise.
pub fn private_op(key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    run(OpKind::Private, key, input, out)
}

/// RSAEP/RSAVP1: cheap (public exponent), always inline.
pub fn public_op(key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    run(OpKind::Public, key, input, out)
}

fn run(kind: OpKind, key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    // The job check first: it is a thread-local read, the decisions need getpid().
    let job = AsyncJob::current();
    // Public operations are cheap on the CPU: they leave it only for hardware.
    let hardware = || selected_kind() == BackendKind::Hpre;
    match &job {
        Some(job) if (kind == OpKind::Private || hardware()) && offload_async_jobs() => {
            match current() {
                Some(pool) if pool.takes(key, kind) => {
                    return offload(&pool, How::Job(job), kind, key, input, out)
                }
                Some(_) => {}
                None => stats::note_fallback(),
            }
        }
        Some(_) => {}
        // Outside jobs a public operation (~20 µs for RSA-2048) stays on the CPU: waiting for a
        // device round trip would only make the caller slower.
        None if kind == OpKind::Private && hardware() => {
            if let Some(pool) = current() {
                let how = match pool.backend.sync_policy() {
                    SyncPolicy::Inline => None,
                    SyncPolicy::SubmitAndWait => Some(How::Block),
                    SyncPolicy::Direct => Some(How::Direct),
                };
                if let Some(how) = how.filter(|_| pool.takes(key, kind)) {
                    return offload(&pool, how, kind, key, input, out);
                }
            }
        }
        None => {}
    }
    inline(kind, key, input, out)
}

/// How an offloaded operation waits for its result.
enum How<'a> {
    /// Pause the ASYNC job.
    Job(&'a AsyncJob),
    /// Sleep the calling thread (sync operations on hardware).
    Block,
    /// The backend's own blocking call on this thread.
    Direct,
}

impl Pool {
    /// Whether the backend takes this operation for this key now (what it receives).
    fn takes(&self, key: &RsaKey, kind: OpKind) -> bool {
        self.backend.takes(key, self.wire_kind(kind))
    }

    /// What the backend receives for `kind`: private operations arrive blinded at backends
    /// whose results the caller checks.
    fn wire_kind(&self, kind: OpKind) -> OpKind {
        if kind == OpKind::Private && self.backend.blinds_on_caller() {
            OpKind::PrivateBlinded
        } else {
            kind
        }
    }
}

/// Runs `kind` on the pool's backend. For backends that take blinded input the private
/// operation is split: prepare (checks, blinding) here, the exponentiation on the backend,
/// finish (fault check with e, unblinding) here again; a failed backend request is redone on
/// the CPU, so the application never sees a device error.
fn offload(
    pool: &Pool,
    how: How<'_>,
    kind: OpKind,
    key: &Arc<RsaKey>,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    let wire = pool.wire_kind(kind);
    if wire != OpKind::PrivateBlinded {
        let r = dispatch(pool, &how, kind, key, input, out);
        if r.is_err() && pool.backend.blinds_on_caller() {
            // A hardware failure: the CPU answers instead.
            stats::note_fallback();
            return inline(kind, key, input, out);
        }
        return r;
    }
    let job = crate::rsa::ops::prepare_private(key, input, out.len())?;
    let k = key.size();
    let mut xb = zeroize::Zeroizing::new(vec![0u8; k]);
    crate::rsa::ct_limbs::write_be(job.blinded(), &mut xb);
    let mut y = zeroize::Zeroizing::new(vec![0u8; k]);
    let y = match dispatch(pool, &how, wire, key, &xb, &mut y) {
        Ok(()) => Some(crate::rsa::ops::limbs_from_be(key, &y)?),
        Err(_) => {
            stats::note_fallback();
            None
        }
    };
    let path = if y.is_some() {
        stats::Path::Offload
    } else {
        stats::Path::Inline
    };
    let checked = crate::rsa::ops::finish_private(key, job, y, out);
    stats::note_crt_faults(checked.crt_faults);
    let r = checked.result;
    stats::record(kind, path, r.is_ok());
    r
}

fn dispatch(
    pool: &Pool,
    how: &How<'_>,
    kind: OpKind,
    key: &Arc<RsaKey>,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    match how {
        How::Job(job) => run_async(pool, job, kind, key, input, out),
        How::Block => {
            let r = run_blocking(pool, kind, key, input, out);
            if kind != OpKind::PrivateBlinded {
                stats::record(kind, stats::Path::Offload, r.is_ok());
            }
            r
        }
        How::Direct => {
            let waiter = Arc::new(Waiter::new(None));
            let mut req = Request::new(kind, key.clone(), input, waiter);
            if !pool.backend.compute_direct(&mut req) {
                return Err(KaeError::BackendFailure);
            }
            req.result?;
            if out.len() != req.output.len() {
                return Err(KaeError::BufferTooSmall);
            }
            out.copy_from_slice(&req.output);
            if kind != OpKind::PrivateBlinded {
                stats::record(kind, stats::Path::Offload, true);
            }
            Ok(())
        }
    }
}

/// Per-process answer of `offload_async_jobs`: 0 = not decided yet, else `pid << 1 | answer`.
static OFFLOAD_DECISION: AtomicU64 = AtomicU64::new(0);

/// Whether private operations inside ASYNC jobs go to the pool in this process. With the
/// CPU backend and a single CPU to run on (taskset, cpuset, CPU quota), the workers would
/// only take turns with the application's thread on that CPU: each operation costs the same
/// arithmetic plus two thread switches and a job pause, so `auto` computes inline instead.
/// Decided once per process (a forked child decides again: it may have been pinned).
fn offload_async_jobs() -> bool {
    let pid = u64::from(std::process::id());
    let d = OFFLOAD_DECISION.load(Ordering::Relaxed);
    if d != 0 && d >> 1 == pid {
        return d & 1 == 1;
    }
    let cfg = config();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let offload = match cfg.async_mode {
        AsyncMode::On => true,
        AsyncMode::Off => false,
        // CPU workers pay off only with a CPU of their own; hardware and multi-buffer
        // batching pay off on one CPU too.
        AsyncMode::Auto => cpus >= 2 || selected_kind().worth_offloading_on_one_cpu(),
    };
    if cfg.async_mode == AsyncMode::Auto && !offload {
        log::info!(
            "async = auto and this process may run on {cpus} CPU: CPU workers \
             would only share it with the application, so async jobs compute inline"
        );
    }
    OFFLOAD_DECISION.store(pid << 1 | u64::from(offload), Ordering::Relaxed);
    offload
}

fn inline(kind: OpKind, key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    let r = match kind {
        OpKind::Private => {
            let checked = crate::rsa::ops::private_op(key, input, out);
            stats::note_crt_faults(checked.crt_faults);
            checked.result
        }
        OpKind::Public => crate::rsa::ops::public_op(key, input, out),
        // Counted once by `offload`, which finishes it.
        OpKind::PrivateBlinded => return crate::rsa::ops::exponentiate_blinded(key, input, out),
    };
    stats::record(kind, stats::Path::Inline, r.is_ok());
    r
}

/// Consecutive resumes without a result after which we stop trusting pause (e.g. the
/// application blocked pausing with ASYNC_block_pause, which makes pause return at once) and
/// wait on the thread instead.
const MAX_SPURIOUS: u32 = 1000;

fn run_async(
    pool: &Pool,
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
    let (result, output) = waiter.take().ok_or(KaeError::Internal)?;
    if result.is_err() && pool.stopping() {
        // Failed because the pool shut down under it (queued requests are cancelled).
        return fall_back(pool, &waiter, false, kind, key, input, out);
    }
    if kind != OpKind::PrivateBlinded {
        stats::record(kind, stats::Path::Offload, result.is_ok());
    }
    result?;
    out.copy_from_slice(&output);
    Ok(())
}

/// The pool is shutting down: compute on the caller's thread instead.
fn fall_back(
    pool: &Pool,
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
    pool: &Pool,
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
    let (result, output) = waiter.take().ok_or(KaeError::Internal)?;
    result?;
    out.copy_from_slice(&output);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::bn::BigNum;
    use crate::rsa::KeyType;
    use core::ffi::c_int;
    use std::time::{Duration, Instant};

    /// The limit of waits that only a hang reaches: a machine busy with other work (one
    /// CPU-bound loop per core) makes a child or a shutdown seconds slower, never a minute.
    const HANG: Duration = Duration::from_secs(60);

    fn lock_start() -> crate::ffi::fork::ForkMutexGuard<'static, ()> {
        START_LOCK.lock()
    }

    fn key() -> Arc<RsaKey> {
        static K: OnceLock<Arc<RsaKey>> = OnceLock::new();
        K.get_or_init(|| {
            Arc::new(
                crate::rsa::ops::generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap())
                    .unwrap(),
            )
        })
        .clone()
    }

    /// Echoes the input (no arithmetic): exercises only the queue machinery.
    fn echo(r: &mut Request) {
        let n = r.input.len();
        r.output[..n].copy_from_slice(&r.input);
        r.result = Ok(());
    }

    fn slow_echo(r: &mut Request) {
        std::thread::sleep(Duration::from_millis(2));
        echo(r);
    }

    fn input(k: usize, tag: u8) -> Vec<u8> {
        let mut v = vec![tag; k];
        v[0] = 0;
        v
    }

    /// Pool tests run one at a time so per-thread measurements see only their own pool.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// CPU seconds used so far by this process's pool threads whose name starts with
    /// `prefix` (kae-cpu, kae-poller). Panics when there is no such thread or its times
    /// cannot be read: a measurement of nothing must not pass for "idle".
    fn pool_threads_cpu(prefix: &str) -> f64 {
        let tick = 100.0; // USER_HZ on Linux
        let mut total = 0.0;
        let mut found = 0;
        for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let dir = entry.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if !comm.starts_with(prefix) {
                continue;
            }
            let stat = std::fs::read_to_string(dir.join("stat"))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            // Fields after the parenthesised name: utime and stime are the 12th and 13th.
            let rest = stat.rsplit(')').next().unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            let field = |i: usize| -> f64 {
                f.get(i)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("unreadable {}/stat: {stat:?}", dir.display()))
            };
            total += (field(11) + field(12)) / tick;
            found += 1;
        }
        assert!(found > 0, "no {prefix}* thread in this process");
        total
    }

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
        let pool = Pool::start_cpu(&cfg, slow_echo).unwrap();
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

    #[test]
    fn round_trip_through_pool() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 4,
            ..OffloadConfig::default()
        };
        let pool = Pool::start_cpu(&cfg, echo).unwrap();
        let k = key();
        for tag in 1..50u8 {
            let mut out = vec![0u8; k.size()];
            run_blocking(&pool, OpKind::Private, &k, &input(k.size(), tag), &mut out).unwrap();
            assert_eq!(out, input(k.size(), tag));
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
        let pool = Pool::start_with(Box::new(backend), Arc::new(Completer::new())).unwrap();
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
        let pool = Pool::start_cpu(
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
    fn real_rsa_through_pool_matches_inline() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 8,
            ..OffloadConfig::default()
        };
        let pool = Pool::start_cpu(&cfg, backend::compute).unwrap();
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
        let pool = Pool::start_cpu(&cfg, slow_echo).unwrap();
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

    #[test]
    fn shutdown_with_requests_in_flight_does_not_hang() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 1,
            depth: 64,
            ..OffloadConfig::default()
        };
        let pool = Pool::start_cpu(&cfg, slow_echo).unwrap();
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
                .any(|w| matches!(w.take(), Some((Err(_), _)))),
            "queued requests fail at shutdown"
        );
        // A stopped pool refuses new work instead of accepting it into the void.
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
        let pool = Pool::start_cpu(&cfg, echo_or_panic).unwrap();
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
            let (result, output) = w.take().unwrap();
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

    /// What became of one submission made while the pool shut down.
    #[derive(Debug, PartialEq)]
    enum Fate {
        Completed,
        Refused,
        Stranded,
    }

    /// Submits one request (retrying while the queues are full but the pool runs) and waits
    /// for it: a request the pool accepted must complete, with a result or an error.
    fn submit_once(pool: &Pool, k: &Arc<RsaKey>, tag: u8) -> Fate {
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
        let pool = Pool::start_cpu(
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
            let pool = Pool::start_cpu(
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
            let Request {
                result,
                output,
                waiter,
                ..
            } = req;
            waiter.complete(result, output);
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

    fn scripted_pool(script: &[bool]) -> Arc<Pool> {
        let b = Scripted {
            script: Mutex::new(script.iter().copied().collect()),
            submits: AtomicUsize::new(0),
        };
        Pool::start_with(Box::new(b), Arc::new(Completer::new())).unwrap()
    }

    type JobOutcome = Arc<Mutex<Option<(KaeResult<()>, Vec<u8>)>>>;

    /// A job that runs one private operation through `run_async` on `pool`.
    fn pool_job(
        pool: &Arc<Pool>,
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

    /// In a forked child: the process-wide pool must be this process's own and compute.
    fn child_uses_its_own_pool(k: &Arc<RsaKey>, m: &[u8], expect: &[u8]) -> bool {
        let Some(pool) = current() else {
            return false;
        };
        if pool.pid != std::process::id() {
            return false;
        }
        let mut out = vec![0u8; k.size()];
        run_blocking(&pool, OpKind::Public, k, m, &mut out).is_ok() && out == expect
    }

    /// A key of its own for the fork tests (no other test's thread holds its locks).
    fn fork_case() -> (Arc<RsaKey>, Vec<u8>, Vec<u8>) {
        let k = Arc::new(
            crate::rsa::ops::generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap())
                .unwrap(),
        );
        let m = input(k.size(), 3);
        let mut expect = vec![0u8; k.size()];
        crate::rsa::ops::public_op(&k, &m, &mut expect).unwrap();
        (k, m, expect)
    }

    #[test]
    fn a_child_forked_while_the_start_lock_is_held_starts_its_own_pool() {
        let _serial = serial();
        let (k, m, expect) = fork_case();
        assert!(current().is_some(), "the parent runs a pool");
        // Another thread holds the start lock (as while it starts or stops the pool).
        let (tx, rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let _g = lock_start();
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        });
        rx.recv().unwrap();
        let r = crate::ffi::fork::run_in_child(|| child_uses_its_own_pool(&k, &m, &expect), HANG);
        holder.join().unwrap();
        stop_current();
        assert_eq!(r, Ok(0), "the child could not use a pool of its own");
    }

    #[test]
    fn forks_while_another_thread_starts_and_stops_the_pool() {
        let _serial = serial();
        let (k, m, expect) = fork_case();
        let stop = AtomicBool::new(false);
        let cycles = AtomicUsize::new(0);
        let results: Vec<Result<c_int, String>> = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    add_user();
                    let _ = current();
                    remove_user();
                    cycles.fetch_add(1, Ordering::Relaxed);
                }
            });
            let r = (0..15)
                .map(|i| {
                    std::thread::sleep(Duration::from_micros(300 + 137 * i));
                    crate::ffi::fork::run_in_child(
                        || child_uses_its_own_pool(&k, &m, &expect),
                        HANG,
                    )
                })
                .collect();
            stop.store(true, Ordering::Release);
            r
        });
        stop_current();
        let bad: Vec<_> = results.iter().filter(|r| **r != Ok(0)).collect();
        assert!(
            bad.is_empty(),
            "{} of {} children failed ({} start/stop cycles meanwhile): {bad:?}",
            bad.len(),
            results.len(),
            cycles.load(Ordering::Relaxed)
        );
        assert!(cycles.load(Ordering::Relaxed) > 15, "the pool was cycled");
    }

    #[test]
    fn operations_racing_the_last_teardown_complete_or_compute_inline() {
        let _serial = serial();
        let (k, m, expect) = fork_case();
        let stop = AtomicBool::new(false);
        let (ops, cycles) = std::thread::scope(|s| {
            let cycler = s.spawn(|| {
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    add_user();
                    std::thread::yield_now();
                    remove_user(); // last user: takes the pool out and shuts it down
                    n += 1;
                }
                n
            });
            let users: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Acquire) {
                            // A pool handed out just before teardown stays valid; its
                            // refusal (or cancellation) must not hang or fail the operation.
                            let mut out = vec![0u8; k.size()];
                            match current() {
                                Some(pool) => {
                                    match run_blocking(&pool, OpKind::Public, &k, &m, &mut out) {
                                        Ok(()) => {}
                                        Err(_) if pool.stopping() => {
                                            inline(OpKind::Public, &k, &m, &mut out).unwrap()
                                        }
                                        Err(e) => panic!("{e:?} from a running pool"),
                                    }
                                }
                                None => panic!("no pool"),
                            }
                            assert_eq!(out, expect);
                            let _ = running().map(|p| p.high_water());
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs(2));
            stop.store(true, Ordering::Release);
            let ops: u64 = users.into_iter().map(|h| h.join().unwrap()).sum();
            (ops, cycler.join().unwrap())
        });
        stop_current();
        assert!(
            ops > 100 && cycles > 100,
            "{ops} operations, {cycles} teardowns"
        );
    }

    #[test]
    fn idle_pool_threads_sleep() {
        let _serial = serial();
        let cfg = OffloadConfig {
            queues: 2,
            depth: 4,
            ..OffloadConfig::default()
        };
        let pool = Pool::start_cpu(&cfg, echo).unwrap();
        let k = key();
        let mut out = vec![0u8; k.size()];
        run_blocking(&pool, OpKind::Private, &k, &input(k.size(), 3), &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // All pool threads parked: their CPU time barely moves while idle.
        let before = pool_threads_cpu("kae-cpu-");
        std::thread::sleep(Duration::from_millis(300));
        let used = pool_threads_cpu("kae-cpu-") - before;
        assert!(used < 0.03, "idle pool threads used {used:.3}s CPU in 0.3s");
        pool.shutdown();
    }
}
