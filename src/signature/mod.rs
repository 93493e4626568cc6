//! RSA signature: sign / verify / verify_recover, digest sign/verify, context parameters.
//! Paddings: PKCS#1 v1.5 (RFC 8017 §8.2), PSS (§8.1), ANSI X9.31, none.
//!
//! Also the composite algorithms OpenSSL 3.4 added (`RSA-SHA256` and the like: PKCS#1 v1.5
//! with a fixed digest, used through `EVP_PKEY_sign_message_*` / `EVP_PKEY_verify_message_*`
//! or `EVP_PKEY_sign` on a digest), listed only on 3.4+ cores: [`composite`].
//!
//! Safe Rust behind the [`Signature`] and `SignatureAlgorithm` traits; the C side is
//! `abi::signature`.

use crate::abi::key::KeyObj;
use crate::abi::signature::{Operation, Signature, SignatureCtx};
use crate::abi::{CtxParams, Duplicate, OpCtx, Table};
use crate::error::KaeError;
use crate::ffi::bn::{arith, BigNum};
use crate::ffi::core::Failure;
use crate::ffi::digest::MdCtx;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::libcrypto::Digest;
use crate::rsa::padding::pss::SaltLen;
use crate::rsa::padding::{pkcs1, pss, x931, DigestId};
use crate::rsa::{KeyType, PadMode, RsaKey};
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

mod composite;
pub use composite::{sigalg_tables, SigAlg, SigAlgCtx};

pub struct SigCtx {
    prov: Arc<ProvCtx>,
    key: Option<Arc<RsaKey>>,
    op: Operation,
    pad: PadMode,
    md: Option<Digest>,
    mgf1: Option<Digest>,
    saltlen: SaltLen,
    propq: Option<String>,
    mgf1_propq: Option<String>,
    /// Running digest of digest_sign/digest_verify.
    md_ctx: Option<MdCtx>,
    /// The digest may not change once digest-sign has started.
    md_locked: bool,
    /// Set by a composite algorithm's init: the digest is fixed, the padding PKCS#1 v1.5, and
    /// the only settable parameter is `signature` (verify-message).
    sigalg: Option<&'static SigAlg>,
    /// Which calls may come next in a composite operation (as the default provider's
    /// flag_allow_update / _final / _oneshot): a final ends the operation, an update rules
    /// out the one-shot call.
    allow_update: bool,
    allow_final: bool,
    allow_oneshot: bool,
    /// The signature verify-message checks (the `signature` parameter).
    sig: Option<Vec<u8>>,
}

impl SigCtx {
    fn key(&self) -> Result<&RsaKey, KaeError> {
        self.key.as_deref().ok_or(KaeError::MissingKey)
    }

    fn init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init_key(key, op)?;
        self.set_sig_params(params)
    }

    /// The part of init common to the plain and the composite algorithms: key, operation,
    /// padding and digests from the key type.
    fn init_key(&mut self, key: Option<&KeyObj>, op: Operation) -> Result<(), Failure> {
        if let Some(obj) = key {
            self.key = Some(obj.key.clone());
        }
        let key = self.key.clone().ok_or(KaeError::MissingKey)?;
        if !key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        if matches!(op, Operation::Sign | Operation::SignMessage) && !key.has_private() {
            return Err(KaeError::MissingPrivateKey.into());
        }
        self.op = op;
        self.md_ctx = None;
        self.md_locked = false;
        self.sigalg = None;
        self.allow_update = true;
        self.allow_final = true;
        self.allow_oneshot = true;
        self.sig = None;
        self.md = None;
        self.mgf1 = None;
        // The default provider's default: auto-digestmax from OpenSSL 3.1, auto (as long as
        // fits) before.
        self.saltlen = if self.prov.core_version.pss_auto_digestmax() {
            SaltLen::AutoDigestMax
        } else {
            SaltLen::Auto
        };
        match key.kind {
            KeyType::Rsa => self.pad = PadMode::Pkcs1,
            KeyType::RsaPss => {
                self.pad = PadMode::Pss;
                if let Some(r) = key.pss {
                    self.md = Some(self.prov.fetch_md(r.md.name(), None)?);
                    self.mgf1 = Some(self.prov.fetch_md(r.mgf1_md.name(), None)?);
                    self.saltlen = SaltLen::Fixed(r.min_saltlen);
                }
            }
        }
        Ok(())
    }

    /// The MGF1 digest (defaults to the message digest, RFC 8017 §9.1).
    fn mgf1_md(&self) -> Option<&Digest> {
        self.mgf1.as_ref().or(self.md.as_ref())
    }

    fn pss_md(&self) -> Result<&Digest, KaeError> {
        self.md.as_ref().ok_or(KaeError::InvalidDigest)
    }

    fn check_pss_restrictions(&self, saltlen: SaltLen) -> Result<(), Failure> {
        let key = self.key()?;
        if let Some(r) = key.pss {
            let min = r.min_saltlen;
            let ok = match saltlen {
                SaltLen::Fixed(n) => n >= min,
                SaltLen::Digest => self.md.as_ref().is_none_or(|m| m.size() >= min),
                _ => true,
            };
            if !ok {
                return Err(Failure::with(
                    KaeError::PssRestricted,
                    format!("salt length below the key's minimum {min}"),
                ));
            }
        }
        Ok(())
    }

    fn set_sig_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"pad-mode") {
            let mode = crate::rsa_params::pad_mode(&p)?;
            match mode {
                PadMode::Oaep | PadMode::Pkcs1Tls => {
                    return Err(Failure::with(
                        KaeError::InvalidPaddingMode,
                        "not a signature padding",
                    ))
                }
                PadMode::Pss => {}
                _ if self.key.as_ref().is_some_and(|k| k.kind == KeyType::RsaPss) => {
                    return Err(Failure::with(
                        KaeError::PssRestricted,
                        "RSA-PSS keys only sign with PSS",
                    ));
                }
                PadMode::X931
                    if self
                        .md
                        .as_ref()
                        .is_some_and(|m| m.id().x931_hash_id().is_none()) =>
                {
                    return Err(Failure::with(
                        KaeError::DigestNotAllowed,
                        "digest not allowed with X9.31",
                    ));
                }
                _ => {}
            }
            self.pad = mode;
        }
        let props = crate::ffi::params::opt_utf8(params, c"properties")?;
        if props.is_some() {
            self.propq = props.map(str::to_owned);
        }
        if let Some(p) = params.locate(c"digest") {
            let name = p.get_utf8()?;
            if self.md_locked {
                // libcrypto passes the digest again on some paths; accept the same one.
                let same = self
                    .md
                    .as_ref()
                    .is_some_and(|m| DigestId::from_name(name) == Some(m.id()));
                if !same {
                    return Err(Failure::with(
                        KaeError::InvalidParam,
                        "digest cannot change during digest sign/verify",
                    ));
                }
            } else {
                let md = self.prov.fetch_md(name, self.propq.as_deref())?;
                self.check_md_allowed(&md)?;
                self.md = Some(md);
            }
        }
        let mgf1_props = crate::ffi::params::opt_utf8(params, c"mgf1-properties")?;
        if mgf1_props.is_some() {
            self.mgf1_propq = mgf1_props.map(str::to_owned);
        }
        if let Some(p) = params.locate(c"mgf1-digest") {
            let name = p.get_utf8()?;
            let md = self.prov.fetch_md(name, self.mgf1_propq.as_deref())?;
            if let Some(r) = self.key.as_ref().and_then(|k| k.pss) {
                if r.mgf1_md != md.id() {
                    return Err(Failure::with(
                        KaeError::MgfDigestMismatch,
                        format!("mgf1-digest={name}"),
                    ));
                }
            }
            self.mgf1 = Some(md);
        }
        if let Some(p) = params.locate(c"saltlen") {
            let for_sign = matches!(self.op, Operation::Sign | Operation::SignMessage);
            let s = if p.data_type() == OSSL_PARAM_UTF8_STRING {
                let v = p.get_utf8()?;
                SaltLen::from_name(v, for_sign, self.prov.core_version.pss_auto_digestmax())
                    .map_err(|e| Failure::with(e, format!("saltlen={v}")))?
            } else {
                let v = p.get_int()?;
                SaltLen::from_openssl_int(v, for_sign, self.prov.core_version.pss_auto_digestmax())
                    .map_err(|e| Failure::with(e, format!("saltlen={v}")))?
            };
            if self.pad != PadMode::Pss {
                return Err(Failure::with(
                    KaeError::IllegalForPaddingMode,
                    "saltlen needs PSS padding",
                ));
            }
            self.check_pss_restrictions(s)?;
            self.saltlen = s;
        }
        Ok(())
    }

    fn check_md_allowed(&self, md: &Digest) -> Result<(), Failure> {
        if let Some(r) = self.key.as_ref().and_then(|k| k.pss) {
            if r.md != md.id() {
                return Err(Failure::with(
                    KaeError::DigestMismatch,
                    format!("digest {} not allowed by the key", md.id().name()),
                ));
            }
        }
        if self.pad == PadMode::X931 && md.id().x931_hash_id().is_none() {
            return Err(Failure::with(
                KaeError::DigestNotAllowed,
                "digest not allowed with X9.31",
            ));
        }
        if self.pad == PadMode::Pss && md.id() == DigestId::Md5Sha1 {
            return Err(Failure::with(
                KaeError::DigestNotAllowed,
                "MD5-SHA1 is not allowed with PSS",
            ));
        }
        Ok(())
    }

    fn check_tbs_len(&self, tbs: &[u8]) -> Result<(), KaeError> {
        if let Some(md) = &self.md {
            if tbs.len() != md.size() {
                return Err(KaeError::InvalidDigestLength);
            }
        }
        Ok(())
    }

    /// Signs `tbs` (a digest, or raw data when no digest is set) into `sig` (k bytes).
    fn sign_tbs(&self, tbs: &[u8], sig: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        let k = key.size();
        self.check_tbs_len(tbs)?;
        let mut em = Zeroizing::new(vec![0u8; k]);
        match self.pad {
            PadMode::Pkcs1 => match &self.md {
                Some(md) => pkcs1::encode_signature(md.id(), tbs, &mut em)?,
                None => pkcs1::encode_type1(tbs, &mut em)?,
            },
            PadMode::X931 => match &self.md {
                Some(md) => x931::encode_signature(md.id(), tbs, &mut em)?,
                None => x931::encode(tbs, &mut em)?,
            },
            PadMode::Pss => {
                let md = self.pss_md()?;
                let mgf1 = self.mgf1_md().ok_or(KaeError::InvalidDigest)?;
                self.check_pss_restrictions(self.saltlen)?;
                pss::encode(
                    md,
                    mgf1,
                    tbs,
                    self.saltlen,
                    key.bits(),
                    &self.prov.rng(),
                    &mut em,
                )?;
            }
            PadMode::None => {
                if tbs.len() != k {
                    return Err(Failure::with(
                        KaeError::InvalidLength,
                        format!("raw signing needs exactly {k} bytes"),
                    ));
                }
                em.copy_from_slice(tbs);
            }
            PadMode::Oaep | PadMode::Pkcs1Tls => return Err(KaeError::InvalidPaddingMode.into()),
        }
        let key_ref = self.key.clone().ok_or(KaeError::MissingKey)?;
        crate::offload::private_op(&key_ref, &em, sig)?;
        if self.pad == PadMode::X931 {
            x931_min(key, sig)?;
        }
        Ok(())
    }

    /// RSAVP1 of a signature (k bytes) into `em`, with the X9.31 sign convention undone.
    fn open(&self, sig: &[u8], em: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        let k = key.size();
        if sig.len() != k {
            return Err(Failure::with(
                KaeError::WrongSignatureLength,
                format!("got {}, want {k}", sig.len()),
            ));
        }
        let key_ref = self.key.clone().ok_or(KaeError::MissingKey)?;
        crate::offload::public_op(&key_ref, sig, em)?;
        if self.pad == PadMode::X931 && em[k - 1] & 0x0f != 0x0c {
            // X9.31 signatures are min(s, n - s): the representative ends in 0xC either way.
            let v = BigNum::from_be_bytes(em, false)?;
            let mut r = BigNum::new()?;
            arith::sub(&mut r, key.n()?, &v)?;
            r.write_be_padded(em)?;
        }
        Ok(())
    }

    fn verify_tbs(&self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure> {
        let key = self.key()?;
        self.check_tbs_len(tbs)?;
        let mut em = vec![0u8; key.size()];
        self.open(sig, &mut em)?;
        match self.pad {
            PadMode::Pkcs1 => match &self.md {
                Some(md) => pkcs1::verify_signature(md.id(), tbs, &em)?,
                None => {
                    let payload = pkcs1::unpad_type1(&em)?;
                    if payload != tbs {
                        return Err(KaeError::BadSignature.into());
                    }
                }
            },
            PadMode::X931 => match &self.md {
                Some(md) => x931::verify_signature(md.id(), tbs, &em)?,
                None => {
                    if x931::unpad(&em)? != tbs {
                        return Err(KaeError::BadSignature.into());
                    }
                }
            },
            PadMode::Pss => {
                let md = self.pss_md()?;
                let mgf1 = self.mgf1_md().ok_or(KaeError::InvalidDigest)?;
                let salt = pss::verify(md, mgf1, tbs, self.saltlen, key.bits(), &em)?;
                if let Some(r) = key.pss {
                    if salt < r.min_saltlen {
                        return Err(KaeError::PssRestricted.into());
                    }
                }
            }
            PadMode::None => {
                if tbs.len() != em.len() || tbs != em.as_slice() {
                    return Err(KaeError::BadSignature.into());
                }
            }
            PadMode::Oaep | PadMode::Pkcs1Tls => return Err(KaeError::InvalidPaddingMode.into()),
        }
        Ok(())
    }

    /// Recovers the signed data: the digest (when one is set) or the whole payload.
    fn recover(&self, sig: &[u8]) -> Result<Vec<u8>, Failure> {
        let key = self.key()?;
        let mut em = vec![0u8; key.size()];
        self.open(sig, &mut em)?;
        Ok(match self.pad {
            PadMode::Pkcs1 => {
                if self.md.as_ref().is_some_and(|m| m.id() == DigestId::Sm3) {
                    // The default provider cannot recover an SM3 digest (its table of digest
                    // sizes for recovery has no SM3), so neither does kae.
                    return Err(Failure::with(
                        KaeError::InvalidDigest,
                        "verify-recover does not support SM3",
                    ));
                }
                let payload = pkcs1::unpad_type1(&em)?;
                match &self.md {
                    Some(md) => pkcs1::strip_digest_info(md.id(), payload)?.to_vec(),
                    None => payload.to_vec(),
                }
            }
            PadMode::X931 => {
                let data = x931::unpad(&em)?;
                match &self.md {
                    Some(md) => {
                        let (id, hash) = data.split_last().ok_or(KaeError::InvalidDigestLength)?;
                        if Some(*id) != md.id().x931_hash_id() || hash.len() != md.size() {
                            return Err(KaeError::BadSignature.into());
                        }
                        hash.to_vec()
                    }
                    None => data.to_vec(),
                }
            }
            PadMode::None => em,
            PadMode::Pss | PadMode::Oaep | PadMode::Pkcs1Tls => {
                return Err(KaeError::IllegalForPaddingMode.into())
            }
        })
    }

    /// The salt length a PSS signature made now would carry (for algorithm-id and gets).
    fn effective_saltlen(&self) -> Result<usize, KaeError> {
        let md = self.pss_md()?;
        let bits = self.key()?.bits();
        pss::sign_salt_len(self.saltlen, md.size(), bits)
    }

    fn algorithm_id(&self) -> Result<Vec<u8>, KaeError> {
        use crate::rsa::padding::der;
        match self.pad {
            PadMode::Pkcs1 => {
                let md = self.md.as_ref().ok_or(KaeError::InvalidDigest)?;
                der::pkcs1_signature_alg_id(md.id()).ok_or(KaeError::DigestNotAllowed)
            }
            PadMode::Pss => {
                let md = self.pss_md()?;
                let mgf1 = self.mgf1_md().ok_or(KaeError::InvalidDigest)?;
                Ok(der::pss_alg_id(
                    md.id(),
                    mgf1.id(),
                    self.effective_saltlen()?,
                ))
            }
            _ => Err(KaeError::IllegalForPaddingMode),
        }
    }

    fn get_sig_params(&self, ps: &mut ParamsMut<'_>) -> Result<(), KaeError> {
        if let Some(mut p) = ps.locate(c"algorithm-id") {
            p.set_octets(&self.algorithm_id()?)?;
        }
        if let Some(mut p) = ps.locate(c"pad-mode") {
            if p.data_type() == OSSL_PARAM_INTEGER || p.data_type() == OSSL_PARAM_UNSIGNED_INTEGER {
                p.set_int(self.pad as i32)?;
            } else {
                p.set_utf8(self.pad.cname())?;
            }
        }
        // A composite reports its digest by the name the default provider uses for it.
        let md_name = |md: &Digest| match self.sigalg {
            Some(a) => a.md_name,
            None => crate::rsa::digest_cname(md.id()),
        };
        if let Some(mut p) = ps.locate(c"digest") {
            if let Some(md) = &self.md {
                p.set_utf8(md_name(md))?;
            }
        }
        if let Some(mut p) = ps.locate(c"mgf1-digest") {
            if let Some(md) = self.mgf1_md() {
                p.set_utf8(md_name(md))?;
            }
        }
        if let Some(mut p) = ps.locate(c"saltlen") {
            let as_int = match self.saltlen {
                SaltLen::Digest => -1,
                SaltLen::Auto => -2,
                SaltLen::Max => -3,
                SaltLen::AutoDigestMax => -4,
                SaltLen::Fixed(n) => n as i32,
            };
            if p.data_type() == OSSL_PARAM_INTEGER {
                p.set_int(as_int)?;
            } else {
                let s = match self.saltlen {
                    SaltLen::Digest => "digest".to_owned(),
                    SaltLen::Auto => "auto".to_owned(),
                    SaltLen::Max => "max".to_owned(),
                    SaltLen::AutoDigestMax => "auto-digestmax".to_owned(),
                    SaltLen::Fixed(n) => n.to_string(),
                };
                p.set_utf8_owned(&s)?;
            }
        }
        Ok(())
    }

    fn try_clone(&self) -> Result<SigCtx, KaeError> {
        Ok(SigCtx {
            prov: self.prov.clone(),
            key: self.key.clone(),
            op: self.op,
            pad: self.pad,
            md: self.md.clone(),
            mgf1: self.mgf1.clone(),
            saltlen: self.saltlen,
            propq: self.propq.clone(),
            mgf1_propq: self.mgf1_propq.clone(),
            md_ctx: self.md_ctx.as_ref().map(|c| c.try_clone()).transpose()?,
            md_locked: self.md_locked,
            sigalg: self.sigalg,
            allow_update: self.allow_update,
            allow_final: self.allow_final,
            allow_oneshot: self.allow_oneshot,
            sig: self.sig.clone(),
        })
    }

    fn digest_init(
        &mut self,
        mdname: Option<&str>,
        key: Option<&KeyObj>,
        params: &Params<'_>,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init(key, params, op)?;
        if let Some(name) = mdname {
            let md = self.prov.fetch_md(name, self.propq.as_deref())?;
            self.check_md_allowed(&md)?;
            self.md = Some(md);
        }
        if self.md.is_none() {
            self.md = Some(self.prov.fetch_md("SHA256", self.propq.as_deref())?);
        }
        let mut ctx = MdCtx::new()?;
        ctx.init(self.md.as_ref().ok_or(KaeError::InvalidDigest)?.md())?;
        self.md_ctx = Some(ctx);
        self.md_locked = true;
        Ok(())
    }

    fn digest_final(&mut self) -> Result<Zeroizing<Vec<u8>>, KaeError> {
        let md = self.md.as_ref().ok_or(KaeError::OperationNotInitialized)?;
        let ctx = self
            .md_ctx
            .as_mut()
            .ok_or(KaeError::OperationNotInitialized)?;
        let mut h = Zeroizing::new(vec![0u8; md.size()]);
        ctx.finalize(&mut h)?;
        Ok(h)
    }
}

/// X9.31 signatures carry min(s, n − s) (public values; variable time is fine).
fn x931_min(key: &RsaKey, sig: &mut [u8]) -> Result<(), KaeError> {
    let s = BigNum::from_be_bytes(sig, false)?;
    let mut t = BigNum::new()?;
    arith::sub(&mut t, key.n()?, &s)?;
    if s.cmp_vartime(&t) == core::cmp::Ordering::Greater {
        t.write_be_padded(sig)?;
    }
    Ok(())
}

static GETTABLE: ParamTable<6> = ParamTable([
    desc(c"algorithm-id", OSSL_PARAM_OCTET_STRING),
    desc(c"pad-mode", OSSL_PARAM_UTF8_STRING),
    desc(c"digest", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
    desc(c"saltlen", OSSL_PARAM_UTF8_STRING),
    END,
]);

static SETTABLE: ParamTable<7> = ParamTable([
    desc(c"pad-mode", OSSL_PARAM_UTF8_STRING),
    desc(c"digest", OSSL_PARAM_UTF8_STRING),
    desc(c"properties", OSSL_PARAM_UTF8_STRING),
    desc(c"saltlen", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-properties", OSSL_PARAM_UTF8_STRING),
    END,
]);

impl OpCtx for SigCtx {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        Ok(SigCtx {
            prov,
            key: None,
            op: Operation::Sign,
            pad: PadMode::Pkcs1,
            md: None,
            mgf1: None,
            saltlen: SaltLen::Auto,
            propq: None,
            mgf1_propq: None,
            md_ctx: None,
            md_locked: false,
            sigalg: None,
            allow_update: true,
            allow_final: true,
            allow_oneshot: true,
            sig: None,
        })
    }

    fn provider(&self) -> &ProvCtx {
        &self.prov
    }
}

impl Duplicate for SigCtx {
    fn dup(&self) -> Result<Self, Failure> {
        Ok(self.try_clone()?)
    }
}

impl SignatureCtx for SigCtx {
    fn set_properties(&mut self, propq: Option<&str>) {
        self.propq = propq.map(str::to_owned);
    }

    fn sign_size(&self) -> Result<usize, Failure> {
        Ok(self.key()?.size())
    }

    fn verify_recover_size(&self) -> Result<usize, Failure> {
        Ok(self.key()?.size())
    }

    fn verify_recover(&mut self, sig: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
        self.recover(sig).map(Zeroizing::new)
    }
}

impl CtxParams for SigCtx {
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.set_sig_params(params)
    }

    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        Ok(self.get_sig_params(params)?)
    }

    fn settable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &SETTABLE.0
    }

    fn gettable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &GETTABLE.0
    }
}

impl Signature for SigCtx {
    fn sign_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure> {
        self.init(key, params, Operation::Sign)
    }

    fn verify_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure> {
        self.init(key, params, Operation::Verify)
    }

    fn verify_recover_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.init(key, params, Operation::VerifyRecover)
    }

    fn sign(&mut self, tbs: &[u8], sig: &mut [u8]) -> Result<usize, Failure> {
        self.sign_tbs(tbs, sig)?;
        Ok(sig.len())
    }

    fn verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure> {
        self.verify_tbs(sig, tbs)
    }

    fn digest_sign_init(
        &mut self,
        md: Option<&str>,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.digest_init(md, key, params, Operation::Sign)
    }

    fn digest_verify_init(
        &mut self,
        md: Option<&str>,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.digest_init(md, key, params, Operation::Verify)
    }

    fn digest_update(&mut self, data: &[u8]) -> Result<(), Failure> {
        self.md_ctx
            .as_mut()
            .ok_or(KaeError::OperationNotInitialized)?
            .update(data)?;
        Ok(())
    }

    fn end_digest(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure> {
        Ok(self.digest_final()?)
    }

    fn digest_verify_final(&mut self, sig: &[u8]) -> Result<(), Failure> {
        let h = self.digest_final()?;
        self.verify_tbs(sig, &h)
    }

    fn get_md_params(&mut self, params: &mut ParamsMut<'_>) -> bool {
        self.md_ctx.as_mut().is_some_and(|m| m.get_params(params))
    }

    fn set_md_params(&mut self, params: &Params<'_>) -> bool {
        self.md_ctx.as_mut().is_some_and(|m| m.set_params(params))
    }

    fn gettable_md_params(&self) -> Option<&'static [OSSL_PARAM]> {
        self.md.as_ref()?.md().gettable_ctx_params()
    }

    fn settable_md_params(&self) -> Option<&'static [OSSL_PARAM]> {
        self.md.as_ref()?.md().settable_ctx_params()
    }
}

pub static RSA_SIGNATURE: LazyLock<Table<OSSL_DISPATCH>> =
    LazyLock::new(crate::abi::signature::table::<SigCtx>);
