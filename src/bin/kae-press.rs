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
//! This binary is the only user of tokio in the crate; the provider library
//! never uses it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const USAGE: &str = "\
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

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEADER_BYTES: usize = 64 * 1024;

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ClientKind {
    Rustls,
    Openssl,
}

impl ClientKind {
    fn name(self) -> &'static str {
        match self {
            ClientKind::Rustls => "rustls",
            ClientKind::Openssl => "openssl",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TlsVer {
    V12,
    V13,
}

#[derive(Debug)]
struct Opts {
    host: String,
    port: u16,
    connections: usize,
    requests: Option<u64>,
    duration: Option<Duration>,
    keep_alive: bool,
    client: ClientKind,
    tls: Option<TlsVer>,
    cipher: Option<String>,
    path: String,
    server_pids: Vec<i32>,
    server_pids_of: Option<String>,
    threads: usize,
    json: bool,
    allow_non_loopback: bool,
}

enum ParseOutcome {
    Run(Box<Opts>),
    Help,
}

fn parse_num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse::<T>()
        .map_err(|_| format!("{opt}: invalid number '{v}'"))
}

fn parse_args(args: &[String]) -> Result<ParseOutcome, String> {
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
fn split_host_port(t: &str) -> Result<(String, u16), String> {
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

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Resolves the target, refusing (before any name lookup or socket) anything
/// that is not loopback unless `allow` is set. Host names other than
/// `localhost` / `*.localhost` are not resolved without `allow`.
fn resolve_target(host: &str, port: u16, allow: bool) -> Result<SocketAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        if !allow && !is_loopback(ip) {
            return Err(format!(
                "refusing non-loopback target {host}: kae-press is for loopback benchmarks \
                 (127.0.0.0/8, ::1); pass --allow-non-loopback to override"
            ));
        }
        return Ok(SocketAddr::new(ip, port));
    }
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if !allow {
        return Err(format!(
            "refusing target host name '{host}': without --allow-non-loopback only loopback \
             addresses and 'localhost' are accepted (names are not resolved)"
        ));
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} resolved to no address"))
}

// ---------------------------------------------------------------------------
// TLS clients
// ---------------------------------------------------------------------------

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type BoxIo = Box<dyn Io>;

/// What the first completed handshake negotiated.
#[derive(Clone, Debug)]
struct Negotiated {
    protocol: String,
    cipher: String,
    group: Option<String>,
}

enum Tls {
    Rustls {
        connector: tokio_rustls::TlsConnector,
        name: rustls::pki_types::ServerName<'static>,
    },
    Openssl {
        ctx: openssl::ssl::SslContext,
        sni: Option<String>,
    },
}

/// Maps one OpenSSL cipher name (or a rustls suite name) to rustls suite names.
fn rustls_names_for(openssl_name: &str) -> Option<&'static str> {
    Some(match openssl_name {
        "TLS_AES_128_GCM_SHA256" | "TLS13_AES_128_GCM_SHA256" => "TLS13_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384" | "TLS13_AES_256_GCM_SHA384" => "TLS13_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256" | "TLS13_CHACHA20_POLY1305_SHA256" => {
            "TLS13_CHACHA20_POLY1305_SHA256"
        }
        "ECDHE-RSA-AES128-GCM-SHA256" | "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => {
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        }
        "ECDHE-RSA-AES256-GCM-SHA384" | "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => {
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
        }
        "ECDHE-RSA-CHACHA20-POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        }
        "ECDHE-ECDSA-AES128-GCM-SHA256" | "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        }
        "ECDHE-ECDSA-AES256-GCM-SHA384" | "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
        }
        "ECDHE-ECDSA-CHACHA20-POLY1305" | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        }
        _ => return None,
    })
}

fn cipher_entries(list: &str) -> Vec<&str> {
    list.split([':', ',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// True when every entry of an OpenSSL-style list names a TLS 1.3 suite.
fn is_tls13_name(name: &str) -> bool {
    name.starts_with("TLS_") && !name.contains("_WITH_") || name.starts_with("TLS13_")
}

/// Certificate "verification" that accepts any chain (self-signed test
/// certificates) but still checks the handshake signature with the server's
/// public key, as a real client would. The key is taken from the certificate
/// with a small DER walk rather than webpki's certificate parser, which
/// rejects X.509 v1 certificates (what `openssl req -x509` makes without a
/// config file).
#[derive(Debug)]
struct AcceptAnyCert {
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

/// One DER TLV at the start of `b`: (tag, contents, rest).
fn der_tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, b) = b.split_first()?;
    let (len, b) = if l0 < 0x80 {
        (l0 as usize, b)
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
        (len, &b[n..])
    };
    if b.len() < len {
        return None;
    }
    Some((tag, &b[..len], &b[len..]))
}

/// The subjectPublicKey bits (e.g. the RSAPublicKey DER) of a certificate.
fn cert_public_key(cert: &[u8]) -> Option<&[u8]> {
    let (0x30, certificate, _) = der_tlv(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = der_tlv(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, r) = der_tlv(rest)?;
    if tag == 0xa0 {
        rest = r; // [0] EXPLICIT version (absent in v1 certificates)
    }
    // serialNumber, signature, issuer, validity, subject
    for _ in 0..5 {
        rest = der_tlv(rest)?.2;
    }
    let (0x30, spki, _) = der_tlv(rest)? else {
        return None;
    };
    let (0x30, _alg, r) = der_tlv(spki)? else {
        return None;
    };
    let (0x03, bits, _) = der_tlv(r)? else {
        return None;
    };
    let (&unused, key) = bits.split_first()?;
    (unused == 0).then_some(key)
}

/// Signature schemes that TLS 1.3 allows in CertificateVerify.
fn tls13_scheme(scheme: rustls::SignatureScheme) -> bool {
    use rustls::SignatureScheme as S;
    matches!(
        scheme,
        S::RSA_PSS_SHA256
            | S::RSA_PSS_SHA384
            | S::RSA_PSS_SHA512
            | S::ECDSA_NISTP256_SHA256
            | S::ECDSA_NISTP384_SHA384
            | S::ECDSA_NISTP521_SHA512
            | S::ED25519
            | S::ED448
    )
}

impl AcceptAnyCert {
    fn verify(
        &self,
        message: &[u8],
        cert: &[u8],
        scheme: rustls::SignatureScheme,
        signature: &[u8],
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let key = cert_public_key(cert).ok_or(rustls::Error::InvalidCertificate(
            rustls::CertificateError::BadEncoding,
        ))?;
        let candidates = self
            .algs
            .mapping
            .iter()
            .find(|(s, _)| *s == scheme)
            .map(|(_, algs)| *algs)
            .unwrap_or(&[]);
        // Candidates of other key types fail to parse the key and are skipped.
        if candidates
            .iter()
            .any(|alg| alg.verify_signature(key, message, signature).is_ok())
        {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadSignature,
            ))
        }
    }
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verify(message, cert.as_ref(), dss.scheme, dss.signature())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        if !tls13_scheme(dss.scheme) {
            return Err(rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
        }
        self.verify(message, cert.as_ref(), dss.scheme, dss.signature())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algs.supported_schemes()
    }
}

fn build_rustls(o: &Opts) -> Result<(Tls, Option<String>), String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let mut note = None;
    let mut tls = o.tls;
    if let Some(list) = &o.cipher {
        let mut wanted = Vec::new();
        for e in cipher_entries(list) {
            match rustls_names_for(e) {
                Some(n) => wanted.push(n),
                None => {
                    return Err(format!(
                        "--cipher: rustls has no suite for '{e}' (rustls supports only ECDHE \
                         key exchange with AES-GCM/ChaCha20; for TLS 1.2 RSA key exchange such \
                         as AES256-GCM-SHA384 use --client openssl)"
                    ))
                }
            }
        }
        provider.cipher_suites.retain(|s| {
            let n = s.suite().as_str().unwrap_or("");
            wanted.contains(&n)
        });
        if provider.cipher_suites.is_empty() {
            return Err(format!("--cipher: no rustls suite matches '{list}'"));
        }
        let has13 = provider
            .cipher_suites
            .iter()
            .any(|s| s.version() == &rustls::version::TLS13);
        let has12 = provider
            .cipher_suites
            .iter()
            .any(|s| s.version() == &rustls::version::TLS12);
        match tls {
            None if !has13 => {
                tls = Some(TlsVer::V12);
                note = Some("--cipher lists TLS 1.2 suites only: using TLS 1.2".to_string());
            }
            None if !has12 => tls = Some(TlsVer::V13),
            Some(TlsVer::V12) if !has12 => {
                return Err(format!(
                    "--cipher '{list}' has no TLS 1.2 suite for --tls 1.2"
                ))
            }
            Some(TlsVer::V13) if !has13 => {
                return Err(format!(
                    "--cipher '{list}' has no TLS 1.3 suite for --tls 1.3"
                ))
            }
            _ => {}
        }
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match tls {
        Some(TlsVer::V12) => &[&rustls::version::TLS12],
        Some(TlsVer::V13) => &[&rustls::version::TLS13],
        None => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let verifier = Arc::new(AcceptAnyCert {
        algs: provider.signature_verification_algorithms,
    });
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|e| format!("rustls configuration: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let name = match o.host.parse::<IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(o.host.clone())
            .map_err(|e| format!("invalid server name '{}': {e}", o.host))?,
    };
    Ok((
        Tls::Rustls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
        },
        note,
    ))
}

fn build_openssl(o: &Opts) -> Result<(Tls, Option<String>), String> {
    use openssl::ssl::{
        SslContext, SslMethod, SslOptions, SslSessionCacheMode, SslVerifyMode, SslVersion,
    };
    let err = |what: &str, e: openssl::error::ErrorStack| format!("openssl {what}: {e}");
    let mut b = SslContext::builder(SslMethod::tls_client()).map_err(|e| err("context", e))?;
    b.set_verify(SslVerifyMode::NONE);
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    // No TLS 1.2 tickets; a server closing without close_notify is not an error.
    b.set_options(SslOptions::NO_TICKET | SslOptions::IGNORE_UNEXPECTED_EOF);
    let mut note = None;
    let mut tls = o.tls;
    if let Some(list) = &o.cipher {
        let entries = cipher_entries(list);
        let (v13, v12): (Vec<&str>, Vec<&str>) = entries.iter().partition(|e| is_tls13_name(e));
        if !v12.is_empty() {
            b.set_cipher_list(&v12.join(":"))
                .map_err(|e| err(&format!("--cipher '{}'", v12.join(":")), e))?;
        }
        if !v13.is_empty() {
            b.set_ciphersuites(&v13.join(":"))
                .map_err(|e| err(&format!("--cipher '{}'", v13.join(":")), e))?;
        }
        match tls {
            Some(TlsVer::V13) if v13.is_empty() => {
                return Err(format!(
                    "--cipher '{list}' names no TLS 1.3 suite (TLS_*) for --tls 1.3"
                ))
            }
            Some(TlsVer::V12) if v12.is_empty() => {
                return Err(format!(
                    "--cipher '{list}' names no TLS 1.2 cipher for --tls 1.2"
                ))
            }
            _ => {}
        }
        if tls.is_none() && v13.is_empty() {
            tls = Some(TlsVer::V12);
            note = Some("--cipher lists TLS 1.2 ciphers only: using TLS 1.2".to_string());
        } else if tls.is_none() && v12.is_empty() {
            tls = Some(TlsVer::V13);
        }
    }
    let v = match tls {
        Some(TlsVer::V12) => Some(SslVersion::TLS1_2),
        Some(TlsVer::V13) => Some(SslVersion::TLS1_3),
        None => None,
    };
    if v.is_some() {
        b.set_min_proto_version(v)
            .map_err(|e| err("min version", e))?;
        b.set_max_proto_version(v)
            .map_err(|e| err("max version", e))?;
    }
    let sni = match o.host.parse::<IpAddr>() {
        Ok(_) => None,
        Err(_) => Some(o.host.clone()),
    };
    Ok((
        Tls::Openssl {
            ctx: b.build(),
            sni,
        },
        note,
    ))
}

fn openssl_group(ssl: &openssl::ssl::SslRef) -> Option<String> {
    // SSL_get_negotiated_group() is a macro over SSL_ctrl in OpenSSL 3.0.
    const SSL_CTRL_GET_NEGOTIATED_GROUP: libc::c_int = 134;
    let nid = unsafe {
        openssl_sys::SSL_ctrl(
            ssl_as_ptr(ssl),
            SSL_CTRL_GET_NEGOTIATED_GROUP,
            0,
            std::ptr::null_mut(),
        )
    };
    if nid <= 0 {
        return None;
    }
    openssl::nid::Nid::from_raw(nid as libc::c_int)
        .short_name()
        .ok()
        .map(str::to_string)
}

/// `SslRef` is a foreign-types reference: its address is the `SSL *`.
fn ssl_as_ptr(ssl: &openssl::ssl::SslRef) -> *mut openssl_sys::SSL {
    ssl as *const openssl::ssl::SslRef as *mut openssl_sys::SSL
}

fn rustls_protocol(v: Option<rustls::ProtocolVersion>) -> String {
    match v {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
        Some(other) => format!("{other:?}"),
        None => "unknown".into(),
    }
}

impl Tls {
    /// TLS handshake over `tcp`. Records the negotiated parameters in `first`
    /// if nothing is recorded yet.
    async fn handshake(
        &self,
        tcp: TcpStream,
        first: &OnceLock<Negotiated>,
    ) -> Result<BoxIo, String> {
        match self {
            Tls::Rustls { connector, name } => {
                let s = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| e.to_string())?;
                if first.get().is_none() {
                    let (_, c) = s.get_ref();
                    let _ = first.set(Negotiated {
                        protocol: rustls_protocol(c.protocol_version()),
                        cipher: c
                            .negotiated_cipher_suite()
                            .map(|s| {
                                let n = s.suite();
                                n.as_str()
                                    .map(str::to_string)
                                    .unwrap_or_else(|| format!("{n:?}"))
                            })
                            .unwrap_or_else(|| "unknown".into()),
                        group: c.negotiated_key_exchange_group().map(|g| {
                            let n = g.name();
                            n.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| format!("{n:?}"))
                        }),
                    });
                }
                Ok(Box::new(s))
            }
            Tls::Openssl { ctx, sni } => {
                let mut ssl = openssl::ssl::Ssl::new(ctx).map_err(|e| e.to_string())?;
                if let Some(h) = sni {
                    ssl.set_hostname(h).map_err(|e| e.to_string())?;
                }
                let mut s = tokio_openssl::SslStream::new(ssl, tcp).map_err(|e| e.to_string())?;
                Pin::new(&mut s)
                    .connect()
                    .await
                    .map_err(|e| e.to_string())?;
                if first.get().is_none() {
                    let ssl = s.ssl();
                    let _ = first.set(Negotiated {
                        protocol: ssl.version_str().to_string(),
                        cipher: ssl
                            .current_cipher()
                            .map(|c| c.name().to_string())
                            .unwrap_or_else(|| "unknown".into()),
                        group: openssl_group(ssl),
                    });
                }
                Ok(Box::new(s))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Load loop
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ErrKind {
    Connect,
    Tls,
    Write,
    Read,
    Eof,
    Http,
    Status,
    Timeout,
}

const ERR_KINDS: [ErrKind; 8] = [
    ErrKind::Connect,
    ErrKind::Tls,
    ErrKind::Write,
    ErrKind::Read,
    ErrKind::Eof,
    ErrKind::Http,
    ErrKind::Status,
    ErrKind::Timeout,
];

impl ErrKind {
    fn name(self) -> &'static str {
        match self {
            ErrKind::Connect => "connect",
            ErrKind::Tls => "tls",
            ErrKind::Write => "write",
            ErrKind::Read => "read",
            ErrKind::Eof => "eof",
            ErrKind::Http => "http",
            ErrKind::Status => "status",
            ErrKind::Timeout => "timeout",
        }
    }
}

struct ReqError {
    kind: ErrKind,
    msg: String,
    /// The connection was reused and closed before any response byte: the
    /// server dropped an idle keep-alive connection; worth one retry.
    stale: bool,
}

fn rerr(kind: ErrKind, msg: impl Into<String>) -> ReqError {
    ReqError {
        kind,
        msg: msg.into(),
        stale: false,
    }
}

#[derive(Default)]
struct Stats {
    ok: u64,
    handshakes: u64,
    errors: [u64; ERR_KINDS.len()],
    first_error: [Option<String>; ERR_KINDS.len()],
    lat_us: Vec<u32>,
}

impl Stats {
    fn error(&mut self, e: ReqError) {
        let i = e.kind as usize;
        self.errors[i] += 1;
        if self.first_error[i].is_none() {
            self.first_error[i] = Some(e.msg);
        }
    }

    fn merge(&mut self, o: Stats) {
        self.ok += o.ok;
        self.handshakes += o.handshakes;
        for i in 0..ERR_KINDS.len() {
            self.errors[i] += o.errors[i];
            if self.first_error[i].is_none() {
                self.first_error[i] = o.first_error[i].clone();
            }
        }
        self.lat_us.extend_from_slice(&o.lat_us);
    }

    fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

struct Shared {
    addr: SocketAddr,
    tls: Tls,
    request: Vec<u8>,
    keep_alive: bool,
    limit: Option<u64>,
    deadline: Option<Instant>,
    claimed: AtomicU64,
    first: OnceLock<Negotiated>,
}

impl Shared {
    /// Takes one request slot; false when the run is over.
    fn claim(&self) -> bool {
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                return false;
            }
        }
        match self.limit {
            Some(n) => self.claimed.fetch_add(1, Ordering::Relaxed) < n,
            None => true,
        }
    }
}

struct Conn {
    io: BoxIo,
    /// Bytes read past the previous response (pipelining never happens here,
    /// but keep them rather than lose them).
    buf: Vec<u8>,
    used: bool,
}

async fn open(sh: &Shared, hs_count: &mut u64) -> Result<Conn, ReqError> {
    let tcp = TcpStream::connect(sh.addr)
        .await
        .map_err(|e| rerr(ErrKind::Connect, e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let io = sh
        .tls
        .handshake(tcp, &sh.first)
        .await
        .map_err(|m| rerr(ErrKind::Tls, m))?;
    *hs_count += 1;
    Ok(Conn {
        io,
        buf: Vec::with_capacity(16 * 1024),
        used: false,
    })
}

/// How the body of a response ends.
enum Framing {
    Length(usize),
    Chunked,
    UntilEof,
}

struct Head {
    status: u16,
    header_len: usize,
    framing: Framing,
    reusable: bool,
}

fn find_header_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_head(b: &[u8], header_len: usize, keep_alive: bool) -> Result<Head, ReqError> {
    let text = std::str::from_utf8(&b[..header_len])
        .map_err(|_| rerr(ErrKind::Http, "response header is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(rerr(
            ErrKind::Http,
            format!(
                "bad status line '{}'",
                status_line.chars().take(80).collect::<String>()
            ),
        ));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| rerr(ErrKind::Http, format!("bad status line '{status_line}'")))?;
    let mut length = None;
    let mut chunked = false;
    let mut conn_close = false;
    let mut conn_keep = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            length = Some(
                v.parse::<usize>()
                    .map_err(|_| rerr(ErrKind::Http, format!("bad Content-Length '{v}'")))?,
            );
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v
                .to_ascii_lowercase()
                .split(',')
                .any(|t| t.trim() == "chunked");
        } else if k.eq_ignore_ascii_case("connection") {
            for t in v.split(',') {
                let t = t.trim();
                conn_close |= t.eq_ignore_ascii_case("close");
                conn_keep |= t.eq_ignore_ascii_case("keep-alive");
            }
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilEof
    };
    let http11 = version == "HTTP/1.1";
    let reusable =
        keep_alive && !matches!(framing, Framing::UntilEof) && !conn_close && (http11 || conn_keep);
    Ok(Head {
        status,
        header_len,
        framing,
        reusable,
    })
}

/// Reads more bytes into `buf`; Ok(0) at EOF. A TLS peer that closes the TCP
/// connection without close_notify is taken as EOF (s_server -www does so).
async fn fill(io: &mut BoxIo, buf: &mut Vec<u8>) -> Result<usize, ReqError> {
    let start = buf.len();
    buf.resize(start + 16 * 1024, 0);
    let r = io.read(&mut buf[start..]).await;
    match r {
        Ok(n) => {
            buf.truncate(start + n);
            Ok(n)
        }
        Err(e) => {
            buf.truncate(start);
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Ok(0)
            } else {
                Err(rerr(ErrKind::Read, e.to_string()))
            }
        }
    }
}

/// Decodes as much of a chunked body as `buf[pos..]` holds. Returns
/// Ok(Some(end)) when the body (with trailers) ends at `end`, Ok(None) when
/// more bytes are needed. `pos` advances over complete chunks.
fn scan_chunked(buf: &[u8], pos: &mut usize) -> Result<Option<usize>, ReqError> {
    loop {
        let rest = &buf[*pos..];
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            if rest.len() > 1024 {
                return Err(rerr(ErrKind::Http, "chunk size line too long"));
            }
            return Ok(None);
        };
        let line = std::str::from_utf8(&rest[..eol])
            .map_err(|_| rerr(ErrKind::Http, "bad chunk size line"))?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(hex, 16)
            .map_err(|_| rerr(ErrKind::Http, format!("bad chunk size '{hex}'")))?;
        if size == 0 {
            // Trailers: lines until an empty one.
            let mut p = *pos + eol + 2;
            loop {
                let r = &buf[p..];
                let Some(e) = r.windows(2).position(|w| w == b"\r\n") else {
                    return Ok(None);
                };
                p += e + 2;
                if e == 0 {
                    return Ok(Some(p));
                }
            }
        }
        let need = eol + 2 + size + 2;
        if rest.len() < need {
            return Ok(None);
        }
        if &rest[need - 2..need] != b"\r\n" {
            return Err(rerr(ErrKind::Http, "chunk not followed by CRLF"));
        }
        *pos += need;
    }
}

/// Sends the request and reads the complete response. Returns whether the
/// connection may carry another request.
async fn exchange(sh: &Shared, c: &mut Conn) -> Result<bool, ReqError> {
    let reused = c.used;
    c.used = true;
    c.io.write_all(&sh.request).await.map_err(|e| ReqError {
        kind: ErrKind::Write,
        msg: e.to_string(),
        stale: reused,
    })?;
    c.io.flush()
        .await
        .map_err(|e| rerr(ErrKind::Write, e.to_string()))?;
    // Header.
    let header_len = loop {
        if let Some(h) = find_header_end(&c.buf) {
            break h;
        }
        if c.buf.len() > MAX_HEADER_BYTES {
            return Err(rerr(ErrKind::Http, "response header larger than 64 KiB"));
        }
        let n = match fill(&mut c.io, &mut c.buf).await {
            Err(e) if reused && c.buf.is_empty() => {
                return Err(ReqError { stale: true, ..e });
            }
            r => r?,
        };
        if n == 0 {
            return Err(ReqError {
                kind: ErrKind::Eof,
                msg: "connection closed before the response header was complete".into(),
                stale: reused && c.buf.is_empty(),
            });
        }
    };
    let head = parse_head(&c.buf, header_len, sh.keep_alive)?;
    // Body.
    let end = match head.framing {
        Framing::Length(n) => {
            let end = head.header_len + n;
            while c.buf.len() < end {
                if fill(&mut c.io, &mut c.buf).await? == 0 {
                    return Err(rerr(ErrKind::Eof, "connection closed inside the body"));
                }
            }
            end
        }
        Framing::Chunked => {
            let mut pos = head.header_len;
            loop {
                if let Some(end) = scan_chunked(&c.buf, &mut pos)? {
                    break end;
                }
                if fill(&mut c.io, &mut c.buf).await? == 0 {
                    return Err(rerr(
                        ErrKind::Eof,
                        "connection closed inside a chunked body",
                    ));
                }
            }
        }
        Framing::UntilEof => {
            // Drop what we have as we go; only EOF matters.
            c.buf.clear();
            while fill(&mut c.io, &mut c.buf).await? != 0 {
                c.buf.clear();
            }
            0
        }
    };
    if end > 0 {
        c.buf.drain(..end);
    }
    if !(200..300).contains(&head.status) {
        return Err(rerr(
            ErrKind::Status,
            format!("HTTP status {}", head.status),
        ));
    }
    let reusable = head.reusable;
    if !sh.keep_alive && !matches!(head.framing, Framing::UntilEof) {
        // Connection: close was asked for: read to EOF so that the server
        // closes first (its side keeps the TIME_WAIT, not our ports).
        c.buf.clear();
        while fill(&mut c.io, &mut c.buf).await? != 0 {
            c.buf.clear();
        }
    }
    Ok(reusable)
}

/// One request, reusing `slot`'s connection when there is one (keep-alive).
async fn one_request(
    sh: &Shared,
    slot: &mut Option<Conn>,
    hs_count: &mut u64,
) -> Result<(), ReqError> {
    let mut retried = false;
    loop {
        if slot.is_none() {
            *slot = Some(open(sh, hs_count).await?);
        }
        let c = slot.as_mut().expect("connection just opened");
        match exchange(sh, c).await {
            Ok(reusable) => {
                if !reusable {
                    *slot = None;
                }
                return Ok(());
            }
            Err(e) => {
                *slot = None;
                if e.stale && !retried {
                    retried = true;
                    continue;
                }
                return Err(e);
            }
        }
    }
}

async fn worker(sh: Arc<Shared>) -> Stats {
    let mut st = Stats::default();
    let mut slot: Option<Conn> = None;
    while sh.claim() {
        let t0 = Instant::now();
        let mut hs = 0u64;
        let r = tokio::time::timeout(REQUEST_TIMEOUT, one_request(&sh, &mut slot, &mut hs)).await;
        st.handshakes += hs;
        match r {
            Ok(Ok(())) => {
                st.ok += 1;
                let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
                st.lat_us.push(us);
            }
            Ok(Err(e)) => st.error(e),
            Err(_) => {
                slot = None;
                st.error(rerr(
                    ErrKind::Timeout,
                    format!(
                        "no complete response within {} s",
                        REQUEST_TIMEOUT.as_secs()
                    ),
                ));
            }
        }
        if !sh.keep_alive {
            slot = None;
        }
    }
    st
}

// ---------------------------------------------------------------------------
// CPU accounting
// ---------------------------------------------------------------------------

fn clk_tck() -> f64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime+stime of a process (all its threads, live and exited), in seconds.
fn proc_cpu_s(pid: i32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after "(comm)": state is field 3, utime 14, stime 15.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ut: u64 = f.get(11)?.parse().ok()?;
    let st: u64 = f.get(12)?.parse().ok()?;
    Some((ut + st) as f64 / clk_tck())
}

fn pids_of(name: &str) -> Vec<i32> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            if comm.trim_end_matches('\n') == name {
                v.push(pid);
            }
        }
    }
    v.sort_unstable();
    v
}

/// CPU seconds per server process at one instant.
fn server_snapshot(o: &Opts) -> Vec<(i32, f64)> {
    let mut pids: BTreeSet<i32> = o.server_pids.iter().copied().collect();
    if let Some(n) = &o.server_pids_of {
        pids.extend(pids_of(n));
    }
    pids.into_iter()
        .filter_map(|p| proc_cpu_s(p).map(|c| (p, c)))
        .collect()
}

fn self_cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        let s = format!("{x:.3}");
        // Keep it short: 12.500 -> 12.5, 3.000 -> 3
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_string()
        }
    } else {
        "null".into()
    }
}

fn json_opt(x: Option<f64>) -> String {
    x.map(json_num).unwrap_or_else(|| "null".into())
}

fn percentile_ms(sorted_us: &[u32], p: f64) -> Option<f64> {
    if sorted_us.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted_us.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted_us.len()) - 1;
    Some(sorted_us[idx] as f64 / 1000.0)
}

fn error_line(msg: &str) -> String {
    format!("{{\"kae_press\":1,\"error\":{}}}", json_str(msg))
}

fn fail_usage(msg: &str) -> ! {
    eprintln!("kae-press: {msg}");
    println!("{}", error_line(msg));
    std::process::exit(2);
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

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
    let neg = shared.first.get().cloned();
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

    let attempted = stats.ok + errors;
    if attempted > 0 && stats.ok == 0 {
        std::process::exit(1);
    }
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

    #[test]
    fn loopback_policy() {
        assert!(resolve_target("127.0.0.1", 1, false).is_ok());
        assert!(resolve_target("127.9.8.7", 1, false).is_ok());
        assert!(resolve_target("::1", 1, false).is_ok());
        assert!(resolve_target("::ffff:127.0.0.1", 1, false).is_ok());
        assert!(resolve_target("localhost", 1, false).is_ok());
        assert!(resolve_target("10.0.0.1", 1, false).is_err());
        assert!(resolve_target("::ffff:10.0.0.1", 1, false).is_err());
        assert!(resolve_target("0.0.0.0", 1, false).is_err());
        assert!(resolve_target("example.com", 1, false).is_err());
    }

    #[test]
    fn chunked() {
        let b = b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nT: v\r\n\r\nNEXT";
        let mut pos = 0;
        let end = scan_chunked(b, &mut pos).ok().flatten().unwrap();
        assert_eq!(&b[end..], b"NEXT");
        let mut pos = 0;
        assert!(scan_chunked(&b[..10], &mut pos).ok().unwrap().is_none());
    }

    #[test]
    fn head() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let h = parse_head(r, find_header_end(r).unwrap(), true)
            .ok()
            .unwrap();
        assert_eq!(h.status, 200);
        assert!(h.reusable);
        assert!(matches!(h.framing, Framing::Length(5)));
        let r = b"HTTP/1.0 200 ok\r\nContent-type: text/html\r\n\r\n";
        let h = parse_head(r, find_header_end(r).unwrap(), true)
            .ok()
            .unwrap();
        assert!(!h.reusable);
        assert!(matches!(h.framing, Framing::UntilEof));
    }

    #[test]
    fn percentiles() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 50.0), Some(50.0));
        assert_eq!(percentile_ms(&v, 99.0), Some(99.0));
        assert_eq!(percentile_ms(&[], 50.0), None);
    }

    /// The verifier finds the key in v1 and v3 certificates and rejects a
    /// signature over other data.
    #[test]
    fn handshake_signature_check() {
        use openssl::{asn1::Asn1Time, hash::MessageDigest, pkey::PKey, rsa::Rsa, sign::Signer};
        use rustls::SignatureScheme as S;
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let v = AcceptAnyCert {
            algs: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        };
        let msg = b"handshake transcript";
        let mut s = Signer::new(MessageDigest::sha256(), &key).unwrap();
        s.set_rsa_padding(openssl::rsa::Padding::PKCS1_PSS).unwrap();
        s.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH)
            .unwrap();
        s.update(msg).unwrap();
        let pss = s.sign_to_vec().unwrap();
        let mut s = Signer::new(MessageDigest::sha256(), &key).unwrap();
        s.update(msg).unwrap();
        let pkcs1 = s.sign_to_vec().unwrap();
        for version in [0, 2] {
            let mut b = openssl::x509::X509::builder().unwrap();
            b.set_version(version).unwrap();
            b.set_pubkey(&key).unwrap();
            b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
                .unwrap();
            b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
                .unwrap();
            b.sign(&key, MessageDigest::sha256()).unwrap();
            let der = b.build().to_der().unwrap();
            assert!(cert_public_key(&der).is_some(), "v{}", version + 1);
            assert!(v.verify(msg, &der, S::RSA_PSS_SHA256, &pss).is_ok());
            assert!(v.verify(b"other", &der, S::RSA_PSS_SHA256, &pss).is_err());
            assert!(v.verify(msg, &der, S::RSA_PKCS1_SHA256, &pkcs1).is_ok());
            assert!(v
                .verify(b"other", &der, S::RSA_PKCS1_SHA256, &pkcs1)
                .is_err());
            assert!(v.verify(msg, &der, S::RSA_PKCS1_SHA256, &pss).is_err());
            assert!(v
                .verify(msg, &der, S::ECDSA_NISTP256_SHA256, &pkcs1)
                .is_err());
            assert!(v
                .verify(msg, &der[..der.len() / 2], S::RSA_PSS_SHA256, &pss)
                .is_err());
        }
        assert!(tls13_scheme(S::RSA_PSS_SHA256) && !tls13_scheme(S::RSA_PKCS1_SHA256));
    }

    #[test]
    fn json_numbers() {
        assert_eq!(json_num(12.5), "12.5");
        assert_eq!(json_num(3.0), "3");
        assert_eq!(json_num(0.0), "0");
        assert_eq!(json_num(f64::NAN), "null");
    }
}
