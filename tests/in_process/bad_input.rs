//! Malformed parameters, inputs and keys given to kae.  Every case must fail (never crash, never
//! produce output) and leave an error with a non-empty reason string on the OpenSSL error queue;
//! the reason is printed.  Each case first runs a well-formed positive control on the same
//! key and context so that a failure is known to come from the bad input.
//!
//! What the OpenSSL 3.0 default provider does with the same input is printed for comparison
//! only (it accepts some of these, e.g. saltlen "bogus" parses as 0).

use crate::common;

use common::ffi;
use common::*;

fn kp() -> &'static KeyPair {
    keypair(2048)
}

fn pkcs1_sig() -> Params {
    sig_params("pkcs1", None, None, None)
}

fn sha256(data: &[u8]) -> Vec<u8> {
    reference().digest("SHA256", data)
}

/// Positive controls: PKCS#1 sign of a SHA-256 hash and an OAEP-SHA256 encryption work in kae
/// with well-formed parameters.
fn controls(kp: &KeyPair, h: &[u8]) {
    ok(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pkcs1", Some("SHA256"), None, None),
            h,
        ),
        "control: PKCS#1 sign with well-formed parameters",
    );
    ok(
        encrypt(
            kae(),
            &kp.kae,
            &Enc::oaep("SHA256", "SHA256", None).params(),
            b"x",
        ),
        "control: OAEP encrypt with well-formed parameters",
    );
}

/// Print what the default provider does with the same input.
fn contrast<T>(what: &str, r: Res<T>) {
    match r {
        Ok(_) => eprintln!("    (default provider accepts: {what})"),
        Err(e) => eprintln!(
            "    (default provider also refuses {what}: {})",
            e.first_reason().unwrap_or("no reason")
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Malformed parameters
// ---------------------------------------------------------------------------------------------

#[test]
fn pad_mode_as_octet_string() {
    let kp = kp();
    let h = sha256(b"m");
    let control = sig_params("pss", Some("SHA256"), None, None);
    let s = ok(sign(kae(), &kp.kae, &control, &h), "control");
    ok(
        verify(reference(), &kp.reference, &control, &h, &s),
        "the default provider verifies the control signature",
    );
    let bad = ParamsBuilder::new()
        .octet("pad-mode", b"pss")
        .utf8("digest", "SHA256")
        .build();
    expect_error(
        sign(kae(), &kp.kae, &bad, &h),
        "sign with pad-mode as an octet string",
    );
    contrast("pad-mode octet", sign(reference(), &kp.reference, &bad, &h));
    let bad = ParamsBuilder::new().octet("pad-mode", b"oaep").build();
    expect_error(
        encrypt(kae(), &kp.kae, &bad, b"x"),
        "encrypt with pad-mode as an octet string",
    );
}

#[test]
fn pad_mode_unknown_name_or_number() {
    let kp = kp();
    let h = sha256(b"m");
    controls(kp, &h);
    for bad in [
        ParamsBuilder::new().utf8("pad-mode", "bogus").build(),
        ParamsBuilder::new().utf8("pad-mode", "").build(),
        ParamsBuilder::new().int("pad-mode", 99).build(),
        ParamsBuilder::new().int("pad-mode", -1).build(),
    ] {
        expect_error(sign(kae(), &kp.kae, &bad, &h), "sign with unknown pad-mode");
        expect_error(
            encrypt(kae(), &kp.kae, &bad, b"x"),
            "encrypt with unknown pad-mode",
        );
    }
}

#[test]
fn pad_mode_wrong_operation() {
    let kp = kp();
    let ct = ok(
        encrypt(kae(), &kp.kae, &Enc::pkcs1().params(), b"x"),
        "control encrypt",
    );
    ok(
        decrypt(kae(), &kp.kae, &Enc::pkcs1_explicit().params(), &ct),
        "control decrypt",
    );
    // PSS is a signature padding; OAEP an encryption padding.
    expect_error(
        decrypt(kae(), &kp.kae, &Enc::pad("pss").params(), &ct),
        "decrypt with pad-mode pss",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &Enc::pad("pss").params(), b"x"),
        "encrypt with pad-mode pss",
    );
    let h = sha256(b"m");
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("oaep", Some("SHA256"), None, None),
            &h,
        ),
        "sign with pad-mode oaep",
    );
}

#[test]
fn unknown_digest_names() {
    let kp = kp();
    let h = sha256(b"m");
    ok(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pkcs1", Some("SHA256"), None, None),
            &h,
        ),
        "control",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pkcs1", Some("NOPE-256"), None, None),
            &h,
        ),
        "sign, digest NOPE-256",
    );
    // EVP_DigestSignInit_ex fetches the digest itself (libcrypto's "unsupported" error) before
    // the operation reaches kae.
    expect_libcrypto_error(
        digest_sign(kae(), &kp.kae, Some("NOPE-256"), &pkcs1_sig(), b"m"),
        "digest-sign, digest NOPE-256",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pss", Some("SHA256"), Some("NOPE"), Some(Salt::Digest)),
            &h,
        ),
        "sign, mgf1-digest NOPE",
    );
    expect_error(
        encrypt(
            kae(),
            &kp.kae,
            &Enc::oaep("NOPE", "SHA1", None).params(),
            b"x",
        ),
        "OAEP encrypt, digest NOPE",
    );
    expect_error(
        encrypt(
            kae(),
            &kp.kae,
            &Enc::oaep("SHA256", "NOPE", None).params(),
            b"x",
        ),
        "OAEP encrypt, mgf1-digest NOPE",
    );
    // A digest that is not a hash algorithm for RSA signatures.
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pkcs1", Some("SHAKE256"), None, None),
            &h,
        ),
        "sign, digest SHAKE256",
    );
}

#[test]
fn digest_param_wrong_type() {
    let kp = kp();
    let h = sha256(b"m");
    controls(kp, &h);
    let bad = ParamsBuilder::new()
        .utf8("pad-mode", "pkcs1")
        .int("digest", 672)
        .build();
    expect_error(sign(kae(), &kp.kae, &bad, &h), "digest as integer");
    let bad = ParamsBuilder::new()
        .utf8("pad-mode", "oaep")
        .octet("digest", b"SHA256")
        .build();
    expect_error(
        encrypt(kae(), &kp.kae, &bad, b"x"),
        "OAEP digest as octet string",
    );
}

#[test]
fn saltlen_malformed() {
    let kp = kp();
    let h = sha256(b"m");
    let control = sig_params("pss", Some("SHA256"), None, Some(Salt::Len(20)));
    let s = ok(sign(kae(), &kp.kae, &control, &h), "control");
    ok(
        verify(reference(), &kp.reference, &control, &h, &s),
        "the default provider verifies the control signature",
    );
    let base = || {
        ParamsBuilder::new()
            .utf8("pad-mode", "pss")
            .utf8("digest", "SHA256")
    };
    // Refused by both: a non-string, non-integer type, and integers below the codes.
    for (what, bad) in [
        (
            "saltlen as octet string",
            base().octet("saltlen", b"\x14").build(),
        ),
        ("saltlen -7", base().int("saltlen", -7).build()),
        ("saltlen \"-7\"", base().utf8("saltlen", "-7").build()),
    ] {
        let e = expect_error(sign(kae(), &kp.kae, &bad, &h), what);
        drop(e);
        assert!(
            sign(reference(), &kp.reference, &bad, &h).is_err(),
            "the default provider refuses {what} too"
        );
    }
    // Strings that are not keywords are read with C's atoi by the default provider ("bogus"
    // and "" are 0, "20x" is 20, "MAX" is 0): kae reads them the same way, so both sign with
    // the same salt length and, for salt length 0, the very same bytes.
    for text in ["bogus", "", "20x", "MAX", " 32"] {
        let p = base().utf8("saltlen", text).build();
        let ours = ok(sign(kae(), &kp.kae, &p, &h), text);
        let theirs = ok(sign(reference(), &kp.reference, &p, &h), text);
        ok(
            verify(reference(), &kp.reference, &p, &h, &ours),
            &format!("the default provider verifies kae's saltlen {text:?}"),
        );
        ok(
            verify(kae(), &kp.kae, &p, &h, &theirs),
            &format!("kae verifies the default provider's saltlen {text:?}"),
        );
        if matches!(text, "bogus" | "" | "MAX") {
            assert_eq!(ours, theirs, "salt length 0 is deterministic: {text:?}");
        }
    }
    // "auto-digestmax" is a keyword from OpenSSL 3.1; before, it is atoi("auto-digestmax") = 0.
    let p = base().utf8("saltlen", "auto-digestmax").build();
    let ours = ok(sign(kae(), &kp.kae, &p, &h), "auto-digestmax");
    let theirs = ok(sign(reference(), &kp.reference, &p, &h), "auto-digestmax");
    if !core_has_auto_digestmax() {
        assert_eq!(ours, theirs, "auto-digestmax is salt length 0 before 3.1");
    }
}

#[test]
fn saltlen_too_large_for_key() {
    let kp = keypair(1024);
    let h = reference().digest("SHA512", b"m");
    // emLen 128 - hLen 64 - 2 = 62 bytes of salt at most.
    let control = sig_params("pss", Some("SHA512"), None, Some(Salt::Len(62)));
    let s = ok(sign(kae(), &kp.kae, &control, &h), "control: salt 62");
    ok(
        verify(reference(), &kp.reference, &control, &h, &s),
        "the default provider verifies the salt-62 signature",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pss", Some("SHA512"), None, Some(Salt::Len(63))),
            &h,
        ),
        "PSS salt 63 with SHA-512 on a 1024-bit key",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pss", Some("SHA512"), None, Some(Salt::Digest)),
            &h,
        ),
        "PSS salt = digest length with SHA-512 on a 1024-bit key",
    );
}

#[test]
fn oaep_label_with_pkcs1_padding() {
    let kp = kp();
    let mut problems = Problems::default();
    let ct = ok(
        encrypt(reference(), &kp.reference, &Enc::pkcs1().params(), b"x"),
        "encrypt",
    );
    let bad = Enc {
        label: Some(b"label"),
        ..Enc::pkcs1_explicit()
    }
    .params();
    problems.expect_error(
        encrypt(kae(), &kp.kae, &bad, b"x"),
        "PKCS#1 encrypt with an OAEP label",
    );
    problems.expect_error(
        decrypt(kae(), &kp.kae, &bad, &ct),
        "PKCS#1 decrypt with an OAEP label",
    );
    contrast(
        "OAEP label with PKCS#1",
        decrypt(reference(), &kp.reference, &bad, &ct),
    );
    problems.finish();
}

#[test]
fn cipher_params_wrong_type() {
    let kp = kp();
    let ct = ok(
        encrypt(reference(), &kp.reference, &Enc::pkcs1().params(), b"x"),
        "encrypt",
    );
    controls(kp, &sha256(b"m"));
    ok(
        decrypt(kae(), &kp.kae, &Enc::pkcs1_explicit().params(), &ct),
        "control: decrypt",
    );
    let bad = ParamsBuilder::new()
        .utf8("pad-mode", "pkcs1")
        .utf8("tls-client-version", "0x0303")
        .build();
    expect_error(
        decrypt(kae(), &kp.kae, &bad, &ct),
        "tls-client-version as a string",
    );
    let bad = ParamsBuilder::new()
        .utf8("pad-mode", "pkcs1")
        .utf8("implicit-rejection", "no")
        .build();
    if core_has_implicit_rejection() {
        expect_error(
            decrypt(kae(), &kp.kae, &bad, &ct),
            "implicit-rejection as a string",
        );
    } else {
        // A core without implicit rejection does not know the parameter: ignored by both.
        ok(
            decrypt(reference(), &kp.reference, &bad, &ct),
            "default provider ignores implicit-rejection before 3.2",
        );
        ok(
            decrypt(kae(), &kp.kae, &bad, &ct),
            "kae ignores implicit-rejection before 3.2, like the default provider",
        );
    }
    let bad = ParamsBuilder::new()
        .utf8("pad-mode", "oaep")
        .utf8("oaep-label", "label")
        .build();
    expect_error(
        encrypt(kae(), &kp.kae, &bad, b"x"),
        "oaep-label as a UTF-8 string",
    );
}

#[test]
fn signature_padding_digest_mismatch() {
    let kp = kp();
    let h = sha256(b"m");
    // Raw RSA takes no digest.
    let mut m = vec![0u8];
    m.extend(pattern(1, kp.k() - 1));
    ok(
        sign(kae(), &kp.kae, &sig_params("none", None, None, None), &m),
        "control: raw sign",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("none", Some("SHA256"), None, None),
            &h,
        ),
        "pad none with a digest",
    );
    // X9.31 has no identifier for SHA-224 or MD5.
    ok(
        digest_sign(
            kae(),
            &kp.kae,
            Some("SHA256"),
            &sig_params("x931", None, None, None),
            b"m",
        ),
        "control: X9.31 with SHA-256",
    );
    for md in ["SHA224", "MD5"] {
        expect_error(
            digest_sign(
                kae(),
                &kp.kae,
                Some(md),
                &sig_params("x931", None, None, None),
                b"m",
            ),
            &format!("X9.31 with {md}"),
        );
    }
    // PSS cannot use MD5-SHA1.
    let tbs = pattern(2, 36);
    ok(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pkcs1", Some("MD5-SHA1"), None, None),
            &tbs,
        ),
        "control: PKCS#1 with MD5-SHA1",
    );
    expect_error(
        sign(
            kae(),
            &kp.kae,
            &sig_params("pss", Some("MD5-SHA1"), None, None),
            &tbs,
        ),
        "PSS with MD5-SHA1",
    );
}

#[test]
fn sign_input_length_mismatch() {
    let kp = kp();
    let p = sig_params("pkcs1", Some("SHA256"), None, None);
    ok(
        sign(kae(), &kp.kae, &p, &[7u8; 32]),
        "control: 32-byte hash",
    );
    for len in [0usize, 31, 33, 64] {
        expect_error(
            sign(kae(), &kp.kae, &p, &vec![7u8; len]),
            &format!("SHA-256 sign over {len} bytes"),
        );
    }
    let pss = sig_params("pss", Some("SHA384"), None, None);
    expect_error(
        sign(kae(), &kp.kae, &pss, &[7u8; 32]),
        "PSS SHA-384 over 32 bytes",
    );
    // Raw RSA needs exactly k bytes below n.
    let none = sig_params("none", None, None, None);
    expect_error(
        sign(kae(), &kp.kae, &none, &vec![0u8; kp.k() - 1]),
        "raw sign over k-1 bytes",
    );
    expect_error(
        sign(kae(), &kp.kae, &none, &kp.reference.n()),
        "raw sign over n",
    );
    expect_error(
        sign(kae(), &kp.kae, &none, &vec![0xffu8; kp.k()]),
        "raw sign over 0xff..ff",
    );
    expect_error(sign(kae(), &kp.kae, &none, b""), "raw sign over nothing");
    // PKCS#1 without a digest: the DigestInfo-less input must fit k-11 bytes.
    expect_error(
        sign(kae(), &kp.kae, &pkcs1_sig(), &vec![1u8; kp.k() - 10]),
        "PKCS#1 raw input too long",
    );
}

// ---------------------------------------------------------------------------------------------
// Malformed ciphertexts and signatures
// ---------------------------------------------------------------------------------------------

/// Cipher settings to try malformed ciphertexts with.
fn decrypt_settings() -> Vec<(&'static str, Params)> {
    vec![
        (
            "PKCS#1 (implicit rejection off)",
            Enc::pkcs1_explicit().params(),
        ),
        ("PKCS#1 (implicit rejection on)", Enc::pkcs1().params()),
        ("OAEP SHA-256", Enc::oaep("SHA256", "SHA256", None).params()),
        ("raw", Enc::pad("none").params()),
    ]
}

fn good_ciphertext(kp: &KeyPair, name: &str, p: &Params) -> Vec<u8> {
    let pt: Vec<u8> = if name == "raw" {
        let mut m = vec![0u8];
        m.extend(pattern(3, kp.k() - 1));
        m
    } else {
        b"attack at dawn".to_vec()
    };
    let ct = ok(encrypt(reference(), &kp.reference, p, &pt), "encrypt");
    assert_eq!(
        ok(
            decrypt(kae(), &kp.kae, p, &ct),
            &format!("control decrypt {name}")
        ),
        pt
    );
    ct
}

/// Ciphertexts longer than the modulus are refused. Shorter ones are the integers they spell,
/// as in OpenSSL's default provider: tests/security.rs compares those with the default.
#[test]
fn ciphertext_longer_than_modulus() {
    let kp = kp();
    let mut problems = Problems::default();
    for (name, p) in decrypt_settings() {
        let ct = good_ciphertext(kp, name, &p);
        let mut longer = vec![0u8];
        longer.extend(&ct);
        let mut appended = ct.clone();
        appended.push(0);
        for (what, bad) in [
            ("longer (leading zero)", longer),
            ("longer (trailing zero)", appended),
        ] {
            problems.expect_error(
                decrypt(kae(), &kp.kae, &p, &bad),
                &format!("{name}: ciphertext {what}"),
            );
        }
    }
    problems.finish();
}

#[test]
fn ciphertext_not_below_modulus() {
    let kp = kp();
    let mut problems = Problems::default();
    let n = kp.reference.n();
    let mut n_plus_1 = n.clone();
    // Big-endian increment (n's last byte may be 0xff: carry).
    for b in n_plus_1.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            break;
        }
    }
    for (name, p) in decrypt_settings() {
        good_ciphertext(kp, name, &p);
        for (what, bad) in [
            ("= n", n.clone()),
            ("= n+1", n_plus_1.clone()),
            ("= 0xff..ff", vec![0xffu8; kp.k()]),
        ] {
            problems.expect_error(
                decrypt(kae(), &kp.kae, &p, &bad),
                &format!("{name}: ciphertext {what}"),
            );
        }
    }
    problems.finish();
}

#[test]
fn signature_malformed() {
    let kp = kp();
    let mut problems = Problems::default();
    let p = pkcs1_sig();
    let sig = ok(
        digest_sign(reference(), &kp.reference, Some("SHA256"), &p, b"m"),
        "sign",
    );
    ok(
        digest_verify(kae(), &kp.kae, Some("SHA256"), &p, b"m", &sig),
        "control verify",
    );
    let mut longer = vec![0u8];
    longer.extend(&sig);
    for (what, bad) in [
        ("shorter", sig[1..].to_vec()),
        ("longer", longer),
        ("empty", Vec::new()),
        ("= n", kp.reference.n()),
        ("0xff..ff", vec![0xffu8; kp.k()]),
        ("zero", vec![0u8; kp.k()]),
        ("random", {
            let mut r = pattern(9, kp.k());
            r[0] = 0;
            r
        }),
    ] {
        problems.expect_error(
            digest_verify(kae(), &kp.kae, Some("SHA256"), &p, b"m", &bad),
            &format!("PKCS#1 verify, signature {what}"),
        );
        for pad in ["pss", "x931"] {
            let pp = sig_params(pad, None, None, None);
            problems.expect_error(
                digest_verify(kae(), &kp.kae, Some("SHA256"), &pp, b"m", &bad),
                &format!("{pad} verify, signature {what}"),
            );
        }
    }
    problems.expect_error(
        verify_recover(kae(), &kp.kae, &p, &kp.reference.n()),
        "verify_recover of n",
    );
    let mut garbage = pattern(10, kp.k());
    garbage[0] = 0;
    problems.expect_error(
        verify_recover(kae(), &kp.kae, &p, &garbage),
        "verify_recover of garbage (PKCS#1)",
    );
    problems.finish();
}

#[test]
fn plaintext_too_long_or_malformed() {
    let kp = kp();
    let k = kp.k();
    let pk = Enc::pkcs1().params();
    ok(
        encrypt(kae(), &kp.kae, &pk, &vec![1u8; k - 11]),
        "control: k-11 bytes",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &pk, &vec![1u8; k - 10]),
        "PKCS#1 plaintext k-10 bytes",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &pk, &vec![1u8; k + 1]),
        "PKCS#1 plaintext k+1 bytes",
    );
    let oaep = Enc::oaep("SHA256", "SHA256", None).params();
    ok(
        encrypt(kae(), &kp.kae, &oaep, &vec![1u8; k - 66]),
        "control: OAEP k-66 bytes",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &oaep, &vec![1u8; k - 65]),
        "OAEP-SHA256 plaintext k-65 bytes",
    );
    let raw = Enc::pad("none").params();
    expect_error(
        encrypt(kae(), &kp.kae, &raw, &vec![0u8; k - 1]),
        "raw plaintext k-1 bytes",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &raw, &vec![0u8; k + 1]),
        "raw plaintext k+1 bytes",
    );
    expect_error(
        encrypt(kae(), &kp.kae, &raw, &kp.reference.n()),
        "raw plaintext = n",
    );
}

/// Raw-encrypt `em` with the default provider.
fn raw_ct(kp: &KeyPair, em: &[u8]) -> Vec<u8> {
    ok(
        encrypt(reference(), &kp.reference, &Enc::pad("none").params(), em),
        "raw encrypt",
    )
}

#[test]
fn bad_pkcs1_padding() {
    let kp = kp();
    let k = kp.k();
    let off = Enc::pkcs1_explicit().params();
    good_ciphertext(kp, "PKCS#1", &off);
    let mut blocks: Vec<(&str, Vec<u8>)> = Vec::new();
    let body = |first: u8, second: u8| {
        let mut em = vec![0u8; k];
        em[0] = first;
        em[1] = second;
        em[2..k - 17]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 200) as u8 + 1);
        em[k - 17] = 0;
        // message bytes are non-zero so that the only zero byte is the separator above
        em[k - 16..]
            .iter_mut()
            .zip(pattern(4, 16))
            .for_each(|(b, p)| *b = p | 1);
        em
    };
    blocks.push(("block type 1", body(0, 1)));
    blocks.push(("block type 3", body(0, 3)));
    blocks.push(("leading byte 1", body(1, 2)));
    let mut no_sep = body(0, 2);
    no_sep[k - 17] = 0x55;
    blocks.push(("no zero separator", no_sep));
    let mut short_ps = body(0, 2);
    short_ps[5] = 0; // padding string of 3 bytes
    blocks.push(("padding string shorter than 8 bytes", short_ps));
    let mut sep_last = body(0, 2);
    sep_last[k - 17] = 0x55;
    sep_last[k - 1] = 0;
    blocks.push((
        "separator in the last byte (empty message)",
        sep_last.clone(),
    ));
    for (what, em) in blocks {
        let ct = raw_ct(kp, &em);
        let r = decrypt(kae(), &kp.kae, &off, &ct);
        if what.starts_with("separator in the last byte") {
            // That one is actually well-formed (empty message); both must agree.
            assert_eq!(ok(r, what), Vec::<u8>::new(), "empty message");
            continue;
        }
        expect_error(
            r,
            &format!("PKCS#1 decrypt (implicit rejection off): {what}"),
        );
    }
}

#[test]
fn bad_oaep_padding() {
    let kp = kp();
    let k = kp.k();
    let p = Enc::oaep("SHA256", "SHA256", None).params();
    good_ciphertext(kp, "OAEP", &p);
    let mut random = pattern(12, k);
    random[0] = 0;
    let mut lead1 = pattern(13, k);
    lead1[0] = 1;
    let zeros = vec![0u8; k];
    for (what, em) in [
        ("random block", random),
        ("leading byte 1", lead1),
        ("all zero", zeros),
    ] {
        let ct = raw_ct(kp, &em);
        expect_error(
            decrypt(kae(), &kp.kae, &p, &ct),
            &format!("OAEP decrypt: {what}"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Output buffers
// ---------------------------------------------------------------------------------------------

#[test]
fn output_buffer_too_small() {
    let kp = kp();
    let kl = kae();
    let h = sha256(b"m");
    controls(kp, &h);
    unsafe {
        // Signature buffer one byte short.
        clear_errors();
        let ctx = ok(kl.pctx(&kp.kae), "ctx");
        ok(
            cvt(ffi::EVP_PKEY_sign_init(ctx.0), "sign_init"),
            "sign_init",
        );
        ctx.set_params(&sig_params("pkcs1", Some("SHA256"), None, None))
            .unwrap();
        let mut buf = vec![0xAAu8; kp.k() + 16];
        let mut len = kp.k() - 1;
        let r = cvt(
            ffi::EVP_PKEY_sign(ctx.0, buf.as_mut_ptr(), &mut len, h.as_ptr(), h.len()),
            "EVP_PKEY_sign(small buffer)",
        );
        expect_error(r, "sign into a k-1 byte buffer");
        assert!(
            buf[kp.k() - 1..].iter().all(|&b| b == 0xAA),
            "sign wrote past the declared buffer size"
        );

        // Decryption buffer smaller than the plaintext.
        let ct = ok(
            encrypt(
                reference(),
                &kp.reference,
                &Enc::pkcs1().params(),
                &[5u8; 32],
            ),
            "encrypt",
        );
        for p in [Enc::pkcs1_explicit().params(), Enc::pkcs1().params()] {
            clear_errors();
            let ctx = ok(kl.pctx(&kp.kae), "ctx");
            ok(
                cvt(ffi::EVP_PKEY_decrypt_init(ctx.0), "decrypt_init"),
                "decrypt_init",
            );
            ctx.set_params(&p).unwrap();
            let mut out = vec![0xAAu8; 64];
            let mut len = 8usize;
            let r = cvt(
                ffi::EVP_PKEY_decrypt(ctx.0, out.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len()),
                "EVP_PKEY_decrypt(small buffer)",
            );
            expect_error(r, "decrypt 32 bytes into an 8-byte buffer");
            assert!(
                out[8..].iter().all(|&b| b == 0xAA),
                "decrypt wrote past the declared buffer size"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Truncated and inconsistent keys
// ---------------------------------------------------------------------------------------------

fn ref_params() -> Params {
    ok(kp().reference.export(ffi::EVP_PKEY_KEYPAIR), "export")
}

fn subset(names: &[&str]) -> Params {
    let ex = ref_params();
    let mut b = ParamsBuilder::new();
    for n in names {
        b = b.bn(n, &ex.get_bn(n).unwrap());
    }
    b.build()
}

/// The import must fail, or — if kae accepts the partial key — every private operation with it
/// must fail.  Either way with an error reason on the queue.
fn import_or_use_fails(what: &str, params: &Params) {
    let kl = kae();
    // Controls: the same operations work with the complete key.
    let h = sha256(b"m");
    let sigp = sig_params("pkcs1", Some("SHA256"), None, None);
    ok(
        sign(kl, &kp().kae, &sigp, &h),
        "control: sign with the full key",
    );
    let ct = ok(
        encrypt(reference(), &kp().reference, &Enc::pkcs1().params(), b"x"),
        "encrypt",
    );
    ok(
        decrypt(kl, &kp().kae, &Enc::pkcs1_explicit().params(), &ct),
        "control: decrypt with the full key",
    );
    match kl.import("RSA", ffi::EVP_PKEY_KEYPAIR, params) {
        Err(e) => {
            eprintln!("[expected failure] {what}: import refused: {e}");
            assert!(
                e.has_reason(),
                "{what}: import failed without a reason string: {e}"
            );
        }
        Ok(key) => {
            eprintln!("{what}: import accepted; private operations must fail");
            let s = sign(kl, &key, &sigp, &h);
            if let Ok(sig) = &s {
                let valid = verify(reference(), &kp().reference, &sigp, &h, sig).is_ok();
                panic!(
                    "{what}: kae signed with the partial key (the signature is {})",
                    if valid { "valid" } else { "INVALID" }
                );
            }
            expect_error(s, &format!("{what}: sign"));
            expect_error(
                decrypt(kl, &key, &Enc::pkcs1_explicit().params(), &ct),
                &format!("{what}: decrypt"),
            );
            expect_error(
                check_key(kl, &key, Check::Private),
                &format!("{what}: private check"),
            );
        }
    }
}

#[test]
fn truncated_key_n_without_e() {
    let p = subset(&["n"]);
    expect_error(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &p),
        "import n without e (key pair)",
    );
    expect_error(
        kae().import("RSA", ffi::EVP_PKEY_PUBLIC_KEY, &p),
        "import n without e (public)",
    );
    let p = subset(&["n", "d"]);
    expect_error(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &p),
        "import n, d without e",
    );
}

#[test]
fn truncated_key_d_without_n() {
    expect_error(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &subset(&["e", "d"])),
        "import e, d without n",
    );
    expect_error(
        kae().import(
            "RSA",
            ffi::EVP_PKEY_KEYPAIR,
            &subset(&["e", "d", "rsa-factor1", "rsa-factor2"]),
        ),
        "import e, d, p, q without n",
    );
}

#[test]
fn truncated_key_primes_without_d() {
    import_or_use_fails(
        "n, e and CRT values without d",
        &subset(&[
            "n",
            "e",
            "rsa-factor1",
            "rsa-factor2",
            "rsa-exponent1",
            "rsa-exponent2",
            "rsa-coefficient1",
        ]),
    );
}

#[test]
fn public_key_used_for_private_operations() {
    let kl = kae();
    let pub_params = ok(
        kp().reference.export(ffi::EVP_PKEY_PUBLIC_KEY),
        "public export",
    );
    let key = ok(
        kl.import("RSA", ffi::EVP_PKEY_PUBLIC_KEY, &pub_params),
        "public import",
    );
    let h = sha256(b"m");
    ok(
        verify(
            kl,
            &key,
            &sig_params("pkcs1", Some("SHA256"), None, None),
            &h,
            &ok(
                sign(
                    reference(),
                    &kp().reference,
                    &sig_params("pkcs1", Some("SHA256"), None, None),
                    &h,
                ),
                "sign",
            ),
        ),
        "control: verify with public key",
    );
    expect_error(
        sign(
            kl,
            &key,
            &sig_params("pkcs1", Some("SHA256"), None, None),
            &h,
        ),
        "sign with a public key",
    );
    expect_error(
        digest_sign(kl, &key, Some("SHA256"), &pkcs1_sig(), b"m"),
        "digest-sign with a public key",
    );
    let ct = ok(
        encrypt(reference(), &kp().reference, &Enc::pkcs1().params(), b"x"),
        "encrypt",
    );
    expect_error(
        decrypt(kl, &key, &Enc::pkcs1_explicit().params(), &ct),
        "decrypt with a public key",
    );
    expect_error(
        decrypt(kl, &key, &Enc::pkcs1().params(), &ct),
        "decrypt (implicit rejection) with a public key",
    );
    expect_error(
        check_key(kl, &key, Check::Private),
        "private check of a public key",
    );
    expect_error(
        check_key(kl, &key, Check::Pairwise),
        "pairwise check of a public key",
    );
    // n and e given with key-pair selection.
    import_or_use_fails("n, e only (key-pair selection)", &subset(&["n", "e"]));
    // Key-pair parameters imported with public-only selection carry no private key.
    let key = ok(
        kl.import("RSA", ffi::EVP_PKEY_PUBLIC_KEY, &ref_params()),
        "public-selection import",
    );
    expect_error(
        sign(
            kl,
            &key,
            &sig_params("pkcs1", Some("SHA256"), None, None),
            &h,
        ),
        "sign with public-selection import",
    );
}

#[test]
fn degenerate_key_values() {
    let kl = kae();
    let n = kp().reference.n();
    let good = ok(
        kl.import(
            "RSA",
            ffi::EVP_PKEY_PUBLIC_KEY,
            &ParamsBuilder::new().bn("n", &n).bn("e", &[1, 0, 1]).build(),
        ),
        "control: import n, e",
    );
    ok(
        encrypt(kl, &good, &Enc::pkcs1().params(), b"x"),
        "control: encrypt",
    );
    ok(check_key(kl, &good, Check::Public), "control: public check");
    for (what, params) in [
        (
            "n = 0",
            ParamsBuilder::new()
                .bn("n", &[0])
                .bn("e", &[1, 0, 1])
                .build(),
        ),
        (
            "e = 0",
            ParamsBuilder::new().bn("n", &n).bn("e", &[0]).build(),
        ),
        (
            "n = 1",
            ParamsBuilder::new().bn("n", &[1]).bn("e", &[3]).build(),
        ),
        (
            "even n",
            ParamsBuilder::new()
                .bn("n", &{
                    let mut m = n.clone();
                    *m.last_mut().unwrap() &= 0xfe;
                    m
                })
                .bn("e", &[1, 0, 1])
                .build(),
        ),
    ] {
        match kl.import("RSA", ffi::EVP_PKEY_PUBLIC_KEY, &params) {
            Err(e) => {
                eprintln!("[expected failure] {what}: import refused: {e}");
                assert!(e.has_reason(), "{what}: no reason string: {e}");
            }
            Ok(key) => {
                let r = encrypt(kl, &key, &Enc::pkcs1().params(), b"x");
                let r2 = check_key(kl, &key, Check::Public);
                // Using such a key must fail somewhere: either encryption or the public check.
                match (r, r2) {
                    (Ok(_), Ok(_)) => panic!(
                        "{what}: kae accepted, encrypted with and validated a degenerate key"
                    ),
                    (Err(e), _) | (Ok(_), Err(e)) => {
                        eprintln!("[expected failure] {what}: {e}");
                        assert!(e.has_reason(), "{what}: no reason string: {e}");
                    }
                }
            }
        }
    }
}

/// Inconsistent CRT values: kae's EVP_PKEY_check must notice, and signing must either fail or
/// still produce a correct signature — never emit a faulty one (which would leak a factor).
#[test]
fn inconsistent_crt_values_never_leak() {
    let kl = kae();
    let kp = kp();
    let ex = ref_params();
    let msg = b"fault";
    let p = pkcs1_sig();
    for corrupt in ["rsa-exponent1", "rsa-exponent2", "rsa-coefficient1"] {
        let mut b = ParamsBuilder::new();
        for name in [
            "n",
            "e",
            "d",
            "rsa-factor1",
            "rsa-factor2",
            "rsa-exponent1",
            "rsa-exponent2",
            "rsa-coefficient1",
        ] {
            let mut v = ex.get_bn(name).unwrap();
            if name == corrupt {
                let last = v.len() - 1;
                v[last] ^= 0x02;
            }
            b = b.bn(name, &v);
        }
        let what = format!("key with corrupted {corrupt}");
        let key = match kl.import("RSA", ffi::EVP_PKEY_KEYPAIR, &b.build()) {
            Err(e) => {
                eprintln!("[expected failure] {what}: import refused: {e}");
                assert!(e.has_reason(), "{what}: no reason string: {e}");
                continue;
            }
            Ok(k) => k,
        };
        expect_error(
            check_key(kl, &key, Check::Full),
            &format!("{what}: EVP_PKEY_check"),
        );
        for i in 0..3 {
            match digest_sign(kl, &key, Some("SHA256"), &p, msg) {
                Err(e) => {
                    eprintln!("[expected failure] {what}: sign refused: {e}");
                    assert!(e.has_reason(), "{what}: sign failed without a reason string: {e}");
                }
                Ok(sig) => ok(
                    digest_verify(reference(), &kp.reference, Some("SHA256"), &p, msg, &sig),
                    &format!("{what}: kae emitted a signature that does not verify (fault not caught), try {i}"),
                ),
            }
        }
    }
}

#[test]
fn rsa_pss_key_param_errors() {
    let r = ok(
        reference().keygen(
            "RSA-PSS",
            &ParamsBuilder::new().size_t("bits", 2048).build(),
        ),
        "RSA-PSS keygen",
    );
    let k = ok(kae().transfer(&r), "RSA-PSS into kae");
    // Encryption with an RSA-PSS key is not allowed.
    expect_error(
        encrypt(
            kae(),
            &k,
            &Enc::oaep("SHA256", "SHA256", None).params(),
            b"x",
        ),
        "OAEP encrypt with an RSA-PSS key",
    );
    // Malformed restrictions at import.
    let ex = ok(r.export(ffi::EVP_PKEY_KEYPAIR), "export");
    let mut b = ParamsBuilder::new();
    for n in [
        "n",
        "e",
        "d",
        "rsa-factor1",
        "rsa-factor2",
        "rsa-exponent1",
        "rsa-exponent2",
        "rsa-coefficient1",
    ] {
        b = b.bn(n, &ex.get_bn(n).unwrap());
    }
    let good = b
        .clone()
        .utf8("digest", "SHA256")
        .int("saltlen", 20)
        .build();
    ok(
        kae().import("RSA-PSS", ffi::EVP_PKEY_KEYPAIR, &good),
        "control: RSA-PSS import with restrictions",
    );
    let bad = b.clone().utf8("digest", "NOPE-256").build();
    expect_error(
        kae().import("RSA-PSS", ffi::EVP_PKEY_KEYPAIR, &bad),
        "RSA-PSS import with digest NOPE-256",
    );
    let bad = b.utf8("digest", "SHA256").int("saltlen", -5).build();
    expect_error(
        kae().import("RSA-PSS", ffi::EVP_PKEY_KEYPAIR, &bad),
        "RSA-PSS import with saltlen -5",
    );
}

#[test]
fn keygen_bad_params() {
    let kl = kae();
    ok(
        kl.keygen_rsa(1024, Some(65537)),
        "control: keygen 1024 bits",
    );
    expect_error(kl.keygen_rsa(256, None), "keygen 256 bits");
    expect_error(kl.keygen_rsa(2048, Some(1)), "keygen e = 1");
    expect_error(
        kl.keygen("RSA", &ParamsBuilder::new().utf8("bits", "2048").build()),
        "keygen bits as string",
    );
}
