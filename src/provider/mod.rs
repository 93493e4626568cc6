//! The provider: entry point, configuration, algorithm tables, re-listing of the default
//! provider, capabilities and build information, one file each. It stands on top of the
//! operations, whose tables it lists; its instances live in `provctx`.

mod algorithms;
mod build_info;
mod config;
mod entry;
mod relist;

pub use build_info::{BUILDINFO, VERSION};
pub use config::{Setting, ENV_ONLY, SETTINGS};
pub use entry::Kae;

use core::ffi::CStr;

pub const PROVIDER_FULL_NAME: &CStr = c"kae RSA offload provider";
/// Property string every kae algorithm is registered with.
pub const PROPERTIES: &CStr = crate::names::KAE_PROPQ;
