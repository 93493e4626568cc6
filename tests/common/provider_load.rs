//! Library contexts: the kae module loaded from the build (or `KAE_MODULE`), the reference
//! context with OpenSSL's default provider, and the checks that an operation or a key belongs to
//! the provider of interest.

use std::ffi::{c_char, c_uint, CStr, CString};
use std::path::PathBuf;
use std::ptr;
use std::sync::OnceLock;

use super::error::{clear_errors, take_errors};
use super::ffi::{
    EVP_Digest, EVP_MD_fetch, EVP_MD_free, EVP_MD_get_size, EVP_PKEY_CTX_get0_provider,
    EVP_PKEY_get0_provider, OSSL_LIB_CTX_new, OSSL_PROVIDER_available, OSSL_PROVIDER_get0_name,
    OSSL_PROVIDER_get_params, OSSL_PROVIDER_load, EVP_PKEY_CTX, OSSL_LIB_CTX, OSSL_PARAM,
    OSSL_PARAM_UNMODIFIED, OSSL_PARAM_UTF8_PTR, OSSL_PROVIDER,
};
use super::keys::Pkey;
use super::util::{cstr_opt, intern};
use super::{KAE_PROPQ, REF_PROPQ};

/// A library context with one provider of interest loaded into it.
pub struct Lib {
    pub ptr: *mut OSSL_LIB_CTX,
    /// The provider handle returned by `OSSL_PROVIDER_load`.
    pub prov: *mut OSSL_PROVIDER,
    /// The name the provider was loaded under (what `OSSL_PROVIDER_get0_name` reports).
    pub prov_name: String,
    /// "kae" or "default", for messages.
    pub label: &'static str,
    pub(super) propq: CString,
    /// Whether the default provider is available in this library context (for the kae
    /// context: whether loading the kae module made it available).
    pub default_available: bool,
}

unsafe impl Send for Lib {}
unsafe impl Sync for Lib {}

/// The test build of the module (cargo feature `test-knobs`: it honours `KAE_MB_ENGINE` and
/// `KAE_MB_FAULT_LANE`, which a build for use ignores): `$KAE_TEST_KNOBS_MODULE` when set, else
/// built here, as `scripts/build.sh --test-knobs` does, into `target/test-knobs/` beside this
/// test build (a no-op when it is fresh), so that it is never older than the sources.
pub fn test_knobs_module() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(p) = std::env::var_os("KAE_TEST_KNOBS_MODULE").filter(|p| !p.is_empty()) {
            return p.to_string_lossy().into_owned();
        }
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/<test binary>
        let target = exe
            .ancestors()
            .nth(3)
            .expect("test binary outside a cargo target dir")
            .join("test-knobs");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = std::process::Command::new(cargo)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--release",
                "-p",
                "kae",
                "--lib",
                "--features",
                "test-knobs",
            ])
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("running cargo to build the test-knobs module");
        assert!(
            status.success(),
            "building the test-knobs module failed: {status}"
        );
        let module = target.join("release/libkae.so");
        assert!(
            module.is_file(),
            "{} missing after the build",
            module.display()
        );
        module.to_string_lossy().into_owned()
    })
}

/// Path of the provider module under test.
pub fn module_path() -> String {
    if let Ok(p) = std::env::var("KAE_MODULE") {
        if !p.is_empty() {
            return p;
        }
    }
    let exe = std::env::current_exe().expect("current_exe");
    // The binary is target/<profile>/deps/<name>-<hash>.  `cargo test`/`cargo bench` build the
    // cdylib next to it (deps/libkae.so) but only `cargo build` refreshes the copy in
    // target/<profile>/, so the deps one is the module that matches this test build.
    let deps: PathBuf = exe
        .parent()
        .expect("test binary has no directory")
        .to_path_buf();
    let candidates = [
        deps.join("libkae.so"),
        deps.parent()
            .map(|p| p.join("libkae.so"))
            .unwrap_or_default(),
    ];
    let path = candidates.iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "provider module not found at {:?} (cargo builds it with the tests; set KAE_MODULE to override)",
            candidates
        )
    });
    path.to_string_lossy().into_owned()
}

fn load_kae(with_default: bool) -> Lib {
    let name = module_path();
    unsafe {
        let ctx = OSSL_LIB_CTX_new();
        assert!(!ctx.is_null(), "OSSL_LIB_CTX_new");
        clear_errors();
        let cname = CString::new(name.clone()).unwrap();
        let prov = OSSL_PROVIDER_load(ctx, cname.as_ptr());
        if prov.is_null() {
            panic!(
                "OSSL_PROVIDER_load({name}) failed: {}",
                take_errors("OSSL_PROVIDER_load")
            );
        }
        let prov_name = cstr_opt(OSSL_PROVIDER_get0_name(prov)).unwrap_or_default();
        let default_available = OSSL_PROVIDER_available(ctx, intern("default").as_ptr()) == 1;
        if with_default && !default_available {
            let d = OSSL_PROVIDER_load(ctx, intern("default").as_ptr());
            assert!(
                !d.is_null(),
                "loading default into a kae context: {}",
                take_errors("load")
            );
        }
        clear_errors();
        Lib {
            ptr: ctx,
            prov,
            prov_name,
            label: "kae",
            propq: CString::new(KAE_PROPQ).unwrap(),
            default_available: default_available || with_default,
        }
    }
}

fn load_reference() -> Lib {
    unsafe {
        let ctx = OSSL_LIB_CTX_new();
        assert!(!ctx.is_null(), "OSSL_LIB_CTX_new");
        let prov = OSSL_PROVIDER_load(ctx, intern("default").as_ptr());
        assert!(
            !prov.is_null(),
            "loading the default provider: {}",
            take_errors("load")
        );
        Lib {
            ptr: ctx,
            prov,
            prov_name: "default".into(),
            label: "default",
            propq: CString::new(REF_PROPQ).unwrap(),
            default_available: true,
        }
    }
}

/// The library context holding the kae module and nothing else (loaded once per test process),
/// as in a deployment whose configuration activates only kae: whatever else the operations need
/// (digests, DRBG) must come through kae.
pub fn kae() -> &'static Lib {
    static K: OnceLock<Lib> = OnceLock::new();
    K.get_or_init(|| load_kae(false))
}

/// A second kae library context with the default provider loaded next to kae (as in a
/// configuration activating both), for keys managed by the default provider that an operation
/// fetched with `provider=kae` has to export to kae.
pub fn kae_with_default() -> &'static Lib {
    static K: OnceLock<Lib> = OnceLock::new();
    K.get_or_init(|| load_kae(true))
}

/// The reference library context holding only the default provider.
pub fn reference() -> &'static Lib {
    static R: OnceLock<Lib> = OnceLock::new();
    R.get_or_init(load_reference)
}

/// Both contexts: `[kae, reference]`.
pub fn both() -> [&'static Lib; 2] {
    [kae(), reference()]
}

pub fn provider_name(p: *const OSSL_PROVIDER) -> String {
    if p.is_null() {
        "<none>".into()
    } else {
        cstr_opt(unsafe { OSSL_PROVIDER_get0_name(p) }).unwrap_or_else(|| "<unnamed>".into())
    }
}

impl Lib {
    pub fn propq(&self) -> &CStr {
        &self.propq
    }
    pub fn is_kae(&self) -> bool {
        self.label == "kae"
    }

    /// The provider's own `name` parameter (`OSSL_PROV_PARAM_NAME`).
    pub fn provider_reported_name(&self) -> Option<String> {
        self.provider_utf8_param("name")
    }

    /// One of the provider's string parameters (`name`, `buildinfo`, ...).
    pub fn provider_utf8_param(&self, key: &str) -> Option<String> {
        let mut out: *const c_char = ptr::null();
        let mut params = [
            OSSL_PARAM {
                key: intern(key).as_ptr(),
                data_type: OSSL_PARAM_UTF8_PTR,
                data: (&mut out as *mut *const c_char).cast(),
                data_size: 0,
                return_size: OSSL_PARAM_UNMODIFIED,
            },
            OSSL_PARAM {
                key: ptr::null(),
                data_type: 0,
                data: ptr::null_mut(),
                data_size: 0,
                return_size: 0,
            },
        ];
        if unsafe { OSSL_PROVIDER_get_params(self.prov, params.as_mut_ptr()) } != 1 {
            clear_errors();
            return None;
        }
        cstr_opt(out)
    }

    /// Panic unless `p` is this context's provider of interest.
    pub fn expect_provider(&self, p: *const OSSL_PROVIDER, what: &str) {
        let got = provider_name(p);
        assert_eq!(
            got, self.prov_name,
            "{what}: expected the {} provider ({}) to run it, but it ran in provider '{got}'",
            self.label, self.prov_name
        );
    }

    /// Panic unless the operation set up on `pctx` is implemented by this context's provider.
    pub fn expect_op(&self, pctx: *const EVP_PKEY_CTX, what: &str) {
        let p = unsafe { EVP_PKEY_CTX_get0_provider(pctx) };
        self.expect_provider(p, what);
    }

    /// Panic unless `key` is managed by this context's provider.
    pub fn expect_key(&self, key: &Pkey, what: &str) {
        self.expect_provider(unsafe { EVP_PKEY_get0_provider(key.0) }, what);
    }

    /// Digest in this context (fetched without a property query, i.e. from the default provider).
    pub fn digest(&self, md: &str, data: &[u8]) -> Vec<u8> {
        let m = CString::new(md).unwrap();
        unsafe {
            let md = EVP_MD_fetch(self.ptr, m.as_ptr(), ptr::null());
            assert!(
                !md.is_null(),
                "EVP_MD_fetch({m:?}): {}",
                take_errors("fetch")
            );
            let mut out = vec![0u8; 64];
            let mut len: c_uint = 0;
            let r = EVP_Digest(
                data.as_ptr().cast(),
                data.len(),
                out.as_mut_ptr(),
                &mut len,
                md,
                ptr::null_mut(),
            );
            EVP_MD_free(md);
            assert_eq!(r, 1, "EVP_Digest");
            out.truncate(len as usize);
            out
        }
    }

    /// Size in bytes of digest `md`.
    pub fn md_size(&self, md: &str) -> usize {
        let m = CString::new(md).unwrap();
        unsafe {
            let p = EVP_MD_fetch(self.ptr, m.as_ptr(), ptr::null());
            assert!(!p.is_null(), "EVP_MD_fetch({md}): {}", take_errors("fetch"));
            let n = EVP_MD_get_size(p);
            EVP_MD_free(p);
            n as usize
        }
    }
}
