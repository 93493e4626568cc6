//! Owned `OSSL_PARAM` arrays and a builder for them.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

use super::ffi::{
    BN_bin2bn, BN_bn2bin, BN_free, BN_num_bits, OSSL_PARAM_BLD_free, OSSL_PARAM_BLD_new,
    OSSL_PARAM_BLD_push_BN, OSSL_PARAM_BLD_push_int, OSSL_PARAM_BLD_push_octet_string,
    OSSL_PARAM_BLD_push_size_t, OSSL_PARAM_BLD_push_uint, OSSL_PARAM_BLD_push_utf8_string,
    OSSL_PARAM_BLD_to_param, OSSL_PARAM_free, OSSL_PARAM_get_BN, OSSL_PARAM_get_int,
    OSSL_PARAM_get_utf8_string_ptr, OSSL_PARAM_locate_const, BIGNUM, OSSL_PARAM,
};
use super::util::{cstr_opt, intern};

#[derive(Clone, Debug)]
pub enum PVal {
    Utf8(String),
    Octet(Vec<u8>),
    Int(i32),
    Uint(u32),
    SizeT(usize),
    /// Unsigned big-endian integer.
    Bn(Vec<u8>),
}

/// Collects parameters and turns them into an owned `OSSL_PARAM` array with `OSSL_PARAM_BLD`.
#[derive(Clone, Debug, Default)]
pub struct ParamsBuilder {
    items: Vec<(String, PVal)>,
}

impl ParamsBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(mut self, key: &str, v: PVal) -> Self {
        self.items.push((key.to_owned(), v));
        self
    }
    pub fn utf8(self, key: &str, v: &str) -> Self {
        self.push(key, PVal::Utf8(v.to_owned()))
    }
    pub fn octet(self, key: &str, v: &[u8]) -> Self {
        self.push(key, PVal::Octet(v.to_vec()))
    }
    pub fn int(self, key: &str, v: i32) -> Self {
        self.push(key, PVal::Int(v))
    }
    pub fn uint(self, key: &str, v: u32) -> Self {
        self.push(key, PVal::Uint(v))
    }
    pub fn size_t(self, key: &str, v: usize) -> Self {
        self.push(key, PVal::SizeT(v))
    }
    pub fn bn(self, key: &str, v: &[u8]) -> Self {
        self.push(key, PVal::Bn(v.to_vec()))
    }
    pub fn opt_utf8(self, key: &str, v: Option<&str>) -> Self {
        match v {
            Some(v) => self.utf8(key, v),
            None => self,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn build(&self) -> Params {
        unsafe {
            let bld = OSSL_PARAM_BLD_new();
            assert!(!bld.is_null(), "OSSL_PARAM_BLD_new");
            // The builder keeps pointers to these until to_param copies them.
            let mut strings: Vec<CString> = Vec::new();
            let mut bns: Vec<*mut BIGNUM> = Vec::new();
            for (k, v) in &self.items {
                let key = intern(k).as_ptr();
                let ok = match v {
                    PVal::Utf8(s) => {
                        let c = CString::new(s.as_str()).expect("NUL in utf8 param");
                        let r = OSSL_PARAM_BLD_push_utf8_string(bld, key, c.as_ptr(), s.len());
                        strings.push(c);
                        r
                    }
                    PVal::Octet(b) => {
                        OSSL_PARAM_BLD_push_octet_string(bld, key, b.as_ptr().cast(), b.len())
                    }
                    PVal::Int(i) => OSSL_PARAM_BLD_push_int(bld, key, *i),
                    PVal::Uint(u) => OSSL_PARAM_BLD_push_uint(bld, key, *u),
                    PVal::SizeT(u) => OSSL_PARAM_BLD_push_size_t(bld, key, *u),
                    PVal::Bn(b) => {
                        let bn = BN_bin2bn(b.as_ptr(), b.len() as c_int, ptr::null_mut());
                        assert!(!bn.is_null(), "BN_bin2bn");
                        bns.push(bn);
                        OSSL_PARAM_BLD_push_BN(bld, key, bn)
                    }
                };
                assert_eq!(ok, 1, "OSSL_PARAM_BLD_push for {k}");
            }
            let p = OSSL_PARAM_BLD_to_param(bld);
            OSSL_PARAM_BLD_free(bld);
            for bn in bns {
                BN_free(bn);
            }
            drop(strings);
            assert!(!p.is_null(), "OSSL_PARAM_BLD_to_param");
            Params { ptr: p }
        }
    }
}

/// An owned `OSSL_PARAM` array (from the builder or from `EVP_PKEY_todata`).
pub struct Params {
    pub(super) ptr: *mut OSSL_PARAM,
}

unsafe impl Send for Params {}
unsafe impl Sync for Params {}

impl Drop for Params {
    fn drop(&mut self) {
        unsafe { OSSL_PARAM_free(self.ptr) }
    }
}

impl Params {
    pub fn empty() -> Params {
        ParamsBuilder::new().build()
    }
    pub fn as_ptr(&self) -> *const OSSL_PARAM {
        self.ptr
    }
    pub fn as_mut_ptr(&self) -> *mut OSSL_PARAM {
        self.ptr
    }
    pub fn keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut p = self.ptr as *const OSSL_PARAM;
        unsafe {
            while !(*p).key.is_null() {
                out.push(CStr::from_ptr((*p).key).to_string_lossy().into_owned());
                p = p.add(1);
            }
        }
        out
    }
    fn locate(&self, key: &str) -> Option<*const OSSL_PARAM> {
        let p = unsafe { OSSL_PARAM_locate_const(self.ptr, intern(key).as_ptr()) };
        (!p.is_null()).then_some(p)
    }
    /// Big-endian magnitude of a BIGNUM parameter.
    pub fn get_bn(&self, key: &str) -> Option<Vec<u8>> {
        let p = self.locate(key)?;
        let mut bn: *mut BIGNUM = ptr::null_mut();
        if unsafe { OSSL_PARAM_get_BN(p, &mut bn) } != 1 {
            return None;
        }
        let v = bn_to_vec(bn);
        unsafe { BN_free(bn) };
        Some(v)
    }
    pub fn get_int(&self, key: &str) -> Option<i32> {
        let p = self.locate(key)?;
        let mut v: c_int = 0;
        (unsafe { OSSL_PARAM_get_int(p, &mut v) } == 1).then_some(v)
    }
    pub fn get_utf8(&self, key: &str) -> Option<String> {
        let p = self.locate(key)?;
        let mut s: *const c_char = ptr::null();
        if unsafe { OSSL_PARAM_get_utf8_string_ptr(p, &mut s) } != 1 {
            return None;
        }
        cstr_opt(s)
    }
}

pub(super) fn bn_to_vec(bn: *const BIGNUM) -> Vec<u8> {
    unsafe {
        let n = ((BN_num_bits(bn) + 7) / 8) as usize;
        let mut v = vec![0u8; n];
        BN_bn2bin(bn, v.as_mut_ptr());
        v
    }
}
