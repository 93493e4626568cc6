//! Per-process operation counters (relaxed atomics: a counter bump costs one uncontended
//! atomic add). Published to operators by a later issue; readable by tests now.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug)]
pub enum Op {
    Private,
    Public,
}

pub struct Counters {
    pub private_ok: AtomicU64,
    pub private_err: AtomicU64,
    pub public_ok: AtomicU64,
    pub public_err: AtomicU64,
}

pub static COUNTERS: Counters = Counters {
    private_ok: AtomicU64::new(0),
    private_err: AtomicU64::new(0),
    public_ok: AtomicU64::new(0),
    public_err: AtomicU64::new(0),
};

pub fn record(op: Op, ok: bool) {
    let c = match (op, ok) {
        (Op::Private, true) => &COUNTERS.private_ok,
        (Op::Private, false) => &COUNTERS.private_err,
        (Op::Public, true) => &COUNTERS.public_ok,
        (Op::Public, false) => &COUNTERS.public_err,
    };
    c.fetch_add(1, Ordering::Relaxed);
}

/// (private ok, private errors, public ok, public errors)
pub fn snapshot() -> (u64, u64, u64, u64) {
    (
        COUNTERS.private_ok.load(Ordering::Relaxed),
        COUNTERS.private_err.load(Ordering::Relaxed),
        COUNTERS.public_ok.load(Ordering::Relaxed),
        COUNTERS.public_err.load(Ordering::Relaxed),
    )
}

/// One line for logs (printed at provider teardown with `KAE_LOG=info`).
pub fn summary_line() -> String {
    let (po, pe, uo, ue) = snapshot();
    format!(
        "kae[{}] summary: private ops {po} ok / {pe} failed, public ops {uo} ok / {ue} failed, CRT faults {}",
        std::process::id(),
        crate::rsa::ops::CRT_FAULTS.load(Ordering::Relaxed)
    )
}
