//! Per-process counters (relaxed atomics: a bump is one uncontended atomic add). Published to
//! operators by a later issue; readable by tests now and summarised in the log at teardown.

use crate::backend::OpKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where an operation was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// On the caller's thread.
    Inline,
    /// Through the queue pool (async offload).
    Offload,
}

#[derive(Default)]
pub struct Counters {
    pub inline_private_ok: AtomicU64,
    pub inline_public_ok: AtomicU64,
    pub offload_private_ok: AtomicU64,
    pub offload_public_ok: AtomicU64,
    pub private_errors: AtomicU64,
    pub public_errors: AtomicU64,
    pub async_pauses: AtomicU64,
    pub spurious_resumes: AtomicU64,
    pub queue_full_retries: AtomicU64,
    pub fallbacks: AtomicU64,
}

pub static COUNTERS: Counters = Counters {
    inline_private_ok: AtomicU64::new(0),
    inline_public_ok: AtomicU64::new(0),
    offload_private_ok: AtomicU64::new(0),
    offload_public_ok: AtomicU64::new(0),
    private_errors: AtomicU64::new(0),
    public_errors: AtomicU64::new(0),
    async_pauses: AtomicU64::new(0),
    spurious_resumes: AtomicU64::new(0),
    queue_full_retries: AtomicU64::new(0),
    fallbacks: AtomicU64::new(0),
};

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub fn record(kind: OpKind, path: Path, ok: bool) {
    let c = &COUNTERS;
    match (ok, kind, path) {
        (false, OpKind::Private, _) => bump(&c.private_errors),
        (false, OpKind::Public, _) => bump(&c.public_errors),
        (true, OpKind::Private, Path::Inline) => bump(&c.inline_private_ok),
        (true, OpKind::Public, Path::Inline) => bump(&c.inline_public_ok),
        (true, OpKind::Private, Path::Offload) => bump(&c.offload_private_ok),
        (true, OpKind::Public, Path::Offload) => bump(&c.offload_public_ok),
    }
}

pub fn note_pause() {
    bump(&COUNTERS.async_pauses);
}
pub fn note_spurious() {
    bump(&COUNTERS.spurious_resumes);
}
pub fn note_queue_full() {
    bump(&COUNTERS.queue_full_retries);
}
pub fn note_fallback() {
    bump(&COUNTERS.fallbacks);
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub inline_private: u64,
    pub inline_public: u64,
    pub offload_private: u64,
    pub offload_public: u64,
    pub private_errors: u64,
    pub public_errors: u64,
    pub async_pauses: u64,
    pub spurious_resumes: u64,
    pub queue_full_retries: u64,
    pub fallbacks: u64,
    pub crt_faults: u64,
}

pub fn snapshot() -> Snapshot {
    let c = &COUNTERS;
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Snapshot {
        inline_private: l(&c.inline_private_ok),
        inline_public: l(&c.inline_public_ok),
        offload_private: l(&c.offload_private_ok),
        offload_public: l(&c.offload_public_ok),
        private_errors: l(&c.private_errors),
        public_errors: l(&c.public_errors),
        async_pauses: l(&c.async_pauses),
        spurious_resumes: l(&c.spurious_resumes),
        queue_full_retries: l(&c.queue_full_retries),
        fallbacks: l(&c.fallbacks),
        crt_faults: crate::rsa::ops::CRT_FAULTS.load(Ordering::Relaxed),
    }
}

impl Snapshot {
    pub fn errors(&self) -> u64 {
        self.private_errors + self.public_errors
    }
}

/// One line for logs (printed at provider teardown or process exit with `KAE_LOG=info`).
/// Scripts and tests parse it: keep the leading `private ops N ok / M failed, public ops N ok
/// / M failed` shape.
pub fn summary_line() -> String {
    let s = snapshot();
    format!(
        "kae[{}] summary: private ops {} ok / {} failed ({} offloaded), public ops {} ok / {} failed ({} offloaded), \
         async pauses {}, spurious resumes {}, queue-full retries {}, fallbacks {}, CRT faults {}",
        std::process::id(),
        s.inline_private + s.offload_private,
        s.private_errors,
        s.offload_private,
        s.inline_public + s.offload_public,
        s.public_errors,
        s.offload_public,
        s.async_pauses,
        s.spurious_resumes,
        s.queue_full_retries,
        s.fallbacks,
        s.crt_faults
    )
}

static SUMMARY_LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Logs the summary line (at most once per process: at teardown, or at exit when the
/// application never frees the provider).
pub fn log_summary_once() {
    if !SUMMARY_LOGGED.swap(true, Ordering::AcqRel) {
        log::info!("{}", summary_line());
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(log_summary_once);
}

/// Registers the exit-time summary (once per process).
pub fn log_summary_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a plain extern "C" fn; glibc ties it to this library, so it runs
        // at exit or when the library is unloaded, whichever comes first.
        unsafe { libc::atexit(at_exit) };
    });
}
