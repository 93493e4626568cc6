//! ASYNC job driver for the pool tests (`async_jobs`, `async_depth1`, `fork`, `teardown`):
//! raw FFI to OpenSSL's ASYNC API, an [`AsyncOp`] wrapping one job and its wait context, a
//! driver that resumes jobs when their wait fd is readable (`poll`) or their wake-up callback
//! fired, lean raw-FFI operations meant to run *inside* a job (the job's stack is OpenSSL's
//! small fibre stack: no panics, no large frames there), and the kae provider counters.
//!
//! Used next to `tests/common/mod.rs` (`mod common; mod async_support;`).
#![allow(dead_code)]

use crate::common::ffi::{
    EVP_DigestSign, EVP_DigestSignInit_ex, EVP_DigestVerify, EVP_DigestVerifyInit_ex,
    EVP_MD_CTX_free, EVP_MD_CTX_new, EVP_PKEY_CTX_free, EVP_PKEY_CTX_new_from_pkey,
    EVP_PKEY_CTX_set_params, EVP_PKEY_decrypt, EVP_PKEY_decrypt_init, EVP_PKEY_sign, EVP_PKEY,
    EVP_PKEY_CTX, OSSL_LIB_CTX, OSSL_PARAM, OSSL_PARAM_UNMODIFIED, OSSL_PARAM_UNSIGNED_INTEGER,
    OSSL_PARAM_UTF8_PTR, OSSL_PROVIDER,
};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

#[allow(non_camel_case_types, non_snake_case)]
pub mod ffi {
    use std::ffi::{c_int, c_void};

    #[repr(C)]
    pub struct ASYNC_JOB {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct ASYNC_WAIT_CTX {
        _private: [u8; 0],
    }

    pub const ASYNC_ERR: c_int = 0;
    pub const ASYNC_NO_JOBS: c_int = 1;
    pub const ASYNC_PAUSE: c_int = 2;
    pub const ASYNC_FINISH: c_int = 3;

    pub type JobFn = unsafe extern "C" fn(arg: *mut c_void) -> c_int;
    pub type CallbackFn = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

    extern "C" {
        pub fn ASYNC_init_thread(max_size: usize, init_size: usize) -> c_int;
        pub fn ASYNC_cleanup_thread();
        pub fn ASYNC_is_capable() -> c_int;
        pub fn ASYNC_start_job(
            job: *mut *mut ASYNC_JOB,
            ctx: *mut ASYNC_WAIT_CTX,
            ret: *mut c_int,
            func: JobFn,
            args: *mut c_void,
            size: usize,
        ) -> c_int;
        pub fn ASYNC_get_current_job() -> *mut ASYNC_JOB;
        pub fn ASYNC_WAIT_CTX_new() -> *mut ASYNC_WAIT_CTX;
        pub fn ASYNC_WAIT_CTX_free(ctx: *mut ASYNC_WAIT_CTX);
        pub fn ASYNC_WAIT_CTX_get_all_fds(
            ctx: *mut ASYNC_WAIT_CTX,
            fd: *mut c_int,
            numfds: *mut usize,
        ) -> c_int;
        pub fn ASYNC_WAIT_CTX_set_callback(
            ctx: *mut ASYNC_WAIT_CTX,
            cb: CallbackFn,
            arg: *mut c_void,
        ) -> c_int;
        pub fn ASYNC_WAIT_CTX_get_status(ctx: *mut ASYNC_WAIT_CTX) -> c_int;
    }
}

use ffi::*;

/// Result of a job's work: the output bytes, or a short description of what failed.
pub type JobResult = Result<Vec<u8>, String>;

/// What a job runs (on the job's fibre stack).
type Work = Box<dyn FnOnce() -> JobResult>;

struct Task {
    work: Option<Work>,
    result: Option<JobResult>,
}

unsafe extern "C" fn job_trampoline(arg: *mut c_void) -> c_int {
    // ASYNC_start_job copied the pointer-sized argument: `arg` points at a `*mut Task`.
    let task = unsafe { *(arg as *const *mut Task) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let t = unsafe { &mut *task };
        let work = t.work.take();
        match work {
            Some(w) => {
                let r = w();
                let ok = r.is_ok();
                t.result = Some(r);
                ok
            }
            None => false,
        }
    }));
    match r {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(_) => -1,
    }
}

/// Wake-up flag of a job in callback mode: the callback sets it and unparks the driver.
pub struct CbFlag {
    pub ready: AtomicBool,
    pub calls: std::sync::atomic::AtomicU64,
    waker: Thread,
}

unsafe extern "C" fn wake_callback(arg: *mut c_void) -> c_int {
    if arg.is_null() {
        return 0;
    }
    let f = unsafe { &*(arg as *const CbFlag) };
    f.calls.fetch_add(1, Ordering::Relaxed);
    f.ready.store(true, Ordering::Release);
    f.waker.unpark();
    1
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    NotStarted,
    Paused,
    Finished,
    /// ASYNC_start_job returned ASYNC_ERR.
    Error,
}

/// One ASYNC job with its own wait context.
pub struct AsyncOp {
    pub name: String,
    pub job: *mut ASYNC_JOB,
    pub wctx: *mut ASYNC_WAIT_CTX,
    task: *mut Task,
    pub ret: c_int,
    pub state: State,
    /// ASYNC_start_job calls (start + resumes).
    pub steps: u32,
    /// Times the job returned ASYNC_PAUSE.
    pub pauses: u32,
    /// Times ASYNC_start_job said ASYNC_NO_JOBS.
    pub no_jobs: u32,
    pub cb: Option<Arc<CbFlag>>,
}

impl AsyncOp {
    /// A job that will run `work`; the application wakes it by polling its wait fd.
    pub fn new(name: impl Into<String>, work: impl FnOnce() -> JobResult + 'static) -> AsyncOp {
        let wctx = unsafe { ASYNC_WAIT_CTX_new() };
        assert!(!wctx.is_null(), "ASYNC_WAIT_CTX_new failed");
        let task = Box::into_raw(Box::new(Task {
            work: Some(Box::new(work)),
            result: None,
        }));
        AsyncOp {
            name: name.into(),
            job: ptr::null_mut(),
            wctx,
            task,
            ret: 0,
            state: State::NotStarted,
            steps: 0,
            pauses: 0,
            no_jobs: 0,
            cb: None,
        }
    }

    /// Like [`AsyncOp::new`] but with a wake-up callback set on the wait context (the flag
    /// unparks the calling thread, which must be the one driving the job).
    pub fn with_callback(
        name: impl Into<String>,
        work: impl FnOnce() -> JobResult + 'static,
    ) -> AsyncOp {
        let mut op = AsyncOp::new(name, work);
        let flag = Arc::new(CbFlag {
            ready: AtomicBool::new(false),
            calls: Default::default(),
            waker: std::thread::current(),
        });
        let r = unsafe {
            ASYNC_WAIT_CTX_set_callback(op.wctx, wake_callback, Arc::as_ptr(&flag) as *mut c_void)
        };
        assert_eq!(r, 1, "ASYNC_WAIT_CTX_set_callback failed");
        op.cb = Some(flag);
        op
    }

    /// One `ASYNC_start_job` call (start or resume); returns its raw status.
    pub fn step(&mut self) -> c_int {
        assert!(
            matches!(self.state, State::NotStarted | State::Paused),
            "{}: step in state {:?}",
            self.name,
            self.state
        );
        let mut arg: *mut Task = self.task;
        self.steps += 1;
        let r = unsafe {
            ASYNC_start_job(
                &mut self.job,
                self.wctx,
                &mut self.ret,
                job_trampoline,
                (&mut arg as *mut *mut Task).cast(),
                std::mem::size_of::<*mut Task>(),
            )
        };
        match r {
            ASYNC_PAUSE => {
                self.pauses += 1;
                self.state = State::Paused;
            }
            ASYNC_FINISH => self.state = State::Finished,
            ASYNC_NO_JOBS => self.no_jobs += 1,
            _ => self.state = State::Error,
        }
        r
    }

    /// The fds registered in this job's wait context.
    pub fn fds(&self) -> Vec<c_int> {
        unsafe {
            let mut n = 0usize;
            if ASYNC_WAIT_CTX_get_all_fds(self.wctx, ptr::null_mut(), &mut n) != 1 || n == 0 {
                return Vec::new();
            }
            let mut v = vec![-1 as c_int; n];
            if ASYNC_WAIT_CTX_get_all_fds(self.wctx, v.as_mut_ptr(), &mut n) != 1 {
                return Vec::new();
            }
            v.truncate(n);
            v
        }
    }

    /// Whether the callback fired since the last call (clears the flag).
    pub fn take_cb_ready(&self) -> bool {
        self.cb
            .as_ref()
            .is_some_and(|f| f.ready.swap(false, Ordering::AcqRel))
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Finished | State::Error)
    }

    /// The job's output once finished.
    pub fn result(&self) -> JobResult {
        match self.state {
            State::Finished => {
                let t = unsafe { &*self.task };
                match &t.result {
                    Some(r) => r.clone(),
                    None => Err(format!("job returned {} without a result", self.ret)),
                }
            }
            s => Err(format!("job not finished (state {s:?})")),
        }
    }

    /// The application drops this job while it is paused: frees the wait context (kae's fd
    /// cleanup runs), never resumes the job. The job itself and its task stay allocated (a
    /// paused `ASYNC_JOB` cannot be freed).
    pub fn abandon(mut self) {
        unsafe { ASYNC_WAIT_CTX_free(self.wctx) };
        self.wctx = ptr::null_mut();
        if let Some(cb) = self.cb.take() {
            std::mem::forget(cb);
        }
        self.task = ptr::null_mut(); // leaked on purpose
        self.state = State::Error;
        std::mem::forget(self);
    }
}

impl Drop for AsyncOp {
    fn drop(&mut self) {
        if self.state == State::Paused {
            // Never resumed (a failing test): the job may still be woken by kae; leave its
            // wait context, callback argument and task alive.
            if let Some(cb) = self.cb.take() {
                std::mem::forget(cb);
            }
            return;
        }
        unsafe {
            if !self.wctx.is_null() {
                ASYNC_WAIT_CTX_free(self.wctx);
            }
            if !self.task.is_null() {
                drop(Box::from_raw(self.task));
            }
        }
    }
}

/// Problems of finished jobs: an error, an output other than the expected bytes, or a job
/// function that returned something other than 1.
pub fn check_outputs<'a>(jobs: impl IntoIterator<Item = (&'a AsyncOp, &'a [u8])>) -> Vec<String> {
    let mut problems = Vec::new();
    for (op, expected) in jobs {
        match op.result() {
            Ok(out) if out == expected => {}
            Ok(out) => problems.push(format!(
                "{}: wrong output\n    got      {}\n    expected {}",
                op.name,
                crate::common::hex(&out),
                crate::common::hex(expected)
            )),
            Err(e) => problems.push(format!(
                "{}: failed (ret {}): {e}: {}",
                op.name,
                op.ret,
                crate::common::take_errors("job")
            )),
        }
        if op.state == State::Finished && op.ret != 1 {
            problems.push(format!("{}: job function returned {}", op.name, op.ret));
        }
    }
    problems
}

/// What one test thread reports: jobs run, pauses seen, problems found.
pub type ThreadReport = Result<(u64, u64, Vec<String>), String>;

/// Sums the reports of the test threads; a thread that failed or panicked is a problem.
pub fn sum_thread_reports(reports: Vec<ThreadReport>) -> (u64, u64, Vec<String>) {
    let (mut jobs, mut pauses, mut problems) = (0, 0, Vec::new());
    for r in reports {
        match r {
            Ok((n, ps, p)) => {
                jobs += n;
                pauses += ps;
                problems.extend(p);
            }
            Err(e) => problems.push(e),
        }
    }
    (jobs, pauses, problems)
}

/// What happened while driving a set of jobs.
#[derive(Debug, Default, Clone)]
pub struct DriveReport {
    pub resumes: u64,
    pub pauses: u64,
    pub polls: u64,
    pub elapsed: Duration,
}

/// Starts every job that was not started yet and resumes paused ones when woken (wait fd
/// readable, or callback flag set), until all have finished. Fails when nothing wakes any
/// job for `stall`, when a paused fd-mode job has no wait fd, or on ASYNC_ERR.
pub fn drive(ops: &mut [AsyncOp], stall: Duration) -> Result<DriveReport, String> {
    let t0 = Instant::now();
    let mut rep = DriveReport::default();
    for op in ops.iter_mut() {
        if op.state == State::NotStarted {
            let r = op.step();
            check_step(op, r)?;
        }
    }
    let mut last_progress = Instant::now();
    loop {
        // Not started because of ASYNC_NO_JOBS: retry.
        for op in ops.iter_mut() {
            if op.state == State::NotStarted {
                let r = op.step();
                check_step(op, r)?;
            }
        }
        if ops.iter().all(|o| o.is_done()) {
            break;
        }
        // Callback-mode jobs whose callback fired.
        let mut progressed = false;
        for op in ops.iter_mut() {
            if op.state == State::Paused && op.cb.is_some() && op.take_cb_ready() {
                let r = op.step();
                rep.resumes += 1;
                check_step(op, r)?;
                progressed = true;
            }
        }
        // fd-mode jobs: poll their fds.
        let mut pfds: Vec<libc::pollfd> = Vec::new();
        let mut owner: Vec<usize> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if op.state != State::Paused || op.cb.is_some() {
                continue;
            }
            let fds = op.fds();
            if fds.is_empty() {
                return Err(format!(
                    "{}: paused with no wait fd in its ASYNC_WAIT_CTX and no callback set (it could never be woken)",
                    op.name
                ));
            }
            for fd in fds {
                pfds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                owner.push(i);
            }
        }
        let any_cb = ops
            .iter()
            .any(|o| o.state == State::Paused && o.cb.is_some());
        if !progressed {
            let left = stall.saturating_sub(last_progress.elapsed());
            if left.is_zero() {
                return Err(stall_message(ops, stall));
            }
            let timeout_ms: c_int = if any_cb {
                1
            } else {
                left.as_millis().clamp(1, 1000) as c_int
            };
            if pfds.is_empty() {
                std::thread::park_timeout(Duration::from_millis(timeout_ms as u64));
                continue;
            }
            rep.polls += 1;
            let n =
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll failed: {e}"));
            }
            if n == 0 {
                continue;
            }
        } else {
            // Check the fds without waiting.
            if !pfds.is_empty() {
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
            }
        }
        let mut ready: Vec<usize> = Vec::new();
        for (p, &i) in pfds.iter().zip(owner.iter()) {
            if p.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                return Err(format!(
                    "{}: wait fd {} reported revents {:#x} (closed or invalid fd?)",
                    ops[i].name, p.fd, p.revents
                ));
            }
            if p.revents != 0 && ready.last() != Some(&i) {
                ready.push(i);
            }
        }
        for i in ready {
            let op = &mut ops[i];
            if op.state != State::Paused {
                continue;
            }
            let r = op.step();
            rep.resumes += 1;
            check_step(op, r)?;
            progressed = true;
        }
        if progressed {
            last_progress = Instant::now();
        }
    }
    rep.pauses = ops.iter().map(|o| o.pauses as u64).sum();
    rep.elapsed = t0.elapsed();
    Ok(rep)
}

fn check_step(op: &AsyncOp, r: c_int) -> Result<(), String> {
    match r {
        ASYNC_ERR => Err(format!(
            "{}: ASYNC_start_job returned ASYNC_ERR (step {}): {}",
            op.name,
            op.steps,
            crate::common::take_errors("ASYNC_start_job")
        )),
        ASYNC_NO_JOBS if op.no_jobs > 10_000 => Err(format!(
            "{}: ASYNC_start_job keeps returning ASYNC_NO_JOBS",
            op.name
        )),
        _ => Ok(()),
    }
}

fn stall_message(ops: &[AsyncOp], stall: Duration) -> String {
    let paused: Vec<String> = ops
        .iter()
        .filter(|o| o.state == State::Paused)
        .map(|o| {
            format!(
                "{} (pauses {}, steps {}, fds {:?}, callback calls {:?})",
                o.name,
                o.pauses,
                o.steps,
                o.fds(),
                o.cb.as_ref().map(|c| c.calls.load(Ordering::Relaxed))
            )
        })
        .collect();
    format!(
        "stall: no job was woken for {stall:?}; {} job(s) still paused: {}",
        paused.len(),
        paused.join(", ")
    )
}

/// Drives `ops` and panics (with the failing job's name) on any driver failure or job error.
#[track_caller]
pub fn drive_ok(ops: &mut [AsyncOp], stall: Duration) -> DriveReport {
    match drive(ops, stall) {
        Ok(r) => r,
        Err(e) => panic!("ASYNC driver: {e}"),
    }
}

/// Per-thread ASYNC setup (a pool of up to `max` jobs) and cleanup on drop.
pub struct AsyncThread;

impl AsyncThread {
    pub fn init(max: usize) -> AsyncThread {
        assert_eq!(unsafe { ASYNC_is_capable() }, 1, "ASYNC not supported here");
        assert_eq!(
            unsafe { ASYNC_init_thread(max, 0) },
            1,
            "ASYNC_init_thread failed"
        );
        AsyncThread
    }
}

impl Drop for AsyncThread {
    fn drop(&mut self) {
        unsafe { ASYNC_cleanup_thread() };
    }
}

// ---------------------------------------------------------------------------------------------
// Operations for use inside a job: raw FFI, no panics, small frames.
// ---------------------------------------------------------------------------------------------

/// Raw pointers that may be moved into a job's closure (the objects outlive the jobs).
#[derive(Clone, Copy)]
pub struct Raw {
    pub libctx: *mut OSSL_LIB_CTX,
    pub key: *mut EVP_PKEY,
}

unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

/// `EVP_DigestSign` with `md` (PKCS#1 v1.5 is the default padding of an RSA key), fetched
/// from `libctx` with `propq`.
pub fn raw_digest_sign(raw: Raw, md: &'static CStr, propq: &'static CStr, msg: &[u8]) -> JobResult {
    unsafe {
        let mctx = EVP_MD_CTX_new();
        if mctx.is_null() {
            return Err("EVP_MD_CTX_new failed".into());
        }
        let mut pctx: *mut EVP_PKEY_CTX = ptr::null_mut();
        if EVP_DigestSignInit_ex(
            mctx,
            &mut pctx,
            md.as_ptr(),
            raw.libctx,
            propq.as_ptr(),
            raw.key,
            ptr::null(),
        ) != 1
        {
            EVP_MD_CTX_free(mctx);
            return Err("EVP_DigestSignInit_ex failed".into());
        }
        let mut len = 0usize;
        if EVP_DigestSign(mctx, ptr::null_mut(), &mut len, msg.as_ptr(), msg.len()) != 1 {
            EVP_MD_CTX_free(mctx);
            return Err("EVP_DigestSign(size) failed".into());
        }
        let mut out = vec![0u8; len];
        let r = EVP_DigestSign(mctx, out.as_mut_ptr(), &mut len, msg.as_ptr(), msg.len());
        EVP_MD_CTX_free(mctx);
        if r != 1 {
            return Err(format!("EVP_DigestSign returned {r}"));
        }
        out.truncate(len);
        Ok(out)
    }
}

/// One-shot `EVP_DigestVerify`; `Ok(vec![1])` when the signature verifies.
pub fn raw_digest_verify(
    raw: Raw,
    md: &'static CStr,
    propq: &'static CStr,
    msg: &[u8],
    sig: &[u8],
) -> JobResult {
    unsafe {
        let mctx = EVP_MD_CTX_new();
        if mctx.is_null() {
            return Err("EVP_MD_CTX_new failed".into());
        }
        let mut pctx: *mut EVP_PKEY_CTX = ptr::null_mut();
        if EVP_DigestVerifyInit_ex(
            mctx,
            &mut pctx,
            md.as_ptr(),
            raw.libctx,
            propq.as_ptr(),
            raw.key,
            ptr::null(),
        ) != 1
        {
            EVP_MD_CTX_free(mctx);
            return Err("EVP_DigestVerifyInit_ex failed".into());
        }
        let r = EVP_DigestVerify(mctx, sig.as_ptr(), sig.len(), msg.as_ptr(), msg.len());
        EVP_MD_CTX_free(mctx);
        if r != 1 {
            return Err(format!("EVP_DigestVerify returned {r}"));
        }
        Ok(vec![1])
    }
}

/// `EVP_PKEY_decrypt` with the given parameters.
pub fn raw_decrypt(
    raw: Raw,
    propq: &'static CStr,
    params: *const OSSL_PARAM,
    ct: &[u8],
) -> JobResult {
    unsafe {
        let ctx = EVP_PKEY_CTX_new_from_pkey(raw.libctx, raw.key, propq.as_ptr());
        if ctx.is_null() {
            return Err("EVP_PKEY_CTX_new_from_pkey failed".into());
        }
        let r = (|| {
            if EVP_PKEY_decrypt_init(ctx) != 1 {
                return Err("EVP_PKEY_decrypt_init failed".to_string());
            }
            if EVP_PKEY_CTX_set_params(ctx, params) != 1 {
                return Err("EVP_PKEY_CTX_set_params failed".to_string());
            }
            let mut len = 0usize;
            if EVP_PKEY_decrypt(ctx, ptr::null_mut(), &mut len, ct.as_ptr(), ct.len()) != 1 {
                return Err("EVP_PKEY_decrypt(size) failed".to_string());
            }
            let mut out = vec![0u8; len];
            let r = EVP_PKEY_decrypt(ctx, out.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len());
            if r != 1 {
                return Err(format!("EVP_PKEY_decrypt returned {r}"));
            }
            out.truncate(len);
            Ok(out)
        })();
        EVP_PKEY_CTX_free(ctx);
        r
    }
}

/// `EVP_PKEY_sign` on an already initialised context (the input is the digest).
pub fn raw_pkey_sign(ctx: *mut EVP_PKEY_CTX, siglen: usize, tbs: &[u8]) -> JobResult {
    unsafe {
        let mut out = vec![0u8; siglen];
        let mut len = siglen;
        let r = EVP_PKEY_sign(ctx, out.as_mut_ptr(), &mut len, tbs.as_ptr(), tbs.len());
        if r != 1 {
            return Err(format!("EVP_PKEY_sign returned {r}"));
        }
        out.truncate(len);
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// kae counters (provider parameters)
// ---------------------------------------------------------------------------------------------

pub const COUNTER_NAMES: [&str; 16] = [
    "ops-private-inline",
    "ops-private-offloaded",
    "ops-public-inline",
    "ops-public-offloaded",
    "errors",
    "async-pauses",
    "spurious-resumes",
    "queue-full-retries",
    "fallbacks",
    "crt-faults",
    "queue-high-water",
    "in-flight",
    "hw-faults",
    "mb-batches",
    "mb-lanes",
    "mb-scalar",
];

/// kae's counters and backend, as reported by `OSSL_PROVIDER_get_params`.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub values: BTreeMap<&'static str, u64>,
    pub backend: String,
}

impl Counters {
    #[track_caller]
    pub fn get(&self, name: &str) -> u64 {
        *self
            .values
            .get(name)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }
    /// `self[name] - before[name]` (saturating).
    pub fn delta(&self, before: &Counters, name: &str) -> u64 {
        self.get(name).saturating_sub(before.get(name))
    }
}

/// Reads every counter; panics if kae does not report one of them.
pub fn counters(prov: *const OSSL_PROVIDER) -> Counters {
    let names: Vec<std::ffi::CString> = COUNTER_NAMES
        .iter()
        .map(|n| std::ffi::CString::new(*n).unwrap())
        .collect();
    let mut vals = [0u64; COUNTER_NAMES.len()];
    let mut backend: *const c_char = ptr::null();
    let mut params: Vec<OSSL_PARAM> = names
        .iter()
        .zip(vals.iter_mut())
        .map(|(n, v)| OSSL_PARAM {
            key: n.as_ptr(),
            data_type: OSSL_PARAM_UNSIGNED_INTEGER,
            data: (v as *mut u64).cast(),
            data_size: 8,
            return_size: OSSL_PARAM_UNMODIFIED,
        })
        .collect();
    params.push(OSSL_PARAM {
        key: c"backend".as_ptr(),
        data_type: OSSL_PARAM_UTF8_PTR,
        data: (&mut backend as *mut *const c_char).cast(),
        data_size: 0,
        return_size: OSSL_PARAM_UNMODIFIED,
    });
    params.push(OSSL_PARAM {
        key: ptr::null(),
        data_type: 0,
        data: ptr::null_mut(),
        data_size: 0,
        return_size: 0,
    });
    let r = unsafe { crate::common::ffi::OSSL_PROVIDER_get_params(prov, params.as_mut_ptr()) };
    assert_eq!(
        r,
        1,
        "OSSL_PROVIDER_get_params failed: {}",
        crate::common::take_errors("get_params")
    );
    let mut out = Counters::default();
    for (i, name) in COUNTER_NAMES.iter().enumerate() {
        assert!(
            params[i].return_size != OSSL_PARAM_UNMODIFIED,
            "kae did not report counter {name}"
        );
        out.values.insert(name, vals[i]);
    }
    assert!(!backend.is_null(), "kae did not report its backend");
    out.backend = unsafe { CStr::from_ptr(backend) }
        .to_string_lossy()
        .into_owned();
    out
}

// ---------------------------------------------------------------------------------------------
// Misc
// ---------------------------------------------------------------------------------------------

/// Number of threads of this process (`/proc/self/task` entries).
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Names of this process's threads (for messages).
pub fn thread_names() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(d) = std::fs::read_dir("/proc/self/task") {
        for e in d.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            v.push(comm.trim().to_string());
        }
    }
    v.sort();
    v
}

/// Whether a thread name is a pool worker's: CPU workers (`kae-cpu-N`), or multi-buffer workers
/// (`kae-mb-N`: `backend = auto` picks them on AVX-512 IFMA machines).
pub fn is_pool_worker(name: &str) -> bool {
    name.starts_with("kae-cpu") || name.starts_with("kae-mb")
}

/// VmRSS of this process in kB.
pub fn vm_rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Aborts the process if not disarmed within `limit` (tests must never hang).
pub struct Watchdog {
    armed: Arc<AtomicBool>,
}

impl Watchdog {
    pub fn new(what: &'static str, limit: Duration) -> Watchdog {
        let armed = Arc::new(AtomicBool::new(true));
        let a = armed.clone();
        std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                let t0 = Instant::now();
                while t0.elapsed() < limit {
                    std::thread::sleep(Duration::from_millis(100));
                    if !a.load(Ordering::Acquire) {
                        return;
                    }
                }
                eprintln!("WATCHDOG: {what} still running after {limit:?}; aborting");
                std::process::abort();
            })
            .expect("spawn watchdog");
        Watchdog { armed }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.armed.store(false, Ordering::Release);
    }
}
