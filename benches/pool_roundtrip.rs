//! Queue round trip (submit → worker → poller → wake) with a backend that does no arithmetic:
//! the cost the pool adds to every offloaded operation. Prints p50/p99 over many round trips
//! (target p50 ≤ 5 µs), then a criterion measurement of the same loop.

use criterion::Criterion;
use kae::completion::{OpKind, Request};
use kae::ffi::bn::BigNum;
use kae::offload::{run_blocking, Offloader};
use kae::rsa::{ops, KeyType};
use kae::settings::OffloadConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn echo(r: &mut Request) {
    let n = r.input.len();
    r.output[..n].copy_from_slice(&r.input);
    r.result = Ok(());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let key =
        Arc::new(ops::generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap()).unwrap());
    let cfg = OffloadConfig {
        queues: 1,
        depth: 64,
        ..OffloadConfig::default()
    };
    let pool = Offloader::start_cpu(&cfg, echo).unwrap();
    let mut input = vec![7u8; key.size()];
    input[0] = 0;
    let mut out = vec![0u8; key.size()];

    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    for _ in 0..1000 {
        run_blocking(&pool, OpKind::Private, &key, &input, &mut out).unwrap();
    }
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        run_blocking(&pool, OpKind::Private, &key, &input, &mut out).unwrap();
        lat.push(t.elapsed());
    }
    assert_eq!(out, input);
    lat.sort();
    println!(
        "pool round trip (no arithmetic), {rounds} rounds: p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs, max {:.2} µs",
        percentile(&lat, 0.50).as_secs_f64() * 1e6,
        percentile(&lat, 0.90).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        lat.last().unwrap().as_secs_f64() * 1e6
    );

    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3));
    c.bench_function("pool_round_trip_no_arith", |b| {
        b.iter(|| run_blocking(&pool, OpKind::Private, &key, &input, &mut out).unwrap())
    });
    c.final_summary();
    pool.shutdown();
}
