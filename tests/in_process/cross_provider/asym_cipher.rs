//! Encryption against the default provider: raw, PKCS#1 v1.5 (with implicit rejection), OAEP,
//! and the TLS pre-master secret decryption.

use super::*;

fn raw_encrypt(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let p = Enc::pad("none").params();
    for (i, m) in raw_inputs(kp).iter().enumerate() {
        let what = format!("{bits}-bit raw encrypt input #{i}");
        let ck = ok(encrypt(kl, &kp.kae, &p, m), &format!("{what}: kae"));
        let cr = ok(
            encrypt(rl, &kp.reference, &p, m),
            &format!("{what}: default"),
        );
        assert_same(&ck, &cr, &what);
        assert_same(
            &ok(decrypt(kl, &kp.kae, &p, &cr), "kae raw decrypt"),
            m,
            &format!("{what}: kae decrypts"),
        );
        assert_same(
            &ok(decrypt(rl, &kp.reference, &p, &ck), "default raw decrypt"),
            m,
            &format!("{what}: default decrypts"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// PKCS#1 v1.5 encryption and implicit rejection
// ---------------------------------------------------------------------------------------------

fn pkcs1_encrypt(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let k = kp.k();
    let explicit = Enc::pkcs1_explicit().params();
    let plain = Enc::pkcs1().params();
    for len in [0usize, 1, 32, k - 11] {
        let what = format!("{bits}-bit PKCS#1 encrypt {len} bytes");
        let pt = pattern(len as u64, len);
        let ck = ok(
            encrypt(kl, &kp.kae, &plain, &pt),
            &format!("{what}: kae encrypt"),
        );
        assert_eq!(ck.len(), k, "{what}: ciphertext length");
        assert_same(
            &ok(decrypt(rl, &kp.reference, &plain, &ck), "default decrypt"),
            &pt,
            &format!("{what}: kae → default"),
        );
        let cr = ok(encrypt(rl, &kp.reference, &plain, &pt), "default encrypt");
        assert_same(
            &ok(decrypt(kl, &kp.kae, &explicit, &cr), "kae decrypt (IR off)"),
            &pt,
            &format!("{what}: default → kae"),
        );
        assert_same(
            &ok(
                decrypt(kl, &kp.kae, &plain, &cr),
                "kae decrypt (IR default)",
            ),
            &pt,
            &format!("{what}: default → kae, IR on"),
        );
        let ck2 = ok(encrypt(kl, &kp.kae, &plain, &pt), "kae encrypt again");
        assert_ne!(ck, ck2, "{what}: PKCS#1 v1.5 encryption must be randomized");
    }
    assert_fails(
        encrypt(rl, &kp.reference, &plain, &pattern(1, k - 10)),
        "default: plaintext too long",
    );
    expect_error(
        encrypt(kl, &kp.kae, &plain, &pattern(1, k - 10)),
        "kae: plaintext too long",
    );
}

/// Does a raw decrypted block carry valid PKCS#1 v1.5 type-2 padding?
fn valid_type2(em: &[u8]) -> bool {
    em.len() >= 11
        && em[0] == 0
        && em[1] == 2
        && em[2..10].iter().all(|&b| b != 0)
        && em[10..].iter().any(|&b| b == 0)
}

/// Raw-encrypt (in the default provider) a block that is not a valid type-2 encoding.
fn bad_padding_ciphertext(kp: &KeyPair, kind: u8) -> Vec<u8> {
    let k = kp.k();
    let mut em = vec![0u8; k];
    match kind {
        // block type 1
        0 => {
            em[1] = 1;
            em[2..k - 33].iter_mut().for_each(|b| *b = 0xff);
            em[k - 32..].copy_from_slice(&pattern(5, 32));
        }
        // type 2 without a zero separator
        _ => {
            em[1] = 2;
            em[2..]
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = (i % 251) as u8 + 1);
        }
    }
    assert!(!valid_type2(&em));
    ok(
        encrypt(reference(), &kp.reference, &Enc::pad("none").params(), &em),
        "raw encrypt of bad block",
    )
}

/// A real ciphertext with one byte flipped, checked (with a raw decryption in the default
/// provider) to decrypt to invalid padding.
fn tampered_ciphertext(kp: &KeyPair, pt: &[u8]) -> Vec<u8> {
    let rl = reference();
    let ct = ok(
        encrypt(rl, &kp.reference, &Enc::pkcs1().params(), pt),
        "encrypt",
    );
    let n = kp.reference.n();
    for i in 0..64 {
        let c = flip(&ct, kp.k() - 1 - i, 0x5a);
        if !be_less(&c, &n) {
            continue;
        }
        let em = ok(
            decrypt(rl, &kp.reference, &Enc::pad("none").params(), &c),
            "raw decrypt",
        );
        if !valid_type2(&em) {
            return c;
        }
    }
    panic!("could not construct a tampered ciphertext with invalid padding");
}

/// Padding failures of PKCS#1 v1.5 decryption, as the running core's default provider answers
/// them: from OpenSSL 3.2 a synthetic message (implicit rejection, on by default), which kae
/// must produce byte for byte the same; before 3.2 an error, with `implicit-rejection=1`
/// ignored by both.
fn pkcs1_implicit_rejection(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let k = kp.k();
    let ir = core_has_implicit_rejection();
    let mode = implicit_rejection_mode();
    check_implicit_rejection_param(&kp.kae, &kp.reference);
    let on_default = Enc::pkcs1().params();
    let on_explicit = Enc {
        implicit_rejection: Some(1),
        ..Enc::pkcs1()
    }
    .params();
    let off = Enc::pkcs1_explicit().params();
    let pt = pattern(99, 24);
    let mut cases = vec![
        ("block type 1", bad_padding_ciphertext(kp, 0)),
        ("no separator", bad_padding_ciphertext(kp, 1)),
        ("tampered ciphertext", tampered_ciphertext(kp, &pt)),
        (
            "second tampered ciphertext",
            tampered_ciphertext(kp, &pattern(98, 24)),
        ),
        (
            "third tampered ciphertext",
            tampered_ciphertext(kp, &pattern(97, 40)),
        ),
    ];
    let ran = cases.len();
    let mut synthetic = Vec::new();
    for (name, ct) in cases.drain(..) {
        let what = format!("{bits}-bit PKCS#1 {name} [{mode}]");
        // implicit-rejection=0 is an error in both on every core (before 3.2 because the
        // parameter is ignored and there is no implicit rejection).
        assert_fails(
            decrypt(rl, &kp.reference, &off, &ct),
            &format!("{what}: default provider with implicit-rejection=0"),
        );
        expect_error(
            decrypt(kl, &kp.kae, &off, &ct),
            &format!("{what}: kae with implicit-rejection=0"),
        );
        if !ir {
            // No implicit rejection in this core's default provider, and the parameter is
            // unknown to it: a padding failure is an error, whatever the parameter says.
            for (setting, p) in [
                ("no implicit-rejection parameter", &on_default),
                ("implicit-rejection=1 (ignored)", &on_explicit),
            ] {
                assert_fails(
                    decrypt(rl, &kp.reference, p, &ct),
                    &format!("{what}: default provider, {setting}"),
                );
                expect_error(
                    decrypt(kl, &kp.kae, p, &ct),
                    &format!("{what}: kae, {setting}"),
                );
            }
            continue;
        }
        let theirs = ok(
            decrypt(rl, &kp.reference, &on_default, &ct),
            &format!("{what}: default provider with implicit rejection (default)"),
        );
        let a = ok(
            decrypt(kl, &kp.kae, &on_default, &ct),
            &format!("{what}: kae with implicit rejection (default)"),
        );
        let b = ok(
            decrypt(kl, &kp.kae, &on_default, &ct),
            &format!("{what}: kae again"),
        );
        let c = ok(
            decrypt(kl, &kp.kae, &on_explicit, &ct),
            &format!("{what}: kae implicit-rejection=1"),
        );
        let theirs_explicit = ok(
            decrypt(rl, &kp.reference, &on_explicit, &ct),
            &format!("{what}: default provider implicit-rejection=1"),
        );
        // The strongest check: the synthetic message is the default provider's, bit for bit
        // (same key, same ciphertext, same derivation).
        assert_same(
            &a,
            &theirs,
            &format!("{what}: synthetic message equals the default provider's"),
        );
        assert_same(
            &c,
            &theirs_explicit,
            &format!("{what}: implicit-rejection=1 equals the default provider's"),
        );
        assert_same(
            &a,
            &b,
            &format!("{what}: synthetic message is deterministic"),
        );
        assert_same(
            &a,
            &c,
            &format!("{what}: implicit-rejection=1 is the default"),
        );
        assert!(
            a.len() <= k - 11,
            "{what}: synthetic message longer than k-11 ({})",
            a.len()
        );
        if name == "tampered ciphertext" {
            assert_ne!(a, pt, "{what}: synthetic message equals the real plaintext");
        }
        // Not the message the tampered block still carries after its separator, if any.
        let em = ok(
            decrypt(rl, &kp.reference, &Enc::pad("none").params(), &ct),
            "raw decrypt",
        );
        if let Some(sep) = em[2..]
            .iter()
            .position(|&b| b == 0)
            .filter(|&sep| 2 + sep + 1 < em.len())
        {
            assert_ne!(
                a,
                em[2 + sep + 1..],
                "{what}: returned the bytes after the first zero of the invalid block"
            );
        }
        synthetic.push(a);
    }
    if !ir {
        eprintln!(
            "[implicit rejection] {mode}: {bits}-bit: {ran} padding failures refused by kae \
             and the default provider with each of 3 settings"
        );
        return;
    }
    assert_eq!(synthetic.len(), ran, "{bits}: not every case was checked");
    // Different ciphertexts give different synthetic messages. Each message is empty with
    // probability about 1/(k-10), and two empty ones are equal by nature, so compare the non-empty
    // ones; with five cases, fewer than two non-empty ones happens about once in 10^7 runs.
    let nonempty: Vec<_> = synthetic.iter().filter(|s| !s.is_empty()).collect();
    assert!(
        nonempty.len() >= 2,
        "{bits}: {} of {} synthetic messages are empty (expected at most a rare one)",
        synthetic.len() - nonempty.len(),
        synthetic.len()
    );
    for i in 0..nonempty.len() {
        for j in i + 1..nonempty.len() {
            assert_ne!(
                nonempty[i], nonempty[j],
                "{bits}: different ciphertexts gave the same synthetic message"
            );
        }
    }
    eprintln!(
        "[implicit rejection] {mode}: {bits}-bit: {ran} padding failures answered with the \
         default provider's synthetic message (lengths {:?}), refused with implicit-rejection=0",
        synthetic.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

// ---------------------------------------------------------------------------------------------
// OAEP
// ---------------------------------------------------------------------------------------------

fn oaep(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let k = kp.k() as i64;
    let combos: &[(&str, &str, Option<&[u8]>)] = &[
        ("SHA1", "SHA1", None),
        ("SHA1", "SHA256", Some(LABEL)),
        ("SHA256", "SHA256", Some(LABEL)),
        ("SHA256", "SHA1", None),
        ("SHA384", "SHA384", Some(LABEL)),
        ("SHA512", "SHA512", None),
        ("SHA512", "SHA256", Some(LABEL)),
    ];
    for &(md, mgf1, label) in combos {
        let what = format!("{bits}-bit OAEP {md}/mgf1={mgf1} label={}", label.is_some());
        let h = rl.md_size(md) as i64;
        let max = k - 2 * h - 2;
        let enc = Enc::oaep(md, mgf1, label);
        let p = enc.params();
        if max < 0 {
            assert_fails(
                encrypt(rl, &kp.reference, &p, b""),
                &format!("{what}: default (key too small)"),
            );
            expect_error(
                encrypt(kl, &kp.kae, &p, b""),
                &format!("{what}: kae must refuse (key too small)"),
            );
            continue;
        }
        let max = max as usize;
        for len in [0, max.min(16), max] {
            let pt = pattern(len as u64 + 1, len);
            let ck = ok(
                encrypt(kl, &kp.kae, &p, &pt),
                &format!("{what} {len}: kae encrypt"),
            );
            assert_eq!(ck.len(), kp.k());
            assert_same(
                &ok(decrypt(rl, &kp.reference, &p, &ck), "default decrypt"),
                &pt,
                &format!("{what} {len}: kae → default"),
            );
            let cr = ok(encrypt(rl, &kp.reference, &p, &pt), "default encrypt");
            assert_same(
                &ok(decrypt(kl, &kp.kae, &p, &cr), "kae decrypt"),
                &pt,
                &format!("{what} {len}: default → kae"),
            );
        }
        let pt = pattern(3, max.min(10));
        let cr = ok(encrypt(rl, &kp.reference, &p, &pt), "default encrypt");
        let wrong_label = Enc::oaep(md, mgf1, Some(b"another label")).params();
        expect_error(
            decrypt(kl, &kp.kae, &wrong_label, &cr),
            &format!("{what}: wrong label"),
        );
        if label.is_some() {
            expect_error(
                decrypt(kl, &kp.kae, &Enc::oaep(md, mgf1, None).params(), &cr),
                &format!("{what}: missing label"),
            );
        }
        let other_md = if md == "SHA1" { "SHA224" } else { "SHA1" };
        expect_error(
            decrypt(kl, &kp.kae, &Enc::oaep(other_md, mgf1, label).params(), &cr),
            &format!("{what}: wrong OAEP digest"),
        );
        let other_mgf = if mgf1 == "SHA1" { "SHA224" } else { "SHA1" };
        expect_error(
            decrypt(kl, &kp.kae, &Enc::oaep(md, other_mgf, label).params(), &cr),
            &format!("{what}: wrong MGF1 digest"),
        );
        let n = kp.reference.n();
        let mut tampered = flip(&cr, kp.k() - 2, 0x22);
        if !be_less(&tampered, &n) {
            tampered = flip(&cr, kp.k() - 1, 0x01);
        }
        expect_error(
            decrypt(kl, &kp.kae, &p, &tampered),
            &format!("{what}: tampered ciphertext"),
        );
        assert_fails(
            encrypt(rl, &kp.reference, &p, &pattern(1, max + 1)),
            &format!("{what}: default too long"),
        );
        expect_error(
            encrypt(kl, &kp.kae, &p, &pattern(1, max + 1)),
            &format!("{what}: kae plaintext too long"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// TLS RSA key exchange (pre-master secret decryption)
// ---------------------------------------------------------------------------------------------

/// Decrypt the way libssl does: `EVP_PKEY_CTX_set_rsa_padding(RSA_PKCS1_WITH_TLS_PADDING)` plus
/// the client (and optionally negotiated) version as parameters.
fn tls_decrypt(
    lib: &Lib,
    key: &Pkey,
    ct: &[u8],
    client: u32,
    negotiated: Option<u32>,
) -> Res<Vec<u8>> {
    clear_errors();
    let ctx = lib.pctx(key)?;
    unsafe {
        cvt(ffi::EVP_PKEY_decrypt_init(ctx.0), "EVP_PKEY_decrypt_init")?;
        lib.expect_op(ctx.0, "TLS decrypt");
        cvt(
            ffi::EVP_PKEY_CTX_set_rsa_padding(ctx.0, ffi::RSA_PKCS1_WITH_TLS_PADDING),
            "EVP_PKEY_CTX_set_rsa_padding(RSA_PKCS1_WITH_TLS_PADDING)",
        )?;
        let mut b = ParamsBuilder::new().uint("tls-client-version", client);
        if let Some(v) = negotiated {
            b = b.uint("tls-negotiated-version", v);
        }
        ctx.set_params(&b.build())?;
        let mut out = vec![0u8; 48];
        let mut len = out.len();
        cvt(
            ffi::EVP_PKEY_decrypt(ctx.0, out.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len()),
            &format!("EVP_PKEY_decrypt(TLS) [{}]", lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

fn tls_premaster(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let enc = Enc::pkcs1().params();
    let mut pms = vec![3u8, 3];
    pms.extend(pattern(bits as u64, 46));
    let ct = ok(encrypt(rl, &kp.reference, &enc, &pms), "encrypt premaster");
    for lib in [kl, rl] {
        let what = format!("{bits}-bit TLS premaster [{}]", lib.label);
        let key = kp.key(lib);
        let got = ok(
            tls_decrypt(lib, key, &ct, 0x0303, None),
            &format!("{what}: good premaster"),
        );
        assert_same(&got, &pms, &format!("{what}: good premaster"));

        // Wrong version bytes, bad padding, wrong length: success with 48 fresh random bytes.
        let mut wrong_version = pms.clone();
        wrong_version[1] = 1;
        let ct_wv = ok(encrypt(rl, &kp.reference, &enc, &wrong_version), "encrypt");
        let ct_short = ok(encrypt(rl, &kp.reference, &enc, &pms[..47]), "encrypt");
        for (name, c) in [
            ("wrong version", &ct_wv),
            ("bad padding", &bad_padding_ciphertext(kp, 0)),
            ("no separator", &bad_padding_ciphertext(kp, 1)),
            ("47-byte premaster", &ct_short),
        ] {
            // What the ciphertext really carries (raw decryption in the default provider): the
            // random premaster must be none of its readings: the last 48 bytes of the block, and
            // the bytes after its first zero separator (the message, if the padding had been
            // accepted).
            let em = ok(
                decrypt(rl, &kp.reference, &Enc::pad("none").params(), c),
                "raw decrypt",
            );
            let tail = &em[em.len() - 48..];
            let carried = em[2..]
                .iter()
                .position(|&b| b == 0)
                .map(|sep| &em[2 + sep + 1..]);
            let a = ok(
                tls_decrypt(lib, key, c, 0x0303, None),
                &format!("{what} {name}: must not fail"),
            );
            let b = ok(
                tls_decrypt(lib, key, c, 0x0303, None),
                &format!("{what} {name}: second call"),
            );
            assert_eq!(a.len(), 48, "{what} {name}: length");
            assert_eq!(b.len(), 48, "{what} {name}: length");
            assert_ne!(
                &a[..],
                tail,
                "{what} {name}: returned the last 48 bytes of the block"
            );
            assert_ne!(
                a, b,
                "{what} {name}: the random premaster must differ between calls"
            );
            if let Some(m) = carried.filter(|m| !m.is_empty() && m.len() <= 48) {
                assert_ne!(
                    &a[..m.len()],
                    m,
                    "{what} {name}: starts with the message the block carries"
                );
                assert_ne!(
                    &a[48 - m.len()..],
                    m,
                    "{what} {name}: ends with the message the block carries"
                );
            }
            assert!(
                a.iter().any(|&x| x != 0),
                "{what} {name}: all-zero premaster"
            );
            assert_eq!(
                peek_error(),
                None,
                "{what} {name}: left an error on the queue"
            );
        }

        // Only RSA_PKCS1_WITH_TLS_PADDING selects the premaster rules: pad-mode "pkcs1" with a
        // client version set is plain PKCS#1 (implicit rejection off here, so that both
        // providers of every core return the block's own message).
        let p = Enc {
            tls_client_version: Some(0x0303),
            ..Enc::pkcs1_explicit()
        }
        .params();
        let got = ok(
            decrypt(lib, key, &p, &ct_wv),
            &format!("{what}: pkcs1 + tls-client-version, wrong version"),
        );
        assert_same(
            &got,
            &wrong_version,
            &format!("{what}: pkcs1 + tls-client-version is plain PKCS#1"),
        );

        // Version-rollback workaround: a premaster carrying the negotiated version is accepted
        // when the negotiated version is passed too.
        let got = ok(
            tls_decrypt(lib, key, &ct_wv, 0x0303, Some(0x0301)),
            &format!("{what}: negotiated version"),
        );
        assert_same(
            &got,
            &wrong_version,
            &format!("{what}: premaster with negotiated version accepted"),
        );
    }
}

per_size!(
    raw_encrypt,
    pkcs1_encrypt,
    pkcs1_implicit_rejection,
    oaep,
    tls_premaster,
);
