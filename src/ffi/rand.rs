//! An owned DRBG of a library context (EVP_RAND(3)): what kae's DRBG fronts forward to.

use super::libctx::LibCtx;
use super::params::{ParamSubset, ParamsMut};
use super::sys::*;
use crate::error::KaeError;
use core::ffi::{c_int, CStr};
use core::ptr::NonNull;

/// A DRBG made in a library context, chained to that context's primary DRBG; freed on drop.
pub struct Drbg(NonNull<EVP_RAND_CTX>);

// SAFETY: the EVP_RAND_CTX is used under the locking its user asks for (`enable_locking`,
// after which the EVP_RAND_* calls lock it), as for any provider's generator.
unsafe impl Send for Drbg {}
unsafe impl Sync for Drbg {}

impl Drop for Drbg {
    fn drop(&mut self) {
        // SAFETY: made by EVP_RAND_CTX_new in `new`, freed once.
        unsafe { EVP_RAND_CTX_free(self.0.as_ptr()) }
    }
}

/// Fetches DRBG type `name` from the default provider of `libctx`.
fn fetch(libctx: LibCtx, name: &CStr) -> Result<*mut EVP_RAND, KaeError> {
    // SAFETY: a LibCtx is live (its type's contract); the name and property query are C
    // strings.
    let r = unsafe { EVP_RAND_fetch(libctx.as_ptr(), name.as_ptr(), c"provider=default".as_ptr()) };
    if r.is_null() {
        Err(KaeError::FetchFailed)
    } else {
        Ok(r)
    }
}

/// `(pointer, length)` of an optional buffer: NULL and 0 for None.
fn raw(b: Option<&[u8]>) -> (*const u8, usize) {
    b.map_or((core::ptr::null(), 0), |b| (b.as_ptr(), b.len()))
}

impl Drbg {
    /// A new DRBG of type `name` in `libctx`, chained to its primary DRBG.
    pub fn new(libctx: LibCtx, name: &CStr) -> Result<Drbg, KaeError> {
        let rand = fetch(libctx, name)?;
        // SAFETY: a fetched EVP_RAND, released once the context holds its own reference; the
        // parent is libctx's primary DRBG, which lives as long as libctx, which outlives this
        // Drbg (LibCtx::free's contract).
        let ctx = unsafe {
            let parent = RAND_get0_primary(libctx.as_ptr());
            let c = EVP_RAND_CTX_new(rand, parent);
            EVP_RAND_free(rand);
            c
        };
        NonNull::new(ctx).map(Drbg).ok_or(KaeError::RandomFailure)
    }

    /// The settable (or gettable) parameters of DRBG type `name` in `libctx`: static data of
    /// its provider (None when it describes none), valid while `libctx` is.
    pub fn described(
        libctx: LibCtx,
        name: &CStr,
        settable: bool,
    ) -> Result<Option<&'static [OSSL_PARAM]>, KaeError> {
        let rand = fetch(libctx, name)?;
        // SAFETY: the arrays are the provider's static data, terminated by a NULL key and
        // valid after the EVP_RAND reference is dropped while the provider stays loaded,
        // which is as long as its context lives: past every use of the answer by one of
        // kae's DRBG fronts, which the core frees before our teardown.
        unsafe {
            let p = if settable {
                EVP_RAND_settable_ctx_params(rand)
            } else {
                EVP_RAND_gettable_ctx_params(rand)
            };
            EVP_RAND_free(rand);
            Ok(super::params::terminated(p))
        }
    }

    fn ctx(&self) -> *mut EVP_RAND_CTX {
        self.0.as_ptr()
    }

    pub fn instantiate(
        &self,
        strength: u32,
        prediction_resistance: bool,
        personalization: Option<&[u8]>,
        params: &ParamSubset<'_>,
    ) -> bool {
        let (p, len) = raw(personalization);
        // SAFETY: our live context; the buffer is valid for len bytes or NULL; params is
        // terminated and valid for the call.
        unsafe {
            EVP_RAND_instantiate(
                self.ctx(),
                strength,
                prediction_resistance as c_int,
                p,
                len,
                params.as_ptr(),
            ) == 1
        }
    }

    pub fn uninstantiate(&self) -> bool {
        // SAFETY: our live context.
        unsafe { EVP_RAND_uninstantiate(self.ctx()) == 1 }
    }

    pub fn generate(
        &self,
        out: &mut [u8],
        strength: u32,
        prediction_resistance: bool,
        addin: Option<&[u8]>,
    ) -> bool {
        let (a, alen) = raw(addin);
        // SAFETY: our live context; out is writable for its length, addin valid or NULL.
        unsafe {
            EVP_RAND_generate(
                self.ctx(),
                out.as_mut_ptr(),
                out.len(),
                strength,
                prediction_resistance as c_int,
                a,
                alen,
            ) == 1
        }
    }

    pub fn reseed(
        &self,
        prediction_resistance: bool,
        entropy: Option<&[u8]>,
        addin: Option<&[u8]>,
    ) -> bool {
        let (e, elen) = raw(entropy);
        let (a, alen) = raw(addin);
        // SAFETY: our live context; the buffers are valid for their lengths or NULL.
        unsafe {
            EVP_RAND_reseed(self.ctx(), prediction_resistance as c_int, e, elen, a, alen) == 1
        }
    }

    pub fn enable_locking(&self) -> bool {
        // SAFETY: our live context.
        unsafe { EVP_RAND_enable_locking(self.ctx()) == 1 }
    }

    pub fn verify_zeroization(&self) -> bool {
        // SAFETY: our live context.
        unsafe { EVP_RAND_verify_zeroization(self.ctx()) == 1 }
    }

    pub fn get_params(&self, params: &mut ParamsMut<'_>) -> bool {
        // SAFETY: our live context; the array is NULL or terminated and writable (ParamsMut's
        // contract).
        unsafe { EVP_RAND_CTX_get_params(self.ctx(), params.as_mut_ptr()) == 1 }
    }

    pub fn set_params(&self, params: &ParamSubset<'_>) -> bool {
        // SAFETY: our live context; params is terminated and valid for the call.
        unsafe { EVP_RAND_CTX_set_params(self.ctx(), params.as_ptr()) == 1 }
    }
}
