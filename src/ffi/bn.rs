//! Owned wrappers for libcrypto big numbers and Montgomery contexts.
//!
//! Secret values are allocated with `BN_secure_new`, flagged `BN_FLG_CONSTTIME`, and cleared
//! on drop (`BN_clear_free`).

use super::libctx::LibCtx;
use super::sys::*;
use crate::error::{KaeError, KaeResult};
use core::ptr::NonNull;
use libc::c_int;

fn cvt(r: c_int) -> KaeResult<()> {
    if r == 1 {
        Ok(())
    } else {
        Err(KaeError::BignumFailure)
    }
}

/// An owned `BIGNUM`, cleared on drop.
pub struct BigNum(NonNull<BIGNUM>);

// SAFETY: a BIGNUM has no thread affinity. Every libcrypto call that writes a BIGNUM (an
// arithmetic result, `BN_set_flags`, `BN_sub_word`) takes it as `&mut BigNum`, so a shared
// `&BigNum` is only ever passed to functions that read it (`const BIGNUM *` parameters).
unsafe impl Send for BigNum {}
unsafe impl Sync for BigNum {}

impl BigNum {
    pub fn new() -> KaeResult<Self> {
        // SAFETY: BN_new has no preconditions; a NULL result (out of memory) becomes an error.
        NonNull::new(unsafe { BN_new() })
            .map(BigNum)
            .ok_or(KaeError::OutOfMemory)
    }

    /// A big number for secret values: secure heap when available, constant-time flag set.
    pub fn new_secret() -> KaeResult<Self> {
        // SAFETY: BN_secure_new has no preconditions; a NULL result (out of memory) becomes an
        // error.
        let mut bn = NonNull::new(unsafe { BN_secure_new() })
            .map(BigNum)
            .ok_or(KaeError::OutOfMemory)?;
        bn.set_consttime();
        Ok(bn)
    }

    /// A big number on the secure heap without BN_FLG_CONSTTIME: for secret *results* that are
    /// next raised to the public exponent (the fault check), where the flag would force the
    /// slow constant-time exponentiation although the exponent is public.
    pub fn new_secure_unflagged() -> KaeResult<Self> {
        // SAFETY: BN_secure_new has no preconditions; a NULL result (out of memory) becomes an
        // error.
        NonNull::new(unsafe { BN_secure_new() })
            .map(BigNum)
            .ok_or(KaeError::OutOfMemory)
    }

    pub fn from_u64(v: u64) -> KaeResult<Self> {
        let bn = Self::new()?;
        // SAFETY: bn was just allocated and is owned only by this function, so writing it races
        // with nothing.
        cvt(unsafe { BN_set_word(bn.as_ptr(), v) })?;
        Ok(bn)
    }

    /// Big-endian unsigned bytes to a number.
    pub fn from_be_bytes(bytes: &[u8], secret: bool) -> KaeResult<Self> {
        let bn = if secret {
            Self::new_secret()?
        } else {
            Self::new()?
        };
        let len = c_int::try_from(bytes.len()).map_err(|_| KaeError::InvalidLength)?;
        // SAFETY: bytes is a valid slice of len bytes; bn is owned.
        let r = unsafe { BN_bin2bn(bytes.as_ptr(), len, bn.as_ptr()) };
        if r.is_null() {
            return Err(KaeError::BignumFailure);
        }
        Ok(bn)
    }

    /// Take ownership of a BIGNUM allocated by libcrypto.
    ///
    /// # Safety
    /// `ptr` must be a valid BIGNUM that nothing else frees.
    pub unsafe fn from_raw(ptr: *mut BIGNUM) -> Option<Self> {
        NonNull::new(ptr).map(BigNum)
    }

    /// Copy of a borrowed BIGNUM (e.g. one read out of an OSSL_PARAM).
    pub fn dup(&self, secret: bool) -> KaeResult<Self> {
        let mut out = if secret {
            Self::new_secret()?
        } else {
            Self::new()?
        };
        // SAFETY: both wrap live BIGNUMs (a BigNum owns a non-NULL one until drop); out is owned
        // here and written, self is only read.
        if unsafe { BN_copy(out.as_ptr(), self.as_ptr()) }.is_null() {
            return Err(KaeError::OutOfMemory);
        }
        if secret {
            out.set_consttime();
        }
        Ok(out)
    }

    pub fn as_ptr(&self) -> *mut BIGNUM {
        self.0.as_ptr()
    }

    pub fn set_consttime(&mut self) {
        // SAFETY: self owns a live BIGNUM and is borrowed mutably, so no other reference reads it
        // during the flag write.
        unsafe { BN_set_flags(self.as_ptr(), BN_FLG_CONSTTIME) }
    }

    pub fn num_bits(&self) -> usize {
        // SAFETY: self owns a live, non-NULL BIGNUM (until drop), only read here.
        unsafe { BN_num_bits(self.as_ptr()) as usize }
    }

    pub fn num_bytes(&self) -> usize {
        self.num_bits().div_ceil(8)
    }

    pub fn is_zero(&self) -> bool {
        // SAFETY: self owns a live, non-NULL BIGNUM (until drop), only read here.
        unsafe { BN_is_zero(self.as_ptr()) == 1 }
    }

    pub fn is_one(&self) -> bool {
        // SAFETY: self owns a live, non-NULL BIGNUM (until drop), only read here.
        unsafe { BN_is_one(self.as_ptr()) == 1 }
    }

    pub fn is_odd(&self) -> bool {
        // SAFETY: self owns a live, non-NULL BIGNUM (until drop), only read here.
        unsafe { BN_is_odd(self.as_ptr()) == 1 }
    }

    pub fn is_negative(&self) -> bool {
        // SAFETY: self owns a live, non-NULL BIGNUM (until drop), only read here.
        unsafe { BN_is_negative(self.as_ptr()) == 1 }
    }

    /// Variable-time comparison; for public values only.
    pub fn cmp_vartime(&self, other: &BigNum) -> core::cmp::Ordering {
        // SAFETY: self and other each own a live, non-NULL BIGNUM (until drop), both only read.
        unsafe { BN_cmp(self.as_ptr(), other.as_ptr()) }.cmp(&0)
    }

    /// Big-endian bytes left-padded to `out.len()`.
    pub fn write_be_padded(&self, out: &mut [u8]) -> KaeResult<()> {
        let len = c_int::try_from(out.len()).map_err(|_| KaeError::InvalidLength)?;
        // SAFETY: out is writable for len bytes; BN_bn2binpad is constant time in the value.
        let r = unsafe { BN_bn2binpad(self.as_ptr(), out.as_mut_ptr(), len) };
        if r < 0 {
            return Err(KaeError::BufferTooSmall);
        }
        Ok(())
    }

    /// The value as `len` little-endian bytes (`BN_bn2lebinpad`, which reads the whole
    /// allocated limb array whatever the value; fails when the value does not fit).
    pub fn to_le_padded(&self, len: usize) -> KaeResult<zeroize::Zeroizing<Vec<u8>>> {
        let mut buf = zeroize::Zeroizing::new(vec![0u8; len]);
        let n = c_int::try_from(len).map_err(|_| KaeError::InvalidLength)?;
        // SAFETY: self owns a live BIGNUM, only read; buf is our own buffer, writable for n
        // bytes.
        let r = unsafe { BN_bn2lebinpad(self.as_ptr(), buf.as_mut_ptr(), n) };
        if r < 0 {
            return Err(KaeError::BignumFailure);
        }
        Ok(buf)
    }

    /// A number on the secure heap from little-endian bytes, with BN_FLG_CONSTTIME when
    /// `consttime` (leave it off only for a value next raised to a public exponent).
    /// libcrypto trims leading zero limbs (`bn_correct_top`), its one value-dependent step.
    pub fn from_le_secure(bytes: &[u8], consttime: bool) -> KaeResult<Self> {
        let mut bn = Self::new_secure_unflagged()?;
        let len = c_int::try_from(bytes.len()).map_err(|_| KaeError::InvalidLength)?;
        // SAFETY: bytes is valid for len bytes; bn is owned.
        let r = unsafe { BN_lebin2bn(bytes.as_ptr(), len, bn.as_ptr()) };
        if r.is_null() {
            return Err(KaeError::BignumFailure);
        }
        if consttime {
            bn.set_consttime();
        }
        Ok(bn)
    }

    pub fn to_be_bytes(&self) -> KaeResult<Vec<u8>> {
        let mut v = vec![0u8; self.num_bytes()];
        self.write_be_padded(&mut v)?;
        Ok(v)
    }
}

impl Drop for BigNum {
    fn drop(&mut self) {
        // SAFETY: we own the BIGNUM; clearing wipes secret limbs before freeing.
        unsafe { BN_clear_free(self.0.as_ptr()) }
    }
}

/// A scratch context for BN arithmetic (secure heap when available).
pub struct BnCtx(NonNull<BN_CTX>);

impl BnCtx {
    /// A secure-heap scratch context drawing random numbers from the default library context.
    pub fn new() -> KaeResult<Self> {
        Self::new_for(LibCtx::DEFAULT)
    }
    /// A secure-heap scratch context whose random numbers (blinding, prime tests) come from
    /// `source`: the context keeps it, and every operation that draws random numbers through
    /// it (`BN_priv_rand_range_ex`, prime generation) uses it.
    pub fn new_for(source: LibCtx) -> KaeResult<Self> {
        // SAFETY: BN_CTX_secure_new_ex only stores the library context in the new one; a
        // LibCtx is the default context or one its maker keeps alive while the handle or
        // anything made from it exists (LibCtx::free's contract).
        NonNull::new(unsafe { BN_CTX_secure_new_ex(source.as_ptr()) })
            .map(BnCtx)
            .ok_or(KaeError::OutOfMemory)
    }
    /// A scratch context for public-value arithmetic (no secure heap, no cleansing on free).
    pub fn new_public() -> KaeResult<Self> {
        // SAFETY: plain allocation with the default library context.
        NonNull::new(unsafe { BN_CTX_new_ex(core::ptr::null_mut()) })
            .map(BnCtx)
            .ok_or(KaeError::OutOfMemory)
    }

    pub fn as_ptr(&self) -> *mut BN_CTX {
        self.0.as_ptr()
    }
}

impl Drop for BnCtx {
    fn drop(&mut self) {
        // SAFETY: self.0 is the BN_CTX this wrapper allocated and owns; drop runs once.
        unsafe { BN_CTX_free(self.0.as_ptr()) }
    }
}

/// A Montgomery context for one modulus; read-only once built, so shareable across threads.
pub struct MontCtx(NonNull<BN_MONT_CTX>);

// SAFETY: after BN_MONT_CTX_set the context is only read by the exponentiation functions.
unsafe impl Send for MontCtx {}
unsafe impl Sync for MontCtx {}

impl MontCtx {
    pub fn new(modulus: &BigNum, ctx: &BnCtx) -> KaeResult<Self> {
        // SAFETY: BN_MONT_CTX_new has no preconditions; a NULL result (out of memory) becomes an
        // error.
        let m = NonNull::new(unsafe { BN_MONT_CTX_new() })
            .map(MontCtx)
            .ok_or(KaeError::OutOfMemory)?;
        // SAFETY: all pointers valid; modulus must be odd (checked by BN_MONT_CTX_set).
        cvt(unsafe { BN_MONT_CTX_set(m.as_ptr(), modulus.as_ptr(), ctx.as_ptr()) })?;
        Ok(m)
    }
    pub fn as_ptr(&self) -> *mut BN_MONT_CTX {
        self.0.as_ptr()
    }
}

impl Drop for MontCtx {
    fn drop(&mut self) {
        // SAFETY: self.0 is the BN_MONT_CTX this wrapper allocated and owns; drop runs once.
        unsafe { BN_MONT_CTX_free(self.0.as_ptr()) }
    }
}

/// Arithmetic helpers. Each takes explicit operands; `_consttime` names mark the
/// constant-time ones used on secrets; `_vartime` names are for public values only.
pub mod arith {
    use super::*;

    pub fn mod_exp_consttime(
        r: &mut BigNum,
        a: &BigNum,
        p: &BigNum,
        m: &BigNum,
        mont: &MontCtx,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop) and r is borrowed mutably,
        // so no input aliases it. mont must be built for m: not checked here, every caller passes
        // m's own.
        cvt(unsafe {
            BN_mod_exp_mont_consttime(
                r.as_ptr(),
                a.as_ptr(),
                p.as_ptr(),
                m.as_ptr(),
                ctx.as_ptr(),
                mont.as_ptr(),
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn mod_exp_consttime_x2(
        r1: &mut BigNum,
        a1: &BigNum,
        p1: &BigNum,
        m1: &BigNum,
        mont1: &MontCtx,
        r2: &mut BigNum,
        a2: &BigNum,
        p2: &BigNum,
        m2: &BigNum,
        mont2: &MontCtx,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: as in mod_exp_consttime: live wrapped objects, r1 and r2 borrowed mutably; each
        // mont must be built for its modulus, which the callers pair (not checked here).
        cvt(unsafe {
            BN_mod_exp_mont_consttime_x2(
                r1.as_ptr(),
                a1.as_ptr(),
                p1.as_ptr(),
                m1.as_ptr(),
                mont1.as_ptr(),
                r2.as_ptr(),
                a2.as_ptr(),
                p2.as_ptr(),
                m2.as_ptr(),
                mont2.as_ptr(),
                ctx.as_ptr(),
            )
        })
    }

    /// Public-exponent exponentiation (variable time: e and the result are public).
    pub fn mod_exp_vartime(
        r: &mut BigNum,
        a: &BigNum,
        p: &BigNum,
        m: &BigNum,
        mont: &MontCtx,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: as in mod_exp_consttime: live wrapped objects, r borrowed mutably; mont must be
        // built for m, which the callers pair (not checked here).
        cvt(unsafe {
            BN_mod_exp_mont(
                r.as_ptr(),
                a.as_ptr(),
                p.as_ptr(),
                m.as_ptr(),
                ctx.as_ptr(),
                mont.as_ptr(),
            )
        })
    }

    pub fn mod_mul_mont(
        r: &mut BigNum,
        a: &BigNum,
        b: &BigNum,
        mont: &MontCtx,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe {
            BN_mod_mul_montgomery(
                r.as_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                mont.as_ptr(),
                ctx.as_ptr(),
            )
        })
    }

    pub fn to_mont(r: &mut BigNum, a: &BigNum, mont: &MontCtx, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_to_montgomery(r.as_ptr(), a.as_ptr(), mont.as_ptr(), ctx.as_ptr()) })
    }

    /// Montgomery reduction: r = a·R^-1 mod m, for 0 ≤ a < m·R.
    pub fn from_mont(r: &mut BigNum, a: &BigNum, mont: &MontCtx, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_from_montgomery(r.as_ptr(), a.as_ptr(), mont.as_ptr(), ctx.as_ptr()) })
    }

    /// r = a − b mod m for 0 ≤ a, b < m (no division).
    pub fn mod_sub_quick(r: &mut BigNum, a: &BigNum, b: &BigNum, m: &BigNum) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_mod_sub_quick(r.as_ptr(), a.as_ptr(), b.as_ptr(), m.as_ptr()) })
    }

    /// r = a mod m (non-negative). With BN_FLG_CONSTTIME set on an operand, libcrypto takes
    /// its fixed-top division path.
    pub fn nnmod(r: &mut BigNum, a: &BigNum, m: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_nnmod(r.as_ptr(), a.as_ptr(), m.as_ptr(), ctx.as_ptr()) })
    }

    pub fn mod_mul(
        r: &mut BigNum,
        a: &BigNum,
        b: &BigNum,
        m: &BigNum,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_mod_mul(r.as_ptr(), a.as_ptr(), b.as_ptr(), m.as_ptr(), ctx.as_ptr()) })
    }

    pub fn mod_sub(
        r: &mut BigNum,
        a: &BigNum,
        b: &BigNum,
        m: &BigNum,
        ctx: &BnCtx,
    ) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_mod_sub(r.as_ptr(), a.as_ptr(), b.as_ptr(), m.as_ptr(), ctx.as_ptr()) })
    }

    pub fn mul(r: &mut BigNum, a: &BigNum, b: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_mul(r.as_ptr(), a.as_ptr(), b.as_ptr(), ctx.as_ptr()) })
    }

    pub fn add(r: &mut BigNum, a: &BigNum, b: &BigNum) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_add(r.as_ptr(), a.as_ptr(), b.as_ptr()) })
    }

    pub fn sub(r: &mut BigNum, a: &BigNum, b: &BigNum) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_sub(r.as_ptr(), a.as_ptr(), b.as_ptr()) })
    }

    pub fn sub_word(a: &mut BigNum, w: u64) -> KaeResult<()> {
        // SAFETY: a owns a live, non-NULL BIGNUM and is borrowed mutably, so nothing else reads it
        // meanwhile.
        cvt(unsafe { BN_sub_word(a.as_ptr(), w) })
    }

    pub fn gcd(r: &mut BigNum, a: &BigNum, b: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it.
        cvt(unsafe { BN_gcd(r.as_ptr(), a.as_ptr(), b.as_ptr(), ctx.as_ptr()) })
    }

    /// r = a / b (quotient only).
    pub fn div(r: &mut BigNum, a: &BigNum, b: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: all pointers valid; a NULL remainder is allowed.
        cvt(unsafe {
            BN_div(
                r.as_ptr(),
                core::ptr::null_mut(),
                a.as_ptr(),
                b.as_ptr(),
                ctx.as_ptr(),
            )
        })
    }

    /// Modular inverse; constant time when a or n carries BN_FLG_CONSTTIME.
    pub fn mod_inverse(r: &mut BigNum, a: &BigNum, n: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // no input aliases it. BN_mod_inverse returns r or NULL, never a new BIGNUM to free.
        let p = unsafe { BN_mod_inverse(r.as_ptr(), a.as_ptr(), n.as_ptr(), ctx.as_ptr()) };
        if p.is_null() {
            Err(KaeError::BignumFailure)
        } else {
            Ok(())
        }
    }

    /// Uniform random r in [0, range) from the private DRBG.
    pub fn priv_rand_range(r: &mut BigNum, range: &BigNum, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: each wrapper owns a live, non-NULL object (until drop); r is borrowed mutably, so
        // range cannot alias it.
        cvt(unsafe { BN_priv_rand_range_ex(r.as_ptr(), range.as_ptr(), 0, ctx.as_ptr()) })
            .map_err(|_| KaeError::RandomFailure)
    }

    pub fn generate_prime(r: &mut BigNum, bits: usize, ctx: &BnCtx) -> KaeResult<()> {
        // SAFETY: valid pointers; no callback, no add/rem constraints.
        cvt(unsafe {
            BN_generate_prime_ex2(
                r.as_ptr(),
                bits as c_int,
                0,
                core::ptr::null(),
                core::ptr::null(),
                core::ptr::null_mut(),
                ctx.as_ptr(),
            )
        })
        .map_err(|_| KaeError::KeyGenFailed)
    }

    pub fn is_prime(p: &BigNum, ctx: &BnCtx) -> KaeResult<bool> {
        // SAFETY: p and ctx own live, non-NULL objects (until drop); no callback is passed.
        match unsafe { BN_check_prime(p.as_ptr(), ctx.as_ptr(), core::ptr::null_mut()) } {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(KaeError::BignumFailure),
        }
    }

    /// Constant-time equality of two numbers of at most `len` bytes.
    pub fn eq_consttime(a: &BigNum, b: &BigNum, len: usize) -> KaeResult<bool> {
        let mut x = vec![0u8; len];
        let mut y = vec![0u8; len];
        a.write_be_padded(&mut x)?;
        b.write_be_padded(&mut y)?;
        // SAFETY: x and y are our own buffers of len bytes each.
        let r = unsafe { CRYPTO_memcmp(x.as_ptr().cast(), y.as_ptr().cast(), len) } == 0;
        zeroize::Zeroize::zeroize(&mut x[..]);
        zeroize::Zeroize::zeroize(&mut y[..]);
        Ok(r)
    }
}
