//! Provider entry point, provider context and parameters, algorithm tables, teardown.

use crate::error::KaeError;
use crate::ffi::params::{desc, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::ffi::{guard, Core};
use core::ffi::{c_char, c_int, c_void, CStr};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

pub const PROVIDER_NAME: &CStr = c"kae";
pub const PROVIDER_FULL_NAME: &CStr = c"kae RSA offload provider";
pub const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!(),
    };
pub const BUILDINFO: &CStr = match CStr::from_bytes_with_nul(
    concat!(
        "kae ",
        env!("CARGO_PKG_VERSION"),
        " (Rust provider; backends: cpu)\0"
    )
    .as_bytes(),
) {
    Ok(s) => s,
    Err(_) => panic!(),
};
/// Property string every kae algorithm is registered with.
pub const PROPERTIES: &CStr = c"provider=kae";

/// Provider configuration read from the config section (or environment) at init.
#[derive(Clone, Debug)]
pub struct Config {
    /// Load OpenSSL's default provider (privately) and re-list what kae does not implement
    /// (DRBG, digests, encoders…). `load-default = no` turns it off for setups where only
    /// approved providers may load.
    pub load_default: bool,
    /// Queue pool settings (`backend`, `queues`, `queue-depth`, `async`).
    pub pool: crate::pool::PoolConfig,
    /// `log-level` and `log-target` (see `logging`).
    pub log_level: Option<String>,
    pub log_target: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            load_default: true,
            pool: crate::pool::PoolConfig::default(),
            log_level: None,
            log_target: None,
        }
    }
}

pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// Config keys of the provider section and the environment variables that override them.
const CONFIG_KEYS: [(&CStr, &str); 7] = [
    (c"log-level", "KAE_LOG"),
    (c"log-target", "KAE_LOG_TARGET"),
    (c"load-default", "KAE_LOAD_DEFAULT"),
    (c"backend", "KAE_BACKEND"),
    (c"queues", "KAE_QUEUES"),
    (c"queue-depth", "KAE_QUEUE_DEPTH"),
    (c"async", "KAE_ASYNC"),
];

impl Config {
    /// Reads `key = value` entries of the provider's config section through the core, then
    /// applies environment overrides.
    fn from_core(core: &Core) -> Result<Config, crate::ffi::core::Failure> {
        let mut values: Vec<(&'static str, String)> = Vec::new();
        if let Some(get) = core.get_params {
            let mut ptrs: [*const c_char; CONFIG_KEYS.len()] =
                [core::ptr::null(); CONFIG_KEYS.len()];
            let mut req: Vec<OSSL_PARAM> = ptrs
                .iter_mut()
                .zip(CONFIG_KEYS.iter())
                .map(|(p, (key, _))| OSSL_PARAM {
                    key: key.as_ptr(),
                    data_type: OSSL_PARAM_UTF8_PTR,
                    data: (p as *mut *const c_char).cast(),
                    data_size: core::mem::size_of::<*const c_char>(),
                    return_size: OSSL_PARAM_UNMODIFIED,
                })
                .collect();
            req.push(END);
            // SAFETY: core function with our handle and a well-formed request array.
            unsafe { get(core.handle, req.as_mut_ptr()) };
            for (p, (key, _)) in ptrs.iter().zip(CONFIG_KEYS.iter()) {
                // SAFETY: the core set it to NULL or a string owned by the config.
                if let Some(v) = unsafe { crate::ffi::core::opt_cstr(*p) } {
                    values.push((key.to_str().unwrap_or_default(), v.to_owned()));
                }
            }
        }
        for (key, env) in CONFIG_KEYS {
            // Not in setuid/setgid programs: see crate::env.
            if let Some(v) = crate::env::var(env) {
                values.push((key.to_str().unwrap_or_default(), v));
            }
        }
        let mut cfg = Config::default();
        for (key, v) in values {
            let bad =
                || crate::ffi::core::Failure::with(KaeError::InvalidParam, format!("{key}={v}"));
            match key {
                "load-default" => cfg.load_default = parse_bool(&v).ok_or_else(bad)?,
                "backend" => {
                    cfg.pool.backend = crate::pool::BackendChoice::parse(&v).ok_or_else(bad)?
                }
                "queues" => {
                    cfg.pool.queues = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| (1..=256).contains(n))
                        .ok_or_else(bad)?
                }
                "queue-depth" => {
                    cfg.pool.depth = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| (1..=65536).contains(n))
                        .ok_or_else(bad)?
                }
                "async" => {
                    cfg.pool.async_mode = crate::pool::AsyncMode::parse(&v).ok_or_else(bad)?
                }
                "log-level" => cfg.log_level = Some(v.clone()),
                "log-target" => cfg.log_target = Some(v.clone()),
                _ => {}
            }
        }
        Ok(cfg)
    }
}

/// Per-instance provider state; `provctx` handed to OpenSSL is an `Arc<ProvCtx>` raw pointer.
pub struct ProvCtx {
    pub core: Core,
    /// kae's own library context: a child of the application's (`OSSL_LIB_CTX_new_child`),
    /// so fetches and random numbers use the application's providers without treating the
    /// core's opaque context as a library context. Freed at teardown.
    pub libctx: *mut OSSL_LIB_CTX,
    /// This instance's slot in [`INSTANCES`] (selects its keymgmt `load` functions).
    pub slot: usize,
    /// The running core's version (its `openssl-version` parameter): behaviour that differs
    /// between OpenSSL releases follows it.
    pub core_version: crate::core_version::CoreVersion,
    pub config: Config,
    /// The default provider we loaded (NULL with `load-default = no`). It lives in a private
    /// library context of ours, so its RSA never competes with kae's in the application's
    /// context; everything else it offers is re-listed under `provider=kae`.
    pub default_provider: *mut OSSL_PROVIDER,
    default_libctx: *mut OSSL_LIB_CTX,
    /// Algorithm tables of the default provider re-labelled `provider=kae`, per operation.
    proxied: Mutex<HashMap<c_int, ProxyTable>>,
}

/// A copy of one of the default provider's algorithm tables with our property strings.
struct ProxyTable {
    algs: Table<OSSL_ALGORITHM>,
    _props: Vec<CString>,
}

/// Provider contexts by the pointer the core passes back to us. With the default provider
/// loaded, that pointer is the default provider's own context (see `OSSL_provider_init`).
static REGISTRY: RwLock<Vec<(usize, Arc<ProvCtx>)>> = RwLock::new(Vec::new());

fn lookup(p: *mut c_void) -> Option<Arc<ProvCtx>> {
    let reg = REGISTRY.read().ok()?;
    reg.iter()
        .find(|(k, _)| *k == p as usize)
        .map(|(_, v)| v.clone())
}

/// Provider instances by slot. keymgmt `load` carries no provider context, so each slot has
/// its own `load` functions (`keymgmt::rsa_load::<SLOT>`): a key decoded in one library
/// context is attached to the kae instance of that context, never to another one.
pub const MAX_INSTANCES: usize = 8;
static INSTANCES: Mutex<[Option<std::sync::Weak<ProvCtx>>; MAX_INSTANCES]> =
    Mutex::new([const { None }; MAX_INSTANCES]);

/// The live instance in `slot`.
pub fn instance(slot: usize) -> Option<Arc<ProvCtx>> {
    let g = INSTANCES.lock().unwrap_or_else(|e| e.into_inner());
    g.get(slot)?.as_ref()?.upgrade()
}

/// A free slot (one whose instance is gone), or None when MAX_INSTANCES are alive.
fn free_slot() -> Option<usize> {
    let g = INSTANCES.lock().unwrap_or_else(|e| e.into_inner());
    g.iter()
        .position(|w| w.as_ref().map_or(true, |w| w.strong_count() == 0))
}

// SAFETY: the raw pointers are handles owned by the core, valid and thread-safe for the
// provider's lifetime.
unsafe impl Send for ProvCtx {}
unsafe impl Sync for ProvCtx {}

impl ProvCtx {
    /// The provider context for the pointer the core passes back to us (a registry lookup, so
    /// a stale or foreign pointer yields None instead of undefined behaviour).
    ///
    /// # Safety
    /// None needed; kept `unsafe` for symmetry with the other FFI argument converters.
    pub unsafe fn clone_arc(p: *mut c_void) -> Option<Arc<ProvCtx>> {
        if p.is_null() {
            return None;
        }
        lookup(p)
    }

    /// The default provider's algorithms for `op`, minus the ones kae implements itself,
    /// re-labelled `provider=kae` so that a `provider=kae` query finds everything it needs.
    fn proxied(&self, op: c_int) -> *const OSSL_ALGORITHM {
        if self.default_provider.is_null() {
            return core::ptr::null();
        }
        let Ok(mut map) = self.proxied.lock() else {
            return core::ptr::null();
        };
        if let Some(t) = map.get(&op) {
            return t.algs.0.as_ptr();
        }
        let mut no_cache = 0;
        // SAFETY: default_provider is a provider we hold a reference to.
        let src =
            unsafe { OSSL_PROVIDER_query_operation(self.default_provider, op, &mut no_cache) };
        let mut algs = Vec::new();
        let mut props = Vec::new();
        if !src.is_null() {
            let mut p = src;
            // SAFETY: the default provider's table is terminated by a NULL name and static.
            unsafe {
                while !(*p).algorithm_names.is_null() {
                    let a = &*p;
                    p = p.add(1);
                    let names = CStr::from_ptr(a.algorithm_names).to_string_lossy();
                    if !relisting_allowed(op, &names) {
                        continue;
                    }
                    let def = if a.property_definition.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(a.property_definition)
                            .to_string_lossy()
                            .into_owned()
                    };
                    let relabelled: Vec<String> = def
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|s| {
                            if s.trim().starts_with("provider=") {
                                "provider=kae".to_owned()
                            } else {
                                s.to_owned()
                            }
                        })
                        .collect();
                    let mut relabelled = relabelled.join(",");
                    if !relabelled.contains("provider=kae") {
                        relabelled = if relabelled.is_empty() {
                            "provider=kae".into()
                        } else {
                            format!("provider=kae,{relabelled}")
                        };
                    }
                    let Ok(c) = CString::new(relabelled) else {
                        continue;
                    };
                    algs.push(OSSL_ALGORITHM {
                        algorithm_names: a.algorithm_names,
                        property_definition: c.as_ptr(),
                        implementation: a.implementation,
                        algorithm_description: a.algorithm_description,
                    });
                    props.push(c);
                }
            }
        }
        algs.push(ALG_END);
        let t = ProxyTable {
            algs: Table(algs),
            _props: props,
        };
        let ptr = t.algs.0.as_ptr();
        map.insert(op, t);
        ptr
    }

    /// Unloads our private default provider, its library context and our child library
    /// context. Called at teardown, when the core holds no more methods of ours (so none of
    /// the re-listed ones either).
    fn release_contexts(&self) {
        // SAFETY: all were created in init and are released once (teardown runs once).
        unsafe {
            if !self.default_provider.is_null() {
                OSSL_PROVIDER_unload(self.default_provider);
            }
            if !self.default_libctx.is_null() {
                OSSL_LIB_CTX_free(self.default_libctx);
            }
            if !self.libctx.is_null() {
                OSSL_LIB_CTX_free(self.libctx);
            }
        }
    }

    /// Whether the running core is at least `major.minor`.
    pub fn core_at_least(&self, major: u32, minor: u32) -> bool {
        self.core_version.at_least(major, minor)
    }

    /// kae's private library context holding the default provider (NULL with
    /// `load-default = no`).
    pub fn private_default_libctx(&self) -> *mut OSSL_LIB_CTX {
        self.default_libctx
    }

    /// The same context, under the name kae's encoders use (they encode there).
    pub fn default_libctx(&self) -> *mut OSSL_LIB_CTX {
        self.default_libctx
    }

    /// Where kae's own random numbers (blinding, key generation) come from: the private
    /// default provider's DRBG chain when kae loaded it, else the application's providers
    /// (through our child context). Never a generator that kae itself lists: that would
    /// make kae depend on how the application configured its own randomness.
    pub fn rand_libctx(&self) -> *mut OSSL_LIB_CTX {
        if self.default_libctx.is_null() {
            self.libctx
        } else {
            self.default_libctx
        }
    }

    pub fn rng(&self) -> crate::ffi::digest::Rng {
        crate::ffi::digest::Rng {
            libctx: self.rand_libctx(),
            private: false,
        }
    }

    pub fn private_rng(&self) -> crate::ffi::digest::Rng {
        crate::ffi::digest::Rng {
            libctx: self.rand_libctx(),
            private: true,
        }
    }
}

/// Operation classes whose implementations never receive a key object: re-listed whole.
const KEYLESS_OPERATIONS: [c_int; 7] = [
    OSSL_OP_DIGEST,
    OSSL_OP_CIPHER,
    OSSL_OP_MAC,
    OSSL_OP_KDF,
    OSSL_OP_RAND,    // minus the DRBGs kae fronts itself (rand.rs)
    OSSL_OP_DECODER, // makes key objects (RSA ones reach our keymgmt `load`), never takes one
    OSSL_OP_STORE,
];

/// Operation classes whose implementations receive key objects of their provider's key
/// management: only algorithms for key types kae does not manage are re-listed.
const KEYED_OPERATIONS: [c_int; 6] = [
    OSSL_OP_KEYMGMT,
    OSSL_OP_KEYEXCH,
    OSSL_OP_SIGNATURE,
    OSSL_OP_ASYM_CIPHER,
    OSSL_OP_KEM,
    OSSL_OP_ENCODER,
];

/// First names of the default provider's algorithms of keyed operations that work on key
/// types other than RSA and RSA-PSS (key types, and the signature / key exchange / KEM
/// algorithms on them). An allow-list: a new algorithm a newer core adds (an RSA composite
/// signature, say) is not re-listed until it is named here. Names come from the default
/// providers of OpenSSL 3.0 through 4.0 (3.4 added composite DSA/ECDSA signatures, 3.5 the
/// ML-DSA, SLH-DSA, ML-KEM and hybrid key types, 3.6 LMS).
const OTHER_KEY_ALGORITHMS: [&str; 67] = [
    "DH",
    "DHX",
    "DSA",
    "EC",
    "ECDH",
    "ECDSA",
    "X25519",
    "X448",
    "ED25519",
    "ED448",
    "SM2",
    "HMAC",
    "SIPHASH",
    "POLY1305",
    "CMAC",
    "TLS1-PRF",
    "HKDF",
    "SCRYPT",
    "ED25519ph",
    "ED25519ctx",
    "ED448ph",
    "ED448ctx",
    "Ed25519ph",
    "Ed25519ctx",
    "Ed448ph",
    "Ed448ctx",
    "DSA-SHA1",
    "DSA-SHA2-224",
    "DSA-SHA2-256",
    "DSA-SHA2-384",
    "DSA-SHA2-512",
    "DSA-SHA3-224",
    "DSA-SHA3-256",
    "DSA-SHA3-384",
    "DSA-SHA3-512",
    "ECDSA-SHA1",
    "ECDSA-SHA2-224",
    "ECDSA-SHA2-256",
    "ECDSA-SHA2-384",
    "ECDSA-SHA2-512",
    "ECDSA-SHA3-224",
    "ECDSA-SHA3-256",
    "ECDSA-SHA3-384",
    "ECDSA-SHA3-512",
    "ML-DSA-44",
    "ML-DSA-65",
    "ML-DSA-87",
    "SLH-DSA-SHA2-128s",
    "SLH-DSA-SHA2-128f",
    "SLH-DSA-SHA2-192s",
    "SLH-DSA-SHA2-192f",
    "SLH-DSA-SHA2-256s",
    "SLH-DSA-SHA2-256f",
    "SLH-DSA-SHAKE-128s",
    "SLH-DSA-SHAKE-128f",
    "SLH-DSA-SHAKE-192s",
    "SLH-DSA-SHAKE-192f",
    "SLH-DSA-SHAKE-256s",
    "SLH-DSA-SHAKE-256f",
    "LMS",
    "ML-KEM-512",
    "ML-KEM-768",
    "ML-KEM-1024",
    "X25519MLKEM768",
    "X448MLKEM1024",
    "SecP256r1MLKEM768",
    "SecP384r1MLKEM1024",
];

/// Whether the default provider's algorithm `names` (colon-separated) of operation `op` may
/// be listed under kae's name: never one that could be handed a kae key object.
pub(crate) fn relisting_allowed(op: c_int, names: &str) -> bool {
    if op == OSSL_OP_RAND {
        // Seed sources and the test generator are re-listed; the DRBGs are kae's own fronts
        // (since 3.5 a DRBG looks its cipher up by its provider's name, see rand.rs).
        return !crate::rand::is_kae_generator(names);
    }
    if KEYLESS_OPERATIONS.contains(&op) {
        return true;
    }
    if !KEYED_OPERATIONS.contains(&op) {
        return false; // an operation class this build does not know: not re-listed
    }
    let first = names.split(':').next().unwrap_or("");
    let rsa_like = names.split(':').any(|n| {
        let n = n.to_ascii_uppercase();
        n.contains("RSA") || n.starts_with("1.2.840.113549.1.1.")
    });
    !rsa_like && OTHER_KEY_ALGORITHMS.contains(&first)
}

/// Wrapper letting static tables of raw pointers live in statics.
pub struct Table<T>(pub Vec<T>);
// SAFETY: the tables are built once and never mutated; they hold pointers to static data.
unsafe impl<T> Sync for Table<T> {}
unsafe impl<T> Send for Table<T> {}

/// Builds an `OSSL_DISPATCH` entry from a typed `extern "C"` function.
#[macro_export]
macro_rules! dispatch {
    ($( $id:expr => $f:expr ),* $(,)?) => {
        $crate::provider::Table(vec![
            $( $crate::ffi::sys::OSSL_DISPATCH {
                function_id: $id,
                // SAFETY: OpenSSL casts the pointer back to the type documented for `$id`,
                // which is the type of `$f`.
                function: Some(unsafe { core::mem::transmute::<*const (), unsafe extern "C" fn()>($f as *const ()) }),
            }, )*
            $crate::ffi::sys::OSSL_DISPATCH { function_id: 0, function: None },
        ])
    };
}

fn algorithm(
    names: &'static CStr,
    imp: &'static Table<OSSL_DISPATCH>,
    descr: &'static CStr,
) -> OSSL_ALGORITHM {
    OSSL_ALGORITHM {
        algorithm_names: names.as_ptr(),
        property_definition: PROPERTIES.as_ptr(),
        implementation: imp.0.as_ptr(),
        algorithm_description: descr.as_ptr(),
    }
}

const ALG_END: OSSL_ALGORITHM = OSSL_ALGORITHM {
    algorithm_names: core::ptr::null(),
    property_definition: core::ptr::null(),
    implementation: core::ptr::null(),
    algorithm_description: core::ptr::null(),
};

pub const RSA_NAMES: &CStr = c"RSA:rsaEncryption:1.2.840.113549.1.1.1";
pub const RSA_PSS_NAMES: &CStr = c"RSA-PSS:RSASSA-PSS:1.2.840.113549.1.1.10";

/// Key management algorithms of each slot (they differ only in their `load` functions).
static KEYMGMT_ALGS: LazyLock<Vec<Table<OSSL_ALGORITHM>>> = LazyLock::new(|| {
    (0..MAX_INSTANCES)
        .map(|slot| {
            let (rsa, pss) = crate::keymgmt::keymgmt_tables(slot);
            Table(vec![
                algorithm(RSA_NAMES, rsa, c"kae RSA key management"),
                algorithm(RSA_PSS_NAMES, pss, c"kae RSA-PSS key management"),
                ALG_END,
            ])
        })
        .collect()
});

static SIGNATURE_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(
            RSA_NAMES,
            &crate::signature::RSA_SIGNATURE,
            c"kae RSA signature",
        ),
        ALG_END,
    ])
});

static RAND_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    let t = &crate::rand::RAND_TABLES;
    Table(vec![
        algorithm(
            c"CTR-DRBG",
            &t[0],
            c"kae CTR DRBG (front of a private default-provider DRBG)",
        ),
        algorithm(
            c"HASH-DRBG",
            &t[1],
            c"kae HASH DRBG (front of a private default-provider DRBG)",
        ),
        algorithm(
            c"HMAC-DRBG",
            &t[2],
            c"kae HMAC DRBG (front of a private default-provider DRBG)",
        ),
        ALG_END,
    ])
});

/// The plain RSA signature plus the composite `RSA-SHA*` algorithms (OpenSSL 3.4+); listed
/// instead of [`SIGNATURE_ALGS`] only when the running core is 3.4 or newer.
static SIGNATURE_ALGS_WITH_SIGALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    let mut v = vec![algorithm(
        RSA_NAMES,
        &crate::signature::RSA_SIGNATURE,
        c"kae RSA signature",
    )];
    v.extend(
        crate::signature::sigalg_tables().map(|(names, imp, descr)| algorithm(names, imp, descr)),
    );
    v.push(ALG_END);
    Table(v)
});

static KEM_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(RSA_NAMES, &crate::kem::RSA_KEM, c"kae RSA KEM (RSASVE)"),
        ALG_END,
    ])
});

static ASYM_CIPHER_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(
            RSA_NAMES,
            &crate::asym_cipher::RSA_ASYM_CIPHER,
            c"kae RSA asymmetric cipher",
        ),
        ALG_END,
    ])
});

static REASON_STRINGS: LazyLock<Table<OSSL_ITEM>> = LazyLock::new(|| {
    let mut v: Vec<OSSL_ITEM> = KaeError::ALL
        .iter()
        .map(|r| OSSL_ITEM {
            id: r.code(),
            ptr: r.c_text().as_ptr() as *mut c_void,
        })
        .collect();
    v.push(OSSL_ITEM {
        id: 0,
        ptr: core::ptr::null_mut(),
    });
    Table(v)
});

/// Counter parameters (read-only, unsigned 64-bit): every slot of `stats::NAMES` plus their
/// error sum, listed by `openssl list -providers -verbose`.
static COUNTER_PARAMS: LazyLock<Vec<CString>> = LazyLock::new(|| {
    let mut v: Vec<CString> = crate::stats::NAMES
        .iter()
        .map(|n| CString::new(*n).unwrap_or_default())
        .collect();
    v.push(c"errors".to_owned());
    v
});

static PROVIDER_GETTABLE: LazyLock<Table<OSSL_PARAM>> = LazyLock::new(|| {
    let mut v = vec![
        desc(c"name", OSSL_PARAM_UTF8_PTR),
        desc(c"version", OSSL_PARAM_UTF8_PTR),
        desc(c"buildinfo", OSSL_PARAM_UTF8_PTR),
        desc(c"status", OSSL_PARAM_INTEGER),
        desc(c"backend", OSSL_PARAM_UTF8_PTR),
        desc(c"live", OSSL_PARAM_UTF8_STRING),
    ];
    v.extend(
        COUNTER_PARAMS
            .iter()
            .map(|k| desc(k, OSSL_PARAM_UNSIGNED_INTEGER)),
    );
    v.push(END);
    Table(v)
});

unsafe extern "C" fn kae_teardown(provctx: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if provctx.is_null() {
            return Ok(());
        }
        // Drop the registry's reference (objects still holding clones keep the struct alive),
        // stop the pool when this was the last instance, and release our private default
        // provider and its library context.
        let mut removed = None;
        if let Ok(mut reg) = REGISTRY.write() {
            if let Some(i) = reg.iter().position(|(k, _)| *k == provctx as usize) {
                removed = Some(reg.remove(i).1);
            }
        }
        crate::stats::log_summary_once();
        if let Some(prov) = removed {
            INSTANCES.lock().unwrap_or_else(|e| e.into_inner())[prov.slot] = None;
            crate::pool::remove_user();
            prov.release_contexts();
        }
        Ok(())
    })
}

unsafe extern "C" fn kae_gettable_params(_provctx: *mut c_void) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| PROVIDER_GETTABLE.0.as_ptr()).unwrap_or(core::ptr::null())
}

/// The `live` parameter: the active backend, this process's counters and the sum over every
/// process with kae loaded (read from the counter pages). A copied UTF8_STRING, so nothing
/// handed to OpenSSL points into memory that changes; `buildinfo` stays a static string.
fn live_line() -> String {
    let here = crate::stats::snapshot();
    let all = crate::stats::live_pages(false);
    format!(
        "backend {} | this process: {} | {} process(es) with kae: {}",
        crate::pool::backend_label().to_string_lossy(),
        crate::stats::short_line(&here),
        all.len(),
        crate::stats::short_line(&crate::stats::total(&all)),
    )
}

unsafe extern "C" fn kae_get_params(provctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: registry lookup.
    let prov = unsafe { ProvCtx::clone_arc(provctx) };
    guard(
        prov.as_ref().map(|p| &p.core),
        0,
        || -> Result<c_int, KaeError> {
            // SAFETY: the core passes a valid terminated array.
            let mut ps = unsafe { ParamsMut::from_ptr(params) };
            if let Some(mut p) = ps.locate(c"name") {
                p.set_utf8(PROVIDER_FULL_NAME)?;
            }
            if let Some(mut p) = ps.locate(c"version") {
                p.set_utf8(VERSION)?;
            }
            if let Some(mut p) = ps.locate(c"buildinfo") {
                p.set_utf8(BUILDINFO)?;
            }
            if let Some(mut p) = ps.locate(c"live") {
                p.set_utf8_owned(&live_line())?;
            }
            if let Some(mut p) = ps.locate(c"status") {
                p.set_int(1)?;
            }
            if let Some(mut p) = ps.locate(c"backend") {
                p.set_utf8(crate::pool::backend_label())?;
            }
            let s = crate::stats::snapshot();
            let mut values: Vec<u64> = s.0.to_vec();
            values.push(s.errors());
            for (key, v) in COUNTER_PARAMS.iter().zip(values) {
                if let Some(mut p) = ps.locate(key) {
                    p.set_u64(v)?;
                }
            }
            Ok(1)
        },
    )
}

/// Our own algorithms followed by the proxied ones for the same operation.
fn merged(
    prov: &ProvCtx,
    op: c_int,
    ours: &'static Table<OSSL_ALGORITHM>,
) -> *const OSSL_ALGORITHM {
    let proxied = prov.proxied(op);
    if proxied.is_null() {
        return ours.0.as_ptr();
    }
    let Ok(mut map) = prov.proxied.lock() else {
        return ours.0.as_ptr();
    };
    let key = -op; // merged tables are cached under the negated operation id
    if let Some(t) = map.get(&key) {
        return t.algs.0.as_ptr();
    }
    let mut algs: Vec<OSSL_ALGORITHM> = ours
        .0
        .iter()
        .filter(|a| !a.algorithm_names.is_null())
        .map(|a| OSSL_ALGORITHM { ..*a })
        .collect();
    if let Some(t) = map.get(&op) {
        algs.extend(t.algs.0.iter().map(|a| OSSL_ALGORITHM { ..*a }));
    } else {
        algs.push(ALG_END);
    }
    let t = ProxyTable {
        algs: Table(algs),
        _props: Vec::new(),
    };
    let ptr = t.algs.0.as_ptr();
    map.insert(key, t);
    ptr
}

unsafe extern "C" fn kae_query_operation(
    provctx: *mut c_void,
    operation_id: c_int,
    no_cache: *mut c_int,
) -> *const OSSL_ALGORITHM {
    if !no_cache.is_null() {
        // SAFETY: core passes a valid int pointer.
        unsafe { *no_cache = 0 };
    }
    let r = std::panic::catch_unwind(|| {
        // SAFETY: registry lookup.
        let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
            return core::ptr::null();
        };
        match operation_id {
            OSSL_OP_KEYMGMT => match KEYMGMT_ALGS.get(prov.slot) {
                Some(t) => merged(&prov, operation_id, t),
                None => core::ptr::null(),
            },
            OSSL_OP_SIGNATURE => {
                let table = if prov.core_at_least(3, 4) {
                    &SIGNATURE_ALGS_WITH_SIGALGS
                } else {
                    &SIGNATURE_ALGS
                };
                merged(&prov, operation_id, table)
            }
            OSSL_OP_KEM => merged(&prov, operation_id, &KEM_ALGS),
            OSSL_OP_ASYM_CIPHER => merged(&prov, operation_id, &ASYM_CIPHER_ALGS),
            // Only with the private default provider: the fronts forward to it.
            OSSL_OP_RAND if !prov.default_provider.is_null() => {
                merged(&prov, operation_id, &RAND_ALGS)
            }
            // kae's own RSA / RSA-PSS encoders work in the private default provider's
            // context, so they are listed only when it is loaded.
            OSSL_OP_ENCODER if !prov.default_provider.is_null() => {
                merged(&prov, operation_id, &crate::encoder::ENCODER_ALGS)
            }
            other => prov.proxied(other),
        }
    });
    r.unwrap_or(core::ptr::null())
}

unsafe extern "C" fn kae_get_reason_strings(_provctx: *mut c_void) -> *const OSSL_ITEM {
    std::panic::catch_unwind(|| REASON_STRINGS.0.as_ptr()).unwrap_or(core::ptr::null())
}

type CapabilityCb = unsafe extern "C" fn(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int;

/// Capabilities (TLS groups, TLS signature algorithms) of the default provider, repeated
/// under our name: libssl only uses a group whose key management comes from the provider
/// that announced it, and with `provider=kae` preferred that key management is our re-listed
/// copy.
unsafe extern "C" fn kae_get_capabilities(
    provctx: *mut c_void,
    capability: *const c_char,
    cb: Option<CapabilityCb>,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: registry lookup.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return 0;
    };
    if prov.default_provider.is_null() {
        return 1; // nothing to announce
    }
    // SAFETY: a provider we hold a reference to; arguments forwarded unchanged.
    unsafe { OSSL_PROVIDER_get_capabilities(prov.default_provider, capability, cb, arg) }
}

static PROVIDER_DISPATCH: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(|| {
    crate::dispatch![
        OSSL_FUNC_PROVIDER_TEARDOWN => kae_teardown as unsafe extern "C" fn(_),
        OSSL_FUNC_PROVIDER_GETTABLE_PARAMS => kae_gettable_params as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_PARAMS => kae_get_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_PROVIDER_QUERY_OPERATION => kae_query_operation as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_PROVIDER_GET_REASON_STRINGS => kae_get_reason_strings as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_PROVIDER_GET_CAPABILITIES => kae_get_capabilities as unsafe extern "C" fn(_, _, _, _) -> _,
    ]
});

/// The provider entry point OpenSSL looks up in `kae.so`.
///
/// Starts no threads and does no expensive work: it reads the config, optionally loads the
/// default provider next to us, and hands back our dispatch table.
///
/// # Safety
/// Called by the OpenSSL core with valid arguments.
#[no_mangle]
pub unsafe extern "C" fn OSSL_provider_init(
    handle: *const OSSL_CORE_HANDLE,
    in_: *const OSSL_DISPATCH,
    out: *mut *const OSSL_DISPATCH,
    provctx: *mut *mut c_void,
) -> c_int {
    // SAFETY: the core's dispatch table is valid for the provider's lifetime.
    let core = unsafe { Core::from_dispatch(handle, in_) };
    // First, before any libcrypto call of ours: are we linked to the core's libcrypto major
    // version? (A 3.x build inside a 4.x core would hand 3.x objects to 4.x.) The refusal is
    // written to stderr whatever the log level, since kae is then missing from the process;
    // the error raised through the core carries no detail text, because adding it would
    // take our libcrypto's error functions, not the core's.
    let core_version = match std::panic::catch_unwind(|| {
        let v = read_core_version(&core);
        crate::core_version::compatible(v, crate::core_version::linked_major()).map(|_| v)
    }) {
        Ok(Ok(v)) => v,
        Ok(Err(why)) => {
            crate::logging::write_stderr_line(&format!("kae: error: {why}"));
            crate::ffi::core::raise_core_only(&core, KaeError::WrongOpenSslVersion);
            return 0;
        }
        Err(_) => return 0,
    };
    guard(
        Some(&core),
        0,
        || -> Result<c_int, crate::ffi::core::Failure> {
            if out.is_null() || provctx.is_null() {
                return Err(KaeError::NullParameter.into());
            }
            crate::logging::init();
            crate::stats::publish("cpu");
            let config = Config::from_core(&core)?;
            crate::logging::configure(config.log_level.as_deref(), config.log_target.as_deref())
                .map_err(|d| crate::ffi::core::Failure::with(KaeError::InvalidParam, d))?;
            // The pool itself starts lazily on first use (no thread is created here).
            crate::pool::configure(config.pool.clone());
            let slot = free_slot().ok_or_else(|| {
                crate::ffi::core::Failure::with(
                    KaeError::Internal,
                    format!("more than {MAX_INSTANCES} kae instances in one process"),
                )
            })?;
            // SAFETY: the handle and dispatch table the core gave us, as the API requires.
            let libctx = unsafe { OSSL_LIB_CTX_new_child(handle, in_) };
            if libctx.is_null() {
                return Err(crate::ffi::core::Failure::with(
                    KaeError::Internal,
                    "OSSL_LIB_CTX_new_child failed",
                ));
            }
            let mut default_provider = core::ptr::null_mut();
            let mut default_libctx = core::ptr::null_mut();
            if config.load_default {
                // The default provider goes into a private library context: loaded next to us
                // in the application's context, its RSA would win every fetch without a
                // property query (providers are consulted in name order), and
                // `openssl speed -provider kae` would measure the default provider.
                // SAFETY: plain constructor calls; failures are checked.
                unsafe {
                    default_libctx = OSSL_LIB_CTX_new();
                    if !default_libctx.is_null() {
                        default_provider = OSSL_PROVIDER_load(default_libctx, c"default".as_ptr());
                    }
                    if default_provider.is_null() {
                        if !default_libctx.is_null() {
                            OSSL_LIB_CTX_free(default_libctx);
                        }
                        OSSL_LIB_CTX_free(libctx);
                        return Err(KaeError::DefaultProviderUnavailable.into());
                    }
                }
            }
            // With the default provider next to us, our provider context *is* the default
            // provider's context: the proxied default algorithms (listed under provider=kae) are
            // then called with the context they expect, and our own functions find their state in
            // the registry under the same pointer.
            let key = if default_provider.is_null() {
                core::ptr::null_mut()
            } else {
                // SAFETY: a provider we hold a reference to.
                unsafe { OSSL_PROVIDER_get0_provider_ctx(default_provider) }
            };
            let ctx = Arc::new(ProvCtx {
                core,
                libctx,
                slot,
                core_version,
                config,
                default_provider,
                default_libctx,
                proxied: Mutex::new(HashMap::new()),
            });
            let pc = &ctx.config.pool;
            log::info!(
                "kae {} in OpenSSL {core_version}: backend {} ({}); pool {} queues x depth {}, async offload {} (threads start at first async use); default provider {}",
                env!("CARGO_PKG_VERSION"),
                crate::pool::chosen_backend(pc.backend).0,
                crate::pool::chosen_backend(pc.backend).1,
                pc.queues,
                pc.depth,
                pc.async_mode.name(),
                if ctx.config.load_default { "loaded privately and re-listed" } else { "not loaded (load-default = no)" }
            );
            // SAFETY: out and provctx are valid out-pointers (checked above).
            unsafe {
                *out = PROVIDER_DISPATCH.0.as_ptr();
                *provctx = if key.is_null() {
                    Arc::as_ptr(&ctx) as *mut c_void
                } else {
                    key
                };
            }
            // SAFETY: just written above.
            let id = unsafe { *provctx } as usize;
            INSTANCES.lock().unwrap_or_else(|e| e.into_inner())[slot] = Some(Arc::downgrade(&ctx));
            REGISTRY
                .write()
                .map_err(|_| KaeError::Internal)?
                .push((id, ctx));
            crate::pool::add_user();
            Ok(1)
        },
    )
}

/// The core's `openssl-version` parameter, parsed (3.0.0 if the core does not say).
fn read_core_version(core: &Core) -> crate::core_version::CoreVersion {
    let fallback = crate::core_version::CoreVersion {
        major: 3,
        minor: 0,
        patch: 0,
    };
    let Some(get) = core.get_params else {
        return fallback;
    };
    let mut value: *const c_char = core::ptr::null();
    let mut req = [
        OSSL_PARAM {
            key: c"openssl-version".as_ptr(),
            data_type: OSSL_PARAM_UTF8_PTR,
            data: (&mut value as *mut *const c_char).cast(),
            data_size: core::mem::size_of::<*const c_char>(),
            return_size: OSSL_PARAM_UNMODIFIED,
        },
        END,
    ];
    // SAFETY: core function with our handle and a well-formed request array.
    unsafe { get(core.handle, req.as_mut_ptr()) };
    // SAFETY: the core set it to NULL or to its static version string.
    unsafe { crate::ffi::core::opt_cstr(value) }
        .and_then(crate::core_version::CoreVersion::parse)
        .unwrap_or(fallback)
}

/// Turns a `&str` into a C string or reports the parameter as invalid.
pub fn cstring(s: &str) -> Result<CString, KaeError> {
    CString::new(s).map_err(|_| KaeError::InvalidParam)
}

/// Reads an optional string parameter.
pub fn opt_utf8<'a>(params: &Params<'a>, key: &CStr) -> Result<Option<&'a str>, KaeError> {
    params.locate(key).map(|p| p.get_utf8()).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing that can be handed an RSA or RSA-PSS key is re-listed, whatever its class or
    /// name, and an operation class this build does not know is not re-listed at all.
    #[test]
    fn relisting_is_an_allow_list() {
        for op in KEYED_OPERATIONS {
            for names in [
                "RSA:rsaEncryption:1.2.840.113549.1.1.1",
                "RSA-PSS:RSASSA-PSS:1.2.840.113549.1.1.10",
                "RSA-SHA256:sha256WithRSAEncryption:1.2.840.113549.1.1.11",
                "1.2.840.113549.1.1.1",
                "SOMETHING-NEW",
            ] {
                assert!(!relisting_allowed(op, names), "op {op}: {names}");
            }
        }
        assert!(!relisting_allowed(OSSL_OP_KEM, "RSA"), "RSA KEM (RSASVE)");
        assert!(relisting_allowed(OSSL_OP_KEYMGMT, "EC:id-ecPublicKey"));
        assert!(relisting_allowed(OSSL_OP_SIGNATURE, "ECDSA"));
        assert!(relisting_allowed(OSSL_OP_KEYEXCH, "X25519"));
        assert!(relisting_allowed(OSSL_OP_ENCODER, "EC"));
        for op in KEYLESS_OPERATIONS {
            assert!(relisting_allowed(op, "SHA2-256:SHA-256"));
        }
        assert!(!relisting_allowed(15, "AES"), "unknown operation class");
        assert!(!relisting_allowed(99, "X"), "unknown operation class");
    }
}
