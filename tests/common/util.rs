//! Small byte and string helpers shared by the tests.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Mutex, OnceLock};

use super::ffi::RAND_bytes;

/// `&str` → NUL-terminated string that lives for the rest of the process (parameter keys must
/// outlive the `OSSL_PARAM` arrays that point at them; the set of keys is small).
pub fn intern(s: &str) -> &'static CStr {
    static TABLE: OnceLock<Mutex<HashMap<String, &'static CStr>>> = OnceLock::new();
    let mut t = TABLE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap();
    if let Some(c) = t.get(s) {
        return c;
    }
    let c: &'static CStr = Box::leak(CString::new(s).expect("NUL in string").into_boxed_c_str());
    t.insert(s.to_owned(), c);
    c
}

pub(super) fn cstr_opt(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Cryptographically random bytes from libcrypto.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    if n > 0 {
        assert_eq!(
            unsafe { RAND_bytes(v.as_mut_ptr(), n as c_int) },
            1,
            "RAND_bytes failed"
        );
    }
    v
}

/// Deterministic test data (splitmix64), so failures are reproducible.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Strip leading zero bytes (big-endian integers).
pub fn strip_zeros(b: &[u8]) -> &[u8] {
    let i = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[i..]
}

/// Big-endian `a < b` for unsigned integers of any encoding length.
pub fn be_less(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (strip_zeros(a), strip_zeros(b));
    if a.len() != b.len() {
        return a.len() < b.len();
    }
    a < b
}
