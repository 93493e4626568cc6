//! kae's private copy of the default provider: a library context of its own with the default
//! provider loaded in it, made at init and unloaded at teardown.

use super::core::{Core, Failure};
use super::libctx::{ChildLibCtx, LibCtx};
use super::sys::*;
use crate::error::KaeError;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr::NonNull;

/// The default provider loaded into a private library context. A copyable handle: the
/// context and provider stay valid until [`PrivateDefault::unload`], whose contract is that
/// nothing uses the handle or its copies after.
#[derive(Clone, Copy)]
pub struct PrivateDefault {
    libctx: NonNull<OSSL_LIB_CTX>,
    provider: NonNull<OSSL_PROVIDER>,
}

// SAFETY: handles to libcrypto objects that are safe to use from any thread; the handle
// itself is two addresses.
unsafe impl Send for PrivateDefault {}
unsafe impl Sync for PrivateDefault {}

/// One algorithm of the default provider, read from its table: the entry as it is (its
/// pointers are the provider's static data) and its names and properties as text.
pub struct ListedAlgorithm {
    pub entry: OSSL_ALGORITHM,
    pub names: String,
    pub properties: String,
}

/// The type of the core's capability callback (`OSSL_CALLBACK`).
pub type CapabilityCb = unsafe extern "C" fn(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int;

impl PrivateDefault {
    /// A new library context with the default provider loaded in it; None when either fails.
    pub fn load() -> Option<PrivateDefault> {
        // SAFETY: plain constructor calls; a failure is checked and what was made is freed.
        unsafe {
            let libctx = NonNull::new(OSSL_LIB_CTX_new())?;
            match NonNull::new(OSSL_PROVIDER_load(libctx.as_ptr(), c"default".as_ptr())) {
                Some(provider) => Some(PrivateDefault { libctx, provider }),
                None => {
                    OSSL_LIB_CTX_free(libctx.as_ptr());
                    None
                }
            }
        }
    }

    /// The private library context.
    pub fn libctx(&self) -> LibCtx {
        LibCtx::made(self.libctx)
    }

    /// The default provider's own provider context.
    pub fn provider_ctx(&self) -> *mut c_void {
        // SAFETY: a provider loaded by `load` and not yet unloaded (the type's contract).
        unsafe { OSSL_PROVIDER_get0_provider_ctx(self.provider.as_ptr()) }
    }

    /// The default provider's algorithm table for operation `op` (NULL if it has none): a
    /// static table, terminated by a NULL name, valid while the provider is loaded.
    pub fn query_operation(&self, op: c_int) -> *const OSSL_ALGORITHM {
        let mut no_cache = 0;
        // SAFETY: a loaded provider (the type's contract) and a writable flag.
        unsafe { OSSL_PROVIDER_query_operation(self.provider.as_ptr(), op, &mut no_cache) }
    }

    /// The entries of [`query_operation`](Self::query_operation)'s table, read.
    pub fn algorithms(&self, op: c_int) -> Vec<ListedAlgorithm> {
        let mut out = Vec::new();
        let mut p = self.query_operation(op);
        if p.is_null() {
            return out;
        }
        // SAFETY: the provider's table is terminated by a NULL name; its strings are static
        // NUL-terminated C strings (properties may be NULL).
        unsafe {
            while !(*p).algorithm_names.is_null() {
                let entry = OSSL_ALGORITHM { ..*p };
                p = p.add(1);
                out.push(ListedAlgorithm {
                    names: CStr::from_ptr(entry.algorithm_names)
                        .to_string_lossy()
                        .into_owned(),
                    properties: if entry.property_definition.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(entry.property_definition)
                            .to_string_lossy()
                            .into_owned()
                    },
                    entry,
                });
            }
        }
        out
    }

    /// The default provider's capabilities `capability`, each handed to `cb` with `arg`.
    ///
    /// # Safety
    /// `capability` is a NUL-terminated string and `cb` and `arg` a callback of the core's
    /// and its argument, all valid for the call.
    pub unsafe fn get_capabilities(
        &self,
        capability: *const c_char,
        cb: Option<CapabilityCb>,
        arg: *mut c_void,
    ) -> c_int {
        // SAFETY: a loaded provider; the rest is the caller's contract.
        unsafe { OSSL_PROVIDER_get_capabilities(self.provider.as_ptr(), capability, cb, arg) }
    }

    /// Unloads the provider and frees its library context.
    ///
    /// # Safety
    /// Once, and nothing uses this handle, a copy of it or anything fetched through it after.
    pub unsafe fn unload(self) {
        // SAFETY: the caller's contract: the last use of both.
        unsafe {
            OSSL_PROVIDER_unload(self.provider.as_ptr());
            OSSL_LIB_CTX_free(self.libctx.as_ptr());
        }
    }
}

/// An instance's library contexts: a child of the application's (for fetches and random
/// numbers through the application's providers) and, when `load_default`, the private default
/// provider. Both or neither: a failure frees what was made. The caller frees the child
/// ([`LibCtx::free`]) and unloads the default at teardown.
pub fn instance_contexts(
    core: &Core,
    load_default: bool,
) -> Result<(ChildLibCtx, Option<PrivateDefault>), Failure> {
    let Some(child) = core.new_child_libctx() else {
        return Err(Failure::with(
            KaeError::Internal,
            "OSSL_LIB_CTX_new_child failed",
        ));
    };
    if !load_default {
        return Ok((child, None));
    }
    match PrivateDefault::load() {
        Some(default) => Ok((child, Some(default))),
        None => {
            // SAFETY: made just above and used by nothing yet.
            unsafe { child.libctx().free() };
            Err(KaeError::DefaultProviderUnavailable.into())
        }
    }
}
