//! What a run measured, printed as a summary and as the one JSON line.

use crate::args::Opts;
use crate::errors::ERR_KINDS;
use crate::json::{json_num, json_opt, json_str};
use crate::load::Stats;
use crate::tls::Negotiated;
use std::fmt::Write as _;
use std::net::SocketAddr;

pub fn percentile_ms(sorted_us: &[u32], p: f64) -> Option<f64> {
    if sorted_us.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted_us.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted_us.len()) - 1;
    Some(sorted_us[idx] as f64 / 1000.0)
}

pub fn error_line(msg: &str) -> String {
    format!("{{\"kae_press\":1,\"error\":{}}}", json_str(msg))
}

/// What one run measured.
pub struct Run {
    pub addr: SocketAddr,
    /// Concurrent connections actually used.
    pub workers: usize,
    pub stats: Stats,
    pub elapsed: f64,
    /// CPU seconds kae-press itself used.
    pub client_cpu: f64,
    /// CPU seconds the server processes used, when asked to measure them.
    pub server_cpu: Option<f64>,
    /// (pid, CPU seconds) of the server processes at the end.
    pub server1: Vec<(i32, f64)>,
    /// What the first handshake negotiated.
    pub neg: Option<Negotiated>,
}

/// Prints the summary (unless `--json`) and the JSON line.
pub fn print(o: &Opts, run: &Run) {
    let Run {
        addr,
        workers,
        ref stats,
        elapsed,
        client_cpu,
        server_cpu,
        ref server1,
        ref neg,
    } = *run;
    let mut lat = stats.lat_us.clone();
    lat.sort_unstable();
    let p50 = percentile_ms(&lat, 50.0);
    let p90 = percentile_ms(&lat, 90.0);
    let p99 = percentile_ms(&lat, 99.0);
    let max = lat.last().map(|&u| u as f64 / 1000.0);
    let errors = stats.total_errors();
    let hs = stats.handshakes;
    let hs_per_s = if elapsed > 0.0 {
        hs as f64 / elapsed
    } else {
        0.0
    };
    let rq_per_s = if elapsed > 0.0 {
        stats.ok as f64 / elapsed
    } else {
        0.0
    };
    let per_hs = |cpu: f64| {
        if hs > 0 {
            Some(cpu * 1000.0 / hs as f64)
        } else {
            None
        }
    };

    if !o.json {
        let target = SocketAddr::new(addr.ip(), addr.port());
        println!(
            "kae-press: {} client, {} mode, {} connections, target {} ({})",
            o.client.name(),
            if o.keep_alive {
                "keep-alive"
            } else {
                "fresh-handshake"
            },
            workers,
            target,
            o.host
        );
        if let Some(n) = &neg {
            println!(
                "  negotiated   {} {}{}",
                n.protocol,
                n.cipher,
                n.group
                    .as_ref()
                    .map(|g| format!(" ({g})"))
                    .unwrap_or_default()
            );
        }
        println!(
            "  requests     {} ok, {} errors in {:.3} s",
            stats.ok, errors, elapsed
        );
        println!("  handshakes   {hs} ({hs_per_s:.1}/s)");
        println!("  requests/s   {rq_per_s:.1}");
        if let (Some(a), Some(b), Some(c), Some(d)) = (p50, p90, p99, max) {
            println!("  latency ms   p50 {a:.2}  p90 {b:.2}  p99 {c:.2}  max {d:.2}");
        }
        println!(
            "  client CPU   {:.3} s{}",
            client_cpu,
            per_hs(client_cpu)
                .map(|v| format!(" ({v:.3} ms/handshake)"))
                .unwrap_or_default()
        );
        if let Some(sc) = server_cpu {
            let pids: Vec<String> = server1.iter().map(|(p, _)| p.to_string()).collect();
            println!(
                "  server CPU   {:.3} s{} [pids {}]",
                sc,
                per_hs(sc)
                    .map(|v| format!(
                        " ({v:.3} ms/handshake, {:.1} handshakes per CPU-second)",
                        if sc > 0.0 { hs as f64 / sc } else { f64::NAN }
                    ))
                    .unwrap_or_default(),
                pids.join(",")
            );
        }
        for (i, k) in ERR_KINDS.iter().enumerate() {
            if stats.errors[i] > 0 {
                println!(
                    "  error {:<8} {} (first: {})",
                    k.name(),
                    stats.errors[i],
                    stats.first_error[i].as_deref().unwrap_or("")
                );
            }
        }
    }

    let mut j = String::with_capacity(1024);
    j.push_str("{\"kae_press\":1");
    let _ = write!(j, ",\"client\":{}", json_str(o.client.name()));
    let _ = write!(j, ",\"target\":{}", json_str(&addr.to_string()));
    let _ = write!(
        j,
        ",\"mode\":{}",
        json_str(if o.keep_alive { "keep-alive" } else { "fresh" })
    );
    let _ = write!(j, ",\"connections\":{workers}");
    let _ = write!(j, ",\"requests\":{}", stats.ok);
    let _ = write!(j, ",\"handshakes\":{hs}");
    let _ = write!(j, ",\"errors\":{errors}");
    j.push_str(",\"errors_by_kind\":{");
    for (i, k) in ERR_KINDS.iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        let _ = write!(j, "\"{}\":{}", k.name(), stats.errors[i]);
    }
    j.push('}');
    let _ = write!(j, ",\"elapsed_s\":{}", json_num(elapsed));
    let _ = write!(j, ",\"handshakes_per_s\":{}", json_num(hs_per_s));
    let _ = write!(j, ",\"requests_per_s\":{}", json_num(rq_per_s));
    let _ = write!(j, ",\"p50_ms\":{}", json_opt(p50));
    let _ = write!(j, ",\"p90_ms\":{}", json_opt(p90));
    let _ = write!(j, ",\"p99_ms\":{}", json_opt(p99));
    let _ = write!(j, ",\"max_ms\":{}", json_opt(max));
    let field = |v: Option<&String>| v.map(|s| json_str(s)).unwrap_or_else(|| "null".into());
    let _ = write!(
        j,
        ",\"protocol\":{}",
        field(neg.as_ref().map(|n| &n.protocol))
    );
    let _ = write!(j, ",\"cipher\":{}", field(neg.as_ref().map(|n| &n.cipher)));
    let _ = write!(
        j,
        ",\"group\":{}",
        field(neg.as_ref().and_then(|n| n.group.as_ref()))
    );
    let _ = write!(j, ",\"client_cpu_s\":{}", json_num(client_cpu));
    let _ = write!(
        j,
        ",\"client_cpu_ms_per_handshake\":{}",
        json_opt(per_hs(client_cpu))
    );
    if let Some(sc) = server_cpu {
        let pids: Vec<String> = server1.iter().map(|(p, _)| p.to_string()).collect();
        let _ = write!(j, ",\"server_pids\":[{}]", pids.join(","));
        let _ = write!(j, ",\"server_cpu_s\":{}", json_num(sc));
        let _ = write!(
            j,
            ",\"server_cpu_ms_per_handshake\":{}",
            json_opt(per_hs(sc))
        );
        let _ = write!(
            j,
            ",\"handshakes_per_server_cpu_s\":{}",
            json_opt(if sc > 0.0 { Some(hs as f64 / sc) } else { None })
        );
    }
    j.push('}');
    println!("{j}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 50.0), Some(50.0));
        assert_eq!(percentile_ms(&v, 99.0), Some(99.0));
        assert_eq!(percentile_ms(&[], 50.0), None);
    }
}
