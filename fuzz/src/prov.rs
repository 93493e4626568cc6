//! kae in-process: the instrumented rlib's `OSSL_provider_init` registered as a built-in
//! provider of a fresh library context (next to the default provider, which supplies
//! digests and RNG), and typed access to kae's own dispatch tables, found through the
//! provider's `query_operation` the way the core finds them.
//!
//! Panics inside kae are caught by its FFI guard and turned into errors; the targets
//! install a panic hook that aborts, so every panic is a finding.

use core::ffi::{c_char, c_int, c_void, CStr};
use kae::ffi::sys::{
    OSSL_ALGORITHM, OSSL_DISPATCH, OSSL_FUNC_PROVIDER_QUERY_OPERATION, OSSL_OP_ASYM_CIPHER,
    OSSL_OP_KEYMGMT, OSSL_OP_SIGNATURE, OSSL_PARAM,
};
use std::sync::OnceLock;

extern "C" {
    fn OSSL_LIB_CTX_new() -> *mut c_void;
    fn OSSL_PROVIDER_add_builtin(
        libctx: *mut c_void,
        name: *const c_char,
        init: *const c_void,
    ) -> c_int;
    fn OSSL_PROVIDER_load(libctx: *mut c_void, name: *const c_char) -> *mut c_void;
    fn OSSL_PROVIDER_get0_dispatch(prov: *const c_void) -> *const OSSL_DISPATCH;
    fn OSSL_PROVIDER_get0_provider_ctx(prov: *const c_void) -> *mut c_void;
    pub fn ERR_clear_error();
}

/// One of kae's algorithm implementations (a dispatch table).
#[derive(Clone, Copy)]
pub struct Imp(pub *const OSSL_DISPATCH);

impl Imp {
    /// The function with `id`, as the raw pointer type; `None` when not implemented.
    pub fn raw(&self, id: c_int) -> Option<unsafe extern "C" fn()> {
        let mut p = self.0;
        // SAFETY: a dispatch table terminated by function_id 0 (static in kae).
        unsafe {
            while (*p).function_id != 0 {
                if (*p).function_id == id {
                    return (*p).function;
                }
                p = p.add(1);
            }
        }
        None
    }
}

/// Looks up `$id` in `$imp` and casts it to the function type OpenSSL documents for it.
#[macro_export]
macro_rules! func {
    ($imp:expr, $id:expr, $ty:ty) => {{
        let f = $imp.raw($id).expect(concat!("kae lacks ", stringify!($id)));
        // SAFETY: the core ABI fixes the type of each function id.
        #[allow(unused_unsafe)]
        let f = unsafe { core::mem::transmute::<unsafe extern "C" fn(), $ty>(f) };
        f
    }};
}

pub struct Prov {
    pub libctx: *mut c_void,
    pub provctx: *mut c_void,
    pub keymgmt_rsa: Imp,
    pub keymgmt_pss: Imp,
    pub signature: Imp,
    pub cipher: Imp,
    /// The provider's own dispatch table (get_params, query_operation, …).
    pub provider: Imp,
}
// SAFETY: raw pointers to process-lifetime OpenSSL objects; the targets are single-threaded.
unsafe impl Send for Prov {}
unsafe impl Sync for Prov {}

fn abort_on_panic() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        prev(info);
        std::process::abort();
    }));
}

/// kae's own algorithm (description starting "kae ") whose names start with `first_name`.
unsafe fn find(algs: *const OSSL_ALGORITHM, first_name: &str) -> Imp {
    let mut a = algs;
    // SAFETY: an algorithm table terminated by a NULL name.
    unsafe {
        while !(*a).algorithm_names.is_null() {
            let names = CStr::from_ptr((*a).algorithm_names).to_string_lossy();
            let descr = if (*a).algorithm_description.is_null() {
                String::new()
            } else {
                CStr::from_ptr((*a).algorithm_description)
                    .to_string_lossy()
                    .into_owned()
            };
            if names.split(':').next() == Some(first_name) && descr.starts_with("kae ") {
                return Imp((*a).implementation);
            }
            a = a.add(1);
        }
    }
    panic!("kae lists no {first_name}");
}

pub fn get() -> &'static Prov {
    static P: OnceLock<Prov> = OnceLock::new();
    P.get_or_init(|| {
        abort_on_panic();
        // Only kae's own algorithms are under test: no private default provider, no
        // re-listing; digests come from the default provider loaded next to kae.
        std::env::set_var("KAE_LOAD_DEFAULT", "no");
        std::env::set_var("KAE_LOG", "off");
        // SAFETY: plain libcrypto calls, results checked.
        unsafe {
            let libctx = OSSL_LIB_CTX_new();
            assert!(!libctx.is_null());
            assert_eq!(
                OSSL_PROVIDER_add_builtin(
                    libctx,
                    c"kae".as_ptr(),
                    kae::OSSL_provider_init as *const c_void
                ),
                1
            );
            assert!(!OSSL_PROVIDER_load(libctx, c"default".as_ptr()).is_null());
            let prov = OSSL_PROVIDER_load(libctx, c"kae".as_ptr());
            assert!(!prov.is_null(), "kae failed to load");
            let provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
            let q = Imp(OSSL_PROVIDER_get0_dispatch(prov));
            let query = func!(
                q,
                OSSL_FUNC_PROVIDER_QUERY_OPERATION,
                unsafe extern "C" fn(*mut c_void, c_int, *mut c_int) -> *const OSSL_ALGORITHM
            );
            let mut no_cache = 0;
            let km = query(provctx, OSSL_OP_KEYMGMT, &mut no_cache);
            let sig = query(provctx, OSSL_OP_SIGNATURE, &mut no_cache);
            let ciph = query(provctx, OSSL_OP_ASYM_CIPHER, &mut no_cache);
            Prov {
                libctx,
                provctx,
                keymgmt_rsa: find(km, "RSA"),
                keymgmt_pss: find(km, "RSA-PSS"),
                signature: find(sig, "RSA"),
                cipher: find(ciph, "RSA"),
                provider: q,
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// OSSL_PARAM arrays built from fuzz input
// ---------------------------------------------------------------------------------------

/// A parameter array whose every data buffer is a separate `malloc` of exactly the size
/// given (so that AddressSanitizer flags any read past `data_size`).
pub struct ParamArray {
    params: Vec<OSSL_PARAM>,
    keys: Vec<std::ffi::CString>,
    bufs: Vec<*mut u8>,
}

impl Default for ParamArray {
    fn default() -> Self {
        Self::new()
    }
}

impl ParamArray {
    pub fn new() -> Self {
        ParamArray {
            params: Vec::new(),
            keys: Vec::new(),
            bufs: Vec::new(),
        }
    }

    pub(crate) fn alloc(&mut self, bytes: &[u8]) -> *mut u8 {
        // SAFETY: malloc of the exact length (ASan gives malloc(0) a unique pointer too).
        let p = unsafe { libc::malloc(bytes.len()) } as *mut u8;
        assert!(!p.is_null() || bytes.is_empty());
        if !bytes.is_empty() {
            // SAFETY: p has bytes.len() bytes.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        }
        self.bufs.push(p);
        p
    }

    pub(crate) fn key(&mut self, key: &[u8]) -> *const c_char {
        let k = std::ffi::CString::new(key.iter().copied().filter(|&b| b != 0).collect::<Vec<_>>())
            .expect("no NUL");
        let p = k.as_ptr();
        self.keys.push(k);
        p
    }

    /// A parameter whose data is a copy of `data` (NULL data when `null`), with
    /// `data_size = data.len()`.
    pub fn push_raw(&mut self, key: &[u8], data_type: u32, data: &[u8], null: bool) {
        let k = self.key(key);
        let d = if null {
            core::ptr::null_mut()
        } else {
            self.alloc(data)
        };
        self.params.push(OSSL_PARAM {
            key: k,
            data_type,
            data: d.cast(),
            data_size: data.len(),
            return_size: usize::MAX,
        });
    }

    /// A UTF8_PTR / OCTET_PTR parameter: `data` points at a pointer to a copy of `target`
    /// (or at a NULL pointer), `data_size` is the target's length.
    pub fn push_ptr(&mut self, key: &[u8], data_type: u32, target: &[u8], null_target: bool) {
        let k = self.key(key);
        let t = if null_target {
            core::ptr::null_mut()
        } else {
            self.alloc(target)
        };
        let slot = self.alloc(&(t as usize).to_ne_bytes());
        self.params.push(OSSL_PARAM {
            key: k,
            data_type,
            data: slot.cast(),
            data_size: target.len(),
            return_size: usize::MAX,
        });
    }

    /// An unsigned integer (big-endian `be` stored native-endian, as OSSL_PARAM wants).
    pub fn push_uint_be(&mut self, key: &[u8], be: &[u8]) {
        let mut ne = be.to_vec();
        if cfg!(target_endian = "little") {
            ne.reverse();
        }
        self.push_raw(key, kae::ffi::sys::OSSL_PARAM_UNSIGNED_INTEGER, &ne, false);
    }

    pub fn push_utf8(&mut self, key: &[u8], s: &CStr) {
        // data_size excludes the NUL, which is present (a well-formed UTF8_STRING).
        let bytes = s.to_bytes_with_nul();
        let k = self.key(key);
        let d = self.alloc(bytes);
        self.params.push(OSSL_PARAM {
            key: k,
            data_type: kae::ffi::sys::OSSL_PARAM_UTF8_STRING,
            data: d.cast(),
            data_size: bytes.len() - 1,
            return_size: usize::MAX,
        });
    }

    pub fn len(&self) -> usize {
        self.params.len()
    }
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The terminated array (valid until `self` is dropped or pushed to).
    pub fn finish(&mut self) -> *mut OSSL_PARAM {
        if self.params.last().is_none_or(|p| !p.key.is_null()) {
            self.params.push(kae::ffi::params::END);
        }
        self.params.as_mut_ptr()
    }
}

impl Drop for ParamArray {
    fn drop(&mut self) {
        for &b in &self.bufs {
            // SAFETY: each came from malloc above.
            unsafe { libc::free(b.cast()) };
        }
    }
}

/// Keys of a descriptor table (gettable/settable list), in order.
pub fn table_keys(t: *const OSSL_PARAM) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    if t.is_null() {
        return out;
    }
    let mut p = t;
    // SAFETY: a key-NULL-terminated descriptor table.
    unsafe {
        while !(*p).key.is_null() {
            out.push((CStr::from_ptr((*p).key).to_bytes().to_vec(), (*p).data_type));
            p = p.add(1);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Fixed keys (generated once with `openssl genpkey`; fixed so that crash inputs replay)
// ---------------------------------------------------------------------------------------

pub const KEY_PEMS: [&str; 3] = [
    include_str!("../keys/rsa1024.pem"),
    include_str!("../keys/rsa1032.pem"),
    include_str!("../keys/rsa2048.pem"),
];

/// Big-endian components of a fixed key: n, e, d, p, q, dp, dq, qinv.
pub struct Components {
    pub n: Vec<u8>,
    pub e: Vec<u8>,
    pub d: Vec<u8>,
    pub p: Vec<u8>,
    pub q: Vec<u8>,
    pub dp: Vec<u8>,
    pub dq: Vec<u8>,
    pub qinv: Vec<u8>,
}

pub fn components(which: usize) -> &'static Components {
    static C: OnceLock<Vec<Components>> = OnceLock::new();
    &C.get_or_init(|| {
        KEY_PEMS
            .iter()
            .map(|pem| {
                let r = openssl::rsa::Rsa::private_key_from_pem(pem.as_bytes()).expect("pem");
                Components {
                    n: r.n().to_vec(),
                    e: r.e().to_vec(),
                    d: r.d().to_vec(),
                    p: r.p().unwrap().to_vec(),
                    q: r.q().unwrap().to_vec(),
                    dp: r.dmp1().unwrap().to_vec(),
                    dq: r.dmq1().unwrap().to_vec(),
                    qinv: r.iqmp().unwrap().to_vec(),
                }
            })
            .collect()
    })[which % KEY_PEMS.len()]
}

impl Components {
    /// The import array for the whole key pair.
    pub fn params(&self) -> ParamArray {
        let mut a = ParamArray::new();
        for (k, v) in [
            (&b"n"[..], &self.n),
            (b"e", &self.e),
            (b"d", &self.d),
            (b"rsa-factor1", &self.p),
            (b"rsa-factor2", &self.q),
            (b"rsa-exponent1", &self.dp),
            (b"rsa-exponent2", &self.dq),
            (b"rsa-coefficient1", &self.qinv),
        ] {
            a.push_uint_be(k, v);
        }
        a
    }
}

pub type KmNew = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
pub type KmFree = unsafe extern "C" fn(*mut c_void);
pub type KmImport = unsafe extern "C" fn(*mut c_void, c_int, *const OSSL_PARAM) -> c_int;

/// A key object of kae's key management `imp`, freed on drop.
pub struct Key {
    pub ptr: *mut c_void,
    free: KmFree,
}

impl Key {
    /// New key object with `params` imported for `selection`; `None` when import fails.
    pub fn import(imp: Imp, selection: c_int, params: &mut ParamArray) -> Option<Key> {
        let p = get();
        let new = func!(imp, kae::ffi::sys::OSSL_FUNC_KEYMGMT_NEW, KmNew);
        let free = func!(imp, kae::ffi::sys::OSSL_FUNC_KEYMGMT_FREE, KmFree);
        let import = func!(imp, kae::ffi::sys::OSSL_FUNC_KEYMGMT_IMPORT, KmImport);
        // SAFETY: kae's functions with its provctx and a well-formed parameter array.
        unsafe {
            let k = new(p.provctx);
            assert!(!k.is_null());
            let key = Key { ptr: k, free };
            if import(k, selection, params.finish()) == 1 {
                Some(key)
            } else {
                ERR_clear_error();
                None
            }
        }
    }

    /// One of the fixed keys, imported whole.
    pub fn fixed(imp: Imp, which: usize) -> Key {
        let mut a = components(which).params();
        Key::import(imp, kae::ffi::sys::OSSL_KEYMGMT_SELECT_KEYPAIR, &mut a)
            .expect("importing a fixed key")
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // SAFETY: our key object.
        unsafe { (self.free)(self.ptr) }
    }
}

/// Fixed keys imported once per process (index: key, RSA then RSA-PSS key management).
pub fn fixed_key(pss: bool, which: usize) -> *mut c_void {
    struct Keys(Vec<Key>);
    // SAFETY: key objects are only used from the fuzzing thread.
    unsafe impl Send for Keys {}
    unsafe impl Sync for Keys {}
    static K: OnceLock<Keys> = OnceLock::new();
    let keys = K.get_or_init(|| {
        let p = get();
        let mut v = Vec::new();
        for imp in [p.keymgmt_rsa, p.keymgmt_pss] {
            for i in 0..KEY_PEMS.len() {
                v.push(Key::fixed(imp, i));
            }
        }
        Keys(v)
    });
    keys.0[usize::from(pss) * KEY_PEMS.len() + which % KEY_PEMS.len()].ptr
}

/// `KAE_FUZZ_KNOWN=skip`: leave out the input classes of already-filed findings.
pub fn skip_known() -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| std::env::var_os("KAE_FUZZ_KNOWN").is_some_and(|v| v == "skip"))
}

/// Words that mean something to kae's parameter parsers (so the fuzzer reaches the code
/// behind a successful parse as well as the failures).
pub const WORDS: &[&[u8]] = &[
    b"pkcs1",
    b"oaep",
    b"pss",
    b"x931",
    b"none",
    b"PKCS1",
    b"SHA256",
    b"SHA1",
    b"SHA2-512",
    b"SHA512-224",
    b"SHA3-256",
    b"MD5-SHA1",
    b"MD5",
    b"SM3",
    b"RIPEMD160",
    b"SHAKE256",
    b"digest",
    b"max",
    b"auto",
    b"auto-digestmax",
    b"-1",
    b"-2",
    b"-3",
    b"-4",
    b"-5",
    b"20",
    b"0",
    b"1",
    b"32",
    b"99999999999",
    b"MGF1",
    b"mgf1",
    b"provider=default",
    b"provider=kae",
    b"yes",
    b"no",
    b"",
    b"RSA",
    b"RSA-PSS",
    b"\xff\xfe",
    b" max ",
];

/// Builds a parameter array from fuzz input. Keys mostly come from `table` (with their
/// declared type or any other, including invalid ones); sizes range from 0 to 1 KiB;
/// data may be NULL; UTF8 strings may lack their NUL (the buffer then ends right after
/// `data_size` bytes); PTR parameters may point at NULL.
pub fn fuzz_params(r: &mut crate::Rd, table: &[(Vec<u8>, u32)]) -> ParamArray {
    use kae::ffi::sys::*;
    let mut a = ParamArray::new();
    let n = r.u8() % 7;
    for _ in 0..n {
        let kb = r.u8();
        let (key, declared) = if kb < 240 && !table.is_empty() {
            table[kb as usize % table.len()].clone()
        } else {
            (r.bytes().to_vec(), OSSL_PARAM_UTF8_STRING)
        };
        let tb = r.u8();
        let ty = if tb & 0x80 == 0 {
            declared
        } else {
            u32::from(tb % 8)
        };
        let flags = r.u8();
        // KAE_FUZZ_KNOWN=skip: NULL data only for string types. libcrypto 3.0's integer
        // getters dereference it (for INTEGER, UNSIGNED_INTEGER and REAL data) unchecked.
        let null = flags & 0x0F == 0x0F
            && !(skip_known()
                && !matches!(
                    ty,
                    OSSL_PARAM_UTF8_STRING
                        | OSSL_PARAM_OCTET_STRING
                        | OSSL_PARAM_UTF8_PTR
                        | OSSL_PARAM_OCTET_PTR
                ));
        let body: Vec<u8> = if flags & 0x10 != 0 {
            r.pick(WORDS).to_vec()
        } else {
            match ty {
                OSSL_PARAM_INTEGER | OSSL_PARAM_UNSIGNED_INTEGER => {
                    let size = match r.u8() % 8 {
                        0 => 0,
                        1 => 1,
                        2 => 2,
                        3 | 4 => 4,
                        5 => 8,
                        6 => 16,
                        _ => r.u16() as usize % 1024,
                    };
                    let mut v = r.take(size).to_vec();
                    v.resize(size, if flags & 0x20 != 0 { 0xFF } else { 0 });
                    v
                }
                _ => r.bytes().to_vec(),
            }
        };
        // KAE_FUZZ_KNOWN=skip: no UTF8 strings without a NUL (issue 8 item 6, get_utf8
        // reading past data_size), so that a run can look for anything else.
        let with_nul = flags & 0x40 == 0 || skip_known();
        match ty {
            OSSL_PARAM_UTF8_STRING if with_nul && !null => {
                let mut s = body.clone();
                s.retain(|&b| b != 0);
                let c = std::ffi::CString::new(s).expect("no NUL");
                a.push_utf8(&key, &c);
            }
            OSSL_PARAM_UTF8_PTR | OSSL_PARAM_OCTET_PTR => {
                let mut t = body.clone();
                if ty == OSSL_PARAM_UTF8_PTR && with_nul {
                    t.retain(|&b| b != 0);
                    t.push(0);
                    // data_size excludes the NUL, which follows in the buffer.
                    let k = a.key(&key);
                    let tp = a.alloc(&t);
                    let slot = a.alloc(&(tp as usize).to_ne_bytes());
                    a.params.push(OSSL_PARAM {
                        key: k,
                        data_type: ty,
                        data: slot.cast(),
                        data_size: t.len() - 1,
                        return_size: usize::MAX,
                    });
                } else if ty == OSSL_PARAM_UTF8_PTR && t.is_empty() && !null {
                    // A UTF8_PTR with data_size 0 means "NUL-terminated" (the convention
                    // every reader, OpenSSL's own included, relies on): an unterminated empty
                    // target would break the caller's side of that contract, not kae's.
                    let k = a.key(&key);
                    let tp = a.alloc(&[0u8]);
                    let slot = a.alloc(&(tp as usize).to_ne_bytes());
                    a.params.push(OSSL_PARAM {
                        key: k,
                        data_type: ty,
                        data: slot.cast(),
                        data_size: 0,
                        return_size: usize::MAX,
                    });
                } else {
                    a.push_ptr(&key, ty, &t, null);
                }
            }
            // Integers with NULL data get data_size 0 (NULL with a nonzero size is the
            // caller's bug). libcrypto 3.0's integer getters still read data[-1] then
            // (copy_integer), so kae must refuse such a parameter before calling them;
            // KAE_FUZZ_KNOWN=skip leaves this class out.
            OSSL_PARAM_INTEGER | OSSL_PARAM_UNSIGNED_INTEGER if null => {
                if skip_known() {
                    a.push_raw(&key, ty, &body, false)
                } else {
                    a.push_raw(&key, ty, &[], true)
                }
            }
            // Everything else, including UTF8_STRING without a NUL: exactly data_size
            // bytes, nothing after them.
            _ => a.push_raw(&key, ty, &body, null),
        }
    }
    a
}

/// A writable request array (for get_params): keys from `table` or the input, any type,
/// buffers of 0 to 300 bytes (at least a pointer for PTR types), sometimes NULL data.
pub fn fuzz_request(r: &mut crate::Rd, table: &[(Vec<u8>, u32)]) -> ParamArray {
    use kae::ffi::sys::*;
    let mut a = ParamArray::new();
    let n = r.u8() % 7;
    for _ in 0..n {
        let kb = r.u8();
        let (key, declared) = if kb < 240 && !table.is_empty() {
            table[kb as usize % table.len()].clone()
        } else {
            (r.bytes().to_vec(), OSSL_PARAM_UTF8_STRING)
        };
        let tb = r.u8();
        let ty = if tb & 0x80 == 0 {
            declared
        } else {
            u32::from(tb % 8)
        };
        let size = match r.u8() % 6 {
            0 => 0,
            1 => 4,
            2 => 8,
            3 => 1,
            _ => r.u16() as usize % 300,
        };
        let null = r.u8() == 0xFF;
        // NULL data is a size query. libcrypto 3.0's setters (OSSL_PARAM_set_uint64 & co.)
        // still write through it when data_size is nonzero; KAE_FUZZ_KNOWN=skip sends
        // size queries with data_size 0 only.
        let size = if null && skip_known() { 0 } else { size };
        if ty == OSSL_PARAM_UTF8_PTR || ty == OSSL_PARAM_OCTET_PTR {
            let k = a.key(&key);
            let d = if null {
                core::ptr::null_mut()
            } else {
                a.alloc(&vec![0u8; size.max(core::mem::size_of::<usize>())])
            };
            a.params.push(OSSL_PARAM {
                key: k,
                data_type: ty,
                data: d.cast(),
                data_size: size,
                return_size: usize::MAX,
            });
        } else {
            a.push_raw(&key, ty, &vec![0u8; size], null);
        }
    }
    a
}

/// Checks what a get_params call wrote: sizes within the buffers, pointers readable.
pub fn check_reply(a: &mut ParamArray) {
    use kae::ffi::sys::*;
    for p in &a.params {
        if p.key.is_null() || p.return_size == usize::MAX || p.data.is_null() {
            continue;
        }
        match p.data_type {
            OSSL_PARAM_UTF8_PTR => {
                // SAFETY: the provider wrote a pointer into our slot.
                let s = unsafe { *(p.data as *const *const c_char) };
                if !s.is_null() {
                    // SAFETY: a UTF8_PTR reply must be a readable NUL-terminated string.
                    let len = unsafe { CStr::from_ptr(s) }.to_bytes().len();
                    assert_eq!(len, p.return_size, "UTF8_PTR return_size");
                }
            }
            OSSL_PARAM_OCTET_PTR => {
                // SAFETY: as above.
                let s = unsafe { *(p.data as *const *const u8) };
                if !s.is_null() && p.return_size > 0 {
                    // SAFETY: the reply claims return_size readable bytes.
                    let v = unsafe { core::slice::from_raw_parts(s, p.return_size) };
                    std::hint::black_box(v.iter().fold(0u8, |x, &b| x ^ b));
                }
            }
            _ => {}
        }
    }
}
