//! kae's queue pool driven through OpenSSL ASYNC jobs, the way an event-driven server (HAProxy,
//! nginx with async mode, `openssl speed -async_jobs`) drives it: private RSA operations started
//! inside `ASYNC_start_job` must pause, be woken through the wait fd kae registers in the job's
//! `ASYNC_WAIT_CTX` (or through the application's callback), and finish with the same result as
//! OpenSSL's default provider.
//!
//! The tests in this binary take a lock so that kae's per-process counters can be compared
//! before/after each scenario.

mod async_support;
mod common;

use async_support::ffi::{ASYNC_FINISH, ASYNC_PAUSE};
use async_support::*;
use common::*;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

const STALL: Duration = Duration::from_secs(10);
const BITS: u32 = 2048;

/// Every test starts here: it serializes the tests and, before anything in the process loads
/// kae, sets what they need instead of relying on the runner (kae reads its settings when the
/// provider is first initialised): `KAE_ASYNC=yes` offloads inside ASYNC jobs whatever the
/// number of CPUs (`auto` computes inline on one CPU, and an inherited `KAE_ASYNC=no` would
/// too), on the CPU backend.
fn serial() -> MutexGuard<'static, ()> {
    static ENV: std::sync::Once = std::sync::Once::new();
    ENV.call_once(|| {
        std::env::set_var("KAE_ASYNC", "yes");
        std::env::set_var("KAE_BACKEND", "cpu");
    });
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn oaep_params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Enc::oaep("SHA256", "SHA256", None).params())
}

fn raw() -> Raw {
    Raw {
        libctx: kae().ptr,
        key: keypair(BITS).kae.0,
    }
}

fn now_counters() -> Counters {
    counters(kae().prov)
}

/// A job plus what it must produce.
struct Case {
    op: AsyncOp,
    expected: Vec<u8>,
}

/// PKCS#1 v1.5 SHA-256 signature of a per-job message; expected bytes from the default provider
/// (the scheme is deterministic).
fn sign_case(name: String, seed: u64, callback: bool) -> Case {
    let kp = keypair(BITS);
    let msg = pattern(seed, 40 + (seed % 200) as usize);
    let expected = ok(
        digest_sign(
            reference(),
            &kp.reference,
            Some("SHA256"),
            &sig_params("pkcs1", None, None, None),
            &msg,
        ),
        "reference signature",
    );
    let r = raw();
    let work = move || raw_digest_sign(r, c"SHA256", c"provider=kae", &msg);
    let op = if callback {
        AsyncOp::with_callback(name, work)
    } else {
        AsyncOp::new(name, work)
    };
    Case { op, expected }
}

/// OAEP (SHA-256) decryption of a ciphertext made by the default provider.
fn decrypt_case(name: String, seed: u64, callback: bool) -> Case {
    let kp = keypair(BITS);
    let pt = pattern(seed, 1 + (seed % 150) as usize);
    let ct = ok(
        encrypt(reference(), &kp.reference, oaep_params(), &pt),
        "reference OAEP encryption",
    );
    let r = raw();
    let params = oaep_params().as_ptr();
    let work = move || raw_decrypt(r, c"provider=kae", params, &ct);
    let op = if callback {
        AsyncOp::with_callback(name, work)
    } else {
        AsyncOp::new(name, work)
    };
    Case { op, expected: pt }
}

fn mixed_case(tag: &str, i: u64, callback: bool) -> Case {
    if i % 2 == 0 {
        sign_case(format!("{tag}-sign{i}"), i, callback)
    } else {
        decrypt_case(format!("{tag}-oaep{i}"), i, callback)
    }
}

/// Checks every finished job's output; returns the problems found.
fn check_cases(cases: &[Case]) -> Vec<String> {
    check_outputs(cases.iter().map(|c| (&c.op, &c.expected[..])))
}

/// Runs `per_thread` jobs at once on each of `threads` threads, `rounds` times; returns
/// (jobs run, ASYNC_PAUSE returns seen by the application, problems).
fn run_threads(
    tag: &str,
    threads: u64,
    per_thread: u64,
    rounds: u64,
    callback: bool,
) -> (u64, u64, Vec<String>) {
    // Keys and reference results are made before the clock starts.
    keypair(BITS);
    let results: Vec<Result<(u64, u64, Vec<String>), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let _a = AsyncThread::init(2 * per_thread as usize);
                    let mut n = 0u64;
                    let mut pauses = 0u64;
                    let mut problems = Vec::new();
                    for round in 0..rounds {
                        let mut cases: Vec<Case> = (0..per_thread)
                            .map(|j| {
                                let i = t * 1000 + round * 100 + j;
                                mixed_case(&format!("{tag}-t{t}-r{round}"), i, callback)
                            })
                            .collect();
                        let mut ops: Vec<AsyncOp> = Vec::new();
                        let mut expected = Vec::new();
                        for c in cases.drain(..) {
                            ops.push(c.op);
                            expected.push(c.expected);
                        }
                        let rep = drive(&mut ops, STALL)?;
                        eprintln!(
                            "[{tag}] thread {t} round {round}: {} jobs, {} pauses, {} resumes, {} polls in {:.2?}",
                            ops.len(),
                            rep.pauses,
                            rep.resumes,
                            rep.polls,
                            rep.elapsed
                        );
                        if callback {
                            for op in &ops {
                                let calls = op.cb.as_ref().map_or(0, |c| {
                                    c.calls.load(std::sync::atomic::Ordering::Relaxed)
                                });
                                if op.pauses > 0 && calls == 0 {
                                    problems.push(format!(
                                        "{}: paused {} times and finished, but its callback was never called",
                                        op.name, op.pauses
                                    ));
                                }
                            }
                        }
                        n += ops.len() as u64;
                        pauses += rep.pauses;
                        let cases: Vec<Case> = ops
                            .into_iter()
                            .zip(expected)
                            .map(|(op, expected)| Case { op, expected })
                            .collect();
                        problems.extend(check_cases(&cases));
                    }
                    Ok((n, pauses, problems))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    sum_thread_reports(results)
}

/// Counter checks after `jobs` jobs during which the application saw `seen_pauses`
/// ASYNC_PAUSE returns (the tests are serialised, so the deltas are theirs alone):
/// * every job's private operation went through the pool: `ops-private-offloaded` rose by at
///   least `jobs`;
/// * kae counted exactly the pauses the application saw (`async-pauses`);
/// * the jobs really were asynchronous: at least half of them paused. (Not all of them:
///   a job whose result is already there when kae checks after submitting does not pause;
///   on two busy cores a submitter preempted by the worker it woke meets that now and then.)
#[track_caller]
fn assert_offloaded(before: &Counters, after: &Counters, jobs: u64, seen_pauses: u64) {
    let off = after.delta(before, "ops-private-offloaded");
    let pauses = after.delta(before, "async-pauses");
    let errors = after.delta(before, "errors");
    eprintln!(
        "counters: +{off} offloaded private ops, +{pauses} async pauses ({seen_pauses} seen by the application for {jobs} jobs), +{} inline private ops, +{errors} errors, +{} spurious, +{} queue-full retries, high water {}, in flight {}",
        after.delta(before, "ops-private-inline"),
        after.delta(before, "spurious-resumes"),
        after.delta(before, "queue-full-retries"),
        after.get("queue-high-water"),
        after.get("in-flight"),
    );
    assert!(
        off >= jobs,
        "ops-private-offloaded rose by {off}, expected at least {jobs} (one per job)\nbefore {before:?}\nafter {after:?}"
    );
    assert_eq!(
        pauses, seen_pauses,
        "async-pauses rose by {pauses}, but the jobs returned ASYNC_PAUSE {seen_pauses} times\nbefore {before:?}\nafter {after:?}"
    );
    assert!(
        seen_pauses * 2 >= jobs,
        "only {seen_pauses} pauses for {jobs} jobs: the private operations did not wait asynchronously\nbefore {before:?}\nafter {after:?}"
    );
    assert_eq!(
        errors, 0,
        "kae counted errors\nbefore {before:?}\nafter {after:?}"
    );
}

/// Inline (no job) sign + verify round trip still working, compared with the default provider.
#[track_caller]
fn inline_still_works(seed: u64) {
    let kp = keypair(BITS);
    let msg = pattern(seed, 77);
    let p = sig_params("pkcs1", None, None, None);
    let a = ok(
        digest_sign(kae(), &kp.kae, Some("SHA256"), &p, &msg),
        "inline kae signature",
    );
    let b = ok(
        digest_sign(reference(), &kp.reference, Some("SHA256"), &p, &msg),
        "reference signature",
    );
    assert_eq!(
        hex(&a),
        hex(&b),
        "inline kae signature differs from default"
    );
    let pt = pattern(seed + 1, 33);
    let ct = ok(
        encrypt(reference(), &kp.reference, oaep_params(), &pt),
        "encrypt",
    );
    let back = ok(
        decrypt(kae(), &kp.kae, oaep_params(), &ct),
        "inline kae decrypt",
    );
    assert_eq!(back, pt, "inline kae OAEP decryption");
}

#[test]
fn fd_wakeup_three_threads_eight_jobs_each() {
    let _g = serial();
    keypair(BITS);
    let before = now_counters();
    let t0 = Instant::now();
    let (jobs, pauses, problems) = run_threads("fd", 3, 8, 2, false);
    let after = now_counters();
    eprintln!("{jobs} jobs in {:.2?}", t0.elapsed());
    Problems(problems).finish();
    assert_eq!(jobs, 3 * 8 * 2);
    assert_offloaded(&before, &after, jobs, pauses);
    assert_eq!(after.backend, "cpu", "backend parameter");
    assert!(
        after.get("queue-high-water") >= 1,
        "queue-high-water never rose: {after:?}"
    );
    // Reported (counters() panics on a missing one), and untouched by the CPU backend.
    for n in ["mb-batches", "mb-lanes", "mb-scalar"] {
        assert_eq!(after.get(n), 0, "{n} on the cpu backend: {after:?}");
    }
}

#[test]
fn callback_wakeup() {
    let _g = serial();
    keypair(BITS);
    let before = now_counters();
    let (jobs, pauses, problems) = run_threads("cb", 2, 8, 2, true);
    let after = now_counters();
    Problems(problems).finish();
    assert_eq!(jobs, 2 * 8 * 2);
    assert_offloaded(&before, &after, jobs, pauses);
}

/// In-flight requests drain to zero (the pool is otherwise idle: the tests are serialised).
fn wait_in_flight_zero(limit: Duration) -> Counters {
    let t0 = Instant::now();
    loop {
        let c = now_counters();
        if c.get("in-flight") == 0 || t0.elapsed() > limit {
            return c;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts signing jobs until `n` of them are paused inside kae; returns the paused ones and
/// the number of jobs that finished at once (result ready before kae checked; verified).
fn start_paused(tag: &str, n: u64, seed: u64) -> (Vec<Case>, u64) {
    let mut v = Vec::new();
    let mut finished_at_once = 0u64;
    let mut i = 0;
    while (v.len() as u64) < n {
        assert!(i < 10 * n, "{tag}: jobs keep finishing without pausing");
        let mut c = sign_case(format!("{tag}{i}"), seed + i, false);
        i += 1;
        let r = c.op.step();
        if r == ASYNC_FINISH {
            let p = check_cases(std::slice::from_ref(&c));
            assert!(p.is_empty(), "{}", p.join("\n"));
            finished_at_once += 1;
            continue;
        }
        assert_eq!(
            r,
            ASYNC_PAUSE,
            "{}: ASYNC_start_job returned {r}: {}",
            c.op.name,
            take_errors("start")
        );
        assert!(
            !c.op.fds().is_empty(),
            "{}: paused but registered no wait fd",
            c.op.name
        );
        v.push(c);
    }
    (v, finished_at_once)
}

#[test]
fn job_freed_while_paused() {
    let _g = serial();
    let _a = AsyncThread::init(32);
    keypair(BITS);
    let before = now_counters();
    // The application frees its connections (wait contexts) while kae works on their
    // requests, and never resumes the jobs.
    let (paused, at_once) = start_paused("abandoned", 4, 5000);
    let mut seen_pauses: u64 = paused.iter().map(|c| c.op.pauses as u64).sum();
    let fds: Vec<i32> = paused.iter().flat_map(|c| c.op.fds()).collect();
    eprintln!("abandoning 4 paused jobs (wait fds {fds:?})");
    for c in paused {
        c.op.abandon();
    }
    std::thread::sleep(Duration::from_millis(200));
    let after_abandon = wait_in_flight_zero(Duration::from_secs(5));
    assert_eq!(
        after_abandon.get("in-flight"),
        0,
        "requests of freed jobs never completed: {after_abandon:?}"
    );

    // Later operations work: more async jobs on the same thread, and inline ones.
    let mut cases: Vec<Case> = (0..8)
        .map(|i| mixed_case("after-free", 6000 + i, false))
        .collect();
    let mut ops: Vec<AsyncOp> = Vec::new();
    let mut exp = Vec::new();
    for c in cases.drain(..) {
        ops.push(c.op);
        exp.push(c.expected);
    }
    seen_pauses += drive_ok(&mut ops, STALL).pauses;
    let cases: Vec<Case> = ops
        .into_iter()
        .zip(exp)
        .map(|(op, expected)| Case { op, expected })
        .collect();
    let problems = check_cases(&cases);
    Problems(problems).finish();
    inline_still_works(6100);
    // And on another thread, with a fresh ASYNC pool.
    seen_pauses += std::thread::spawn(|| {
        let _a = AsyncThread::init(8);
        let mut ops: Vec<AsyncOp> = Vec::new();
        let mut exp = Vec::new();
        for i in 0..4 {
            let c = mixed_case("other-thread", 6200 + i, false);
            ops.push(c.op);
            exp.push(c.expected);
        }
        let rep = drive_ok(&mut ops, STALL);
        for (op, e) in ops.iter().zip(exp) {
            assert_eq!(op.result().as_deref().ok(), Some(&e[..]), "{}", op.name);
        }
        rep.pauses
    })
    .join()
    .expect("jobs on another thread after the abandoned ones");
    let after = now_counters();
    // The abandoned requests completed but their jobs never resumed: not counted as offloaded
    // (kae counts an offloaded operation when its job collects the result).
    assert_offloaded(&before, &after, 12 + at_once, seen_pauses);
    assert_eq!(
        after.delta(&before, "errors"),
        0,
        "errors counted: before {before:?} after {after:?}"
    );
}

/// What `/proc/self/fd/<fd>` points at, if open.
fn fd_target(fd: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Beyond "no crash" in the same scenario: a server that frees
/// connections with paused jobs (client aborts mid-handshake) must not leak one eventfd per
/// freed connection once the request has completed.
#[test]
fn freed_wait_ctx_fd_is_closed_after_completion() {
    let _g = serial();
    let _a = AsyncThread::init(32);
    keypair(BITS);
    let (paused, _) = start_paused("fdleak", 3, 7000);
    let fds: Vec<i32> = paused.iter().flat_map(|c| c.op.fds()).collect();
    for &fd in &fds {
        assert!(
            fd_target(fd).is_some_and(|t| t.contains("eventfd")),
            "wait fd {fd} is not an eventfd: {:?}",
            fd_target(fd)
        );
    }
    for c in paused {
        c.op.abandon();
    }
    std::thread::sleep(Duration::from_millis(200));
    let c = wait_in_flight_zero(Duration::from_secs(5));
    assert_eq!(c.get("in-flight"), 0, "requests never completed: {c:?}");
    std::thread::sleep(Duration::from_millis(50));
    // Nothing else creates eventfds meanwhile (tests are serialised), so a wait fd number that
    // is still an eventfd is the one kae registered.
    let still_open: Vec<(i32, String)> = fds
        .iter()
        .filter_map(|&fd| {
            fd_target(fd)
                .filter(|t| t.contains("eventfd"))
                .map(|t| (fd, t))
        })
        .collect();
    assert!(
        still_open.is_empty(),
        "wait fds of freed ASYNC_WAIT_CTXs are still open after their requests completed (one fd leaked per freed connection): {still_open:?}"
    );
}

#[test]
fn spurious_resume_pauses_again() {
    let _g = serial();
    let _a = AsyncThread::init(8);
    keypair(BITS);
    let before = now_counters();
    let mut observed = 0u64;
    let mut attempts = 0;
    let mut seen_pauses = 0u64;
    let mut problems = Vec::new();
    while observed < 3 && attempts < 30 {
        attempts += 1;
        let mut c = sign_case(format!("spurious{attempts}"), 8000 + attempts, false);
        let r = c.op.step();
        if r == ASYNC_FINISH {
            // Result ready before kae checked: nothing to resume early.
            problems.extend(check_cases(std::slice::from_ref(&c)));
            continue;
        }
        assert_eq!(r, ASYNC_PAUSE, "{}: first step returned {r}", c.op.name);
        let fds = c.op.fds();
        assert!(!fds.is_empty(), "{}: paused without a wait fd", c.op.name);
        // Resume at once, while the fd is not readable yet.
        for _ in 0..3 {
            let mut p: Vec<libc::pollfd> = fds
                .iter()
                .map(|&fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, 0) };
            if n != 0 {
                break; // completed already: not a spurious resume
            }
            let r = c.op.step();
            match r {
                ASYNC_PAUSE => observed += 1,
                // The result landed between our poll and kae's check: legitimate.
                ASYNC_FINISH => break,
                other => panic!("{}: spurious resume returned {other}", c.op.name),
            }
        }
        if c.op.state == async_support::State::Paused {
            drive_ok(std::slice::from_mut(&mut c.op), STALL);
        }
        problems.extend(check_cases(std::slice::from_ref(&c)));
        seen_pauses += c.op.pauses as u64;
    }
    let after = now_counters();
    Problems(problems).finish();
    assert!(
        observed >= 1,
        "never managed to resume a job before its result was ready in {attempts} attempts"
    );
    let sp = after.delta(&before, "spurious-resumes");
    eprintln!("{observed} spurious resumes made in {attempts} attempts; kae counted +{sp}");
    assert!(
        sp >= observed,
        "spurious-resumes rose by {sp}, but {observed} resumes without a result paused again"
    );
    assert_offloaded(&before, &after, attempts, seen_pauses);
}
