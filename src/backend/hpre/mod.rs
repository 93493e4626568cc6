//! The HPRE backend (work in progress, issue 11): Kunpeng's RSA accelerator through UADK's
//! `wd_rsa` API, loaded at run time. So far: the ABI declarations with layout checks, and device discovery in sysfs.

pub mod abi;
pub mod discovery;
