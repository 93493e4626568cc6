//! Composite RSA signature algorithms (`RSA-SHA256` and the like, OpenSSL 3.4+) against the
//! default provider of the same core.
//!
//! kae lists them only when the running core is 3.4 or newer. On an older core the listing
//! test checks that they are absent and every other test prints why it is skipped. To run the
//! rest, point the process at a newer libcrypto:
//! `LD_LIBRARY_PATH=/path/to/openssl-3.5/lib cargo test --release --test in_process sigalg::`;
//! the 3.4+ calls (`EVP_PKEY_sign_message_init` …) are looked up with `dlsym`, since this
//! crate compiles against 3.0's API.
//!
//! PKCS#1 v1.5 signatures are deterministic: kae's and the default provider's must be the same
//! bytes. Every refusal the default provider makes (RSA-PSS keys, calls out of order, wrong
//! digest lengths, bad signatures) must be a refusal in kae, and what it accepts but ignores
//! (a padding or digest parameter) must leave kae's signature unchanged too.

use crate::common;
use crate::skip;

use common::ffi::{
    self, EVP_PKEY_CTX_gettable_params, EVP_PKEY_CTX_settable_params, EVP_SIGNATURE_get0_name,
    EVP_PKEY_CTX, EVP_SIGNATURE, OSSL_PARAM,
};
use common::*;
use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

/// (names, digest) of the default provider's composites (3.5 `prov/names.h`).
const SIGALGS: [(&str, &str); 13] = [
    ("RSA-RIPEMD160", "RIPEMD160"),
    ("RSA-SHA1", "SHA1"),
    ("RSA-SHA2-224", "SHA2-224"),
    ("RSA-SHA2-256", "SHA2-256"),
    ("RSA-SHA2-384", "SHA2-384"),
    ("RSA-SHA2-512", "SHA2-512"),
    ("RSA-SHA2-512/224", "SHA2-512/224"),
    ("RSA-SHA2-512/256", "SHA2-512/256"),
    ("RSA-SHA3-224", "SHA3-224"),
    ("RSA-SHA3-256", "SHA3-256"),
    ("RSA-SHA3-384", "SHA3-384"),
    ("RSA-SHA3-512", "SHA3-512"),
    ("RSA-SM3", "SM3"),
];

/// The kae library context of these tests: kae alone, as in the other tests, on every core
/// (its own DRBG fronts give it random numbers on 3.5+ too).
fn kae() -> &'static Lib {
    common::kae()
}

/// The pair's key in [`kae`]'s context.
fn kae_key(kp: &KeyPair) -> Pkey {
    kp.kae.clone()
}

/// The pair's key for `lib` (kae's or the default provider's).
fn key_of(kp: &KeyPair, lib: &Lib) -> Pkey {
    if lib.is_kae() {
        kae_key(kp)
    } else {
        kp.reference.clone()
    }
}

type InitEx2 =
    unsafe extern "C" fn(*mut EVP_PKEY_CTX, *mut EVP_SIGNATURE, *const OSSL_PARAM) -> c_int;
type Update = unsafe extern "C" fn(*mut EVP_PKEY_CTX, *const u8, usize) -> c_int;
type SignFinal = unsafe extern "C" fn(*mut EVP_PKEY_CTX, *mut u8, *mut usize) -> c_int;
type VerifyFinal = unsafe extern "C" fn(*mut EVP_PKEY_CTX) -> c_int;
type SetSig = unsafe extern "C" fn(*mut EVP_PKEY_CTX, *const u8, usize) -> c_int;

/// The OpenSSL 3.4+ functions, from the libcrypto this process runs on.
struct Api {
    sign_init_ex2: InitEx2,
    verify_init_ex2: InitEx2,
    verify_recover_init_ex2: InitEx2,
    sign_message_init: InitEx2,
    sign_message_update: Update,
    sign_message_final: SignFinal,
    verify_message_init: InitEx2,
    verify_message_update: Update,
    verify_message_final: VerifyFinal,
    set_signature: SetSig,
}

fn sym(name: &str) -> *mut c_void {
    let c = CString::new(name).unwrap();
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
    assert!(!p.is_null(), "{name} missing from a 3.4+ libcrypto");
    p
}

/// The 3.4+ API, or None (with the reason printed) on an older core.
fn api(test: &str) -> Option<&'static Api> {
    let (maj, min) = common::core_version();
    if (maj, min) < (3, 4) {
        skip::skipped(
            test,
            &format!(
                "the running libcrypto is {maj}.{min}; composite signature algorithms need \
                 OpenSSL 3.4+ (scripts/compat.sh runs these tests on its 3.5+ cores)"
            ),
            skip::UnderCi::MayLack,
        );
        return None;
    }
    static API: OnceLock<Api> = OnceLock::new();
    Some(API.get_or_init(|| unsafe {
        Api {
            sign_init_ex2: std::mem::transmute::<*mut c_void, InitEx2>(sym(
                "EVP_PKEY_sign_init_ex2",
            )),
            verify_init_ex2: std::mem::transmute::<*mut c_void, InitEx2>(sym(
                "EVP_PKEY_verify_init_ex2",
            )),
            verify_recover_init_ex2: std::mem::transmute::<*mut c_void, InitEx2>(sym(
                "EVP_PKEY_verify_recover_init_ex2",
            )),
            sign_message_init: std::mem::transmute::<*mut c_void, InitEx2>(sym(
                "EVP_PKEY_sign_message_init",
            )),
            sign_message_update: std::mem::transmute::<*mut c_void, Update>(sym(
                "EVP_PKEY_sign_message_update",
            )),
            sign_message_final: std::mem::transmute::<*mut c_void, SignFinal>(sym(
                "EVP_PKEY_sign_message_final",
            )),
            verify_message_init: std::mem::transmute::<*mut c_void, InitEx2>(sym(
                "EVP_PKEY_verify_message_init",
            )),
            verify_message_update: std::mem::transmute::<*mut c_void, Update>(sym(
                "EVP_PKEY_verify_message_update",
            )),
            verify_message_final: std::mem::transmute::<*mut c_void, VerifyFinal>(sym(
                "EVP_PKEY_verify_message_final",
            )),
            set_signature: std::mem::transmute::<*mut c_void, SetSig>(sym(
                "EVP_PKEY_CTX_set_signature",
            )),
        }
    }))
}

/// An owned `EVP_SIGNATURE`.
struct Sig(*mut EVP_SIGNATURE);
impl Drop for Sig {
    fn drop(&mut self) {
        unsafe { ffi::EVP_SIGNATURE_free(self.0) }
    }
}

fn fetch(lib: &Lib, name: &str) -> Option<Sig> {
    let n = CString::new(name).unwrap();
    let s = unsafe { ffi::EVP_SIGNATURE_fetch(lib.ptr, n.as_ptr(), lib.propq().as_ptr()) };
    clear_errors();
    (!s.is_null()).then_some(Sig(s))
}

fn fetch_ok(lib: &Lib, name: &str) -> Sig {
    let s = fetch(lib, name).unwrap_or_else(|| panic!("{name} not available in {}", lib.label));
    lib.expect_provider(unsafe { ffi::EVP_SIGNATURE_get0_provider(s.0) }, name);
    s
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sign,
    Verify,
    VerifyRecover,
    SignMessage,
    VerifyMessage,
}

/// A context of `lib` on `key` initialised for `op` with composite `alg`; the init's return
/// value and the context.
fn init(api: &Api, lib: &Lib, key: &Pkey, alg: &str, op: Op) -> (c_int, PkeyCtx) {
    let sig = fetch_ok(lib, alg);
    clear_errors();
    let ctx = pctx(lib, key);
    let f = match op {
        Op::Sign => api.sign_init_ex2,
        Op::Verify => api.verify_init_ex2,
        Op::VerifyRecover => api.verify_recover_init_ex2,
        Op::SignMessage => api.sign_message_init,
        Op::VerifyMessage => api.verify_message_init,
    };
    let r = unsafe { f(ctx.0, sig.0, ptr::null()) };
    if r > 0 {
        lib.expect_op(ctx.0, alg);
    }
    (r, ctx)
}

/// An EVP_PKEY_CTX of `lib` on `key`. Its property query is the one the provider uses to
/// fetch the composite's digest (as the default provider does).
fn pctx(lib: &Lib, key: &Pkey) -> PkeyCtx {
    let propq = lib.propq();
    let p = unsafe { ffi::EVP_PKEY_CTX_new_from_pkey(lib.ptr, key.0, propq.as_ptr()) };
    PkeyCtx(ok(
        cvt_p(p, "EVP_PKEY_CTX_new_from_pkey"),
        "EVP_PKEY_CTX_new_from_pkey",
    ))
}

/// EVP_DigestSign with kae's plain RSA signature and digest `md` (PKCS#1 v1.5).
fn plain_digest_sign(key: &Pkey, md: &str, msg: &[u8]) -> Res<Vec<u8>> {
    let lib = kae();
    let propq = lib.propq();
    let mctx = MdCtx::new();
    let mdname = CString::new(md).unwrap();
    let mut pctx: *mut EVP_PKEY_CTX = ptr::null_mut();
    unsafe {
        cvt(
            ffi::EVP_DigestSignInit_ex(
                mctx.0,
                &mut pctx,
                mdname.as_ptr(),
                lib.ptr,
                propq.as_ptr(),
                key.0,
                ptr::null(),
            ),
            "EVP_DigestSignInit_ex",
        )?;
        lib.expect_op(pctx, "digest sign");
        let mut len = 0usize;
        cvt(
            ffi::EVP_DigestSign(mctx.0, ptr::null_mut(), &mut len, msg.as_ptr(), msg.len()),
            "EVP_DigestSign(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            ffi::EVP_DigestSign(mctx.0, out.as_mut_ptr(), &mut len, msg.as_ptr(), msg.len()),
            "EVP_DigestSign",
        )?;
        out.truncate(len);
        Ok(out)
    }
}

fn init_ok(api: &Api, lib: &Lib, key: &Pkey, alg: &str, op: Op) -> PkeyCtx {
    let (r, ctx) = init(api, lib, key, alg, op);
    if r <= 0 {
        panic!(
            "{alg} {op:?} init [{}] returned {r}: {}",
            lib.label,
            take_errors("init")
        );
    }
    ctx
}

/// sign-message over `chunks`: size query, then the signature.
fn sign_message(api: &Api, ctx: &PkeyCtx, chunks: &[&[u8]]) -> Res<Vec<u8>> {
    unsafe {
        for c in chunks {
            cvt(
                (api.sign_message_update)(ctx.0, c.as_ptr(), c.len()),
                "sign_message_update",
            )?;
        }
        let mut len = 0usize;
        cvt(
            (api.sign_message_final)(ctx.0, ptr::null_mut(), &mut len),
            "sign_message_final(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            (api.sign_message_final)(ctx.0, out.as_mut_ptr(), &mut len),
            "sign_message_final",
        )?;
        out.truncate(len);
        Ok(out)
    }
}

fn verify_message(api: &Api, ctx: &PkeyCtx, chunks: &[&[u8]], sig: Option<&[u8]>) -> Res<()> {
    unsafe {
        if let Some(s) = sig {
            cvt(
                (api.set_signature)(ctx.0, s.as_ptr(), s.len()),
                "EVP_PKEY_CTX_set_signature",
            )?;
        }
        for c in chunks {
            cvt(
                (api.verify_message_update)(ctx.0, c.as_ptr(), c.len()),
                "verify_message_update",
            )?;
        }
        cvt((api.verify_message_final)(ctx.0), "verify_message_final")?;
    }
    Ok(())
}

fn pkey_sign(ctx: &PkeyCtx, tbs: &[u8]) -> Res<Vec<u8>> {
    unsafe {
        let mut len = 0usize;
        cvt(
            ffi::EVP_PKEY_sign(ctx.0, ptr::null_mut(), &mut len, tbs.as_ptr(), tbs.len()),
            "EVP_PKEY_sign(size)",
        )?;
        let mut out = vec![0u8; len];
        cvt(
            ffi::EVP_PKEY_sign(ctx.0, out.as_mut_ptr(), &mut len, tbs.as_ptr(), tbs.len()),
            "EVP_PKEY_sign",
        )?;
        out.truncate(len);
        Ok(out)
    }
}

fn pkey_verify(ctx: &PkeyCtx, sig: &[u8], tbs: &[u8]) -> Res<()> {
    cvt(
        unsafe { ffi::EVP_PKEY_verify(ctx.0, sig.as_ptr(), sig.len(), tbs.as_ptr(), tbs.len()) },
        "EVP_PKEY_verify",
    )
    .map(|_| ())
}

/// A problem list, reported all at once.
#[derive(Default)]
struct Report(Vec<String>);

impl Report {
    /// Both accepted or both refused; kae's refusal carries a reason (kae's own unless
    /// libcrypto refused before calling a provider).
    fn verdicts<T: std::fmt::Debug, U: std::fmt::Debug>(
        &mut self,
        what: &str,
        k: &Res<T>,
        d: &Res<U>,
    ) {
        eprintln!(
            "{what}: kae {} / default {}",
            if k.is_ok() { "ok" } else { "refused" },
            if d.is_ok() { "ok" } else { "refused" }
        );
        if k.is_ok() != d.is_ok() {
            self.0.push(format!("{what}: kae {k:?}, default {d:?}"));
        } else if let Err(e) = k {
            if !e.has_reason() {
                self.0
                    .push(format!("{what}: kae refused without a reason: {e}"));
            }
        }
    }
    fn check(&mut self, cond: bool, what: String) {
        if !cond {
            self.0.push(what);
        }
    }
    fn finish(self) {
        assert!(
            self.0.is_empty(),
            "{} problems:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

/// kae lists the composites exactly when the core is 3.4+ (decided at run time), as its own
/// code; the default provider of the same core has them too.
#[test]
fn composites_listed_only_on_3_4_plus() {
    let (maj, min) = common::core_version();
    let newer = (maj, min) >= (3, 4);
    for (name, _) in SIGALGS {
        let k = fetch(kae(), name);
        if newer {
            let k = k.unwrap_or_else(|| panic!("core {maj}.{min}: kae does not list {name}"));
            kae().expect_provider(unsafe { ffi::EVP_SIGNATURE_get0_provider(k.0) }, name);
            assert!(fetch(reference(), name).is_some(), "default lacks {name}");
        } else {
            assert!(
                k.is_none(),
                "core {maj}.{min}: kae lists {name}, which needs 3.4"
            );
        }
    }
    // The plain RSA signature is there either way.
    assert!(fetch(kae(), "RSA").is_some());
    eprintln!(
        "core {maj}.{min}: composites {}",
        if newer {
            "listed, kae's own"
        } else {
            "absent, as on the default provider"
        }
    );
}

const MESSAGES: [&[u8]; 3] = [b"", b"a", b"The quick brown fox jumps over the lazy dog"];

fn chunked(msg: &[u8]) -> Vec<&[u8]> {
    if msg.len() < 4 {
        vec![msg]
    } else {
        vec![&msg[..1], &msg[1..msg.len() / 2], &msg[msg.len() / 2..]]
    }
}

/// sign-message / verify-message (streamed and one-shot) for every composite: kae's signature
/// is the default provider's, byte for byte, and each verifies the other's.
fn message_roundtrip(bits: u32) {
    let Some(api) = api("message_roundtrip") else {
        return;
    };
    let kp = keypair(bits);
    let mut r = Report::default();
    let mut long = vec![0u8; 10_000];
    for (i, b) in long.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    for (alg, md) in SIGALGS {
        for msg in MESSAGES.iter().copied().chain([&long[..]]) {
            let what = format!("{alg}, {bits} bits, message of {}", msg.len());
            let chunks = chunked(msg);
            let ks = sign_message(
                api,
                &init_ok(api, kae(), &kae_key(kp), alg, Op::SignMessage),
                &chunks,
            );
            let ds = sign_message(
                api,
                &init_ok(api, reference(), &kp.reference, alg, Op::SignMessage),
                &chunks,
            );
            let (ks, ds) = match (ks, ds) {
                (Ok(a), Ok(b)) => (a, b),
                (a, b) => {
                    r.0.push(format!("{what}: sign-message kae {a:?}, default {b:?}"));
                    continue;
                }
            };
            r.check(
                ks == ds,
                format!("{what}: kae's signature differs from the default's"),
            );
            // One-shot sign on a sign-message context.
            let one = pkey_sign(
                &init_ok(api, kae(), &kae_key(kp), alg, Op::SignMessage),
                msg,
            );
            r.check(
                one.as_ref().ok() == Some(&ds),
                format!("{what}: one-shot sign-message {one:?}"),
            );
            // Each verifies the other's, streamed and one-shot.
            let v = verify_message(
                api,
                &init_ok(api, reference(), &kp.reference, alg, Op::VerifyMessage),
                &chunks,
                Some(&ks),
            );
            r.check(v.is_ok(), format!("{what}: default verify of kae's: {v:?}"));
            let v = verify_message(
                api,
                &init_ok(api, kae(), &kae_key(kp), alg, Op::VerifyMessage),
                &chunks,
                Some(&ds),
            );
            r.check(v.is_ok(), format!("{what}: kae verify of default's: {v:?}"));
            let v = pkey_verify(
                &init_ok(api, kae(), &kae_key(kp), alg, Op::VerifyMessage),
                &ds,
                msg,
            );
            r.check(
                v.is_ok(),
                format!("{what}: kae one-shot verify-message: {v:?}"),
            );
            // The same signature as digest-sign with the plain algorithm and this digest.
            let plain = plain_digest_sign(&kae_key(kp), md, msg);
            r.check(
                plain.as_ref().ok() == Some(&ds),
                format!("{what}: plain digest-sign {plain:?}"),
            );
        }
    }
    r.finish();
}

#[test]
fn message_roundtrip_1024() {
    message_roundtrip(1024)
}
#[test]
fn message_roundtrip_2048() {
    message_roundtrip(2048)
}
#[test]
fn message_roundtrip_1025() {
    message_roundtrip(1025)
}

/// Plain EVP_PKEY_sign / verify / verify_recover with a composite take the digest: the same
/// bytes as the default provider, the same signature as sign-message on the message, and the
/// same refusals of digests of the wrong length.
#[test]
fn prehashed_like_default() {
    let Some(api) = api("prehashed_like_default") else {
        return;
    };
    let kp = keypair(2048);
    let msg = b"prehashed";
    let mut r = Report::default();
    for (alg, md) in SIGALGS {
        let digest = reference().digest(md, msg);
        let ks = pkey_sign(&init_ok(api, kae(), &kae_key(kp), alg, Op::Sign), &digest);
        let ds = pkey_sign(
            &init_ok(api, reference(), &kp.reference, alg, Op::Sign),
            &digest,
        );
        r.verdicts(&format!("{alg}: sign digest"), &ks, &ds);
        let (Ok(ks), Ok(ds)) = (ks, ds) else { continue };
        r.check(ks == ds, format!("{alg}: prehashed signatures differ"));
        let whole = sign_message(
            api,
            &init_ok(api, kae(), &kae_key(kp), alg, Op::SignMessage),
            &[msg],
        );
        r.check(
            whole.as_ref().ok() == Some(&ks),
            format!("{alg}: sign-message vs sign of the digest"),
        );
        for v in [kae(), reference()] {
            let key = &key_of(kp, v);
            let ok_ = pkey_verify(&init_ok(api, v, key, alg, Op::Verify), &ks, &digest);
            r.check(
                ok_.is_ok(),
                format!("{alg}: {} verify of the digest: {ok_:?}", v.label),
            );
        }
        // Recover the digest.
        let rec = |lib: &Lib| -> Res<Vec<u8>> {
            let ctx = init_ok(api, lib, &key_of(kp, lib), alg, Op::VerifyRecover);
            unsafe {
                let mut len = 0usize;
                cvt(
                    ffi::EVP_PKEY_verify_recover(
                        ctx.0,
                        ptr::null_mut(),
                        &mut len,
                        ks.as_ptr(),
                        ks.len(),
                    ),
                    "size",
                )?;
                let mut out = vec![0u8; len];
                cvt(
                    ffi::EVP_PKEY_verify_recover(
                        ctx.0,
                        out.as_mut_ptr(),
                        &mut len,
                        ks.as_ptr(),
                        ks.len(),
                    ),
                    "recover",
                )?;
                out.truncate(len);
                Ok(out)
            }
        };
        let (a, b) = (rec(kae()), rec(reference()));
        r.verdicts(&format!("{alg}: verify-recover"), &a, &b);
        if let (Ok(a), Ok(b)) = (&a, &b) {
            r.check(
                a == b && *a == digest,
                format!("{alg}: recovered {} / {}", hex(a), hex(b)),
            );
        }
        // Wrong digest lengths and a tampered digest or signature.
        for (what, tbs) in [
            ("digest + 1 byte", [&digest[..], &[0]].concat()),
            ("digest - 1 byte", digest[1..].to_vec()),
            ("empty", Vec::new()),
            ("the message itself", msg.to_vec()),
        ] {
            let a = pkey_sign(&init_ok(api, kae(), &kae_key(kp), alg, Op::Sign), &tbs);
            let b = pkey_sign(
                &init_ok(api, reference(), &kp.reference, alg, Op::Sign),
                &tbs,
            );
            r.verdicts(&format!("{alg}: sign {what}"), &a, &b);
            let a = pkey_verify(
                &init_ok(api, kae(), &kae_key(kp), alg, Op::Verify),
                &ks,
                &tbs,
            );
            let b = pkey_verify(
                &init_ok(api, reference(), &kp.reference, alg, Op::Verify),
                &ks,
                &tbs,
            );
            r.verdicts(&format!("{alg}: verify {what}"), &a, &b);
        }
        let mut bad = ks.clone();
        bad[10] ^= 1;
        let a = pkey_verify(
            &init_ok(api, kae(), &kae_key(kp), alg, Op::Verify),
            &bad,
            &digest,
        );
        let b = pkey_verify(
            &init_ok(api, reference(), &kp.reference, alg, Op::Verify),
            &bad,
            &digest,
        );
        r.verdicts(&format!("{alg}: verify tampered signature"), &a, &b);
        r.check(
            a.is_err(),
            format!("{alg}: kae accepted a tampered signature"),
        );
    }
    r.finish();
}

/// What the composites refuse or ignore, compared with the default provider: padding, digest
/// and salt-length changes, RSA-PSS keys, calls out of order, missing or bad signatures, a
/// buffer too small, the parameter lists and values.
#[test]
fn refusals_like_default() {
    let Some(api) = api("refusals_like_default") else {
        return;
    };
    let kp = keypair(2048);
    let alg = "RSA-SHA2-256";
    let msg: &[u8] = b"composite";
    let mut r = Report::default();
    let reference_sig = sign_message(
        api,
        &init_ok(api, reference(), &kp.reference, alg, Op::SignMessage),
        &[msg],
    )
    .unwrap();

    // Parameter changes on a sign-message context: through the ctrl helpers (libcrypto checks
    // the settable list) and directly as parameters (the provider ignores them).
    type Tweak = fn(*mut EVP_PKEY_CTX) -> c_int;
    let tweaks: [(&str, Tweak); 6] = [
        ("set_rsa_padding(PSS)", |c| unsafe {
            ffi::EVP_PKEY_CTX_set_rsa_padding(c, ffi::RSA_PKCS1_PSS_PADDING)
        }),
        ("set_rsa_padding(PKCS1)", |c| unsafe {
            ffi::EVP_PKEY_CTX_set_rsa_padding(c, ffi::RSA_PKCS1_PADDING)
        }),
        ("set_rsa_pss_saltlen(20)", |c| unsafe {
            ffi::EVP_PKEY_CTX_set_rsa_pss_saltlen(c, 20)
        }),
        ("params pad-mode=pss", |c| {
            let p = ParamsBuilder::new().utf8("pad-mode", "pss").build();
            unsafe { ffi::EVP_PKEY_CTX_set_params(c, p.as_ptr()) }
        }),
        ("params digest=SHA1", |c| {
            let p = ParamsBuilder::new().utf8("digest", "SHA1").build();
            unsafe { ffi::EVP_PKEY_CTX_set_params(c, p.as_ptr()) }
        }),
        ("params saltlen=max", |c| {
            let p = ParamsBuilder::new().utf8("saltlen", "max").build();
            unsafe { ffi::EVP_PKEY_CTX_set_params(c, p.as_ptr()) }
        }),
    ];
    for (what, f) in tweaks {
        let run = |lib: &Lib, key: &Pkey| {
            let ctx = init_ok(api, lib, key, alg, Op::SignMessage);
            let rv = f(ctx.0);
            clear_errors();
            (rv, sign_message(api, &ctx, &[msg]))
        };
        let (kr, ks) = run(kae(), &kae_key(kp));
        let (dr, ds) = run(reference(), &kp.reference);
        eprintln!("{what}: kae {kr} default {dr}");
        r.check(kr == dr, format!("{what}: kae returned {kr}, default {dr}"));
        r.check(
            ks.as_ref().ok() == Some(&reference_sig),
            format!("{what}: kae then signed {ks:?}"),
        );
        r.check(
            ds.as_ref().ok() == Some(&reference_sig),
            format!("{what}: default then signed {ds:?}"),
        );
    }
    let md = unsafe { ffi::EVP_MD_fetch(ptr::null_mut(), c"SHA1".as_ptr(), ptr::null()) };
    let run = |lib: &Lib, key: &Pkey| {
        let ctx = init_ok(api, lib, key, alg, Op::SignMessage);
        let rv = unsafe { ffi::EVP_PKEY_CTX_set_signature_md(ctx.0, md) };
        clear_errors();
        rv
    };
    let (a, b) = (run(kae(), &kae_key(kp)), run(reference(), &kp.reference));
    r.check(
        a == b,
        format!("set_signature_md(SHA1): kae {a}, default {b}"),
    );
    unsafe { ffi::EVP_MD_free(md) };

    // RSA-PSS keys.
    let pss = ok(
        reference().keygen(
            "RSA-PSS",
            &ParamsBuilder::new().size_t("bits", 2048).build(),
        ),
        "RSA-PSS",
    );
    let pss_kae = ok(kae().transfer(&pss), "RSA-PSS into kae");
    for op in [
        Op::Sign,
        Op::SignMessage,
        Op::Verify,
        Op::VerifyMessage,
        Op::VerifyRecover,
    ] {
        let (a, _) = init(api, kae(), &pss_kae, alg, op);
        let ea = take_errors("init");
        let (b, _) = init(api, reference(), &pss, alg, op);
        clear_errors();
        r.check(
            a == b,
            format!("RSA-PSS key, {op:?}: kae {a} ({ea}), default {b}"),
        );
        r.check(a <= 0, format!("RSA-PSS key, {op:?}: kae accepted it"));
    }

    // Calls out of order.
    type Steps = fn(&Api, &PkeyCtx) -> Vec<c_int>;
    let orders: [(&str, Op, Steps); 6] = [
        ("update after final", Op::SignMessage, |a, c| unsafe {
            let mut s = vec![0u8; 512];
            let mut l = s.len();
            vec![
                (a.sign_message_final)(c.0, s.as_mut_ptr(), &mut l),
                (a.sign_message_update)(c.0, b"x".as_ptr(), 1),
            ]
        }),
        ("final twice", Op::SignMessage, |a, c| unsafe {
            let mut s = vec![0u8; 512];
            let mut l = s.len();
            let first = (a.sign_message_final)(c.0, s.as_mut_ptr(), &mut l);
            l = s.len();
            vec![first, (a.sign_message_final)(c.0, s.as_mut_ptr(), &mut l)]
        }),
        ("one-shot after update", Op::SignMessage, |a, c| unsafe {
            let mut s = vec![0u8; 512];
            let mut l = s.len();
            vec![
                (a.sign_message_update)(c.0, b"x".as_ptr(), 1),
                ffi::EVP_PKEY_sign(c.0, s.as_mut_ptr(), &mut l, b"y".as_ptr(), 1),
            ]
        }),
        (
            "final into a buffer too small, then again",
            Op::SignMessage,
            |a, c| unsafe {
                let mut s = vec![0u8; 512];
                let mut l = 255;
                let first = (a.sign_message_final)(c.0, s.as_mut_ptr(), &mut l);
                l = s.len();
                vec![first, (a.sign_message_final)(c.0, s.as_mut_ptr(), &mut l)]
            },
        ),
        (
            "verify final without a signature",
            Op::VerifyMessage,
            |a, c| unsafe {
                vec![
                    (a.verify_message_update)(c.0, b"x".as_ptr(), 1),
                    (a.verify_message_final)(c.0),
                ]
            },
        ),
        ("verify final twice", Op::VerifyMessage, |a, c| unsafe {
            vec![(a.verify_message_final)(c.0), (a.verify_message_final)(c.0)]
        }),
    ];
    for (what, op, steps) in orders {
        let a = steps(api, &init_ok(api, kae(), &kae_key(kp), alg, op));
        let ea = take_errors(what);
        let b = steps(api, &init_ok(api, reference(), &kp.reference, alg, op));
        clear_errors();
        eprintln!("{what}: kae {a:?} default {b:?}");
        r.check(
            a.iter().map(|v| *v > 0).collect::<Vec<_>>()
                == b.iter().map(|v| *v > 0).collect::<Vec<_>>(),
            format!("{what}: kae {a:?} ({ea}), default {b:?}"),
        );
    }

    // Bad signatures for verify-message.
    let mut tampered = reference_sig.clone();
    tampered[0] ^= 0x40;
    let cases: [(&str, Vec<u8>, &[u8]); 5] = [
        ("tampered signature", tampered, msg),
        ("short signature", reference_sig[1..].to_vec(), msg),
        ("long signature", [&reference_sig[..], &[0]].concat(), msg),
        ("other message", reference_sig.clone(), b"composita"),
        ("empty signature", Vec::new(), msg),
    ];
    for (what, sig, m) in &cases {
        let a = verify_message(
            api,
            &init_ok(api, kae(), &kae_key(kp), alg, Op::VerifyMessage),
            &[m],
            Some(sig),
        );
        let b = verify_message(
            api,
            &init_ok(api, reference(), &kp.reference, alg, Op::VerifyMessage),
            &[m],
            Some(sig),
        );
        r.verdicts(what, &a, &b);
        r.check(a.is_err(), format!("{what}: kae accepted"));
    }
    // The signature parameter can also come with the init.
    let with_init = |lib: &Lib, key: &Pkey| -> Res<()> {
        let sig = fetch_ok(lib, alg);
        let ctx = pctx(lib, key);
        let p = ParamsBuilder::new()
            .octet("signature", &reference_sig)
            .build();
        unsafe {
            cvt(
                (api.verify_message_init)(ctx.0, sig.0, p.as_ptr()),
                "verify_message_init(signature)",
            )?;
        }
        verify_message(api, &ctx, &[msg], None)
    };
    let (a, b) = (
        with_init(kae(), &kae_key(kp)),
        with_init(reference(), &kp.reference),
    );
    r.verdicts("signature given at init", &a, &b);

    // Parameter lists and values.
    let keys = |p: *const OSSL_PARAM| -> Vec<String> {
        let mut v = Vec::new();
        let mut p = p;
        if !p.is_null() {
            unsafe {
                while !(*p).key.is_null() {
                    v.push(CStr::from_ptr((*p).key).to_string_lossy().into_owned());
                    p = p.add(1);
                }
            }
        }
        // Names only: 4.0 describes pad-mode and saltlen twice (string and integer forms).
        v.sort();
        v.dedup();
        v
    };
    for op in [
        Op::Sign,
        Op::SignMessage,
        Op::Verify,
        Op::VerifyMessage,
        Op::VerifyRecover,
    ] {
        let lists = |lib: &Lib, key: &Pkey| {
            let ctx = init_ok(api, lib, key, alg, op);
            unsafe {
                (
                    keys(EVP_PKEY_CTX_settable_params(ctx.0)),
                    keys(EVP_PKEY_CTX_gettable_params(ctx.0)),
                )
            }
        };
        let (a, b) = (
            lists(kae(), &kae_key(kp)),
            lists(reference(), &kp.reference),
        );
        eprintln!("{op:?}: settable {:?} gettable {:?}", a.0, a.1);
        r.check(
            a.0 == b.0,
            format!("{op:?} settable: kae {:?}, default {:?}", a.0, b.0),
        );
        // kae has no FIPS indicator parameters; everything else must match.
        let b1: Vec<String> = b.1.into_iter().filter(|k| !k.starts_with("fips")).collect();
        r.check(
            a.1 == b1,
            format!("{op:?} gettable: kae {:?}, default {b1:?}", a.1),
        );
    }
    for (alg, _) in SIGALGS {
        let get = |lib: &Lib, key: &Pkey| -> Vec<String> {
            let ctx = init_ok(api, lib, key, alg, Op::SignMessage);
            [
                "algorithm-id",
                "digest",
                "mgf1-digest",
                "pad-mode",
                "saltlen",
            ]
            .iter()
            .map(|k| get_param(ctx.0, k))
            .collect()
        };
        let (a, b) = (get(kae(), &kae_key(kp)), get(reference(), &kp.reference));
        r.check(
            a == b,
            format!("{alg} parameters: kae {a:?}, default {b:?}"),
        );
    }
    r.finish();
}

/// One context parameter as text ("-" when the get fails): octets in hex, strings as they are.
fn get_param(ctx: *mut EVP_PKEY_CTX, key: &str) -> String {
    let k = CString::new(key).unwrap();
    let mut buf = vec![0u8; 256];
    let octets = key == "algorithm-id";
    let mut params = [
        OSSL_PARAM {
            key: k.as_ptr(),
            data_type: if octets {
                ffi::OSSL_PARAM_OCTET_STRING
            } else {
                ffi::OSSL_PARAM_UTF8_STRING
            },
            data: buf.as_mut_ptr().cast(),
            data_size: buf.len(),
            return_size: ffi::OSSL_PARAM_UNMODIFIED,
        },
        OSSL_PARAM {
            key: ptr::null(),
            data_type: 0,
            data: ptr::null_mut(),
            data_size: 0,
            return_size: 0,
        },
    ];
    let r = unsafe { ffi::EVP_PKEY_CTX_get_params(ctx, params.as_mut_ptr()) };
    clear_errors();
    if r <= 0 || params[0].return_size == ffi::OSSL_PARAM_UNMODIFIED {
        return "-".into();
    }
    let n = params[0].return_size.min(buf.len());
    if octets {
        hex(&buf[..n])
    } else {
        String::from_utf8_lossy(&buf[..n])
            .trim_end_matches('\0')
            .to_string()
    }
}

/// EVP_PKEY_CTX_dup in the middle of a sign-message: both copies finish with the default
/// provider's signature of their own message.
#[test]
fn dup_mid_stream() {
    let Some(api) = api("dup_mid_stream") else {
        return;
    };
    let kp = keypair(1024);
    let alg = "RSA-SHA2-384";
    let ctx = init_ok(api, kae(), &kae_key(kp), alg, Op::SignMessage);
    unsafe {
        cvt(
            (api.sign_message_update)(ctx.0, b"head ".as_ptr(), 5),
            "update",
        )
        .unwrap()
    };
    let dup = PkeyCtx(ok(
        cvt_p(unsafe { ffi::EVP_PKEY_CTX_dup(ctx.0) }, "dup"),
        "dup",
    ));
    let a = ok(sign_message(api, &ctx, &[b"one"]), "original");
    let b = ok(sign_message(api, &dup, &[b"two"]), "copy");
    let want = |m: &[u8]| {
        sign_message(
            api,
            &init_ok(api, reference(), &kp.reference, alg, Op::SignMessage),
            &[m],
        )
        .unwrap()
    };
    assert_eq!(a, want(b"head one"));
    assert_eq!(b, want(b"head two"));
}

/// The composite names resolve to the same algorithm by every alias and by OID.
#[test]
fn aliases_resolve() {
    if api("aliases_resolve").is_none() {
        return;
    }
    for alias in [
        "RSA-SHA256",
        "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.11",
        "RSA-SHA512-256",
        "id-rsassa-pkcs1-v1_5-with-sha3-256",
    ] {
        let s = fetch(kae(), alias).unwrap_or_else(|| panic!("{alias} not found in kae"));
        kae().expect_provider(unsafe { ffi::EVP_SIGNATURE_get0_provider(s.0) }, alias);
        let name = unsafe { CStr::from_ptr(EVP_SIGNATURE_get0_name(s.0)) }
            .to_string_lossy()
            .into_owned();
        let d = fetch(reference(), alias).unwrap();
        let dname = unsafe { CStr::from_ptr(EVP_SIGNATURE_get0_name(d.0)) }
            .to_string_lossy()
            .into_owned();
        assert_eq!(name, dname, "{alias}");
    }
}
