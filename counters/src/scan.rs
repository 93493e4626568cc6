//! The pages of live processes under a root directory, read the safe way (see [`files`]).

use crate::files;
use crate::layout::{parse_page, Snapshot, MOVED, PAGE_SIZE};
use std::ffi::CString;
use std::os::fd::AsFd;

/// A live process's published counters.
pub struct ProcPage {
    pub pid: u32,
    /// The effective uid whose directory holds the page.
    pub uid: u32,
    pub comm: String,
    pub backend: String,
    pub counters: Snapshot,
}

/// Start time (clock ticks since boot) of a live process, None if it does not exist.
pub fn start_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The uids of a live process (real, effective, saved, filesystem: `Uid:` in its status),
/// None if it does not exist.
pub fn uids_of(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .map(|u| u.parse().ok())
        .collect()
}

/// What a look at the pages found.
#[derive(Default)]
pub struct Scan {
    /// Pages of live processes, by pid.
    pub pages: Vec<ProcPage>,
    /// User directories this process may not read (uids): their processes are not shown.
    pub unreadable: Vec<u32>,
    /// Directories refused, and pages skipped, with the reason (for `kae-stat` to print).
    pub problems: Vec<String>,
}

/// The pages of live processes under `root`: every user directory this process may read
/// (all of them for root). A page is shown only from root's directory or from that of a uid
/// its process runs as (a user cannot speak for another user's process, nor hide one by a
/// page of the same pid in their own directory: the skip is reported in `problems`). Only regular files of the exact page size are read, never through
/// a symlink and never blocking (see [`files`]). Pages of dead processes (or of a pid now
/// used by another process) and pages a process moved away from are skipped, and removed
/// when `remove_stale` is set.
pub fn scan(root: &std::path::Path, remove_stale: bool) -> Scan {
    let mut out = Scan::default();
    let Ok(root_c) = CString::new(root.as_os_str().as_encoded_bytes()) else {
        return out;
    };
    let root_fd = match files::open_root_for_reading(&root_c) {
        Ok(fd) => fd,
        Err(p) if p.errno() == Some(libc::ENOENT) => return out,
        Err(p) => {
            out.problems.push(format!("{}: {p}", root.display()));
            return out;
        }
    };
    let size = PAGE_SIZE;
    for dir_name in files::list(root_fd.as_fd()) {
        let Some(uid) = files::parse_decimal(dir_name.to_bytes()) else {
            // A page of a kae from before the per-user directories, at the root itself: never
            // read; removed once its process is gone.
            let legacy_pid = dir_name
                .to_bytes()
                .strip_prefix(files::FILE_PREFIX.as_bytes())
                .and_then(files::parse_decimal);
            if let Some(pid) = legacy_pid.filter(|_| remove_stale) {
                if start_ticks_of(pid).is_none() {
                    files::unlink(root_fd.as_fd(), &dir_name);
                }
            }
            continue;
        };
        let dir = match files::open_user_dir(root_fd.as_fd(), uid, false) {
            Ok(d) => d,
            Err(p) if p.errno() == Some(libc::EACCES) => {
                out.unreadable.push(uid);
                continue;
            }
            Err(p) => {
                out.problems.push(format!("{}/{uid}: {p}", root.display()));
                continue;
            }
        };
        for name in files::list(dir.as_fd()) {
            let Some(pid) = name
                .to_bytes()
                .strip_prefix(files::FILE_PREFIX.as_bytes())
                .and_then(files::parse_decimal)
            else {
                continue;
            };
            let Some(bytes) = files::read_page(dir.as_fd(), &name, size) else {
                continue;
            };
            if bytes[..8] == MOVED {
                if remove_stale {
                    files::unlink(dir.as_fd(), &name);
                }
                continue;
            }
            let Some((page_pid, page_start, backend, counters)) = parse_page(&bytes) else {
                continue;
            };
            let alive = match start_ticks_of(pid) {
                None => false,
                // 0 = published right after fork, start time not recorded: trust the pid.
                Some(t) => page_pid == pid && (page_start == 0 || page_start == t),
            };
            if !alive {
                if remove_stale {
                    // Left behind by a process killed before it could clean up.
                    files::unlink(dir.as_fd(), &name);
                }
                continue;
            }
            // A page speaks for its pid only from the directory of a uid that process runs as
            // (any of its uids: it may have published before a setuid) or from root's (only
            // root writes there: an nginx worker published as root, then became www-data). One
            // in another user's directory (written by that user) is a forgery, not shown.
            let uids = uids_of(pid).unwrap_or_default();
            if uid != 0 && !uids.contains(&uid) {
                out.problems.push(format!(
                    "skipped {}/{uid}/{}: it names pid {pid}, which runs as uid {}",
                    root.display(),
                    name.to_string_lossy(),
                    uids.get(1).map_or("?".to_string(), |u| u.to_string())
                ));
                continue;
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .unwrap_or_default()
                .trim()
                .to_owned();
            out.pages.push(ProcPage {
                pid,
                uid,
                comm,
                backend,
                counters,
            });
        }
    }
    out.pages.sort_by_key(|p| p.pid);
    // A process seen in two directories (while it moves its page): show it once.
    out.pages.dedup_by_key(|p| p.pid);
    out.unreadable.sort_unstable();
    out
}
