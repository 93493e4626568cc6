//! The HPRE backend: Kunpeng's RSA accelerator through UADK's `wd_rsa` API, loaded at run
//! time. `abi` (UADK's structs and entry points, declared by hand with layout checks),
//! `uadk` (dlopen/dlsym), `discovery` (sysfs), `session` (one UADK
//! session per key and UADK generation), `backend` (the `Backend`: async submit, callback
//! completion, timeouts, failover to the CPU).

pub mod abi;
pub mod backend;
pub mod discovery;
pub mod session;
#[allow(unsafe_code)] // UADK's C functions, loaded with dlopen
pub mod uadk;

use crate::settings::hpre::HpreConfig;

/// Whether HPRE can run here: a usable device in sysfs and UADK's libraries with the entry
/// points kae needs. Starts nothing (loading a library runs no thread).
pub fn usable_here(cfg: &HpreConfig) -> Result<(), String> {
    let devices = discovery::scan(&cfg.sysfs);
    if !devices.iter().any(|d| d.unusable_because().is_none()) {
        return Err(if devices.is_empty() {
            format!("no HPRE device under {}", cfg.sysfs.display())
        } else {
            format!("no usable HPRE device ({})", discovery::describe(&devices))
        });
    }
    uadk::load(&cfg.wd_lib, &cfg.crypto_lib).map(|_| ())
}

/// What discovery finds under the configured sysfs root, in one line (start-up log, the
/// `hpre-devices` provider parameter).
pub fn devices_line(cfg: &HpreConfig) -> String {
    format!(
        "{} (under {})",
        discovery::describe(&discovery::scan(&cfg.sysfs)),
        cfg.sysfs.display()
    )
}
