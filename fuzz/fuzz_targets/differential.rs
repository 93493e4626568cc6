//! Differential decryption: the same key imported into two library contexts, one where
//! kae (the instrumented rlib as a built-in provider) does RSA (`provider=kae`), one with
//! only OpenSSL's default provider. Random ciphertexts — raw bytes of any length, or
//! m^e mod n for a fuzzer-chosen block (valid PKCS#1 / OAEP / TLS encodings with edits,
//! or anything) — are decrypted by both through EVP with the same padding settings and
//! output size. Both must succeed or fail together, with the same output (TLS mode with a
//! bad block: both succeed with 48 bytes, contents random by design). PKCS#1 v1.5 runs
//! with `implicit-rejection` set to 0, set to 1, and not set (the core's default): kae
//! follows the running core like its default provider, so on OpenSSL >= 3.2 both answer a
//! padding failure with the same synthetic message unless it is 0, and before 3.2 both
//! ignore the parameter and refuse.
//!
//! Differences already filed (issue 8 items 1 and 2: output buffer checked after the
//! decryption, ciphertexts shorter than the modulus refused) are findings too; with
//! KAE_FUZZ_KNOWN=skip those two input classes are not compared, so the run goes on to
//! look for anything else.
#![no_main]
use core::ffi::{c_char, c_int, c_void};
use kae::rsa::padding::{oaep, pkcs1, DigestId};
use kae_fuzz::prov::{self, components, ParamArray, KEY_PEMS};
use kae_fuzz::{reference, Md, Rd, SeedRng};
use libfuzzer_sys::fuzz_target;
use openssl::bn::{BigNum, BigNumContext};
use std::sync::OnceLock;

extern "C" {
    fn OSSL_LIB_CTX_new() -> *mut c_void;
    fn OSSL_PROVIDER_load(libctx: *mut c_void, name: *const c_char) -> *mut c_void;
    fn EVP_PKEY_CTX_new_from_name(
        libctx: *mut c_void,
        name: *const c_char,
        propq: *const c_char,
    ) -> *mut c_void;
    fn EVP_PKEY_CTX_new_from_pkey(
        libctx: *mut c_void,
        pkey: *mut c_void,
        propq: *const c_char,
    ) -> *mut c_void;
    fn EVP_PKEY_CTX_free(ctx: *mut c_void);
    fn EVP_PKEY_fromdata_init(ctx: *mut c_void) -> c_int;
    fn EVP_PKEY_fromdata(
        ctx: *mut c_void,
        pkey: *mut *mut c_void,
        selection: c_int,
        params: *mut kae::ffi::sys::OSSL_PARAM,
    ) -> c_int;
    fn EVP_PKEY_decrypt_init_ex(
        ctx: *mut c_void,
        params: *const kae::ffi::sys::OSSL_PARAM,
    ) -> c_int;
    fn EVP_PKEY_decrypt(
        ctx: *mut c_void,
        out: *mut u8,
        outlen: *mut usize,
        input: *const u8,
        inlen: usize,
    ) -> c_int;
}

struct Side {
    libctx: *mut c_void,
    propq: &'static core::ffi::CStr,
    keys: Vec<*mut c_void>,
}
struct Both(Side, Side);
// SAFETY: process-lifetime OpenSSL objects used from the fuzzing thread only.
unsafe impl Send for Both {}
unsafe impl Sync for Both {}

fn sides() -> &'static Both {
    static B: OnceLock<Both> = OnceLock::new();
    B.get_or_init(|| {
        let load = |libctx: *mut c_void, propq: &'static core::ffi::CStr| {
            let keys = (0..KEY_PEMS.len())
                .map(|i| {
                    let mut a = components(i).params();
                    let mut pkey = core::ptr::null_mut();
                    // SAFETY: plain EVP calls, results checked.
                    unsafe {
                        let ctx =
                            EVP_PKEY_CTX_new_from_name(libctx, c"RSA".as_ptr(), propq.as_ptr());
                        assert!(!ctx.is_null());
                        assert_eq!(EVP_PKEY_fromdata_init(ctx), 1);
                        assert_eq!(EVP_PKEY_fromdata(ctx, &mut pkey, 0x87, a.finish()), 1);
                        EVP_PKEY_CTX_free(ctx);
                    }
                    pkey
                })
                .collect();
            Side {
                libctx,
                propq,
                keys,
            }
        };
        let kae_ctx = prov::get().libctx;
        // SAFETY: plain libcrypto calls, results checked.
        let def_ctx = unsafe {
            let c = OSSL_LIB_CTX_new();
            assert!(!OSSL_PROVIDER_load(c, c"default".as_ptr()).is_null());
            c
        };
        Both(
            load(kae_ctx, c"provider=kae"),
            load(def_ctx, c"provider=default"),
        )
    })
}

/// Decrypts with one side: Some(output) or None on failure.
fn decrypt(
    s: &Side,
    key: usize,
    params: &mut ParamArray,
    c: &[u8],
    outsize: usize,
) -> Option<Vec<u8>> {
    // SAFETY: EVP calls on our own objects; out has outsize bytes.
    unsafe {
        let ctx = EVP_PKEY_CTX_new_from_pkey(s.libctx, s.keys[key], s.propq.as_ptr());
        assert!(!ctx.is_null());
        let mut out = vec![0u8; outsize];
        let mut outlen = outsize;
        let ok = EVP_PKEY_decrypt_init_ex(ctx, params.finish()) == 1
            && EVP_PKEY_decrypt(ctx, out.as_mut_ptr(), &mut outlen, c.as_ptr(), c.len()) == 1;
        EVP_PKEY_CTX_free(ctx);
        prov::ERR_clear_error();
        if ok {
            assert!(outlen <= outsize);
            out.truncate(outlen);
            Some(out)
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pad {
    /// `implicit-rejection=0`.
    Pkcs1,
    /// `implicit-rejection=1` (ignored by both before OpenSSL 3.2).
    Pkcs1Implicit,
    /// No `implicit-rejection` parameter: the core's default.
    Pkcs1Default,
    Oaep,
    None,
    Tls,
}

const OAEP_MDS: [DigestId; 5] = [
    DigestId::Sha1,
    DigestId::Sha256,
    DigestId::Sha224,
    DigestId::Sha512,
    DigestId::Sha3_256,
];

fuzz_target!(|data: &[u8]| {
    let both = sides();
    let mut r = Rd(data);
    let key = if r.u8() % 8 == 0 {
        2
    } else {
        r.u8() as usize % 2
    };
    let comp = components(key);
    let n = BigNum::from_slice(&comp.n).unwrap();
    let e = BigNum::from_slice(&comp.e).unwrap();
    let k = n.num_bytes() as usize;
    let pad = match r.u8() % 6 {
        0 => Pad::Pkcs1,
        1 => Pad::Pkcs1Implicit,
        2 => Pad::Oaep,
        3 => Pad::None,
        4 => Pad::Pkcs1Default,
        _ => Pad::Tls,
    };
    let md = OAEP_MDS[r.u8() as usize % OAEP_MDS.len()];
    let mgf = OAEP_MDS[r.u8() as usize % OAEP_MDS.len()];
    let label = r.bytes().to_vec();
    let client = r.pick(&[0x0303u16, 0x0302, 0x0301, 0x0300, 0x1234]);
    let negotiated = r.pick(&[0u16, 0x0303, 0x0302]);

    // The ciphertext: raw bytes, or m^e mod n for a block `em` the fuzzer shapes.
    let mut em_known: Option<Vec<u8>> = None;
    let c: Vec<u8> = match r.u8() % 4 {
        0 => r.bytes().to_vec(),
        kind => {
            let msg = r.bytes().to_vec();
            let mut em = vec![0u8; k];
            let built = match kind {
                1 if pad == Pad::Tls => {
                    let mut pm = vec![0u8; 48];
                    pm[..2].copy_from_slice(&client.to_be_bytes());
                    for (i, b) in msg.iter().take(46).enumerate() {
                        pm[2 + i] = *b;
                    }
                    pkcs1::encode_type2(&pm, &mut em, &SeedRng(3)).is_ok()
                }
                1 => pkcs1::encode_type2(&msg, &mut em, &SeedRng(3)).is_ok(),
                2 => oaep::encode(&Md(md), &Md(mgf), &label, &msg, &SeedRng(5), &mut em).is_ok(),
                _ => {
                    for (i, b) in r.take(k).iter().enumerate() {
                        em[i] = *b;
                    }
                    true
                }
            };
            if !built {
                return;
            }
            for _ in 0..(r.u8() % 3) {
                let i = r.u16() as usize % k;
                em[i] ^= r.u8();
            }
            let m = BigNum::from_slice(&em).unwrap();
            if m >= n {
                return;
            }
            let mut cb = BigNum::new().unwrap();
            cb.mod_exp(&m, &e, &n, &mut BigNumContext::new().unwrap())
                .unwrap();
            em_known = Some(em);
            cb.to_vec_padded(k as i32).unwrap()
        }
    };
    let outsize = match r.u8() % 6 {
        0 | 1 => k,
        2 => k + 1 + r.u8() as usize,
        3 => 48,
        4 => k.saturating_sub(1 + r.u8() as usize % 8),
        _ => r.u16() as usize % 600,
    };

    let params = || {
        let mut a = ParamArray::new();
        let pm: &core::ffi::CStr = match pad {
            Pad::Pkcs1 | Pad::Pkcs1Implicit | Pad::Pkcs1Default | Pad::Tls => c"pkcs1",
            Pad::Oaep => c"oaep",
            Pad::None => c"none",
        };
        if pad == Pad::Tls {
            // RSA_PKCS1_WITH_TLS_PADDING has no name: the integer form.
            a.push_raw(
                b"pad-mode",
                kae::ffi::sys::OSSL_PARAM_INTEGER,
                &7i32.to_ne_bytes(),
                false,
            );
            a.push_raw(
                b"tls-client-version",
                kae::ffi::sys::OSSL_PARAM_UNSIGNED_INTEGER,
                &u32::from(client).to_ne_bytes(),
                false,
            );
            a.push_raw(
                b"tls-negotiated-version",
                kae::ffi::sys::OSSL_PARAM_UNSIGNED_INTEGER,
                &u32::from(negotiated).to_ne_bytes(),
                false,
            );
        } else {
            a.push_utf8(b"pad-mode", pm);
        }
        if pad == Pad::Oaep {
            let cn = std::ffi::CString::new(md.name()).unwrap();
            let cm = std::ffi::CString::new(mgf.name()).unwrap();
            a.push_utf8(b"digest", &cn);
            a.push_utf8(b"mgf1-digest", &cm);
            a.push_raw(
                b"oaep-label",
                kae::ffi::sys::OSSL_PARAM_OCTET_STRING,
                &label,
                false,
            );
        }
        if pad != Pad::Pkcs1Default {
            let ir: u32 = u32::from(pad == Pad::Pkcs1Implicit);
            a.push_raw(
                b"implicit-rejection",
                kae::ffi::sys::OSSL_PARAM_UNSIGNED_INTEGER,
                &ir.to_ne_bytes(),
                false,
            );
        }
        a
    };

    let known_skip = prov::skip_known();
    let max_out = if pad == Pad::Tls { 48 } else { k };
    if known_skip && (c.len() != k || outsize < max_out) {
        return;
    }

    let got = decrypt(&both.0, key, &mut params(), &c, outsize);
    let want = decrypt(&both.1, key, &mut params(), &c, outsize);
    let ctx = || {
        format!(
            "pad {pad:?} key {k} bytes, ciphertext {} bytes, outsize {outsize}, md {md:?}/{mgf:?}, \
             client {client:#06x} negotiated {negotiated:#06x}; kae {}, default {}",
            c.len(),
            got.as_ref().map_or("failed".to_string(), |v| format!("{} bytes", v.len())),
            want.as_ref().map_or("failed".to_string(), |v| format!("{} bytes", v.len())),
        )
    };
    assert_eq!(got.is_some(), want.is_some(), "success differs: {}", ctx());
    if let (Some(g), Some(w)) = (&got, &want) {
        let comparable = match pad {
            // A bad TLS block yields a random premaster on each side.
            Pad::Tls => em_known
                .as_deref()
                .is_some_and(|em| reference::tls_premaster(em, client, Some(negotiated)).is_some()),
            _ => true,
        };
        if comparable {
            assert_eq!(g, w, "output differs: {}", ctx());
        } else {
            assert_eq!(g.len(), w.len(), "output length differs: {}", ctx());
        }
    }
});
