//! `OSSL_OP_SIGNATURE`: the [`Signature`] trait (a signature scheme whose padding and digest
//! the caller chooses) and the [`SignatureAlgorithm`] trait (a composite algorithm such as
//! `RSA-SHA256`, OpenSSL 3.4+), and the dispatch tables made from them.

use super::*;
use core::ffi::{c_char, CStr};
use std::panic::AssertUnwindSafe;

/// A signature context, made with the property query its digests are fetched with.
pub trait SignatureCtx: Duplicate {
    fn set_properties(&mut self, propq: Option<&str>);
    /// The length of a signature: size queries answer it; a smaller buffer is refused.
    fn sign_size(&self) -> Result<usize, Failure>;
    /// What a size query of verify-recover answers.
    fn verify_recover_size(&self) -> Result<usize, Failure>;
    /// The data recovered from `sig`.
    fn verify_recover(&mut self, sig: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure>;
}

/// The plain signature: sign / verify / verify-recover on a digest, digest-sign and
/// digest-verify, context and digest parameters.
pub trait Signature: SignatureCtx + CtxParams {
    /// `key` is None for NULL (keep the current key) and for another provider's key object.
    fn sign_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure>;
    fn verify_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure>;
    fn verify_recover_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    /// Signs `tbs` into `sig` (`sign_size()` bytes); returns the length written.
    fn sign(&mut self, tbs: &[u8], sig: &mut [u8]) -> Result<usize, Failure>;
    fn verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure>;
    fn digest_sign_init(
        &mut self,
        md: Option<&str>,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    fn digest_verify_init(
        &mut self,
        md: Option<&str>,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    fn digest_update(&mut self, data: &[u8]) -> Result<(), Failure>;
    /// Ends the running digest and gives its value, which `sign` then signs. Called once a
    /// signature buffer is given, before its size is checked (a size query leaves the digest
    /// running).
    fn end_digest(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure>;
    fn digest_verify_final(&mut self, sig: &[u8]) -> Result<(), Failure>;
    /// The running digest's parameters: the digest's answer, passed on without an error of
    /// kae's (false without a running digest).
    fn get_md_params(&mut self, params: &mut ParamsMut<'_>) -> bool;
    fn set_md_params(&mut self, params: &Params<'_>) -> bool;
    fn gettable_md_params(&self) -> Option<&'static [OSSL_PARAM]>;
    fn settable_md_params(&self) -> Option<&'static [OSSL_PARAM]>;
}

/// What a composite algorithm's init starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Operation {
    Sign,
    Verify,
    VerifyRecover,
    /// `sign_message_init`: the message is hashed here.
    SignMessage,
    VerifyMessage,
}

/// A composite algorithm (`RSA-SHA256` and the like): a fixed digest; one-shot sign and
/// verify of a digest, or, after a message init, of a message fed in parts.
pub trait SignatureAlgorithm: SignatureCtx {
    fn init(
        &mut self,
        op: Operation,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    /// What a size query of the one-shot sign answers, once the call is allowed.
    fn oneshot_sign_size(&self) -> Result<usize, Failure>;
    /// What a one-shot sign signs: the digest given (sign) or, for sign-message, the digest of
    /// the whole message `tbs` (which ends the message). Called once a buffer is given, before
    /// its size is checked.
    fn oneshot_input(&mut self, tbs: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure>;
    /// Signs a digest from `oneshot_input` or `end_message`.
    fn sign_digest(&mut self, digest: &[u8], sig: &mut [u8]) -> Result<usize, Failure>;
    fn message_update(&mut self, data: &[u8]) -> Result<(), Failure>;
    /// What a size query of sign-message-final answers, once the call is allowed.
    fn sign_message_final_size(&self) -> Result<usize, Failure>;
    /// Ends the message and gives its digest, which `sign_digest` signs. Called once a buffer
    /// is given, before its size is checked.
    fn end_message(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure>;
    /// One-shot verify of a digest (verify) or of the whole message (verify-message).
    fn oneshot_verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure>;
    fn verify_message_final(&mut self) -> Result<(), Failure>;
    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure>;
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure>;
    fn gettable(prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM];
    /// The settable parameters of `ctx` (None: NULL for the core).
    fn settable(ctx: Option<&Self>) -> Option<&'static [OSSL_PARAM]>;
    /// The key types the algorithm signs with.
    fn key_types() -> &'static KeyTypes;
}

/// A NULL-terminated list of one key type name, as `query_key_types` returns it.
pub struct KeyTypes([*const c_char; 2]);
// SAFETY: a pointer to a static string and NULL, never written.
unsafe impl Sync for KeyTypes {}

impl KeyTypes {
    pub const fn one(name: &'static CStr) -> KeyTypes {
        KeyTypes([name.as_ptr(), core::ptr::null()])
    }
}

// ---- shims both kinds share ----------------------------------------------------------------

unsafe extern "C" fn newctx<C: SignatureCtx>(
    provctx: *mut c_void,
    propq: *const c_char,
) -> *mut c_void {
    let Some(prov) = provider(provctx) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the core passes propq as NULL or a NUL-terminated string valid for this call;
    // it is copied before we return.
    let propq = unsafe { crate::ffi::core::opt_cstr(propq) };
    let core = prov.core;
    guard(Some(&core), core::ptr::null_mut(), || {
        let mut c = C::new(prov)?;
        c.set_properties(propq);
        Ok::<_, Failure>(Box::into_raw(Box::new(c)).cast())
    })
}

unsafe extern "C" fn verify_recover<C: SignatureCtx>(
    ctx: *mut c_void,
    rout: *mut u8,
    routlen: *mut usize,
    routsize: usize,
    sig: *const u8,
    siglen: usize,
) -> c_int {
    // SAFETY (whole body): the core's context; rout holds routsize bytes, routlen is NULL or
    // writable, sig holds siglen bytes, all for the call.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            if routlen.is_null() {
                return Err(KaeError::NullParameter.into());
            }
            if rout.is_null() {
                set_len(routlen, c.verify_recover_size()?);
                return Ok(());
            }
            let data = c.verify_recover(input(sig, siglen)?)?;
            if data.len() > routsize {
                return Err(KaeError::BufferTooSmall.into());
            }
            core::ptr::copy_nonoverlapping(data.as_ptr(), rout, data.len());
            set_len(routlen, data.len());
            Ok(())
        })
    }
}

/// # Safety
/// As [`with_ctx`]; `keydata` and `ps` are the core's, valid for the call.
unsafe fn init_with<C: OpCtx>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
    f: impl FnOnce(&mut C, Option<&KeyObj>, &Params<'_>) -> Result<(), Failure>,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_ctx::<C>(ctx, |c| f(c, key(keydata), &params(ps))) }
}

// ---- the plain signature -------------------------------------------------------------------

unsafe extern "C" fn sign_init<C: Signature>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, valid for the call.
    unsafe { init_with::<C>(ctx, keydata, ps, C::sign_init) }
}

unsafe extern "C" fn verify_init<C: Signature>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, valid for the call.
    unsafe { init_with::<C>(ctx, keydata, ps, C::verify_init) }
}

unsafe extern "C" fn verify_recover_init<C: Signature>(
    ctx: *mut c_void,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, valid for the call.
    unsafe { init_with::<C>(ctx, keydata, ps, C::verify_recover_init) }
}

unsafe extern "C" fn sign<C: Signature>(
    ctx: *mut c_void,
    sig: *mut u8,
    siglen: *mut usize,
    sigsize: usize,
    tbs: *const u8,
    tbslen: usize,
) -> c_int {
    // SAFETY: the core's context; sig holds sigsize bytes, siglen is NULL or writable, tbs
    // holds tbslen bytes, for the call.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            let tbs = input(tbs, tbslen);
            sized_output(c, sig, siglen, sigsize, C::sign_size, |c, out| {
                c.sign(tbs?, out)
            })
        })
    }
}

unsafe extern "C" fn verify<C: Signature>(
    ctx: *mut c_void,
    sig: *const u8,
    siglen: usize,
    tbs: *const u8,
    tbslen: usize,
) -> c_int {
    // SAFETY: the core's context and inputs of siglen and tbslen bytes, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.verify(input(sig, siglen)?, input(tbs, tbslen)?)) }
}

unsafe extern "C" fn digest_sign_init<C: Signature>(
    ctx: *mut c_void,
    mdname: *const c_char,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments; mdname NULL or a C string valid for the call.
    unsafe {
        let md = crate::ffi::core::opt_cstr(mdname);
        init_with::<C>(ctx, keydata, ps, |c, k, p| c.digest_sign_init(md, k, p))
    }
}

unsafe extern "C" fn digest_verify_init<C: Signature>(
    ctx: *mut c_void,
    mdname: *const c_char,
    keydata: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments; mdname NULL or a C string valid for the call.
    unsafe {
        let md = crate::ffi::core::opt_cstr(mdname);
        init_with::<C>(ctx, keydata, ps, |c, k, p| c.digest_verify_init(md, k, p))
    }
}

unsafe extern "C" fn digest_update<C: Signature>(
    ctx: *mut c_void,
    data: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: the core's context and input of len bytes, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.digest_update(input(data, len)?)) }
}

unsafe extern "C" fn digest_sign_final<C: Signature>(
    ctx: *mut c_void,
    sig: *mut u8,
    siglen: *mut usize,
    sigsize: usize,
) -> c_int {
    // SAFETY: the core's context; sig holds sigsize bytes, siglen is NULL or writable.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            sized_output_after(
                c,
                sig,
                siglen,
                sigsize,
                C::sign_size,
                C::end_digest,
                |c, h, out| c.sign(&h, out),
            )
        })
    }
}

unsafe extern "C" fn digest_verify_final<C: Signature>(
    ctx: *mut c_void,
    sig: *const u8,
    siglen: usize,
) -> c_int {
    // SAFETY: the core's context and input of siglen bytes, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.digest_verify_final(input(sig, siglen)?)) }
}

unsafe extern "C" fn get_ctx_md_params<C: Signature>(
    ctx: *mut c_void,
    ps: *mut OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and writable parameter array, for the call.
    unsafe { with_ctx_status::<C>(ctx, 0, |c| Ok(c.get_md_params(&mut params_mut(ps)).into())) }
}

unsafe extern "C" fn set_ctx_md_params<C: Signature>(
    ctx: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and parameter array, for the call.
    unsafe { with_ctx_status::<C>(ctx, 0, |c| Ok(c.set_md_params(&params(ps)).into())) }
}

/// A parameter list for the core (NULL for None), read from context `ctx`.
///
/// # Safety
/// As [`ctx_mut`].
unsafe fn list_of<C: OpCtx>(
    ctx: *mut c_void,
    f: impl FnOnce(&C) -> Option<&'static [OSSL_PARAM]>,
) -> *const OSSL_PARAM {
    // SAFETY: the caller's contract is ctx_mut's.
    let c = unsafe { ctx_mut::<C>(ctx) };
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        c.and_then(|c| f(c))
            .map_or(core::ptr::null(), <[_]>::as_ptr)
    }))
    .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn gettable_ctx_md_params<C: Signature>(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: the core's context (or NULL).
    unsafe { list_of::<C>(ctx, C::gettable_md_params) }
}

unsafe extern "C" fn settable_ctx_md_params<C: Signature>(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: the core's context (or NULL).
    unsafe { list_of::<C>(ctx, C::settable_md_params) }
}

/// The `OSSL_OP_SIGNATURE` dispatch table of the plain signature `C`.
pub fn table<C: Signature>() -> Table<OSSL_DISPATCH> {
    crate::abi::dispatch![
        OSSL_FUNC_SIGNATURE_NEWCTX => newctx::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_INIT => sign_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN => sign::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_INIT => verify_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY => verify::<C> as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT => verify_recover_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER => verify_recover::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT => digest_sign_init::<C> as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE => digest_update::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL => digest_sign_final::<C> as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_INIT => digest_verify_init::<C> as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_UPDATE => digest_update::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_FINAL => digest_verify_final::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_SIGNATURE_DUPCTX => dupctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS => get_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS => gettable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS => set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS => settable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GET_CTX_MD_PARAMS => get_ctx_md_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GETTABLE_CTX_MD_PARAMS => gettable_ctx_md_params::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_SET_CTX_MD_PARAMS => set_ctx_md_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SETTABLE_CTX_MD_PARAMS => settable_ctx_md_params::<C> as unsafe extern "C" fn(_) -> _,
    ]
}

// ---- composite algorithms ------------------------------------------------------------------

/// The five inits of a composite algorithm, one shim each.
macro_rules! algorithm_inits {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        unsafe extern "C" fn $name<C: SignatureAlgorithm>(
            ctx: *mut c_void,
            keydata: *mut c_void,
            ps: *const OSSL_PARAM,
        ) -> c_int {
            // SAFETY: the core's arguments, valid for the call.
            unsafe { init_with::<C>(ctx, keydata, ps, |c, k, p| c.init(Operation::$op, k, p)) }
        }
    )*};
}

algorithm_inits!(
    algorithm_sign_init => Sign,
    algorithm_verify_init => Verify,
    algorithm_verify_recover_init => VerifyRecover,
    algorithm_sign_message_init => SignMessage,
    algorithm_verify_message_init => VerifyMessage,
);

unsafe extern "C" fn oneshot_sign<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    sig: *mut u8,
    siglen: *mut usize,
    sigsize: usize,
    tbs: *const u8,
    tbslen: usize,
) -> c_int {
    // SAFETY: as in `sign`.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            let tbs = input(tbs, tbslen);
            sized_output_after(
                c,
                sig,
                siglen,
                sigsize,
                C::oneshot_sign_size,
                |c| c.oneshot_input(tbs?),
                |c, h, out| c.sign_digest(&h, out),
            )
        })
    }
}

unsafe extern "C" fn message_update<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    data: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: the core's context and input of len bytes, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.message_update(input(data, len)?)) }
}

unsafe extern "C" fn sign_message_final<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    sig: *mut u8,
    siglen: *mut usize,
    sigsize: usize,
) -> c_int {
    // SAFETY: as in `digest_sign_final`.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            sized_output_after(
                c,
                sig,
                siglen,
                sigsize,
                C::sign_message_final_size,
                C::end_message,
                |c, h, out| c.sign_digest(&h, out),
            )
        })
    }
}

unsafe extern "C" fn oneshot_verify<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    sig: *const u8,
    siglen: usize,
    tbs: *const u8,
    tbslen: usize,
) -> c_int {
    // SAFETY: as in `verify`.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            c.oneshot_verify(input(sig, siglen)?, input(tbs, tbslen)?)
        })
    }
}

unsafe extern "C" fn verify_message_final<C: SignatureAlgorithm>(ctx: *mut c_void) -> c_int {
    // SAFETY: the core's context.
    unsafe { with_ctx::<C>(ctx, C::verify_message_final) }
}

unsafe extern "C" fn algorithm_get_ctx_params<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    ps: *mut OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and writable parameter array, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.get_params(&mut params_mut(ps))) }
}

unsafe extern "C" fn algorithm_set_ctx_params<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's context and parameter array, for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.set_params(&params(ps))) }
}

unsafe extern "C" fn algorithm_gettable_ctx_params<C: SignatureAlgorithm>(
    _ctx: *mut c_void,
    provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| C::gettable(provider(provctx).as_deref()).as_ptr())
        .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn algorithm_settable_ctx_params<C: SignatureAlgorithm>(
    ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    // SAFETY: the core passes NULL (a query without a context) or one of our contexts.
    unsafe { list_of::<C>(ctx, |c| C::settable(Some(c))) }
}

unsafe extern "C" fn query_key_types<C: SignatureAlgorithm>() -> *const *const c_char {
    C::key_types().0.as_ptr()
}

/// The `OSSL_OP_SIGNATURE` dispatch table of the composite algorithm `C`.
pub fn algorithm_table<C: SignatureAlgorithm>() -> Table<OSSL_DISPATCH> {
    crate::abi::dispatch![
        OSSL_FUNC_SIGNATURE_NEWCTX => newctx::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_INIT => algorithm_sign_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN => oneshot_sign::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_INIT => algorithm_sign_message_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_UPDATE => message_update::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_FINAL => sign_message_final::<C> as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_INIT => algorithm_verify_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY => oneshot_verify::<C> as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_INIT => algorithm_verify_message_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_UPDATE => message_update::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_FINAL => verify_message_final::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT => algorithm_verify_recover_init::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER => verify_recover::<C> as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_SIGNATURE_DUPCTX => dupctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_QUERY_KEY_TYPES => query_key_types::<C> as unsafe extern "C" fn() -> _,
        OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS => algorithm_get_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS => algorithm_gettable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS => algorithm_set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS => algorithm_settable_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
    ]
}
