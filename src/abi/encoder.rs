//! `OSSL_OP_ENCODER`: the [`Encoder`] trait and the dispatch table made from it.

use super::*;
use crate::ffi::encode::{CoreOut, Passphrase, PassphraseCb, OSSL_CORE_BIO};

// Function ids of core_dispatch.h that openssl-sys's 3.0 bindings lack.
const OSSL_FUNC_ENCODER_NEWCTX: c_int = 1;
const OSSL_FUNC_ENCODER_FREECTX: c_int = 2;
const OSSL_FUNC_ENCODER_SET_CTX_PARAMS: c_int = 5;
const OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS: c_int = 6;
const OSSL_FUNC_ENCODER_DOES_SELECTION: c_int = 10;
const OSSL_FUNC_ENCODER_ENCODE: c_int = 11;
const OSSL_FUNC_ENCODER_IMPORT_OBJECT: c_int = 20;
const OSSL_FUNC_ENCODER_FREE_OBJECT: c_int = 21;

/// An encoder of kae's key objects. Which functions its table has depends on the encoder:
/// `does_selection` only when it checks selections, the parameter functions only when it
/// has settable parameters.
pub trait Encoder: OpCtx {
    /// The selections it accepts (None: no `does_selection`, anything goes).
    fn selection_check() -> Option<fn(c_int) -> bool>;
    /// Its settable parameters, terminated (None: it has none).
    fn settable() -> Option<&'static [OSSL_PARAM]>;
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure>;
    /// A key object from another key management's export, for `encode`.
    fn import_object(&mut self, selection: c_int, params: &Params<'_>) -> Result<KeyObj, Failure>;
    /// Encodes the parts of `key` that `selection` names into `out`.
    fn encode(
        &mut self,
        out: &mut CoreOut<'_>,
        key: &KeyObj,
        selection: c_int,
        passphrase: Option<&Passphrase<'_>>,
    ) -> Result<(), Failure>;
}

unsafe extern "C" fn does_selection<C: Encoder>(_provctx: *mut c_void, selection: c_int) -> c_int {
    std::panic::catch_unwind(|| C::selection_check().is_some_and(|accepts| accepts(selection)))
        .map_or(0, c_int::from)
}

unsafe extern "C" fn settable_ctx_params<C: Encoder>(_provctx: *mut c_void) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| C::settable().map_or(core::ptr::null(), <[_]>::as_ptr))
        .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn set_ctx_params<C: Encoder>(ctx: *mut c_void, ps: *const OSSL_PARAM) -> c_int {
    // SAFETY: the core's context and its parameter array, valid for the call.
    unsafe { with_ctx::<C>(ctx, |c| c.set_params(&params(ps))) }
}

unsafe extern "C" fn import_object<C: Encoder>(
    ctx: *mut c_void,
    selection: c_int,
    ps: *const OSSL_PARAM,
) -> *mut c_void {
    // SAFETY: the core passes a context our newctx returned (or NULL), not yet freed.
    let Some(c) = (unsafe { ctx_mut::<C>(ctx) }) else {
        return core::ptr::null_mut();
    };
    let core = c.provider().core;
    guard(Some(&core), core::ptr::null_mut(), || {
        // SAFETY: the core's array (another key management's export), valid for the call.
        let key = c.import_object(selection, &unsafe { params(ps) })?;
        Ok::<_, Failure>(key.into_raw())
    })
}

unsafe extern "C" fn free_object(obj: *mut c_void) {
    // SAFETY: the core frees, once, what our import_object made.
    let _ = std::panic::catch_unwind(|| unsafe { super::key::free_object(obj) });
}

unsafe extern "C" fn encode<C: Encoder>(
    ctx: *mut c_void,
    cout: *mut OSSL_CORE_BIO,
    obj_raw: *const c_void,
    obj_abstract: *const OSSL_PARAM,
    selection: c_int,
    cb: Option<PassphraseCb>,
    cbarg: *mut c_void,
) -> c_int {
    // SAFETY (whole body): the core's context; cout, the key object and the passphrase
    // callback with its argument are the core's for this call, which outlives every use.
    unsafe {
        with_ctx::<C>(ctx, |c| {
            if !obj_abstract.is_null() {
                return Err(Failure::with(
                    KaeError::InvalidArgument,
                    "abstract key objects are not supported",
                ));
            }
            // The key object of the key's key management: kae's (same provider) or one our
            // import_object made; the tag is checked.
            let obj = key(obj_raw.cast_mut()).ok_or_else(|| {
                Failure::with(KaeError::InvalidArgument, "not a kae RSA key object")
            })?;
            let passphrase = cb.map(|cb| Passphrase::new(cb, cbarg));
            let mut out = CoreOut::new(cout).ok_or(KaeError::NullParameter)?;
            c.encode(&mut out, obj, selection, passphrase.as_ref())
        })
    }
}

/// The `OSSL_OP_ENCODER` dispatch table of `C`: the functions the default provider's
/// counterpart has.
pub fn table<C: Encoder>() -> Table<OSSL_DISPATCH> {
    let all = crate::abi::dispatch![
        OSSL_FUNC_ENCODER_NEWCTX => newctx::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_ENCODER_FREECTX => freectx::<C> as unsafe extern "C" fn(_),
        OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS => settable_ctx_params::<C> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_ENCODER_SET_CTX_PARAMS => set_ctx_params::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_ENCODER_DOES_SELECTION => does_selection::<C> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_ENCODER_IMPORT_OBJECT => import_object::<C> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_ENCODER_FREE_OBJECT => free_object as unsafe extern "C" fn(_),
        OSSL_FUNC_ENCODER_ENCODE => encode::<C> as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _,
    ];
    let has = |id| match id {
        OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS | OSSL_FUNC_ENCODER_SET_CTX_PARAMS => {
            C::settable().is_some()
        }
        OSSL_FUNC_ENCODER_DOES_SELECTION => C::selection_check().is_some(),
        _ => true,
    };
    Table(all.0.into_iter().filter(|d| has(d.function_id)).collect())
}
