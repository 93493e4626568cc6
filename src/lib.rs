//! kae: an OpenSSL 3 provider that takes RSA off the application's CPU thread.
//!
//! Layout (see ARCHITECTURE.md): `ffi` wraps libcrypto and the core's functions; `abi` is
//! the C face of the operations: their `extern "C"` shims and dispatch tables, made from one
//! trait per operation. `kem`, `asym_cipher`, `rand`, `encoder`, `signature` and `keymgmt`
//! implement those traits in safe Rust. `provctx` is the provider instance they all take;
//! `rsa_params` reads the RSA parameters they share. `provider` is the provider object on top
//! (entry, configuration parsing, algorithm lists); `rsa` holds the key object, arithmetic and
//! padding, and meets libcrypto's digests and random numbers in `rsa::libcrypto`; `offload`
//! is the router that sends each operation to a backend or computes it inline; `backend` is
//! the seam to the CPU / hardware executors, reached through `completion`'s requests;
//! `settings` holds the configuration types every layer reads.
#![deny(unsafe_op_in_unsafe_fn)]

extern crate openssl_sys;

pub mod abi;
pub mod asym_cipher;
pub mod backend;
pub mod completion;
pub mod core_version;
pub mod encoder;
pub mod env;
pub mod error;
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

pub use provider::OSSL_provider_init;
