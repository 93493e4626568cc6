//! The load loop: workers claim request slots until the count or the deadline is reached.

use crate::errors::{rerr, ErrKind, ReqError, ERR_KINDS};
use crate::http::{exchange, Conn};
use crate::tls::{Negotiated, Tls};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Stats {
    pub ok: u64,
    pub handshakes: u64,
    pub errors: [u64; ERR_KINDS.len()],
    pub first_error: [Option<String>; ERR_KINDS.len()],
    pub lat_us: Vec<u32>,
}

impl Stats {
    pub fn error(&mut self, e: ReqError) {
        let i = e.kind as usize;
        self.errors[i] += 1;
        if self.first_error[i].is_none() {
            self.first_error[i] = Some(e.msg);
        }
    }

    pub fn merge(&mut self, o: Stats) {
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

    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

pub struct Shared {
    pub addr: SocketAddr,
    pub tls: Tls,
    pub request: Vec<u8>,
    pub keep_alive: bool,
    pub limit: Option<u64>,
    pub deadline: Option<Instant>,
    pub claimed: AtomicU64,
    pub first: OnceLock<Negotiated>,
}

impl Shared {
    /// Takes one request slot; false when the run is over.
    pub fn claim(&self) -> bool {
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

pub async fn open(sh: &Shared, hs_count: &mut u64) -> Result<Conn, ReqError> {
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

/// One request, reusing `slot`'s connection when there is one (keep-alive).
pub async fn one_request(
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
        match exchange(&sh.request, sh.keep_alive, c).await {
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

pub async fn worker(sh: Arc<Shared>) -> Stats {
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
