//! The two TLS clients (rustls with ring, and the system OpenSSL) behind one handshake call.

use crate::args::{Opts, TlsVer};
use crate::verify::AcceptAnyCert;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub type BoxIo = Box<dyn Io>;

/// What the first completed handshake negotiated.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub protocol: String,
    pub cipher: String,
    pub group: Option<String>,
}

pub enum Tls {
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
pub fn rustls_names_for(openssl_name: &str) -> Option<&'static str> {
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

pub fn cipher_entries(list: &str) -> Vec<&str> {
    list.split([':', ',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// True when every entry of an OpenSSL-style list names a TLS 1.3 suite.
pub fn is_tls13_name(name: &str) -> bool {
    name.starts_with("TLS_") && !name.contains("_WITH_") || name.starts_with("TLS13_")
}

pub fn build_rustls(o: &Opts) -> Result<(Tls, Option<String>), String> {
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

pub fn build_openssl(o: &Opts) -> Result<(Tls, Option<String>), String> {
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

pub fn openssl_group(ssl: &openssl::ssl::SslRef) -> Option<String> {
    // SSL_get_negotiated_group() is a macro over SSL_ctrl in OpenSSL 3.0.
    const SSL_CTRL_GET_NEGOTIATED_GROUP: libc::c_int = 134;
    // SAFETY: SSL_ctrl on the live SSL behind `ssl`; this control reads only.
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
pub fn ssl_as_ptr(ssl: &openssl::ssl::SslRef) -> *mut openssl_sys::SSL {
    ssl as *const openssl::ssl::SslRef as *mut openssl_sys::SSL
}

pub fn rustls_protocol(v: Option<rustls::ProtocolVersion>) -> String {
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
    pub async fn handshake(
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
