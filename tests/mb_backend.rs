//! The multi-buffer backend through the provider: async jobs from several threads signing
//! with several keys, checked against OpenSSL's default provider; batches on one CPU (the job
//! that fills a call computes it; the flusher takes the rest once the application thread
//! waits); a busy loop on every CPU beside the jobs; partial batches and lone requests (scalar
//! code); a corrupted lane caught by the fault check; the backend turned off; and what
//! `backend = mb` does without IFMA.
//!
//! This machine may lack AVX-512 IFMA, so the scenarios run the backend on the portable
//! engine (`KAE_MB_ENGINE=portable`): the same batching, lanes, recombination and checks, with
//! the kernel's arithmetic on plain u64s. Only a test build of the module honours that setting
//! and the fault lane (`common::test_knobs_module`); one scenario shows that the module built
//! for use ignores both. kae reads its settings when the provider loads, so each scenario runs
//! in a process of its own (`child`).

mod async_support;
mod common;
mod procs;

use async_support::*;
use common::*;
use procs::{run, Output};
use std::process::Command;
use std::time::Duration;

const SCENARIO: &str = "KAE_MB_TEST_SCENARIO";
const STALL: Duration = Duration::from_secs(60);

/// Runs `name` in a child process on the module built for use, with `settings`.
fn scenario(name: &str, settings: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
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
    cmd.env(SCENARIO, name).env("KAE_STATS", "no");
    for (k, v) in settings {
        cmd.env(k, v);
    }
    let out = run(&mut cmd, None, Duration::from_secs(900));
    assert!(
        out.status.success() && out.stdout.contains(&format!("SCENARIO {name} PASSED")),
        "scenario {name} failed\n{}",
        out.describe()
    );
    for l in out.stdout.lines().filter(|l| l.starts_with("mb:")) {
        eprintln!("[{name}] {l}");
    }
    out
}

/// Runs `name` in a child process on the test build of the module, with `settings`.
fn test_build_scenario(name: &str, settings: &[(&str, &str)]) -> Output {
    let mut s = settings.to_vec();
    s.push(("KAE_MODULE", test_knobs_module()));
    s.push((TEST_BUILD, "1"));
    scenario(name, &s)
}

/// Set in a child that must run on the test build (it checks the module's buildinfo).
const TEST_BUILD: &str = "KAE_MB_TEST_BUILD";

const PORTABLE: [(&str, &str); 3] = [
    ("KAE_BACKEND", "mb"),
    ("KAE_MB_ENGINE", "portable"),
    ("KAE_ASYNC", "yes"),
];

#[test]
#[ignore = "started by the other tests, in a process of its own"]
fn child() {
    let Ok(name) = std::env::var(SCENARIO) else {
        return;
    };
    let info = kae().provider_utf8_param("buildinfo").unwrap_or_default();
    assert_eq!(
        info.contains("TEST BUILD"),
        std::env::var_os(TEST_BUILD).is_some(),
        "scenario {name} runs on the wrong build of the module: {info}"
    );
    match name.as_str() {
        "threads" => threads(),
        "one-cpu" => one_cpu(),
        "fault" => fault(),
        "busy" => busy_neighbours(),
        "off" => off(),
        "named" => named_without_portable(),
        other => panic!("unknown scenario {other}"),
    }
    println!("SCENARIO {name} PASSED");
}

/// `jobs` async signatures with `kp` from this thread, all in flight together; returns the
/// problems (each compared with the default provider's signature).
fn sign_jobs(kp: &KeyPair, tag: u64, jobs: u64) -> Vec<String> {
    let _a = AsyncThread::init(jobs as usize);
    let p = sig_params("pkcs1", None, None, None);
    let mut ops = Vec::new();
    let mut expected = Vec::new();
    for j in 0..jobs {
        let msg = pattern(tag * 1000 + j, 64);
        expected.push(ok(
            digest_sign(reference(), &kp.reference, Some("SHA256"), &p, &msg),
            "reference",
        ));
        let r = Raw {
            libctx: kae().ptr,
            key: kp.kae.0,
        };
        ops.push(AsyncOp::new(format!("k{tag}-j{j}"), move || {
            raw_digest_sign(r, c"SHA256", c"provider=kae", &msg)
        }));
    }
    if let Err(e) = drive(&mut ops, STALL) {
        return vec![e];
    }
    check_outputs(ops.iter().zip(expected.iter().map(|e| &e[..])))
}

fn mb_counts(c: &Counters, c0: &Counters) -> (u64, u64, u64) {
    (
        c.delta(c0, "mb-batches"),
        c.delta(c0, "mb-lanes"),
        c.delta(c0, "mb-scalar"),
    )
}

/// Four threads, two key sizes and four keys, jobs in flight together from every thread.
fn threads() {
    let keys = [keypair(2048), keypair(3072)];
    let c0 = counters(kae().prov);
    assert_eq!(c0.backend, "mb", "kae runs on {}", c0.backend);
    let problems: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let kp = &keys[(t % 2) as usize];
                s.spawn(move || sign_jobs(kp, t, 16))
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| vec!["thread panicked".into()]))
            .collect()
    });
    assert!(problems.is_empty(), "{problems:#?}");
    let c1 = counters(kae().prov);
    let (batches, lanes, scalar) = mb_counts(&c1, &c0);
    println!("mb: 64 jobs: {batches} kernel calls, {lanes} lanes, {scalar} scalar; {c1:?}");
    assert!(batches > 0, "no kernel call");
    assert_eq!(
        lanes + 2 * scalar,
        2 * 64,
        "every request is 2 lanes or 1 scalar op"
    );
    assert!(
        lanes as f64 / batches as f64 > 2.0,
        "batches never held more than one request"
    );
    // A request that comes alone after others did may be computed inline (solo mode).
    let offloaded = c1.delta(&c0, "ops-private-offloaded");
    assert_eq!(offloaded + c1.delta(&c0, "ops-private-inline"), 64);
    assert!(offloaded >= 58, "only {offloaded} of 64 requests gathered");
    assert!(
        3 * lanes >= 2 * 2 * 64,
        "fewer than two thirds of the requests went through the kernel"
    );
    assert_eq!(c1.get("crt-faults"), 0, "a lane failed the fault check");
    assert_eq!(c1.get("in-flight"), 0);
}

/// Pins this process to one CPU: the flusher then shares it with the application thread, and
/// takes a partial batch only once that thread waits for its jobs.
fn pin_to_one_cpu() {
    kae::ffi::sched::pin_current_thread_to_one_cpu().expect("pin to one CPU");
}

/// One CPU, `async = auto`: async jobs still go to the backend, and batches hold the jobs in
/// flight: 1 or 2 jobs of RSA-2048 are computed by the scalar code (too few for a kernel call);
/// on an otherwise idle CPU 3 and 4 take one call (6 and 8 lanes), 8 take two, 5 take one and
/// the fifth goes scalar (a call for one RSA-2048 request costs more than the request), 2 of
/// RSA-4096 one call and 6 two. On a loaded machine the flusher can take a partial batch early
/// (at most 2 ms after its first job), so the test demands exact counts for the lone cases, every request
/// accounted for (2 lanes or 1 scalar operation) in each case, and most requests batched over
/// all cases.
fn one_cpu() {
    pin_to_one_cpu();
    let k2048 = keypair(2048);
    let k4096 = keypair(4096);
    let mut c0 = counters(kae().prov);
    assert_eq!(c0.backend, "mb");
    let (mut batched_lanes, mut batchable_lanes, mut exact) = (0, 0, 0);
    for (kp, jobs, want) in [
        (&k2048, 1u64, (0u64, 0u64, 1u64)),
        (&k2048, 2, (0, 0, 2)),
        (&k2048, 3, (1, 6, 0)),
        (&k2048, 4, (1, 8, 0)),
        (&k2048, 8, (2, 16, 0)),
        (&k2048, 5, (1, 8, 1)),
        (&k4096, 2, (1, 4, 0)),
        (&k4096, 6, (2, 12, 0)),
    ] {
        let problems = sign_jobs(kp, jobs, jobs);
        assert!(problems.is_empty(), "{problems:#?}");
        let c1 = counters(kae().prov);
        let got = mb_counts(&c1, &c0);
        println!(
            "mb: {} bits, {jobs} jobs on one CPU: (calls, lanes, scalar) = {got:?}",
            kp.kae.size() * 8
        );
        let (_, lanes, scalar) = got;
        assert_eq!(
            lanes + 2 * scalar,
            2 * jobs,
            "{jobs} jobs: every request accounted for"
        );
        if want.0 == 0 {
            assert_eq!(got, want, "{jobs} jobs of {} bits", kp.kae.size() * 8);
        } else {
            batched_lanes += lanes;
            batchable_lanes += 2 * jobs;
            exact += u64::from(got == want);
        }
        assert_eq!(c1.delta(&c0, "ops-private-offloaded"), jobs);
        c0 = c1;
    }
    println!(
        "mb: one CPU: {batched_lanes} of {batchable_lanes} lanes batched; {exact} of 6 cases exact"
    );
    assert!(
        2 * batched_lanes >= batchable_lanes,
        "on one CPU most requests must be batched: {batched_lanes} of {batchable_lanes} lanes"
    );
    assert_eq!(c0.get("crt-faults"), 0);
}

/// Lane 2 of every kernel call is corrupted (test knob): the fault check catches each bad
/// result and recomputes it, so every signature is still right and crt-faults counts them.
fn fault() {
    let kp = keypair(2048);
    let c0 = counters(kae().prov);
    let problems = sign_jobs(&kp, 1, 16);
    assert!(problems.is_empty(), "{problems:#?}");
    let c1 = counters(kae().prov);
    let (batches, _, _) = mb_counts(&c1, &c0);
    println!(
        "mb: fault lane 2: {batches} calls, {} crt-faults",
        c1.delta(&c0, "crt-faults")
    );
    assert!(batches > 0);
    assert!(
        c1.delta(&c0, "crt-faults") > 0,
        "a corrupted lane was not caught by the fault check"
    );
}

/// A CPU-bound thread of ordinary priority on every CPU for the whole run: batches must still
/// be computed (by the request that fills them, or the flusher within its bounded delay). The
/// idle-priority workers this replaced got almost no CPU here (minutes per batch).
fn busy_neighbours() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let kp = keypair(2048);
    let c0 = counters(kae().prov);
    let stop = AtomicBool::new(false);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (problems, took) = std::thread::scope(|s| {
        for _ in 0..cpus {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let t = std::time::Instant::now();
        let mut problems = Vec::new();
        // 8 jobs fill two calls; 6 leave a partial one for the flusher; 2 go scalar.
        for (round, jobs) in [8u64, 6, 2, 8].into_iter().enumerate() {
            problems.extend(sign_jobs(&kp, round as u64, jobs));
        }
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        (problems, took)
    });
    assert!(problems.is_empty(), "{problems:#?}");
    let c1 = counters(kae().prov);
    let (batches, lanes, scalar) = mb_counts(&c1, &c0);
    println!(
        "mb: busy neighbours on {cpus} CPUs: 24 jobs in {took:?}: {batches} calls, {lanes} lanes, \
         {scalar} scalar"
    );
    assert_eq!(lanes + 2 * scalar, 2 * 24, "every request accounted for");
    assert!(batches > 0, "no kernel call");
    // A starved worker takes minutes; the flusher's bounded delay is milliseconds.
    assert!(
        took < std::time::Duration::from_secs(40),
        "24 jobs took {took:?} beside busy neighbours"
    );
}

/// `multibuffer = no`: `backend = auto` does not pick it, even where it could run.
fn off() {
    let c = counters(kae().prov);
    assert_ne!(c.backend, "mb");
    let kp = keypair(2048);
    let problems = sign_jobs(&kp, 1, 4);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(mb_counts(&counters(kae().prov), &c), (0, 0, 0));
}

/// `backend = mb` without the portable engine: IFMA machines run it, others fall back to the
/// CPU backend.
fn named_without_portable() {
    let c = counters(kae().prov);
    let kp = keypair(2048);
    let problems = sign_jobs(&kp, 1, 8);
    assert!(problems.is_empty(), "{problems:#?}");
    if kae::mb::ifma_available() {
        assert_eq!(c.backend, "mb");
    } else {
        assert_eq!(c.backend, "cpu");
        assert_eq!(mb_counts(&counters(kae().prov), &c), (0, 0, 0));
    }
}

#[test]
fn async_jobs_from_several_threads_and_keys_match_the_default_provider() {
    test_build_scenario("threads", &PORTABLE);
}

#[test]
fn on_one_cpu_batches_hold_the_jobs_in_flight_and_lone_requests_go_scalar() {
    let mut s = PORTABLE.to_vec();
    s[2] = ("KAE_ASYNC", "auto");
    test_build_scenario("one-cpu", &s);
}

#[test]
fn busy_neighbours_on_every_cpu_do_not_starve_the_batches() {
    test_build_scenario("busy", &PORTABLE);
}

#[test]
fn a_corrupted_lane_is_caught_by_the_fault_check() {
    let mut s = PORTABLE.to_vec();
    s.push(("KAE_MB_FAULT_LANE", "2"));
    test_build_scenario("fault", &s);
}

#[test]
fn multibuffer_no_keeps_auto_off_the_backend() {
    test_build_scenario(
        "off",
        &[
            ("KAE_BACKEND", "auto"),
            ("KAE_MULTIBUFFER", "no"),
            ("KAE_MB_ENGINE", "portable"),
            ("KAE_ASYNC", "yes"),
        ],
    );
}

#[test]
fn backend_mb_without_ifma_warns_and_runs_on_the_cpu() {
    let out = scenario(
        "named",
        &[
            ("KAE_BACKEND", "mb"),
            ("KAE_ASYNC", "yes"),
            ("KAE_LOG", "warn"),
        ],
    );
    if !kae::mb::ifma_available() {
        assert!(
            out.stderr.contains("AVX-512"),
            "the warning must say why mb cannot run:\n{}",
            out.describe()
        );
    }
}

/// The module built for use reads neither test setting: it names them as ignored, and the
/// backend does not run on the portable engine (without IFMA the CPU runs the requests).
#[test]
fn a_build_for_use_ignores_the_test_settings() {
    let out = scenario(
        "named",
        &[
            ("KAE_BACKEND", "mb"),
            ("KAE_MB_ENGINE", "portable"),
            ("KAE_MB_FAULT_LANE", "2"),
            ("KAE_ASYNC", "yes"),
            ("KAE_LOG", "warn"),
        ],
    );
    for name in ["KAE_MB_ENGINE", "KAE_MB_FAULT_LANE"] {
        assert!(
            out.stderr
                .contains(&format!("{name} is a test setting, ignored")),
            "no warning that {name} is ignored:\n{}",
            out.describe()
        );
    }
    assert!(
        !out.stderr.contains("PORTABLE engine"),
        "the portable engine ran:\n{}",
        out.describe()
    );
}
