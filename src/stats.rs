//! Per-process counters, published to operators.
//!
//! The counters are relaxed atomics. Once published they live in a small shared-memory page,
//! a file `<root>/<euid>/kae-stats.<pid>` (root `/dev/shm/kae` or `$KAE_STATS_DIR`; one
//! directory per effective uid, mode 0700: see [`files`] for what is checked), so the bump on
//! the hot path stays one uncontended atomic add and `kae-stat` reads every process's counters
//! from outside (root sees every user's; a user sees its own). The file is removed at process
//! exit; a forked child publishes its own page (its counters start at zero), and a process
//! whose effective uid changes after publication (nginx workers switch to their `user` after
//! the fork) moves its page to the new uid's directory at its next operation. Files of
//! processes that died without cleaning up are recognised by `kae-stat` (dead pid, or a live
//! pid whose start time differs) and removed there.

use crate::completion::OpKind;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kae_counters::writer::{Header, MappedPage, PageSlot};
use std::ffi::CString;
use std::os::fd::AsFd;
use std::sync::{Once, OnceLock};

pub mod files;

// The page layout, slot names and the reader live in the kae-counters crate, shared with
// kae-stat and kae-press; re-exported here for the provider's code and tests.
pub use kae_counters::layout::PAGE_SIZE;
pub use kae_counters::{
    idx, parse_page, scan, Counters, Page, ProcPage, Scan, Snapshot, FILE_PREFIX, MAGIC, MOVED,
    NAMES, VERSION,
};

/// Counters used before publication (or when publication is off or failed).
static LOCAL: Counters = Counters::new();
/// The published page of this process, if any.
static PAGE: PageSlot = PageSlot::new();

#[inline]
fn counters() -> &'static Counters {
    PAGE.load(Ordering::Relaxed)
        .map_or(&LOCAL, MappedPage::counters)
}

#[inline]
fn bump(i: usize) {
    counters().values[i].fetch_add(1, Ordering::Relaxed);
}

/// Where an operation was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// On the caller's thread.
    Inline,
    /// Through a backend (offloaded).
    Offload,
}

pub fn record(kind: OpKind, path: Path, ok: bool) {
    if EUID_CHECK.load(Ordering::Relaxed) {
        euid_check();
    }
    bump(match (ok, kind, path) {
        (false, OpKind::Private | OpKind::ExponentiateBlinded, _) => idx::PRIVATE_ERRORS,
        (false, OpKind::Public, _) => idx::PUBLIC_ERRORS,
        (true, OpKind::Private | OpKind::ExponentiateBlinded, Path::Inline) => idx::PRIVATE_INLINE,
        (true, OpKind::Public, Path::Inline) => idx::PUBLIC_INLINE,
        (true, OpKind::Private | OpKind::ExponentiateBlinded, Path::Offload) => {
            idx::PRIVATE_OFFLOADED
        }
        (true, OpKind::Public, Path::Offload) => idx::PUBLIC_OFFLOADED,
    });
}

pub fn note_pause() {
    bump(idx::ASYNC_PAUSES);
}
pub fn note_spurious() {
    bump(idx::SPURIOUS_RESUMES);
}
pub fn note_queue_full() {
    bump(idx::QUEUE_FULL_RETRIES);
}
pub fn note_fallback() {
    bump(idx::FALLBACKS);
}
/// `n` accelerator requests failed (each is redone on the CPU, which counts the fallback).
pub fn note_hw_faults(n: u64) {
    counters().values[idx::HW_FAULTS].fetch_add(n, Ordering::Relaxed);
}

/// The multi-buffer backend ran one kernel call (an 8-lane batch) with `lanes` lanes of real
/// work (a lane is one CRT half of one request).
pub fn note_mb_batch(lanes: usize) {
    let c = counters();
    c.values[idx::MB_BATCHES].fetch_add(1, Ordering::Relaxed);
    c.values[idx::MB_LANES].fetch_add(lanes as u64, Ordering::Relaxed);
}
/// The multi-buffer backend computed `n` private requests on the scalar (OpenSSL) path
/// instead (their batch was too small, the key did not fit a lane, the input was refused, or
/// the lanes' call or result failed).
pub fn note_mb_scalar(n: usize) {
    counters().values[idx::MB_SCALAR].fetch_add(n as u64, Ordering::Relaxed);
}

/// The fault check rejected `n` results (each recomputed without CRT).
pub fn note_crt_faults(n: u32) {
    if n > 0 {
        counters().values[idx::CRT_FAULTS].fetch_add(u64::from(n), Ordering::Relaxed);
    }
}
/// A queue reached `depth` requests.
pub fn note_queue_depth(depth: usize) {
    counters().values[idx::QUEUE_HIGH_WATER].fetch_max(depth as u64, Ordering::Relaxed);
}
pub fn in_flight_add(n: usize) {
    counters().values[idx::IN_FLIGHT].fetch_add(n as u64, Ordering::Relaxed);
}
pub fn in_flight_sub(n: usize) {
    counters().values[idx::IN_FLIGHT].fetch_sub(n as u64, Ordering::Relaxed);
}

pub fn snapshot() -> Snapshot {
    let c = counters();
    let mut s = [0u64; idx::COUNT];
    for (o, v) in s.iter_mut().zip(c.values.iter()) {
        *o = v.load(Ordering::Relaxed);
    }
    Snapshot(s)
}

/// One line for logs (printed at provider teardown or process exit with `KAE_LOG=info`).
/// Scripts and tests parse it: keep the leading `private ops N ok / M failed` shape. The
/// logger puts `kae[PID] INFO: ` in front. The average lanes per multi-buffer batch reads
/// `0.0` when no batch ran.
pub fn summary_line() -> String {
    summary_of(&snapshot())
}

fn summary_of(s: &Snapshot) -> String {
    format!(
        "summary: private ops {} ok / {} failed ({} offloaded), public ops {} ok / {} failed ({} offloaded), \
         async pauses {}, spurious resumes {}, queue-full retries {}, fallbacks {}, CRT faults {}, \
         HW faults {}, MB batches {} (avg {} lanes), MB scalar {}",
        s.private_ok(),
        s.get(idx::PRIVATE_ERRORS),
        s.get(idx::PRIVATE_OFFLOADED),
        s.public_ok(),
        s.get(idx::PUBLIC_ERRORS),
        s.get(idx::PUBLIC_OFFLOADED),
        s.get(idx::ASYNC_PAUSES),
        s.get(idx::SPURIOUS_RESUMES),
        s.get(idx::QUEUE_FULL_RETRIES),
        s.get(idx::FALLBACKS),
        s.get(idx::CRT_FAULTS),
        s.get(idx::HW_FAULTS),
        s.get(idx::MB_BATCHES),
        s.mb_lanes_per_batch().as_deref().unwrap_or("0.0"),
        s.get(idx::MB_SCALAR)
    )
}

static SUMMARY_LOGGED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Logs the summary line (at most once per process: at teardown, or at exit when the
/// application never frees the provider).
pub fn log_summary_once() {
    if !SUMMARY_LOGGED.swap(true, Ordering::AcqRel) {
        log::info!("{}", summary_line());
    }
}

// ---- publication ---------------------------------------------------------------------------

/// Root directory of the pages (`$KAE_STATS_DIR`, default /dev/shm/kae). Each effective uid
/// publishes in a directory of its own, `<root>/<uid>` (mode 0700): see [`files`].
pub fn stats_dir() -> std::path::PathBuf {
    kae_counters::root_dir(crate::env::var(kae_counters::ROOT_ENV))
}

/// Start time of this process in clock ticks since boot.
fn own_start_ticks() -> u64 {
    // Field 22 of /proc/self/stat, after the parenthesised command name.
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| s.rsplit(')').next().map(str::to_owned))
        .and_then(|rest| rest.split_whitespace().nth(19).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Root path and backend label captured at publication, reused by the fork handler (which
/// must not allocate).
static ROOT: OnceLock<CString> = OnceLock::new();
static BACKEND: OnceLock<[u8; 16]> = OnceLock::new();
static PUBLISHED_ONCE: Once = Once::new();
/// The effective uid whose directory holds (or was to hold) this process's page.
static PAGE_UID: AtomicU32 = AtomicU32::new(u32::MAX);
/// Set at publication and in a fork child: the next operation recorded checks whether the
/// effective uid changed since (a server that drops root after loading kae, or an nginx
/// worker that switches to its `user` right after the fork) and if so moves the page to the
/// new uid's directory, where the process can still remove it at exit.
static EUID_CHECK: AtomicBool = AtomicBool::new(false);

/// Where publication failed.
#[derive(Clone, Copy, Debug)]
enum Where {
    Root,
    UserDir,
    Page,
}

fn euid() -> u32 {
    kae_counters::writer::euid()
}

fn pid() -> u32 {
    std::process::id()
}

/// Text for a failed publication by `uid`.
fn describe_failure(uid: u32, (at, problem): (Where, files::Problem)) -> String {
    let root = ROOT
        .get()
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_default();
    match at {
        Where::Root => format!("{root}: {problem}"),
        Where::UserDir => format!("{root}/{uid}: {problem}"),
        Where::Page => format!("{root}/{uid}/{}{}: {problem}", files::FILE_PREFIX, pid()),
    }
}

/// Creates and maps this process's page in `<root>/<uid>`. System calls only, no
/// allocation: also runs in the fork child handler.
fn map_page(start_ticks: u64, uid: u32) -> Result<MappedPage, (Where, files::Problem)> {
    let no_root = files::Problem::Sys {
        call: "publish",
        errno: libc::ENOENT,
    };
    let root = ROOT.get().ok_or((Where::Root, no_root))?;
    let root = files::open_root(root, uid).map_err(|p| (Where::Root, p))?;
    let dir = files::open_user_dir(root.as_fd(), uid, true).map_err(|p| (Where::UserDir, p))?;
    let pid = pid();
    let fd = files::create_page(dir.as_fd(), pid, PAGE_SIZE).map_err(|p| (Where::Page, p))?;
    let header = Header {
        pid,
        start_ticks,
        backend: BACKEND.get().copied().unwrap_or_default(),
    };
    MappedPage::map(fd.as_fd(), &header).map_err(|errno| {
        files::unlink(
            dir.as_fd(),
            files::Name::new(files::FILE_PREFIX, pid).as_cstr(),
        );
        (
            Where::Page,
            files::Problem::Sys {
                call: "mmap",
                errno,
            },
        )
    })
}

/// Removes this process's page from `<root>/<uid>`; false when that is not possible (the
/// effective uid changed and may no longer write there).
fn remove_page(uid: u32) -> bool {
    let Some(root) = ROOT.get() else {
        return false;
    };
    let Ok(root) = files::open_root_for_reading(root) else {
        return false;
    };
    let Ok(dir) = files::open_user_dir(root.as_fd(), uid, false) else {
        return false;
    };
    files::unlink(
        dir.as_fd(),
        files::Name::new(files::FILE_PREFIX, pid()).as_cstr(),
    )
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        log_summary_once();
        if let Some(page) = PAGE.load(Ordering::Acquire) {
            if !remove_page(PAGE_UID.load(Ordering::Acquire)) {
                page.mark_moved();
            }
        }
    });
}

/// Fork child: the inherited page belongs to the parent. Publish our own, starting at zero,
/// in the directory of our effective uid (still the parent's: a server that switches user in
/// its workers does so after the fork, and the page follows at the first operation, see
/// [`EUID_CHECK`]). Runs in the child right after fork: system calls only, no allocation.
extern "C" fn after_fork_child() {
    if PAGE.load(Ordering::Relaxed).is_none() {
        return;
    }
    for v in LOCAL.values.iter() {
        v.store(0, Ordering::Relaxed);
    }
    let uid = euid();
    // The start time is re-read lazily by kae-stat's check; 0 means "unknown, trust the pid".
    PAGE.store(map_page(0, uid).ok(), Ordering::Release);
    PAGE_UID.store(uid, Ordering::Release);
    EUID_CHECK.store(true, Ordering::Release);
    SUMMARY_LOGGED.store(false, Ordering::Relaxed);
}

/// The slow path of [`EUID_CHECK`]: move the page when the effective uid changed.
#[cold]
#[inline(never)]
fn euid_check() {
    if !EUID_CHECK.swap(false, Ordering::AcqRel) {
        return;
    }
    let uid = euid();
    let old_uid = PAGE_UID.load(Ordering::Acquire);
    if uid == old_uid || ROOT.get().is_none() {
        return;
    }
    let old = PAGE.load(Ordering::Acquire);
    match map_page(own_start_ticks(), uid) {
        Ok(new) => {
            let from = old.map_or(&LOCAL, MappedPage::counters);
            for (d, s) in new.counters().values.iter().zip(from.values.iter()) {
                d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            PAGE.store(Some(new), Ordering::Release);
            PAGE_UID.store(uid, Ordering::Release);
            if let Some(old) = old.filter(|_| !remove_page(old_uid)) {
                old.mark_moved();
            }
            log::info!(
                "effective uid changed from {old_uid} to {uid}: counters now published under {}/{uid}",
                stats_dir().display()
            );
        }
        Err(f) => log::warn!(
            "effective uid changed from {old_uid} to {uid}, but the counter page cannot move ({}); it stays where it is and is left behind at exit",
            describe_failure(uid, f)
        ),
    }
}

/// Publishes this process's counters (once per process; children of fork republish
/// automatically). Also registers the exit-time summary and cleanup. Cheap; starts no thread.
pub fn publish(backend: &str) {
    PUBLISHED_ONCE.call_once(|| {
        if crate::settings::stats_disabled() {
            crate::ffi::fork::at_exit(at_exit);
            return;
        }
        let dir = stats_dir();
        match CString::new(dir.as_os_str().as_encoded_bytes()) {
            Ok(root) => {
                let _ = ROOT.set(root);
            }
            Err(_) => log::warn!("KAE_STATS_DIR contains a NUL byte: counters not published"),
        }
        let mut label = [0u8; 16];
        let b = backend.as_bytes();
        let m = b.len().min(label.len() - 1);
        label[..m].copy_from_slice(&b[..m]);
        let _ = BACKEND.set(label);
        let uid = euid();
        PAGE_UID.store(uid, Ordering::Release);
        if ROOT.get().is_some() {
            match map_page(own_start_ticks(), uid) {
                Ok(page) => {
                    // Carry over what was counted before publication.
                    for (d, s) in page.counters().values.iter().zip(LOCAL.values.iter()) {
                        d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    PAGE.store(Some(page), Ordering::Release);
                }
                Err(f) => log::warn!(
                    "counters not published ({}); kae-stat will not see this process",
                    describe_failure(uid, f)
                ),
            }
            EUID_CHECK.store(true, Ordering::Release);
        }
        crate::ffi::fork::at_exit(at_exit);
        crate::ffi::fork::in_child_after_fork(after_fork_child);
    });
}

/// The pages of live processes under [`stats_dir`] that this process may read (see [`scan`]).
pub fn live_pages(remove_stale: bool) -> Vec<ProcPage> {
    scan(&stats_dir(), remove_stale).pages
}

/// Sum over processes (the queue high-water mark is the largest, not a sum).
pub fn total(pages: &[ProcPage]) -> Snapshot {
    kae_counters::total(pages.iter().map(|p| &p.counters))
}

/// One short line of the main counters (for the provider's live build-info line).
pub fn short_line(s: &Snapshot) -> String {
    format!(
        "private ops {} ({} offloaded), public ops {}, errors {}, async pauses {}, fallbacks {}",
        s.private_ok(),
        s.get(idx::PRIVATE_OFFLOADED),
        s.public_ok(),
        s.errors(),
        s.get(idx::ASYNC_PAUSES),
        s.get(idx::FALLBACKS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a page for `pid` with `magic`, written field by field in the on-disk
    /// order (little endian, as `kae_counters::layout` fixes it).
    fn page_bytes(magic: [u8; 8], pid: u32, start_ticks: u64, private_inline: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(PAGE_SIZE);
        v.extend_from_slice(&magic);
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&start_ticks.to_le_bytes());
        v.extend_from_slice(b"cpu\0\0\0\0\0\0\0\0\0\0\0\0\0");
        v.extend_from_slice(&[0; 32]);
        for i in 0..idx::COUNT {
            let value = if i == idx::PRIVATE_INLINE {
                private_inline
            } else {
                0
            };
            v.extend_from_slice(&value.to_le_bytes());
        }
        assert_eq!(v.len(), PAGE_SIZE);
        v
    }

    /// Nothing else in the library's tests counts multi-buffer work: the deltas are ours.
    #[test]
    fn multi_buffer_notes_bump_their_slots() {
        let before = snapshot();
        note_mb_batch(8);
        note_mb_batch(5);
        note_mb_scalar(3);
        note_mb_scalar(0);
        let after = snapshot();
        let delta = |i: usize| after.get(i) - before.get(i);
        assert_eq!(delta(idx::MB_BATCHES), 2);
        assert_eq!(delta(idx::MB_LANES), 13);
        assert_eq!(delta(idx::MB_SCALAR), 3);
    }

    #[test]
    fn summary_line_ends_with_the_multi_buffer_counters() {
        let mut s = Snapshot::default();
        s.0[idx::PRIVATE_INLINE] = 4;
        s.0[idx::PRIVATE_OFFLOADED] = 6;
        s.0[idx::HW_FAULTS] = 1;
        let none = summary_of(&s);
        assert!(
            none.starts_with("summary: private ops 10 ok / 0 failed (6 offloaded), public ops "),
            "{none}"
        );
        assert!(
            none.ends_with(", HW faults 1, MB batches 0 (avg 0.0 lanes), MB scalar 0"),
            "{none}"
        );
        s.0[idx::MB_BATCHES] = 4;
        s.0[idx::MB_LANES] = 30;
        s.0[idx::MB_SCALAR] = 2;
        let some = summary_of(&s);
        assert!(
            some.ends_with(", HW faults 1, MB batches 4 (avg 7.5 lanes), MB scalar 2"),
            "{some}"
        );
        assert_eq!(
            some,
            "summary: private ops 10 ok / 0 failed (6 offloaded), public ops 0 ok / 0 failed (0 offloaded), \
             async pauses 0, spurious resumes 0, queue-full retries 0, fallbacks 0, CRT faults 0, \
             HW faults 1, MB batches 4 (avg 7.5 lanes), MB scalar 2"
        );
    }

    #[test]
    fn scan_shows_live_pages_only_and_never_blocks() {
        use std::os::unix::fs::symlink;
        let root = std::env::temp_dir().join(format!("kae-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let root_c = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
        let me = euid();
        let root_fd = files::open_root(&root_c, me).unwrap();
        drop(files::open_user_dir(root_fd.as_fd(), me, true).unwrap());
        let d = root.join(me.to_string());
        let pid = std::process::id();
        std::fs::write(
            d.join(format!("kae-stats.{pid}")),
            page_bytes(MAGIC, pid, own_start_ticks(), 5),
        )
        .unwrap();
        // A process that has exited: its page is stale.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = d.join(format!("kae-stats.{dead}"));
        std::fs::write(&stale, page_bytes(MAGIC, dead, 0, 1)).unwrap();
        // Pid 1 is alive, but its page says it moved away.
        let moved = d.join("kae-stats.1");
        std::fs::write(&moved, page_bytes(MOVED, 1, 0, 1)).unwrap();
        files::tests::make_fifo(&d.join("kae-stats.2"));
        symlink("/dev/zero", d.join("kae-stats.3")).unwrap();
        std::fs::write(d.join("kae-stats.4"), [0u8; 10]).unwrap();
        // Pages at the root itself (kae before per-user directories) are never shown; the one
        // of a dead process is removed.
        let legacy_dead = root.join(format!("kae-stats.{dead}"));
        let legacy_live = root.join(format!("kae-stats.{pid}"));
        std::fs::write(&legacy_dead, page_bytes(MAGIC, dead, 0, 1)).unwrap();
        std::fs::write(&legacy_live, page_bytes(MAGIC, pid, 0, 1)).unwrap();
        // A directory named for a uid that does not own it.
        let other = me.wrapping_add(777);
        std::fs::create_dir(root.join(other.to_string())).unwrap();

        let run = |remove_stale: bool| -> Scan {
            let (tx, rx) = std::sync::mpsc::channel();
            let r = root.clone();
            std::thread::spawn(move || {
                let _ = tx.send(scan(&r, remove_stale));
            });
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("scan blocked (FIFO?) or ran away (/dev/zero?)")
        };
        let s = run(false);
        let got: Vec<(u32, u32, u64)> = s
            .pages
            .iter()
            .map(|p| (p.pid, p.uid, p.counters.get(idx::PRIVATE_INLINE)))
            .collect();
        assert_eq!(got, vec![(pid, me, 5)]);
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
        assert!(
            s.problems[0].contains(&format!("/{other}: owned by uid {me}")),
            "{:?}",
            s.problems
        );
        assert!(
            stale.exists() && moved.exists() && legacy_dead.exists(),
            "kept without remove_stale"
        );
        let s = run(true);
        assert_eq!(s.pages.len(), 1);
        assert!(!stale.exists(), "stale page removed");
        assert!(!moved.exists(), "moved-away page removed");
        assert!(
            !legacy_dead.exists(),
            "old-layout page of a dead process removed"
        );
        assert!(
            legacy_live.exists(),
            "old-layout page of a live process kept"
        );
        for n in 2..=4 {
            assert!(
                d.join(format!("kae-stats.{n}")).symlink_metadata().is_ok(),
                "kae-stats.{n} is skipped, not removed"
            );
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
