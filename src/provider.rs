//! Provider entry point, provider context and parameters, algorithm tables, teardown.

use crate::error::KaeError;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::ffi::{guard, Core};
use core::ffi::{c_char, c_int, c_void, CStr};
use std::ffi::CString;
use std::sync::{Arc, LazyLock};

pub const PROVIDER_NAME: &CStr = c"kae";
pub const PROVIDER_FULL_NAME: &CStr = c"kae RSA offload provider";
pub const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(s) => s,
    Err(_) => panic!(),
};
pub const BUILDINFO: &CStr = match CStr::from_bytes_with_nul(
    concat!("kae ", env!("CARGO_PKG_VERSION"), " (Rust provider; backends: cpu)\0").as_bytes(),
) {
    Ok(s) => s,
    Err(_) => panic!(),
};
/// Property string every kae algorithm is registered with.
pub const PROPERTIES: &CStr = c"provider=kae";

/// Provider configuration read from the config section (or environment) at init.
#[derive(Clone, Debug)]
pub struct Config {
    /// Load OpenSSL's default provider into the same library context for the algorithms kae
    /// does not implement (DRBG, digests, encoders). `load-default = no` turns it off for
    /// setups where only approved providers may load.
    pub load_default: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { load_default: true }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

impl Config {
    /// Reads `key = value` entries of the provider's config section through the core.
    fn from_core(core: &Core) -> Result<Config, crate::ffi::core::Failure> {
        let mut cfg = Config::default();
        if let Some(get) = core.get_params {
            let mut load_default: *const c_char = core::ptr::null();
            let mut req = [
                OSSL_PARAM {
                    key: c"load-default".as_ptr(),
                    data_type: OSSL_PARAM_UTF8_PTR,
                    data: (&mut load_default as *mut *const c_char).cast(),
                    data_size: core::mem::size_of::<*const c_char>(),
                    return_size: OSSL_PARAM_UNMODIFIED,
                },
                END,
            ];
            // SAFETY: core function with our handle and a well-formed request array.
            unsafe { get(core.handle, req.as_mut_ptr()) };
            // SAFETY: the core set it to NULL or a string owned by the config.
            if let Some(v) = unsafe { crate::ffi::core::opt_cstr(load_default) } {
                cfg.load_default = parse_bool(v)
                    .ok_or_else(|| crate::ffi::core::Failure::with(KaeError::InvalidParam, format!("load-default={v}")))?;
            }
        }
        if let Ok(v) = std::env::var("KAE_LOAD_DEFAULT") {
            if let Some(b) = parse_bool(&v) {
                cfg.load_default = b;
            }
        }
        Ok(cfg)
    }
}

/// Per-instance provider state; `provctx` handed to OpenSSL is an `Arc<ProvCtx>` raw pointer.
pub struct ProvCtx {
    pub core: Core,
    pub libctx: *mut OSSL_LIB_CTX,
    pub config: Config,
    default_provider: *mut OSSL_PROVIDER,
}

// SAFETY: the raw pointers are handles owned by the core, valid and thread-safe for the
// provider's lifetime.
unsafe impl Send for ProvCtx {}
unsafe impl Sync for ProvCtx {}

impl ProvCtx {
    /// Borrows the provider context passed back by the core.
    ///
    /// # Safety
    /// `p` is NULL or a pointer returned by `OSSL_provider_init` and not yet torn down.
    pub unsafe fn from_ptr<'a>(p: *mut c_void) -> Option<&'a ProvCtx> {
        // SAFETY: caller contract.
        unsafe { p.cast::<ProvCtx>().as_ref() }
    }

    /// A new strong reference for objects that outlive the call (keys, operation contexts).
    ///
    /// # Safety
    /// As `from_ptr`, and `p` must be non-NULL.
    pub unsafe fn clone_arc(p: *mut c_void) -> Option<Arc<ProvCtx>> {
        if p.is_null() {
            return None;
        }
        // SAFETY: p came from Arc::into_raw in init; bump and re-materialize one reference.
        unsafe {
            Arc::increment_strong_count(p as *const ProvCtx);
            Some(Arc::from_raw(p as *const ProvCtx))
        }
    }

    pub fn rng(&self) -> crate::ffi::digest::Rng {
        crate::ffi::digest::Rng { libctx: self.libctx, private: false }
    }

    pub fn private_rng(&self) -> crate::ffi::digest::Rng {
        crate::ffi::digest::Rng { libctx: self.libctx, private: true }
    }
}

/// Wrapper letting static tables of raw pointers live in statics.
pub struct Table<T>(pub Vec<T>);
// SAFETY: the tables are built once and never mutated; they hold pointers to static data.
unsafe impl<T> Sync for Table<T> {}
unsafe impl<T> Send for Table<T> {}

/// Builds an `OSSL_DISPATCH` entry from a typed `extern "C"` function.
#[macro_export]
macro_rules! dispatch {
    ($( $id:expr => $f:expr ),* $(,)?) => {
        $crate::provider::Table(vec![
            $( $crate::ffi::sys::OSSL_DISPATCH {
                function_id: $id,
                // SAFETY: OpenSSL casts the pointer back to the type documented for `$id`,
                // which is the type of `$f`.
                function: Some(unsafe { core::mem::transmute::<*const (), unsafe extern "C" fn()>($f as *const ()) }),
            }, )*
            $crate::ffi::sys::OSSL_DISPATCH { function_id: 0, function: None },
        ])
    };
}

fn algorithm(names: &'static CStr, imp: &'static Table<OSSL_DISPATCH>, descr: &'static CStr) -> OSSL_ALGORITHM {
    OSSL_ALGORITHM {
        algorithm_names: names.as_ptr(),
        property_definition: PROPERTIES.as_ptr(),
        implementation: imp.0.as_ptr(),
        algorithm_description: descr.as_ptr(),
    }
}

const ALG_END: OSSL_ALGORITHM = OSSL_ALGORITHM {
    algorithm_names: core::ptr::null(),
    property_definition: core::ptr::null(),
    implementation: core::ptr::null(),
    algorithm_description: core::ptr::null(),
};

pub const RSA_NAMES: &CStr = c"RSA:rsaEncryption:1.2.840.113549.1.1.1";
pub const RSA_PSS_NAMES: &CStr = c"RSA-PSS:RSASSA-PSS:1.2.840.113549.1.1.10";

static KEYMGMT_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(RSA_NAMES, &crate::keymgmt::RSA_KEYMGMT, c"kae RSA key management"),
        algorithm(RSA_PSS_NAMES, &crate::keymgmt::RSA_PSS_KEYMGMT, c"kae RSA-PSS key management"),
        ALG_END,
    ])
});

static SIGNATURE_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![algorithm(RSA_NAMES, &crate::signature::RSA_SIGNATURE, c"kae RSA signature"), ALG_END])
});

static ASYM_CIPHER_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![algorithm(RSA_NAMES, &crate::asym_cipher::RSA_ASYM_CIPHER, c"kae RSA asymmetric cipher"), ALG_END])
});

static REASON_STRINGS: LazyLock<Table<OSSL_ITEM>> = LazyLock::new(|| {
    let mut v: Vec<OSSL_ITEM> = KaeError::ALL
        .iter()
        .map(|r| OSSL_ITEM { id: r.code(), ptr: r.c_text().as_ptr() as *mut c_void })
        .collect();
    v.push(OSSL_ITEM { id: 0, ptr: core::ptr::null_mut() });
    Table(v)
});

static PROVIDER_GETTABLE: ParamTable<4> = ParamTable([
    desc(c"name", OSSL_PARAM_UTF8_PTR),
    desc(c"version", OSSL_PARAM_UTF8_PTR),
    desc(c"buildinfo", OSSL_PARAM_UTF8_PTR),
    desc(c"status", OSSL_PARAM_INTEGER),
]);
static PROVIDER_GETTABLE_END: ParamTable<5> = ParamTable([
    PROVIDER_GETTABLE.0[0],
    PROVIDER_GETTABLE.0[1],
    PROVIDER_GETTABLE.0[2],
    PROVIDER_GETTABLE.0[3],
    END,
]);

unsafe extern "C" fn kae_teardown(provctx: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if provctx.is_null() {
            return Ok(());
        }
        // SAFETY: provctx came from Arc::into_raw in init; this releases the core's reference.
        // Objects still holding clones keep the struct alive. The default provider we loaded
        // is not unloaded here: it belongs to the same library context, which releases it
        // when the context is freed, and unloading it during the context's own teardown
        // would race that teardown.
        drop(unsafe { Arc::from_raw(provctx as *const ProvCtx) });
        Ok(())
    })
}

unsafe extern "C" fn kae_gettable_params(_provctx: *mut c_void) -> *const OSSL_PARAM {
    PROVIDER_GETTABLE_END.as_ptr()
}

unsafe extern "C" fn kae_get_params(provctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: provctx is ours (core contract).
    let prov = unsafe { ProvCtx::from_ptr(provctx) };
    guard(prov.map(|p| &p.core), 0, || -> Result<c_int, KaeError> {
        // SAFETY: the core passes a valid terminated array.
        let mut ps = unsafe { ParamsMut::from_ptr(params) };
        if let Some(mut p) = ps.locate(c"name") {
            p.set_utf8(PROVIDER_FULL_NAME)?;
        }
        if let Some(mut p) = ps.locate(c"version") {
            p.set_utf8(VERSION)?;
        }
        if let Some(mut p) = ps.locate(c"buildinfo") {
            p.set_utf8(BUILDINFO)?;
        }
        if let Some(mut p) = ps.locate(c"status") {
            p.set_int(1)?;
        }
        Ok(1)
    })
}

unsafe extern "C" fn kae_query_operation(_provctx: *mut c_void, operation_id: c_int, no_cache: *mut c_int) -> *const OSSL_ALGORITHM {
    if !no_cache.is_null() {
        // SAFETY: core passes a valid int pointer.
        unsafe { *no_cache = 0 };
    }
    let r = std::panic::catch_unwind(|| match operation_id {
        OSSL_OP_KEYMGMT => KEYMGMT_ALGS.0.as_ptr(),
        OSSL_OP_SIGNATURE => SIGNATURE_ALGS.0.as_ptr(),
        OSSL_OP_ASYM_CIPHER => ASYM_CIPHER_ALGS.0.as_ptr(),
        _ => core::ptr::null(),
    });
    r.unwrap_or(core::ptr::null())
}

unsafe extern "C" fn kae_get_reason_strings(_provctx: *mut c_void) -> *const OSSL_ITEM {
    std::panic::catch_unwind(|| REASON_STRINGS.0.as_ptr()).unwrap_or(core::ptr::null())
}

static PROVIDER_DISPATCH: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(|| {
    crate::dispatch![
        OSSL_FUNC_PROVIDER_TEARDOWN => kae_teardown as unsafe extern "C" fn(_),
        OSSL_FUNC_PROVIDER_GETTABLE_PARAMS => kae_gettable_params as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_PARAMS => kae_get_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_PROVIDER_QUERY_OPERATION => kae_query_operation as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_PROVIDER_GET_REASON_STRINGS => kae_get_reason_strings as unsafe extern "C" fn(_) -> _,
    ]
});

/// The provider entry point OpenSSL looks up in `kae.so`.
///
/// Starts no threads and does no expensive work: it reads the config, optionally loads the
/// default provider next to us, and hands back our dispatch table.
///
/// # Safety
/// Called by the OpenSSL core with valid arguments.
#[no_mangle]
pub unsafe extern "C" fn OSSL_provider_init(
    handle: *const OSSL_CORE_HANDLE,
    in_: *const OSSL_DISPATCH,
    out: *mut *const OSSL_DISPATCH,
    provctx: *mut *mut c_void,
) -> c_int {
    // SAFETY: the core's dispatch table is valid for the provider's lifetime.
    let core = unsafe { Core::from_dispatch(handle, in_) };
    guard(Some(&core), 0, || -> Result<c_int, crate::ffi::core::Failure> {
        if out.is_null() || provctx.is_null() {
            return Err(KaeError::NullParameter.into());
        }
        crate::logging::init();
        let config = Config::from_core(&core)?;
        let libctx = core.libctx();
        let mut default_provider = core::ptr::null_mut();
        if config.load_default {
            // SAFETY: libctx is the application's context (see Core::libctx); loading
            // another provider from init is what peers do and the core supports.
            default_provider = unsafe { OSSL_PROVIDER_load(libctx, c"default".as_ptr()) };
            if default_provider.is_null() {
                return Err(KaeError::DefaultProviderUnavailable.into());
            }
        }
        let ctx = Arc::new(ProvCtx { core, libctx, config, default_provider });
        log::info!("kae {}: initialised (backend cpu, default provider {})", env!("CARGO_PKG_VERSION"),
            if ctx.config.load_default { "loaded alongside" } else { "not loaded" });
        // SAFETY: out and provctx are valid out-pointers (checked above).
        unsafe {
            *out = PROVIDER_DISPATCH.0.as_ptr();
            *provctx = Arc::into_raw(ctx) as *mut c_void;
        }
        Ok(1)
    })
}

/// Turns a `&str` into a C string or reports the parameter as invalid.
pub fn cstring(s: &str) -> Result<CString, KaeError> {
    CString::new(s).map_err(|_| KaeError::InvalidParam)
}

/// Reads an optional string parameter.
pub fn opt_utf8<'a>(params: &Params<'a>, key: &CStr) -> Result<Option<&'a str>, KaeError> {
    params.locate(key).map(|p| p.get_utf8()).transpose()
}
