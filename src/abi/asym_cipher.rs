//! `OSSL_OP_ASYM_CIPHER`: the [`AsymCipher`] trait and the dispatch table made from it.

use super::*;

/// An asymmetric cipher. Each direction says first how much it may write (`*_size`): a size
/// query answers that, and a smaller buffer is refused before any work, so whether a
/// decryption succeeds never depends on the length of a secret message.
pub trait AsymCipher: OpCtx + Duplicate + CtxParams {
    /// `key` is None for NULL (keep the current key) and for another provider's key object.
    fn encrypt_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure>;
    fn decrypt_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure>;
    fn encrypt_size(&self) -> Result<usize, Failure>;
    /// Encrypts `msg` into `out` (`encrypt_size()` bytes); returns the length written.
    fn encrypt(&mut self, msg: &[u8], out: &mut [u8]) -> Result<usize, Failure>;
    fn decrypt_size(&self) -> Result<usize, Failure>;
    /// Decrypts `ct` into the front of `out` (`decrypt_size()` bytes, all of them written);
    /// returns the message length.
    fn decrypt(&mut self, ct: &[u8], out: &mut [u8]) -> Result<usize, Failure>;
}

unsafe extern "C" fn encrypt_init<C: AsymCipher>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context, keydata and parameters, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.encrypt_init(key(keydata), &params(ps))) }
}

unsafe extern "C" fn decrypt_init<C: AsymCipher>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context, keydata and parameters, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.decrypt_init(key(keydata), &params(ps))) }
}

unsafe extern "C" fn encrypt<C: AsymCipher>(
    ctx: *mut c_void,
    out: *mut u8,
    outlen: *mut usize,
    outsize: usize,
    inp: *const u8,
    inlen: usize,
) -> c_int {
    // SAFETY: the core's context; out holds outsize bytes, inp inlen bytes, outlen is NULL or
    // writable, all for the call.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            let msg = input(inp, inlen);
            sized_output(
                c,
                out,
                outlen,
                outsize,
                |c| c.encrypt_size(),
                |c, buf| c.encrypt(msg?, buf),
            )
        })
    }
}

unsafe extern "C" fn decrypt<C: AsymCipher>(
    ctx: *mut c_void,
    out: *mut u8,
    outlen: *mut usize,
    outsize: usize,
    inp: *const u8,
    inlen: usize,
) -> c_int {
    // SAFETY: as in encrypt.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            let ct = input(inp, inlen);
            sized_output(
                c,
                out,
                outlen,
                outsize,
                |c| c.decrypt_size(),
                |c, buf| c.decrypt(ct?, buf),
            )
        })
    }
}

/// The `OSSL_OP_ASYM_CIPHER` dispatch table of `C`.
pub fn table<C: AsymCipher>() -> Table<OSSL_DISPATCH> {
    crate::abi::dispatch![
        OSSL_FUNC_ASYM_CIPHER_NEWCTX => newctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_ASYM_CIPHER_ENCRYPT_INIT => encrypt_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_ENCRYPT => encrypt::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_DECRYPT_INIT => decrypt_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_DECRYPT => decrypt::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_ASYM_CIPHER_DUPCTX => dupctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_ASYM_CIPHER_GET_CTX_PARAMS => get_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_GETTABLE_CTX_PARAMS => gettable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_SET_CTX_PARAMS => set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_ASYM_CIPHER_SETTABLE_CTX_PARAMS => settable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
    ]
}
