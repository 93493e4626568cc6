//! Where an operation runs: the selected backend inside an ASYNC job (and for hardware outside
//! one too), else the caller's thread. Blinded private operations are prepared and finished
//! here, around the backend's exponentiation.

use super::config::config;
use super::inline::inline;
use super::instance::{
    current_in, hardware_offloader, hardware_possible, selected_kind, selected_kind_in,
};
use super::offloader::Offloader;
use super::wait::{run_async, run_blocking};
use crate::backend::SyncPolicy;
use crate::completion::{OpKind, Request, Waiter};
use crate::error::{KaeError, KaeResult};
use crate::ffi::async_job::AsyncJob;
use crate::rsa::RsaKey;
use crate::settings::{AsyncMode, BackendKind};
use crate::stats;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// RSADP/RSASP1 as the operations ask for it, the router's entry: offloaded inside an ASYNC
/// job, else on the caller's thread (where `rsa::ops::private_op`, the arithmetic, runs).
pub fn private_op(key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    run(OpKind::Private, key, input, out)
}

/// RSAEP/RSAVP1: cheap (public exponent), always inline.
pub fn public_op(key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    run(OpKind::Public, key, input, out)
}

fn run(kind: OpKind, key: &Arc<RsaKey>, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    // The job check first: it is a thread-local read; the decisions need the process's id, a
    // system call (getpid), asked once here, and not at all for a public operation once the
    // selection is known not to be hardware.
    let job = AsyncJob::current();
    match &job {
        // Public operations are cheap on the CPU: they leave it only for hardware.
        Some(_) if kind == OpKind::Public && !hardware_possible() => {}
        Some(job) => {
            let pid = std::process::id();
            let hardware = || selected_kind_in(pid) == BackendKind::Hpre;
            if (kind == OpKind::Private || hardware()) && offload_async_jobs(pid) {
                match current_in(pid) {
                    Some(pool) if pool.takes(key, kind) => {
                        return offload(&pool, How::Job(job), kind, key, input, out)
                    }
                    Some(_) => {}
                    None => stats::note_fallback(),
                }
            }
        }
        // Outside jobs a public operation (~20 µs for RSA-2048) stays on the CPU: waiting for a
        // device round trip would only make the caller slower.
        None if kind == OpKind::Private => {
            if let Some(pool) = hardware_offloader() {
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

/// Runs `kind` on the offloader's backend. For backends that take blinded input the private
/// operation is split: prepare (checks, blinding) here, the exponentiation on the backend,
/// finish (fault check with e, unblinding) here again; a failed backend request is redone on
/// the CPU, so the application never sees a device error.
fn offload(
    pool: &Offloader,
    how: How<'_>,
    kind: OpKind,
    key: &Arc<RsaKey>,
    input: &[u8],
    out: &mut [u8],
) -> KaeResult<()> {
    let wire = pool.wire_kind(kind);
    if wire != OpKind::ExponentiateBlinded {
        let r = dispatch(pool, &how, kind, key, input, out).map(|_| ());
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

/// Runs the request on the backend.
fn dispatch(
    pool: &Offloader,
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
            if kind != OpKind::ExponentiateBlinded {
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
            if kind != OpKind::ExponentiateBlinded {
                stats::record(kind, stats::Path::Offload, true);
            }
            Ok(())
        }
    }
}

/// Per-process answer of `offload_async_jobs`: 0 = not decided yet, else `pid << 1 | answer`.
static OFFLOAD_DECISION: AtomicU64 = AtomicU64::new(0);

/// Whether private operations inside ASYNC jobs go to the offloader in this process. With the
/// CPU backend and a single CPU to run on (taskset, cpuset, CPU quota), the workers would
/// only take turns with the application's thread on that CPU: each operation costs the same
/// arithmetic plus two thread switches and a job pause, so `auto` computes inline instead.
/// Decided once per process (a forked child decides again: it may have been pinned).
fn offload_async_jobs(pid: u32) -> bool {
    let pid = u64::from(pid);
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
