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
//! All of it is in the kae-counters crate, whose system calls are in one place for the
//! writer and the readers: the checks and the reader shared with `kae-stat`
//! (`kae_counters::files`) and the writer's steps ([`open_root`], [`create_page`],
//! `kae_counters::writer`), re-exported below; this module holds their tests. The writer
//! side (`open_root`, `open_user_dir`, `create_page`, `unlink`) makes system calls only and
//! never allocates: it also runs in the fork child handler.

pub use kae_counters::files::{
    errno, fstat, list, open_dir_at, open_root_for_reading, open_user_dir, parse_decimal,
    read_page, sys, unlink, Name, Problem, FILE_PREFIX,
};
pub use kae_counters::writer::{create_page, open_root};

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::ffi::CString;
    use std::fs;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    const SIZE: usize = 64;
    /// Owner given to directories that must belong to "someone else" (when running as root).
    const NOBODY: u32 = 65534;

    /// A scratch directory, removed on drop.
    struct Tmp(PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "kae-files-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir(&p).unwrap();
            Tmp(p)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    fn me() -> u32 {
        kae_counters::writer::euid()
    }

    /// Makes a FIFO at `p` (with mkfifo(1): the tests make no system calls of their own).
    pub(in crate::stats) fn make_fifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(p)
            .status()
            .expect("mkfifo(1)");
        assert!(st.success(), "mkfifo {}", p.display());
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn set_mode(p: &Path, m: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    }

    fn chown(p: &Path, uid: u32) {
        std::os::unix::fs::chown(p, Some(uid), None).unwrap();
    }

    fn skipped(what: &str) {
        eprintln!("SKIPPED (needs root, CI runs as root): {what}");
    }

    /// `<tmp>/root` opened (created) as a writer, and our user directory in it.
    fn setup(t: &Tmp) -> (PathBuf, OwnedFd, OwnedFd) {
        let root_path = t.0.join("root");
        let root = open_root(&c(&root_path), me()).unwrap();
        let dir = open_user_dir(root.as_fd(), me(), true).unwrap();
        (root_path, root, dir)
    }

    #[test]
    fn new_directories_are_sticky_root_and_private_user_dir() {
        let t = Tmp::new("modes");
        let (root_path, _root, _dir) = setup(&t);
        assert_eq!(mode(&root_path), 0o1777);
        assert_eq!(mode(&root_path.join(me().to_string())), 0o700);
        let md = fs::metadata(root_path.join(me().to_string())).unwrap();
        assert_eq!(md.uid(), me());
    }

    #[test]
    fn page_creation_does_not_follow_a_planted_symlink() {
        let t = Tmp::new("symlink");
        let (root_path, _root, dir) = setup(&t);
        let victim = t.0.join("victim");
        fs::write(&victim, b"precious").unwrap();
        let page = root_path.join(me().to_string()).join("kae-stats.4242");
        symlink(&victim, &page).unwrap();
        let fd = create_page(dir.as_fd(), 4242, SIZE).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious", "target untouched");
        let md = fs::symlink_metadata(&page).unwrap();
        assert!(
            md.file_type().is_file(),
            "the symlink was replaced by a file"
        );
        assert_eq!(md.len(), SIZE as u64);
        assert_eq!(md.mode() & 0o777, 0o600);
        // A page left by an earlier process with our pid is replaced by a fresh one.
        drop(fd);
        fs::write(&page, [7u8; SIZE]).unwrap();
        let _fd = create_page(dir.as_fd(), 4242, SIZE).unwrap();
        assert_eq!(fs::read(&page).unwrap(), vec![0u8; SIZE]);
        // A directory in the way is not removed: creation fails.
        fs::create_dir(page.with_file_name("kae-stats.4343")).unwrap();
        assert!(create_page(dir.as_fd(), 4343, SIZE).is_err());
    }

    #[test]
    fn symlinked_directories_are_refused() {
        let t = Tmp::new("dirlink");
        let elsewhere = t.0.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        set_mode(&elsewhere, 0o1777);
        let link = t.0.join("rootlink");
        symlink(&elsewhere, &link).unwrap();
        assert_eq!(open_root(&c(&link), me()).unwrap_err(), Problem::Symlink);
        assert!(open_root_for_reading(&c(&link)).is_err());

        // The user directory planted as a symlink to a directory of ours.
        let (root_path, root, _dir) = setup(&t);
        let target = t.0.join("target");
        fs::create_dir(&target).unwrap();
        set_mode(&target, 0o700);
        symlink(&target, root_path.join("4242")).unwrap();
        assert_eq!(
            open_user_dir(root.as_fd(), 4242, true).unwrap_err(),
            Problem::Symlink
        );
        // And a regular file where a directory should be.
        fs::write(root_path.join("4343"), b"x").unwrap();
        assert!(open_user_dir(root.as_fd(), 4343, true).is_err());
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_owned_by_another_user_is_refused() {
        let t = Tmp::new("owner");
        let (root_path, root, _dir) = setup(&t);
        // Named for a uid that does not own it.
        let other = me().wrapping_add(12345);
        let d = root_path.join(other.to_string());
        fs::create_dir(&d).unwrap();
        set_mode(&d, 0o700);
        assert_eq!(
            open_user_dir(root.as_fd(), other, true).unwrap_err(),
            Problem::Owner {
                uid: me(),
                want: other
            }
        );
        // A root directory owned neither by root nor by the writer.
        if me() == 0 {
            let t2 = Tmp::new("owner-root");
            let r = t2.0.join("root");
            fs::create_dir(&r).unwrap();
            set_mode(&r, 0o1777);
            chown(&r, NOBODY);
            assert_eq!(
                open_root(&c(&r), 0).unwrap_err(),
                Problem::Owner {
                    uid: NOBODY,
                    want: 0
                }
            );
            // Our own directory name, handed to someone else.
            let mine = root_path.join("0");
            chown(&mine, NOBODY);
            assert_eq!(
                open_user_dir(root.as_fd(), 0, true).unwrap_err(),
                Problem::Owner {
                    uid: NOBODY,
                    want: 0
                }
            );
        } else {
            assert!(matches!(
                open_root(&c(&root_path), other).unwrap_err(),
                Problem::Owner { .. }
            ));
            skipped("chown of directories to uid 65534");
        }
    }

    #[test]
    fn group_or_world_accessible_directories_are_refused() {
        let t = Tmp::new("mode");
        let (root_path, root, _dir) = setup(&t);
        let mine = root_path.join(me().to_string());
        for m in [0o770, 0o707, 0o750, 0o705, 0o701, 0o710, 0o777] {
            set_mode(&mine, m);
            assert_eq!(
                open_user_dir(root.as_fd(), me(), true).unwrap_err(),
                Problem::Mode { mode: m },
                "mode {m:o}"
            );
            assert_eq!(mode(&mine), m, "left as it was");
        }
        set_mode(&mine, 0o700);
        assert!(open_user_dir(root.as_fd(), me(), true).is_ok());

        // A world-writable root without the sticky bit: ours is repaired, another's refused.
        let r = t.0.join("oldroot");
        fs::create_dir(&r).unwrap();
        set_mode(&r, 0o777);
        assert!(open_root(&c(&r), me()).is_ok());
        assert_eq!(mode(&r), 0o1777, "the sticky bit was added");
        if me() == 0 {
            // Owned by root (an accepted owner) but not by the writer (uid 65534).
            set_mode(&r, 0o777);
            assert_eq!(
                open_root(&c(&r), NOBODY).unwrap_err(),
                Problem::Mode { mode: 0o777 }
            );
            set_mode(&r, 0o757);
            assert_eq!(
                open_root(&c(&r), NOBODY).unwrap_err(),
                Problem::Mode { mode: 0o757 }
            );
            set_mode(&r, 0o1777);
            assert!(open_root(&c(&r), NOBODY).is_ok());
            set_mode(&r, 0o755);
            assert!(open_root(&c(&r), NOBODY).is_ok());
        } else {
            skipped("a world-writable root owned by root, opened by another uid");
        }
    }

    #[test]
    fn readers_skip_fifos_device_links_and_wrong_sizes_without_blocking() {
        let t = Tmp::new("readers");
        let (root_path, _root, dir) = setup(&t);
        let d = root_path.join(me().to_string());
        make_fifo(&d.join("kae-stats.1"));
        symlink("/dev/zero", d.join("kae-stats.2")).unwrap();
        fs::write(d.join("kae-stats.3"), [1u8; SIZE - 1]).unwrap();
        fs::write(d.join("kae-stats.4"), [1u8; SIZE + 1]).unwrap();
        fs::create_dir(d.join("kae-stats.5")).unwrap();
        let good_elsewhere = t.0.join("good");
        fs::write(&good_elsewhere, [2u8; SIZE]).unwrap();
        symlink(&good_elsewhere, d.join("kae-stats.6")).unwrap();
        fs::write(d.join("kae-stats.7"), [3u8; SIZE]).unwrap();

        let names = list(dir.as_fd());
        assert_eq!(names.len(), 7, "{names:?}");
        // The directory can be listed again from the same fd.
        assert_eq!(list(dir.as_fd()).len(), 7);
        let (tx, rx) = std::sync::mpsc::channel();
        let dir_copy = dir.try_clone().unwrap();
        std::thread::spawn(move || {
            let dir = dir_copy.as_fd();
            let mut found: Vec<(String, Vec<u8>)> = names
                .iter()
                .filter_map(|n| {
                    read_page(dir, n, SIZE).map(|b| (n.to_string_lossy().into_owned(), b))
                })
                .collect();
            found.sort();
            let _ = tx.send(found);
        });
        let found = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a reader blocked (FIFO?) or ran away (/dev/zero?)");
        assert_eq!(found, vec![("kae-stats.7".to_string(), vec![3u8; SIZE])]);
        drop(dir);
    }
}
