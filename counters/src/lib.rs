//! The counter page kae publishes for each process, in one place for the provider (which
//! writes it) and for `kae-stat` / `kae-press` (which read it).
//!
//! * [`layout`]: the page itself (`repr(C)`, little endian), its slots and their names, and
//!   parsing a page from its bytes.
//! * [`files`]: where pages live (`<root>/<euid>/kae-stats.<pid>`) and the checks every
//!   directory and page must pass, for readers and the writer alike.
//! * [`scan`](mod@scan): the pages of live processes under a root.
//! * [`writer`]: the provider's side: creating the root and a page with
//!   `O_EXCL|O_NOFOLLOW`, mapping it for the life of the process, the current-page slot.
//!
//! When and where the provider publishes, and moving the page when its effective uid
//! changes, are the provider's (`kae::stats`); the system calls are all here.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod files;
pub mod layout;
pub mod scan;
pub mod writer;

pub use files::FILE_PREFIX;
pub use layout::{idx, parse_page, total, Counters, Page, Snapshot, MAGIC, MOVED, NAMES, VERSION};
pub use scan::{scan, ProcPage, Scan};

/// Environment variable naming the root directory of the pages.
pub const ROOT_ENV: &str = "KAE_STATS_DIR";
/// Root directory of the pages when [`ROOT_ENV`] is not set.
pub const DEFAULT_ROOT: &str = "/dev/shm/kae";

/// The root directory: `value` (the provider passes `$KAE_STATS_DIR` as its secure-mode
/// environment reader sees it; tools pass the plain environment value) or [`DEFAULT_ROOT`].
pub fn root_dir(value: Option<String>) -> std::path::PathBuf {
    value.map(Into::into).unwrap_or_else(|| DEFAULT_ROOT.into())
}
