//! RSA in safe Rust on top of the FFI wrappers: the key object, the raw private/public
//! operations (blinding, CRT, fault check), key generation and validation, and padding.

pub mod ct_limbs;
pub mod key;
pub mod key_slot;
pub mod libcrypto;
pub mod ops;
pub mod padding;
mod validate;

pub use key::{KeyType, PssRestrictions, RsaKey};

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

/// The OpenSSL name of a digest as a static C string (for OSSL_PARAM replies).
pub fn digest_cname(id: padding::DigestId) -> &'static CStr {
    static NAMES: [OnceLock<CString>; 64] = [const { OnceLock::new() }; 64];
    NAMES[id as usize % 64]
        .get_or_init(|| CString::new(id.name()).unwrap_or_default())
        .as_c_str()
}

/// Padding modes, numbered as OpenSSL's `RSA_*_PADDING` constants (the integer form of the
/// "pad-mode" parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Pkcs1 = 1,
    None = 3,
    Oaep = 4,
    X931 = 5,
    Pss = 6,
    /// PKCS#1 v1.5 decryption of a TLS premaster secret (RSA_PKCS1_WITH_TLS_PADDING).
    Pkcs1Tls = 7,
}

impl PadMode {
    pub fn from_int(v: i32) -> Option<PadMode> {
        Some(match v {
            1 => PadMode::Pkcs1,
            3 => PadMode::None,
            4 => PadMode::Oaep,
            5 => PadMode::X931,
            6 => PadMode::Pss,
            7 => PadMode::Pkcs1Tls,
            _ => return None,
        })
    }
    pub fn from_name(s: &str) -> Option<PadMode> {
        Some(match s {
            "pkcs1" => PadMode::Pkcs1,
            "none" => PadMode::None,
            "oaep" => PadMode::Oaep,
            "x931" => PadMode::X931,
            "pss" => PadMode::Pss,
            _ => return None,
        })
    }
    pub fn cname(self) -> &'static CStr {
        match self {
            PadMode::Pkcs1 => c"pkcs1",
            PadMode::None => c"none",
            PadMode::Oaep => c"oaep",
            PadMode::X931 => c"x931",
            PadMode::Pss => c"pss",
            PadMode::Pkcs1Tls => c"pkcs1",
        }
    }
}
