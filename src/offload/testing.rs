//! What the router's tests share: a key, stand-in computations, one-at-a-time running, and
//! the CPU time of the router's threads.

use crate::completion::Request;
use crate::ffi::bn::BigNum;
use crate::rsa::{KeyType, RsaKey};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The limit of waits that only a hang reaches: a machine busy with other work (one
/// CPU-bound loop per core) makes a child or a shutdown seconds slower, never a minute.
pub(super) const HANG: Duration = Duration::from_secs(60);

pub(super) fn key() -> Arc<RsaKey> {
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
pub(super) fn echo(r: &mut Request) {
    let n = r.input.len();
    r.output[..n].copy_from_slice(&r.input);
    r.result = Ok(());
}

pub(super) fn slow_echo(r: &mut Request) {
    std::thread::sleep(Duration::from_millis(2));
    echo(r);
}

pub(super) fn input(k: usize, tag: u8) -> Vec<u8> {
    let mut v = vec![tag; k];
    v[0] = 0;
    v
}

/// Offloader tests run one at a time so per-thread measurements see only their own offloader.
pub(super) static SERIAL: Mutex<()> = Mutex::new(());

pub(super) fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// CPU seconds used so far by this process's threads whose name starts with
/// `prefix` (kae-cpu, kae-poller). Panics when there is no such thread or its times
/// cannot be read: a measurement of nothing must not pass for "idle".
pub(super) fn pool_threads_cpu(prefix: &str) -> f64 {
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
