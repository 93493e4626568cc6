//! OSSL_PARAM handling of every settable / import / get table kae has: asymmetric cipher
//! (decrypt and encrypt contexts), signature (sign, verify, digest-sign), key management
//! import (RSA and RSA-PSS) and key generation parameters, key and provider get_params.
//! Parameters get their declared type or any other, sizes from 0 to 1 KiB, NULL data,
//! UTF8 strings without a NUL inside `data_size` (the allocation ends right after),
//! NULL pointer targets and huge integers. After the parameters an operation is run so
//! that whatever state they left is used. A crash, an ASan report or a panic is a finding;
//! failures reported through the error queue are fine.
#![no_main]
use core::ffi::{c_char, c_int, c_void};
use kae::ffi::sys::*;
use kae_fuzz::prov::{self, check_reply, fixed_key, fuzz_params, fuzz_request, table_keys, Key};
use kae_fuzz::{func, Rd};
use libfuzzer_sys::fuzz_target;

type NewCtx = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type SigNewCtx = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type FreeCtx = unsafe extern "C" fn(*mut c_void);
type DupCtx = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type Init = unsafe extern "C" fn(*mut c_void, *mut c_void, *const OSSL_PARAM) -> c_int;
type DigestInit =
    unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void, *const OSSL_PARAM) -> c_int;
type SetParams = unsafe extern "C" fn(*mut c_void, *const OSSL_PARAM) -> c_int;
type GetParams = unsafe extern "C" fn(*mut c_void, *mut OSSL_PARAM) -> c_int;
type Table2 = unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const OSSL_PARAM;
type Table1 = unsafe extern "C" fn(*mut c_void) -> *const OSSL_PARAM;
type TableSel = unsafe extern "C" fn(c_int) -> *const OSSL_PARAM;
type Crypt =
    unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize, *const u8, usize) -> c_int;
type Verify = unsafe extern "C" fn(*mut c_void, *const u8, usize, *const u8, usize) -> c_int;
type Update = unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int;
type SignFinal = unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int;
type GenInit = unsafe extern "C" fn(*mut c_void, c_int, *const OSSL_PARAM) -> *mut c_void;
type Export = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    unsafe extern "C" fn(*const OSSL_PARAM, *mut c_void) -> c_int,
    *mut c_void,
) -> c_int;

unsafe extern "C" fn export_cb(params: *const OSSL_PARAM, _arg: *mut c_void) -> c_int {
    // Walk what kae exported (keys readable, sizes consistent with the data).
    let mut p = params;
    // SAFETY: a terminated array from kae.
    unsafe {
        while !(*p).key.is_null() {
            if !(*p).data.is_null() && (*p).data_size > 0 {
                let v = core::slice::from_raw_parts((*p).data as *const u8, (*p).data_size);
                std::hint::black_box(v.iter().fold(0u8, |x, &b| x ^ b));
            }
            p = p.add(1);
        }
    }
    1
}

fn cipher(r: &mut Rd, decrypt: bool) {
    let p = prov::get();
    let imp = p.cipher;
    let key = fixed_key(false, r.u8() as usize);
    let settable = table_keys(unsafe {
        func!(imp, OSSL_FUNC_ASYM_CIPHER_SETTABLE_CTX_PARAMS, Table2)(
            core::ptr::null_mut(),
            p.provctx,
        )
    });
    let gettable = table_keys(unsafe {
        func!(imp, OSSL_FUNC_ASYM_CIPHER_GETTABLE_CTX_PARAMS, Table2)(
            core::ptr::null_mut(),
            p.provctx,
        )
    });
    let mut init_params = fuzz_params(r, &settable);
    let mut set_params = fuzz_params(r, &settable);
    let mut req = fuzz_request(r, &gettable);
    let input = r.bytes().to_vec();
    let outsize = r.u16() as usize % 600;
    // SAFETY: kae's functions on its own contexts with well-formed arrays and buffers.
    unsafe {
        let ctx = func!(imp, OSSL_FUNC_ASYM_CIPHER_NEWCTX, NewCtx)(p.provctx);
        assert!(!ctx.is_null());
        let init = if decrypt {
            func!(imp, OSSL_FUNC_ASYM_CIPHER_DECRYPT_INIT, Init)
        } else {
            func!(imp, OSSL_FUNC_ASYM_CIPHER_ENCRYPT_INIT, Init)
        };
        if init(ctx, key, init_params.finish()) == 1 {
            func!(imp, OSSL_FUNC_ASYM_CIPHER_SET_CTX_PARAMS, SetParams)(ctx, set_params.finish());
            func!(imp, OSSL_FUNC_ASYM_CIPHER_GET_CTX_PARAMS, GetParams)(ctx, req.finish());
            check_reply(&mut req);
            let dup = func!(imp, OSSL_FUNC_ASYM_CIPHER_DUPCTX, DupCtx)(ctx);
            let op = if decrypt {
                func!(imp, OSSL_FUNC_ASYM_CIPHER_DECRYPT, Crypt)
            } else {
                func!(imp, OSSL_FUNC_ASYM_CIPHER_ENCRYPT, Crypt)
            };
            let mut out = vec![0u8; outsize];
            let mut outlen = 0usize;
            let ok = op(
                ctx,
                out.as_mut_ptr(),
                &mut outlen,
                outsize,
                input.as_ptr(),
                input.len(),
            );
            if ok == 1 {
                assert!(outlen <= outsize, "outlen {outlen} > outsize {outsize}");
            }
            // Size query (NULL output).
            let mut need = 0usize;
            if op(
                ctx,
                core::ptr::null_mut(),
                &mut need,
                0,
                input.as_ptr(),
                input.len(),
            ) == 1
            {
                assert!(
                    ok != 1 || outlen <= need,
                    "size query {need} < result {outlen}"
                );
            }
            if !dup.is_null() {
                func!(imp, OSSL_FUNC_ASYM_CIPHER_FREECTX, FreeCtx)(dup);
            }
        }
        func!(imp, OSSL_FUNC_ASYM_CIPHER_FREECTX, FreeCtx)(ctx);
        prov::ERR_clear_error();
    }
}

fn signature(r: &mut Rd, mode: u8) {
    let p = prov::get();
    let imp = p.signature;
    let key = fixed_key(r.bool(), r.u8() as usize);
    let settable = table_keys(unsafe {
        func!(imp, OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS, Table2)(
            core::ptr::null_mut(),
            p.provctx,
        )
    });
    let gettable = table_keys(unsafe {
        func!(imp, OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS, Table2)(
            core::ptr::null_mut(),
            p.provctx,
        )
    });
    let md_settable = table_keys(unsafe {
        func!(imp, OSSL_FUNC_SIGNATURE_SETTABLE_CTX_MD_PARAMS, Table1)(core::ptr::null_mut())
    });
    let mut init_params = fuzz_params(r, &settable);
    let mut set_params = fuzz_params(r, &settable);
    let mut md_params = fuzz_params(r, &md_settable);
    let mut req = fuzz_request(r, &gettable);
    let mdname = std::ffi::CString::new(
        r.pick(prov::WORDS)
            .iter()
            .copied()
            .filter(|&b| b != 0)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let tbs = r.bytes().to_vec();
    let sigsize = r.u16() as usize % 600;
    // SAFETY: kae's functions on its own contexts with well-formed arrays and buffers.
    unsafe {
        let ctx = func!(imp, OSSL_FUNC_SIGNATURE_NEWCTX, SigNewCtx)(p.provctx, core::ptr::null());
        assert!(!ctx.is_null());
        let ok = match mode {
            0 => func!(imp, OSSL_FUNC_SIGNATURE_SIGN_INIT, Init)(ctx, key, init_params.finish()),
            1 => func!(imp, OSSL_FUNC_SIGNATURE_VERIFY_INIT, Init)(ctx, key, init_params.finish()),
            2 => func!(imp, OSSL_FUNC_SIGNATURE_VERIFY_RECOVER_INIT, Init)(
                ctx,
                key,
                init_params.finish(),
            ),
            _ => func!(imp, OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT, DigestInit)(
                ctx,
                if r.bool() {
                    core::ptr::null()
                } else {
                    mdname.as_ptr()
                },
                key,
                init_params.finish(),
            ),
        };
        if ok == 1 {
            func!(imp, OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS, SetParams)(ctx, set_params.finish());
            func!(imp, OSSL_FUNC_SIGNATURE_SET_CTX_MD_PARAMS, SetParams)(ctx, md_params.finish());
            func!(imp, OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS, GetParams)(ctx, req.finish());
            check_reply(&mut req);
            let dup = func!(imp, OSSL_FUNC_SIGNATURE_DUPCTX, DupCtx)(ctx);
            let mut sig = vec![0u8; sigsize];
            let mut siglen = 0usize;
            let done = match mode {
                0 => func!(imp, OSSL_FUNC_SIGNATURE_SIGN, Crypt)(
                    ctx,
                    sig.as_mut_ptr(),
                    &mut siglen,
                    sigsize,
                    tbs.as_ptr(),
                    tbs.len(),
                ),
                1 => {
                    func!(imp, OSSL_FUNC_SIGNATURE_VERIFY, Verify)(
                        ctx,
                        tbs.as_ptr(),
                        tbs.len(),
                        tbs.as_ptr(),
                        tbs.len(),
                    );
                    0
                }
                2 => func!(imp, OSSL_FUNC_SIGNATURE_VERIFY_RECOVER, Crypt)(
                    ctx,
                    sig.as_mut_ptr(),
                    &mut siglen,
                    sigsize,
                    tbs.as_ptr(),
                    tbs.len(),
                ),
                _ => {
                    func!(imp, OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE, Update)(
                        ctx,
                        tbs.as_ptr(),
                        tbs.len(),
                    );
                    func!(imp, OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL, SignFinal)(
                        ctx,
                        sig.as_mut_ptr(),
                        &mut siglen,
                        sigsize,
                    )
                }
            };
            if done == 1 {
                assert!(siglen <= sigsize, "siglen {siglen} > sigsize {sigsize}");
            }
            if !dup.is_null() {
                func!(imp, OSSL_FUNC_SIGNATURE_FREECTX, FreeCtx)(dup);
            }
        }
        func!(imp, OSSL_FUNC_SIGNATURE_FREECTX, FreeCtx)(ctx);
        prov::ERR_clear_error();
    }
}

fn keymgmt(r: &mut Rd, mode: u8) {
    let p = prov::get();
    let pss = r.bool();
    let imp = if pss { p.keymgmt_pss } else { p.keymgmt_rsa };
    let selection = c_int::from(r.u8());
    // SAFETY: kae's functions with well-formed arrays.
    unsafe {
        match mode {
            0 => {
                let types = table_keys(func!(imp, OSSL_FUNC_KEYMGMT_IMPORT_TYPES, TableSel)(
                    selection,
                ));
                let mut a = fuzz_params(r, &types);
                if let Some(k) = Key::import(imp, selection, &mut a) {
                    let gettable =
                        table_keys(func!(imp, OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, Table1)(
                            p.provctx,
                        ));
                    let mut req = fuzz_request(r, &gettable);
                    func!(imp, OSSL_FUNC_KEYMGMT_GET_PARAMS, GetParams)(k.ptr, req.finish());
                    check_reply(&mut req);
                    func!(imp, OSSL_FUNC_KEYMGMT_EXPORT, Export)(
                        k.ptr,
                        c_int::from(r.u8()),
                        export_cb,
                        core::ptr::null_mut(),
                    );
                }
            }
            1 => {
                let g = func!(imp, OSSL_FUNC_KEYMGMT_GEN_INIT, GenInit)(
                    p.provctx,
                    selection,
                    core::ptr::null(),
                );
                if !g.is_null() {
                    let settable =
                        table_keys(func!(imp, OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS, Table2)(
                            g, p.provctx,
                        ));
                    let mut a = fuzz_params(r, &settable);
                    func!(imp, OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS, SetParams)(g, a.finish());
                    func!(imp, OSSL_FUNC_KEYMGMT_GEN_CLEANUP, FreeCtx)(g);
                }
            }
            _ => {
                let gettable = table_keys(func!(imp, OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, Table1)(
                    p.provctx,
                ));
                let mut req = fuzz_request(r, &gettable);
                func!(imp, OSSL_FUNC_KEYMGMT_GET_PARAMS, GetParams)(
                    fixed_key(pss, r.u8() as usize),
                    req.finish(),
                );
                check_reply(&mut req);
            }
        }
        prov::ERR_clear_error();
    }
}

fn provider(r: &mut Rd) {
    let p = prov::get();
    // SAFETY: kae's provider functions with its provctx and a well-formed request.
    unsafe {
        let gettable = table_keys(func!(
            p.provider,
            OSSL_FUNC_PROVIDER_GETTABLE_PARAMS,
            Table1
        )(p.provctx));
        let mut req = fuzz_request(r, &gettable);
        func!(p.provider, OSSL_FUNC_PROVIDER_GET_PARAMS, GetParams)(p.provctx, req.finish());
        check_reply(&mut req);
        prov::ERR_clear_error();
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    match r.u8() % 11 {
        10 => provider(&mut r),
        0 | 1 => cipher(&mut r, true),
        2 => cipher(&mut r, false),
        3 => signature(&mut r, 0),
        4 => signature(&mut r, 1),
        5 => signature(&mut r, 2),
        6 => signature(&mut r, 3),
        7 => keymgmt(&mut r, 0),
        8 => keymgmt(&mut r, 1),
        _ => keymgmt(&mut r, 2),
    }
});
