//! RSA KEM: RSASVE (NIST SP 800-56B Rev. 2 §7.2.1), the `OSSL_OP_KEM` operation for kae's RSA
//! keys. Table at the bottom.
//!
//! Encapsulation draws a random secret z with 1 < z < n − 1 from kae's private random
//! generator (the owning instance's child library context, as blinding does) and returns
//! z^e mod n through the public operation. Decapsulation is the raw private operation (RSADP:
//! blinding, CRT, the fault check with e) on a ciphertext of exactly k bytes.
//!
//! The observable rules follow the default provider of the running core
//! (`providers/implementations/kem/rsa_kem.c`): the only operation is "RSASVE" (matched without
//! regard to case); before 3.5 a context has no operation until one is set and then both calls
//! return -2, from 3.5 on RSASVE is the default; size queries with a NULL output report k for
//! both lengths; a non-NULL `*outlen` below k is refused; decapsulation refuses any input
//! length but k and, from 4.0 on, the degenerate ciphertexts c ≤ 1 and c ≥ n − 1; RSA-PSS keys
//! are refused at init; a public key can be set up for decapsulation (as the default provider
//! allows) and fails at the operation.

use crate::error::KaeError;
use crate::ffi::bn::{arith, BigNum};
use crate::ffi::core::{with_ctx, Failure};
use crate::ffi::guard_ptr;
use crate::ffi::params::{desc, ParamTable, Params, END};
use crate::ffi::sys::*;
use crate::keymgmt::KeyObj;
use crate::provider::{ProvCtx, Table};
use crate::rsa::{KeyType, RsaKey};
use core::cmp::Ordering;
use core::ffi::{c_int, c_uchar, c_void};
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

/// The value of the `operation` parameter (OSSL_KEM_PARAM_OPERATION_RSASVE).
const RSASVE: &str = "RSASVE";

/// What `encapsulate` / `decapsulate` return when no operation is set (the default provider's
/// value for an undefined operation).
const NO_OPERATION: c_int = -2;

pub struct KemCtx {
    prov: Arc<ProvCtx>,
    key: Option<Arc<RsaKey>>,
    /// RSASVE selected (the only operation there is). False only on cores before 3.5 until
    /// the caller sets it.
    rsasve: bool,
}

impl KemCtx {
    fn key(&self) -> Result<&Arc<RsaKey>, KaeError> {
        self.key.as_ref().ok_or(KaeError::MissingKey)
    }

    fn init(&mut self, keydata: *mut c_void, params: *const OSSL_PARAM) -> Result<(), Failure> {
        // SAFETY: keydata is NULL or a key object of a provider's key management; only ours
        // passes the tag check.
        let obj = unsafe { KeyObj::from_ptr(keydata) }.ok_or(KaeError::MissingKey)?;
        if obj.key.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "RSA-PSS keys cannot be used with RSASVE",
            ));
        }
        if !obj.key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        self.key = Some(obj.key.clone());
        // SAFETY: params is the argument op_init received from the core: NULL or a terminated array
        // valid for this call.
        self.set_params(&unsafe { Params::from_ptr(params) })
    }

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"operation") {
            if p.data_type() != OSSL_PARAM_UTF8_STRING {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    "operation must be a UTF8 string",
                ));
            }
            let v = p.get_utf8()?;
            if !v.eq_ignore_ascii_case(RSASVE) {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    format!("operation={v} (only RSASVE)"),
                ));
            }
            self.rsasve = true;
        }
        Ok(())
    }

    /// Refuses a call made before any operation was selected, with the default provider's -2.
    fn operation_set(&self) -> bool {
        if !self.rsasve {
            self.prov.core.raise(
                KaeError::OperationNotInitialized,
                Some("no KEM operation set (set operation=RSASVE)"),
            );
        }
        self.rsasve
    }

    /// RSASVE.GENERATE: z uniform with 1 < z < n − 1 into `secret`, z^e mod n into `ct`
    /// (both k bytes).
    fn generate(&self, ct: &mut [u8], secret: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        // 2 + (uniform in [0, n − 3)), from the private DRBG of the key's library context.
        let ctx = key.bn_ctx()?;
        let mut range = key.n()?.dup(false)?;
        arith::sub_word(&mut range, 3)?;
        let mut r = BigNum::new_secret()?;
        arith::priv_rand_range(&mut r, &range, &ctx)?;
        let mut z = BigNum::new_secret()?;
        arith::add(&mut z, &r, &BigNum::from_u64(2)?)?;
        z.write_be_padded(secret)?;
        crate::offload::public_op(key, secret, ct)?;
        Ok(())
    }

    /// RSASVE.RECOVER: the private operation on a ciphertext of exactly k bytes.
    fn recover(&self, ct: &[u8], out: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        let c = BigNum::from_be_bytes(ct, false)?;
        let n = key.n()?;
        if self.prov.core_at_least(4, 0) {
            // OpenSSL 4.0 refuses the degenerate ciphertexts 0, 1 and n − 1 (SP 800-56B
            // §7.1.2.1: 1 < c < n − 1). The ciphertext is public.
            let mut n1 = n.dup(false)?;
            arith::sub_word(&mut n1, 1)?;
            if c.cmp_vartime(&BigNum::from_u64(1)?) != Ordering::Greater {
                return Err(Failure::with(KaeError::DataTooSmall, "ciphertext ≤ 1"));
            }
            if c.cmp_vartime(&n1) != Ordering::Less {
                return Err(Failure::with(
                    KaeError::DataTooLargeForModulus,
                    "ciphertext ≥ n − 1",
                ));
            }
        }
        if c.cmp_vartime(n) != Ordering::Less {
            return Err(KaeError::DataTooLargeForModulus.into());
        }
        crate::offload::private_op(key, ct, out)?;
        Ok(())
    }
}

// ---- extern "C" functions -----------------------------------------------------------------

/// # Safety
/// `p` is NULL or a context created by `rsa_kem_newctx`.
unsafe fn ctx_mut<'a>(p: *mut c_void) -> Option<&'a mut KemCtx> {
    // SAFETY: per the caller's contract p is NULL or a live Box<KemCtx> leaked by newctx/dupctx;
    // the core never uses one operation context from two threads at once, so this borrow is unique.
    unsafe { p.cast::<KemCtx>().as_mut() }
}

impl crate::ffi::core::HasCore for KemCtx {
    fn core(&self) -> crate::ffi::core::Core {
        self.prov.core
    }
}

unsafe extern "C" fn rsa_kem_newctx(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: clone_arc only compares provctx with the registry's keys, never dereferences it.
    let Some(prov) = (unsafe { ProvCtx::clone_arc(provctx) }) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, KaeError> {
        // OpenSSL 3.5 made RSASVE the default; earlier cores start with no operation.
        let rsasve = prov.core_at_least(3, 5);
        let ctx = KemCtx {
            prov,
            key: None,
            rsasve,
        };
        Ok(Box::into_raw(Box::new(ctx)).cast())
    })
}

unsafe extern "C" fn rsa_kem_freectx(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: ctx is the Box<KemCtx> our newctx/dupctx leaked; the core calls freectx once and
        // never uses ctx after it.
        let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ctx.cast::<KemCtx>()) }));
    }
}

unsafe extern "C" fn rsa_kem_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: the core passes the pointer our newctx/dupctx returned (or NULL), not yet freed, as
    // ctx_mut asks.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else {
        return core::ptr::null_mut();
    };
    let core = c.prov.core;
    guard_ptr(Some(&core), || -> Result<*mut c_void, KaeError> {
        let dup = KemCtx {
            prov: c.prov.clone(),
            key: c.key.clone(),
            rsasve: c.rsasve,
        };
        Ok(Box::into_raw(Box::new(dup)).cast())
    })
}

/// # Safety
/// `ctx` is NULL or a context our newctx/dupctx returned that the core has not freed and no
/// other thread uses during the call; `key` is NULL or a keydata the core got from a key
/// management (at least 8 readable, aligned bytes, as `KeyObj::from_ptr` asks); `params` is
/// NULL or a terminated OSSL_PARAM array valid for the call.
unsafe fn op_init(ctx: *mut c_void, key: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| c.init(key, params).map(|_| 1))
}

unsafe extern "C" fn rsa_kem_encapsulate_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's arguments, passed unchanged, meet op_init's contract.
    unsafe { op_init(ctx, key, params) }
}

unsafe extern "C" fn rsa_kem_decapsulate_init(
    ctx: *mut c_void,
    key: *mut c_void,
    params: *const OSSL_PARAM,
) -> c_int {
    // The private key is needed by decapsulate itself, as in the default provider.
    // SAFETY: the core's arguments, passed unchanged, meet op_init's contract.
    unsafe { op_init(ctx, key, params) }
}

/// Writes the ciphertext and the secret (k bytes each), or reports their sizes when `out` is
/// NULL. A non-NULL `*outlen` must give the size of `out`; `secret` must hold k bytes (the
/// API has no size for it on input).
unsafe extern "C" fn rsa_kem_encapsulate(
    ctx: *mut c_void,
    out: *mut c_uchar,
    outlen: *mut usize,
    secret: *mut c_uchar,
    secretlen: *mut usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        if !c.operation_set() {
            return Ok(NO_OPERATION);
        }
        let k = c.key()?.size();
        if out.is_null() {
            if outlen.is_null() && secretlen.is_null() {
                return Err(KaeError::NullParameter.into());
            }
            // SAFETY: each pointer is written only when non-NULL, and the core passes non-NULL
            // length pointers writable.
            unsafe {
                if !outlen.is_null() {
                    *outlen = k;
                }
                if !secretlen.is_null() {
                    *secretlen = k;
                }
            }
            return Ok(1);
        }
        // SAFETY: a non-NULL outlen holds the size of out on input.
        if !outlen.is_null() && unsafe { *outlen } < k {
            return Err(Failure::with(
                KaeError::BufferTooSmall,
                format!("ciphertext buffer of {} bytes; need {k}", unsafe {
                    *outlen
                }),
            ));
        }
        if secret.is_null() {
            return Err(Failure::with(KaeError::NullParameter, "no secret buffer"));
        }
        let mut ct = vec![0u8; k];
        let mut z = Zeroizing::new(vec![0u8; k]);
        c.generate(&mut ct, &mut z)?;
        // SAFETY: out holds at least k bytes (checked above, or the caller's contract without
        // outlen); secret holds k bytes (the caller's contract, as for the default provider).
        unsafe {
            core::ptr::copy_nonoverlapping(ct.as_ptr(), out, k);
            core::ptr::copy_nonoverlapping(z.as_ptr(), secret, k);
            if !outlen.is_null() {
                *outlen = k;
            }
            if !secretlen.is_null() {
                *secretlen = k;
            }
        }
        Ok(1)
    })
}

/// Recovers the secret (k bytes) from a ciphertext of k bytes, or reports k when `out` is NULL.
unsafe extern "C" fn rsa_kem_decapsulate(
    ctx: *mut c_void,
    out: *mut c_uchar,
    outlen: *mut usize,
    inp: *const c_uchar,
    inlen: usize,
) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |c| -> Result<c_int, Failure> {
        if !c.operation_set() {
            return Ok(NO_OPERATION);
        }
        let k = c.key()?.size();
        if out.is_null() {
            if outlen.is_null() {
                return Err(KaeError::NullParameter.into());
            }
            // SAFETY: outlen is non-NULL (checked above); the core passes it writable.
            unsafe { *outlen = k };
            return Ok(1);
        }
        if inlen != k {
            return Err(Failure::with(
                KaeError::InvalidLength,
                format!("ciphertext of {inlen} bytes; the key needs exactly {k}"),
            ));
        }
        // SAFETY: a non-NULL outlen holds the size of out on input.
        if !outlen.is_null() && unsafe { *outlen } < k {
            return Err(Failure::with(
                KaeError::BufferTooSmall,
                format!("secret buffer of {} bytes; need {k}", unsafe { *outlen }),
            ));
        }
        // SAFETY: inp is the core's input of inlen bytes, valid and not written during this call.
        let ct = unsafe { crate::ffi::in_slice(inp, inlen)? };
        let mut z = Zeroizing::new(vec![0u8; k]);
        c.recover(ct, &mut z)?;
        // SAFETY: out holds at least k bytes (checked above, or the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(z.as_ptr(), out, k);
            if !outlen.is_null() {
                *outlen = k;
            }
        }
        Ok(1)
    })
}

unsafe extern "C" fn rsa_kem_get_ctx_params(ctx: *mut c_void, _params: *mut OSSL_PARAM) -> c_int {
    // Nothing to report (the default provider's list is empty outside FIPS).
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract).
    with_ctx(unsafe { ctx_mut(ctx) }, |_| Ok::<_, KaeError>(1))
}

unsafe extern "C" fn rsa_kem_set_ctx_params(ctx: *mut c_void, params: *const OSSL_PARAM) -> c_int {
    // SAFETY: ctx is NULL or the context our newctx returned (the core's contract); params
    // is a valid array or NULL.
    with_ctx(unsafe { ctx_mut(ctx) }, |c| {
        c.set_params(&unsafe { Params::from_ptr(params) })
            .map(|_| 1)
    })
}

static GETTABLE: ParamTable<1> = ParamTable([END]);

static SETTABLE: ParamTable<2> = ParamTable([desc(c"operation", OSSL_PARAM_UTF8_STRING), END]);

unsafe extern "C" fn rsa_kem_gettable_ctx_params(
    _ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    GETTABLE.as_ptr()
}

unsafe extern "C" fn rsa_kem_settable_ctx_params(
    _ctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    SETTABLE.as_ptr()
}

pub static RSA_KEM: LazyLock<Table<OSSL_DISPATCH>> = LazyLock::new(|| {
    crate::dispatch![
        OSSL_FUNC_KEM_NEWCTX => rsa_kem_newctx as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEM_ENCAPSULATE_INIT => rsa_kem_encapsulate_init as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEM_ENCAPSULATE => rsa_kem_encapsulate as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_KEM_DECAPSULATE_INIT => rsa_kem_decapsulate_init as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEM_DECAPSULATE => rsa_kem_decapsulate as unsafe extern "C" fn(_, _, _, _, _) -> _,
        OSSL_FUNC_KEM_FREECTX => rsa_kem_freectx as unsafe extern "C" fn(_),
        OSSL_FUNC_KEM_DUPCTX => rsa_kem_dupctx as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEM_GET_CTX_PARAMS => rsa_kem_get_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_GETTABLE_CTX_PARAMS => rsa_kem_gettable_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_SET_CTX_PARAMS => rsa_kem_set_ctx_params as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEM_SETTABLE_CTX_PARAMS => rsa_kem_settable_ctx_params as unsafe extern "C" fn(_, _) -> _,
    ]
});
