//! kae's algorithm tables and the operation query that hands them (merged with the re-listed
//! ones) to the core.

use super::relist::merged;
use super::PROPERTIES;
use crate::abi::{Table, ALG_END};
use crate::ffi::sys::*;
use crate::provctx::{ProvCtx, MAX_INSTANCES};
use crate::rsa::KeyType;
use core::ffi::{c_int, CStr};
use std::sync::LazyLock;

fn algorithm(
    names: &'static CStr,
    imp: &'static Table<OSSL_DISPATCH>,
    descr: &'static CStr,
) -> OSSL_ALGORITHM {
    OSSL_ALGORITHM {
        algorithm_names: names.as_ptr(),
        property_definition: PROPERTIES.as_ptr(),
        implementation: imp.0.as_ptr(),
        algorithm_description: descr.as_ptr(),
    }
}

const RSA_NAMES: &CStr = KeyType::Rsa.algorithm_names();
const RSA_PSS_NAMES: &CStr = KeyType::RsaPss.algorithm_names();

/// Key management algorithms of each slot (they differ only in their `load` functions).
static KEYMGMT_ALGS: LazyLock<Vec<Table<OSSL_ALGORITHM>>> = LazyLock::new(|| {
    (0..MAX_INSTANCES)
        .map(|slot| {
            let (rsa, pss) = crate::keymgmt::keymgmt_tables(slot);
            Table(vec![
                algorithm(RSA_NAMES, rsa, c"kae RSA key management"),
                algorithm(RSA_PSS_NAMES, pss, c"kae RSA-PSS key management"),
                ALG_END,
            ])
        })
        .collect()
});

static SIGNATURE_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(
            RSA_NAMES,
            &crate::signature::RSA_SIGNATURE,
            c"kae RSA signature",
        ),
        ALG_END,
    ])
});

static RAND_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    let t = &crate::rand::RAND_TABLES;
    Table(vec![
        algorithm(
            c"CTR-DRBG",
            &t[0],
            c"kae CTR DRBG (front of a private default-provider DRBG)",
        ),
        algorithm(
            c"HASH-DRBG",
            &t[1],
            c"kae HASH DRBG (front of a private default-provider DRBG)",
        ),
        algorithm(
            c"HMAC-DRBG",
            &t[2],
            c"kae HMAC DRBG (front of a private default-provider DRBG)",
        ),
        ALG_END,
    ])
});

/// The plain RSA signature plus the composite `RSA-SHA*` algorithms (OpenSSL 3.4+); listed
/// instead of [`SIGNATURE_ALGS`] only when the running core is 3.4 or newer.
static SIGNATURE_ALGS_WITH_SIGALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    let mut v = vec![algorithm(
        RSA_NAMES,
        &crate::signature::RSA_SIGNATURE,
        c"kae RSA signature",
    )];
    v.extend(
        crate::signature::sigalg_tables().map(|(names, imp, descr)| algorithm(names, imp, descr)),
    );
    v.push(ALG_END);
    Table(v)
});

static KEM_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(RSA_NAMES, &crate::kem::RSA_KEM, c"kae RSA KEM (RSASVE)"),
        ALG_END,
    ])
});

static ASYM_CIPHER_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    Table(vec![
        algorithm(
            RSA_NAMES,
            &crate::asym_cipher::RSA_ASYM_CIPHER,
            c"kae RSA asymmetric cipher",
        ),
        ALG_END,
    ])
});

/// kae's algorithm table of operation `op` for `prov`, followed by the default provider's
/// re-listed ones (NULL: none).
pub(super) fn query_operation(prov: &ProvCtx, op: c_int) -> *const OSSL_ALGORITHM {
    let has_default = prov.private_default.is_some();
    match op {
        OSSL_OP_KEYMGMT => match KEYMGMT_ALGS.get(prov.slot) {
            Some(t) => merged(prov, op, t),
            None => core::ptr::null(),
        },
        OSSL_OP_SIGNATURE => {
            let table = if prov.core_at_least(3, 4) {
                &SIGNATURE_ALGS_WITH_SIGALGS
            } else {
                &SIGNATURE_ALGS
            };
            merged(prov, op, table)
        }
        OSSL_OP_KEM => merged(prov, op, &KEM_ALGS),
        OSSL_OP_ASYM_CIPHER => merged(prov, op, &ASYM_CIPHER_ALGS),
        // Only with the private default provider: the fronts forward to it.
        OSSL_OP_RAND if has_default => merged(prov, op, &RAND_ALGS),
        // kae's own RSA / RSA-PSS encoders work in the private default provider's context,
        // so they are listed only when it is loaded.
        OSSL_OP_ENCODER if has_default => merged(prov, op, &crate::encoder::ENCODER_ALGS),
        other => prov.proxied(other),
    }
}
