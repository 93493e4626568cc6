//! Provider parameters: name, version, build information, the active backend and the
//! operation counters (`openssl list -providers -verbose`).

use crate::abi::Table;
use crate::ffi::core::Failure;
use crate::ffi::params::{desc, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use core::ffi::CStr;
use std::ffi::CString;
use std::sync::LazyLock;

pub const PROVIDER_FULL_NAME: &CStr = c"kae RSA offload provider";
pub const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!(),
    };

/// What a test build adds to the buildinfo line (nothing in a build for use).
#[cfg(feature = "test-knobs")]
macro_rules! test_knobs_note {
    () => {
        " TEST BUILD: honours KAE_MB_ENGINE and KAE_MB_FAULT_LANE, not for use"
    };
}
#[cfg(not(feature = "test-knobs"))]
macro_rules! test_knobs_note {
    () => {
        ""
    };
}

pub const BUILDINFO: &CStr = match CStr::from_bytes_with_nul(
    concat!(
        "kae ",
        env!("CARGO_PKG_VERSION"),
        " (Rust provider; backends: hpre (UADK loaded at run time), mb (AVX-512 IFMA), cpu)",
        test_knobs_note!(),
        "\0"
    )
    .as_bytes(),
) {
    Ok(s) => s,
    Err(_) => panic!(),
};

/// Counter parameters (read-only, unsigned 64-bit): every slot of `stats::NAMES` plus their
/// error sum, listed by `openssl list -providers -verbose`.
static COUNTER_PARAMS: LazyLock<Vec<CString>> = LazyLock::new(|| {
    let mut v: Vec<CString> = crate::stats::NAMES
        .iter()
        .map(|n| CString::new(*n).unwrap_or_default())
        .collect();
    v.push(crate::names::KAE_PARAM_ERRORS.to_owned());
    v
});

static PROVIDER_GETTABLE: LazyLock<Table<OSSL_PARAM>> = LazyLock::new(|| {
    let mut v = vec![
        desc(c"name", OSSL_PARAM_UTF8_PTR),
        desc(c"version", OSSL_PARAM_UTF8_PTR),
        desc(c"buildinfo", OSSL_PARAM_UTF8_PTR),
        desc(c"status", OSSL_PARAM_INTEGER),
        desc(crate::names::KAE_PARAM_BACKEND, OSSL_PARAM_UTF8_PTR),
        desc(crate::names::KAE_PARAM_LIVE, OSSL_PARAM_UTF8_STRING),
        desc(crate::names::KAE_PARAM_HPRE_DEVICES, OSSL_PARAM_UTF8_STRING),
    ];
    v.extend(
        COUNTER_PARAMS
            .iter()
            .map(|k| desc(k, OSSL_PARAM_UNSIGNED_INTEGER)),
    );
    v.push(END);
    Table(v)
});

pub(super) fn gettable_params() -> &'static [OSSL_PARAM] {
    &PROVIDER_GETTABLE.0
}

/// The `live` parameter: the active backend, this process's counters and the sum over every
/// process with kae loaded (read from the counter pages). A copied UTF8_STRING, so nothing
/// handed to OpenSSL points into memory that changes; `buildinfo` stays a static string.
fn live_line() -> String {
    let here = crate::stats::snapshot();
    let all = crate::stats::live_pages(false);
    format!(
        "backend {} | this process: {} | {} process(es) with kae: {}",
        crate::offload::backend_label().to_string_lossy(),
        crate::stats::short_line(&here),
        all.len(),
        crate::stats::short_line(&crate::stats::total(&all)),
    )
}

/// The provider's parameters that `ps` asks for.
pub(super) fn get_params(_prov: &ProvCtx, ps: &mut ParamsMut<'_>) -> Result<(), Failure> {
    if let Some(mut p) = ps.locate(c"name") {
        p.set_utf8(PROVIDER_FULL_NAME)?;
    }
    if let Some(mut p) = ps.locate(c"version") {
        p.set_utf8(VERSION)?;
    }
    if let Some(mut p) = ps.locate(c"buildinfo") {
        p.set_utf8(BUILDINFO)?;
    }
    if let Some(mut p) = ps.locate(crate::names::KAE_PARAM_LIVE) {
        p.set_utf8_owned(&live_line())?;
    }
    if let Some(mut p) = ps.locate(crate::names::KAE_PARAM_HPRE_DEVICES) {
        p.set_utf8_owned(&crate::backend::hpre::devices_line(
            &crate::offload::config().hpre,
        ))?;
    }
    if let Some(mut p) = ps.locate(c"status") {
        p.set_int(1)?;
    }
    if let Some(mut p) = ps.locate(crate::names::KAE_PARAM_BACKEND) {
        p.set_utf8(crate::offload::backend_label())?;
    }
    let s = crate::stats::snapshot();
    let mut values: Vec<u64> = s.0.to_vec();
    values.push(s.errors());
    for (key, v) in COUNTER_PARAMS.iter().zip(values) {
        if let Some(mut p) = ps.locate(key) {
            p.set_u64(v)?;
        }
    }
    Ok(())
}
