//! HAProxy with `ssl-mode-async` terminating TLS on loopback with kae loaded through
//! OPENSSL_CONF: many concurrent clients make fresh full handshakes (TLS 1.2 RSA key exchange,
//! TLS 1.2 ECDHE-RSA, TLS 1.3); all must succeed, and kae's exit summary must show the async
//! path was taken (offloaded private operations and pauses > 0).
//!
//! Needs the Debian `haproxy` package (`.ci/run` installs it). Set KAE_SKIP_HAPROXY=1 to skip
//! on a machine without it; without that variable a missing haproxy is a failure.

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("KAE_MODULE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for cand in [
        deps.join("libkae.so"),
        deps.parent().unwrap().join("libkae.so"),
    ] {
        if cand.exists() {
            return cand;
        }
    }
    panic!("libkae.so not found next to {}", exe.display());
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "kae-{tag}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills the server if the test panics.
struct Server(Option<Child>);
impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_listening(port: u16, timeout: Duration) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("haproxy did not listen on {port} within {timeout:?}");
}

#[derive(Clone, Copy, Debug)]
enum Flavor {
    Tls12Rsa,
    Tls12Ecdhe,
    Tls13,
}

/// One fresh TLS connection with a full handshake and one HTTP request; returns the response.
fn handshake(port: u16, flavor: Flavor) -> Result<String, String> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
    b.set_verify(SslVerifyMode::NONE);
    match flavor {
        Flavor::Tls12Rsa => {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_cipher_list("AES256-GCM-SHA384").unwrap();
        }
        Flavor::Tls12Ecdhe => {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_cipher_list("ECDHE-RSA-AES256-GCM-SHA384").unwrap();
        }
        Flavor::Tls13 => b.set_min_proto_version(Some(SslVersion::TLS1_3)).unwrap(),
    }
    let conn = b.build();
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut s = conn
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

#[test]
fn haproxy_ssl_mode_async_with_kae() {
    let haproxy = Command::new("haproxy").arg("-v").output();
    if haproxy.is_err() {
        if std::env::var("KAE_SKIP_HAPROXY").is_ok() {
            eprintln!("haproxy not installed; skipped (KAE_SKIP_HAPROXY set)");
            return;
        }
        panic!("haproxy is not installed (apt-get install haproxy, or set KAE_SKIP_HAPROXY=1)");
    }
    let dir = temp_dir("haproxy");
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    // Key and certificate made with the default provider only.
    run(Command::new("openssl")
        .env("OPENSSL_CONF", "/dev/null")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    let pem = dir.join("server.pem");
    let mut both = std::fs::read(&cert).unwrap();
    both.extend(std::fs::read(&key).unwrap());
    std::fs::write(&pem, both).unwrap();

    let cnf = dir.join("openssl.cnf");
    std::fs::write(
        &cnf,
        format!(
            "openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\nalg_section = algorithm_sect\n\
             [provider_sect]\nkae = kae_sect\ndefault = default_sect\n[kae_sect]\nmodule = {}\nactivate = 1\n\
             [default_sect]\nactivate = 1\n[algorithm_sect]\ndefault_properties = ?provider=kae\n",
            module_path().display()
        ),
    )
    .unwrap();

    let port = free_port();
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    ssl-mode-async\n    nbthread 1\n    maxconn 1000\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
             frontend fe\n    bind 127.0.0.1:{port} ssl crt {}\n    http-request return status 200 content-type text/plain string \"kae-ok\\n\"\n",
            pem.display()
        ),
    )
    .unwrap();
    run(Command::new("haproxy")
        .env("OPENSSL_CONF", &cnf)
        .arg("-c")
        .arg("-f")
        .arg(&cfg));

    let stderr_path = dir.join("haproxy.err");
    let child = Command::new("haproxy")
        .env("OPENSSL_CONF", &cnf)
        .env("KAE_LOG", "info")
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start haproxy");
    let mut server = Server(Some(child));
    wait_listening(port, Duration::from_secs(10));

    // 24 concurrent clients × 8 fresh handshakes each, flavours interleaved.
    let clients = 24;
    let per_client = 8;
    let failures: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let mut errs = Vec::new();
                    for i in 0..per_client {
                        let flavor =
                            [Flavor::Tls12Rsa, Flavor::Tls12Ecdhe, Flavor::Tls13][(c + i) % 3];
                        match handshake(port, flavor) {
                            Ok(r)
                                if r.starts_with("HTTP/1.0 200")
                                    || r.starts_with("HTTP/1.1 200") =>
                            {
                                if !r.contains("kae-ok") {
                                    errs.push(format!("{flavor:?}: unexpected body {r:?}"));
                                }
                            }
                            Ok(r) => errs.push(format!("{flavor:?}: unexpected response {r:?}")),
                            Err(e) => errs.push(e),
                        }
                    }
                    errs
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });

    // Soft stop: haproxy finishes and exits normally, so kae logs its summary at exit.
    let mut child = server.0.take().unwrap();
    // SAFETY: plain kill(2) on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("haproxy did not stop on SIGUSR1");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} handshakes failed: {:?}\nhaproxy log:\n{log}",
        failures.len(),
        clients * per_client,
        &failures[..failures.len().min(5)]
    );

    let summary = log
        .lines()
        .find(|l| l.contains("summary: private ops"))
        .unwrap_or_else(|| panic!("no kae summary in haproxy's log:\n{log}"));
    let num_after = |key: &str| -> u64 {
        let rest = &summary[summary
            .find(key)
            .unwrap_or_else(|| panic!("{key} missing in {summary}"))
            + key.len()..];
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let offloaded: u64 = {
        let i = summary.find("offloaded)").unwrap();
        let open = summary[..i].rfind('(').unwrap();
        summary[open + 1..i].trim().parse().unwrap()
    };
    let pauses = num_after("async pauses ");
    let total = clients * per_client;
    eprintln!("haproxy: {total} handshakes ok; {summary}");
    // Every handshake needs one private operation (signature or premaster decryption).
    assert!(
        offloaded as usize >= total,
        "expected ≥ {total} offloaded private ops: {summary}"
    );
    assert!(pauses > 0, "the async path was not taken: {summary}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = Path::new("");
}
