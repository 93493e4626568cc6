//! Keys moved between kae and the default provider: parameters, round trips, checks, keys
//! without CRT values, and keys of another provider exported to kae.

use super::*;

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

per_size!(key_roundtrip, key_params, key_checks);

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
