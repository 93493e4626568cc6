//! The IFMA lanes: one AVX-512 register of eight 64-bit limbs, `vpmadd52luq`/`vpmadd52huq`
//! for the products. A child of `kernel`, so nothing else in the crate can name the type.

use super::super::lanes::Lanes;
use std::arch::x86_64::*;

/// One AVX-512 register of eight 64-bit lanes. Its safe methods run AVX-512 instructions, so
/// it is private to the kernel module: only the kernel's `#[target_feature]` functions use it,
/// reached through entry points that take an `IfmaToken` (made by CPU detection only).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(super) struct Ifma(__m512i);

// SAFETY (every method): an `Ifma` value is only made inside the kernel's
// `#[target_feature(enable = "avx512f,avx512ifma")]` functions, which are called only by
// entry points holding an `IfmaToken` (proof that the CPU has the instructions).
impl Lanes for Ifma {
    const UNROLL: bool = true;
    #[inline(always)]
    fn zero() -> Self {
        Ifma(unsafe { _mm512_setzero_si512() })
    }
    #[inline(always)]
    fn splat(x: u64) -> Self {
        Ifma(unsafe { _mm512_set1_epi64(x as i64) })
    }
    #[inline(always)]
    fn from_array(a: [u64; 8]) -> Self {
        // SAFETY: reads 64 bytes from a local array (unaligned load).
        Ifma(unsafe { _mm512_loadu_si512(a.as_ptr().cast()) })
    }
    #[inline(always)]
    fn to_array(self) -> [u64; 8] {
        let mut a = [0u64; 8];
        // SAFETY: writes 64 bytes into a local array (unaligned store).
        unsafe { _mm512_storeu_si512(a.as_mut_ptr().cast(), self.0) };
        a
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Ifma(unsafe { _mm512_add_epi64(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Ifma(unsafe { _mm512_sub_epi64(self.0, o.0) })
    }
    #[inline(always)]
    fn and(self, o: Self) -> Self {
        Ifma(unsafe { _mm512_and_si512(self.0, o.0) })
    }
    #[inline(always)]
    fn or(self, o: Self) -> Self {
        Ifma(unsafe { _mm512_or_si512(self.0, o.0) })
    }
    #[inline(always)]
    fn andnot(self, o: Self) -> Self {
        Ifma(unsafe { _mm512_andnot_si512(self.0, o.0) })
    }
    #[inline(always)]
    fn shr<const N: u32>(self) -> Self {
        Ifma(unsafe { _mm512_srli_epi64::<N>(self.0) })
    }
    #[inline(always)]
    fn shr_by(self, n: u32) -> Self {
        Ifma(unsafe { _mm512_srl_epi64(self.0, _mm_set_epi64x(0, i64::from(n))) })
    }
    #[inline(always)]
    fn shl_by(self, n: u32) -> Self {
        Ifma(unsafe { _mm512_sll_epi64(self.0, _mm_set_epi64x(0, i64::from(n))) })
    }
    #[inline(always)]
    fn sar<const N: u32>(self) -> Self {
        Ifma(unsafe { _mm512_srai_epi64::<N>(self.0) })
    }
    #[inline(always)]
    fn shl<const N: u32>(self) -> Self {
        Ifma(unsafe { _mm512_slli_epi64::<N>(self.0) })
    }
    #[inline(always)]
    fn madd52lo(self, b: Self, c: Self) -> Self {
        Ifma(unsafe { _mm512_madd52lo_epu64(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn madd52hi(self, b: Self, c: Self) -> Self {
        Ifma(unsafe { _mm512_madd52hi_epu64(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn eq_mask(self, o: Self) -> Self {
        unsafe {
            let k = _mm512_cmpeq_epi64_mask(self.0, o.0);
            Ifma(_mm512_maskz_mov_epi64(k, _mm512_set1_epi64(-1)))
        }
    }
    #[inline(always)]
    fn take_where_eq(self, a: Self, b: Self, e: Self) -> Self {
        unsafe {
            let k = _mm512_cmpeq_epi64_mask(a.0, b.0);
            Ifma(_mm512_mask_mov_epi64(self.0, k, e.0))
        }
    }
}
