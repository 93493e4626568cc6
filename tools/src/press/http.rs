//! HTTP/1.1 over a TLS connection: one request, the complete response (length, chunked or
//! until EOF), and whether the connection can carry another.

use crate::errors::{rerr, ErrKind, ReqError};
use crate::tls::BoxIo;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// A TLS connection and the bytes read from it but not yet consumed.
pub struct Conn {
    pub io: BoxIo,
    /// Bytes read past the previous response (pipelining never happens here,
    /// but keep them rather than lose them).
    pub buf: Vec<u8>,
    pub used: bool,
}

/// How the body of a response ends.
pub enum Framing {
    Length(usize),
    Chunked,
    UntilEof,
}

pub struct Head {
    pub status: u16,
    pub header_len: usize,
    pub framing: Framing,
    pub reusable: bool,
}

pub fn find_header_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

pub fn parse_head(b: &[u8], header_len: usize, keep_alive: bool) -> Result<Head, ReqError> {
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
pub async fn fill(io: &mut BoxIo, buf: &mut Vec<u8>) -> Result<usize, ReqError> {
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
pub fn scan_chunked(buf: &[u8], pos: &mut usize) -> Result<Option<usize>, ReqError> {
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
pub async fn exchange(request: &[u8], keep_alive: bool, c: &mut Conn) -> Result<bool, ReqError> {
    let reused = c.used;
    c.used = true;
    c.io.write_all(request).await.map_err(|e| ReqError {
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
    let head = parse_head(&c.buf, header_len, keep_alive)?;
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
    if !keep_alive && !matches!(head.framing, Framing::UntilEof) {
        // Connection: close was asked for: read to EOF so that the server
        // closes first (its side keeps the TIME_WAIT, not our ports).
        c.buf.clear();
        while fill(&mut c.io, &mut c.buf).await? != 0 {
            c.buf.clear();
        }
    }
    Ok(reusable)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
