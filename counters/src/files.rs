//! The files behind the counter pages, opened so that another local user can neither redirect
//! a write nor make a reader hang or run out of memory.
//!
//! Layout: a root directory (`/dev/shm/kae`, or `$KAE_STATS_DIR`) holds one directory per
//! effective uid, `<root>/<uid>`, mode 0700 and owned by that uid, which holds the pages
//! `kae-stats.<pid>`.
//!
//! * The root is created sticky and world-writable (01777, like /dev/shm itself) so every user
//!   can make a directory in it and none can remove another's. It must not be a symlink and
//!   must belong to root or to us; a root that is writable by others without the sticky bit
//!   (the layout of earlier kae versions) is given the bit when it is ours, else refused.
//! * A user directory must be a real directory (no symlink), owned by the uid it is named
//!   after, without any group or other permission bit; otherwise it is refused.
//! * Pages are created with `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the directory's fd: an
//!   entry of that name (a page left by an earlier process with our pid, or anything else) is
//!   removed and creation retried once; nothing is ever opened through a symlink.
//! * Readers open with `O_NOFOLLOW|O_NONBLOCK` and take only regular files of exactly the page
//!   size (checked with `fstat` on the open file).
//!
//! This module holds what readers and the writer share: the directory checks
//! ([`open_user_dir`], [`open_root_for_reading`]), the page names, and the reader
//! ([`read_page`], [`list`]). The writer's own steps (creating and repairing the root,
//! creating a page with `O_EXCL`, mapping it) are in [`writer`](crate::writer), built on
//! the primitives here. `open_user_dir`, `unlink`, [`Name`] and the primitives make system calls
//! only and never allocate: the provider also runs them in its fork child handler.

use core::ffi::CStr;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Name prefix of a page file.
pub const FILE_PREFIX: &str = "kae-stats.";

/// Why a directory or page was refused or could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A system call failed.
    Sys { call: &'static str, errno: i32 },
    /// Owned by `uid`; only `want` (or root, for the root directory) may own it.
    Owner { uid: u32, want: u32 },
    /// Permission bits (octal) that let other users in.
    Mode { mode: u32 },
    /// A symbolic link where a directory should be.
    Symlink,
}

impl Problem {
    pub fn errno(&self) -> Option<i32> {
        match self {
            Problem::Sys { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl core::fmt::Display for Problem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Problem::Sys { call, errno } => {
                write!(f, "{call}: {}", std::io::Error::from_raw_os_error(errno))
            }
            Problem::Owner { uid, want } => {
                write!(f, "owned by uid {uid}, not by uid {want} (refused)")
            }
            Problem::Symlink => write!(f, "a symbolic link (refused)"),
            Problem::Mode { mode } => write!(
                f,
                "mode {mode:04o} lets other users in (refused: want 0700, or 1777 for the root)"
            ),
        }
    }
}

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A [`Problem::Sys`] for `call` with the current `errno`.
pub fn sys(call: &'static str) -> Problem {
    Problem::Sys {
        call,
        errno: errno(),
    }
}

/// A short NUL-terminated name built without allocation: `prefix` then `n` in decimal.
pub struct Name {
    buf: [u8; 32],
    len: usize,
}

impl Name {
    pub fn new(prefix: &str, n: u32) -> Name {
        let mut buf = [0u8; 32];
        let p = prefix.as_bytes();
        let p = &p[..p.len().min(20)];
        buf[..p.len()].copy_from_slice(p);
        let mut digits = [0u8; 10];
        let (mut v, mut nd) = (n, 0);
        loop {
            digits[nd] = b'0' + (v % 10) as u8;
            nd += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for (i, d) in digits[..nd].iter().rev().enumerate() {
            buf[p.len() + i] = *d;
        }
        Name {
            buf,
            len: p.len() + nd,
        }
    }

    pub fn as_cstr(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or(c"")
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The decimal number `name` spells (digits only, no sign, no leading zero but "0").
pub fn parse_decimal(name: &[u8]) -> Option<u32> {
    if name.is_empty() || name.len() > 10 || (name.len() > 1 && name[0] == b'0') {
        return None;
    }
    if !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(name).ok()?.parse().ok()
}

/// `fstat` of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> Result<libc::stat, Problem> {
    // SAFETY: fstat fills a zeroed struct we own, on an fd we borrow.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(sys("fstat"));
        }
        Ok(st)
    }
}

fn owned(fd: libc::c_int, call: &'static str) -> Result<OwnedFd, Problem> {
    if fd < 0 {
        return Err(sys(call));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Opens the directory `name` relative to `at` (an fd, or AT_FDCWD) without following a
/// symlink; a symlink there is reported as such.
pub fn open_dir_at(at: libc::c_int, name: &CStr) -> Result<OwnedFd, Problem> {
    // SAFETY: openat on a NUL-terminated name relative to `at`.
    let fd = unsafe { libc::openat(at, name.as_ptr(), DIR_FLAGS) };
    if fd >= 0 {
        return owned(fd, "open");
    }
    let e = sys("open");
    if matches!(e.errno(), Some(libc::ENOTDIR) | Some(libc::ELOOP)) {
        // SAFETY: fstatat into a zeroed struct we own.
        let is_link = unsafe {
            let mut st: libc::stat = core::mem::zeroed();
            libc::fstatat(at, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFLNK
        };
        if is_link {
            return Err(Problem::Symlink);
        }
    }
    Err(e)
}

/// Opens the root directory `path` to read pages (no ownership requirement: every user
/// directory in it is checked on its own).
pub fn open_root_for_reading(path: &CStr) -> Result<OwnedFd, Problem> {
    open_dir_at(libc::AT_FDCWD, path)
}

/// Opens `<root>/<uid>`, creating it (0700) when `create` and missing. Refused unless it is a
/// directory (not a symlink) owned by `uid` with no group or other permission bits.
pub fn open_user_dir(root: BorrowedFd<'_>, uid: u32, create: bool) -> Result<OwnedFd, Problem> {
    let name = Name::new("", uid);
    let mut created = false;
    if create {
        // SAFETY: mkdirat relative to a directory fd we borrow.
        created = unsafe { libc::mkdirat(root.as_raw_fd(), name.as_cstr().as_ptr(), 0o700) } == 0;
        if !created && errno() != libc::EEXIST {
            return Err(sys("mkdir"));
        }
    }
    let fd = open_dir_at(root.as_raw_fd(), name.as_cstr())?;
    let st = fstat(fd.as_fd())?;
    if st.st_uid != uid {
        return Err(Problem::Owner {
            uid: st.st_uid,
            want: uid,
        });
    }
    let mode = st.st_mode & 0o7777;
    if created && mode != 0o700 {
        // SAFETY: fchmod on the directory we just made and verified.
        if unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) } != 0 {
            return Err(sys("fchmod"));
        }
    } else if mode & 0o077 != 0 {
        return Err(Problem::Mode { mode });
    }
    Ok(fd)
}

/// Removes `name` from `dir` (a file or symlink, never a directory). True when removed.
pub fn unlink(dir: BorrowedFd<'_>, name: &CStr) -> bool {
    // SAFETY: unlinkat relative to a directory fd we borrow.
    unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) == 0 }
}

/// The contents of `name` in `dir` when it is a regular file of exactly `size` bytes; None for
/// anything else (symlink, FIFO, device, directory, other size) or on any error. Never
/// follows a symlink and never blocks on a FIFO.
pub fn read_page(dir: BorrowedFd<'_>, name: &CStr, size: usize) -> Option<Vec<u8>> {
    // A first look without opening anything: opening some files has effects.
    // SAFETY: fstatat into a zeroed struct we own, relative to a directory fd we borrow.
    let pre = unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0)
            .then_some(st)?
    };
    let regular_of_size = |st: &libc::stat| {
        st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_size as u64 == size as u64
    };
    if !regular_of_size(&pre) {
        return None;
    }
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: openat relative to a directory fd we borrow.
    let fd = owned(
        unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) },
        "open",
    )
    .ok()?;
    // The entry may have been replaced between the look and the open: check what we opened.
    let st = fstat(fd.as_fd()).ok()?;
    if !regular_of_size(&st) {
        return None;
    }
    let mut buf = vec![0u8; size];
    let mut got = 0;
    while got < size {
        // SAFETY: pread into the unfilled tail of our buffer.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                size - got,
                got as libc::off_t,
            )
        };
        if n <= 0 {
            return None;
        }
        got += n as usize;
    }
    Some(buf)
}

/// Names of the entries of `dir` (without "." and "..").
pub fn list(dir: BorrowedFd<'_>) -> Vec<CString> {
    let mut out = Vec::new();
    // SAFETY: fdopendir takes over a duplicate of the borrowed fd, closed by closedir; readdir
    // entries are read before the next readdir call.
    unsafe {
        let dup = libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return out;
        }
        let d = libc::fdopendir(dup);
        if d.is_null() {
            libc::close(dup);
            return out;
        }
        // The duplicate shares the file offset with `dir`: start from the beginning.
        libc::rewinddir(d);
        loop {
            let e = libc::readdir(d);
            if e.is_null() {
                break;
            }
            let name = CStr::from_ptr((*e).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                out.push(name.to_owned());
            }
        }
        libc::closedir(d);
    }
    out
}
