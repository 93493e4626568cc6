//! Helpers shared by the integration tests that run other programs (`openssl`, haproxy, nginx,
//! kae-press, kae-stat): scratch directories, locating the provider module under test, free
//! loopback ports, running a child with a time limit, killing children on drop, `openssl`
//! command builders, a managed `openssl s_server`, a TLS client for the servers under test,
//! and parsing of `openssl speed` output and of kae's exit summary line.
//!
//! Use it as `mod procs;`. Every integration test is a crate of its own and uses only part of
//! this module, hence `allow(dead_code)` (as in `tests/common`). It needs std and the
//! `openssl` crate only.
//!
//! Environment:
//! * `KAE_MODULE`: the provider module to test (a path) instead of the `libkae.so` cargo built.
//! * `KAE_TEST_OPENSSL`: the openssl binary to run (default `openssl` from PATH).
//! * `KAE_TEST_KEEP=1`: keep the scratch directories of passing tests too (those of failing
//!   tests are always kept and their path is printed).
#![allow(dead_code)]

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time limit for one ordinary command (see [`run`], [`run_ok`]).
pub const CMD_LIMIT: Duration = Duration::from_secs(60);

/// kae's environment settings; [`openssl_in`] removes them so that values inherited from the
/// caller's shell cannot change what a test sees.
pub const KAE_SETTINGS: [&str; 7] = [
    "KAE_QUEUES",
    "KAE_QUEUE_DEPTH",
    "KAE_ASYNC",
    "KAE_BACKEND",
    "KAE_LOG",
    "KAE_LOAD_DEFAULT",
    "KAE_SPIN_US",
];

// ---------------------------------------------------------------------------------------------
// Locations
// ---------------------------------------------------------------------------------------------

/// The provider module under test: `$KAE_MODULE` when set and non-empty, else the `libkae.so`
/// cargo built for this test run. The test binary is `target/<profile>/deps/<name>-<hash>`;
/// `cargo test` refreshes `deps/libkae.so` (only `cargo build` refreshes the copy in
/// `target/<profile>/`), so that one is preferred. Panics when neither exists.
pub fn module_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KAE_MODULE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe() failed");
    let deps = exe
        .parent()
        .unwrap_or_else(|| panic!("test binary {} has no directory", exe.display()));
    let candidates = [
        deps.join("libkae.so"),
        deps.parent()
            .map(|p| p.join("libkae.so"))
            .unwrap_or_default(),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "provider module not found at {candidates:?} (cargo builds it with the tests; \
                 set KAE_MODULE to override)"
            )
        })
}

/// A binary of the kae-tools package (`kae-stat`, `kae-press`): `$KAE_STAT` / `$KAE_PRESS`
/// when set and non-empty, else `target/<profile>/<name>`, next to the `deps/` directory of
/// this test binary. The tools are another package of the workspace, so cargo does not build
/// them for this package's tests and gives no `CARGO_BIN_EXE_` path: `cargo test --workspace`
/// (the default at the root) or `cargo build --release --workspace` builds them. Panics when
/// the binary is missing or older than one of its own sources (`tools/src/press` for
/// kae-press, `tools/src/stat` for kae-stat) or of kae-counters (a stale
/// tool must not pass or fail a test in the current tree's name); this test does not run
/// cargo itself, as the cargo running it may hold the build lock.
pub fn tool_bin(name: &str) -> PathBuf {
    let var = name.to_ascii_uppercase().replace('-', "_");
    if let Some(p) = std::env::var_os(&var).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe() failed");
    let profile_dir = exe.parent().and_then(Path::parent).unwrap_or_else(|| {
        panic!(
            "test binary {} is not in target/<profile>/deps",
            exe.display()
        )
    });
    let bin = profile_dir.join(name);
    let profile = profile_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let build = match profile.as_str() {
        "debug" => "cargo build --workspace".to_string(),
        "release" => "cargo build --release --workspace".to_string(),
        p => format!("cargo build --profile {p} --workspace"),
    };
    let built = fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "{name} not found at {} ({e}): it is built by the kae-tools package; run \
                 `{build}` (or `cargo test --workspace`), or set {var}",
                bin.display()
            )
        });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newer = Vec::new();
    // The tool's own sources (tools/src/press for kae-press) and the counters crate it uses;
    // a change to the other tool does not make this one stale.
    let own = root.join("tools/src").join(name.trim_start_matches("kae-"));
    let mut dirs = vec![own, root.join("counters/src")];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => dirs.push(p),
                Ok(m) if m.modified().is_ok_and(|t| t > built) => newer.push(p),
                _ => {}
            }
        }
    }
    assert!(
        newer.is_empty(),
        "{} is older than {newer:?}: run `{build}` (or `cargo test --workspace`), or set {var}",
        bin.display()
    );
    bin
}

/// Creates `dir` (if needed) holding `kae.so` → [`module_path`], the directory to give
/// `openssl -provider-path` for `-provider kae`; returns `dir`.
pub fn provider_dir_at(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let link = dir.join("kae.so");
    symlink(module_path(), &link)
        .unwrap_or_else(|e| panic!("cannot create the symlink {}: {e}", link.display()));
    dir.to_path_buf()
}

/// A free TCP port on 127.0.0.1 (bound to port 0, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local_addr of a bound listener")
        .port()
}

// ---------------------------------------------------------------------------------------------
// Scratch directories
// ---------------------------------------------------------------------------------------------

/// A fresh scratch directory `<temp dir>/kae-<tag>-<pid>-<n>-<nanos>`. Removed on drop when
/// the test passed; kept (and its path printed) when the thread is panicking or
/// `KAE_TEST_KEEP` is set.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates the directory; `tag` names the test (file) it belongs to.
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!("kae-{tag}-{}-{n}-{nanos}", std::process::id()));
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("cannot create {}: {e}", p.display()));
        TempDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }

    /// [`join`](Self::join) as a string, for command arguments.
    pub fn p(&self, name: impl AsRef<Path>) -> String {
        self.join(name).to_string_lossy().into_owned()
    }

    /// `<dir>/modules` holding `kae.so` (see [`provider_dir_at`]).
    pub fn provider_dir(&self) -> PathBuf {
        provider_dir_at(&self.join("modules"))
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if thread::panicking() || std::env::var_os("KAE_TEST_KEEP").is_some() {
            eprintln!("kept test directory {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting and running with a time limit
// ---------------------------------------------------------------------------------------------

/// Calls `f` every `every` until it returns `Some` (returned) or `limit` has passed (`None`).
/// `f` runs at least once.
fn poll<T>(limit: Duration, every: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() >= limit {
            return None;
        }
        thread::sleep(every);
    }
}

/// Polls `f` every 50 ms until it returns `Some` (returned) or `limit` passes (`None`).
pub fn wait_for<T>(limit: Duration, f: impl FnMut() -> Option<T>) -> Option<T> {
    poll(limit, Duration::from_millis(50), f)
}

/// Polls `f` every 50 ms until it returns true; panics when `limit` passes first.
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    if wait_for(limit, || f().then_some(())).is_none() {
        panic!("timed out after {limit:?} waiting for {what}");
    }
}

/// Waits up to `limit` for `child` to exit; `None` when it is still running (it is not
/// killed). Panics when waiting itself fails.
pub fn wait_deadline(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    poll(limit, Duration::from_millis(10), || {
        match child.try_wait() {
            Ok(st) => st,
            Err(e) => panic!("waiting for child {} failed: {e}", child.id()),
        }
    })
}

/// Reads `r` to its end on a thread of its own.
fn read_to_end_in_background<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// What a finished command did (from [`run`]).
pub struct Output {
    /// The command line, for messages.
    pub cmd: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Everything about the run, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {:?} (signal {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmd,
            self.status.code(),
            self.status.signal(),
            self.stdout,
            self.stderr
        )
    }

    /// Exit status 0, else panic with everything the command printed.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert!(self.status.success(), "command failed\n{}", self.describe());
        self
    }

    /// A clean failure: a non-zero exit code, not a crash by signal.
    #[track_caller]
    pub fn failed_cleanly(self) -> Self {
        assert!(
            self.status.signal().is_none(),
            "command was killed by a signal (crash?)\n{}",
            self.describe()
        );
        assert!(
            matches!(self.status.code(), Some(c) if c != 0),
            "command unexpectedly succeeded\n{}",
            self.describe()
        );
        self
    }

    /// Panics unless stdout contains `needle`.
    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }
}

/// Runs `cmd` with `input` written to its stdin (stdin is closed when `None`), collecting
/// stdout and stderr on reader threads. When it runs longer than `limit` it is killed and this
/// panics with what it printed so far.
pub fn run(cmd: &mut Command, input: Option<&[u8]>, limit: Duration) -> Output {
    let desc = format!("{cmd:?}");
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {desc}: {e}"));
    if let Some(data) = input {
        let data = data.to_vec();
        let mut stdin = child.stdin.take().expect("stdin");
        thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
    }
    let out_t = read_to_end_in_background(child.stdout.take().expect("stdout"));
    let err_t = read_to_end_in_background(child.stderr.take().expect("stderr"));
    let (status, timed_out) = match wait_deadline(&mut child, limit) {
        Some(st) => (st, false),
        None => {
            let _ = child.kill();
            (child.wait().expect("wait after kill"), true)
        }
    };
    let out = Output {
        cmd: desc,
        status,
        stdout: String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned(),
    };
    if timed_out {
        panic!("command timed out after {limit:?}\n{}", out.describe());
    }
    out
}

/// Runs `cmd` (stdin closed, [`CMD_LIMIT`]); panics with its output unless it exits 0.
/// Returns its stdout.
#[track_caller]
pub fn run_ok(cmd: &mut Command) -> String {
    run(cmd, None, CMD_LIMIT).ok().stdout
}

/// A child process that is killed (and reaped) on drop, so a failing test leaves nothing
/// running. Killing one that has already been reaped does nothing.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// openssl
// ---------------------------------------------------------------------------------------------

/// The openssl binary: `$KAE_TEST_OPENSSL`, default `openssl` from PATH.
pub fn openssl_bin() -> String {
    std::env::var("KAE_TEST_OPENSSL").unwrap_or_else(|_| "openssl".to_string())
}

/// `openssl` run in `dir` with the system configuration (default provider only): the
/// caller's OPENSSL_CONF, OPENSSL_MODULES, OPENSSL_ENGINES and [`KAE_SETTINGS`] are removed.
pub fn openssl_in(dir: &Path) -> Command {
    let mut c = Command::new(openssl_bin());
    c.current_dir(dir)
        .env_remove("OPENSSL_CONF")
        .env_remove("OPENSSL_MODULES")
        .env_remove("OPENSSL_ENGINES");
    for k in KAE_SETTINGS {
        c.env_remove(k);
    }
    // And any other KAE_* variable of the caller (settings added later, KAE_LOG_TARGET,
    // KAE_STATS_DIR, ...): the child gets only what the test sets.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("KAE_") {
            c.env_remove(k);
        }
    }
    c
}

/// `openssl` with `OPENSSL_CONF=/dev/null`: no configuration file at all, so only the default
/// provider is loaded.
pub fn openssl_without_config() -> Command {
    let mut c = Command::new(openssl_bin());
    c.env("OPENSSL_CONF", "/dev/null");
    c
}

/// Arguments for `openssl` that make a 2048-bit RSA key (`key`, unencrypted) and a
/// self-signed certificate for `/CN=<cn>` valid for two days (`cert`).
pub fn self_signed_cert_args(
    key: impl AsRef<OsStr>,
    cert: impl AsRef<OsStr>,
    cn: &str,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    v.push(format!("/CN={cn}").into());
    v.push("-keyout".into());
    v.push(key.as_ref().to_owned());
    v.push("-out".into());
    v.push(cert.as_ref().to_owned());
    v
}

/// Writes `<dir>/openssl.cnf` activating kae ([`module_path`]) and the default provider with
/// kae preferred (`default_properties = ?provider=kae`); returns its path.
pub fn write_prefer_kae_config(dir: &Path) -> PathBuf {
    let text = format!(
        "openssl_conf = openssl_init\n\
         \n\
         [openssl_init]\n\
         providers = provider_sect\n\
         alg_section = algorithm_sect\n\
         \n\
         [provider_sect]\n\
         kae = kae_sect\n\
         default = default_sect\n\
         \n\
         [kae_sect]\n\
         module = {}\n\
         activate = 1\n\
         \n\
         [default_sect]\n\
         activate = 1\n\
         \n\
         [algorithm_sect]\n\
         default_properties = ?provider=kae\n",
        module_path().display()
    );
    let p = dir.join("openssl.cnf");
    fs::write(&p, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    p
}

/// A running `openssl s_server` whose stdout lines and stderr are collected; killed on drop.
/// Its stdin stays open (and silent): EOF on stdin would make s_server quit.
pub struct SServer {
    pub child: KillOnDrop,
    _stdin: ChildStdin,
    lines: Receiver<String>,
    /// What it printed on stdout so far (complete after [`finish`](Self::finish)).
    pub stdout: String,
    /// What it printed on stderr so far (complete after [`finish`](Self::finish)).
    pub stderr: Arc<Mutex<String>>,
    err_thread: Option<thread::JoinHandle<()>>,
    pub port: u16,
}

impl SServer {
    /// Starts `make(port)`, an `openssl s_server` command accepting on `127.0.0.1:<port>`, on a
    /// free port and waits (20 s) until it prints `ACCEPT`. A port taken meanwhile means
    /// another try on another port (5 in all); any other early exit panics.
    pub fn start(mut make: impl FnMut(u16) -> Command) -> SServer {
        let mut last_err = String::new();
        for _attempt in 0..5 {
            let port = free_port();
            let mut cmd = make(port);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
            let stdin = child.stdin.take().expect("stdin");
            let out = child.stdout.take().expect("stdout");
            let err = child.stderr.take().expect("stderr");
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let stderr = Arc::new(Mutex::new(String::new()));
            let err_sink = Arc::clone(&stderr);
            let err_thread = thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let mut s = err_sink.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            });
            let mut server = SServer {
                child: KillOnDrop(child),
                _stdin: stdin,
                lines: rx,
                stdout: String::new(),
                stderr,
                err_thread: Some(err_thread),
                port,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            match server.read_stdout(deadline, |line| line.trim() == "ACCEPT") {
                Ok(()) => return server,
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "s_server did not print ACCEPT in time\n{}",
                        server.describe()
                    );
                }
                Err(RecvTimeoutError::Disconnected) => {
                    // It exited before listening: another port if this one was taken,
                    // a failure otherwise.
                    let _ = wait_deadline(&mut server.child.0, Duration::from_secs(5));
                    thread::sleep(Duration::from_millis(50));
                    last_err = server.describe();
                    if !(last_err.contains("in use") || last_err.contains("bind")) {
                        panic!("s_server exited before listening\n{last_err}");
                    }
                }
            }
        }
        panic!("could not start s_server on a free port\n{last_err}");
    }

    /// Appends stdout lines to `stdout` until one satisfies `stop` (`Ok`), or stdout closes
    /// (`Disconnected`) or `deadline` passes (`Timeout`) first.
    fn read_stdout(
        &mut self,
        deadline: Instant,
        stop: impl Fn(&str) -> bool,
    ) -> Result<(), RecvTimeoutError> {
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))?;
            self.stdout.push_str(&line);
            self.stdout.push('\n');
            if stop(&line) {
                return Ok(());
            }
        }
    }

    /// `127.0.0.1:<port>`, for `-connect`.
    pub fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// What it printed so far, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "s_server on port {}\n--- server stdout ---\n{}\n--- server stderr ---\n{}",
            self.port,
            self.stdout,
            self.stderr.lock().unwrap()
        )
    }

    /// Waits for the server to exit by itself (after its `-naccept` connections): its stdout
    /// must close within `limit` and the process exit 10 s later at the most, else it is
    /// killed and this panics. Returns its exit status; `stdout` and `stderr` are complete.
    pub fn finish(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        if let Err(RecvTimeoutError::Timeout) = self.read_stdout(deadline, |_| false) {
            let _ = self.child.0.kill();
            panic!(
                "s_server did not finish after its connections\n{}",
                self.describe()
            );
        }
        let Some(status) = wait_deadline(&mut self.child.0, Duration::from_secs(10)) else {
            let _ = self.child.0.kill();
            panic!("s_server did not exit\n{}", self.describe());
        };
        // The process is gone, so its stderr reaches EOF: collect all of it.
        if let Some(t) = self.err_thread.take() {
            let _ = t.join();
        }
        status
    }

    /// A copy of what it printed on stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// The `rsa 2048 bits` line of `openssl speed` output, like
/// `rsa 2048 bits 0.000974s 0.000026s   1026.7  38000.0`, and its numbers (times without the
/// `s`). Panics, with everything the command printed, when the line is missing, has a
/// non-numeric field or fewer than 4 numbers.
#[track_caller]
pub fn rsa2048_speed_line(out: &Output) -> (String, Vec<f64>) {
    let line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("rsa 2048 bits"))
        .unwrap_or_else(|| panic!("no 'rsa 2048 bits' line\n{}", out.describe()));
    let nums: Vec<f64> = line
        .split_whitespace()
        .skip(3)
        .map(|t| t.trim_end_matches('s').parse::<f64>())
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("non-numeric field in {line:?}: {e}\n{}", out.describe()));
    assert!(
        nums.len() >= 4,
        "short speed line {line:?}\n{}",
        out.describe()
    );
    (line.to_string(), nums)
}

// ---------------------------------------------------------------------------------------------
// TLS client (in this process, default provider)
// ---------------------------------------------------------------------------------------------

/// The kinds of full handshake the server tests make; each needs one RSA private-key
/// operation on the server.
#[derive(Clone, Copy, Debug)]
pub enum TlsFlavor {
    /// TLS 1.2 with RSA key exchange (AES256-GCM-SHA384): the server decrypts.
    Tls12Rsa,
    /// TLS 1.2 ECDHE-RSA (ECDHE-RSA-AES256-GCM-SHA384): the server signs.
    Tls12Ecdhe,
    /// TLS 1.3: the server signs (RSA-PSS).
    Tls13,
}

impl TlsFlavor {
    /// All of them, in a fixed order (for cycling through).
    pub const ALL: [TlsFlavor; 3] = [TlsFlavor::Tls12Rsa, TlsFlavor::Tls12Ecdhe, TlsFlavor::Tls13];
}

/// One fresh TLS connection to 127.0.0.1:`port` (full handshake of `flavor`, the server's
/// certificate is not verified) and one `GET / HTTP/1.0` request; returns the response as
/// read until the server closes or 10 s without data pass.
pub fn https_get(port: u16, flavor: TlsFlavor) -> Result<String, String> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
    b.set_verify(SslVerifyMode::NONE);
    match flavor {
        TlsFlavor::Tls12Rsa => {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_cipher_list("AES256-GCM-SHA384").unwrap();
        }
        TlsFlavor::Tls12Ecdhe => {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_cipher_list("ECDHE-RSA-AES256-GCM-SHA384").unwrap();
        }
        TlsFlavor::Tls13 => b.set_min_proto_version(Some(SslVersion::TLS1_3)).unwrap(),
    }
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut s = b
        .build()
        .configure()
        .unwrap()
        .verify_hostname(false)
        .connect("localhost", tcp)
        .map_err(|e| format!("{flavor:?}: {e}"))?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    Ok(resp)
}

// ---------------------------------------------------------------------------------------------
// kae's exit summary
// ---------------------------------------------------------------------------------------------

/// Counts of one kind of RSA operation in kae's exit summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpCounts {
    pub ok: u64,
    /// 0 when the line does not say (an older format: `private ops N (X offloaded)`).
    pub failed: u64,
    pub offloaded: u64,
}

/// kae's exit summary, logged on stderr with `KAE_LOG=info` at provider teardown or process
/// exit: `kae[PID] INFO: summary: private ops N ok / M failed (X offloaded), public ops N ok /
/// M failed (X offloaded), async pauses P, ...`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KaeSummary {
    /// The `PID` of the `kae[PID]` prefix, when the line has it.
    pub pid: Option<u32>,
    pub private: OpCounts,
    pub public: OpCounts,
    pub async_pauses: u64,
}

impl KaeSummary {
    /// What every summary line contains.
    pub const MARKER: &'static str = "summary: private ops ";

    /// Parses one summary line; `None` when it is not one or lacks a field.
    pub fn parse(line: &str) -> Option<KaeSummary> {
        let at = line.find(Self::MARKER)?;
        let rest = &line[at + Self::MARKER.len()..];
        let private = rest.split(", public ops ").next()?;
        let public = rest.split(", public ops ").nth(1)?;
        let public = &public[..public.find(')')? + 1];
        let pauses = line.split("async pauses ").nth(1)?;
        let pid = line[..at]
            .split("kae[")
            .nth(1)
            .and_then(|s| s.split(']').next())
            .and_then(|p| p.parse().ok());
        Some(KaeSummary {
            pid,
            private: Self::counts(private)?,
            public: Self::counts(public)?,
            async_pauses: leading_number(pauses)?,
        })
    }

    /// `N ok / M failed (X offloaded)` or `N (X offloaded)`.
    fn counts(part: &str) -> Option<OpCounts> {
        Some(OpCounts {
            ok: leading_number(part)?,
            failed: number_before(part, " failed").unwrap_or(0),
            offloaded: number_before(part, " offloaded")?,
        })
    }

    /// Every summary line of `text`; `None` when there is none or one does not parse.
    pub fn all_in(text: &str) -> Option<Vec<KaeSummary>> {
        let all = text
            .lines()
            .filter(|l| l.contains(Self::MARKER))
            .map(Self::parse)
            .collect::<Option<Vec<_>>>()?;
        (!all.is_empty()).then_some(all)
    }

    /// The first summary line of `text`, parsed.
    pub fn first_in(text: &str) -> Option<KaeSummary> {
        Self::parse(text.lines().find(|l| l.contains(Self::MARKER))?)
    }
}

/// The decimal number `s` starts with (after white space).
fn leading_number(s: &str) -> Option<u64> {
    let s = s.trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// The decimal number right before the first `word` in `s`.
fn number_before(s: &str, word: &str) -> Option<u64> {
    let head = s[..s.find(word)?].trim_end();
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

// ---- soak: sampling a server process and kae-press's JSON line ------------------------------

/// VmRSS of process `pid` in kB (None when it is gone).
pub fn rss_kb_of(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Open file descriptors of process `pid` (entries of /proc/PID/fd; None when it is gone).
pub fn fd_count_of(pid: u32) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// One sample of a process: time since sampling began, VmRSS (kB), open fds.
#[derive(Clone, Copy, Debug)]
pub struct ProcSample {
    pub at: Duration,
    pub rss_kb: u64,
    pub fds: usize,
}

/// Samples a process every `every` on a thread of its own until [`ProcSampler::stop`].
pub struct ProcSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<ProcSample>>>,
}

impl ProcSampler {
    pub fn start(pid: u32, every: Duration) -> ProcSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut v = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Acquire) {
                if let (Some(rss_kb), Some(fds)) = (rss_kb_of(pid), fd_count_of(pid)) {
                    v.push(ProcSample {
                        at: t0.elapsed(),
                        rss_kb,
                        fds,
                    });
                }
                std::thread::sleep(every);
            }
            v
        });
        ProcSampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops sampling; the samples taken.
    pub fn stop(mut self) -> Vec<ProcSample> {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.handle
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

/// A number field of kae-press's JSON line (`{"kae_press":1,…}`) in `stdout`, read without a
/// JSON parser (the line is flat for these fields); None when absent.
pub fn press_json_u64(stdout: &str, field: &str) -> Option<u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("{\"kae_press\":1,"))?;
    let key = format!("\"{field}\":");
    let rest = &line[line.find(&key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}
