//! The provider's configuration: `key = value` entries of its config section and the
//! `KAE_*` environment variables that override them.

use crate::error::KaeError;
use crate::ffi::params::END;
use crate::ffi::sys::*;
use crate::ffi::Core;
use core::ffi::{c_char, CStr};

/// Provider configuration read from the config section (or environment) at init.
#[derive(Clone, Debug)]
pub struct Config {
    /// Load OpenSSL's default provider (privately) and re-list what kae does not implement
    /// (DRBG, digests, encoders…). `load-default = no` turns it off for setups where only
    /// approved providers may load.
    pub load_default: bool,
    /// Queue pool settings (`backend`, `queues`, `queue-depth`, `async`).
    pub pool: crate::pool::PoolConfig,
    /// `log-level` and `log-target` (see `logging`).
    pub log_level: Option<String>,
    pub log_target: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            load_default: true,
            pool: crate::pool::PoolConfig::default(),
            log_level: None,
            log_target: None,
        }
    }
}

pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// Config keys of the provider section and the environment variables that override them.
const CONFIG_KEYS: [(&CStr, &str); 7] = [
    (c"log-level", "KAE_LOG"),
    (c"log-target", "KAE_LOG_TARGET"),
    (c"load-default", "KAE_LOAD_DEFAULT"),
    (c"backend", "KAE_BACKEND"),
    (c"queues", "KAE_QUEUES"),
    (c"queue-depth", "KAE_QUEUE_DEPTH"),
    (c"async", "KAE_ASYNC"),
];

impl Config {
    /// Reads `key = value` entries of the provider's config section through the core, then
    /// applies environment overrides.
    pub(super) fn from_core(core: &Core) -> Result<Config, crate::ffi::core::Failure> {
        let mut values: Vec<(&'static str, String)> = Vec::new();
        if let Some(get) = core.get_params {
            let mut ptrs: [*const c_char; CONFIG_KEYS.len()] =
                [core::ptr::null(); CONFIG_KEYS.len()];
            let mut req: Vec<OSSL_PARAM> = ptrs
                .iter_mut()
                .zip(CONFIG_KEYS.iter())
                .map(|(p, (key, _))| OSSL_PARAM {
                    key: key.as_ptr(),
                    data_type: OSSL_PARAM_UTF8_PTR,
                    data: (p as *mut *const c_char).cast(),
                    data_size: core::mem::size_of::<*const c_char>(),
                    return_size: OSSL_PARAM_UNMODIFIED,
                })
                .collect();
            req.push(END);
            // SAFETY: core function with our handle and a well-formed request array.
            unsafe { get(core.handle, req.as_mut_ptr()) };
            for (p, (key, _)) in ptrs.iter().zip(CONFIG_KEYS.iter()) {
                // SAFETY: the core set it to NULL or a string owned by the config.
                if let Some(v) = unsafe { crate::ffi::core::opt_cstr(*p) } {
                    values.push((key.to_str().unwrap_or_default(), v.to_owned()));
                }
            }
        }
        for (key, env) in CONFIG_KEYS {
            // Not in setuid/setgid programs: see crate::env.
            if let Some(v) = crate::env::var(env) {
                values.push((key.to_str().unwrap_or_default(), v));
            }
        }
        let mut cfg = Config::default();
        for (key, v) in values {
            let bad =
                || crate::ffi::core::Failure::with(KaeError::InvalidParam, format!("{key}={v}"));
            match key {
                "load-default" => cfg.load_default = parse_bool(&v).ok_or_else(bad)?,
                "backend" => {
                    cfg.pool.backend = crate::pool::BackendChoice::parse(&v).ok_or_else(bad)?
                }
                "queues" => {
                    cfg.pool.queues = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| (1..=256).contains(n))
                        .ok_or_else(bad)?
                }
                "queue-depth" => {
                    cfg.pool.depth = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| (1..=65536).contains(n))
                        .ok_or_else(bad)?
                }
                "async" => {
                    cfg.pool.async_mode = crate::pool::AsyncMode::parse(&v).ok_or_else(bad)?
                }
                "log-level" => cfg.log_level = Some(v.clone()),
                "log-target" => cfg.log_target = Some(v.clone()),
                _ => {}
            }
        }
        Ok(cfg)
    }
}
