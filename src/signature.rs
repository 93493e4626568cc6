//! RSA signature: sign / verify / verify_recover, digest sign/verify, context parameters.
//! Paddings: PKCS#1 v1.5 (RFC 8017 §8.2), PSS (§8.1), ANSI X9.31, none. Table at the bottom.
//!
//! Also the composite algorithms OpenSSL 3.4 added (`RSA-SHA256` and the like: PKCS#1 v1.5
//! with a fixed digest, used through `EVP_PKEY_sign_message_*` / `EVP_PKEY_verify_message_*`
//! or `EVP_PKEY_sign` on a digest), listed only on 3.4+ cores; see "Composite algorithms".

use crate::abi::key::KeyObj;
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::bn::{arith, BigNum};
use crate::ffi::core::with_ctx;
use crate::ffi::core::{opt_cstr, Failure};
use crate::ffi::digest::{Md, MdCtx};
use crate::ffi::guard_ptr;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provider::ProvCtx;
use crate::rsa::padding::pss::SaltLen;
use crate::rsa::padding::{pkcs1, pss, x931, DigestId};
use crate::rsa::{KeyType, PadMode, RsaKey};
use core::ffi::{c_char, c_int, c_uchar, c_void, CStr};
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Operation {
    Sign,
    Verify,
    VerifyRecover,
    /// `sign_message_init` of a composite algorithm (the message is hashed here).
    SignMessage,
    /// `verify_message_init` of a composite algorithm.
    VerifyMessage,
}

pub struct SigCtx {
    prov: Arc<ProvCtx>,
    key: Option<Arc<RsaKey>>,
    op: Operation,
    pad: PadMode,
    md: Option<Md>,
    mgf1: Option<Md>,
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

    fn fetch(&self, name: &str, props: Option<&str>) -> Result<Md, Failure> {
        // SAFETY: prov.libctx is this instance's child library context, created in init and
        // freed only at teardown; the digest lives in this operation context, which the core
        // frees before it tears the provider down.
        unsafe { Md::fetch(self.prov.libctx, name, props) }
            .map_err(|e| Failure::with(e, format!("digest={name}")))
    }

    fn init(
        &mut self,
        keydata: *mut c_void,
        params: *const OSSL_PARAM,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init_key(keydata, op)?;
        // SAFETY: params is what op_init got from the core: NULL or a terminated array valid for
        // this call (op_init's contract).
        self.set_params(&unsafe { Params::from_ptr(params) })
    }

    /// The part of init common to the plain and the composite algorithms: key, operation,
    /// padding and digests from the key type.
    fn init_key(&mut self, keydata: *mut c_void, op: Operation) -> Result<(), Failure> {
        // SAFETY: keydata is NULL (keep the current key) or one of our keys.
        if let Some(obj) = unsafe { KeyObj::from_ptr(keydata) } {
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
    fn mgf1_md(&self) -> Option<&Md> {
        self.mgf1.as_ref().or(self.md.as_ref())
    }

    fn pss_md(&self) -> Result<&Md, KaeError> {
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

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"pad-mode") {
            let mode = crate::provider::pad_mode(&p)?;
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
        let props = crate::provider::opt_utf8(params, c"properties")?;
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
        let mgf1_props = crate::provider::opt_utf8(params, c"mgf1-properties")?;
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

    fn check_md_allowed(&self, md: &Md) -> Result<(), Failure> {
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
    fn sign(&self, tbs: &[u8], sig: &mut [u8]) -> Result<(), Failure> {
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
        crate::pool::private_op(&key_ref, &em, sig)?;
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
        crate::pool::public_op(&key_ref, sig, em)?;
        if self.pad == PadMode::X931 && em[k - 1] & 0x0f != 0x0c {
            // X9.31 signatures are min(s, n - s): the representative ends in 0xC either way.
            let v = BigNum::from_be_bytes(em, false)?;
            let mut r = BigNum::new()?;
            arith::sub(&mut r, key.n()?, &v)?;
            r.write_be_padded(em)?;
        }
        Ok(())
    }

    fn verify(&self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure> {
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
    fn verify_recover(&self, sig: &[u8]) -> Result<Vec<u8>, Failure> {
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

    fn get_params(&self, ps: &mut ParamsMut<'_>) -> Result<(), KaeError> {
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
        let md_name = |md: &Md| match self.sigalg {
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
        keydata: *mut c_void,
        params: *const OSSL_PARAM,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init(keydata, params, op)?;
        if let Some(name) = mdname {
            let md = self.fetch(name, self.propq.as_deref())?;
            self.check_md_allowed(&md)?;
            self.md = Some(md);
        }
        if self.md.is_none() {
            self.md = Some(self.fetch("SHA256", self.propq.as_deref())?);
        }
        let mut ctx = MdCtx::new()?;
        ctx.init(self.md.as_ref().ok_or(KaeError::InvalidDigest)?)?;
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

// ---- extern "C" functions -----------------------------------------------------------------

/// # Safety
/// `p` is NULL or a context created by `rsa_sig_newctx`.
unsafe fn ctx_mut<'a>(p: *mut c_void) -> Option<&'a mut SigCtx> {
    // SAFETY: per the caller's contract p is NULL or a live Box<SigCtx> leaked by newctx/dupctx;
    // the core never uses one operation context from two threads at once, so this borrow is unique.
    unsafe { p.cast::<SigCtx>().as_mut() }
}

impl crate::ffi::core::HasCore for SigCtx {
    fn core(&self) -> crate::ffi::core::Core {
        self.prov.core
    }
}

unsafe extern "C" fn rsa_sig_newctx(provctx: *mut c_void, propq: *const c_char) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    // SAFETY: the core passes propq as NULL or a NUL-terminated string valid for this call; it is
    // copied before we return.
    let propq = unsafe { opt_cstr(propq) }.map(str::to_owned);
    guard_ptr(Some(&core), || -> Result<*mut c_void, KaeError> {
        let ctx = SigCtx {
            prov,
            key: None,
            op: Operation::Sign,
            pad: PadMode::Pkcs1,
            md: None,
            mgf1: None,
            saltlen: SaltLen::Auto,
            propq,
            mgf1_propq: None,
            md_ctx: None,
            md_locked: false,
            sigalg: None,
            allow_update: true,
            allow_final: true,
            allow_oneshot: true,
            sig: None,
        };
        Ok(Box::into_raw(Box::new(ctx)).cast())
    })
}

unsafe extern "C" fn rsa_sig_freectx(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: ctx is the Box<SigCtx> our newctx/dupctx leaked; the core calls freectx once and
        // never uses ctx after it.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ctx.cast::<SigCtx>()) }));
    }
}

unsafe extern "C" fn rsa_sig_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null_mut();
    };
    let core = c.prov.core;
    guard_ptr(Some(&core), || {
        c.try_clone().map(|n| Box::into_raw(Box::new(n)).cast())
    })
}

/// # Safety
/// `ctx` is NULL or a context our newctx/dupctx returned that the core has not freed and no
/// other thread uses during the call; `key` is NULL or a keydata the core got from a key
/// management (at least 8 readable, aligned bytes, as `KeyObj::from_ptr` asks); `params` is
/// NULL or a terminated OSSL_PARAM array valid for the call.
unsafe fn op_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
    op: Operation,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.init(key, params, op).map(|_| 1)
    })
}

unsafe extern "C" fn rsa_sign_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet op_init's contract.
    unsafe { op_init(ctx, key, params, Operation::Sign) }
}
unsafe extern "C" fn rsa_verify_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet op_init's contract.
    unsafe { op_init(ctx, key, params, Operation::Verify) }
}
unsafe extern "C" fn rsa_verify_recover_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet op_init's contract.
    unsafe { op_init(ctx, key, params, Operation::VerifyRecover) }
}

/// Writes a signature of k bytes into the caller's buffer (or reports the size when NULL).
///
/// # Safety
/// `out` is NULL or valid for `outsize` bytes; `outlen` valid.
unsafe fn sign_into(
    c: &SigCtx,
    out: *mut c_uchar,
    outlen: *mut usize,
    outsize: usize,
    f: impl FnOnce(&mut [u8]) -> Result<(), Failure>,
) -> Result<c_int, Failure> {
    let k = c.key()?.size();
    if outlen.is_null() {
        return Err(KaeError::NullParameter.into());
    }
    if out.is_null() {
        // SAFETY: outlen is non-NULL (checked above) and writable by this function's contract.
        unsafe { *outlen = k };
        return Ok(1);
    }
    if outsize < k {
        return Err(Failure::with(
            KaeError::BufferTooSmall,
            format!("need {k} bytes, have {outsize}"),
        ));
    }
    let mut sig = vec![0u8; k];
    f(&mut sig)?;
    // SAFETY: out is non-NULL and valid for outsize bytes by this function's contract, and outsize
    // >= k (checked above); sig is our own buffer, so the copy does not overlap.
    unsafe {
        core::ptr::copy_nonoverlapping(sig.as_ptr(), out, k);
        *outlen = k;
    }
    Ok(1)
}

unsafe extern "C" fn rsa_sign(
    ctx: *mut c_void,
    sig: *mut c_uchar,
    siglen: *mut usize,
    sigsize: usize,
    tbs: *const c_uchar,
    tbslen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        // SAFETY: buffers from the caller, sizes as documented by provider-signature(7).
        unsafe {
            let tbs = crate::ffi::in_slice(tbs, tbslen)?;
            sign_into(c, sig, siglen, sigsize, |out| c.sign(tbs, out))
        }
    })
}

unsafe extern "C" fn rsa_verify(
    ctx: *mut c_void,
    sig: *const c_uchar,
    siglen: usize,
    tbs: *const c_uchar,
    tbslen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        // SAFETY: sig and tbs are the core's input buffers of siglen and tbslen bytes, valid and
        // not written during this call, as in_slice asks.
        let (sig, tbs) = unsafe {
            (
                crate::ffi::in_slice(sig, siglen)?,
                crate::ffi::in_slice(tbs, tbslen)?,
            )
        };
        c.verify(sig, tbs).map(|_| 1)
    })
}

unsafe extern "C" fn rsa_verify_recover(
    ctx: *mut c_void,
    rout: *mut c_uchar,
    routlen: *mut usize,
    routsize: usize,
    sig: *const c_uchar,
    siglen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        if routlen.is_null() {
            return Err(KaeError::NullParameter.into());
        }
        if rout.is_null() {
            // SAFETY: routlen is non-NULL (checked above); the core passes it writable.
            unsafe { *routlen = c.key()?.size() };
            return Ok(1);
        }
        // SAFETY: sig is the core's input of siglen bytes, valid and not written during this call.
        let sig = unsafe { crate::ffi::in_slice(sig, siglen)? };
        let data = c.verify_recover(sig)?;
        if data.len() > routsize {
            return Err(KaeError::BufferTooSmall.into());
        }
        // SAFETY: rout valid for routsize ≥ data.len() bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), rout, data.len());
            *routlen = data.len();
        }
        Ok(1)
    })
}

/// # Safety
/// As [`op_init`]; `mdname` is NULL or a NUL-terminated string valid for the call.
unsafe fn digest_op_init(
    ctx: *mut c_void,
    mdname: *const c_char,
    key: *mut c_void,
    params: *const OSSL_PARAM,
    op: Operation,
) -> c_int {
    // SAFETY: mdname is NULL or a NUL-terminated string valid for this call (digest_op_init's
    // contract).
    let mdname = unsafe { opt_cstr(mdname) };
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.digest_init(mdname, key, params, op).map(|_| 1)
    })
}

unsafe extern "C" fn rsa_digest_sign_init(
    ctx: *mut c_void,
    mdname: *const c_char,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet digest_op_init's contract.
    unsafe { digest_op_init(ctx, mdname, key, params, Operation::Sign) }
}
unsafe extern "C" fn rsa_digest_verify_init(
    ctx: *mut c_void,
    mdname: *const c_char,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet digest_op_init's contract.
    unsafe { digest_op_init(ctx, mdname, key, params, Operation::Verify) }
}

unsafe extern "C" fn rsa_digest_update(
    ctx: *mut c_void,
    data: *const c_uchar,
    len: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, KaeError> {
        // SAFETY: data is the core's input of len bytes, valid and not written during this call.
        let data = unsafe { crate::ffi::in_slice(data, len)? };
        c.md_ctx
            .as_mut()
            .ok_or(KaeError::OperationNotInitialized)?
            .update(data)?;
        Ok(1)
    })
}

unsafe extern "C" fn rsa_digest_sign_final(
    ctx: *mut c_void,
    sig: *mut c_uchar,
    siglen: *mut usize,
    sigsize: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        if sig.is_null() {
            // Size query: must not consume the running digest.
            // SAFETY: sig is NULL and siglen is the core's length pointer (NULL or writable), as
            // sign_into asks.
            return unsafe { sign_into(c, sig, siglen, sigsize, |_| Ok(())) };
        }
        let h = c.digest_final()?;
        // SAFETY: sig is the core's output buffer of sigsize bytes and siglen its writable length
        // pointer (NULL is refused by sign_into), as sign_into asks.
        unsafe { sign_into(c, sig, siglen, sigsize, |out| c.sign(&h, out)) }
    })
}

unsafe extern "C" fn rsa_digest_verify_final(
    ctx: *mut c_void,
    sig: *const c_uchar,
    siglen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        let h = c.digest_final()?;
        // SAFETY: sig is the core's input of siglen bytes, valid and not written during this call.
        let sig = unsafe { crate::ffi::in_slice(sig, siglen)? };
        c.verify(sig, &h).map(|_| 1)
    })
}

unsafe extern "C" fn rsa_sig_get_ctx_params(ctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: params is the core's array, NULL or terminated and writable for this call.
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.get_params(&mut unsafe { ParamsMut::from_ptr(params) })
            .map(|_| 1)
    })
}

unsafe extern "C" fn rsa_sig_set_ctx_params(ctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: params is the core's array, NULL or terminated and valid for this call.
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.set_params(&unsafe { Params::from_ptr(params) })
            .map(|_| 1)
    })
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

unsafe extern "C" fn rsa_sig_gettable_ctx_params(
    _ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    GETTABLE.as_ptr()
}

unsafe extern "C" fn rsa_sig_settable_ctx_params(
    _ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    SETTABLE.as_ptr()
}

unsafe extern "C" fn rsa_sig_get_ctx_md_params(ctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return 0;
    };
    match &c.md_ctx {
        // SAFETY: m is the EVP_MD_CTX owned by this SigCtx, live while c is; params is the core's
        // array (NULL or terminated, valid for this call), passed on unchanged.
        Some(m) => unsafe { EVP_MD_CTX_get_params(m.as_ptr(), params) },
        None => 0,
    }
}

unsafe extern "C" fn rsa_sig_set_ctx_md_params(
    ctx: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return 0;
    };
    match &c.md_ctx {
        // SAFETY: m is the EVP_MD_CTX owned by this SigCtx, live while c is; params is the core's
        // array (NULL or terminated, valid for this call), passed on unchanged.
        Some(m) => unsafe { EVP_MD_CTX_set_params(m.as_ptr(), params) },
        None => 0,
    }
}

unsafe extern "C" fn rsa_sig_gettable_ctx_md_params(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null();
    };
    match &c.md {
        // SAFETY: md holds a reference to a fetched EVP_MD, live while c is; the table returned is
        // the digest's provider's static data.
        Some(md) => unsafe { EVP_MD_gettable_ctx_params(md.as_ptr()) },
        None => core::ptr::null(),
    }
}

unsafe extern "C" fn rsa_sig_settable_ctx_md_params(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null();
    };
    match &c.md {
        // SAFETY: md holds a reference to a fetched EVP_MD, live while c is; the table returned is
        // the digest's provider's static data.
        Some(md) => unsafe { EVP_MD_settable_ctx_params(md.as_ptr()) },
        None => core::ptr::null(),
    }
}

pub static RSA_SIGNATURE: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(|| {
    crate::dispatch![
        OSSL_FUNC_SIGNATURE_NEWCTX => rsa_sig_newctx as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN_INIT => rsa_sign_init as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_SIGN => rsa_sign as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_INIT => rsa_verify_init as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY => rsa_verify as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT => rsa_verify_recover_init as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_VERIFY_RECOVER => rsa_verify_recover as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT => rsa_digest_sign_init as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE => rsa_digest_update as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL => rsa_digest_sign_final as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_INIT => rsa_digest_verify_init as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_UPDATE => rsa_digest_update as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_FINAL => rsa_digest_verify_final as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_SIGNATURE_FREECTX => rsa_sig_freectx as unsafe extern "C" fn(_),
        OSSL_FUNC_SIGNATURE_DUPCTX => rsa_sig_dupctx as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS => rsa_sig_get_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS => rsa_sig_gettable_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS => rsa_sig_set_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS => rsa_sig_settable_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GET_CTX_MD_PARAMS => rsa_sig_get_ctx_md_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_GETTABLE_CTX_MD_PARAMS => rsa_sig_gettable_ctx_md_params as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_SIGNATURE_SET_CTX_MD_PARAMS => rsa_sig_set_ctx_md_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_SIGNATURE_SETTABLE_CTX_MD_PARAMS => rsa_sig_settable_ctx_md_params as unsafe extern "C" fn(_) -> _,
    ]
});

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
        keydata: *mut c_void,
        params: *const OSSL_PARAM,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init_key(keydata, op)?;
        // The default provider applies the init parameters (only `signature` counts) first.
        // SAFETY: params is what sigalg_op_init got from the core: NULL or a terminated array valid
        // for this call (its contract).
        self.sigalg_set_params(&unsafe { Params::from_ptr(params) })?;
        if self.key()?.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "composite RSA signature algorithms do not take RSA-PSS keys",
            ));
        }
        let md = self.fetch(alg.md.name(), self.propq.as_deref())?;
        let mut ctx = MdCtx::new()?;
        ctx.init(&md)?;
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
        if self.md_ctx.is_none() {
            return Err(KaeError::OperationNotInitialized.into());
        }
        if !self.allow_final {
            return Err(Failure::with(
                KaeError::OperationNotInitialized,
                "final call out of order (the operation has ended)",
            ));
        }
        let h = self.digest_final()?;
        self.allow_update = false;
        self.allow_final = false;
        self.allow_oneshot = false;
        Ok(h)
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
        self.verify(&sig, &h)
    }
}

/// sign_message_final: the signature of the hashed message, or its size when `sig` is NULL
/// (which leaves the running digest alone).
///
/// # Safety
/// As [`sign_into`].
unsafe fn sign_message_final_into(
    c: &mut SigCtx,
    sig: *mut c_uchar,
    siglen: *mut usize,
    sigsize: usize,
) -> Result<c_int, Failure> {
    if c.md_ctx.is_none() {
        return Err(KaeError::OperationNotInitialized.into());
    }
    if !c.allow_final {
        return Err(Failure::with(
            KaeError::OperationNotInitialized,
            "final call out of order (the operation has ended)",
        ));
    }
    if sig.is_null() {
        // SAFETY: sig is NULL and siglen, sigsize are this function's arguments, under sign_into's
        // contract.
        return unsafe { sign_into(c, sig, siglen, sigsize, |_| Ok(())) };
    }
    let h = c.message_digest()?;
    // SAFETY: sig, siglen and sigsize are this function's arguments, under sign_into's contract.
    unsafe { sign_into(c, sig, siglen, sigsize, |out| c.sign(&h, out)) }
}

/// # Safety
/// As [`op_init`].
unsafe fn sigalg_op_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
    alg: &'static SigAlg,
    op: Operation,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.sigalg_init(alg, key, params, op).map(|_| 1)
    })
}

unsafe extern "C" fn sigalg_sign_init<const I: usize>(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet sigalg_op_init's contract.
    unsafe { sigalg_op_init(ctx, key, params, &SIGALGS[I], Operation::Sign) }
}
unsafe extern "C" fn sigalg_sign_message_init<const I: usize>(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet sigalg_op_init's contract.
    unsafe { sigalg_op_init(ctx, key, params, &SIGALGS[I], Operation::SignMessage) }
}
unsafe extern "C" fn sigalg_verify_init<const I: usize>(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet sigalg_op_init's contract.
    unsafe { sigalg_op_init(ctx, key, params, &SIGALGS[I], Operation::Verify) }
}
unsafe extern "C" fn sigalg_verify_message_init<const I: usize>(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet sigalg_op_init's contract.
    unsafe { sigalg_op_init(ctx, key, params, &SIGALGS[I], Operation::VerifyMessage) }
}
unsafe extern "C" fn sigalg_verify_recover_init<const I: usize>(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet sigalg_op_init's contract.
    unsafe { sigalg_op_init(ctx, key, params, &SIGALGS[I], Operation::VerifyRecover) }
}

/// One-shot sign: the digest (sign) or the whole message (sign-message).
unsafe extern "C" fn sigalg_sign(
    ctx: *mut c_void,
    sig: *mut c_uchar,
    siglen: *mut usize,
    sigsize: usize,
    tbs: *const c_uchar,
    tbslen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        c.check_oneshot()?;
        if c.op == Operation::SignMessage {
            if !sig.is_null() {
                // SAFETY: tbs is the core's input of tbslen bytes, valid and not written during
                // this call.
                c.message_update(unsafe { crate::ffi::in_slice(tbs, tbslen)? })?;
            }
            // SAFETY: sig is the core's output buffer (NULL for a size query) of sigsize bytes and
            // siglen its length pointer, as sign_message_final_into asks.
            return unsafe { sign_message_final_into(c, sig, siglen, sigsize) };
        }
        // SAFETY: caller buffers, sizes as documented by provider-signature(7).
        unsafe {
            let tbs = crate::ffi::in_slice(tbs, tbslen)?;
            sign_into(c, sig, siglen, sigsize, |out| c.sign(tbs, out))
        }
    })
}

unsafe extern "C" fn sigalg_message_update(
    ctx: *mut c_void,
    data: *const c_uchar,
    len: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        // SAFETY: data is the core's input of len bytes, valid and not written during this call.
        c.message_update(unsafe { crate::ffi::in_slice(data, len)? })?;
        Ok(1)
    })
}

unsafe extern "C" fn sigalg_sign_message_final(
    ctx: *mut c_void,
    sig: *mut c_uchar,
    siglen: *mut usize,
    sigsize: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        // SAFETY: sig is the core's output buffer (NULL for a size query) of sigsize bytes and
        // siglen its length pointer, as sign_message_final_into asks.
        unsafe { sign_message_final_into(c, sig, siglen, sigsize) }
    })
}

/// One-shot verify: of a digest (verify) or of the whole message (verify-message).
unsafe extern "C" fn sigalg_verify(
    ctx: *mut c_void,
    sig: *const c_uchar,
    siglen: usize,
    tbs: *const c_uchar,
    tbslen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        c.check_oneshot()?;
        // SAFETY: sig and tbs are the core's input buffers of siglen and tbslen bytes, valid and
        // not written during this call, as in_slice asks.
        let (sig, tbs) = unsafe {
            (
                crate::ffi::in_slice(sig, siglen)?,
                crate::ffi::in_slice(tbs, tbslen)?,
            )
        };
        if c.op == Operation::VerifyMessage {
            c.sig = Some(sig.to_vec());
            c.message_update(tbs)?;
            return c.verify_message_final().map(|_| 1);
        }
        c.verify(sig, tbs).map(|_| 1)
    })
}

unsafe extern "C" fn sigalg_verify_message_final(ctx: *mut c_void) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.verify_message_final().map(|_| 1)
    })
}

unsafe extern "C" fn sigalg_set_ctx_params(ctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract); params is
    // a valid array or NULL.
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.sigalg_set_params(&unsafe { Params::from_ptr(params) })
            .map(|_| 1)
    })
}

static SIGALG_SETTABLE: ParamTable<2> =
    ParamTable([desc(c"signature", OSSL_PARAM_OCTET_STRING), END]);

/// `signature` in verify-message, nothing otherwise (NULL, as the default provider).
unsafe extern "C" fn sigalg_settable_ctx_params(
    ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    // SAFETY: the core passes NULL (a query without a context) or a context our newctx/dupctx
    // returned and has not freed, as ctx_mut asks.
    match unsafe { ctx_mut(ctx) } {
        Some(c) if c.op == Operation::VerifyMessage => SIGALG_SETTABLE.as_ptr(),
        _ => core::ptr::null(),
    }
}

/// A NULL-terminated list of key type names that can live in a static.
struct KeyTypes([*const c_char; 2]);
// SAFETY: pointers to static strings, never written.
unsafe impl Sync for KeyTypes {}
static SIGALG_KEY_TYPES: KeyTypes = KeyTypes([c"RSA".as_ptr(), core::ptr::null()]);

unsafe extern "C" fn sigalg_query_key_types() -> *const *const c_char {
    SIGALG_KEY_TYPES.0.as_ptr()
}

macro_rules! sigalg_table {
    ($i:literal) => {
        LazyLock::new(|| {
            crate::dispatch![
                OSSL_FUNC_SIGNATURE_NEWCTX => rsa_sig_newctx as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_SIGNATURE_SIGN_INIT => sigalg_sign_init::<$i> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_SIGN => sigalg_sign as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
                OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_INIT => sigalg_sign_message_init::<$i> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_UPDATE => sigalg_message_update as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_SIGN_MESSAGE_FINAL => sigalg_sign_message_final as unsafe extern "C" fn(_, _, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_INIT => sigalg_verify_init::<$i> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY => sigalg_verify as unsafe extern "C" fn(_, _, _, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_INIT => sigalg_verify_message_init::<$i> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_UPDATE => sigalg_message_update as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_MESSAGE_FINAL => sigalg_verify_message_final as unsafe extern "C" fn(_) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT => sigalg_verify_recover_init::<$i> as unsafe extern "C" fn(_, _, _) -> _,
                OSSL_FUNC_SIGNATURE_VERIFY_RECOVER => rsa_verify_recover as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
                OSSL_FUNC_SIGNATURE_FREECTX => rsa_sig_freectx as unsafe extern "C" fn(_),
                OSSL_FUNC_SIGNATURE_DUPCTX => rsa_sig_dupctx as unsafe extern "C" fn(_) -> _,
                OSSL_FUNC_SIGNATURE_QUERY_KEY_TYPES => sigalg_query_key_types as unsafe extern "C" fn() -> _,
                OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS => rsa_sig_get_ctx_params as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS => rsa_sig_gettable_ctx_params as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS => sigalg_set_ctx_params as unsafe extern "C" fn(_, _) -> _,
                OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS => sigalg_settable_ctx_params as unsafe extern "C" fn(_, _) -> _,
            ]
        })
    };
}

static SIGALG_TABLES: [LazyLock<Table<OSSL_DISPATCH>>; 13] = [
    sigalg_table!(0),
    sigalg_table!(1),
    sigalg_table!(2),
    sigalg_table!(3),
    sigalg_table!(4),
    sigalg_table!(5),
    sigalg_table!(6),
    sigalg_table!(7),
    sigalg_table!(8),
    sigalg_table!(9),
    sigalg_table!(10),
    sigalg_table!(11),
    sigalg_table!(12),
];

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

    fn sigalg_init_fn(i: usize) -> unsafe extern "C" fn() {
        macro_rules! pick {
            ($($n:literal),*) => {
                match i {
                    $($n => unsafe {
                        core::mem::transmute::<*const (), unsafe extern "C" fn()>(
                            sigalg_sign_init::<$n> as *const ())
                    },)*
                    _ => unreachable!(),
                }
            };
        }
        pick!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
    }
}
