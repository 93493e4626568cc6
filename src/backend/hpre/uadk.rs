//! UADK loaded at run time: `dlopen` of the base and crypto libraries and `dlsym` of the
//! `wd_rsa_*` entry points the backend calls, so kae builds and runs on machines without UADK.
//!
//! The libraries are never closed: UADK registers fork handlers and keeps driver state that
//! refers to its own code, so unmapping it while the process lives (at provider unload) could
//! leave a handler pointing nowhere. A library that loads once stays for the process.

use super::abi::*;
use crate::ffi::fork::ForkSafeMutex;
use core::ffi::{c_char, c_void, CStr};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use zeroize::Zeroizing;

/// The entry points of a loaded UADK, called only through the methods below.
pub struct Uadk {
    init2: wd_rsa_init2_fn,
    uninit2: wd_rsa_uninit2_fn,
    alloc_sess: wd_rsa_alloc_sess_fn,
    free_sess: wd_rsa_free_sess_fn,
    set_crt_prikey_params: wd_rsa_set_crt_prikey_params_fn,
    set_pubkey_params: wd_rsa_set_pubkey_params_fn,
    do_sync: wd_do_rsa_sync_fn,
    do_async: wd_do_rsa_async_fn,
    poll: wd_rsa_poll_fn,
    /// Whether UADK is initialised; held while polling, so that polls are one at a time and
    /// never overlap the uninit. Fork-safe: the poller may hold it at a fork, and a child's
    /// UADK starts uninitialised (false) whatever the parent's was.
    live: ForkSafeMutex<bool>,
    /// The crypto library as configured (for messages).
    pub crypto_lib: String,
    /// The library is kae's test simulator (it exports `kae_sim_version`), not UADK.
    pub simulator: bool,
}

/// The last `dlerror()` text.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: e is non-NULL (checked above) and dlerror's thread-local NUL-terminated string,
        // copied before any other dl call on this thread can replace it.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn open(name: &str, flags: i32) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("{name:?}: contains a NUL byte"))?;
    // SAFETY: a NUL-terminated file name; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dl_error())
    } else {
        Ok(h)
    }
}

fn symbol(handle: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    // SAFETY: a handle from dlopen (never closed) and a NUL-terminated symbol name.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

macro_rules! resolve {
    ($h:expr, $lib:expr, $name:literal, $ty:ty) => {{
        let p = symbol($h, $name).ok_or_else(|| {
            format!(
                "{} does not export {} (not UADK 2.x?)",
                $lib,
                $name.to_string_lossy()
            )
        })?;
        // SAFETY: the symbol is UADK's function of this name, whose C signature `$ty` restates
        // (abi.rs, checked against UADK 2.10's headers).
        unsafe { core::mem::transmute::<*mut c_void, $ty>(p) }
    }};
}

impl Uadk {
    fn load(wd_lib: &str, crypto_lib: &str) -> Result<Uadk, String> {
        // The base library first and global, so the crypto library's dependency on libwd.so.2
        // is met by the configured file even outside the default search path.
        open(wd_lib, libc::RTLD_NOW | libc::RTLD_GLOBAL)
            .map_err(|e| format!("cannot load {wd_lib}: {e}"))?;
        let h = open(crypto_lib, libc::RTLD_NOW | libc::RTLD_LOCAL)
            .map_err(|e| format!("cannot load {crypto_lib}: {e}"))?;
        let lib = crypto_lib;
        Ok(Uadk {
            init2: resolve!(h, lib, c"wd_rsa_init2_", wd_rsa_init2_fn),
            uninit2: resolve!(h, lib, c"wd_rsa_uninit2", wd_rsa_uninit2_fn),
            alloc_sess: resolve!(h, lib, c"wd_rsa_alloc_sess", wd_rsa_alloc_sess_fn),
            free_sess: resolve!(h, lib, c"wd_rsa_free_sess", wd_rsa_free_sess_fn),
            set_crt_prikey_params: resolve!(
                h,
                lib,
                c"wd_rsa_set_crt_prikey_params",
                wd_rsa_set_crt_prikey_params_fn
            ),
            set_pubkey_params: resolve!(
                h,
                lib,
                c"wd_rsa_set_pubkey_params",
                wd_rsa_set_pubkey_params_fn
            ),
            do_sync: resolve!(h, lib, c"wd_do_rsa_sync", wd_do_rsa_sync_fn),
            do_async: resolve!(h, lib, c"wd_do_rsa_async", wd_do_rsa_async_fn),
            poll: resolve!(h, lib, c"wd_rsa_poll", wd_rsa_poll_fn),
            live: ForkSafeMutex::new(false),
            crypto_lib: crypto_lib.to_owned(),
            simulator: symbol(h, c"kae_sim_version").is_some(),
        })
    }

    /// `wd_rsa_init2_("rsa", RR, HW, …)` with `async_queues` async and `sync_queues` sync
    /// contexts per NUMA node. Returns UADK's code (0 ok, negative errno).
    pub fn init(&self, async_queues: u32, sync_queues: u32) -> i32 {
        // Index 0 is the only RSA operation type UADK defines for ctx counts.
        let mut nums = [wd_ctx_nums {
            sync_ctx_num: sync_queues,
            async_ctx_num: async_queues,
        }];
        let mut params = wd_ctx_params {
            op_type_num: 1,
            ctx_set_num: nums.as_mut_ptr(),
            bmp: core::ptr::null_mut(),
            cap: core::ptr::null_mut(),
        };
        let mut alg = *b"rsa\0";
        LazyLock::force(&JOBS); // made here, before any poller or submitter runs
        let mut live = self.live.lock();
        // SAFETY: UADK's init with a NUL-terminated algorithm name and a params struct (and its
        // one-element count array) that live for the call; UADK copies what it keeps.
        let rc = unsafe {
            (self.init2)(
                alg.as_mut_ptr().cast::<c_char>(),
                SCHED_POLICY_RR,
                TASK_HW,
                &mut params,
            )
        };
        *live |= rc == 0;
        rc
    }
}

/// A UADK session (`wd_rsa_alloc_sess`), made only by [`Uadk::alloc_session`] while UADK is
/// initialised. Not `Copy`: [`Uadk::free_session`] takes it, so it is freed at most once; and
/// [`Uadk::uninit`]'s contract is that no session of the ended initialisation is used or
/// freed after it (`session.rs` drops such a handle without freeing it).
pub struct SessionHandle(handle_t);

/// What `wd_do_rsa_sync` answered: its return code, the request's status and the length it
/// wrote.
pub struct SyncOutcome {
    pub rc: i32,
    pub status: i32,
    pub dst_bytes: usize,
}

/// A descriptor of `buf` for UADK (which only reads it during the call it is passed to).
fn dtb(buf: &mut [u8]) -> wd_dtb {
    wd_dtb {
        data: buf.as_mut_ptr().cast(),
        dsize: buf.len() as u32,
        bsize: buf.len() as u32,
    }
}

/// A request for `src` → `dst`, without a callback ([`Uadk::submit_async`] sets one).
fn request(src: &mut [u8], dst: &mut [u8], op: u8) -> wd_rsa_req {
    wd_rsa_req {
        src: src.as_mut_ptr().cast(),
        dst: dst.as_mut_ptr().cast(),
        src_bytes: src.len() as u32,
        dst_bytes: dst.len() as u32,
        cb: None,
        cb_param: core::ptr::null_mut(),
        status: 0,
        data_fmt: 0,
        op_type: op,
    }
}

impl Uadk {
    /// A new CRT session for a key of `key_bits` (None: UADK refused).
    pub fn alloc_session(&self, key_bits: u16) -> Option<SessionHandle> {
        let mut setup = wd_rsa_sess_setup::crt(key_bits);
        // SAFETY: the zeroed 80-byte setup (abi.rs), valid for the call; UADK writes back into
        // it and keeps nothing of it.
        let h = unsafe { (self.alloc_sess)(&mut setup) };
        (h != 0).then_some(SessionHandle(h))
    }

    /// Sets the session's CRT private key (big-endian halves); UADK copies the values.
    pub fn set_crt_key(
        &self,
        s: &SessionHandle,
        dq: &mut [u8],
        dp: &mut [u8],
        qinv: &mut [u8],
        q: &mut [u8],
        p: &mut [u8],
    ) -> i32 {
        let (mut dq, mut dp, mut qinv, mut q, mut p) =
            (dtb(dq), dtb(dp), dtb(qinv), dtb(q), dtb(p));
        // SAFETY: a live session (the handle's type) and five descriptors of buffers borrowed
        // for the call.
        unsafe { (self.set_crt_prikey_params)(s.0, &mut dq, &mut dp, &mut qinv, &mut q, &mut p) }
    }

    /// Sets the session's public key (big-endian e and n); UADK copies the values.
    pub fn set_public_key(&self, s: &SessionHandle, e: &mut [u8], n: &mut [u8]) -> i32 {
        let (mut e, mut n) = (dtb(e), dtb(n));
        // SAFETY: a live session and two descriptors of buffers borrowed for the call.
        unsafe { (self.set_pubkey_params)(s.0, &mut e, &mut n) }
    }

    /// Frees a session of the initialisation that is still live (the handle's contract).
    pub fn free_session(&self, s: SessionHandle) {
        // SAFETY: a live session, taken by value: never used again.
        unsafe { (self.free_sess)(s.0) }
    }

    /// `wd_do_rsa_sync` of operation `op` from `src` into `dst` on the calling thread.
    pub fn do_sync(
        &self,
        s: &SessionHandle,
        op: u8,
        src: &mut [u8],
        dst: &mut [u8],
    ) -> SyncOutcome {
        let mut req = request(src, dst, op);
        // SAFETY: a live session and a request whose buffers are borrowed for the synchronous
        // call.
        let rc = unsafe { (self.do_sync)(s.0, &mut req) };
        SyncOutcome {
            rc,
            status: req.status,
            dst_bytes: req.dst_bytes as usize,
        }
    }

    /// `wd_do_rsa_async` of `src` (the key's size, left-padded) into a `dst_len`-byte buffer;
    /// `done` runs on the polling thread once UADK reports it finished. UADK's return code:
    /// 0 accepted; otherwise refused, and `done` never runs. A request UADK never reports
    /// (a lost completion) keeps its buffers until [`Uadk::uninit`], which drops `done`
    /// without running it.
    pub fn submit_async(
        &self,
        s: &SessionHandle,
        op: u8,
        src: Zeroizing<Vec<u8>>,
        dst_len: usize,
        done: impl FnOnce(AsyncOutcome<'_>) + Send + 'static,
    ) -> i32 {
        let id = NEXT_JOB.fetch_add(1, Ordering::Relaxed);
        let mut job = AsyncJob {
            src,
            dst: Zeroizing::new(vec![0u8; dst_len]),
            done: Box::new(done),
        };
        let mut req = request(&mut job.src, &mut job.dst, op);
        req.cb = Some(on_complete);
        req.cb_param = core::ptr::without_provenance_mut(id);
        // In the table before UADK sees it: the callback may run before `do_async` returns.
        // Moving the job keeps its buffers where they are (they are heap blocks).
        jobs().insert(id, job);
        // SAFETY: a live session, and a request whose buffers belong to a job in JOBS, which
        // only the callback (UADK is done with the request), the refusal below (UADK kept
        // nothing) or `uninit` (UADK stopped) takes out; `cb_param` is a number.
        let rc = unsafe { (self.do_async)(s.0, &mut req) };
        if rc != 0 {
            jobs().remove(&id);
        }
        rc
    }

    /// `wd_rsa_poll`: runs the completions of up to `max` finished requests; the number run
    /// (0 when UADK is not initialised).
    pub fn poll(&self, max: u32) -> u32 {
        let live = self.live.lock();
        if !*live {
            return 0;
        }
        let mut count = 0u32;
        // SAFETY: UADK is initialised, and stays so while `live` is held, as no other poll
        // runs; count is writable.
        unsafe { (self.poll)(max, &mut count) };
        count
    }

    /// `wd_rsa_uninit2`: ends UADK's initialisation. Returns the jobs whose completion never
    /// came: UADK no longer writes their buffers, and dropping them drops their completions
    /// unrun (the caller does so outside its locks: a completion may own a key's last session).
    ///
    /// # Safety
    /// Nothing is submitted after, and no session of this initialisation is used or freed
    /// after. No poll runs meanwhile (its completions may drop a key's last session, which
    /// takes the session lifecycle lock the caller holds); a poll after it runs nothing.
    pub unsafe fn uninit(&self) -> AbandonedJobs {
        let mut live = self.live.lock();
        // SAFETY: the caller's contract.
        unsafe { (self.uninit2)() };
        *live = false;
        AbandonedJobs(core::mem::take(&mut *jobs()))
    }
}

/// Jobs left in UADK's hands at its uninit ([`Uadk::uninit`]).
pub struct AbandonedJobs(#[allow(dead_code)] BTreeMap<usize, AsyncJob>);

/// What a finished asynchronous request came back with.
pub struct AsyncOutcome<'a> {
    /// The request's status (0: done).
    pub status: i32,
    /// The length UADK says it wrote.
    pub dst_bytes: usize,
    /// The output buffer.
    pub dst: &'a [u8],
}

/// One asynchronous request: its buffers, which UADK holds by address until it runs the
/// callback, and what to do then.
struct AsyncJob {
    src: Zeroizing<Vec<u8>>,
    dst: Zeroizing<Vec<u8>>,
    done: Box<dyn FnOnce(AsyncOutcome<'_>) + Send>,
}

/// Jobs UADK holds, by the id passed as their `cb_param` (a number, never a pointer). One table
/// per process, as UADK's initialisation is. Fork-safe: a child starts with an empty table
/// (its parent's requests are not its own; their jobs are leaked there, never dropped).
static JOBS: LazyLock<ForkSafeMutex<BTreeMap<usize, AsyncJob>>> =
    LazyLock::new(ForkSafeMutex::default);
static NEXT_JOB: AtomicUsize = AtomicUsize::new(1);

fn jobs() -> MutexGuard<'static, BTreeMap<usize, AsyncJob>> {
    JOBS.lock()
}

/// UADK's completion callback, on the polling thread, with the library's copy of the request:
/// the job leaves the table and its completion runs (outside the table's lock).
unsafe extern "C" fn on_complete(copy: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: UADK passes its copy of our wd_rsa_req, valid during the callback.
        let r = unsafe { &*(copy as *const wd_rsa_req) };
        let job = jobs().remove(&(r.cb_param as usize));
        if let Some(AsyncJob { src, dst, done }) = job {
            done(AsyncOutcome {
                status: r.status,
                dst_bytes: r.dst_bytes as usize,
                dst: &dst,
            });
            drop(src);
        }
    });
}

/// What was loaded for a pair of names (the first successful load per process is kept; a
/// failure is retried with the next configuration that asks).
static LOADED: Mutex<Option<(String, String, &'static Uadk)>> = Mutex::new(None);

/// UADK from the configured libraries, loaded once per process.
pub fn load(wd_lib: &str, crypto_lib: &str) -> Result<&'static Uadk, String> {
    let mut slot = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((w, c, u)) = slot.as_ref() {
        if w == wd_lib && c == crypto_lib {
            return Ok(u);
        }
    }
    // Leaked on purpose: the libraries are never closed, so their entry points stay valid.
    let u: &'static Uadk = Box::leak(Box::new(Uadk::load(wd_lib, crypto_lib)?));
    *slot = Some((wd_lib.to_owned(), crypto_lib.to_owned(), u));
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let e = load("libwd-kae-test-missing.so.2", "libwd_crypto.so.2")
            .err()
            .unwrap();
        assert!(e.contains("libwd-kae-test-missing.so.2"), "{e}");
    }

    /// A child forked while another thread held the job table (the poller completing a job,
    /// a submitter adding one) takes it at once and finds it empty: its parent's requests are
    /// not its own. The parent's table is untouched.
    #[test]
    fn a_child_takes_the_job_table_another_thread_held() {
        let job = AsyncJob {
            src: Zeroizing::new(vec![1u8; 4]),
            dst: Zeroizing::new(vec![0u8; 4]),
            done: Box::new(|_| {}),
        };
        jobs().insert(usize::MAX, job);
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _table = jobs();
            held_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        held_rx.recv().unwrap();
        let child = crate::ffi::fork::run_in_child(
            || jobs().is_empty(),
            std::time::Duration::from_secs(10),
        );
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(child, Ok(0), "the child's table: free and empty");
        assert!(jobs().remove(&usize::MAX).is_some(), "the parent's table");
    }

    #[test]
    fn a_library_without_the_entry_points_is_refused() {
        // libc loads but exports no wd_rsa_*.
        let e = load("libc.so.6", "libc.so.6").err().unwrap();
        assert!(e.contains("wd_rsa_init2_"), "{e}");
    }
}
