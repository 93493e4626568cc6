//! UADK loaded at run time: `dlopen` of the base and crypto libraries and `dlsym` of the
//! `wd_rsa_*` entry points the backend calls, so kae builds and runs on machines without UADK.
//!
//! The libraries are never closed: UADK registers fork handlers and keeps driver state that
//! refers to its own code, so unmapping it while the process lives (at provider unload) could
//! leave a handler pointing nowhere. A library that loads once stays for the process.

use super::abi::*;
use core::ffi::{c_char, c_void, CStr};
use std::ffi::CString;
use std::sync::Mutex;

/// The entry points of a loaded UADK.
pub struct Uadk {
    pub init2: wd_rsa_init2_fn,
    pub uninit2: wd_rsa_uninit2_fn,
    pub alloc_sess: wd_rsa_alloc_sess_fn,
    pub free_sess: wd_rsa_free_sess_fn,
    pub set_crt_prikey_params: wd_rsa_set_crt_prikey_params_fn,
    pub set_pubkey_params: wd_rsa_set_pubkey_params_fn,
    pub do_sync: wd_do_rsa_sync_fn,
    pub do_async: wd_do_rsa_async_fn,
    pub poll: wd_rsa_poll_fn,
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
        // SAFETY: UADK's init with a NUL-terminated algorithm name and a params struct (and its
        // one-element count array) that live for the call; UADK copies what it keeps.
        unsafe {
            (self.init2)(
                alg.as_mut_ptr().cast::<c_char>(),
                SCHED_POLICY_RR,
                TASK_HW,
                &mut params,
            )
        }
    }
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

    #[test]
    fn a_library_without_the_entry_points_is_refused() {
        // libc loads but exports no wd_rsa_*.
        let e = load("libc.so.6", "libc.so.6").err().unwrap();
        assert!(e.contains("wd_rsa_init2_"), "{e}");
    }
}
