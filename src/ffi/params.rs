//! Safe access to `OSSL_PARAM` arrays, built on libcrypto's own getters/setters so type
//! conversions (int ↔ size_t, BN ↔ unsigned integer) follow OpenSSL's rules exactly.

use super::bn::BigNum;
use super::sys::*;
use crate::error::{KaeError, KaeResult};
use core::ffi::{c_char, CStr};
use core::marker::PhantomData;

/// A read-only parameter array handed to us by the core (may be NULL = empty).
#[derive(Clone, Copy)]
pub struct Params<'a> {
    ptr: *const OSSL_PARAM,
    _life: PhantomData<&'a OSSL_PARAM>,
}

impl<'a> Params<'a> {
    /// # Safety
    /// `ptr` is NULL or a valid, key-NULL-terminated OSSL_PARAM array living for `'a`.
    pub unsafe fn from_ptr(ptr: *const OSSL_PARAM) -> Self {
        Params {
            ptr,
            _life: PhantomData,
        }
    }

    pub fn empty() -> Self {
        Params {
            ptr: core::ptr::null(),
            _life: PhantomData,
        }
    }

    pub fn as_ptr(&self) -> *const OSSL_PARAM {
        self.ptr
    }

    pub fn locate(&self, key: &CStr) -> Option<Param<'a>> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: ptr is a valid terminated array (constructor contract).
        let p = unsafe { OSSL_PARAM_locate_const(self.ptr, key.as_ptr()) };
        if p.is_null() {
            None
        } else {
            Some(Param {
                ptr: p,
                _life: PhantomData,
            })
        }
    }

    /// Keys present in the array (for diagnostics).
    pub fn keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.ptr.is_null() {
            return out;
        }
        let mut p = self.ptr;
        // SAFETY: walk until the terminating element whose key is NULL.
        unsafe {
            while !(*p).key.is_null() {
                out.push(CStr::from_ptr((*p).key).to_string_lossy().into_owned());
                p = p.add(1);
            }
        }
        out
    }
}

/// One parameter of a read-only array.
#[derive(Clone, Copy)]
pub struct Param<'a> {
    ptr: *const OSSL_PARAM,
    _life: PhantomData<&'a OSSL_PARAM>,
}

impl<'a> Param<'a> {
    pub fn data_type(&self) -> u32 {
        // SAFETY: valid element.
        unsafe { (*self.ptr).data_type }
    }

    pub fn get_int(&self) -> KaeResult<i32> {
        let mut v = 0;
        // SAFETY: valid element and out-pointer.
        if unsafe { OSSL_PARAM_get_int(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    pub fn get_uint(&self) -> KaeResult<u32> {
        let mut v = 0;
        // SAFETY: valid element and out-pointer.
        if unsafe { OSSL_PARAM_get_uint(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    pub fn get_size_t(&self) -> KaeResult<usize> {
        let mut v = 0;
        // SAFETY: valid element and out-pointer.
        if unsafe { OSSL_PARAM_get_size_t(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    /// A UTF-8 string parameter (UTF8_STRING or UTF8_PTR).
    pub fn get_utf8(&self) -> KaeResult<&'a str> {
        let mut s: *const c_char = core::ptr::null();
        // SAFETY: valid element and out-pointer; the string lives as long as the array.
        if unsafe { OSSL_PARAM_get_utf8_string_ptr(self.ptr, &mut s) } != 1 || s.is_null() {
            return Err(KaeError::InvalidParam);
        }
        // SAFETY: OpenSSL guarantees NUL termination of UTF8 params it validated.
        unsafe { CStr::from_ptr(s) }
            .to_str()
            .map_err(|_| KaeError::InvalidParam)
    }

    /// An octet string parameter (OCTET_STRING or OCTET_PTR).
    pub fn get_octets(&self) -> KaeResult<&'a [u8]> {
        let mut p: *const libc::c_void = core::ptr::null();
        let mut len = 0usize;
        // SAFETY: valid element and out-pointers.
        if unsafe { OSSL_PARAM_get_octet_string_ptr(self.ptr, &mut p, &mut len) } != 1 {
            return Err(KaeError::InvalidParam);
        }
        if len == 0 {
            return Ok(&[]);
        }
        if p.is_null() {
            return Err(KaeError::InvalidParam);
        }
        // SAFETY: p points at len bytes owned by the caller's array.
        Ok(unsafe { core::slice::from_raw_parts(p.cast(), len) })
    }

    /// An unsigned integer parameter of any size as a big number.
    pub fn get_bn(&self, secret: bool) -> KaeResult<BigNum> {
        let mut bn: *mut BIGNUM = core::ptr::null_mut();
        // SAFETY: valid element; with *bn == NULL libcrypto allocates a new BIGNUM.
        if unsafe { OSSL_PARAM_get_BN(self.ptr, &mut bn) } != 1 {
            return Err(KaeError::InvalidParam);
        }
        // SAFETY: freshly allocated, now owned by us.
        let tmp = unsafe { BigNum::from_raw(bn) }.ok_or(KaeError::OutOfMemory)?;
        if secret {
            tmp.dup(true)
        } else {
            Ok(tmp)
        }
    }
}

/// A writable parameter array (get_params requests).
pub struct ParamsMut<'a> {
    ptr: *mut OSSL_PARAM,
    _life: PhantomData<&'a mut OSSL_PARAM>,
}

impl<'a> ParamsMut<'a> {
    /// # Safety
    /// `ptr` is NULL or a valid terminated OSSL_PARAM array we may write into.
    pub unsafe fn from_ptr(ptr: *mut OSSL_PARAM) -> Self {
        ParamsMut {
            ptr,
            _life: PhantomData,
        }
    }

    pub fn locate(&mut self, key: &CStr) -> Option<ParamMut<'_>> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: valid terminated array.
        let p = unsafe { OSSL_PARAM_locate(self.ptr, key.as_ptr()) };
        if p.is_null() {
            None
        } else {
            Some(ParamMut {
                ptr: p,
                _life: PhantomData,
            })
        }
    }
}

pub struct ParamMut<'a> {
    ptr: *mut OSSL_PARAM,
    _life: PhantomData<&'a mut OSSL_PARAM>,
}

fn ok(r: libc::c_int) -> KaeResult<()> {
    if r == 1 {
        Ok(())
    } else {
        Err(KaeError::InvalidParam)
    }
}

impl ParamMut<'_> {
    pub fn data_type(&self) -> u32 {
        // SAFETY: valid element.
        unsafe { (*self.ptr).data_type }
    }
    pub fn set_int(&mut self, v: i32) -> KaeResult<()> {
        // SAFETY: valid element.
        ok(unsafe { OSSL_PARAM_set_int(self.ptr, v) })
    }
    pub fn set_uint(&mut self, v: u32) -> KaeResult<()> {
        // SAFETY: valid element.
        ok(unsafe { OSSL_PARAM_set_uint(self.ptr, v) })
    }
    pub fn set_u64(&mut self, v: u64) -> KaeResult<()> {
        // SAFETY: valid element.
        ok(unsafe { OSSL_PARAM_set_uint64(self.ptr, v) })
    }
    pub fn set_size_t(&mut self, v: usize) -> KaeResult<()> {
        // SAFETY: valid element.
        ok(unsafe { OSSL_PARAM_set_size_t(self.ptr, v) })
    }
    pub fn set_bn(&mut self, v: &BigNum) -> KaeResult<()> {
        // SAFETY: valid element and BIGNUM.
        ok(unsafe { OSSL_PARAM_set_BN(self.ptr, v.as_ptr()) })
    }
    /// Sets a UTF8_STRING (copied into the caller's buffer) or a UTF8_PTR (pointer to a
    /// static string).
    pub fn set_utf8(&mut self, s: &'static CStr) -> KaeResult<()> {
        // SAFETY: s is 'static.
        unsafe { self.set_utf8_kept(s) }
    }
    /// Sets a UTF8 parameter from provider-kept memory: UTF8_PTR gets the pointer itself,
    /// UTF8_STRING a copy.
    ///
    /// # Safety
    /// `s` must point to a NUL-terminated string that stays valid for as long as the
    /// requester may read a UTF8_PTR answer.
    pub unsafe fn set_utf8_kept(&mut self, s: &CStr) -> KaeResult<()> {
        if self.data_type() == OSSL_PARAM_UTF8_PTR {
            // SAFETY: valid element; lifetime of s guaranteed by our caller.
            ok(unsafe { OSSL_PARAM_set_utf8_ptr(self.ptr, s.as_ptr()) })
        } else {
            // SAFETY: valid element; libcrypto checks the buffer size.
            ok(unsafe { OSSL_PARAM_set_utf8_string(self.ptr, s.as_ptr()) })
        }
    }
    /// Sets a UTF8_STRING from a transient string.
    pub fn set_utf8_owned(&mut self, s: &str) -> KaeResult<()> {
        let c = std::ffi::CString::new(s).map_err(|_| KaeError::InvalidParam)?;
        // SAFETY: valid element; the string is copied.
        ok(unsafe { OSSL_PARAM_set_utf8_string(self.ptr, c.as_ptr()) })
    }
    pub fn set_octets(&mut self, v: &[u8]) -> KaeResult<()> {
        // SAFETY: valid element; libcrypto checks the buffer size (or only sets
        // return_size when data is NULL).
        ok(unsafe { OSSL_PARAM_set_octet_string(self.ptr, v.as_ptr().cast(), v.len()) })
    }
}

/// Builds a static parameter descriptor (for gettable/settable tables).
pub const fn desc(key: &'static CStr, data_type: u32) -> OSSL_PARAM {
    OSSL_PARAM {
        key: key.as_ptr(),
        data_type,
        data: core::ptr::null_mut(),
        data_size: 0,
        return_size: OSSL_PARAM_UNMODIFIED,
    }
}

/// The terminating element of a descriptor table.
pub const END: OSSL_PARAM = OSSL_PARAM {
    key: core::ptr::null(),
    data_type: 0,
    data: core::ptr::null_mut(),
    data_size: 0,
    return_size: 0,
};

/// A descriptor table that can live in a `static`.
pub struct ParamTable<const N: usize>(pub [OSSL_PARAM; N]);
// SAFETY: the tables only hold pointers to static strings and null data pointers.
unsafe impl<const N: usize> Sync for ParamTable<N> {}

impl<const N: usize> ParamTable<N> {
    pub fn as_ptr(&'static self) -> *const OSSL_PARAM {
        self.0.as_ptr()
    }
}

/// Builds OSSL_PARAM arrays for export callbacks (owned; freed on drop).
pub struct ParamBuilder(core::ptr::NonNull<OSSL_PARAM_BLD>);

impl ParamBuilder {
    pub fn new() -> KaeResult<Self> {
        // SAFETY: allocation.
        core::ptr::NonNull::new(unsafe { OSSL_PARAM_BLD_new() })
            .map(ParamBuilder)
            .ok_or(KaeError::OutOfMemory)
    }
    pub fn push_bn(&mut self, key: &'static CStr, bn: &BigNum) -> KaeResult<()> {
        // SAFETY: valid builder, static key, valid BIGNUM. The builder keeps the pointer until
        // `build` copies the value, so `bn` must outlive `build` (callers build right away).
        ok(unsafe { OSSL_PARAM_BLD_push_BN(self.0.as_ptr(), key.as_ptr(), bn.as_ptr()) })
    }
    pub fn push_utf8(&mut self, key: &'static CStr, s: &'static CStr) -> KaeResult<()> {
        // SAFETY: valid builder and static strings.
        ok(
            unsafe {
                OSSL_PARAM_BLD_push_utf8_string(self.0.as_ptr(), key.as_ptr(), s.as_ptr(), 0)
            },
        )
    }
    pub fn push_int(&mut self, key: &'static CStr, v: i32) -> KaeResult<()> {
        // SAFETY: valid builder.
        ok(unsafe { OSSL_PARAM_BLD_push_int(self.0.as_ptr(), key.as_ptr(), v) })
    }
    pub fn build(self) -> KaeResult<OwnedParams> {
        // SAFETY: valid builder; the result is a fresh array we own.
        let p = unsafe { OSSL_PARAM_BLD_to_param(self.0.as_ptr()) };
        core::ptr::NonNull::new(p)
            .map(OwnedParams)
            .ok_or(KaeError::OutOfMemory)
    }
}

impl Drop for ParamBuilder {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { OSSL_PARAM_BLD_free(self.0.as_ptr()) }
    }
}

/// A parameter array allocated by libcrypto; cleared and freed on drop.
pub struct OwnedParams(core::ptr::NonNull<OSSL_PARAM>);

impl OwnedParams {
    pub fn as_ptr(&self) -> *const OSSL_PARAM {
        self.0.as_ptr()
    }
}

impl Drop for OwnedParams {
    fn drop(&mut self) {
        // SAFETY: owned; OSSL_PARAM_free frees the block (BN data is in the same block and
        // is cleansed by the builder's secure allocation when marked secret).
        unsafe { OSSL_PARAM_free(self.0.as_ptr()) }
    }
}
