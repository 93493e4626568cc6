//! `OSSL_OP_KEM`: the [`Kem`] trait and the dispatch table made from it.

use super::*;

/// A key encapsulation mechanism whose ciphertext and secret are both `size()` bytes.
pub trait Kem: OpCtx + Duplicate + CtxParams {
    /// `key` is None for NULL and for another provider's key object.
    fn encapsulate_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    fn decapsulate_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    /// Err while no operation is selected: `encapsulate` and `decapsulate` then raise it and
    /// return -2, the default provider's value for an undefined operation.
    fn operation_selected(&self) -> Result<(), Failure>;
    /// The length of the ciphertext and of the secret.
    fn size(&self) -> Result<usize, Failure>;
    /// Fills `ct` and `secret` (`size()` bytes each).
    fn encapsulate(&mut self, ct: &mut [u8], secret: &mut [u8]) -> Result<(), Failure>;
    /// Recovers the secret (`size()` bytes) from `ct`, which comes unchecked.
    fn decapsulate(&mut self, ct: &[u8], secret: &mut [u8]) -> Result<(), Failure>;
}

const NO_OPERATION: c_int = -2;

/// Runs an encapsulate or decapsulate body, with -2 when no operation is selected.
///
/// # Safety
/// As [`ctx_mut`].
unsafe fn with_operation<C: Kem>(
    ctx: *mut c_void,
    f: impl FnOnce(&mut C, usize) -> Result<(), Failure>,
) -> c_int {
    // SAFETY: the caller's contract is with_ctx_status's.
    unsafe {
        with_ctx_status::<C>(ctx, 0, |c| {
            if let Err(e) = c.operation_selected() {
                c.provider().core.raise(e.reason, e.detail.as_deref());
                return Ok(NO_OPERATION);
            }
            let k = c.size()?;
            f(c, k).map(|()| 1)
        })
    }
}

unsafe extern "C" fn encapsulate_init<C: Kem>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context, keydata and parameters, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.encapsulate_init(key(keydata), &params(ps))) }
}

unsafe extern "C" fn decapsulate_init<C: Kem>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context, keydata and parameters, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.decapsulate_init(key(keydata), &params(ps))) }
}

/// Writes the ciphertext and the secret, or reports their sizes when `out` is NULL. A
/// non-NULL `*outlen` gives the size of `out`; `secret` must hold `size()` bytes (the API
/// has no size for it).
unsafe extern "C" fn encapsulate<C: Kem>(
    ctx: *mut c_void,
    out: *mut u8,
    outlen: *mut usize,
    secret: *mut u8,
    secretlen: *mut usize,
) -> c_int {
    // SAFETY (whole body): the core's context; out, secret and the length pointers are NULL
    // or valid as the comment above says, for the call.
    unsafe {
        with_operation::<C>(ctx, |c, k| {
            if out.is_null() {
                if outlen.is_null() && secretlen.is_null() {
                    return Err(KaeError::NullParameter.into());
                }
                set_len(outlen, k);
                set_len(secretlen, k);
                return Ok(());
            }
            if !outlen.is_null() && *outlen < k {
                return Err(Failure::with(
                    KaeError::BufferTooSmall,
                    format!("ciphertext buffer of {} bytes; need {k}", *outlen),
                ));
            }
            if secret.is_null() {
                return Err(Failure::with(KaeError::NullParameter, "no secret buffer"));
            }
            let mut ct = Zeroizing::new(vec![0u8; k]);
            let mut z = Zeroizing::new(vec![0u8; k]);
            c.encapsulate(&mut ct, &mut z)?;
            core::ptr::copy_nonoverlapping(ct.as_ptr(), out, k);
            core::ptr::copy_nonoverlapping(z.as_ptr(), secret, k);
            set_len(outlen, k);
            set_len(secretlen, k);
            Ok(())
        })
    }
}

/// Recovers the secret, or reports its size when `out` is NULL.
unsafe extern "C" fn decapsulate<C: Kem>(
    ctx: *mut c_void,
    out: *mut u8,
    outlen: *mut usize,
    inp: *const u8,
    inlen: usize,
) -> c_int {
    // SAFETY (whole body): the core's context; a non-NULL out holds *outlen bytes (or, without
    // outlen, size()); inp holds inlen bytes; all valid for the call.
    unsafe {
        with_operation::<C>(ctx, |c, k| {
            if out.is_null() {
                if outlen.is_null() {
                    return Err(KaeError::NullParameter.into());
                }
                set_len(outlen, k);
                return Ok(());
            }
            if !outlen.is_null() && *outlen < k {
                return Err(Failure::with(
                    KaeError::BufferTooSmall,
                    format!("secret buffer of {} bytes; need {k}", *outlen),
                ));
            }
            let ct = input(inp, inlen)?;
            let mut z = Zeroizing::new(vec![0u8; k]);
            c.decapsulate(ct, &mut z)?;
            core::ptr::copy_nonoverlapping(z.as_ptr(), out, k);
            set_len(outlen, k);
            Ok(())
        })
    }
}

/// The `OSSL_OP_KEM` dispatch table of `C`.
pub fn table<C: Kem>() -> Table<OSSL_DISPATCH> {
    crate::abi::dispatch![
        OSSL_FUNC_KEM_NEWCTX => newctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEM_ENCAPSULATE_INIT => encapsulate_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEM_ENCAPSULATE => encapsulate::<C> as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_KEM_DECAPSULATE_INIT => decapsulate_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEM_DECAPSULATE => decapsulate::<C> as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_KEM_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_KEM_DUPCTX => dupctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEM_GET_CTX_PARAMS => get_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_GETTABLE_CTX_PARAMS => gettable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_SET_CTX_PARAMS => set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_SETTABLE_CTX_PARAMS => settable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
    ]
}
