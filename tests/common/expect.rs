//! Assertion helpers: expected failures (raised by kae, or by libcrypto before kae is called)
//! and unwrapping with the OpenSSL error in the panic message.

use std::fmt;

use super::error::{Res, SslError};
use super::provider_load::kae;

/// Assert that `r` failed and that kae raised the failure: an error of kae's error library with
/// one of kae's reason strings is on the queue (a failure raised only by libcrypto or by another
/// provider, e.g. because the operation never reached kae, does not pass). Returns the error
/// (already printed).
#[track_caller]
pub fn expect_error<T: fmt::Debug>(r: Res<T>, what: &str) -> SslError {
    match r {
        Ok(v) => panic!("{what}: expected failure, got success: {v:?}"),
        Err(e) => {
            eprintln!("[expected failure] {what}: {e}");
            assert!(
                e.reason_from(kae()).is_some(),
                "{what}: failed as expected but kae raised no error with a reason string: {e}"
            );
            e
        }
    }
}

/// Like [`expect_error`] for a failure that libcrypto itself raises before kae is called (the
/// EVP layer's own argument checks): any error with a non-empty reason string passes. Use it
/// only where the operation is not kae's to refuse.
#[track_caller]
pub fn expect_libcrypto_error<T: fmt::Debug>(r: Res<T>, what: &str) -> SslError {
    match r {
        Ok(v) => panic!("{what}: expected failure, got success: {v:?}"),
        Err(e) => {
            eprintln!("[expected failure] {what}: {e}");
            assert!(
                e.has_reason(),
                "{what}: failed as expected but left no error with a reason string on the queue: {e}"
            );
            e
        }
    }
}

/// Like [`expect_error`] but records the problem instead of panicking, so that a test looping
/// over many cases reports all of them.
pub fn check_error<T: fmt::Debug>(r: Res<T>, what: &str) -> Option<String> {
    match r {
        Ok(v) => {
            let shown = format!("{v:?}");
            let shown = if shown.len() > 80 {
                format!("{}…", &shown[..80])
            } else {
                shown
            };
            Some(format!("{what}: expected failure, got success: {shown}"))
        }
        Err(e) => {
            eprintln!("[expected failure] {what}: {e}");
            e.reason_from(kae()).is_none().then(|| {
                format!(
                    "{what}: failed as expected but kae raised no error with a reason string: {e}"
                )
            })
        }
    }
}

/// Collects [`check_error`] problems; panics listing all of them when finished.
#[derive(Default)]
pub struct Problems(pub Vec<String>);

impl Problems {
    pub fn expect_error<T: fmt::Debug>(&mut self, r: Res<T>, what: &str) {
        if let Some(p) = check_error(r, what) {
            self.0.push(p);
        }
    }
    #[track_caller]
    pub fn finish(self) {
        assert!(
            self.0.is_empty(),
            "{} problems:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

/// Unwrap with the OpenSSL error in the panic message.
#[track_caller]
pub fn ok<T>(r: Res<T>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}
