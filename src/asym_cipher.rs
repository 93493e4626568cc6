//! RSA asymmetric cipher: encrypt / decrypt with PKCS#1 v1.5 (implicit rejection on by
//! default in OpenSSL 3.2+ cores, absent before, as in the core's default provider), OAEP,
//! none, and the TLS premaster mode (RFC 5246 §7.4.7.1), as safe Rust behind the
//! [`AsymCipher`] trait; its C side is `abi::asym_cipher`.

use crate::abi::asym_cipher::AsymCipher;
use crate::abi::key::KeyObj;
use crate::abi::{CtxParams, Duplicate, OpCtx, Table};
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::libcrypto::Digest;
use crate::rsa::padding::{oaep, pkcs1};
use crate::rsa::{KeyType, PadMode, RsaKey};
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

const TLS_PREMASTER_LEN: usize = 48;

#[derive(Clone)]
pub struct CipherCtx {
    prov: Arc<ProvCtx>,
    key: Option<Arc<RsaKey>>,
    pad: PadMode,
    oaep_md: Option<Digest>,
    mgf1_md: Option<Digest>,
    oaep_propq: Option<String>,
    mgf1_propq: Option<String>,
    label: Option<Vec<u8>>,
    client_version: u32,
    negotiated_version: u32,
    implicit_rejection: bool,
}

impl CipherCtx {
    fn key(&self) -> Result<&RsaKey, KaeError> {
        self.key.as_deref().ok_or(KaeError::MissingKey)
    }

    fn oaep_md(&mut self) -> Result<Digest, Failure> {
        if self.oaep_md.is_none() {
            // RFC 8017 default: SHA-1.
            self.oaep_md = Some(self.prov.fetch_md("SHA1", self.oaep_propq.as_deref())?);
        }
        Ok(self.oaep_md.clone().ok_or(KaeError::Internal)?)
    }

    fn init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
        decrypt: bool,
    ) -> Result<(), Failure> {
        if let Some(obj) = key {
            self.key = Some(obj.key.clone());
        }
        let key = self.key()?;
        if key.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "RSA-PSS keys cannot encrypt or decrypt",
            ));
        }
        if !key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        if decrypt && !key.has_private() {
            return Err(KaeError::MissingPrivateKey.into());
        }
        self.pad = PadMode::Pkcs1;
        self.oaep_md = None;
        self.mgf1_md = None;
        self.label = None;
        self.client_version = 0;
        self.negotiated_version = 0;
        // On by default from OpenSSL 3.2; before, the default provider has no implicit
        // rejection (a padding error is an error) and no parameter for it.
        self.implicit_rejection = self.prov.core_version.implicit_rejection();
        self.set_cipher_params(params)
    }

    fn set_cipher_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"pad-mode") {
            let mode = crate::rsa_params::pad_mode(&p)?;
            if matches!(mode, PadMode::Pss | PadMode::X931) {
                return Err(Failure::with(
                    KaeError::InvalidPaddingMode,
                    "not an encryption padding",
                ));
            }
            self.pad = mode;
        }
        if let Some(v) = crate::ffi::params::opt_utf8(params, c"digest-props")? {
            self.oaep_propq = Some(v.to_owned());
        }
        if let Some(p) = params.locate(c"digest") {
            let name = p.get_utf8()?;
            self.oaep_md = Some(self.prov.fetch_md(name, self.oaep_propq.as_deref())?);
        }
        if let Some(v) = crate::ffi::params::opt_utf8(params, c"mgf1-properties")? {
            self.mgf1_propq = Some(v.to_owned());
        }
        if let Some(p) = params.locate(c"mgf1-digest") {
            let name = p.get_utf8()?;
            self.mgf1_md = Some(self.prov.fetch_md(name, self.mgf1_propq.as_deref())?);
        }
        if let Some(p) = params.locate(c"oaep-label") {
            let l = p.get_octets()?;
            self.label = if l.is_empty() { None } else { Some(l.to_vec()) };
        }
        if let Some(p) = params.locate(c"tls-client-version") {
            self.client_version = p.get_uint()?;
            if self.client_version > 0xffff {
                return Err(KaeError::InvalidTlsVersion.into());
            }
        }
        if let Some(p) = params.locate(c"tls-negotiated-version") {
            self.negotiated_version = p.get_uint()?;
            if self.negotiated_version > 0xffff {
                return Err(KaeError::InvalidTlsVersion.into());
            }
        }
        // Unknown to cores before 3.2, so ignored there as their default provider does.
        if let Some(p) = params
            .locate(crate::names::KAE_PARAM_IMPLICIT_REJECTION)
            .filter(|_| self.prov.core_version.implicit_rejection())
        {
            self.implicit_rejection = p.get_uint()? != 0;
        }
        Ok(())
    }

    fn get_cipher_params(&mut self, ps: &mut ParamsMut<'_>) -> Result<(), Failure> {
        if let Some(mut p) = ps.locate(c"pad-mode") {
            if p.data_type() == OSSL_PARAM_INTEGER {
                p.set_int(self.pad as i32)?;
            } else {
                p.set_utf8(self.pad.cname())?;
            }
        }
        if ps.locate(c"digest").is_some() || ps.locate(c"mgf1-digest").is_some() {
            let md = self.oaep_md()?;
            let mgf1 = self.mgf1_md.clone().unwrap_or_else(|| md.clone());
            if let Some(mut p) = ps.locate(c"digest") {
                p.set_utf8(crate::rsa::digest_cname(md.id()))?;
            }
            if let Some(mut p) = ps.locate(c"mgf1-digest") {
                p.set_utf8(crate::rsa::digest_cname(mgf1.id()))?;
            }
        }
        if let Some(mut p) = ps.locate(c"oaep-label") {
            p.set_octets(self.label.as_deref().unwrap_or(&[]))?;
        }
        if let Some(mut p) = ps.locate(c"tls-client-version") {
            p.set_uint(self.client_version)?;
        }
        if let Some(mut p) = ps.locate(c"tls-negotiated-version") {
            p.set_uint(self.negotiated_version)?;
        }
        if let Some(mut p) = ps
            .locate(crate::names::KAE_PARAM_IMPLICIT_REJECTION)
            .filter(|_| self.prov.core_version.implicit_rejection())
        {
            p.set_uint(self.implicit_rejection as u32)?;
        }
        Ok(())
    }

    /// An OAEP label only makes sense with OAEP padding.
    fn check_label_use(&self) -> Result<(), Failure> {
        if self.label.is_some() && self.pad != PadMode::Oaep {
            return Err(Failure::with(
                KaeError::IllegalForPaddingMode,
                "oaep-label is set but the padding is not OAEP",
            ));
        }
        Ok(())
    }

    fn encrypt_message(&mut self, msg: &[u8], out: &mut [u8]) -> Result<(), Failure> {
        self.check_label_use()?;
        let key = self.key.clone().ok_or(KaeError::MissingKey)?;
        let k = key.size();
        let mut em = Zeroizing::new(vec![0u8; k]);
        match self.pad {
            PadMode::Pkcs1 => pkcs1::encode_type2(msg, &mut em, &self.prov.rng())?,
            PadMode::Oaep => {
                let md = self.oaep_md()?;
                let mgf1 = self.mgf1_md.clone().unwrap_or_else(|| md.clone());
                oaep::encode(
                    &md,
                    &mgf1,
                    self.label.as_deref().unwrap_or(&[]),
                    msg,
                    &self.prov.rng(),
                    &mut em,
                )?;
            }
            PadMode::None => {
                if msg.len() != k {
                    let r = if msg.len() > k {
                        KaeError::DataTooLargeForKeySize
                    } else {
                        KaeError::DataTooSmall
                    };
                    return Err(Failure::with(
                        r,
                        format!("no padding needs exactly {k} bytes"),
                    ));
                }
                em.copy_from_slice(msg);
            }
            _ => return Err(KaeError::InvalidPaddingMode.into()),
        }
        crate::offload::public_op(&key, &em, out)?;
        Ok(())
    }

    /// The most a decryption can return: 48 bytes in TLS premaster mode, else k. The caller's
    /// buffer must hold this much before any private-key work (as OpenSSL's `rsa_enc.c`), so
    /// whether a decryption succeeds never depends on the secret message length.
    fn max_output(&self) -> Result<usize, KaeError> {
        Ok(if self.tls_mode() {
            TLS_PREMASTER_LEN
        } else {
            self.key()?.size()
        })
    }

    /// Decrypts into a buffer of exactly `max_output()` bytes: the message is at its front,
    /// the rest is zero, and the message length comes back beside it. The caller copies the
    /// whole buffer, so neither the copy nor the length store branches on the length.
    fn decrypt_message(&mut self, ct: &[u8]) -> Result<(Zeroizing<Vec<u8>>, usize), Failure> {
        let key = self.key.clone().ok_or(KaeError::MissingKey)?;
        let k = key.size();
        // Like OpenSSL's default provider, a ciphertext shorter than the modulus is the
        // big-endian integer it spells (leading zeros implied); only a longer one is refused.
        // Both lengths are public.
        if ct.len() > k {
            return Err(Failure::with(
                KaeError::DataTooLargeForModulus,
                format!("ciphertext is {} bytes, modulus {k}", ct.len()),
            ));
        }
        // From OpenSSL 3.2 (with implicit rejection) the default provider refuses an empty
        // ciphertext in every mode; 3.0 and 3.1 read it as the number 0.
        if ct.is_empty() && self.prov.core_version.implicit_rejection() {
            return Err(Failure::with(KaeError::DataTooSmall, "empty ciphertext"));
        }
        self.check_label_use()?;
        let mut c = vec![0u8; k];
        c[k - ct.len()..].copy_from_slice(ct);
        let mut em = Zeroizing::new(vec![0u8; k]);
        crate::offload::private_op(&key, &c, &mut em)?;
        let mut out = Zeroizing::new(vec![0u8; self.max_output()?]);
        let len = match self.pad {
            PadMode::Pkcs1Tls if self.client_version != 0 => {
                let mut pm = [0u8; TLS_PREMASTER_LEN];
                let negotiated =
                    (self.negotiated_version != 0).then_some(self.negotiated_version as u16);
                pkcs1::decode_tls_premaster_rng(
                    &em,
                    self.client_version as u16,
                    negotiated,
                    &self.prov.private_rng(),
                    &mut pm,
                )?;
                out.copy_from_slice(&pm);
                zeroize::Zeroize::zeroize(&mut pm);
                TLS_PREMASTER_LEN
            }
            PadMode::Pkcs1 if self.implicit_rejection => {
                let d = key.d.as_ref().ok_or(KaeError::MissingPrivateKey)?;
                // d < n: exactly k bytes, so its length says nothing about its top byte.
                let mut d_bytes = Zeroizing::new(vec![0u8; k]);
                d.write_be_padded(&mut d_bytes)?;
                let sha256 = self.prov.fetch_md("SHA256", None)?;
                pkcs1::decode_type2_implicit_rejection(&sha256, &d_bytes, &c, &em, &mut out)?
            }
            PadMode::Pkcs1 => pkcs1::decode_type2(&em, &mut out)?,
            PadMode::Pkcs1Tls => {
                return Err(Failure::with(
                    KaeError::InvalidTlsVersion,
                    "TLS padding needs tls-client-version",
                ))
            }
            PadMode::Oaep => {
                let md = self.oaep_md()?;
                let mgf1 = self.mgf1_md.clone().unwrap_or_else(|| md.clone());
                oaep::decode(
                    &md,
                    &mgf1,
                    self.label.as_deref().unwrap_or(&[]),
                    &em,
                    &mut out,
                )?
            }
            PadMode::None => {
                out.copy_from_slice(&em);
                k
            }
            _ => return Err(KaeError::InvalidPaddingMode.into()),
        };
        Ok((out, len))
    }

    /// Decrypting a TLS premaster secret (RFC 5246 §7.4.7.1): constant-time version check,
    /// random premaster instead of any padding error. As in OpenSSL's default provider, only
    /// the padding mode RSA_PKCS1_WITH_TLS_PADDING selects it (libssl sets it); plain
    /// "pkcs1" with a client version set stays plain PKCS#1.
    fn tls_mode(&self) -> bool {
        self.pad == PadMode::Pkcs1Tls
    }
}

// `implicit-rejection` comes first in both tables so that cores before 3.2, which do not know
// it, are given the same array from its second entry on (see `described`).
static GETTABLE: ParamTable<8> = ParamTable([
    desc(
        crate::names::KAE_PARAM_IMPLICIT_REJECTION,
        OSSL_PARAM_UNSIGNED_INTEGER,
    ),
    desc(c"pad-mode", OSSL_PARAM_UTF8_STRING),
    desc(c"digest", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
    desc(c"oaep-label", OSSL_PARAM_OCTET_STRING),
    desc(c"tls-client-version", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"tls-negotiated-version", OSSL_PARAM_UNSIGNED_INTEGER),
    END,
]);

static SETTABLE: ParamTable<11> = ParamTable([
    desc(
        crate::names::KAE_PARAM_IMPLICIT_REJECTION,
        OSSL_PARAM_UNSIGNED_INTEGER,
    ),
    desc(c"pad-mode", OSSL_PARAM_UTF8_STRING),
    desc(c"digest", OSSL_PARAM_UTF8_STRING),
    desc(c"digest-props", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-digest", OSSL_PARAM_UTF8_STRING),
    desc(c"mgf1-properties", OSSL_PARAM_UTF8_STRING),
    desc(c"oaep-label", OSSL_PARAM_OCTET_STRING),
    desc(c"tls-client-version", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"tls-negotiated-version", OSSL_PARAM_UNSIGNED_INTEGER),
    desc(c"engine", OSSL_PARAM_UTF8_STRING),
    END,
]);

/// The parameter table as a core knows it: whole on 3.2+, else without its first entry,
/// `implicit-rejection`.
fn described(t: &'static [OSSL_PARAM], prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
    if prov.is_some_and(|p| p.core_version.implicit_rejection()) {
        t
    } else {
        &t[1..]
    }
}

impl OpCtx for CipherCtx {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        let implicit_rejection = prov.core_version.implicit_rejection();
        Ok(CipherCtx {
            prov,
            key: None,
            pad: PadMode::Pkcs1,
            oaep_md: None,
            mgf1_md: None,
            oaep_propq: None,
            mgf1_propq: None,
            label: None,
            client_version: 0,
            negotiated_version: 0,
            implicit_rejection,
        })
    }

    fn provider(&self) -> &ProvCtx {
        &self.prov
    }
}

impl Duplicate for CipherCtx {
    fn dup(&self) -> Result<Self, Failure> {
        Ok(self.clone())
    }
}

impl CtxParams for CipherCtx {
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.set_cipher_params(params)
    }

    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        self.get_cipher_params(params)
    }

    fn settable(prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        described(&SETTABLE.0, prov)
    }

    fn gettable(prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        described(&GETTABLE.0, prov)
    }
}

impl AsymCipher for CipherCtx {
    fn encrypt_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure> {
        self.init(key, params, false)
    }

    fn decrypt_init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure> {
        self.init(key, params, true)
    }

    fn encrypt_size(&self) -> Result<usize, Failure> {
        Ok(self.key()?.size())
    }

    fn encrypt(&mut self, msg: &[u8], out: &mut [u8]) -> Result<usize, Failure> {
        self.encrypt_message(msg, out)?;
        Ok(out.len())
    }

    fn decrypt_size(&self) -> Result<usize, Failure> {
        Ok(self.max_output()?)
    }

    fn decrypt(&mut self, ct: &[u8], out: &mut [u8]) -> Result<usize, Failure> {
        let (msg, len) = self.decrypt_message(ct)?;
        // The whole buffer, whatever the message length.
        out.copy_from_slice(&msg);
        Ok(len)
    }
}

pub static RSA_ASYM_CIPHER: LazyLock<Table<OSSL_DISPATCH>> =
    LazyLock::new(crate::abi::asym_cipher::table::<CipherCtx>);
