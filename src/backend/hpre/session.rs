//! One UADK session per key (and key size), made at the key's first HPRE operation and kept
//! with the key (`rsa::key_slot`), never one per operation. The CRT private key and the
//! public key are set once; UADK copies them into the session, and kae's copies are zeroized
//! right away.
//!
//! A session belongs to one initialisation of UADK in one process (a "generation"): after the
//! pool restarts (provider reloaded) or in a forked child, a key's old session is not used
//! again, and it is released only while its generation is live (after `wd_rsa_uninit2` UADK's
//! state is gone; the session is then left alone).

use super::abi::*;
use super::uadk::Uadk;
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
    handle: handle_t,
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
    pub fn with_handle(&self, submit: impl FnOnce(handle_t) -> i32) -> i32 {
        if self.warmed.load(Ordering::Acquire) {
            return submit(self.handle);
        }
        let _g = self.first_use.lock().unwrap_or_else(|e| e.into_inner());
        let rc = submit(self.handle);
        if rc == 0 {
            self.warmed.store(true, Ordering::Release);
        }
        rc
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let free = self.uadk.free_sess;
        let h = self.handle;
        end_or_keep(self.generation, || {
            // SAFETY: a session of the live generation, no longer used by anyone (the last
            // reference, held by the key or by an in-flight request, is going).
            unsafe { free(h) }
        });
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

fn dtb(buf: &mut [u8]) -> wd_dtb {
    wd_dtb {
        data: buf.as_mut_ptr().cast(),
        dsize: buf.len() as u32,
        bsize: buf.len() as u32,
    }
}

fn make_ready(uadk: &'static Uadk, generation: u64, key: &RsaKey) -> KaeResult<Session> {
    let key_bytes = key.size();
    let mut setup = wd_rsa_sess_setup::crt(key.bits() as u16);
    // SAFETY: the zeroed 80-byte setup (abi.rs), valid for the call; UADK writes back into it.
    let handle = unsafe { (uadk.alloc_sess)(&mut setup) };
    if handle == 0 {
        return Err(KaeError::BackendFailure);
    }
    // From here the session is released by Drop if a later step fails.
    let session = Session {
        uadk,
        handle,
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
    let (mut d_dq, mut d_dp, mut d_qinv, mut d_q, mut d_p) = (
        dtb(&mut dq),
        dtb(&mut dp),
        dtb(&mut qinv),
        dtb(&mut q),
        dtb(&mut p),
    );
    // SAFETY: a live session and five descriptors of buffers that outlive the call (UADK
    // copies the values into the session).
    let rc = unsafe {
        (uadk.set_crt_prikey_params)(
            handle,
            &mut d_dq,
            &mut d_dp,
            &mut d_qinv,
            &mut d_q,
            &mut d_p,
        )
    };
    if rc != 0 {
        return Err(KaeError::BackendFailure);
    }
    let mut e = key.e()?.to_be_bytes()?;
    let mut n = vec![0u8; key_bytes];
    key.n()?.write_be_padded(&mut n)?;
    let (mut d_e, mut d_n) = (dtb(&mut e), dtb(&mut n));
    // SAFETY: handle is the live session allocated above (released only by Session's Drop), and
    // d_e, d_n describe e and n, locals that outlive the call (UADK copies the values).
    let rc = unsafe { (uadk.set_pubkey_params)(handle, &mut d_e, &mut d_n) };
    if rc != 0 {
        return Err(KaeError::BackendFailure);
    }
    Ok(session)
}
