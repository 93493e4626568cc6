//! The few libc calls of the logger: syslog and one-`write(2)` lines on stderr.

use core::ffi::c_int;

/// Opens the connection to syslog as `kae`, with the pid, facility daemon (also done
/// implicitly by the first [`syslog`]; opening it here fixes the ident and options).
pub fn open_syslog() {
    // SAFETY: a static ident string (openlog keeps the pointer) and plain flags.
    unsafe { libc::openlog(c"kae".as_ptr(), libc::LOG_PID, libc::LOG_DAEMON) };
}

/// Sends `message` to syslog at `priority` (`libc::LOG_ERR` and so on); a NUL in it becomes a
/// space.
pub fn syslog(priority: c_int, message: &str) {
    let Ok(msg) = std::ffi::CString::new(message.replace('\0', " ")) else {
        return;
    };
    // SAFETY: a constant format string with one C string argument, alive for the call.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr()) };
}

/// Writes `bytes` to stderr with one `write(2)` (no lock, no buffering: lines of processes
/// sharing the stream never interleave); a short or failed write is ignored.
pub fn write_stderr(bytes: &[u8]) {
    // SAFETY: a valid buffer of bytes.len() bytes.
    let _ = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}
