//! CPU time of the server processes and of kae-press itself, from /proc and getrusage.

use crate::args::Opts;
use std::collections::BTreeSet;

pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime+stime of a process (all its threads, live and exited), in seconds.
pub fn proc_cpu_s(pid: i32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after "(comm)": state is field 3, utime 14, stime 15.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ut: u64 = f.get(11)?.parse().ok()?;
    let st: u64 = f.get(12)?.parse().ok()?;
    Some((ut + st) as f64 / clk_tck())
}

pub fn pids_of(name: &str) -> Vec<i32> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            if comm.trim_end_matches('\n') == name {
                v.push(pid);
            }
        }
    }
    v.sort_unstable();
    v
}

/// CPU seconds per server process at one instant.
pub fn server_snapshot(o: &Opts) -> Vec<(i32, f64)> {
    let mut pids: BTreeSet<i32> = o.server_pids.iter().copied().collect();
    if let Some(n) = &o.server_pids_of {
        pids.extend(pids_of(n));
    }
    pids.into_iter()
        .filter_map(|p| proc_cpu_s(p).map(|c| (p, c)))
        .collect()
}

pub fn self_cpu_s() -> f64 {
    // SAFETY: rusage is plain data (all-zero is valid); getrusage fills the one we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
