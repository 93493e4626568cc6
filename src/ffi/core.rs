//! The core handle, error reporting, and the panic guard around every `extern "C"` body.

use super::libctx::{ChildLibCtx, LibCtx};
use super::sys::*;
use crate::error::KaeError;
use core::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The functions the OpenSSL core gave us at init, plus its handle for this provider instance.
///
/// The fields are private and [`Core::from_dispatch`] (unsafe) is the only way to make one, so
/// the safe methods that call the core's functions with the handle ([`Core::raise`]) can trust
/// them. Safe code may read the handle and `get_params` through [`CoreParams`] (`Deref`);
/// calling that function is `unsafe` anyway.
#[derive(Clone, Copy)]
pub struct Core {
    params: CoreParams,
    /// The core's whole dispatch table, for `OSSL_LIB_CTX_new_child`.
    dispatch: *const OSSL_DISPATCH,
    new_error: Option<core_new_error_fn>,
    set_error_debug: Option<core_set_error_debug_fn>,
    vset_error: Option<core_vset_error_fn>,
}

/// The read-only part of a [`Core`] that safe code may see: the core's handle for this
/// provider instance and its `get_params` function (None when the core did not offer it).
/// Nothing calls through a `CoreParams` on its own, so building one by hand cannot cause
/// undefined behaviour; a caller of `get_params` passes it the `handle` of the same `Core`.
#[derive(Clone, Copy)]
pub struct CoreParams {
    pub handle: *const OSSL_CORE_HANDLE,
    pub get_params: Option<core_get_params_fn>,
}

impl core::ops::Deref for Core {
    type Target = CoreParams;
    fn deref(&self) -> &CoreParams {
        &self.params
    }
}

// SAFETY: a Core holds only a handle and function pointers the core gave us (from_dispatch's
// contract: valid for as long as the Core is used), shared freely; the core's functions may be
// called from any thread with that handle.
unsafe impl Send for Core {}
unsafe impl Sync for Core {}

impl Core {
    /// # Safety
    /// `dispatch` is NULL or an OSSL_DISPATCH array terminated by function_id 0, each function
    /// of the type core_dispatch.h gives its id; those functions and `handle` stay valid for
    /// as long as the returned `Core` is used (the core's table lives until teardown).
    pub unsafe fn from_dispatch(
        handle: *const OSSL_CORE_HANDLE,
        mut dispatch: *const OSSL_DISPATCH,
    ) -> Core {
        let mut core = Core {
            params: CoreParams {
                handle,
                get_params: None,
            },
            dispatch,
            new_error: None,
            set_error_debug: None,
            vset_error: None,
        };
        // SAFETY (whole loop): the table is terminated by function_id 0 and each function has
        // the type the id documents (core_dispatch.h).
        unsafe {
            while !dispatch.is_null() && (*dispatch).function_id != 0 {
                let f = (*dispatch).function;
                match (*dispatch).function_id {
                    OSSL_FUNC_CORE_GET_PARAMS => {
                        core.params.get_params =
                            f.map(|f| core::mem::transmute::<_, core_get_params_fn>(f))
                    }
                    OSSL_FUNC_CORE_NEW_ERROR => {
                        core.new_error = f.map(|f| core::mem::transmute::<_, core_new_error_fn>(f))
                    }
                    OSSL_FUNC_CORE_SET_ERROR_DEBUG => {
                        core.set_error_debug =
                            f.map(|f| core::mem::transmute::<_, core_set_error_debug_fn>(f))
                    }
                    OSSL_FUNC_CORE_VSET_ERROR => {
                        core.vset_error =
                            f.map(|f| core::mem::transmute::<_, core_vset_error_fn>(f))
                    }
                    _ => {}
                }
                dispatch = dispatch.add(1);
            }
        }
        core
    }

    /// A new library context that is a child of the application's (None on failure): it
    /// sees the providers loaded there. Its maker frees it ([`LibCtx::free`]).
    pub fn new_child_libctx(&self) -> Option<ChildLibCtx> {
        // SAFETY: the handle and the whole dispatch table the core gave from_dispatch (the
        // only constructor), valid while this Core is used, as the function requires.
        let ctx = unsafe { OSSL_LIB_CTX_new_child(self.handle, self.dispatch) };
        core::ptr::NonNull::new(ctx).map(|c| ChildLibCtx(LibCtx::made(c)))
    }

    /// The core's UTF-8 parameters `keys` (its `openssl-version`, or the values of our config
    /// section), each None when the core has no such value or it is not UTF-8.
    pub fn utf8_params(&self, keys: &[&CStr]) -> Vec<Option<String>> {
        let mut values = vec![None; keys.len()];
        let Some(get) = self.get_params else {
            return values;
        };
        let mut slots: Vec<*const c_char> = vec![core::ptr::null(); keys.len()];
        let mut req: Vec<OSSL_PARAM> = slots
            .iter_mut()
            .zip(keys)
            .map(|(slot, key)| OSSL_PARAM {
                key: key.as_ptr(),
                data_type: OSSL_PARAM_UTF8_PTR,
                data: (slot as *mut *const c_char).cast(),
                data_size: core::mem::size_of::<*const c_char>(),
                return_size: OSSL_PARAM_UNMODIFIED,
            })
            .collect();
        req.push(super::params::END);
        // SAFETY: the core's function with its handle (from_dispatch's contract) and a
        // request array terminated by END whose slots outlive the call.
        unsafe { get(self.handle, req.as_mut_ptr()) };
        for (value, slot) in values.iter_mut().zip(&slots) {
            // SAFETY: the core left the slot NULL or pointed it at a string it owns.
            *value = unsafe { opt_cstr(*slot) }.map(str::to_owned);
        }
        values
    }

    /// Puts a new error with our reason code (and optional detail text) on the thread's queue.
    pub fn raise(&self, reason: KaeError, detail: Option<&str>) {
        let (Some(new_error), Some(vset)) = (self.new_error, self.vset_error) else {
            return;
        };
        // SAFETY: the functions and handle came from the core's dispatch table through
        // from_dispatch (the only constructor), whose contract keeps them valid while this Core
        // is used; the strings are static C strings. A NULL format means the va_list argument
        // is never read, so passing NULL for it is fine on every ABI we target.
        unsafe {
            new_error(self.handle);
            if let Some(dbg) = self.set_error_debug {
                dbg(self.handle, c"kae".as_ptr(), 0, c"kae".as_ptr());
            }
            vset(
                self.handle,
                reason.code(),
                core::ptr::null(),
                core::ptr::null_mut(),
            );
            if let Some(d) = detail {
                if let Ok(c) = std::ffi::CString::new(d) {
                    ERR_add_error_data(1, c.as_ptr());
                }
            }
        }
        log::debug!(
            "kae error: {}{}",
            reason.text(),
            detail.map(|d| format!(" ({d})")).unwrap_or_default()
        );
    }
}

/// Raises `reason` through the core's own error functions only (no detail text: adding one
/// would take our libcrypto's `ERR_add_error_data`). For failures where that libcrypto is not
/// the core's, such as a module built for another OpenSSL major version.
pub fn raise_core_only(core: &Core, reason: KaeError) {
    let (Some(new_error), Some(vset)) = (core.new_error, core.vset_error) else {
        return;
    };
    // SAFETY: the functions and handle came from the core's dispatch table through
    // from_dispatch (the only constructor), valid while `core` is used; the strings are static
    // C strings; a NULL format never reads the va_list.
    unsafe {
        new_error(core.handle);
        if let Some(dbg) = core.set_error_debug {
            dbg(
                core.handle,
                c"kae".as_ptr(),
                0,
                c"OSSL_provider_init".as_ptr(),
            );
        }
        vset(
            core.handle,
            reason.code(),
            core::ptr::null(),
            core::ptr::null_mut(),
        );
    }
}

/// A failure with optional detail, returned by the safe layer to the FFI boundary.
#[derive(Debug)]
pub struct Failure {
    pub reason: KaeError,
    pub detail: Option<String>,
}

impl From<KaeError> for Failure {
    fn from(reason: KaeError) -> Self {
        Failure {
            reason,
            detail: None,
        }
    }
}

impl Failure {
    pub fn with(reason: KaeError, detail: impl Into<String>) -> Self {
        Failure {
            reason,
            detail: Some(detail.into()),
        }
    }
}

/// Runs an FFI body: catches panics, reports errors through `core`, returns `on_error` on
/// failure. Every `extern "C"` function of the provider goes through this (or `guard_ptr`).
pub fn guard<T, E: Into<Failure>>(
    core: Option<&Core>,
    on_error: T,
    body: impl FnOnce() -> Result<T, E>,
) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            let f: Failure = e.into();
            if let Some(c) = core {
                c.raise(f.reason, f.detail.as_deref());
            }
            on_error
        }
        Err(_) => {
            if let Some(c) = core {
                c.raise(KaeError::Panic, None);
            }
            on_error
        }
    }
}

/// `guard` for functions returning a pointer (NULL on failure).
pub fn guard_ptr<T, E: Into<Failure>>(
    core: Option<&Core>,
    body: impl FnOnce() -> Result<*mut T, E>,
) -> *mut T {
    guard(core, core::ptr::null_mut(), body)
}

/// Borrow a C string argument (NULL → None).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and is not written for
/// the lifetime `'a`.
pub unsafe fn opt_cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        // SAFETY: p is non-NULL, so by the caller's contract it is a NUL-terminated string
        // that stays valid and unwritten for 'a.
        unsafe { CStr::from_ptr(p) }.to_str().ok()
    }
}
