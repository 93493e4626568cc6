//! The writer's side of the counter pages, for the provider: creating (and repairing) the root
//! directory, creating a page with `O_EXCL|O_NOFOLLOW`, mapping it for the rest of the
//! process's life, and the slot that holds the process's current page. Like the primitives
//! in [`files`](crate::files), system calls only and no allocation after the root's path is
//! known: the provider also runs these in its fork child handler.

use crate::files::{errno, fstat, open_dir_at, sys, unlink, Name, Problem, FILE_PREFIX};
use crate::layout::{Counters, Page, MAGIC, MOVED, PAGE_SIZE, VERSION};
use core::ffi::CStr;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// Opens the root directory `path` for writing pages as `euid`, creating it (01777) when
/// missing. See the module documentation for what is accepted.
pub fn open_root(path: &CStr, euid: u32) -> Result<OwnedFd, Problem> {
    // SAFETY: mkdir only reads path, a NUL-terminated CStr borrowed for the call.
    let created = unsafe { libc::mkdir(path.as_ptr(), 0o1777) } == 0;
    if !created && errno() != libc::EEXIST {
        return Err(sys("mkdir"));
    }
    let fd = open_dir_at(libc::AT_FDCWD, path)?;
    let st = fstat(fd.as_fd())?;
    if st.st_uid != 0 && st.st_uid != euid {
        return Err(Problem::Owner {
            uid: st.st_uid,
            want: euid,
        });
    }
    let mode = st.st_mode & 0o7777;
    let open_to_others = mode & 0o022 != 0;
    let want = if created {
        // The umask took bits away.
        Some(0o1777)
    } else if open_to_others && mode & libc::S_ISVTX == 0 {
        if st.st_uid != euid {
            return Err(Problem::Mode { mode });
        }
        // Ours, from an earlier kae that made it world-writable without the sticky bit.
        Some(mode | libc::S_ISVTX)
    } else {
        None
    };
    if let Some(m) = want {
        // SAFETY: fchmod on the directory we just verified.
        if unsafe { libc::fchmod(fd.as_raw_fd(), m) } != 0 {
            return Err(sys("fchmod"));
        }
    }
    Ok(fd)
}

/// Creates the page `kae-stats.<pid>` of `size` bytes (zero-filled, mode 0600) in `dir`.
pub fn create_page(dir: BorrowedFd<'_>, pid: u32, size: usize) -> Result<OwnedFd, Problem> {
    let name = Name::new(FILE_PREFIX, pid);
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    for attempt in 0..2 {
        // SAFETY: openat relative to a directory fd we borrow; a NUL-terminated name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_cstr().as_ptr(), flags, 0o600) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: fd is the descriptor just created and owned by this function (OwnedFd);
            // ftruncate takes no pointers.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
                let e = sys("ftruncate");
                unlink(dir, name.as_cstr());
                return Err(e);
            }
            return Ok(fd);
        }
        if errno() != libc::EEXIST || attempt == 1 {
            break;
        }
        // Left by an earlier process with our pid (or planted): remove the entry itself
        // (never what a symlink points to) and try once more.
        unlink(dir, name.as_cstr());
    }
    Err(sys("open"))
}

/// A published page: a shared, writable mapping of a page file that stays mapped for the
/// life of the process (never unmapped; the file is unlinked at exit). Made only by
/// [`MappedPage::map`], which is what makes its methods sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappedPage(NonNull<Page>);

// SAFETY: the mapping is never unmapped; what is shared through the handle is the page's
// atomics (Counters) and the one volatile write of `mark_moved`.
unsafe impl Send for MappedPage {}
unsafe impl Sync for MappedPage {}

/// What a page says about its process, written before its magic.
pub struct Header {
    pub pid: u32,
    pub start_ticks: u64,
    pub backend: [u8; 16],
}

impl MappedPage {
    /// Maps the page file `fd` (made by [`create_page`] with [`PAGE_SIZE`] bytes, so
    /// zero-filled) and fills its header, the magic last so a reader never sees the magic
    /// before the rest. Err: the errno of `mmap`.
    pub fn map(fd: BorrowedFd<'_>, header: &Header) -> Result<MappedPage, i32> {
        // The file must be the page's size: a shorter one would fault on access.
        match fstat(fd) {
            Ok(st) if st.st_size as u64 == PAGE_SIZE as u64 => {}
            _ => return Err(libc::EINVAL),
        }
        // SAFETY: maps a file of PAGE_SIZE bytes (checked) that we opened; the mapping
        // outlives the fd and is never unmapped.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        let page = p.cast::<Page>();
        // SAFETY: the mapping is ours, page-sized, page-aligned and zero-filled (a valid
        // Page: integers, byte arrays and atomics); nothing else in this process sees it yet.
        unsafe {
            (*page).pid = header.pid;
            (*page).version = VERSION;
            (*page).start_ticks = header.start_ticks;
            (*page).backend = header.backend;
            core::sync::atomic::fence(Ordering::Release);
            (*page).magic = MAGIC;
        }
        NonNull::new(page).map(MappedPage).ok_or(libc::EINVAL)
    }

    /// The page's counters (atomics: sound to share even while another process writes the
    /// file).
    pub fn counters(self) -> &'static Counters {
        // SAFETY: mapped for the life of the process (the type's invariant); only the
        // counters field is borrowed, so no reference covers the magic `mark_moved` writes.
        unsafe { &(*self.0.as_ptr()).counters }
    }

    /// Marks the page as no longer this process's current one (readers skip it and
    /// `kae-stat` removes it).
    pub fn mark_moved(self) {
        // SAFETY: mapped for the life of the process; a volatile write of the magic field
        // through the raw pointer, which no reference covers.
        unsafe { core::ptr::addr_of_mut!((*self.0.as_ptr()).magic).write_volatile(MOVED) };
    }
}

/// The process's current page, if any: a slot that only ever holds a [`MappedPage`].
pub struct PageSlot(AtomicPtr<Page>);

impl PageSlot {
    pub const fn new() -> PageSlot {
        PageSlot(AtomicPtr::new(core::ptr::null_mut()))
    }

    pub fn load(&self, order: Ordering) -> Option<MappedPage> {
        NonNull::new(self.0.load(order)).map(MappedPage)
    }

    pub fn store(&self, page: Option<MappedPage>, order: Ordering) {
        self.0
            .store(page.map_or(core::ptr::null_mut(), |p| p.0.as_ptr()), order);
    }
}

impl Default for PageSlot {
    fn default() -> Self {
        PageSlot::new()
    }
}
