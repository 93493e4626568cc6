//! The HPRE backend against the UADK simulator (`hpre-sim`, test-only): kae loaded with
//! `backend = hpre`, UADK's libraries pointed at the simulator and HPRE discovery at a fake
//! sysfs tree. Every result is checked against OpenSSL's default provider, and the
//! simulator's own counters show what reached the "device".
//!
//! The simulator reads its knobs (latency, queue depth, injected errors…) when kae initialises
//! UADK, and kae reads its settings when the provider loads: so each scenario runs in a process
//! of its own, this test binary started again with the scenario's environment (`child`).

mod async_support;
mod common;
mod procs;

use async_support::*;
use common::hpre_sim::{fake_sysfs, sim_lib, sim_stats, FakeDevice, SimStats};
use common::*;
use procs::{openssl_bin, run, Output, TempDir};
use std::process::Command;
use std::time::Duration;

const SCENARIO: &str = "KAE_HPRE_TEST_SCENARIO";
const STALL: Duration = Duration::from_secs(20);

/// Runs scenario `name` in a new process with kae on HPRE (the simulator) and `extra`
/// settings; the fake sysfs lists `devices`. Returns what the process printed.
fn scenario(name: &str, extra: &[(&str, &str)], devices: &[FakeDevice]) -> Output {
    scenario_under(&[], name, extra, devices)
}

/// [`scenario`], the process started through `wrapper` (e.g. valgrind) when not empty.
fn scenario_under(
    wrapper: &[&str],
    name: &str,
    extra: &[(&str, &str)],
    devices: &[FakeDevice],
) -> Output {
    let dir = TempDir::new(&format!("hpre-{name}"));
    let sysfs = dir.join("sysfs");
    fake_sysfs(&sysfs, devices);
    let lib = sim_lib();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match wrapper.split_first() {
        Some((prog, args)) => {
            let mut c = Command::new(prog);
            c.args(args).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args([
        "--exact",
        "child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("KAE_") && k != "KAE_MODULE" {
            cmd.env_remove(k);
        }
    }
    cmd.env(SCENARIO, name)
        .env("KAE_BACKEND", "hpre")
        .env("KAE_ASYNC", "yes")
        .env("KAE_UADK_LIB", &lib)
        .env("KAE_UADK_CRYPTO_LIB", &lib)
        .env("KAE_HPRE_SYSFS", &sysfs)
        .env("KAE_SIM", "1")
        .env("KAE_SIM_SYSFS", &sysfs)
        .env("KAE_STATS", "no");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = run(&mut cmd, None, Duration::from_secs(600));
    assert!(
        out.status.success() && out.stdout.contains(&format!("SCENARIO {name} PASSED")),
        "scenario {name} failed\n{}",
        out.describe()
    );
    for l in out
        .stdout
        .lines()
        .filter(|l| l.contains("sim:") || l.contains("round "))
    {
        eprintln!("[{name}] {l}");
    }
    out
}

fn one_device() -> Vec<FakeDevice> {
    vec![FakeDevice::default()]
}

/// The scenario runner (in the process `scenario` starts; does nothing when run directly).
#[test]
#[ignore = "started by the other tests, in a process of its own"]
fn child() {
    let Ok(name) = std::env::var(SCENARIO) else {
        return;
    };
    match name.as_str() {
        "correctness" => correctness(),
        "async" => async_many(),
        "faults" => faults(),
        "isolation" => isolation(),
        "fork" => fork_child(),
        "direct" => direct_sync(),
        "no-device" => no_device(),
        "teardown" => teardown(),
        "late-refusal" => late_refusal(),
        "late-completions" => late_completions(),
        "direct-give-up" => direct_give_up(),
        other => panic!("unknown scenario {other}"),
    }
    println!("SCENARIO {name} PASSED");
}

fn delta(after: &SimStats, before: &SimStats) -> SimStats {
    SimStats {
        submitted: after.submitted - before.submitted,
        completed_ok: after.completed_ok - before.completed_ok,
        sync_calls: after.sync_calls - before.sync_calls,
        ..*after
    }
}

/// Sign, verify, encrypt and decrypt with every padding on each hardware key size; kae's
/// results must equal (or verify with) the default provider's.
fn sign_and_decrypt_everything(bits: u32) -> usize {
    let kp = keypair(bits);
    let mut private_ops = 0;
    for (pad, md) in [
        ("pkcs1", "SHA256"),
        ("pss", "SHA256"),
        ("pkcs1", "SHA384"),
        ("x931", "SHA256"),
    ] {
        let p = sig_params(pad, None, None, None);
        let msg = pattern(u64::from(bits), 100);
        let sig = ok(digest_sign(kae(), &kp.kae, Some(md), &p, &msg), "kae sign");
        private_ops += 1;
        if pad != "pss" {
            let want = ok(
                digest_sign(reference(), &kp.reference, Some(md), &p, &msg),
                "reference sign",
            );
            assert_eq!(sig, want, "{bits}-bit {pad} {md}: kae's signature differs");
        }
        ok(
            digest_verify(reference(), &kp.reference, Some(md), &p, &msg, &sig),
            "the default provider verifies kae's signature",
        );
        ok(
            digest_verify(kae(), &kp.kae, Some(md), &p, &msg, &sig),
            "kae verifies its signature",
        );
    }
    let k = kp.kae.size();
    let mut raw_pt = pattern(7, k);
    raw_pt[0] = 0;
    // Raw signature (no padding): the same bytes from both providers.
    let none_sig = sig_params("none", None, None, None);
    let got = ok(sign(kae(), &kp.kae, &none_sig, &raw_pt), "kae raw sign");
    let want = ok(
        sign(reference(), &kp.reference, &none_sig, &raw_pt),
        "reference raw sign",
    );
    assert_eq!(got, want, "{bits}-bit raw signature differs");
    private_ops += 1;
    let oaep = Enc::oaep("SHA256", "SHA256", None).params();
    let pkcs1 = Enc::pkcs1().params();
    let none = Enc::pad("none").params();
    for (what, params, pt) in [
        ("oaep", &oaep, pattern(1, 40)),
        ("pkcs1", &pkcs1, pattern(2, 50)),
        ("none", &none, raw_pt),
    ] {
        let ct = ok(
            encrypt(reference(), &kp.reference, params, &pt),
            "reference encrypt",
        );
        let got = ok(decrypt(kae(), &kp.kae, params, &ct), "kae decrypt");
        assert_eq!(got, pt, "{bits}-bit {what}: kae's decryption differs");
        private_ops += 1;
        let ct = ok(encrypt(kae(), &kp.kae, params, &pt), "kae encrypt");
        let got = ok(
            decrypt(reference(), &kp.reference, params, &ct),
            "reference decrypt",
        );
        assert_eq!(
            got, pt,
            "{bits}-bit {what}: kae's encryption does not decrypt"
        );
    }
    private_ops
}

fn correctness() {
    let c0 = counters(kae().prov);
    assert_eq!(c0.backend, "hpre", "kae runs on {}", c0.backend);
    let s0 = sim_stats();
    let mut private_ops = 0;
    for bits in [1024, 2048, 3072, 4096] {
        private_ops += sign_and_decrypt_everything(bits);
    }
    let s1 = sim_stats();
    let d = delta(&s1, &s0);
    let c1 = counters(kae().prov);
    println!("sim: {d:?}; kae: {c1:?}");
    // Sync public operations stay on the CPU (a device round trip is slower than the
    // operation); every private one reaches the device.
    assert!(
        d.submitted as usize >= private_ops,
        "every private operation reaches the device: {} submitted for {private_ops} private ops",
        d.submitted
    );
    assert_eq!(d.completed_ok, d.submitted, "every request completed");
    assert_eq!(s1.misuse, 0, "kae used the UADK API wrongly");
    assert_eq!(
        s1.sessions_allocated, 4,
        "one session per key, not per operation"
    );
    assert!(c1.delta(&c0, "ops-private-offloaded") as usize >= private_ops);
    assert_eq!(c1.get("hw-faults"), 0);
    assert_eq!(
        c1.get("crt-faults"),
        0,
        "device results failed the fault check (recomputed on the CPU)"
    );

    // Sizes HPRE does not take stay on the CPU.
    let s2 = sim_stats();
    sign_and_decrypt_everything(1536);
    assert_eq!(
        sim_stats().submitted,
        s2.submitted,
        "a 1536-bit key went to HPRE"
    );
}

/// Jobs from several threads with several keys at once.
fn run_async_jobs(threads: u64, per_thread: u64) -> Vec<String> {
    let results: Vec<ThreadReport> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let _a = AsyncThread::init(2 * per_thread as usize);
                    let bits = if t % 2 == 0 { 2048 } else { 3072 };
                    let kp = keypair(bits);
                    let p = sig_params("pkcs1", None, None, None);
                    let mut ops = Vec::new();
                    let mut expected = Vec::new();
                    for j in 0..per_thread {
                        let msg = pattern(t * 1000 + j, 64);
                        expected.push(ok(
                            digest_sign(reference(), &kp.reference, Some("SHA256"), &p, &msg),
                            "reference",
                        ));
                        let r = Raw {
                            libctx: kae().ptr,
                            key: kp.kae.0,
                        };
                        ops.push(AsyncOp::new(format!("t{t}-j{j}"), move || {
                            raw_digest_sign(r, c"SHA256", c"provider=kae", &msg)
                        }));
                    }
                    let rep = drive(&mut ops, STALL)?;
                    let problems = check_outputs(ops.iter().zip(expected.iter().map(|e| &e[..])));
                    Ok((ops.len() as u64, rep.pauses, problems))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let (_, _, problems) = sum_thread_reports(results);
    problems
}

fn async_many() {
    keypair(2048);
    keypair(3072);
    let s0 = sim_stats();
    let c0 = counters(kae().prov);
    let problems = run_async_jobs(4, 48);
    assert!(problems.is_empty(), "{problems:#?}");
    // Public operations in async jobs go to the device too.
    let sim_stats_before_verify = sim_stats();
    let kp = keypair(2048);
    let p = sig_params("pkcs1", None, None, None);
    let msg = pattern(5, 80);
    let sig = ok(
        digest_sign(reference(), &kp.reference, Some("SHA256"), &p, &msg),
        "reference",
    );
    let _a = AsyncThread::init(8);
    let mut ops: Vec<AsyncOp> = (0..8)
        .map(|i| {
            let (r, msg, sig) = (
                Raw {
                    libctx: kae().ptr,
                    key: kp.kae.0,
                },
                msg.clone(),
                sig.clone(),
            );
            AsyncOp::new(format!("verify{i}"), move || {
                raw_digest_verify(r, c"SHA256", c"provider=kae", &msg, &sig)
            })
        })
        .collect();
    drive(&mut ops, STALL).unwrap();
    for op in &ops {
        assert_eq!(op.result(), Ok(vec![1]), "{}", op.name);
    }
    let s2 = sim_stats();
    assert!(
        s2.submitted >= sim_stats_before_verify.submitted + 8,
        "public operations in async jobs did not reach the device"
    );
    let s1 = sim_stats();
    let c1 = counters(kae().prov);
    println!("sim: {s1:?}; kae: {c1:?}");
    assert!(s1.submitted - s0.submitted >= 4 * 48);
    assert!(s1.max_in_flight > 1, "requests never overlapped");
    assert!(c1.delta(&c0, "async-pauses") > 0, "the jobs never paused");
    assert_eq!(s1.misuse, 0);
    if std::env::var("KAE_SIM_DEPTH").as_deref() == Ok("2") {
        assert!(s1.ebusy > 0, "a depth of 2 never filled");
        assert!(c1.delta(&c0, "queue-full-retries") > 0);
    }
    assert_eq!(c1.get("in-flight"), 0);
}

/// Injected device errors, wrong results and lost completions: every result is still right;
/// the counters show the failover.
fn faults() {
    keypair(2048);
    keypair(3072);
    let c0 = counters(kae().prov);
    let mut problems = Vec::new();
    // Rounds separated by more than the backend's rest after a fault, so each round meets
    // the device again.
    for _ in 0..3 {
        problems.extend(run_async_jobs(2, 24));
        for bits in [2048, 3072] {
            sign_and_decrypt_everything(bits);
        }
        std::thread::sleep(Duration::from_millis(1100));
    }
    assert!(problems.is_empty(), "{problems:#?}");
    let c1 = counters(kae().prov);
    let s = sim_stats();
    println!("sim: {s:?}; kae: {c1:?}");
    let injected = s.error_completions + s.dropped + s.wrong_results;
    assert!(injected > 0, "no fault was injected: {s:?}");
    assert!(c1.delta(&c0, "hw-faults") > 0 || s.wrong_results > 0);
    assert!(c1.delta(&c0, "fallbacks") > 0);
    if s.wrong_results > 0 {
        assert!(
            c1.delta(&c0, "crt-faults") > 0,
            "a wrong device result was not caught by the fault check"
        );
    }
    assert_eq!(s.misuse, 0);
}

fn isolation() {
    let s0 = sim_stats();
    for _ in 0..3 {
        sign_and_decrypt_everything(2048);
    }
    let s1 = sim_stats();
    let c = counters(kae().prov);
    println!("sim: {s1:?}; kae: {c:?}");
    assert!(c.get("hw-faults") > 0, "isolation was not noticed");
    // After the isolation kae stops sending: it rests, re-reads sysfs, sees the device
    // isolated and keeps resting.
    std::thread::sleep(Duration::from_millis(1100));
    let s2 = sim_stats();
    sign_and_decrypt_everything(2048);
    assert_eq!(
        sim_stats().submitted,
        s2.submitted,
        "requests still go to an isolated device"
    );
    assert!(s1.submitted > s0.submitted);
}

fn direct_sync() {
    let s0 = sim_stats();
    sign_and_decrypt_everything(2048);
    let s1 = sim_stats();
    println!("sim: {s1:?}");
    assert!(
        s1.sync_calls > s0.sync_calls,
        "hpre-sync = direct made no sync call"
    );
    assert_eq!(s1.misuse, 0);
}

fn no_device() {
    let c = counters(kae().prov);
    assert_eq!(c.backend, "cpu", "with no device auto must pick the CPU");
    sign_and_decrypt_everything(2048);
    assert_eq!(counters(kae().prov).get("hw-faults"), 0);
}

/// A pre-forking server: the parent used HPRE (sessions exist), the child must initialise UADK
/// again and make its own sessions, never touching the parent's.
fn fork_child() {
    sign_and_decrypt_everything(2048);
    let parent = sim_stats();
    assert_eq!(parent.init_calls, 1);
    // SAFETY: the child only signs through kae and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let r = std::panic::catch_unwind(|| {
            let problems = run_async_jobs(1, 16);
            assert!(problems.is_empty(), "{problems:#?}");
            sign_and_decrypt_everything(2048);
            let s = sim_stats();
            assert_eq!(s.misuse, 0, "the child used its parent's sessions");
            assert!(
                s.init_calls >= 2,
                "the child did not initialise UADK again: {s:?}"
            );
            assert!(s.submitted > parent.submitted);
        });
        // SAFETY: leaving the forked child without running the harness's exit path.
        unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
    }
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "the forked child failed ({st})"
    );
    // The parent goes on with its own sessions.
    sign_and_decrypt_everything(2048);
    assert_eq!(sim_stats().misuse, 0);
}

/// kae's pool around the HPRE backend on the simulator, driven directly (the provider is not
/// loaded): a 2048-bit key and an input below its modulus, for private requests.
struct DirectPool {
    cfg: kae::backend::hpre::settings::HpreConfig,
    key: std::sync::Arc<kae::rsa::RsaKey>,
    input: Vec<u8>,
}

impl DirectPool {
    fn new(timeout_ms: u64) -> DirectPool {
        let lib = sim_lib().to_string_lossy().into_owned();
        let key = std::sync::Arc::new(
            kae::rsa::ops::generate(
                kae::rsa::KeyType::Rsa,
                2048,
                &kae::ffi::bn::BigNum::from_u64(65537).unwrap(),
            )
            .unwrap(),
        );
        let mut input = vec![3u8; key.size()];
        input[0] = 0;
        DirectPool {
            cfg: kae::backend::hpre::settings::HpreConfig {
                wd_lib: lib.clone(),
                crypto_lib: lib,
                timeout_ms,
                ..Default::default()
            },
            key,
            input,
        }
    }

    fn start(&self) -> std::sync::Arc<kae::pool::Pool> {
        let backend = kae::backend::hpre::backend::start(&self.cfg).expect("start");
        kae::pool::Pool::start_with(
            Box::new(backend),
            std::sync::Arc::new(kae::pool::Completer::new()),
        )
        .unwrap()
    }

    /// Submits `n` private requests waking this thread; each one's waiter and whether the
    /// pool took it.
    fn submit(
        &self,
        pool: &kae::pool::Pool,
        n: usize,
    ) -> Vec<(std::sync::Arc<kae::pool::Waiter>, bool)> {
        use kae::pool::{Waiter, WaiterWake};
        let me = std::thread::current();
        (0..n)
            .map(|_| {
                let w = std::sync::Arc::new(Waiter::new(Some(WaiterWake::Thread(me.clone()))));
                let req = kae::backend::Request::new(
                    kae::backend::OpKind::PrivateBlinded,
                    self.key.clone(),
                    &self.input,
                    w.clone(),
                );
                let taken = pool.submit(req).is_ok();
                (w, taken)
            })
            .collect()
    }
}

/// Parks until every waiter is done or `STALL` passed; whether all are done.
fn all_answered(waiters: &[(std::sync::Arc<kae::pool::Waiter>, bool)]) -> bool {
    let t = std::time::Instant::now();
    while !waiters.iter().all(|(w, _)| w.is_done()) && t.elapsed() < STALL {
        std::thread::park_timeout(Duration::from_millis(5));
    }
    waiters.iter().all(|(w, _)| w.is_done())
}

/// Stopping the backend with requests in flight (some of which the device never completes):
/// every waiter gets an answer, UADK is torn down, and a new start works. Drives kae's pool
/// directly (the provider is not loaded in this process).
fn teardown() {
    let direct = DirectPool::new(300);
    for round in 1..=3u64 {
        let pool = direct.start();
        let waiters = direct.submit(&pool, 32);
        assert!(
            waiters.iter().all(|(_, taken)| *taken),
            "the simulator's queue is deep enough"
        );
        assert!(
            sim_stats().in_flight > 0,
            "nothing was in flight at teardown"
        );
        let t = std::time::Instant::now();
        pool.shutdown();
        println!("round {round}: shutdown took {:?}", t.elapsed());
        assert!(t.elapsed() < Duration::from_secs(5));
        for (w, _) in &waiters {
            assert!(w.is_done(), "a request was never answered");
        }
        let s = sim_stats();
        println!("sim: {s:?}");
        assert_eq!(s.uninit_calls, round, "UADK was not torn down");
        assert_eq!(s.in_flight, 0);
        assert_eq!(s.misuse, 0);
    }
}

/// A submission that UADK refuses only after kae's timeout scan already failed the request
/// over (`KAE_SIM_SLOW_REFUSAL_MS` above the timeout): the request is answered once, the
/// in-flight count comes back to 0 (it was decremented twice, wrapped, and the stop waited for
/// it forever), and the pool stops.
fn late_refusal() {
    let direct = DirectPool::new(20);
    let pool = direct.start();
    let waiters = direct.submit(&pool, 2);
    assert!(all_answered(&waiters), "a request was never answered");
    std::thread::sleep(Duration::from_millis(300)); // the late refusals come back
    let t = std::time::Instant::now();
    let stopper = std::thread::spawn(move || pool.shutdown());
    while !stopper.is_finished() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        stopper.is_finished(),
        "the pool did not stop: its in-flight count never came back to 0"
    );
    println!("late refusal: stopped in {:?}", t.elapsed());
    let s = sim_stats();
    println!("sim: {s:?}");
    assert_eq!(s.misuse, 0);
}

/// Requests that time out (failed over) and complete later, with no new work arriving: the
/// poller keeps polling for them, so their completions are collected (and their buffers freed)
/// instead of waiting for the next request or for teardown.
fn late_completions() {
    let direct = DirectPool::new(10);
    let pool = direct.start();
    let waiters = direct.submit(&pool, 4);
    assert!(waiters.iter().all(|(_, taken)| *taken));
    assert!(all_answered(&waiters), "a request was never answered");
    // The device answers 60 ms after each submission; nothing new is submitted.
    std::thread::sleep(Duration::from_millis(400));
    let s = sim_stats();
    println!("sim: {s:?}");
    assert!(s.submitted >= 4, "{s:?}");
    assert_eq!(
        s.callbacks, s.submitted,
        "late completions were not polled while no request was in flight"
    );
    assert_eq!(s.in_flight, 0);
    pool.shutdown();
    assert_eq!(sim_stats().misuse, 0);
}

#[test]
fn late_completions_are_collected_without_new_work() {
    scenario(
        "late-completions",
        &[("KAE_SIM_LATENCY_US", "60000")],
        &one_device(),
    );
}

#[test]
fn a_refusal_after_the_timeout_is_counted_once() {
    scenario(
        "late-refusal",
        &[("KAE_SIM_SLOW_REFUSAL_MS", "150")],
        &one_device(),
    );
}

#[test]
fn teardown_with_requests_in_flight() {
    scenario(
        "teardown",
        &[("KAE_SIM_LATENCY_US", "50000"), ("KAE_SIM_DROP_EVERY", "4")],
        &one_device(),
    );
}

#[test]
fn every_padding_and_hardware_key_size_matches_the_default_provider() {
    scenario("correctness", &[], &one_device());
}

#[test]
fn many_async_jobs_from_several_threads() {
    scenario("async", &[("KAE_SIM_LATENCY_US", "200")], &one_device());
}

#[test]
fn a_full_queue_pauses_and_retries() {
    scenario(
        "async",
        &[
            ("KAE_SIM_DEPTH", "2"),
            ("KAE_HPRE_QUEUES", "1"),
            ("KAE_SIM_LATENCY_US", "300"),
        ],
        &one_device(),
    );
}

#[test]
fn device_errors_wrong_results_and_lost_completions_are_redone_on_the_cpu() {
    scenario(
        "faults",
        &[
            ("KAE_SIM_ERROR_EVERY", "7"),
            ("KAE_SIM_WRONG_EVERY", "11"),
            ("KAE_SIM_DROP_EVERY", "13"),
            ("KAE_HPRE_TIMEOUT_MS", "100"),
            ("KAE_SIM_LATENCY_US", "100"),
        ],
        &one_device(),
    );
}

#[test]
fn an_isolated_device_is_left_alone() {
    scenario(
        "isolation",
        &[("KAE_SIM_ISOLATE_AFTER", "10")],
        &one_device(),
    );
}

#[test]
fn a_forked_child_initialises_its_own_uadk() {
    scenario("fork", &[("KAE_SIM_LATENCY_US", "100")], &one_device());
}

/// hpre-sync = direct, and UADK's sync call gives up while the device still holds the request
/// (it writes the result 100 ms later): the operation is redone on the CPU, and kae keeps the
/// buffers until UADK is torn down, so the late write lands in memory kae still owns. Run
/// under valgrind, which reports a write into freed memory (it did before the fix).
fn direct_give_up() {
    let s0 = sim_stats();
    let kp = keypair(2048);
    let p = sig_params("pkcs1", None, None, None);
    let msg = pattern(2048, 100);
    let sig = ok(
        digest_sign(kae(), &kp.kae, Some("SHA256"), &p, &msg),
        "kae sign",
    );
    let want = ok(
        digest_sign(reference(), &kp.reference, Some("SHA256"), &p, &msg),
        "reference sign",
    );
    assert_eq!(sig, want, "the CPU redo gave another signature");
    std::thread::sleep(Duration::from_millis(400)); // the late write happens now
    let s1 = sim_stats();
    println!("sim: {s1:?}");
    assert!(s1.sync_calls > s0.sync_calls, "no sync call was made");
}

#[test]
fn a_sync_call_that_gives_up_leaves_the_buffers_to_the_device() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is missing (CI installs it)"
        );
        eprintln!("SKIPPED: valgrind is not installed");
        return;
    }
    scenario_under(
        &[
            "valgrind",
            "--quiet",
            "--error-exitcode=99",
            "--errors-for-leak-kinds=none",
        ],
        "direct-give-up",
        &[
            ("KAE_HPRE_SYNC", "direct"),
            ("KAE_SIM_SYNC_GIVE_UP_MS", "100"),
        ],
        &one_device(),
    );
}

#[test]
fn direct_sync_mode_uses_wd_do_rsa_sync() {
    scenario("direct", &[("KAE_HPRE_SYNC", "direct")], &one_device());
}

#[test]
fn auto_without_a_device_runs_on_the_cpu() {
    // multibuffer = no: on an AVX-512 IFMA machine auto would otherwise pick mb after HPRE.
    let auto = [("KAE_BACKEND", "auto"), ("KAE_MULTIBUFFER", "no")];
    scenario("no-device", &auto, &[]);
    scenario(
        "no-device",
        &auto,
        &[FakeDevice {
            isolate: true,
            ..FakeDevice::default()
        }],
    );
}

/// `backend = hpre` without a device: one warning and the CPU; with `strict = yes` kae refuses
/// to load and says why.
#[test]
fn hpre_without_a_device_warns_or_with_strict_refuses() {
    let dir = TempDir::new("hpre-strict");
    let empty = dir.join("sysfs");
    std::fs::create_dir_all(&empty).unwrap();
    let modules = dir.provider_dir();
    let list = |strict: &str| {
        let mut cmd = Command::new(openssl_bin());
        cmd.args(["list", "-providers", "-provider-path"])
            .arg(&modules)
            .args(["-provider", "kae"])
            .env("KAE_BACKEND", "hpre")
            .env("KAE_HPRE_SYSFS", &empty)
            .env("KAE_STRICT", strict)
            .env_remove("OPENSSL_CONF");
        run(&mut cmd, None, Duration::from_secs(60))
    };
    let warned = list("no");
    assert!(warned.status.success(), "{}", warned.describe());
    assert!(
        warned
            .stderr
            .contains("backend = hpre, but no HPRE device under"),
        "{}",
        warned.describe()
    );
    let refused = list("yes");
    assert!(!refused.status.success(), "{}", refused.describe());
    assert!(
        refused.stderr.contains("strict = yes") && refused.stderr.contains("kae is NOT loaded"),
        "{}",
        refused.describe()
    );
}
