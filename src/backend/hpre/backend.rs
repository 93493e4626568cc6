//! The HPRE backend: requests go to UADK's async queues (`wd_do_rsa_async`), the offloader's
//! poller fetches completions (`wd_rsa_poll`), and UADK's callback hands each finished request
//! back. Private requests arrive blinded (`OpKind::ExponentiateBlinded`): the caller checks every
//! result with e and unblinds it on the CPU, and a request that fails here (error status,
//! timeout, isolated device, refused submit) completes with an error that the caller redoes
//! on the CPU, so the application never sees a hardware error.
//!
//! Buffers handed to the device belong to `uadk`'s job table until UADK's callback for that
//! request has run, also when the job that asked for it is gone, and also after a timeout: a
//! request that timed out is failed over to the CPU at once (it becomes a zombie: an id whose
//! late completion is awaited), but its buffers stay until that completion or until UADK is
//! torn down.
//!
//! Safe code but for UADK's uninit (its contract is about sessions: `session.rs`).

use super::abi::*;
use super::session::{self, KeySession};
use super::uadk::{self, AsyncOutcome, Uadk};
use crate::backend::{Backend, SyncPolicy};
use crate::completion::{OpKind, Request};
use crate::error::KaeError;
use crate::rsa::RsaKey;
use crate::settings::hpre::{HpreConfig, SyncMode};
use crate::settings::BackendKind;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// How long the backend rests after a device error before taking requests again.
const REST_AFTER_FAULT: Duration = Duration::from_secs(1);

/// Most timed-out requests kept for a late completion (their buffers stay allocated until the
/// device answers or UADK is torn down); beyond, HPRE takes no new request.
pub const MAX_ZOMBIES: usize = 1024;
/// Pause between polls when only timed-out requests are left.
const LATE_POLL_PAUSE: Duration = Duration::from_millis(1);

struct Shared {
    /// Submitted requests without a completion yet: id → (request, submission time).
    pending: Mutex<HashMap<u64, (Request, Instant)>>,
    /// Requests that timed out (failed over already) whose buffers UADK may still write, by
    /// id; at most [`MAX_ZOMBIES`] (beyond, HPRE takes no new request).
    zombies: Mutex<HashSet<u64>>,
    /// Buffers of synchronous calls that failed (UADK may give up while the device still holds
    /// the request and writes its result later): kept until UADK is torn down.
    abandoned: Mutex<Vec<(Zeroizing<Vec<u8>>, Zeroizing<Vec<u8>>)>>,
    /// Finished requests for the next `poll` to hand to the offloader.
    done: Mutex<Vec<Request>>,
    next_id: AtomicU64,
    /// Accepted and not yet handed back by `poll`.
    in_flight: AtomicUsize,
    high_water: AtomicUsize,
    stop: AtomicBool,
    /// No new request until then (after a device error or an isolated device).
    resting_until: Mutex<Option<Instant>>,
    last_scan: Mutex<Instant>,
    timeout: Duration,
    sysfs: std::path::PathBuf,
}

pub struct HpreBackend {
    uadk: &'static Uadk,
    shared: Arc<Shared>,
    cfg: HpreConfig,
    generation: u64,
}

/// Why the backend could not start.
pub fn start(cfg: &HpreConfig) -> Result<HpreBackend, String> {
    let uadk = uadk::load(&cfg.wd_lib, &cfg.crypto_lib)?;
    let generation = session::begin_generation(|| uadk.init(cfg.queues, cfg.sync_queues))
        .map_err(|rc| format!("wd_rsa_init2_ failed ({})", describe(rc)))?;
    if uadk.simulator {
        log::warn!(
            "{} is kae's UADK simulator (tests only), not UADK",
            uadk.crypto_lib
        );
    }
    Ok(HpreBackend {
        uadk,
        shared: Arc::new(Shared::new(
            Duration::from_millis(cfg.timeout_ms),
            cfg.sysfs.clone(),
        )),
        cfg: cfg.clone(),
        generation,
    })
}

/// A UADK return code in words.
fn describe(rc: i32) -> String {
    let name = match -rc {
        err::EIO => "EIO",
        err::EAGAIN => "EAGAIN",
        err::ENOMEM => "ENOMEM",
        err::EBUSY => "EBUSY",
        err::EEXIST => "EEXIST: UADK is already initialised in this process",
        err::ENODEV => "ENODEV: no usable device",
        err::EINVAL => "EINVAL",
        err::ETIMEDOUT => "ETIMEDOUT",
        _ => "error",
    };
    format!("{rc}, {name}")
}

impl Shared {
    fn resting(&self) -> bool {
        let mut r = self.resting_until.lock().unwrap_or_else(|e| e.into_inner());
        match *r {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                // Rest over: take work again only if some device is usable.
                let usable = super::discovery::scan(&self.sysfs)
                    .iter()
                    .any(|d| d.unusable_because().is_none());
                if usable {
                    *r = None;
                    log::info!("HPRE takes requests again");
                    false
                } else {
                    *r = Some(Instant::now() + REST_AFTER_FAULT);
                    true
                }
            }
            None => false,
        }
    }

    /// `n` requests failed on the device: HPRE rests for a while (rate-limited log).
    fn fault(&self, n: usize, what: std::fmt::Arguments<'_>) {
        crate::stats::note_hw_faults(n as u64);
        *self.resting_until.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Instant::now() + REST_AFTER_FAULT);
        crate::logging::warn_rate_limited(
            "hpre-fault",
            format_args!("HPRE: {what}; the request is redone on the CPU and HPRE rests for 1 s"),
        );
    }

    fn new(timeout: Duration, sysfs: std::path::PathBuf) -> Shared {
        Shared {
            pending: Mutex::new(HashMap::new()),
            zombies: Mutex::new(HashSet::new()),
            abandoned: Mutex::new(Vec::new()),
            done: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            in_flight: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            resting_until: Mutex::new(None),
            last_scan: Mutex::new(Instant::now()),
            timeout,
            sysfs,
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (Request, Instant)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the timed-out requests left room for new ones (said once when they did not).
    fn zombie_room(&self) -> bool {
        let n = self.zombies.lock().unwrap_or_else(|e| e.into_inner()).len()
            + self
                .abandoned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len();
        if n < MAX_ZOMBIES {
            return true;
        }
        crate::logging::warn_rate_limited(
            "hpre-zombies",
            format_args!(
                "HPRE: {n} timed-out requests still wait for the device; new requests go to the CPU"
            ),
        );
        false
    }

    /// One more request accepted (ours until `poll` hands it back).
    fn count_in(&self) {
        crate::stats::in_flight_add(1);
        let n = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.high_water.fetch_max(n, Ordering::Relaxed);
        crate::stats::note_queue_depth(n);
    }

    /// `n` requests handed back (or taken back).
    fn count_out(&self, n: usize) {
        crate::stats::in_flight_sub(n);
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
    }

    fn finish(&self, mut req: Request, result: Result<(), KaeError>) {
        req.result = result;
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req);
    }

    /// Fails over every request older than the timeout (their buffers become zombies).
    fn scan_timeouts(&self, force_all: bool) {
        let now = Instant::now();
        {
            let mut last = self.last_scan.lock().unwrap_or_else(|e| e.into_inner());
            if !force_all && now.duration_since(*last) < self.timeout.min(Duration::from_millis(10))
            {
                return;
            }
            *last = now;
        }
        let expired: Vec<(u64, Request)> = {
            let mut pending = self.lock_pending();
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, (_, t))| force_all || now.duration_since(*t) >= self.timeout)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| pending.remove(id).map(|(r, _)| (*id, r)))
                .collect()
        };
        if expired.is_empty() {
            return;
        }
        if !force_all {
            self.fault(
                expired.len(),
                format_args!(
                    "{} request(s) got no completion within {} ms",
                    expired.len(),
                    self.timeout.as_millis()
                ),
            );
        }
        let mut zombies = self.zombies.lock().unwrap_or_else(|e| e.into_inner());
        for (id, req) in expired {
            zombies.insert(id);
            self.finish(req, Err(KaeError::BackendFailure));
        }
    }

    /// The completion of request `id`, on the polling thread.
    fn complete(&self, id: u64, out: AsyncOutcome<'_>) {
        let Some((mut req, _)) = self.lock_pending().remove(&id) else {
            // Timed out earlier (already redone on the CPU): the device is done with its
            // buffers now, and they went with the job.
            self.zombies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return;
        };
        if out.status == 0 && out.dst_bytes == out.dst.len() && req.output.len() == out.dst.len() {
            req.output.copy_from_slice(out.dst);
            self.finish(req, Ok(()));
        } else {
            let status = out.status;
            self.fault(1, format_args!("a request completed with status {status}"));
            self.finish(req, Err(KaeError::BackendFailure));
        }
    }
}

/// `input` left-padded with zeros to `k` bytes (`input.len() <= k`).
fn left_padded(input: &[u8], k: usize) -> Zeroizing<Vec<u8>> {
    let mut v = Zeroizing::new(vec![0u8; k]);
    v[k - input.len()..].copy_from_slice(input);
    v
}

impl HpreBackend {
    /// The key's session in this generation (made at first use; `CpuOnly` for keys HPRE
    /// cannot take).
    fn session(&self, key: &RsaKey) -> Option<Arc<KeySession>> {
        let s = key
            .backend_state
            .get_or_make_valid(
                BackendKind::Hpre.name(),
                |s: &KeySession| match s {
                    KeySession::Ready(s) => s.generation() == self.generation,
                    KeySession::CpuOnly(_) => true,
                },
                || Ok(session::make(self.uadk, self.generation, key)),
            )
            .ok()?;
        match &*s {
            KeySession::Ready(_) => Some(s),
            KeySession::CpuOnly(why) => {
                log::debug!("HPRE: a {}-bit key stays on the CPU: {why}", key.bits());
                None
            }
        }
    }

    fn op_type(kind: OpKind) -> Option<u8> {
        match kind {
            OpKind::ExponentiateBlinded => Some(WD_RSA_SIGN),
            OpKind::Public => Some(WD_RSA_VERIFY),
            OpKind::Private => None, // HPRE never gets unblinded private work
        }
    }

    /// `wd_do_rsa_sync` on the calling thread (`hpre-sync = direct`).
    fn run_direct(&self, req: &mut Request) -> bool {
        let Some(op) = Self::op_type(req.kind) else {
            return false;
        };
        let Some(ks) = self.session(&req.key) else {
            return false;
        };
        let KeySession::Ready(s) = &*ks else {
            return false;
        };
        let k = s.key_bytes();
        if req.input.len() > k || req.output.len() != k {
            return false;
        }
        let mut src = left_padded(&req.input, k);
        let mut dst = Zeroizing::new(vec![0u8; k]);
        let (mut status, mut whole) = (0, false);
        let rc = s.with_handle(|h| {
            let o = self.uadk.do_sync(h, op, &mut src, &mut dst);
            (status, whole) = (o.status, o.dst_bytes == k);
            o.rc
        });
        if rc == 0 && status == 0 && whole {
            req.output.copy_from_slice(&dst);
            req.result = Ok(());
        } else {
            self.shared.fault(
                1,
                format_args!(
                    "a sync request failed ({}, status {})",
                    describe(rc),
                    status
                ),
            );
            req.result = Err(KaeError::BackendFailure);
            // The device may still hold it (a timeout) and write `dst` later, by address:
            // the buffers stay allocated until UADK is torn down (moving a Vec keeps its heap
            // buffer where it is).
            self.shared
                .abandoned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((src, dst));
        }
        true
    }
}

impl Backend for HpreBackend {
    fn name(&self) -> &'static str {
        BackendKind::Hpre.name()
    }

    fn takes(&self, key: &RsaKey, kind: OpKind) -> bool {
        Self::op_type(kind).is_some()
            && !self.shared.stop.load(Ordering::Acquire)
            && session::unsuitable(key).is_none()
            && !self.shared.resting()
            && self.shared.zombie_room()
    }

    fn blinds_on_caller(&self) -> bool {
        true
    }

    fn sync_policy(&self) -> SyncPolicy {
        match self.cfg.sync {
            SyncMode::Queue => SyncPolicy::SubmitAndWait,
            SyncMode::Direct => SyncPolicy::Direct,
        }
    }

    fn compute_direct(&self, req: &mut Request) -> bool {
        self.run_direct(req)
    }

    fn submit(&self, req: Request) -> Result<(), Request> {
        let Some(op) = Self::op_type(req.kind) else {
            return Err(req);
        };
        let Some(session) = self.session(&req.key) else {
            // Cannot happen after `takes`, unless UADK refused the key: fail over.
            self.shared.count_in();
            self.shared.finish(req, Err(KaeError::BackendFailure));
            return Ok(());
        };
        let KeySession::Ready(s) = &*session else {
            return Err(req);
        };
        let k = s.key_bytes();
        // The device takes inputs of exactly the key size, left-padded with zeros.
        if req.input.len() > k || req.output.len() != k {
            self.shared.count_in();
            self.shared.finish(req, Err(KaeError::BufferTooSmall));
            return Ok(());
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let src = left_padded(&req.input, k);
        {
            // Registered before UADK sees it (the completion may run before the submit
            // returns); `stop` is checked under the same lock shutdown drains under.
            let mut pending = self.shared.lock_pending();
            if self.shared.stop.load(Ordering::Acquire) {
                return Err(req);
            }
            pending.insert(id, (req, Instant::now()));
        }
        self.shared.count_in();
        let (shared, keep) = (self.shared.clone(), session.clone());
        let rc = s.with_handle(|h| {
            self.uadk.submit_async(h, op, src, k, move |out| {
                shared.complete(id, out);
                drop(keep); // the session outlives every request on it
            })
        });
        if rc == 0 {
            return Ok(());
        }
        // Not accepted: take it back (unless a timeout scan already failed it over).
        let Some((req, _)) = self.shared.lock_pending().remove(&id) else {
            // Failed over by a timeout scan meanwhile: its result is on the done list, and
            // `poll` counts it out when it hands it back (not here as well). No completion
            // will come for it.
            self.shared
                .zombies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return Ok(());
        };
        self.shared.count_out(1);
        if rc == -err::EBUSY {
            return Err(req); // queues full: the offloader waits for a slot
        }
        self.shared.fault(
            1,
            format_args!("wd_do_rsa_async refused a request ({})", describe(rc)),
        );
        self.shared.count_in();
        self.shared.finish(req, Err(KaeError::BackendFailure));
        Ok(())
    }

    fn poll(&self, out: &mut Vec<Request>, max: usize) -> usize {
        if !self.shared.lock_pending().is_empty() || self.awaits_late_completions() {
            self.uadk.poll(max.min(u32::MAX as usize) as u32);
        }
        self.shared.scan_timeouts(false);
        let mut done = self.shared.done.lock().unwrap_or_else(|e| e.into_inner());
        let n = done.len();
        out.append(&mut done);
        drop(done);
        if n > 0 {
            self.shared.count_out(n);
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Acquire)
    }

    fn needs_polling(&self) -> bool {
        true
    }

    fn poll_pause(&self) -> Option<Duration> {
        let only_late = self.shared.lock_pending().is_empty() && self.awaits_late_completions();
        Some(if only_late {
            LATE_POLL_PAUSE // nobody waits for these: no need to poll them often
        } else {
            Duration::from_micros(self.cfg.poll_us)
        })
    }

    fn awaits_late_completions(&self) -> bool {
        !self
            .shared
            .zombies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    fn shutdown(&self) {
        {
            let _pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.stop.store(true, Ordering::Release);
        }
        // The poller still runs: give the device the timeout to finish what it holds, then
        // fail the rest over (their buffers stay until UADK is torn down).
        let until = Instant::now() + self.shared.timeout;
        while Instant::now() < until
            && !self
                .shared
                .pending
                .lock()
                .map(|p| p.is_empty())
                .unwrap_or(true)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.shared.scan_timeouts(true);
    }

    #[allow(unsafe_code)]
    fn after_poller_stopped(&self) {
        // SAFETY: nothing polls any more and nothing is submitted; sessions of this generation
        // are freed only while it is live (session.rs), so none is used or freed after.
        let mut abandoned = None;
        session::end_generation(self.generation, || {
            abandoned = Some(unsafe { self.uadk.uninit() })
        });
        // Outside the generation's lock: a job's completion may own a key's last session.
        drop(abandoned);
        // UADK stopped and its jobs are gone: no late completion will come.
        self.shared
            .zombies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.shared
            .abandoned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn high_water(&self) -> usize {
        self.shared.high_water.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timed-out requests and abandoned sync buffers together are bounded: at MAX_ZOMBIES the
    /// backend takes no new request (`takes` asks `zombie_room`).
    #[test]
    fn past_max_zombies_no_new_request_is_taken() {
        let s = Shared::new(Duration::from_millis(10), "/nonexistent".into());
        assert!(s.zombie_room());
        {
            let mut z = s.zombies.lock().unwrap();
            for id in 0..MAX_ZOMBIES as u64 - 2 {
                z.insert(id);
            }
        }
        assert!(s.zombie_room(), "below the bound");
        s.abandoned
            .lock()
            .unwrap()
            .push((Zeroizing::new(vec![0u8; 4]), Zeroizing::new(vec![0u8; 4])));
        assert!(s.zombie_room(), "one below the bound");
        s.zombies.lock().unwrap().insert(u64::MAX);
        assert!(!s.zombie_room(), "at the bound: refused");
        s.zombies.lock().unwrap().clear();
        assert!(s.zombie_room(), "room again once the late completions came");
    }
}
