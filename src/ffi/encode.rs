//! What kae's key encoders need from libcrypto: a temporary `EVP_PKEY` built from OSSL_PARAMs
//! in a library context of our choice, an `OSSL_ENCODER_CTX` for it, a memory BIO to collect
//! the result, and a BIO over the core's `OSSL_CORE_BIO` to hand the bytes back. Public API
//! only (`EVP_PKEY_fromdata`, `OSSL_ENCODER_CTX_new_for_pkey`, `BIO_new_from_core_bio`); each
//! handle is owned by a type that frees it on drop.
#![allow(non_camel_case_types)]

use super::libctx::{ChildLibCtx, LibCtx};
use super::params::OwnedParams;
use super::sys::{OSSL_LIB_CTX, OSSL_PARAM};
use crate::error::{KaeError, KaeResult};
use core::ffi::{c_char, c_int, c_long, c_void, CStr};
use core::ptr::NonNull;

macro_rules! opaque {
    ($($name:ident),* $(,)?) => { $( #[repr(C)] pub struct $name { _p: [u8; 0] } )* };
}
opaque!(
    EVP_PKEY,
    EVP_PKEY_CTX,
    EVP_CIPHER,
    OSSL_ENCODER_CTX,
    BIO,
    BIO_METHOD,
    OSSL_CORE_BIO
);

/// `OSSL_PASSPHRASE_CALLBACK` (core.h).
pub type PassphraseCb = unsafe extern "C" fn(
    pass: *mut c_char,
    pass_size: usize,
    pass_len: *mut usize,
    params: *const OSSL_PARAM,
    arg: *mut c_void,
) -> c_int;

/// The caller's passphrase callback as the core handed it to one `encode` call.
pub struct Passphrase<'call> {
    cb: PassphraseCb,
    arg: *mut c_void,
    _call: core::marker::PhantomData<&'call ()>,
}

impl Passphrase<'_> {
    /// # Safety
    /// `cb` and `arg` are the ones the core passed to the current `encode` call, and the
    /// `Passphrase` is dropped before that call returns.
    pub unsafe fn new(cb: PassphraseCb, arg: *mut c_void) -> Self {
        Passphrase {
            cb,
            arg,
            _call: core::marker::PhantomData,
        }
    }
}

/// The application's output as the core handed it to one `encode` call.
pub struct CoreOut<'call> {
    bio: NonNull<OSSL_CORE_BIO>,
    _call: core::marker::PhantomData<&'call mut ()>,
}

impl CoreOut<'_> {
    /// None for NULL.
    ///
    /// # Safety
    /// `bio` is NULL or the core BIO the core passed to the current `encode` call, and the
    /// `CoreOut` is dropped before that call returns.
    pub unsafe fn new(bio: *mut OSSL_CORE_BIO) -> Option<Self> {
        NonNull::new(bio).map(|bio| CoreOut {
            bio,
            _call: core::marker::PhantomData,
        })
    }
}

const BIO_CTRL_INFO: c_int = 3;

extern "C" {
    fn EVP_PKEY_CTX_new_from_name(
        libctx: *mut OSSL_LIB_CTX,
        name: *const c_char,
        propq: *const c_char,
    ) -> *mut EVP_PKEY_CTX;
    fn EVP_PKEY_CTX_free(ctx: *mut EVP_PKEY_CTX);
    fn EVP_PKEY_fromdata_init(ctx: *mut EVP_PKEY_CTX) -> c_int;
    fn EVP_PKEY_fromdata(
        ctx: *mut EVP_PKEY_CTX,
        ppkey: *mut *mut EVP_PKEY,
        selection: c_int,
        params: *mut OSSL_PARAM,
    ) -> c_int;
    fn EVP_PKEY_free(pkey: *mut EVP_PKEY);

    fn EVP_CIPHER_fetch(
        libctx: *mut OSSL_LIB_CTX,
        name: *const c_char,
        propq: *const c_char,
    ) -> *mut EVP_CIPHER;
    fn EVP_CIPHER_free(c: *mut EVP_CIPHER);

    fn OSSL_ENCODER_CTX_new_for_pkey(
        pkey: *const EVP_PKEY,
        selection: c_int,
        output_type: *const c_char,
        output_struct: *const c_char,
        propquery: *const c_char,
    ) -> *mut OSSL_ENCODER_CTX;
    fn OSSL_ENCODER_CTX_free(ctx: *mut OSSL_ENCODER_CTX);
    fn OSSL_ENCODER_CTX_get_num_encoders(ctx: *mut OSSL_ENCODER_CTX) -> c_int;
    fn OSSL_ENCODER_CTX_set_cipher(
        ctx: *mut OSSL_ENCODER_CTX,
        cipher_name: *const c_char,
        propquery: *const c_char,
    ) -> c_int;
    fn OSSL_ENCODER_CTX_set_params(ctx: *mut OSSL_ENCODER_CTX, params: *const OSSL_PARAM) -> c_int;
    fn OSSL_ENCODER_CTX_set_passphrase_cb(
        ctx: *mut OSSL_ENCODER_CTX,
        cb: Option<PassphraseCb>,
        cbarg: *mut c_void,
    ) -> c_int;
    fn OSSL_ENCODER_to_bio(ctx: *mut OSSL_ENCODER_CTX, out: *mut BIO) -> c_int;

    fn BIO_s_mem() -> *const BIO_METHOD;
    fn BIO_new(method: *const BIO_METHOD) -> *mut BIO;
    fn BIO_free(b: *mut BIO) -> c_int;
    fn BIO_ctrl(b: *mut BIO, cmd: c_int, larg: c_long, parg: *mut c_void) -> c_long;
    fn BIO_write_ex(b: *mut BIO, data: *const c_void, dlen: usize, written: *mut usize) -> c_int;
    fn BIO_new_from_core_bio(libctx: *mut OSSL_LIB_CTX, corebio: *mut OSSL_CORE_BIO) -> *mut BIO;

    fn OSSL_PARAM_construct_int(key: *const c_char, buf: *mut c_int) -> OSSL_PARAM;
    fn OSSL_PARAM_construct_end() -> OSSL_PARAM;
}

/// A key of another provider's key management (the one `EVP_PKEY_fromdata` finds in the
/// library context it is given), freed on drop.
pub struct Pkey(NonNull<EVP_PKEY>);

impl Pkey {
    /// `EVP_PKEY_fromdata` for key type `key_type` in `libctx`, with `selection` of `params`.
    /// The key belongs to a key management of a provider in that context, which
    /// [`LibCtx::free`]'s contract keeps until the key is dropped.
    pub fn from_params(
        libctx: LibCtx,
        key_type: &CStr,
        selection: c_int,
        params: &OwnedParams,
    ) -> KaeResult<Pkey> {
        // SAFETY: a LibCtx is the default context or a live one (its type's contract);
        // key_type and the NULL property query are valid for the call.
        let pctx = unsafe {
            EVP_PKEY_CTX_new_from_name(libctx.as_ptr(), key_type.as_ptr(), core::ptr::null())
        };
        if pctx.is_null() {
            return Err(KaeError::FetchFailed);
        }
        let mut pkey: *mut EVP_PKEY = core::ptr::null_mut();
        // SAFETY: a fresh context; the parameter array is valid and only read (the API takes
        // a non-const pointer for historical reasons).
        let ok = unsafe {
            EVP_PKEY_fromdata_init(pctx) == 1
                && EVP_PKEY_fromdata(pctx, &mut pkey, selection, params.as_ptr().cast_mut()) == 1
        };
        // SAFETY: pctx was created non-NULL above, is not stored anywhere, and is freed only here.
        unsafe { EVP_PKEY_CTX_free(pctx) };
        match NonNull::new(pkey) {
            Some(p) if ok => Ok(Pkey(p)),
            Some(p) => {
                // SAFETY: p came from the failed EVP_PKEY_fromdata and is dropped here without
                // being wrapped or returned, so it is freed once.
                unsafe { EVP_PKEY_free(p.as_ptr()) };
                Err(KaeError::InvalidKey)
            }
            None => Err(KaeError::InvalidKey),
        }
    }
}

impl Drop for Pkey {
    fn drop(&mut self) {
        // SAFETY: owned; the key management clears private components when it frees them.
        unsafe { EVP_PKEY_free(self.0.as_ptr()) }
    }
}

/// Whether cipher `name` can be fetched in `libctx` with property query `props`.
pub fn cipher_available(libctx: LibCtx, name: &CStr, props: Option<&CStr>) -> bool {
    let props = props.map_or(core::ptr::null(), CStr::as_ptr);
    // SAFETY: a LibCtx is the default context or a live one (its type's contract); name and
    // props are NUL-terminated strings (or NULL) valid for the call; the fetched cipher is
    // freed right away.
    unsafe {
        let c = EVP_CIPHER_fetch(libctx.as_ptr(), name.as_ptr(), props);
        if c.is_null() {
            return false;
        }
        EVP_CIPHER_free(c);
    }
    true
}

/// An encoder context for one key, freed on drop. It borrows the key: the core keeps a pointer
/// to it until the context is freed.
pub struct EncoderCtx<'k> {
    ptr: NonNull<OSSL_ENCODER_CTX>,
    _key: core::marker::PhantomData<&'k Pkey>,
}

fn ok(r: c_int, e: KaeError) -> KaeResult<()> {
    if r == 1 {
        Ok(())
    } else {
        Err(e)
    }
}

impl<'k> EncoderCtx<'k> {
    /// `OSSL_ENCODER_CTX_new_for_pkey` (in the key's library context, no property query);
    /// refused when no encoder there produces `output_type` / `structure` for `selection`.
    pub fn for_pkey(
        key: &'k Pkey,
        selection: c_int,
        output_type: &CStr,
        structure: Option<&CStr>,
    ) -> KaeResult<EncoderCtx<'k>> {
        let structure = structure.map_or(core::ptr::null(), CStr::as_ptr);
        // SAFETY: a live key and C strings (or NULL for no structure).
        let p = unsafe {
            OSSL_ENCODER_CTX_new_for_pkey(
                key.0.as_ptr(),
                selection,
                output_type.as_ptr(),
                structure,
                core::ptr::null(),
            )
        };
        let ctx = EncoderCtx {
            ptr: NonNull::new(p).ok_or(KaeError::OutOfMemory)?,
            _key: core::marker::PhantomData,
        };
        // SAFETY: ctx.ptr is the non-NULL encoder context just created and owned by ctx.
        if unsafe { OSSL_ENCODER_CTX_get_num_encoders(ctx.ptr.as_ptr()) } <= 0 {
            return Err(KaeError::FetchFailed);
        }
        Ok(ctx)
    }

    /// `OSSL_ENCODER_CTX_set_cipher`: encrypt private keys with `name` (fetched with `props`).
    pub fn set_cipher(&mut self, name: &CStr, props: Option<&CStr>) -> KaeResult<()> {
        let props = props.map_or(core::ptr::null(), CStr::as_ptr);
        // SAFETY: a live context and C strings (copied or used during the call).
        ok(
            unsafe { OSSL_ENCODER_CTX_set_cipher(self.ptr.as_ptr(), name.as_ptr(), props) },
            KaeError::FetchFailed,
        )
    }

    /// Sets one integer parameter of the context's encoders.
    pub fn set_int(&mut self, key: &'static CStr, value: c_int) -> KaeResult<()> {
        let mut v = value;
        // SAFETY: the array lives for the call; `v` outlives it.
        let params = unsafe {
            [
                OSSL_PARAM_construct_int(key.as_ptr(), &mut v),
                OSSL_PARAM_construct_end(),
            ]
        };
        // SAFETY: self owns a live encoder context (mutably borrowed); params is terminated and v,
        // which it points to, lives until after the call.
        ok(
            unsafe { OSSL_ENCODER_CTX_set_params(self.ptr.as_ptr(), params.as_ptr()) },
            KaeError::InvalidParam,
        )
    }

    /// Passes the caller's passphrase callback on, unchanged. The context may not outlive
    /// the `encode` call the callback came with (`'k`).
    pub fn set_passphrase(&mut self, p: &'k Passphrase<'_>) -> KaeResult<()> {
        // SAFETY: a live context; the callback and its argument are valid for the encode call
        // (Passphrase::new's contract), which outlives this context.
        ok(
            unsafe { OSSL_ENCODER_CTX_set_passphrase_cb(self.ptr.as_ptr(), Some(p.cb), p.arg) },
            KaeError::Internal,
        )
    }

    /// Encodes the key into `out`.
    pub fn encode_to(&mut self, out: &mut MemBio) -> KaeResult<()> {
        // SAFETY: self owns a live encoder context (mutably borrowed), and out owns a live memory
        // BIO, borrowed mutably so no slice from data() is alive while it is written.
        ok(
            unsafe { OSSL_ENCODER_to_bio(self.ptr.as_ptr(), out.0.as_ptr()) },
            KaeError::Internal,
        )
    }
}

impl Drop for EncoderCtx<'_> {
    fn drop(&mut self) {
        // SAFETY: self.ptr is the encoder context this wrapper created and owns; drop runs once,
        // and the key it borrows ('k) is still alive.
        unsafe { OSSL_ENCODER_CTX_free(self.ptr.as_ptr()) }
    }
}

/// A memory BIO whose contents are wiped before it is freed.
pub struct MemBio(NonNull<BIO>);

impl MemBio {
    pub fn new() -> KaeResult<MemBio> {
        // SAFETY: BIO_s_mem returns a static method and BIO_new has no other precondition; NULL
        // becomes an error.
        NonNull::new(unsafe { BIO_new(BIO_s_mem()) })
            .map(MemBio)
            .ok_or(KaeError::OutOfMemory)
    }

    fn raw(&self) -> (*mut u8, usize) {
        let mut p: *mut c_char = core::ptr::null_mut();
        // SAFETY: BIO_get_mem_data: a live memory BIO and an out-pointer.
        let n = unsafe {
            BIO_ctrl(
                self.0.as_ptr(),
                BIO_CTRL_INFO,
                0,
                (&mut p as *mut *mut c_char).cast(),
            )
        };
        if p.is_null() || n <= 0 {
            (core::ptr::null_mut(), 0)
        } else {
            (p.cast(), n as usize)
        }
    }

    /// What was written so far (valid until the next write or drop).
    pub fn data(&self) -> &[u8] {
        let (p, n) = self.raw();
        if p.is_null() {
            return &[];
        }
        // SAFETY: the BIO's buffer holds n bytes and is not written while borrowed.
        unsafe { core::slice::from_raw_parts(p, n) }
    }
}

impl Drop for MemBio {
    fn drop(&mut self) {
        let (p, n) = self.raw();
        if !p.is_null() {
            // SAFETY: our BIO's writable buffer of n bytes, not borrowed any more (&mut self).
            zeroize::Zeroize::zeroize(unsafe { core::slice::from_raw_parts_mut(p, n) });
        }
        // SAFETY: self.0 is the BIO this wrapper created and owns; drop runs once.
        unsafe { BIO_free(self.0.as_ptr()) };
    }
}

/// A BIO writing to the application's `OSSL_CORE_BIO` (through the core's BIO upcalls of the
/// library context `libctx`, which must be a context made from the core's dispatch table, as
/// `OSSL_LIB_CTX_new_child` does).
pub struct CoreBio<'o>(NonNull<BIO>, core::marker::PhantomData<&'o mut ()>);

impl CoreBio<'_> {
    /// A BIO writing to `out` through the core's BIO upcalls, which `libctx` (made from the
    /// core's dispatch table) carries; dropped with the borrow of `out`, before the `encode`
    /// call returns.
    pub fn new<'o>(libctx: ChildLibCtx, out: &'o mut CoreOut<'_>) -> KaeResult<CoreBio<'o>> {
        // SAFETY: out holds the core's BIO of the current call (CoreOut::new's contract), and
        // libctx is a live child context made from the core's dispatch table (its type).
        NonNull::new(unsafe { BIO_new_from_core_bio(libctx.libctx().as_ptr(), out.bio.as_ptr()) })
            .map(|b| CoreBio(b, core::marker::PhantomData))
            .ok_or(KaeError::Internal)
    }

    /// Writes all of `data`.
    pub fn write_all(&mut self, mut data: &[u8]) -> KaeResult<()> {
        while !data.is_empty() {
            let mut written = 0usize;
            // SAFETY: a live BIO; data is valid for its length.
            let r = unsafe {
                BIO_write_ex(
                    self.0.as_ptr(),
                    data.as_ptr().cast(),
                    data.len(),
                    &mut written,
                )
            };
            if r != 1 || written == 0 || written > data.len() {
                return Err(KaeError::Internal);
            }
            data = &data[written..];
        }
        Ok(())
    }
}

impl Drop for CoreBio<'_> {
    fn drop(&mut self) {
        // SAFETY: owned (freeing it does not free the core's BIO).
        unsafe { BIO_free(self.0.as_ptr()) };
    }
}
