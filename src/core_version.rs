//! The running OpenSSL core's version and what follows from it.
//!
//! kae is built against one set of headers (3.0's for every 3.x core, 4.0's for 4.x) but its
//! observable behaviour must match the default provider of the core it runs in. So
//! version-dependent choices are made from the core's own `openssl-version` parameter, read
//! at provider init, never from compile-time constants.

use core::fmt;

/// `major.minor.patch` of the running core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CoreVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl CoreVersion {
    /// Parses the core's `openssl-version` string ("3.5.5", "4.0.0-beta1", "3.0.19").
    pub fn parse(s: &str) -> Option<CoreVersion> {
        let mut it = s.trim().split('.');
        let num = |p: Option<&str>| -> Option<u32> {
            let p = p?;
            let digits: &str = &p[..p.bytes().take_while(u8::is_ascii_digit).count()];
            digits.parse().ok()
        };
        let major = num(it.next())?;
        let minor = num(it.next())?;
        let patch = num(it.next()).unwrap_or(0);
        Some(CoreVersion {
            major,
            minor,
            patch,
        })
    }

    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// PKCS#1 v1.5 decryption returns a synthetic message instead of an error on bad
    /// padding, and the `implicit-rejection` parameter exists (OpenSSL 3.2).
    pub fn implicit_rejection(self) -> bool {
        self.at_least(3, 2)
    }

    /// PSS signing defaults to salt length `auto-digestmax`, and that name is known
    /// (OpenSSL 3.1). Before, the default is `auto` (as long as fits) and the name is read
    /// as a number (0).
    pub fn pss_auto_digestmax(self) -> bool {
        self.at_least(3, 1)
    }

    /// The composite signature algorithms (`RSA-SHA256`, …) and the one-shot message API
    /// (`EVP_PKEY_sign_message_init`) (OpenSSL 3.4).
    pub fn message_signatures(self) -> bool {
        self.at_least(3, 4)
    }
}

impl fmt::Display for CoreVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The major version of the libcrypto this module resolved its symbols against at run time
/// (not the headers it was compiled with).
pub fn linked_major() -> u32 {
    crate::ffi::libcrypto_major()
}

/// Whether kae may run inside a core of `core` version: the libcrypto it is linked to must
/// be of the same major version, or the process would mix two libcrypto ABIs (objects of
/// one handed to the other).
pub fn compatible(core: CoreVersion, linked_major: u32) -> Result<(), String> {
    if core.major == linked_major {
        return Ok(());
    }
    Err(format!(
        "this kae.so is linked to OpenSSL {linked_major}.x's libcrypto but runs inside an OpenSSL {core} core; \
         use the kae build for OpenSSL {}.x (scripts/build.sh --openssl DIR)",
        core.major
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_version_strings() {
        let v = |s| CoreVersion::parse(s).unwrap();
        assert_eq!(
            v("3.0.19"),
            CoreVersion {
                major: 3,
                minor: 0,
                patch: 19
            }
        );
        assert_eq!(
            v("3.5.5"),
            CoreVersion {
                major: 3,
                minor: 5,
                patch: 5
            }
        );
        assert_eq!(
            v("4.0.0-beta1"),
            CoreVersion {
                major: 4,
                minor: 0,
                patch: 0
            }
        );
        assert_eq!(
            v("3.6"),
            CoreVersion {
                major: 3,
                minor: 6,
                patch: 0
            }
        );
        assert!(CoreVersion::parse("").is_none());
        assert!(CoreVersion::parse("x.y").is_none());
        assert!(CoreVersion::parse("3").is_none());
    }

    #[test]
    fn features_follow_the_core() {
        let v = |s| CoreVersion::parse(s).unwrap();
        assert!(!v("3.0.19").implicit_rejection());
        assert!(!v("3.1.4").implicit_rejection());
        assert!(v("3.2.0").implicit_rejection());
        assert!(!v("3.0.19").pss_auto_digestmax());
        assert!(v("3.1.0").pss_auto_digestmax());
        assert!(!v("3.3.2").message_signatures());
        assert!(v("3.4.0").message_signatures());
        assert!(v("4.0.3").message_signatures() && v("4.0.3").implicit_rejection());
    }

    #[test]
    fn refuses_a_core_of_another_major_version() {
        let v = |s| CoreVersion::parse(s).unwrap();
        assert!(compatible(v("3.5.5"), 3).is_ok());
        assert!(compatible(v("3.0.19"), 3).is_ok());
        let e = compatible(v("4.0.3"), 3).unwrap_err();
        assert!(e.contains("OpenSSL 4.0.3 core") && e.contains("3.x"), "{e}");
        assert!(compatible(v("3.5.5"), 4).is_err());
    }
}
