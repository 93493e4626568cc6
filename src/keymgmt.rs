//! RSA and RSA-PSS key management, as safe Rust behind the [`KeyManagement`] trait: new, dup,
//! has, match, validate, import/export through OSSL_PARAM, parameters, key generation, and
//! `load` of keys the default provider's decoders made. Its C side, with the dispatch tables,
//! is `abi::keymgmt`.

use crate::abi::key::KeyObj;
use crate::abi::keymgmt::{Callback, KeyGeneration, KeyManagement, KeySelection, Reference};
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::bn::BigNum;
use crate::ffi::core::Failure;
use crate::ffi::params::{desc, ParamBuilder, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::padding::DigestId;
use crate::rsa::{KeyType, PssRestrictions, RsaKey};
use core::ffi::{c_int, CStr};
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
fn import_into(
    key: &mut RsaKey,
    selection: KeySelection,
    params: &Params<'_>,
) -> Result<(), Failure> {
    if selection.key_pair() {
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
        if selection.private_key() {
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
    if key.kind == KeyType::RsaPss && selection.other_parameters() {
        key.pss = read_pss_restrictions(params, None)?;
    }
    Ok(())
}

/// Builds the export parameter array for the selected parts of `key` (`OSSL_KEYMGMT_SELECT_*`
/// bits).
pub(crate) fn export_params(
    key: &RsaKey,
    selection: c_int,
) -> Result<crate::ffi::params::OwnedParams, KaeError> {
    let selection = KeySelection::new(selection);
    let mut b = ParamBuilder::new()?;
    if selection.key_pair() {
        if let (Some(n), Some(e)) = (&key.n, &key.e) {
            b.push_bn(c"n", n)?;
            b.push_bn(c"e", e)?;
        }
        if selection.private_key() {
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
    if selection.other_parameters() {
        if let Some(r) = &key.pss {
            b.push_utf8(c"digest", crate::rsa::digest_cname(r.md))?;
            b.push_utf8(c"mgf", c"MGF1")?;
            b.push_utf8(c"mgf1-digest", crate::rsa::digest_cname(r.mgf1_md))?;
            b.push_int(c"saltlen", r.min_saltlen as i32)?;
        }
    }
    b.build()
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
    import_into(&mut key, KeySelection::new(selection), params)?;
    Ok(KeyObj::new(prov, key))
}

// ---- the key management of each key type ---------------------------------------------------

/// The key management of RSA keys (`PSS` false) or RSA-PSS keys (`PSS` true).
pub struct RsaKeyManagement<const PSS: bool>;

impl<const PSS: bool> RsaKeyManagement<PSS> {
    const KIND: KeyType = if PSS { KeyType::RsaPss } else { KeyType::Rsa };
}

/// Both numbers present and equal.
fn same(p: &Option<BigNum>, q: &Option<BigNum>) -> bool {
    match (p, q) {
        (Some(p), Some(q)) => p.cmp_vartime(q) == core::cmp::Ordering::Equal,
        _ => false,
    }
}

impl<const PSS: bool> KeyManagement for RsaKeyManagement<PSS> {
    type Generation = RsaKeyGeneration;

    fn new_key(prov: Arc<ProvCtx>) -> Result<KeyObj, Failure> {
        Ok(KeyObj::new(prov, RsaKey::empty(Self::KIND)))
    }

    fn has(key: &KeyObj, selection: KeySelection) -> bool {
        let k = &key.key;
        let mut ok = true;
        // RSA has no domain parameters; "other" parameters (PSS restrictions) are optional.
        if selection.public_key() {
            ok &= k.has_public();
        }
        if selection.private_key() {
            ok &= k.has_private();
        }
        ok
    }

    fn matches(a: &KeyObj, b: &KeyObj, selection: KeySelection) -> bool {
        let (x, y) = (&a.key, &b.key);
        let mut ok = true;
        if selection.key_pair() {
            if selection.public_key() || (x.d.is_none() || y.d.is_none()) {
                ok &= same(&x.n, &y.n) && same(&x.e, &y.e);
            } else {
                ok &= same(&x.n, &y.n) && same(&x.d, &y.d);
            }
        }
        ok
    }

    fn validate(key: &KeyObj, selection: KeySelection, _check_type: c_int) -> Result<(), Failure> {
        if selection.key_pair() && !key.key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        let public = selection.public_key();
        let private = selection.private_key();
        key.key.validate(public, private, public && private)?;
        Ok(())
    }

    fn import(
        key: &mut KeyObj,
        selection: KeySelection,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        let mut fresh = RsaKey::empty(key.key.kind);
        import_into(&mut fresh, selection, params)?;
        key.replace_key(fresh);
        Ok(())
    }

    fn export(
        key: &KeyObj,
        selection: KeySelection,
        sink: &mut Callback<'_>,
    ) -> Result<c_int, Failure> {
        let params = export_params(&key.key, selection.bits())?;
        Ok(sink.call(&params))
    }

    fn import_export_types(_selection: KeySelection) -> &'static [OSSL_PARAM] {
        if PSS {
            &PSS_KEY_TYPES_END.0
        } else {
            &KEY_TYPES_END.0
        }
    }

    fn duplicate(key: &KeyObj, selection: KeySelection) -> Result<KeyObj, Failure> {
        let k = key.key.dup(
            selection.public_key(),
            selection.private_key(),
            selection.other_parameters(),
        )?;
        Ok(KeyObj::new(key.prov.clone(), k))
    }

    fn get_params(key: &KeyObj, ps: &mut ParamsMut<'_>) -> Result<(), Failure> {
        let k = &key.key;
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
        Ok(())
    }

    fn gettable_params() -> &'static [OSSL_PARAM] {
        &GETTABLE.0
    }

    fn operation_name(_operation_id: c_int) -> Option<&'static CStr> {
        // Both key types use the "RSA" signature and asymmetric cipher implementations.
        Some(c"RSA")
    }

    fn gen_init(
        prov: Arc<ProvCtx>,
        selection: KeySelection,
        params: &Params<'_>,
    ) -> Result<RsaKeyGeneration, Failure> {
        if !selection.key_pair() && !selection.other_parameters() {
            return Err(KaeError::InvalidArgument.into());
        }
        let mut g = RsaKeyGeneration {
            prov,
            kind: Self::KIND,
            bits: 2048,
            primes: 2,
            e: 65537,
            e_bn: None,
            pss: None,
        };
        g.set_params(params)?;
        Ok(g)
    }

    fn gen_settable_params() -> &'static [OSSL_PARAM] {
        if PSS {
            &PSS_GEN_SETTABLE.0
        } else {
            &GEN_SETTABLE.0
        }
    }

    /// Keys reach `load` as the default provider's own object references when a decoder that
    /// kae re-lists (provider=kae) produced them: the default provider's key management loads
    /// the reference and exports it through OSSL_PARAMs into our key.
    fn load(prov: Arc<ProvCtx>, reference: &Reference<'_>) -> Result<KeyObj, Failure> {
        let mut key = RsaKey::empty(Self::KIND);
        let all =
            KeySelection::new(OSSL_KEYMGMT_SELECT_KEYPAIR | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS);
        reference.export_from_default(&prov, Self::KIND.name(), all, |params| {
            import_into(&mut key, all, params).is_ok()
        })?;
        Ok(KeyObj::new(prov, key))
    }
}

// ---- key generation -------------------------------------------------------------------

/// A key generation in progress: the parameters set so far.
pub struct RsaKeyGeneration {
    prov: Arc<ProvCtx>,
    kind: KeyType,
    bits: usize,
    primes: usize,
    e: u64,
    e_bn: Option<BigNum>,
    pss: Option<PssRestrictions>,
}

impl KeyGeneration for RsaKeyGeneration {
    fn provider(&self) -> &ProvCtx {
        &self.prov
    }

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"bits") {
            self.bits = p.get_size_t()?;
        }
        if let Some(p) = params.locate(c"primes") {
            self.primes = p.get_size_t()?;
            if self.primes != 2 {
                return Err(Failure::with(
                    KaeError::UnsupportedPrimeCount,
                    format!("primes={}", self.primes),
                ));
            }
        }
        if let Some(p) = params.locate(c"e") {
            self.e_bn = Some(p.get_bn(false)?);
        }
        if self.kind == KeyType::RsaPss {
            self.pss = read_pss_restrictions(params, self.pss)?;
        }
        Ok(())
    }

    fn generate(&self, _progress: Option<&mut Callback<'_>>) -> Result<KeyObj, Failure> {
        let e = match &self.e_bn {
            Some(e) => e.dup(false)?,
            None => BigNum::from_u64(self.e)?,
        };
        KeyObj::generate(self.prov.clone(), self.kind, self.bits, &e, self.pss)
            .map_err(|r| Failure::with(r, format!("bits={}", self.bits)))
    }
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

/// The RSA and RSA-PSS key management tables of every instance slot.
static SLOT_TABLES: LazyLock<Vec<(Table<OSSL_DISPATCH>, Table<OSSL_DISPATCH>)>> =
    LazyLock::new(|| {
        (0..crate::provctx::MAX_INSTANCES)
            .map(|slot| {
                (
                    crate::abi::keymgmt::table::<RsaKeyManagement<false>>(slot),
                    crate::abi::keymgmt::table::<RsaKeyManagement<true>>(slot),
                )
            })
            .collect()
    });

/// The (RSA, RSA-PSS) key management tables of instance slot `slot`.
pub fn keymgmt_tables(
    slot: usize,
) -> (&'static Table<OSSL_DISPATCH>, &'static Table<OSSL_DISPATCH>) {
    let (rsa, pss) = &SLOT_TABLES[slot];
    (rsa, pss)
}
