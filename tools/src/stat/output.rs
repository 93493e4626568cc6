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

/// The columns of the table: heading, width, right-aligned.
const COLUMNS: [(&str, usize, bool); 17] = [
    ("PID", 8, true),
    ("COMMAND", 15, false),
    ("BACKEND", 7, false),
    ("PRIV-INL", 10, true),
    ("PRIV-OFFL", 10, true),
    ("PUBLIC", 10, true),
    ("ERRORS", 7, true),
    ("PAUSES", 10, true),
    ("QFULL", 8, true),
    ("FALLBK", 8, true),
    ("FAULTS", 6, true),
    ("HIWAT", 5, true),
    ("INFLT", 6, true),
    ("HWFLT", 6, true),
    ("MBBAT", 8, true),
    ("MBLN", 4, true),
    ("MBSCL", 7, true),
];

/// One line of the table, the cells in the order of [`COLUMNS`].
fn line(cells: &[String]) -> String {
    cells
        .iter()
        .zip(COLUMNS)
        .map(|(c, (_, w, right))| {
            if right {
                format!("{c:>w$}")
            } else {
                format!("{c:<w$}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn header() -> String {
    line(&COLUMNS.map(|(h, _, _)| h.to_string()))
}

fn row(pid: &str, comm: &str, backend: &str, s: &Snapshot) -> String {
    let n = |i: usize| s.get(i).to_string();
    line(&[
        pid.to_string(),
        comm.to_string(),
        backend.to_string(),
        n(idx::PRIVATE_INLINE),
        n(idx::PRIVATE_OFFLOADED),
        s.public_ok().to_string(),
        s.errors().to_string(),
        n(idx::ASYNC_PAUSES),
        n(idx::QUEUE_FULL_RETRIES),
        n(idx::FALLBACKS),
        n(idx::CRT_FAULTS),
        n(idx::QUEUE_HIGH_WATER),
        n(idx::IN_FLIGHT),
        n(idx::HW_FAULTS),
        n(idx::MB_BATCHES),
        s.mb_lanes_per_batch().unwrap_or_else(|| "-".into()),
        n(idx::MB_SCALAR),
    ])
}

pub fn print_table(procs: &[ProcPage], root: &Path) {
    if procs.is_empty() {
        println!("no process has kae loaded (looked in {})", root.display());
        return;
    }
    println!("{}", header());
    for p in procs {
        println!(
            "{}",
            row(&p.pid.to_string(), &p.comm, &p.backend, &p.counters)
        );
    }
    println!(
        "{}",
        row(
            "TOTAL",
            &format!("{} processes", procs.len()),
            "",
            &all(procs),
        )
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first fourteen columns are where they were before the multi-buffer columns.
    #[test]
    fn header_keeps_the_old_columns_and_appends_the_multi_buffer_ones() {
        assert_eq!(
            header(),
            format!(
                "{:>8} {:<15} {:<7} {:>10} {:>10} {:>10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5} {:>6} {:>6} {:>8} {:>4} {:>7}",
                "PID", "COMMAND", "BACKEND", "PRIV-INL", "PRIV-OFFL", "PUBLIC", "ERRORS",
                "PAUSES", "QFULL", "FALLBK", "FAULTS", "HIWAT", "INFLT", "HWFLT", "MBBAT",
                "MBLN", "MBSCL"
            )
        );
    }

    #[test]
    fn rows_show_batches_average_lanes_and_scalar_requests() {
        let mut s = Snapshot::default();
        s.0[idx::PRIVATE_INLINE] = 12;
        s.0[idx::HW_FAULTS] = 1;
        let cells = |r: String| r.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let none = cells(row("7", "nginx", "mb", &s));
        assert_eq!(none.len(), COLUMNS.len());
        assert_eq!(&none[13..], ["1", "0", "-", "0"], "no batch: no average");
        s.0[idx::MB_BATCHES] = 3;
        s.0[idx::MB_LANES] = 20;
        s.0[idx::MB_SCALAR] = 5;
        let some = cells(row("7", "nginx", "mb", &s));
        assert_eq!(&some[..4], ["7", "nginx", "mb", "12"]);
        assert_eq!(&some[13..], ["1", "3", "6.7", "5"]);
        assert_eq!(
            row("7", "nginx", "mb", &s).len(),
            header().len(),
            "cells line up with the headings"
        );
    }

    #[test]
    fn json_has_the_raw_multi_buffer_counters() {
        let mut s = Snapshot::default();
        s.0[idx::MB_BATCHES] = 3;
        s.0[idx::MB_LANES] = 20;
        s.0[idx::MB_SCALAR] = 5;
        let j = json_counters(&s);
        assert!(
            j.contains(r#""hw_faults":0,"mb_batches":3,"mb_lanes":20,"mb_scalar":5,"errors":0"#),
            "{j}"
        );
    }
}
