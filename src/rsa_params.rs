//! The RSA parameters that more than one operation reads from an `OSSL_PARAM`, turned into
//! `rsa`'s types. Here rather than in `rsa`, which reads no `OSSL_PARAM`, or in `ffi`, which
//! knows nothing of RSA.

use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::params::Param;
use crate::ffi::sys::OSSL_PARAM_UTF8_STRING;
use crate::rsa::PadMode;

/// Reads a "pad-mode" parameter given as a name ("pss") or as OpenSSL's integer (6).
pub fn pad_mode(p: &Param<'_>) -> Result<PadMode, Failure> {
    if p.data_type() == OSSL_PARAM_UTF8_STRING {
        let s = p.get_utf8()?;
        PadMode::from_name(s)
            .ok_or_else(|| Failure::with(KaeError::InvalidPaddingMode, format!("pad-mode={s}")))
    } else {
        let v = p.get_int()?;
        PadMode::from_int(v)
            .ok_or_else(|| Failure::with(KaeError::InvalidPaddingMode, format!("pad-mode={v}")))
    }
}
