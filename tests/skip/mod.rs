//! Reporting what a test could not check here, so that a missing precondition is never a silent
//! pass. Use it as `mod skip;` and call [`skipped`] where a test (or a part of one) gives up.
//!
//! * The line `SKIPPED <what>: <why>` goes to stderr and, when `KAE_SKIP_LOG` names a file, is
//!   appended to it: `scripts/test.sh` sets it and lists the skips in its summary (cargo hides
//!   the output of passing tests).
//! * Under CI (`KAE_CI=1`, set by `.ci/run`) a skip of something CI provides (root, valgrind,
//!   the servers) is a failure.
#![allow(dead_code)]

use std::io::Write;

/// Whether CI provides what the skipped check needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnderCi {
    /// CI has it (root, valgrind, haproxy, nginx): skipping there is a failure.
    Provided,
    /// CI may lack it (an IFMA CPU), or covers it in another step (a 3.4+ core in compat.sh).
    MayLack,
}

/// Reports that `what` was not checked, because `why`; panics under CI when CI provides what
/// it needs.
pub fn skipped(what: &str, why: &str, ci: UnderCi) {
    let line = format!("SKIPPED {what}: {why}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("KAE_SKIP_LOG").filter(|p| !p.is_empty()) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write per line: with O_APPEND, tests running in parallel do not interleave.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
    if ci == UnderCi::Provided && std::env::var("KAE_CI").is_ok_and(|v| v == "1") {
        panic!("{line} (under CI, which provides what this needs: a failure, not a skip)");
    }
}
