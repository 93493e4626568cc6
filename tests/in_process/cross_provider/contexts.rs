//! Operation contexts: streaming digest-sign, context duplication, context parameters.

use super::*;

// ---------------------------------------------------------------------------------------------
// Streaming digest-sign, context duplication, context parameters
// ---------------------------------------------------------------------------------------------

fn sign_final(m: &MdCtx, k: usize) -> Res<Vec<u8>> {
    let mut sig = vec![0u8; k];
    let mut len = sig.len();
    cvt(
        unsafe { ffi::EVP_DigestSignFinal(m.0, sig.as_mut_ptr(), &mut len) },
        "EVP_DigestSignFinal",
    )?;
    sig.truncate(len);
    Ok(sig)
}

fn sign_update(m: &MdCtx, data: &[u8]) {
    let r = unsafe { ffi::EVP_DigestSignUpdate(m.0, data.as_ptr().cast(), data.len()) };
    ok(cvt(r, "EVP_DigestSignUpdate"), "update");
}

fn md_copy(m: &MdCtx) -> MdCtx {
    let c = MdCtx::new();
    let r = unsafe { ffi::EVP_MD_CTX_copy_ex(c.0, m.0) };
    ok(
        cvt(r, "EVP_MD_CTX_copy_ex"),
        "copy a kae digest-sign context",
    );
    c
}

/// Update/Final in pieces and EVP_MD_CTX_copy_ex in the middle (libssl's handshake signing
/// does both), for PKCS#1 (deterministic, compared with default) and PSS (verified).
#[test]
fn streaming_sign_and_context_copy() {
    let (kl, rl) = (kae(), reference());
    let kp = keypair(2048);
    let k = kp.k();
    let (a, b, c) = (pattern(1, 1000), pattern(2, 3333), pattern(3, 17));
    let cat = |x: &[u8], y: &[u8]| [x, y].concat();
    let p = sig_params("pkcs1", None, None, None);
    for md in ["SHA256", "SHA384", "SHA1"] {
        let m = ok(
            digest_init(kl, &kp.kae, Some(md), &p, true),
            "DigestSignInit",
        );
        sign_update(&m, &a[..10]);
        sign_update(&m, &a[10..]);
        let dup = md_copy(&m);
        sign_update(&m, &b);
        sign_update(&dup, &c);
        let s1 = ok(sign_final(&m, k), "final");
        let s2 = ok(sign_final(&dup, k), "final on the copy");
        let r1 = ok(
            digest_sign(rl, &kp.reference, Some(md), &p, &cat(&a, &b)),
            "reference",
        );
        let r2 = ok(
            digest_sign(rl, &kp.reference, Some(md), &p, &cat(&a, &c)),
            "reference",
        );
        assert_same(&s1, &r1, &format!("streamed PKCS#1 {md}"));
        assert_same(
            &s2,
            &r2,
            &format!("streamed PKCS#1 {md} on the copied context"),
        );
    }
    let pss = sig_params("pss", None, Some("SHA256"), Some(Salt::Len(32)));
    let m = ok(
        digest_init(kl, &kp.kae, Some("SHA256"), &pss, true),
        "DigestSignInit PSS",
    );
    sign_update(&m, &a);
    let dup = md_copy(&m);
    sign_update(&dup, &b);
    let s1 = ok(sign_final(&m, k), "final");
    let s2 = ok(sign_final(&dup, k), "final on the copy");
    ok(
        digest_verify(rl, &kp.reference, Some("SHA256"), &pss, &a, &s1),
        "PSS streamed",
    );
    ok(
        digest_verify(rl, &kp.reference, Some("SHA256"), &pss, &cat(&a, &b), &s2),
        "PSS streamed on the copied context",
    );
    // Streaming verification in kae, with a copy.
    let r = ok(
        digest_sign(rl, &kp.reference, Some("SHA512"), &p, &cat(&a, &b)),
        "reference",
    );
    let m = ok(
        digest_init(kl, &kp.kae, Some("SHA512"), &p, false),
        "DigestVerifyInit",
    );
    unsafe {
        ok(
            cvt(
                ffi::EVP_DigestVerifyUpdate(m.0, a.as_ptr().cast(), a.len()),
                "update",
            ),
            "update",
        );
        let dup = md_copy(&m);
        ok(
            cvt(
                ffi::EVP_DigestVerifyUpdate(m.0, b.as_ptr().cast(), b.len()),
                "update",
            ),
            "update",
        );
        ok(
            cvt(
                ffi::EVP_DigestVerifyUpdate(dup.0, c.as_ptr().cast(), c.len()),
                "update",
            ),
            "update",
        );
        ok(
            cvt(
                ffi::EVP_DigestVerifyFinal(m.0, r.as_ptr(), r.len()),
                "EVP_DigestVerifyFinal",
            ),
            "streamed verify",
        );
        assert_fails(
            cvt(
                ffi::EVP_DigestVerifyFinal(dup.0, r.as_ptr(), r.len()),
                "EVP_DigestVerifyFinal",
            ),
            "copied verify context with different data",
        );
    }
}

/// EVP_PKEY_CTX_dup of a configured kae cipher / signature context.
#[test]
fn pkey_context_dup() {
    let (kl, rl) = (kae(), reference());
    let kp = keypair(2048);
    let oaep = Enc::oaep("SHA256", "SHA1", Some(LABEL)).params();
    let ct = ok(encrypt(rl, &kp.reference, &oaep, b"dup me"), "encrypt");
    unsafe {
        clear_errors();
        let ctx = ok(kl.pctx(&kp.kae), "ctx");
        ok(
            cvt(ffi::EVP_PKEY_decrypt_init(ctx.0), "decrypt_init"),
            "init",
        );
        ok(ctx.set_params(&oaep), "params");
        let dup = PkeyCtx(ok(
            cvt_p(ffi::EVP_PKEY_CTX_dup(ctx.0), "EVP_PKEY_CTX_dup"),
            "dup",
        ));
        kl.expect_op(dup.0, "duplicated decrypt context");
        drop(ctx); // the copy must not depend on the original
        let mut out = vec![0u8; kp.k()];
        let mut len = out.len();
        ok(
            cvt(
                ffi::EVP_PKEY_decrypt(dup.0, out.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len()),
                "EVP_PKEY_decrypt on the copy",
            ),
            "decrypt with duplicated context",
        );
        assert_eq!(&out[..len], b"dup me");

        let h = rl.digest("SHA256", b"dup");
        let ctx = ok(kl.pctx(&kp.kae), "ctx");
        ok(cvt(ffi::EVP_PKEY_sign_init(ctx.0), "sign_init"), "init");
        ok(
            ctx.set_params(&sig_params("pkcs1", Some("SHA256"), None, None)),
            "params",
        );
        let dup = PkeyCtx(ok(
            cvt_p(ffi::EVP_PKEY_CTX_dup(ctx.0), "EVP_PKEY_CTX_dup"),
            "dup",
        ));
        drop(ctx);
        let mut sig = vec![0u8; kp.k()];
        let mut len = sig.len();
        ok(
            cvt(
                ffi::EVP_PKEY_sign(dup.0, sig.as_mut_ptr(), &mut len, h.as_ptr(), h.len()),
                "EVP_PKEY_sign on the copy",
            ),
            "sign with duplicated context",
        );
        let expected = ok(
            sign(
                rl,
                &kp.reference,
                &sig_params("pkcs1", Some("SHA256"), None, None),
                &h,
            ),
            "reference",
        );
        assert_same(
            &sig[..len],
            &expected,
            "signature from a duplicated context",
        );
    }
}

/// Read an octet-string or UTF-8 context parameter (None if the provider does not return it).
fn ctx_param(pctx: *mut ffi::EVP_PKEY_CTX, name: &str, utf8: bool) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 512];
    let mut params = [
        ffi::OSSL_PARAM {
            key: intern(name).as_ptr(),
            data_type: if utf8 {
                ffi::OSSL_PARAM_UTF8_STRING
            } else {
                ffi::OSSL_PARAM_OCTET_STRING
            },
            data: buf.as_mut_ptr().cast(),
            data_size: buf.len(),
            return_size: ffi::OSSL_PARAM_UNMODIFIED,
        },
        ffi::OSSL_PARAM {
            key: ptr::null(),
            data_type: 0,
            data: ptr::null_mut(),
            data_size: 0,
            return_size: 0,
        },
    ];
    let r = unsafe { ffi::EVP_PKEY_CTX_get_params(pctx, params.as_mut_ptr()) };
    clear_errors();
    if r != 1 || params[0].return_size == ffi::OSSL_PARAM_UNMODIFIED {
        return None;
    }
    buf.truncate(params[0].return_size);
    Some(buf)
}

/// The signature AlgorithmIdentifier (used when signing certificates, CMS, OCSP…) and the
/// readable context parameters must match the default provider's.
#[test]
fn signature_context_params_and_algorithm_id() {
    let (kl, rl) = (kae(), reference());
    let kp = keypair(2048);
    let cases: &[(&str, Params)] = &[
        ("SHA1", sig_params("pkcs1", None, None, None)),
        ("SHA256", sig_params("pkcs1", None, None, None)),
        ("SHA384", sig_params("pkcs1", None, None, None)),
        ("SHA512", sig_params("pkcs1", None, None, None)),
        ("SHA3-256", sig_params("pkcs1", None, None, None)),
        (
            "SHA256",
            sig_params("pss", None, Some("SHA256"), Some(Salt::Len(32))),
        ),
        (
            "SHA256",
            sig_params("pss", None, Some("SHA256"), Some(Salt::Digest)),
        ),
        (
            "SHA384",
            sig_params("pss", None, Some("SHA1"), Some(Salt::Len(20))),
        ),
        (
            "SHA512",
            sig_params("pss", None, Some("SHA512"), Some(Salt::Len(64))),
        ),
    ];
    for (i, (md, p)) in cases.iter().enumerate() {
        let mk = ok(digest_init(kl, &kp.kae, Some(md), p, true), "kae init");
        let mr = ok(
            digest_init(rl, &kp.reference, Some(md), p, true),
            "default init",
        );
        let (pk, pr) = unsafe {
            (
                ffi::EVP_MD_CTX_get_pkey_ctx(mk.0),
                ffi::EVP_MD_CTX_get_pkey_ctx(mr.0),
            )
        };
        let what = format!("case {i} ({md})");
        let ar = ctx_param(pr, "algorithm-id", false).expect("default provides algorithm-id");
        let ak = ctx_param(pk, "algorithm-id", false)
            .unwrap_or_else(|| panic!("{what}: kae gives no algorithm-id"));
        assert_same(&ak, &ar, &format!("{what}: algorithm-id"));
        let padr = ctx_param(pr, "pad-mode", true);
        let padk = ctx_param(pk, "pad-mode", true);
        assert_eq!(padk, padr, "{what}: pad-mode read back");
        let sr = ctx_param(pr, "saltlen", true);
        let sk = ctx_param(pk, "saltlen", true);
        assert_eq!(sk.is_some(), sr.is_some(), "{what}: saltlen readable");
        assert!(
            ctx_param(pk, "digest", true).is_some(),
            "{what}: kae does not return 'digest'"
        );
    }
}
