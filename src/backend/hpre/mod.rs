//! The HPRE backend (work in progress, issue 11): Kunpeng's RSA accelerator through UADK's
//! `wd_rsa` API, loaded at run time. So far: the ABI declarations with layout checks, and device discovery in sysfs.

pub mod abi;
pub mod backend;
pub mod discovery;
pub mod session;
pub mod settings;
pub mod uadk;

/// Whether HPRE can run here: a usable device in sysfs and UADK's libraries with the entry
/// points kae needs. Starts nothing (loading a library runs no thread).
pub fn usable_here(cfg: &settings::HpreConfig) -> Result<(), String> {
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
