//! Integration tests of the `kae-press` load tool against `openssl s_server
//! -www` (default provider only) and a small in-process keep-alive HTTPS
//! server, all on 127.0.0.1. Every server is killed on drop and every
//! kae-press run is time-limited.

mod procs;

use procs::{
    free_port, openssl_without_config, run, run_ok, self_signed_cert_args, tool_bin, SServer,
    TempDir,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

const RUN_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// The kae-press binary (kae-tools package; see `procs::tool_bin`), located once.
fn press_bin() -> &'static PathBuf {
    static PRESS: OnceLock<PathBuf> = OnceLock::new();
    PRESS.get_or_init(|| tool_bin("kae-press"))
}

/// A 2048-bit RSA key and self-signed certificate, made once per test run.
fn cert() -> &'static (PathBuf, PathBuf) {
    static CERT: OnceLock<(TempDir, (PathBuf, PathBuf))> = OnceLock::new();
    &CERT
        .get_or_init(|| {
            let dir = TempDir::new("press-test");
            let key = dir.join("key.pem");
            let crt = dir.join("cert.pem");
            run_ok(openssl_without_config().args(self_signed_cert_args(&key, &crt, "localhost")));
            (dir, (key, crt))
        })
        .1
}

/// `openssl s_server -www` on 127.0.0.1 (default provider only), killed on drop.
fn s_server_www() -> SServer {
    let (key, crt) = cert();
    SServer::start(|port| {
        let mut cmd = openssl_without_config();
        cmd.args(["s_server", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-key")
            .arg(key)
            .arg("-cert")
            .arg(crt);
        cmd
    })
}

/// A minimal HTTPS/1.1 keep-alive server (Content-Length, or chunked for
/// /chunked, 404 for /missing) on 127.0.0.1, counting TCP connections and
/// requests. Stopped on drop.
struct KeepAliveServer {
    port: u16,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    accept_thread: Option<thread::JoinHandle<()>>,
}

impl KeepAliveServer {
    fn start() -> KeepAliveServer {
        use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
        let (key, crt) = cert();
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
        b.set_private_key_file(key, SslFiletype::PEM).unwrap();
        b.set_certificate_chain_file(crt).unwrap();
        let acceptor = Arc::new(b.build());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let (s, c, r) = (stop.clone(), connections.clone(), requests.clone());
        let accept_thread = thread::spawn(move || {
            let deadline = Instant::now() + RUN_LIMIT;
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        c.fetch_add(1, Ordering::Relaxed);
                        let (acc, r, s) = (acceptor.clone(), r.clone(), s.clone());
                        thread::spawn(move || serve_keep_alive(&acc, tcp, &r, &s));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        KeepAliveServer {
            port,
            stop,
            connections,
            requests,
            accept_thread: Some(accept_thread),
        }
    }

    fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for KeepAliveServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_keep_alive(
    acc: &openssl::ssl::SslAcceptor,
    tcp: TcpStream,
    requests: &AtomicU64,
    stop: &AtomicBool,
) {
    tcp.set_nonblocking(false).ok();
    tcp.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let Ok(mut tls) = acc.accept(tcp) else { return };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let idle_limit = Instant::now() + RUN_LIMIT;
    loop {
        // Read one request header.
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if stop.load(Ordering::Relaxed) || Instant::now() > idle_limit {
                return;
            }
            match tls.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        requests.fetch_add(1, Ordering::Relaxed);
        let path = head.split(' ').nth(1).unwrap_or("/");
        let close = head.to_ascii_lowercase().contains("connection: close");
        let body = b"hello from the keep-alive test server\n";
        let mut resp = Vec::new();
        match path {
            "/chunked" => {
                resp.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                for part in body.chunks(7) {
                    resp.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
                    resp.extend_from_slice(part);
                    resp.extend_from_slice(b"\r\n");
                }
                resp.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
            }
            "/missing" => {
                resp.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            }
            _ => {
                resp.extend_from_slice(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
                );
                resp.extend_from_slice(body);
            }
        }
        if tls.write_all(&resp).is_err() || tls.flush().is_err() {
            return;
        }
        if close {
            let _ = tls.shutdown();
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// Running kae-press
// ---------------------------------------------------------------------------

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    /// The final `{"kae_press":1,...}` line, parsed.
    fn json(&self) -> Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| l.starts_with("{\"kae_press\":1,"))
            .unwrap_or_else(|| panic!("no JSON line in output:\n{}\n{}", self.stdout, self.stderr));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON line {line}: {e}"))
    }

    fn context(&self) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `kae-press <args>` (no OpenSSL configuration), killed and failed after RUN_LIMIT.
fn press(args: &[&str]) -> Run {
    let t0 = Instant::now();
    let out = run(
        Command::new(press_bin())
            .args(args)
            .env("OPENSSL_CONF", "/dev/null"),
        None,
        RUN_LIMIT,
    );
    Run {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
        elapsed: t0.elapsed(),
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("field {k} missing or not an integer in {v}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("field {k} missing or not a number in {v}"))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str()
        .unwrap_or_else(|| panic!("field {k} missing or not a string in {v}"))
}

/// Common checks of a run in which every request should succeed.
fn assert_clean(r: &Run, n: u64) -> Value {
    assert_eq!(r.code, Some(0), "{}", r.context());
    let j = r.json();
    assert_eq!(u(&j, "requests"), n, "{}", r.context());
    assert_eq!(u(&j, "errors"), 0, "{}", r.context());
    assert!(f(&j, "elapsed_s") > 0.0);
    assert!(f(&j, "handshakes_per_s") > 0.0);
    assert!(f(&j, "requests_per_s") > 0.0);
    let (p50, p90, p99, max) = (
        f(&j, "p50_ms"),
        f(&j, "p90_ms"),
        f(&j, "p99_ms"),
        f(&j, "max_ms"),
    );
    assert!(p50 > 0.0 && p50 <= p90 && p90 <= p99 && p99 <= max, "{j}");
    assert!(j.get("server_cpu_s").is_none() || j["server_cpu_s"].is_number());
    j
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn rustls_tls13_fresh_handshakes() {
    let srv = s_server_www();
    let r = press(&["-c", "4", "-n", "40", "--tls", "1.3", &srv.target()]);
    let j = assert_clean(&r, 40);
    assert_eq!(u(&j, "handshakes"), 40, "one full handshake per request");
    assert_eq!(s(&j, "client"), "rustls");
    assert_eq!(s(&j, "mode"), "fresh");
    assert_eq!(s(&j, "protocol"), "TLSv1.3");
    assert!(s(&j, "cipher").contains("AES_256_GCM") || s(&j, "cipher").contains("AES_128_GCM"));
    // The human summary comes before the JSON line.
    assert!(r.stdout.contains("handshakes"), "{}", r.context());
    assert!(r
        .stdout
        .lines()
        .last()
        .unwrap()
        .starts_with("{\"kae_press\":1,"));
}

#[test]
fn rustls_tls12_ecdhe_rsa() {
    let srv = s_server_www();
    let r = press(&[
        "-c",
        "4",
        "-n",
        "30",
        "--tls",
        "1.2",
        "--cipher",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "--json",
        &srv.target(),
    ]);
    let j = assert_clean(&r, 30);
    assert_eq!(u(&j, "handshakes"), 30);
    assert_eq!(s(&j, "protocol"), "TLSv1.2");
    assert_eq!(s(&j, "cipher"), "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384");
    // --json: only the JSON line.
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.context());
}

#[test]
fn rustls_refuses_rsa_key_exchange() {
    let r = press(&["--cipher", "AES256-GCM-SHA384", "-n", "1", "127.0.0.1:9"]);
    assert_eq!(r.code, Some(2), "{}", r.context());
    assert!(r.stderr.contains("--client openssl"), "{}", r.context());
    assert!(r.json()["error"].is_string());
}

#[test]
fn openssl_tls12_rsa_key_exchange() {
    let srv = s_server_www();
    let r = press(&[
        "--client",
        "openssl",
        "--tls",
        "1.2",
        "--cipher",
        "AES256-GCM-SHA384",
        "-c",
        "4",
        "-n",
        "30",
        &srv.target(),
    ]);
    let j = assert_clean(&r, 30);
    assert_eq!(u(&j, "handshakes"), 30);
    assert_eq!(s(&j, "client"), "openssl");
    assert_eq!(s(&j, "protocol"), "TLSv1.2");
    assert_eq!(s(&j, "cipher"), "AES256-GCM-SHA384");
    assert!(j["group"].is_null(), "RSA key exchange has no group: {j}");
}

#[test]
fn openssl_tls13_and_cipher_list_implies_tls12() {
    let srv = s_server_www();
    let r = press(&["--client", "openssl", "-c", "2", "-n", "10", &srv.target()]);
    let j = assert_clean(&r, 10);
    assert_eq!(s(&j, "protocol"), "TLSv1.3");
    // A TLS 1.2-only cipher list without --tls caps the protocol at 1.2.
    let r = press(&[
        "--client",
        "openssl",
        "--cipher",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "-c",
        "2",
        "-n",
        "10",
        &srv.target(),
    ]);
    let j = assert_clean(&r, 10);
    assert_eq!(s(&j, "protocol"), "TLSv1.2");
    assert_eq!(s(&j, "cipher"), "ECDHE-RSA-AES128-GCM-SHA256");
    // A TLS 1.2 cipher with --tls 1.3 would have no effect: refused.
    let r = press(&[
        "--client",
        "openssl",
        "--tls",
        "1.3",
        "--cipher",
        "AES256-GCM-SHA384",
        &srv.target(),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.context());
}

#[test]
fn keep_alive_reuses_connections() {
    let srv = KeepAliveServer::start();
    let r = press(&["-k", "-c", "4", "-n", "40", &srv.target()]);
    let j = assert_clean(&r, 40);
    assert_eq!(s(&j, "mode"), "keep-alive");
    let hs = u(&j, "handshakes");
    assert!(
        (1..=4).contains(&hs),
        "handshakes {hs} must be <= connections: {j}"
    );
    assert_eq!(srv.requests.load(Ordering::Relaxed), 40);
    assert!(srv.connections.load(Ordering::Relaxed) <= 4);

    // Chunked bodies with extensions and trailers, also over keep-alive.
    let r = press(&[
        "-k",
        "-c",
        "2",
        "-n",
        "20",
        "--path",
        "/chunked",
        &srv.target(),
    ]);
    let j = assert_clean(&r, 20);
    assert!(u(&j, "handshakes") <= 2, "{j}");
}

#[test]
fn fresh_mode_against_keep_alive_server_and_non_2xx() {
    let srv = KeepAliveServer::start();
    // Without -k every request is a new connection even if the server would
    // keep it open (the request says Connection: close).
    let r = press(&["-c", "2", "-n", "10", &srv.target()]);
    let j = assert_clean(&r, 10);
    assert_eq!(u(&j, "handshakes"), 10);

    // A 404 is an error of kind "status", not a success; all failed -> exit 1.
    let r = press(&[
        "-k",
        "-c",
        "2",
        "-n",
        "6",
        "--path",
        "/missing",
        &srv.target(),
    ]);
    assert_eq!(r.code, Some(1), "{}", r.context());
    let j = r.json();
    assert_eq!(u(&j, "requests"), 0);
    assert_eq!(u(&j, "errors"), 6);
    assert_eq!(j["errors_by_kind"]["status"].as_u64(), Some(6), "{j}");
}

#[test]
fn server_pid_cpu_time() {
    let srv = s_server_www();
    let pid = srv.pid().to_string();
    let r = press(&["-c", "4", "-n", "100", "--server-pid", &pid, &srv.target()]);
    let j = assert_clean(&r, 100);
    assert!(f(&j, "server_cpu_s") > 0.0, "{j}");
    assert!(f(&j, "server_cpu_ms_per_handshake") > 0.0, "{j}");
    assert!(f(&j, "handshakes_per_server_cpu_s") > 0.0, "{j}");
    assert_eq!(j["server_pids"][0].as_u64(), Some(srv.pid() as u64));
    // CPU time is bounded by the wall time of the run on every CPU of the machine, and the
    // per-handshake figure is the total divided by the handshakes.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let (elapsed, client, server) = (
        f(&j, "elapsed_s"),
        f(&j, "client_cpu_s"),
        f(&j, "server_cpu_s"),
    );
    assert!(client > 0.0, "the client did TLS work: {j}");
    for (what, cpu) in [("client", client), ("server", server)] {
        assert!(
            cpu <= elapsed * cpus + 0.05,
            "{what} CPU {cpu} s exceeds {elapsed} s on {cpus} CPUs: {j}"
        );
    }
    let per = f(&j, "server_cpu_ms_per_handshake");
    let want = server * 1000.0 / u(&j, "handshakes") as f64;
    assert!(
        (per - want).abs() <= want * 0.01 + 0.001,
        "{per} ms per handshake vs {want}: {j}"
    );
}

#[test]
fn duration_mode_stops() {
    let srv = s_server_www();
    let r = press(&["-c", "2", "-d", "1", "--json", &srv.target()]);
    assert_eq!(r.code, Some(0), "{}", r.context());
    let j = r.json();
    assert!(u(&j, "requests") > 0);
    assert_eq!(u(&j, "errors"), 0, "{j}");
    let e = f(&j, "elapsed_s");
    // It stops once the second is up and the requests in flight are answered (a few ms each).
    assert!((0.99..3.0).contains(&e), "elapsed {e}");
}

#[test]
fn refuses_non_loopback_without_connecting() {
    // Refused before any socket or name lookup: exits at once, exit code 2,
    // a JSON line with "error". (10.0.0.1 is never contacted.)
    for target in [
        "10.0.0.1:443",
        "[2001:db8::1]:443",
        "example.com:443",
        "0.0.0.0:443",
    ] {
        let r = press(&["-n", "1", "-c", "1", target]);
        assert_eq!(r.code, Some(2), "{target}: {}", r.context());
        assert!(r.stderr.contains("refusing"), "{target}: {}", r.context());
        let j = r.json();
        assert!(j["error"].as_str().unwrap().contains("refusing"), "{j}");
        assert!(j.get("requests").is_none(), "{j}");
        assert!(
            r.elapsed < Duration::from_secs(5),
            "{target} took {:?}",
            r.elapsed
        );
    }
    // Loopback forms are accepted (nothing listens on port 1: connect errors).
    for target in ["127.0.0.1:1", "localhost:1", "127.1.2.3:1"] {
        let r = press(&["-n", "2", "-c", "1", target]);
        assert_eq!(r.code, Some(1), "{target}: {}", r.context());
    }
}

#[test]
fn closed_port_counts_errors_and_exits_1() {
    // Documented behaviour: the run completes, the JSON line is printed with
    // every failure counted, and the exit code is 1 because no request
    // succeeded (it is 0 as soon as one request succeeds).
    let port = free_port();
    let target = format!("127.0.0.1:{port}");
    let r = press(&["-c", "2", "-n", "20", &target]);
    assert_eq!(r.code, Some(1), "{}", r.context());
    let j = r.json();
    assert_eq!(u(&j, "requests"), 0);
    assert_eq!(u(&j, "handshakes"), 0);
    assert_eq!(u(&j, "errors"), 20);
    assert_eq!(j["errors_by_kind"]["connect"].as_u64(), Some(20), "{j}");
    assert!(j["protocol"].is_null() && j["p50_ms"].is_null(), "{j}");
}

#[test]
fn usage_errors() {
    for args in [
        &["--bogus", "127.0.0.1:1"][..],
        &["127.0.0.1"][..],
        &["-c", "0", "127.0.0.1:1"][..],
        &["--client", "gnutls", "127.0.0.1:1"][..],
        &["--tls", "1.1", "127.0.0.1:1"][..],
        &[][..],
    ] {
        let r = press(args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.context());
        assert!(r.json()["error"].is_string());
    }
    let r = press(&["--help"]);
    assert_eq!(r.code, Some(0));
    assert!(r.stdout.contains("--allow-non-loopback"));
}
