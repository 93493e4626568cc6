//! Why a request failed, by kind (each kind counted separately in the report).

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ErrKind {
    Connect,
    Tls,
    Write,
    Read,
    Eof,
    Http,
    Status,
    Timeout,
}

pub const ERR_KINDS: [ErrKind; 8] = [
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
    pub fn name(self) -> &'static str {
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

pub struct ReqError {
    pub kind: ErrKind,
    pub msg: String,
    /// The connection was reused and closed before any response byte: the
    /// server dropped an idle keep-alive connection; worth one retry.
    pub stale: bool,
}

pub fn rerr(kind: ErrKind, msg: impl Into<String>) -> ReqError {
    ReqError {
        kind,
        msg: msg.into(),
        stale: false,
    }
}
