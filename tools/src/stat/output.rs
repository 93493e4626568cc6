//! The table and the JSON line.

use kae_counters::{idx, total, ProcPage, Snapshot, NAMES};
use std::path::Path;

/// Sum over processes (see [`kae_counters::total`]).
fn all(procs: &[ProcPage]) -> Snapshot {
    total(procs.iter().map(|p| &p.counters))
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

pub fn print_json(procs: &[ProcPage]) {
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
        json_counters(&all(procs))
    );
}

pub fn print_table(procs: &[ProcPage], root: &Path) {
    if procs.is_empty() {
        println!("no process has kae loaded (looked in {})", root.display());
        return;
    }
    println!(
        "{:>8} {:<15} {:<7} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5} {:>6} {:>6}",
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
        "INFLT",
        "HWFLT"
    );
    let row = |pid: &str, comm: &str, backend: &str, s: &Snapshot| {
        println!(
            "{:>8} {:<15} {:<7} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5} {:>6} {:>6}",
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
            s.get(idx::IN_FLIGHT),
            s.get(idx::HW_FAULTS)
        )
    };
    for p in procs {
        row(&p.pid.to_string(), &p.comm, &p.backend, &p.counters);
    }
    row(
        "TOTAL",
        &format!("{} processes", procs.len()),
        "",
        &all(procs),
    );
}
