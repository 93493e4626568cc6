//! What kae itself costs per HPRE operation, measured against the UADK simulator
//! (`hpre-sim`, test-only) in its no-arithmetic mode (`KAE_SIM_COMPUTE=0`, the device copies
//! its input), so only kae's share is on the clock: submission, UADK poll, callback, completion
//! and the wake-up of the waiting thread.
//!
//! 1. Zero device latency, one request at a time: round-trip latency p50/p99, and the CPU time
//!    of the application thread plus the poller per operation (target p50 ≤ 5 µs).
//! 2. Zero latency, 64 requests in flight from one thread: CPU µs per operation.
//! 3. 150 µs device latency (`KAE_HPRE_BENCH_LATENCY_US`), 64 in flight from one thread:
//!    throughput against the ceiling in-flight / latency, and the poller's CPU share.
//! 4. Idle: the poller's CPU time over one second with nothing in flight.
//!
//! `KAE_HPRE_POLL_US` sets the poller's pause (default 20 µs), as the config key does.
//!
//! Run: `cargo bench --bench hpre_cost` (needs `cargo build --release --workspace` first for
//! `target/release/libkae_hpre_sim.so`; `KAE_HPRE_SIM_LIB` overrides the path).

use kae::backend::hpre::backend as hpre;
use kae::completion::{Completer, Waiter, WaiterWake};
use kae::completion::{OpKind, Request};
use kae::ffi::bn::BigNum;
use kae::offload::{run_blocking, Offloader};
use kae::rsa::{ops, KeyType, RsaKey};
use kae::settings::hpre::HpreConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sim_lib() -> PathBuf {
    if let Some(p) = std::env::var_os("KAE_HPRE_SIM_LIB") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let lib = dir.join("libkae_hpre_sim.so");
    assert!(
        lib.exists(),
        "{} missing: run `cargo build --release --workspace` first",
        lib.display()
    );
    lib
}

/// CPU time (ns) of this process's threads whose name starts with `prefix`.
fn thread_cpu_ns(prefix: &str) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.trim().starts_with(prefix) {
            continue;
        }
        let s = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        total += s
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// CPU time (ns) of the calling thread.
fn own_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn start(latency_us: u64) -> Arc<Offloader> {
    std::env::set_var("KAE_SIM", "1");
    std::env::set_var("KAE_SIM_COMPUTE", "0");
    // An instantaneous device (no simulator thread between submit and completion).
    std::env::set_var("KAE_SIM_DEVICE_THREADS", "0");
    std::env::set_var("KAE_SIM_LATENCY_US", latency_us.to_string());
    let lib = sim_lib().to_string_lossy().into_owned();
    let cfg = HpreConfig {
        wd_lib: lib.clone(),
        crypto_lib: lib,
        // The poller's pause between empty polls (the `hpre-poll-us` setting).
        poll_us: std::env::var("KAE_HPRE_POLL_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(HpreConfig::default().poll_us),
        ..HpreConfig::default()
    };
    let b = hpre::start(&cfg).expect("the simulator starts");
    Offloader::start_with(Box::new(b), Arc::new(Completer::new())).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e6
}

/// Keeps `depth` requests in flight from this thread for `dur`; returns operations done.
fn keep_in_flight(
    pool: &Offloader,
    key: &Arc<RsaKey>,
    input: &[u8],
    depth: usize,
    dur: Duration,
) -> u64 {
    let me = std::thread::current();
    let submit = |w: &Arc<Waiter>| {
        let mut req = Request::new(OpKind::ExponentiateBlinded, key.clone(), input, w.clone());
        loop {
            match pool.submit(req) {
                Ok(()) => return,
                Err(back) => {
                    req = back;
                    std::thread::yield_now();
                }
            }
        }
    };
    let mut waiters: Vec<Arc<Waiter>> = (0..depth)
        .map(|_| Arc::new(Waiter::new(Some(WaiterWake::Thread(me.clone())))))
        .collect();
    for w in &waiters {
        submit(w);
    }
    let end = Instant::now() + dur;
    let mut done = 0u64;
    while Instant::now() < end {
        std::thread::park_timeout(Duration::from_millis(5));
        for w in waiters.iter_mut() {
            if w.is_done() {
                w.take().unwrap().result.unwrap();
                done += 1;
                *w = Arc::new(Waiter::new(Some(WaiterWake::Thread(me.clone()))));
                submit(w);
            }
        }
    }
    for w in &waiters {
        w.block_until_done();
    }
    done
}

fn main() {
    // Criterion passes --bench; this program takes no options.
    let key =
        Arc::new(ops::generate(KeyType::Rsa, 2048, &BigNum::from_u64(65537).unwrap()).unwrap());
    let mut input = vec![7u8; key.size()];
    input[0] = 0;
    let mut out = vec![0u8; key.size()];

    // 1. One at a time, zero latency.
    let pool = start(0);
    for _ in 0..2000 {
        run_blocking(&pool, OpKind::ExponentiateBlinded, &key, &input, &mut out).unwrap();
    }
    assert_eq!(out, input, "the simulator echoes in no-arithmetic mode");
    let rounds = 50_000;
    let (app0, poll0) = (own_cpu_ns(), thread_cpu_ns("kae-poller"));
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        run_blocking(&pool, OpKind::ExponentiateBlinded, &key, &input, &mut out).unwrap();
        lat.push(t.elapsed());
    }
    let cpu = (own_cpu_ns() - app0 + thread_cpu_ns("kae-poller") - poll0) as f64 / rounds as f64;
    lat.sort();
    println!(
        "hpre (simulator, 0 µs, one at a time), {rounds} ops: round trip p50 {:.2} µs, p99 {:.2} µs; CPU (application + poller) {:.2} µs/op",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        cpu / 1000.0
    );

    // 2. 64 in flight, zero latency.
    let (app0, poll0) = (own_cpu_ns(), thread_cpu_ns("kae-poller"));
    let n = keep_in_flight(&pool, &key, &input, 64, Duration::from_secs(2));
    let cpu = (own_cpu_ns() - app0 + thread_cpu_ns("kae-poller") - poll0) as f64 / n as f64;
    println!(
        "hpre (simulator, 0 µs, 64 in flight), {n} ops in 2 s: {:.0} ops/s; CPU (application + poller) {:.2} µs/op",
        n as f64 / 2.0,
        cpu / 1000.0
    );
    pool.shutdown();

    // 3. 150 µs latency, 64 in flight.
    let lat_us: u64 = std::env::var("KAE_HPRE_BENCH_LATENCY_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let pool = start(lat_us);
    let secs = 3.0;
    let (w0, poll0) = (Instant::now(), thread_cpu_ns("kae-poller"));
    let n = keep_in_flight(&pool, &key, &input, 64, Duration::from_secs_f64(secs));
    let wall = w0.elapsed().as_secs_f64();
    let poller = (thread_cpu_ns("kae-poller") - poll0) as f64 / 1e9 / wall;
    let ceiling = 64.0 / (lat_us as f64 / 1e6);
    println!(
        "hpre (simulator, {lat_us} µs, 64 in flight from one thread): {:.0} ops/s = {:.0}% of the ceiling 64/{lat_us} µs = {ceiling:.0} ops/s; poller CPU {:.1}% of one core",
        n as f64 / wall,
        100.0 * n as f64 / wall / ceiling,
        100.0 * poller
    );

    // 4. Idle.
    std::thread::sleep(Duration::from_millis(100));
    let poll0 = thread_cpu_ns("kae-poller");
    std::thread::sleep(Duration::from_secs(1));
    println!(
        "hpre idle for 1 s: poller CPU {:.3} ms",
        (thread_cpu_ns("kae-poller") - poll0) as f64 / 1e6
    );
    pool.shutdown();
}
