//! The operator-facing scripts in `scripts/`: every one answers `--help` and refuses an unknown
//! option without running anything; `scripts/install.sh` installs into a directory of the
//! user's own (no root), the lines it prints to try work as printed, and `--uninstall` removes
//! exactly what the install added, leaving the directory as it was found.
//!
//! Uses the already-built release artifacts (`install.sh --no-build`): libkae.so, kae-stat and
//! kae-press in the `release` directory next to this test binary (`cargo build --release`).
//! Takes a few seconds.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
