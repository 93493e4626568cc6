//! kae's own RSA / RSA-PSS key encoders (src/encoder.rs).
//!
//! With kae alone in a library context (no default provider there), writing an RSA key used
//! to fail with "No encoders were found": the default provider's encoders are not re-listed
//! for RSA (they would receive kae's key objects). These tests check that kae's encoders
//!
//! * are listed like the default provider's (same outputs and structures, same selection
//!   answers, same settable parameters), under `provider=kae` with kae's descriptions, and are
//!   the only RSA encoders a kae-only context has;
//! * write, for the same key, exactly the bytes the default provider writes (every
//!   deterministic output: DER, PEM, text, MSBLOB, unencrypted PVK), and encrypted private
//!   keys that the default provider decrypts with the same passphrase (and not with another);
//! * take keys of another provider through `import_object`;
//! * make `openssl req -x509 -newkey`, `genpkey` (plain and encrypted) and `pkey -text`,
//!   `-pubout`, `-traditional`, `-outform DER` work with `-provider kae` alone, with the same
//!   output as the default provider;
//! * are not listed with `load-default = no`.

use crate::common;
use crate::procs;

use common::ffi::{
    BIO_ctrl, BIO_free, BIO_new, BIO_s_mem, EVP_PKEY_print_private, EVP_PKEY_print_public,
    OSSL_DECODER_CTX_free, OSSL_DECODER_CTX_new_for_pkey, OSSL_DECODER_CTX_set_passphrase,
    OSSL_DECODER_from_data, OSSL_ENCODER_CTX_free, OSSL_ENCODER_CTX_get_num_encoders,
    OSSL_ENCODER_CTX_new_for_pkey, OSSL_ENCODER_CTX_set_cipher, OSSL_ENCODER_CTX_set_params,
    OSSL_ENCODER_CTX_set_passphrase, OSSL_ENCODER_do_all_provided, OSSL_ENCODER_get0_description,
    OSSL_ENCODER_get0_properties, OSSL_ENCODER_get0_provider, OSSL_ENCODER_is_a,
    OSSL_ENCODER_to_bio, OSSL_PROVIDER_get0_name, OSSL_PROVIDER_get0_provider_ctx,
    OSSL_PROVIDER_query_operation, BIO, EVP_PKEY, EVP_PKEY_KEYPAIR, EVP_PKEY_PUBLIC_KEY,
    OSSL_ENCODER, OSSL_LIB_CTX, OSSL_PARAM, OSSL_PROVIDER,
};
use common::{clear_errors, kae, kae_with_default, reference, take_errors, Lib, Pkey};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs;
use std::ptr;
use std::sync::OnceLock;

const OSSL_OP_ENCODER: c_int = 20;
const FUNC_SETTABLE_CTX_PARAMS: c_int = 6;
const FUNC_DOES_SELECTION: c_int = 10;

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn rsa_like(names: &str) -> bool {
    names.split(':').any(|n| {
        let n = n.to_ascii_uppercase();
        n.contains("RSA") || n.starts_with("1.2.840.113549.1.1.")
    })
}

/// A property definition without its `provider` and `fips` clauses (what must be the same
/// between kae's and the default provider's encoders).
fn output_props(def: &str) -> String {
    def.split(',')
        .filter(|c| !c.starts_with("provider=") && !c.starts_with("fips="))
        .collect::<Vec<_>>()
        .join(",")
}

// ---------------------------------------------------------------------------------------------
// Memory BIO
// ---------------------------------------------------------------------------------------------

struct MemBio(*mut BIO);

impl MemBio {
    fn new() -> MemBio {
        let b = unsafe { BIO_new(BIO_s_mem()) };
        assert!(!b.is_null());
        MemBio(b)
    }
    fn bytes(&self) -> Vec<u8> {
        let mut p: *mut c_char = ptr::null_mut();
        // BIO_get_mem_data
        let n = unsafe { BIO_ctrl(self.0, 3, 0, (&mut p as *mut *mut c_char).cast()) };
        if n <= 0 || p.is_null() {
            return Vec::new();
        }
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n as usize) }.to_vec()
    }
}

impl Drop for MemBio {
    fn drop(&mut self) {
        unsafe { BIO_free(self.0) };
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding and decoding through the public API
// ---------------------------------------------------------------------------------------------

/// What an encoding attempt gave.
#[derive(PartialEq, Eq)]
enum Enc {
    /// `OSSL_ENCODER_CTX_new_for_pkey` found no encoder.
    NoEncoder,
    /// Encoders were found but encoding failed.
    Failed(String),
    Bytes(Vec<u8>),
}

impl std::fmt::Debug for Enc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Enc::NoEncoder => write!(f, "NoEncoder"),
            Enc::Failed(e) => write!(f, "Failed({e})"),
            Enc::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => write!(f, "Bytes({} bytes):\n{s}", b.len()),
                Err(_) => write!(f, "Bytes({} bytes) {}", b.len(), common::hex(b)),
            },
        }
    }
}

impl Enc {
    fn bytes(self) -> Vec<u8> {
        match self {
            Enc::Bytes(b) => b,
            other => panic!("expected an encoding, got {other:?}"),
        }
    }
}

/// Options of one encoding.
#[derive(Default, Clone)]
struct EncOpts<'a> {
    propq: Option<&'a str>,
    cipher: Option<(&'a str, Option<&'a str>)>,
    pass: Option<&'a [u8]>,
    encrypt_level: Option<c_int>,
}

fn encode(
    key: &Pkey,
    selection: c_int,
    output: &str,
    structure: Option<&str>,
    o: &EncOpts<'_>,
) -> Enc {
    clear_errors();
    let output = CString::new(output).unwrap();
    let structure = structure.map(|s| CString::new(s).unwrap());
    let propq = o.propq.map(|s| CString::new(s).unwrap());
    unsafe {
        let ctx = OSSL_ENCODER_CTX_new_for_pkey(
            key.as_ptr(),
            selection,
            output.as_ptr(),
            structure.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            propq.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
        );
        assert!(!ctx.is_null(), "OSSL_ENCODER_CTX_new_for_pkey");
        let res = (|| {
            if OSSL_ENCODER_CTX_get_num_encoders(ctx) == 0 {
                return Enc::NoEncoder;
            }
            if let Some((name, props)) = o.cipher {
                let n = CString::new(name).unwrap();
                let p = props.map(|p| CString::new(p).unwrap());
                if OSSL_ENCODER_CTX_set_cipher(
                    ctx,
                    n.as_ptr(),
                    p.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
                ) != 1
                {
                    return Enc::Failed(format!("set_cipher: {}", take_errors("set_cipher")));
                }
            }
            if let Some(pass) = o.pass {
                assert_eq!(
                    OSSL_ENCODER_CTX_set_passphrase(ctx, pass.as_ptr(), pass.len()),
                    1
                );
            }
            if let Some(mut level) = o.encrypt_level {
                let params = [
                    OSSL_PARAM {
                        key: c"encrypt-level".as_ptr(),
                        data_type: common::ffi::OSSL_PARAM_INTEGER,
                        data: (&mut level as *mut c_int).cast(),
                        data_size: std::mem::size_of::<c_int>(),
                        return_size: common::ffi::OSSL_PARAM_UNMODIFIED,
                    },
                    OSSL_PARAM {
                        key: ptr::null(),
                        data_type: 0,
                        data: ptr::null_mut(),
                        data_size: 0,
                        return_size: 0,
                    },
                ];
                assert_eq!(OSSL_ENCODER_CTX_set_params(ctx, params.as_ptr()), 1);
            }
            let bio = MemBio::new();
            if OSSL_ENCODER_to_bio(ctx, bio.0) != 1 {
                return Enc::Failed(take_errors("OSSL_ENCODER_to_bio").to_string());
            }
            Enc::Bytes(bio.bytes())
        })();
        OSSL_ENCODER_CTX_free(ctx);
        clear_errors();
        res
    }
}

/// Decodes `data` (`input` "PEM" or "DER") into a key of `lib`, with an optional passphrase.
fn decode(lib: &Lib, data: &[u8], input: &str, keytype: &str, pass: Option<&[u8]>) -> Option<Pkey> {
    clear_errors();
    let input = CString::new(input).unwrap();
    let keytype = CString::new(keytype).unwrap();
    let mut pk: *mut EVP_PKEY = ptr::null_mut();
    unsafe {
        let ctx = OSSL_DECODER_CTX_new_for_pkey(
            &mut pk,
            input.as_ptr(),
            ptr::null(),
            keytype.as_ptr(),
            0,
            lib.ptr,
            ptr::null(),
        );
        assert!(!ctx.is_null(), "OSSL_DECODER_CTX_new_for_pkey");
        if let Some(p) = pass {
            assert_eq!(OSSL_DECODER_CTX_set_passphrase(ctx, p.as_ptr(), p.len()), 1);
        }
        let mut d = data.as_ptr();
        let mut len = data.len();
        let ok = OSSL_DECODER_from_data(ctx, &mut d, &mut len) == 1;
        OSSL_DECODER_CTX_free(ctx);
        clear_errors();
        if ok && !pk.is_null() {
            Some(Pkey(pk))
        } else {
            if !pk.is_null() {
                drop(Pkey(pk));
            }
            None
        }
    }
}

fn print(key: &Pkey, private: bool) -> Vec<u8> {
    let bio = MemBio::new();
    let r = unsafe {
        if private {
            EVP_PKEY_print_private(bio.0, key.as_ptr(), 0, ptr::null_mut())
        } else {
            EVP_PKEY_print_public(bio.0, key.as_ptr(), 0, ptr::null_mut())
        }
    };
    assert_eq!(r, 1, "EVP_PKEY_print: {}", take_errors("print"));
    bio.bytes()
}

// ---------------------------------------------------------------------------------------------
// Keys: made by the default provider, and the same key read into the kae-only context
// ---------------------------------------------------------------------------------------------

struct TestKey {
    label: &'static str,
    keytype: &'static str,
    /// The key in the reference (default-only) context.
    reference: Pkey,
    /// The same key read from its PEM in the kae-only context (a kae key object).
    kae: Pkey,
}

fn make_keys() -> Vec<TestKey> {
    use common::ParamsBuilder;
    let r = reference();
    let specs: Vec<(&'static str, &'static str, common::Params)> = vec![
        (
            "RSA-2048",
            "RSA",
            ParamsBuilder::new().size_t("bits", 2048).build(),
        ),
        (
            "RSA-1025",
            "RSA",
            ParamsBuilder::new().size_t("bits", 1025).build(),
        ),
        (
            "RSA-2048-3-primes",
            "RSA",
            ParamsBuilder::new()
                .size_t("bits", 2048)
                .size_t("primes", 3)
                .build(),
        ),
        (
            "RSA-PSS-unrestricted",
            "RSA-PSS",
            ParamsBuilder::new().size_t("bits", 2048).build(),
        ),
        (
            "RSA-PSS-restricted",
            "RSA-PSS",
            ParamsBuilder::new()
                .size_t("bits", 2048)
                .utf8("digest", "SHA256")
                .utf8("mgf1-digest", "SHA256")
                .int("saltlen", 32)
                .build(),
        ),
        (
            "RSA-PSS-defaults-explicit",
            "RSA-PSS",
            ParamsBuilder::new()
                .size_t("bits", 2048)
                .utf8("digest", "SHA1")
                .build(),
        ),
    ];
    specs
        .into_iter()
        .map(|(label, keytype, params)| {
            let reference = r.keygen(keytype, &params).expect("keygen (default)");
            let pem = encode(
                &reference,
                EVP_PKEY_KEYPAIR,
                "PEM",
                Some("PrivateKeyInfo"),
                &EncOpts::default(),
            )
            .bytes();
            let kae_key = decode(kae(), &pem, "PEM", keytype, None)
                .unwrap_or_else(|| panic!("{label}: the kae-only context cannot read the PEM"));
            kae().expect_key(&kae_key, label);
            assert!(kae_key.has_private(), "{label}");
            TestKey {
                label,
                keytype,
                reference,
                kae: kae_key,
            }
        })
        .collect()
}

fn keys() -> &'static [TestKey] {
    static KEYS: OnceLock<Vec<TestKey>> = OnceLock::new();
    KEYS.get_or_init(make_keys)
}

// ---------------------------------------------------------------------------------------------
// The algorithm lists
// ---------------------------------------------------------------------------------------------

struct ListedEncoder {
    names: String,
    props: String,
    description: String,
    /// function id → function
    fns: BTreeMap<c_int, unsafe extern "C" fn()>,
}

/// The RSA-like encoders `prov` lists, keyed by (first name, output properties).
fn listed_rsa_encoders(prov: *mut OSSL_PROVIDER) -> BTreeMap<(String, String), ListedEncoder> {
    let mut out = BTreeMap::new();
    let mut no_cache = 0;
    let mut a = unsafe { OSSL_PROVIDER_query_operation(prov, OSSL_OP_ENCODER, &mut no_cache) };
    assert!(!a.is_null(), "no encoders listed");
    unsafe {
        while !(*a).algorithm_names.is_null() {
            let names = cstr((*a).algorithm_names);
            if rsa_like(&names) {
                let props = cstr((*a).property_definition);
                let mut fns = BTreeMap::new();
                let mut d = (*a).implementation;
                while (*d).function_id != 0 {
                    if let Some(f) = (*d).function {
                        fns.insert((*d).function_id, f);
                    }
                    d = d.add(1);
                }
                let first = names.split(':').next().unwrap().to_owned();
                let prev = out.insert(
                    (first, output_props(&props)),
                    ListedEncoder {
                        names: names.clone(),
                        props,
                        description: cstr((*a).algorithm_description),
                        fns,
                    },
                );
                assert!(prev.is_none(), "{names} listed twice");
            }
            a = a.add(1);
        }
    }
    out
}

fn settable_keys(prov: *mut OSSL_PROVIDER, e: &ListedEncoder) -> Vec<(String, u32, usize)> {
    let Some(f) = e.fns.get(&FUNC_SETTABLE_CTX_PARAMS) else {
        return Vec::new();
    };
    let f: unsafe extern "C" fn(*mut c_void) -> *const OSSL_PARAM =
        unsafe { std::mem::transmute(*f) };
    let mut v = Vec::new();
    unsafe {
        let mut p = f(OSSL_PROVIDER_get0_provider_ctx(prov));
        while !p.is_null() && !(*p).key.is_null() {
            v.push((cstr((*p).key), (*p).data_type, (*p).data_size));
            p = p.add(1);
        }
    }
    v
}

/// kae lists one encoder for every RSA / RSA-PSS encoder of the default provider (same output
/// and structure), with `provider=kae` (no `fips=yes`: kae is not a FIPS provider), kae's
/// description, the same functions, the same `does_selection` answer for every selection and
/// the same settable parameters; and none of them is the default provider's code.
#[test]
fn kae_lists_an_encoder_for_each_default_rsa_encoder() {
    let k = kae();
    let r = reference();
    let ours = listed_rsa_encoders(k.prov);
    let theirs = listed_rsa_encoders(r.prov);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "kae's RSA encoders differ from the default provider's"
    );
    assert!(theirs.len() >= 24, "{}", theirs.len());
    let kae_ctx = unsafe { OSSL_PROVIDER_get0_provider_ctx(k.prov) };
    let ref_ctx = unsafe { OSSL_PROVIDER_get0_provider_ctx(r.prov) };
    let default_fns: BTreeSet<usize> = theirs
        .values()
        .flat_map(|e| e.fns.values().map(|f| *f as usize))
        .collect();
    for (key, mine) in &ours {
        let def = &theirs[key];
        assert_eq!(
            mine.props,
            format!("provider=kae,{}", key.1),
            "{}",
            mine.names
        );
        assert!(
            mine.description.starts_with("kae RSA"),
            "{}: description {:?}",
            mine.props,
            mine.description
        );
        // The default provider's encoders carry the key type's first name only; kae's carry
        // all names of its key management.
        assert!(
            def.names
                .split(':')
                .all(|n| mine.names.split(':').any(|m| m == n)),
            "{} vs {}",
            mine.names,
            def.names
        );
        assert_eq!(
            mine.fns.keys().collect::<Vec<_>>(),
            def.fns.keys().collect::<Vec<_>>(),
            "{key:?}: function ids"
        );
        for f in mine.fns.values() {
            assert!(
                !default_fns.contains(&(*f as usize)),
                "{key:?}: kae lists a default provider function"
            );
        }
        if let (Some(a), Some(b)) = (
            mine.fns.get(&FUNC_DOES_SELECTION),
            def.fns.get(&FUNC_DOES_SELECTION),
        ) {
            let a: unsafe extern "C" fn(*mut c_void, c_int) -> c_int =
                unsafe { std::mem::transmute(*a) };
            let b: unsafe extern "C" fn(*mut c_void, c_int) -> c_int =
                unsafe { std::mem::transmute(*b) };
            for bits in 0..16 {
                // every combination of private, public, domain and other parameters
                let sel = (bits & 0x7) | if bits & 0x8 != 0 { 0x80 } else { 0 };
                let (x, y) = unsafe { (a(kae_ctx, sel), b(ref_ctx, sel)) };
                assert_eq!(x != 0, y != 0, "{key:?}: does_selection({sel:#x})");
            }
        }
        assert_eq!(
            settable_keys(k.prov, mine),
            settable_keys(r.prov, def),
            "{key:?}: settable parameters"
        );
    }
}

unsafe extern "C" fn collect_encoder(e: *mut OSSL_ENCODER, arg: *mut c_void) {
    let v = unsafe { &mut *arg.cast::<Vec<(String, String, String, String)>>() };
    let is = |n: &CStr| unsafe { OSSL_ENCODER_is_a(e, n.as_ptr()) } == 1;
    if is(c"RSA") || is(c"RSA-PSS") {
        let kind = if is(c"RSA-PSS") { "RSA-PSS" } else { "RSA" };
        unsafe {
            v.push((
                kind.to_owned(),
                cstr(OSSL_PROVIDER_get0_name(OSSL_ENCODER_get0_provider(e))),
                cstr(OSSL_ENCODER_get0_properties(e)),
                cstr(OSSL_ENCODER_get0_description(e)),
            ));
        }
    }
}

fn rsa_encoders_in(libctx: *mut OSSL_LIB_CTX) -> Vec<(String, String, String, String)> {
    let mut v: Vec<(String, String, String, String)> = Vec::new();
    unsafe {
        OSSL_ENCODER_do_all_provided(libctx, collect_encoder, (&mut v as *mut Vec<_>).cast())
    };
    v
}

/// In a context holding only kae, every RSA / RSA-PSS encoder OpenSSL can pick for a key is
/// kae's own (provider kae, kae's description), so the encoder that wrote any kae key in these
/// tests was kae's.
#[test]
fn a_kae_only_context_encodes_rsa_keys_with_kae_encoders_only() {
    let found = rsa_encoders_in(kae().ptr);
    assert_eq!(found.len(), 24, "{found:#?}");
    for (kind, prov, props, descr) in &found {
        assert_eq!(prov, &kae().prov_name, "{kind} {props}");
        assert!(props.starts_with("provider=kae,output="), "{props}");
        assert!(
            descr.starts_with(&format!("kae {kind} encoder")),
            "{kind} {props}: {descr:?}"
        );
    }
    // And a kae key in it is encoded (the counterpart of "No encoders were found").
    let k = &keys()[0];
    let der = encode(
        &k.kae,
        EVP_PKEY_KEYPAIR,
        "DER",
        Some("PrivateKeyInfo"),
        &EncOpts::default(),
    );
    assert!(
        matches!(der, Enc::Bytes(ref b) if b.len() > 1000),
        "{der:?}"
    );
}

/// The (output, structure, selection) combinations compared byte for byte; `NoEncoder` and
/// failures must agree too.
fn cases() -> Vec<(&'static str, Option<&'static str>, c_int)> {
    let mut v = Vec::new();
    for out in ["DER", "PEM"] {
        for s in [
            "PrivateKeyInfo",
            "SubjectPublicKeyInfo",
            "type-specific",
            "rsa",
            "pkcs1",
            "RSA",
            "PKCS1",
        ] {
            for sel in [
                EVP_PKEY_KEYPAIR,
                EVP_PKEY_PUBLIC_KEY,
                common::ffi::OSSL_KEYMGMT_SELECT_PRIVATE_KEY,
                common::ffi::OSSL_KEYMGMT_SELECT_PUBLIC_KEY,
                common::ffi::OSSL_KEYMGMT_SELECT_ALL_PARAMETERS,
            ] {
                v.push((out, Some(s), sel));
            }
        }
        v.push((out, None, EVP_PKEY_KEYPAIR));
        v.push((out, None, EVP_PKEY_PUBLIC_KEY));
    }
    for sel in [
        EVP_PKEY_KEYPAIR,
        EVP_PKEY_PUBLIC_KEY,
        common::ffi::OSSL_KEYMGMT_SELECT_ALL_PARAMETERS,
    ] {
        v.push(("TEXT", None, sel));
        v.push(("MSBLOB", None, sel));
    }
    v
}

/// The same key, encoded by kae's encoders in the kae-only context and by the default
/// provider in the reference context, gives the same bytes for every deterministic output.
#[test]
fn encodings_are_byte_identical_to_the_default_provider() {
    let mut compared = 0;
    for k in keys() {
        for (out, structure, sel) in cases() {
            let o = EncOpts::default();
            let ours = encode(&k.kae, sel, out, structure, &o);
            let theirs = encode(&k.reference, sel, out, structure, &o);
            let what = format!("{} {out} {structure:?} selection {sel:#x}", k.label);
            match (&ours, &theirs) {
                (Enc::Bytes(a), Enc::Bytes(b)) => {
                    assert!(!a.is_empty(), "{what}: empty output");
                    assert!(a == b, "{what}:\nkae: {ours:?}\ndefault: {theirs:?}");
                    compared += 1;
                }
                (Enc::NoEncoder, Enc::NoEncoder) | (Enc::Failed(_), Enc::Failed(_)) => {}
                _ => panic!("{what}:\nkae: {ours:?}\ndefault: {theirs:?}"),
            }
        }
        // Unencrypted PVK (encrypted PVK needs RC4 from the legacy provider).
        let o = EncOpts {
            encrypt_level: Some(0),
            ..Default::default()
        };
        let ours = encode(&k.kae, EVP_PKEY_KEYPAIR, "PVK", None, &o);
        let theirs = encode(&k.reference, EVP_PKEY_KEYPAIR, "PVK", None, &o);
        assert_eq!(ours, theirs, "{} PVK", k.label);
        // What `openssl pkey -text` / `-text_pub` print.
        assert_eq!(
            String::from_utf8_lossy(&print(&k.kae, true)),
            String::from_utf8_lossy(&print(&k.reference, true)),
            "{} text (private)",
            k.label
        );
        assert_eq!(
            String::from_utf8_lossy(&print(&k.kae, false)),
            String::from_utf8_lossy(&print(&k.reference, false)),
            "{} text (public)",
            k.label
        );
    }
    assert!(compared >= 100, "only {compared} outputs compared");
}

/// Encrypted private keys written by kae's encoders (EncryptedPrivateKeyInfo, and
/// PrivateKeyInfo with a cipher as PEM_write_bio_PrivateKey asks for it) are read by the
/// default provider with the right passphrase and refused with a wrong one. The cipher's
/// property query of the application (`provider=kae`) is honoured; an unknown cipher is
/// refused like the default provider refuses it.
#[test]
fn encrypted_private_keys_decrypt_with_the_default_provider() {
    for k in keys().iter().filter(|k| k.label != "RSA-1025") {
        for (out, structure, cipher) in [
            ("PEM", "EncryptedPrivateKeyInfo", ("AES-256-CBC", None)),
            ("DER", "EncryptedPrivateKeyInfo", ("AES-128-CBC", None)),
            (
                "PEM",
                "PrivateKeyInfo",
                ("AES-256-CBC", Some("provider=kae")),
            ),
            (
                "DER",
                "PrivateKeyInfo",
                ("ARIA-192-CBC", Some("?provider=kae")),
            ),
        ] {
            let what = format!("{} {out} {structure} {cipher:?}", k.label);
            let o = EncOpts {
                cipher: Some(cipher),
                pass: Some(b"x"),
                ..Default::default()
            };
            let enc = encode(&k.kae, EVP_PKEY_KEYPAIR, out, Some(structure), &o).bytes();
            if out == "PEM" {
                assert!(
                    enc.starts_with(b"-----BEGIN ENCRYPTED PRIVATE KEY-----"),
                    "{what}: {}",
                    String::from_utf8_lossy(&enc)
                );
            }
            let back = decode(reference(), &enc, out, k.keytype, Some(b"x"))
                .unwrap_or_else(|| panic!("{what}: the default provider cannot decrypt it"));
            assert_eq!(back.eq_raw(&k.reference), 1, "{what}: a different key");
            assert!(back.has_private(), "{what}");
            assert!(
                decode(reference(), &enc, out, k.keytype, Some(b"y")).is_none(),
                "{what}: decrypted with a wrong passphrase"
            );
            // Two encryptions of the same key differ (fresh salt and IV).
            let again = encode(&k.kae, EVP_PKEY_KEYPAIR, out, Some(structure), &o).bytes();
            assert_ne!(enc, again, "{what}");
        }
    }
    let k = &keys()[0];
    for cipher in [
        ("NO-SUCH-CIPHER", None),
        ("AES-256-CBC", Some("provider=nosuch")),
    ] {
        let o = EncOpts {
            cipher: Some(cipher),
            pass: Some(b"x"),
            ..Default::default()
        };
        let ours = encode(&k.kae, EVP_PKEY_KEYPAIR, "PEM", Some("PrivateKeyInfo"), &o);
        assert!(matches!(ours, Enc::Failed(_)), "{cipher:?}: {ours:?}");
        let theirs = encode(
            &k.reference,
            EVP_PKEY_KEYPAIR,
            "PEM",
            Some("PrivateKeyInfo"),
            &o,
        );
        assert!(matches!(theirs, Enc::Failed(_)), "{cipher:?}: {theirs:?}");
    }
}

/// In a context with kae and the default provider both loaded, a key of the default provider
/// is written exactly as the default provider alone writes it. OpenSSL collects kae's
/// encoders for it too (they have `import_object`), but prefers the encoders of the key's own
/// provider and does not filter keyed encoders by the property query, so which one runs is
/// OpenSSL's choice; kae's `import_object` path is exercised directly by the next test.
#[test]
fn keys_of_another_provider_are_imported() {
    let lib = kae_with_default();
    for k in keys().iter().filter(|k| k.label != "RSA-1025") {
        let pem = encode(
            &k.reference,
            EVP_PKEY_KEYPAIR,
            "PEM",
            Some("PrivateKeyInfo"),
            &EncOpts::default(),
        )
        .bytes();
        // Decoded with the default provider's key management of this context.
        clear_errors();
        let input = CString::new("PEM").unwrap();
        let keytype = CString::new(k.keytype).unwrap();
        let propq = CString::new("provider=default").unwrap();
        let mut pk: *mut EVP_PKEY = ptr::null_mut();
        unsafe {
            let ctx = OSSL_DECODER_CTX_new_for_pkey(
                &mut pk,
                input.as_ptr(),
                ptr::null(),
                keytype.as_ptr(),
                0,
                lib.ptr,
                propq.as_ptr(),
            );
            let mut d = pem.as_ptr();
            let mut len = pem.len();
            assert_eq!(
                OSSL_DECODER_from_data(ctx, &mut d, &mut len),
                1,
                "{}",
                k.label
            );
            OSSL_DECODER_CTX_free(ctx);
        }
        let theirs = Pkey(pk);
        assert_eq!(theirs.provider_name(), "default", "{}", k.label);
        for (out, structure, sel) in [
            ("DER", Some("PrivateKeyInfo"), EVP_PKEY_KEYPAIR),
            ("PEM", Some("SubjectPublicKeyInfo"), EVP_PKEY_PUBLIC_KEY),
            ("DER", Some("pkcs1"), EVP_PKEY_KEYPAIR),
            ("TEXT", None, EVP_PKEY_KEYPAIR),
        ] {
            let via_kae = encode(
                &theirs,
                sel,
                out,
                structure,
                &EncOpts {
                    propq: Some("provider=kae"),
                    ..Default::default()
                },
            );
            let direct = encode(&k.reference, sel, out, structure, &EncOpts::default());
            assert_eq!(via_kae, direct, "{} {out} {structure:?}", k.label);
        }
    }
}

const FUNC_NEWCTX: c_int = 1;
const FUNC_FREECTX: c_int = 2;
const FUNC_IMPORT_OBJECT: c_int = 20;
const FUNC_FREE_OBJECT: c_int = 21;
const OSSL_OP_KEYMGMT: c_int = 10;
const FUNC_KEYMGMT_EXPORT: c_int = 42;

unsafe extern "C" fn collect_n_d(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int {
    let out = unsafe { &mut *arg.cast::<Vec<Vec<u8>>>() };
    for key in [c"n", c"d"] {
        let p = unsafe { common::ffi::OSSL_PARAM_locate_const(params, key.as_ptr()) };
        if p.is_null() {
            return 0;
        }
        let mut bn = ptr::null_mut();
        if unsafe { common::ffi::OSSL_PARAM_get_BN(p, &mut bn) } != 1 {
            return 0;
        }
        let bits = unsafe { common::ffi::BN_num_bits(bn) };
        let mut v = vec![0u8; (bits as usize).div_ceil(8)];
        unsafe { common::ffi::BN_bn2bin(bn, v.as_mut_ptr()) };
        unsafe { common::ffi::BN_free(bn) };
        out.push(v);
    }
    1
}

/// kae's encoders take keys of other providers through `import_object` (the core exports the
/// key and hands the parameters over): called here directly, as OpenSSL would, with a key of
/// the default provider; the object is a kae key with the same numbers (read back through
/// kae's key management export) and `free_object` releases it. Parameters that do not make
/// an RSA key are refused cleanly.
#[test]
fn import_object_makes_a_kae_key_from_another_providers_key() {
    let k = kae();
    let ours = listed_rsa_encoders(k.prov);
    let provctx = unsafe { OSSL_PROVIDER_get0_provider_ctx(k.prov) };
    let mut no_cache = 0;
    let mut export: Option<unsafe extern "C" fn()> = None;
    unsafe {
        let mut a = OSSL_PROVIDER_query_operation(k.prov, OSSL_OP_KEYMGMT, &mut no_cache);
        while !(*a).algorithm_names.is_null() {
            if cstr((*a).algorithm_names).split(':').next() == Some("RSA") {
                let mut d = (*a).implementation;
                while (*d).function_id != 0 {
                    if (*d).function_id == FUNC_KEYMGMT_EXPORT {
                        export = (*d).function;
                    }
                    d = d.add(1);
                }
            }
            a = a.add(1);
        }
    }
    type ExportFn = unsafe extern "C" fn(
        *mut c_void,
        c_int,
        unsafe extern "C" fn(*const OSSL_PARAM, *mut c_void) -> c_int,
        *mut c_void,
    ) -> c_int;
    let export: ExportFn = unsafe { std::mem::transmute(export.expect("kae RSA export")) };
    let src = &keys()[0];
    let params = src.reference.export(EVP_PKEY_KEYPAIR).unwrap();
    for (key, e) in &ours {
        if key.0 != "RSA" {
            continue;
        }
        let f = |id| {
            *e.fns
                .get(&id)
                .unwrap_or_else(|| panic!("{key:?}: function {id}"))
        };
        unsafe {
            let newctx: unsafe extern "C" fn(*mut c_void) -> *mut c_void =
                std::mem::transmute(f(FUNC_NEWCTX));
            let freectx: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(f(FUNC_FREECTX));
            let import: unsafe extern "C" fn(*mut c_void, c_int, *const OSSL_PARAM) -> *mut c_void =
                std::mem::transmute(f(FUNC_IMPORT_OBJECT));
            let free_object: unsafe extern "C" fn(*mut c_void) =
                std::mem::transmute(f(FUNC_FREE_OBJECT));
            let ctx = newctx(provctx);
            assert!(!ctx.is_null(), "{key:?}: newctx");
            let obj = import(ctx, EVP_PKEY_KEYPAIR, params.as_ptr());
            assert!(
                !obj.is_null(),
                "{key:?}: import_object: {}",
                take_errors("import")
            );
            let mut got: Vec<Vec<u8>> = Vec::new();
            assert_eq!(
                export(
                    obj,
                    EVP_PKEY_KEYPAIR,
                    collect_n_d,
                    (&mut got as *mut Vec<Vec<u8>>).cast()
                ),
                1,
                "{key:?}: export"
            );
            assert_eq!(got[0], src.reference.n(), "{key:?}: n");
            assert_eq!(got[1], src.reference.bn_param("d").unwrap(), "{key:?}: d");
            free_object(obj);
            // No modulus: refused with an error, nothing to free.
            let bad = common::ParamsBuilder::new().bn("e", &[1, 0, 1]).build();
            clear_errors();
            let obj = import(ctx, EVP_PKEY_KEYPAIR, bad.as_ptr());
            assert!(obj.is_null(), "{key:?}: imported a key without n");
            assert!(
                !take_errors("import").is_empty(),
                "{key:?}: no error raised"
            );
            free_object(ptr::null_mut());
            freectx(ctx);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The openssl command line with kae alone
// ---------------------------------------------------------------------------------------------

use procs::{openssl_in, run, KaeSummary, Output, TempDir, CMD_LIMIT};

/// `<dir>/modules` holding `kae.so`, made on first use.
fn modules(dir: &TempDir) -> std::path::PathBuf {
    let m = dir.join("modules");
    if m.join("kae.so").exists() {
        m
    } else {
        dir.provider_dir()
    }
}

/// `openssl <args>` with `-provider kae` only (no default provider in the application's
/// context).
fn kae_alone(dir: &TempDir, args: &[&str]) -> Output {
    let modules = modules(dir);
    let mut c = openssl_in(dir.path());
    c.args(args)
        .arg("-provider-path")
        .arg(&modules)
        .args(["-provider", "kae"])
        .env("KAE_LOG", "info");
    run(&mut c, None, CMD_LIMIT)
}

/// `openssl <args>` with the default provider only.
fn default_only(dir: &TempDir, args: &[&str]) -> Output {
    let mut c = openssl_in(dir.path());
    c.args(args);
    run(&mut c, None, CMD_LIMIT)
}

fn read(dir: &TempDir, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("cannot read {name}: {e}"))
}

#[test]
fn req_x509_newkey_with_kae_alone() {
    let dir = TempDir::new("enc-req");
    let out = kae_alone(
        &dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=t", "-keyout", "k.pem",
            "-out", "c.pem",
        ],
    )
    .ok();
    let s = KaeSummary::all_in(&out.stderr).expect("kae summary");
    assert!(
        s.iter().map(|s| s.private.ok).sum::<u64>() >= 1,
        "kae did not sign the certificate\n{}",
        out.describe()
    );
    assert!(
        String::from_utf8_lossy(&read(&dir, "k.pem")).starts_with("-----BEGIN PRIVATE KEY-----")
    );
    let cert_pub = default_only(&dir, &["x509", "-in", "c.pem", "-noout", "-pubkey"]).ok();
    let key_pub = default_only(&dir, &["pkey", "-in", "k.pem", "-pubout"]).ok();
    assert_eq!(
        cert_pub.stdout, key_pub.stdout,
        "certificate and key do not match"
    );
    default_only(&dir, &["pkey", "-in", "k.pem", "-check", "-noout"]).ok();
    default_only(
        &dir,
        &["verify", "-CAfile", "c.pem", "-check_ss_sig", "c.pem"],
    )
    .ok();

    // Without -nodes: an encrypted key.
    let out = kae_alone(
        &dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-passout", "pass:x", "-subj", "/CN=t",
            "-keyout", "ek.pem", "-out", "c2.pem",
        ],
    )
    .ok();
    assert!(
        String::from_utf8_lossy(&read(&dir, "ek.pem"))
            .starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"),
        "{}",
        out.describe()
    );
    default_only(
        &dir,
        &["pkey", "-in", "ek.pem", "-passin", "pass:x", "-noout"],
    )
    .ok();
}

/// `pkey` outputs of a key: kae alone and the default provider alone give the same result
/// (both fail for `-traditional` on RSA-PSS, which has no traditional form).
fn compare_pkey_outputs(dir: &TempDir, key: &str) {
    let cases: [&[&str]; 8] = [
        &["-text", "-noout"],
        &["-text_pub", "-noout"],
        &["-pubout"],
        &["-traditional"],
        &["-outform", "DER"],
        &["-pubout", "-outform", "DER"],
        &["-traditional", "-outform", "DER"],
        &[],
    ];
    for (i, extra) in cases.iter().enumerate() {
        let mut a = vec!["pkey", "-in", key];
        a.extend_from_slice(extra);
        let ka = format!("{key}.{i}.kae");
        let da = format!("{key}.{i}.def");
        let mut ak = a.clone();
        ak.extend(["-out", ka.as_str()]);
        let mut ad = a.clone();
        ad.extend(["-out", da.as_str()]);
        let ours = kae_alone(dir, &ak);
        let theirs = default_only(dir, &ad);
        assert_eq!(
            ours.status.success(),
            theirs.status.success(),
            "{key} {extra:?}\nkae:\n{}\ndefault:\n{}",
            ours.describe(),
            theirs.describe()
        );
        if theirs.status.success() {
            assert_eq!(
                read(dir, &ka),
                read(dir, &da),
                "{key} {extra:?}: outputs differ"
            );
            assert!(!read(dir, &ka).is_empty(), "{key} {extra:?}");
        }
    }
}

#[test]
fn genpkey_and_pkey_with_kae_alone_match_the_default_provider() {
    let dir = TempDir::new("enc-genpkey");
    kae_alone(
        &dir,
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "rsa.pem",
        ],
    )
    .ok();
    kae_alone(
        &dir,
        &[
            "genpkey",
            "-algorithm",
            "RSA-PSS",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "pss.pem",
        ],
    )
    .ok();
    // A restricted RSA-PSS key (made by the default provider, read by kae).
    default_only(
        &dir,
        &[
            "genpkey",
            "-algorithm",
            "RSA-PSS",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-pkeyopt",
            "rsa_pss_keygen_md:sha256",
            "-pkeyopt",
            "rsa_pss_keygen_mgf1_md:sha512",
            "-pkeyopt",
            "rsa_pss_keygen_saltlen:40",
            "-out",
            "pss-r.pem",
        ],
    )
    .ok();
    for (key, header) in [
        ("rsa.pem", "-----BEGIN PRIVATE KEY-----"),
        ("pss.pem", "-----BEGIN PRIVATE KEY-----"),
        ("pss-r.pem", "-----BEGIN PRIVATE KEY-----"),
    ] {
        assert!(
            String::from_utf8_lossy(&read(&dir, key)).starts_with(header),
            "{key}"
        );
        default_only(&dir, &["pkey", "-in", key, "-check", "-noout"]).ok();
        compare_pkey_outputs(&dir, key);
    }
    let text = kae_alone(&dir, &["pkey", "-in", "pss-r.pem", "-text", "-noout"]).ok();
    text.stdout_has("Hash Algorithm: SHA2-256")
        .stdout_has("MGF1 with SHA2-512")
        .stdout_has("Minimum Salt Length: 40");
}

#[test]
fn encrypted_keys_written_by_kae_alone_read_back_with_the_default_provider() {
    let dir = TempDir::new("enc-encrypted");
    for (alg, file) in [("RSA", "rsa.enc.pem"), ("RSA-PSS", "pss.enc.pem")] {
        let out = kae_alone(
            &dir,
            &[
                "genpkey",
                "-algorithm",
                alg,
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-aes-256-cbc",
                "-pass",
                "pass:x",
                "-out",
                file,
            ],
        )
        .ok();
        assert!(
            String::from_utf8_lossy(&read(&dir, file))
                .starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"),
            "{}",
            out.describe()
        );
        default_only(
            &dir,
            &["pkey", "-in", file, "-passin", "pass:x", "-check", "-noout"],
        )
        .ok();
        default_only(&dir, &["pkey", "-in", file, "-passin", "pass:y", "-noout"]).failed_cleanly();
        // The same key re-encrypted by kae alone with another cipher and passphrase.
        let re = format!("re-{file}");
        kae_alone(
            &dir,
            &[
                "pkey", "-in", file, "-passin", "pass:x", "-aes128", "-passout", "pass:z", "-out",
                &re,
            ],
        )
        .ok();
        let a = default_only(&dir, &["pkey", "-in", file, "-passin", "pass:x", "-pubout"]).ok();
        let b = default_only(&dir, &["pkey", "-in", &re, "-passin", "pass:z", "-pubout"]).ok();
        assert_eq!(a.stdout, b.stdout, "{alg}: re-encrypted key differs");
        default_only(&dir, &["pkey", "-in", &re, "-passin", "pass:x", "-noout"]).failed_cleanly();
    }
}

/// `openssl list -encoders -provider kae`: kae's RSA encoders with kae's descriptions; none
/// with `load-default = no` (their work happens in the private default provider's context).
#[test]
fn list_encoders_shows_kae_rsa_encoders_unless_load_default_is_off() {
    let dir = TempDir::new("enc-list");
    let out = kae_alone(&dir, &["list", "-encoders", "-verbose"]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    let mut rsa = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.contains("@ kae") && rsa_like(l) {
            rsa += 1;
            assert!(l.contains("(provider=kae,output="), "{l}");
            assert!(
                lines
                    .get(i + 1)
                    .is_some_and(|d| d.trim().starts_with("description: kae RSA")),
                "{l}: no kae description\n{}",
                out.describe()
            );
        }
    }
    assert_eq!(rsa, 24, "{}", out.describe());

    let modules = modules(&dir);
    let mut c = openssl_in(dir.path());
    c.args(["list", "-encoders", "-provider-path"])
        .arg(&modules)
        .args(["-provider", "kae"])
        .env("KAE_LOAD_DEFAULT", "no");
    let out = run(&mut c, None, CMD_LIMIT).ok();
    assert!(
        !out.stdout.lines().any(rsa_like),
        "encoders listed with load-default = no\n{}",
        out.describe()
    );
}
