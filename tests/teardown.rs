//! Load / use / unload kae repeatedly (an application that creates and frees library contexts,
//! or reloads its configuration): each round starts the pool lazily (async use), tears the
//! provider down (the last teardown stops the pool's threads), and frees the library context.
//! Nothing may hang, threads must not accumulate, and memory must not grow round after round.
//!
//! Its own test binary, with a single test: kae is loaded only into the library contexts made
//! here (the shared `kae()` context of `tests/common` is never created, it would keep the
//! provider — and its pool — alive).
//!
//! `KAE_TEARDOWN_ROUNDS` sets the number of rounds (default 20, at least 5): `scripts/soak.sh`
//! runs 1,000 under valgrind (memcheck, leak checking), where a leak per round would add up.

mod async_support;
mod common;

use async_support::*;
use common::ffi::*;
use common::*;
use std::ffi::CString;
use std::time::{Duration, Instant};

/// Rounds without `KAE_TEARDOWN_ROUNDS`.
const DEFAULT_ROUNDS: usize = 20;
const ASYNC_JOBS: usize = 4;
const INLINE_SIGNS: usize = 2;
const STALL: Duration = Duration::from_secs(10);

fn pool_threads() -> Vec<String> {
    thread_names()
        .into_iter()
        .filter(|n| n.starts_with("kae-"))
        .collect()
}

/// Waits (briefly) until no kae pool thread is left; returns what is left.
fn wait_pool_gone(limit: Duration) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let left = pool_threads();
        if left.is_empty() || t0.elapsed() > limit {
            return left;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `KAE_TEARDOWN_ROUNDS`, else [`DEFAULT_ROUNDS`]; at least 5 (the memory check compares
/// round 5 with the last).
fn rounds() -> usize {
    match std::env::var("KAE_TEARDOWN_ROUNDS") {
        Ok(v) => {
            let n: usize = v
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("KAE_TEARDOWN_ROUNDS={v:?} is not a number"));
            assert!(n >= 5, "KAE_TEARDOWN_ROUNDS={n}: at least 5");
            n
        }
        Err(_) => DEFAULT_ROUNDS,
    }
}

/// Whether this process runs under valgrind (its preload is in the environment).
fn under_valgrind() -> bool {
    std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("vgpreload"))
}

#[test]
fn load_use_unload_cycles() {
    let n_rounds = rounds();
    // 6 s per round under valgrind (about 1 s there, on a loaded 2-core machine), 6 s per 20
    // rounds without it (0.1 s each).
    let limit = if under_valgrind() {
        60 + 6 * n_rounds
    } else {
        120 + n_rounds / 3
    };
    let _wd = Watchdog::new("teardown test", Duration::from_secs(limit as u64));
    let _a = AsyncThread::init(16);
    let module = CString::new(module_path()).unwrap();

    // Reference key and expected signatures, from the default provider only.
    let refkey = ok(reference().keygen_rsa(2048, None), "reference keygen");
    let key_params = ok(refkey.export(EVP_PKEY_KEYPAIR), "export key");
    let p = sig_params("pkcs1", None, None, None);
    let msgs: Vec<Vec<u8>> = (0..ASYNC_JOBS + INLINE_SIGNS)
        .map(|i| pattern(500 + i as u64, 100 + i))
        .collect();
    let sigs: Vec<Vec<u8>> = msgs
        .iter()
        .map(|m| {
            ok(
                digest_sign(reference(), &refkey, Some("SHA256"), &p, m),
                "reference sign",
            )
        })
        .collect();
    assert!(
        pool_threads().is_empty(),
        "kae threads before kae was loaded: {:?}",
        thread_names()
    );

    let mut threads_after: Vec<usize> = Vec::new();
    let mut rss_after: Vec<u64> = Vec::new();
    let t_start = Instant::now();
    for round in 0..n_rounds {
        let t0 = Instant::now();
        unsafe {
            let ctx = OSSL_LIB_CTX_new();
            assert!(!ctx.is_null(), "OSSL_LIB_CTX_new");
            let prov = OSSL_PROVIDER_load(ctx, module.as_ptr());
            assert!(
                !prov.is_null(),
                "round {round}: OSSL_PROVIDER_load({module:?}): {}",
                take_errors("load")
            );
            // No thread at provider init: the pool starts on first async use.
            let early = pool_threads();
            assert!(
                early.is_empty(),
                "round {round}: kae threads right after OSSL_PROVIDER_load (before any async use): {early:?}"
            );
            let c0 = counters(prov);
            let key = import_into_kae(ctx, &key_params);
            let raw = Raw { libctx: ctx, key };

            let mut ops: Vec<AsyncOp> = msgs[..ASYNC_JOBS]
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let m = m.clone();
                    AsyncOp::new(format!("r{round}-job{i}"), move || {
                        raw_digest_sign(raw, c"SHA256", c"provider=kae", &m)
                    })
                })
                .collect();
            drive_ok(&mut ops, STALL);
            for (i, op) in ops.iter().enumerate() {
                let s = op.result().unwrap_or_else(|e| {
                    panic!("round {round}: async sign {i}: {e}: {}", take_errors("job"))
                });
                assert_eq!(hex(&s), hex(&sigs[i]), "round {round}: async signature {i}");
            }
            drop(ops);
            let running = pool_threads();
            assert!(
                running.iter().any(|n| is_pool_worker(n)),
                "round {round}: async jobs ran but no pool worker thread exists: {:?}",
                thread_names()
            );
            for i in ASYNC_JOBS..msgs.len() {
                let s = raw_digest_sign(raw, c"SHA256", c"provider=kae", &msgs[i]).unwrap_or_else(
                    |e| {
                        panic!(
                            "round {round}: inline sign {i}: {e}: {}",
                            take_errors("sign")
                        )
                    },
                );
                assert_eq!(
                    hex(&s),
                    hex(&sigs[i]),
                    "round {round}: inline signature {i}"
                );
            }
            let c1 = counters(prov);
            let off = c1.delta(&c0, "ops-private-offloaded");
            let inl = c1.delta(&c0, "ops-private-inline");
            assert!(
                off >= ASYNC_JOBS as u64 && inl >= INLINE_SIGNS as u64,
                "round {round}: offloaded +{off} (want ≥ {ASYNC_JOBS}), inline +{inl} (want ≥ {INLINE_SIGNS}): {c0:?} → {c1:?}"
            );
            if round == 0 || round == n_rounds - 1 {
                eprintln!("round {round}: counters at load {c0:?}, after use {c1:?}");
            }

            EVP_PKEY_free(key);
            assert_eq!(
                OSSL_PROVIDER_unload(prov),
                1,
                "round {round}: OSSL_PROVIDER_unload"
            );
            OSSL_LIB_CTX_free(ctx);
        }
        // The last (only) provider instance is gone: its pool threads must be too.
        let left = wait_pool_gone(Duration::from_secs(2));
        assert!(
            left.is_empty(),
            "round {round}: kae pool threads still alive after the provider was unloaded and its library context freed: {left:?}"
        );
        threads_after.push(thread_count());
        rss_after.push(vm_rss_kb());
        eprintln!(
            "round {round}: {:.2?}, {} threads, VmRSS {} kB",
            t0.elapsed(),
            threads_after[round],
            rss_after[round]
        );
    }
    eprintln!("{n_rounds} rounds in {:.2?}", t_start.elapsed());

    let base = threads_after[0];
    let max = *threads_after.iter().max().unwrap();
    assert!(
        max <= base + 2,
        "thread count grows across load/unload rounds: {threads_after:?} ({:?})",
        thread_names()
    );
    let (r5, last) = (rss_after[4], rss_after[n_rounds - 1]);
    eprintln!(
        "teardown: {n_rounds} rounds; threads after each round {base}..{max}; VmRSS round 5 {r5} kB, last {last} kB"
    );
    if under_valgrind() {
        // Valgrind's own memory (translations, debug information of the module loaded again
        // each round) is in VmRSS there; memcheck's heap summary is the check under valgrind.
        eprintln!("teardown: VmRSS not checked under valgrind");
        return;
    }
    assert!(
        last <= r5 + 20 * 1024,
        "VmRSS grew from {r5} kB (round 5) to {last} kB (round {n_rounds}): {:?}",
        &rss_after[rss_after.len().saturating_sub(40)..]
    );
}
