//! The provider entry point (`OSSL_provider_init`), teardown and the provider's dispatch
//! table.

use super::algorithms::kae_get_reason_strings;
use super::algorithms::kae_query_operation;
use super::build_info::{kae_get_params, kae_gettable_params};
use super::capabilities::kae_get_capabilities;
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::sys::*;
use crate::ffi::{guard, Core};
use crate::provctx::*;
use crate::settings::Config;
use core::ffi::{c_int, c_void};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

unsafe extern "C" fn kae_teardown(provctx: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if provctx.is_null() {
            return Ok(());
        }
        // Drop the registry's reference (objects still holding clones keep the struct alive),
        // stop the pool when this was the last instance, and release our private default
        // provider and its library context.
        let mut removed = None;
        if let Ok(mut reg) = REGISTRY.write() {
            if let Some(i) = reg.iter().position(|(k, _)| *k == provctx as usize) {
                removed = Some(reg.remove(i).1);
            }
        }
        crate::stats::log_summary_once();
        if let Some(prov) = removed {
            INSTANCES.lock().unwrap_or_else(|e| e.into_inner())[prov.slot] = None;
            crate::offload::remove_user();
            prov.release_contexts();
        }
        Ok(())
    })
}
static PROVIDER_DISPATCH: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(|| {
    crate::abi::dispatch![
        OSSL_FUNC_PROVIDER_TEARDOWN => kae_teardown as unsafe extern "C" fn(_),
        OSSL_FUNC_PROVIDER_GETTABLE_PARAMS => kae_gettable_params as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_PARAMS => kae_get_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_PROVIDER_QUERY_OPERATION => kae_query_operation as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_PROVIDER_GET_REASON_STRINGS => kae_get_reason_strings as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_CAPABILITIES => kae_get_capabilities as unsafe extern "C" fn(_, _, _, _) -> _,
    ]
});

/// The provider entry point OpenSSL looks up in `kae.so`.
///
/// Starts no threads and does no expensive work: it reads the config, optionally loads the
/// default provider next to us, and hands back our dispatch table.
///
/// # Safety
/// Only the OpenSSL core calls it, as `OSSL_provider_init_fn`: `handle` is its handle for
/// this provider and `in_` NULL or its dispatch table (terminated by function_id 0, each
/// function of the type core_dispatch.h gives its id), both valid until our teardown; `out`
/// and `provctx` are NULL (refused) or writable for this call.
#[no_mangle]
pub unsafe extern "C" fn OSSL_provider_init(
    handle: *const OSSL_CORE_HANDLE,
    in_: *const OSSL_DISPATCH,
    out: *mut *const OSSL_DISPATCH,
    provctx: *mut *mut c_void,
) -> c_int {
    // SAFETY: the core's dispatch table is valid for the provider's lifetime.
    let core = unsafe { Core::from_dispatch(handle, in_) };
    // First, before any libcrypto call of ours: are we linked to the core's libcrypto major
    // version? (A 3.x build inside a 4.x core would hand 3.x objects to 4.x.) The refusal is
    // written to stderr whatever the log level, since kae is then missing from the process;
    // the error raised through the core carries no detail text, because adding it would
    // take our libcrypto's error functions, not the core's.
    let core_version = match std::panic::catch_unwind(|| {
        let v = read_core_version(&core);
        crate::core_version::compatible(v, crate::core_version::linked_major()).map(|_| v)
    }) {
        Ok(Ok(v)) => v,
        Ok(Err(why)) => {
            crate::logging::write_stderr_line(&format!("kae: error: {why}"));
            crate::ffi::core::raise_core_only(&core, KaeError::WrongOpenSslVersion);
            return 0;
        }
        Err(_) => return 0,
    };
    guard(
        Some(&core),
        0,
        || -> Result<c_int, crate::ffi::core::Failure> {
            if out.is_null() || provctx.is_null() {
                return Err(KaeError::NullParameter.into());
            }
            crate::logging::init();
            let config = Config::from_core(&core)?;
            if let Err(why) =
                crate::logging::configure(config.log_level.as_deref(), config.log_target.as_deref())
            {
                crate::logging::config_diagnostic(
                    &format!("kae: error: {why}; kae is NOT loaded"),
                    true,
                    false,
                );
                return Err(crate::ffi::core::Failure::with(KaeError::InvalidParam, why));
            }
            let selection = crate::backend::registry::select(&config.offload);
            if let Some(why) = selection
                .fallback
                .as_ref()
                .filter(|_| config.offload.strict)
            {
                let text = format!(
                    "backend = {} and strict = yes, but {why}",
                    config.offload.backend.name()
                );
                crate::logging::config_diagnostic(
                    &format!("kae: error: {text}; kae is NOT loaded"),
                    true,
                    config.log_target.as_deref() == Some("syslog"),
                );
                return Err(crate::ffi::core::Failure::with(
                    KaeError::InvalidParam,
                    text,
                ));
            }
            if let Some(why) = &selection.fallback {
                // Said once, at start-up, where the operator looks; counted as a fallback.
                crate::stats::note_fallback();
                crate::logging::config_diagnostic(
                    &format!(
                        "kae: warning: backend = {}, but {why}; kae runs on the {} backend",
                        config.offload.backend.name(),
                        if selection.kind == crate::settings::BackendKind::Cpu {
                            "CPU"
                        } else {
                            selection.kind.name()
                        }
                    ),
                    false,
                    config.log_target.as_deref() == Some("syslog"),
                );
            }
            // The pool itself starts lazily on first use (no thread is created here).
            crate::offload::configure(config.offload.clone());
            let slot = free_slot().ok_or_else(|| {
                crate::ffi::core::Failure::with(
                    KaeError::Internal,
                    format!("more than {MAX_INSTANCES} kae instances in one process"),
                )
            })?;
            // SAFETY: the handle and dispatch table the core gave us, as the API requires.
            let libctx = unsafe { OSSL_LIB_CTX_new_child(handle, in_) };
            if libctx.is_null() {
                return Err(crate::ffi::core::Failure::with(
                    KaeError::Internal,
                    "OSSL_LIB_CTX_new_child failed",
                ));
            }
            let mut default_provider = core::ptr::null_mut();
            let mut default_libctx = core::ptr::null_mut();
            if config.load_default {
                // The default provider goes into a private library context: loaded next to us
                // in the application's context, its RSA would win every fetch without a
                // property query (providers are consulted in name order), and
                // `openssl speed -provider kae` would measure the default provider.
                // SAFETY: plain constructor calls; failures are checked.
                unsafe {
                    default_libctx = OSSL_LIB_CTX_new();
                    if !default_libctx.is_null() {
                        default_provider = OSSL_PROVIDER_load(default_libctx, c"default".as_ptr());
                    }
                    if default_provider.is_null() {
                        if !default_libctx.is_null() {
                            OSSL_LIB_CTX_free(default_libctx);
                        }
                        OSSL_LIB_CTX_free(libctx);
                        return Err(KaeError::DefaultProviderUnavailable.into());
                    }
                }
            }
            // With the default provider next to us, our provider context *is* the default
            // provider's context: the proxied default algorithms (listed under provider=kae) are
            // then called with the context they expect, and our own functions find their state in
            // the registry under the same pointer.
            let key = if default_provider.is_null() {
                core::ptr::null_mut()
            } else {
                // SAFETY: default_provider is non-NULL here: the provider this init loaded into our
                // private context, whose reference we hold until teardown.
                unsafe { OSSL_PROVIDER_get0_provider_ctx(default_provider) }
            };
            let ctx = Arc::new(ProvCtx {
                core,
                libctx,
                slot,
                core_version,
                config,
                default_provider,
                default_libctx,
                proxied: Mutex::new(HashMap::new()),
            });
            let pc = &ctx.config.offload;
            if selection.kind == crate::settings::BackendKind::Hpre {
                log::info!(
                    "HPRE devices: {}; UADK {} + {}; {} async + {} sync queues per NUMA node, sync mode {}",
                    crate::backend::hpre::devices_line(&pc.hpre),
                    pc.hpre.wd_lib,
                    pc.hpre.crypto_lib,
                    pc.hpre.queues,
                    pc.hpre.sync_queues,
                    pc.hpre.sync.name()
                );
            }
            if selection.kind == crate::settings::BackendKind::MultiBuffer {
                log::info!("{}", crate::backend::mb::startup_line(&pc.mb));
            }
            log::info!(
                "kae {} in OpenSSL {core_version}: backend {} ({}); {}, async offload {} (threads start at first use); default provider {}",
                env!("CARGO_PKG_VERSION"),
                selection.kind.name(),
                selection.why,
                if selection.kind == crate::settings::BackendKind::Hpre {
                    "HPRE queues as above".to_string()
                } else {
                    format!("pool {} queues x depth {}", pc.queues, pc.depth)
                },
                pc.async_mode.name(),
                if ctx.config.load_default { "loaded privately and re-listed" } else { "not loaded (load-default = no)" }
            );
            // SAFETY: out and provctx are valid out-pointers (checked above).
            unsafe {
                *out = PROVIDER_DISPATCH.0.as_ptr();
                *provctx = if key.is_null() {
                    Arc::as_ptr(&ctx) as *mut c_void
                } else {
                    key
                };
            }
            // SAFETY: provctx is non-NULL (checked at the start), writable for this call, and
            // written just above.
            let id = unsafe { *provctx } as usize;
            INSTANCES.lock().unwrap_or_else(|e| e.into_inner())[slot] = Some(Arc::downgrade(&ctx));
            REGISTRY
                .write()
                .map_err(|_| KaeError::Internal)?
                .push((id, ctx));
            crate::offload::add_user();
            // Only a process where kae is really loaded shows up in kae-stat.
            crate::stats::publish(selection.kind.name());
            Ok(1)
        },
    )
}

/// The core's `openssl-version` parameter, parsed (3.0.0 if the core does not say).
fn read_core_version(core: &Core) -> crate::core_version::CoreVersion {
    super::config::read_core_string(core, c"openssl-version")
        .as_deref()
        .and_then(crate::core_version::CoreVersion::parse)
        .unwrap_or(crate::core_version::CoreVersion {
            major: 3,
            minor: 0,
            patch: 0,
        })
}
