//! Names kae exports to C: the provider name and our provider/configuration parameter names.
//! `build.rs` turns this file into `include/kae.h` with cbindgen.

/// Provider name, as used with `-provider kae` and in `[provider_sect]`.
pub const KAE_PROVIDER_NAME: &str = "kae";
/// Config key: load the default provider next to kae (`yes`|`no`, default `yes`).
pub const KAE_PARAM_LOAD_DEFAULT: &str = "load-default";
/// Property query selecting kae's algorithms.
pub const KAE_PROPQ: &str = "provider=kae";
