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

use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::encode::{
    cipher_available, CoreBio, EncoderCtx, MemBio, PassphraseCb, Pkey, OSSL_CORE_BIO,
};
use crate::ffi::params::{desc, ParamTable, Params, END};
use crate::ffi::sys::*;
use crate::ffi::{guard, guard_ptr};
use crate::keymgmt::KeyObj;
use crate::provider::{ProvCtx, RSA_NAMES, RSA_PSS_NAMES};
use crate::rsa::{KeyType, RsaKey};
use core::ffi::{c_int, c_void, CStr};
use std::ffi::CString;
use std::sync::{Arc, LazyLock};

const SELECT_ALL_PARAMETERS: c_int =
    OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS;

const OSSL_FUNC_ENCODER_NEWCTX: c_int = 1;
const OSSL_FUNC_ENCODER_FREECTX: c_int = 2;
const OSSL_FUNC_ENCODER_SET_CTX_PARAMS: c_int = 5;
const OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS: c_int = 6;
const OSSL_FUNC_ENCODER_DOES_SELECTION: c_int = 10;
const OSSL_FUNC_ENCODER_ENCODE: c_int = 11;
const OSSL_FUNC_ENCODER_IMPORT_OBJECT: c_int = 20;
const OSSL_FUNC_ENCODER_FREE_OBJECT: c_int = 21;

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

/// An encoder context: the instance, which encoder, and the settings the caller made.
pub struct EncCtx {
    prov: Arc<ProvCtx>,
    desc: &'static EncoderDesc,
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

impl EncCtx {
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        match self.desc.output {
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
                        let cname = crate::provider::cstring(name)?;
                        let cprops = props
                            .map(|q| crate::provider::cstring(&private_props(q)))
                            .transpose()?;
                        // SAFETY: default_libctx is NULL (then the default context) or our
                        // private library context, created in init and freed only at teardown,
                        // which cannot run during this call on one of our encoder contexts.
                        let available = unsafe {
                            cipher_available(self.prov.default_libctx(), &cname, cprops.as_deref())
                        };
                        if !available {
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
    fn encode(
        &self,
        key: &RsaKey,
        selection: c_int,
        cout: *mut OSSL_CORE_BIO,
        cb: Option<PassphraseCb>,
        cbarg: *mut c_void,
    ) -> Result<c_int, Failure> {
        let libctx = self.prov.default_libctx();
        if libctx.is_null() {
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
            // SAFETY: libctx is our private library context (non-NULL, checked above), created
            // in init and freed only at teardown, which cannot run during this call; pkey is a
            // local dropped before this function returns.
            unsafe { Pkey::from_params(libctx, key_type, fromdata, &params) }
                .map_err(|e| Failure::with(e, "the default provider refused the exported key"))?
        };
        let d = self.desc;
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
        if let Some(cb) = cb {
            // SAFETY: the core's callback and argument, valid for this encode call, which
            // outlives `ectx`.
            unsafe { ectx.set_passphrase_cb(cb, cbarg) }?;
        }
        let mut mem = MemBio::new()?;
        ectx.encode_to(&mut mem)
            .map_err(|e| Failure::with(e, "encoding failed"))?;
        drop(ectx);
        drop(pkey);
        // SAFETY: the core BIO of this encode call; our child library context was made from
        // the core's dispatch table, which carries the BIO upcalls.
        let mut out = unsafe { CoreBio::new(self.prov.libctx, cout) }?;
        out.write_all(mem.data())?;
        Ok(1)
    }
}

/// # Safety
/// `vctx` is NULL or a context made by `enc_newctx`.
unsafe fn ctx_ref<'a>(vctx: *mut c_void) -> Option<&'a mut EncCtx> {
    // SAFETY: per the caller's contract vctx is NULL or a live Box<EncCtx> leaked by enc_newctx;
    // the core never uses one encoder context from two threads at once, so this borrow is unique.
    unsafe { vctx.cast::<EncCtx>().as_mut() }
}

unsafe extern "C" fn enc_newctx<const I: usize>(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, KaeError> {
        if prov.default_libctx().is_null() {
            return Err(KaeError::DefaultProviderUnavailable);
        }
        let ctx = EncCtx {
            prov,
            desc: &ENCODERS[I],
            cipher: None,
            cipher_props: None,
            save_parameters: None,
            encrypt_level: None,
        };
        Ok(Box::into_raw(Box::new(ctx)).cast())
    })
}

unsafe extern "C" fn enc_freectx(vctx: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        if !vctx.is_null() {
            // SAFETY: made by Box::into_raw in enc_newctx, freed once by the core.
            drop(unsafe { Box::from_raw(vctx.cast::<EncCtx>()) });
        }
        Ok(())
    })
}

unsafe extern "C" fn enc_does_selection<const I: usize>(
    _provctx: *mut c_void,
    selection: c_int,
) -> c_int {
    guard(None, 0, || -> Result<c_int, KaeError> {
        Ok(ENCODERS[I].selection.accepts(selection) as c_int)
    })
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

unsafe extern "C" fn enc_settable_der_pem(_provctx: *mut c_void) -> *const OSSL_PARAM {
    DER_PEM_SETTABLE.as_ptr()
}

unsafe extern "C" fn enc_settable_pvk(_provctx: *mut c_void) -> *const OSSL_PARAM {
    PVK_SETTABLE.as_ptr()
}

unsafe extern "C" fn enc_set_ctx_params(vctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: the core passes the pointer our enc_newctx returned (or NULL) and never uses it after
    // enc_freectx, as ctx_ref asks.
    let Some(ctx) = (unsafe { ctx_ref(vctx) }) else {
        return 0;
    };
    let core = ctx.prov.core;
    guard(Some(&core), 0, || -> Result<c_int, Failure> {
        // SAFETY: params is the core's array, NULL or terminated and valid for this call.
        ctx.set_params(&unsafe { Params::from_ptr(params) })?;
        Ok(1)
    })
}

unsafe extern "C" fn enc_import_object(
    vctx: *mut c_void,
    selection: c_int,
    params: *const OSSL_PARAM,
) -> *mut c_void {
    // SAFETY: the core passes the pointer our enc_newctx returned (or NULL) and never uses it after
    // enc_freectx, as ctx_ref asks.
    let Some(ctx) = (unsafe { ctx_ref(vctx) }) else {
        return core::ptr::null_mut();
    };
    let core = ctx.prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, Failure> {
        // SAFETY: params is the core's array (another keymgmt's export), NULL or terminated and
        // valid for this call.
        let params = unsafe { Params::from_ptr(params) };
        crate::keymgmt::import_object(ctx.prov.clone(), ctx.desc.kind, selection, &params)
    })
}

unsafe extern "C" fn enc_free_object(obj: *mut c_void) {
    guard(None, (), || -> Result<(), KaeError> {
        // SAFETY: the core frees what our import_object made, once.
        unsafe { crate::keymgmt::free_object(obj) };
        Ok(())
    })
}

unsafe extern "C" fn enc_encode(
    vctx: *mut c_void,
    cout: *mut OSSL_CORE_BIO,
    obj_raw: *const c_void,
    obj_abstract: *const OSSL_PARAM,
    selection: c_int,
    cb: Option<PassphraseCb>,
    cbarg: *mut c_void,
) -> c_int {
    // SAFETY: the core passes the pointer our enc_newctx returned (or NULL) and never uses it after
    // enc_freectx, as ctx_ref asks.
    let Some(ctx) = (unsafe { ctx_ref(vctx) }) else {
        return 0;
    };
    let core = ctx.prov.core;
    guard(Some(&core), 0, || -> Result<c_int, Failure> {
        if !obj_abstract.is_null() {
            return Err(Failure::with(
                KaeError::InvalidArgument,
                "abstract key objects are not supported",
            ));
        }
        // SAFETY: the core passes the key object of the key's key management, which for our
        // encoders is kae's (same provider) or one our import_object made; the tag is checked.
        let obj = unsafe { KeyObj::from_ptr(obj_raw) }
            .ok_or_else(|| Failure::with(KaeError::InvalidArgument, "not a kae RSA key object"))?;
        ctx.encode(&obj.key, selection, cout, cb, cbarg)
    })
}

fn entry(function_id: c_int, f: *const ()) -> OSSL_DISPATCH {
    OSSL_DISPATCH {
        function_id,
        // SAFETY: OpenSSL casts the pointer back to the type documented for the id, which is
        // the type of the function we pass (see `dispatch_table`).
        function: Some(unsafe { core::mem::transmute::<*const (), unsafe extern "C" fn()>(f) }),
    }
}

type NewCtxFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type FreeCtxFn = unsafe extern "C" fn(*mut c_void);
type DoesSelectionFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type SettableFn = unsafe extern "C" fn(*mut c_void) -> *const OSSL_PARAM;
type SetCtxParamsFn = unsafe extern "C" fn(*mut c_void, *const OSSL_PARAM) -> c_int;
type ImportObjectFn = unsafe extern "C" fn(*mut c_void, c_int, *const OSSL_PARAM) -> *mut c_void;
type FreeObjectFn = unsafe extern "C" fn(*mut c_void);
type EncodeFn = unsafe extern "C" fn(
    *mut c_void,
    *mut OSSL_CORE_BIO,
    *const c_void,
    *const OSSL_PARAM,
    c_int,
    Option<PassphraseCb>,
    *mut c_void,
) -> c_int;

/// The dispatch table of encoder `I`: the functions the default provider's counterpart has
/// (text: no selection check and no settable parameters; MSBLOB: no settable parameters).
fn dispatch_table<const I: usize>() -> Table<OSSL_DISPATCH> {
    let d = &ENCODERS[I];
    let mut v = vec![
        entry(
            OSSL_FUNC_ENCODER_NEWCTX,
            enc_newctx::<I> as NewCtxFn as *const (),
        ),
        entry(
            OSSL_FUNC_ENCODER_FREECTX,
            enc_freectx as FreeCtxFn as *const (),
        ),
    ];
    match d.output {
        Output::Der | Output::Pem => {
            v.push(entry(
                OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS,
                enc_settable_der_pem as SettableFn as *const (),
            ));
            v.push(entry(
                OSSL_FUNC_ENCODER_SET_CTX_PARAMS,
                enc_set_ctx_params as SetCtxParamsFn as *const (),
            ));
        }
        Output::Pvk => {
            v.push(entry(
                OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS,
                enc_settable_pvk as SettableFn as *const (),
            ));
            v.push(entry(
                OSSL_FUNC_ENCODER_SET_CTX_PARAMS,
                enc_set_ctx_params as SetCtxParamsFn as *const (),
            ));
        }
        Output::Text | Output::MsBlob => {}
    }
    if d.selection != Selection::Any {
        v.push(entry(
            OSSL_FUNC_ENCODER_DOES_SELECTION,
            enc_does_selection::<I> as DoesSelectionFn as *const (),
        ));
    }
    v.push(entry(
        OSSL_FUNC_ENCODER_IMPORT_OBJECT,
        enc_import_object as ImportObjectFn as *const (),
    ));
    v.push(entry(
        OSSL_FUNC_ENCODER_FREE_OBJECT,
        enc_free_object as FreeObjectFn as *const (),
    ));
    v.push(entry(
        OSSL_FUNC_ENCODER_ENCODE,
        enc_encode as EncodeFn as *const (),
    ));
    v.push(OSSL_DISPATCH {
        function_id: 0,
        function: None,
    });
    Table(v)
}

macro_rules! tables {
    ($($i:literal),*) => { [$(LazyLock::new(dispatch_table::<$i>)),*] };
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
            algorithm_names: match d.kind {
                KeyType::Rsa => RSA_NAMES.as_ptr(),
                KeyType::RsaPss => RSA_PSS_NAMES.as_ptr(),
            },
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
