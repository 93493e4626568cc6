//! Signatures against the default provider: PKCS#1 v1.5, PSS, X9.31, raw, the legacy ctrl
//! setters, and concurrent signing.

use super::*;

// ---------------------------------------------------------------------------------------------
// PKCS#1 v1.5 signatures
// ---------------------------------------------------------------------------------------------

fn pkcs1_sign(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let p = sig_params("pkcs1", None, None, None);
    let msg = pattern(bits as u64, 1000);
    for md in PKCS1_DIGESTS {
        let what = format!("{bits}-bit PKCS#1 {md}");
        let s_kae = ok(
            digest_sign(kl, &kp.kae, Some(md), &p, &msg),
            &format!("{what}: kae sign"),
        );
        let s_ref = ok(
            digest_sign(rl, &kp.reference, Some(md), &p, &msg),
            &format!("{what}: default sign"),
        );
        assert_eq!(s_kae.len(), kp.k(), "{what}: signature length");
        assert_same(&s_kae, &s_ref, &format!("{what}: deterministic signature"));
        ok(
            digest_verify(rl, &kp.reference, Some(md), &p, &msg, &s_kae),
            &format!("{what}: default verifies kae's"),
        );
        ok(
            digest_verify(kl, &kp.kae, Some(md), &p, &msg, &s_ref),
            &format!("{what}: kae verifies default's"),
        );
        let bad_msg = flip(&msg, 17, 0x01);
        assert_fails(
            digest_verify(kl, &kp.kae, Some(md), &p, &bad_msg, &s_ref),
            &format!("{what}: tampered message"),
        );
        let bad_sig = flip(&s_ref, kp.k() / 2, 0x40);
        assert_fails(
            digest_verify(kl, &kp.kae, Some(md), &p, &msg, &bad_sig),
            &format!("{what}: tampered signature"),
        );
    }
    // No pad-mode parameter at all: PKCS#1 v1.5 is the default for RSA keys.
    let s = ok(
        digest_sign(kl, &kp.kae, Some("SHA256"), &Params::empty(), &msg),
        "kae sign without params",
    );
    let r = ok(
        digest_sign(rl, &kp.reference, Some("SHA256"), &p, &msg),
        "default sign",
    );
    assert_same(&s, &r, &format!("{bits}: default padding is PKCS#1 v1.5"));
    // Signature from one digest does not verify under another.
    assert_fails(
        digest_verify(kl, &kp.kae, Some("SHA384"), &p, &msg, &r),
        "SHA-256 signature checked as SHA-384",
    );
    // Empty and single-byte messages.
    for m in [&b""[..], &b"x"[..]] {
        let s = ok(
            digest_sign(kl, &kp.kae, Some("SHA256"), &p, m),
            "kae sign short message",
        );
        let r = ok(
            digest_sign(rl, &kp.reference, Some("SHA256"), &p, m),
            "default sign short message",
        );
        assert_same(
            &s,
            &r,
            &format!("{bits}: PKCS#1 over {}-byte message", m.len()),
        );
    }
}

fn pkcs1_md5_sha1(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let msg = pattern(7, 300);
    let mut tbs = rl.digest("MD5", &msg);
    tbs.extend(rl.digest("SHA1", &msg));
    assert_eq!(tbs.len(), 36);
    let p = sig_params("pkcs1", Some("MD5-SHA1"), None, None);
    let s_kae = ok(sign(kl, &kp.kae, &p, &tbs), "kae MD5-SHA1 sign");
    let s_ref = ok(sign(rl, &kp.reference, &p, &tbs), "default MD5-SHA1 sign");
    assert_same(&s_kae, &s_ref, &format!("{bits}: MD5-SHA1 signature"));
    ok(
        verify(rl, &kp.reference, &p, &tbs, &s_kae),
        "default verifies kae MD5-SHA1",
    );
    ok(
        verify(kl, &kp.kae, &p, &tbs, &s_ref),
        "kae verifies default MD5-SHA1",
    );
    assert_fails(
        verify(kl, &kp.kae, &p, &flip(&tbs, 3, 1), &s_ref),
        "MD5-SHA1 tampered input",
    );
    // No DigestInfo: the recovered block is exactly the 36 input bytes.
    let rec = ok(
        verify_recover(kl, &kp.kae, &p, &s_ref),
        "kae verify_recover MD5-SHA1",
    );
    assert_same(&rec, &tbs, "MD5-SHA1 verify_recover");
    let raw = ok(
        verify_recover(kl, &kp.kae, &sig_params("pkcs1", None, None, None), &s_ref),
        "recover w/o md",
    );
    assert_same(&raw, &tbs, "PKCS#1 type-1 payload of an MD5-SHA1 signature");
}

fn pkcs1_prehashed(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let msg = pattern(11, 777);
    for md in ["SHA1", "SHA256", "SHA512", "SHA3-256"] {
        let h = rl.digest(md, &msg);
        let p = sig_params("pkcs1", Some(md), None, None);
        let s_kae = ok(
            sign(kl, &kp.kae, &p, &h),
            &format!("kae EVP_PKEY_sign {md}"),
        );
        let s_ds = ok(
            digest_sign(
                rl,
                &kp.reference,
                Some(md),
                &sig_params("pkcs1", None, None, None),
                &msg,
            ),
            "default digest sign",
        );
        assert_same(
            &s_kae,
            &s_ds,
            &format!("{bits}: EVP_PKEY_sign({md}) vs digest-sign"),
        );
        ok(verify(kl, &kp.kae, &p, &h, &s_ds), "kae EVP_PKEY_verify");
        ok(
            verify(rl, &kp.reference, &p, &h, &s_kae),
            "default EVP_PKEY_verify",
        );
        // verify_recover with the digest set returns the hash …
        let rec_k = ok(
            verify_recover(kl, &kp.kae, &p, &s_ds),
            "kae verify_recover with md",
        );
        let rec_r = ok(
            verify_recover(rl, &kp.reference, &p, &s_ds),
            "default verify_recover with md",
        );
        assert_same(
            &rec_k,
            &h,
            &format!("{bits}: verify_recover({md}) returns the hash"),
        );
        assert_same(&rec_k, &rec_r, "verify_recover with md");
        // … and without it the whole DigestInfo.
        let p0 = sig_params("pkcs1", None, None, None);
        let di_k = ok(
            verify_recover(kl, &kp.kae, &p0, &s_ds),
            "kae verify_recover without md",
        );
        let di_r = ok(
            verify_recover(rl, &kp.reference, &p0, &s_ds),
            "default verify_recover without md",
        );
        assert_same(&di_k, &di_r, &format!("{bits}: DigestInfo for {md}"));
        assert!(
            di_k.len() > h.len() && di_k.ends_with(&h),
            "DigestInfo ends with the hash"
        );
        assert_eq!(di_k[0], 0x30, "DigestInfo is a DER SEQUENCE");
    }
}

// ---------------------------------------------------------------------------------------------
// PSS
// ---------------------------------------------------------------------------------------------

fn pss(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let em_len = pss_em_len(bits);
    let msg = pattern(bits as u64 + 3, 513);
    let salts = [
        Salt::Digest,
        Salt::Max,
        Salt::Auto,
        Salt::Len(0),
        Salt::Len(20),
        Salt::Len(32),
    ];
    for md in PSS_DIGESTS {
        let h = rl.md_size(md);
        let other = if *md == "SHA256" { "SHA1" } else { "SHA256" };
        for mgf1 in [*md, other] {
            for salt in salts {
                let what = format!("{bits}-bit PSS {md} mgf1={mgf1} salt={salt:?}");
                let slen = match salt {
                    Salt::Digest => h,
                    Salt::Max | Salt::Auto => 0,
                    Salt::Len(n) => n as usize,
                };
                let feasible = h + slen + 2 <= em_len;
                let p = sig_params("pss", None, Some(mgf1), Some(salt));
                let sk = digest_sign(kl, &kp.kae, Some(md), &p, &msg);
                let sr = digest_sign(rl, &kp.reference, Some(md), &p, &msg);
                if !feasible {
                    assert_fails(sr, &format!("{what}: default (infeasible)"));
                    expect_error(sk, &format!("{what}: kae must refuse (salt does not fit)"));
                    continue;
                }
                let sk = ok(sk, &format!("{what}: kae sign"));
                let sr = ok(sr, &format!("{what}: default sign"));
                assert_eq!(sk.len(), kp.k(), "{what}: signature length");
                // The verifier's salt setting: explicit lengths are checked, max/auto recover it.
                let vsalt = match salt {
                    Salt::Max | Salt::Auto => Salt::Auto,
                    s => s,
                };
                let pv = sig_params("pss", None, Some(mgf1), Some(vsalt));
                let pauto = sig_params("pss", None, Some(mgf1), Some(Salt::Auto));
                ok(
                    digest_verify(rl, &kp.reference, Some(md), &pv, &msg, &sk),
                    &format!("{what}: default verifies kae's"),
                );
                ok(
                    digest_verify(rl, &kp.reference, Some(md), &pauto, &msg, &sk),
                    &format!("{what}: default verifies kae's (auto)"),
                );
                ok(
                    digest_verify(kl, &kp.kae, Some(md), &pv, &msg, &sr),
                    &format!("{what}: kae verifies default's"),
                );
                ok(
                    digest_verify(kl, &kp.kae, Some(md), &pauto, &msg, &sr),
                    &format!("{what}: kae verifies default's (auto)"),
                );
                ok(
                    digest_verify(kl, &kp.kae, Some(md), &pauto, &msg, &sk),
                    &format!("{what}: kae verifies its own"),
                );
                if salt == Salt::Len(0) {
                    assert_same(&sk, &sr, &format!("{what}: zero-salt PSS is deterministic"));
                } else {
                    assert_ne!(sk, sr, "{what}: randomized PSS signatures should differ");
                }
                assert_fails(
                    digest_verify(
                        kl,
                        &kp.kae,
                        Some(md),
                        &pauto,
                        &msg,
                        &flip(&sr, kp.k() - 5, 0x10),
                    ),
                    &format!("{what}: tampered signature"),
                );
                assert_fails(
                    digest_verify(kl, &kp.kae, Some(md), &pauto, &flip(&msg, 0, 0x80), &sr),
                    &format!("{what}: tampered message"),
                );
                if mgf1 != *md {
                    let wrong = sig_params("pss", None, Some(md), Some(Salt::Auto));
                    assert_fails(
                        digest_verify(kl, &kp.kae, Some(md), &wrong, &msg, &sr),
                        &format!("{what}: wrong MGF1 digest"),
                    );
                }
                if salt == Salt::Len(20) && h + 32 + 2 <= em_len {
                    let wrong = sig_params("pss", None, Some(mgf1), Some(Salt::Len(32)));
                    assert_fails(
                        digest_verify(kl, &kp.kae, Some(md), &wrong, &msg, &sr),
                        &format!("{what}: wrong salt length"),
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// X9.31
// ---------------------------------------------------------------------------------------------

fn x931(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let p = sig_params("x931", None, None, None);
    let msg = pattern(31, 200);
    for md in X931_DIGESTS {
        let what = format!("{bits}-bit X9.31 {md}");
        let sk = digest_sign(kl, &kp.kae, Some(md), &p, &msg);
        let sr = digest_sign(rl, &kp.reference, Some(md), &p, &msg);
        match (sk, sr) {
            (Ok(sk), Ok(sr)) => {
                assert_same(&sk, &sr, &format!("{what}: deterministic signature"));
                ok(
                    digest_verify(rl, &kp.reference, Some(md), &p, &msg, &sk),
                    &format!("{what}: default verifies kae's"),
                );
                ok(
                    digest_verify(kl, &kp.kae, Some(md), &p, &msg, &sr),
                    &format!("{what}: kae verifies default's"),
                );
                assert_fails(
                    digest_verify(kl, &kp.kae, Some(md), &p, &flip(&msg, 9, 4), &sr),
                    &format!("{what}: tampered msg"),
                );
                assert_fails(
                    digest_verify(kl, &kp.kae, Some(md), &p, &msg, &flip(&sr, 3, 4)),
                    &format!("{what}: tampered sig"),
                );
            }
            (Err(ek), Err(er)) => {
                // X9.31 needs the 0x6B.. encoded block to be below the modulus; the default
                // provider fails for sizes that are not a multiple of 8 (whose top byte is small).
                assert!(
                    bits % 8 != 0,
                    "{what}: both providers failed on a byte-aligned key:\n{ek}\n{er}"
                );
                assert!(
                    ek.has_reason(),
                    "{what}: kae failed without an error reason: {ek}"
                );
                eprintln!("{what}: not possible with this modulus (both providers refuse)");
            }
            (Ok(_), Err(er)) => panic!("{what}: kae signed but the default provider refuses: {er}"),
            (Err(ek), Ok(_)) => panic!("{what}: kae fails where the default provider signs: {ek}"),
        }
    }
    // X9.31 has no SHA-224 identifier.
    assert_fails(
        digest_sign(rl, &kp.reference, Some("SHA224"), &p, &msg),
        "default X9.31 SHA-224",
    );
    expect_error(
        digest_sign(kl, &kp.kae, Some("SHA224"), &p, &msg),
        "kae X9.31 SHA-224",
    );
}

fn raw_sign(bits: u32) {
    let kp = keypair(bits);
    let (kl, rl) = (kae(), reference());
    let p = sig_params("none", None, None, None);
    for (i, m) in raw_inputs(kp).iter().enumerate() {
        let what = format!("{bits}-bit raw sign input #{i}");
        assert_eq!(m.len(), kp.k());
        let sk = ok(sign(kl, &kp.kae, &p, m), &format!("{what}: kae"));
        let sr = ok(sign(rl, &kp.reference, &p, m), &format!("{what}: default"));
        assert_same(&sk, &sr, &what);
        let rk = ok(
            verify_recover(kl, &kp.kae, &p, &sr),
            &format!("{what}: kae verify_recover"),
        );
        let rr = ok(
            verify_recover(rl, &kp.reference, &p, &sk),
            &format!("{what}: default verify_recover"),
        );
        assert_same(&rk, m, &format!("{what}: kae recovers the input"));
        assert_same(&rr, m, &format!("{what}: default recovers the input"));
        ok(
            verify(kl, &kp.kae, &p, m, &sr),
            &format!("{what}: kae verify"),
        );
        ok(
            verify(rl, &kp.reference, &p, m, &sk),
            &format!("{what}: default verify"),
        );
        if i == 0 {
            assert_fails(
                verify(kl, &kp.kae, &p, &flip(m, kp.k() - 1, 1), &sr),
                &format!("{what}: wrong input"),
            );
        }
    }
}

per_size!(
    pkcs1_sign,
    pkcs1_md5_sha1,
    pkcs1_prehashed,
    pss,
    x931,
    raw_sign,
);

/// The control-style setters that libssl and the openssl apps use.
#[test]
fn legacy_ctrl_setters() {
    let (kl, rl) = (kae(), reference());
    let kp = keypair(2048);
    let hash = rl.digest("SHA256", b"ctrl api");
    unsafe {
        clear_errors();
        let ctx = ok(kl.pctx(&kp.kae), "ctx");
        ok(
            cvt(ffi::EVP_PKEY_sign_init(ctx.0), "sign_init"),
            "sign_init",
        );
        kl.expect_op(ctx.0, "ctrl sign");
        let sha256 = ffi::EVP_MD_fetch(kl.ptr, intern("SHA256").as_ptr(), ptr::null());
        let sha1 = ffi::EVP_MD_fetch(kl.ptr, intern("SHA1").as_ptr(), ptr::null());
        assert!(!sha256.is_null() && !sha1.is_null());
        ok(
            cvt(
                ffi::EVP_PKEY_CTX_set_rsa_padding(ctx.0, ffi::RSA_PKCS1_PSS_PADDING),
                "set_rsa_padding",
            ),
            "pad",
        );
        ok(
            cvt(
                ffi::EVP_PKEY_CTX_set_signature_md(ctx.0, sha256),
                "set_signature_md",
            ),
            "md",
        );
        ok(
            cvt(
                ffi::EVP_PKEY_CTX_set_rsa_mgf1_md(ctx.0, sha1),
                "set_rsa_mgf1_md",
            ),
            "mgf1",
        );
        ok(
            cvt(
                ffi::EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx.0, 17),
                "set_rsa_pss_saltlen",
            ),
            "salt",
        );
        let mut sig = vec![0u8; kp.k()];
        let mut len = sig.len();
        ok(
            cvt(
                ffi::EVP_PKEY_sign(ctx.0, sig.as_mut_ptr(), &mut len, hash.as_ptr(), hash.len()),
                "sign",
            ),
            "sign",
        );
        sig.truncate(len);
        ffi::EVP_MD_free(sha256);
        ffi::EVP_MD_free(sha1);
        let p = sig_params("pss", Some("SHA256"), Some("SHA1"), Some(Salt::Len(17)));
        ok(
            verify(rl, &kp.reference, &p, &hash, &sig),
            "default verifies the ctrl-configured PSS signature",
        );
        let wrong = sig_params("pss", Some("SHA256"), Some("SHA1"), Some(Salt::Len(18)));
        assert_fails(
            verify(rl, &kp.reference, &wrong, &hash, &sig),
            "salt length really was 17",
        );
    }
}

/// Several threads signing with the same kae key at once.
#[test]
fn concurrent_signing() {
    let kp = keypair(2048);
    let p = sig_params("pkcs1", None, None, None);
    let expected = ok(
        digest_sign(reference(), &kp.reference, Some("SHA256"), &p, b"threads"),
        "reference",
    );
    std::thread::scope(|s| {
        for t in 0..4 {
            let expected = &expected;
            s.spawn(move || {
                let p = sig_params("pkcs1", None, None, None);
                for i in 0..25 {
                    let sig = ok(
                        digest_sign(kae(), &kp.kae, Some("SHA256"), &p, b"threads"),
                        "kae sign",
                    );
                    assert_same(&sig, expected, &format!("thread {t} iteration {i}"));
                }
            });
        }
    });
}
