//! The provider: entry point, configuration, instances, algorithm tables, re-listing of the
//! default provider, capabilities and build information, one file each.

mod algorithms;
mod build_info;
mod capabilities;
mod config;
mod entry;
mod registry;
mod relist;

pub use algorithms::{RSA_NAMES, RSA_PSS_NAMES};
pub use build_info::{BUILDINFO, VERSION};
pub use config::Config;
pub use config::{Setting, ENV_ONLY, SETTINGS};
pub use entry::OSSL_provider_init;
pub use registry::{instance, ProvCtx, MAX_INSTANCES};

use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::params::{Param, Params};
use crate::ffi::sys::OSSL_PARAM_UTF8_STRING;
use crate::rsa::PadMode;
use core::ffi::CStr;
use std::ffi::CString;

pub const PROVIDER_FULL_NAME: &CStr = c"kae RSA offload provider";
/// Property string every kae algorithm is registered with.
pub const PROPERTIES: &CStr = crate::names::KAE_PROPQ;

/// Turns a `&str` into a C string or reports the parameter as invalid.
pub fn cstring(s: &str) -> Result<CString, KaeError> {
    CString::new(s).map_err(|_| KaeError::InvalidParam)
}

/// Reads a "pad-mode" parameter given as a name ("pss") or as OpenSSL's integer (6).
pub fn pad_mode(p: &Param<'_>) -> Result<PadMode, Failure> {
    if p.data_type() == OSSL_PARAM_UTF8_STRING {
        let s = p.get_utf8()?;
        PadMode::from_name(s)
            .ok_or_else(|| Failure::with(KaeError::InvalidPaddingMode, format!("pad-mode={s}")))
    } else {
        let v = p.get_int()?;
        PadMode::from_int(v)
            .ok_or_else(|| Failure::with(KaeError::InvalidPaddingMode, format!("pad-mode={v}")))
    }
}

/// Reads an optional string parameter.
pub fn opt_utf8<'a>(params: &Params<'a>, key: &CStr) -> Result<Option<&'a str>, KaeError> {
    params.locate(key).map(|p| p.get_utf8()).transpose()
}
