//! kae's async offload driven by the system `openssl` tool: `openssl speed -async_jobs` and
//! `openssl s_server -async` (TLS handshakes whose private-key operations run inside ASYNC
//! jobs). With `KAE_LOG=info` kae prints an exit summary on stderr; the tests read the
//! offloaded-operation and pause counts from it.
//!
//! Every child process has a time limit and is killed when it runs over.

mod procs;
mod skip;

use procs::{
    openssl_in, rsa2048_speed_line, run, self_signed_cert_args, write_prefer_kae_config,
    KaeSummary, SServer, TempDir,
};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// kae's exit summary on `stderr`: (private ops, offloaded private ops, async pauses).
fn parse_summary(stderr: &str) -> Option<(u64, u64, u64)> {
    KaeSummary::first_in(stderr).map(|s| (s.private.ok, s.private.offloaded, s.async_pauses))
}

#[test]
fn parse_summary_line() {
    let l = "kae[1] INFO: summary: private ops 1564 ok / 0 failed (1556 offloaded), public ops 37352 ok / 0 failed (0 offloaded), async pauses 1556, spurious resumes 0";
    assert_eq!(parse_summary(l), Some((1564, 1556, 1556)));
    let l = "kae[1] summary: private ops 7 (5 offloaded), public ops 3 (0 offloaded), errors 0, async pauses 9, spurious resumes 0";
    assert_eq!(parse_summary(l), Some((7, 5, 9)));
    assert_eq!(parse_summary("nothing here"), None);
}

// ---------------------------------------------------------------------------------------------
// openssl speed -async_jobs
// ---------------------------------------------------------------------------------------------

/// The tests of this file start CPU-bound processes (`openssl speed` on every CPU): run one at
/// a time, so that a neighbour starving the s_server test's thread cannot let a result land
/// before its job pauses (correct, but then the test sees no pause).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `openssl speed -provider kae -async_jobs 8 -seconds 1 rsa2048` in `dir` with `KAE_LOG=info`
/// on the CPU backend, started through `wrapper` (a program and its arguments: taskset,
/// strace) when it is not empty.
fn speed_cmd(dir: &TempDir, wrapper: &[&str]) -> Command {
    let inner = openssl_in(dir.path());
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(inner.get_program());
            for (k, v) in inner.get_envs() {
                match v {
                    Some(v) => c.env(k, v),
                    None => c.env_remove(k),
                };
            }
            c.current_dir(dir.path());
            c
        }
        None => inner,
    };
    cmd.args(["speed", "-provider-path"])
        .arg(dir.provider_dir())
        .args([
            "-provider",
            "kae",
            "-async_jobs",
            "8",
            "-seconds",
            "1",
            "rsa2048",
        ])
        .env("KAE_LOG", "info")
        // The CPU backend's policy is under test: on an AVX-512 IFMA machine `auto` would pick
        // the multi-buffer backend, which offloads on one CPU too.
        .env("KAE_BACKEND", "cpu");
    cmd
}

/// [`speed_cmd`], optionally pinned to CPU 0 with taskset and with `KAE_ASYNC` set; checks the
/// speed line and returns kae's summary (private ops, offloaded, async pauses) and stderr.
fn speed_async(pin_one_cpu: bool, kae_async: Option<&str>) -> (u64, u64, u64, String) {
    let dir = TempDir::new("async-cli-speed");
    let pin: &[&str] = if pin_one_cpu {
        &["taskset", "-c", "0"]
    } else {
        &[]
    };
    let mut cmd = speed_cmd(&dir, pin);
    if let Some(v) = kae_async {
        cmd.env("KAE_ASYNC", v);
    }
    let t0 = Instant::now();
    let out = run(&mut cmd, None, Duration::from_secs(60));
    eprintln!("speed ran in {:.2?}", t0.elapsed());
    assert!(out.status.success(), "speed failed\n{}", out.describe());
    let (line, nums) = rsa2048_speed_line(&out);
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

/// `KAE_ASYNC=yes`: offloaded inside ASYNC jobs on any number of CPUs.
#[test]
fn speed_async_jobs_offloads() {
    let _serial = one_at_a_time();
    let (_, offloaded, pauses, stderr) = speed_async(false, Some("yes"));
    assert!(
        offloaded > 0,
        "speed -async_jobs 8 ran no private op through the pool\n{stderr}"
    );
    assert!(pauses > 0, "no async pause\n{stderr}");
}

/// `async = auto` (the default) offloads when the process may use two CPUs or more. This needs
/// a machine with two CPUs: on one CPU the test fails saying so (it is not skipped).
#[test]
fn speed_async_jobs_auto_offloads_on_two_cpus() {
    let _serial = one_at_a_time();
    assert!(
        available_cpus() >= 2,
        "this test needs 2 CPUs (async = auto only offloads on 2 or more); {} available",
        available_cpus()
    );
    let (_, offloaded, pauses, stderr) = speed_async(false, None);
    assert!(
        offloaded > 0,
        "async = auto on {} CPUs: speed -async_jobs 8 ran no private op through the pool\n{stderr}",
        available_cpus()
    );
    assert!(pauses > 0, "no async pause\n{stderr}");
}

/// Pinned to one CPU, `async = auto` (the default) computes inline even inside ASYNC jobs
/// and says why; `KAE_ASYNC=yes` still offloads.
#[test]
fn speed_async_jobs_one_cpu() {
    let _serial = one_at_a_time();
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

/// A public operation inside an ASYNC job on a backend that is not hardware stays on the CPU
/// without asking for the process's id: `getpid` is a system call, a few percent of an
/// RSA-2048 public operation. Counted with strace over `openssl speed -async_jobs 8`, whose
/// verify half runs many times more public operations than its sign half private ones: the
/// calls must be what the private operations and start-up account for.
#[test]
fn async_public_ops_ask_no_process_id_on_the_cpu() {
    let _serial = one_at_a_time();
    if Command::new("strace").arg("-V").output().is_err() {
        skip::skipped(
            "getpid count of async public operations",
            "no strace here (apt-get install strace)",
            skip::UnderCi::Provided,
        );
        return;
    }
    let dir = TempDir::new("async-cli-getpid");
    let trace = dir.path().join("getpid.txt");
    let trace = trace.to_str().unwrap();
    let mut cmd = speed_cmd(
        &dir,
        &[
            "strace",
            "-f",
            "-qq",
            "-c",
            "-e",
            "trace=getpid",
            "-o",
            trace,
        ],
    );
    let out = run(&mut cmd, None, Duration::from_secs(60));
    assert!(out.status.success(), "speed failed\n{}", out.describe());
    let summary = KaeSummary::first_in(&out.stderr)
        .unwrap_or_else(|| panic!("no kae summary line\n{}", out.describe()));
    let (private, public) = (summary.private.ok, summary.public.ok);
    assert!(public > 1000 && private > 0, "{summary:?}");
    let table = std::fs::read_to_string(trace).unwrap();
    // strace -c: "% time  seconds  usecs/call  calls  [errors]  syscall"
    let calls: u64 = table
        .lines()
        .find(|l| l.trim_end().ends_with(" getpid"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        calls <= 4 * private + public / 50,
        "{calls} getpid calls for {private} private and {public} public operations: the \
         public ones ask for the process's id\n{table}"
    );
}

// ---------------------------------------------------------------------------------------------
// openssl s_server -async -www
// ---------------------------------------------------------------------------------------------

/// `openssl s_server -async -www` in `dir` with kae preferred (configuration `cfg`), serving
/// `naccept` connections with `srv.pem` / `srv.key`.
fn start_server(dir: &TempDir, cfg: &Path, naccept: u32) -> SServer {
    SServer::start(|port| {
        let mut cmd = openssl_in(dir.path());
        // KAE_ASYNC=yes: offload inside the ASYNC jobs on any number of CPUs.
        cmd.env("OPENSSL_CONF", cfg)
            .env("KAE_LOG", "info")
            .env("KAE_ASYNC", "yes")
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
            ]);
        cmd
    })
}

#[test]
fn s_server_async_tls_handshakes_offload() {
    let _serial = one_at_a_time();
    let dir = TempDir::new("async-cli-sserver");
    let t0 = Instant::now();
    // Server certificate and key from the default provider alone.
    let mut req = openssl_in(dir.path());
    req.args(self_signed_cert_args("srv.key", "srv.pem", "kae-test"));
    let o = run(&mut req, None, Duration::from_secs(60));
    assert!(o.status.success(), "req failed\n{}", o.describe());
    let cfg = write_prefer_kae_config(dir.path());

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
    let mut srv = start_server(&dir, &cfg, clients.len() as u32);
    let connect = srv.target();
    let mut failures = Vec::new();
    for (what, args, proto, cipher) in clients {
        // Client: default provider only (system config). -ign_eof: send the request, then
        // wait for the server's page and close.
        let mut c = openssl_in(dir.path());
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
        let out = run(
            &mut c,
            Some(b"GET / HTTP/1.0\r\n\r\n"),
            Duration::from_secs(20),
        );
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
    let stderr = srv.stderr_text();
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
