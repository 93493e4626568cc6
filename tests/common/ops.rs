//! Operation contexts (`EVP_PKEY_CTX`, `EVP_MD_CTX`) and the common set-up of one operation.
//! Each operation clears the error queue first, returns the drained queue on failure and asserts
//! that the operation ran in `lib`'s provider.

use std::ffi::{c_int, CString};

use super::error::{clear_errors, cvt, cvt_p, Res};
use super::ffi::{
    EVP_MD_CTX_free, EVP_MD_CTX_new, EVP_PKEY_CTX_free, EVP_PKEY_CTX_new_from_name,
    EVP_PKEY_CTX_new_from_pkey, EVP_PKEY_CTX_set_params, EVP_MD_CTX, EVP_PKEY_CTX,
};
use super::keys::Pkey;
use super::params::Params;
use super::provider_load::Lib;

impl Lib {
    pub(super) fn new_ctx_from_name(&self, keytype: &str) -> Res<PkeyCtx> {
        let kt = CString::new(keytype).unwrap();
        let p = unsafe { EVP_PKEY_CTX_new_from_name(self.ptr, kt.as_ptr(), self.propq.as_ptr()) };
        Ok(PkeyCtx(cvt_p(
            p,
            &format!("EVP_PKEY_CTX_new_from_name({keytype}) [{}]", self.label),
        )?))
    }

    /// `EVP_PKEY_CTX_new_from_pkey` with this context's property query.
    pub fn pctx(&self, key: &Pkey) -> Res<PkeyCtx> {
        let p = unsafe { EVP_PKEY_CTX_new_from_pkey(self.ptr, key.0, self.propq.as_ptr()) };
        Ok(PkeyCtx(cvt_p(
            p,
            &format!("EVP_PKEY_CTX_new_from_pkey [{}]", self.label),
        )?))
    }
}

/// An owned `EVP_PKEY_CTX`.
pub struct PkeyCtx(pub *mut EVP_PKEY_CTX);

impl Drop for PkeyCtx {
    fn drop(&mut self) {
        unsafe { EVP_PKEY_CTX_free(self.0) }
    }
}

impl PkeyCtx {
    pub fn set_params(&self, params: &Params) -> Res<()> {
        cvt(
            unsafe { EVP_PKEY_CTX_set_params(self.0, params.as_ptr()) },
            "EVP_PKEY_CTX_set_params",
        )?;
        Ok(())
    }
}

/// An owned `EVP_MD_CTX`.
pub struct MdCtx(pub *mut EVP_MD_CTX);

impl Drop for MdCtx {
    fn drop(&mut self) {
        unsafe { EVP_MD_CTX_free(self.0) }
    }
}

impl MdCtx {
    pub fn new() -> MdCtx {
        let p = unsafe { EVP_MD_CTX_new() };
        assert!(!p.is_null());
        MdCtx(p)
    }
}

/// Mark an error as a set-up failure.
pub fn mark_setup<T>(r: Res<T>) -> Res<T> {
    r.map_err(|mut e| {
        e.setup = true;
        e
    })
}

/// Context creation, `init`, operation-provider check and parameters for one operation.
pub fn op_setup(
    lib: &Lib,
    key: &Pkey,
    init: unsafe extern "C" fn(*mut EVP_PKEY_CTX) -> c_int,
    name: &str,
    params: &Params,
) -> Res<PkeyCtx> {
    clear_errors();
    mark_setup((|| {
        let ctx = lib.pctx(key)?;
        cvt(
            unsafe { init(ctx.0) },
            &format!("{name}_init [{}]", lib.label),
        )?;
        lib.expect_op(ctx.0, name);
        ctx.set_params(params)?;
        Ok(ctx)
    })())
}
