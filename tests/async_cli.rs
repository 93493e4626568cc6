//! kae's async offload driven by the system `openssl` tool: `openssl speed -async_jobs` and
//! `openssl s_server -async` (TLS handshakes whose private-key operations run inside ASYNC
//! jobs). With `KAE_LOG=info` kae prints an exit summary on stderr; the tests read the
//! offloaded-operation and pause counts from it.
//!
//! Every child process has a time limit and is killed when it runs over.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const KAE_ENV: [&str; 7] = [
    "KAE_QUEUES",
    "KAE_QUEUE_DEPTH",
    "KAE_ASYNC",
    "KAE_BACKEND",
    "KAE_LOG",
    "KAE_LOAD_DEFAULT",
    "KAE_SPIN_US",
];

fn openssl_bin() -> String {
    std::env::var("KAE_TEST_OPENSSL").unwrap_or_else(|_| "openssl".to_string())
}

/// A scratch directory, removed unless the test failed.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "kae-async-cli-{tag}-{}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A directory holding `kae.so` → the built module, for `-provider-path`.
fn provider_dir(dir: &TempDir) -> String {
    let d = dir.path().join("modules");
    fs::create_dir_all(&d).unwrap();
    symlink(common::module_path(), d.join("kae.so")).expect("symlink kae.so");
    d.to_string_lossy().into_owned()
}

/// `openssl` with a clean environment (no inherited OpenSSL or kae settings).
fn openssl(dir: &TempDir) -> Command {
    let mut c = Command::new(openssl_bin());
    c.current_dir(dir.path())
        .env_remove("OPENSSL_CONF")
        .env_remove("OPENSSL_MODULES")
        .env_remove("OPENSSL_ENGINES");
    for k in KAE_ENV {
        c.env_remove(k);
    }
    c
}

struct Output {
    cmd: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Output {
    fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {:?} (signal {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmd,
            self.status.code(),
            self.status.signal(),
            self.stdout,
            self.stderr
        )
    }
}

fn reader<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

fn wait_deadline(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if t0.elapsed() > limit {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` with `input` on stdin; kills it and panics after `limit`.
fn run(mut cmd: Command, input: Option<&[u8]>, limit: Duration) -> Output {
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
    let mut stdin = child.stdin.take();
    if let (Some(data), Some(mut w)) = (input.map(<[u8]>::to_vec), stdin.take()) {
        thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    let (status, timed_out) = match wait_deadline(&mut child, limit) {
        Some(st) => (st, false),
        None => {
            let _ = child.kill();
            (child.wait().expect("wait"), true)
        }
    };
    let o = Output {
        cmd: desc,
        status,
        stdout: String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned(),
    };
    if timed_out {
        panic!("timed out after {limit:?}\n{}", o.describe());
    }
    o
}

/// kae's exit summary: (private ops, offloaded private ops, async pauses).
fn parse_summary(stderr: &str) -> Option<(u64, u64, u64)> {
    let line = stderr
        .lines()
        .find(|l| l.contains("summary: private ops"))?;
    let rest = line.split("summary: private ops").nth(1)?;
    let private_part = rest.split(", public ops").next()?;
    let total: u64 = private_part
        .split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()?;
    let off_part = private_part.rsplit('(').next()?;
    let offloaded: u64 = off_part
        .strip_suffix(" offloaded)")
        .or_else(|| off_part.split(" offloaded").next())?
        .trim()
        .parse()
        .ok()?;
    let pauses: u64 = line
        .split("async pauses ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((total, offloaded, pauses))
}

#[test]
fn parse_summary_line() {
    let l = "kae[1] INFO: kae[1] summary: private ops 1564 ok / 0 failed (1556 offloaded), public ops 37352 ok / 0 failed (0 offloaded), async pauses 1556, spurious resumes 0";
    assert_eq!(parse_summary(l), Some((1564, 1556, 1556)));
    let l = "kae[1] summary: private ops 7 (5 offloaded), public ops 3 (0 offloaded), errors 0, async pauses 9, spurious resumes 0";
    assert_eq!(parse_summary(l), Some((7, 5, 9)));
    assert_eq!(parse_summary("nothing here"), None);
}

// ---------------------------------------------------------------------------------------------
// openssl speed -async_jobs
// ---------------------------------------------------------------------------------------------

/// `openssl speed -provider kae -async_jobs 8 -seconds 1 rsa2048`, optionally pinned to CPU 0
/// with taskset and with `KAE_ASYNC` set; checks the speed line and returns kae's summary
/// (private ops, offloaded, async pauses) and stderr.
fn speed_async(pin_one_cpu: bool, kae_async: Option<&str>) -> (u64, u64, u64, String) {
    let dir = TempDir::new("speed");
    let pd = provider_dir(&dir);
    let inner = openssl(&dir);
    let mut cmd = if pin_one_cpu {
        let mut c = Command::new("taskset");
        c.arg("-c").arg("0").arg(inner.get_program());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.current_dir(dir.path());
        c
    } else {
        inner
    };
    cmd.args([
        "speed",
        "-provider-path",
        &pd,
        "-provider",
        "kae",
        "-async_jobs",
        "8",
        "-seconds",
        "1",
        "rsa2048",
    ])
    .env("KAE_LOG", "info");
    if let Some(v) = kae_async {
        cmd.env("KAE_ASYNC", v);
    }
    let t0 = Instant::now();
    let out = run(cmd, None, Duration::from_secs(60));
    eprintln!("speed ran in {:.2?}", t0.elapsed());
    assert!(out.status.success(), "speed failed\n{}", out.describe());
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
    assert!(nums.len() >= 4, "short speed line {line:?}");
    assert!(
        nums.iter().all(|&x| x > 0.0),
        "zero field in {line:?}\n{}",
        out.describe()
    );
    eprintln!("{line}");
    let (total, offloaded, pauses) = parse_summary(&out.stderr).unwrap_or_else(|| {
        panic!(
            "no kae summary line on stderr with KAE_LOG=info\n{}",
            out.describe()
        )
    });
    eprintln!("kae summary: {total} private ops, {offloaded} offloaded, {pauses} async pauses");
    (total, offloaded, pauses, out.stderr)
}

fn available_cpus() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn speed_async_jobs_offloads() {
    let (_, offloaded, pauses, stderr) = speed_async(false, None);
    if available_cpus() < 2 {
        // async = auto computes inline on a single CPU (speed_async_jobs_one_cpu checks it).
        eprintln!("only one CPU available: skipping the offload check");
        return;
    }
    assert!(
        offloaded > 0,
        "speed -async_jobs 8 ran no private op through the pool\n{stderr}"
    );
    assert!(pauses > 0, "no async pause\n{stderr}");
}

/// Pinned to one CPU, `async = auto` (the default) computes inline even inside ASYNC jobs
/// and says why; `KAE_ASYNC=yes` still offloads.
#[test]
fn speed_async_jobs_one_cpu() {
    let (total, offloaded, pauses, stderr) = speed_async(true, None);
    assert!(total > 0, "no private op counted\n{stderr}");
    assert_eq!(offloaded, 0, "auto offloaded on one CPU\n{stderr}");
    assert_eq!(pauses, 0, "auto paused on one CPU\n{stderr}");
    assert!(
        stderr.contains("async jobs compute inline"),
        "no log line explaining the inline decision\n{stderr}"
    );
    let (_, offloaded, pauses, stderr) = speed_async(true, Some("yes"));
    assert!(offloaded > 0, "KAE_ASYNC=yes did not offload\n{stderr}");
    assert!(pauses > 0, "KAE_ASYNC=yes: no async pause\n{stderr}");
}

// ---------------------------------------------------------------------------------------------
// openssl s_server -async -www
// ---------------------------------------------------------------------------------------------

fn write_config(dir: &TempDir) -> PathBuf {
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
        common::module_path()
    );
    let p = dir.path().join("openssl.cnf");
    fs::write(&p, text).unwrap();
    p
}

struct Server {
    child: Child,
    _stdin: ChildStdin,
    lines: Receiver<String>,
    stdout: String,
    stderr: Arc<Mutex<String>>,
    port: u16,
}

impl Server {
    fn start(dir: &TempDir, cfg: &Path, naccept: u32) -> Server {
        let mut last = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut cmd = openssl(dir);
            cmd.env("OPENSSL_CONF", cfg)
                .env("KAE_LOG", "info")
                .args([
                    "s_server",
                    "-accept",
                    &format!("127.0.0.1:{port}"),
                    "-cert",
                    "srv.pem",
                    "-key",
                    "srv.key",
                    "-async",
                    "-naccept",
                    &naccept.to_string(),
                    "-www",
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("start s_server");
            let stdin = child.stdin.take().unwrap();
            let (tx, rx) = mpsc::channel();
            let out = child.stdout.take().unwrap();
            thread::spawn(move || {
                for l in BufReader::new(out).lines() {
                    let Ok(l) = l else { break };
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            let stderr = Arc::new(Mutex::new(String::new()));
            let sink = stderr.clone();
            let err = child.stderr.take().unwrap();
            thread::spawn(move || {
                for l in BufReader::new(err).lines() {
                    let Ok(l) = l else { break };
                    let mut s = sink.lock().unwrap();
                    s.push_str(&l);
                    s.push('\n');
                }
            });
            let mut srv = Server {
                child,
                _stdin: stdin,
                lines: rx,
                stdout: String::new(),
                stderr,
                port,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match srv
                    .lines
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    Ok(l) => {
                        srv.stdout.push_str(&l);
                        srv.stdout.push('\n');
                        if l.trim() == "ACCEPT" {
                            return srv;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        panic!("s_server did not print ACCEPT in time\n{}", srv.describe())
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        let _ = wait_deadline(&mut srv.child, Duration::from_secs(5));
                        thread::sleep(Duration::from_millis(50));
                        last = srv.describe();
                        if last.contains("in use") || last.contains("bind") {
                            break; // port taken meanwhile: try another
                        }
                        panic!("s_server exited before listening\n{last}");
                    }
                }
            }
        }
        panic!("could not start s_server on a free port\n{last}");
    }

    fn describe(&self) -> String {
        format!(
            "s_server on port {}\n--- server stdout ---\n{}\n--- server stderr ---\n{}",
            self.port,
            self.stdout,
            self.stderr.lock().unwrap()
        )
    }

    /// Waits for the server to exit by itself (after -naccept connections).
    fn finish(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(l) => {
                    self.stdout.push_str(&l);
                    self.stdout.push('\n');
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!(
                        "s_server did not exit after its connections\n{}",
                        self.describe()
                    );
                }
            }
        }
        let st = match wait_deadline(&mut self.child, Duration::from_secs(10)) {
            Some(st) => st,
            None => {
                let _ = self.child.kill();
                panic!("s_server did not exit\n{}", self.describe());
            }
        };
        // Let the stderr reader collect the last lines (the exit summary).
        thread::sleep(Duration::from_millis(100));
        st
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn s_server_async_tls_handshakes_offload() {
    let dir = TempDir::new("sserver");
    let t0 = Instant::now();
    // Server certificate and key from the default provider alone.
    let mut req = openssl(&dir);
    req.args([
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=kae-test",
        "-keyout",
        "srv.key",
        "-out",
        "srv.pem",
        "-days",
        "2",
    ]);
    let o = run(req, None, Duration::from_secs(60));
    assert!(o.status.success(), "req failed\n{}", o.describe());
    let cfg = write_config(&dir);

    let clients: [(&str, &[&str], &str, &str); 3] = [
        (
            "TLS 1.2 RSA key exchange",
            &["-tls1_2", "-cipher", "AES256-GCM-SHA384"],
            "TLSv1.2",
            "AES256-GCM-SHA384",
        ),
        (
            "TLS 1.2 ECDHE-RSA",
            &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
            "TLSv1.2",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ),
        ("TLS 1.3", &["-tls1_3"], "TLSv1.3", "TLS_AES_256_GCM_SHA384"),
    ];
    let mut srv = Server::start(&dir, &cfg, clients.len() as u32);
    let connect = format!("127.0.0.1:{}", srv.port);
    let mut failures = Vec::new();
    for (what, args, proto, cipher) in clients {
        // Client: default provider only (system config). -ign_eof: send the request, then
        // wait for the server's page and close.
        let mut c = openssl(&dir);
        c.args([
            "s_client",
            "-connect",
            &connect,
            "-brief",
            "-CAfile",
            "srv.pem",
            "-verify_return_error",
            "-ign_eof",
        ])
        .args(args);
        let out = run(c, Some(b"GET / HTTP/1.0\r\n\r\n"), Duration::from_secs(20));
        let mut missing: Vec<String> = Vec::new();
        if !out.status.success() {
            missing.push(format!("exit status {:?}", out.status));
        }
        for want in [
            "CONNECTION ESTABLISHED".to_string(),
            format!("Protocol version: {proto}"),
            format!("Ciphersuite: {cipher}"),
            "Verification: OK".to_string(),
        ] {
            if !out.stderr.contains(&want) {
                missing.push(format!("stderr lacks {want:?}"));
            }
        }
        if !out.stdout.contains("HTTP/1.0 200 ok") {
            missing.push("no 'HTTP/1.0 200 ok' page from the server".into());
        }
        if !missing.is_empty() {
            failures.push(format!(
                "{what}: {}\n{}",
                missing.join("; "),
                out.describe()
            ));
        }
    }
    let st = srv.finish(Duration::from_secs(20));
    let ctx = srv.describe();
    eprintln!("s_server test ran in {:.2?}", t0.elapsed());
    assert!(
        failures.is_empty(),
        "{} client(s) failed:\n{}\n{ctx}",
        failures.len(),
        failures.join("\n")
    );
    assert!(st.signal().is_none(), "s_server crashed ({st:?})\n{ctx}");
    assert!(st.success(), "s_server exited with {st:?}\n{ctx}");
    assert!(
        srv.stdout.contains("3 server accepts that finished"),
        "server did not finish 3 handshakes\n{ctx}"
    );
    let stderr = srv.stderr.lock().unwrap().clone();
    let (total, offloaded, pauses) = parse_summary(&stderr)
        .unwrap_or_else(|| panic!("no kae summary line in the server's stderr\n{ctx}"));
    eprintln!("server: {total} private ops, {offloaded} offloaded, {pauses} async pauses");
    assert!(
        offloaded > 0,
        "no private op offloaded by s_server -async\n{ctx}"
    );
    assert!(pauses > 0, "no async pause in s_server -async\n{ctx}");
    // Every handshake needs one server private-key operation, made inside its ASYNC job.
    assert!(
        offloaded >= 3,
        "3 handshakes in async mode but only {offloaded} private ops offloaded ({total} in all)\n{ctx}"
    );
}
