//! RSA and RSA-PSS key management: new/free/dup, has, match, validate, import/export,
//! parameters, key generation. The dispatch tables are at the bottom.

use crate::abi::key::KeyObj;
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::bn::BigNum;
use crate::ffi::core::Failure;
use crate::ffi::params::{desc, ParamBuilder, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::ffi::{guard, guard_ptr};
use crate::provctx::ProvCtx;
use crate::rsa::padding::DigestId;
use crate::rsa::{KeyType, PssRestrictions, RsaKey};
use core::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, LazyLock};

const MAX_PRIMES: usize = 10;

// Parameter names for the factors, exponents and coefficients of (multi-prime) keys.
const FACTOR_NAMES: [&CStr; MAX_PRIMES] = [
    c"rsa-factor1",
    c"rsa-factor2",
    c"rsa-factor3",
    c"rsa-factor4",
    c"rsa-factor5",
    c"rsa-factor6",
    c"rsa-factor7",
    c"rsa-factor8",
    c"rsa-factor9",
    c"rsa-factor10",
];
const EXPONENT_NAMES: [&CStr; MAX_PRIMES] = [
    c"rsa-exponent1",
    c"rsa-exponent2",
    c"rsa-exponent3",
    c"rsa-exponent4",
    c"rsa-exponent5",
    c"rsa-exponent6",
    c"rsa-exponent7",
    c"rsa-exponent8",
    c"rsa-exponent9",
    c"rsa-exponent10",
];
const COEFFICIENT_NAMES: [&CStr; MAX_PRIMES - 1] = [
    c"rsa-coefficient1",
    c"rsa-coefficient2",
    c"rsa-coefficient3",
    c"rsa-coefficient4",
    c"rsa-coefficient5",
    c"rsa-coefficient6",
    c"rsa-coefficient7",
    c"rsa-coefficient8",
    c"rsa-coefficient9",
];

fn selects(selection: c_int, bits: c_int) -> bool {
    selection & bits != 0
}

/// Reads a list of numbered big numbers (`rsa-factor1`, `rsa-factor2`, …) until one is missing.
fn read_numbered(params: &Params<'_>, names: &[&CStr]) -> Result<Vec<BigNum>, KaeError> {
    let mut out = Vec::new();
    for name in names {
        match params.locate(name) {
            Some(p) => out.push(p.get_bn(true)?),
            None => break,
        }
    }
    Ok(out)
}

/// PSS restriction parameters as OpenSSL exchanges them for RSA-PSS keys.
/// RSA-PSS restrictions from `params`, on top of `base` (the ones already set, for a key
/// generation's later `set_params` calls): each parameter present overrides its own field, and
/// the first one present starts from the RFC 8017 defaults, as the default provider does. The
/// MGF1 digest does not follow the message digest: it stays SHA-1 unless given.
fn read_pss_restrictions(
    params: &Params<'_>,
    base: Option<PssRestrictions>,
) -> Result<Option<PssRestrictions>, Failure> {
    let md = crate::ffi::params::opt_utf8(params, c"digest")?;
    let mgf = crate::ffi::params::opt_utf8(params, c"mgf")?;
    let mgf1 = crate::ffi::params::opt_utf8(params, c"mgf1-digest")?;
    let salt = params.locate(c"saltlen").map(|p| p.get_int()).transpose()?;
    if md.is_none() && mgf.is_none() && mgf1.is_none() && salt.is_none() {
        return Ok(base);
    }
    if let Some(m) = mgf {
        if !m.eq_ignore_ascii_case("MGF1") {
            return Err(Failure::with(KaeError::InvalidParam, format!("mgf={m}")));
        }
    }
    let mut r = base.unwrap_or_else(PssRestrictions::defaults);
    if let Some(m) = md {
        r.md = DigestId::from_name(m)
            .ok_or_else(|| Failure::with(KaeError::InvalidDigest, m.to_string()))?;
    }
    if let Some(m) = mgf1 {
        r.mgf1_md = DigestId::from_name(m)
            .ok_or_else(|| Failure::with(KaeError::InvalidDigest, m.to_string()))?;
    }
    if let Some(s) = salt {
        if s < 0 {
            return Err(Failure::with(
                KaeError::InvalidSaltLength,
                format!("saltlen={s}"),
            ));
        }
        r.min_saltlen = s as usize;
    }
    Ok(Some(r))
}

/// Fills `key` from an import parameter array.
fn import_into(key: &mut RsaKey, selection: c_int, params: &Params<'_>) -> Result<(), Failure> {
    if selects(selection, OSSL_KEYMGMT_SELECT_KEYPAIR) {
        let n = params
            .locate(c"n")
            .ok_or(KaeError::MissingPublicKey)?
            .get_bn(false)?;
        let e = params
            .locate(c"e")
            .ok_or(KaeError::MissingPublicKey)?
            .get_bn(false)?;
        key.n = Some(n);
        key.e = Some(e);
        if selects(selection, OSSL_KEYMGMT_SELECT_PRIVATE_KEY) {
            key.d = params.locate(c"d").map(|p| p.get_bn(true)).transpose()?;
            key.primes = read_numbered(params, &FACTOR_NAMES)?;
            key.exps = read_numbered(params, &EXPONENT_NAMES)?;
            key.coeffs = read_numbered(params, &COEFFICIENT_NAMES)?;
            if key.primes.len() == 1 {
                return Err(Failure::with(
                    KaeError::InconsistentKey,
                    "only one prime factor",
                ));
            }
            if !key.primes.is_empty() && key.d.is_none() && key.exps.len() != key.primes.len() {
                return Err(Failure::with(
                    KaeError::MissingPrivateKey,
                    "factors without d or CRT exponents",
                ));
            }
            if key.d.is_none() && key.primes.is_empty() {
                // Only n and e: a public key imported with the private selection.
            }
        }
        key.check_public_shape()?;
        if let Some(d) = &key.d {
            if d.is_zero()
                || d.is_negative()
                || d.cmp_vartime(key.n()?) != core::cmp::Ordering::Less
            {
                return Err(Failure::with(KaeError::InvalidKey, "d out of range"));
            }
        }
    }
    if key.kind == KeyType::RsaPss && selects(selection, OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS) {
        key.pss = read_pss_restrictions(params, None)?;
    }
    Ok(())
}

/// Builds the export parameter array for the selected parts of `key`.
pub(crate) fn export_params(
    key: &RsaKey,
    selection: c_int,
) -> Result<crate::ffi::params::OwnedParams, KaeError> {
    let mut b = ParamBuilder::new()?;
    if selects(selection, OSSL_KEYMGMT_SELECT_KEYPAIR) {
        if let (Some(n), Some(e)) = (&key.n, &key.e) {
            b.push_bn(c"n", n)?;
            b.push_bn(c"e", e)?;
        }
        if selects(selection, OSSL_KEYMGMT_SELECT_PRIVATE_KEY) {
            if let Some(d) = &key.d {
                b.push_bn(c"d", d)?;
            }
            // OpenSSL only exports factors as a complete set.
            if key.primes.len() >= 2
                && key.exps.len() == key.primes.len()
                && key.coeffs.len() + 1 == key.primes.len()
            {
                for (i, p) in key.primes.iter().enumerate() {
                    b.push_bn(FACTOR_NAMES[i], p)?;
                }
                for (i, x) in key.exps.iter().enumerate() {
                    b.push_bn(EXPONENT_NAMES[i], x)?;
                }
                for (i, c) in key.coeffs.iter().enumerate() {
                    b.push_bn(COEFFICIENT_NAMES[i], c)?;
                }
            }
        }
    }
    if selects(selection, OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS) {
        if let Some(r) = &key.pss {
            b.push_utf8(c"digest", crate::rsa::digest_cname(r.md))?;
            b.push_utf8(c"mgf", c"MGF1")?;
            b.push_utf8(c"mgf1-digest", crate::rsa::digest_cname(r.mgf1_md))?;
            b.push_int(c"saltlen", r.min_saltlen as i32)?;
        }
    }
    b.build()
}

// ---- extern "C" functions -----------------------------------------------------------------

/// # Safety
/// None beyond `ProvCtx::clone_arc`'s: `provctx` is only looked up, never dereferenced.
unsafe fn new_key(provctx: *mut c_void, kind: KeyType) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let prov = unsafe { ProvCtx::clone_arc(provctx) };
    let Some(prov) = prov else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, KaeError> {
        Ok(KeyObj::new(prov, RsaKey::empty(kind)).into_raw())
    })
}

unsafe extern "C" fn rsa_new(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: new_key only looks provctx up in the registry, so any value the core passes is sound.
    unsafe { new_key(provctx, KeyType::Rsa) }
}

unsafe extern "C" fn rsa_pss_new(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: new_key only looks provctx up in the registry, so any value the core passes is sound.
    unsafe { new_key(provctx, KeyType::RsaPss) }
}

unsafe extern "C" fn rsa_free(keydata: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if !keydata.is_null() {
            // SAFETY: keydata was created by Box::into_raw in this module.
            drop(unsafe { Box::from_raw(keydata.cast::<KeyObj>()) });
        }
        Ok(())
    })
}

unsafe extern "C" fn rsa_has(keydata: *const c_void, selection: c_int) -> c_int {
    // SAFETY: the core passes NULL or a keydata this keymgmt created and has not freed, which is
    // what from_ptr asks.
    let Some(obj) = (unsafe { KeyObj::from_ptr(keydata) }) else {
        return 0;
    };
    guard(Some(&obj.prov.core), 0, || -> Result<c_int, KaeError> {
        let k = &obj.key;
        let mut ok = true;
        // RSA has no domain parameters; "other" parameters (PSS restrictions) are optional.
        if selects(selection, OSSL_KEYMGMT_SELECT_PUBLIC_KEY) {
            ok &= k.has_public();
        }
        if selects(selection, OSSL_KEYMGMT_SELECT_PRIVATE_KEY) {
            ok &= k.has_private();
        }
        Ok(ok as c_int)
    })
}

unsafe extern "C" fn rsa_match(k1: *const c_void, k2: *const c_void, selection: c_int) -> c_int {
    // SAFETY: the core passes NULL or keydata of this keymgmt, created by it and not freed, for
    // both keys, which is what from_ptr asks.
    let (Some(a), Some(b)) = (unsafe { KeyObj::from_ptr(k1) }, unsafe {
        KeyObj::from_ptr(k2)
    }) else {
        return 0;
    };
    guard(Some(&a.prov.core), 0, || -> Result<c_int, KaeError> {
        let (x, y) = (&a.key, &b.key);
        let same = |p: &Option<BigNum>, q: &Option<BigNum>| match (p, q) {
            (Some(p), Some(q)) => p.cmp_vartime(q) == core::cmp::Ordering::Equal,
            _ => false,
        };
        let mut ok = true;
        if selects(selection, OSSL_KEYMGMT_SELECT_KEYPAIR) {
            if selects(selection, OSSL_KEYMGMT_SELECT_PUBLIC_KEY)
                || (x.d.is_none() || y.d.is_none())
            {
                ok &= same(&x.n, &y.n) && same(&x.e, &y.e);
            } else {
                ok &= same(&x.n, &y.n) && same(&x.d, &y.d);
            }
        }
        Ok(ok as c_int)
    })
}

unsafe extern "C" fn rsa_validate(
    keydata: *const c_void,
    selection: c_int,
    _checktype: c_int,
) -> c_int {
    // SAFETY: the core passes NULL or a keydata this keymgmt created and has not freed, which is
    // what from_ptr asks.
    let Some(obj) = (unsafe { KeyObj::from_ptr(keydata) }) else {
        return 0;
    };
    guard(Some(&obj.prov.core), 0, || -> Result<c_int, KaeError> {
        if selects(selection, OSSL_KEYMGMT_SELECT_KEYPAIR) && !obj.key.has_public() {
            return Err(KaeError::MissingPublicKey);
        }
        let public = selects(selection, OSSL_KEYMGMT_SELECT_PUBLIC_KEY);
        let private = selects(selection, OSSL_KEYMGMT_SELECT_PRIVATE_KEY);
        obj.key.validate(public, private, public && private)?;
        Ok(1)
    })
}

unsafe extern "C" fn rsa_import(
    keydata: *mut c_void,
    selection: c_int,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core imports only into NULL or a keydata our new just made, which no one else
    // uses yet: from_ptr_mut's contract (exclusive access).
    let Some(obj) = (unsafe { KeyObj::from_ptr_mut(keydata) }) else {
        return 0;
    };
    let core = obj.prov.core;
    guard(Some(&core), 0, || -> Result<c_int, Failure> {
        // SAFETY: params is the core's array, NULL or terminated and valid for this call.
        let params = unsafe { Params::from_ptr(params) };
        let mut key = RsaKey::empty(obj.key.kind);
        // SAFETY: as in KeyObj::new: the context lives until teardown, after every key object
        // of this instance (this key goes into obj) is freed.
        unsafe { key.set_libctx(obj.prov.rand_libctx()) };
        import_into(&mut key, selection, &params)?;
        obj.key = Arc::new(key);
        Ok(1)
    })
}

/// A new key object of `kind` for instance `prov`, filled from `params` (what an encoder's
/// `import_object` receives when the core hands it another provider's key).
pub(crate) fn import_object(
    prov: Arc<ProvCtx>,
    kind: KeyType,
    selection: c_int,
    params: &Params<'_>,
) -> Result<KeyObj, Failure> {
    let mut key = RsaKey::empty(kind);
    // SAFETY: prov.libctx is the instance's child library context, freed only by teardown,
    // after every key object of the instance (this key goes into one below) is freed.
    unsafe { key.set_libctx(prov.libctx) };
    import_into(&mut key, selection, params)?;
    Ok(KeyObj::new(prov, key))
}

type OsslCallback = unsafe extern "C" fn(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int;

unsafe extern "C" fn rsa_export(
    keydata: *mut c_void,
    selection: c_int,
    cb: Option<OsslCallback>,
    cbarg: *mut c_void,
) -> c_int {
    // SAFETY: the core passes NULL or a keydata this keymgmt created and has not freed, which is
    // what from_ptr asks.
    let Some(obj) = (unsafe { KeyObj::from_ptr(keydata) }) else {
        return 0;
    };
    guard(Some(&obj.prov.core), 0, || -> Result<c_int, KaeError> {
        let cb = cb.ok_or(KaeError::NullParameter)?;
        let params = export_params(&obj.key, selection)?;
        // SAFETY: callback from the core with its own argument and our valid array.
        Ok(unsafe { cb(params.as_ptr(), cbarg) })
    })
}

const fn bn(key: &'static CStr) -> OSSL_PARAM {
    desc(key, OSSL_PARAM_UNSIGNED_INTEGER)
}

static KEY_TYPES: ParamTable<32> = ParamTable([
    bn(c"n"),
    bn(c"e"),
    bn(c"d"),
    bn(c"rsa-factor1"),
    bn(c"rsa-factor2"),
    bn(c"rsa-factor3"),
    bn(c"rsa-factor4"),
    bn(c"rsa-factor5"),
    bn(c"rsa-factor6"),
    bn(c"rsa-factor7"),
    bn(c"rsa-factor8"),
    bn(c"rsa-factor9"),
    bn(c"rsa-factor10"),
    bn(c"rsa-exponent1"),
    bn(c"rsa-exponent2"),
    bn(c"rsa-exponent3"),
    bn(c"rsa-exponent4"),
    bn(c"rsa-exponent5"),
    bn(c"rsa-exponent6"),
    bn(c"rsa-exponent7"),
    bn(c"rsa-exponent8"),
    bn(c"rsa-exponent9"),
    bn(c"rsa-exponent10"),
    bn(c"rsa-coefficient1"),
    bn(c"rsa-coefficient2"),
    bn(c"rsa-coefficient3"),
    bn(c"rsa-coefficient4"),
    bn(c"rsa-coefficient5"),
    bn(c"rsa-coefficient6"),
    bn(c"rsa-coefficient7"),
    bn(c"rsa-coefficient8"),
    bn(c"rsa-coefficient9"),
]);

static KEY_TYPES_END: LazyLock<Table<OSSL_PARAM>> = LazyLock::new(|| {
    let mut v = KEY_TYPES.0.to_vec();
    v.push(END);
    Table(v)
});

static PSS_KEY_TYPES_END: LazyLock<Table<OSSL_PARAM>> = LazyLock::new(|| {
    let mut v = KEY_TYPES.0.to_vec();
    v.extend_from_slice(&[
        desc(c"digest", OSSL_PARAM_UTF8_STRING),
        desc(c"mgf", OSSL_PARAM_UTF8_STRING),
        desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
        desc(c"saltlen", OSSL_PARAM_INTEGER),
        END,
    ]);
    Table(v)
});

unsafe extern "C" fn rsa_key_types(_selection: c_int) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| KEY_TYPES_END.0.as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn rsa_pss_key_types(_selection: c_int) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| PSS_KEY_TYPES_END.0.as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn rsa_dup(keydata: *const c_void, selection: c_int) -> *mut c_void {
    // SAFETY: the core passes NULL or a keydata this keymgmt created and has not freed, which is
    // what from_ptr asks.
    let Some(obj) = (unsafe { KeyObj::from_ptr(keydata) }) else {
        return core::ptr::null_mut();
    };
    guard_ptr(Some(&obj.prov.core), || -> Result<*mut c_void, KaeError> {
        let k = obj.key.dup(
            selects(selection, OSSL_KEYMGMT_SELECT_PUBLIC_KEY),
            selects(selection, OSSL_KEYMGMT_SELECT_PRIVATE_KEY),
            selects(selection, OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS),
        )?;
        Ok(KeyObj::new(obj.prov.clone(), k).into_raw())
    })
}

unsafe extern "C" fn rsa_get_params(keydata: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: the core passes NULL or a keydata this keymgmt created and has not freed, which is
    // what from_ptr asks.
    let Some(obj) = (unsafe { KeyObj::from_ptr(keydata) }) else {
        return 0;
    };
    guard(Some(&obj.prov.core), 0, || -> Result<c_int, KaeError> {
        let k = &obj.key;
        // SAFETY: params is the core's array, NULL or terminated and writable for this call.
        let mut ps = unsafe { ParamsMut::from_ptr(params) };
        if k.n.is_some() {
            if let Some(mut p) = ps.locate(c"bits") {
                p.set_int(k.bits() as i32)?;
            }
            if let Some(mut p) = ps.locate(c"security-bits") {
                p.set_int(k.security_bits() as i32)?;
            }
            if let Some(mut p) = ps.locate(c"max-size") {
                p.set_int(k.size() as i32)?;
            }
        }
        match &k.pss {
            Some(r) => {
                if let Some(mut p) = ps.locate(c"mandatory-digest") {
                    p.set_utf8(crate::rsa::digest_cname(r.md))?;
                }
                if let Some(mut p) = ps.locate(c"default-digest") {
                    p.set_utf8(crate::rsa::digest_cname(r.md))?;
                }
            }
            None => {
                if let Some(mut p) = ps.locate(c"default-digest") {
                    p.set_utf8(c"SHA256")?;
                }
            }
        }
        let single: [(&CStr, &Option<BigNum>); 3] = [(c"n", &k.n), (c"e", &k.e), (c"d", &k.d)];
        for (name, v) in single {
            if let (Some(mut p), Some(v)) = (ps.locate(name), v) {
                p.set_bn(v)?;
            }
        }
        for (names, vals) in [
            (&FACTOR_NAMES[..], &k.primes),
            (&EXPONENT_NAMES[..], &k.exps),
            (&COEFFICIENT_NAMES[..], &k.coeffs),
        ] {
            for (name, v) in names.iter().zip(vals.iter()) {
                if let Some(mut p) = ps.locate(name) {
                    p.set_bn(v)?;
                }
            }
        }
        Ok(1)
    })
}

static GETTABLE: LazyLock<Table<OSSL_PARAM>> = LazyLock::new(|| {
    let mut v = vec![
        desc(c"bits", OSSL_PARAM_INTEGER),
        desc(c"security-bits", OSSL_PARAM_INTEGER),
        desc(c"max-size", OSSL_PARAM_INTEGER),
        desc(c"default-digest", OSSL_PARAM_UTF8_STRING),
        desc(c"mandatory-digest", OSSL_PARAM_UTF8_STRING),
    ];
    v.extend_from_slice(&KEY_TYPES.0);
    v.push(END);
    Table(v)
});

unsafe extern "C" fn rsa_gettable_params(_provctx: *mut c_void) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| GETTABLE.0.as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn rsa_query_operation_name(_operation_id: c_int) -> *const c_char {
    // Both key types use the "RSA" signature and asymmetric cipher implementations.
    c"RSA".as_ptr()
}

// ---- key generation -------------------------------------------------------------------

struct GenCtx {
    prov: Arc<ProvCtx>,
    kind: KeyType,
    bits: usize,
    primes: usize,
    e: u64,
    e_bn: Option<BigNum>,
    pss: Option<PssRestrictions>,
}

fn gen_set_params_inner(g: &mut GenCtx, params: &Params<'_>) -> Result<(), Failure> {
    if let Some(p) = params.locate(c"bits") {
        g.bits = p.get_size_t()?;
    }
    if let Some(p) = params.locate(c"primes") {
        g.primes = p.get_size_t()?;
        if g.primes != 2 {
            return Err(Failure::with(
                KaeError::UnsupportedPrimeCount,
                format!("primes={}", g.primes),
            ));
        }
    }
    if let Some(p) = params.locate(c"e") {
        g.e_bn = Some(p.get_bn(false)?);
    }
    if g.kind == KeyType::RsaPss {
        g.pss = read_pss_restrictions(params, g.pss)?;
    }
    Ok(())
}

/// # Safety
/// `params` is NULL or a terminated OSSL_PARAM array valid for the call; `provctx` is only
/// looked up in the registry, never dereferenced.
unsafe fn gen_init(
    provctx: *mut c_void,
    selection: c_int,
    params: *const OSSL_PARAM,
    kind: KeyType,
) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, Failure> {
        if selection & OSSL_KEYMGMT_SELECT_KEYPAIR == 0
            && selection & OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS == 0
        {
            return Err(KaeError::InvalidArgument.into());
        }
        let mut g = GenCtx {
            prov,
            kind,
            bits: 2048,
            primes: 2,
            e: 65537,
            e_bn: None,
            pss: None,
        };
        // SAFETY: params is NULL or a terminated array valid for this call (gen_init's contract).
        gen_set_params_inner(&mut g, &unsafe { Params::from_ptr(params) })?;
        Ok(Box::into_raw(Box::new(g)).cast())
    })
}

unsafe extern "C" fn rsa_gen_init(
    provctx: *mut c_void,
    selection: c_int,
    params: *const OSSL_PARAM,
) -> *mut c_void {
    // SAFETY: the core's arguments, passed unchanged, meet gen_init's contract.
    unsafe { gen_init(provctx, selection, params, KeyType::Rsa) }
}

unsafe extern "C" fn rsa_pss_gen_init(
    provctx: *mut c_void,
    selection: c_int,
    params: *const OSSL_PARAM,
) -> *mut c_void {
    // SAFETY: the core's arguments, passed unchanged, meet gen_init's contract.
    unsafe { gen_init(provctx, selection, params, KeyType::RsaPss) }
}

unsafe extern "C" fn rsa_gen_set_params(genctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: genctx is NULL or the Box<GenCtx> our gen_init leaked, not yet given to gen_cleanup;
    // the core uses a generation context from one thread at a time, so this borrow is unique.
    let Some(g) = (unsafe { genctx.cast::<GenCtx>().as_mut() }) else {
        return 0;
    };
    let core = g.prov.core;
    guard(Some(&core), 0, || {
        // SAFETY: params is the core's array, NULL or terminated and valid for this call.
        gen_set_params_inner(g, &unsafe { Params::from_ptr(params) }).map(|_| 1)
    })
}

static GEN_SETTABLE: ParamTable<4> = ParamTable([
    desc(c"bits", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"primes", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"e", OSSL_PARAM_UNSIGNED_INTEGER),
    END,
]);
static PSS_GEN_SETTABLE: ParamTable<8> = ParamTable([
    desc(c"bits", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"primes", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"e", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"digest", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
    desc(c"saltlen", OSSL_PARAM_INTEGER),
    END,
]);

unsafe extern "C" fn rsa_gen_settable_params(
    _genctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    GEN_SETTABLE.as_ptr()
}

unsafe extern "C" fn rsa_pss_gen_settable_params(
    _genctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    PSS_GEN_SETTABLE.as_ptr()
}

unsafe extern "C" fn rsa_gen(
    genctx: *mut c_void,
    _cb: Option<OsslCallback>,
    _cbarg: *mut c_void,
) -> *mut c_void {
    // SAFETY: genctx is NULL or the Box<GenCtx> our gen_init leaked, not yet given to gen_cleanup;
    // it is only read here.
    let Some(g) = (unsafe { genctx.cast::<GenCtx>().as_ref() }) else {
        return core::ptr::null_mut();
    };
    guard_ptr(Some(&g.prov.core), || -> Result<*mut c_void, Failure> {
        let e = match &g.e_bn {
            Some(e) => e.dup(false)?,
            None => BigNum::from_u64(g.e)?,
        };
        // SAFETY: rand_libctx is one of the instance's library contexts, freed only by teardown,
        // which the core runs after this generation context and every key object it makes
        // (the key goes into one below) are freed.
        let mut key =
            unsafe { crate::rsa::ops::generate_in(g.prov.rand_libctx(), g.kind, g.bits, &e) }
                .map_err(|r| Failure::with(r, format!("bits={}", g.bits)))?;
        key.pss = g.pss;
        Ok(KeyObj::new(g.prov.clone(), key).into_raw())
    })
}

unsafe extern "C" fn rsa_gen_cleanup(genctx: *mut c_void) {
    if !genctx.is_null() {
        // SAFETY: genctx is the Box<GenCtx> our gen_init leaked; the core calls gen_cleanup once
        // and never uses genctx after it.
        let _ =
            std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(genctx.cast::<GenCtx>()) }));
    }
}

// ---- load: keys decoded by the default provider's decoders ---------------------------------

/// Finds function `id` in the default provider's key management for `name`.
fn default_keymgmt_fn(prov: &ProvCtx, name: &str, id: c_int) -> Option<unsafe extern "C" fn()> {
    if prov.default_provider.is_null() {
        return None;
    }
    let mut no_cache = 0;
    // SAFETY: a provider we hold a reference to; its tables are static and terminated.
    unsafe {
        let mut a =
            OSSL_PROVIDER_query_operation(prov.default_provider, OSSL_OP_KEYMGMT, &mut no_cache);
        if a.is_null() {
            return None;
        }
        while !(*a).algorithm_names.is_null() {
            let names = CStr::from_ptr((*a).algorithm_names).to_string_lossy();
            if names.split(':').next() == Some(name) {
                let mut d = (*a).implementation;
                while (*d).function_id != 0 {
                    if (*d).function_id == id {
                        return (*d).function;
                    }
                    d = d.add(1);
                }
            }
            a = a.add(1);
        }
    }
    None
}

unsafe extern "C" fn import_cb(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int {
    // SAFETY: arg is the &mut RsaKey passed by `load_via_default`.
    let Some(key) = (unsafe { arg.cast::<RsaKey>().as_mut() }) else {
        return 0;
    };
    // SAFETY: the default provider's export passes a terminated array, valid for this callback.
    let params = unsafe { Params::from_ptr(params) };
    let selection = OSSL_KEYMGMT_SELECT_KEYPAIR | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS;
    import_into(key, selection, &params).is_ok() as c_int
}

/// Keys reach `load` as the default provider's own object references when a decoder that
/// kae re-lists (provider=kae) produced them. We never look inside: the default provider's
/// key management loads the reference, exports it through OSSL_PARAMs into our key, and frees
/// its copy.
fn load_via_default(
    prov: Arc<ProvCtx>,
    kind: KeyType,
    reference: *const c_void,
    size: usize,
) -> Result<*mut c_void, Failure> {
    type LoadFn = unsafe extern "C" fn(*const c_void, usize) -> *mut c_void;
    type ExportFn =
        unsafe extern "C" fn(*mut c_void, c_int, Option<OsslCallback>, *mut c_void) -> c_int;
    type FreeFn = unsafe extern "C" fn(*mut c_void);
    let name = kind.name();
    let (Some(load), Some(export), Some(free)) = (
        default_keymgmt_fn(&prov, name, OSSL_FUNC_KEYMGMT_LOAD),
        default_keymgmt_fn(&prov, name, OSSL_FUNC_KEYMGMT_EXPORT),
        default_keymgmt_fn(&prov, name, OSSL_FUNC_KEYMGMT_FREE),
    ) else {
        return Err(Failure::with(
            KaeError::DefaultProviderUnavailable,
            "default key management lacks load/export",
        ));
    };
    // SAFETY: the ids guarantee these types (core_dispatch.h).
    let (load, export, free): (LoadFn, ExportFn, FreeFn) = unsafe {
        (
            core::mem::transmute(load),
            core::mem::transmute(export),
            core::mem::transmute(free),
        )
    };
    // SAFETY: the reference came from the default provider's decoder, which is what its
    // load function expects.
    let theirs = unsafe { load(reference, size) };
    if theirs.is_null() {
        return Err(Failure::with(
            KaeError::InvalidKey,
            "default provider could not load the decoded key",
        ));
    }
    let mut key = RsaKey::empty(kind);
    let all = OSSL_KEYMGMT_SELECT_KEYPAIR | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS;
    // SAFETY: their keydata with their export; our callback fills `key`.
    let ok = unsafe {
        export(
            theirs,
            all,
            Some(import_cb),
            (&mut key as *mut RsaKey).cast(),
        )
    };
    // SAFETY: theirs came non-NULL from their load and is not used after this; free is the same
    // keymgmt's OSSL_FUNC_KEYMGMT_FREE, so its owner frees it once.
    unsafe { free(theirs) };
    if ok != 1 {
        return Err(Failure::with(
            KaeError::InvalidKey,
            "export from the default provider failed",
        ));
    }
    Ok(KeyObj::new(prov, key).into_raw())
}

/// `load` of the instance in `SLOT` (see `provctx::instance`): the key is attached to the
/// kae instance whose decoders made the reference.
unsafe extern "C" fn rsa_load<const SLOT: usize, const PSS: bool>(
    reference: *const c_void,
    size: usize,
) -> *mut c_void {
    let prov = crate::provctx::instance(SLOT);
    let core = prov.as_ref().map(|p| p.core);
    guard_ptr(core.as_ref(), || {
        let prov = prov.ok_or(KaeError::DefaultProviderUnavailable)?;
        let kind = if PSS { KeyType::RsaPss } else { KeyType::Rsa };
        load_via_default(prov, kind, reference, size)
    })
}

macro_rules! keymgmt_table {
    ($new:expr, $gen_init:expr, $gen_settable:expr, $types:expr, $load:expr) => {
        crate::abi::dispatch![
            OSSL_FUNC_KEYMGMT_LOAD => $load as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_NEW => $new as unsafe extern "C" fn(_) -> _,
            OSSL_FUNC_KEYMGMT_FREE => rsa_free as unsafe extern "C" fn(_),
            OSSL_FUNC_KEYMGMT_DUP => rsa_dup as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_HAS => rsa_has as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_MATCH => rsa_match as unsafe extern "C" fn(_, _, _) -> _,
            OSSL_FUNC_KEYMGMT_VALIDATE => rsa_validate as unsafe extern "C" fn(_, _, _) -> _,
            OSSL_FUNC_KEYMGMT_IMPORT => rsa_import as unsafe extern "C" fn(_, _, _) -> _,
            OSSL_FUNC_KEYMGMT_IMPORT_TYPES => $types as unsafe extern "C" fn(_) -> _,
            OSSL_FUNC_KEYMGMT_EXPORT => rsa_export as unsafe extern "C" fn(_, _, _, _) -> _,
            OSSL_FUNC_KEYMGMT_EXPORT_TYPES => $types as unsafe extern "C" fn(_) -> _,
            OSSL_FUNC_KEYMGMT_GET_PARAMS => rsa_get_params as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS => rsa_gettable_params as unsafe extern "C" fn(_) -> _,
            OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME => rsa_query_operation_name as unsafe extern "C" fn(_) -> _,
            OSSL_FUNC_KEYMGMT_GEN_INIT => $gen_init as unsafe extern "C" fn(_, _, _) -> _,
            OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS => rsa_gen_set_params as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS => $gen_settable as unsafe extern "C" fn(_, _) -> _,
            OSSL_FUNC_KEYMGMT_GEN => rsa_gen as unsafe extern "C" fn(_, _, _) -> _,
            OSSL_FUNC_KEYMGMT_GEN_CLEANUP => rsa_gen_cleanup as unsafe extern "C" fn(_),
        ]
    };
}

/// The RSA and RSA-PSS key management dispatch tables of one slot.
macro_rules! slot_tables {
    ($($slot:literal),*) => {
        [$(
            LazyLock::new(|| {
                keymgmt_table!(
                    rsa_new,
                    rsa_gen_init,
                    rsa_gen_settable_params,
                    rsa_key_types,
                    rsa_load::<$slot, false>
                )
            }),
            LazyLock::new(|| {
                keymgmt_table!(
                    rsa_pss_new,
                    rsa_pss_gen_init,
                    rsa_pss_gen_settable_params,
                    rsa_pss_key_types,
                    rsa_load::<$slot, true>
                )
            }),
        )*]
    };
}

type LazyTable = LazyLock<Table<OSSL_DISPATCH>>;
static SLOT_TABLES: [LazyTable; 2 * crate::provctx::MAX_INSTANCES] =
    slot_tables!(0, 1, 2, 3, 4, 5, 6, 7);

/// The (RSA, RSA-PSS) key management tables of instance slot `slot`.
pub fn keymgmt_tables(
    slot: usize,
) -> (&'static Table<OSSL_DISPATCH>, &'static Table<OSSL_DISPATCH>) {
    (&SLOT_TABLES[2 * slot], &SLOT_TABLES[2 * slot + 1])
}
