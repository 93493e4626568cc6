//! Command line of kae-press.

use std::time::Duration;

pub const USAGE: &str = "\
usage: kae-press [options] HOST:PORT

TLS handshake load generator for loopback web-server benchmarks.

  -c, --connections N       concurrent connections (default 16)
  -n, --requests N          total requests (default 1000 unless -d is given)
  -d, --duration SECS       run for SECS seconds (with -n too: stop at whichever
                            comes first)
  -k, --keep-alive          reuse each connection for many requests (default:
                            new TCP connection + full handshake per request, no
                            session resumption, no tickets)
      --client rustls|openssl   TLS library (default rustls)
      --tls 1.2|1.3         protocol version (default: highest both support)
      --cipher LIST         OpenSSL-style cipher list, e.g. AES256-GCM-SHA384 or
                            ECDHE-RSA-AES256-GCM-SHA384; TLS_* names are TLS 1.3
                            suites. rustls maps the names to its suites (it has
                            no RSA key exchange: use --client openssl). A list
                            of TLS 1.2 names only implies --tls 1.2.
      --path PATH           HTTP path (default /)
      --server-pid PID[,PID..]  server processes whose CPU time to measure
                            (utime+stime of /proc/PID/stat: all their threads)
      --server-pids-of NAME all processes whose /proc/PID/comm is NAME (e.g.
                            nginx, haproxy), read at start and at end
      --threads N           client runtime worker threads (default 1)
      --json                print only the JSON line
      --allow-non-loopback  allow targets outside 127.0.0.0/8 and ::1 (refused
                            by default; host names other than localhost are not
                            even resolved without it)
  -h, --help                this text

Each request: connect, TLS handshake, `GET PATH HTTP/1.1` (Connection: close, or
keep-alive with -k), read the complete response; only a 2xx status counts as a
success. Per-request timeout 10 s. Output: a summary, then always one JSON line
starting with {\"kae_press\":1,. Exit 0 if any request succeeded, 1 if all
failed, 2 on usage errors or a refused target.
";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClientKind {
    Rustls,
    Openssl,
}

impl ClientKind {
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Rustls => "rustls",
            ClientKind::Openssl => "openssl",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TlsVer {
    V12,
    V13,
}

#[derive(Debug)]
pub struct Opts {
    pub host: String,
    pub port: u16,
    pub connections: usize,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub keep_alive: bool,
    pub client: ClientKind,
    pub tls: Option<TlsVer>,
    pub cipher: Option<String>,
    pub path: String,
    pub server_pids: Vec<i32>,
    pub server_pids_of: Option<String>,
    pub threads: usize,
    pub json: bool,
    pub allow_non_loopback: bool,
}

pub enum ParseOutcome {
    Run(Box<Opts>),
    Help,
}

pub fn parse_num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse::<T>()
        .map_err(|_| format!("{opt}: invalid number '{v}'"))
}

pub fn parse_args(args: &[String]) -> Result<ParseOutcome, String> {
    let mut o = Opts {
        host: String::new(),
        port: 0,
        connections: 16,
        requests: None,
        duration: None,
        keep_alive: false,
        client: ClientKind::Rustls,
        tls: None,
        cipher: None,
        path: "/".to_string(),
        server_pids: Vec::new(),
        server_pids_of: None,
        threads: 1,
        json: false,
        allow_non_loopback: false,
    };
    let mut target: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !arg.starts_with('-') || arg == "-" {
            if target.replace(arg.clone()).is_some() {
                return Err(format!("more than one target given ('{arg}')"));
            }
            continue;
        }
        // --name=value or --name value
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            name.as_str(),
            "-c" | "--connections"
                | "-n"
                | "--requests"
                | "-d"
                | "--duration"
                | "--client"
                | "--tls"
                | "--cipher"
                | "--path"
                | "--server-pid"
                | "--server-pids-of"
                | "--threads"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| format!("{name} needs a value"))?
                        .clone();
                    i += 1;
                    v
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("{name} takes no value"));
            }
            String::new()
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(ParseOutcome::Help),
            "-c" | "--connections" => {
                o.connections = parse_num(&name, &value)?;
                if o.connections == 0 || o.connections > 100_000 {
                    return Err(format!("{name}: must be 1..=100000"));
                }
            }
            "-n" | "--requests" => {
                let n: u64 = parse_num(&name, &value)?;
                if n == 0 {
                    return Err(format!("{name}: must be at least 1"));
                }
                o.requests = Some(n);
            }
            "-d" | "--duration" => {
                let d: f64 = parse_num(&name, &value)?;
                if !(d > 0.0 && d <= 86_400.0) {
                    return Err(format!("{name}: must be in (0, 86400] seconds"));
                }
                o.duration = Some(Duration::from_secs_f64(d));
            }
            "-k" | "--keep-alive" => o.keep_alive = true,
            "--client" => {
                o.client = match value.as_str() {
                    "rustls" => ClientKind::Rustls,
                    "openssl" => ClientKind::Openssl,
                    _ => return Err(format!("--client: '{value}' is not rustls or openssl")),
                }
            }
            "--tls" => {
                o.tls = match value.as_str() {
                    "1.2" | "tls1.2" | "TLSv1.2" => Some(TlsVer::V12),
                    "1.3" | "tls1.3" | "TLSv1.3" => Some(TlsVer::V13),
                    _ => return Err(format!("--tls: '{value}' is not 1.2 or 1.3")),
                }
            }
            "--cipher" => {
                if value.trim().is_empty() {
                    return Err("--cipher: empty list".into());
                }
                o.cipher = Some(value)
            }
            "--path" => {
                if !value.starts_with('/') || value.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(format!(
                        "--path: '{value}' must start with / and contain no spaces or controls"
                    ));
                }
                o.path = value
            }
            "--server-pid" => {
                for p in value.split(',').filter(|s| !s.is_empty()) {
                    let pid: i32 = parse_num(&name, p.trim())?;
                    if pid <= 0 {
                        return Err(format!("{name}: invalid pid {pid}"));
                    }
                    o.server_pids.push(pid);
                }
            }
            "--server-pids-of" => {
                if value.is_empty() || value.contains('/') {
                    return Err(format!("{name}: invalid process name '{value}'"));
                }
                o.server_pids_of = Some(value)
            }
            "--threads" => {
                o.threads = parse_num(&name, &value)?;
                if o.threads == 0 || o.threads > 1024 {
                    return Err(format!("{name}: must be 1..=1024"));
                }
            }
            "--json" => o.json = true,
            "--allow-non-loopback" => o.allow_non_loopback = true,
            _ => return Err(format!("unknown option '{arg}'")),
        }
    }
    let target = target.ok_or("missing target HOST:PORT")?;
    let (host, port) = split_host_port(&target)?;
    o.host = host;
    o.port = port;
    if o.requests.is_none() && o.duration.is_none() {
        o.requests = Some(1000);
    }
    Ok(ParseOutcome::Run(Box::new(o)))
}

/// "HOST:PORT" or "[V6]:PORT" -> (host without brackets, port).
pub fn split_host_port(t: &str) -> Result<(String, u16), String> {
    let bad = || format!("target '{t}' is not HOST:PORT");
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or_else(bad)?;
        (h, p.strip_prefix(':').ok_or_else(bad)?)
    } else {
        let (h, p) = t.rsplit_once(':').ok_or_else(bad)?;
        if h.contains(':') {
            return Err(format!("target '{t}': write IPv6 addresses as [ADDR]:PORT"));
        }
        (h, p)
    };
    if host.is_empty() {
        return Err(bad());
    }
    let port: u16 = port.parse().map_err(|_| bad())?;
    if port == 0 {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port() {
        assert_eq!(
            split_host_port("127.0.0.1:443").unwrap(),
            ("127.0.0.1".into(), 443)
        );
        assert_eq!(split_host_port("[::1]:8443").unwrap(), ("::1".into(), 8443));
        assert!(split_host_port("::1:443").is_err());
        assert!(split_host_port("localhost").is_err());
        assert!(split_host_port("localhost:0").is_err());
    }
}
