//! The provider object's C face: `OSSL_provider_init`'s body, teardown, the provider's
//! parameters, the operation query, reason strings and capabilities, made from the
//! [`Provider`] trait that `provider/` implements in safe Rust. Only the exported symbol
//! itself lives at the top of the crate (`lib.rs`).

use super::{params_mut, provider, Table};
use crate::error::KaeError;
use crate::ffi::core::{guard, raise_core_only, Core, Failure};
use crate::ffi::params::ParamsMut;
use crate::ffi::provider::CapabilityCb;
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use core::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, LazyLock};

/// What the provider does for the core, in safe Rust.
pub trait Provider: 'static {
    /// Checks, before any libcrypto call of ours, that the running core can use this build
    /// (a 3.x build inside a 4.x core would hand 3.x objects to 4.x); Err says why not.
    fn check_core_version(core: &Core) -> Result<(), String>;
    /// Makes and registers an instance for `core`; returns the provider context pointer the
    /// core will pass back (only ever compared, never dereferenced).
    fn init(core: Core) -> Result<*mut c_void, Failure>;
    /// Forgets the instance registered under `provctx` (the core calls this once) and hands
    /// it back, for its library contexts to be released.
    fn teardown(provctx: *mut c_void) -> Option<Arc<ProvCtx>>;
    /// The provider's own dispatch table: [`table::<Self>()`](table), kept in a static.
    fn dispatch() -> &'static Table<OSSL_DISPATCH>;
    /// The descriptors of the parameters `get_params` answers, terminated by `END`.
    fn gettable_params() -> &'static [OSSL_PARAM];
    fn get_params(prov: &ProvCtx, params: &mut ParamsMut<'_>) -> Result<(), Failure>;
    /// The algorithm table of operation `op` for `prov` (NULL: none), valid while the
    /// instance lives.
    fn query_operation(prov: &ProvCtx, op: c_int) -> *const OSSL_ALGORITHM;
}

/// The body of `OSSL_provider_init` for provider `P`.
///
/// # Safety
/// The contract of `OSSL_provider_init_fn`: only the OpenSSL core calls it; `handle` is its
/// handle for this provider and `in_` NULL or its dispatch table (terminated by function_id 0,
/// each function of the type core_dispatch.h gives its id), both valid until our teardown;
/// `out` and `provctx` are NULL (refused) or writable for this call.
pub unsafe fn init<P: Provider>(
    handle: *const OSSL_CORE_HANDLE,
    in_: *const OSSL_DISPATCH,
    out: *mut *const OSSL_DISPATCH,
    provctx: *mut *mut c_void,
) -> c_int {
    // SAFETY: the core's handle and dispatch table, valid for the provider's lifetime.
    let core = unsafe { Core::from_dispatch(handle, in_) };
    // The version check comes before the panic guard, whose error reporting uses our
    // libcrypto. The refusal goes to stderr whatever the log level, since kae is then missing
    // from the process; the error raised through the core carries no detail text.
    match std::panic::catch_unwind(|| P::check_core_version(&core)) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            crate::logging::write_stderr_line(&format!("kae: error: {why}"));
            raise_core_only(&core, KaeError::WrongOpenSslVersion);
            return 0;
        }
        Err(_) => return 0,
    }
    guard(Some(&core), 0, || -> Result<c_int, Failure> {
        if out.is_null() || provctx.is_null() {
            return Err(KaeError::NullParameter.into());
        }
        let key = P::init(core)?;
        // SAFETY: out and provctx are writable for this call (non-NULL, checked above).
        unsafe {
            *out = P::dispatch().0.as_ptr();
            *provctx = key;
        }
        Ok(1)
    })
}

/// The provider's dispatch table for `P`.
pub fn table<P: Provider>() -> Table<OSSL_DISPATCH> {
    super::dispatch![
        OSSL_FUNC_PROVIDER_TEARDOWN => teardown::<P> as unsafe extern "C" fn(_),
        OSSL_FUNC_PROVIDER_GETTABLE_PARAMS => gettable_params::<P> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_PARAMS => get_params::<P> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_PROVIDER_QUERY_OPERATION => query_operation::<P> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_PROVIDER_GET_REASON_STRINGS => reason_strings as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_CAPABILITIES => capabilities as unsafe extern "C" fn(_, _, _, _) -> _,
    ]
}

unsafe extern "C" fn teardown<P: Provider>(provctx: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if provctx.is_null() {
            return Ok(());
        }
        if let Some(prov) = P::teardown(provctx) {
            if let Some(default) = prov.private_default {
                // SAFETY: loaded in init and unloaded once, here: the core tears an instance
                // down once, after it has freed every object of ours (keys, operation
                // contexts, generators) and holds no more of our methods (so none of the
                // re-listed ones either); nothing else uses the instance's contexts then.
                unsafe { default.unload() };
            }
            // SAFETY: made in init and freed once, here, for the same reason.
            unsafe { prov.libctx.libctx().free() };
        }
        Ok(())
    })
}

unsafe extern "C" fn gettable_params<P: Provider>(_provctx: *mut c_void) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| P::gettable_params().as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn get_params<P: Provider>(
    provctx: *mut c_void,
    params: *mut OSSL_PARAM,
) -> c_int {
    let Some(prov) = provider(provctx) else {
        return 0;
    };
    let core = prov.core;
    guard(Some(&core), 0, || -> Result<c_int, Failure> {
        // SAFETY: the core passes a terminated array, writable for the call.
        P::get_params(&prov, &mut unsafe { params_mut(params) })?;
        Ok(1)
    })
}

unsafe extern "C" fn query_operation<P: Provider>(
    provctx: *mut c_void,
    operation_id: c_int,
    no_cache: *mut c_int,
) -> *const OSSL_ALGORITHM {
    if !no_cache.is_null() {
        // SAFETY: no_cache is non-NULL (checked) and the core's writable int for this call.
        unsafe { *no_cache = 0 };
    }
    std::panic::catch_unwind(|| match provider(provctx) {
        Some(prov) => P::query_operation(&prov, operation_id),
        None => core::ptr::null(),
    })
    .unwrap_or(core::ptr::null())
}

/// Our reason codes and their texts, for the core's error strings.
static REASON_STRINGS: LazyLock<Table<OSSL_ITEM>> = LazyLock::new(|| {
    let mut v: Vec<OSSL_ITEM> = KaeError::ALL
        .iter()
        .map(|r| OSSL_ITEM {
            id: r.code(),
            ptr: r.c_text().as_ptr() as *mut c_void,
        })
        .collect();
    v.push(OSSL_ITEM {
        id: 0,
        ptr: core::ptr::null_mut(),
    });
    Table(v)
});

unsafe extern "C" fn reason_strings(_provctx: *mut c_void) -> *const OSSL_ITEM {
    std::panic::catch_unwind(|| REASON_STRINGS.0.as_ptr()).unwrap_or(core::ptr::null())
}

/// Capabilities (TLS groups, TLS signature algorithms) of the default provider, repeated
/// under our name: libssl only uses a group whose key management comes from the provider
/// that announced it, and with `provider=kae` preferred that key management is our re-listed
/// copy. Without the private default provider there is nothing to announce.
unsafe extern "C" fn capabilities(
    provctx: *mut c_void,
    capability: *const c_char,
    cb: Option<CapabilityCb>,
    arg: *mut c_void,
) -> c_int {
    let Some(prov) = std::panic::catch_unwind(|| provider(provctx))
        .ok()
        .flatten()
    else {
        return 0;
    };
    let Some(default) = prov.private_default else {
        return 1;
    };
    // SAFETY: the core's capability name, callback and argument, forwarded unchanged for
    // this call.
    unsafe { default.get_capabilities(capability, cb, arg) }
}
