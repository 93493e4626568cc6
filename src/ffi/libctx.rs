//! Library contexts as copyable handles: libcrypto's default one, or one that kae made at an
//! instance's init and frees at its teardown.

use super::sys::*;
use core::ptr::NonNull;

/// A library context to fetch from and draw random numbers in: libcrypto's default one
/// ([`LibCtx::DEFAULT`], alive for the process) or one kae made ([`ChildLibCtx`], the private
/// default provider's). A handle, not an owner: only `ffi` makes one from a pointer, and its
/// maker frees it ([`LibCtx::free`], unsafe) only after every use of every copy and of
/// everything fetched or made through it. That is what lets the functions taking a `LibCtx`
/// be safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibCtx(*mut OSSL_LIB_CTX);

// SAFETY: a library context may be used from any thread; the handle is an address.
unsafe impl Send for LibCtx {}
unsafe impl Sync for LibCtx {}

impl Default for LibCtx {
    fn default() -> Self {
        LibCtx::DEFAULT
    }
}

impl LibCtx {
    /// libcrypto's default library context (NULL to its functions).
    pub const DEFAULT: LibCtx = LibCtx(core::ptr::null_mut());

    /// A context `ffi` has just made.
    pub(super) fn made(ctx: NonNull<OSSL_LIB_CTX>) -> LibCtx {
        LibCtx(ctx.as_ptr())
    }

    /// The pointer libcrypto's functions take (NULL for the default context).
    pub fn as_ptr(self) -> *mut OSSL_LIB_CTX {
        self.0
    }

    /// Frees a context kae made (nothing for the default one).
    ///
    /// # Safety
    /// Once, and nothing uses this handle, a copy of it, or anything fetched or made through
    /// it after.
    pub unsafe fn free(self) {
        if !self.0.is_null() {
            // SAFETY: the caller's contract.
            unsafe { OSSL_LIB_CTX_free(self.0) };
        }
    }
}

/// A child of the application's library context (`OSSL_LIB_CTX_new_child`, made from the
/// core's dispatch table by [`Core::new_child_libctx`](super::Core::new_child_libctx)): it
/// sees the application's providers and carries the core's BIO upcalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildLibCtx(pub(super) LibCtx);

impl ChildLibCtx {
    pub fn libctx(self) -> LibCtx {
        self.0
    }
}
