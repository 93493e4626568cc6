//! A key's slot for state that whatever computes with it attaches (an HPRE session with the
//! CRT key set once, a lane-ready layout of the primes): type-erased, tagged with its owner's
//! name, made at the key's first use by that owner, kept with the key, freed with it (the
//! state wipes its own secrets when dropped).
//!
//! Fork: a child inherits its parent's keys, and with them state that belongs to the parent
//! (a session on the parent's queues). The child must neither use nor release it, so state is
//! tagged with the pid that made it: another process rebuilds its own at first use, and the
//! inherited one is forgotten, never dropped.

use crate::error::KaeResult;
use crate::ffi::fork::ForkSafeMutex;
use std::any::Any;
use std::sync::Arc;

struct Attached {
    pid: u32,
    owner: &'static str,
    state: Arc<dyn Any + Send + Sync>,
}

/// The state slot of one key.
#[derive(Default)]
pub struct KeySlot {
    /// Fork-safe: a child whose parent forked while another thread held the slot would
    /// otherwise wait for it forever; a child's slot starts empty.
    slot: ForkSafeMutex<Option<Attached>>,
}

impl KeySlot {
    /// The state `owner` attached to this key in this process, made with `make` when there is
    /// none yet (or only another process's, or another owner's).
    pub fn get_or_make<T: Any + Send + Sync>(
        &self,
        owner: &'static str,
        make: impl FnOnce() -> KaeResult<T>,
    ) -> KaeResult<Arc<T>> {
        self.get_or_make_in(std::process::id(), owner, make)
    }

    /// [`get_or_make`](Self::get_or_make), where an existing state is kept only while `valid`
    /// says so (e.g. a session of the backend's current initialisation); otherwise it is
    /// replaced by a new one.
    pub fn get_or_make_valid<T: Any + Send + Sync>(
        &self,
        owner: &'static str,
        valid: impl Fn(&T) -> bool,
        make: impl FnOnce() -> KaeResult<T>,
    ) -> KaeResult<Arc<T>> {
        self.get_or_make_valid_in(std::process::id(), owner, valid, make)
    }

    fn get_or_make_in<T: Any + Send + Sync>(
        &self,
        pid: u32,
        owner: &'static str,
        make: impl FnOnce() -> KaeResult<T>,
    ) -> KaeResult<Arc<T>> {
        self.get_or_make_valid_in(pid, owner, |_| true, make)
    }

    /// [`get_or_make_valid`](Self::get_or_make_valid) for a caller that already asked for this
    /// process's id (`getpid` is a system call; a batch asks once for all its requests).
    pub fn get_or_make_valid_in<T: Any + Send + Sync>(
        &self,
        pid: u32,
        owner: &'static str,
        valid: impl Fn(&T) -> bool,
        make: impl FnOnce() -> KaeResult<T>,
    ) -> KaeResult<Arc<T>> {
        let mut slot = self.slot.lock();
        if let Some(a) = slot.as_ref() {
            if a.pid == pid && a.owner == owner {
                if let Ok(t) = Arc::clone(&a.state).downcast::<T>() {
                    if valid(&t) {
                        return Ok(t);
                    }
                }
            }
        }
        // Made while holding the slot: two threads' first uses make one state, not two.
        let state = Arc::new(make()?);
        let old = slot.replace(Attached {
            pid,
            owner,
            state: state.clone(),
        });
        if let Some(old) = old {
            if old.pid != pid {
                std::mem::forget(old); // another process's: not ours to release
            }
        }
        Ok(state)
    }

    /// Whether some state is attached (any process, any owner).
    pub fn is_attached(&self) -> bool {
        self.slot.lock().is_some()
    }
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let slot = self.slot.get_mut();
        if let Some(a) = slot.take() {
            if a.pid != std::process::id() {
                std::mem::forget(a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts how many were made and released.
    struct Probe(&'static AtomicUsize);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn made_once_per_process_and_owner_freed_with_the_key() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let made = AtomicUsize::new(0);
        let make = || {
            made.fetch_add(1, Ordering::SeqCst);
            Ok(Probe(&DROPPED))
        };
        let ks = KeySlot::default();
        let pid = std::process::id();
        let a = ks.get_or_make_in(pid, "hpre", make).unwrap();
        let b = ks.get_or_make_in(pid, "hpre", make).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(made.load(Ordering::SeqCst), 1, "created once");
        drop((a, b));
        assert_eq!(DROPPED.load(Ordering::SeqCst), 0, "kept with the key");
        drop(ks);
        assert_eq!(DROPPED.load(Ordering::SeqCst), 1, "freed with the key");
    }

    #[test]
    fn a_forked_child_rebuilds_and_never_releases_the_parents_state() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let ks = KeySlot::default();
        let me = std::process::id();
        // State "made by the parent" (another pid), then used in this process.
        let parent = ks
            .get_or_make_in(me.wrapping_add(1), "hpre", || Ok(Probe(&DROPPED)))
            .unwrap();
        drop(parent);
        let child = ks
            .get_or_make_in(me, "hpre", || Ok(Probe(&DROPPED)))
            .unwrap();
        assert_eq!(
            DROPPED.load(Ordering::SeqCst),
            0,
            "the parent's state is forgotten"
        );
        drop(child);
        drop(ks);
        assert_eq!(
            DROPPED.load(Ordering::SeqCst),
            1,
            "only our own state is released"
        );
    }

    #[test]
    fn a_failed_make_attaches_nothing() {
        let ks = KeySlot::default();
        let r: KaeResult<Arc<u8>> =
            ks.get_or_make("hpre", || Err(crate::error::KaeError::Internal));
        assert!(r.is_err());
        assert!(!ks.is_attached());
        assert_eq!(*ks.get_or_make("hpre", || Ok(7u8)).unwrap(), 7);
    }
}
