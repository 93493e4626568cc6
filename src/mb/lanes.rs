//! Eight 64-bit lanes and the few operations the multi-buffer kernel needs.
//!
//! [`Lanes`] is implemented twice with the same meaning, lane by lane:
//! - `kernel::ifma::Ifma`: one AVX-512 register, `vpmadd52luq`/`vpmadd52huq` for the products.
//!   Private to the kernel module, whose IFMA entry points take the capability token that
//!   only CPU detection makes (`mb::cpu::IfmaToken`).
//! - [`Portable`]: eight `u64`s and `u128` products. The reference for the IFMA lanes, and what
//!   the kernel's tests and the secret-taint check run on a CPU without IFMA.
//!
//! Every operation is branch-free and lane-wise: a mask is a lane of all ones or all zeros.

/// Low 52 bits of a limb.
pub const MASK52: u64 = (1 << 52) - 1;

/// Eight lanes of 64 bits. All methods are lane-wise and constant time.
pub trait Lanes: Copy {
    /// Whether the kernel's limb loops are written out straight (`kernel::unroll!`): for the
    /// IFMA registers; the portable lanes keep loops (tests only, and quick to compile).
    const UNROLL: bool;
    fn zero() -> Self;
    fn splat(x: u64) -> Self;
    fn from_array(a: [u64; 8]) -> Self;
    fn to_array(self) -> [u64; 8];
    /// Wrapping addition.
    fn add(self, o: Self) -> Self;
    /// Wrapping subtraction.
    fn sub(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    /// `!self & o`.
    fn andnot(self, o: Self) -> Self;
    /// Logical right shift by a public count.
    fn shr<const N: u32>(self) -> Self;
    /// Logical right shift by a public count below 64 known only at run time.
    fn shr_by(self, n: u32) -> Self;
    /// Left shift by a public count below 64 known only at run time.
    fn shl_by(self, n: u32) -> Self;
    /// Arithmetic right shift (lanes as signed numbers) by a public count.
    fn sar<const N: u32>(self) -> Self;
    /// Left shift by a public count.
    fn shl<const N: u32>(self) -> Self;
    /// `self + low52(b[51:0] · c[51:0])`: IFMA's `vpmadd52luq`.
    fn madd52lo(self, b: Self, c: Self) -> Self;
    /// `self + high52(b[51:0] · c[51:0])`: IFMA's `vpmadd52huq`.
    fn madd52hi(self, b: Self, c: Self) -> Self;
    /// All ones in the lanes where `self == o`, zero elsewhere.
    fn eq_mask(self, o: Self) -> Self;
    /// `e` in the lanes where `a == b`, `self` elsewhere (a table scan's step: one masked move
    /// on AVX-512).
    #[inline(always)]
    fn take_where_eq(self, a: Self, b: Self, e: Self) -> Self {
        select(a.eq_mask(b), e, self)
    }
}

/// `a` where `mask` is all ones, `b` where it is zero.
#[inline(always)]
pub fn select<V: Lanes>(mask: V, a: V, b: V) -> V {
    mask.and(a).or(mask.andnot(b))
}

/// The portable lanes: plain `u64` arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Portable(pub [u64; 8]);

impl Portable {
    #[inline(always)]
    fn map2(self, o: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        let mut r = [0u64; 8];
        for i in 0..8 {
            r[i] = f(self.0[i], o.0[i]);
        }
        Portable(r)
    }

    #[inline(always)]
    fn map3(self, b: Self, c: Self, f: impl Fn(u64, u64, u64) -> u64) -> Self {
        let mut r = [0u64; 8];
        for i in 0..8 {
            r[i] = f(self.0[i], b.0[i], c.0[i]);
        }
        Portable(r)
    }
}

#[inline(always)]
fn product52(b: u64, c: u64) -> u128 {
    ((b & MASK52) as u128) * ((c & MASK52) as u128)
}

impl Lanes for Portable {
    const UNROLL: bool = false;
    #[inline(always)]
    fn zero() -> Self {
        Portable([0; 8])
    }
    #[inline(always)]
    fn splat(x: u64) -> Self {
        Portable([x; 8])
    }
    #[inline(always)]
    fn from_array(a: [u64; 8]) -> Self {
        Portable(a)
    }
    #[inline(always)]
    fn to_array(self) -> [u64; 8] {
        self.0
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.map2(o, u64::wrapping_add)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.map2(o, u64::wrapping_sub)
    }
    #[inline(always)]
    fn and(self, o: Self) -> Self {
        self.map2(o, |a, b| a & b)
    }
    #[inline(always)]
    fn or(self, o: Self) -> Self {
        self.map2(o, |a, b| a | b)
    }
    #[inline(always)]
    fn andnot(self, o: Self) -> Self {
        self.map2(o, |a, b| !a & b)
    }
    #[inline(always)]
    fn shr<const N: u32>(self) -> Self {
        self.map2(self, |a, _| a >> N)
    }
    #[inline(always)]
    fn sar<const N: u32>(self) -> Self {
        self.map2(self, |a, _| ((a as i64) >> N) as u64)
    }
    #[inline(always)]
    fn shr_by(self, n: u32) -> Self {
        self.map2(self, |a, _| a >> n)
    }
    #[inline(always)]
    fn shl_by(self, n: u32) -> Self {
        self.map2(self, |a, _| a << n)
    }
    #[inline(always)]
    fn shl<const N: u32>(self) -> Self {
        self.map2(self, |a, _| a << N)
    }
    #[inline(always)]
    fn madd52lo(self, b: Self, c: Self) -> Self {
        self.map3(b, c, |a, b, c| {
            a.wrapping_add((product52(b, c) as u64) & MASK52)
        })
    }
    #[inline(always)]
    fn madd52hi(self, b: Self, c: Self) -> Self {
        self.map3(b, c, |a, b, c| {
            a.wrapping_add((product52(b, c) >> 52) as u64)
        })
    }
    #[inline(always)]
    fn eq_mask(self, o: Self) -> Self {
        // x == 0 ⇔ (x | −x) has its top bit clear; no comparison instruction on the value.
        self.map2(o, |a, b| {
            let x = a ^ b;
            let nz = (x | x.wrapping_neg()) >> 63;
            core::hint::black_box(nz.wrapping_sub(1))
        })
    }
}

/// Whether this CPU (and OS) runs AVX-512F and AVX-512 IFMA instructions.
pub fn ifma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512ifma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_madd52_matches_the_definition() {
        let b = Portable([MASK52, 1, 0, 1 << 51, 12345, MASK52, u64::MAX, 3]);
        let c = Portable([MASK52, MASK52, 7, 2, 67890, 1, u64::MAX, 5]);
        let a = Portable::splat(10);
        let lo = a.madd52lo(b, c).to_array();
        let hi = a.madd52hi(b, c).to_array();
        for i in 0..8 {
            let p = ((b.0[i] & MASK52) as u128) * ((c.0[i] & MASK52) as u128);
            assert_eq!(lo[i], 10 + (p as u64 & MASK52));
            assert_eq!(hi[i], 10 + (p >> 52) as u64);
        }
    }

    #[test]
    fn masks_select_lane_by_lane() {
        let a = Portable([1, 2, 3, 4, 5, 6, 7, 8]);
        let m = a.eq_mask(Portable::splat(3));
        assert_eq!(m.0, [0, 0, u64::MAX, 0, 0, 0, 0, 0]);
        let s = select(m, Portable::splat(9), a);
        assert_eq!(s.0, [1, 2, 9, 4, 5, 6, 7, 8]);
    }
}
