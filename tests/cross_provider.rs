//! kae (loaded as a module into its own library context) against OpenSSL's default provider
//! (in another library context), on the same keys: every operation in both directions, byte
//! equality where the scheme is deterministic, and the failure cases that must fail in kae.
//!
//! Per-size tests are generated as `<test>::rsa<bits>` for every size in `common::SIZES`.

mod common;

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

// ---------------------------------------------------------------------------------------------
// Module sanity
// ---------------------------------------------------------------------------------------------

#[test]
fn module_loads_and_serves_rsa() {
    let k = kae();
    eprintln!(
        "kae module loaded as '{}', reports name {:?}; default provider available in its context: {}",
        k.prov_name,
        k.provider_reported_name(),
        k.default_available
    );
    let propq = CString::new(KAE_PROPQ).unwrap();
    for alg in ["RSA", "RSA-PSS"] {
        let a = CString::new(alg).unwrap();
        unsafe {
            let km = ffi::EVP_KEYMGMT_fetch(k.ptr, a.as_ptr(), propq.as_ptr());
            assert!(
                !km.is_null(),
                "no {alg} key management in kae: {}",
                take_errors("fetch")
            );
            k.expect_provider(ffi::EVP_KEYMGMT_get0_provider(km), "EVP_KEYMGMT_fetch");
            ffi::EVP_KEYMGMT_free(km);
        }
    }
    unsafe {
        let a = CString::new("RSA").unwrap();
        let s = ffi::EVP_SIGNATURE_fetch(k.ptr, a.as_ptr(), propq.as_ptr());
        assert!(
            !s.is_null(),
            "no RSA signature in kae: {}",
            take_errors("fetch")
        );
        k.expect_provider(ffi::EVP_SIGNATURE_get0_provider(s), "EVP_SIGNATURE_fetch");
        ffi::EVP_SIGNATURE_free(s);
        let c = ffi::EVP_ASYM_CIPHER_fetch(k.ptr, a.as_ptr(), propq.as_ptr());
        assert!(
            !c.is_null(),
            "no RSA asym cipher in kae: {}",
            take_errors("fetch")
        );
        k.expect_provider(
            ffi::EVP_ASYM_CIPHER_get0_provider(c),
            "EVP_ASYM_CIPHER_fetch",
        );
        ffi::EVP_ASYM_CIPHER_free(c);
    }
}

#[test]
fn kae_context_is_self_sufficient() {
    // The kae context holds only the kae module: digests and random numbers must come through it.
    let k = kae();
    unsafe {
        let md = ffi::EVP_MD_fetch(k.ptr, intern("SHA256").as_ptr(), intern(KAE_PROPQ).as_ptr());
        assert!(
            !md.is_null(),
            "no SHA256 with provider=kae in the kae context: {}",
            take_errors("fetch")
        );
        ffi::EVP_MD_free(md);
        let mut buf = [0u8; 32];
        clear_errors();
        let r = ffi::RAND_bytes_ex(k.ptr, buf.as_mut_ptr(), buf.len(), 0);
        assert_eq!(
            r,
            1,
            "RAND_bytes_ex in the kae context: {}",
            take_errors("RAND_bytes_ex")
        );
        assert!(buf.iter().any(|&b| b != 0));
    }
    assert_eq!(
        k.digest("SHA256", b"abc"),
        reference().digest("SHA256", b"abc")
    );
}

// ---------------------------------------------------------------------------------------------
// Keys: parameters, round trips, checks
// ---------------------------------------------------------------------------------------------

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

fn key_roundtrip(bits: u32) {
    let kp = keypair(bits);
    kae().expect_key(&kp.kae, "cached key");
    assert!(kp.kae.is_a("RSA"));
    let ex_kae = ok(kp.kae.export(ffi::EVP_PKEY_KEYPAIR), "export from kae");
    let ex_ref = ok(
        kp.reference.export(ffi::EVP_PKEY_KEYPAIR),
        "export from default",
    );
    for name in KEY_BNS {
        let a = ex_kae
            .get_bn(name)
            .unwrap_or_else(|| panic!("kae export lacks {name} (has {:?})", ex_kae.keys()));
        let b = ex_ref.get_bn(name).unwrap();
        assert_same(&a, &b, &format!("{bits}: exported {name}"));
        let c = ok(
            kp.kae.bn_param(name),
            &format!("EVP_PKEY_get_bn_param({name}) on kae key"),
        );
        assert_same(&c, &b, &format!("{bits}: get_bn_param {name}"));
    }
    // Public selection must not carry private material.
    let ex_pub = ok(
        kp.kae.export(ffi::EVP_PKEY_PUBLIC_KEY),
        "public export from kae",
    );
    assert_same(
        &ex_pub.get_bn("n").expect("n in public export"),
        &kp.reference.n(),
        "public n",
    );
    assert!(ex_pub.get_bn("e").is_some(), "e in public export");
    for private in ["d", "rsa-factor1", "rsa-exponent1", "rsa-coefficient1"] {
        assert!(
            ex_pub.get_bn(private).is_none(),
            "public-only export from kae contains {private}"
        );
    }
    // kae's export imports into the default provider as the same key, which validates.
    let back = ok(
        reference().import("RSA", ffi::EVP_PKEY_KEYPAIR, &ex_kae),
        "default imports kae export",
    );
    assert_eq!(
        back.eq_raw(&kp.reference),
        1,
        "kae export re-imported into default is not the same key"
    );
    ok(
        check_key(reference(), &back, Check::Full),
        "default checks the round-tripped key",
    );
    ok(
        check_key(reference(), &back, Check::Pairwise),
        "default pairwise-checks the round-tripped key",
    );
    // And a second trip kae → kae.
    let again = ok(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &ex_kae),
        "kae re-imports its export",
    );
    assert_eq!(
        again.eq_raw(&kp.kae),
        1,
        "EVP_PKEY_eq(kae key, kae re-import)"
    );
}

fn key_params(bits: u32) {
    let kp = keypair(bits);
    let (k, r) = (&kp.kae, &kp.reference);
    assert_eq!(k.bits(), bits as i32, "EVP_PKEY_get_bits");
    assert_eq!(
        k.security_bits(),
        r.security_bits(),
        "EVP_PKEY_get_security_bits"
    );
    assert_eq!(k.size(), r.size(), "EVP_PKEY_get_size");
    assert_eq!(k.size(), kp.k(), "max-size is the modulus length");
    for name in ["bits", "security-bits", "max-size"] {
        let a = ok(
            k.int_param(name),
            &format!("EVP_PKEY_get_int_param({name}) on kae key"),
        );
        let b = ok(
            r.int_param(name),
            &format!("EVP_PKEY_get_int_param({name}) on default key"),
        );
        assert_eq!(a, b, "{bits}: {name}");
    }
    assert_eq!(ok(k.int_param("bits"), "bits"), bits as i32);
    for name in ["n", "e"] {
        assert_same(
            &ok(k.bn_param(name), name),
            &ok(r.bn_param(name), name),
            &format!("{bits}: {name}"),
        );
    }
    // EVP_PKEY_get_params with several entries at once.
    unsafe {
        let (mut b, mut s, mut m) = (0i32, 0i32, 0i32);
        let mk = |key: &str, v: *mut i32| ffi::OSSL_PARAM {
            key: intern(key).as_ptr(),
            data_type: ffi::OSSL_PARAM_INTEGER,
            data: v.cast(),
            data_size: std::mem::size_of::<i32>(),
            return_size: ffi::OSSL_PARAM_UNMODIFIED,
        };
        let mut params = [
            mk("bits", &mut b as *mut i32),
            mk("security-bits", &mut s as *mut i32),
            mk("max-size", &mut m as *mut i32),
            ffi::OSSL_PARAM {
                key: ptr::null(),
                data_type: 0,
                data: ptr::null_mut(),
                data_size: 0,
                return_size: 0,
            },
        ];
        clear_errors();
        ok(
            cvt(
                ffi::EVP_PKEY_get_params(k.0, params.as_mut_ptr()),
                "EVP_PKEY_get_params",
            ),
            "get_params",
        );
        assert_eq!(
            (b, s, m),
            (bits as i32, r.security_bits(), kp.k() as i32),
            "EVP_PKEY_get_params values"
        );
    }
    // Equality: same material in a second kae object, in a default-managed object inside the kae
    // context, and a different key.
    let params = ok(r.export(ffi::EVP_PKEY_KEYPAIR), "export");
    let k2 = ok(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &params),
        "second import",
    );
    assert_eq!(
        k.eq_raw(&k2),
        1,
        "EVP_PKEY_eq(kae key, same key imported again)"
    );
    // Negative controls that differ from k in one number only: kae's match must compare n and e
    // (not just say "same type" or compare objects).
    let n = ok(r.bn_param("n"), "n");
    let e = ok(r.bn_param("e"), "e");
    let mut n_flipped = n.clone();
    n_flipped[n.len() / 2] ^= 0x10; // still odd, same size
    let other_e: &[u8] = if e == [1u8, 0, 1] { &[3] } else { &[1, 0, 1] };
    for (what, n, e) in [
        ("modulus differs in one bit", &n_flipped[..], &e[..]),
        ("different public exponent", &n[..], other_e),
    ] {
        let near = ok(
            kae().import(
                "RSA",
                ffi::EVP_PKEY_PUBLIC_KEY,
                &ParamsBuilder::new().bn("n", n).bn("e", e).build(),
            ),
            &format!("kae import of a public key whose {what}"),
        );
        assert_ne!(
            k.eq_raw(&near),
            1,
            "EVP_PKEY_eq says equal to a key whose {what}"
        );
        assert_ne!(
            near.eq_raw(&k2),
            1,
            "EVP_PKEY_eq (reversed) says equal to a key whose {what}"
        );
    }
    // Same material managed by kae and by default inside one library context.
    let mixed = kae_with_default();
    let km = ok(
        mixed.import("RSA", ffi::EVP_PKEY_KEYPAIR, &params),
        "kae import (mixed context)",
    );
    let foreign = ok(
        import_with_propq(mixed, &params, "provider=default"),
        "default-managed key in a kae+default context",
    );
    assert_eq!(
        km.eq_raw(&foreign),
        1,
        "EVP_PKEY_eq(kae key, default-managed copy)"
    );
    assert_eq!(
        foreign.eq_raw(&km),
        1,
        "EVP_PKEY_eq(default-managed copy, kae key)"
    );
    let other = keypair(if bits == 1024 { 1025 } else { 1024 });
    assert_ne!(
        k.eq_raw(&other.kae),
        1,
        "EVP_PKEY_eq says two different keys are equal"
    );
    let pub_only = ok(
        kae().import(
            "RSA",
            ffi::EVP_PKEY_PUBLIC_KEY,
            &ok(r.export(ffi::EVP_PKEY_PUBLIC_KEY), "pub"),
        ),
        "pub import",
    );
    assert_eq!(pub_only.eq_raw(k), 1, "EVP_PKEY_eq(public half, key pair)");
}

fn key_checks(bits: u32) {
    let kp = keypair(bits);
    for c in [Check::Full, Check::Public, Check::Private, Check::Pairwise] {
        ok(
            check_key(kae(), &kp.kae, c),
            &format!("{bits}: {c:?} check of kae key in kae context"),
        );
    }
    // Public-only key: public check passes, private and pairwise checks fail.
    let pub_only = ok(
        kae().import(
            "RSA",
            ffi::EVP_PKEY_PUBLIC_KEY,
            &ok(kp.reference.export(ffi::EVP_PKEY_PUBLIC_KEY), "pub"),
        ),
        "public import",
    );
    ok(
        check_key(kae(), &pub_only, Check::Public),
        "public check of a public key",
    );
    assert_fails(
        check_key(kae(), &pub_only, Check::Private),
        "private check of a public-only key",
    );
    assert_fails(
        check_key(kae(), &pub_only, Check::Pairwise),
        "pairwise check of a public-only key",
    );
}

fn import_with_propq(lib: &Lib, params: &Params, propq: &str) -> Res<Pkey> {
    clear_errors();
    let kt = CString::new("RSA").unwrap();
    let pq = CString::new(propq).unwrap();
    unsafe {
        let ctx = PkeyCtx(cvt_p(
            ffi::EVP_PKEY_CTX_new_from_name(lib.ptr, kt.as_ptr(), pq.as_ptr()),
            "ctx",
        )?);
        cvt(ffi::EVP_PKEY_fromdata_init(ctx.0), "fromdata_init")?;
        let mut pk = ptr::null_mut();
        cvt(
            ffi::EVP_PKEY_fromdata(ctx.0, &mut pk, ffi::EVP_PKEY_KEYPAIR, params.as_mut_ptr()),
            "fromdata",
        )?;
        Ok(Pkey(pk))
    }
}

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

// ---------------------------------------------------------------------------------------------
// Raw RSA (no padding)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Per-size test generation
// ---------------------------------------------------------------------------------------------

per_size!(
    key_roundtrip,
    key_params,
    key_checks,
    pkcs1_sign,
    pkcs1_md5_sha1,
    pkcs1_prehashed,
    pss,
    x931,
    raw_sign,
    raw_encrypt,
    pkcs1_encrypt,
    pkcs1_implicit_rejection,
    oaep,
    tls_premaster,
);

// ---------------------------------------------------------------------------------------------
// Key generation in kae
// ---------------------------------------------------------------------------------------------

use num_bigint::BigUint;

fn big(b: &[u8]) -> BigUint {
    BigUint::from_bytes_be(b)
}

fn gcd(a: &BigUint, b: &BigUint) -> BigUint {
    let (mut a, mut b) = (a.clone(), b.clone());
    while b != BigUint::from(0u32) {
        let r = &a % &b;
        a = b;
        b = r;
    }
    a
}

/// Independent arithmetic validation of an exported RSA key pair.
fn validate_rsa_math(params: &Params, bits: u32, e_expected: u64) {
    let get = |n: &str| {
        big(&params
            .get_bn(n)
            .unwrap_or_else(|| panic!("exported key lacks {n}")))
    };
    let (n, e, d) = (get("n"), get("e"), get("d"));
    let (p, q) = (get("rsa-factor1"), get("rsa-factor2"));
    let (dp, dq, qinv) = (
        get("rsa-exponent1"),
        get("rsa-exponent2"),
        get("rsa-coefficient1"),
    );
    let one = BigUint::from(1u32);
    assert_eq!(n.bits(), bits as u64, "modulus size");
    assert_eq!(e, BigUint::from(e_expected), "public exponent");
    assert_eq!(&p * &q, n, "n = p*q");
    assert_ne!(p, q);
    let (p1, q1) = (&p - &one, &q - &one);
    let lambda = &p1 * &q1 / gcd(&p1, &q1);
    assert_eq!(
        (&e * &d) % &lambda,
        one.clone() % &lambda,
        "e*d ≡ 1 mod λ(n)"
    );
    assert_eq!(dp, &d % &p1, "dP = d mod (p-1)");
    assert_eq!(dq, &d % &q1, "dQ = d mod (q-1)");
    assert_eq!((&qinv * &q) % &p, one, "qInv*q ≡ 1 mod p");
    // Both primes about half the size.
    let half = bits as u64 / 2;
    assert!(
        p.bits() + 1 >= half && q.bits() + 1 >= half,
        "unbalanced primes: {} / {}",
        p.bits(),
        q.bits()
    );
}

fn kae_keygen_case(bits: u32, e: Option<u64>) {
    let (kl, rl) = (kae(), reference());
    let t = std::time::Instant::now();
    let key = ok(
        kl.keygen_rsa(bits as usize, e),
        &format!("kae keygen {bits} e={e:?}"),
    );
    eprintln!("kae keygen {bits} bits took {:.2?}", t.elapsed());
    kl.expect_key(&key, "kae keygen");
    assert_eq!(key.bits(), bits as i32, "generated key size");
    let ex = ok(key.export(ffi::EVP_PKEY_KEYPAIR), "export generated key");
    validate_rsa_math(&ex, bits, e.unwrap_or(65537));
    ok(check_key(kl, &key, Check::Full), "kae checks its own key");
    ok(
        check_key(kl, &key, Check::Pairwise),
        "kae pairwise-checks its own key",
    );
    let in_ref = ok(
        rl.import("RSA", ffi::EVP_PKEY_KEYPAIR, &ex),
        "default imports kae-generated key",
    );
    ok(
        check_key(rl, &in_ref, Check::Full),
        "default EVP_PKEY_check of kae-generated key",
    );
    ok(
        check_key(rl, &in_ref, Check::Pairwise),
        "default EVP_PKEY_pairwise_check of kae-generated key",
    );
    let p = sig_params("pkcs1", None, None, None);
    let msg = b"generated by kae";
    let sk = ok(
        digest_sign(kl, &key, Some("SHA256"), &p, msg),
        "kae signs with its key",
    );
    let sr = ok(
        digest_sign(rl, &in_ref, Some("SHA256"), &p, msg),
        "default signs with kae's key",
    );
    assert_same(&sk, &sr, "signature with kae-generated key");
    ok(
        digest_verify(rl, &in_ref, Some("SHA256"), &p, msg, &sk),
        "default verifies",
    );
    ok(
        digest_verify(kl, &key, Some("SHA256"), &p, msg, &sr),
        "kae verifies",
    );
    let oaep = Enc::oaep("SHA256", "SHA256", None).params();
    let ct = ok(
        encrypt(rl, &in_ref, &oaep, b"secret"),
        "default encrypts to kae key",
    );
    assert_eq!(ok(decrypt(kl, &key, &oaep, &ct), "kae decrypts"), b"secret");
    // Two generations give different keys.
    let key2 = ok(kl.keygen_rsa(bits as usize, e), "second keygen");
    assert_ne!(key.eq_raw(&key2), 1, "two generated keys are equal");
}

#[test]
fn kae_keygen_2048_default_exponent() {
    kae_keygen_case(2048, None);
}

#[test]
fn kae_keygen_1024_e3() {
    kae_keygen_case(1024, Some(3));
}

#[test]
fn kae_keygen_3072_f4() {
    kae_keygen_case(3072, Some(65537));
}

#[test]
fn kae_keygen_odd_sizes() {
    kae_keygen_case(1536, Some(65537));
    kae_keygen_case(2047, Some(65537));
}

// ---------------------------------------------------------------------------------------------
// RSA-PSS keys
// ---------------------------------------------------------------------------------------------

fn pss_keygen(restricted: bool) -> (Pkey, Pkey) {
    let mut b = ParamsBuilder::new().size_t("bits", 2048);
    if restricted {
        b = b
            .utf8("digest", "SHA256")
            .utf8("mgf1-digest", "SHA256")
            .int("saltlen", 32);
    }
    let r = ok(
        reference().keygen("RSA-PSS", &b.build()),
        "default RSA-PSS keygen",
    );
    let k = ok(kae().transfer(&r), "RSA-PSS key into kae");
    kae().expect_key(&k, "RSA-PSS key");
    assert!(k.is_a("RSA-PSS"), "kae key type is {}", k.type_name());
    (r, k)
}

#[test]
fn rsa_pss_key_unrestricted() {
    let (kl, rl) = (kae(), reference());
    let (r, k) = pss_keygen(false);
    let msg = pattern(1, 100);
    // RSA-PSS keys sign PSS without any padding parameter.
    let s = ok(
        digest_sign(kl, &k, Some("SHA256"), &Params::empty(), &msg),
        "kae PSS-key sign, no params",
    );
    ok(
        digest_verify(rl, &r, Some("SHA256"), &Params::empty(), &msg, &s),
        "default verifies",
    );
    ok(
        digest_verify(
            rl,
            &r,
            Some("SHA256"),
            &sig_params("pss", None, Some("SHA256"), Some(Salt::Auto)),
            &msg,
            &s,
        ),
        "default verifies as plain PSS",
    );
    let p = sig_params("pss", None, Some("SHA1"), Some(Salt::Len(20)));
    for md in ["SHA256", "SHA384", "SHA512", "SHA1"] {
        let sk = ok(
            digest_sign(kl, &k, Some(md), &p, &msg),
            &format!("kae RSA-PSS key {md}"),
        );
        ok(
            digest_verify(rl, &r, Some(md), &p, &msg, &sk),
            &format!("default verifies RSA-PSS key {md}"),
        );
        let sr = ok(digest_sign(rl, &r, Some(md), &p, &msg), "default sign");
        ok(
            digest_verify(kl, &k, Some(md), &p, &msg, &sr),
            &format!("kae verifies RSA-PSS key {md}"),
        );
    }
    // PKCS#1 v1.5 padding is not allowed with RSA-PSS keys.
    let pkcs1 = sig_params("pkcs1", None, None, None);
    assert_fails(
        digest_sign(rl, &r, Some("SHA256"), &pkcs1, &msg),
        "default: PKCS#1 with RSA-PSS key",
    );
    expect_error(
        digest_sign(kl, &k, Some("SHA256"), &pkcs1, &msg),
        "kae: PKCS#1 with RSA-PSS key",
    );
    // Round trip of the numbers.
    let ek = ok(k.export(ffi::EVP_PKEY_KEYPAIR), "export");
    let er = ok(r.export(ffi::EVP_PKEY_KEYPAIR), "export");
    for name in KEY_BNS {
        assert_same(
            &ek.get_bn(name).expect(name),
            &er.get_bn(name).unwrap(),
            &format!("RSA-PSS {name}"),
        );
    }
    ok(check_key(kl, &k, Check::Full), "kae checks RSA-PSS key");
}

#[test]
fn rsa_pss_key_restricted() {
    let (kl, rl) = (kae(), reference());
    let (r, k) = pss_keygen(true);
    let msg = pattern(2, 100);
    let ek = ok(
        k.export(ffi::EVP_PKEY_KEYPAIR),
        "export restricted key from kae",
    );
    eprintln!("restricted RSA-PSS export from kae: {:?}", ek.keys());
    let dig = ek
        .get_utf8("digest")
        .expect("kae export of a restricted RSA-PSS key lacks 'digest'");
    assert!(dig.contains("256"), "exported digest restriction {dig}");
    assert_eq!(
        ek.get_int("saltlen"),
        Some(32),
        "exported saltlen restriction"
    );

    let s = ok(
        digest_sign(kl, &k, Some("SHA256"), &Params::empty(), &msg),
        "kae signs within restrictions",
    );
    ok(
        digest_verify(rl, &r, Some("SHA256"), &Params::empty(), &msg, &s),
        "default verifies",
    );
    let sr = ok(
        digest_sign(rl, &r, Some("SHA256"), &Params::empty(), &msg),
        "default signs",
    );
    ok(
        digest_verify(kl, &k, Some("SHA256"), &Params::empty(), &msg, &sr),
        "kae verifies",
    );
    let p40 = sig_params("pss", None, Some("SHA256"), Some(Salt::Len(40)));
    let s40 = ok(
        digest_sign(kl, &k, Some("SHA256"), &p40, &msg),
        "kae: salt above the minimum",
    );
    ok(
        digest_verify(rl, &r, Some("SHA256"), &p40, &msg, &s40),
        "default verifies salt 40",
    );

    // Violations: other digest, shorter salt.
    assert_fails(
        digest_sign(rl, &r, Some("SHA384"), &Params::empty(), &msg),
        "default: SHA-384 with SHA-256 key",
    );
    expect_error(
        digest_sign(kl, &k, Some("SHA384"), &Params::empty(), &msg),
        "kae: SHA-384 with SHA-256 key",
    );
    let p20 = sig_params("pss", None, None, Some(Salt::Len(20)));
    assert_fails(
        digest_sign(rl, &r, Some("SHA256"), &p20, &msg),
        "default: salt below minimum",
    );
    expect_error(
        digest_sign(kl, &k, Some("SHA256"), &p20, &msg),
        "kae: salt below minimum",
    );
    // MGF1 digest other than the restriction: whatever default does, kae must do the same.
    let pm = sig_params("pss", None, Some("SHA1"), None);
    let dk = digest_sign(kl, &k, Some("SHA256"), &pm, &msg);
    let dr = digest_sign(rl, &r, Some("SHA256"), &pm, &msg);
    assert_eq!(
        dk.is_ok(),
        dr.is_ok(),
        "MGF1 restriction: kae {dk:?} vs default {dr:?}"
    );
    if let Ok(sig) = &dk {
        ok(
            digest_verify(rl, &r, Some("SHA256"), &pm, &msg, sig),
            "default verifies kae's signature with the other MGF1 digest",
        );
    }

    // The restriction survives kae → default.
    let back = ok(
        rl.import("RSA-PSS", ffi::EVP_PKEY_KEYPAIR, &ek),
        "default imports kae export",
    );
    assert_fails(
        digest_sign(rl, &back, Some("SHA384"), &Params::empty(), &msg),
        "restriction lost in kae export",
    );
    ok(
        digest_sign(rl, &back, Some("SHA256"), &Params::empty(), &msg),
        "default signs with round-tripped key",
    );
}

// ---------------------------------------------------------------------------------------------
// Other key shapes and API paths
// ---------------------------------------------------------------------------------------------

/// A private key with only n, e, d (no CRT values).
#[test]
fn non_crt_private_key() {
    let (kl, rl) = (kae(), reference());
    let kp = keypair(2048);
    let ex = ok(kp.reference.export(ffi::EVP_PKEY_KEYPAIR), "export");
    let params = ParamsBuilder::new()
        .bn("n", &ex.get_bn("n").unwrap())
        .bn("e", &ex.get_bn("e").unwrap())
        .bn("d", &ex.get_bn("d").unwrap())
        .build();
    let k = ok(
        kl.import("RSA", ffi::EVP_PKEY_KEYPAIR, &params),
        "kae imports n,e,d key",
    );
    let p = sig_params("pkcs1", None, None, None);
    let msg = b"non-CRT";
    let sk = ok(
        digest_sign(kl, &k, Some("SHA256"), &p, msg),
        "kae signs with n,e,d key",
    );
    let sr = ok(
        digest_sign(rl, &kp.reference, Some("SHA256"), &p, msg),
        "default signs",
    );
    assert_same(&sk, &sr, "signature with a non-CRT key");
    let oaep = Enc::oaep("SHA256", "SHA256", None).params();
    let ct = ok(encrypt(rl, &kp.reference, &oaep, msg), "encrypt");
    assert_eq!(
        ok(decrypt(kl, &k, &oaep, &ct), "kae decrypts with n,e,d key"),
        msg
    );
}

/// A key managed by the default provider inside a kae+default context is exported to kae
/// automatically when the operation is fetched with provider=kae.
#[test]
fn foreign_key_exported_to_kae() {
    let (kl, rl) = (kae_with_default(), reference());
    let kp = keypair(2048);
    let ex = ok(kp.reference.export(ffi::EVP_PKEY_KEYPAIR), "export");
    let foreign = ok(
        import_with_propq(kl, &ex, "provider=default"),
        "default-managed key in kae ctx",
    );
    assert_eq!(
        provider_name(unsafe { ffi::EVP_PKEY_get0_provider(foreign.0) }),
        "default"
    );
    let p = sig_params("pkcs1", None, None, None);
    let sk = ok(
        digest_sign(kl, &foreign, Some("SHA384"), &p, b"foreign"),
        "kae signs with foreign key",
    );
    let sr = ok(
        digest_sign(rl, &kp.reference, Some("SHA384"), &p, b"foreign"),
        "default signs",
    );
    assert_same(&sk, &sr, "signature with an automatically exported key");
    let oaep = Enc::oaep("SHA1", "SHA1", None).params();
    let ct = ok(encrypt(rl, &kp.reference, &oaep, b"x"), "encrypt");
    assert_eq!(
        ok(
            decrypt(kl, &foreign, &oaep, &ct),
            "kae decrypts with foreign key"
        ),
        b"x"
    );
}

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
