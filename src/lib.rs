//! kae: an OpenSSL 3 provider that takes RSA off the application's CPU thread.
//!
//! Layout (see ARCHITECTURE.md): `ffi` wraps libcrypto and the core's functions; `abi` is
//! the C face of the operations and of the provider object: their `extern "C"` shims and
//! dispatch tables, made from one trait each. `kem`, `asym_cipher`, `rand`, `encoder`, `signature` and `keymgmt`
//! implement those traits in safe Rust. `provctx` is the provider instance they all take;
//! `rsa_params` reads the RSA parameters they share. `provider` is the provider object on top
//! (entry, configuration parsing, algorithm lists), safe Rust behind `abi::provider`; `rsa` holds the key object, arithmetic and
//! padding, and meets libcrypto's digests and random numbers in `rsa::libcrypto`; `offload`
//! is the router that sends each operation to a backend or computes it inline; `backend` is
//! the seam to the CPU / hardware executors, reached through `completion`'s requests;
//! `settings` holds the configuration types every layer reads.
//!
//! `unsafe` is denied crate-wide; each place that needs it says `#[allow(unsafe_code)]`
//! (ARCHITECTURE.md lists them).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

extern crate openssl_sys;

#[allow(unsafe_code)] // the C face: OpenSSL calls and pointers
pub mod abi;
pub mod asym_cipher;
pub mod backend;
pub mod completion;
pub mod core_version;
pub mod encoder;
pub mod env;
pub mod error;
#[allow(unsafe_code)] // libcrypto and the core's functions
pub mod ffi;
pub mod kem;
pub mod keymgmt;
pub mod logging;
pub mod mb;
pub mod names;
pub mod offload;
pub mod provctx;
pub mod provider;
pub mod rand;
pub mod rsa;
pub mod rsa_params;
pub mod settings;
pub mod signature;
pub mod stats;

/// The provider entry point OpenSSL looks up in `kae.so`: starts no threads and does no
/// expensive work (see `provider::Kae` and `abi::provider::init`).
///
/// # Safety
/// Only the OpenSSL core calls it, as `OSSL_provider_init_fn` (the contract of
/// [`abi::provider::init`]).
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn OSSL_provider_init(
    handle: *const ffi::sys::OSSL_CORE_HANDLE,
    in_: *const ffi::sys::OSSL_DISPATCH,
    out: *mut *const ffi::sys::OSSL_DISPATCH,
    provctx: *mut *mut core::ffi::c_void,
) -> core::ffi::c_int {
    // SAFETY: the core's call, whose contract is init's.
    unsafe { abi::provider::init::<provider::Kae>(handle, in_, out, provctx) }
}
