//! Every name kae defines for the outside world, in one table (as OpenSSL's `core_names.h`):
//! the provider name, the keys of its config section, and the parameters it answers. The code
//! uses these constants (a misspelt name does not compile), and `build.rs` turns this file into
//! `include/kae.h` (each `&CStr` constant becomes a `#define` of the same string; integer
//! constants go through cbindgen). Keep one `pub const` per line.
use core::ffi::CStr;

/// Provider name, as used with `-provider kae` and in `[provider_sect]`.
pub const KAE_PROVIDER_NAME: &CStr = c"kae";
/// Property query selecting kae's algorithms.
pub const KAE_PROPQ: &CStr = c"provider=kae";
/// Config key (env `KAE_LOG`): `off`, `error`, `warn`, `info`, `debug` or `trace`.
pub const KAE_CONF_LOG_LEVEL: &CStr = c"log-level";
/// Config key (env `KAE_LOG_TARGET`): `stderr`, `syslog` or `file:/absolute/path`.
pub const KAE_CONF_LOG_TARGET: &CStr = c"log-target";
/// Config key (env `KAE_LOAD_DEFAULT`): load the default provider privately (`yes`|`no`).
pub const KAE_CONF_LOAD_DEFAULT: &CStr = c"load-default";
/// Config key (env `KAE_BACKEND`): `auto`, `hpre`, `mb` or `cpu`.
pub const KAE_CONF_BACKEND: &CStr = c"backend";
/// Config key (env `KAE_QUEUES`): number of queues, 1 to 256.
pub const KAE_CONF_QUEUES: &CStr = c"queues";
/// Config key (env `KAE_QUEUE_DEPTH`): requests per queue, 1 to 65536.
pub const KAE_CONF_QUEUE_DEPTH: &CStr = c"queue-depth";
/// Config key (env `KAE_ASYNC`): offload async jobs: `auto`, `yes` or `no`.
pub const KAE_CONF_ASYNC: &CStr = c"async";
/// Config key (env `KAE_STRICT`): refuse to load when the named backend cannot run (`yes`|`no`).
pub const KAE_CONF_STRICT: &CStr = c"strict";
/// Config key (env `KAE_UADK_LIB`): UADK's base library for the HPRE backend (`libwd.so.2`).
pub const KAE_CONF_UADK_LIB: &CStr = c"uadk-lib";
/// Config key (env `KAE_UADK_CRYPTO_LIB`): UADK's crypto library (`libwd_crypto.so.2`).
pub const KAE_CONF_UADK_CRYPTO_LIB: &CStr = c"uadk-crypto-lib";
/// Config key (env `KAE_HPRE_SYSFS`): where HPRE devices are listed (`/sys/class/uacce`).
pub const KAE_CONF_HPRE_SYSFS: &CStr = c"hpre-sysfs";
/// Config key (env `KAE_HPRE_QUEUES`): async HPRE queues per NUMA node, 1 to 64.
pub const KAE_CONF_HPRE_QUEUES: &CStr = c"hpre-queues";
/// Config key (env `KAE_HPRE_SYNC`): operations outside async jobs: `queue` or `direct`.
pub const KAE_CONF_HPRE_SYNC: &CStr = c"hpre-sync";
/// Config key (env `KAE_HPRE_SYNC_QUEUES`): sync HPRE queues per NUMA node, 1 to 64.
pub const KAE_CONF_HPRE_SYNC_QUEUES: &CStr = c"hpre-sync-queues";
/// Config key (env `KAE_HPRE_TIMEOUT_MS`): an HPRE request older than this is redone on the CPU.
pub const KAE_CONF_HPRE_TIMEOUT_MS: &CStr = c"hpre-timeout-ms";
/// Config key (env `KAE_HPRE_POLL_US`): the poller's pause between empty polls, 0 to 10000 µs.
pub const KAE_CONF_HPRE_POLL_US: &CStr = c"hpre-poll-us";
/// Config key (env `KAE_MULTIBUFFER`): `no` keeps `backend = auto` off the multi-buffer
/// (AVX-512 IFMA) backend (`yes`|`no`, default `yes`).
pub const KAE_CONF_MULTIBUFFER: &CStr = c"multibuffer";
/// Provider parameter (UTF-8 string): the active backend (`hpre`, `mb`, `cpu`).
pub const KAE_PARAM_BACKEND: &CStr = c"backend";
/// Provider parameter (UTF-8 string): the HPRE devices discovery finds, and why any is unusable.
pub const KAE_PARAM_HPRE_DEVICES: &CStr = c"hpre-devices";
/// Provider parameter (UTF-8 string): backend and counters of this and every other process.
pub const KAE_PARAM_LIVE: &CStr = c"live";
/// Provider parameter (unsigned integer): failed operations of this process.
pub const KAE_PARAM_ERRORS: &CStr = c"errors";
/// Asymmetric cipher parameter: PKCS#1 v1.5 implicit rejection (1 = on; OpenSSL 3.2+).
pub const KAE_PARAM_IMPLICIT_REJECTION: &CStr = c"implicit-rejection";
/// Version of the name set in this header.
pub const KAE_NAMES_VERSION: u32 = 2;
