//! Re-listing of the default provider's algorithms under kae's name (only those that can
//! never be handed a kae key object).

use crate::abi::{Table, ALG_END};
use crate::ffi::sys::*;
use crate::provctx::{ProvCtx, ProxyTable};
use core::ffi::c_int;
use std::ffi::CString;

impl ProvCtx {
    /// The default provider's algorithms for `op`, minus the ones kae implements itself,
    /// re-labelled `provider=kae` so that a `provider=kae` query finds everything it needs.
    pub(super) fn proxied(&self, op: c_int) -> *const OSSL_ALGORITHM {
        let Some(default) = self.private_default else {
            return core::ptr::null();
        };
        let Ok(mut map) = self.proxied.lock() else {
            return core::ptr::null();
        };
        if let Some(t) = map.get(&op) {
            return t.algs.0.as_ptr();
        }
        let mut algs = Vec::new();
        let mut props = Vec::new();
        for a in default.algorithms(op) {
            if !relisting_allowed(op, &a.names) {
                continue;
            }
            let Ok(c) = CString::new(relabelled(&a.properties)) else {
                continue;
            };
            algs.push(OSSL_ALGORITHM {
                property_definition: c.as_ptr(),
                ..a.entry
            });
            props.push(c);
        }
        algs.push(ALG_END);
        let t = ProxyTable {
            algs: Table(algs),
            _props: props,
        };
        let ptr = t.algs.0.as_ptr();
        map.insert(op, t);
        ptr
    }
}

/// A property definition of the default provider's with `provider=kae` in place of its
/// `provider=` clause (or in front, when it has none).
fn relabelled(definition: &str) -> String {
    let mut clauses: Vec<String> = definition
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.trim().starts_with("provider=") {
                "provider=kae".to_owned()
            } else {
                s.to_owned()
            }
        })
        .collect();
    if !clauses.iter().any(|c| c == "provider=kae") {
        clauses.insert(0, "provider=kae".to_owned());
    }
    clauses.join(",")
}

/// Operation classes whose implementations never receive a key object: re-listed whole.
const KEYLESS_OPERATIONS: [c_int; 7] = [
    OSSL_OP_DIGEST,
    OSSL_OP_CIPHER,
    OSSL_OP_MAC,
    OSSL_OP_KDF,
    OSSL_OP_RAND,    // minus the DRBGs kae fronts itself (rand.rs)
    OSSL_OP_DECODER, // makes key objects (RSA ones reach our keymgmt `load`), never takes one
    OSSL_OP_STORE,
];

/// Operation classes whose implementations receive key objects of their provider's key
/// management: only algorithms for key types kae does not manage are re-listed.
const KEYED_OPERATIONS: [c_int; 6] = [
    OSSL_OP_KEYMGMT,
    OSSL_OP_KEYEXCH,
    OSSL_OP_SIGNATURE,
    OSSL_OP_ASYM_CIPHER,
    OSSL_OP_KEM,
    OSSL_OP_ENCODER,
];

/// First names of the default provider's algorithms of keyed operations that work on key
/// types other than RSA and RSA-PSS (key types, and the signature / key exchange / KEM
/// algorithms on them). An allow-list: a new algorithm a newer core adds (an RSA composite
/// signature, say) is not re-listed until it is named here. Names come from the default
/// providers of OpenSSL 3.0 through 4.0 (3.4 added composite DSA/ECDSA signatures, 3.5 the
/// ML-DSA, SLH-DSA, ML-KEM and hybrid key types, 3.6 LMS).
const OTHER_KEY_ALGORITHMS: [&str; 67] = [
    "DH",
    "DHX",
    "DSA",
    "EC",
    "ECDH",
    "ECDSA",
    "X25519",
    "X448",
    "ED25519",
    "ED448",
    "SM2",
    "HMAC",
    "SIPHASH",
    "POLY1305",
    "CMAC",
    "TLS1-PRF",
    "HKDF",
    "SCRYPT",
    "ED25519ph",
    "ED25519ctx",
    "ED448ph",
    "ED448ctx",
    "Ed25519ph",
    "Ed25519ctx",
    "Ed448ph",
    "Ed448ctx",
    "DSA-SHA1",
    "DSA-SHA2-224",
    "DSA-SHA2-256",
    "DSA-SHA2-384",
    "DSA-SHA2-512",
    "DSA-SHA3-224",
    "DSA-SHA3-256",
    "DSA-SHA3-384",
    "DSA-SHA3-512",
    "ECDSA-SHA1",
    "ECDSA-SHA2-224",
    "ECDSA-SHA2-256",
    "ECDSA-SHA2-384",
    "ECDSA-SHA2-512",
    "ECDSA-SHA3-224",
    "ECDSA-SHA3-256",
    "ECDSA-SHA3-384",
    "ECDSA-SHA3-512",
    "ML-DSA-44",
    "ML-DSA-65",
    "ML-DSA-87",
    "SLH-DSA-SHA2-128s",
    "SLH-DSA-SHA2-128f",
    "SLH-DSA-SHA2-192s",
    "SLH-DSA-SHA2-192f",
    "SLH-DSA-SHA2-256s",
    "SLH-DSA-SHA2-256f",
    "SLH-DSA-SHAKE-128s",
    "SLH-DSA-SHAKE-128f",
    "SLH-DSA-SHAKE-192s",
    "SLH-DSA-SHAKE-192f",
    "SLH-DSA-SHAKE-256s",
    "SLH-DSA-SHAKE-256f",
    "LMS",
    "ML-KEM-512",
    "ML-KEM-768",
    "ML-KEM-1024",
    "X25519MLKEM768",
    "X448MLKEM1024",
    "SecP256r1MLKEM768",
    "SecP384r1MLKEM1024",
];

/// Whether the default provider's algorithm `names` (colon-separated) of operation `op` may
/// be listed under kae's name: never one that could be handed a kae key object.
pub(crate) fn relisting_allowed(op: c_int, names: &str) -> bool {
    if op == OSSL_OP_RAND {
        // Seed sources and the test generator are re-listed; the DRBGs are kae's own fronts
        // (since 3.5 a DRBG looks its cipher up by its provider's name, see rand.rs).
        return !crate::rand::is_kae_generator(names);
    }
    if KEYLESS_OPERATIONS.contains(&op) {
        return true;
    }
    if !KEYED_OPERATIONS.contains(&op) {
        return false; // an operation class this build does not know: not re-listed
    }
    let first = names.split(':').next().unwrap_or("");
    let rsa_like = names.split(':').any(|n| {
        let n = n.to_ascii_uppercase();
        n.contains("RSA") || n.starts_with("1.2.840.113549.1.1.")
    });
    !rsa_like && OTHER_KEY_ALGORITHMS.contains(&first)
}

/// Our own algorithms followed by the proxied ones for the same operation.
pub(super) fn merged(
    prov: &ProvCtx,
    op: c_int,
    ours: &'static Table<OSSL_ALGORITHM>,
) -> *const OSSL_ALGORITHM {
    let proxied = prov.proxied(op);
    if proxied.is_null() {
        return ours.0.as_ptr();
    }
    let Ok(mut map) = prov.proxied.lock() else {
        return ours.0.as_ptr();
    };
    let key = -op; // merged tables are cached under the negated operation id
    if let Some(t) = map.get(&key) {
        return t.algs.0.as_ptr();
    }
    let mut algs: Vec<OSSL_ALGORITHM> = ours
        .0
        .iter()
        .filter(|a| !a.algorithm_names.is_null())
        .map(|a| OSSL_ALGORITHM { ..*a })
        .collect();
    if let Some(t) = map.get(&op) {
        algs.extend(t.algs.0.iter().map(|a| OSSL_ALGORITHM { ..*a }));
    } else {
        algs.push(ALG_END);
    }
    let t = ProxyTable {
        algs: Table(algs),
        _props: Vec::new(),
    };
    let ptr = t.algs.0.as_ptr();
    map.insert(key, t);
    ptr
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing that can be handed an RSA or RSA-PSS key is re-listed, whatever its class or
    /// name, and an operation class this build does not know is not re-listed at all.
    #[test]
    fn relisting_is_an_allow_list() {
        for op in KEYED_OPERATIONS {
            for names in [
                "RSA:rsaEncryption:1.2.840.113549.1.1.1",
                "RSA-PSS:RSASSA-PSS:1.2.840.113549.1.1.10",
                "RSA-SHA256:sha256WithRSAEncryption:1.2.840.113549.1.1.11",
                "1.2.840.113549.1.1.1",
                "SOMETHING-NEW",
            ] {
                assert!(!relisting_allowed(op, names), "op {op}: {names}");
            }
        }
        assert!(!relisting_allowed(OSSL_OP_KEM, "RSA"), "RSA KEM (RSASVE)");
        assert!(relisting_allowed(OSSL_OP_KEYMGMT, "EC:id-ecPublicKey"));
        assert!(relisting_allowed(OSSL_OP_SIGNATURE, "ECDSA"));
        assert!(relisting_allowed(OSSL_OP_KEYEXCH, "X25519"));
        assert!(relisting_allowed(OSSL_OP_ENCODER, "EC"));
        for op in KEYLESS_OPERATIONS {
            assert!(relisting_allowed(op, "SHA2-256:SHA-256"));
        }
        assert!(!relisting_allowed(15, "AES"), "unknown operation class");
        assert!(!relisting_allowed(99, "X"), "unknown operation class");
    }

    /// The default provider's `provider=default` clause becomes `provider=kae`, its other
    /// clauses stay, and a definition without one gets `provider=kae` in front.
    #[test]
    fn relabelling_names_kae_as_the_provider() {
        assert_eq!(relabelled("provider=default"), "provider=kae");
        assert_eq!(
            relabelled("provider=default,fips=yes"),
            "provider=kae,fips=yes"
        );
        assert_eq!(relabelled("fips=yes"), "provider=kae,fips=yes");
        assert_eq!(relabelled(""), "provider=kae");
        assert_eq!(relabelled("x=1, provider=default"), "x=1,provider=kae");
    }
}
