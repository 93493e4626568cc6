//! A setgid program that loads kae ignores kae's environment overrides (`KAE_LOG_TARGET`,
//! `KAE_STATS_DIR`, …): otherwise any local user could make it create or append to files with
//! the program's privileges (see `src/env.rs`).
//!
//! Needs root (to make a setgid copy of `openssl` and run it as `nobody` with `setpriv`); run
//! as another user it prints SKIPPED. The copies live under cargo's target directory (not /tmp,
//! which may be mounted nosuid), and the test first checks with a setgid copy of `id` that the
//! kernel honours the bit there (no `nosuid` mount, no `no_new_privs`): if it does not, the
//! test fails, since it could not tell the fix from its absence.

mod procs;

use procs::{module_path, openssl_bin, run, CMD_LIMIT};
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unprivileged user the programs run as.
const NOBODY: u32 = 65534;
/// Group the setgid copies switch to: neither root nor `nobody`'s own group.
const SETGID_GROUP: u32 = 1;

/// A scratch directory removed on drop (it holds setgid binaries: never leave them behind).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Resolves a command name through PATH.
fn which(name: &str) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found in PATH"))
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain syscall on a NUL-terminated path.
    let r = unsafe { libc::chown(c.as_ptr(), uid, gid) };
    assert_eq!(
        r,
        0,
        "chown {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Copies `src` to `dir/name`, owned by root:SETGID_GROUP, mode 0755 plus setgid when `setgid`.
fn install_copy(src: &Path, dir: &Path, name: &str, setgid: bool) -> PathBuf {
    let dst = dir.join(name);
    fs::copy(src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    chown(&dst, 0, SETGID_GROUP);
    let mode = if setgid { 0o2755 } else { 0o755 };
    fs::set_permissions(&dst, fs::Permissions::from_mode(mode)).unwrap();
    dst
}

/// `setpriv` running `prog` as nobody:nogroup with no supplementary groups.
fn as_nobody(prog: &Path) -> Command {
    let mut c = Command::new(which("setpriv"));
    c.arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(prog);
    c
}

/// Whether every directory from `/` down to `dir` lets others through (o+x), so nobody
/// reaches the copies.
fn reachable_by_others(dir: &Path) -> bool {
    dir.ancestors().all(|a| {
        fs::metadata(a)
            .map(|m| m.permissions().mode() & 0o001 != 0)
            .unwrap_or(false)
    })
}

/// Whether the file system holding `dir` is mounted nosuid.
fn nosuid(dir: &Path) -> bool {
    let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs into a zeroed struct we own.
    unsafe {
        let mut st: libc::statvfs = core::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut st) != 0 || st.f_flag & libc::ST_NOSUID != 0
    }
}

#[test]
fn setgid_openssl_ignores_kae_environment() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED setgid_openssl_ignores_kae_environment: needs root (CI runs as root) to \
             make a setgid copy of openssl"
        );
        println!("SKIPPED");
        return;
    }
    let base = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
        std::env::temp_dir(),
    ]
    .into_iter()
    .find(|d| d.is_dir() && reachable_by_others(d) && !nosuid(d))
    .expect(
        "no directory where nobody can run a setgid program (target tmp dir, /var/tmp and the \
         temp dir are unreachable for others or mounted nosuid)",
    );
    let dir = Scratch(base.join(format!("kae-setgid-{}", std::process::id())));
    let _ = fs::remove_dir_all(&dir.0);
    fs::create_dir(&dir.0).unwrap();
    fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o755)).unwrap();
    // Where the runs may write if they honour the environment.
    let out = dir.0.join("out");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o777)).unwrap();
    let modules = dir.0.join("modules");
    fs::create_dir(&modules).unwrap();
    fs::set_permissions(&modules, fs::Permissions::from_mode(0o755)).unwrap();
    let module = modules.join("kae.so");
    fs::copy(module_path(), &module).unwrap();
    fs::set_permissions(&module, fs::Permissions::from_mode(0o755)).unwrap();

    // Does the kernel honour the setgid bit here? `id -g` prints the effective gid.
    let id = install_copy(&which("id"), &dir.0, "id-setgid", true);
    let probe = run(as_nobody(&id).arg("-g"), None, CMD_LIMIT).ok();
    assert_eq!(
        probe.stdout.trim(),
        SETGID_GROUP.to_string(),
        "a setgid copy of id run as nobody does not get gid {SETGID_GROUP}: setgid is not \
         honoured here (nosuid mount or no_new_privs?), so this test cannot check anything\n{}",
        probe.describe()
    );

    let openssl = which(&openssl_bin());
    let runs = [("plain", false), ("setgid", true)];
    for (name, setgid) in runs {
        let bin = install_copy(&openssl, &dir.0, &format!("openssl-{name}"), setgid);
        let log = out.join(format!("{name}.log"));
        let stats = out.join(format!("stats-{name}"));
        let mut cmd = as_nobody(&bin);
        cmd.env("OPENSSL_CONF", "/dev/null")
            .env("KAE_LOG", "debug")
            .env("KAE_LOG_TARGET", format!("file:{}", log.display()))
            .env("KAE_STATS_DIR", &stats)
            .args(["list", "-providers", "-provider-path"])
            .arg(&modules)
            .args(["-provider", "kae"]);
        let o = run(&mut cmd, None, CMD_LIMIT).ok();
        assert!(
            o.stdout.contains("kae") && o.stdout.contains("status: active"),
            "{name}: kae is not loaded and active\n{}",
            o.describe()
        );
        if setgid {
            assert!(
                !log.exists(),
                "the setgid openssl honoured KAE_LOG_TARGET and created {}:\n{}",
                log.display(),
                fs::read_to_string(&log).unwrap_or_default()
            );
            assert!(
                !stats.exists(),
                "the setgid openssl honoured KAE_STATS_DIR and created {}",
                stats.display()
            );
        } else {
            // The control: the same binary without the bit honours both.
            assert!(
                log.exists(),
                "the plain copy did not create its log {} (so the setgid check proves \
                 nothing)\n{}",
                log.display(),
                o.describe()
            );
            assert!(
                stats.exists(),
                "the plain copy did not create its stats directory {}",
                stats.display()
            );
        }
    }
}
