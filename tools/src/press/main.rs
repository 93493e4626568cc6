//! kae-press: a TLS handshake load generator for loopback benchmarks of a web
//! server (nginx, HAProxy, `openssl s_server -www`) with and without kae.
//!
//! The client shares a small machine with the server, so it must be cheap per
//! handshake: the default client is rustls (ring crypto), a single-threaded
//! tokio runtime, no certificate-chain verification (the handshake signature
//! is still verified, as any real client does), no session resumption and no
//! TLS 1.2 tickets. `--client openssl` uses the system OpenSSL instead, for what
//! rustls cannot do (TLS 1.2 RSA key exchange, e.g. `AES256-GCM-SHA384`).
//!
//! Every run ends with one JSON line on stdout starting with `{"kae_press":1,`.
//! Exit status: 0 when at least one request succeeded, 1 when requests were
//! attempted and every one failed (the JSON line is still printed, with the
//! errors counted), 2 for a usage error or a refused target (a JSON line with
//! an `"error"` field is printed, and nothing is sent anywhere).
//!
//! Modules: `args` (command line), `target` (loopback policy), `tls` and `verify`
//! (the two TLS clients), `der`, `http` (one request and its response), `errors`,
//! `load` (the workers), `procfs` (CPU time), `json` and `report` (the output).
//! It lives in the kae-tools crate: the provider never builds tokio or a TLS client.

#![deny(unsafe_op_in_unsafe_fn)]

mod args;
mod der;
mod errors;
mod http;
mod json;
mod load;
mod procfs;
mod report;
mod target;
mod tls;
mod verify;

use args::{parse_args, ClientKind, ParseOutcome, USAGE};
use load::{worker, Shared, Stats};
use procfs::{pids_of, proc_cpu_s, self_cpu_s, server_snapshot};
use report::error_line;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use target::resolve_target;
use tls::{build_openssl, build_rustls};

fn fail_usage(msg: &str) -> ! {
    eprintln!("kae-press: {msg}");
    println!("{}", error_line(msg));
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(ParseOutcome::Help) => {
            print!("{USAGE}");
            return;
        }
        Ok(ParseOutcome::Run(o)) => o,
        Err(m) => {
            eprintln!("kae-press: see kae-press --help");
            fail_usage(&m);
        }
    };
    // Refuse non-loopback targets before anything touches the network.
    let addr = match resolve_target(&o.host, o.port, o.allow_non_loopback) {
        Ok(a) => a,
        Err(m) => fail_usage(&m),
    };
    for &p in &o.server_pids {
        if proc_cpu_s(p).is_none() {
            fail_usage(&format!(
                "--server-pid {p}: no such process (or /proc/{p}/stat unreadable)"
            ));
        }
    }
    if let Some(n) = &o.server_pids_of {
        if pids_of(n).is_empty() {
            fail_usage(&format!("--server-pids-of {n}: no process has that name"));
        }
    }
    let built = match o.client {
        ClientKind::Rustls => build_rustls(&o),
        ClientKind::Openssl => build_openssl(&o),
    };
    let (tls, note) = match built {
        Ok(t) => t,
        Err(m) => fail_usage(&m),
    };
    if let (Some(n), false) = (note, o.json) {
        eprintln!("kae-press: note: {n}");
    }

    let host_hdr = if o.host.contains(':') {
        format!("[{}]", o.host)
    } else {
        o.host.clone()
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: kae-press\r\nAccept: */*\r\nConnection: {}\r\n\r\n",
        o.path,
        host_hdr,
        if o.keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes();

    let workers = match o.requests {
        Some(n) => (o.connections as u64).min(n) as usize,
        None => o.connections,
    };

    let rt = if o.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(o.threads)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(r) => r,
        Err(e) => fail_usage(&format!("tokio runtime: {e}")),
    };

    let server0 = server_snapshot(&o);
    let cpu0 = self_cpu_s();
    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        addr,
        tls,
        request,
        keep_alive: o.keep_alive,
        limit: o.requests,
        deadline: o.duration.map(|d| t0 + d),
        claimed: AtomicU64::new(0),
        first: OnceLock::new(),
    });
    let stats = rt.block_on(async {
        let handles: Vec<_> = (0..workers)
            .map(|_| tokio::spawn(worker(shared.clone())))
            .collect();
        let mut total = Stats::default();
        for h in handles {
            match h.await {
                Ok(s) => total.merge(s),
                Err(e) => eprintln!("kae-press: worker failed: {e}"),
            }
        }
        total
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let client_cpu = self_cpu_s() - cpu0;
    let server1 = server_snapshot(&o);
    drop(rt);

    let server_cpu: Option<f64> = if o.server_pids.is_empty() && o.server_pids_of.is_none() {
        None
    } else {
        let mut sum = 0.0;
        for &(pid, end) in &server1 {
            match server0.iter().find(|(p, _)| *p == pid) {
                Some(&(_, start)) => sum += (end - start).max(0.0),
                // Started during the run (e.g. a reloaded worker): all of it.
                None => sum += end,
            }
        }
        for &(pid, _) in &server0 {
            if !server1.iter().any(|(p, _)| *p == pid) && !o.json {
                eprintln!("kae-press: warning: server pid {pid} exited during the run; its CPU time is not counted");
            }
        }
        Some(sum)
    };

    let run = report::Run {
        addr,
        workers,
        stats,
        elapsed,
        client_cpu,
        server_cpu,
        server1,
        neg: shared.first.get().cloned(),
    };
    report::print(&o, &run);

    let errors = run.stats.total_errors();
    let stats = &run.stats;
    let attempted = stats.ok + errors;
    if attempted > 0 && stats.ok == 0 {
        std::process::exit(1);
    }
}
