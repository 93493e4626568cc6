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
/// Config key (env `KAE_BACKEND`): `auto`, `cpu` or `hpre`.
pub const KAE_CONF_BACKEND: &CStr = c"backend";
/// Config key (env `KAE_QUEUES`): number of queues, 1 to 256.
pub const KAE_CONF_QUEUES: &CStr = c"queues";
/// Config key (env `KAE_QUEUE_DEPTH`): requests per queue, 1 to 65536.
pub const KAE_CONF_QUEUE_DEPTH: &CStr = c"queue-depth";
/// Config key (env `KAE_ASYNC`): offload async jobs: `auto`, `yes` or `no`.
pub const KAE_CONF_ASYNC: &CStr = c"async";
/// Provider parameter (UTF-8 string): the active backend (`cpu`, `hpre`).
pub const KAE_PARAM_BACKEND: &CStr = c"backend";
/// Provider parameter (UTF-8 string): backend and counters of this and every other process.
pub const KAE_PARAM_LIVE: &CStr = c"live";
/// Provider parameter (unsigned integer): failed operations of this process.
pub const KAE_PARAM_ERRORS: &CStr = c"errors";
/// Asymmetric cipher parameter: PKCS#1 v1.5 implicit rejection (1 = on; OpenSSL 3.2+).
pub const KAE_PARAM_IMPLICIT_REJECTION: &CStr = c"implicit-rejection";
/// Version of the name set in this header.
pub const KAE_NAMES_VERSION: u32 = 2;
