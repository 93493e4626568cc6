//! kae's random generators (OSSL_OP_RAND): `CTR-DRBG`, `HASH-DRBG`, `HMAC-DRBG` for an
//! application that loads kae alone (`-provider kae`).
//!
//! Why not re-list the default provider's DRBGs: since OpenSSL 3.5 the library tells a DRBG
//! the name of the provider it came from (`provider-name`), and the DRBG then fetches its
//! cipher or digest from a provider of that name in its own provider's library context.
//! A default-provider DRBG listed under "kae" lives in kae's private context, which has no
//! "kae", so instantiation fails and every key generation and blinding with it.
//!
//! So each generator here is kae's own front: it owns one DRBG of the same type in kae's
//! private library context (the default provider loaded privately), chained to that
//! context's primary DRBG, and forwards every call to it through the public `EVP_RAND` API.
//! Parameters that name a provider or a property query of the application's context
//! (`provider-name`, `properties`) are not forwarded: they mean nothing in the private one.
//! The application's parent generator (its seed source) is not used: entropy comes from
//! the private context's own chain, which reseeds after `fork()` by itself.

use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::params::Params;
use crate::ffi::sys::*;
use crate::ffi::{guard, guard_ptr, Core};
use crate::provider::ProvCtx;
use core::ffi::{c_int, c_uchar, c_uint, c_void, CStr};
use std::sync::{Arc, LazyLock};

/// The generator types kae offers, by index (the const parameter of the shims).
const NAMES: [&CStr; 3] = [c"CTR-DRBG", c"HASH-DRBG", c"HMAC-DRBG"];

/// Parameters never forwarded to the private generator (see the module docs).
const NOT_FORWARDED: [&CStr; 2] = [c"provider-name", c"properties"];

/// One application-visible generator: the private DRBG it forwards to.
struct RandCtx {
    prov: Arc<ProvCtx>,
    inner: *mut EVP_RAND_CTX,
}

// SAFETY: the EVP_RAND_CTX is used under the locking the core asks for (enable_locking is
// forwarded, and EVP_RAND_* calls lock it when enabled), as for any provider generator.
unsafe impl Send for RandCtx {}
unsafe impl Sync for RandCtx {}

impl Drop for RandCtx {
    fn drop(&mut self) {
        // SAFETY: created by EVP_RAND_CTX_new in `newctx`, freed once.
        unsafe { EVP_RAND_CTX_free(self.inner) }
    }
}

/// Fetches generator type `alg` from kae's private default-provider context.
fn fetch(prov: &ProvCtx, alg: usize) -> Result<*mut EVP_RAND, KaeError> {
    let ctx = prov.private_default_libctx();
    if ctx.is_null() {
        return Err(KaeError::DefaultProviderUnavailable);
    }
    // SAFETY: ctx is our private library context (non-NULL, checked above), freed only at teardown
    // after every generator; the name and property query are static C strings.
    let r = unsafe { EVP_RAND_fetch(ctx, NAMES[alg].as_ptr(), c"provider=default".as_ptr()) };
    if r.is_null() {
        Err(KaeError::FetchFailed)
    } else {
        Ok(r)
    }
}

/// `params` without the ones that name things of the application's context.
fn forwarded(params: &Params<'_>) -> Vec<OSSL_PARAM> {
    let mut v: Vec<OSSL_PARAM> = params
        .raw()
        .iter()
        .filter(|p| {
            // SAFETY: keys of a core parameter array are valid C strings.
            let key = unsafe { CStr::from_ptr(p.key) };
            !NOT_FORWARDED.contains(&key)
        })
        .copied()
        .collect();
    v.push(crate::ffi::params::END);
    v
}

/// # Safety
/// `ctx` is NULL or a pointer our `newctx` returned and the core has not freed.
unsafe fn rand_ref<'a>(ctx: *mut c_void) -> Option<&'a RandCtx> {
    // SAFETY: per the caller's contract ctx is NULL or a live Box<RandCtx> leaked by newctx;
    // RandCtx is never mutated after creation, so a shared borrow is sound while ctx is in use.
    unsafe { (ctx as *const RandCtx).as_ref() }
}

fn core_of(ctx: Option<&RandCtx>) -> Option<Core> {
    ctx.map(|c| c.prov.core)
}

unsafe extern "C" fn rand_newctx<const ALG: usize>(
    provctx: *mut c_void,
    _parent: *mut c_void,
    _parent_calls: *const OSSL_DISPATCH,
) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let prov = unsafe { ProvCtx::clone_arc(provctx) };
    let core = prov.as_ref().map(|p| p.core);
    guard_ptr(core.as_ref(), || -> Result<*mut c_void, KaeError> {
        let prov = prov.ok_or(KaeError::NullParameter)?;
        let rand = fetch(&prov, ALG)?;
        // SAFETY: a fetched EVP_RAND; the parent is the private context's primary DRBG,
        // which lives as long as that context (freed at teardown, after every generator).
        let inner = unsafe {
            let parent = RAND_get0_primary(prov.private_default_libctx());
            let c = EVP_RAND_CTX_new(rand, parent);
            EVP_RAND_free(rand);
            c
        };
        if inner.is_null() {
            return Err(KaeError::RandomFailure);
        }
        Ok(Box::into_raw(Box::new(RandCtx { prov, inner })).cast())
    })
}

unsafe extern "C" fn rand_freectx(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    guard(None, (), || -> Result<(), KaeError> {
        // SAFETY: a pointer our newctx returned; the core frees it once.
        drop(unsafe { Box::from_raw(ctx as *mut RandCtx) });
        Ok(())
    })
}

unsafe extern "C" fn rand_instantiate(
    ctx: *mut c_void,
    strength: c_uint,
    prediction_resistance: c_int,
    pstr: *const c_uchar,
    pstr_len: usize,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core passes back the pointer our newctx returned (or NULL) and never uses it
    // after freectx, which is what rand_ref asks.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || -> Result<c_int, KaeError> {
        let c = c.ok_or(KaeError::NullParameter)?;
        // SAFETY: the core's params is NULL or a terminated OSSL_PARAM array valid for the call.
        let fwd = forwarded(&unsafe { Params::from_ptr(params) });
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx; the buffers and lengths are
        // the core's, passed on unchanged under the same contract EVP_RAND documents.
        let ok = unsafe {
            EVP_RAND_instantiate(
                c.inner,
                strength,
                prediction_resistance,
                pstr,
                pstr_len,
                fwd.as_ptr(),
            )
        };
        if ok == 1 {
            Ok(1)
        } else {
            Err(KaeError::RandomFailure)
        }
    })
}

unsafe extern "C" fn rand_uninstantiate(ctx: *mut c_void) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || {
        // SAFETY: c.inner is the EVP_RAND_CTX our newctx created; RandCtx owns it and frees it
        // only on drop (freectx), which the core never calls while it still uses ctx.
        c.map(|c| unsafe { EVP_RAND_uninstantiate(c.inner) })
            .ok_or(KaeError::NullParameter)
    })
}

unsafe extern "C" fn rand_generate(
    ctx: *mut c_void,
    out: *mut c_uchar,
    outlen: usize,
    strength: c_uint,
    prediction_resistance: c_int,
    addin: *const c_uchar,
    addin_len: usize,
) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || -> Result<c_int, KaeError> {
        let c = c.ok_or(KaeError::NullParameter)?;
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx; the buffers and lengths are
        // the core's, passed on unchanged under the same contract EVP_RAND documents.
        let ok = unsafe {
            EVP_RAND_generate(
                c.inner,
                out,
                outlen,
                strength,
                prediction_resistance,
                addin,
                addin_len,
            )
        };
        if ok == 1 {
            Ok(1)
        } else {
            Err(KaeError::RandomFailure)
        }
    })
}

unsafe extern "C" fn rand_reseed(
    ctx: *mut c_void,
    prediction_resistance: c_int,
    entropy: *const c_uchar,
    entropy_len: usize,
    addin: *const c_uchar,
    addin_len: usize,
) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || {
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx; the buffers and lengths are
        // the core's, passed on unchanged under the same contract EVP_RAND documents.
        c.map(|c| unsafe {
            EVP_RAND_reseed(
                c.inner,
                prediction_resistance,
                entropy,
                entropy_len,
                addin,
                addin_len,
            )
        })
        .ok_or(KaeError::NullParameter)
    })
}

unsafe extern "C" fn rand_enable_locking(ctx: *mut c_void) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || {
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx (freed only on drop).
        c.map(|c| unsafe { EVP_RAND_enable_locking(c.inner) })
            .ok_or(KaeError::NullParameter)
    })
}

unsafe extern "C" fn rand_get_ctx_params(ctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || -> Result<c_int, KaeError> {
        let c = c.ok_or(KaeError::NullParameter)?;
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx; params is the core's own
        // array (NULL or terminated, writable for this call), passed on unchanged.
        Ok(unsafe { EVP_RAND_CTX_get_params(c.inner, params) })
    })
}

unsafe extern "C" fn rand_set_ctx_params(ctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || -> Result<c_int, KaeError> {
        let c = c.ok_or(KaeError::NullParameter)?;
        // SAFETY: the core's params is NULL or a terminated OSSL_PARAM array valid for the call.
        let fwd = forwarded(&unsafe { Params::from_ptr(params) });
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx; fwd is a terminated array
        // we own whose elements point into the core's params, which outlive this call.
        Ok(unsafe { EVP_RAND_CTX_set_params(c.inner, fwd.as_ptr()) })
    })
}

/// Parameter descriptions of the private generator type (its context may not exist yet).
fn described(
    provctx: *mut c_void,
    alg: usize,
    settable: bool,
) -> Result<*const OSSL_PARAM, KaeError> {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let prov = unsafe { ProvCtx::clone_arc(provctx) }.ok_or(KaeError::NullParameter)?;
    let rand = fetch(&prov, alg)?;
    // SAFETY: the returned arrays are static data of the default provider, valid after the
    // EVP_RAND reference is dropped (the provider stays loaded in our private context).
    unsafe {
        let p = if settable {
            EVP_RAND_settable_ctx_params(rand)
        } else {
            EVP_RAND_gettable_ctx_params(rand)
        };
        EVP_RAND_free(rand);
        Ok(p)
    }
}

unsafe extern "C" fn rand_gettable_ctx_params<const ALG: usize>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    guard(None, core::ptr::null(), || described(provctx, ALG, false))
}

unsafe extern "C" fn rand_settable_ctx_params<const ALG: usize>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    guard(None, core::ptr::null(), || described(provctx, ALG, true))
}

unsafe extern "C" fn rand_verify_zeroization(ctx: *mut c_void) -> c_int {
    // SAFETY: as in rand_instantiate: ctx is our newctx's pointer or NULL, not yet freed.
    let c = unsafe { rand_ref(ctx) };
    guard(core_of(c).as_ref(), 0, || {
        // SAFETY: c.inner is the live EVP_RAND_CTX owned by RandCtx (freed only on drop).
        c.map(|c| unsafe { EVP_RAND_verify_zeroization(c.inner) })
            .ok_or(KaeError::NullParameter)
    })
}

macro_rules! rand_table {
    ($alg:literal) => {
        LazyLock::new(|| {
            crate::dispatch![
                OSSL_FUNC_RAND_NEWCTX => rand_newctx::<$alg> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_RAND_FREECTX => rand_freectx as unsafe extern "C" fn(_),
                OSSL_FUNC_RAND_INSTANTIATE => rand_instantiate as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
                OSSL_FUNC_RAND_UNINSTANTIATE => rand_uninstantiate as unsafe extern "C" fn(_) -> _,
                OSSL_FUNC_RAND_GENERATE => rand_generate as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _,
                OSSL_FUNC_RAND_RESEED => rand_reseed as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
                OSSL_FUNC_RAND_ENABLE_LOCKING => rand_enable_locking as unsafe extern "C" fn(_) -> _,
                OSSL_FUNC_RAND_GETTABLE_CTX_PARAMS => rand_gettable_ctx_params::<$alg> as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_RAND_SETTABLE_CTX_PARAMS => rand_settable_ctx_params::<$alg> as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_RAND_GET_CTX_PARAMS => rand_get_ctx_params as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_RAND_SET_CTX_PARAMS => rand_set_ctx_params as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_RAND_VERIFY_ZEROIZATION => rand_verify_zeroization as unsafe extern "C" fn(_) -> _,
            ]
        })
    };
}

/// Dispatch tables, in the order of [`NAMES`].
pub static RAND_TABLES: [LazyLock<Table<OSSL_DISPATCH>>; 3] =
    [rand_table!(0), rand_table!(1), rand_table!(2)];

/// Whether the default provider's generator `names` is one kae offers itself.
pub fn is_kae_generator(names: &str) -> bool {
    names.split(':').any(|n| {
        NAMES
            .iter()
            .any(|k| k.to_bytes().eq_ignore_ascii_case(n.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drbg_names_are_kae_own() {
        assert!(is_kae_generator("CTR-DRBG"));
        assert!(is_kae_generator("HASH-DRBG"));
        assert!(is_kae_generator("hmac-drbg"));
        assert!(!is_kae_generator("SEED-SRC"));
        assert!(!is_kae_generator("TEST-RAND"));
        assert!(!is_kae_generator("JITTER"));
    }
}
