//! EVP-level RSA throughput, default provider vs kae, on the same keys.
//!
//! Groups are `rsa<bits>/<operation>` with one entry per provider, so criterion's report shows
//! them side by side.  Each iteration is a complete EVP operation as an application performs
//! it (context creation, init, parameters, operation).
//!
//! Run with `cargo bench --bench rsa_evp`; the kae module is found next to the bench binary
//! (target/release/libkae.so) or taken from `KAE_MODULE`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

fn bench_rsa(c: &mut Criterion) {
    let msg = pattern(1, 256);
    for bits in [2048u32, 4096] {
        let kp = keypair(bits);
        let libs = [reference(), kae()];
        let pkcs1 = sig_params("pkcs1", None, None, None);
        let oaep = Enc::oaep("SHA256", "SHA256", None).params();

        // Sanity: both providers agree before we time anything.
        let sig = ok(
            digest_sign(reference(), &kp.reference, Some("SHA256"), &pkcs1, &msg),
            "reference sign",
        );
        let sig_kae = ok(
            digest_sign(kae(), &kp.kae, Some("SHA256"), &pkcs1, &msg),
            "kae sign",
        );
        assert_eq!(sig, sig_kae, "providers disagree on a PKCS#1 signature");
        let ct = ok(
            encrypt(reference(), &kp.reference, &oaep, &msg[..32]),
            "encrypt",
        );
        assert_eq!(
            ok(decrypt(kae(), &kp.kae, &oaep, &ct), "kae decrypt"),
            &msg[..32]
        );

        let mut g = c.benchmark_group(format!("rsa{bits}/sign-pkcs1-sha256"));
        g.throughput(Throughput::Elements(1));
        for lib in libs {
            let key = kp.key(lib);
            g.bench_function(BenchmarkId::from_parameter(lib.label), |b| {
                b.iter(|| {
                    black_box(
                        digest_sign(lib, key, Some("SHA256"), &pkcs1, black_box(&msg)).unwrap(),
                    )
                })
            });
        }
        g.finish();

        let mut g = c.benchmark_group(format!("rsa{bits}/verify-pkcs1-sha256"));
        g.throughput(Throughput::Elements(1));
        for lib in libs {
            let key = kp.key(lib);
            g.bench_function(BenchmarkId::from_parameter(lib.label), |b| {
                b.iter(|| {
                    digest_verify(
                        lib,
                        key,
                        Some("SHA256"),
                        &pkcs1,
                        black_box(&msg),
                        black_box(&sig),
                    )
                    .unwrap()
                })
            });
        }
        g.finish();

        let mut g = c.benchmark_group(format!("rsa{bits}/decrypt-oaep-sha256"));
        g.throughput(Throughput::Elements(1));
        for lib in libs {
            let key = kp.key(lib);
            g.bench_function(BenchmarkId::from_parameter(lib.label), |b| {
                b.iter(|| black_box(decrypt(lib, key, &oaep, black_box(&ct)).unwrap()))
            });
        }
        g.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_rsa
}
criterion_main!(benches);
