//! RSA and RSA-PSS key encoders (`OSSL_OP_ENCODER`): DER and PEM (`PrivateKeyInfo`,
//! `EncryptedPrivateKeyInfo`, `SubjectPublicKeyInfo`, `type-specific` / `rsa` / `pkcs1`),
//! text, MSBLOB and PVK: the same set, property definitions and selection answers as the
//! default provider's, under `provider=kae`.
//!
//! OpenSSL hands an encoder of a provider the key objects of that provider's key management,
//! so the default provider's encoders must never be re-listed for RSA (they would read kae's
//! key objects as theirs). kae's own encoders take kae's key object, export its numbers
//! through kae's key management export (`OSSL_PARAM`s), build a temporary key in kae's private
//! library context (where only the default provider lives) with `EVP_PKEY_fromdata`, encode
//! that key there with `OSSL_ENCODER_CTX_new_for_pkey` (same output type, structure and
//! selection, the caller's cipher and passphrase callback) into a memory BIO, and write the
//! bytes to the caller's `OSSL_CORE_BIO`. The output is byte for byte what the default
//! provider writes for the same key. The temporary key and the memory BIO are wiped and freed
//! before `encode` returns.
//!
//! Listed only when the private default provider is loaded (`load-default = yes`).
//!
//! Safe Rust behind the [`Encoder`] trait; its C side is `abi::encoder`.

use crate::abi::encoder::Encoder;
use crate::abi::key::KeyObj;
use crate::abi::{OpCtx, Table};
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::encode::{CoreOut, EncoderCtx, MemBio, Passphrase};
use crate::ffi::params::{desc, ParamTable, Params, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::{KeyType, RsaKey};
use core::ffi::{c_int, CStr};
use std::ffi::CString;
use std::sync::{Arc, LazyLock};

const SELECT_ALL_PARAMETERS: c_int =
    OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS;

/// What an encoder writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Der,
    Pem,
    MsBlob,
    Pvk,
}

impl Output {
    /// The output type as `OSSL_ENCODER_CTX_new_for_pkey` takes it.
    fn type_name(self) -> &'static CStr {
        match self {
            Output::Text => c"TEXT",
            Output::Der => c"DER",
            Output::Pem => c"PEM",
            Output::MsBlob => c"MSBLOB",
            Output::Pvk => c"PVK",
        }
    }
}

/// Which selections an encoder accepts (its `does_selection` answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// No `does_selection` function: the core treats the encoder as taking anything (text).
    Any,
    /// The key parts form levels, private key above public key above parameters; a
    /// selection is accepted when the highest level it names is one of `mask`'s (and the
    /// empty selection, which asks "can you guess?", is accepted).
    Levels(c_int),
    /// Accepted when it names the public or the private key (MSBLOB, PVK).
    KeyPart,
}

impl Selection {
    pub fn accepts(self, selection: c_int) -> bool {
        match self {
            Selection::Any => true,
            Selection::KeyPart => selection & OSSL_KEYMGMT_SELECT_KEYPAIR != 0,
            Selection::Levels(mask) => {
                if selection == 0 {
                    return true;
                }
                [
                    OSSL_KEYMGMT_SELECT_PRIVATE_KEY,
                    OSSL_KEYMGMT_SELECT_PUBLIC_KEY,
                    SELECT_ALL_PARAMETERS,
                ]
                .into_iter()
                .find(|level| selection & level != 0)
                .is_some_and(|level| mask & level != 0)
            }
        }
    }
}

/// One encoder: key type, output, structure, accepted selections and its algorithm entry.
pub struct EncoderDesc {
    pub kind: KeyType,
    pub output: Output,
    pub structure: Option<&'static CStr>,
    pub selection: Selection,
    pub properties: &'static CStr,
    pub description: &'static CStr,
}

macro_rules! cstr {
    ($($s:expr),+) => {
        match CStr::from_bytes_with_nul(concat!($($s,)+ "\0").as_bytes()) {
            Ok(s) => s,
            Err(_) => panic!("NUL inside an encoder string"),
        }
    };
}

const KEYPAIR_LEVELS: Selection =
    Selection::Levels(OSSL_KEYMGMT_SELECT_PRIVATE_KEY | OSSL_KEYMGMT_SELECT_PUBLIC_KEY);
const PRIVATE_LEVEL: Selection = Selection::Levels(OSSL_KEYMGMT_SELECT_PRIVATE_KEY);
const PUBLIC_LEVEL: Selection = Selection::Levels(OSSL_KEYMGMT_SELECT_PUBLIC_KEY);

macro_rules! encoder {
    ($kind:ident, $kname:literal, $out:ident, $oname:literal) => {
        EncoderDesc {
            kind: KeyType::$kind,
            output: Output::$out,
            structure: None,
            selection: if matches!(Output::$out, Output::Text) {
                Selection::Any
            } else {
                Selection::KeyPart
            },
            properties: cstr!("provider=kae,output=", $oname),
            description: cstr!("kae ", $kname, " encoder (", $oname, ")"),
        }
    };
    ($kind:ident, $kname:literal, $out:ident, $oname:literal, $structure:literal, $sel:expr) => {
        EncoderDesc {
            kind: KeyType::$kind,
            output: Output::$out,
            structure: Some(cstr!($structure)),
            selection: $sel,
            properties: cstr!("provider=kae,output=", $oname, ",structure=", $structure),
            description: cstr!("kae ", $kname, " encoder (", $oname, ", ", $structure, ")"),
        }
    };
}

const N: usize = 24;

/// The default provider's RSA and RSA-PSS encoders, in its order (providers/encoders.inc).
pub static ENCODERS: [EncoderDesc; N] = [
    encoder!(Rsa, "RSA", Text, "text"),
    encoder!(Rsa, "RSA", Der, "der", "type-specific", KEYPAIR_LEVELS),
    encoder!(Rsa, "RSA", Pem, "pem", "type-specific", KEYPAIR_LEVELS),
    encoder!(Rsa, "RSA", MsBlob, "msblob"),
    encoder!(Rsa, "RSA", Pvk, "pvk"),
    encoder!(
        Rsa,
        "RSA",
        Der,
        "der",
        "EncryptedPrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(
        Rsa,
        "RSA",
        Pem,
        "pem",
        "EncryptedPrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(Rsa, "RSA", Der, "der", "PrivateKeyInfo", PRIVATE_LEVEL),
    encoder!(Rsa, "RSA", Pem, "pem", "PrivateKeyInfo", PRIVATE_LEVEL),
    encoder!(Rsa, "RSA", Der, "der", "SubjectPublicKeyInfo", PUBLIC_LEVEL),
    encoder!(Rsa, "RSA", Pem, "pem", "SubjectPublicKeyInfo", PUBLIC_LEVEL),
    encoder!(Rsa, "RSA", Der, "der", "rsa", KEYPAIR_LEVELS),
    encoder!(Rsa, "RSA", Pem, "pem", "rsa", KEYPAIR_LEVELS),
    encoder!(Rsa, "RSA", Der, "der", "pkcs1", KEYPAIR_LEVELS),
    encoder!(Rsa, "RSA", Pem, "pem", "pkcs1", KEYPAIR_LEVELS),
    encoder!(RsaPss, "RSA-PSS", Text, "text"),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Der,
        "der",
        "EncryptedPrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Pem,
        "pem",
        "EncryptedPrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Der,
        "der",
        "PrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Pem,
        "pem",
        "PrivateKeyInfo",
        PRIVATE_LEVEL
    ),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Der,
        "der",
        "SubjectPublicKeyInfo",
        PUBLIC_LEVEL
    ),
    encoder!(
        RsaPss,
        "RSA-PSS",
        Pem,
        "pem",
        "SubjectPublicKeyInfo",
        PUBLIC_LEVEL
    ),
    encoder!(RsaPss, "RSA-PSS", Der, "der", "pkcs1", KEYPAIR_LEVELS),
    encoder!(RsaPss, "RSA-PSS", Pem, "pem", "pkcs1", KEYPAIR_LEVELS),
];

/// A context of encoder `ENCODERS[I]`: the instance and the settings the caller made.
pub struct EncCtx<const I: usize> {
    prov: Arc<ProvCtx>,
    /// Cipher for encrypted private keys (validated when set) and its property query, as
    /// read in the private library context (see [`private_props`]).
    cipher: Option<CString>,
    cipher_props: Option<CString>,
    save_parameters: Option<c_int>,
    encrypt_level: Option<c_int>,
}

/// The application's property query for a cipher, for use in kae's private library context.
/// There every algorithm is the default provider's, and the ones the application fetches
/// with `provider=kae` are exactly those re-listed; so a `provider` clause naming kae names
/// the default provider there. Other clauses are kept as they are.
pub fn private_props(query: &str) -> String {
    query
        .split(',')
        .map(|clause| {
            let Some(eq) = clause.find('=') else {
                return clause.to_owned();
            };
            let (lhs, value) = (&clause[..eq], &clause[eq + 1..]);
            let name = lhs
                .trim()
                .trim_start_matches(['?', '-'])
                .trim_end_matches('!')
                .trim();
            let v = value.trim().trim_matches(['"', '\'']);
            if name.eq_ignore_ascii_case("provider") && v.eq_ignore_ascii_case("kae") {
                format!("{lhs}=default")
            } else {
                clause.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Turns a `&str` into a C string or reports the parameter as invalid.
fn cstring(s: &str) -> Result<CString, KaeError> {
    CString::new(s).map_err(|_| KaeError::InvalidParam)
}

impl<const I: usize> EncCtx<I> {
    const DESC: &'static EncoderDesc = &ENCODERS[I];

    fn set_cipher_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        match Self::DESC.output {
            Output::Der | Output::Pem => {
                if let Some(p) = params.locate(c"cipher") {
                    if p.is_null_string() {
                        self.cipher = None;
                        self.cipher_props = None;
                    } else {
                        let name = p.get_utf8()?;
                        let props = match params.locate(c"properties") {
                            Some(q) if !q.is_null_string() => Some(q.get_utf8()?),
                            _ => None,
                        };
                        let cname = cstring(name)?;
                        let cprops = props.map(|q| cstring(&private_props(q))).transpose()?;
                        if !self
                            .prov
                            .private_cipher_available(&cname, cprops.as_deref())
                        {
                            return Err(Failure::with(
                                KaeError::FetchFailed,
                                format!("cipher {name} (properties {})", props.unwrap_or("")),
                            ));
                        }
                        self.cipher = Some(cname);
                        self.cipher_props = cprops;
                    }
                }
                if let Some(p) = params.locate(c"save-parameters") {
                    self.save_parameters = Some(p.get_int()?);
                }
            }
            Output::Pvk => {
                if let Some(p) = params.locate(c"encrypt-level") {
                    self.encrypt_level = Some(p.get_int()?);
                }
            }
            Output::Text | Output::MsBlob => {}
        }
        Ok(())
    }

    /// Encodes `key` into the caller's BIO (see the module documentation).
    fn encode_key(
        &self,
        key: &RsaKey,
        selection: c_int,
        out: &mut CoreOut<'_>,
        passphrase: Option<&Passphrase<'_>>,
    ) -> Result<(), Failure> {
        if !self.prov.has_private_default() {
            return Err(KaeError::DefaultProviderUnavailable.into());
        }
        if !key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        // Only the parts the selection asks for leave kae's key (a public encoding never
        // copies the private key).
        let private = selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY != 0 && key.has_private();
        let (parts, fromdata) = if private {
            (
                OSSL_KEYMGMT_SELECT_KEYPAIR | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS,
                OSSL_KEYMGMT_SELECT_KEYPAIR | SELECT_ALL_PARAMETERS,
            )
        } else {
            (
                OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS,
                OSSL_KEYMGMT_SELECT_PUBLIC_KEY | SELECT_ALL_PARAMETERS,
            )
        };
        let key_type = match key.kind {
            KeyType::Rsa => c"RSA",
            KeyType::RsaPss => c"RSA-PSS",
        };
        let pkey = {
            let params = crate::keymgmt::export_params(key, parts)?;
            self.prov
                .private_pkey(key_type, fromdata, &params)
                .map_err(|e| Failure::with(e, "the default provider refused the exported key"))?
        };
        let d = Self::DESC;
        let mut ectx = EncoderCtx::for_pkey(&pkey, selection, d.output.type_name(), d.structure)
            .map_err(|e| {
                Failure::with(
                    e,
                    format!(
                        "no default encoder for {} {:?} {} selection {selection:#x}",
                        key.kind.name(),
                        d.output,
                        d.structure.map(|s| s.to_string_lossy()).unwrap_or_default(),
                    ),
                )
            })?;
        if let Some(c) = &self.cipher {
            ectx.set_cipher(c, self.cipher_props.as_deref())?;
        }
        if let Some(v) = self.save_parameters {
            ectx.set_int(c"save-parameters", v)?;
        }
        if let Some(v) = self.encrypt_level {
            ectx.set_int(c"encrypt-level", v)?;
        }
        if let Some(p) = passphrase {
            ectx.set_passphrase(p)?;
        }
        let mut mem = MemBio::new()?;
        ectx.encode_to(&mut mem)
            .map_err(|e| Failure::with(e, "encoding failed"))?;
        drop(ectx);
        drop(pkey);
        self.prov.core_bio(out)?.write_all(mem.data())?;
        Ok(())
    }
}

impl<const I: usize> OpCtx for EncCtx<I> {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        if !prov.has_private_default() {
            return Err(KaeError::DefaultProviderUnavailable.into());
        }
        Ok(EncCtx {
            prov,
            cipher: None,
            cipher_props: None,
            save_parameters: None,
            encrypt_level: None,
        })
    }

    fn provider(&self) -> &ProvCtx {
        &self.prov
    }
}

static DER_PEM_SETTABLE: ParamTable<3> = ParamTable([
    desc(c"cipher", OSSL_PARAM_UTF8_STRING),
    desc(c"properties", OSSL_PARAM_UTF8_STRING),
    END,
]);
/// `encrypt-level` is a C int (its size is part of the description, as the default provider's).
static PVK_SETTABLE: ParamTable<2> = ParamTable([
    OSSL_PARAM {
        data_size: core::mem::size_of::<c_int>(),
        ..desc(c"encrypt-level", OSSL_PARAM_INTEGER)
    },
    END,
]);

/// Text encoders have no selection check and no settable parameters, MSBLOB none of the
/// latter, as the default provider's.
impl<const I: usize> Encoder for EncCtx<I> {
    fn selection_check() -> Option<fn(c_int) -> bool> {
        match Self::DESC.selection {
            Selection::Any => None,
            _ => Some(|selection| Self::DESC.selection.accepts(selection)),
        }
    }

    fn settable() -> Option<&'static [OSSL_PARAM]> {
        match Self::DESC.output {
            Output::Der | Output::Pem => Some(&DER_PEM_SETTABLE.0),
            Output::Pvk => Some(&PVK_SETTABLE.0),
            Output::Text | Output::MsBlob => None,
        }
    }

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.set_cipher_params(params)
    }

    fn import_object(&mut self, selection: c_int, params: &Params<'_>) -> Result<KeyObj, Failure> {
        crate::keymgmt::import_object(self.prov.clone(), Self::DESC.kind, selection, params)
    }

    fn encode(
        &mut self,
        out: &mut CoreOut<'_>,
        key: &KeyObj,
        selection: c_int,
        passphrase: Option<&Passphrase<'_>>,
    ) -> Result<(), Failure> {
        self.encode_key(&key.key, selection, out, passphrase)
    }
}

macro_rules! tables {
    ($($i:literal),*) => { [$(LazyLock::new(crate::abi::encoder::table::<EncCtx<$i>>)),*] };
}

static TABLES: [LazyLock<Table<OSSL_DISPATCH>>; N] =
    tables!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);

/// kae's encoder algorithms (what `query_operation(OSSL_OP_ENCODER)` lists before the
/// re-listed encoders of other key types).
pub static ENCODER_ALGS: LazyLock<Table<OSSL_ALGORITHM>> = LazyLock::new(|| {
    let mut v: Vec<OSSL_ALGORITHM> = ENCODERS
        .iter()
        .zip(TABLES.iter())
        .map(|(d, t)| OSSL_ALGORITHM {
            algorithm_names: d.kind.algorithm_names().as_ptr(),
            property_definition: d.properties.as_ptr(),
            implementation: t.0.as_ptr(),
            algorithm_description: d.description.as_ptr(),
        })
        .collect();
    v.push(OSSL_ALGORITHM {
        algorithm_names: core::ptr::null(),
        property_definition: core::ptr::null(),
        implementation: core::ptr::null(),
        algorithm_description: core::ptr::null(),
    });
    Table(v)
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_levels() {
        let keypair = KEYPAIR_LEVELS;
        assert!(keypair.accepts(0));
        assert!(keypair.accepts(OSSL_KEYMGMT_SELECT_PRIVATE_KEY));
        assert!(keypair.accepts(0x87));
        assert!(keypair.accepts(0x86));
        assert!(!keypair.accepts(SELECT_ALL_PARAMETERS));
        assert!(PRIVATE_LEVEL.accepts(0x87));
        assert!(!PRIVATE_LEVEL.accepts(0x86));
        assert!(PUBLIC_LEVEL.accepts(0x86));
        assert!(
            !PUBLIC_LEVEL.accepts(0x87),
            "private is the highest level asked"
        );
        assert!(!PUBLIC_LEVEL.accepts(0x80));
        assert!(Selection::KeyPart.accepts(0x02));
        assert!(!Selection::KeyPart.accepts(0x84));
        assert!(!Selection::KeyPart.accepts(0));
    }

    #[test]
    fn table_strings() {
        for d in &ENCODERS {
            let p = d.properties.to_str().unwrap();
            assert!(p.starts_with("provider=kae,output="), "{p}");
            match d.structure {
                Some(s) => assert!(p.ends_with(&format!(",structure={}", s.to_str().unwrap()))),
                None => assert!(!p.contains("structure")),
            }
            assert!(d.description.to_str().unwrap().starts_with("kae RSA"));
        }
    }

    #[test]
    fn property_queries_for_the_private_context() {
        assert_eq!(private_props("provider=kae"), "provider=default");
        assert_eq!(private_props("?provider=kae"), "?provider=default");
        assert_eq!(
            private_props("fips=yes, provider = \"kae\""),
            "fips=yes, provider =default"
        );
        assert_eq!(private_props("provider!=kae"), "provider!=default");
        assert_eq!(private_props("provider=fips"), "provider=fips");
        assert_eq!(private_props("-provider"), "-provider");
        assert_eq!(private_props(""), "");
    }
}
