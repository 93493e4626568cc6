//! Signature parameters and operations: `EVP_PKEY_sign`/`verify`/`verify_recover` and the
//! digest-sign/verify family.

use std::ffi::CString;
use std::ptr;

use super::error::{clear_errors, cvt, Res};
use super::ffi::{
    EVP_DigestSign, EVP_DigestSignInit_ex, EVP_DigestVerify, EVP_DigestVerifyInit_ex,
    EVP_PKEY_CTX_set_params, EVP_PKEY_sign, EVP_PKEY_sign_init, EVP_PKEY_verify,
    EVP_PKEY_verify_init, EVP_PKEY_verify_recover, EVP_PKEY_verify_recover_init, EVP_PKEY_CTX,
};
use super::keys::Pkey;
use super::ops::{mark_setup, op_setup, MdCtx};
use super::params::{Params, ParamsBuilder};
use super::provider_load::Lib;

/// PSS salt length setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Salt {
    Digest,
    Max,
    Auto,
    Len(i32),
}

impl Salt {
    pub fn push(self, b: ParamsBuilder) -> ParamsBuilder {
        match self {
            Salt::Digest => b.utf8("saltlen", "digest"),
            Salt::Max => b.utf8("saltlen", "max"),
            Salt::Auto => b.utf8("saltlen", "auto"),
            Salt::Len(n) => b.int("saltlen", n),
        }
    }
}

/// Signature parameters: `pad` ("pkcs1", "pss", "x931", "none"), `digest` (only for
/// `EVP_PKEY_sign`-style calls; digest-sign takes the digest separately), `mgf1-digest`,
/// `saltlen`.
pub fn sig_params(
    pad: &str,
    digest: Option<&str>,
    mgf1: Option<&str>,
    salt: Option<Salt>,
) -> Params {
    let mut b = ParamsBuilder::new()
        .utf8("pad-mode", pad)
        .opt_utf8("digest", digest)
        .opt_utf8("mgf1-digest", mgf1);
    if let Some(s) = salt {
        b = s.push(b);
    }
    b.build()
}

/// `EVP_PKEY_sign` (the input is already hashed, or raw for "none"/MD5-SHA1).
pub fn sign(lib: &Lib, key: &Pkey, params: &Params, tbs: &[u8]) -> Res<Vec<u8>> {
    let ctx = op_setup(lib, key, EVP_PKEY_sign_init, "EVP_PKEY_sign", params)?;
    unsafe {
        let mut len = 0usize;
        cvt(
            EVP_PKEY_sign(ctx.0, ptr::null_mut(), &mut len, tbs.as_ptr(), tbs.len()),
            "EVP_PKEY_sign(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            EVP_PKEY_sign(ctx.0, out.as_mut_ptr(), &mut len, tbs.as_ptr(), tbs.len()),
            &format!("EVP_PKEY_sign [{}]", lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

/// `EVP_PKEY_verify`; `Ok(())` only if the signature verified (return value 1).
pub fn verify(lib: &Lib, key: &Pkey, params: &Params, tbs: &[u8], sig: &[u8]) -> Res<()> {
    let ctx = op_setup(lib, key, EVP_PKEY_verify_init, "EVP_PKEY_verify", params)?;
    unsafe {
        cvt(
            EVP_PKEY_verify(ctx.0, sig.as_ptr(), sig.len(), tbs.as_ptr(), tbs.len()),
            &format!("EVP_PKEY_verify [{}]", lib.label),
        )?;
        Ok(())
    }
}

/// `EVP_PKEY_verify_recover`.
pub fn verify_recover(lib: &Lib, key: &Pkey, params: &Params, sig: &[u8]) -> Res<Vec<u8>> {
    let ctx = op_setup(
        lib,
        key,
        EVP_PKEY_verify_recover_init,
        "EVP_PKEY_verify_recover",
        params,
    )?;
    unsafe {
        let mut len = 0usize;
        cvt(
            EVP_PKEY_verify_recover(ctx.0, ptr::null_mut(), &mut len, sig.as_ptr(), sig.len()),
            "EVP_PKEY_verify_recover(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            EVP_PKEY_verify_recover(ctx.0, out.as_mut_ptr(), &mut len, sig.as_ptr(), sig.len()),
            &format!("EVP_PKEY_verify_recover [{}]", lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

/// `EVP_DigestSignInit_ex` / `EVP_DigestVerifyInit_ex` plus parameters, for streaming use.
pub fn digest_init(
    lib: &Lib,
    key: &Pkey,
    md: Option<&str>,
    params: &Params,
    signing: bool,
) -> Res<MdCtx> {
    mark_setup(digest_init_inner(lib, key, md, params, signing))
}

fn digest_init_inner(
    lib: &Lib,
    key: &Pkey,
    md: Option<&str>,
    params: &Params,
    signing: bool,
) -> Res<MdCtx> {
    clear_errors();
    let mctx = MdCtx::new();
    let mdname = md.map(|m| CString::new(m).unwrap());
    let mut pctx: *mut EVP_PKEY_CTX = ptr::null_mut();
    let what = if signing {
        "EVP_DigestSignInit_ex"
    } else {
        "EVP_DigestVerifyInit_ex"
    };
    unsafe {
        let f = if signing {
            EVP_DigestSignInit_ex
        } else {
            EVP_DigestVerifyInit_ex
        };
        cvt(
            f(
                mctx.0,
                &mut pctx,
                mdname.as_ref().map_or(ptr::null(), |m| m.as_ptr()),
                lib.ptr,
                lib.propq().as_ptr(),
                key.0,
                ptr::null(),
            ),
            &format!("{what}({}) [{}]", md.unwrap_or("-"), lib.label),
        )?;
        assert!(!pctx.is_null(), "{what} gave no EVP_PKEY_CTX");
        lib.expect_op(pctx, what);
        cvt(
            EVP_PKEY_CTX_set_params(pctx, params.as_ptr()),
            "EVP_PKEY_CTX_set_params",
        )?;
    }
    Ok(mctx)
}

/// One-shot `EVP_DigestSign` with digest `md`.
pub fn digest_sign(
    lib: &Lib,
    key: &Pkey,
    md: Option<&str>,
    params: &Params,
    msg: &[u8],
) -> Res<Vec<u8>> {
    let mctx = digest_init(lib, key, md, params, true)?;
    unsafe {
        let mut len = 0usize;
        cvt(
            EVP_DigestSign(mctx.0, ptr::null_mut(), &mut len, msg.as_ptr(), msg.len()),
            "EVP_DigestSign(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            EVP_DigestSign(mctx.0, out.as_mut_ptr(), &mut len, msg.as_ptr(), msg.len()),
            &format!("EVP_DigestSign({}) [{}]", md.unwrap_or("-"), lib.label),
        )?;
        out.truncate(len);
        Ok(out)
    }
}

/// One-shot `EVP_DigestVerify`; `Ok(())` only on return value 1.
pub fn digest_verify(
    lib: &Lib,
    key: &Pkey,
    md: Option<&str>,
    params: &Params,
    msg: &[u8],
    sig: &[u8],
) -> Res<()> {
    let mctx = digest_init(lib, key, md, params, false)?;
    unsafe {
        cvt(
            EVP_DigestVerify(mctx.0, sig.as_ptr(), sig.len(), msg.as_ptr(), msg.len()),
            &format!("EVP_DigestVerify({}) [{}]", md.unwrap_or("-"), lib.label),
        )?;
    }
    Ok(())
}
