//! The running libcrypto core and the behaviour that depends on it.

/// The running libcrypto's `(major, minor)` (the core these tests run in: the system's, or
/// another 3.x core given through `LD_LIBRARY_PATH`, as scripts/compat.sh does).
pub fn core_version() -> (u32, u32) {
    // SAFETY: a plain getter.
    let n = unsafe { openssl_sys::OpenSSL_version_num() } as u64;
    (((n >> 28) & 0xf) as u32, ((n >> 20) & 0xff) as u32)
}

/// PKCS#1 v1.5 decryption with implicit rejection (on by default) exists in the running core
/// (OpenSSL 3.2+); kae follows the core.
pub fn core_has_implicit_rejection() -> bool {
    core_version() >= (3, 2)
}

/// The PSS salt length "auto-digestmax" exists and is the signing default (OpenSSL 3.1+).
pub fn core_has_auto_digestmax() -> bool {
    core_version() >= (3, 1)
}

/// "core 3.5 (implicit rejection)" / "core 3.0 (no implicit rejection)", for the line a
/// PKCS#1 v1.5 decryption test prints to say which behaviour it checked.
pub fn implicit_rejection_mode() -> String {
    let (major, minor) = core_version();
    if core_has_implicit_rejection() {
        format!("core {major}.{minor} (implicit rejection)")
    } else {
        format!("core {major}.{minor} (no implicit rejection)")
    }
}
