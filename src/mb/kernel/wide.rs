//! Products for limb counts whose accumulators do not fit in the vector registers (30 and 40
//! limbs, the halves of RSA-3072 and RSA-4096).
//!
//! The fused rows of `Modulus::fused_mul` keep N accumulators live; beyond about 24 the
//! compiler spills them in every row, and a written-out squaring spills more. Here a product
//! is two sweeps over a buffer of 2N columns: the product (a·b in blocks of `R` rows; a² from
//! `karatsuba_square`, three squarings of N/2 limbs), then the reduction in blocks of `R`
//! rows (q·m, the q of a block's rows found in its first `R` columns). A block holds its `R`
//! multipliers (b_i or q_i) in registers and passes over the columns once, each column
//! loaded, given its `2R` terms in two chains, and stored: the registers never hold
//! more than a block.
//!
//! The result is the almost-Montgomery product of `Modulus::mul`, bit for bit: q = −t·m⁻¹ mod
//! R and (t + q·m)/R do not depend on the order in which the terms are added.
//!
//! Bounds: a product's column takes at most 2N terms below 2^52 (a square's columns are
//! signed, below 2^60 in magnitude), the reduction 2N more and a carry below 2^12: under
//! 2^61 in magnitude for N ≤ 40.
//!
//! Constant time: every loop bound and index depends on N, R and the block (public).

// `unroll!` writes a body for every index literal and drops those outside the range only
// after monomorphisation (its bounds involve R and N), so the compiler sees `0 - 1` in
// bodies that never run.
#![allow(arithmetic_overflow)]

use super::{karatsuba_square, normalize_into, Modulus};
use crate::mb::lanes::Lanes;

/// `$col += Σ_k lo(x_k·y) + hi(x_k·z)` over the rows k of a block (`$k` in 0..R) for which
/// the low condition gives y and the high one z, in two chains (low halves, high halves)
/// joined by one addition: a block's columns do not wait on each other, so the processor
/// overlaps their chains, and on Intel cores every addition takes a product's port.
/// Conditions and indices are constants where the rows are written out (R and 2R are at most
/// `FUSED_MAX`, the reach of `unroll_short!`).
macro_rules! add_terms {
    ($V:ty, $R:expr, $col:expr, $x:expr, $k:ident,
     lo if $lc:expr => $lv:expr, hi if $hc:expr => $hv:expr) => {{
        let mut l = $col;
        let mut h = <$V as Lanes>::zero();
        unroll_short!($V: $k in 0..$R, {
            if $lc {
                l = l.madd52lo($x[$k], $lv);
            }
            if $hc {
                h = h.madd52hi($x[$k], $hv);
            }
        });
        $col = l.add(h);
    }};
}

/// [`add_terms!`] in four chains (low and high halves, even and odd rows), so that a column
/// waits on R/2 products, not R: for the columns that give a block's q, each of which waits
/// for the one before.
macro_rules! add_terms_short {
    ($V:ty, $R:expr, $col:expr, $x:expr, $k:ident,
     lo if $lc:expr => $lv:expr, hi if $hc:expr => $hv:expr) => {{
        let mut l = [$col, <$V as Lanes>::zero()];
        let mut h = [<$V as Lanes>::zero(); 2];
        unroll_short!($V: $k in 0..$R, {
            if $lc {
                l[$k % 2] = l[$k % 2].madd52lo($x[$k], $lv);
            }
            if $hc {
                h[$k % 2] = h[$k % 2].madd52hi($x[$k], $hv);
            }
        });
        $col = l[0].add(l[1]).add(h[0].add(h[1]));
    }};
}

/// Rows per block: divides 30 and 40; its multipliers, the next block's q, the limbs of m in
/// use and a column's chains fit in the 32 vector registers with room to spare (with two
/// chains a column, more passes of fewer rows beat fewer of more on IFMA hardware).
pub(super) const ROWS: usize = 5;

/// Columns of the largest product (2 × 40 limbs).
pub(super) const COLS: usize = 80;

/// a·b/R mod m, below 2m (conditions as `Modulus::mul`), in blocks of `R` rows; `N % R == 0`.
#[inline(always)]
pub(super) fn mul<V: Lanes, const N: usize, const R: usize>(
    md: &Modulus<V, N>,
    a: &[V; N],
    b: &[V; N],
    r: &mut [V; N],
) {
    let mut t = [V::zero(); COLS];
    mul_columns::<V, N, R>(a, b, &mut t);
    reduce::<V, N, R>(
        md,
        &mut t,
        r,
        #[inline(always)]
        |_| {},
    );
}

/// t += a·b in columns (52-bit positions), in blocks of `R` rows.
#[inline(always)]
fn mul_columns<V: Lanes, const N: usize, const R: usize>(
    a: &[V; N],
    b: &[V; N],
    t: &mut [V; COLS],
) {
    for blk in 0..N / R {
        let i0 = blk * R;
        let x: [V; R] = core::array::from_fn(
            #[inline(always)]
            |k| b[i0 + k],
        );
        // Column i0 + c takes lo(x_k·a_(c−k)) and hi(x_k·a_(c−k−1)) where those limbs exist.
        unroll_short!(V: c in 0..R, {
            add_terms!(V, R, t[i0 + c], x, k,
                lo if k <= c => a[c - k], hi if k < c => a[c - k - 1]);
        });
        add_full_columns::<V, N, R>(t, i0, R, &x, a);
        add_top_columns::<V, N, R>(t, i0, &x, a);
    }
}

/// a²/R mod m, below 2m, for a below 2m (as `Modulus::sqr`): the columns from
/// [`karatsuba_square`], reduced in blocks of `R` rows; `after_row(i)` runs for each row i
/// of a block once the block is done (other work for the processor to overlap).
#[inline(always)]
pub(super) fn sqr<V: Lanes, const N: usize, const R: usize>(
    md: &Modulus<V, N>,
    a: &[V; N],
    r: &mut [V; N],
    after_row: impl FnMut(usize),
) {
    // `karatsuba_square` assigns every column before adding to it, so the optimiser drops
    // this zeroing (a 5 KiB memset per squaring otherwise).
    let mut t = [V::zero(); COLS];
    karatsuba_square(a, &mut t);
    reduce::<V, N, R>(md, &mut t, r, after_row);
}

/// Columns i0 + c for c in `from..N` of a block of rows i0.. multiplying `y`, where every
/// row of the block has both limbs of `y` (c ≥ R).
#[inline(always)]
fn add_full_columns<V: Lanes, const N: usize, const R: usize>(
    t: &mut [V; COLS],
    i0: usize,
    from: usize,
    x: &[V; R],
    y: &[V; N],
) {
    unroll!(V: c in from..N, {
        add_terms!(V, R, t[i0 + c], x, k, lo if true => y[c - k], hi if true => y[c - k - 1]);
    });
}

/// The last R columns of a block of rows i0.. multiplying `y`: columns i0 + N + c, where row
/// k still has a limb of y when k > c (low half) or k ≥ c (high half).
#[inline(always)]
fn add_top_columns<V: Lanes, const N: usize, const R: usize>(
    t: &mut [V; COLS],
    i0: usize,
    x: &[V; R],
    y: &[V; N],
) {
    unroll_short!(V: c in 0..R, {
        add_terms!(V, R, t[i0 + N + c], x, k,
            lo if k > c => y[N + c - k], hi if k >= c => y[N + c - k - 1]);
    });
}

/// r = (t + q·m)/R with q = −t·m⁻¹ mod R, from the 2N columns of a product `t` (signed
/// columns allowed: carries shift arithmetically).
///
/// A block of rows i0..i0+R: in columns i0 + c (c < R) each q_c follows from its column once
/// the earlier rows of the block have added theirs (`Modulus::q_and_carry`), a chain of R
/// steps; the column's carry goes up to the next. Then the block's rows add q_k·m to the
/// columns above. The next block's chain starts as soon as its R columns have this block's
/// terms, so the processor runs it alongside the rest of this block's columns. After each
/// block, `after_row(i)` for its rows i.
#[inline(always)]
fn reduce<V: Lanes, const N: usize, const R: usize>(
    md: &Modulus<V, N>,
    t: &mut [V; COLS],
    r: &mut [V; N],
    mut after_row: impl FnMut(usize),
) {
    let m = &md.m;
    let mut carry = V::zero();
    let mut q = block_q::<V, N, R>(md, t, 0, &mut carry);
    for blk in 0..N / R {
        let i0 = blk * R;
        unroll_short!(V: c in R..(2 * R), {
            add_terms!(V, R, t[i0 + c], q, k, lo if true => m[c - k], hi if true => m[c - k - 1]);
        });
        let next = if blk + 1 < N / R {
            block_q::<V, N, R>(md, t, i0 + R, &mut carry)
        } else {
            q
        };
        add_full_columns::<V, N, R>(t, i0, 2 * R, &q, m);
        add_top_columns::<V, N, R>(t, i0, &q, m);
        for i in i0..i0 + R {
            after_row(i);
        }
        q = next;
    }
    normalize_into(&t[N..2 * N], carry, r);
}

/// The q of rows i0..i0+R from columns i0..i0+R (which have every earlier row's terms), each
/// column adding the terms of the block's rows before it; `carry` in and out.
#[inline(always)]
fn block_q<V: Lanes, const N: usize, const R: usize>(
    md: &Modulus<V, N>,
    t: &[V; COLS],
    i0: usize,
    carry: &mut V,
) -> [V; R] {
    let m = &md.m;
    let mut q = [V::zero(); R];
    unroll_short!(V: c in 0..R, {
        let mut col = t[i0 + c].add(*carry);
        add_terms_short!(V, R, col, q, k, lo if k < c => m[c - k], hi if k < c => m[c - k - 1]);
        let (qc, up) = md.q_and_carry(col);
        q[c] = qc;
        *carry = up;
    });
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mb::lanes::Portable;

    fn rnd(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// Eight lanes of N random limbs (the top one `top_bits` wide), or all limbs at 2^52 − 1.
    fn number<const N: usize>(seed: &mut u64, top_bits: u32, all_ones: bool) -> [Portable; N] {
        let mut x = [Portable([0; 8]); N];
        for (j, l) in x.iter_mut().enumerate() {
            let bits = if j + 1 == N { top_bits } else { 52 };
            let mask = (1u64 << bits) - 1;
            *l = Portable(core::array::from_fn(|_| {
                if all_ones {
                    mask
                } else {
                    rnd(seed) & mask
                }
            }));
        }
        x
    }

    /// The blocked products against the fused ones (which tests/mb_kernel.rs holds to
    /// num-bigint), for operands below 2m: random, and with every limb full.
    fn check<const N: usize, const R: usize>(seed: u64) {
        let mut seed = seed;
        let mut m = number::<N>(&mut seed, 48, false);
        m[0].0.iter_mut().for_each(|x| *x |= 1);
        let k0 = Portable(core::array::from_fn(|l| super::super::neg_inv52(m[0].0[l])));
        let md = Modulus::<Portable, N> { m, k0 };
        let operands = [
            number::<N>(&mut seed, 48, false),
            number::<N>(&mut seed, 49, false),
            number::<N>(&mut seed, 49, true),
        ];
        let (mut want, mut got) = ([Portable([0; 8]); N], [Portable([0; 8]); N]);
        for a in &operands {
            for b in &operands {
                md.fused_mul(a, b, &mut want);
                mul::<Portable, N, R>(&md, a, b, &mut got);
                assert_eq!(want, got, "mul, N = {N}, R = {R}");
            }
            md.fused_mul(a, a, &mut want);
            sqr::<Portable, N, R>(&md, a, &mut got, |_| {});
            assert_eq!(want, got, "sqr, N = {N}, R = {R}");
        }
    }

    #[test]
    fn blocked_products_equal_the_fused_ones() {
        for seed in [0x1234_5678_9abc_def1, 0xfeed_f00d_0bad_cafe, 7] {
            check::<30, ROWS>(seed);
            check::<40, ROWS>(seed);
            check::<30, 6>(seed);
            check::<30, 10>(seed);
            check::<40, 8>(seed);
            check::<40, 10>(seed);
        }
    }
}
