//! HAProxy with `ssl-mode-async` terminating TLS on loopback with kae loaded through
//! OPENSSL_CONF: many concurrent clients make fresh full handshakes (TLS 1.2 RSA key exchange,
//! TLS 1.2 ECDHE-RSA, TLS 1.3); all must succeed, and kae's exit summary must show the async
//! path was taken (offloaded private operations and pauses > 0), on the CPU backend.
//!
//! Needs the Debian `haproxy` package (`.ci/run` installs it). Set KAE_SKIP_HAPROXY=1 to skip
//! on a machine without it; without that variable a missing haproxy is a failure.

mod procs;

use procs::{
    free_port, https_get, openssl_without_config, run_ok, self_signed_cert_args, wait_deadline,
    wait_until, write_prefer_kae_config, KaeSummary, KillOnDrop, TempDir, TlsFlavor,
};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

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
    let dir = TempDir::new("haproxy");
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    // Key and certificate made with the default provider only.
    run_ok(openssl_without_config().args(self_signed_cert_args(&key, &cert, "localhost")));
    let pem = dir.join("server.pem");
    let mut both = std::fs::read(&cert).unwrap();
    both.extend(std::fs::read(&key).unwrap());
    std::fs::write(&pem, both).unwrap();

    let cnf = write_prefer_kae_config(dir.path());

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
    run_ok(
        Command::new("haproxy")
            .env("OPENSSL_CONF", &cnf)
            .arg("-c")
            .arg("-f")
            .arg(&cfg),
    );

    let stderr_path = dir.join("haproxy.err");
    // The CPU backend offloads every private operation of an async job, which is what this
    // test checks. On an IFMA CPU `auto` picks the multi-buffer backend, which computes
    // requests inline while too few come together to fill a kernel call (this load).
    let child = Command::new("haproxy")
        .env("OPENSSL_CONF", &cnf)
        .env("KAE_LOG", "info")
        .env("KAE_BACKEND", "cpu")
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start haproxy");
    let mut server = KillOnDrop(child);
    wait_until(
        &format!("haproxy to listen on {port}"),
        Duration::from_secs(10),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );

    // 24 concurrent clients × 8 fresh handshakes each, flavours interleaved.
    let clients = 24;
    let per_client = 8;
    let failures: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let mut errs = Vec::new();
                    for i in 0..per_client {
                        let flavor = TlsFlavor::ALL[(c + i) % 3];
                        match https_get(port, flavor) {
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
    // SAFETY: plain kill(2) on our child.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGUSR1) };
    // (Killed on drop when it does not stop.)
    if wait_deadline(&mut server.0, Duration::from_secs(20)).is_none() {
        panic!("haproxy did not stop on SIGUSR1");
    }
    let log = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} handshakes failed: {:?}\nhaproxy log:\n{log}",
        failures.len(),
        clients * per_client,
        &failures[..failures.len().min(5)]
    );

    let summary = KaeSummary::first_in(&log)
        .unwrap_or_else(|| panic!("no (complete) kae summary in haproxy's log:\n{log}"));
    let offloaded = summary.private.offloaded;
    let pauses = summary.async_pauses;
    let total = clients * per_client;
    eprintln!("haproxy: {total} handshakes ok; {summary:?}");
    // Every handshake needs one private operation (signature or premaster decryption).
    assert!(
        offloaded as usize >= total,
        "expected ≥ {total} offloaded private ops: {summary:?}"
    );
    assert!(pauses > 0, "the async path was not taken: {summary:?}");
}
