//! The queue pool at its smallest (one queue, depth 1): many concurrent ASYNC jobs must all
//! finish correctly, the jobs that meet a full queue pause and are woken when a slot frees
//! (`queue-full-retries` rises), and no queue ever holds more than one request.
//!
//! Its own test binary: kae reads `KAE_QUEUES` / `KAE_QUEUE_DEPTH` when the provider is first
//! initialised in the process, so they are set before anything loads kae.

mod async_support;
mod common;

use async_support::*;
use common::*;
use std::time::{Duration, Instant};

const BITS: u32 = 2048;
const THREADS: u64 = 2;
const JOBS_PER_THREAD: u64 = 12;

#[test]
fn depth_one_queue_many_jobs() {
    // Before kae is loaded anywhere in this process (this is the only test of the binary).
    std::env::set_var("KAE_QUEUES", "1");
    std::env::set_var("KAE_QUEUE_DEPTH", "1");
    std::env::set_var("KAE_ASYNC", "yes");
    std::env::set_var("KAE_BACKEND", "cpu");

    let kp = keypair(BITS); // loads kae into its library context
    let oaep_owned = Enc::oaep("SHA256", "SHA256", None).params();
    let oaep = &oaep_owned;
    let oaep_ptr = oaep.as_ptr() as usize;
    let before = counters(kae().prov);
    let t0 = Instant::now();

    let results: Vec<Result<(u64, u64, Vec<String>), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || -> Result<(u64, u64, Vec<String>), String> {
                    let _a = AsyncThread::init(2 * JOBS_PER_THREAD as usize);
                    let raw = Raw {
                        libctx: kae().ptr,
                        key: kp.kae.0,
                    };
                    let mut ops = Vec::new();
                    let mut expected = Vec::new();
                    for j in 0..JOBS_PER_THREAD {
                        let seed = t * 100 + j;
                        if j % 3 == 2 {
                            let pt = pattern(seed, 20 + j as usize);
                            let ct = ok(
                                encrypt(reference(), &kp.reference, oaep, &pt),
                                "reference encryption",
                            );
                            let params = oaep_ptr as *const common::ffi::OSSL_PARAM;
                            ops.push(AsyncOp::new(format!("t{t}-oaep{j}"), move || {
                                raw_decrypt(raw, c"provider=kae", params, &ct)
                            }));
                            expected.push(pt);
                        } else {
                            let msg = pattern(seed, 64 + j as usize);
                            expected.push(ok(
                                digest_sign(
                                    reference(),
                                    &kp.reference,
                                    Some("SHA256"),
                                    &sig_params("pkcs1", None, None, None),
                                    &msg,
                                ),
                                "reference signature",
                            ));
                            ops.push(AsyncOp::new(format!("t{t}-sign{j}"), move || {
                                raw_digest_sign(raw, c"SHA256", c"provider=kae", &msg)
                            }));
                        }
                    }
                    let rep = drive(&mut ops, Duration::from_secs(10))?;
                    eprintln!(
                        "thread {t}: {} jobs, {} pauses, {} resumes in {:.2?}",
                        ops.len(),
                        rep.pauses,
                        rep.resumes,
                        rep.elapsed
                    );
                    let problems =
                        check_outputs(ops.iter().zip(expected.iter().map(Vec::as_slice)));
                    Ok((ops.len() as u64, rep.pauses, problems))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let after = counters(kae().prov);
    let (jobs, seen_pauses, problems) = sum_thread_reports(results);
    eprintln!(
        "{jobs} jobs in {:.2?}; counters after: {after:?}",
        t0.elapsed()
    );
    Problems(problems).finish();
    assert_eq!(jobs, THREADS * JOBS_PER_THREAD);
    let off = after.delta(&before, "ops-private-offloaded");
    let full = after.delta(&before, "queue-full-retries");
    let hw = after.get("queue-high-water");
    assert!(
        off >= jobs,
        "ops-private-offloaded rose by {off}, expected ≥ {jobs}"
    );
    // kae counts exactly the pauses the application saw; with one slot for 24 jobs, most jobs
    // pause at least once (for a slot, for their result).
    assert_eq!(
        after.delta(&before, "async-pauses"),
        seen_pauses,
        "async-pauses differs from the ASYNC_PAUSE returns the jobs made: {before:?} → {after:?}"
    );
    assert!(
        seen_pauses >= jobs,
        "{seen_pauses} pauses for {jobs} jobs queued behind one slot of depth 1"
    );
    assert!(
        full > 0,
        "{jobs} concurrent jobs on one queue of depth 1, yet queue-full-retries did not rise ({before:?} → {after:?}): was the config read?"
    );
    assert!(
        hw >= 1,
        "queue-high-water is {hw}: nothing was ever queued?"
    );
    assert!(hw <= 1, "queue-high-water is {hw} with KAE_QUEUE_DEPTH=1");
    assert_eq!(after.delta(&before, "errors"), 0, "errors counted");
    assert_eq!(
        after.get("in-flight"),
        0,
        "requests still in flight after all jobs finished"
    );
    // Exactly one worker thread: with KAE_QUEUES=1 the pool has one CPU worker.
    let names = thread_names();
    let workers = names.iter().filter(|n| n.starts_with("kae-cpu")).count();
    assert_eq!(
        workers, 1,
        "KAE_QUEUES=1 but {workers} kae-cpu threads: {names:?}"
    );
}
