//! The one place that names kae's backends, says whether each can run here (and why not),
//! picks the one a configuration asks for, starts it, and lists the fork hooks of their
//! process-wide locks.
//!
//! `backend = auto` takes the first usable backend in [`PREFERENCE`]: a hardware accelerator,
//! then multi-buffer arithmetic, then plain CPU workers, which are always usable. A backend
//! asked for by name that cannot run here falls back to the CPU, with its reason.

use super::{Backend, ComputeFn};
use crate::completion::Completer;
use crate::ffi::fork::ForkLock;
use crate::settings::{BackendChoice, BackendKind, OffloadConfig, PREFERENCE};
use std::sync::Arc;

/// Whether a backend can run in this process, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Usable,
    Unusable(String),
}

/// Asks a backend whether it can run here with `cfg`. Starts no thread and touches no device:
/// HPRE needs a usable device in sysfs and UADK's libraries.
pub fn probe(kind: BackendKind, cfg: &OffloadConfig) -> Availability {
    match kind {
        BackendKind::Cpu => Availability::Usable,
        BackendKind::Hpre => match super::hpre::usable_here(&cfg.hpre) {
            Ok(()) => Availability::Usable,
            Err(why) => Availability::Unusable(why),
        },
        BackendKind::MultiBuffer => match super::mb::usable_here(&cfg.mb) {
            Ok(_) => Availability::Usable,
            Err(why) => Availability::Unusable(why),
        },
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
pub fn select(cfg: &OffloadConfig) -> Selection {
    select_with(cfg.backend, |k| probe(k, cfg))
}

/// What a start-up warning calls the backend.
pub const fn title(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Hpre => "HPRE",
        BackendKind::MultiBuffer => "multi-buffer",
        BackendKind::Cpu => "CPU",
    }
}

/// Starts CPU workers computing with `compute`, completing through `completer`.
pub fn start_cpu(
    cfg: &OffloadConfig,
    completer: Arc<Completer>,
    compute: ComputeFn,
) -> std::io::Result<Box<dyn Backend>> {
    let workers = super::cpu::WorkerPool::start(cfg.queues, cfg.depth, completer, compute)?;
    Ok(Box::new(workers))
}

/// Starts the backend of `kind` (its library, device, threads), or says why it did not.
pub fn start(
    kind: BackendKind,
    cfg: &OffloadConfig,
    completer: Arc<Completer>,
    compute: ComputeFn,
) -> Result<Box<dyn Backend>, String> {
    match kind {
        BackendKind::Cpu => start_cpu(cfg, completer, compute).map_err(|e| e.to_string()),
        BackendKind::Hpre => super::hpre::backend::start(&cfg.hpre).map(|b| Box::new(b) as _),
        BackendKind::MultiBuffer => {
            super::mb::start(cfg.queues, cfg.depth, &cfg.mb, completer).map(|b| Box::new(b) as _)
        }
    }
}

/// The backends' process-wide locks that a fork must find free (taken after the router's):
/// HPRE's session lifecycle lock.
pub static FORK_LOCKS: [&dyn ForkLock; 1] = [&super::hpre::session::LIVE];
/// What a forked child does once those locks are free again: HPRE forgets its parent's
/// UADK generation.
pub static IN_CHILD: [fn(); 1] = [super::hpre::session::forget_generation];

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
        let mut cfg = OffloadConfig {
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
