//! A CRT fault is logged through the rate limiter like the other repeatable warnings: a key
//! whose CRT parts are wrong faults on every operation, and must not flood the log. Its own
//! test binary: the logger is per process and its first configuration wins.

use kae::ffi::bn::{arith, BigNum};
use kae::rsa::ops::{generate, private_op};
use kae::rsa::KeyType;
use num_bigint::BigUint;

#[test]
fn repeated_crt_faults_log_one_warning() {
    let path = std::env::temp_dir().join(format!("kae-crt-fault-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    kae::logging::configure(Some("warn"), Some(&format!("file:{}", path.display()))).unwrap();

    let good = generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap()).unwrap();
    let mut bad = good.dup(true, true, true).unwrap();
    // Corrupt dP: every CRT result is now wrong and the fault check recomputes with d.
    arith::add(
        &mut bad.exps[0],
        &good.exps[0],
        &BigNum::from_u64(2).unwrap(),
    )
    .unwrap();
    bad.exps[0].set_consttime();
    let mut m = vec![0x42u8; good.size()];
    m[0] = 0;
    // The expected signature from num-bigint, not from the code under test.
    let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
    let n = good.n().unwrap();
    let y = BigUint::from_bytes_be(&m).modpow(&big(good.d.as_ref().unwrap()), &big(n));
    let mut want = y.to_bytes_be();
    want.splice(0..0, std::iter::repeat_n(0u8, good.size() - want.len()));
    let mut got = vec![0u8; good.size()];
    for _ in 0..5 {
        private_op(&bad, &m, &mut got).result.unwrap();
        assert_eq!(got, want, "the recomputed result must be right");
    }
    let log = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let warnings = log
        .lines()
        .filter(|l| l.contains("failed verification"))
        .count();
    assert_eq!(
        warnings, 1,
        "five faults within the window, one warning; log:\n{log}"
    );
}
