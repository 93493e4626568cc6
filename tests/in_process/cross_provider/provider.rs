//! The module loads, serves RSA from kae, and its context needs nothing from another provider.

use super::*;

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
