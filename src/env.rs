//! kae's environment overrides (`KAE_LOG`, `KAE_LOG_TARGET`, `KAE_STATS_DIR`, `KAE_QUEUES`,
//! `KAE_SPIN_US`, …), read so that a setuid or setgid program ignores them.
//!
//! A setuid program that loads kae through the system `openssl.cnf` runs with the privileges of
//! the file's owner but with the environment of whoever started it: honouring
//! `KAE_LOG_TARGET=file:/etc/...` or `KAE_STATS_DIR` there would let any local user create or
//! append to files with those privileges. So every `KAE_*` variable the library reads goes
//! through [`var`], which answers `None` when the kernel started the process in secure mode
//! (`AT_SECURE` in the auxiliary vector: setuid/setgid, file capabilities, or an LSM asking for
//! it). That is the rule of glibc's `secure_getenv`; the value itself is read with
//! `std::env::var`, which holds std's environment lock, so a Rust host changing its environment
//! on another thread does not race with us (libc's `getenv` would).
//!
//! The binaries (`kae-stat`, `kae-press`) are not meant to be setuid and use `std::env` freely.

/// Whether this process runs in secure mode (`getauxval(AT_SECURE) != 0`).
pub fn secure() -> bool {
    crate::ffi::secure_mode()
}

/// The value of the environment variable `name` (Unicode only), or `None` when it is unset or
/// the process runs in secure mode (setuid/setgid).
pub fn var(name: &str) -> Option<String> {
    var_in(secure(), name)
}

/// [`var`] with the secure-mode answer given (for tests).
fn var_in(secure: bool, name: &str) -> Option<String> {
    if secure {
        return None;
    }
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_mode_hides_variables_that_are_set() {
        // PATH is set in every test environment; a KAE_ name would race with other tests.
        let path = std::env::var("PATH").expect("PATH is set");
        assert_eq!(var_in(false, "PATH").as_deref(), Some(path.as_str()));
        assert_eq!(var_in(true, "PATH"), None);
        assert_eq!(var_in(false, "KAE_SURELY_NOT_SET_ANYWHERE"), None);
    }

    /// The library reads its environment through `var` only (the binaries may use std::env).
    #[test]
    fn library_sources_read_the_environment_only_through_this_module() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>, files: &mut usize) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    if p.file_name().is_some_and(|n| n != "bin") {
                        walk(&p, found, files);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("src/env.rs") {
                    *files += 1;
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.split("//").next().unwrap_or("");
                        if ["env::var", "var_os(", "getenv", "env::vars"]
                            .iter()
                            .any(|pat| code.contains(pat))
                            && !code.contains("crate::env::var(")
                        {
                            found.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                        }
                    }
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let (mut found, mut files) = (Vec::new(), 0);
        walk(&src, &mut found, &mut files);
        assert!(
            files > 20,
            "only {files} source files found under {}",
            src.display()
        );
        assert!(
            found.is_empty(),
            "environment read outside crate::env::var:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_test_process_is_not_in_secure_mode() {
        assert!(!secure());
        assert!(var("PATH").is_some());
    }
}
