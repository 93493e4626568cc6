//! kae-stat against real processes: per-process pages appear while kae runs (forked children
//! included), counters rise, pages vanish at exit, and pages of killed processes are neither
//! shown nor left behind.

mod procs;

use procs::{openssl_without_config, run_ok, wait_until, KillOnDrop, TempDir};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `kae-stat <args>` reading the pages in `dir`; its stdout (panics unless it exits 0).
fn kae_stat(dir: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_kae-stat"))
            .env("KAE_STATS_DIR", dir)
            .args(args),
    )
}

/// (pid, private ops offloaded + inline) of each process in a --json snapshot.
fn procs(json: &str) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let Some(list) = json.split("\"processes\":[").nth(1) else {
        return out;
    };
    let list = list.split("],\"total\"").next().unwrap();
    for obj in list.split("},{") {
        let num = |key: &str| -> u64 {
            let k = format!("\"{key}\":");
            obj.split(&k)
                .nth(1)
                .map(|r| {
                    r.chars()
                        .take_while(|c| c.is_ascii_digit())
                        .collect::<String>()
                        .parse()
                        .unwrap()
                })
                .unwrap_or(0)
        };
        if obj.contains("\"pid\":") {
            out.push((
                num("pid") as u32,
                num("ops_private_inline") + num("ops_private_offloaded"),
            ));
        }
    }
    out
}

/// `openssl speed` with kae (4 s of rsa2048) publishing its counters in `dir`; killed on drop.
fn speed(dir: &Path, moddir: &Path, extra: &[&str]) -> KillOnDrop {
    KillOnDrop(
        openssl_without_config()
            .env("KAE_STATS_DIR", dir)
            .args(["speed", "-provider-path"])
            .arg(moddir)
            .args(["-provider", "kae", "-seconds", "4"])
            .args(extra)
            .arg("rsa2048")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn no_process_says_so() {
    let dir = TempDir::new("stat-empty");
    assert!(kae_stat(dir.path(), &[]).contains("no process has kae loaded"));
    assert!(procs(&kae_stat(dir.path(), &["--json"])).is_empty());
}

#[test]
fn forked_children_publish_their_own_counters_and_clean_up() {
    let dir = TempDir::new("stat-multi");
    let moddir = dir.provider_dir();
    let mut child = speed(dir.path(), &moddir, &["-multi", "2", "-async_jobs", "4"]);
    // Parent and both children have kae loaded; the children do the signing.
    wait_until("two signing processes", Duration::from_secs(20), || {
        procs(&kae_stat(dir.path(), &["--json"]))
            .iter()
            .filter(|p| p.1 > 0)
            .count()
            >= 2
    });
    let first = procs(&kae_stat(dir.path(), &["--json"]));
    std::thread::sleep(Duration::from_millis(700));
    let second = procs(&kae_stat(dir.path(), &["--json"]));
    let rising = second
        .iter()
        .filter(|(pid, n)| first.iter().any(|(p, m)| p == pid && n > m))
        .count();
    assert!(
        rising >= 2,
        "counters of both children rise: {first:?} → {second:?}"
    );
    let pids: std::collections::HashSet<u32> = second.iter().map(|p| p.0).collect();
    assert_eq!(pids.len(), second.len(), "one row per process");
    let table = kae_stat(dir.path(), &[]);
    assert!(
        table.contains("TOTAL") && table.contains("openssl"),
        "{table}"
    );
    let status = child.0.wait().unwrap();
    assert!(status.success());
    wait_until("pages removed at exit", Duration::from_secs(10), || {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("kae-stats."))
    });
    assert!(kae_stat(dir.path(), &[]).contains("no process has kae loaded"));
}

#[test]
fn killed_process_is_not_shown_and_its_page_is_removed() {
    let dir = TempDir::new("stat-killed");
    let moddir = dir.provider_dir();
    let mut child = speed(dir.path(), &moddir, &["-async_jobs", "2"]);
    let pid = child.0.id();
    wait_until("the process to publish", Duration::from_secs(20), || {
        procs(&kae_stat(dir.path(), &["--json"]))
            .iter()
            .any(|p| p.0 == pid)
    });
    child.0.kill().unwrap(); // SIGKILL: no exit handler runs
    child.0.wait().unwrap();
    let page = dir.join(format!("kae-stats.{pid}"));
    assert!(page.exists(), "a SIGKILLed process cannot remove its page");
    assert!(
        !procs(&kae_stat(dir.path(), &["--json"]))
            .iter()
            .any(|p| p.0 == pid),
        "dead pid not shown"
    );
    assert!(!page.exists(), "kae-stat removes the stale page");
}

#[test]
fn page_of_a_recycled_pid_is_not_shown() {
    let dir = TempDir::new("stat-recycled");
    // A well-formed page claiming to be our own (live) pid but with another start time.
    let mut bytes = vec![0u8; 256];
    bytes[..8].copy_from_slice(b"KAESTAT\0");
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let pid = std::process::id();
    bytes[12..16].copy_from_slice(&pid.to_le_bytes());
    bytes[16..24].copy_from_slice(&1u64.to_le_bytes()); // not our start time
    std::fs::write(dir.join(format!("kae-stats.{pid}")), &bytes).unwrap();
    assert!(procs(&kae_stat(dir.path(), &["--json"])).is_empty());
    assert!(!dir.join(format!("kae-stats.{pid}")).exists());
}

/// `openssl list -providers -verbose` shows kae's static build-info line (OpenSSL keeps the
/// pointer, so it never changes) and lists the `live` parameter, where the live numbers are
/// (tests/security.rs reads it); the numbers themselves are kae-stat's job.
#[test]
fn openssl_list_shows_static_build_info_and_the_live_parameter() {
    let dir = TempDir::new("stat-list");
    let moddir = dir.provider_dir();
    let text = run_ok(
        openssl_without_config()
            .env("KAE_STATS_DIR", dir.path())
            .args(["list", "-providers", "-verbose", "-provider-path"])
            .arg(&moddir)
            .args(["-provider", "kae"]),
    );
    let info = text
        .lines()
        .find(|l| l.trim_start().starts_with("build info: kae"))
        .unwrap_or_else(|| panic!("no kae build info line in:\n{text}"));
    assert!(
        info.trim_end().ends_with("(Rust provider; backends: cpu)"),
        "build info must be the static line: {info}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("live: UTF8 encoded string")),
        "the live parameter is not listed:\n{text}"
    );
}
