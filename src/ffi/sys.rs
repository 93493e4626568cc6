//! Raw declarations of the OpenSSL core ABI (`openssl/core.h`, `core_dispatch.h`) and of the
//! public libcrypto functions kae calls. Only public, stable API: no private struct layouts.
//!
//! `openssl-sys` links libcrypto for us; it lacks many provider-side declarations, so the ones we
//! need are declared here with our own opaque types.
#![allow(non_camel_case_types, non_snake_case)]

use libc::{c_char, c_int, c_uchar, c_uint, c_ulong, c_void, size_t};

macro_rules! opaque {
    ($($name:ident),* $(,)?) => { $( #[repr(C)] pub struct $name { _p: [u8; 0] } )* };
}
opaque!(
    OSSL_CORE_HANDLE,
    OSSL_LIB_CTX,
    OSSL_PROVIDER,
    BIGNUM,
    BN_CTX,
    BN_MONT_CTX,
    BN_GENCB,
    EVP_MD,
    EVP_MD_CTX,
    ASYNC_JOB,
    ASYNC_WAIT_CTX,
    OSSL_PARAM_BLD,
    EVP_MAC,
    EVP_MAC_CTX,
    EVP_RAND,
    EVP_RAND_CTX
);

#[repr(C)]
pub struct OSSL_DISPATCH {
    pub function_id: c_int,
    pub function: Option<unsafe extern "C" fn()>,
}
// SAFETY: dispatch tables are immutable static data of function pointers.
unsafe impl Sync for OSSL_DISPATCH {}

#[repr(C)]
pub struct OSSL_ITEM {
    pub id: c_uint,
    pub ptr: *mut c_void,
}
// SAFETY: item tables are immutable static data pointing at static strings.
unsafe impl Sync for OSSL_ITEM {}

#[repr(C)]
pub struct OSSL_ALGORITHM {
    pub algorithm_names: *const c_char,
    pub property_definition: *const c_char,
    pub implementation: *const OSSL_DISPATCH,
    pub algorithm_description: *const c_char,
}
// SAFETY: algorithm tables are immutable static data.
unsafe impl Sync for OSSL_ALGORITHM {}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OSSL_PARAM {
    pub key: *const c_char,
    pub data_type: c_uint,
    pub data: *mut c_void,
    pub data_size: size_t,
    pub return_size: size_t,
}
// SAFETY: the static descriptor tables we hand out (gettable/settable) have null data pointers.
unsafe impl Sync for OSSL_PARAM {}

pub const OSSL_PARAM_INTEGER: c_uint = 1;
pub const OSSL_PARAM_UNSIGNED_INTEGER: c_uint = 2;
pub const OSSL_PARAM_REAL: c_uint = 3;
pub const OSSL_PARAM_UTF8_STRING: c_uint = 4;
pub const OSSL_PARAM_OCTET_STRING: c_uint = 5;
pub const OSSL_PARAM_UTF8_PTR: c_uint = 6;
pub const OSSL_PARAM_OCTET_PTR: c_uint = 7;
pub const OSSL_PARAM_UNMODIFIED: size_t = size_t::MAX;

// Core functions offered to the provider.
pub const OSSL_FUNC_CORE_GET_PARAMS: c_int = 2;
pub const OSSL_FUNC_CORE_NEW_ERROR: c_int = 5;
pub const OSSL_FUNC_CORE_SET_ERROR_DEBUG: c_int = 6;
pub const OSSL_FUNC_CORE_VSET_ERROR: c_int = 7;

// Provider functions.
pub const OSSL_FUNC_PROVIDER_TEARDOWN: c_int = 1024;
pub const OSSL_FUNC_PROVIDER_GETTABLE_PARAMS: c_int = 1025;
pub const OSSL_FUNC_PROVIDER_GET_PARAMS: c_int = 1026;
pub const OSSL_FUNC_PROVIDER_QUERY_OPERATION: c_int = 1027;
pub const OSSL_FUNC_PROVIDER_GET_REASON_STRINGS: c_int = 1029;
pub const OSSL_FUNC_PROVIDER_GET_CAPABILITIES: c_int = 1030;

pub const OSSL_OP_DIGEST: c_int = 1;
pub const OSSL_OP_CIPHER: c_int = 2;
pub const OSSL_OP_MAC: c_int = 3;
pub const OSSL_OP_KDF: c_int = 4;
pub const OSSL_OP_RAND: c_int = 5;
pub const OSSL_OP_KEYMGMT: c_int = 10;
pub const OSSL_OP_KEYEXCH: c_int = 11;
pub const OSSL_OP_SIGNATURE: c_int = 12;
pub const OSSL_OP_ASYM_CIPHER: c_int = 13;
pub const OSSL_OP_KEM: c_int = 14;
pub const OSSL_OP_ENCODER: c_int = 20;
pub const OSSL_OP_DECODER: c_int = 21;
pub const OSSL_OP_STORE: c_int = 22;

pub const OSSL_FUNC_RAND_NEWCTX: c_int = 1;
pub const OSSL_FUNC_RAND_FREECTX: c_int = 2;
pub const OSSL_FUNC_RAND_INSTANTIATE: c_int = 3;
pub const OSSL_FUNC_RAND_UNINSTANTIATE: c_int = 4;
pub const OSSL_FUNC_RAND_GENERATE: c_int = 5;
pub const OSSL_FUNC_RAND_RESEED: c_int = 6;
pub const OSSL_FUNC_RAND_ENABLE_LOCKING: c_int = 8;
pub const OSSL_FUNC_RAND_GETTABLE_CTX_PARAMS: c_int = 12;
pub const OSSL_FUNC_RAND_SETTABLE_CTX_PARAMS: c_int = 13;
pub const OSSL_FUNC_RAND_GET_CTX_PARAMS: c_int = 15;
pub const OSSL_FUNC_RAND_SET_CTX_PARAMS: c_int = 16;
pub const OSSL_FUNC_RAND_VERIFY_ZEROIZATION: c_int = 17;

pub const OSSL_FUNC_KEYMGMT_NEW: c_int = 1;
pub const OSSL_FUNC_KEYMGMT_GEN_INIT: c_int = 2;
pub const OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS: c_int = 4;
pub const OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS: c_int = 5;
pub const OSSL_FUNC_KEYMGMT_GEN: c_int = 6;
pub const OSSL_FUNC_KEYMGMT_GEN_CLEANUP: c_int = 7;
pub const OSSL_FUNC_KEYMGMT_LOAD: c_int = 8;
pub const OSSL_FUNC_KEYMGMT_FREE: c_int = 10;
pub const OSSL_FUNC_KEYMGMT_GET_PARAMS: c_int = 11;
pub const OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS: c_int = 12;
pub const OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME: c_int = 20;
pub const OSSL_FUNC_KEYMGMT_HAS: c_int = 21;
pub const OSSL_FUNC_KEYMGMT_VALIDATE: c_int = 22;
pub const OSSL_FUNC_KEYMGMT_MATCH: c_int = 23;
pub const OSSL_FUNC_KEYMGMT_IMPORT: c_int = 40;
pub const OSSL_FUNC_KEYMGMT_IMPORT_TYPES: c_int = 41;
pub const OSSL_FUNC_KEYMGMT_EXPORT: c_int = 42;
pub const OSSL_FUNC_KEYMGMT_EXPORT_TYPES: c_int = 43;
pub const OSSL_FUNC_KEYMGMT_DUP: c_int = 44;

pub const OSSL_KEYMGMT_SELECT_PRIVATE_KEY: c_int = 0x01;
pub const OSSL_KEYMGMT_SELECT_PUBLIC_KEY: c_int = 0x02;
pub const OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS: c_int = 0x04;
pub const OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS: c_int = 0x80;
pub const OSSL_KEYMGMT_SELECT_KEYPAIR: c_int = 0x03;

pub const OSSL_FUNC_SIGNATURE_NEWCTX: c_int = 1;
pub const OSSL_FUNC_SIGNATURE_SIGN_INIT: c_int = 2;
pub const OSSL_FUNC_SIGNATURE_SIGN: c_int = 3;
pub const OSSL_FUNC_SIGNATURE_VERIFY_INIT: c_int = 4;
pub const OSSL_FUNC_SIGNATURE_VERIFY: c_int = 5;
pub const OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT: c_int = 6;
pub const OSSL_FUNC_SIGNATURE_VERIFY_RECOVER: c_int = 7;
pub const OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT: c_int = 8;
pub const OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE: c_int = 9;
pub const OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL: c_int = 10;
pub const OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_INIT: c_int = 12;
pub const OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_UPDATE: c_int = 13;
pub const OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_FINAL: c_int = 14;
pub const OSSL_FUNC_SIGNATURE_FREECTX: c_int = 16;
pub const OSSL_FUNC_SIGNATURE_DUPCTX: c_int = 17;
pub const OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS: c_int = 18;
pub const OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS: c_int = 19;
pub const OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS: c_int = 20;
pub const OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS: c_int = 21;
pub const OSSL_FUNC_SIGNATURE_GET_CTX_MD_PARAMS: c_int = 22;
pub const OSSL_FUNC_SIGNATURE_GETTABLE_CTX_MD_PARAMS: c_int = 23;
pub const OSSL_FUNC_SIGNATURE_SET_CTX_MD_PARAMS: c_int = 24;
pub const OSSL_FUNC_SIGNATURE_SETTABLE_CTX_MD_PARAMS: c_int = 25;

// Signature functions that only exist in OpenSSL 3.4+ headers (kae builds against 3.0's):
// values from OpenSSL 3.5's include/openssl/core_dispatch.h. A 3.0-3.3 core never sees them:
// the tables that use them are listed only when the running core is 3.4 or newer.
pub const OSSL_FUNC_SIGNATURE_QUERY_KEY_TYPES: c_int = 26;
pub const OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_INIT: c_int = 27;
pub const OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_UPDATE: c_int = 28;
pub const OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_FINAL: c_int = 29;
pub const OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_INIT: c_int = 30;
pub const OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_UPDATE: c_int = 31;
pub const OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_FINAL: c_int = 32;

// KEM functions (core_dispatch.h, the same numbers since 3.0).
pub const OSSL_FUNC_KEM_NEWCTX: c_int = 1;
pub const OSSL_FUNC_KEM_ENCAPSULATE_INIT: c_int = 2;
pub const OSSL_FUNC_KEM_ENCAPSULATE: c_int = 3;
pub const OSSL_FUNC_KEM_DECAPSULATE_INIT: c_int = 4;
pub const OSSL_FUNC_KEM_DECAPSULATE: c_int = 5;
pub const OSSL_FUNC_KEM_FREECTX: c_int = 6;
pub const OSSL_FUNC_KEM_DUPCTX: c_int = 7;
pub const OSSL_FUNC_KEM_GET_CTX_PARAMS: c_int = 8;
pub const OSSL_FUNC_KEM_GETTABLE_CTX_PARAMS: c_int = 9;
pub const OSSL_FUNC_KEM_SET_CTX_PARAMS: c_int = 10;
pub const OSSL_FUNC_KEM_SETTABLE_CTX_PARAMS: c_int = 11;

pub const OSSL_FUNC_ASYM_CIPHER_NEWCTX: c_int = 1;
pub const OSSL_FUNC_ASYM_CIPHER_ENCRYPT_INIT: c_int = 2;
pub const OSSL_FUNC_ASYM_CIPHER_ENCRYPT: c_int = 3;
pub const OSSL_FUNC_ASYM_CIPHER_DECRYPT_INIT: c_int = 4;
pub const OSSL_FUNC_ASYM_CIPHER_DECRYPT: c_int = 5;
pub const OSSL_FUNC_ASYM_CIPHER_FREECTX: c_int = 6;
pub const OSSL_FUNC_ASYM_CIPHER_DUPCTX: c_int = 7;
pub const OSSL_FUNC_ASYM_CIPHER_GET_CTX_PARAMS: c_int = 8;
pub const OSSL_FUNC_ASYM_CIPHER_GETTABLE_CTX_PARAMS: c_int = 9;
pub const OSSL_FUNC_ASYM_CIPHER_SET_CTX_PARAMS: c_int = 10;
pub const OSSL_FUNC_ASYM_CIPHER_SETTABLE_CTX_PARAMS: c_int = 11;

pub const BN_FLG_CONSTTIME: c_int = 0x04;

pub type core_get_params_fn =
    unsafe extern "C" fn(handle: *const OSSL_CORE_HANDLE, params: *mut OSSL_PARAM) -> c_int;
pub type core_new_error_fn = unsafe extern "C" fn(handle: *const OSSL_CORE_HANDLE);
pub type core_set_error_debug_fn = unsafe extern "C" fn(
    handle: *const OSSL_CORE_HANDLE,
    file: *const c_char,
    line: c_int,
    func: *const c_char,
);
/// The last argument is a `va_list`; we always pass a NULL format, so it is never read.
pub type core_vset_error_fn = unsafe extern "C" fn(
    handle: *const OSSL_CORE_HANDLE,
    reason: u32,
    fmt: *const c_char,
    args: *mut c_void,
);

pub type BN_ULONG = u64;

extern "C" {
    // Providers and library contexts.
    pub fn OSSL_PROVIDER_load(ctx: *mut OSSL_LIB_CTX, name: *const c_char) -> *mut OSSL_PROVIDER;
    pub fn OSSL_PROVIDER_unload(prov: *mut OSSL_PROVIDER) -> c_int;
    pub fn OSSL_PROVIDER_available(ctx: *mut OSSL_LIB_CTX, name: *const c_char) -> c_int;
    pub fn OpenSSL_version_num() -> c_ulong;

    // Parameters.
    pub fn OSSL_PARAM_locate(p: *mut OSSL_PARAM, key: *const c_char) -> *mut OSSL_PARAM;
    pub fn OSSL_PARAM_locate_const(p: *const OSSL_PARAM, key: *const c_char) -> *const OSSL_PARAM;
    pub fn OSSL_PARAM_get_int(p: *const OSSL_PARAM, val: *mut c_int) -> c_int;
    pub fn OSSL_PARAM_get_uint(p: *const OSSL_PARAM, val: *mut c_uint) -> c_int;
    pub fn OSSL_PARAM_get_size_t(p: *const OSSL_PARAM, val: *mut size_t) -> c_int;
    pub fn OSSL_PARAM_get_BN(p: *const OSSL_PARAM, val: *mut *mut BIGNUM) -> c_int;
    pub fn OSSL_PARAM_get_utf8_string_ptr(p: *const OSSL_PARAM, val: *mut *const c_char) -> c_int;
    pub fn OSSL_PARAM_get_octet_string_ptr(
        p: *const OSSL_PARAM,
        val: *mut *const c_void,
        used_len: *mut size_t,
    ) -> c_int;
    pub fn OSSL_PARAM_set_int(p: *mut OSSL_PARAM, val: c_int) -> c_int;
    pub fn OSSL_PARAM_set_uint(p: *mut OSSL_PARAM, val: c_uint) -> c_int;
    pub fn OSSL_PARAM_set_size_t(p: *mut OSSL_PARAM, val: size_t) -> c_int;
    pub fn OSSL_PARAM_set_BN(p: *mut OSSL_PARAM, val: *const BIGNUM) -> c_int;
    pub fn OSSL_PARAM_set_utf8_string(p: *mut OSSL_PARAM, val: *const c_char) -> c_int;
    pub fn OSSL_PARAM_set_utf8_ptr(p: *mut OSSL_PARAM, val: *const c_char) -> c_int;
    pub fn OSSL_PARAM_set_octet_string(
        p: *mut OSSL_PARAM,
        val: *const c_void,
        len: size_t,
    ) -> c_int;
    pub fn OSSL_PARAM_BLD_new() -> *mut OSSL_PARAM_BLD;
    pub fn OSSL_PARAM_BLD_free(bld: *mut OSSL_PARAM_BLD);
    pub fn OSSL_PARAM_BLD_push_BN(
        bld: *mut OSSL_PARAM_BLD,
        key: *const c_char,
        bn: *const BIGNUM,
    ) -> c_int;
    pub fn OSSL_PARAM_BLD_push_utf8_string(
        bld: *mut OSSL_PARAM_BLD,
        key: *const c_char,
        buf: *const c_char,
        bsize: size_t,
    ) -> c_int;
    pub fn OSSL_PARAM_BLD_push_int(
        bld: *mut OSSL_PARAM_BLD,
        key: *const c_char,
        val: c_int,
    ) -> c_int;
    pub fn OSSL_PARAM_BLD_to_param(bld: *mut OSSL_PARAM_BLD) -> *mut OSSL_PARAM;
    pub fn OSSL_PARAM_free(p: *mut OSSL_PARAM);

    // Errors.
    pub fn ERR_add_error_data(num: c_int, ...);
    pub fn ERR_set_mark() -> c_int;
    pub fn ERR_pop_to_mark() -> c_int;

    // Big numbers.
    pub fn BN_new() -> *mut BIGNUM;
    pub fn BN_secure_new() -> *mut BIGNUM;
    pub fn BN_clear_free(a: *mut BIGNUM);
    pub fn BN_free(a: *mut BIGNUM);
    pub fn BN_copy(a: *mut BIGNUM, b: *const BIGNUM) -> *mut BIGNUM;
    pub fn BN_set_flags(b: *mut BIGNUM, n: c_int);
    pub fn BN_num_bits(a: *const BIGNUM) -> c_int;
    pub fn BN_is_zero(a: *const BIGNUM) -> c_int;
    pub fn BN_is_one(a: *const BIGNUM) -> c_int;
    pub fn BN_is_odd(a: *const BIGNUM) -> c_int;
    pub fn BN_is_negative(a: *const BIGNUM) -> c_int;
    pub fn BN_cmp(a: *const BIGNUM, b: *const BIGNUM) -> c_int;
    pub fn BN_set_word(a: *mut BIGNUM, w: BN_ULONG) -> c_int;
    pub fn BN_bin2bn(s: *const c_uchar, len: c_int, ret: *mut BIGNUM) -> *mut BIGNUM;
    pub fn BN_bn2binpad(a: *const BIGNUM, to: *mut c_uchar, tolen: c_int) -> c_int;
    pub fn BN_lebin2bn(s: *const c_uchar, len: c_int, ret: *mut BIGNUM) -> *mut BIGNUM;
    pub fn BN_bn2lebinpad(a: *const BIGNUM, to: *mut c_uchar, tolen: c_int) -> c_int;
    pub fn BN_add(r: *mut BIGNUM, a: *const BIGNUM, b: *const BIGNUM) -> c_int;
    pub fn BN_sub(r: *mut BIGNUM, a: *const BIGNUM, b: *const BIGNUM) -> c_int;
    pub fn BN_sub_word(a: *mut BIGNUM, w: BN_ULONG) -> c_int;
    pub fn BN_mul(r: *mut BIGNUM, a: *const BIGNUM, b: *const BIGNUM, ctx: *mut BN_CTX) -> c_int;
    pub fn BN_div(
        dv: *mut BIGNUM,
        rem: *mut BIGNUM,
        m: *const BIGNUM,
        d: *const BIGNUM,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_nnmod(r: *mut BIGNUM, a: *const BIGNUM, m: *const BIGNUM, ctx: *mut BN_CTX) -> c_int;
    pub fn BN_mod_mul(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        b: *const BIGNUM,
        m: *const BIGNUM,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_mod_sub(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        b: *const BIGNUM,
        m: *const BIGNUM,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_gcd(r: *mut BIGNUM, a: *const BIGNUM, b: *const BIGNUM, ctx: *mut BN_CTX) -> c_int;
    pub fn BN_mod_inverse(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        n: *const BIGNUM,
        ctx: *mut BN_CTX,
    ) -> *mut BIGNUM;
    pub fn BN_mod_exp_mont(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        p: *const BIGNUM,
        m: *const BIGNUM,
        ctx: *mut BN_CTX,
        m_ctx: *mut BN_MONT_CTX,
    ) -> c_int;
    pub fn BN_mod_exp_mont_consttime(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        p: *const BIGNUM,
        m: *const BIGNUM,
        ctx: *mut BN_CTX,
        m_ctx: *mut BN_MONT_CTX,
    ) -> c_int;
    pub fn BN_mod_exp_mont_consttime_x2(
        rr1: *mut BIGNUM,
        a1: *const BIGNUM,
        p1: *const BIGNUM,
        m1: *const BIGNUM,
        in_mont1: *mut BN_MONT_CTX,
        rr2: *mut BIGNUM,
        a2: *const BIGNUM,
        p2: *const BIGNUM,
        m2: *const BIGNUM,
        in_mont2: *mut BN_MONT_CTX,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_mod_mul_montgomery(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        b: *const BIGNUM,
        mont: *mut BN_MONT_CTX,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_to_montgomery(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        mont: *mut BN_MONT_CTX,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_from_montgomery(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        mont: *mut BN_MONT_CTX,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_priv_rand_range_ex(
        r: *mut BIGNUM,
        range: *const BIGNUM,
        strength: c_uint,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_generate_prime_ex2(
        ret: *mut BIGNUM,
        bits: c_int,
        safe: c_int,
        add: *const BIGNUM,
        rem: *const BIGNUM,
        cb: *mut BN_GENCB,
        ctx: *mut BN_CTX,
    ) -> c_int;
    pub fn BN_check_prime(p: *const BIGNUM, ctx: *mut BN_CTX, cb: *mut BN_GENCB) -> c_int;
    pub fn BN_CTX_new_ex(ctx: *mut OSSL_LIB_CTX) -> *mut BN_CTX;
    pub fn BN_CTX_secure_new_ex(ctx: *mut OSSL_LIB_CTX) -> *mut BN_CTX;
    pub fn BN_CTX_free(c: *mut BN_CTX);
    pub fn BN_MONT_CTX_new() -> *mut BN_MONT_CTX;
    pub fn BN_MONT_CTX_free(m: *mut BN_MONT_CTX);
    pub fn BN_MONT_CTX_set(m: *mut BN_MONT_CTX, modulus: *const BIGNUM, ctx: *mut BN_CTX) -> c_int;

    // Digests and randomness.
    pub fn EVP_MD_fetch(
        ctx: *mut OSSL_LIB_CTX,
        algorithm: *const c_char,
        props: *const c_char,
    ) -> *mut EVP_MD;
    pub fn EVP_MD_free(md: *mut EVP_MD);
    pub fn EVP_MD_up_ref(md: *mut EVP_MD) -> c_int;
    pub fn EVP_MD_get_size(md: *const EVP_MD) -> c_int;
    pub fn EVP_MD_get_block_size(md: *const EVP_MD) -> c_int;
    pub fn EVP_MD_CTX_new() -> *mut EVP_MD_CTX;
    pub fn EVP_MD_CTX_free(ctx: *mut EVP_MD_CTX);
    pub fn EVP_MD_CTX_copy_ex(out: *mut EVP_MD_CTX, inp: *const EVP_MD_CTX) -> c_int;
    pub fn EVP_MD_CTX_get_params(ctx: *mut EVP_MD_CTX, params: *mut OSSL_PARAM) -> c_int;
    pub fn EVP_MD_CTX_set_params(ctx: *mut EVP_MD_CTX, params: *const OSSL_PARAM) -> c_int;
    pub fn EVP_MD_gettable_ctx_params(md: *const EVP_MD) -> *const OSSL_PARAM;
    pub fn EVP_MD_settable_ctx_params(md: *const EVP_MD) -> *const OSSL_PARAM;
    pub fn EVP_DigestInit_ex2(
        ctx: *mut EVP_MD_CTX,
        md: *const EVP_MD,
        params: *const OSSL_PARAM,
    ) -> c_int;
    pub fn EVP_DigestUpdate(ctx: *mut EVP_MD_CTX, d: *const c_void, cnt: size_t) -> c_int;
    pub fn EVP_DigestFinal_ex(ctx: *mut EVP_MD_CTX, md: *mut c_uchar, s: *mut c_uint) -> c_int;
    pub fn RAND_bytes_ex(
        ctx: *mut OSSL_LIB_CTX,
        buf: *mut c_uchar,
        num: size_t,
        strength: c_uint,
    ) -> c_int;
    pub fn RAND_priv_bytes_ex(
        ctx: *mut OSSL_LIB_CTX,
        buf: *mut c_uchar,
        num: size_t,
        strength: c_uint,
    ) -> c_int;
    pub fn CRYPTO_memcmp(a: *const c_void, b: *const c_void, len: size_t) -> c_int;
}

extern "C" {
    pub fn OSSL_PROVIDER_query_operation(
        prov: *const OSSL_PROVIDER,
        operation_id: c_int,
        no_cache: *mut c_int,
    ) -> *const OSSL_ALGORITHM;
    pub fn OSSL_PROVIDER_get0_provider_ctx(prov: *const OSSL_PROVIDER) -> *mut c_void;
}

extern "C" {
    pub fn OSSL_PROVIDER_get_capabilities(
        prov: *const OSSL_PROVIDER,
        capability: *const c_char,
        cb: Option<unsafe extern "C" fn(*const OSSL_PARAM, *mut c_void) -> c_int>,
        arg: *mut c_void,
    ) -> c_int;
}

// Random generators (EVP_RAND(3)), for kae's own DRBG fronts (`rand.rs`).
extern "C" {
    pub fn EVP_RAND_fetch(
        ctx: *mut OSSL_LIB_CTX,
        algorithm: *const c_char,
        properties: *const c_char,
    ) -> *mut EVP_RAND;
    pub fn EVP_RAND_free(rand: *mut EVP_RAND);
    pub fn EVP_RAND_CTX_new(rand: *mut EVP_RAND, parent: *mut EVP_RAND_CTX) -> *mut EVP_RAND_CTX;
    pub fn EVP_RAND_CTX_free(ctx: *mut EVP_RAND_CTX);
    pub fn EVP_RAND_instantiate(
        ctx: *mut EVP_RAND_CTX,
        strength: c_uint,
        prediction_resistance: c_int,
        pstr: *const c_uchar,
        pstr_len: size_t,
        params: *const OSSL_PARAM,
    ) -> c_int;
    pub fn EVP_RAND_uninstantiate(ctx: *mut EVP_RAND_CTX) -> c_int;
    pub fn EVP_RAND_generate(
        ctx: *mut EVP_RAND_CTX,
        out: *mut c_uchar,
        outlen: size_t,
        strength: c_uint,
        prediction_resistance: c_int,
        addin: *const c_uchar,
        addin_len: size_t,
    ) -> c_int;
    pub fn EVP_RAND_reseed(
        ctx: *mut EVP_RAND_CTX,
        prediction_resistance: c_int,
        ent: *const c_uchar,
        ent_len: size_t,
        addin: *const c_uchar,
        addin_len: size_t,
    ) -> c_int;
    pub fn EVP_RAND_enable_locking(ctx: *mut EVP_RAND_CTX) -> c_int;
    pub fn EVP_RAND_verify_zeroization(ctx: *mut EVP_RAND_CTX) -> c_int;
    pub fn EVP_RAND_CTX_get_params(ctx: *mut EVP_RAND_CTX, params: *mut OSSL_PARAM) -> c_int;
    pub fn EVP_RAND_CTX_set_params(ctx: *mut EVP_RAND_CTX, params: *const OSSL_PARAM) -> c_int;
    pub fn EVP_RAND_gettable_ctx_params(rand: *const EVP_RAND) -> *const OSSL_PARAM;
    pub fn EVP_RAND_settable_ctx_params(rand: *const EVP_RAND) -> *const OSSL_PARAM;
    pub fn RAND_get0_primary(ctx: *mut OSSL_LIB_CTX) -> *mut EVP_RAND_CTX;
    /// The major version of the libcrypto resolved at run time.
    pub fn OPENSSL_version_major() -> c_uint;
}

extern "C" {
    pub fn OSSL_LIB_CTX_new() -> *mut OSSL_LIB_CTX;
    /// A library context of the provider's own whose providers mirror the application's
    /// (provider-base(7): the core's OPENSSL_CORE_CTX must not be used as an OSSL_LIB_CTX).
    pub fn OSSL_LIB_CTX_new_child(
        handle: *const OSSL_CORE_HANDLE,
        in_: *const OSSL_DISPATCH,
    ) -> *mut OSSL_LIB_CTX;
    pub fn OSSL_LIB_CTX_free(ctx: *mut OSSL_LIB_CTX);
}

pub type ASYNC_callback_fn = unsafe extern "C" fn(arg: *mut c_void) -> c_int;
pub type ASYNC_fd_cleanup_fn = unsafe extern "C" fn(
    ctx: *mut ASYNC_WAIT_CTX,
    key: *const c_void,
    fd: c_int,
    custom: *mut c_void,
);
pub const ASYNC_STATUS_OK: c_int = 2;
pub const ASYNC_STATUS_EAGAIN: c_int = 3;

extern "C" {
    pub fn ASYNC_get_current_job() -> *mut ASYNC_JOB;
    pub fn ASYNC_get_wait_ctx(job: *mut ASYNC_JOB) -> *mut ASYNC_WAIT_CTX;
    pub fn ASYNC_pause_job() -> c_int;
    pub fn ASYNC_WAIT_CTX_get_fd(
        ctx: *mut ASYNC_WAIT_CTX,
        key: *const c_void,
        fd: *mut c_int,
        custom: *mut *mut c_void,
    ) -> c_int;
    pub fn ASYNC_WAIT_CTX_set_wait_fd(
        ctx: *mut ASYNC_WAIT_CTX,
        key: *const c_void,
        fd: c_int,
        custom: *mut c_void,
        cleanup: Option<ASYNC_fd_cleanup_fn>,
    ) -> c_int;
    pub fn ASYNC_WAIT_CTX_get_callback(
        ctx: *mut ASYNC_WAIT_CTX,
        cb: *mut Option<ASYNC_callback_fn>,
        arg: *mut *mut c_void,
    ) -> c_int;
    pub fn ASYNC_WAIT_CTX_set_status(ctx: *mut ASYNC_WAIT_CTX, status: c_int) -> c_int;
}

extern "C" {
    pub fn OSSL_PARAM_set_uint64(p: *mut OSSL_PARAM, val: u64) -> c_int;
}

extern "C" {
    pub fn BN_mod_sub_quick(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        b: *const BIGNUM,
        m: *const BIGNUM,
    ) -> c_int;
}
