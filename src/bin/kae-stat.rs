//! kae-stat: live counters of every process that has kae loaded.
//!
//!   kae-stat              one table (one row per process, then the total)
//!   kae-stat -i 1         every second, like watch (Ctrl-C to stop); -n COUNT bounds it
//!   kae-stat --json       one JSON line per snapshot
//!
//! Each kae process publishes a page `<root>/<euid>/kae-stats.<pid>` (root /dev/shm/kae or
//! $KAE_STATS_DIR; one directory per effective uid, mode 0700). Run as root, kae-stat shows
//! every user's processes; run as a user, those whose directories it may read (its own).
//! Pages of processes that are gone (dead pid, or a pid reused by another process) are not
//! shown and are removed.

use kae::stats::{idx, scan, stats_dir, total, ProcPage, Snapshot, NAMES};
use std::collections::BTreeSet;
use std::time::Duration;

type Proc = ProcPage;

/// The live pages; directories refused or unreadable are reported on stderr (once each).
fn collect(reported: &mut BTreeSet<String>) -> Vec<Proc> {
    let s = scan(&stats_dir(), true);
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

fn json_counters(s: &Snapshot) -> String {
    NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| format!("\"{}\":{}", n.replace('-', "_"), s.get(i)))
        .chain(std::iter::once(format!("\"errors\":{}", s.errors())))
        .collect::<Vec<_>>()
        .join(",")
}

fn print_json(procs: &[Proc]) {
    let list: Vec<String> = procs
        .iter()
        .map(|p| {
            format!(
                "{{\"pid\":{},\"uid\":{},\"comm\":\"{}\",\"backend\":\"{}\",{}}}",
                p.pid,
                p.uid,
                p.comm.replace(['"', '\\'], "_"),
                p.backend,
                json_counters(&p.counters)
            )
        })
        .collect();
    println!(
        "{{\"kae_stat\":1,\"processes\":[{}],\"total\":{{{}}}}}",
        list.join(","),
        json_counters(&total(procs))
    );
}

fn print_table(procs: &[Proc]) {
    if procs.is_empty() {
        println!(
            "no process has kae loaded (looked in {})",
            stats_dir().display()
        );
        return;
    }
    println!(
        "{:>8} {:<15} {:<7} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5} {:>6}",
        "PID",
        "COMMAND",
        "BACKEND",
        "PRIV-INL",
        "PRIV-OFFL",
        "PUBLIC",
        "ERRORS",
        "PAUSES",
        "QFULL",
        "FALLBK",
        "FAULTS",
        "HIWAT",
        "INFLT"
    );
    let row = |pid: &str, comm: &str, backend: &str, s: &Snapshot| {
        println!(
            "{:>8} {:<15} {:<7} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5} {:>6}",
            pid,
            comm,
            backend,
            s.get(idx::PRIVATE_INLINE),
            s.get(idx::PRIVATE_OFFLOADED),
            s.public_ok(),
            s.errors(),
            s.get(idx::ASYNC_PAUSES),
            s.get(idx::QUEUE_FULL_RETRIES),
            s.get(idx::FALLBACKS),
            s.get(idx::CRT_FAULTS),
            s.get(idx::QUEUE_HIGH_WATER),
            s.get(idx::IN_FLIGHT)
        )
    };
    for p in procs {
        row(&p.pid.to_string(), &p.comm, &p.backend, &p.counters);
    }
    row(
        "TOTAL",
        &format!("{} processes", procs.len()),
        "",
        &total(procs),
    );
}

fn usage() -> ! {
    eprintln!("usage: kae-stat [--json] [-i SECONDS [-n COUNT]]");
    std::process::exit(2);
}

fn main() {
    let mut json = false;
    let mut interval: Option<f64> = None;
    let mut count: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "-i" | "--interval" => {
                interval = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|v: &f64| *v > 0.0)
                        .unwrap_or_else(|| usage()),
                )
            }
            "-n" | "--count" => {
                count = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| usage()),
                )
            }
            "-h" | "--help" => {
                println!("usage: kae-stat [--json] [-i SECONDS [-n COUNT]]\nShows kae's counters for every process that has kae loaded.");
                return;
            }
            _ => usage(),
        }
    }
    let mut n = 0u64;
    let mut reported = BTreeSet::new();
    loop {
        let procs = collect(&mut reported);
        if json {
            print_json(&procs);
        } else {
            if interval.is_some() {
                println!(
                    "--- {}",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or(0)
                );
            }
            print_table(&procs);
        }
        n += 1;
        match interval {
            Some(secs) if count.map_or(true, |c| n < c) => {
                std::thread::sleep(Duration::from_secs_f64(secs))
            }
            _ => break,
        }
    }
}
