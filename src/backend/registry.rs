//! The one place that names kae's backends, says whether each can run here (and why not),
//! and picks the one a configuration asks for.
//!
//! `backend = auto` takes the first usable backend in [`PREFERENCE`]: a hardware accelerator,
//! then multi-buffer arithmetic, then plain CPU workers, which are always usable. A backend
//! asked for by name that cannot run here falls back to the CPU, with its reason.

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

/// Whether a backend can run in this process, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Usable,
    Unusable(String),
}

/// Asks a backend whether it can run here with `cfg`. Starts no thread and touches no device:
/// HPRE needs a usable device in sysfs and UADK's libraries.
pub fn probe(kind: BackendKind, cfg: &crate::pool::PoolConfig) -> Availability {
    match kind {
        BackendKind::Cpu => Availability::Usable,
        BackendKind::Hpre => match crate::backend::hpre::usable_here(&cfg.hpre) {
            Ok(()) => Availability::Usable,
            Err(why) => Availability::Unusable(why),
        },
        BackendKind::MultiBuffer => match crate::backend::mb::usable_here(&cfg.mb) {
            Ok(_) => Availability::Usable,
            Err(why) => Availability::Unusable(why),
        },
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

/// The selection for a choice: the backend that runs, and the reason, worded for the start-up
/// line. `fallback` carries the reason when a backend asked for by name cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub kind: BackendKind,
    pub why: String,
    pub fallback: Option<String>,
}

/// Picks the backend for `choice` with `probe` (injectable for tests).
pub fn select_with(
    choice: BackendChoice,
    probe: impl Fn(BackendKind) -> Availability,
) -> Selection {
    match choice {
        BackendChoice::Named(kind) => match probe(kind) {
            Availability::Usable => Selection {
                kind,
                why: "configured".into(),
                fallback: None,
            },
            Availability::Unusable(why) => Selection {
                kind: BackendKind::Cpu,
                why: format!("{} configured but unavailable: {why}", kind.name()),
                fallback: Some(why),
            },
        },
        BackendChoice::Auto => {
            let mut skipped = Vec::new();
            for kind in PREFERENCE {
                match probe(kind) {
                    Availability::Usable => {
                        let why = if skipped.is_empty() {
                            "auto".to_string()
                        } else {
                            format!("auto; {}", skipped.join("; "))
                        };
                        return Selection {
                            kind,
                            why,
                            fallback: None,
                        };
                    }
                    Availability::Unusable(why) => skipped.push(format!("{}: {why}", kind.name())),
                }
            }
            // Unreachable while the CPU is always usable; stay on it regardless.
            Selection {
                kind: BackendKind::Cpu,
                why: format!("auto; {}", skipped.join("; ")),
                fallback: None,
            }
        }
    }
}

/// [`select_with`] with the real probes, for the `backend` setting of `cfg`.
pub fn select(cfg: &crate::pool::PoolConfig) -> Selection {
    select_with(cfg.backend, |k| probe(k, cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_listed_once() {
        for k in PREFERENCE {
            assert_eq!(BackendKind::from_name(k.name()), Some(k));
            assert_eq!(BackendKind::from_name(&k.name().to_uppercase()), Some(k));
            assert_eq!(k.c_name().to_str().unwrap(), k.name());
        }
        assert_eq!(BackendChoice::parse(" Auto "), Some(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse("gpu"), None);
        assert_eq!(BackendChoice::accepted(), "auto, hpre, mb or cpu");
    }

    #[test]
    fn auto_takes_the_first_usable_in_preference_order() {
        let only = |usable: &'static [BackendKind]| {
            move |k: BackendKind| {
                if usable.contains(&k) {
                    Availability::Usable
                } else {
                    Availability::Unusable(format!("no {}", k.name()))
                }
            }
        };
        const ALL: [BackendKind; 3] = [
            BackendKind::Hpre,
            BackendKind::MultiBuffer,
            BackendKind::Cpu,
        ];
        assert_eq!(
            select_with(BackendChoice::Auto, only(&ALL)).kind,
            BackendKind::Hpre
        );
        let s = select_with(
            BackendChoice::Auto,
            only(&[BackendKind::MultiBuffer, BackendKind::Cpu]),
        );
        assert_eq!(s.kind, BackendKind::MultiBuffer);
        assert!(s.why.contains("hpre: no hpre"), "{}", s.why);
        let s = select_with(BackendChoice::Auto, only(&[BackendKind::Cpu]));
        assert_eq!((s.kind, s.fallback), (BackendKind::Cpu, None));
    }

    #[test]
    fn a_named_backend_that_cannot_run_falls_back_to_the_cpu_with_its_reason() {
        let mut cfg = crate::pool::PoolConfig {
            backend: BackendChoice::Named(BackendKind::Hpre),
            ..Default::default()
        };
        cfg.hpre.sysfs = "/nonexistent-kae-test".into();
        let s = select(&cfg);
        assert_eq!(s.kind, BackendKind::Cpu);
        assert!(
            s.fallback.as_deref().unwrap().contains("no HPRE device"),
            "{:?}",
            s.fallback
        );
        cfg.backend = BackendChoice::Named(BackendKind::Cpu);
        let s = select(&cfg);
        assert_eq!((s.kind, s.fallback), (BackendKind::Cpu, None));
    }

    #[test]
    fn only_the_cpu_backend_is_not_worth_offloading_on_one_cpu() {
        assert!(!BackendKind::Cpu.worth_offloading_on_one_cpu());
        assert!(BackendKind::Hpre.worth_offloading_on_one_cpu());
        assert!(BackendKind::MultiBuffer.worth_offloading_on_one_cpu());
    }
}
