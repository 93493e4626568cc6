//! The operator-facing scripts in `scripts/`: every one answers `--help` and refuses an unknown
//! option without running anything; `scripts/install.sh` installs into a directory of the
//! user's own (no root), the lines it prints to try work as printed, and `--uninstall` removes
//! exactly what the install added, leaving the directory as it was found.
//!
//! Uses the already-built release artifacts (`install.sh --no-build`): libkae.so, kae-stat and
//! kae-press in the `release` directory next to this test binary (`cargo build --release`).
//! Takes a few seconds, and about a minute for the device pack (its kernel bench is built).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod skip;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("kae-scripts-{tag}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The directory holding the release build (this test binary lives in `<it>/deps/`).
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        profile_dir
    } else {
        profile_dir.parent().unwrap().join("release")
    }
}

/// Every script a user may run: the shell scripts and the python helpers of `scripts/`.
fn scripts() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(repo().join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("sh" | "py"))
        })
        .collect();
    v.sort();
    assert!(
        v.len() >= 15,
        "expected the scripts of scripts/, found {v:?}"
    );
    v
}

/// Commands a script would start when it actually runs (builds, measures, installs): each is
/// replaced by a stub that records its name in `log` and fails.
const STUBBED: &[&str] = &[
    "cargo", "rustc", "rustup", "openssl", "valgrind", "nginx", "haproxy", "taskset", "apt-get",
    "sudo", "make", "gcc", "cc", "perl", "install", "ln", "cp", "mktemp", "timeout", "git",
];

fn stub_dir(dir: &Path, log: &Path) -> PathBuf {
    let bin = dir.join("stub-bin");
    fs::create_dir_all(&bin).unwrap();
    for name in STUBBED {
        let p = bin.join(name);
        fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"{name} $*\" >>'{}'\nexit 97\n",
                log.display()
            ),
        )
        .unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// Runs `script args` (through bash or python3) with the stubs first in PATH.
fn run_script(script: &Path, args: &[&str], stubs: &Path) -> (Output, Duration) {
    run_script_env(script, args, stubs, &[])
}

/// `run_script` with more environment variables (set after the stubs' OPENSSL etc., so they
/// can replace them).
fn run_script_env(
    script: &Path,
    args: &[&str],
    stubs: &Path,
    env: &[(&str, &str)],
) -> (Output, Duration) {
    let interpreter = if script.extension().is_some_and(|e| e == "py") {
        "python3"
    } else {
        "bash"
    };
    let path = format!(
        "{}:{}",
        stubs.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let start = Instant::now();
    let out = Command::new(interpreter)
        .arg(script)
        .args(args)
        .current_dir(repo())
        .env("PATH", path)
        .env("CARGO", stubs.join("cargo"))
        .env("OPENSSL", stubs.join("openssl"))
        .env("VALGRIND", stubs.join("valgrind"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, start.elapsed())
}

#[test]
fn every_script_answers_help_and_refuses_unknown_options() {
    let scratch = Scratch::new("help");
    let log = scratch.0.join("ran.log");
    let stubs = stub_dir(&scratch.0, &log);
    let mut problems = Vec::new();
    for script in scripts() {
        let name = script.file_name().unwrap().to_string_lossy().into_owned();

        let (out, took) = run_script(&script, &["--help"], &stubs);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            problems.push(format!(
                "{name} --help: {} (stderr: {})",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        } else if stdout.trim().lines().count() < 2 {
            problems.push(format!("{name} --help: no help text on stdout: {stdout:?}"));
        }
        if took > Duration::from_secs(10) {
            problems.push(format!("{name} --help took {took:?}"));
        }

        let (out, took) = run_script(&script, &["--no-such-option"], &stubs);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            problems.push(format!("{name} --no-such-option: exit 0"));
        } else if out.status.code() == Some(97) {
            problems.push(format!(
                "{name} --no-such-option: failed in a stubbed command, not on the argument"
            ));
        }
        if stderr.trim().is_empty() {
            problems.push(format!("{name} --no-such-option: no message on stderr"));
        }
        if took > Duration::from_secs(10) {
            problems.push(format!("{name} --no-such-option took {took:?}"));
        }

        if let Ok(ran) = fs::read_to_string(&log) {
            if !ran.is_empty() {
                problems.push(format!(
                    "{name}: ran commands while only asked for --help or refusing an option:\n{ran}"
                ));
                fs::remove_file(&log).unwrap();
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Knob values a script cannot use are refused with a message and exit 2, before anything runs
/// (no build, no server, no openssl).
#[test]
fn bad_knobs_are_refused_before_anything_runs() {
    let scratch = Scratch::new("knobs");
    let log = scratch.0.join("ran.log");
    let stubs = stub_dir(&scratch.0, &log);
    let cases: &[(&str, &[(&str, &str)], &str)] = &[
        ("haproxy-bench.sh", &[("KEY_BITS", "3072")], "KEY_BITS"),
        ("haproxy-bench.sh", &[("KEY_BITS", "big")], "KEY_BITS"),
        ("nginx-bench.sh", &[("KEY_BITS", "1024")], "KEY_BITS"),
        ("mb-speed.sh", &[("ROWS", "a g")], "ROWS"),
        ("mb-speed.sh", &[("ROUNDS", "0")], "ROUNDS"),
        (
            "mb-speed.sh",
            &[("SECONDS_PER_RUN", "1.5")],
            "SECONDS_PER_RUN",
        ),
        ("mb-speed.sh", &[("ALGS", "rsa2048 ecdsap256")], "ecdsap256"),
        ("mb-speed.sh", &[("CPU0", "0-3")], "CPU0"),
        ("mb-speed.sh", &[("CLOCK", "both")], "CLOCK"),
        ("ifma-mix.sh", &[("CPU", "0-3")], "CPU"),
        ("ifma-mix.sh", &[("ROUNDS", "0")], "ROUNDS"),
        (
            "device-pack.sh",
            &[("CARRY_LIMIT_MB", "0")],
            "CARRY_LIMIT_MB",
        ),
        ("device-run.sh", &[("STEPS", "facts bench")], "STEPS"),
        (
            "device-run.sh",
            &[("KERNEL_SIZES", "2048,1536")],
            "KERNEL_SIZES",
        ),
        ("device-run.sh", &[("KERNEL_ROUNDS", "0")], "KERNEL_ROUNDS"),
        ("device-run.sh", &[("CPUS", "2-3")], "CPUS"),
        ("device-run.sh", &[("CPU0", "4095")], "CPU0"),
        ("device-run.sh", &[("ROWS", "a z")], "ROWS"),
        (
            "device-run.sh",
            &[("SECONDS_PER_RUN", "0.5")],
            "SECONDS_PER_RUN",
        ),
    ];
    let mut problems = Vec::new();
    for (name, env, word) in cases {
        let (out, _) = run_script_env(&repo().join("scripts").join(name), &[], &stubs, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) || !stderr.contains(word) {
            problems.push(format!(
                "{name} with {env:?}: {} (want exit 2 naming {word}), stderr: {}",
                out.status,
                stderr.trim()
            ));
        }
        if let Ok(ran) = fs::read_to_string(&log) {
            if !ran.is_empty() {
                problems.push(format!("{name} with {env:?} ran commands:\n{ran}"));
                fs::remove_file(&log).unwrap();
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The stub directory of an mb-speed.sh run, its log of stubbed commands and the path the
/// stand-in `openssl` logs its runs to. The script's own plumbing runs for real: its scratch
/// directory, copying the results.
fn mb_speed_stubs(scratch: &Scratch) -> (PathBuf, PathBuf, PathBuf) {
    let log = scratch.0.join("ran.log");
    let stubs = stub_dir(&scratch.0, &log);
    for tool in ["mktemp", "cp"] {
        fs::remove_file(stubs.join(tool)).unwrap();
    }
    (stubs, log, scratch.0.join("speed.log"))
}

/// Writes an executable `dir/name`.
fn write_exe(dir: &Path, name: &str, text: String) {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// scripts/mb-speed.sh end to end against a stand-in `openssl` that answers at once (kae's
/// runs at twice the default's sign/s) and says kae runs on `backend`: the first line names
/// the backend, the warning appears exactly when it is not "mb", every row of the matrix is
/// in the table with its ratio, and each row ran with its flags (rows a and b pinned).
fn mb_speed_with_fake_openssl(backend: &str) -> (String, String, String) {
    let scratch = Scratch::new(&format!("mb-speed-{backend}"));
    let (stubs, log, speed_log) = mb_speed_stubs(&scratch);
    let write_exe = |name: &str, text: String| write_exe(&stubs, name, text);
    write_exe(
        "openssl",
        format!(
            r#"#!/bin/sh
[ "$1" = version ] && {{ echo "OpenSSL 3.0.0 (stand-in)"; exit 0; }}
kae=0
for a in "$@"; do [ "$a" = -provider-path ] && kae=1; done
echo "kae=$kae $PINNED $*" >>'{log}'
[ $kae = 1 ] && echo "kae[1] INFO: kae 0.1.0 in OpenSSL 3.0.0: backend {backend} (auto; mb: stand-in (test)); pool 2 queues x depth 64, async offload auto (threads start at first use); default provider loaded privately and re-listed" >&2
for a in "$@"; do
    case $a in rsa*) echo "+F2:2:${{a#rsa}}:$((1000 + 1000 * kae)).0:40000.0" ;; esac
done
[ $kae = 1 ] && echo "kae[1] INFO: summary: private ops 10 ok / 0 failed (8 offloaded), public ops 5 ok / 0 failed (0 offloaded), async pauses 8, spurious resumes 0, queue-full retries 0, fallbacks 0, CRT faults 0, HW faults 0, MB batches 2 (avg 8.0 lanes), MB scalar 1" >&2
exit 0
"#,
            log = speed_log.display()
        ),
    );
    // taskset -c CPU CMD... and numactl -C CPU CMD...: run CMD, telling it how it was pinned.
    for (tool, flag) in [("taskset", "-c"), ("numactl", "-C")] {
        write_exe(
            tool,
            format!("#!/bin/sh\n[ \"$1\" = {flag} ] || exit 96\nPINNED=\"{tool}:$2\" export PINNED\nshift 2\nexec \"$@\"\n"),
        );
    }
    let module = scratch.0.join("kae.so");
    fs::write(&module, "not a module\n").unwrap();
    let out_dir = scratch.0.join("out");
    let (out, _) = run_script_env(
        &repo().join("scripts/mb-speed.sh"),
        &["--module", module.to_str().unwrap()],
        &stubs,
        &[
            ("OPENSSL", stubs.join("openssl").to_str().unwrap()),
            ("SECONDS_PER_RUN", "1"),
            ("ROUNDS", "2"),
            ("ALGS", "rsa2048 rsa4096"),
            ("CPU0", "1"),
            ("MULTI", "2"),
            ("OUT_DIR", out_dir.to_str().unwrap()),
            ("TMPDIR", scratch.0.to_str().unwrap()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "mb-speed.sh: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap_or_default(),
        "",
        "mb-speed.sh --module ran a stubbed command (a build?)"
    );
    let speed = fs::read_to_string(&speed_log).unwrap();
    (stdout, stderr, speed)
}

/// speed_table.py's "paired" column is the median of the per-round ratios, over the rounds
/// that measured both: with the host drifting between rounds (default 1000, 2000, 1500; kae
/// 1100, 1800, 3000 and a fourth round of its own) the ratio of the medians reads 1.60x, the
/// rounds 1.10x, 0.90x and 2.00x.
#[test]
fn speed_table_pairs_the_runs_of_each_round() {
    let scratch = Scratch::new("speed-table");
    let tsv = scratch.0.join("results.tsv");
    let rows = [
        ("default", 1, 1000),
        ("kae", 1, 1100),
        ("default", 2, 2000),
        ("kae", 2, 1800),
        ("kae", 3, 3000),
        ("default", 3, 1500),
        ("kae", 4, 9000),
    ];
    let text: String = rows
        .iter()
        .map(|(label, round, sign)| format!("{label}\tx\t{round}\t2048\t{sign}.0\t10.0\n"))
        .collect();
    fs::write(&tsv, format!("# a comment\n{text}")).unwrap();
    let out = Command::new("python3")
        .arg(repo().join("scripts/speed_table.py"))
        .args(["table", "default", "kae"])
        .arg(&tsv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Vec<&str> = stdout
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header.iter().filter(|h| **h == "paired").count(),
        2,
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("rsa2048 "))
        .unwrap_or_else(|| panic!("no rsa2048 row\n{stdout}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "rsa2048", "x", "1,500.0", "2,400.0", "1.60x", "1.10x", "10.0", "10.0", "1.00x",
            "1.00x", "3/4"
        ],
        "{stdout}"
    );
}

/// `mb-speed.sh --peer FILE`: a third provider (a stand-in named "rival") runs in every row
/// with kae's flags, takes its turn first in the rounds, and the table gains its medians and
/// kae / peer. A peer whose provider name is kae's is refused.
#[test]
fn mb_speed_peer_adds_a_column_run_with_kaes_flags() {
    let scratch = Scratch::new("mb-speed-peer");
    let (stubs, _log, speed_log) = mb_speed_stubs(&scratch);
    let write_exe = |name: &str, text: String| write_exe(&stubs, name, text);
    write_exe(
        "openssl",
        format!(
            r#"#!/bin/sh
[ "$1" = version ] && {{ echo "OpenSSL 3.0.0 (stand-in)"; exit 0; }}
who=default
prev=
for a in "$@"; do
    if [ "$prev" = -provider ]; then case $a in kae | rival) who=$a ;; esac; fi
    prev=$a
done
echo "$who $*" >>'{log}'
[ $who = kae ] && echo "kae[1] INFO: kae 0.1.0 in OpenSSL 3.0.0: backend mb (auto; mb: stand-in (test)); pool 2 queues x depth 64" >&2
case $who in kae) s=2000 ;; rival) s=1600 ;; *) s=1000 ;; esac
for a in "$@"; do
    case $a in rsa*) echo "+F2:2:${{a#rsa}}:$s.0:40000.0" ;; esac
done
[ $who = kae ] && echo "kae[1] INFO: summary: private ops 10 ok / 0 failed (8 offloaded), public ops 5 ok / 0 failed (0 offloaded), async pauses 8, MB batches 2 (avg 8.0 lanes), MB scalar 1" >&2
exit 0
"#,
            log = speed_log.display()
        ),
    );
    write_exe(
        "taskset",
        "#!/bin/sh\n[ \"$1\" = -c ] || exit 96\nshift 2\nexec \"$@\"\n".to_string(),
    );
    let module = scratch.0.join("kae.so");
    fs::write(&module, "not a module\n").unwrap();
    let peer_dir = scratch.0.join("peer");
    fs::create_dir_all(&peer_dir).unwrap();
    let peer = peer_dir.join("rival.so");
    fs::write(&peer, "not a module\n").unwrap();
    let out_dir = scratch.0.join("out");
    let env = [
        (
            "OPENSSL",
            stubs.join("openssl").to_str().unwrap().to_string(),
        ),
        ("SECONDS_PER_RUN", "1".into()),
        ("ROUNDS", "3".into()),
        ("ROWS", "a e".into()),
        ("ALGS", "rsa2048".into()),
        ("CLOCK", "cpu".into()),
        ("OUT_DIR", out_dir.to_str().unwrap().into()),
        ("TMPDIR", scratch.0.to_str().unwrap().into()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let script = repo().join("scripts/mb-speed.sh");
    let (out, _) = run_script_env(
        &script,
        &[
            "--module",
            module.to_str().unwrap(),
            "--peer",
            peer.to_str().unwrap(),
        ],
        &stubs,
        &env,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let speed = fs::read_to_string(&speed_log).unwrap_or_default();
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\nspeed runs:\n{speed}");
    assert!(
        out.status.success(),
        "mb-speed.sh --peer: {}\n{ctx}",
        out.status
    );
    for row in ["a:1core-async8", "e:async1", "e:async2", "e:sync"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{row} ")))
            .unwrap_or_else(|| panic!("no table row {row}\n{ctx}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            &cells[2..17],
            [
                "1,000.0", "2,000.0", "2.00x", "2.00x", "1,600.0", "1.25x", "1.25x", "40,000.0",
                "40,000.0", "1.00x", "1.00x", "40,000.0", "1.00x", "1.00x", "3/3/3"
            ],
            "{line}\n{ctx}"
        );
    }
    // The peer runs with kae's flags, beside the default provider, in each of the 3 rounds.
    let peer_runs = |flags: &str| {
        speed
            .lines()
            .filter(|l| {
                l.starts_with("rival ")
                    && l.contains(" -provider rival -provider default ")
                    && l.ends_with(&format!("{flags} rsa2048"))
            })
            .count()
    };
    assert_eq!(peer_runs("-multi 1 -async_jobs 8"), 3, "row a\n{ctx}");
    assert_eq!(peer_runs("-async_jobs 2"), 3, "row e async2\n{ctx}");
    // CLOCK=cpu: every run counts per CPU-second (no -elapsed), and the legend says so.
    let runs: Vec<&str> = speed.lines().filter(|l| l.contains(" speed ")).collect();
    assert!(
        runs.len() > 1 && runs.iter().all(|l| !l.contains("-elapsed")),
        "{ctx}"
    );
    assert!(stdout.contains("per user CPU-second, CLOCK=cpu"), "{ctx}");
    // Each provider opens one round.
    for (round, first) in [(1, "default"), (2, "kae"), (3, "rival")] {
        let opener = stderr
            .lines()
            .find(|l| l.contains(&format!("round {round}/3 ")) && l.contains("a:1core-async8"))
            .unwrap_or_else(|| panic!("no round {round}\n{ctx}"));
        let label = if first == "rival" { "peer" } else { first };
        assert!(
            opener.contains(&format!("  {label}  ")),
            "round {round} opens with {opener}\n{ctx}"
        );
    }

    let same_name = scratch.0.join("kae-copy");
    fs::create_dir_all(&same_name).unwrap();
    let clash = same_name.join("kae.so");
    fs::write(&clash, "not a module\n").unwrap();
    let (out, _) = run_script_env(
        &script,
        &[
            "--module",
            module.to_str().unwrap(),
            "--peer",
            clash.to_str().unwrap(),
        ],
        &stubs,
        &env,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("provider name 'kae'"), "{stderr}");
}

#[test]
fn mb_speed_names_the_backend_and_runs_the_matrix() {
    let (stdout, stderr, speed) = mb_speed_with_fake_openssl("cpu");
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\nspeed runs:\n{speed}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap_or("")
            .starts_with("kae backend: cpu "),
        "first line does not name the backend\n{ctx}"
    );
    let warning = "kae ran on the cpu backend: these rows do not measure the multi-buffer kernel";
    assert!(
        stdout.lines().nth(1).unwrap_or("").contains(warning),
        "no warning right after the backend line\n{ctx}"
    );
    // Every row of the matrix, with both providers' medians and the ratio (kae 2000, default 1000).
    let table_rows: &[(&str, &[&str])] = &[
        ("a:1core-async8", &["rsa2048", "rsa4096"]),
        ("b:1core-async4", &["rsa2048", "rsa4096"]),
        ("c:multi2,kae-async16", &["rsa2048"]),
        ("d:kae-async16,default-sync", &["rsa2048"]),
        ("e:async1", &["rsa2048"]),
        ("e:async2", &["rsa2048"]),
        ("e:sync", &["rsa2048"]),
    ];
    for (row, algs) in table_rows {
        for alg in ["rsa2048", "rsa3072", "rsa4096"] {
            let line = stdout.lines().find(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(row) && w.next() == Some(alg)
            });
            if algs.contains(&alg) {
                let line = line.unwrap_or_else(|| panic!("no table row {row} {alg}\n{ctx}"));
                let cells: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(
                    &cells[2..11],
                    [
                        "1,000.0", "2,000.0", "2.00x", "2.00x", "40,000.0", "40,000.0", "1.00x",
                        "1.00x", "2/2"
                    ],
                    "{line}\n{ctx}"
                );
            } else {
                assert!(line.is_none(), "unexpected table row {row} {alg}\n{ctx}");
            }
        }
    }
    // The probe, then 7 rows x 2 rounds x 2 providers; the flags of each run.
    let runs: Vec<&str> = speed.lines().collect();
    assert_eq!(runs.len(), 1 + 7 * 2 * 2, "{ctx}");
    let count = |kae: bool, pinned: &str, flags: &str, algs: &str| {
        // "kae=K PINNED speed ARGS": who ran, how it was pinned (empty: not), its arguments.
        let who = format!("kae={} {pinned}", u8::from(kae));
        runs.iter()
            .filter(|l| {
                l.split_once(" speed ").is_some_and(|(head, args)| {
                    head.trim_end() == who.trim_end()
                        && args.starts_with("-mr -elapsed -seconds 1 ")
                        && args.ends_with(&format!(" {flags} {algs}"))
                })
            })
            .count()
    };
    let two = "rsa2048 rsa4096";
    let both = [false, true];
    for kae in both {
        assert_eq!(
            count(kae, "taskset:1", "-multi 1 -async_jobs 8", two),
            2,
            "row a\n{ctx}"
        );
        assert_eq!(
            count(kae, "numactl:1", "-multi 1 -async_jobs 4", two),
            2,
            "row b\n{ctx}"
        );
        assert_eq!(
            count(kae, "", "-async_jobs 1", "rsa2048"),
            2,
            "row e async1\n{ctx}"
        );
        assert_eq!(
            count(kae, "", "-async_jobs 2", "rsa2048"),
            2,
            "row e async2\n{ctx}"
        );
    }
    assert_eq!(
        count(true, "", "-multi 2 -async_jobs 16", "rsa2048"),
        2,
        "row c kae\n{ctx}"
    );
    assert_eq!(
        count(false, "", "-multi 2", "rsa2048"),
        2,
        "row c default\n{ctx}"
    );
    assert_eq!(
        count(true, "", "-async_jobs 16", "rsa2048"),
        4,
        "rows c+d kae\n{ctx}"
    );
    // Sync runs: d's default and e:sync, both providers (and the probe, without -mr).
    let sync = runs
        .iter()
        .filter(|l| l.contains("-mr") && !l.contains("-async_jobs") && !l.contains("-multi"))
        .count();
    assert_eq!(sync, 2 + 2 * 2, "sync runs\n{ctx}");
    // Rounds alternate who goes first: default first in round 1, kae first in round 2.
    assert!(
        stderr.contains("round 1/2  default  a:1core-async8")
            && stderr.contains("round 2/2  kae  a:1core-async8"),
        "{ctx}"
    );
    assert!(
        stdout.contains("MB batches 4 (avg 8.0 lanes), MB scalar 2"),
        "kae's summaries not summed per row\n{ctx}"
    );
    assert!(
        stdout.contains("results: ") && stdout.contains("chart:   "),
        "{ctx}"
    );
}

#[test]
fn mb_speed_does_not_warn_on_the_mb_backend() {
    let (stdout, stderr, _) = mb_speed_with_fake_openssl("mb");
    assert!(
        stdout.starts_with("kae backend: mb "),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        !stdout.contains("WARNING") && !stderr.contains("WARNING"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// Every file and directory under `dir` (relative path -> (is_dir, size, mode)).
fn tree(dir: &Path) -> BTreeMap<PathBuf, (bool, u64, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (bool, u64, u32)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let md = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            out.insert(
                rel,
                (
                    md.is_dir(),
                    if md.is_dir() { 0 } else { md.len() },
                    md.permissions().mode(),
                ),
            );
            if md.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn install_cmd(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("bash");
    c.arg(repo().join("scripts/install.sh"))
        .args(args)
        .current_dir(root)
        .env("MODULESDIR", root.join("local/lib"))
        .env("PREFIX", root.join("local"))
        .env("CARGO_TARGET_DIR", release_dir().parent().unwrap())
        .env_remove("DESTDIR")
        .env_remove("OPENSSL_CONF")
        .env_remove("OPENSSL_MODULES")
        .stdin(Stdio::null());
    c
}

fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn install_try_lines_and_uninstall_in_a_directory_of_ones_own() {
    let release = release_dir();
    for f in ["libkae.so", "kae-stat", "kae-press"] {
        assert!(
            release.join(f).is_file(),
            "{} missing: run cargo build --release first",
            release.join(f).display()
        );
    }
    let scratch = Scratch::new("install");
    let root = &scratch.0;
    // Something of the user's own, inside a directory the install also uses: both stay.
    fs::create_dir_all(root.join("local/bin")).unwrap();
    fs::write(root.join("local/bin/mine"), "not kae's\n").unwrap();
    fs::write(root.join("notes.txt"), "mine too\n").unwrap();
    let before = tree(root);

    let stdout = ok(
        install_cmd(root, &["--no-build"]).output().unwrap(),
        "install",
    );
    let after = tree(root);

    // The manifest lists exactly the files that appeared, and the directories made for them.
    let manifest_path = root.join("local/share/kae/install-manifest");
    let manifest = fs::read_to_string(&manifest_path).unwrap();
    let mut listed_files = Vec::new();
    let mut listed_dirs = Vec::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (kind, path) = line.split_once(' ').unwrap();
        let rel = Path::new(path).strip_prefix(root).unwrap().to_path_buf();
        match kind {
            "file" => listed_files.push(rel),
            "dir" => listed_dirs.push(rel),
            _ => panic!("manifest line {line:?}"),
        }
    }
    let mut new_files: Vec<PathBuf> = after
        .iter()
        .filter(|(p, (is_dir, ..))| !is_dir && !before.contains_key(*p))
        .map(|(p, _)| p.clone())
        .collect();
    let mut new_dirs: Vec<PathBuf> = after
        .iter()
        .filter(|(p, (is_dir, ..))| *is_dir && !before.contains_key(*p))
        .map(|(p, _)| p.clone())
        .collect();
    listed_files.sort();
    listed_dirs.sort();
    new_files.sort();
    new_dirs.sort();
    assert_eq!(listed_files, new_files, "manifest files vs files installed");
    assert_eq!(
        listed_dirs, new_dirs,
        "manifest directories vs directories made"
    );
    for f in [
        "local/lib/kae.so",
        "local/bin/kae-stat",
        "local/bin/kae-press",
        "local/share/kae/openssl-prefer-kae.cnf",
    ] {
        assert!(new_files.contains(&PathBuf::from(f)), "{f} not installed");
    }

    // The printed lines to try, run as printed (through a shell, with no OpenSSL variables
    // inherited): each lists kae as active.
    let tries: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Try"))
        .filter(|l| l.contains("openssl list -providers"))
        .map(str::trim)
        .collect();
    assert!(tries.len() >= 2, "no lines to try in:\n{stdout}");
    for line in &tries {
        let out = Command::new("bash")
            .args(["-c", line])
            .current_dir(root)
            .env_remove("OPENSSL_CONF")
            .env_remove("OPENSSL_MODULES")
            .output()
            .unwrap();
        let listed = ok(out, line);
        assert!(
            listed.lines().any(|l| l.trim() == "kae") && listed.contains("status: active"),
            "`{line}` does not list kae:\n{listed}"
        );
    }
    let stat_line = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Try"))
        .find(|l| l.contains("kae-stat"))
        .expect("a kae-stat line to try");
    ok(
        Command::new("bash")
            .args(["-c", stat_line.trim()])
            .output()
            .unwrap(),
        stat_line,
    );

    // Again: nothing changes, the manifest stays the same.
    let again = ok(
        install_cmd(root, &["--no-build"]).output().unwrap(),
        "second install",
    );
    assert!(
        !again.contains("installed  "),
        "second install replaced files:\n{again}"
    );
    assert_eq!(fs::read_to_string(&manifest_path).unwrap(), manifest);

    ok(
        install_cmd(root, &["--uninstall"]).output().unwrap(),
        "uninstall",
    );
    assert_eq!(
        tree(root),
        before,
        "uninstall did not leave the directory as found"
    );

    // Without a manifest, --uninstall refuses and says why.
    let out = install_cmd(root, &["--uninstall"]).output().unwrap();
    assert!(
        !out.status.success(),
        "uninstall without a manifest exited 0"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("manifest"),
        "uninstall without a manifest: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree(root), before);
}

/// `scripts/device-pack.sh --out OUT` with `module` as kae.so and this test build's target
/// directory (the kernel bench is built there, as `scripts/test.sh` builds the benches).
fn device_pack(out: &Path, module: &Path) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/device-pack.sh"))
        .arg("--out")
        .arg(out)
        .current_dir(repo())
        .env("NO_BUILD", "1")
        .env("KAE_MODULE", module)
        .env("CARGO_TARGET_DIR", release_dir().parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `scripts/device-pack.sh` packs this tree's module, kernel bench and openssl with the loader
/// and libraries they load; run through the packed loader, they work with this machine's
/// library directories hidden (a mount namespace with empty ones over them, as on a device
/// machine whose libraries differ); `scripts/device-run.sh` then times a short kernel and
/// provider run from the pack and writes its tables.
#[test]
fn device_pack_runs_without_the_hosts_libraries() {
    let module = release_dir().join("kae.so");
    assert!(
        module.is_file(),
        "{} missing: run scripts/build.sh first",
        module.display()
    );
    let scratch = Scratch::new("device-pack");
    let pack = scratch.0.join("pack");

    // A directory of the user's given as --out by mistake is refused, untouched.
    let mine = scratch.0.join("mine");
    fs::create_dir_all(&mine).unwrap();
    fs::write(mine.join("notes.txt"), "mine\n").unwrap();
    let out = device_pack(&mine, &module);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "mine\n"
    );
    let said = ok(device_pack(&pack, &module), "device-pack.sh");
    assert!(said.contains("device pack:"), "{said}");
    let manifest = fs::read_to_string(pack.join("MANIFEST")).unwrap();
    for f in [
        "bench/tree",
        "bin/kae.so",
        "bin/openssl.elf",
        "lib/ld-linux-x86-64.so.2",
        "lib/libc.so.6",
        "lib/libcrypto.so.3",
    ] {
        assert!(
            manifest.contains(&format!("  {f}\n")),
            "{f} not packed:\n{manifest}"
        );
    }

    // The packed programs with the host's library directories hidden. The packed loader is
    // started by its path, so the host's own loader is never used; `mount` itself needs the
    // libraries of /lib/x86_64-linux-gnu where that is a directory of its own: hidden last.
    let p = pack.display();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"] {
        if let Ok(c) = fs::canonicalize(d) {
            if !dirs.contains(&c) {
                dirs.push(c);
            }
        }
    }
    let hide: String = dirs
        .iter()
        .map(|d| format!("mount -t tmpfs none {} || exit 90; ", d.display()))
        .collect();
    let r = scratch.0.join("hidden");
    fs::create_dir_all(&r).unwrap();
    let r = r.display();
    let script = format!(
        "{hide}\
         L=\"{p}/lib/ld-linux-x86-64.so.2 --library-path {p}/lib\"; \
         export OPENSSL_CONF=/dev/null KAE_LOG=info; \
         $L {p}/bin/openssl.elf version >{r}/version 2>&1 || exit 91; \
         $L {p}/bin/openssl.elf speed -seconds 1 -provider-path {p}/bin -provider kae rsa2048 \
            >{r}/speed 2>{r}/speed.err || exit 92; \
         MB_BENCH_ROUNDS=1 MB_BENCH_SIZES=1024 $L {p}/bench/tree --bench >{r}/bench 2>&1 || exit 93"
    );
    let hidden = Command::new("unshare")
        .args(["-m", "bash", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let read = |f: &str| fs::read_to_string(scratch.0.join("hidden").join(f)).unwrap_or_default();
    match hidden.status.code() {
        Some(0) => {
            assert!(
                read("version").starts_with("OpenSSL 3"),
                "{}",
                read("version")
            );
            assert!(
                read("speed").contains("rsa 2048 bits") && read("speed.err").contains("backend "),
                "speed with kae from the pack:\n{}\n{}",
                read("speed"),
                read("speed.err")
            );
            assert!(
                read("bench").contains("RSA-1024"),
                "bench:\n{}",
                read("bench")
            );
        }
        Some(90) | None => skip::skipped(
            "device pack with the host's libraries hidden",
            &format!(
                "no mount namespace here (unshare -m needs root): {}",
                String::from_utf8_lossy(&hidden.stderr).trim()
            ),
            skip::UnderCi::Provided,
        ),
        Some(c) => panic!(
            "a packed program failed with the host's libraries hidden (step {c}): {}\n\
             version: {}\nspeed: {}{}\nbench: {}",
            String::from_utf8_lossy(&hidden.stderr),
            read("version"),
            read("speed"),
            read("speed.err"),
            read("bench")
        ),
    }

    // The prepared run, short: its kernel table and the provider's.
    let results = scratch.0.join("results");
    let out = Command::new("bash")
        .arg(repo().join("scripts/device-run.sh"))
        .arg(&pack)
        .current_dir(repo())
        .env("OUT", &results)
        .env("KERNEL_ROUNDS", "2")
        .env("KERNEL_SIZES", "1024")
        .env("ROWS", "a")
        .env("ROUNDS", "1")
        .env("SECONDS_PER_RUN", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = ok(out, "device-run.sh");
    let kernel = fs::read_to_string(results.join("kernel.txt")).unwrap();
    let row = kernel
        .lines()
        .find(|l| l.starts_with("tree ") && l.contains("RSA-1024"))
        .unwrap_or_else(|| panic!("no RSA-1024 row for the bench:\n{kernel}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.len(), 8, "{row}");
    assert_eq!(cols[3], "2", "two rounds: {row}");
    assert!(cols[5].parse::<f64>().is_ok_and(|us| us > 0.0), "{row}");
    let ifma = fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .split_whitespace()
        .any(|w| w == "avx512ifma");
    if ifma {
        assert_eq!(cols[2], "ifma", "{row}");
    } else {
        assert_eq!(cols[2], "portable", "{row}");
        assert!(
            said.contains("WARNING: this CPU has no AVX-512 IFMA"),
            "{said}"
        );
    }
    let provider = fs::read_to_string(results.join("provider.txt")).unwrap();
    assert!(
        provider.contains("a:1core-async8") && provider.contains("rsa2048"),
        "{provider}"
    );
    assert!(fs::read_to_string(results.join("facts.txt"))
        .unwrap()
        .contains("AVX-512 IFMA"));
}
