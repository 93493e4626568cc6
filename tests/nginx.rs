//! Debian's nginx (master + 2 workers) terminating TLS on loopback with kae loaded through
//! OPENSSL_CONF, configured from `provider-conf/nginx.conf` and `provider-conf/openssl-nginx.cnf`.
//!
//! * `nginx_cli_clients_through_kae`: curl and `openssl s_client` (TLS 1.2 RSA key exchange,
//!   TLS 1.2 ECDHE-RSA, TLS 1.3) get the answer, and the workers' kae exit summaries count
//!   the private operations of those handshakes.
//! * `nginx_kae_press_three_flavours`: `kae-press` runs the three handshake flavours without
//!   an error.
//! * `nginx_kae_stat_reload_and_worker_kill`: `kae-stat --json` lists the workers and their
//!   private operations rise under load; after `nginx -s reload` the new workers show up and
//!   the old ones go; after SIGKILL of a worker the master's replacement shows up and the
//!   dead pid is gone; requests keep succeeding throughout.
//! * `nginx_kill_9_of_a_worker_mid_load_leaves_the_other_serving`: SIGKILL of one worker
//!   while `kae-press` loads both (`KAE_KILL_SECS`, default 6; `scripts/soak.sh` runs 60): only
//!   connections the victim held fail, the other worker goes on serving (its kae counters
//!   rise after the kill), the master replaces the victim and a new load fails nothing. (The
//!   HAProxy soak cannot show this: HAProxy 2.6 runs one worker process, with threads.)
//!
//! Needs the Debian `nginx`, `curl` and `openssl` packages (`.ci/run` installs them). Set
//! KAE_SKIP_NGINX=1 to skip on a machine without nginx; without it a missing nginx is a
//! failure. `kae-press` and `kae-stat` are the kae-tools package's binaries (built by
//! `cargo test --workspace`, the default at the root, or `cargo build --release --workspace`;
//! or point KAE_PRESS / KAE_STAT at them): when missing or stale, their tests fail.

mod procs;

use procs::{
    free_port, https_get, module_path, openssl_without_config, press_json_u64, run, run_ok,
    self_signed_cert_args, tool_bin, wait_for, KaeSummary, TempDir, TlsFlavor,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

// ---- locating things ------------------------------------------------------------------------

/// The kae-tools binaries (`$KAE_PRESS` / `$KAE_STAT`, else target/<profile>/; see
/// `procs::tool_bin`). Panics when absent or stale: a missing tool must fail its test, not
/// skip it.
fn kae_press() -> PathBuf {
    tool_bin("kae-press")
}

fn kae_stat() -> PathBuf {
    tool_bin("kae-stat")
}

/// Debian installs nginx in /usr/sbin, which is not on every user's PATH.
fn nginx_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("nginx"))
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|p| p.is_file())
}

/// The nginx binary, or None when missing and KAE_SKIP_NGINX is set.
fn need_nginx() -> Option<PathBuf> {
    match nginx_binary() {
        Some(p) => Some(p),
        None if std::env::var("KAE_SKIP_NGINX")
            .map(|v| v != "0")
            .unwrap_or(false) =>
        {
            eprintln!("nginx not installed; skipped (KAE_SKIP_NGINX set)");
            None
        }
        None => panic!("nginx is not installed (apt-get install nginx, or set KAE_SKIP_NGINX=1)"),
    }
}

// ---- processes ------------------------------------------------------------------------------

/// Parent pid from /proc/PID/stat (None when the process is gone).
fn ppid_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    f.next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    ppid_of(pid).is_some()
}

/// Live children of `parent`.
fn children(parent: u32) -> BTreeSet<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| ppid_of(p) == Some(parent))
        .collect()
}

/// A running nginx (master in the foreground, in its own process group). Dropping it kills
/// the whole group: master, workers, and workers orphaned by a killed master.
struct Nginx {
    child: Option<Child>,
    /// Configuration, certificate, logs; removed after nginx is gone when the test passed.
    dir: TempDir,
    port: u16,
    nginx: PathBuf,
    cnf: PathBuf,
}

impl Nginx {
    /// Writes the configs derived from the templates into a fresh temp dir, makes a key and
    /// certificate (default provider only) and starts nginx with kae through OPENSSL_CONF.
    fn start(nginx: PathBuf, tag: &str) -> Nginx {
        let dir = TempDir::new(tag);
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));

        run_ok(
            openssl_without_config()
                .args(self_signed_cert_args(
                    dir.join("server.key"),
                    dir.join("server.crt"),
                    "localhost",
                ))
                // Extensions make it an X.509 v3 certificate: rustls (kae-press's default
                // client) rejects the v1 certificate `req -x509` makes without a config.
                .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]),
        );

        let port = free_port();
        let template = std::fs::read_to_string(manifest.join("provider-conf/nginx.conf")).unwrap();
        let must_replace = |text: &str, from: &str, to: &str| -> String {
            assert!(text.contains(from), "template no longer contains {from:?}");
            text.replacen(from, to, 1)
        };
        let conf = must_replace(
            &template,
            "listen 127.0.0.1:8443 ssl;",
            &format!("listen 127.0.0.1:{port} ssl;"),
        );
        for line in [
            "worker_processes 2;",
            "daemon off;",
            "master_process on;",
            "env OPENSSL_CONF;",
        ] {
            assert!(
                conf.lines().any(|l| l.trim() == line),
                "template lacks {line:?}"
            );
        }
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();

        let cnf_template =
            std::fs::read_to_string(manifest.join("provider-conf/openssl-nginx.cnf")).unwrap();
        let cnf = dir.join("openssl.cnf");
        std::fs::write(
            &cnf,
            must_replace(
                &cnf_template,
                "\nmodule = kae.so\n",
                &format!("\nmodule = {}\n", module_path().display()),
            ),
        )
        .unwrap();

        // Configuration check first: a clearer message than a server that never listens.
        run_ok(
            Command::new(&nginx)
                .env("OPENSSL_CONF", &cnf)
                .arg("-t")
                .args(Self::location_args(dir.path())),
        );

        let child = Command::new(&nginx)
            .env("OPENSSL_CONF", &cnf)
            .env("KAE_LOG", "info")
            .args(Self::location_args(dir.path()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .process_group(0)
            .spawn()
            .expect("start nginx");
        let n = Nginx {
            child: Some(child),
            dir,
            port,
            nginx,
            cnf,
        };
        let listening = wait_for(Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        if listening.is_none() {
            panic!("nginx did not listen on {port} within 10 s\n{}", n.logs());
        }
        let workers = n.wait_workers(|w| w.len() == 2, "2 workers after start");
        eprintln!(
            "nginx master {} workers {workers:?} port {port}",
            n.master()
        );
        n
    }

    /// -p (prefix: pid, logs, temp dirs), -c (config; the certificate sits next to it) and
    /// -e (the error log used before the config is read).
    fn location_args(dir: &Path) -> Vec<String> {
        vec![
            "-p".into(),
            format!("{}/", dir.display()),
            "-c".into(),
            dir.join("nginx.conf").display().to_string(),
            "-e".into(),
            dir.join("error.log").display().to_string(),
        ]
    }

    fn master(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn workers(&self) -> BTreeSet<u32> {
        children(self.master())
    }

    /// Waits until the set of workers satisfies `ok` (10 s), returning it.
    fn wait_workers(&self, ok: impl Fn(&BTreeSet<u32>) -> bool, what: &str) -> BTreeSet<u32> {
        wait_for(Duration::from_secs(10), || {
            Some(self.workers()).filter(|w| ok(w))
        })
        .unwrap_or_else(|| {
            panic!(
                "nginx: no {what} within 10 s (workers now {:?})\n{}",
                self.workers(),
                self.logs()
            )
        })
    }

    fn logs(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!(
            "--- error.log\n{}--- stderr\n{}",
            read("error.log"),
            read("stderr.log")
        )
    }

    /// `nginx -s reload` (a separate nginx process that signals the master through the pid file).
    fn reload(&self) {
        run_ok(
            Command::new(&self.nginx)
                .env("OPENSSL_CONF", &self.cnf)
                .args(Self::location_args(self.dir.path()))
                .args(["-s", "reload"]),
        );
    }

    /// Graceful stop (SIGQUIT): workers finish and exit normally, so kae logs their summaries.
    fn stop(&mut self) -> String {
        let mut child = self.child.take().unwrap();
        // SAFETY: plain kill(2) on our child.
        unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
        let exited = wait_for(Duration::from_secs(15), || child.try_wait().unwrap());
        // Whatever is left of the group goes now.
        // SAFETY: kill(2) on the process group we created for nginx.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
        let logs = self.logs();
        assert!(
            exited.is_some(),
            "nginx did not stop on SIGQUIT within 15 s\n{logs}"
        );
        logs
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Graceful first, so the workers exit normally and kae removes their counter
            // pages; then whatever is left of the process group goes.
            // SAFETY: kill(2) on our child, then on the process group we created for it.
            unsafe { libc::kill(c.id() as i32, libc::SIGQUIT) };
            let _ = wait_for(Duration::from_secs(3), || c.try_wait().ok().flatten());
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.kill();
            let _ = c.wait();
        }
        // `dir` (a TempDir) goes next: removed unless the test failed.
    }
}

// ---- clients --------------------------------------------------------------------------------

/// One fresh connection (full handshake) and one HTTP/1.0 request, in this process; the
/// answer must be nginx's `ok`.
fn https_get_ok(port: u16, flavor: TlsFlavor) -> Result<(), String> {
    let resp = https_get(port, flavor)?;
    if resp.starts_with("HTTP/1.1 200") && resp.ends_with("\r\n\r\nok\n") {
        Ok(())
    } else {
        Err(format!("{flavor:?}: unexpected response {resp:?}"))
    }
}

/// `n` requests cycling through the flavours; panics with the first errors.
fn load(port: u16, n: usize, nginx: &Nginx) {
    let errs: Vec<String> = (0..n)
        .filter_map(|i| https_get_ok(port, TlsFlavor::ALL[i % 3]).err())
        .collect();
    assert!(
        errs.is_empty(),
        "{} of {n} requests failed: {:?}\n{}",
        errs.len(),
        &errs[..errs.len().min(3)],
        nginx.logs()
    );
}

fn curl(port: u16) -> String {
    run_ok(
        Command::new("curl")
            .env("OPENSSL_CONF", "/dev/null")
            .args(["-sSk", "--max-time", "10"])
            .arg(format!("https://127.0.0.1:{port}/")),
    )
}

/// `openssl s_client` with the given options; returns its stdout (handshake report + response).
fn s_client(port: u16, opts: &[&str]) -> String {
    // nginx closes an HTTP/1.0 connection after the answer; s_client then exits (else it is
    // killed after 15 s and this panics).
    let out = run(
        openssl_without_config()
            .arg("s_client")
            .arg("-connect")
            .arg(format!("127.0.0.1:{port}"))
            .args(["-servername", "localhost", "-ign_eof"])
            .args(opts),
        Some(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"),
        Duration::from_secs(15),
    );
    assert!(
        out.status.success(),
        "s_client {opts:?} failed ({:?}):\n{}{}",
        out.status,
        out.stdout,
        out.stderr
    );
    out.stdout
}

// ---- a minimal JSON reader (for kae-stat's and kae-press's one-line outputs) ----------------

#[derive(Clone, Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let b = text.trim().as_bytes();
        let mut i = 0;
        let v = Self::value(b, &mut i)?;
        if i != b.len() {
            return Err(format!("trailing text at {i} in {text}"));
        }
        Ok(v)
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Result<Json, String> {
        Self::ws(b, i);
        let err = |i: usize| format!("bad JSON at byte {i}");
        match b.get(*i).ok_or_else(|| err(*i))? {
            b'{' => {
                *i += 1;
                let mut m = BTreeMap::new();
                Self::ws(b, i);
                if b.get(*i) == Some(&b'}') {
                    *i += 1;
                    return Ok(Json::Obj(m));
                }
                loop {
                    Self::ws(b, i);
                    let Json::Str(k) = Self::value(b, i)? else {
                        return Err(err(*i));
                    };
                    Self::ws(b, i);
                    if b.get(*i) != Some(&b':') {
                        return Err(err(*i));
                    }
                    *i += 1;
                    m.insert(k, Self::value(b, i)?);
                    Self::ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return Ok(Json::Obj(m));
                        }
                        _ => return Err(err(*i)),
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut v = Vec::new();
                Self::ws(b, i);
                if b.get(*i) == Some(&b']') {
                    *i += 1;
                    return Ok(Json::Arr(v));
                }
                loop {
                    v.push(Self::value(b, i)?);
                    Self::ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b']') => {
                            *i += 1;
                            return Ok(Json::Arr(v));
                        }
                        _ => return Err(err(*i)),
                    }
                }
            }
            b'"' => {
                *i += 1;
                let mut s = String::new();
                loop {
                    match b.get(*i).ok_or_else(|| err(*i))? {
                        b'"' => {
                            *i += 1;
                            return Ok(Json::Str(s));
                        }
                        b'\\' => {
                            let c = *b.get(*i + 1).ok_or_else(|| err(*i))?;
                            *i += 2;
                            match c {
                                b'n' => s.push('\n'),
                                b't' => s.push('\t'),
                                b'r' => s.push('\r'),
                                b'b' => s.push('\u{8}'),
                                b'f' => s.push('\u{c}'),
                                b'u' => {
                                    let hex = std::str::from_utf8(
                                        b.get(*i..*i + 4).ok_or_else(|| err(*i))?,
                                    )
                                    .map_err(|_| err(*i))?;
                                    let code = u32::from_str_radix(hex, 16).map_err(|_| err(*i))?;
                                    s.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                                    *i += 4;
                                }
                                other => s.push(other as char),
                            }
                        }
                        _ => {
                            // Copy one UTF-8 character.
                            let rest = std::str::from_utf8(&b[*i..]).map_err(|_| err(*i))?;
                            let ch = rest.chars().next().unwrap();
                            s.push(ch);
                            *i += ch.len_utf8();
                        }
                    }
                }
            }
            b't' if b[*i..].starts_with(b"true") => {
                *i += 4;
                Ok(Json::Bool(true))
            }
            b'f' if b[*i..].starts_with(b"false") => {
                *i += 5;
                Ok(Json::Bool(false))
            }
            b'n' if b[*i..].starts_with(b"null") => {
                *i += 4;
                Ok(Json::Null)
            }
            _ => {
                let start = *i;
                while *i < b.len()
                    && matches!(b[*i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    *i += 1;
                }
                std::str::from_utf8(&b[start..*i])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .map(Json::Num)
                    .ok_or_else(|| err(start))
            }
        }
    }

    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m
                .get(key)
                .unwrap_or_else(|| panic!("no key {key:?} in {self:?}")),
            _ => panic!("not an object: {self:?}"),
        }
    }

    fn num(&self, key: &str) -> f64 {
        match self.get(key) {
            Json::Num(n) => *n,
            other => panic!("{key} is not a number: {other:?}"),
        }
    }

    fn str(&self, key: &str) -> &str {
        match self.get(key) {
            Json::Str(s) => s,
            other => panic!("{key} is not a string: {other:?}"),
        }
    }
}

#[test]
fn json_reader_reads_the_tool_lines() {
    let j = Json::parse(
        r#"{"kae_stat":1,"processes":[{"pid":12,"comm":"nginx","x":-1.5e2,"ok":true}],"total":{"in_flight":0},"s":"a\"b\u0041"}"#,
    )
    .unwrap();
    assert_eq!(j.num("kae_stat"), 1.0);
    let Json::Arr(p) = j.get("processes") else {
        panic!()
    };
    assert_eq!(p[0].str("comm"), "nginx");
    assert_eq!(p[0].num("x"), -150.0);
    assert_eq!(j.str("s"), "a\"bA");
    assert!(Json::parse("{\"a\":1,}").is_err());
    assert!(Json::parse("[1 2]").is_err());
}

// ---- kae-stat ---------------------------------------------------------------------------------

/// Per-pid rows of `kae-stat --json`.
fn kae_stat_rows() -> BTreeMap<u32, Json> {
    let out = run_ok(Command::new(kae_stat()).arg("--json"));
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in kae-stat --json output:\n{out}"));
    let j = Json::parse(line).unwrap_or_else(|e| panic!("kae-stat --json: {e}:\n{line}"));
    assert_eq!(j.num("kae_stat"), 1.0, "{line}");
    let Json::Arr(procs) = j.get("processes") else {
        panic!("processes is not an array: {line}")
    };
    let _ = j.get("total");
    procs
        .iter()
        .map(|p| (p.num("pid") as u32, p.clone()))
        .collect()
}

fn private_ops(row: &Json) -> u64 {
    (row.num("ops_private_inline") + row.num("ops_private_offloaded")) as u64
}

/// Waits until kae-stat lists every pid of `want` (with comm "nginx") and none of `gone`.
fn wait_kae_stat(want: &BTreeSet<u32>, gone: &BTreeSet<u32>, nginx: &Nginx) -> BTreeMap<u32, Json> {
    let mut last = BTreeMap::new();
    let ok = wait_for(Duration::from_secs(10), || {
        last = kae_stat_rows();
        let all_in = want
            .iter()
            .all(|p| last.get(p).is_some_and(|r| r.str("comm") == "nginx"));
        let none_gone = gone.iter().all(|p| !last.contains_key(p));
        (all_in && none_gone).then(|| last.clone())
    });
    ok.unwrap_or_else(|| {
        panic!(
            "kae-stat: expected nginx pids {want:?} and none of {gone:?}; it lists {:?}\n{}",
            last.iter()
                .map(|(p, r)| format!("{p}:{}", r.str("comm")))
                .collect::<Vec<_>>(),
            nginx.logs()
        )
    })
}

/// Root of kae's counter pages (as the test runner and nginx see it).
fn stats_root() -> PathBuf {
    std::env::var_os("KAE_STATS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/dev/shm/kae".into())
}

/// Pages of `pid` that still hold its counters (not marked as moved away), in any user
/// directory `<root>/<uid>`.
fn current_pages_of(pid: u32) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(stats_root()) else {
        return Vec::new();
    };
    dirs.flatten()
        .map(|d| d.path().join(format!("kae-stats.{pid}")))
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.len() >= 8 && &b[..8] != b"KAEMOVD\0"))
        .collect()
}

/// The effective uid of a live process (from /proc).
fn euid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no effective uid in /proc/{pid}/status"))
}

fn sum_private(rows: &BTreeMap<u32, Json>, pids: &BTreeSet<u32>) -> u64 {
    pids.iter()
        .filter_map(|p| rows.get(p))
        .map(private_ops)
        .sum()
}

// ---- tests ----------------------------------------------------------------------------------

#[test]
fn nginx_cli_clients_through_kae() {
    let Some(bin) = need_nginx() else { return };
    let mut ngx = Nginx::start(bin, "nginx-cli");
    let port = ngx.port;
    let workers = ngx.workers();

    assert_eq!(curl(port), "ok\n", "curl's answer\n{}", ngx.logs());
    let checks: [(&[&str], &str, &str); 3] = [
        (
            &["-tls1_2", "-cipher", "AES256-GCM-SHA384"],
            "TLSv1.2",
            "AES256-GCM-SHA384",
        ),
        (
            &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
            "TLSv1.2",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ),
        (&["-tls1_3"], "TLSv1.3", "TLS_AES_256_GCM_SHA384"),
    ];
    for (opts, proto, cipher) in checks {
        let out = s_client(port, opts);
        let want = format!("New, {proto}, Cipher is {cipher}");
        assert!(
            out.contains(&want),
            "s_client {opts:?}: no {want:?} in\n{out}"
        );
        assert!(
            out.contains("HTTP/1.1 200 OK") && out.contains("\nok\n"),
            "s_client {opts:?}: no answer in\n{out}"
        );
    }

    // Each full handshake costs the server one RSA private operation: curl + 3 × s_client.
    let logs = ngx.stop();
    let summaries = KaeSummary::all_in(&logs).unwrap_or_default();
    let mut total = 0u64;
    for w in &workers {
        let s = summaries
            .iter()
            .find(|s| s.pid == Some(*w))
            .unwrap_or_else(|| panic!("no kae summary of worker {w} in nginx's logs\n{logs}"));
        assert_eq!(s.private.failed, 0, "worker {w}: failed private ops: {s:?}");
        total += s.private.ok;
    }
    assert!(
        total >= 4,
        "workers {workers:?} did only {total} private ops through kae for 4 handshakes\n{logs}"
    );
    assert!(
        !logs.contains("[alert]") && !logs.contains("[emerg]"),
        "nginx reported problems\n{logs}"
    );
}

#[test]
fn nginx_kae_press_three_flavours() {
    let Some(bin) = need_nginx() else { return };
    let press = kae_press();
    let ngx = Nginx::start(bin, "nginx-press");
    let target = format!("127.0.0.1:{}", ngx.port);
    let requests = 30;
    let runs: [(&[&str], &str, &str); 3] = [
        (
            &[
                "--client",
                "openssl",
                "--tls",
                "1.2",
                "--cipher",
                "AES256-GCM-SHA384",
            ],
            "1.2",
            "AES256-GCM-SHA384",
        ),
        (
            &[
                "--client",
                "openssl",
                "--tls",
                "1.2",
                "--cipher",
                "ECDHE-RSA-AES256-GCM-SHA384",
            ],
            "1.2",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ),
        (&["--tls", "1.3"], "1.3", "AES"),
    ];
    for (opts, proto, cipher) in runs {
        let out = run_ok(
            Command::new(&press)
                .env("OPENSSL_CONF", "/dev/null")
                .args(["-c", "4", "-n", &requests.to_string(), "--json"])
                .args(opts)
                .arg(&target),
        );
        let line = out
            .lines()
            .rev()
            .find(|l| l.contains("\"kae_press\""))
            .unwrap_or_else(|| panic!("kae-press {opts:?}: no JSON line in\n{out}"));
        let j = Json::parse(line).unwrap_or_else(|e| panic!("kae-press {opts:?}: {e}\n{line}"));
        assert_eq!(
            j.num("errors"),
            0.0,
            "kae-press {opts:?}: {line}\n{}",
            ngx.logs()
        );
        assert_eq!(
            j.num("handshakes"),
            requests as f64,
            "kae-press {opts:?}: {line}"
        );
        assert!(
            j.str("protocol").contains(proto),
            "kae-press {opts:?}: protocol: {line}"
        );
        assert!(
            j.str("cipher").replace('_', "-").contains(cipher),
            "kae-press {opts:?}: cipher: {line}"
        );
        assert!(
            j.num("handshakes_per_s") > 0.0,
            "kae-press {opts:?}: {line}"
        );
    }
}

#[test]
fn nginx_kae_stat_reload_and_worker_kill() {
    let Some(bin) = need_nginx() else { return };
    let _ = kae_stat(); // fail early when the tool is missing
    let ngx = Nginx::start(bin, "nginx-stat");
    let port = ngx.port;

    // Both workers are listed; their private operations rise with the load.
    let workers = ngx.workers();
    let before = wait_kae_stat(&workers, &BTreeSet::new(), &ngx);
    load(port, 12, &ngx);
    let after = wait_kae_stat(&workers, &BTreeSet::new(), &ngx);
    let (b, a) = (
        sum_private(&before, &workers),
        sum_private(&after, &workers),
    );
    assert!(
        a >= b + 12,
        "workers' private ops went from {b} to {a} over 12 handshakes"
    );
    assert!(
        after.contains_key(&ngx.master()),
        "kae-stat does not list the master {}",
        ngx.master()
    );
    // Workers that switched to nginx's `user` after the fork publish under that uid from
    // their first operation on (an idle one stays where the fork put it).
    for w in workers.iter().filter(|w| private_ops(&after[*w]) > 0) {
        assert_eq!(
            after[w].num("uid") as u32,
            euid_of(*w),
            "worker {w}'s page is not in its own uid's directory"
        );
    }

    // Reload: a new generation of workers, the old one exits; still serving.
    ngx.reload();
    let new = ngx.wait_workers(
        |w| w.len() == 2 && w.is_disjoint(&workers),
        "2 new workers after reload",
    );
    // The old workers remove their pages themselves when they exit (checked on the files,
    // before kae-stat, which would remove stale pages, runs again).
    let ok = wait_for(Duration::from_secs(20), || {
        workers
            .iter()
            .all(|w| !alive(*w) && current_pages_of(*w).is_empty())
            .then_some(())
    });
    assert!(
        ok.is_some(),
        "pages of the old workers left behind: {:?}",
        workers
            .iter()
            .flat_map(|w| current_pages_of(*w))
            .collect::<Vec<_>>()
    );
    let rows = wait_kae_stat(&new, &workers, &ngx);
    let b = sum_private(&rows, &new);
    load(port, 6, &ngx);
    assert_eq!(curl(port), "ok\n");
    let rows = wait_kae_stat(&new, &workers, &ngx);
    assert!(
        sum_private(&rows, &new) >= b + 7,
        "new workers' private ops did not rise after reload"
    );

    // SIGKILL one worker: the master starts a replacement; the dead pid leaves kae-stat.
    let victim = *new.iter().next().unwrap();
    // SAFETY: kill(2) on an nginx worker we started.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let replaced = ngx.wait_workers(
        |w| w.len() == 2 && !w.contains(&victim),
        "replacement worker",
    );
    assert!(wait_for(Duration::from_secs(5), || (!alive(victim)).then_some(())).is_some());
    let gone: BTreeSet<u32> = workers.iter().copied().chain([victim]).collect();
    let rows = wait_kae_stat(&replaced, &gone, &ngx);
    let b = sum_private(&rows, &replaced);
    load(port, 6, &ngx);
    assert_eq!(curl(port), "ok\n");
    let rows = wait_kae_stat(&replaced, &gone, &ngx);
    assert!(
        sum_private(&rows, &replaced) >= b + 7,
        "private ops did not rise after the worker was replaced"
    );

    // A killed process cannot remove its counter page; tidy up the one we caused (kae-stat
    // above removes it too, as stale).
    for p in current_pages_of(victim) {
        let _ = std::fs::remove_file(p);
    }
}

/// `kae-press -c CONNS -d SECS --json` against nginx (no OpenSSL configuration); its output.
fn press_for(port: u16, conns: u32, secs: u64) -> procs::Output {
    run(
        Command::new(kae_press())
            .args(["-c", &conns.to_string(), "-d", &secs.to_string(), "--json"])
            .arg(format!("127.0.0.1:{port}"))
            .env("OPENSSL_CONF", "/dev/null"),
        None,
        Duration::from_secs(secs + 60),
    )
}

#[test]
fn nginx_kill_9_of_a_worker_mid_load_leaves_the_other_serving() {
    let Some(bin) = need_nginx() else { return };
    let _ = kae_stat(); // fail early when the tool is missing
    let secs: u64 = std::env::var("KAE_KILL_SECS")
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .expect("KAE_KILL_SECS is a number of seconds")
        })
        .unwrap_or(6)
        .max(3);
    let conns = 8u32;
    let ngx = Nginx::start(bin, "nginx-kill9");
    let port = ngx.port;
    let workers = ngx.workers();
    wait_kae_stat(&workers, &BTreeSet::new(), &ngx);
    let (victim, survivor) = {
        let mut it = workers.iter().copied();
        (it.next().unwrap(), it.next().unwrap())
    };
    let (out, at_kill) = std::thread::scope(|s| {
        let load = s.spawn(|| press_for(port, conns, secs));
        std::thread::sleep(Duration::from_secs(secs / 3));
        let at_kill = private_ops(&kae_stat_rows()[&survivor]);
        // SAFETY: kill(2) on an nginx worker we started.
        unsafe { libc::kill(victim as i32, libc::SIGKILL) };
        (load.join().unwrap(), at_kill)
    });
    let handshakes = press_json_u64(&out.stdout, "handshakes");
    let errors = press_json_u64(&out.stdout, "errors");
    assert!(
        alive(survivor),
        "the other worker {survivor} died too\n{}",
        ngx.logs()
    );
    let replaced = ngx.wait_workers(
        |w| w.len() == 2 && !w.contains(&victim) && w.contains(&survivor),
        "a replacement for the killed worker, the other one still there",
    );
    let rows = wait_kae_stat(&BTreeSet::from([survivor]), &BTreeSet::new(), &ngx);
    let survivor_after = private_ops(&rows[&survivor]);
    eprintln!(
        "nginx kill -9: worker {victim} killed {} s into a {secs} s load of {conns} connections: \
         {handshakes:?} handshakes, {errors:?} failed; worker {survivor}'s private ops {at_kill} at \
         the kill, {survivor_after} after; workers now {replaced:?}",
        secs / 3
    );
    assert!(
        handshakes.is_some_and(|h| h > 0) && errors.is_some_and(|e| e <= u64::from(conns)),
        "more failures than the connections the killed worker could hold:\n{}\n{}",
        out.describe(),
        ngx.logs()
    );
    assert!(
        survivor_after > at_kill,
        "worker {survivor} served nothing after the kill ({at_kill} -> {survivor_after})"
    );
    // Both workers (the survivor and the replacement) serve a new load without a failure.
    let again = press_for(port, conns, 2);
    assert!(
        press_json_u64(&again.stdout, "errors") == Some(0)
            && press_json_u64(&again.stdout, "handshakes").is_some_and(|h| h > 0),
        "a load after the replacement failed:\n{}\n{}",
        again.describe(),
        ngx.logs()
    );
    // A killed process cannot remove its counter page (kae-stat removes it as stale too).
    for p in current_pages_of(victim) {
        let _ = std::fs::remove_file(p);
    }
}
