//! The thin FFI layer over libcrypto and the core's functions, with `abi/` (the pointers the
//! core hands to the provider) the place that touches raw OpenSSL pointers.
//!
//! Everything above them works with the safe wrappers defined here: `BigNum`, `MontCtx`,
//! `Md`/`MdCtx`, parameter readers/writers, and the panic-catching `guard`.

pub mod async_job;
pub mod bn;
pub mod conf;
pub mod core;
pub mod digest;
pub mod encode;
pub mod fork;
pub mod libctx;
pub mod memcheck;
pub mod params;
pub mod posix;
pub mod provider;
pub mod rand;
pub mod sched;
pub mod stack;
pub mod sys;
pub mod table;

pub use self::core::{guard, guard_ptr, Core};

/// Whether the kernel started this process in secure mode (`AT_SECURE` in the auxiliary
/// vector: setuid/setgid, file capabilities, or an LSM asking for it).
pub fn secure_mode() -> bool {
    // SAFETY: getauxval takes an integer and only reads the auxiliary vector the kernel gave
    // the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The major version of the libcrypto this module resolved its symbols against at run time.
pub fn libcrypto_major() -> u32 {
    // SAFETY: a plain getter with no arguments, available since 3.0.
    unsafe { sys::OPENSSL_version_major() }
}

/// Borrows an input buffer passed by the core (NULL allowed only when empty).
///
/// # Safety
/// When `p` is non-NULL and `len` > 0, `p` points to `len` initialised bytes (`len` ≤
/// `isize::MAX`) that stay valid and are not written for the lifetime `'a`.
pub unsafe fn in_slice<'a>(p: *const u8, len: usize) -> Result<&'a [u8], crate::error::KaeError> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(crate::error::KaeError::NullParameter);
    }
    // SAFETY: p is non-NULL and len > 0 (checked above), so by the caller's contract p points
    // to len initialised bytes that stay valid and unwritten for 'a; u8 needs no alignment.
    Ok(unsafe { ::core::slice::from_raw_parts(p, len) })
}
