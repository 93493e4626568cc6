//! The process's offloader: started on first use (never at provider init), handed out under a
//! lock that teardown also takes, stopped with the last provider instance, and fork-safe (a
//! child leaves its parent's offloader alone and starts its own).

use super::config::config;
use super::offloader::Offloader;
use crate::backend::{self, registry, ComputeFn};
use crate::completion::Completer;
use crate::ffi::fork::{ForkMutex, ForkPlan};
use crate::settings::{BackendKind, OffloadConfig, PREFERENCE};
use crate::stats;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The running offloader, started on first use in each process (never in OSSL_provider_init).
/// Readers take an `Arc` clone under the lock, so teardown (which takes the offloader out under the
/// same lock) can never free what a reader uses; the hot path is one uncontended lock.
static CURRENT: ForkMutex<Option<Arc<Offloader>>> = ForkMutex::new(None);
/// Serialises starting and stopping the offloader. Taken before `CURRENT` when both are held.
static START_LOCK: ForkMutex<()> = ForkMutex::new(());
/// Held while a stopping offloader joins its threads, so a fork waits until they are gone: a
/// thread's exit, like its start (`ffi::fork::spawn_settled`), passes through a lock inside
/// std that the child must not inherit held. Taken by fork first, before `START_LOCK`.
static JOIN_LOCK: ForkMutex<()> = ForkMutex::new(());
/// Live provider instances; the last teardown stops the offloader.
static USERS: AtomicUsize = AtomicUsize::new(0);
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);

/// A fork waits until no other thread holds the offloader's locks or a backend's, so a child
/// never inherits one held by a thread it does not have (it would block on it forever).
static FORK_PLAN: ForkPlan = ForkPlan {
    locks: &[&[&JOIN_LOCK, &START_LOCK, &CURRENT], &registry::FORK_LOCKS],
    in_child: &registry::IN_CHILD,
};

/// Registers the fork handlers once per process (children inherit them). Called before
/// taking START_LOCK: pthread_atfork waits for a fork in progress, whose prepare handler may
/// be waiting for START_LOCK.
fn register_fork_handlers() {
    if !FORK_HANDLERS.load(Ordering::Acquire)
        && !FORK_HANDLERS.swap(true, Ordering::AcqRel)
        && !crate::ffi::fork::register_fork_plan(&FORK_PLAN)
    {
        log::warn!("could not register fork handlers for the queue pool");
    }
}

pub fn add_user() {
    register_fork_handlers();
    USERS.fetch_add(1, Ordering::AcqRel);
}

/// Called at provider teardown; stops the offloader when the last instance goes.
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
    // Outside the offloader's locks (a request may finish meanwhile), but a fork waits for the
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

/// The offloader of this process, started on first call. After `fork()` the child sees the
/// parent's offloader (whose threads were not copied), leaves it alone and starts its own.
pub fn current() -> Option<Arc<Offloader>> {
    current_in(std::process::id())
}

/// [`current`] for a caller that already asked for this process's id (`pid`).
pub fn current_in(pid: u32) -> Option<Arc<Offloader>> {
    current_with(pid, backend::compute)
}

fn current_with(pid: u32, compute: ComputeFn) -> Option<Arc<Offloader>> {
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

/// Starts the offloader on the selected backend; a backend other than the CPU that cannot start
/// (library, init, threads) is reported once and replaced by CPU workers.
fn start_selected(cfg: &OffloadConfig, compute: ComputeFn) -> std::io::Result<Arc<Offloader>> {
    let kind = selected_kind();
    if kind != BackendKind::Cpu {
        let completer = Arc::new(Completer::new());
        match registry::start(kind, cfg, completer.clone(), compute) {
            Ok(b) => return Offloader::start_with(b, completer),
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
    Offloader::start_cpu(cfg, compute)
}

/// This process's offloader, if it runs (a clone taken under the lock).
fn running_in(pid: u32) -> Option<Arc<Offloader>> {
    CURRENT.lock().as_ref().filter(|p| p.pid == pid).cloned()
}

/// The backend the configuration selects here (see `backend::registry`). Probing reads sysfs
/// and loads libraries, and the private-operation path asks on every call: decided once per
/// process (a forked child decides again), then only the kind is copied out.
pub fn selected_kind() -> BackendKind {
    selected_kind_in(std::process::id())
}

/// [`selected_kind`] for a caller that already asked for this process's id (`pid`).
pub fn selected_kind_in(pid: u32) -> BackendKind {
    if let Some(kind) = selection_of(pid) {
        return kind;
    }
    static SELECTING: Mutex<()> = Mutex::new(());
    let _one = SELECTING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kind) = selection_of(pid) {
        return kind;
    }
    let kind = registry::select(&config()).kind;
    if let Some(place) = PREFERENCE.iter().position(|&k| k == kind) {
        SELECTION.store(u64::from(pid) << 8 | (place as u64 + 1), Ordering::Release);
    }
    kind
}

/// The latest selection, read without a lock: `pid << 8 | the kind's place in PREFERENCE + 1`,
/// 0 before any. A forked child sees its parent's until it selects for itself.
static SELECTION: AtomicU64 = AtomicU64::new(0);

fn kind_in(selection: u64) -> Option<BackendKind> {
    let place = usize::from(selection as u8).checked_sub(1)?;
    PREFERENCE.get(place).copied()
}

/// The kind process `pid` selected, if it did.
fn selection_of(pid: u32) -> Option<BackendKind> {
    let s = SELECTION.load(Ordering::Acquire);
    kind_in(s).filter(|_| s >> 8 == u64::from(pid))
}

/// This process's offloader when the selected backend is hardware (where synchronous private
/// operations go); `None` without a system call once a selection found no hardware.
pub fn hardware_offloader() -> Option<Arc<Offloader>> {
    if !hardware_possible() {
        return None;
    }
    let pid = std::process::id();
    if selected_kind_in(pid) != BackendKind::Hpre {
        return None;
    }
    current_in(pid)
}

/// False once a selection found no hardware: a public operation then stays on the CPU without
/// asking for the process's id (a system call, not cheap next to a public operation). A hint
/// only, the latest selection whichever process made it: a child that would find hardware where
/// its parent found none computes its public operations inline, which is always correct.
pub fn hardware_possible() -> bool {
    kind_in(SELECTION.load(Ordering::Relaxed)).is_none_or(|k| k == BackendKind::Hpre)
}

/// What operators see as the active backend: the running offloader's, else the selected one (sync
/// operations compute inline with it).
pub fn backend_label() -> &'static core::ffi::CStr {
    running()
        .and_then(|p| BackendKind::from_name(p.backend_name()))
        .unwrap_or_else(selected_kind)
        .c_name()
}

/// Offloader of this process if one is running (for counters; never starts one).
pub fn running() -> Option<Arc<Offloader>> {
    running_in(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::OpKind;
    use crate::ffi::bn::BigNum;
    use crate::offload::inline::inline;
    use crate::offload::testing::*;
    use crate::offload::wait::run_blocking;
    use crate::rsa::{KeyType, RsaKey};
    use core::ffi::c_int;
    use std::time::Duration;

    fn lock_start() -> crate::ffi::fork::ForkMutexGuard<'static, ()> {
        START_LOCK.lock()
    }

    /// In a forked child: the process-wide offloader must be this process's own and compute.
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
        // Another thread holds the start lock (as while it starts or stops the offloader).
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
                    remove_user(); // last user: takes the offloader out and shuts it down
                    n += 1;
                }
                n
            });
            let users: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Acquire) {
                            // An offloader handed out just before teardown stays valid; its
                            // refusal (or cancellation) must not hang or fail the operation.
                            let mut out = vec![0u8; k.size()];
                            match current() {
                                Some(pool) => {
                                    match run_blocking(&pool, OpKind::Public, &k, &m, &mut out) {
                                        Ok(_) => {}
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
}
