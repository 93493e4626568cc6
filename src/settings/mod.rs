//! Configuration types and the values read from the environment at run time: what the
//! provider's configuration parses into and what the offload router, the backends and the
//! counters read. A leaf: it knows nothing of the layers that use it.

pub mod hpre;
pub mod mb;

use core::ffi::CStr;

/// A backend kae knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// Kunpeng's HPRE accelerator through UADK.
    Hpre,
    /// 8-lane AVX-512 IFMA exponentiation on the CPU.
    MultiBuffer,
    /// libcrypto's constant-time arithmetic, inline or on CPU workers.
    Cpu,
}

/// Order in which `backend = auto` tries them.
pub const PREFERENCE: [BackendKind; 3] = [
    BackendKind::Hpre,
    BackendKind::MultiBuffer,
    BackendKind::Cpu,
];

impl BackendKind {
    /// The name operators use (config value, counters page, provider parameter).
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Hpre => "hpre",
            BackendKind::MultiBuffer => "mb",
            BackendKind::Cpu => "cpu",
        }
    }

    /// [`name`](Self::name) as a C string (static, for provider parameters).
    pub const fn c_name(self) -> &'static CStr {
        match self {
            BackendKind::Hpre => c"hpre",
            BackendKind::MultiBuffer => c"mb",
            BackendKind::Cpu => c"cpu",
        }
    }

    pub fn from_name(s: &str) -> Option<BackendKind> {
        PREFERENCE
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether async jobs should go to this backend even when the process may use one CPU
    /// only (`async = auto`). True for anything that does not just move the same arithmetic
    /// to another thread: hardware computes elsewhere, and multi-buffer batches make each
    /// operation cheaper on the same CPU. CPU workers on the application's only CPU would only
    /// take turns with it.
    pub const fn worth_offloading_on_one_cpu(self) -> bool {
        !matches!(self, BackendKind::Cpu)
    }
}

/// What the `backend` setting asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The first usable backend in [`PREFERENCE`].
    Auto,
    Named(BackendKind),
}

impl BackendChoice {
    /// `auto` or a backend name, any case.
    pub fn parse(s: &str) -> Option<BackendChoice> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Some(BackendChoice::Auto);
        }
        BackendKind::from_name(s).map(BackendChoice::Named)
    }

    /// The value as written in a config file.
    pub const fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Named(k) => k.name(),
        }
    }

    /// The accepted values, for error messages: "auto, hpre, mb or cpu".
    pub fn accepted() -> String {
        let names: Vec<&str> = PREFERENCE.iter().map(|k| k.name()).collect();
        format!(
            "auto, {} or {}",
            names[..names.len() - 1].join(", "),
            names[names.len() - 1]
        )
    }
}

/// When private operations of ASYNC jobs go to the backend (`async` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncMode {
    /// Offload when it can help: a hardware backend, or CPU workers with a CPU of their own
    /// (the process may run on at least two CPUs).
    Auto,
    /// Always offload.
    On,
    /// Never: compute inline even inside jobs.
    Off,
}

impl AsyncMode {
    /// `auto`, or any yes/no spelling the other boolean settings accept.
    pub fn parse(s: &str) -> Option<AsyncMode> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Some(AsyncMode::Auto);
        }
        parse_bool(s).map(|on| if on { AsyncMode::On } else { AsyncMode::Off })
    }

    pub fn name(self) -> &'static str {
        match self {
            AsyncMode::Auto => "auto",
            AsyncMode::On => "on",
            AsyncMode::Off => "off",
        }
    }
}

/// The provider's configuration, as `provider/config.rs` reads it from the config section
/// (or the environment) at init.
#[derive(Clone, Debug)]
pub struct Config {
    /// Load OpenSSL's default provider (privately) and re-list what kae does not implement
    /// (DRBG, digests, encoders…). `load-default = no` turns it off for setups where only
    /// approved providers may load.
    pub load_default: bool,
    /// Offload settings (`backend`, `queues`, `queue-depth`, `async`, the backends' own).
    pub offload: OffloadConfig,
    /// `log-level` and `log-target` (see `logging`), validated.
    pub log_level: Option<String>,
    pub log_target: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            load_default: true,
            offload: OffloadConfig::default(),
            log_level: None,
            log_target: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct OffloadConfig {
    pub backend: BackendChoice,
    /// Number of queues (one worker each for the CPU backend).
    pub queues: usize,
    /// Requests each queue holds before submitters must wait.
    pub depth: usize,
    /// Whether private operations of ASYNC jobs go to the backend.
    pub async_mode: AsyncMode,
    /// Refuse to load when a backend named in `backend` cannot run here.
    pub strict: bool,
    /// Settings of the HPRE backend.
    pub hpre: hpre::HpreConfig,
    /// Settings of the multi-buffer backend.
    pub mb: mb::MbConfig,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        OffloadConfig {
            backend: BackendChoice::Auto,
            queues: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            depth: 64,
            async_mode: AsyncMode::Auto,
            strict: false,
            hpre: Default::default(),
            mb: Default::default(),
        }
    }
}

/// A yes/no value in any of the spellings kae accepts.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// A decimal number within `range`.
pub fn whole_number(v: &str, range: core::ops::RangeInclusive<u64>) -> Option<u64> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok().filter(|n| range.contains(n))
}

/// Longest spin either spin variable may ask for (100 ms: beyond that a worker should park).
pub const SPIN_LIMIT_US: u64 = 100_000;

/// Spin defaults (µs) when the variables are unset: 10 and 300.
pub fn spin_values(min: Option<u64>, max: Option<u64>) -> (u64, u64) {
    (min.unwrap_or(10), max.unwrap_or(300))
}

/// The worker threads' spin bounds (µs) from `KAE_SPIN_US` / `KAE_SPIN_MAX_US` (checked at
/// init; an unusable value there refused the load, so the defaults here are only a safety net).
pub fn spin_bounds() -> (u64, u64) {
    let read = |n: &str| crate::env::var(n).and_then(|v| whole_number(&v, 0..=SPIN_LIMIT_US));
    let (min, max) = spin_values(read("KAE_SPIN_US"), read("KAE_SPIN_MAX_US"));
    (min, max.max(min))
}

/// Whether `KAE_STATS` turns the counter page off.
pub fn stats_disabled() -> bool {
    crate::env::var("KAE_STATS").and_then(|v| parse_bool(&v)) == Some(false)
}
