//! Where the load goes: loopback only unless asked otherwise.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

pub fn is_loopback(ip: IpAddr) -> bool {
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
pub fn resolve_target(host: &str, port: u16, allow: bool) -> Result<SocketAddr, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
