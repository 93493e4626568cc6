//! The settings the process's offloader starts with (the first provider instance's).

use crate::settings::OffloadConfig;
use std::sync::OnceLock;

static CONFIG: OnceLock<OffloadConfig> = OnceLock::new();

/// Sets the offloader configuration (first provider instance wins; the offloader is per process).
pub fn configure(cfg: OffloadConfig) {
    if CONFIG.set(cfg.clone()).is_err()
        && CONFIG.get().map(|c| format!("{c:?}")) != Some(format!("{cfg:?}"))
    {
        log::warn!(
            "pool already configured as {:?}; ignoring {:?}",
            CONFIG.get(),
            cfg
        );
    }
}

pub fn config() -> OffloadConfig {
    CONFIG.get().cloned().unwrap_or_default()
}
