//! The HPRE backend's settings (config keys `uadk-lib`, `uadk-crypto-lib`, `hpre-sysfs`,
//! `hpre-queues`, `hpre-sync`, `hpre-sync-queues`, `hpre-timeout-ms`, `hpre-poll-us`).

use std::path::PathBuf;

/// Where the kernel lists uacce devices.
pub const SYSFS_ROOT: &str = "/sys/class/uacce";

/// How a private operation outside an async job reaches the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Submit to the async queues and put the calling thread to sleep until the poller delivers
    /// the result (no spinning; the default).
    Queue,
    /// `wd_do_rsa_sync` on the calling thread, on a sync queue (UADK waits for the device).
    Direct,
}

impl SyncMode {
    pub fn parse(s: &str) -> Option<SyncMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "queue" => Some(SyncMode::Queue),
            "direct" => Some(SyncMode::Direct),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Queue => "queue",
            SyncMode::Direct => "direct",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpreConfig {
    /// UADK's base library (loaded first, so the crypto library finds it by its SONAME).
    pub wd_lib: String,
    /// UADK's crypto library, which exports `wd_rsa_*`.
    pub crypto_lib: String,
    /// Where the kernel lists uacce devices.
    pub sysfs: PathBuf,
    /// Async queues (UADK ctxs) per NUMA node with a device.
    pub queues: u32,
    /// Sync queues per NUMA node (used by `hpre-sync = direct`).
    pub sync_queues: u32,
    pub sync: SyncMode,
    /// A request without a completion after this long is redone on the CPU.
    pub timeout_ms: u64,
    /// The poller's pause between polls that found nothing while requests are in flight.
    pub poll_us: u64,
}

impl Default for HpreConfig {
    fn default() -> Self {
        HpreConfig {
            wd_lib: "libwd.so.2".into(),
            crypto_lib: "libwd_crypto.so.2".into(),
            sysfs: PathBuf::from(SYSFS_ROOT),
            queues: 4,
            sync_queues: 1,
            sync: SyncMode::Queue,
            timeout_ms: 1000,
            poll_us: 20,
        }
    }
}

/// A library name as `dlopen` takes it: a bare file name (searched the usual way) or an
/// absolute path; nothing relative to the current directory.
pub fn valid_library(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty() && !s.contains('\0') && (s.starts_with('/') || !s.contains('/'))
}
