//! Shared by the secret-taint tests (`ct_taint_crt.rs`, `mb_kernel.rs`): a small deterministic
//! generator, and the runner that starts the test binary again under valgrind memcheck for its
//! `taint_child` test (the one that marks secrets undefined) and fails on any report. Each check
//! first runs a canary: the child branches on one tainted word, and memcheck must report it, so
//! a harness that cannot see a leak (no valgrind client requests, a wrong flag) fails loudly.
#![allow(dead_code)] // each test binary uses part of it

use num_bigint::BigUint;
use std::process::Command;

/// xorshift64: the same inputs on every run.
pub struct Xs(pub u64);

impl Xs {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An odd number of exactly `w` 64-bit words (top bit set).
    pub fn odd(&mut self, w: usize) -> BigUint {
        let mut v: Vec<u64> = (0..w).map(|_| self.next()).collect();
        v[w - 1] |= 1 << 63;
        v[0] |= 1;
        from_words(&v)
    }

    /// A number below 2^bits.
    pub fn below_bits(&mut self, bits: usize) -> BigUint {
        let v: Vec<u64> = (0..bits.div_ceil(64)).map(|_| self.next()).collect();
        from_words(&v) % (BigUint::from(1u8) << bits)
    }

    /// An odd modulus of exactly `bits` bits.
    pub fn odd_modulus(&mut self, bits: usize) -> BigUint {
        let mut m = self.below_bits(bits);
        m.set_bit(bits as u64 - 1, true);
        m.set_bit(0, true);
        m
    }
}

/// Little-endian 64-bit words to a number.
pub fn from_words(w: &[u64]) -> BigUint {
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    BigUint::from_bytes_le(&bytes)
}

/// Set in the child for the canary run: branch on a secret, check nothing else.
const CANARY: &str = "KAE_TAINT_CANARY";

/// In `taint_child`, first: on the canary run, branch on a word marked secret and return true
/// (the child then does nothing else); memcheck must report that branch.
pub fn canary_branch() -> bool {
    if std::env::var_os(CANARY).is_none() {
        return false;
    }
    let secret = [std::hint::black_box(0x5a5a_5a5a_u64)];
    kae::ffi::memcheck::mark_secret_words(&secret);
    // Read through the reference: the compiler may otherwise reuse the value it stored.
    if std::hint::black_box(&secret)[0] & 1 == 1 {
        println!("canary: odd");
    } else {
        println!("canary: even");
    }
    true
}

fn run_child(child_env: &str, canary: bool) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("valgrind");
    if canary {
        cmd.env(CANARY, "1");
    }
    cmd.args([
        "--tool=memcheck",
        "--error-exitcode=99",
        "--track-origins=yes",
        "-q",
    ])
    .arg(&exe)
    .args(["--ignored", "--exact", "taint_child", "--test-threads=1"])
    .env(child_env, "1")
    .output()
    .expect("valgrind must be installed (.ci/run installs it)")
}

/// Runs this test binary's ignored `taint_child` test under memcheck with `child_env` set, and
/// fails unless the canary is caught, the child ran and passed, and memcheck reported nothing
/// else (`what` names the code checked).
pub fn assert_taint_child_clean(child_env: &str, what: &str) {
    let canary = run_child(child_env, true);
    let err = String::from_utf8_lossy(&canary.stderr);
    assert!(
        String::from_utf8_lossy(&canary.stdout).contains("1 passed")
            && !canary.status.success()
            && err.contains("Conditional jump or move depends on uninitialised value"),
        "the canary (a branch on a secret) was not caught: the taint check sees nothing\n{}\n{err}",
        String::from_utf8_lossy(&canary.stdout)
    );
    let out = run_child(child_env, false);
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the tainted run must have run and passed:\n{stdout}\n{err}"
    );
    assert!(
        out.status.success() && !err.contains("uninitialised"),
        "memcheck found secret-dependent control flow or addresses in {what}:\n{err}"
    );
}
