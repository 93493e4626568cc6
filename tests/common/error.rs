//! The OpenSSL error queue as [`SslError`], and the `cvt` helpers that turn failing calls into it.

use std::ffi::{c_char, c_int, c_ulong, CStr};
use std::fmt;
use std::ptr;

use super::ffi::{
    ERR_clear_error, ERR_error_string_n, ERR_get_error, ERR_get_error_all, ERR_lib_error_string,
    ERR_peek_error, ERR_reason_error_string, ERR_TXT_STRING,
};
use super::provider_load::Lib;
use super::util::cstr_opt;

/// One entry of the OpenSSL error queue.
#[derive(Clone, Debug)]
pub struct ErrEntry {
    pub code: u64,
    pub lib: i32,
    pub reason: i32,
    pub lib_str: Option<String>,
    pub reason_str: Option<String>,
    pub func: Option<String>,
    pub data: Option<String>,
    /// `ERR_error_string_n` rendering.
    pub text: String,
}

/// A failed OpenSSL call plus everything that was on the error queue afterwards.
#[derive(Clone, Debug)]
pub struct SslError {
    pub context: String,
    pub entries: Vec<ErrEntry>,
    /// The failure happened while setting the operation up (context creation, init, parameters),
    /// not in the operation itself.
    pub setup: bool,
}

impl SslError {
    /// True if some queued error has a non-empty reason string registered for it.
    pub fn has_reason(&self) -> bool {
        self.first_reason().is_some()
    }
    pub fn first_reason(&self) -> Option<&str> {
        self.entries
            .iter()
            .filter_map(|e| e.reason_str.as_deref())
            .find(|s| !s.trim().is_empty())
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The reason text of the first queued error raised by the provider of `lib`. OpenSSL
    /// registers an error library for each provider it loads, named after the provider (the
    /// module path here), and keeps the provider's own reason strings under it; an error that
    /// libcrypto or another provider raised does not count.
    pub fn reason_from(&self, lib: &Lib) -> Option<&str> {
        self.entries
            .iter()
            .filter(|e| e.lib_str.as_deref() == Some(lib.prov_name.as_str()))
            .filter_map(|e| e.reason_str.as_deref())
            .find(|s| !s.trim().is_empty())
    }
}

impl fmt::Display for SslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.context)?;
        if self.entries.is_empty() {
            write!(f, " (error queue empty)")?;
        }
        for e in &self.entries {
            write!(f, "\n    {}", e.text)?;
            if let Some(d) = &e.data {
                if !d.is_empty() {
                    write!(f, " [{d}]")?;
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for SslError {}

pub type Res<T> = Result<T, SslError>;

fn err_lib(e: c_ulong) -> i32 {
    if e & 0x8000_0000 != 0 {
        2 // ERR_LIB_SYS
    } else {
        ((e >> 23) & 0xff) as i32
    }
}

fn err_reason(e: c_ulong) -> i32 {
    if e & 0x8000_0000 != 0 {
        (e & 0x7fff_ffff) as i32
    } else {
        (e & 0x7f_ffff) as i32
    }
}

/// Drain the calling thread's error queue into an [`SslError`].
pub fn take_errors(context: &str) -> SslError {
    let mut entries = Vec::new();
    loop {
        let mut func: *const c_char = ptr::null();
        let mut data: *const c_char = ptr::null();
        let mut flags: c_int = 0;
        let e = unsafe {
            ERR_get_error_all(
                ptr::null_mut(),
                ptr::null_mut(),
                &mut func,
                &mut data,
                &mut flags,
            )
        };
        if e == 0 {
            break;
        }
        let mut buf = [0 as c_char; 512];
        unsafe { ERR_error_string_n(e, buf.as_mut_ptr(), buf.len()) };
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        entries.push(ErrEntry {
            code: e as u64,
            lib: err_lib(e),
            reason: err_reason(e),
            lib_str: cstr_opt(unsafe { ERR_lib_error_string(e) }),
            reason_str: cstr_opt(unsafe { ERR_reason_error_string(e) }),
            func: cstr_opt(func),
            data: if flags & ERR_TXT_STRING != 0 {
                cstr_opt(data)
            } else {
                None
            },
            text,
        });
    }
    SslError {
        context: context.to_owned(),
        entries,
        setup: false,
    }
}

/// Pop the oldest queued error and render it (`ERR_get_error` + `ERR_error_string_n`).
pub fn last_error_string() -> Option<String> {
    let e = unsafe { ERR_get_error() };
    if e == 0 {
        return None;
    }
    let mut buf = [0 as c_char; 512];
    unsafe { ERR_error_string_n(e, buf.as_mut_ptr(), buf.len()) };
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `(lib, reason)` of the oldest queued error without removing it (`ERR_peek_error`).
pub fn peek_error() -> Option<(i32, i32)> {
    let e = unsafe { ERR_peek_error() };
    (e != 0).then(|| (err_lib(e), err_reason(e)))
}

pub fn clear_errors() {
    unsafe { ERR_clear_error() }
}

/// `r > 0` → `Ok(r)`, otherwise the drained error queue.
pub fn cvt(r: c_int, context: &str) -> Res<c_int> {
    if r > 0 {
        Ok(r)
    } else {
        let mut e = take_errors(context);
        e.context = format!("{context} (returned {r})");
        Err(e)
    }
}

pub fn cvt_p<T>(p: *mut T, context: &str) -> Res<*mut T> {
    if p.is_null() {
        Err(take_errors(context))
    } else {
        Ok(p)
    }
}
