//! Key import with inconsistent components: a fixed RSA key's n, e, d, p, q, dP, dQ, qInv
//! each kept, dropped, replaced by fuzz bytes, nudged by ±1, zeroed, bit-flipped or swapped
//! with another, plus optional extra (multi-prime) factors, imported with a fuzzed
//! selection. Then has / validate / get_params / export / match, and a raw private
//! operation. Invariant (kae verifies every private result with e before releasing it):
//! whenever a decryption of c = m^e mod n succeeds, it returns m.
#![no_main]
use core::ffi::{c_int, c_void};
use kae::ffi::sys::*;
use kae_fuzz::prov::{self, components, Key, ParamArray};
use kae_fuzz::{func, Rd};
use libfuzzer_sys::fuzz_target;
use openssl::bn::{BigNum, BigNumContext};

type NewCtx = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type FreeCtx = unsafe extern "C" fn(*mut c_void);
type Init = unsafe extern "C" fn(*mut c_void, *mut c_void, *const OSSL_PARAM) -> c_int;
type Crypt =
    unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize, *const u8, usize) -> c_int;
type Has = unsafe extern "C" fn(*const c_void, c_int) -> c_int;
type Validate = unsafe extern "C" fn(*const c_void, c_int, c_int) -> c_int;
type Match = unsafe extern "C" fn(*const c_void, *const c_void, c_int) -> c_int;
type GetParams = unsafe extern "C" fn(*mut c_void, *mut OSSL_PARAM) -> c_int;

const NAMES: [&[u8]; 8] = [
    b"n",
    b"e",
    b"d",
    b"rsa-factor1",
    b"rsa-factor2",
    b"rsa-exponent1",
    b"rsa-exponent2",
    b"rsa-coefficient1",
];
const EXTRA: [&[u8]; 3] = [b"rsa-factor3", b"rsa-exponent3", b"rsa-coefficient2"];

fn nudge(v: &mut [u8], up: bool) {
    for b in v.iter_mut().rev() {
        let (x, carry) = if up {
            b.overflowing_add(1)
        } else {
            b.overflowing_sub(1)
        };
        *b = x;
        if !carry {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let p = prov::get();
    let mut r = Rd(data);
    let c = components(r.u8() as usize % 2); // the 1024- and 1032-bit keys (fast)
    let mut vals: Vec<Option<Vec<u8>>> = [&c.n, &c.e, &c.d, &c.p, &c.q, &c.dp, &c.dq, &c.qinv]
        .iter()
        .map(|v| Some(v.to_vec()))
        .collect();
    for i in 0..vals.len() {
        match r.u8() % 12 {
            0..=4 => {}
            5 => vals[i] = None,
            6 => vals[i] = Some(r.bytes().to_vec()),
            7 => {
                if let Some(v) = vals[i].as_mut() {
                    nudge(v, r.bool())
                }
            }
            8 => vals[i] = Some(if r.bool() { vec![] } else { vec![0] }),
            9 => {
                if let Some(v) = vals[i].as_mut() {
                    if !v.is_empty() {
                        let j = r.u8() as usize % v.len();
                        v[j] ^= 1 << (r.u8() % 8);
                    }
                }
            }
            10 => {
                let j = r.u8() as usize % vals.len();
                vals.swap(i, j);
            }
            _ => vals[i] = vals[r.u8() as usize % 8].clone(),
        }
    }
    let mut a = ParamArray::new();
    for (name, v) in NAMES.iter().zip(&vals) {
        if let Some(v) = v {
            a.push_uint_be(name, v);
        }
    }
    if r.u8() % 8 == 0 {
        for name in EXTRA {
            let v = r.bytes();
            a.push_uint_be(name, v);
        }
    }
    let selection = r.pick(&[3, 3, 1, 2, 0x87, 0x80, 0x04, 0]);
    let pss = r.u8() % 4 == 0;
    let imp = if pss { p.keymgmt_pss } else { p.keymgmt_rsa };
    let Some(key) = Key::import(imp, selection, &mut a) else {
        return;
    };
    // SAFETY: kae's functions on its own objects with well-formed arrays and buffers.
    unsafe {
        let has = func!(imp, OSSL_FUNC_KEYMGMT_HAS, Has);
        let keypair = has(key.ptr, OSSL_KEYMGMT_SELECT_KEYPAIR) == 1;
        has(key.ptr, OSSL_KEYMGMT_SELECT_PUBLIC_KEY);
        if r.u8() % 4 == 0 {
            func!(imp, OSSL_FUNC_KEYMGMT_VALIDATE, Validate)(
                key.ptr,
                OSSL_KEYMGMT_SELECT_KEYPAIR,
                c_int::from(r.bool()),
            );
        }
        let other = prov::fixed_key(pss, 0);
        func!(imp, OSSL_FUNC_KEYMGMT_MATCH, Match)(key.ptr, other, OSSL_KEYMGMT_SELECT_KEYPAIR);
        let mut req = ParamArray::new();
        for k in [&b"bits"[..], b"security-bits", b"max-size"] {
            req.push_raw(k, OSSL_PARAM_INTEGER, &[0u8; 4], false);
        }
        func!(imp, OSSL_FUNC_KEYMGMT_GET_PARAMS, GetParams)(key.ptr, req.finish());
        prov::check_reply(&mut req);
        prov::ERR_clear_error();

        // A raw private operation with the imported key (RSA key management only: the
        // RSA-PSS key refuses encryption), checked against m^e mod n with the imported n, e.
        let (Some(n), Some(e)) = (&vals[0], &vals[1]) else {
            return;
        };
        if pss || !keypair {
            return;
        }
        let (n, e) = (
            BigNum::from_slice(n).unwrap(),
            BigNum::from_slice(e).unwrap(),
        );
        if n.num_bits() < 2 || n.num_bits() > 4096 {
            return;
        }
        let k = n.num_bytes() as usize;
        let mut m = BigNum::from_slice(r.take(k)).unwrap();
        let mut tmp = BigNum::new().unwrap();
        tmp.checked_rem(&m, &n, &mut BigNumContext::new().unwrap())
            .unwrap();
        m = tmp;
        let mut cbn = BigNum::new().unwrap();
        cbn.mod_exp(&m, &e, &n, &mut BigNumContext::new().unwrap())
            .unwrap();
        let cipher = cbn.to_vec_padded(k as i32).unwrap();
        let want = m.to_vec_padded(k as i32).unwrap();

        let ci = p.cipher;
        let ctx = func!(ci, OSSL_FUNC_ASYM_CIPHER_NEWCTX, NewCtx)(p.provctx);
        let mut pa = ParamArray::new();
        pa.push_utf8(b"pad-mode", c"none");
        if func!(ci, OSSL_FUNC_ASYM_CIPHER_DECRYPT_INIT, Init)(ctx, key.ptr, pa.finish()) == 1 {
            let mut out = vec![0u8; k];
            let mut outlen = 0usize;
            let ok = func!(ci, OSSL_FUNC_ASYM_CIPHER_DECRYPT, Crypt)(
                ctx,
                out.as_mut_ptr(),
                &mut outlen,
                k,
                cipher.as_ptr(),
                k,
            );
            if ok == 1 {
                assert_eq!(&out[..outlen], &want[..], "wrong plaintext released");
            }
        }
        func!(ci, OSSL_FUNC_ASYM_CIPHER_FREECTX, FreeCtx)(ctx);
        prov::ERR_clear_error();
    }
});
