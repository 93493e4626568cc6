//! The C ABI the core calls: every `extern "C"` shim and dispatch table of the operations,
//! made from one Rust trait per operation (`kem.rs`, `asym_cipher.rs`, `rand.rs`,
//! `encoder.rs`, `signature.rs`, `keymgmt.rs`), and the key object the core holds (`key.rs`).
//!
//! This module is where the core's pointers become Rust values, once for every operation:
//! the provider context pointer becomes an `Arc<ProvCtx>`, an operation context `void *` a
//! `&mut` of the operation's own type (boxed by `newctx`/`dupctx`, dropped by `freectx`), a
//! keydata pointer an `Option<&KeyObj>`, an `OSSL_PARAM` array `Params` or `ParamsMut`, and an
//! `(out, outlen, outsize)` triple a size query or a buffer. Every body runs inside the panic
//! guard, which raises a failure through the core and returns the C value for it. The
//! operations themselves are safe Rust (the crate denies `unsafe_code`).

pub mod asym_cipher;
pub mod encoder;
pub mod kem;
pub mod key;
pub mod keymgmt;
pub mod provider;
pub mod rand;
pub mod signature;

use crate::error::KaeError;
use crate::ffi::core::{guard, Core, Failure};
use crate::ffi::params::{Params, ParamsMut};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use core::ffi::{c_int, c_void};
use key::KeyObj;
use std::sync::Arc;
use zeroize::Zeroizing;

pub use crate::ffi::table::{Table, TableEntry};

/// The end of an algorithm table.
pub const ALG_END: OSSL_ALGORITHM = OSSL_ALGORITHM {
    algorithm_names: core::ptr::null(),
    property_definition: core::ptr::null(),
    implementation: core::ptr::null(),
    algorithm_description: core::ptr::null(),
};

/// Builds an `OSSL_DISPATCH` table (terminated) from typed `extern "C"` functions.
macro_rules! dispatch {
    ($( $id:expr => $f:expr ),* $(,)?) => {
        $crate::abi::Table(vec![
            $( {
                let f = $f as *const ();
                $crate::ffi::sys::OSSL_DISPATCH {
                    function_id: $id,
                    // SAFETY: OpenSSL casts the pointer back to the type documented for `$id`,
                    // which is the type of `$f`.
                    function: Some(unsafe { core::mem::transmute::<*const (), unsafe extern "C" fn()>(f) }),
                }
            }, )*
            $crate::ffi::sys::OSSL_DISPATCH { function_id: 0, function: None },
        ])
    };
}
pub(crate) use dispatch;

/// An operation context: what `newctx` makes for the core and `freectx` drops. The core
/// holds it as a `void *` and never uses one from two threads at once.
pub trait OpCtx: Sized + 'static {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure>;
    /// The instance whose core hears of this context's failures.
    fn provider(&self) -> &ProvCtx;
}

/// An operation context the core may copy (`dupctx`).
pub trait Duplicate: OpCtx {
    fn dup(&self) -> Result<Self, Failure>;
}

/// The settable and gettable parameters of an operation context.
pub trait CtxParams {
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure>;
    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure>;
    /// The descriptors `set_params` reads, terminated by `END`, as the core of `prov` (None:
    /// not one of ours) knows them.
    fn settable(prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM];
    /// The descriptors `get_params` writes, terminated by `END`.
    fn gettable(prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM];
}

/// The instance behind the provider context pointer the core passes back (None: not ours).
fn provider(provctx: *mut c_void) -> Option<Arc<ProvCtx>> {
    ProvCtx::clone_arc(provctx)
}

/// The operation context behind `p`.
///
/// # Safety
/// `p` is NULL or a context of type `C` that [`newctx`] or [`dupctx`] returned and the core
/// has not freed; the core uses it from no other thread during the call.
unsafe fn ctx_mut<'a, C: OpCtx>(p: *mut c_void) -> Option<&'a mut C> {
    // SAFETY: per the contract, NULL or a live Box<C> leaked by newctx/dupctx, borrowed once.
    unsafe { p.cast::<C>().as_mut() }
}

/// Runs `f` on the operation context `ctx` inside the panic guard, raising a failure through
/// the context's core: 1 when `f` succeeds, 0 when it fails or there is no context.
///
/// # Safety
/// As [`ctx_mut`].
unsafe fn with_ctx<C: OpCtx>(
    ctx: *mut c_void,
    f: impl FnOnce(&mut C) -> Result<(), Failure>,
) -> c_int {
    // SAFETY: the caller's contract is with_ctx_status's.
    unsafe { with_ctx_status(ctx, 0, |c| f(c).map(|()| 1)) }
}

/// [`with_ctx`] for a body that chooses its own return value (`on_error` on failure).
///
/// # Safety
/// As [`ctx_mut`].
unsafe fn with_ctx_status<C: OpCtx>(
    ctx: *mut c_void,
    on_error: c_int,
    f: impl FnOnce(&mut C) -> Result<c_int, Failure>,
) -> c_int {
    // SAFETY: the caller's contract is ctx_mut's.
    let Some(c) = (unsafe { ctx_mut::<C>(ctx) }) else {
        return 0;
    };
    let core: Core = c.provider().core;
    guard(Some(&core), on_error, || f(c))
}

/// The key object behind a keydata pointer: None for NULL and for another provider's key.
///
/// # Safety
/// `p` is NULL or a keydata pointer the core got from a key management (at least 8 readable,
/// aligned bytes), valid for the call.
unsafe fn key<'a>(p: *mut c_void) -> Option<&'a KeyObj> {
    // SAFETY: the caller's contract is from_ptr's; only our key objects pass its tag check.
    unsafe { KeyObj::from_ptr(p) }
}

/// # Safety
/// `p` is NULL or a terminated OSSL_PARAM array valid and unwritten for the call.
unsafe fn params<'a>(p: *const OSSL_PARAM) -> Params<'a> {
    // SAFETY: the caller's contract is from_ptr's.
    unsafe { Params::from_ptr(p) }
}

/// # Safety
/// `p` is NULL or a terminated OSSL_PARAM array valid and writable for the call.
unsafe fn params_mut<'a>(p: *mut OSSL_PARAM) -> ParamsMut<'a> {
    // SAFETY: the caller's contract is from_ptr's.
    unsafe { ParamsMut::from_ptr(p) }
}

/// The core's input buffer (NULL only when empty).
///
/// # Safety
/// As [`crate::ffi::in_slice`].
unsafe fn input<'a>(p: *const u8, len: usize) -> Result<&'a [u8], Failure> {
    // SAFETY: the caller's contract is in_slice's.
    Ok(unsafe { crate::ffi::in_slice(p, len) }?)
}

/// The core's output buffer (NULL only when empty).
///
/// # Safety
/// When `p` is non-NULL and `len` > 0, `p` is valid for writes of `len` bytes, and nothing
/// else reads or writes them during the call.
unsafe fn output<'a>(p: *mut u8, len: usize) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(KaeError::NullParameter.into());
    }
    // SAFETY: non-NULL and len > 0 (checked), so writable for len bytes (the contract).
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// Stores `len` through a length pointer of the core, unless it is NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of a `usize`.
unsafe fn set_len(p: *mut usize, len: usize) {
    if !p.is_null() {
        // SAFETY: non-NULL, so writable per the contract.
        unsafe { *p = len };
    }
}

/// Produces an output of `ctx` of at most `size` bytes into the core's `(out, outlen, outsize)`:
/// a NULL `out` asks for `size`; a buffer smaller than `size` is refused before any work.
/// `produce` writes into a scratch buffer of exactly `size` bytes (wiped after) and returns
/// the length of its result; the whole scratch buffer is copied, whatever that length, so
/// neither the copy nor the length store depends on a secret length.
///
/// # Safety
/// `outlen` is NULL or writable; `out` is NULL or valid for writes of `outsize` bytes.
unsafe fn sized_output<C>(
    ctx: &mut C,
    out: *mut u8,
    outlen: *mut usize,
    outsize: usize,
    size: impl FnOnce(&C) -> Result<usize, Failure>,
    produce: impl FnOnce(&mut C, &mut [u8]) -> Result<usize, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract is this function's.
    unsafe {
        sized_output_after(
            ctx,
            out,
            outlen,
            outsize,
            size,
            |_| Ok(()),
            |c, (), buf| produce(c, buf),
        )
    }
}

/// [`sized_output`] for an output whose input is used up first: once a buffer is given,
/// `finish` ends the input (a running digest) before the buffer's size is checked, so a
/// buffer too small leaves the operation ended, as the default provider's does; `produce`
/// then writes from what `finish` returned.
///
/// # Safety
/// As [`sized_output`].
unsafe fn sized_output_after<C, T>(
    ctx: &mut C,
    out: *mut u8,
    outlen: *mut usize,
    outsize: usize,
    size: impl FnOnce(&C) -> Result<usize, Failure>,
    finish: impl FnOnce(&mut C) -> Result<T, Failure>,
    produce: impl FnOnce(&mut C, T, &mut [u8]) -> Result<usize, Failure>,
) -> Result<(), Failure> {
    if outlen.is_null() {
        return Err(KaeError::NullParameter.into());
    }
    let size = size(ctx)?;
    if out.is_null() {
        // SAFETY: outlen is non-NULL and writable (the contract).
        unsafe { set_len(outlen, size) };
        return Ok(());
    }
    let input = finish(ctx)?;
    if outsize < size {
        return Err(Failure::with(
            KaeError::BufferTooSmall,
            format!("output buffer of {outsize} bytes; need {size}"),
        ));
    }
    let mut scratch = Zeroizing::new(vec![0u8; size]);
    let len = produce(ctx, input, &mut scratch)?;
    // SAFETY: out is valid for outsize ≥ size bytes (the contract, checked above) and the
    // scratch buffer is ours, so they do not overlap; outlen is writable.
    unsafe {
        core::ptr::copy_nonoverlapping(scratch.as_ptr(), out, size);
        set_len(outlen, len);
    }
    Ok(())
}

// ---- shims every operation context shares ---------------------------------------------------

unsafe extern "C" fn newctx<C: OpCtx>(provctx: *mut c_void) -> *mut c_void {
    let Some(prov) = provider(provctx) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard(Some(&core), core::ptr::null_mut(), || {
        C::new(prov).map(|c| Box::into_raw(Box::new(c)).cast())
    })
}

unsafe extern "C" fn freectx<C: OpCtx>(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: ctx is the Box<C> our newctx/dupctx leaked; the core frees it once and never
        // uses it after.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ctx.cast::<C>()) }));
    }
}

unsafe extern "C" fn dupctx<C: Duplicate>(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: the core passes a context our newctx/dupctx returned (or NULL), not yet freed.
    let Some(c) = (unsafe { ctx_mut::<C>(ctx) }) else {
        return core::ptr::null_mut();
    };
    let core = c.provider().core;
    guard(Some(&core), core::ptr::null_mut(), || {
        c.dup().map(|d| Box::into_raw(Box::new(d)).cast())
    })
}

unsafe extern "C" fn set_ctx_params<C: OpCtx + CtxParams>(
    ctx: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and its parameter array, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.set_params(&params(ps))) }
}

unsafe extern "C" fn get_ctx_params<C: OpCtx + CtxParams>(
    ctx: *mut c_void,
    ps: *mut OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and its writable parameter array, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.get_params(&mut params_mut(ps))) }
}

unsafe extern "C" fn settable_ctx_params<C: CtxParams>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| C::settable(provider(provctx).as_deref()).as_ptr())
        .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn gettable_ctx_params<C: CtxParams>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| C::gettable(provider(provctx).as_deref()).as_ptr())
        .unwrap_or(core::ptr::null())
}
