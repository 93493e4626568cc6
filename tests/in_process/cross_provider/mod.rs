//! kae (loaded as a module into its own library context) against OpenSSL's default provider
//! (in another library context), on the same keys: every operation in both directions, byte
//! equality where the scheme is deterministic, and the failure cases that must fail in kae.
//!
//! Per-size tests are generated as `<module>::<test>::rsa<bits>` for every size in
//! `common::SIZES`. One module per subject, mirroring `src/`: `provider`, `keymgmt`, `keygen`,
//! `signature`, `asym_cipher`, `contexts` (streaming, duplication, context parameters). This
//! file holds what they share.

use crate::common;
use crate::per_size;

mod asym_cipher;
mod contexts;
mod keygen;
mod keymgmt;
mod provider;
mod signature;

use common::ffi;
use common::*;
use std::ffi::CString;
use std::ptr;

const PKCS1_DIGESTS: &[&str] = &[
    "SHA1",
    "SHA224",
    "SHA256",
    "SHA384",
    "SHA512",
    "SHA512-224",
    "SHA512-256",
    "SHA3-224",
    "SHA3-256",
    "SHA3-384",
    "SHA3-512",
    "MD5",
];

const PSS_DIGESTS: &[&str] = &["SHA1", "SHA256", "SHA384", "SHA512"];
const X931_DIGESTS: &[&str] = &["SHA1", "SHA256", "SHA384", "SHA512"];

const LABEL: &[u8] = b"kae oaep label \x00\x01\x02";

#[track_caller]
fn assert_same(a: &[u8], b: &[u8], what: &str) {
    if a != b {
        let first = a
            .iter()
            .zip(b.iter())
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        panic!(
            "{what}: outputs differ (len {} vs {}, first difference at byte {first})\n  kae:     {}\n  default: {}",
            a.len(),
            b.len(),
            hex(a),
            hex(b)
        );
    }
}

#[track_caller]
fn assert_fails<T: std::fmt::Debug>(r: Res<T>, what: &str) {
    if let Ok(v) = r {
        panic!("{what}: expected failure, got success: {v:?}");
    }
}

fn flip(v: &[u8], idx: usize, mask: u8) -> Vec<u8> {
    let mut w = v.to_vec();
    w[idx] ^= mask;
    w
}

/// Encoded-message length for PSS: ceil((modBits - 1) / 8).
fn pss_em_len(bits: u32) -> usize {
    (bits as usize - 1 + 7) / 8
}

/// Inputs below the modulus: random, n-1, 1.
fn raw_inputs(kp: &KeyPair) -> Vec<Vec<u8>> {
    let k = kp.k();
    let mut a = vec![0u8];
    a.extend(pattern(kp.bits as u64, k - 1));
    let mut nm1 = kp.reference.n();
    *nm1.last_mut().unwrap() -= 1; // n is odd
    let mut one = vec![0u8; k];
    one[k - 1] = 1;
    vec![a, nm1, one]
}

/// The BIGNUM parameters of an RSA private key with its CRT values.
const KEY_BNS: &[&str] = &[
    "n",
    "e",
    "d",
    "rsa-factor1",
    "rsa-factor2",
    "rsa-exponent1",
    "rsa-exponent2",
    "rsa-coefficient1",
];
