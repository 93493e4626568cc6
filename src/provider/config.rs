//! The provider's configuration: `key = value` entries of its config section and the
//! `KAE_*` environment variables that override them.
//!
//! A bad value must never leave a server silently running without kae: OpenSSL 3.0's
//! `openssl list` and `nginx -t` exit 0 with a provider that failed to initialize simply left
//! out. So every problem found here is written to stderr whatever the log level, naming the key
//! or variable, the value and what is accepted; a bad value refuses the load, an unknown key is
//! warned about. Errors (kae not loaded) also go to syslog, where the operator of a service
//! looks (a daemon's stderr is often nowhere); warnings do when syslog is the log target.

use crate::error::KaeError;
use crate::ffi::Core;
use crate::names::*;
use crate::settings::hpre::{valid_library, SyncMode};
use crate::settings::{
    parse_bool, spin_values, whole_number, AsyncMode, BackendChoice, Config, SPIN_LIMIT_US,
};
use core::ffi::CStr;

/// One key of the provider section, the environment variable that overrides it, and what it
/// accepts (the words of the error message).
pub struct Setting {
    pub key: &'static CStr,
    pub env: &'static str,
    pub accepted: &'static str,
}

/// Every key kae reads from its config section.
pub const SETTINGS: [Setting; 17] = [
    Setting {
        key: KAE_CONF_LOG_LEVEL,
        env: "KAE_LOG",
        accepted: "off, error, warn, info, debug or trace",
    },
    Setting {
        key: KAE_CONF_LOG_TARGET,
        env: "KAE_LOG_TARGET",
        accepted: "stderr, syslog or file:/absolute/path",
    },
    Setting {
        key: KAE_CONF_LOAD_DEFAULT,
        env: "KAE_LOAD_DEFAULT",
        accepted: "yes or no (also 1/0, on/off, true/false)",
    },
    Setting {
        key: KAE_CONF_BACKEND,
        env: "KAE_BACKEND",
        accepted: "auto, hpre, mb or cpu",
    },
    Setting {
        key: KAE_CONF_QUEUES,
        env: "KAE_QUEUES",
        accepted: "a whole number from 1 to 256",
    },
    Setting {
        key: KAE_CONF_QUEUE_DEPTH,
        env: "KAE_QUEUE_DEPTH",
        accepted: "a whole number from 1 to 65536",
    },
    Setting {
        key: KAE_CONF_ASYNC,
        env: "KAE_ASYNC",
        accepted: "auto, yes or no (also 1/0, on/off, true/false)",
    },
    Setting {
        key: KAE_CONF_STRICT,
        env: "KAE_STRICT",
        accepted: "yes or no (also 1/0, on/off, true/false)",
    },
    Setting {
        key: KAE_CONF_UADK_LIB,
        env: "KAE_UADK_LIB",
        accepted: "a library file name (libwd.so.2) or an absolute path",
    },
    Setting {
        key: KAE_CONF_UADK_CRYPTO_LIB,
        env: "KAE_UADK_CRYPTO_LIB",
        accepted: "a library file name (libwd_crypto.so.2) or an absolute path",
    },
    Setting {
        key: KAE_CONF_HPRE_SYSFS,
        env: "KAE_HPRE_SYSFS",
        accepted: "an absolute directory path (/sys/class/uacce)",
    },
    Setting {
        key: KAE_CONF_HPRE_QUEUES,
        env: "KAE_HPRE_QUEUES",
        accepted: "a whole number from 1 to 64",
    },
    Setting {
        key: KAE_CONF_HPRE_SYNC,
        env: "KAE_HPRE_SYNC",
        accepted: "queue or direct",
    },
    Setting {
        key: KAE_CONF_HPRE_SYNC_QUEUES,
        env: "KAE_HPRE_SYNC_QUEUES",
        accepted: "a whole number from 1 to 64",
    },
    Setting {
        key: KAE_CONF_HPRE_TIMEOUT_MS,
        env: "KAE_HPRE_TIMEOUT_MS",
        accepted: "a whole number of milliseconds from 1 to 600000",
    },
    Setting {
        key: KAE_CONF_HPRE_POLL_US,
        env: "KAE_HPRE_POLL_US",
        accepted: "a whole number of microseconds from 0 to 10000",
    },
    Setting {
        key: KAE_CONF_MULTIBUFFER,
        env: "KAE_MULTIBUFFER",
        accepted: "yes or no (also 1/0, on/off, true/false)",
    },
];

/// Keys OpenSSL itself reads from a provider section (never passed on as parameters).
const OPENSSL_KEYS: [&str; 4] = ["module", "identity", "activate", "soft_load"];

/// Environment variables without a config key: (name, accepted).
pub const ENV_ONLY: [(&str, &str); 4] = [
    ("KAE_STATS", "yes or no (publish the counter page)"),
    ("KAE_STATS_DIR", "an absolute directory path"),
    (
        "KAE_SPIN_US",
        "a whole number of microseconds from 0 to 100000, at most KAE_SPIN_MAX_US",
    ),
    (
        "KAE_SPIN_MAX_US",
        "a whole number of microseconds from 0 to 100000, at least KAE_SPIN_US",
    ),
];

/// The multi-buffer backend's test settings: (name, accepted). Only a test build (cargo feature
/// `test-knobs`) reads them; a build for use names them as ignored when they are set.
pub const TEST_KNOBS: [(&str, &str); 2] = [
    (
        "KAE_MB_ENGINE",
        "ifma or portable (portable: far slower than the CPU backend)",
    ),
    ("KAE_MB_FAULT_LANE", "a lane number from 0 to 7 (corrupts that lane of every kernel call; with KAE_MB_ENGINE=portable)"),
];

/// Where a value came from, for the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The provider's config section (its name and file, when kae found them).
    Section(Option<String>),
    Env,
}

/// One problem with the configuration, worded for the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub fatal: bool,
    pub text: String,
}

fn bad_key(setting: &Setting, value: &str, source: &Source) -> Problem {
    let key = setting.key.to_str().unwrap_or_default();
    let text = match source {
        Source::Env => format!(
            "environment variable {}=\"{value}\" is not valid (it overrides config key '{key}'); accepted: {}",
            setting.env, setting.accepted
        ),
        Source::Section(where_) => format!(
            "config key '{key}' = \"{value}\"{} is not valid; accepted: {}",
            where_.as_deref().map(|w| format!(" in {w}")).unwrap_or_default(),
            setting.accepted
        ),
    };
    Problem { fatal: true, text }
}

fn bad_env(name: &str, value: &str, accepted: &str) -> Problem {
    Problem {
        fatal: true,
        text: format!("environment variable {name}=\"{value}\" is not valid; accepted: {accepted}"),
    }
}

/// Applies one value to `cfg`; `None` when the value is not accepted.
fn apply(cfg: &mut Config, key: &CStr, v: &str) -> Option<()> {
    if key == KAE_CONF_LOAD_DEFAULT {
        cfg.load_default = parse_bool(v)?;
    } else if key == KAE_CONF_BACKEND {
        cfg.offload.backend = BackendChoice::parse(v)?;
    } else if key == KAE_CONF_QUEUES {
        cfg.offload.queues = whole_number(v, 1..=256)? as usize;
    } else if key == KAE_CONF_QUEUE_DEPTH {
        cfg.offload.depth = whole_number(v, 1..=65536)? as usize;
    } else if key == KAE_CONF_ASYNC {
        cfg.offload.async_mode = AsyncMode::parse(v)?;
    } else if key == KAE_CONF_STRICT {
        cfg.offload.strict = parse_bool(v)?;
    } else if key == KAE_CONF_UADK_LIB {
        valid_library(v).then_some(())?;
        cfg.offload.hpre.wd_lib = v.trim().to_owned();
    } else if key == KAE_CONF_UADK_CRYPTO_LIB {
        valid_library(v).then_some(())?;
        cfg.offload.hpre.crypto_lib = v.trim().to_owned();
    } else if key == KAE_CONF_HPRE_SYSFS {
        v.trim().starts_with('/').then_some(())?;
        cfg.offload.hpre.sysfs = v.trim().into();
    } else if key == KAE_CONF_HPRE_QUEUES {
        cfg.offload.hpre.queues = whole_number(v, 1..=64)? as u32;
    } else if key == KAE_CONF_HPRE_SYNC {
        cfg.offload.hpre.sync = SyncMode::parse(v)?;
    } else if key == KAE_CONF_HPRE_SYNC_QUEUES {
        cfg.offload.hpre.sync_queues = whole_number(v, 1..=64)? as u32;
    } else if key == KAE_CONF_HPRE_TIMEOUT_MS {
        cfg.offload.hpre.timeout_ms = whole_number(v, 1..=600_000)?;
    } else if key == KAE_CONF_HPRE_POLL_US {
        cfg.offload.hpre.poll_us = whole_number(v, 0..=10_000)?;
    } else if key == KAE_CONF_MULTIBUFFER {
        cfg.offload.mb.enabled = parse_bool(v)?;
    } else if key == KAE_CONF_LOG_LEVEL {
        crate::logging::parse_level(v)?;
        cfg.log_level = Some(v.to_owned());
    } else if key == KAE_CONF_LOG_TARGET {
        crate::logging::check_target(v)?;
        cfg.log_target = Some(v.to_owned());
    }
    Some(())
}

/// Builds the configuration from the section's values and the environment's (which win), and
/// checks the environment-only variables. Every problem is returned, not just the first.
pub fn build(
    section: &[(&'static CStr, String)],
    section_name: Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Config, Vec<Problem>) {
    let mut cfg = Config::default();
    let mut problems = Vec::new();
    let source = Source::Section(section_name);
    for setting in &SETTINGS {
        if let Some((_, v)) = section.iter().find(|(k, _)| *k == setting.key) {
            if apply(&mut cfg, setting.key, v).is_none() {
                problems.push(bad_key(setting, v, &source));
            }
        }
        if let Some(v) = env(setting.env) {
            if apply(&mut cfg, setting.key, &v).is_none() {
                problems.push(bad_key(setting, &v, &Source::Env));
            }
        }
    }
    problems.extend(check_env_only(env));
    problems.extend(apply_test_knobs(&mut cfg, env));
    (cfg, problems)
}

/// A test build applies the multi-buffer test settings and checks their values.
#[cfg(feature = "test-knobs")]
fn apply_test_knobs(cfg: &mut Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    let [(engine, engine_accepted), (lane, lane_accepted)] = TEST_KNOBS;
    let mut problems = Vec::new();
    if let Some(v) = env(engine) {
        match mb_engine_is_portable(&v) {
            Some(portable) => cfg.offload.mb.portable = portable,
            None => problems.push(bad_env(engine, &v, engine_accepted)),
        }
    }
    if let Some(v) = env(lane) {
        match whole_number(&v, 0..=7) {
            Some(k) => cfg.offload.mb.fault_lane = Some(k as usize),
            None => problems.push(bad_env(lane, &v, lane_accepted)),
        }
    }
    problems
}

/// A build for use never reads the test settings' values, so no environment can change its
/// arithmetic; one that is set is named as ignored (a warning), not silently dropped.
#[cfg(not(feature = "test-knobs"))]
fn apply_test_knobs(_cfg: &mut Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    TEST_KNOBS
        .iter()
        .filter(|(name, _)| env(name).is_some())
        .map(|(name, _)| Problem {
            fatal: false,
            text: format!(
                "environment variable {name} is a test setting, ignored: this kae was built \
                 for use (a test build, with the cargo feature test-knobs, honours it)"
            ),
        })
        .collect()
}

fn check_env_only(env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let accepted = |name: &str| {
        ENV_ONLY
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, a)| a)
    };
    if let Some(v) = env("KAE_STATS") {
        if parse_bool(&v).is_none() {
            problems.push(bad_env("KAE_STATS", &v, accepted("KAE_STATS")));
        }
    }
    if let Some(v) = env("KAE_STATS_DIR") {
        if !v.starts_with('/') {
            problems.push(bad_env("KAE_STATS_DIR", &v, accepted("KAE_STATS_DIR")));
        }
    }
    let mut spins = [None, None];
    for (i, name) in ["KAE_SPIN_US", "KAE_SPIN_MAX_US"].into_iter().enumerate() {
        if let Some(v) = env(name) {
            match whole_number(&v, 0..=SPIN_LIMIT_US) {
                Some(n) => spins[i] = Some(n),
                None => problems.push(bad_env(name, &v, accepted(name))),
            }
        }
    }
    let (min, max) = spin_values(spins[0], spins[1]);
    if min > max {
        problems.push(Problem {
            fatal: true,
            text: format!(
                "environment variables KAE_SPIN_US={min} and KAE_SPIN_MAX_US={max} are not valid together; accepted: KAE_SPIN_US at most KAE_SPIN_MAX_US"
            ),
        });
    }
    problems
}

/// `KAE_MB_ENGINE`: Some(true) for `portable`, Some(false) for `ifma`.
#[cfg(feature = "test-knobs")]
fn mb_engine_is_portable(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "portable" => Some(true),
        "ifma" => Some(false),
        _ => None,
    }
}

/// Warnings for keys of kae's section that nobody reads, each with the closest known key.
pub fn unknown_keys(keys: &[String], where_: &str) -> Vec<Problem> {
    let known: Vec<&str> = SETTINGS
        .iter()
        .map(|s| s.key.to_str().unwrap_or_default())
        .chain(OPENSSL_KEYS)
        .collect();
    keys.iter()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            let closest = known
                .iter()
                .min_by_key(|c| edit_distance(&k.to_ascii_lowercase(), c))
                .copied()
                .unwrap_or_default();
            Problem {
                fatal: false,
                text: format!(
                    "unknown key '{k}' in {where_} is ignored; did you mean '{closest}'? (known keys: {})",
                    known.join(", ")
                ),
            }
        })
        .collect()
}

/// Levenshtein distance (keys are short; quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

impl Config {
    /// Reads the provider section through the core and the environment, reports every
    /// problem where the operator looks, and refuses a configuration with a bad value.
    pub(super) fn from_core(core: &Core) -> Result<Config, crate::ffi::core::Failure> {
        let section = read_section(core);
        let provider_name = read_core_string(core, c"provider-name");
        // The file is only read to name the section in messages and to find unknown keys.
        // It is the default configuration file; the process may have loaded another one, so
        // it is used only when it agrees with every value the core gave us.
        let file = provider_name
            .as_deref()
            .and_then(crate::ffi::conf::provider_section)
            .filter(|f| {
                section.iter().all(|(k, v)| {
                    f.entries
                        .iter()
                        .any(|(fk, fv)| fk.as_bytes() == k.to_bytes() && fv == v)
                })
            });
        let where_ = file
            .as_ref()
            .map(|f| format!("section [{}] of {}", f.section, f.file));
        let (cfg, mut problems) = build(&section, where_.clone(), &|n| crate::env::var(n));
        if let (Some(f), Some(w)) = (&file, &where_) {
            let keys: Vec<String> = f.entries.iter().map(|(k, _)| k.clone()).collect();
            problems.extend(unknown_keys(&keys, w));
        }
        let wants_syslog = |v: &Option<String>| {
            v.as_deref()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("syslog"))
        };
        let syslog = wants_syslog(&crate::env::var("KAE_LOG_TARGET"))
            || wants_syslog(
                &section
                    .iter()
                    .find(|(k, _)| *k == KAE_CONF_LOG_TARGET)
                    .map(|(_, v)| v.clone()),
            );
        let fatal = problems.iter().filter(|p| p.fatal).count();
        for p in &problems {
            let level = if p.fatal { "error" } else { "warning" };
            crate::logging::config_diagnostic(
                &format!("kae: {level}: {}", p.text),
                p.fatal,
                syslog || p.fatal,
            );
        }
        if fatal > 0 {
            crate::logging::config_diagnostic(
                "kae: error: kae is NOT loaded: fix the value(s) above (OpenSSL may go on without kae and exit 0)",
                true,
                true,
            );
            let first = problems.iter().find(|p| p.fatal).map(|p| p.text.clone());
            return Err(crate::ffi::core::Failure::with(
                KaeError::InvalidParam,
                first.unwrap_or_default(),
            ));
        }
        Ok(cfg)
    }
}

/// The values of our keys in the provider section, as the core hands them over.
fn read_section(core: &Core) -> Vec<(&'static CStr, String)> {
    let keys: Vec<&CStr> = SETTINGS.iter().map(|s| s.key).collect();
    SETTINGS
        .iter()
        .zip(core.utf8_params(&keys))
        .filter_map(|(s, v)| Some((s.key, v?)))
        .collect()
}

/// One UTF-8 parameter of the core (`provider-name`, `openssl-version`).
pub(super) fn read_core_string(core: &Core, key: &CStr) -> Option<String> {
    core.utf8_params(&[key]).pop().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn problems_for(section: &[(&'static CStr, &str)], env: &[(&str, &str)]) -> Vec<Problem> {
        let section: Vec<(&'static CStr, String)> =
            section.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        build(&section, Some("section [kae_sect] of x.cnf".into()), &|n| {
            env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
        })
        .1
    }

    #[test]
    fn every_bad_value_of_a_known_key_is_reported_with_key_value_and_accepted_set() {
        for (key, value) in [
            (KAE_CONF_QUEUES, "abc"),
            (KAE_CONF_QUEUES, "0"),
            (KAE_CONF_QUEUES, "257"),
            (KAE_CONF_QUEUES, "+4"),
            (KAE_CONF_QUEUE_DEPTH, "-1"),
            (KAE_CONF_BACKEND, "gpu"),
            (KAE_CONF_ASYNC, "maybe"),
            (KAE_CONF_LOG_LEVEL, "verbose"),
            (KAE_CONF_LOG_TARGET, "file:relative.log"),
            (KAE_CONF_LOG_TARGET, "journal"),
            (KAE_CONF_LOAD_DEFAULT, "nope"),
            (KAE_CONF_STRICT, "sometimes"),
            (KAE_CONF_UADK_LIB, "lib/libwd.so.2"),
            (KAE_CONF_UADK_CRYPTO_LIB, ""),
            (KAE_CONF_HPRE_SYSFS, "sys/class/uacce"),
            (KAE_CONF_HPRE_QUEUES, "0"),
            (KAE_CONF_HPRE_QUEUES, "65"),
            (KAE_CONF_HPRE_SYNC, "spin"),
            (KAE_CONF_HPRE_SYNC_QUEUES, "x"),
            (KAE_CONF_HPRE_TIMEOUT_MS, "0"),
            (KAE_CONF_HPRE_POLL_US, "10001"),
            (KAE_CONF_MULTIBUFFER, "fast"),
        ] {
            let p = problems_for(&[(key, value)], &[]);
            assert_eq!(p.len(), 1, "{key:?}={value}: {p:?}");
            let t = &p[0].text;
            assert!(p[0].fatal);
            assert!(t.contains(&format!("'{}'", key.to_str().unwrap())), "{t}");
            assert!(t.contains(&format!("\"{value}\"")), "{t}");
            assert!(t.contains("accepted: "), "{t}");
            assert!(t.contains("[kae_sect]"), "{t}");
        }
    }

    #[test]
    fn hpre_settings_are_applied() {
        let section: Vec<(&'static CStr, String)> = vec![
            (KAE_CONF_BACKEND, "hpre".into()),
            (KAE_CONF_STRICT, "yes".into()),
            (KAE_CONF_UADK_LIB, "/opt/uadk/lib/libwd.so.2".into()),
            (KAE_CONF_UADK_CRYPTO_LIB, "libwd_crypto.so.2".into()),
            (KAE_CONF_HPRE_SYSFS, "/tmp/fake".into()),
            (KAE_CONF_HPRE_QUEUES, "8".into()),
            (KAE_CONF_HPRE_SYNC, "Direct".into()),
            (KAE_CONF_HPRE_SYNC_QUEUES, "2".into()),
            (KAE_CONF_HPRE_TIMEOUT_MS, "250".into()),
            (KAE_CONF_HPRE_POLL_US, "0".into()),
        ];
        let env = |n: &str| (n == "KAE_HPRE_QUEUES").then(|| "16".to_string());
        let (cfg, p) = build(&section, None, &env);
        assert!(p.is_empty(), "{p:?}");
        let h = &cfg.offload.hpre;
        assert!(cfg.offload.strict);
        assert_eq!(h.wd_lib, "/opt/uadk/lib/libwd.so.2");
        assert_eq!(h.crypto_lib, "libwd_crypto.so.2");
        assert_eq!(h.sysfs, std::path::PathBuf::from("/tmp/fake"));
        assert_eq!(h.queues, 16, "the environment wins");
        assert_eq!(h.sync, SyncMode::Direct);
        assert_eq!((h.sync_queues, h.timeout_ms, h.poll_us), (2, 250, 0));
    }

    #[test]
    fn multibuffer_settings_are_applied_and_checked() {
        let (cfg, p) = build(&[(KAE_CONF_MULTIBUFFER, "no".into())], None, &no_env);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(
            cfg.offload.mb,
            crate::settings::mb::MbConfig {
                enabled: false,
                portable: false,
                fault_lane: None
            }
        );
        let env = |n: &str| match n {
            "KAE_MULTIBUFFER" => Some("yes".to_string()),
            "KAE_MB_ENGINE" => Some("Portable".to_string()),
            "KAE_MB_FAULT_LANE" => Some("3".to_string()),
            _ => None,
        };
        let (cfg, p) = build(&[(KAE_CONF_MULTIBUFFER, "no".into())], None, &env);
        assert!(cfg.offload.mb.enabled, "the environment wins");
        if cfg!(feature = "test-knobs") {
            assert!(p.is_empty(), "{p:?}");
            assert!(cfg.offload.mb.portable);
            assert_eq!(cfg.offload.mb.fault_lane, Some(3));
        } else {
            assert!(!cfg.offload.mb.portable && cfg.offload.mb.fault_lane.is_none());
            assert_eq!(p.len(), 2, "{p:?}");
            for (p, name) in p.iter().zip(["KAE_MB_ENGINE", "KAE_MB_FAULT_LANE"]) {
                assert!(!p.fatal, "{p:?}");
                assert!(p.text.contains(name) && p.text.contains("ignored"), "{p:?}");
            }
        }
        for (name, value) in [("KAE_MB_ENGINE", "avx2"), ("KAE_MB_FAULT_LANE", "8")] {
            let p = problems_for(&[], &[(name, value)]);
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(p[0].text.contains(name), "{p:?}");
            if cfg!(feature = "test-knobs") {
                assert!(p[0].fatal && p[0].text.contains("accepted: "), "{p:?}");
            } else {
                assert!(!p[0].fatal && p[0].text.contains("ignored"), "{p:?}");
            }
        }
    }

    #[test]
    fn good_values_give_no_problem_and_are_applied() {
        let section: Vec<(&'static CStr, String)> = vec![
            (KAE_CONF_QUEUES, "4".into()),
            (KAE_CONF_QUEUE_DEPTH, " 128 ".into()),
            (KAE_CONF_BACKEND, "CPU".into()),
            (KAE_CONF_ASYNC, "off".into()),
            (KAE_CONF_LOG_LEVEL, "Info".into()),
            (KAE_CONF_LOG_TARGET, "syslog".into()),
            (KAE_CONF_LOAD_DEFAULT, "no".into()),
        ];
        let (cfg, p) = build(&section, None, &no_env);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(cfg.offload.queues, 4);
        assert_eq!(cfg.offload.depth, 128);
        assert_eq!(
            cfg.offload.backend,
            crate::settings::BackendChoice::Named(crate::settings::BackendKind::Cpu)
        );
        assert_eq!(cfg.offload.async_mode, crate::settings::AsyncMode::Off);
        assert!(!cfg.load_default);
    }

    #[test]
    fn environment_values_are_checked_and_named_by_variable() {
        for (name, value) in [
            ("KAE_QUEUES", "many"),
            ("KAE_LOG", "loud"),
            ("KAE_SPIN_US", "abc"),
            ("KAE_SPIN_MAX_US", "1e3"),
            ("KAE_SPIN_US", "100001"),
            ("KAE_STATS", "maybe"),
            ("KAE_STATS_DIR", "relative/dir"),
        ] {
            let p = problems_for(&[], &[(name, value)]);
            assert_eq!(p.len(), 1, "{name}={value}: {p:?}");
            let t = &p[0].text;
            assert!(t.contains(&format!("{name}=\"{value}\"")), "{t}");
            assert!(t.contains("accepted: "), "{t}");
        }
        let p = problems_for(&[], &[("KAE_SPIN_US", "500"), ("KAE_SPIN_MAX_US", "300")]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].text.contains("KAE_SPIN_US=500") && p[0].text.contains("KAE_SPIN_MAX_US=300"));
        // The environment wins over the section, and both are checked.
        let p = problems_for(&[(KAE_CONF_QUEUES, "x")], &[("KAE_QUEUES", "y")]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(problems_for(&[], &[("KAE_SPIN_US", "0"), ("KAE_STATS", "no")]).is_empty());
    }

    #[test]
    fn unknown_keys_are_warned_about_with_the_closest_known_key() {
        let keys: Vec<String> = [
            "module",
            "activate",
            "queus",
            "log-levl",
            "queue_depth",
            "queues",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = unknown_keys(&keys, "section [kae_sect] of x.cnf");
        let texts: Vec<&str> = p.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(p.len(), 3, "{texts:?}");
        assert!(p.iter().all(|p| !p.fatal));
        assert!(texts[0].contains("'queus'") && texts[0].contains("did you mean 'queues'"));
        assert!(texts[1].contains("'log-levl'") && texts[1].contains("did you mean 'log-level'"));
        assert!(
            texts[2].contains("'queue_depth'") && texts[2].contains("did you mean 'queue-depth'")
        );
    }

    #[test]
    fn the_backend_words_are_the_registry_s() {
        let s = SETTINGS.iter().find(|s| s.key == KAE_CONF_BACKEND).unwrap();
        assert_eq!(s.accepted, crate::settings::BackendChoice::accepted());
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("queues", "queues"), 0);
        assert_eq!(edit_distance("queus", "queues"), 1);
        assert_eq!(edit_distance("queue_depth", "queue-depth"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
