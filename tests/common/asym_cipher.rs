//! Asymmetric-cipher parameters and operations, and the `implicit-rejection` parameter checks.

use std::ffi::c_uint;
use std::ptr;

use super::core_version::{core_has_implicit_rejection, implicit_rejection_mode};
use super::error::{clear_errors, cvt, take_errors, Res};
use super::expect::ok;
use super::ffi::{
    EVP_PKEY_CTX_get_params, EVP_PKEY_CTX_gettable_params, EVP_PKEY_CTX_settable_params,
    EVP_PKEY_decrypt, EVP_PKEY_decrypt_init, EVP_PKEY_encrypt, EVP_PKEY_encrypt_init,
    OSSL_PARAM_locate_const, OSSL_PARAM, OSSL_PARAM_UNMODIFIED, OSSL_PARAM_UNSIGNED_INTEGER,
};
use super::keys::Pkey;
use super::ops::{op_setup, PkeyCtx};
use super::params::{Params, ParamsBuilder};
use super::provider_load::{kae, reference, Lib};
use super::util::intern;

/// Asymmetric-cipher parameters.
#[derive(Clone, Debug, Default)]
pub struct Enc<'a> {
    pub pad: &'a str,
    pub oaep_md: Option<&'a str>,
    pub mgf1: Option<&'a str>,
    pub label: Option<&'a [u8]>,
    pub implicit_rejection: Option<u32>,
    pub tls_client_version: Option<u32>,
    pub tls_negotiated_version: Option<u32>,
}

impl<'a> Enc<'a> {
    pub fn pad(pad: &'a str) -> Self {
        Enc {
            pad,
            ..Default::default()
        }
    }
    pub fn pkcs1() -> Self {
        Self::pad("pkcs1")
    }
    /// PKCS#1 v1.5 with implicit rejection disabled (comparable with OpenSSL 3.0's default).
    pub fn pkcs1_explicit() -> Self {
        Enc {
            pad: "pkcs1",
            implicit_rejection: Some(0),
            ..Default::default()
        }
    }
    pub fn oaep(md: &'a str, mgf1: &'a str, label: Option<&'a [u8]>) -> Self {
        Enc {
            pad: "oaep",
            oaep_md: Some(md),
            mgf1: Some(mgf1),
            label,
            ..Default::default()
        }
    }
    pub fn builder(&self) -> ParamsBuilder {
        let mut b = ParamsBuilder::new()
            .utf8("pad-mode", self.pad)
            .opt_utf8("digest", self.oaep_md)
            .opt_utf8("mgf1-digest", self.mgf1);
        if let Some(l) = self.label {
            b = b.octet("oaep-label", l);
        }
        if let Some(v) = self.implicit_rejection {
            b = b.uint("implicit-rejection", v);
        }
        if let Some(v) = self.tls_client_version {
            b = b.uint("tls-client-version", v);
        }
        if let Some(v) = self.tls_negotiated_version {
            b = b.uint("tls-negotiated-version", v);
        }
        b
    }
    pub fn params(&self) -> Params {
        self.builder().build()
    }
}

/// `EVP_PKEY_encrypt`.
pub fn encrypt(lib: &Lib, key: &Pkey, params: &Params, pt: &[u8]) -> Res<Vec<u8>> {
    let ctx = op_setup(lib, key, EVP_PKEY_encrypt_init, "EVP_PKEY_encrypt", params)?;
    unsafe {
        let mut len = 0usize;
        cvt(
            EVP_PKEY_encrypt(ctx.0, ptr::null_mut(), &mut len, pt.as_ptr(), pt.len()),
            "EVP_PKEY_encrypt(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            EVP_PKEY_encrypt(ctx.0, out.as_mut_ptr(), &mut len, pt.as_ptr(), pt.len()),
            &format!("EVP_PKEY_encrypt [{}]", lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

/// `EVP_PKEY_decrypt`.
pub fn decrypt(lib: &Lib, key: &Pkey, params: &Params, ct: &[u8]) -> Res<Vec<u8>> {
    let ctx = op_setup(lib, key, EVP_PKEY_decrypt_init, "EVP_PKEY_decrypt", params)?;
    unsafe {
        let mut len = 0usize;
        cvt(
            EVP_PKEY_decrypt(ctx.0, ptr::null_mut(), &mut len, ct.as_ptr(), ct.len()),
            "EVP_PKEY_decrypt(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            EVP_PKEY_decrypt(ctx.0, out.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len()),
            &format!("EVP_PKEY_decrypt [{}]", lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

/// What an RSA decryption context of one provider says about the `implicit-rejection`
/// parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImplicitRejectionParam {
    /// Listed by `EVP_PKEY_CTX_settable_params`.
    pub settable: bool,
    /// Listed by `EVP_PKEY_CTX_gettable_params`.
    pub gettable: bool,
    /// Answered by `EVP_PKEY_CTX_get_params` on a fresh PKCS#1 decryption context.
    pub initial: Option<u32>,
    /// Answered after `implicit-rejection=0` was set.
    pub after_setting_0: Option<u32>,
}

/// Whether the parameter description array `p` (may be NULL) lists `key`.
fn param_list_has(p: *const OSSL_PARAM, key: &str) -> bool {
    !p.is_null() && unsafe { !OSSL_PARAM_locate_const(p, intern(key).as_ptr()).is_null() }
}

/// Reads `implicit-rejection` as an unsigned integer; `None` when the provider leaves it
/// unanswered.
fn get_implicit_rejection(ctx: &PkeyCtx) -> Option<u32> {
    let mut v: c_uint = 0xdead;
    let mut params = [
        OSSL_PARAM {
            key: intern("implicit-rejection").as_ptr(),
            data_type: OSSL_PARAM_UNSIGNED_INTEGER,
            data: (&mut v as *mut c_uint).cast(),
            data_size: std::mem::size_of::<c_uint>(),
            return_size: OSSL_PARAM_UNMODIFIED,
        },
        OSSL_PARAM {
            key: ptr::null(),
            data_type: 0,
            data: ptr::null_mut(),
            data_size: 0,
            return_size: 0,
        },
    ];
    let r = unsafe { EVP_PKEY_CTX_get_params(ctx.0, params.as_mut_ptr()) };
    let e = take_errors("EVP_PKEY_CTX_get_params(implicit-rejection)");
    assert_eq!(
        r, 1,
        "EVP_PKEY_CTX_get_params(implicit-rejection) returned {r}: {e}"
    );
    (params[0].return_size != OSSL_PARAM_UNMODIFIED).then_some(v)
}

/// The `implicit-rejection` parameter as `lib`'s provider presents it on a PKCS#1 v1.5
/// decryption context for `key`.
pub fn implicit_rejection_param(lib: &Lib, key: &Pkey) -> ImplicitRejectionParam {
    let ctx = ok(
        op_setup(
            lib,
            key,
            EVP_PKEY_decrypt_init,
            "EVP_PKEY_decrypt",
            &Enc::pkcs1().params(),
        ),
        &format!("PKCS#1 decryption context [{}]", lib.label),
    );
    let settable = param_list_has(
        unsafe { EVP_PKEY_CTX_settable_params(ctx.0) },
        "implicit-rejection",
    );
    let gettable = param_list_has(
        unsafe { EVP_PKEY_CTX_gettable_params(ctx.0) },
        "implicit-rejection",
    );
    clear_errors();
    let initial = get_implicit_rejection(&ctx);
    ok(
        ctx.set_params(&ParamsBuilder::new().uint("implicit-rejection", 0).build()),
        &format!("set implicit-rejection=0 [{}]", lib.label),
    );
    let after_setting_0 = get_implicit_rejection(&ctx);
    ImplicitRejectionParam {
        settable,
        gettable,
        initial,
        after_setting_0,
    }
}

/// kae presents `implicit-rejection` exactly as the running core's default provider does:
/// from OpenSSL 3.2 settable, gettable, 1 by default and 0 once set so; before 3.2 unknown
/// (in neither list, never answered, setting it is accepted and ignored).
/// `kae_key` and `ref_key` are the same key in the kae and the reference library context.
pub fn check_implicit_rejection_param(kae_key: &Pkey, ref_key: &Pkey) {
    let ours = implicit_rejection_param(kae(), kae_key);
    let theirs = implicit_rejection_param(reference(), ref_key);
    let expected = if core_has_implicit_rejection() {
        ImplicitRejectionParam {
            settable: true,
            gettable: true,
            initial: Some(1),
            after_setting_0: Some(0),
        }
    } else {
        ImplicitRejectionParam {
            settable: false,
            gettable: false,
            initial: None,
            after_setting_0: None,
        }
    };
    assert_eq!(
        theirs,
        expected,
        "{}: the default provider's implicit-rejection parameter (test premise)",
        implicit_rejection_mode()
    );
    assert_eq!(
        ours,
        theirs,
        "{}: kae's implicit-rejection parameter differs from the default provider's",
        implicit_rejection_mode()
    );
    eprintln!(
        "[implicit rejection] {}: parameter as the default provider has it: {ours:?}",
        implicit_rejection_mode()
    );
}
