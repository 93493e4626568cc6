//! `OSSL_OP_RAND`: the [`Rand`] trait and the dispatch table made from it.

use super::*;

/// A random generator. Once the core has enabled locking it may call one generator from
/// several threads, so every call takes `&self`. A `bool` answer is passed on to the core as
/// it is, without an error of kae's; a `Failure` is raised.
pub trait Rand: Sized + Send + Sync + 'static {
    /// A new generator of instance `prov` (the core's parent generator is not used).
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure>;
    fn provider(&self) -> &ProvCtx;
    /// `personalization` is None for NULL.
    fn instantiate(
        &self,
        strength: u32,
        prediction_resistance: bool,
        personalization: Option<&[u8]>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    fn uninstantiate(&self) -> bool;
    fn generate(
        &self,
        out: &mut [u8],
        strength: u32,
        prediction_resistance: bool,
        addin: Option<&[u8]>,
    ) -> Result<(), Failure>;
    fn reseed(
        &self,
        prediction_resistance: bool,
        entropy: Option<&[u8]>,
        addin: Option<&[u8]>,
    ) -> bool;
    fn enable_locking(&self) -> bool;
    fn verify_zeroization(&self) -> bool;
    fn get_params(&self, params: &mut ParamsMut<'_>) -> bool;
    fn set_params(&self, params: &Params<'_>) -> bool;
    /// The parameters `set_params` takes (None: the core gets NULL).
    fn settable(prov: &ProvCtx) -> Result<Option<&'static [OSSL_PARAM]>, Failure>;
    fn gettable(prov: &ProvCtx) -> Result<Option<&'static [OSSL_PARAM]>, Failure>;
}

/// The generator behind `p`.
///
/// # Safety
/// `p` is NULL or a generator of type `C` our newctx returned that the core has not freed.
unsafe fn rand_ref<'a, C: Rand>(p: *mut c_void) -> Option<&'a C> {
    // SAFETY: per the contract NULL or a live Box<C>; shared, as the core may share it.
    unsafe { p.cast::<C>().as_ref() }
}

/// Runs `f` on the generator `ctx` inside the panic guard: its answer as 1 or 0, a failure
/// raised through the generator's core.
///
/// # Safety
/// As [`rand_ref`].
unsafe fn with_rand<C: Rand>(
    ctx: *mut c_void,
    f: impl FnOnce(&C) -> Result<bool, Failure>,
) -> c_int {
    // SAFETY: the caller's contract is rand_ref's.
    let Some(c) = (unsafe { rand_ref::<C>(ctx) }) else {
        return 0;
    };
    let core = c.provider().core;
    guard(Some(&core), 0, || f(c).map(c_int::from))
}

/// An optional input of the core: None for NULL.
///
/// # Safety
/// `p` is NULL or valid for reads of `len` bytes for the call.
unsafe fn optional<'a>(p: *const u8, len: usize) -> Result<Option<&'a [u8]>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, so valid for len bytes (the contract).
    unsafe { input(p, len) }.map(Some)
}

unsafe extern "C" fn newctx<C: Rand>(
    provctx: *mut c_void,
    _parent: *mut c_void,
    _parent_calls: *const OSSL_DISPATCH,
) -> *mut c_void {
    let prov = provider(provctx);
    let core = prov.as_ref().map(|p| p.core);
    guard(core.as_ref(), core::ptr::null_mut(), || {
        let prov = prov.ok_or(KaeError::NullParameter)?;
        C::new(prov).map(|c| Box::into_raw(Box::new(c)).cast())
    })
}

unsafe extern "C" fn freectx<C: Rand>(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: a pointer our newctx returned; the core frees it once.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ctx.cast::<C>()) }));
    }
}

unsafe extern "C" fn instantiate<C: Rand>(
    ctx: *mut c_void,
    strength: u32,
    prediction_resistance: c_int,
    pstr: *const u8,
    pstr_len: usize,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's generator, buffer and parameters, valid for the call.
    unsafe {
        with_rand::<C>(ctx, |c| {
            let pstr = optional(pstr, pstr_len)?;
            c.instantiate(strength, prediction_resistance != 0, pstr, &params(ps))
                .map(|()| true)
        })
    }
}

unsafe extern "C" fn uninstantiate<C: Rand>(ctx: *mut c_void) -> c_int {
    // SAFETY: the core's generator.
    unsafe { with_rand::<C>(ctx, |c| Ok(c.uninstantiate())) }
}

unsafe extern "C" fn generate<C: Rand>(
    ctx: *mut c_void,
    out: *mut u8,
    outlen: usize,
    strength: u32,
    prediction_resistance: c_int,
    addin: *const u8,
    addin_len: usize,
) -> c_int {
    // SAFETY: the core's generator; out is writable for outlen bytes, addin NULL or readable
    // for addin_len, for the call.
    unsafe {
        with_rand::<C>(ctx, |c| {
            let out = output(out, outlen)?;
            let addin = optional(addin, addin_len)?;
            c.generate(out, strength, prediction_resistance != 0, addin)
                .map(|()| true)
        })
    }
}

unsafe extern "C" fn reseed<C: Rand>(
    ctx: *mut c_void,
    prediction_resistance: c_int,
    entropy: *const u8,
    entropy_len: usize,
    addin: *const u8,
    addin_len: usize,
) -> c_int {
    // SAFETY: the core's generator and buffers (NULL or readable for their lengths).
    unsafe {
        with_rand::<C>(ctx, |c| {
            let entropy = optional(entropy, entropy_len)?;
            let addin = optional(addin, addin_len)?;
            Ok(c.reseed(prediction_resistance != 0, entropy, addin))
        })
    }
}

unsafe extern "C" fn enable_locking<C: Rand>(ctx: *mut c_void) -> c_int {
    // SAFETY: the core's generator.
    unsafe { with_rand::<C>(ctx, |c| Ok(c.enable_locking())) }
}

unsafe extern "C" fn verify_zeroization<C: Rand>(ctx: *mut c_void) -> c_int {
    // SAFETY: the core's generator.
    unsafe { with_rand::<C>(ctx, |c| Ok(c.verify_zeroization())) }
}

unsafe extern "C" fn get_ctx_params<C: Rand>(ctx: *mut c_void, ps: *mut OSSL_PARAM) -> c_int {
    // SAFETY: the core's generator and its writable parameter array.
    unsafe { with_rand::<C>(ctx, |c| Ok(c.get_params(&mut params_mut(ps)))) }
}

unsafe extern "C" fn set_ctx_params<C: Rand>(ctx: *mut c_void, ps: *const OSSL_PARAM) -> c_int {
    // SAFETY: the core's generator and its parameter array.
    unsafe { with_rand::<C>(ctx, |c| Ok(c.set_params(&params(ps)))) }
}

/// A parameter list as the core takes it: NULL for none or on failure (raised nowhere: the
/// core passes no context to these).
fn list(l: Result<Option<&'static [OSSL_PARAM]>, Failure>) -> *const OSSL_PARAM {
    match l {
        Ok(Some(l)) => l.as_ptr(),
        _ => core::ptr::null(),
    }
}

unsafe extern "C" fn gettable_ctx_params<C: Rand>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| {
        list(
            provider(provctx)
                .ok_or(KaeError::NullParameter.into())
                .and_then(|p| C::gettable(&p)),
        )
    })
    .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn settable_ctx_params<C: Rand>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| {
        list(
            provider(provctx)
                .ok_or(KaeError::NullParameter.into())
                .and_then(|p| C::settable(&p)),
        )
    })
    .unwrap_or(core::ptr::null())
}

/// The `OSSL_OP_RAND` dispatch table of `C`.
pub fn table<C: Rand>() -> Table<OSSL_DISPATCH> {
    crate::abi::dispatch![
        OSSL_FUNC_RAND_NEWCTX => newctx::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_RAND_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_RAND_INSTANTIATE => instantiate::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_RAND_UNINSTANTIATE => uninstantiate::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_RAND_GENERATE => generate::<C> as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _,
        OSSL_FUNC_RAND_RESEED => reseed::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_RAND_ENABLE_LOCKING => enable_locking::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_RAND_GETTABLE_CTX_PARAMS => gettable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_RAND_SETTABLE_CTX_PARAMS => settable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_RAND_GET_CTX_PARAMS => get_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_RAND_SET_CTX_PARAMS => set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_RAND_VERIFY_ZEROIZATION => verify_zeroization::<C> as unsafe extern "C" fn(_) -> _,
    ]
}
