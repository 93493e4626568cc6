//! RSA signature: sign / verify / verify_recover, digest sign/verify, context parameters.
//! Paddings: PKCS#1 v1.5 (RFC 8017 §8.2), PSS (§8.1), ANSI X9.31, none.
//!
//! Also the composite algorithms OpenSSL 3.4 added (`RSA-SHA256` and the like: PKCS#1 v1.5
//! with a fixed digest, used through `EVP_PKEY_sign_message_*` / `EVP_PKEY_verify_message_*`
//! or `EVP_PKEY_sign` on a digest), listed only on 3.4+ cores; see "Composite algorithms".
//!
//! Safe Rust behind the [`Signature`] and [`SignatureAlgorithm`] traits; the C side is
//! `abi::signature`.
#![deny(unsafe_code)]

use crate::abi::key::KeyObj;
use crate::abi::signature::{KeyTypes, Operation, Signature, SignatureAlgorithm, SignatureCtx};
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
use core::ffi::CStr;
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

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

    fn fetch(&self, name: &str, props: Option<&str>) -> Result<Digest, Failure> {
        self.prov
            .fetch_md(name, props)
            .map_err(|e| Failure::with(e, format!("digest={name}")))
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
                    self.md = Some(self.fetch(r.md.name(), None)?);
                    self.mgf1 = Some(self.fetch(r.mgf1_md.name(), None)?);
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
                let md = self.fetch(name, self.propq.as_deref())?;
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
            let md = self.fetch(name, self.mgf1_propq.as_deref())?;
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
            let md = self.fetch(name, self.propq.as_deref())?;
            self.check_md_allowed(&md)?;
            self.md = Some(md);
        }
        if self.md.is_none() {
            self.md = Some(self.fetch("SHA256", self.propq.as_deref())?);
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

    fn digest_sign_final(&mut self, sig: &mut [u8]) -> Result<usize, Failure> {
        let h = self.digest_final()?;
        self.sign_tbs(&h, sig)?;
        Ok(sig.len())
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

// ---- Composite algorithms (OpenSSL 3.4+): RSA-SHA256 and the like -------------------------
//
// As the default provider's "sigalgs" (providers/implementations/signature/rsa_sig.c in 3.5):
// PKCS#1 v1.5 with the algorithm's digest. Init refuses RSA-PSS keys; the digest, the padding
// and the PSS parameters cannot be changed (set_ctx_params takes only `signature`, in
// verify-message, and the settable list is empty otherwise, so libcrypto refuses
// EVP_PKEY_CTX_set_rsa_padding & co.); sign/verify work on a digest of the digest's size,
// sign-message/verify-message hash the message; verify-recover returns the digest. There is
// no digest-sign and no digest context parameter access. After a final, the operation is over
// (update and final are refused), and after an update the one-shot call is refused.

/// One composite algorithm: its names (the default provider's, so the name map agrees), its
/// digest, and the digest name the default provider reports for it.
pub struct SigAlg {
    names: &'static CStr,
    md: DigestId,
    md_name: &'static CStr,
    descr: &'static CStr,
}

/// The default provider's composite RSA algorithms (3.5 `providers/defltprov.c`,
/// `prov/names.h`), in its order; kae's PKCS#1 signature supports each of these digests.
static SIGALGS: [SigAlg; 13] = [
    SigAlg {
        names: c"RSA-RIPEMD160:ripemd160WithRSA:1.3.36.3.3.1.2",
        md: DigestId::Ripemd160,
        md_name: c"RIPEMD160",
        descr: c"kae RSA-RIPEMD160 signature",
    },
    SigAlg {
        names: c"RSA-SHA1:RSA-SHA-1:sha1WithRSAEncryption:1.2.840.113549.1.1.5",
        md: DigestId::Sha1,
        md_name: c"SHA1",
        descr: c"kae RSA-SHA1 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-224:RSA-SHA224:sha224WithRSAEncryption:1.2.840.113549.1.1.14",
        md: DigestId::Sha224,
        md_name: c"SHA2-224",
        descr: c"kae RSA-SHA2-224 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-256:RSA-SHA256:sha256WithRSAEncryption:1.2.840.113549.1.1.11",
        md: DigestId::Sha256,
        md_name: c"SHA2-256",
        descr: c"kae RSA-SHA2-256 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-384:RSA-SHA384:sha384WithRSAEncryption:1.2.840.113549.1.1.12",
        md: DigestId::Sha384,
        md_name: c"SHA2-384",
        descr: c"kae RSA-SHA2-384 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512:RSA-SHA512:sha512WithRSAEncryption:1.2.840.113549.1.1.13",
        md: DigestId::Sha512,
        md_name: c"SHA2-512",
        descr: c"kae RSA-SHA2-512 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512/224:RSA-SHA512-224:sha512-224WithRSAEncryption:1.2.840.113549.1.1.15",
        md: DigestId::Sha512_224,
        md_name: c"SHA2-512/224",
        descr: c"kae RSA-SHA2-512/224 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512/256:RSA-SHA512-256:sha512-256WithRSAEncryption:1.2.840.113549.1.1.16",
        md: DigestId::Sha512_256,
        md_name: c"SHA2-512/256",
        descr: c"kae RSA-SHA2-512/256 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-224:id-rsassa-pkcs1-v1_5-with-sha3-224:2.16.840.1.101.3.4.3.13",
        md: DigestId::Sha3_224,
        md_name: c"SHA3-224",
        descr: c"kae RSA-SHA3-224 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-256:id-rsassa-pkcs1-v1_5-with-sha3-256:2.16.840.1.101.3.4.3.14",
        md: DigestId::Sha3_256,
        md_name: c"SHA3-256",
        descr: c"kae RSA-SHA3-256 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-384:id-rsassa-pkcs1-v1_5-with-sha3-384:2.16.840.1.101.3.4.3.15",
        md: DigestId::Sha3_384,
        md_name: c"SHA3-384",
        descr: c"kae RSA-SHA3-384 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-512:id-rsassa-pkcs1-v1_5-with-sha3-512:2.16.840.1.101.3.4.3.16",
        md: DigestId::Sha3_512,
        md_name: c"SHA3-512",
        descr: c"kae RSA-SHA3-512 signature",
    },
    SigAlg {
        names: c"RSA-SM3:sm3WithRSAEncryption:1.2.156.10197.1.504",
        md: DigestId::Sm3,
        md_name: c"SM3",
        descr: c"kae RSA-SM3 signature",
    },
];

impl SigCtx {
    /// Init of composite `alg` for `op` (sign, sign-message, verify, verify-message,
    /// verify-recover).
    fn sigalg_init(
        &mut self,
        alg: &'static SigAlg,
        key: Option<&KeyObj>,
        params: &Params<'_>,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init_key(key, op)?;
        // The default provider applies the init parameters (only `signature` counts) first.
        self.sigalg_set_params(params)?;
        if self.key()?.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "composite RSA signature algorithms do not take RSA-PSS keys",
            ));
        }
        let md = self.fetch(alg.md.name(), self.propq.as_deref())?;
        let mut ctx = MdCtx::new()?;
        ctx.init(md.md())?;
        self.md = Some(md);
        self.mgf1 = None; // follows the digest, as in the default provider
        self.pad = PadMode::Pkcs1;
        self.saltlen = SaltLen::AutoDigestMax; // what the default provider reports
        self.md_ctx = Some(ctx);
        self.md_locked = true;
        self.sigalg = Some(alg);
        Ok(())
    }

    /// set_ctx_params of a composite: `signature` in verify-message; anything else is
    /// ignored (the settable list does not offer it).
    fn sigalg_set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if self.op != Operation::VerifyMessage {
            return Ok(());
        }
        if let Some(p) = params.locate(c"signature") {
            self.sig = None;
            if p.data_type() != OSSL_PARAM_OCTET_STRING {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    "signature must be an octet string",
                ));
            }
            self.sig = Some(p.get_octets()?.to_vec());
        }
        Ok(())
    }

    fn message_update(&mut self, data: &[u8]) -> Result<(), Failure> {
        let ctx = self
            .md_ctx
            .as_mut()
            .ok_or(KaeError::OperationNotInitialized)?;
        if !self.allow_update {
            return Err(Failure::with(
                KaeError::OperationNotInitialized,
                "update call out of order (the operation has ended)",
            ));
        }
        self.allow_oneshot = false;
        ctx.update(data)?;
        Ok(())
    }

    /// The final digest; ends the operation (no update, final or one-shot call after it).
    fn message_digest(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure> {
        self.check_final()?;
        let h = self.digest_final()?;
        self.allow_update = false;
        self.allow_final = false;
        self.allow_oneshot = false;
        Ok(h)
    }

    /// Refuses a final call before init or once the operation has ended.
    fn check_final(&self) -> Result<(), Failure> {
        if self.md_ctx.is_none() {
            return Err(KaeError::OperationNotInitialized.into());
        }
        if !self.allow_final {
            return Err(Failure::with(
                KaeError::OperationNotInitialized,
                "final call out of order (the operation has ended)",
            ));
        }
        Ok(())
    }

    fn check_oneshot(&self) -> Result<(), Failure> {
        if self.allow_oneshot {
            Ok(())
        } else {
            Err(Failure::with(
                KaeError::OperationNotInitialized,
                "one-shot call out of order (after update or final)",
            ))
        }
    }

    fn verify_message_final(&mut self) -> Result<(), Failure> {
        let h = self.message_digest()?;
        let sig = self.sig.clone().unwrap_or_default();
        self.verify_tbs(&sig, &h)
    }
}

static SIGALG_SETTABLE: ParamTable<2> =
    ParamTable([desc(c"signature", OSSL_PARAM_OCTET_STRING), END]);

static SIGALG_KEY_TYPES: KeyTypes = KeyTypes::one(c"RSA");

/// A context of the composite algorithm `SIGALGS[I]`.
pub struct SigAlgCtx<const I: usize>(SigCtx);

impl<const I: usize> OpCtx for SigAlgCtx<I> {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        SigCtx::new(prov).map(SigAlgCtx)
    }

    fn provider(&self) -> &ProvCtx {
        &self.0.prov
    }
}

impl<const I: usize> Duplicate for SigAlgCtx<I> {
    fn dup(&self) -> Result<Self, Failure> {
        self.0.dup().map(SigAlgCtx)
    }
}

impl<const I: usize> SignatureCtx for SigAlgCtx<I> {
    fn set_properties(&mut self, propq: Option<&str>) {
        self.0.set_properties(propq)
    }

    fn sign_size(&self) -> Result<usize, Failure> {
        self.0.sign_size()
    }

    fn verify_recover_size(&self) -> Result<usize, Failure> {
        self.0.verify_recover_size()
    }

    fn verify_recover(&mut self, sig: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
        SignatureCtx::verify_recover(&mut self.0, sig)
    }
}

impl<const I: usize> SignatureAlgorithm for SigAlgCtx<I> {
    fn init(
        &mut self,
        op: Operation,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.0.sigalg_init(&SIGALGS[I], key, params, op)
    }

    fn oneshot_sign_size(&self) -> Result<usize, Failure> {
        self.0.check_oneshot()?;
        if self.0.op == Operation::SignMessage {
            self.0.check_final()?;
        }
        self.0.sign_size()
    }

    fn oneshot_sign(&mut self, tbs: &[u8], sig: &mut [u8]) -> Result<usize, Failure> {
        if self.0.op == Operation::SignMessage {
            self.0.message_update(tbs)?;
            return self.sign_message_final(sig);
        }
        self.0.sign_tbs(tbs, sig)?;
        Ok(sig.len())
    }

    fn message_update(&mut self, data: &[u8]) -> Result<(), Failure> {
        self.0.message_update(data)
    }

    /// A size query leaves the running digest alone.
    fn sign_message_final_size(&self) -> Result<usize, Failure> {
        self.0.check_final()?;
        self.0.sign_size()
    }

    fn sign_message_final(&mut self, sig: &mut [u8]) -> Result<usize, Failure> {
        let h = self.0.message_digest()?;
        self.0.sign_tbs(&h, sig)?;
        Ok(sig.len())
    }

    fn oneshot_verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure> {
        self.0.check_oneshot()?;
        if self.0.op == Operation::VerifyMessage {
            self.0.sig = Some(sig.to_vec());
            self.0.message_update(tbs)?;
            return self.0.verify_message_final();
        }
        self.0.verify_tbs(sig, tbs)
    }

    fn verify_message_final(&mut self) -> Result<(), Failure> {
        self.0.verify_message_final()
    }

    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        Ok(self.0.get_sig_params(params)?)
    }

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.0.sigalg_set_params(params)
    }

    fn gettable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &GETTABLE.0
    }

    /// `signature` in verify-message, nothing otherwise (NULL, as the default provider).
    fn settable(ctx: Option<&Self>) -> Option<&'static [OSSL_PARAM]> {
        match ctx {
            Some(c) if c.0.op == Operation::VerifyMessage => Some(&SIGALG_SETTABLE.0),
            _ => None,
        }
    }

    fn key_types() -> &'static KeyTypes {
        &SIGALG_KEY_TYPES
    }
}

macro_rules! algorithm_tables {
    ($($i:literal),*) => {
        [$(LazyLock::new(crate::abi::signature::algorithm_table::<SigAlgCtx<$i>>)),*]
    };
}

static SIGALG_TABLES: [LazyLock<Table<OSSL_DISPATCH>>; 13] =
    algorithm_tables!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);

/// (names, dispatch table, description) of every composite algorithm, for the provider's
/// algorithm list on 3.4+ cores.
pub fn sigalg_tables(
) -> impl Iterator<Item = (&'static CStr, &'static Table<OSSL_DISPATCH>, &'static CStr)> {
    SIGALGS
        .iter()
        .zip(SIGALG_TABLES.iter())
        .map(|(a, t)| (a.names, &**t, a.descr))
}

#[cfg(test)]
mod sigalg_tests {
    use super::*;

    /// Each composite's digest is the one its names say, and each table's init functions are
    /// bound to their own entry (a table pointing at the wrong digest would sign with it).
    #[test]
    fn composite_names_and_digests_agree() {
        for (i, a) in SIGALGS.iter().enumerate() {
            let names = a.names.to_str().unwrap();
            let first = names.split(':').next().unwrap();
            let md = DigestId::from_name(a.md_name.to_str().unwrap()).unwrap();
            assert_eq!(md, a.md, "{first}: reported digest name");
            let want = first.strip_prefix("RSA-").unwrap();
            assert_eq!(
                DigestId::from_name(want)
                    .or_else(|| DigestId::from_name(&want.replace("SHA2-", "SHA-"))),
                Some(a.md),
                "{first}: names vs digest"
            );
            assert!(
                a.md.digest_info_prefix().is_some(),
                "{first}: PKCS#1 needs a DigestInfo"
            );
            let t = &SIGALG_TABLES[i];
            let init =
                t.0.iter()
                    .find(|d| d.function_id == OSSL_FUNC_SIGNATURE_SIGN_INIT)
                    .and_then(|d| d.function)
                    .unwrap();
            let want_init = sigalg_init_fn(i);
            assert_eq!(init as usize, want_init as usize, "{first}: table {i}");
        }
        assert_eq!(sigalg_tables().count(), SIGALGS.len());
    }

    /// The sign-init function of a table made for composite `i`.
    fn sigalg_init_fn(i: usize) -> unsafe extern "C" fn() {
        macro_rules! pick {
            ($($n:literal),*) => {
                match i {
                    $($n => crate::abi::signature::algorithm_table::<SigAlgCtx<$n>>(),)*
                    _ => unreachable!(),
                }
            };
        }
        pick!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
            .0
            .iter()
            .find(|d| d.function_id == OSSL_FUNC_SIGNATURE_SIGN_INIT)
            .and_then(|d| d.function)
            .unwrap()
    }
}
