//! Constant-time helpers.
//!
//! A *mask* is a `usize` that is either all ones (true) or all zeros (false). The helpers
//! compute masks from comparisons with arithmetic only — no branches or table lookups that
//! depend on the values — in the style of OpenSSL's `constant_time_*` functions. Values are
//! passed through [`core::hint::black_box`] where the optimiser could otherwise turn a
//! mask-select back into a branch; this is best effort, as with any high-level language.

use core::hint::black_box;

/// All ones.
pub const TRUE: usize = usize::MAX;
/// All zeros.
pub const FALSE: usize = 0;

/// Optimisation barrier for a mask or value.
#[inline(always)]
pub fn barrier(x: usize) -> usize {
    black_box(x)
}

/// Spreads the most significant bit of `a` over the whole word.
#[inline]
pub fn msb(a: usize) -> usize {
    0usize.wrapping_sub(a >> (usize::BITS - 1))
}

/// Mask of `a < b` (unsigned).
#[inline]
pub fn lt(a: usize, b: usize) -> usize {
    msb(a ^ ((a ^ b) | (a.wrapping_sub(b) ^ b)))
}

/// Mask of `a >= b` (unsigned).
#[inline]
pub fn ge(a: usize, b: usize) -> usize {
    !lt(a, b)
}

/// Mask of `a == 0`.
#[inline]
pub fn is_zero(a: usize) -> usize {
    msb(!a & a.wrapping_sub(1))
}

/// Mask of `a == b`.
#[inline]
pub fn eq(a: usize, b: usize) -> usize {
    is_zero(a ^ b)
}

/// Mask of `a == 0` for a byte.
#[inline]
pub fn is_zero_u8(a: u8) -> usize {
    is_zero(usize::from(a))
}

/// Mask of `a == b` for bytes.
#[inline]
pub fn eq_u8(a: u8, b: u8) -> usize {
    eq(usize::from(a), usize::from(b))
}

/// Narrows a mask to a byte mask (0x00 or 0xFF).
#[inline]
pub fn mask_u8(mask: usize) -> u8 {
    // Truncation keeps the low byte, which is all ones or all zeros.
    (barrier(mask) & 0xFF) as u8
}

/// `mask ? a : b`.
#[inline]
pub fn select(mask: usize, a: usize, b: usize) -> usize {
    let m = barrier(mask);
    (m & a) | (!m & b)
}

/// `mask ? a : b` for bytes.
#[inline]
pub fn select_u8(mask: usize, a: u8, b: u8) -> u8 {
    let m = mask_u8(mask);
    (m & a) | (!m & b)
}

/// `if mask { dst.copy_from_slice(src) }` without a branch on `mask`.
///
/// # Panics
/// If the lengths differ (lengths are public).
pub fn copy_if(mask: usize, dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_if: length mismatch");
    let m = mask_u8(mask);
    for (d, s) in dst.iter_mut().zip(src.iter()) {
        *d = (m & *s) | (!m & *d);
    }
}

/// Mask of `a == b` over whole slices, reading every byte. Slices of different lengths
/// compare unequal (lengths are public).
pub fn bytes_eq(a: &[u8], b: &[u8]) -> usize {
    if a.len() != b.len() {
        return FALSE;
    }
    let mut acc = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        acc |= *x ^ *y;
    }
    is_zero_u8(black_box(acc))
}

/// Mask of "every byte of `a` is zero".
pub fn all_zero(a: &[u8]) -> usize {
    let mut acc = 0u8;
    for x in a {
        acc |= *x;
    }
    is_zero_u8(black_box(acc))
}

/// Converts a mask to `bool`. Only for values that are allowed to become public
/// (for example the final success flag of a decode that reports errors anyway).
/// The secret-taint check (`scripts/ctgrind.sh`) sees the mask become public here.
#[inline]
pub fn declassify(mask: usize) -> bool {
    crate::ffi::memcheck::public_usize(barrier(mask)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &[usize] = &[
        0,
        1,
        2,
        3,
        7,
        8,
        11,
        127,
        128,
        255,
        256,
        65535,
        1 << 31,
        (1 << 31) + 1,
        usize::MAX / 2,
        usize::MAX / 2 + 1,
        usize::MAX - 1,
        usize::MAX,
    ];

    fn m(b: bool) -> usize {
        if b {
            TRUE
        } else {
            FALSE
        }
    }

    #[test]
    fn comparisons_match_native() {
        for &a in SAMPLES {
            assert_eq!(is_zero(a), m(a == 0));
            assert_eq!(msb(a), m(a >> (usize::BITS - 1) == 1));
            for &b in SAMPLES {
                assert_eq!(lt(a, b), m(a < b), "lt {a} {b}");
                assert_eq!(ge(a, b), m(a >= b), "ge {a} {b}");
                assert_eq!(eq(a, b), m(a == b), "eq {a} {b}");
                assert_eq!(select(TRUE, a, b), a);
                assert_eq!(select(FALSE, a, b), b);
            }
        }
    }

    #[test]
    fn byte_helpers() {
        for a in 0..=255u8 {
            assert_eq!(is_zero_u8(a), m(a == 0));
            for b in [0u8, 1, 2, 0x7f, 0x80, 0xff, a] {
                assert_eq!(eq_u8(a, b), m(a == b));
                assert_eq!(select_u8(TRUE, a, b), a);
                assert_eq!(select_u8(FALSE, a, b), b);
            }
        }
        assert_eq!(mask_u8(TRUE), 0xff);
        assert_eq!(mask_u8(FALSE), 0);
    }

    #[test]
    fn slices() {
        let mut d = [1u8, 2, 3];
        copy_if(FALSE, &mut d, &[9, 9, 9]);
        assert_eq!(d, [1, 2, 3]);
        copy_if(TRUE, &mut d, &[9, 8, 7]);
        assert_eq!(d, [9, 8, 7]);
        assert_eq!(bytes_eq(b"abc", b"abc"), TRUE);
        assert_eq!(bytes_eq(b"abc", b"abd"), FALSE);
        assert_eq!(bytes_eq(b"abc", b"ab"), FALSE);
        assert_eq!(bytes_eq(b"", b""), TRUE);
        assert_eq!(all_zero(&[0, 0, 0]), TRUE);
        assert_eq!(all_zero(&[0, 1, 0]), FALSE);
        assert_eq!(all_zero(&[]), TRUE);
        assert!(declassify(TRUE));
        assert!(!declassify(FALSE));
    }

    #[test]
    #[should_panic]
    fn copy_if_length_mismatch_panics() {
        copy_if(TRUE, &mut [0u8; 2], &[0u8; 3]);
    }
}
