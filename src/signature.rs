//! RSA signature: sign / verify / verify_recover, digest sign/verify, context parameters.
//! Paddings: PKCS#1 v1.5 (RFC 8017 §8.2), PSS (§8.1), ANSI X9.31, none. Table at the bottom.

use crate::error::KaeError;
use crate::ffi::bn::{arith, BigNum};
use crate::ffi::core::with_ctx;
use crate::ffi::core::{opt_cstr, Failure};
use crate::ffi::digest::{Md, MdCtx};
use crate::ffi::guard_ptr;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::keymgmt::KeyObj;
use crate::provider::{ProvCtx, Table};
use crate::rsa::padding::pss::SaltLen;
use crate::rsa::padding::{pkcs1, pss, x931, DigestId};
use crate::rsa::{KeyType, PadMode, RsaKey};
use core::ffi::{c_char, c_int, c_uchar, c_void};
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Operation {
    Sign,
    Verify,
    VerifyRecover,
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
}

impl SigCtx {
    fn key(&self) -> Result<&RsaKey, KaeError> {
        self.key.as_deref().ok_or(KaeError::MissingKey)
    }

    fn fetch(&self, name: &str, props: Option<&str>) -> Result<Md, Failure> {
        Md::fetch(self.prov.libctx, name, props)
            .map_err(|e| Failure::with(e, format!("digest={name}")))
    }

    fn init(
        &mut self,
        keydata: *mut c_void,
        params: *const OSSL_PARAM,
        op: Operation,
    ) -> Result<(), Failure> {
        // SAFETY: keydata is NULL (keep the current key) or one of our keys.
        if let Some(obj) = unsafe { KeyObj::from_ptr(keydata) } {
            self.key = Some(obj.key.clone());
        }
        let key = self.key.clone().ok_or(KaeError::MissingKey)?;
        if !key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        if op == Operation::Sign && !key.has_private() {
            return Err(KaeError::MissingPrivateKey.into());
        }
        self.op = op;
        self.md_ctx = None;
        self.md_locked = false;
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
        // SAFETY: params from the core (valid array or NULL).
        self.set_params(&unsafe { Params::from_ptr(params) })
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
            let mode = crate::rsa::pad_mode_param(&p)?;
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
            let for_sign = self.op == Operation::Sign;
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
        if let Some(mut p) = ps.locate(c"digest") {
            if let Some(md) = &self.md {
                p.set_utf8(crate::rsa::digest_cname(md.id()))?;
            }
        }
        if let Some(mut p) = ps.locate(c"mgf1-digest") {
            if let Some(md) = self.mgf1_md() {
                p.set_utf8(crate::rsa::digest_cname(md.id()))?;
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
    // SAFETY: caller contract.
    unsafe { p.cast::<SigCtx>().as_mut() }
}

impl crate::ffi::core::HasCore for SigCtx {
    fn core(&self) -> crate::ffi::core::Core {
        self.prov.core
    }
}

unsafe extern "C" fn rsa_sig_newctx(provctx: *mut c_void, propq: *const c_char) -> *mut c_void {
    // SAFETY: provctx from the core.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    // SAFETY: propq is NULL or a C string.
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
        };
        Ok(Box::into_raw(Box::new(ctx)).cast())
    })
}

unsafe extern "C" fn rsa_sig_freectx(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: created by Box::into_raw in newctx/dupctx.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ctx.cast::<SigCtx>()) }));
    }
}

unsafe extern "C" fn rsa_sig_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: ours.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null_mut();
    };
    let core = c.prov.core;
    guard_ptr(Some(&core), || {
        c.try_clone().map(|n| Box::into_raw(Box::new(n)).cast())
    })
}

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
    // SAFETY: forwarded.
    unsafe { op_init(ctx, key, params, Operation::Sign) }
}
unsafe extern "C" fn rsa_verify_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { op_init(ctx, key, params, Operation::Verify) }
}
unsafe extern "C" fn rsa_verify_recover_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: forwarded.
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
        // SAFETY: valid out-pointer.
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
    // SAFETY: out valid for outsize ≥ k bytes.
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
        // SAFETY: caller buffers.
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
            // SAFETY: valid out-pointer.
            unsafe { *routlen = c.key()?.size() };
            return Ok(1);
        }
        // SAFETY: caller buffer.
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

unsafe fn digest_op_init(
    ctx: *mut c_void,
    mdname: *const c_char,
    key: *mut c_void,
    params: *const OSSL_PARAM,
    op: Operation,
) -> c_int {
    // SAFETY: NULL or a C string (the core's contract).
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
    // SAFETY: forwarded.
    unsafe { digest_op_init(ctx, mdname, key, params, Operation::Sign) }
}
unsafe extern "C" fn rsa_digest_verify_init(
    ctx: *mut c_void,
    mdname: *const c_char,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { digest_op_init(ctx, mdname, key, params, Operation::Verify) }
}

unsafe extern "C" fn rsa_digest_update(
    ctx: *mut c_void,
    data: *const c_uchar,
    len: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, KaeError> {
        // SAFETY: caller buffer.
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
            // SAFETY: caller pointers.
            return unsafe { sign_into(c, sig, siglen, sigsize, |_| Ok(())) };
        }
        let h = c.digest_final()?;
        // SAFETY: caller pointers.
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
        // SAFETY: caller buffer.
        let sig = unsafe { crate::ffi::in_slice(sig, siglen)? };
        c.verify(sig, &h).map(|_| 1)
    })
}

unsafe extern "C" fn rsa_sig_get_ctx_params(ctx: *mut c_void, params: *mut OSSL_PARAM) -> c_int {
    // SAFETY: core array.
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.get_params(&mut unsafe { ParamsMut::from_ptr(params) })
            .map(|_| 1)
    })
}

unsafe extern "C" fn rsa_sig_set_ctx_params(ctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: core array.
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
    // SAFETY: ours.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return 0;
    };
    match &c.md_ctx {
        // SAFETY: valid md ctx and caller array.
        Some(m) => unsafe { EVP_MD_CTX_get_params(m.as_ptr(), params) },
        None => 0,
    }
}

unsafe extern "C" fn rsa_sig_set_ctx_md_params(
    ctx: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: ours.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return 0;
    };
    match &c.md_ctx {
        // SAFETY: valid md ctx and caller array.
        Some(m) => unsafe { EVP_MD_CTX_set_params(m.as_ptr(), params) },
        None => 0,
    }
}

unsafe extern "C" fn rsa_sig_gettable_ctx_md_params(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: ours.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null();
    };
    match &c.md {
        // SAFETY: valid digest.
        Some(md) => unsafe { EVP_MD_gettable_ctx_params(md.as_ptr()) },
        None => core::ptr::null(),
    }
}

unsafe extern "C" fn rsa_sig_settable_ctx_md_params(ctx: *mut c_void) -> *const OSSL_PARAM {
    // SAFETY: ours.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null();
    };
    match &c.md {
        // SAFETY: valid digest.
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
