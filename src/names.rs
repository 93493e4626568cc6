//! Names kae exports to C: the provider name and our provider/configuration parameter names.
//! `build.rs` turns this file into `include/kae.h` (string constants become `#define`s,
//! integer constants go through cbindgen). Keep one `pub const` per line.
#![allow(dead_code)]

/// Provider name, as used with `-provider kae` and in `[provider_sect]`.
pub const KAE_PROVIDER_NAME: &str = "kae";
/// Property query selecting kae's algorithms.
pub const KAE_PROPQ: &str = "provider=kae";
/// Config key: load the default provider next to kae (`yes`|`no`, default `yes`).
pub const KAE_PARAM_LOAD_DEFAULT: &str = "load-default";
/// Asymmetric cipher parameter: PKCS#1 v1.5 implicit rejection (1 = on, the default).
pub const KAE_PARAM_IMPLICIT_REJECTION: &str = "implicit-rejection";
/// Version of the parameter-name set in this header.
pub const KAE_NAMES_VERSION: u32 = 1;
