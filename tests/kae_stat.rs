//! kae-stat against real processes: per-process pages appear while kae runs (forked children
//! included), counters rise, pages vanish at exit, and pages of killed processes are neither
//! shown nor left behind.

mod procs;
mod skip;

use procs::{
    openssl_bin, openssl_without_config, run, run_ok, tool_bin, wait_deadline, wait_until,
    KillOnDrop, TempDir,
};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `kae-stat <args>` reading the pages in `dir`; its stdout (panics unless it exits 0).
fn kae_stat(dir: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new(tool_bin("kae-stat"))
            .env("KAE_STATS_DIR", dir)
            .args(args),
    )
}

/// (pid, private ops offloaded + inline) of each process in a --json snapshot. Panics when the
/// output is not the JSON kae-stat prints (no JSON line, no `processes` array, an entry
/// without its numbers): a format change must fail the tests, not read as "no process".
fn procs(json: &str) -> Vec<(u32, u64)> {
    let line = json
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in kae-stat --json output:\n{json}"));
    let v: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("kae-stat --json is not JSON ({e}):\n{line}"));
    assert_eq!(v["kae_stat"], 1, "kae-stat --json format marker:\n{line}");
    assert!(
        v["total"]["ops_private_inline"].is_u64(),
        "kae-stat --json has no total counters:\n{line}"
    );
    let list = v["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("kae-stat --json has no processes array:\n{line}"));
    list.iter()
        .map(|p| {
            let num = |k: &str| {
                p[k].as_u64()
                    .unwrap_or_else(|| panic!("process entry without a number {k:?}: {p}"))
            };
            let pid = u32::try_from(num("pid")).unwrap_or_else(|_| panic!("pid: {p}"));
            (
                pid,
                num("ops_private_inline") + num("ops_private_offloaded"),
            )
        })
        .collect()
}

#[test]
fn json_parser_fails_on_format_changes() {
    let good = r#"{"kae_stat":1,"processes":[{"pid":7,"uid":0,"comm":"x","backend":"cpu","ops_private_inline":2,"ops_private_offloaded":3}],"total":{"ops_private_inline":2}}"#;
    assert_eq!(procs(good), vec![(7, 5)]);
    let empty = r#"{"kae_stat":1,"processes":[],"total":{"ops_private_inline":0}}"#;
    assert!(procs(empty).is_empty());
    let changed = [
        "",
        "no process has kae loaded",
        r#"{"kae_stat":2,"processes":[],"total":{"ops_private_inline":0}}"#,
        r#"{"kae_stat":1,"procs":[],"total":{"ops_private_inline":0}}"#,
        r#"{"kae_stat":1,"processes":[],"totals":{}}"#,
        r#"{"kae_stat":1,"processes":[{"pid":7,"private_inline":2,"ops_private_offloaded":3}],"total":{"ops_private_inline":2}}"#,
        r#"{"kae_stat":1,"processes":[{"pid":"7","ops_private_inline":2,"ops_private_offloaded":3}],"total":{"ops_private_inline":2}}"#,
        r#"{"kae_stat":1,"processes":[{"pid":7,"#,
    ];
    for text in changed {
        let r = std::panic::catch_unwind(|| procs(text));
        assert!(r.is_err(), "accepted {text:?} as {:?}", r.unwrap());
    }
}

/// Our effective uid (the directory our processes publish in).
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Where a process of ours with `pid` publishes its page under the root `dir`.
fn page_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(euid().to_string())
        .join(format!("kae-stats.{pid}"))
}

/// Creates our user directory `<dir>/<euid>` (mode 0700) as kae would.
fn user_dir(dir: &Path) -> PathBuf {
    let d = dir.join(euid().to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
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
        std::fs::read_dir(dir.join(euid().to_string()))
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
    let page = page_path(dir.path(), pid);
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
    let mut bytes = vec![0u8; kae::stats::PAGE_SIZE];
    bytes[..8].copy_from_slice(b"KAESTAT\0");
    bytes[8..12].copy_from_slice(&kae::stats::VERSION.to_le_bytes());
    let pid = std::process::id();
    bytes[12..16].copy_from_slice(&pid.to_le_bytes());
    bytes[16..24].copy_from_slice(&1u64.to_le_bytes()); // not our start time
    user_dir(dir.path());
    let page = page_path(dir.path(), pid);
    std::fs::write(&page, &bytes).unwrap();
    assert!(procs(&kae_stat(dir.path(), &["--json"])).is_empty());
    assert!(!page.exists());
}

/// A page for our own (live) pid with our start time, in the format `version` at `size` bytes,
/// with the multi-buffer counters set (their offsets in format 3) when the page has room.
fn own_page(dir: &Path, version: u32, size: usize) -> PathBuf {
    let mut bytes = vec![0u8; size];
    bytes[..8].copy_from_slice(b"KAESTAT\0");
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    let pid = std::process::id();
    bytes[12..16].copy_from_slice(&pid.to_le_bytes());
    let start = kae_counters::scan::start_ticks_of(pid).expect("our own start time");
    bytes[16..24].copy_from_slice(&start.to_le_bytes());
    bytes[24..26].copy_from_slice(b"mb");
    let mut set = |i: usize, v: u64| {
        let o = 72 + 8 * i;
        if o + 8 <= size {
            bytes[o..o + 8].copy_from_slice(&v.to_le_bytes());
        }
    };
    set(kae::stats::idx::PRIVATE_INLINE, 40);
    set(kae::stats::idx::MB_BATCHES, 6);
    set(kae::stats::idx::MB_LANES, 45);
    set(kae::stats::idx::MB_SCALAR, 3);
    user_dir(dir);
    let page = page_path(dir, pid);
    std::fs::write(&page, &bytes).unwrap();
    page
}

/// The multi-buffer counters of a page: `MBBAT`, `MBLN` (average lanes per batch, one
/// decimal) and `MBSCL` at the end of the table, the raw values in --json.
#[test]
fn multi_buffer_columns_and_json() {
    let dir = TempDir::new("stat-mb");
    own_page(dir.path(), kae::stats::VERSION, kae::stats::PAGE_SIZE);
    let table = kae_stat(dir.path(), &[]);
    let mut lines = table.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        head[head.len() - 4..],
        ["HWFLT", "MBBAT", "MBLN", "MBSCL"],
        "{table}"
    );
    let pid = std::process::id().to_string();
    let mine: Vec<&str> = lines
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("no row for our pid:\n{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(mine.len(), head.len(), "{table}");
    assert_eq!(mine[mine.len() - 4..], ["0", "6", "7.5", "3"], "{table}");
    let total: Vec<&str> = table
        .lines()
        .find(|l| l.trim_start().starts_with("TOTAL"))
        .unwrap_or_else(|| panic!("no TOTAL row:\n{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(total[total.len() - 3..], ["6", "7.5", "3"], "{table}");

    let json = kae_stat(dir.path(), &["--json"]);
    assert_eq!(procs(&json), vec![(std::process::id(), 40)]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    for (k, want) in [("mb_batches", 6), ("mb_lanes", 45), ("mb_scalar", 3)] {
        assert_eq!(v["processes"][0][k], want, "{k}: {json}");
        assert_eq!(v["total"][k], want, "{k} (total): {json}");
    }
}

/// No batch yet: `MBLN` reads `-`, not 0.0 or a division by zero.
#[test]
fn multi_buffer_average_without_a_batch_is_a_dash() {
    let dir = TempDir::new("stat-mb-none");
    let page = own_page(dir.path(), kae::stats::VERSION, kae::stats::PAGE_SIZE);
    let mut bytes = std::fs::read(&page).unwrap();
    let batches = 72 + 8 * kae::stats::idx::MB_BATCHES;
    bytes[batches..batches + 8].fill(0);
    std::fs::write(&page, &bytes).unwrap();
    let table = kae_stat(dir.path(), &[]);
    let pid = std::process::id().to_string();
    let mine: Vec<&str> = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("no row for our pid:\n{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(mine[mine.len() - 3..], ["0", "-", "3"], "{table}");
}

/// A page of the previous format (2: 184 bytes, no multi-buffer slots) of a live process is
/// not read, as any page of another format: not shown and left in place (its process is
/// alive; only pages of dead processes are removed). The same at the new size.
#[test]
fn format_2_page_of_a_live_process_is_not_shown() {
    assert_eq!(kae::stats::VERSION, 3);
    for size in [184, kae::stats::PAGE_SIZE] {
        let dir = TempDir::new("stat-format2");
        let page = own_page(dir.path(), 2, size);
        assert!(
            procs(&kae_stat(dir.path(), &["--json"])).is_empty(),
            "{size} bytes"
        );
        assert!(
            kae_stat(dir.path(), &[]).contains("no process has kae loaded"),
            "{size} bytes"
        );
        assert!(
            page.exists(),
            "{size} bytes: the page of a live process is kept"
        );
    }
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
        info.trim_end().ends_with(
            "(Rust provider; backends: hpre (UADK loaded at run time), mb (AVX-512 IFMA), cpu)"
        ),
        "build info must be the static line: {info}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("live: UTF8 encoded string")),
        "the live parameter is not listed:\n{text}"
    );
}

/// `cmd` with an address-space limit of 1 GiB, so a reader that wrongly reads an endless file
/// (a page linked to /dev/zero) fails fast instead of eating the machine's memory.
fn limited(mut cmd: Command) -> Command {
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Symlinks planted where the next kae process will create its page (at the old flat
/// location and in its user directory) are not followed: their target keeps its contents.
#[test]
fn planted_symlinks_do_not_redirect_the_page() {
    let dir = TempDir::new("stat-symlink");
    let moddir = dir.provider_dir();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let go = dir.join("go");
    // The shell waits for `go`, then becomes openssl: its pid is known before kae starts.
    let mut child = KillOnDrop(
        Command::new("sh")
            .arg("-c")
            .arg(r#"while [ ! -e "$0" ]; do sleep 0.02; done; exec "$@""#)
            .arg(&go)
            .arg(openssl_bin())
            .args(["list", "-providers", "-provider-path"])
            .arg(&moddir)
            .args(["-provider", "kae"])
            .env("OPENSSL_CONF", "/dev/null")
            .env("KAE_STATS_DIR", dir.path())
            .env("KAE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    user_dir(dir.path());
    let planted = [
        dir.join(format!("kae-stats.{pid}")),
        page_path(dir.path(), pid),
    ];
    for p in &planted {
        std::os::unix::fs::symlink(&victim, p).unwrap();
    }
    std::fs::write(&go, b"").unwrap();
    let status = wait_deadline(&mut child.0, Duration::from_secs(60)).expect("openssl hangs");
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(status.success(), "{status:?}\n{stderr}");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious",
        "the symlink target was overwritten"
    );
    assert!(
        !stderr.contains("not published"),
        "the process did publish (replacing the planted link): {stderr}"
    );
    assert!(
        page_path(dir.path(), pid).symlink_metadata().is_err(),
        "the page that replaced the link was removed at exit"
    );
}

/// kae-stat skips a FIFO, a link to /dev/zero and files of the wrong size, instead of blocking
/// or reading forever. (The provider's own reader, behind the `live` parameter, is the same
/// `stats::live_pages` code: unit tests in src/stats/files.rs.)
#[test]
fn readers_skip_fifos_device_links_and_wrong_sizes() {
    let dir = TempDir::new("stat-readers");
    let mine = user_dir(dir.path());
    // Planted in the user directory and at the old flat location.
    for d in [dir.path(), mine.as_path()] {
        let fifo = std::ffi::CString::new(
            d.join(format!("kae-stats.{}", std::process::id()))
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", d.join("kae-stats.1")).unwrap();
        std::fs::write(d.join("kae-stats.2"), vec![0u8; 1 << 20]).unwrap();
    }
    let limit = Duration::from_secs(20);
    let mut stat = limited(Command::new(tool_bin("kae-stat")));
    stat.env("KAE_STATS_DIR", dir.path()).arg("--json");
    let out = run(&mut stat, None, limit).ok();
    assert!(procs(&out.stdout).is_empty(), "{}", out.describe());
}

/// A user directory that another user owns, or that others may enter, is refused: the
/// process does not publish there and says why; kae-stat reports it too.
#[test]
fn unsafe_user_directories_are_refused() {
    let mut cases: Vec<(&str, u32, Option<u32>)> = vec![("world-writable", 0o777, None)];
    if euid() == 0 {
        cases.push(("owned by nobody", 0o700, Some(65534)));
    } else {
        skip::skipped(
            "a user directory owned by uid 65534",
            "needs root",
            skip::UnderCi::Provided,
        );
    }
    for (what, mode, owner) in cases {
        let dir = TempDir::new("stat-refused");
        let moddir = dir.provider_dir();
        let d = user_dir(dir.path());
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&d, Some(uid), None).unwrap();
        }
        let mut cmd = openssl_without_config();
        cmd.env("KAE_STATS_DIR", dir.path())
            .env("KAE_LOG", "warn")
            .args(["list", "-providers", "-provider-path"])
            .arg(&moddir)
            .args(["-provider", "kae"]);
        let out = run(&mut cmd, None, Duration::from_secs(60)).ok();
        let want = match owner {
            Some(uid) => format!("owned by uid {uid}, not by uid {}", euid()),
            None => format!("mode {mode:04o} lets other users in"),
        };
        assert!(
            out.stderr.contains("counters not published") && out.stderr.contains(&want),
            "{what}: no refusal ({want:?}) logged\n{}",
            out.describe()
        );
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            0,
            "{what}: something was written in the refused directory"
        );
        let out = run(
            Command::new(tool_bin("kae-stat")).env("KAE_STATS_DIR", dir.path()),
            None,
            Duration::from_secs(60),
        )
        .ok();
        assert!(
            out.stderr.contains(&want),
            "{what}: kae-stat does not report the refused directory\n{}",
            out.describe()
        );
    }
}

/// A page in one user's directory that names another user's process (a forgery: only that
/// user can write there) is neither shown nor able to hide the real one, and kae-stat says
/// what it skipped. Our own process is the victim here: the forged page sits in the directory
/// of uid 65534, made by root for the test.
#[test]
fn a_page_naming_another_users_process_is_skipped_and_reported() {
    if euid() == 0 {
        let dir = TempDir::new("stat-forged");
        // The real page of our own pid, in our directory.
        own_page(dir.path(), kae::stats::VERSION, kae::stats::PAGE_SIZE);
        // A copy with other counters, in nobody's directory.
        let real = page_path(dir.path(), std::process::id());
        let mut forged = std::fs::read(&real).unwrap();
        forged[72..80].copy_from_slice(&999_999u64.to_le_bytes());
        let other = dir.path().join("65534");
        std::fs::create_dir(&other).unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&other, Some(65534), None).unwrap();
        let name = real.file_name().unwrap().to_owned();
        std::fs::write(other.join(&name), &forged).unwrap();
        std::os::unix::fs::chown(other.join(&name), Some(65534), None).unwrap();
        let out = run(
            Command::new(tool_bin("kae-stat"))
                .env("KAE_STATS_DIR", dir.path())
                .arg("--json"),
            None,
            Duration::from_secs(60),
        )
        .ok();
        let shown = procs(&out.stdout);
        assert_eq!(
            shown,
            vec![(std::process::id(), 40)],
            "only the real page is shown\n{}",
            out.describe()
        );
        let want = format!("which runs as uid {}", euid());
        assert!(
            out.stderr.contains("skipped") && out.stderr.contains(&want),
            "kae-stat does not say what it skipped\n{}",
            out.describe()
        );
    } else {
        skip::skipped(
            "a page in uid 65534's directory",
            "needs root",
            skip::UnderCi::Provided,
        );
    }
}

/// `kae-stat --check`: exit 0 naming the backend when the configuration activates kae; exit 1
/// saying why when it does not (a wrong module path, which OpenSSL itself passes over in
/// silence; a bad value in kae's section; a file without kae).
#[test]
fn check_says_whether_a_configuration_activates_kae() {
    let dir = TempDir::new("stat-check");
    let moddir = dir.provider_dir();
    let conf = |name: &str, module: &str, extra: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "openssl_conf = init\n[init]\nproviders = prov\n[prov]\ndefault = dflt\n\
                 kae = kae_sect\n[dflt]\nactivate = 1\n[kae_sect]\nmodule = {module}\n\
                 activate = 1\n{extra}"
            ),
        )
        .unwrap();
        path
    };
    let check = |path: &Path| {
        run(
            Command::new(tool_bin("kae-stat"))
                .env("KAE_STATS_DIR", dir.path())
                .env("KAE_BACKEND", "cpu")
                .arg("--check")
                .arg("--conf")
                .arg(path),
            None,
            Duration::from_secs(60),
        )
    };
    let module = moddir.join("kae.so").display().to_string();

    let ok = check(&conf("good.cnf", &module, ""));
    assert_eq!(ok.status.code(), Some(0), "{}", ok.describe());
    assert!(
        ok.stdout.contains("OK: kae is active") && ok.stdout.contains("backend cpu"),
        "{}",
        ok.describe()
    );

    let wrong = format!("{}/kea.so", moddir.display());
    let out = check(&conf("wrong-path.cnf", &wrong, ""));
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    assert!(
        out.stderr.contains("leaves kae inactive")
            && out.stderr.contains(&format!("module = {wrong}"))
            && out.stderr.contains("No such file"),
        "{}",
        out.describe()
    );

    let out = check(&conf("bad-value.cnf", &module, "queues = abc\n"));
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    assert!(
        out.stderr.contains("config key 'queues'") && out.stderr.contains("leaves kae inactive"),
        "{}",
        out.describe()
    );

    let plain = dir.join("no-kae.cnf");
    std::fs::write(&plain, "openssl_conf = init\n[init]\n").unwrap();
    let out = check(&plain);
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    assert!(
        out.stderr.contains("no `module =` line"),
        "{}",
        out.describe()
    );

    let out = check(&dir.join("missing.cnf"));
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    assert!(out.stderr.contains("cannot read"), "{}", out.describe());
}
