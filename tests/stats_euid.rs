//! A process that publishes its counters as root and then changes its effective uid (as an
//! nginx worker does right after the fork) moves its page to the new uid's directory at its
//! next operation, and removes it from there at exit; the page it left in root's directory is
//! marked as moved, skipped by readers and removed by kae-stat.
//!
//! Its own program without the test harness: it forks, and the child changes uid and leaves
//! through `exit` (kae's exit handler must run) while the process is single-threaded. Needs
//! root; run as another user it prints SKIPPED.

mod skip;

use kae::completion::OpKind;
use kae::stats::{self, idx, parse_page, MAGIC, MOVED};
use std::path::{Path, PathBuf};

const NOBODY: u32 = 65534;

fn page(root: &Path, uid: u32, pid: u32) -> PathBuf {
    root.join(uid.to_string()).join(format!("kae-stats.{pid}"))
}

fn op() {
    stats::record(OpKind::Private, stats::Path::Inline, true);
}

/// The child: checks what it can see, reports failures on stderr and through its exit code.
fn child(root: &Path) -> i32 {
    let pid = std::process::id();
    let fail = |code: i32, what: &str| -> i32 {
        eprintln!("stats_euid child {pid}: {what}");
        code
    };
    // Published by the fork handler, still as root.
    match std::fs::read(page(root, 0, pid)) {
        Ok(b) if parse_page(&b).is_some_and(|p| p.0 == pid) => {}
        _ => return fail(10, "no page in root's directory right after fork"),
    }
    // SAFETY: plain syscalls in a single-threaded process.
    unsafe {
        if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
            return fail(11, "setgid/setuid failed");
        }
    }
    if page(root, NOBODY, pid).exists() {
        return fail(12, "page in nobody's directory before any operation");
    }
    op();
    match std::fs::read(page(root, NOBODY, pid)) {
        Ok(b) => match parse_page(&b) {
            Some((p, _, backend, s))
                if p == pid && backend == "cpu" && s.get(idx::PRIVATE_INLINE) == 1 => {}
            other => {
                return fail(
                    13,
                    &format!("moved page is wrong: {:?}", other.map(|o| (o.0, o.2, o.3))),
                )
            }
        },
        Err(e) => {
            return fail(
                14,
                &format!("no page in nobody's directory after an op: {e}"),
            )
        }
    }
    if stats::snapshot().get(idx::PRIVATE_INLINE) != 1 {
        return fail(15, "the counters in use are not the moved page's");
    }
    op();
    match std::fs::read(page(root, NOBODY, pid))
        .ok()
        .and_then(|b| parse_page(&b))
    {
        Some((_, _, _, s)) if s.get(idx::PRIVATE_INLINE) == 2 => 0,
        _ => fail(16, "the moved page does not count the next operation"),
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip::skipped(
            "stats_euid",
            "needs root to change uid",
            skip::UnderCi::Provided,
        );
        println!("SKIPPED");
        return;
    }
    let root = std::env::temp_dir().join(format!("kae-stats-euid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // Single-threaded here: setting the environment is sound.
    std::env::set_var("KAE_STATS_DIR", &root);
    stats::publish("cpu");
    let me = std::process::id();
    assert!(
        page(&root, 0, me).exists(),
        "the parent publishes in root's directory"
    );
    op();

    // SAFETY: fork in a single-threaded process; the child leaves through exit().
    let child_pid = unsafe { libc::fork() };
    assert!(child_pid >= 0, "fork failed");
    if child_pid == 0 {
        let code = std::panic::catch_unwind(|| child(&root)).unwrap_or(20);
        std::process::exit(code);
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(
        unsafe { libc::waitpid(child_pid, &mut status, 0) },
        child_pid
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child failed (status {status:#x}, see its message above)"
    );
    let child_pid = child_pid as u32;
    assert!(
        !page(&root, NOBODY, child_pid).exists(),
        "the child removed its page from nobody's directory at exit"
    );
    let left = std::fs::read(page(&root, 0, child_pid)).expect("the page left in root's directory");
    assert_eq!(left[..8], MOVED, "and marked it as moved");
    let s = stats::scan(&root, true);
    let pids: Vec<u32> = s.pages.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![me], "only the parent is shown");
    assert!(
        !page(&root, 0, child_pid).exists(),
        "kae-stat's scan removes the moved page"
    );
    let mine = std::fs::read(page(&root, 0, me)).unwrap();
    assert_eq!(mine[..8], MAGIC);
    std::fs::remove_dir_all(&root).unwrap();
    println!("stats_euid: ok");
}
