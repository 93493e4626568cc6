//! libcrypto declarations for the test harness.
//!
//! Everything openssl-sys (0.9.118, built against OpenSSL 3.x headers, so its `ossl300` items
//! are on) declares is taken from it: `pub use openssl_sys::*` below, so `common::ffi::X` is
//! openssl-sys's `X`. This file declares by hand only what openssl-sys does not expose; each
//! entry says why it is here. The symbols come from the libcrypto that openssl-sys links.
#![allow(non_camel_case_types, non_snake_case)]

pub use openssl_sys::*;

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

// --- Types openssl-sys has no name for. ---------------------------------------------------

/// `EVP_ASYM_CIPHER`: openssl-sys declares no asymmetric-cipher fetch API.
#[repr(C)]
pub struct EVP_ASYM_CIPHER {
    _private: [u8; 0],
}

/// `EVP_KEYMGMT`: openssl-sys declares no key-management fetch API.
#[repr(C)]
pub struct EVP_KEYMGMT {
    _private: [u8; 0],
}

/// `EVP_KEM`: openssl-sys declares no KEM fetch API.
#[repr(C)]
pub struct EVP_KEM {
    _private: [u8; 0],
}

/// `OSSL_ENCODER`: openssl-sys has the encoder context but not the encoder method itself.
#[repr(C)]
pub struct OSSL_ENCODER {
    _private: [u8; 0],
}

/// `OSSL_DISPATCH` (openssl/core.h): a provider's function table entry; openssl-sys has none of
/// the provider-side core types.
#[repr(C)]
pub struct OSSL_DISPATCH {
    pub function_id: c_int,
    pub function: Option<unsafe extern "C" fn()>,
}

/// `OSSL_ALGORITHM` (openssl/core.h): one entry of what a provider's query_operation returns.
#[repr(C)]
pub struct OSSL_ALGORITHM {
    pub algorithm_names: *const c_char,
    pub property_definition: *const c_char,
    pub implementation: *const OSSL_DISPATCH,
    pub algorithm_description: *const c_char,
}

// --- Constants openssl-sys lacks. ------------------------------------------------------------

// OSSL_PARAM data types and the "not modified" return_size sentinel (openssl/params.h,
// openssl/core.h): openssl-sys has the struct but none of these values.
pub const OSSL_PARAM_INTEGER: c_uint = 1;
pub const OSSL_PARAM_UNSIGNED_INTEGER: c_uint = 2;
pub const OSSL_PARAM_UTF8_STRING: c_uint = 4;
pub const OSSL_PARAM_OCTET_STRING: c_uint = 5;
pub const OSSL_PARAM_UTF8_PTR: c_uint = 6;
pub const OSSL_PARAM_OCTET_PTR: c_uint = 7;
pub const OSSL_PARAM_UNMODIFIED: usize = usize::MAX;

/// openssl/rsa.h: the TLS pre-master-secret padding mode (not in openssl-sys's rsa.rs).
pub const RSA_PKCS1_WITH_TLS_PADDING: c_int = 7;

// --- Functions openssl-sys 0.9.118 does not declare. -----------------------------------------

extern "C" {
    // Error queue: openssl-sys has ERR_get_error but not the peek or the bounded string form.
    pub fn ERR_peek_error() -> c_ulong;
    pub fn ERR_error_string_n(e: c_ulong, buf: *mut c_char, len: usize);

    // Provider handles: openssl-sys has only OSSL_PROVIDER_load/try_load/unload/set_default_search_path.
    pub fn OSSL_PROVIDER_available(ctx: *mut OSSL_LIB_CTX, name: *const c_char) -> c_int;
    pub fn OSSL_PROVIDER_get0_name(prov: *const OSSL_PROVIDER) -> *const c_char;
    pub fn OSSL_PROVIDER_get_params(prov: *const OSSL_PROVIDER, params: *mut OSSL_PARAM) -> c_int;
    // What a loaded provider offers, asked directly (the tables behind every fetch).
    pub fn OSSL_PROVIDER_query_operation(
        prov: *const OSSL_PROVIDER,
        operation_id: c_int,
        no_cache: *mut c_int,
    ) -> *const OSSL_ALGORITHM;
    pub fn OSSL_PROVIDER_get0_provider_ctx(prov: *const OSSL_PROVIDER) -> *mut c_void;

    // Which provider implements a fetched algorithm, a context or a key: the `get0_provider`
    // getters are absent from openssl-sys, and so are the asym-cipher, keymgmt and KEM fetches.
    pub fn EVP_SIGNATURE_get0_provider(s: *const EVP_SIGNATURE) -> *const OSSL_PROVIDER;
    pub fn EVP_ASYM_CIPHER_fetch(
        ctx: *mut OSSL_LIB_CTX,
        alg: *const c_char,
        props: *const c_char,
    ) -> *mut EVP_ASYM_CIPHER;
    pub fn EVP_ASYM_CIPHER_free(c: *mut EVP_ASYM_CIPHER);
    pub fn EVP_ASYM_CIPHER_get0_provider(c: *const EVP_ASYM_CIPHER) -> *const OSSL_PROVIDER;
    pub fn EVP_KEYMGMT_fetch(
        ctx: *mut OSSL_LIB_CTX,
        alg: *const c_char,
        props: *const c_char,
    ) -> *mut EVP_KEYMGMT;
    pub fn EVP_KEYMGMT_free(k: *mut EVP_KEYMGMT);
    pub fn EVP_KEYMGMT_get0_provider(k: *const EVP_KEYMGMT) -> *const OSSL_PROVIDER;
    pub fn EVP_KEM_fetch(
        ctx: *mut OSSL_LIB_CTX,
        alg: *const c_char,
        props: *const c_char,
    ) -> *mut EVP_KEM;
    pub fn EVP_KEM_free(kem: *mut EVP_KEM);
    pub fn EVP_KEM_get0_provider(kem: *const EVP_KEM) -> *const OSSL_PROVIDER;
    pub fn EVP_PKEY_CTX_get0_provider(ctx: *const EVP_PKEY_CTX) -> *const OSSL_PROVIDER;
    pub fn EVP_PKEY_get0_provider(pkey: *const EVP_PKEY) -> *const OSSL_PROVIDER;
    pub fn EVP_PKEY_get0_type_name(pkey: *const EVP_PKEY) -> *const c_char;

    // EVP_PKEY_CTX from a key in a library context with a property query (openssl-sys has only
    // the engine-based EVP_PKEY_CTX_new), its duplication and its parameter descriptions.
    pub fn EVP_PKEY_CTX_new_from_pkey(
        ctx: *mut OSSL_LIB_CTX,
        pkey: *mut EVP_PKEY,
        propq: *const c_char,
    ) -> *mut EVP_PKEY_CTX;
    pub fn EVP_PKEY_CTX_dup(ctx: *const EVP_PKEY_CTX) -> *mut EVP_PKEY_CTX;
    pub fn EVP_PKEY_CTX_settable_params(ctx: *const EVP_PKEY_CTX) -> *const OSSL_PARAM;
    pub fn EVP_PKEY_CTX_gettable_params(ctx: *const EVP_PKEY_CTX) -> *const OSSL_PARAM;

    // KEM operation selection: openssl-sys has the encapsulate/decapsulate calls but not this.
    pub fn EVP_PKEY_CTX_set_kem_op(ctx: *mut EVP_PKEY_CTX, op: *const c_char) -> c_int;

    // Key checks: openssl-sys has EVP_PKEY_check and EVP_PKEY_public_check only.
    pub fn EVP_PKEY_private_check(ctx: *mut EVP_PKEY_CTX) -> c_int;
    pub fn EVP_PKEY_pairwise_check(ctx: *mut EVP_PKEY_CTX) -> c_int;

    // Digest-sign/verify set-up in a library context with a property query (openssl-sys has
    // only the engine-based EVP_DigestSignInit/EVP_DigestVerifyInit), the EVP_PKEY_CTX behind
    // it (EVP_MD_CTX_pkey_ctx is a macro for this in 3.x headers), and the one-shot digest.
    pub fn EVP_DigestSignInit_ex(
        ctx: *mut EVP_MD_CTX,
        pctx: *mut *mut EVP_PKEY_CTX,
        mdname: *const c_char,
        libctx: *mut OSSL_LIB_CTX,
        props: *const c_char,
        pkey: *mut EVP_PKEY,
        params: *const OSSL_PARAM,
    ) -> c_int;
    pub fn EVP_DigestVerifyInit_ex(
        ctx: *mut EVP_MD_CTX,
        pctx: *mut *mut EVP_PKEY_CTX,
        mdname: *const c_char,
        libctx: *mut OSSL_LIB_CTX,
        props: *const c_char,
        pkey: *mut EVP_PKEY,
        params: *const OSSL_PARAM,
    ) -> c_int;
    pub fn EVP_MD_CTX_get_pkey_ctx(ctx: *const EVP_MD_CTX) -> *mut EVP_PKEY_CTX;
    pub fn EVP_Digest(
        data: *const c_void,
        count: usize,
        md: *mut u8,
        size: *mut c_uint,
        type_: *const EVP_MD,
        engine: *mut c_void,
    ) -> c_int;

    // OSSL_PARAM reader for C int (openssl-sys has the BN, utf8 and octet getters only).
    pub fn OSSL_PARAM_get_int(p: *const OSSL_PARAM, v: *mut c_int) -> c_int;

    // Random bytes from a given library context's DRBG (openssl-sys has RAND_bytes only).
    pub fn RAND_bytes_ex(
        ctx: *mut OSSL_LIB_CTX,
        buf: *mut u8,
        num: usize,
        strength: c_uint,
    ) -> c_int;

    // Encoder enumeration and the encoder-context calls openssl-sys leaves out (it has
    // OSSL_ENCODER_CTX_new_for_pkey/free/set_cipher/set_passphrase and OSSL_ENCODER_to_bio).
    pub fn OSSL_ENCODER_do_all_provided(
        libctx: *mut OSSL_LIB_CTX,
        f: unsafe extern "C" fn(*mut OSSL_ENCODER, *mut c_void),
        arg: *mut c_void,
    );
    pub fn OSSL_ENCODER_is_a(e: *const OSSL_ENCODER, name: *const c_char) -> c_int;
    pub fn OSSL_ENCODER_get0_provider(e: *const OSSL_ENCODER) -> *const OSSL_PROVIDER;
    pub fn OSSL_ENCODER_get0_properties(e: *const OSSL_ENCODER) -> *const c_char;
    pub fn OSSL_ENCODER_get0_description(e: *const OSSL_ENCODER) -> *const c_char;
    pub fn OSSL_ENCODER_CTX_get_num_encoders(ctx: *mut OSSL_ENCODER_CTX) -> c_int;
    pub fn OSSL_ENCODER_CTX_set_params(
        ctx: *mut OSSL_ENCODER_CTX,
        params: *const OSSL_PARAM,
    ) -> c_int;

    // Key text output to a BIO (openssl-sys declares no EVP_PKEY_print_* function).
    pub fn EVP_PKEY_print_private(
        out: *mut BIO,
        pkey: *const EVP_PKEY,
        indent: c_int,
        pctx: *mut c_void,
    ) -> c_int;
    pub fn EVP_PKEY_print_public(
        out: *mut BIO,
        pkey: *const EVP_PKEY,
        indent: c_int,
        pctx: *mut c_void,
    ) -> c_int;

    // Freeing one BIO with its result (openssl-sys has only BIO_free_all, which returns nothing).
    pub fn BIO_free(b: *mut BIO) -> c_int;
}
