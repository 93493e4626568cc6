//! Capabilities (TLS groups and signature algorithms) announced under kae's name.

use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use core::ffi::{c_char, c_int, c_void};

type CapabilityCb = unsafe extern "C" fn(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int;

/// Capabilities (TLS groups, TLS signature algorithms) of the default provider, repeated
/// under our name: libssl only uses a group whose key management comes from the provider
/// that announced it, and with `provider=kae` preferred that key management is our re-listed
/// copy.
pub(super) unsafe extern "C" fn kae_get_capabilities(
    provctx: *mut c_void,
    capability: *const c_char,
    cb: Option<CapabilityCb>,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return 0;
    };
    if prov.default_provider.is_null() {
        return 1; // nothing to announce
    }
    // SAFETY: a provider we hold a reference to; arguments forwarded unchanged.
    unsafe { OSSL_PROVIDER_get_capabilities(prov.default_provider, capability, cb, arg) }
}
