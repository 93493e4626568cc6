//! Per-process counters, published to operators.
//!
//! The counters are relaxed atomics. Once published they live in a small shared-memory page,
//! a file `kae-stats.<pid>` under `/dev/shm/kae` (or `$KAE_STATS_DIR`), so the bump on the hot path
//! stays one uncontended atomic add and `kae-stat` reads every process's counters from outside.
//! The file is removed at process exit; a forked child publishes its own page (its counters
//! start at zero). Files of processes that died without cleaning up are recognised by
//! `kae-stat` (dead pid, or a live pid whose start time differs) and removed there.

use crate::backend::OpKind;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

/// Counter slots, in the order they are stored in the page and listed by `kae-stat`.
pub mod idx {
    pub const PRIVATE_INLINE: usize = 0;
    pub const PRIVATE_OFFLOADED: usize = 1;
    pub const PUBLIC_INLINE: usize = 2;
    pub const PUBLIC_OFFLOADED: usize = 3;
    pub const PRIVATE_ERRORS: usize = 4;
    pub const PUBLIC_ERRORS: usize = 5;
    pub const ASYNC_PAUSES: usize = 6;
    pub const SPURIOUS_RESUMES: usize = 7;
    pub const QUEUE_FULL_RETRIES: usize = 8;
    pub const FALLBACKS: usize = 9;
    pub const CRT_FAULTS: usize = 10;
    pub const QUEUE_HIGH_WATER: usize = 11;
    pub const IN_FLIGHT: usize = 12;
    pub const COUNT: usize = 13;
}

/// Names of the slots (also the provider parameter names, with '-').
pub const NAMES: [&str; idx::COUNT] = [
    "ops-private-inline",
    "ops-private-offloaded",
    "ops-public-inline",
    "ops-public-offloaded",
    "errors-private",
    "errors-public",
    "async-pauses",
    "spurious-resumes",
    "queue-full-retries",
    "fallbacks",
    "crt-faults",
    "queue-high-water",
    "in-flight",
];

#[repr(C)]
pub struct Counters {
    pub values: [AtomicU64; idx::COUNT],
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            values: [const { AtomicU64::new(0) }; idx::COUNT],
        }
    }
}

/// Layout of a published page. `kae-stat` reads it as bytes: keep it `repr(C)`, little
/// endian, and bump `VERSION` on any change.
#[repr(C)]
pub struct Page {
    pub magic: [u8; 8],
    pub version: u32,
    pub pid: u32,
    /// Process start time in clock ticks since boot (/proc/PID/stat field 22): tells a live
    /// process from a recycled pid.
    pub start_ticks: u64,
    pub backend: [u8; 16],
    pub device: [u8; 32],
    pub counters: Counters,
}

pub const MAGIC: [u8; 8] = *b"KAESTAT\0";
pub const VERSION: u32 = 1;
pub const FILE_PREFIX: &str = "kae-stats.";

/// Counters used before publication (or when publication is off or failed).
static LOCAL: Counters = Counters::new();
/// The published page of this process, if any.
static PAGE: AtomicPtr<Page> = AtomicPtr::new(core::ptr::null_mut());

#[inline]
fn counters() -> &'static Counters {
    let p = PAGE.load(Ordering::Relaxed);
    if p.is_null() {
        &LOCAL
    } else {
        // SAFETY: a published page is mapped for the life of the process (never unmapped,
        // only unlinked at exit).
        unsafe { &(*p).counters }
    }
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
    /// Through the queue pool (async offload).
    Offload,
}

pub fn record(kind: OpKind, path: Path, ok: bool) {
    bump(match (ok, kind, path) {
        (false, OpKind::Private, _) => idx::PRIVATE_ERRORS,
        (false, OpKind::Public, _) => idx::PUBLIC_ERRORS,
        (true, OpKind::Private, Path::Inline) => idx::PRIVATE_INLINE,
        (true, OpKind::Public, Path::Inline) => idx::PUBLIC_INLINE,
        (true, OpKind::Private, Path::Offload) => idx::PRIVATE_OFFLOADED,
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
pub fn note_crt_fault() {
    bump(idx::CRT_FAULTS);
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

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub [u64; idx::COUNT]);

impl Snapshot {
    pub fn get(&self, i: usize) -> u64 {
        self.0[i]
    }
    pub fn errors(&self) -> u64 {
        self.0[idx::PRIVATE_ERRORS] + self.0[idx::PUBLIC_ERRORS]
    }
    pub fn private_ok(&self) -> u64 {
        self.0[idx::PRIVATE_INLINE] + self.0[idx::PRIVATE_OFFLOADED]
    }
    pub fn public_ok(&self) -> u64 {
        self.0[idx::PUBLIC_INLINE] + self.0[idx::PUBLIC_OFFLOADED]
    }
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
/// Scripts and tests parse it: keep the leading `private ops N ok / M failed` shape.
pub fn summary_line() -> String {
    let s = snapshot();
    format!(
        "kae[{}] summary: private ops {} ok / {} failed ({} offloaded), public ops {} ok / {} failed ({} offloaded), \
         async pauses {}, spurious resumes {}, queue-full retries {}, fallbacks {}, CRT faults {}",
        std::process::id(),
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
        s.get(idx::CRT_FAULTS)
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

/// Directory of the pages (`$KAE_STATS_DIR`, default /dev/shm/kae).
pub fn stats_dir() -> std::path::PathBuf {
    crate::env::var("KAE_STATS_DIR")
        .map(Into::into)
        .unwrap_or_else(|| "/dev/shm/kae".into())
}

/// Creates the default directory writable by everyone and *without* the sticky bit: servers
/// such as nginx fork their workers as root (the page is created then) and drop privileges
/// afterwards; in a sticky directory like /dev/shm itself the worker could not remove its own
/// page at exit.
fn ensure_dir(dir: &std::path::Path) {
    if dir.exists() {
        return;
    }
    if std::fs::create_dir_all(dir).is_ok() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777));
    }
}

/// Path of the page for `pid` in `dir`, as a NUL-terminated byte string built without
/// allocation (usable in the fork child handler).
fn page_path(dir: &[u8], pid: u32, out: &mut [u8; 512]) -> Option<usize> {
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut nd = 0;
    loop {
        digits[nd] = b'0' + (n % 10) as u8;
        nd += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let prefix = FILE_PREFIX.as_bytes();
    let total = dir.len() + 1 + prefix.len() + nd + 1;
    if total > out.len() {
        return None;
    }
    let mut i = 0;
    for &b in dir.iter().chain(b"/".iter()).chain(prefix.iter()) {
        out[i] = b;
        i += 1;
    }
    for k in (0..nd).rev() {
        out[i] = digits[k];
        i += 1;
    }
    out[i] = 0;
    Some(i)
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

/// Directory bytes and backend label captured at publication, reused by the fork handler
/// (which must not allocate).
struct PublishInfo {
    dir: [u8; 400],
    dir_len: usize,
    backend: [u8; 16],
}

static mut INFO: PublishInfo = PublishInfo {
    dir: [0; 400],
    dir_len: 0,
    backend: [0; 16],
};
static PUBLISHED_ONCE: Once = Once::new();

/// Creates and maps this process's page. Only libc calls: also runs in the fork child handler.
///
/// # Safety
/// `INFO` must have been filled (it is, before the first call, under `PUBLISHED_ONCE`).
unsafe fn map_page(start_ticks: u64) -> *mut Page {
    // SAFETY (whole body): plain syscalls on our own file; INFO is only written before the
    // first call and read afterwards.
    unsafe {
        let info = &*core::ptr::addr_of!(INFO);
        let pid = libc::getpid() as u32;
        let mut path = [0u8; 512];
        if page_path(&info.dir[..info.dir_len], pid, &mut path).is_none() {
            return core::ptr::null_mut();
        }
        let fd = libc::open(
            path.as_ptr().cast(),
            libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            return core::ptr::null_mut();
        }
        let size = core::mem::size_of::<Page>();
        if libc::ftruncate(fd, size as libc::off_t) != 0 {
            libc::close(fd);
            libc::unlink(path.as_ptr().cast());
            return core::ptr::null_mut();
        }
        let p = libc::mmap(
            core::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        libc::close(fd);
        if p == libc::MAP_FAILED {
            libc::unlink(path.as_ptr().cast());
            return core::ptr::null_mut();
        }
        let page = p as *mut Page;
        // The file is zero-filled by ftruncate; fill the header last-to-first so a reader
        // never sees the magic before the rest.
        (*page).pid = pid;
        (*page).version = VERSION;
        (*page).start_ticks = start_ticks;
        (*page).backend = info.backend;
        core::sync::atomic::fence(Ordering::Release);
        (*page).magic = MAGIC;
        page
    }
}

fn unlink_own_page() {
    // SAFETY: INFO was filled before any page existed; plain unlink of our own file.
    unsafe {
        let info = &*core::ptr::addr_of!(INFO);
        let mut path = [0u8; 512];
        if page_path(&info.dir[..info.dir_len], libc::getpid() as u32, &mut path).is_some() {
            libc::unlink(path.as_ptr().cast());
        }
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        log_summary_once();
        if !PAGE.load(Ordering::Acquire).is_null() {
            unlink_own_page();
        }
    });
}

/// Fork child: the inherited page belongs to the parent. Publish our own, starting at zero.
/// (Runs in the child right after fork: libc calls only, no allocation.)
extern "C" fn after_fork_child() {
    if PAGE.load(Ordering::Relaxed).is_null() {
        return;
    }
    for v in LOCAL.values.iter() {
        v.store(0, Ordering::Relaxed);
    }
    // The start time is re-read lazily by kae-stat's check; 0 means "unknown, trust the pid".
    // SAFETY: see map_page.
    let page = unsafe { map_page(0) };
    PAGE.store(page, Ordering::Release);
    SUMMARY_LOGGED.store(false, Ordering::Relaxed);
}

/// Publishes this process's counters (once per process; children of fork republish
/// automatically). Also registers the exit-time summary and cleanup. Cheap; starts no thread.
pub fn publish(backend: &str) {
    PUBLISHED_ONCE.call_once(|| {
        if crate::env::var("KAE_STATS")
            .map(|v| v == "no" || v == "0")
            .unwrap_or(false)
        {
            // SAFETY: registering a plain extern "C" fn.
            unsafe { libc::atexit(at_exit) };
            return;
        }
        let dir = stats_dir();
        ensure_dir(&dir);
        let dir_bytes = dir.as_os_str().as_encoded_bytes();
        // SAFETY: single-threaded under `call_once`; no page exists yet, so no reader of INFO.
        unsafe {
            let info = &mut *core::ptr::addr_of_mut!(INFO);
            let n = dir_bytes.len().min(info.dir.len());
            info.dir[..n].copy_from_slice(&dir_bytes[..n]);
            info.dir_len = n;
            let b = backend.as_bytes();
            let m = b.len().min(info.backend.len() - 1);
            info.backend[..m].copy_from_slice(&b[..m]);
        }
        // SAFETY: INFO filled above.
        let page = unsafe { map_page(own_start_ticks()) };
        if page.is_null() {
            log::warn!(
                "kae: could not publish counters under {} (kae-stat will not see this process)",
                dir.display()
            );
        } else {
            // Carry over what was counted before publication.
            // SAFETY: page is mapped and ours.
            let pc = unsafe { &(*page).counters };
            for (d, s) in pc.values.iter().zip(LOCAL.values.iter()) {
                d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            PAGE.store(page, Ordering::Release);
        }
        // SAFETY: registering plain extern "C" fns; the library is linked with -z nodelete,
        // so they stay valid after the provider is unloaded.
        unsafe {
            libc::atexit(at_exit);
            libc::pthread_atfork(None, None, Some(after_fork_child));
        }
    });
}

/// Reads a page from its bytes (for `kae-stat` and tests).
pub fn parse_page(bytes: &[u8]) -> Option<(u32, u64, String, Snapshot)> {
    if bytes.len() < core::mem::size_of::<Page>() || bytes[..8] != MAGIC {
        return None;
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    if u32_at(8) != VERSION {
        return None;
    }
    let pid = u32_at(12);
    let start = u64_at(16);
    let backend_raw = &bytes[24..40];
    let end = backend_raw
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(backend_raw.len());
    let backend = String::from_utf8_lossy(&backend_raw[..end]).into_owned();
    let base = core::mem::offset_of!(Page, counters);
    let mut s = [0u64; idx::COUNT];
    for (i, v) in s.iter_mut().enumerate() {
        *v = u64_at(base + 8 * i);
    }
    Some((pid, start, backend, Snapshot(s)))
}

/// A live process's published counters.
pub struct ProcPage {
    pub pid: u32,
    pub comm: String,
    pub backend: String,
    pub counters: Snapshot,
}

/// Start time (clock ticks since boot) of a live process, None if it does not exist.
fn start_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The pages of live processes under `stats_dir()`, by pid. Pages of dead processes (or of
/// a pid now used by another process) are skipped, and removed when `remove_stale` is set.
pub fn live_pages(remove_stale: bool) -> Vec<ProcPage> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(stats_dir()) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid_str) = name.to_str().and_then(|n| n.strip_prefix(FILE_PREFIX)) else {
            continue;
        };
        let Ok(pid) = pid_str.parse::<u32>() else {
            continue;
        };
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        let Some((page_pid, page_start, backend, counters)) = parse_page(&bytes) else {
            continue;
        };
        let alive = match start_ticks_of(pid) {
            None => false,
            // 0 = published right after fork, start time not recorded: trust the pid.
            Some(t) => page_pid == pid && (page_start == 0 || page_start == t),
        };
        if !alive {
            if remove_stale {
                // Left behind by a process killed before it could clean up.
                let _ = std::fs::remove_file(e.path());
            }
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        out.push(ProcPage {
            pid,
            comm,
            backend,
            counters,
        });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// Sum over processes (the queue high-water mark is the largest, not a sum).
pub fn total(pages: &[ProcPage]) -> Snapshot {
    let mut t = [0u64; idx::COUNT];
    for p in pages {
        for (i, v) in t.iter_mut().enumerate() {
            if i == idx::QUEUE_HIGH_WATER {
                *v = (*v).max(p.counters.get(i));
            } else {
                *v += p.counters.get(i);
            }
        }
    }
    Snapshot(t)
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

    #[test]
    fn page_path_formats_without_allocation() {
        let mut out = [0u8; 512];
        let n = page_path(b"/dev/shm", 12345, &mut out).unwrap();
        assert_eq!(&out[..n], b"/dev/shm/kae-stats.12345");
        assert_eq!(out[n], 0);
        let n = page_path(b"/x", 0, &mut out).unwrap();
        assert_eq!(&out[..n], b"/x/kae-stats.0");
    }

    #[test]
    fn page_layout_round_trips() {
        let page = Page {
            magic: MAGIC,
            version: VERSION,
            pid: 42,
            start_ticks: 777,
            backend: *b"cpu\0\0\0\0\0\0\0\0\0\0\0\0\0",
            device: [0; 32],
            counters: Counters::new(),
        };
        page.counters.values[idx::PRIVATE_OFFLOADED].store(9, Ordering::Relaxed);
        page.counters.values[idx::IN_FLIGHT].store(3, Ordering::Relaxed);
        // SAFETY: reading the bytes of a repr(C) value we own.
        let bytes = unsafe {
            core::slice::from_raw_parts(
                (&page as *const Page).cast::<u8>(),
                core::mem::size_of::<Page>(),
            )
        };
        let (pid, start, backend, s) = parse_page(bytes).unwrap();
        assert_eq!((pid, start, backend.as_str()), (42, 777, "cpu"));
        assert_eq!(s.get(idx::PRIVATE_OFFLOADED), 9);
        assert_eq!(s.get(idx::IN_FLIGHT), 3);
        let mut bad = bytes.to_vec();
        bad[0] = b'X';
        assert!(parse_page(&bad).is_none(), "wrong magic is rejected");
    }
}
