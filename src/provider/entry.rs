//! The provider object: its start-up (`init`), teardown and dispatch table, as the
//! [`Provider`] that `abi::provider` turns into the C entry points.

use crate::abi::provider::{table, Provider};
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::params::ParamsMut;
use crate::ffi::provider::instance_contexts;
use crate::ffi::sys::*;
use crate::ffi::Core;
use crate::provctx::*;
use crate::settings::Config;
use core::ffi::{c_int, c_void};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// kae, the provider.
pub struct Kae;

static PROVIDER_DISPATCH: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(table::<Kae>);

impl Provider for Kae {
    fn check_core_version(core: &Core) -> Result<(), String> {
        crate::core_version::compatible(
            read_core_version(core),
            crate::core_version::linked_major(),
        )
    }

    /// Starts no threads and does no expensive work: reads the config, optionally loads the
    /// default provider into a private library context, and registers the instance.
    fn init(core: Core) -> Result<*mut c_void, Failure> {
        let core_version = read_core_version(&core);
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
        // The default provider goes into a private library context: loaded next to us in the
        // application's context, its RSA would win every fetch without a property query
        // (providers are consulted in name order), and `openssl speed -provider kae` would
        // measure the default provider.
        let (libctx, private_default) = instance_contexts(&core, config.load_default)?;
        let ctx = Arc::new(ProvCtx {
            core,
            libctx,
            slot,
            core_version,
            config,
            private_default,
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
        // With the default provider next to us, our provider context *is* the default
        // provider's context: the proxied default algorithms (listed under provider=kae) are
        // then called with the context they expect, and our own functions find their state in
        // the registry under the same pointer.
        let key = match ctx.private_default {
            Some(default) => default.provider_ctx(),
            None => Arc::as_ptr(&ctx) as *mut c_void,
        };
        let id = key as usize;
        INSTANCES.write()[slot] = Some(Arc::downgrade(&ctx));
        REGISTRY.write().push((id, ctx));
        crate::offload::add_user();
        // Only a process where kae is really loaded shows up in kae-stat.
        crate::stats::publish(selection.kind.name());
        Ok(key)
    }

    fn teardown(provctx: *mut c_void) -> Option<Arc<ProvCtx>> {
        // Drop the registry's reference (objects still holding clones keep the struct alive)
        // and stop the pool when this was the last instance; abi then releases the instance's
        // library contexts.
        let removed = {
            let mut reg = REGISTRY.write();
            reg.iter()
                .position(|(k, _)| *k == provctx as usize)
                .map(|i| reg.remove(i).1)
        };
        crate::stats::log_summary_once();
        let prov = removed?;
        INSTANCES.write()[prov.slot] = None;
        crate::offload::remove_user();
        Some(prov)
    }

    fn dispatch() -> &'static Table<OSSL_DISPATCH> {
        &PROVIDER_DISPATCH
    }

    fn gettable_params() -> &'static [OSSL_PARAM] {
        super::build_info::gettable_params()
    }

    fn get_params(prov: &ProvCtx, params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        super::build_info::get_params(prov, params)
    }

    fn query_operation(prov: &ProvCtx, op: c_int) -> *const OSSL_ALGORITHM {
        super::algorithms::query_operation(prov, op)
    }
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
