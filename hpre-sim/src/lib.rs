//! # kae-hpre-sim: a test-only UADK simulator
//!
//! **Test-only. Never installed, never shipped, never loaded outside tests.** It refuses to
//! initialise unless `KAE_SIM=1` is in the environment.
//!
//! `libkae_hpre_sim.so` exports the same C symbols as UADK 2.10's `libwd_crypto.so.2` for the RSA
//! path that kae's HPRE backend uses, with the same struct layouts (declared here again from
//! `shared/reference/uadk-rsa-abi.md`, with compile-time size/offset checks, independently of
//! the provider's declarations), and computes the results in software (OpenSSL `BIGNUM`s, not
//! constant time). Tests point kae's backend at it in place of the real library, and can inject
//! faults and read counters of what the caller did.
//!
//! ## Exported UADK symbols
//! `wd_rsa_init2_`, `wd_rsa_uninit2`, `wd_rsa_alloc_sess`, `wd_rsa_free_sess`,
//! `wd_rsa_set_crt_prikey_params`, `wd_rsa_set_pubkey_params`, `wd_do_rsa_sync`,
//! `wd_do_rsa_async`, `wd_rsa_poll`, `wd_rsa_is_crt`, `wd_rsa_get_key_bits`: same signatures as
//! UADK. No entry point unwinds: a panic becomes an error return.
//!
//! ## Simulator-only symbols
//! * `int kae_sim_stats(struct KaeSimStats *out)`: copies the counters (returns 0; -22 for a
//!   null `out`).
//! * `uint32_t kae_sim_version(void)`: 1.
//! * `uint64_t kae_sim_isolations(void)`: how many times `KAE_SIM_ISOLATE_AFTER` isolated the
//!   device (once per init at most); process-wide, never reset.
//! * `uint64_t kae_sim_isolated_refusals(void)`: submissions (sync and async) refused with -5
//!   because the device was isolated; process-wide, never reset. Not in `KaeSimStats`, whose
//!   layout stays as it is.
//!
//! `struct KaeSimStats` is 16 `uint64_t`, in this order (process-wide, never reset; compare
//! before/after values):
//!
//! | field | counts |
//! |---|---|
//! | `init_calls` | every `wd_rsa_init2_` call (refused ones too) |
//! | `uninit_calls` | every `wd_rsa_uninit2` call |
//! | `sessions_allocated` / `sessions_freed` | successful `wd_rsa_alloc_sess` / `wd_rsa_free_sess` |
//! | `submitted` | async requests accepted by `wd_do_rsa_async` (sync calls are not counted here) |
//! | `completed_ok` | completions delivered with status 0 (poll callbacks and sync calls; includes corrupted ones) |
//! | `ebusy` | submissions refused with -16 (depth full or `KAE_SIM_EBUSY_EVERY`, sync too) |
//! | `error_completions` | completions delivered with a non-zero status (poll callbacks and sync calls) |
//! | `dropped` | async completions lost on purpose (`KAE_SIM_DROP_EVERY`) |
//! | `wrong_results` | results corrupted on purpose (`KAE_SIM_WRONG_EVERY`) |
//! | `misuse` | API misuse detected (see below) |
//! | `in_flight` | async requests accepted and not yet delivered, dropped or discarded (a gauge) |
//! | `max_in_flight` | highest `in_flight` seen |
//! | `sync_calls` | every `wd_do_rsa_sync` call |
//! | `polls` | every `wd_rsa_poll` call |
//! | `callbacks` | completion callbacks run |
//!
//! Misuse counted: a null argument; init with an algorithm other than "rsa"; a second init;
//! alloc before init; uninit or poll while not initialised; an unknown, freed, or other-process
//! (inherited over fork) session handle, or one from before the last uninit; key parts that are
//! empty or too long (> key bytes; CRT parts > key bytes / 2), CRT keys on a non-CRT session; an
//! operation whose keys are not set (SIGN needs the CRT key, VERIFY the public key), an unknown
//! `op_type`, `src_bytes`/`dst_bytes` other than the key size, null `src`/`dst`, a null `cb` on
//! async, a request with no async (or sync) ctx configured; an input not below the modulus
//! (counted when the device reads it; the request still completes, with a garbage result, as
//! on hardware); freeing a session with undelivered requests.
//!
//! ## Environment (read at each successful `wd_rsa_init2_`)
//! * `KAE_SIM=1`: required, else init returns -19 with one line on stderr.
//! * `KAE_SIM_DEVICE_THREADS` (1): threads computing async requests; 0 = an instantaneous
//!   device that computes on the submitting thread (no thread hop: for measuring the caller).
//! * `KAE_SIM_LATENCY_US` (0): a completion is pollable no earlier than submit + latency; a sync
//!   call returns no earlier than that either.
//! * `KAE_SIM_DEPTH` (1024): undelivered requests per async ctx; beyond it submit returns -16.
//! * `KAE_SIM_EBUSY_EVERY=N`: every Nth submission (sync and async) returns -16.
//! * `KAE_SIM_ERROR_EVERY=N`: every Nth completion has status 67 (sync returns -67).
//! * `KAE_SIM_DROP_EVERY=N`: every Nth completion is lost: no callback (async only; a sync
//!   call that is the Nth completion is not affected).
//! * `KAE_SIM_WRONG_EVERY=N`: every Nth completion has status 0 and one bit of the result flipped.
//! * `KAE_SIM_ISOLATE_AFTER=N`: after N completions the device is isolated: with
//!   `KAE_SIM_SYSFS` set, `1` is written to `$KAE_SIM_SYSFS/hisi_hpre-0/isolate`; later
//!   submissions return -5, requests not yet computed complete with status 22.
//! * `KAE_SIM_COMPUTE=0`: no arithmetic; the result is the input.
//! * `KAE_SIM_SLOW_REFUSAL_MS=M`: every async submission returns -5 after M ms (taking no lock
//!   meanwhile): a caller that gives up on a request before the refusal comes back.
//! * `KAE_SIM_SYNC_GIVE_UP_MS=M`: every sync call returns -110 (timed out) at once, and M ms
//!   later the device writes the key size of bytes into its `dst`: a request that completes
//!   after the caller gave up (the caller must keep the buffer until UADK is torn down).
//!
//! Completions are counted in one sequence (async device completions and sync calls); when
//! several `*_EVERY` knobs hit the same completion, drop wins over error, error over wrong.
//!
//! ## Behaviour worth knowing
//! * Ctxs: `params->ctx_set_num[0]` gives the async and sync ctx counts (1 each without
//!   params; `WD_RSA_CTX_NUM` is not honoured). Sessions bind an async ctx round robin.
//! * Async: the request is copied; the device thread reads `src` when it computes; `dst` is
//!   written on the polling thread just before the callback, which gets the simulator's copy
//!   (`status`, `dst_bytes` filled). The copy is overwritten with 0xA5 and freed after the
//!   callback returns; the ctx slot is released then too.
//! * `wd_rsa_poll` adds the number delivered to `*count` and returns 0.
//! * `wd_rsa_uninit2` joins the device threads and discards undelivered requests without
//!   callbacks. Sessions stay registered but unusable (freeing them is fine).
//! * Fork: an atfork child handler resets the init state; the parent's sessions are misuse in
//!   the child; the child may init again.
//! * `wd_rsa_alloc_sess` does not write `setup->mm_ops` back (real UADK 2.10 does).
#![deny(unsafe_op_in_unsafe_fn)]

mod abi;
mod device;
mod math;

use abi::*;
use core::ffi::{c_char, c_int, c_void, CStr};
use device::{bump, lock, Config, Fate, Job, Refused, ReqCopy, Runtime, Stat};
use math::{CrtKey, KeyMaterial, Secret};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::Instant;

/// Handles are counters from here (never 0, never an address).
const HANDLE_BASE: usize = 0x5EED_0000_0001;

struct Session {
    pid: u32,
    generation: u64,
    key_bits: u32,
    is_crt: bool,
    key: Arc<Mutex<KeyMaterial>>,
    async_ctx: usize,
    pending: Arc<AtomicU32>,
}

struct Global {
    rt: Option<Arc<Runtime>>,
    /// Bumped at every init, uninit and fork (in the child): sessions of an older generation
    /// are unusable.
    generation: u64,
    sessions: BTreeMap<usize, Session>,
    next_handle: usize,
    next_ctx: usize,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    rt: None,
    generation: 0,
    sessions: BTreeMap::new(),
    next_handle: HANDLE_BASE,
    next_ctx: 0,
});

/// Runs an exported body, turning a panic into `on_panic`.
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// Counts a misuse and returns -EINVAL.
fn misuse() -> c_int {
    bump(Stat::Misuse);
    -EINVAL
}

/// A usable session: what an operation needs from it.
struct Usable {
    rt: Arc<Runtime>,
    key: Arc<Mutex<KeyMaterial>>,
    key_bits: u32,
    is_crt: bool,
    ctx: usize,
    pending: Arc<AtomicU32>,
}

impl Usable {
    fn key_bytes(&self) -> usize {
        self.key_bits as usize / 8
    }
}

/// Looks `h` up: known, allocated by this process, in the current initialisation.
fn usable(g: &Global, h: handle_t) -> Option<Usable> {
    let s = g.sessions.get(&h)?;
    let rt = g.rt.as_ref()?;
    if s.pid != std::process::id() || s.generation != g.generation {
        return None;
    }
    Some(Usable {
        rt: Arc::clone(rt),
        key: Arc::clone(&s.key),
        key_bits: s.key_bits,
        is_crt: s.is_crt,
        ctx: s.async_ctx,
        pending: Arc::clone(&s.pending),
    })
}

// ---------------------------------------------------------------------------------------------
// Fork
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// GLOBAL, held across fork() by the thread that forks.
    static FORK_GUARD: RefCell<Option<MutexGuard<'static, Global>>> = const { RefCell::new(None) };
}

extern "C" fn atfork_prepare() {
    let _ = catch_unwind(|| {
        let g = lock(&GLOBAL);
        FORK_GUARD.with(|c| *c.borrow_mut() = Some(g));
    });
}

extern "C" fn atfork_parent() {
    let _ = catch_unwind(|| FORK_GUARD.with(|c| drop(c.borrow_mut().take())));
}

extern "C" fn atfork_child() {
    let _ = catch_unwind(|| {
        FORK_GUARD.with(|c| {
            if let Some(mut g) = c.borrow_mut().take() {
                // The device threads do not exist here and their locks may be held: never touch
                // the parent's runtime again (leak it).
                std::mem::forget(g.rt.take());
                g.generation += 1;
                device::in_flight_reset();
            }
        })
    });
}

fn register_atfork() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the three handlers are plain extern "C" functions of this library that never
        // unwind; registering them has no other precondition.
        let rc = unsafe {
            libc::pthread_atfork(
                Some(atfork_prepare),
                Some(atfork_parent),
                Some(atfork_child),
            )
        };
        if rc != 0 {
            eprintln!("kae-hpre-sim: pthread_atfork failed ({rc}); fork handling is off");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Init
// ---------------------------------------------------------------------------------------------

/// `(sync, async)` ctx counts from `params->ctx_set_num[0]`, else `(1, 1)`.
///
/// # Safety
/// `params` is null or points to a valid `wd_ctx_params` whose `ctx_set_num` is null or valid.
unsafe fn ctx_counts(params: *const wd_ctx_params) -> (u32, u32) {
    // SAFETY: per this function's contract.
    let Some(p) = (unsafe { params.as_ref() }) else {
        return (1, 1);
    };
    if p.op_type_num < 1 {
        return (1, 1);
    }
    // SAFETY: per this function's contract.
    match unsafe { p.ctx_set_num.as_ref() } {
        Some(n) => (n.sync_ctx_num, n.async_ctx_num),
        None => (1, 1),
    }
}

/// `int wd_rsa_init2_(char *alg, __u32 sched_type, int task_type, struct wd_ctx_params *)`.
///
/// # Safety
/// `alg` is null or a NUL-terminated string; `params` is null or a valid `wd_ctx_params`.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_init2_(
    alg: *mut c_char,
    _sched_type: u32,
    _task_type: c_int,
    params: *mut wd_ctx_params,
) -> c_int {
    guard(-EINVAL, || {
        bump(Stat::InitCalls);
        if std::env::var_os("KAE_SIM").as_deref() != Some("1".as_ref()) {
            eprintln!(
                "kae-hpre-sim: this is the test-only UADK simulator; it refuses to run outside \
                 tests (KAE_SIM=1 is not set)"
            );
            return -ENODEV;
        }
        if alg.is_null() {
            return misuse();
        }
        // SAFETY: non-null `alg` is a NUL-terminated string (API contract).
        if unsafe { CStr::from_ptr(alg) }.to_bytes() != b"rsa" {
            return misuse();
        }
        // SAFETY: `params` is null or valid (API contract).
        let (sync, asyn) = unsafe { ctx_counts(params) };
        let mut g = lock(&GLOBAL);
        if g.rt.is_some() {
            bump(Stat::Misuse);
            return -EEXIST;
        }
        register_atfork();
        SLOW_REFUSAL_MS.store(device::knob("KAE_SIM_SLOW_REFUSAL_MS", 0), SeqCst);
        SYNC_GIVE_UP_MS.store(device::knob("KAE_SIM_SYNC_GIVE_UP_MS", 0), SeqCst);
        match Runtime::start(Config::from_env(asyn, sync)) {
            Ok(rt) => {
                g.rt = Some(rt);
                g.generation += 1;
                g.next_ctx = 0;
                0
            }
            Err(e) => {
                eprintln!("kae-hpre-sim: cannot start the device threads: {e}");
                -ENOMEM
            }
        }
    })
}

/// `void wd_rsa_uninit2(void)`.
///
/// # Safety
/// No precondition beyond UADK's: requests not yet delivered are discarded without callbacks.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_uninit2() {
    guard((), || {
        bump(Stat::UninitCalls);
        let rt = {
            let mut g = lock(&GLOBAL);
            let Some(rt) = g.rt.take() else {
                bump(Stat::Misuse);
                return;
            };
            g.generation += 1;
            rt
        };
        rt.stop();
        rt.discard_pending();
    })
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

/// `handle_t wd_rsa_alloc_sess(struct wd_rsa_sess_setup *)`.
///
/// # Safety
/// `setup` is null or points to a readable `wd_rsa_sess_setup` (80-byte form).
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_alloc_sess(setup: *mut wd_rsa_sess_setup) -> handle_t {
    guard(0, || {
        if setup.is_null() {
            bump(Stat::Misuse);
            return 0;
        }
        // SAFETY: `setup` is non-null and readable (API contract). Read field by field through
        // the pointer, and `is_crt` as a byte, so that a stray value is not taken as a `bool`.
        let (key_bits, is_crt) = unsafe {
            let key_bits = core::ptr::addr_of!((*setup).key_bits).read();
            let is_crt = core::ptr::addr_of!((*setup).is_crt).cast::<u8>().read() != 0;
            (key_bits, is_crt)
        };
        let mut g = lock(&GLOBAL);
        let Some(rt) = g.rt.clone() else {
            bump(Stat::Misuse);
            return 0;
        };
        if ![1024, 2048, 3072, 4096].contains(&key_bits) {
            return 0;
        }
        let h = g.next_handle;
        g.next_handle += 1;
        let ctx = match rt.cfg.async_ctxs {
            0 => 0,
            n => g.next_ctx % n as usize,
        };
        g.next_ctx = g.next_ctx.wrapping_add(1);
        let generation = g.generation;
        g.sessions.insert(
            h,
            Session {
                pid: std::process::id(),
                generation,
                key_bits: key_bits as u32,
                is_crt,
                key: Arc::default(),
                async_ctx: ctx,
                pending: Arc::default(),
            },
        );
        bump(Stat::SessionsAllocated);
        h
    })
}

/// `void wd_rsa_free_sess(handle_t)`: zeroizes the stored keys.
///
/// # Safety
/// No memory precondition (handles are looked up in a registry); the session's requests
/// should all have been delivered.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_free_sess(sess: handle_t) {
    guard((), || {
        let s = lock(&GLOBAL).sessions.remove(&sess);
        let Some(s) = s else {
            bump(Stat::Misuse);
            return;
        };
        if s.pid != std::process::id() {
            // Inherited over fork: its key lock may have been held by a parent's device thread
            // at fork time, so do not touch it.
            bump(Stat::Misuse);
            return;
        }
        if s.pending.load(SeqCst) != 0 {
            bump(Stat::Misuse);
        }
        lock(&s.key).zeroize();
        bump(Stat::SessionsFreed);
    })
}

/// The bytes of a `wd_dtb` (`data`, `dsize`), if it is non-empty and at most `max` bytes.
///
/// # Safety
/// `d` is null or valid, with `data` readable for `dsize` bytes.
unsafe fn dtb_bytes(d: *const wd_dtb, max: usize) -> Option<Vec<u8>> {
    // SAFETY: per this function's contract.
    let d = unsafe { d.as_ref() }?;
    let len = d.dsize as usize;
    if d.data.is_null() || len == 0 || len > max {
        return None;
    }
    // SAFETY: `data` is readable for `dsize` bytes (contract).
    Some(unsafe { core::slice::from_raw_parts(d.data as *const u8, len) }.to_vec())
}

/// `int wd_rsa_set_crt_prikey_params(handle_t, wd_dtb *dq, *dp, *qinv, *q, *p)`.
///
/// # Safety
/// Each `wd_dtb` is null or valid, its `data` readable for `dsize` bytes.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_set_crt_prikey_params(
    sess: handle_t,
    dq: *mut wd_dtb,
    dp: *mut wd_dtb,
    qinv: *mut wd_dtb,
    q: *mut wd_dtb,
    p: *mut wd_dtb,
) -> c_int {
    guard(-EINVAL, || {
        let Some(u) = usable(&lock(&GLOBAL), sess) else {
            return misuse();
        };
        if !u.is_crt {
            return misuse();
        }
        let half = u.key_bytes() / 2;
        // SAFETY: the dtbs are null or valid (API contract).
        let parts = unsafe {
            (
                dtb_bytes(dq, half),
                dtb_bytes(dp, half),
                dtb_bytes(qinv, half),
                dtb_bytes(q, half),
                dtb_bytes(p, half),
            )
        };
        let (Some(dq), Some(dp), Some(qinv), Some(q), Some(p)) = parts else {
            return misuse();
        };
        let s = Secret;
        lock(&u.key).crt = Some(CrtKey {
            p: s(p),
            q: s(q),
            dp: s(dp),
            dq: s(dq),
            qinv: s(qinv),
        });
        0
    })
}

/// `int wd_rsa_set_pubkey_params(handle_t, wd_dtb *e, wd_dtb *n)`.
///
/// # Safety
/// Each `wd_dtb` is null or valid, its `data` readable for `dsize` bytes.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_set_pubkey_params(
    sess: handle_t,
    e: *mut wd_dtb,
    n: *mut wd_dtb,
) -> c_int {
    guard(-EINVAL, || {
        let Some(u) = usable(&lock(&GLOBAL), sess) else {
            return misuse();
        };
        let max = u.key_bytes();
        // SAFETY: the dtbs are null or valid (API contract).
        let (Some(e), Some(n)) = (unsafe { (dtb_bytes(e, max), dtb_bytes(n, max)) }) else {
            return misuse();
        };
        lock(&u.key).public = Some((Secret(e), Secret(n)));
        0
    })
}

/// `bool wd_rsa_is_crt(handle_t)` (false, and a misuse, for an unusable handle).
///
/// # Safety
/// No memory precondition (handles are looked up in a registry).
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_is_crt(sess: handle_t) -> bool {
    guard(false, || match usable(&lock(&GLOBAL), sess) {
        Some(u) => u.is_crt,
        None => {
            bump(Stat::Misuse);
            false
        }
    })
}

/// `__u32 wd_rsa_get_key_bits(handle_t)` (0, and a misuse, for an unusable handle).
///
/// # Safety
/// No memory precondition (handles are looked up in a registry).
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_get_key_bits(sess: handle_t) -> u32 {
    guard(0, || match usable(&lock(&GLOBAL), sess) {
        Some(u) => u.key_bits,
        None => {
            bump(Stat::Misuse);
            0
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// The checks both submit paths make on a request (misuse → false).
fn request_ok(u: &Usable, r: &wd_rsa_req) -> bool {
    let kb = u.key_bytes() as u32;
    r.src_bytes == kb
        && r.dst_bytes == kb
        && !r.src.is_null()
        && !r.dst.is_null()
        && (r.op_type == WD_RSA_VERIFY || (r.op_type == WD_RSA_SIGN && u.is_crt))
        && lock(&u.key).ready_for(r.op_type)
}

/// `int wd_do_rsa_sync(handle_t, struct wd_rsa_req *)`.
///
/// # Safety
/// `req` is null or a valid request whose `src` is readable and `dst` writable for the key size.
#[no_mangle]
pub unsafe extern "C" fn wd_do_rsa_sync(sess: handle_t, req: *mut wd_rsa_req) -> c_int {
    guard(-EINVAL, || {
        bump(Stat::SyncCalls);
        if req.is_null() {
            return misuse();
        }
        let Some(u) = usable(&lock(&GLOBAL), sess) else {
            return misuse();
        };
        // SAFETY: `req` is non-null and valid (API contract); copied out.
        let r = unsafe { req.read() };
        if !request_ok(&u, &r) || u.rt.cfg.sync_ctxs == 0 {
            return misuse();
        }
        match u.rt.admit() {
            Err(Refused::Isolated) => return -EIO,
            Err(Refused::Busy) => return -EBUSY,
            Ok(()) => {}
        }
        let kb = u.key_bytes();
        let give_up = SYNC_GIVE_UP_MS.load(SeqCst);
        if give_up > 0 {
            // The call gives up at once; the device writes the result later, as a request
            // still queued on hardware would.
            let dst = r.dst as usize;
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(give_up));
                // SAFETY: none: this is the write into a buffer its owner may have freed,
                // which the caller must keep alive (what the mode tests).
                unsafe { core::ptr::write_bytes(dst as *mut u8, 0x5a, kb) };
            });
            return -ETIMEDOUT;
        }
        let start = Instant::now();
        // SAFETY: `src` is readable for src_bytes == key bytes (API contract, checked above).
        let computed =
            unsafe { device::run_op(u.rt.cfg.compute, r.op_type, &u.key, r.src as *const u8, kb) };
        let (status, result) = match u.rt.finish(computed, false) {
            Fate::Deliver { status, result } => (status, result),
            Fate::Drop => (STATUS_IN_EPARA, None), // not produced with may_drop == false
        };
        if let Some(rest) = (start + u.rt.cfg.latency).checked_duration_since(Instant::now()) {
            std::thread::sleep(rest);
        }
        match (status, result) {
            (0, Some(out)) => {
                // SAFETY: `dst` is writable for dst_bytes == key bytes (API contract); `req`
                // is valid.
                unsafe {
                    core::ptr::copy_nonoverlapping(out.as_ptr(), r.dst.cast::<u8>(), kb);
                    (*req).dst_bytes = kb as u32;
                    (*req).status = 0;
                }
                bump(Stat::CompletedOk);
                0
            }
            (status, _) => {
                let status = if status == 0 { STATUS_IN_EPARA } else { status };
                // SAFETY: `req` is valid (API contract).
                unsafe { (*req).status = status };
                bump(Stat::ErrorCompletions);
                -status
            }
        }
    })
}

/// `int wd_do_rsa_async(handle_t, struct wd_rsa_req *)`: the request is copied; `src` is read
/// on a device thread, `dst` written by `wd_rsa_poll`.
///
/// # Safety
/// `req` is null or a valid request; `src`, `dst` and `cb_param` must stay valid until the
/// callback runs.
#[no_mangle]
pub unsafe extern "C" fn wd_do_rsa_async(sess: handle_t, req: *mut wd_rsa_req) -> c_int {
    guard(-EINVAL, || {
        if req.is_null() {
            return misuse();
        }
        let slow = SLOW_REFUSAL_MS.load(SeqCst);
        if slow > 0 {
            // Outside the lock: the caller's poller keeps running meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(slow));
            return -EIO;
        }
        // Held until the job is queued, so that a concurrent uninit cannot miss it.
        let g = lock(&GLOBAL);
        let Some(u) = usable(&g, sess) else {
            return misuse();
        };
        // SAFETY: `req` is non-null and valid (API contract); copied, so the caller may reuse it.
        let r = unsafe { req.read() };
        if !request_ok(&u, &r) || r.cb.is_none() || u.rt.cfg.async_ctxs == 0 {
            return misuse();
        }
        match u.rt.admit() {
            Err(Refused::Isolated) => return -EIO,
            Err(Refused::Busy) => return -EBUSY,
            Ok(()) => {}
        }
        let job = Job {
            req: ReqCopy::new(r),
            key: Arc::clone(&u.key),
            key_bytes: u.key_bytes(),
            ctx: u.ctx,
            submitted_at: Instant::now(),
            session_pending: Arc::clone(&u.pending),
        };
        match u.rt.submit(job) {
            Ok(()) => 0,
            Err((Refused::Isolated, _)) => -EIO,
            Err((Refused::Busy, _)) => -EBUSY,
        }
    })
}

/// `KAE_SIM_SLOW_REFUSAL_MS` of the last init (0: off).
static SLOW_REFUSAL_MS: AtomicU64 = AtomicU64::new(0);
/// `KAE_SIM_SYNC_GIVE_UP_MS` of the last init (0: off).
static SYNC_GIVE_UP_MS: AtomicU64 = AtomicU64::new(0);

/// `int wd_rsa_poll(__u32 expt, __u32 *count)`: delivers up to `expt` ready completions on this
/// thread, adds their number to `*count`, returns 0.
///
/// # Safety
/// `count` is null or writable; the callbacks and buffers of the delivered requests are valid.
#[no_mangle]
pub unsafe extern "C" fn wd_rsa_poll(expt: u32, count: *mut u32) -> c_int {
    guard(-EINVAL, || {
        bump(Stat::Polls);
        if count.is_null() {
            return misuse();
        }
        let Some(rt) = lock(&GLOBAL).rt.clone() else {
            return misuse();
        };
        let mut delivered = 0u32;
        for mut d in rt.take_ready(expt as usize) {
            let kb = d.job.key_bytes;
            let p = d.job.req.as_mut_ptr();
            // SAFETY: `p` is the simulator's own copy (exclusively owned); `dst` is writable for
            // key bytes until the callback (API contract, dst_bytes checked at submit).
            let cb = unsafe {
                if let (0, Some(out)) = (d.status, &d.result) {
                    core::ptr::copy_nonoverlapping(out.as_ptr(), (*p).dst.cast::<u8>(), kb);
                    (*p).dst_bytes = kb as u32;
                }
                (*p).status = d.status;
                (*p).cb
            };
            bump(if d.status == 0 {
                Stat::CompletedOk
            } else {
                Stat::ErrorCompletions
            });
            if let Some(cb) = cb {
                // SAFETY: the caller's callback, given our copy of its request, as UADK does.
                unsafe { cb(p.cast::<c_void>()) };
                bump(Stat::Callbacks);
            }
            rt.release(&d.job);
            delivered += 1;
            drop(d); // poisons and frees the copy
        }
        // SAFETY: `count` is non-null and writable (API contract).
        unsafe { *count = (*count).wrapping_add(delivered) };
        0
    })
}

// ---------------------------------------------------------------------------------------------
// Simulator-only
// ---------------------------------------------------------------------------------------------

/// `int kae_sim_stats(struct KaeSimStats *out)`.
///
/// # Safety
/// `out` is null or writable for a `KaeSimStats`.
#[no_mangle]
pub unsafe extern "C" fn kae_sim_stats(out: *mut KaeSimStats) -> c_int {
    guard(-EINVAL, || {
        if out.is_null() {
            return -EINVAL;
        }
        // SAFETY: `out` is non-null and writable (contract).
        unsafe { out.write(device::snapshot()) };
        0
    })
}

/// `uint64_t kae_sim_isolations(void)`: isolations so far (see the crate docs).
#[no_mangle]
pub extern "C" fn kae_sim_isolations() -> u64 {
    device::ISOLATIONS.load(SeqCst)
}

/// `uint64_t kae_sim_isolated_refusals(void)`: submissions refused because the device was
/// isolated, so far.
#[no_mangle]
pub extern "C" fn kae_sim_isolated_refusals() -> u64 {
    device::ISOLATED_REFUSALS.load(SeqCst)
}

/// `uint32_t kae_sim_version(void)`: 1.
#[no_mangle]
pub extern "C" fn kae_sim_version() -> u32 {
    1
}
