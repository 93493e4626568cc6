//! HAProxy with `ssl-mode-async` terminating TLS on loopback with kae loaded through
//! OPENSSL_CONF: many concurrent clients make fresh full handshakes (TLS 1.2 RSA key exchange,
//! TLS 1.2 ECDHE-RSA, TLS 1.3); all must succeed, and kae's exit summary must show the async
//! path was taken (offloaded private operations and pauses > 0), on the CPU backend.
//!
//! `haproxy_soak_memory_fds_and_handshakes_stay_flat` keeps it under `kae-press` load for
//! `KAE_SOAK_SECS` seconds (default 20; `scripts/soak.sh` runs 600): resident memory and open
//! descriptors must stay flat and no handshake may fail.
//!
//! Needs the Debian `haproxy` package (`.ci/run` installs it). Set KAE_SKIP_HAPROXY=1 to skip
//! on a machine without it; without that variable a missing haproxy is a failure.

mod procs;

use procs::{
    fd_count_of, free_port, https_get, openssl_without_config, press_json_u64, run, run_ok,
    self_signed_cert_args, tool_bin, wait_deadline, wait_until, write_prefer_kae_config,
    KaeSummary, KillOnDrop, ProcSampler, TempDir, TlsFlavor,
};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether haproxy is installed; panics when it is not, unless KAE_SKIP_HAPROXY is set.
fn have_haproxy() -> bool {
    if Command::new("haproxy").arg("-v").output().is_ok() {
        return true;
    }
    if std::env::var("KAE_SKIP_HAPROXY").is_ok() {
        eprintln!("haproxy not installed; skipped (KAE_SKIP_HAPROXY set)");
        return false;
    }
    panic!("haproxy is not installed (apt-get install haproxy, or set KAE_SKIP_HAPROXY=1)");
}

/// `haproxy -c` of `cfg` (must pass), then haproxy in the foreground with kae (`cnf`), its
/// stderr in `stderr_path`, `KAE_LOG=info` and `env`. The CPU backend offloads every private
/// operation of an async job, which is what these tests check; on an IFMA CPU `auto` would
/// pick the multi-buffer backend, which computes inline while too few requests come together.
fn checked_and_started(
    cnf: &Path,
    cfg: &Path,
    stderr_path: &Path,
    env: &[(&str, &str)],
) -> KillOnDrop {
    run_ok(
        Command::new("haproxy")
            .env("OPENSSL_CONF", cnf)
            .arg("-c")
            .arg("-f")
            .arg(cfg),
    );
    let child = Command::new("haproxy")
        .env("OPENSSL_CONF", cnf)
        .env("KAE_LOG", "info")
        .env("KAE_BACKEND", "cpu")
        .envs(env.iter().copied())
        .arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr_path).unwrap())
        .spawn()
        .expect("start haproxy");
    KillOnDrop(child)
}

#[test]
fn haproxy_ssl_mode_async_with_kae() {
    if !have_haproxy() {
        return;
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
    let stderr_path = dir.join("haproxy.err");
    let mut server = checked_and_started(&cnf, &cfg, &stderr_path, &[]);
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

/// Soak duration without `KAE_SOAK_SECS`.
const SOAK_SECS_SHORT: u64 = 20;

/// HAProxy (`ssl-mode-async`, kae on CPU workers with `async = yes`, no TLS session cache and
/// no tickets: every handshake is a full one) under two `kae-press` loads at once for
/// `KAE_SOAK_SECS` (default 20, at least 10): TLS 1.3 (rustls; RSA-PSS signatures) and TLS 1.2
/// with RSA key exchange (OpenSSL client; RSA decryptions). HAProxy's resident memory, sampled
/// every second, stays within 5% of its value at the end of the warm-up (the first fifth, at
/// least 5 s); its open descriptors at rest after the load equal those before it; no
/// handshake fails; kae's exit summary shows every private operation offloaded, none failed.
#[test]
fn haproxy_soak_memory_fds_and_handshakes_stay_flat() {
    if !have_haproxy() {
        return;
    }
    let secs: u64 = std::env::var("KAE_SOAK_SECS")
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .expect("KAE_SOAK_SECS is a number of seconds")
        })
        .unwrap_or(SOAK_SECS_SHORT)
        .max(10);
    let warmup = Duration::from_secs((secs / 5).max(5));
    let press = tool_bin("kae-press");
    let dir = TempDir::new("haproxy-soak");
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    // An X.509 v3 certificate (rustls, kae-press's default client, refuses v1 ones).
    run_ok(
        openssl_without_config()
            .args(self_signed_cert_args(&key, &cert, "localhost"))
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]),
    );
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
            "global\n    ssl-mode-async\n    nbthread 1\n    maxconn 1000\n    tune.ssl.cachesize 0\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
             frontend fe\n    bind 127.0.0.1:{port} ssl crt {} ssl-min-ver TLSv1.2 no-tls-tickets \
             ciphers AES256-GCM-SHA384:AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256\n    \
             http-request return status 200 content-type text/plain string \"kae-ok\\n\"\n",
            pem.display()
        ),
    )
    .unwrap();
    let stderr_path = dir.join("haproxy.err");
    let mut server = checked_and_started(&cnf, &cfg, &stderr_path, &[("KAE_ASYNC", "yes")]);
    let pid = server.0.id();
    wait_until(
        &format!("haproxy to listen on {port}"),
        Duration::from_secs(10),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    // One handshake of each kind first, so that what is opened once (kae's pool, its wait
    // fds) is open before the first count.
    for flavor in TlsFlavor::ALL {
        https_get(port, flavor).unwrap_or_else(|e| panic!("{flavor:?}: {e}"));
    }
    std::thread::sleep(Duration::from_millis(500));
    let fds_before = fd_count_of(pid).expect("haproxy is running");
    let sampler = ProcSampler::start(pid, Duration::from_secs(1));
    let target = format!("127.0.0.1:{port}");
    let d = secs.to_string();
    let loads: [(&str, Vec<&str>); 2] = [
        ("tls13", vec!["-c", "8", "-d", &d, "--json", &target]),
        (
            "tls12-rsa",
            vec![
                "-c",
                "4",
                "-d",
                &d,
                "--json",
                "--client",
                "openssl",
                "--cipher",
                "AES128-GCM-SHA256",
                &target,
            ],
        ),
    ];
    let outs: Vec<(&str, procs::Output)> = std::thread::scope(|s| {
        let hs: Vec<_> = loads
            .iter()
            .map(|(name, args)| {
                let press = &press;
                s.spawn(move || {
                    let out = run(
                        Command::new(press)
                            .args(args)
                            .env("OPENSSL_CONF", "/dev/null"),
                        None,
                        Duration::from_secs(secs + 60),
                    );
                    (*name, out)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Connections closed: the descriptors at rest again.
    std::thread::sleep(Duration::from_secs(2));
    let fds_after = fd_count_of(pid).expect("haproxy is still running");
    let samples = sampler.stop();

    // SAFETY: plain kill(2) on our child (soft stop: kae logs its summary at exit).
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    if wait_deadline(&mut server.0, Duration::from_secs(20)).is_none() {
        panic!("haproxy did not stop on SIGUSR1");
    }
    let log = std::fs::read_to_string(&stderr_path).unwrap();

    let mut handshakes = 0;
    for (name, out) in &outs {
        let hs = press_json_u64(&out.stdout, "handshakes");
        let errors = press_json_u64(&out.stdout, "errors");
        assert!(
            out.status.success() && hs.is_some_and(|h| h > 0) && errors == Some(0),
            "kae-press {name}: {hs:?} handshakes, {errors:?} failed\n{}\nhaproxy log:\n{log}",
            out.describe()
        );
        handshakes += hs.unwrap();
    }
    let loaded: Vec<_> = samples
        .iter()
        .filter(|s| s.at >= warmup && s.at <= Duration::from_secs(secs))
        .collect();
    assert!(
        loaded.len() >= 3,
        "too few samples after the warm-up: {samples:?}"
    );
    let base = loaded[0].rss_kb;
    let max = loaded.iter().map(|s| s.rss_kb).max().unwrap();
    let min = loaded.iter().map(|s| s.rss_kb).min().unwrap();
    let last = loaded.last().unwrap().rss_kb;
    let max_fds = samples.iter().map(|s| s.fds).max().unwrap();
    let growth = (max as f64 / base as f64 - 1.0) * 100.0;
    let summary = KaeSummary::first_in(&log);
    eprintln!(
        "haproxy soak: {secs} s, {handshakes} handshakes ({:.0}/s), 0 failed; VmRSS after the \
         {warmup:?} warm-up {base} kB, range {min}..{max} kB (max {growth:+.1}%), last {last} kB; \
         fds at rest {fds_before} before, {fds_after} after, at most {max_fds} under load; \
         kae: {summary:?}",
        handshakes as f64 / secs as f64
    );
    assert!(
        max as f64 <= base as f64 * 1.05,
        "haproxy's VmRSS grew more than 5% after the warm-up: {base} kB -> {max} kB: {:?}",
        loaded.iter().map(|s| s.rss_kb).collect::<Vec<_>>()
    );
    assert!(
        fds_after <= fds_before,
        "haproxy's open descriptors grew from {fds_before} to {fds_after} (at rest)"
    );
    let summary =
        summary.unwrap_or_else(|| panic!("no (complete) kae summary in haproxy's log:\n{log}"));
    assert!(
        summary.private.failed == 0 && summary.private.offloaded >= handshakes,
        "every handshake's private operation offloaded, none failed: {summary:?}"
    );
    assert!(
        summary.async_pauses > 0,
        "the async path was not taken: {summary:?}"
    );
}
