//! kae-stat: live counters of every process that has kae loaded.
//!
//!   kae-stat              one table (one row per process, then the total)
//!   kae-stat -i 1         every second, like watch (Ctrl-C to stop); -n COUNT bounds it
//!   kae-stat --json       one JSON line per snapshot
//!   kae-stat --check      is kae active in the OpenSSL configuration? (exit 0 or 1)
//!
//! Each kae process publishes a page `<root>/<euid>/kae-stats.<pid>` (root /dev/shm/kae or
//! $KAE_STATS_DIR; one directory per effective uid, mode 0700). Run as root, kae-stat shows
//! every user's processes; run as a user, those whose directories it may read (its own).
//! Pages of processes that are gone (dead pid, or a pid reused by another process) are not
//! shown and are removed. The page format and the reader are the kae-counters crate's,
//! shared with the provider.

// unsafe only in `check` (calls into libcrypto), which allows it.
#![deny(unsafe_code)]

mod args;
mod check;
mod clock;
mod output;

use args::Parsed;
use kae_counters::{scan, ProcPage};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The live pages; directories refused or unreadable are reported on stderr (once each).
fn collect(root: &Path, reported: &mut BTreeSet<String>) -> Vec<ProcPage> {
    let s = scan(root, true);
    let mut notes = s.problems;
    if !s.unreadable.is_empty() {
        notes.push(format!(
            "not allowed to read the counters of uid {} (run as root to see every user's processes)",
            s.unreadable
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for n in notes {
        if reported.insert(n.clone()) {
            eprintln!("kae-stat: {n}");
        }
    }
    s.pages
}

/// The root directory of the pages, as the provider chooses it.
fn root() -> PathBuf {
    kae_counters::root_dir(std::env::var(kae_counters::ROOT_ENV).ok())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let o = match args::parse(&argv) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Check(conf)) => {
            let v = check::check(conf.as_deref());
            for l in &v.lines {
                if v.ok {
                    println!("kae-stat: {l}");
                } else {
                    eprintln!("kae-stat: {l}");
                }
            }
            std::process::exit(if v.ok { 0 } else { 1 });
        }
        Ok(Parsed::Help) => {
            print!("{}", args::USAGE);
            return;
        }
        Ok(Parsed::Version) => {
            println!(
                "kae-stat {} (kae-tools; counter page format {})",
                env!("CARGO_PKG_VERSION"),
                kae_counters::VERSION
            );
            return;
        }
        Err(m) => {
            eprintln!("kae-stat: {m}");
            eprintln!(
                "usage: kae-stat [--json] [-i SECONDS [-n COUNT]] | --check [--conf FILE] \
                 (see kae-stat --help)"
            );
            std::process::exit(2);
        }
    };
    let root = root();
    let mut n = 0u64;
    let mut reported = BTreeSet::new();
    loop {
        let procs = collect(&root, &mut reported);
        if o.json {
            output::print_json(&procs);
        } else {
            if o.interval.is_some() {
                println!("--- {}", clock::now_utc());
            }
            output::print_table(&procs, &root);
        }
        n += 1;
        match o.interval {
            Some(secs) if o.count.is_none_or(|c| n < c) => {
                std::thread::sleep(Duration::from_secs_f64(secs))
            }
            _ => break,
        }
    }
}
