//! fork() after kae's queue pool is running (a pre-forking server that initialised TLS first):
//! the child inherits the pool's memory but not its threads, so it must start its own pool and
//! compute correctly, both inside ASYNC jobs and inline, while the parent carries on. One of
//! the forks happens while another parent thread has requests in flight.
//!
//! Its own test binary with a single test (fork() in a process running other tests' threads
//! would copy whatever locks they hold). The child never returns into the test harness: it
//! reports through its exit code (and raw writes to stderr) and leaves with `_exit`.

mod async_support;
mod common;

use async_support::*;
use common::*;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BITS: u32 = 2048;
const FORKS: u32 = 5;
/// Forks made while a parent thread keeps ASYNC jobs in flight.
const BUSY_FORKS: [u32; 2] = [2, 4];
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
const STALL: Duration = Duration::from_secs(10);

/// Messages and their expected PKCS#1 v1.5 SHA-256 signatures (from the default provider).
#[derive(Clone)]
struct Expect {
    msgs: Vec<Vec<u8>>,
    sigs: Vec<Vec<u8>>,
}

fn expectations(seed: u64, n: usize) -> Expect {
    let kp = keypair(BITS);
    let p = sig_params("pkcs1", None, None, None);
    let msgs: Vec<Vec<u8>> = (0..n)
        .map(|i| pattern(seed + i as u64, 50 + i * 7))
        .collect();
    let sigs = msgs
        .iter()
        .map(|m| {
            ok(
                digest_sign(reference(), &kp.reference, Some("SHA256"), &p, m),
                "reference signature",
            )
        })
        .collect();
    Expect { msgs, sigs }
}

fn raw() -> Raw {
    Raw {
        libctx: kae().ptr,
        key: keypair(BITS).kae.0,
    }
}

/// Signs `e.msgs[..async_n]` in concurrent ASYNC jobs and the rest inline; compares all.
/// Uses only raw FFI and the driver (safe in a forked child: no test-harness locks).
fn sign_and_check(who: &str, raw: Raw, e: &Expect, async_n: usize) -> Result<(), String> {
    let mut ops: Vec<AsyncOp> = e.msgs[..async_n]
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let m = m.clone();
            AsyncOp::new(format!("{who}-async{i}"), move || {
                raw_digest_sign(raw, c"SHA256", c"provider=kae", &m)
            })
        })
        .collect();
    drive(&mut ops, STALL).map_err(|e| format!("{who}: {e}"))?;
    for (i, op) in ops.iter().enumerate() {
        match op.result() {
            Ok(s) if s == e.sigs[i] => {}
            Ok(s) => {
                return Err(format!(
                    "{who}: async signature {i} differs from the default provider's\n  got      {}\n  expected {}",
                    hex(&s),
                    hex(&e.sigs[i])
                ))
            }
            Err(err) => {
                return Err(format!(
                    "{who}: async signature {i} failed: {err}: {}",
                    take_errors("job")
                ))
            }
        }
    }
    for i in async_n..e.msgs.len() {
        match raw_digest_sign(raw, c"SHA256", c"provider=kae", &e.msgs[i]) {
            Ok(s) if s == e.sigs[i] => {}
            Ok(s) => {
                return Err(format!(
                    "{who}: inline signature {i} differs\n  got      {}\n  expected {}",
                    hex(&s),
                    hex(&e.sigs[i])
                ))
            }
            Err(err) => {
                return Err(format!(
                    "{who}: inline signature {i} failed: {err}: {}",
                    take_errors("inline")
                ))
            }
        }
    }
    Ok(())
}

/// Raw write to stderr (the child's Rust-level stderr may be the harness's capture buffer).
fn raw_log(msg: &str) {
    let m = format!("{msg}\n");
    unsafe { libc::write(2, m.as_ptr().cast(), m.len()) };
}

fn child_body(round: u32, raw: Raw, prov: usize, e: &Expect) -> Result<(), String> {
    let prov = prov as *const common::ffi::OSSL_PROVIDER;
    let who = format!("child{round}[{}]", std::process::id());
    let before = counters(prov);
    sign_and_check(&who, raw, e, 4)?;
    let after = counters(prov);
    let off = after.delta(&before, "ops-private-offloaded");
    let inl = after.delta(&before, "ops-private-inline");
    if off < 4 {
        return Err(format!(
            "{who}: ops-private-offloaded rose by {off} for 4 async jobs ({before:?} → {after:?})"
        ));
    }
    if inl < 2 {
        return Err(format!(
            "{who}: ops-private-inline rose by {inl} for 2 inline signatures"
        ));
    }
    if after.delta(&before, "errors") != 0 {
        return Err(format!("{who}: errors counted ({before:?} → {after:?})"));
    }
    // The child runs its own pool (the parent's threads were not copied).
    let names = thread_names();
    if !names.iter().any(|n| is_pool_worker(n)) {
        return Err(format!(
            "{who}: offloaded in the child but it has no pool worker thread: {names:?}"
        ));
    }
    // A second batch on the child's pool.
    sign_and_check(&format!("{who}-again"), raw, e, 6)?;
    Ok(())
}

fn child_main(round: u32, raw: Raw, prov: usize, e: &Expect) -> ! {
    let code = match catch_unwind(AssertUnwindSafe(|| child_body(round, raw, prov, e))) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            raw_log(&format!("FORK CHILD FAILURE: {msg}"));
            1
        }
        Err(_) => {
            raw_log("FORK CHILD FAILURE: panic in the child");
            2
        }
    };
    unsafe { libc::_exit(code) }
}

/// Waits for `pid` (WNOHANG polling); kills it after `limit`. Returns the raw wait status.
fn wait_child(pid: libc::pid_t, limit: Duration) -> Result<c_int, String> {
    let t0 = Instant::now();
    loop {
        let mut st: c_int = 0;
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
        if r == pid {
            return Ok(st);
        }
        if r < 0 {
            return Err(format!(
                "waitpid({pid}): {}",
                std::io::Error::last_os_error()
            ));
        }
        if t0.elapsed() > limit {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let mut st: c_int = 0;
            unsafe { libc::waitpid(pid, &mut st, 0) };
            return Err(format!(
                "child {pid} did not finish within {limit:?} (killed): hung after fork"
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn describe_status(st: c_int) -> String {
    if libc::WIFEXITED(st) {
        format!("exit code {}", libc::WEXITSTATUS(st))
    } else if libc::WIFSIGNALED(st) {
        format!("killed by signal {}", libc::WTERMSIG(st))
    } else {
        format!("status {st:#x}")
    }
}

/// A parent thread that keeps batches of ASYNC signing jobs running until stopped.
struct Busy {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<u64, String>>,
}

impl Busy {
    fn start(seed: u64) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let e = expectations(seed, 8);
        let r = raw();
        let handle = std::thread::spawn(move || {
            let _a = AsyncThread::init(16);
            let mut batches = 0u64;
            while !s.load(Ordering::Acquire) {
                sign_and_check("busy", r, &e, 8)?;
                batches += 1;
            }
            Ok(batches)
        });
        Busy { stop, handle }
    }
    fn finish(self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .join()
            .unwrap_or_else(|_| Err("busy thread panicked".into()))
    }
}

#[test]
fn fork_with_running_pool() {
    let _wd = Watchdog::new("fork test", Duration::from_secs(120));
    let _a = AsyncThread::init(16);
    let raw = raw();
    let prov = kae().prov as usize;
    let t_start = Instant::now();

    // Use kae in async mode once, so that the pool runs before the first fork.
    let warm = expectations(100, 4);
    let c0 = counters(kae().prov);
    sign_and_check("parent-warmup", raw, &warm, 4).unwrap_or_else(|e| panic!("{e}"));
    let c1 = counters(kae().prov);
    assert!(
        c1.delta(&c0, "ops-private-offloaded") >= 4,
        "warm-up jobs were not offloaded: {c0:?} → {c1:?}"
    );
    let names = thread_names();
    assert!(
        names.iter().any(|n| is_pool_worker(n)),
        "pool threads not running after async use: {names:?}"
    );

    let mut failures = Vec::new();
    for round in 0..FORKS {
        let child_exp = expectations(1000 + round as u64 * 10, 6);
        let parent_exp = expectations(2000 + round as u64 * 10, 6);
        let busy = BUSY_FORKS
            .contains(&round)
            .then(|| Busy::start(3000 + round as u64 * 10));
        let mut in_flight_at_fork = None;
        if busy.is_some() {
            // Fork only once requests are really in flight.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                let n = counters(kae().prov).get("in-flight");
                if n > 0 {
                    in_flight_at_fork = Some(n);
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
        if pid == 0 {
            child_main(round, raw, prov, &child_exp);
        }
        // Parent: carries on signing, async and inline.
        let before = counters(kae().prov);
        if let Err(e) = sign_and_check(&format!("parent{round}"), raw, &parent_exp, 4) {
            failures.push(e);
        }
        let after = counters(kae().prov);
        if after.delta(&before, "ops-private-offloaded") < 4 {
            failures.push(format!(
                "parent{round}: async signatures after fork were not offloaded ({before:?} → {after:?})"
            ));
        }
        if let Some(b) = busy {
            match b.finish() {
                Ok(batches) => eprintln!(
                    "round {round}: forked with {in_flight_at_fork:?} request(s) in flight; busy thread ran {batches} batches"
                ),
                Err(e) => failures.push(format!("round {round}: busy parent thread: {e}")),
            }
            if in_flight_at_fork.is_none() {
                failures.push(format!(
                    "round {round}: could not observe requests in flight before forking"
                ));
            }
        }
        match wait_child(pid, CHILD_TIMEOUT) {
            Ok(st) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 => {
                eprintln!("round {round}: child {pid} ok");
            }
            Ok(st) => failures.push(format!(
                "round {round}: child {pid} failed: {} (see FORK CHILD FAILURE on stderr)",
                describe_status(st)
            )),
            Err(e) => failures.push(format!("round {round}: {e}")),
        }
    }
    eprintln!("{FORKS} forks in {:.2?}", t_start.elapsed());
    assert!(
        failures.is_empty(),
        "{} failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    // The parent's pool is still the one serving it.
    let last = expectations(4000, 4);
    sign_and_check("parent-final", raw, &last, 4).unwrap_or_else(|e| panic!("{e}"));
}
