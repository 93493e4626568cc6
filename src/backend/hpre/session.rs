//! One UADK session per key (and key size), made at the key's first HPRE operation and kept
//! with the key (`rsa::key_slot`), never one per operation. The CRT private key and the
//! public key are set once; UADK copies them into the session, and kae's copies are zeroized
//! right away.
//!
//! A session belongs to one initialisation of UADK in one process (a "generation"): after the
//! pool restarts (provider reloaded) or in a forked child, a key's old session is not used
//! again, and it is released only while its generation is live (after `wd_rsa_uninit2` UADK's
//! state is gone; the session is then left alone).

use super::abi::HPRE_KEY_BITS;
use super::uadk::{SessionHandle, Uadk};
use crate::error::{KaeError, KaeResult};
use crate::ffi::fork::ForkMutex;
use crate::rsa::RsaKey;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use zeroize::Zeroizing;

/// The live UADK generation of this process (0: none). Held while sessions are released and
/// while UADK is initialised or torn down, so a release never runs into an uninit.
pub(crate) static LIVE: ForkMutex<u64> = ForkMutex::new(0);
static NEXT_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Runs UADK's init under the lifecycle lock and makes its generation live.
pub(super) fn begin_generation(init: impl FnOnce() -> i32) -> Result<u64, i32> {
    let mut live = LIVE.lock();
    let rc = init();
    if rc != 0 {
        return Err(rc);
    }
    let g = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
    *live = g;
    Ok(g)
}

/// Ends `generation` (if live) with UADK's uninit, under the lifecycle lock.
pub(super) fn end_generation(generation: u64, uninit: impl FnOnce()) {
    let mut live = LIVE.lock();
    if *live == generation {
        uninit();
        *live = 0;
    }
}

/// In a forked child (`registry::IN_CHILD`): the parent's generation is not ours.
pub(crate) fn forget_generation() {
    *LIVE.lock() = 0;
}

/// A key's session.
pub struct Session {
    uadk: &'static Uadk,
    /// Taken only by Drop.
    handle: Option<SessionHandle>,
    generation: u64,
    key_bytes: usize,
    /// UADK rewrites a new session's key buffers at its first operation without a lock:
    /// the first submission is serialised, later ones run freely.
    warmed: AtomicBool,
    first_use: Mutex<()>,
}

/// What a key keeps for HPRE: its session, or the reason it cannot have one (then the key
/// always uses the CPU, without asking UADK again at every operation).
pub enum KeySession {
    Ready(Session),
    CpuOnly(&'static str),
}

impl Session {
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    /// Calls `submit` with the session's handle; the first call on a new session runs alone.
    pub fn with_handle(&self, submit: impl FnOnce(&SessionHandle) -> i32) -> i32 {
        let Some(h) = &self.handle else {
            return -1;
        };
        if self.warmed.load(Ordering::Acquire) {
            return submit(h);
        }
        let _g = self.first_use.lock().unwrap_or_else(|e| e.into_inner());
        let rc = submit(h);
        if rc == 0 {
            self.warmed.store(true, Ordering::Release);
        }
        rc
    }
}

impl Session {
    /// Calls `set` with the handle of a session being made (not yet shared, not warmed).
    fn with_key_setup(&self, set: impl FnOnce(&SessionHandle) -> i32) -> i32 {
        self.handle.as_ref().map_or(-1, set)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The last reference (the key's or an in-flight request's) is going. A session of a
        // generation that ended is left alone: UADK's state for it is gone.
        if let Some(h) = self.handle.take() {
            let uadk = self.uadk;
            end_or_keep(self.generation, || uadk.free_session(h));
        }
    }
}

/// Runs `release` only while `generation` is live.
fn end_or_keep(generation: u64, release: impl FnOnce()) {
    let live = LIVE.lock();
    if *live == generation && generation != 0 {
        release();
    }
}

/// Why `key` cannot go to HPRE, or None when it can: a two-prime CRT key of 1024, 2048, 3072
/// or 4096 bits whose primes fit in half the modulus (the session's CRT buffers).
pub fn unsuitable(key: &RsaKey) -> Option<&'static str> {
    let bits = key.bits();
    if !HPRE_KEY_BITS.contains(&(bits as u32)) {
        return Some("key size is not 1024, 2048, 3072 or 4096 bits");
    }
    if key.primes.len() != 2 || key.exps.len() != 2 || key.coeffs.len() != 1 {
        return Some("not a two-prime key with CRT parameters");
    }
    let half = key.size() / 2;
    if key.primes.iter().any(|p| p.num_bytes() > half) {
        return Some("a prime is longer than half the modulus");
    }
    if key.e.is_none() || key.n.is_none() {
        return Some("no public key");
    }
    None
}

/// Makes the session for `key` in `generation`: alloc, then the CRT and public keys.
pub fn make(uadk: &'static Uadk, generation: u64, key: &RsaKey) -> KeySession {
    if let Some(why) = unsuitable(key) {
        return KeySession::CpuOnly(why);
    }
    match make_ready(uadk, generation, key) {
        Ok(s) => KeySession::Ready(s),
        Err(_) => KeySession::CpuOnly("UADK did not accept the key"),
    }
}

/// A big-endian copy of a CRT part in half the modulus size (zeroized on drop).
fn half(bn: &crate::ffi::bn::BigNum, len: usize) -> KaeResult<Zeroizing<Vec<u8>>> {
    let mut v = Zeroizing::new(vec![0u8; len]);
    bn.write_be_padded(&mut v)?;
    Ok(v)
}

fn make_ready(uadk: &'static Uadk, generation: u64, key: &RsaKey) -> KaeResult<Session> {
    let key_bytes = key.size();
    let handle = uadk
        .alloc_session(key.bits() as u16)
        .ok_or(KaeError::BackendFailure)?;
    // From here the session is released by Drop if a later step fails.
    let session = Session {
        uadk,
        handle: Some(handle),
        generation,
        key_bytes,
        warmed: AtomicBool::new(false),
        first_use: Mutex::new(()),
    };
    let h = key_bytes / 2;
    let mut dq = half(&key.exps[1], h)?;
    let mut dp = half(&key.exps[0], h)?;
    let mut qinv = half(&key.coeffs[0], h)?;
    let mut q = half(&key.primes[1], h)?;
    let mut p = half(&key.primes[0], h)?;
    let rc = session
        .with_key_setup(|s| uadk.set_crt_key(s, &mut dq, &mut dp, &mut qinv, &mut q, &mut p));
    if rc != 0 {
        return Err(KaeError::BackendFailure);
    }
    let mut e = key.e()?.to_be_bytes()?;
    let mut n = vec![0u8; key_bytes];
    key.n()?.write_be_padded(&mut n)?;
    let rc = session.with_key_setup(|s| uadk.set_public_key(s, &mut e, &mut n));
    if rc != 0 {
        return Err(KaeError::BackendFailure);
    }
    Ok(session)
}
