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

    /// The entries of the array (without the terminator), for forwarding.
    pub fn raw(&self) -> &'a [OSSL_PARAM] {
        if self.ptr.is_null() {
            return &[];
        }
        let mut n = 0;
        // SAFETY: ptr is a valid array terminated by a NULL key (constructor contract), so
        // every index up to the terminator is in bounds.
        unsafe {
            while !(*self.ptr.add(n)).key.is_null() {
                n += 1;
            }
            core::slice::from_raw_parts(self.ptr, n)
        }
    }

    /// The entries whose keys are not in `keys`, terminated: what is forwarded to another
    /// implementation when some parameters must not reach it.
    pub fn without(&self, keys: &[&CStr]) -> ParamSubset<'a> {
        let mut v: Vec<OSSL_PARAM> = self
            .raw()
            .iter()
            .filter(|p| {
                // SAFETY: keys of a parameter array are valid C strings (from_ptr's contract).
                let key = unsafe { CStr::from_ptr(p.key) };
                !keys.contains(&key)
            })
            .copied()
            .collect();
        v.push(END);
        ParamSubset {
            params: v,
            _life: PhantomData,
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

/// Reads an optional string parameter.
pub fn opt_utf8<'a>(params: &Params<'a>, key: &CStr) -> Result<Option<&'a str>, KaeError> {
    params.locate(key).map(|p| p.get_utf8()).transpose()
}

/// One parameter of a read-only array.
#[derive(Clone, Copy)]
pub struct Param<'a> {
    ptr: *const OSSL_PARAM,
    _life: PhantomData<&'a OSSL_PARAM>,
}

impl<'a> Param<'a> {
    pub fn data_type(&self) -> u32 {
        // SAFETY: a Param is only made by Params::locate, from an array valid for 'a (from_ptr's
        // contract), so ptr points at a live element.
        unsafe { (*self.ptr).data_type }
    }

    /// libcrypto's integer getters read `data` without checking it: a number needs a
    /// numeric type, data and a non-zero size (NULL data crashed OpenSSL 3.0's getters).
    fn check_number(&self) -> KaeResult<()> {
        // SAFETY: a Param is only made by Params::locate, from an array valid for 'a (from_ptr's
        // contract), so ptr points at a live element, only read here.
        let p = unsafe { &*self.ptr };
        let numeric = matches!(
            p.data_type,
            OSSL_PARAM_INTEGER | OSSL_PARAM_UNSIGNED_INTEGER | OSSL_PARAM_REAL
        );
        if !numeric || p.data.is_null() || p.data_size == 0 {
            return Err(KaeError::InvalidParam);
        }
        Ok(())
    }

    pub fn get_int(&self) -> KaeResult<i32> {
        self.check_number()?;
        let mut v = 0;
        // SAFETY: ptr is a live element (made by locate) with numeric type, non-NULL data and a
        // non-zero size (check_number above); v is a local.
        if unsafe { OSSL_PARAM_get_int(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    pub fn get_uint(&self) -> KaeResult<u32> {
        self.check_number()?;
        let mut v = 0;
        // SAFETY: ptr is a live element (made by locate) with numeric type, non-NULL data and a
        // non-zero size (check_number above); v is a local.
        if unsafe { OSSL_PARAM_get_uint(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    pub fn get_size_t(&self) -> KaeResult<usize> {
        self.check_number()?;
        let mut v = 0;
        // SAFETY: ptr is a live element (made by locate) with numeric type, non-NULL data and a
        // non-zero size (check_number above); v is a local.
        if unsafe { OSSL_PARAM_get_size_t(self.ptr, &mut v) } == 1 {
            Ok(v)
        } else {
            Err(KaeError::InvalidParam)
        }
    }

    /// A UTF-8 string parameter (UTF8_STRING or UTF8_PTR).
    ///
    /// A UTF8_STRING is read within its `data_size` bytes (up to the first NUL, if any):
    /// nothing guarantees a terminator inside or after the buffer. A UTF8_PTR is bounded by
    /// its `data_size` when that is set; 0 means "NUL-terminated" by convention.
    pub fn get_utf8(&self) -> KaeResult<&'a str> {
        // SAFETY: a Param is only made by Params::locate, from an array valid for 'a, so ptr points
        // at a live element, only read here.
        let p = unsafe { &*self.ptr };
        let (data, bound): (*const u8, Option<usize>) = match p.data_type {
            OSSL_PARAM_UTF8_STRING => (p.data as *const u8, Some(p.data_size)),
            OSSL_PARAM_UTF8_PTR => {
                if p.data.is_null() {
                    return Err(KaeError::InvalidParam);
                }
                // SAFETY: for UTF8_PTR, data points to a `const char *`.
                let s = unsafe { *(p.data as *const *const c_char) };
                (s.cast(), (p.data_size > 0).then_some(p.data_size))
            }
            _ => return Err(KaeError::InvalidParam),
        };
        if data.is_null() {
            return Err(KaeError::InvalidParam);
        }
        let bytes: &'a [u8] = match bound {
            // SAFETY: the owner of the array vouches for data_size readable bytes.
            Some(n) => {
                let all = unsafe { core::slice::from_raw_parts(data, n) };
                let end = all.iter().position(|&b| b == 0).unwrap_or(n);
                &all[..end]
            }
            // SAFETY: a UTF8_PTR without a size points at a NUL-terminated string.
            None => unsafe { CStr::from_ptr(data.cast()) }.to_bytes(),
        };
        core::str::from_utf8(bytes).map_err(|_| KaeError::InvalidParam)
    }

    /// A string parameter that carries no string: NULL data, or a UTF8_PTR / OCTET_PTR whose
    /// pointer is NULL (how `OSSL_ENCODER_CTX_set_cipher(ctx, NULL, NULL)` says "no cipher").
    pub fn is_null_string(&self) -> bool {
        // SAFETY: a Param is only made by Params::locate, from an array valid for 'a, so ptr points
        // at a live element, only read here.
        let p = unsafe { &*self.ptr };
        if p.data.is_null() {
            return true;
        }
        match p.data_type {
            // SAFETY: for the pointer types, data points to a pointer.
            OSSL_PARAM_UTF8_PTR | OSSL_PARAM_OCTET_PTR => unsafe {
                (*(p.data as *const *const c_char)).is_null()
            },
            _ => false,
        }
    }

    /// An octet string parameter (OCTET_STRING or OCTET_PTR).
    pub fn get_octets(&self) -> KaeResult<&'a [u8]> {
        let mut p: *const libc::c_void = core::ptr::null();
        let mut len = 0usize;
        // SAFETY: ptr is a live element (made by locate); p and len are locals the getter writes.
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
        // SAFETY: on success OSSL_PARAM_get_BN allocated a new BIGNUM into bn that nothing else
        // references; BigNum takes sole ownership (NULL becomes an error).
        let tmp = unsafe { BigNum::from_raw(bn) }.ok_or(KaeError::OutOfMemory)?;
        if secret {
            tmp.dup(true)
        } else {
            Ok(tmp)
        }
    }
}

/// Some entries of a [`Params`] array, terminated ([`Params::without`]): they point into
/// that array, so they live as long as it.
pub struct ParamSubset<'a> {
    params: Vec<OSSL_PARAM>,
    _life: PhantomData<&'a OSSL_PARAM>,
}

impl ParamSubset<'_> {
    pub fn as_ptr(&self) -> *const OSSL_PARAM {
        self.params.as_ptr()
    }
}

/// The static array `p` points to, terminator included (None for NULL).
///
/// # Safety
/// `p` is NULL or an OSSL_PARAM array terminated by a NULL key that is never freed or
/// written while the answer is used.
pub unsafe fn terminated(p: *const OSSL_PARAM) -> Option<&'static [OSSL_PARAM]> {
    if p.is_null() {
        return None;
    }
    let mut n = 0;
    // SAFETY: the array is terminated (the contract), so every index up to the terminator is
    // in bounds.
    unsafe {
        while !(*p.add(n)).key.is_null() {
            n += 1;
        }
        Some(core::slice::from_raw_parts(p, n + 1))
    }
}

/// A writable parameter array (get_params requests).
pub struct ParamsMut<'a> {
    ptr: *mut OSSL_PARAM,
    _life: PhantomData<&'a mut OSSL_PARAM>,
}

impl<'a> ParamsMut<'a> {
    /// # Safety
    /// `ptr` is NULL or a valid OSSL_PARAM array terminated by a NULL key, living for `'a`, whose
    /// elements we may write (each non-NULL `data` writable for its `data_size` bytes).
    pub unsafe fn from_ptr(ptr: *mut OSSL_PARAM) -> Self {
        ParamsMut {
            ptr,
            _life: PhantomData,
        }
    }

    /// The array, for handing it on to libcrypto (NULL when empty).
    pub fn as_mut_ptr(&mut self) -> *mut OSSL_PARAM {
        self.ptr
    }

    pub fn locate(&mut self, key: &CStr) -> Option<ParamMut<'_>> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: self.ptr is non-NULL here and, by from_ptr's contract, a terminated array valid
        // for 'a.
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
        // SAFETY: a ParamMut is only made by ParamsMut::locate, from an array valid and writable
        // for 'a, so ptr points at a live element.
        unsafe { (*self.ptr).data_type }
    }
    /// A size query (NULL data) for a number of `size` bytes: answered by setting
    /// `return_size` here, because OpenSSL 3.0's setters may write through NULL when the
    /// requester left a non-zero `data_size`. True when it was a query.
    fn size_query(&mut self, size: usize) -> bool {
        // SAFETY: valid element, exclusively ours for the call.
        let p = unsafe { &mut *self.ptr };
        if p.data.is_null() {
            p.return_size = size;
            return true;
        }
        false
    }
    pub fn set_int(&mut self, v: i32) -> KaeResult<()> {
        if self.size_query(core::mem::size_of::<i32>()) {
            return Ok(());
        }
        // SAFETY: ptr is a live, writable element (made by locate) whose data is non-NULL
        // (size_query returned false); libcrypto bounds the write by data_size.
        ok(unsafe { OSSL_PARAM_set_int(self.ptr, v) })
    }
    pub fn set_uint(&mut self, v: u32) -> KaeResult<()> {
        if self.size_query(core::mem::size_of::<u32>()) {
            return Ok(());
        }
        // SAFETY: ptr is a live, writable element (made by locate) whose data is non-NULL
        // (size_query returned false); libcrypto bounds the write by data_size.
        ok(unsafe { OSSL_PARAM_set_uint(self.ptr, v) })
    }
    pub fn set_u64(&mut self, v: u64) -> KaeResult<()> {
        if self.size_query(core::mem::size_of::<u64>()) {
            return Ok(());
        }
        // SAFETY: ptr is a live, writable element (made by locate) whose data is non-NULL
        // (size_query returned false); libcrypto bounds the write by data_size.
        ok(unsafe { OSSL_PARAM_set_uint64(self.ptr, v) })
    }
    pub fn set_size_t(&mut self, v: usize) -> KaeResult<()> {
        if self.size_query(core::mem::size_of::<usize>()) {
            return Ok(());
        }
        // SAFETY: ptr is a live, writable element (made by locate) whose data is non-NULL
        // (size_query returned false); libcrypto bounds the write by data_size.
        ok(unsafe { OSSL_PARAM_set_size_t(self.ptr, v) })
    }
    pub fn set_bn(&mut self, v: &BigNum) -> KaeResult<()> {
        // SAFETY: ptr is a live, writable element (made by locate) and v owns a live BIGNUM;
        // libcrypto checks NULL data and bounds the write by data_size.
        ok(unsafe { OSSL_PARAM_set_BN(self.ptr, v.as_ptr()) })
    }
    /// Sets a UTF8_STRING (copied into the caller's buffer) or a UTF8_PTR (pointer to a
    /// static string: a UTF8_PTR answer is read after we return, so only `'static` data may
    /// be handed out that way).
    pub fn set_utf8(&mut self, s: &'static CStr) -> KaeResult<()> {
        if self.data_type() == OSSL_PARAM_UTF8_PTR {
            // SAFETY: ptr is a live, writable element (made by locate); s is 'static, so the
            // pointer stored in the element stays valid after we return.
            ok(unsafe { OSSL_PARAM_set_utf8_ptr(self.ptr, s.as_ptr()) })
        } else {
            // SAFETY: valid element; libcrypto checks the buffer size.
            ok(unsafe { OSSL_PARAM_set_utf8_string(self.ptr, s.as_ptr()) })
        }
    }
    /// Sets a UTF8_STRING from a transient string.
    pub fn set_utf8_owned(&mut self, s: &str) -> KaeResult<()> {
        let c = std::ffi::CString::new(s).map_err(|_| KaeError::InvalidParam)?;
        // SAFETY: ptr is a live, writable element (made by locate); c outlives the call and
        // libcrypto copies it within data_size.
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
        // SAFETY: OSSL_PARAM_BLD_new has no preconditions; a NULL result (out of memory) becomes an
        // error.
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
        // SAFETY: self.0 is the live builder this wrapper owns; key and s are 'static, so the
        // pointers the builder keeps until build stay valid.
        ok(
            unsafe {
                OSSL_PARAM_BLD_push_utf8_string(self.0.as_ptr(), key.as_ptr(), s.as_ptr(), 0)
            },
        )
    }
    pub fn push_int(&mut self, key: &'static CStr, v: i32) -> KaeResult<()> {
        // SAFETY: self.0 is the live builder this wrapper owns; key is 'static, so the pointer the
        // builder keeps until build stays valid.
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
        // SAFETY: self.0 is the builder this wrapper allocated and owns; drop runs once.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8_param(key: &'static CStr, data_type: u32, data: *mut u8, size: usize) -> OSSL_PARAM {
        OSSL_PARAM {
            key: key.as_ptr(),
            data_type,
            data: data.cast(),
            data_size: size,
            return_size: OSSL_PARAM_UNMODIFIED,
        }
    }

    /// A UTF8_STRING whose bytes are not NUL-terminated within (or right after) its size is
    /// read within its size, never past it.
    #[test]
    fn utf8_string_without_nul_is_read_within_its_size() {
        let mut buf = *b"SHA256XXXXXXXXXXXXXXXX\0";
        let data = buf.as_mut_ptr();
        let arr = [utf8_param(c"digest", OSSL_PARAM_UTF8_STRING, data, 6), END];
        // SAFETY: a valid terminated array living for this scope.
        let ps = unsafe { Params::from_ptr(arr.as_ptr()) };
        assert_eq!(ps.locate(c"digest").unwrap().get_utf8(), Ok("SHA256"));
        // A NUL inside the size ends the string there.
        // SAFETY: within buf, written through the pointer the parameter holds.
        unsafe { data.add(3).write(0) };
        assert_eq!(ps.locate(c"digest").unwrap().get_utf8(), Ok("SHA"));
    }

    #[test]
    fn utf8_ptr_is_bounded_by_its_size_when_set() {
        let mut text = *b"pkcs1garbage\0";
        let mut ptr: *const c_char = text.as_mut_ptr().cast();
        let mut arr = [
            utf8_param(
                c"pad-mode",
                OSSL_PARAM_UTF8_PTR,
                (&mut ptr as *mut *const c_char).cast(),
                5,
            ),
            END,
        ];
        // SAFETY: arr and the string ptr points to live in this scope and arr is terminated by END.
        let ps = unsafe { Params::from_ptr(arr.as_ptr()) };
        assert_eq!(ps.locate(c"pad-mode").unwrap().get_utf8(), Ok("pkcs1"));
        // Conventional: NUL-terminated.
        arr[0].data_size = 0;
        // SAFETY: arr and text (NUL-terminated) live in this scope; arr is terminated by END.
        let ps = unsafe { Params::from_ptr(arr.as_ptr()) };
        assert_eq!(
            ps.locate(c"pad-mode").unwrap().get_utf8(),
            Ok("pkcs1garbage")
        );
        // A NULL data pointer and a wrong type are refused.
        let arr = [
            utf8_param(c"x", OSSL_PARAM_UTF8_STRING, core::ptr::null_mut(), 3),
            utf8_param(c"y", OSSL_PARAM_OCTET_STRING, text.as_mut_ptr(), 3),
            END,
        ];
        // SAFETY: arr is a terminated array of this scope; its data pointers are NULL or into text,
        // which outlives ps.
        let ps = unsafe { Params::from_ptr(arr.as_ptr()) };
        assert!(ps.locate(c"x").unwrap().get_utf8().is_err());
        assert!(ps.locate(c"y").unwrap().get_utf8().is_err());
    }

    /// Numbers with NULL data, no size or a non-numeric type are refused before libcrypto's
    /// getters read them (fuzz findings params/int-null-data-size0, real-null-data-get-uint).
    #[test]
    fn numbers_without_data_are_refused() {
        let mut v = 7u32;
        let arr = [
            utf8_param(c"a", OSSL_PARAM_INTEGER, core::ptr::null_mut(), 0),
            utf8_param(c"b", OSSL_PARAM_REAL, core::ptr::null_mut(), 8),
            utf8_param(
                c"c",
                OSSL_PARAM_UNSIGNED_INTEGER,
                (&mut v as *mut u32).cast(),
                0,
            ),
            utf8_param(c"d", OSSL_PARAM_UTF8_STRING, (&mut v as *mut u32).cast(), 4),
            utf8_param(
                c"e",
                OSSL_PARAM_UNSIGNED_INTEGER,
                (&mut v as *mut u32).cast(),
                4,
            ),
            END,
        ];
        // SAFETY: arr is a terminated array of this scope; its data pointers are NULL or point to
        // v, which outlives ps.
        let ps = unsafe { Params::from_ptr(arr.as_ptr()) };
        for k in [c"a", c"b", c"c", c"d"] {
            let p = ps.locate(k).unwrap();
            assert!(p.get_int().is_err() && p.get_uint().is_err() && p.get_size_t().is_err());
        }
        assert_eq!(ps.locate(c"e").unwrap().get_uint(), Ok(7));
    }

    /// A size query (NULL data, even with a non-zero data_size) gets return_size, and nothing
    /// is written (fuzz finding params/get-null-data-nonzero-size).
    #[test]
    fn number_size_queries_do_not_write() {
        let mut arr = [
            utf8_param(c"n", OSSL_PARAM_UNSIGNED_INTEGER, core::ptr::null_mut(), 8),
            END,
        ];
        // SAFETY: a valid terminated array living for this scope.
        let mut ps = unsafe { ParamsMut::from_ptr(arr.as_mut_ptr()) };
        ps.locate(c"n").unwrap().set_u64(42).unwrap();
        assert_eq!(arr[0].return_size, 8);
    }
}
