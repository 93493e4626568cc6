//! The 8-lane modular exponentiation, generic over [`Lanes`] and the limb count `N`.
//!
//! Numbers are `N` limbs of 52 bits, limb-major with the eight lanes interleaved (limb j of
//! every lane in one vector), so one `vpmadd52luq` does one limb product for eight independent
//! moduli. `N` is a compile-time constant (10, 20, 30 or 40), so the limb loops unroll and the
//! accumulators of a multiplication are plain values the compiler keeps in vector registers.
//! The methods follow:
//! - S. Gueron, V. Krasnov, "Accelerating big integer arithmetic using Intel IFMA extensions"
//!   (ARITH 2016): radix 2^52, products accumulated in 64-bit limbs without carry propagation
//!   (each limb has 12 bits of headroom), one normalisation per multiplication;
//! - almost-Montgomery multiplication (AMM), operand scanning with the reduction fused into
//!   each row: with R = 2^(52N) ≥ 4m, inputs below 2m give an output below 2m, so the
//!   exponentiation loop never subtracts m; one constant-time subtraction at the end (after
//!   leaving Montgomery form) fully reduces;
//! - up to 20 limbs, "almost half" products for the window's multiplication (with each table
//!   entry also kept times 2^(−26N) mod m, a·b/R takes N/2 rows of three products each), and
//!   the table scan interleaved with the squarings' rows ([`exp_half_n`]).
//!
//! Constant time: loop bounds and indices depend only on `N`, `exp_bits`, the window width
//! and, in [`r_squared_n`], the narrowest modulus's width (public, declassified). The
//! exponent's window values only become lane masks for a full scan of the table (no
//! secret-dependent address); carries are shifts and masks (no branch).
//!
//! Bounds (why no limb overflows): in a multiplication each row adds four terms below 2^52 to
//! every accumulator limb, and a limb lives through at most N rows: below 4N·2^52 plus carries
//! below 2^12, under 2^60 for N ≤ 40. A squaring adds at most as many terms per row as a
//! multiplication: the same bound. A half product's row adds six terms, over N/2 rows: the
//! same count.

#[cfg(target_arch = "x86_64")]
use super::cpu::{IfmaToken, Squaring};
use super::lanes::{select, Lanes, MASK52};

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // AVX-512 intrinsics, behind the entry points' IfmaToken
mod ifma;

/// `for $i in $from..$n { $body }`, written out as straight-line code ($n at most 40) when
/// `$V::UNROLL`: every index a constant, so the accumulators are values the compiler keeps
/// in registers (the optimiser alone stops unrolling short of 30 and 40 limbs).
macro_rules! unroll {
    ($V:ty: $i:ident in $from:tt..$n:expr, $body:block) => {
        if <$V as Lanes>::UNROLL {
            unroll!(@ $i, $from, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
                21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39);
        } else {
            for $i in $from..$n $body
        }
    };
    (@ $i:ident, $from:tt, $n:expr, $body:block, $($k:literal)*) => {{
        $(
            if $from <= $k && $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    }};
}

/// [`unroll!`] for at most [`FUSED_MAX`] iterations (the squaring's rows and columns).
macro_rules! unroll_short {
    ($V:ty: $i:ident in $from:tt..$n:expr, $body:block) => {
        if <$V as Lanes>::UNROLL {
            unroll!(@ $i, $from, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19);
        } else {
            for $i in $from..$n $body
        }
    };
}

/// Largest limb count whose products keep their N accumulators in registers; beyond it they
/// take [`wide`]'s blocked sweeps.
pub(crate) const FUSED_MAX: usize = 20;

/// Limbs per block of the fused squaring's reduction rows on the IFMA lanes
/// ([`Modulus::sqr_then`]): row i takes block b at step i + b. Measured on IFMA hardware
/// against blocks of 3 and 4 and the rows one after another.
const WAVE_BLOCK: usize = 5;
const _: () = assert!(
    WAVE_BLOCK <= 5
        && (FUSED_MAX - 1).div_ceil(WAVE_BLOCK) <= 4
        && FUSED_MAX - 1 + (FUSED_MAX - 1).div_ceil(WAVE_BLOCK) - 1 <= 22,
    "sqr_then's macros list 5 limbs per block, 4 blocks and 23 steps"
);

/// Bits between a modulus and R = 2^(52N) at N ≤ [`FUSED_MAX`] (R ≥ 16m): the bound that
/// keeps [`exp_half_n`]'s numbers below 2^(52N − 1) and its squarings' results below 2m.
/// `mb::Size` holds every size to it at compile time.
pub(crate) const HALF_SLACK_BITS: usize = 4;

mod wide;

mod exp;
use exp::{exp_half_n, exp_n, exp_public_n};

/// Overwrites `v` with zeros in a way the optimiser keeps (secrets must not outlive a call).
#[inline(always)]
#[allow(unsafe_code)] // a volatile store
fn wipe<V: Lanes>(v: &mut [V]) {
    for x in v.iter_mut() {
        // SAFETY: x comes from iter_mut, so it is a valid, aligned and exclusive &mut V; the
        // volatile write only keeps the store from being elided.
        unsafe { core::ptr::write_volatile(x, V::zero()) };
    }
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// Carry-propagates `t` so every limb but the last is below 2^52. Limbs may be negative (two's
/// complement, as a square's columns are): the carries shift arithmetically. The number must
/// be non-negative; then so is the last limb.
#[inline(always)]
fn normalize<V: Lanes>(t: &mut [V]) {
    let mask = V::splat(MASK52);
    for j in 0..t.len() - 1 {
        let c = t[j].sar::<52>();
        t[j] = t[j].and(mask);
        t[j + 1] = t[j + 1].add(c);
    }
}

/// [`normalize`] of `t` with `carry` added to its first limb, written to `out` (as long as
/// `t`) instead of in place, for a caller that would otherwise copy the result out.
#[inline(always)]
fn normalize_into<V: Lanes>(t: &[V], mut carry: V, out: &mut [V]) {
    let mask = V::splat(MASK52);
    let last = out.len() - 1;
    for j in 0..=last {
        let x = t[j].add(carry);
        carry = x.sar::<52>();
        out[j] = if j < last { x.and(mask) } else { x };
    }
}

/// Writes the 2N columns of a² (N even, at most 2·[`FUSED_MAX`]) into `t[..2N]` (the caller's
/// own array, as a returned one would be copied once more per squaring; every column is
/// assigned before it is added to, so the caller need not zero it) by Karatsuba's identity:
/// with
/// a = lo + hi·B^h (h = N/2) and s = lo + hi, a² = lo² + (s² − lo² − hi²)·B^h + hi²·B^N,
/// three squarings of h limbs, 3h(h+1) products instead of N(N+1). The middle term subtracts,
/// so columns are signed: a half-square's column is below (4h + 1)·2^52, so |t_k| < 3·that,
/// under 2^59 at N = 20 and 2^60 at N = 40 (for a below 2^(52N)).
#[inline(always)]
fn karatsuba_square<V: Lanes, const N: usize>(a: &[V; N], t: &mut [V]) {
    const {
        assert!(
            N % 2 == 0 && N / 2 <= FUSED_MAX && 2 * N <= wide::COLS,
            "halves of at most FUSED_MAX limbs"
        )
    };
    let h = N / 2;
    let mask = V::splat(MASK52);
    // s = lo + hi as h limbs of 52 bits and a carry c of 0 or 1.
    let mut s = [V::zero(); FUSED_MAX];
    let mut c = V::zero();
    unroll_short!(V: j in 0..h, {
        let x = a[j].add(a[j + h]).add(c);
        s[j] = x.and(mask);
        c = x.shr::<52>();
    });
    let lo = square_columns::<V>(&a[..h]);
    let hi = square_columns::<V>(&a[h..]);
    let mid = square_columns::<V>(&s[..h]);
    unroll!(V: k in 0..N, {
        t[k] = lo[k];
        t[k + N] = hi[k];
    });
    unroll!(V: k in 0..N, {
        t[k + h] = t[k + h].add(mid[k].sub(lo[k]).sub(hi[k]));
    });
    // s² − (s mod B^h)² = 2c·(s mod B^h)·B^h + c·B^(2h), at offset h.
    let c_mask = V::zero().sub(c);
    unroll_short!(V: j in 0..h, {
        let d = s[j].and(c_mask);
        t[N + j] = t[N + j].add(d).add(d);
    });
    t[N + h] = t[N + h].add(c);
}

/// The modulus of each lane, ready for almost-Montgomery arithmetic.
pub(crate) struct Modulus<V: Lanes, const N: usize> {
    m: [V; N],
    /// −m⁻¹ mod 2^52, per lane.
    k0: V,
}

impl<V: Lanes, const N: usize> Modulus<V, N> {
    /// q making the row's low limb `low` vanish, and the carry out of that limb. The limb
    /// low + lo52(m_0·q) is a multiple of 2^52 by the choice of q, so its carry is
    /// ⌈low / 2^52⌉ (|low| < 2^61, negative in a square's signed columns: an arithmetic
    /// shift): an add and a shift instead of a third multiply-add.
    #[inline(always)]
    fn q_and_carry(&self, low: V) -> (V, V) {
        let q = V::zero().madd52lo(low, self.k0);
        (q, low.add(V::splat(MASK52)).sar::<52>())
    }

    /// r = a·b/R mod m, below 2m, for a, b below 2m (or a < R and b < m): [`Self::fused_mul`]
    /// up to [`FUSED_MAX`] limbs, else [`wide::mul`].
    #[inline(always)]
    fn mul(&self, a: &[V; N], b: &[V; N], r: &mut [V; N]) {
        if N > FUSED_MAX {
            return wide::mul::<V, N, { wide::ROWS }>(self, a, b, r);
        }
        self.fused_mul(a, b, r)
    }

    /// [`Self::mul`] on N accumulators. One row per limb
    /// b_i on the accumulators (limbs i..i+N of the running sum), in a single pass: q makes
    /// limb 0 vanish, then each accumulator takes the low halves of its own column (a_j·b_i,
    /// m_j·q) and the high halves of the column below, moving down one limb as it goes (the
    /// division by 2^52). The terms of q come last in each limb: they wait for q. Each limb of
    /// a and m is loaded once per row (when written out, the compiler keeps the one below), so
    /// loads stay at half the products: on Zen 4 a separate pass for the high halves was
    /// load-bound (ARCHITECTURE.md, multi-buffer kernel).
    #[inline(always)]
    fn fused_mul(&self, a: &[V; N], b: &[V; N], r: &mut [V; N]) {
        let m = &self.m;
        let mut acc = [V::zero(); N];
        for &bi in b.iter() {
            let (q, carry) = self.q_and_carry(acc[0].madd52lo(a[0], bi));
            unroll!(V: j in 1..N, {
                acc[j - 1] = acc[j]
                    .madd52lo(a[j], bi)
                    .madd52hi(a[j - 1], bi)
                    .madd52lo(m[j], q)
                    .madd52hi(m[j - 1], q);
            });
            acc[N - 1] = V::zero().madd52hi(a[N - 1], bi).madd52hi(m[N - 1], q);
            acc[0] = acc[0].add(carry);
        }
        normalize(&mut acc);
        *r = acc;
    }

    /// r = a²/R mod m, below 2m, for a below 2m, normalised; the result is `mul(a, a)`'s, bit
    /// for bit. Up to [`FUSED_MAX`] limbs the product's columns come from Karatsuba's identity
    /// ([`karatsuba_square`]) when `KARATSUBA`, else from all the schoolbook products
    /// ([`square_columns`]), and the reduction runs row by row ([`Self::sqr_then`]); larger N
    /// take [`wide::sqr`] (Karatsuba's identity either way).
    #[inline(always)]
    fn sqr<const KARATSUBA: bool>(&self, a: &[V; N], r: &mut [V; N]) {
        self.sqr_then::<KARATSUBA>(
            a,
            r,
            #[inline(always)]
            |_| {},
        )
    }

    /// [`Self::sqr`], calling `after_row(i)` after each reduction row i, so that other work is
    /// interleaved with the rows (under [`wide::sqr`], after each block of rows). The columns
    /// come from [`karatsuba_square`] or [`square_columns`], then the N reduction rows of
    /// [`Self::mul`]; q depends only on the value, hence the bit-exact result.
    ///
    /// Pass `after_row` as an `#[inline(always)]` closure: a closure is a function of its own,
    /// without the IFMA entry's target features, and if the inliner leaves it out of line,
    /// every intrinsic in it becomes a call and the exponentiation runs many times slower,
    /// with correct results. `scripts/ifma-inlined.sh` checks the built kernel for such calls.
    #[inline(always)]
    fn sqr_then<const KARATSUBA: bool>(
        &self,
        a: &[V; N],
        r: &mut [V; N],
        mut after_row: impl FnMut(usize),
    ) {
        if N > FUSED_MAX {
            wide::sqr::<V, N, { wide::ROWS }>(self, a, r, after_row);
            return;
        }
        let m = &self.m;
        let mut t = [V::zero(); 2 * FUSED_MAX];
        if KARATSUBA {
            karatsuba_square(a, &mut t);
        } else {
            t = square_columns::<V>(a);
        }
        let mut acc = [V::zero(); N];
        unroll_short!(V: j in 0..N, {
            acc[j] = t[j];
        });
        if !V::UNROLL {
            // The portable lanes (the reference, not a fast path) take the rows one after
            // another as loops: the wavefront's straight-line code only lengthens their builds.
            for i in 0..N {
                let (q, carry) = self.q_and_carry(acc[0]);
                for j in 1..N {
                    acc[j - 1] = acc[j].madd52lo(m[j], q).madd52hi(m[j - 1], q);
                }
                acc[N - 1] = t[i + N].madd52hi(m[N - 1], q);
                acc[0] = acc[0].add(carry);
                after_row(i);
            }
            normalize(&mut acc);
            *r = acc;
            return;
        }
        // The reduction rows as a wavefront: row i takes its limbs j = 1..N in blocks of
        // WAVE_BLOCK, block b at step i + b, each step running its blocks from the oldest
        // row to the newest. Row i's block b reads only what row i − 1 left in its block
        // b + 1 (one step earlier, or earlier in this step), so rows overlap and each q comes
        // as soon as its row's first block is done, not behind the row before's last
        // products. Every limb takes the same operations in the same order as row by row.
        let last = (N - 1).div_ceil(WAVE_BLOCK) - 1;
        let mut qs = [V::zero(); FUSED_MAX];
        macro_rules! block {
            ($step:literal, $b:literal) => {{
                let i = ($step as usize).wrapping_sub($b);
                #[allow(unused_comparisons)] // block 0 is in every row
                let live = $b <= last && i < N;
                if live {
                    if $b == 0 {
                        let (q, carry) = self.q_and_carry(acc[0]);
                        qs[i] = q;
                        acc[0] = acc[1].madd52lo(m[1], q).madd52hi(m[0], q).add(carry);
                    }
                    let q = qs[i];
                    macro_rules! limb {
                        ($k:literal) => {{
                            let j = WAVE_BLOCK * $b + 1 + $k;
                            if $k < WAVE_BLOCK && j > 1 && j < N {
                                acc[j - 1] = acc[j].madd52lo(m[j], q).madd52hi(m[j - 1], q);
                            }
                        }};
                    }
                    limb!(0);
                    limb!(1);
                    limb!(2);
                    limb!(3);
                    limb!(4);
                    if $b == last {
                        acc[N - 1] = t[i + N].madd52hi(m[N - 1], q);
                        after_row(i);
                    }
                }
            }};
        }
        macro_rules! steps {
            ($($step:literal)*) => {$(
                block!($step, 3);
                block!($step, 2);
                block!($step, 1);
                block!($step, 0);
            )*};
        }
        steps!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22);
        normalize(&mut acc);
        *r = acc;
    }

    /// t·H⁻¹ mod m with H = 2^(26N) (N even): the first N/2 rows of a Montgomery reduction.
    /// Below t/H + m.
    #[inline(always)]
    fn half_reduce(&self, t: &[V; N], r: &mut [V; N]) {
        let m = &self.m;
        let mut acc = *t;
        for _ in 0..N / 2 {
            let (q, carry) = self.q_and_carry(acc[0]);
            unroll!(V: j in 1..N, {
                acc[j - 1] = acc[j].madd52lo(m[j], q).madd52hi(m[j - 1], q);
            });
            acc[N - 1] = V::zero().madd52hi(m[N - 1], q);
            acc[0] = acc[0].add(carry);
        }
        normalize(&mut acc);
        *r = acc;
    }

    /// a·t/R mod m from t and tk = t·H⁻¹ mod m ([`Self::half_reduce`]), H = 2^(26N), in N/2
    /// rows: with a = a_lo + a_hi·H, a·t/R = (a_lo·tk + a_hi·t)/H, so row i takes limb i of
    /// a_lo times tk and limb i of a_hi times t: 3N² products instead of 4N². Below
    /// tk + m + a·t/R.
    #[inline(always)]
    fn half_mul(&self, a: &[V; N], t: &[V; N], tk: &[V; N], r: &mut [V; N]) {
        let m = &self.m;
        let mut acc = [V::zero(); N];
        for i in 0..N / 2 {
            let (x, y) = (a[i], a[i + N / 2]);
            let (q, carry) = self.q_and_carry(acc[0].madd52lo(tk[0], x).madd52lo(t[0], y));
            unroll!(V: j in 1..N, {
                acc[j - 1] = acc[j]
                    .madd52lo(tk[j], x)
                    .madd52hi(tk[j - 1], x)
                    .madd52lo(t[j], y)
                    .madd52hi(t[j - 1], y)
                    .madd52lo(m[j], q)
                    .madd52hi(m[j - 1], q);
            });
            acc[N - 1] = V::zero()
                .madd52hi(tk[N - 1], x)
                .madd52hi(t[N - 1], y)
                .madd52hi(m[N - 1], q);
            acc[0] = acc[0].add(carry);
        }
        normalize(&mut acc);
        *r = acc;
    }

    /// x − m when x ≥ m, else x (x normalised, below 2^(52N)), in constant time.
    #[inline(always)]
    fn sub_if_ge(&self, x: &[V; N]) -> [V; N] {
        let mask = V::splat(MASK52);
        let mut borrow = V::zero();
        let mut d = [V::zero(); N];
        for j in 0..N {
            let t = x[j].sub(self.m[j]).sub(borrow);
            borrow = t.shr::<63>();
            d[j] = t.and(mask);
        }
        // borrow = 1: x < m, keep x.
        let keep_x = borrow.eq_mask(V::splat(1));
        for j in 0..N {
            d[j] = select(keep_x, x[j], d[j]);
        }
        d
    }

    /// R² mod m, fully reduced, given `low` with 2^low < m in every lane. With 52N = s·2^k
    /// (s odd): x = 2^(52N + s) mod m = R·2^s by 52N + s − low modular doublings of 2^low,
    /// then k Montgomery squarings, each of which doubles the power of 2 above R (R·2^a →
    /// R·2^(2a)), ending at R·2^(52N) = R². Loop counts depend on N and `low` (public).
    #[inline(always)]
    fn r_squared(&self, low: usize) -> [V; N] {
        let bits = 52 * N;
        let k = bits.trailing_zeros() as usize;
        let s = bits >> k;
        let mut x = [V::zero(); N];
        x[low / 52] = V::splat(1 << (low % 52));
        for _ in low..bits + s {
            for v in x.iter_mut() {
                *v = v.shl::<1>();
            }
            normalize(&mut x);
            x = self.sub_if_ge(&x);
        }
        let mut y = [V::zero(); N];
        for _ in 0..k {
            self.sqr::<true>(&x, &mut y);
            x = y;
        }
        self.sub_if_ge(&x)
    }
}

/// The 2·x.len() columns of x² (x at most [`FUSED_MAX`] limbs): each cross product once,
/// doubled, then the squares.
#[inline(always)]
fn square_columns<V: Lanes>(x: &[V]) -> [V; 2 * FUSED_MAX] {
    let n = x.len();
    let mut c = [V::zero(); 2 * FUSED_MAX];
    unroll_short!(V: i in 0..n, {
        unroll_short!(V: j in 0..n, {
            if j > i {
                c[i + j] = c[i + j].madd52lo(x[i], x[j]);
                c[i + j + 1] = c[i + j + 1].madd52hi(x[i], x[j]);
            }
        });
    });
    unroll!(V: k in 0..2 * n, {
        c[k] = c[k].add(c[k]);
    });
    unroll_short!(V: i in 0..n, {
        c[2 * i] = c[2 * i].madd52lo(x[i], x[i]);
        c[2 * i + 1] = c[2 * i + 1].madd52hi(x[i], x[i]);
    });
    c
}

/// −m⁻¹ mod 2^52 for odd m (Newton's iteration; constant time).
#[inline(always)]
fn neg_inv52(m0: u64) -> u64 {
    let mut inv = m0; // correct to 3 bits for odd m
    for _ in 0..5 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(m0.wrapping_mul(inv)));
    }
    inv.wrapping_neg() & MASK52
}

/// Lane-interleaved numbers as the kernel's entry points take them: `limbs[j][lane]`.
pub(crate) type Interleaved = [[u64; 8]];

/// The lanes' moduli as vectors, with their −m⁻¹ mod 2^52.
#[inline(always)]
fn modulus<V: Lanes, const N: usize>(m: &Interleaved, k0: &[u64; 8]) -> Modulus<V, N> {
    let mut md = Modulus::<V, N> {
        m: [V::zero(); N],
        k0: V::from_array(*k0),
    };
    load(m, &mut md.m);
    md
}

/// Interleaved limbs into vectors, one per limb.
#[inline(always)]
fn load<V: Lanes, const N: usize>(src: &Interleaved, dst: &mut [V; N]) {
    for (v, l) in dst.iter_mut().zip(src) {
        *v = V::from_array(*l);
    }
}

/// out = acc·R⁻¹ mod m, fully reduced: leaves Montgomery form (a result ≤ m) and subtracts m
/// once if needed. `acc` and `scratch` are overwritten.
#[inline(always)]
fn leave_montgomery<V: Lanes, const N: usize>(
    md: &Modulus<V, N>,
    acc: &mut [V; N],
    scratch: &mut [V; N],
    out: &mut Interleaved,
) {
    let mut one = [V::zero(); N];
    one[0] = V::splat(1);
    md.mul(acc, &one, scratch);
    *acc = md.sub_if_ge(scratch);
    store(acc, out);
}

/// Vectors back into interleaved limbs.
#[inline(always)]
fn store<V: Lanes, const N: usize>(src: &[V; N], out: &mut Interleaved) {
    for (o, v) in out.iter_mut().zip(src) {
        *o = v.to_array();
    }
}

/// −m⁻¹ mod 2^52 of each lane's modulus (`m`: 52-bit limbs, odd).
pub(crate) fn neg_inv52_lanes(m: &Interleaved) -> [u64; 8] {
    let mut k0 = [0u64; 8];
    for (lane, k) in k0.iter_mut().enumerate() {
        *k = neg_inv52(m[0][lane]);
    }
    k0
}

/// The position of the lowest top bit among the lanes' moduli (each odd, above 1, so 2^low is
/// below every one), declassified: a modulus's width is public. Computed without a branch or
/// an address that depends on the limbs.
fn lowest_top_bit(m: &Interleaved) -> usize {
    let mut low = usize::MAX >> 1;
    for lane in 0..8 {
        let mut top = 0usize;
        for (j, limb) in m.iter().enumerate() {
            let v = limb[lane];
            let nonzero = ((v | v.wrapping_neg()) >> 63) as usize;
            let at = 52 * j + 63 - (v | 1).leading_zeros() as usize;
            top ^= (top ^ at) & nonzero.wrapping_neg();
        }
        let below = (low.wrapping_sub(top) as isize >> (usize::BITS - 1)) as usize;
        low = top ^ ((low ^ top) & below);
    }
    crate::ffi::memcheck::public_usize(low)
}

/// rr = R² mod m in every lane (R = 2^(52N)), fully reduced; `k0` from [`neg_inv52_lanes`],
/// `low` from [`lowest_top_bit`].
#[inline(always)]
fn r_squared_n<V: Lanes, const N: usize>(
    m: &Interleaved,
    k0: &[u64; 8],
    low: usize,
    rr: &mut Interleaved,
) {
    let mut md = modulus::<V, N>(m, k0);
    let mut x = vec![md.r_squared(low)];
    store(&x[0], rr);
    // R² mod p gives p away; −m⁻¹ its low limb.
    wipe(&mut x[0]);
    wipe(&mut md.m);
    wipe(core::slice::from_mut(&mut md.k0));
}

/// out = a·b·R⁻¹ mod m in every lane, fully reduced, for a and b below m (52-bit limbs).
#[inline(always)]
fn mul_n<V: Lanes, const N: usize>(
    m: &Interleaved,
    k0: &[u64; 8],
    a: &Interleaved,
    b: &Interleaved,
    out: &mut Interleaved,
) {
    let mut md = modulus::<V, N>(m, k0);
    let (mut x, mut y, mut t) = ([V::zero(); N], [V::zero(); N], [V::zero(); N]);
    load(a, &mut x);
    load(b, &mut y);
    md.mul(&x, &y, &mut t);
    x = md.sub_if_ge(&t);
    store(&x, out);
    for v in [&mut x, &mut y, &mut t, &mut md.m] {
        wipe(v);
    }
    wipe(core::slice::from_mut(&mut md.k0));
}

/// Whose exponent a kernel call takes: which exponentiation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exponent {
    /// A private exponent: fixed windows, full table scans ([`exp_half_n`], [`exp_n`]).
    Secret,
    /// A public one (RSA's e, the fault check): binary, skipping the bits no lane has set
    /// ([`exp_public_n`]).
    Public,
}

/// One kernel call's inputs, interleaved (`[j][lane]`): the moduli in 52-bit limbs, their
/// −m⁻¹ mod 2^52 and R² mod m, the bases (52-bit limbs, below m), the exponents (64-bit
/// words) and the exponents' public bit length.
pub(crate) struct ExpCall<'a> {
    pub kind: Exponent,
    pub m: &'a Interleaved,
    pub k0: &'a [u64; 8],
    pub rr: &'a Interleaved,
    pub base: &'a Interleaved,
    pub exp: &'a Interleaved,
    pub exp_bits: usize,
}

/// [`exp_n`] or [`exp_public_n`], as `call.kind` says.
#[inline(always)]
fn exp_kind_n<V: Lanes, const KARATSUBA: bool, const N: usize>(
    call: &ExpCall<'_>,
    out: &mut Interleaved,
) {
    match call.kind {
        Exponent::Secret if N <= FUSED_MAX => exp_half_n::<V, KARATSUBA, N>(call, out),
        Exponent::Secret => exp_n::<V, KARATSUBA, N>(call, out),
        Exponent::Public => exp_public_n::<V, KARATSUBA, N>(call, out),
    }
}

/// Calls `$f::<$V, N>($args)` for the limb count `$n` (one of `Size::limbs52`); with
/// `karatsuba = $k`, `$f::<$V, K, N>` with K the squaring (Karatsuba's when true): one build
/// per squaring up to [`FUSED_MAX`] limbs, one above (Karatsuba's there either way).
macro_rules! by_limbs {
    ($n:expr, $f:ident::<$V:ty>($($arg:expr),*)) => {
        match $n {
            10 => $f::<$V, 10>($($arg),*),
            20 => $f::<$V, 20>($($arg),*),
            30 => $f::<$V, 30>($($arg),*),
            40 => $f::<$V, 40>($($arg),*),
            n => panic!("the kernel takes 10, 20, 30 or 40 limbs, not {n}"),
        }
    };
    ($n:expr, karatsuba = $k:expr, $f:ident::<$V:ty>($($arg:expr),*)) => {
        match ($n, $k) {
            (10, true) => $f::<$V, true, 10>($($arg),*),
            (10, false) => $f::<$V, false, 10>($($arg),*),
            (20, true) => $f::<$V, true, 20>($($arg),*),
            (20, false) => $f::<$V, false, 20>($($arg),*),
            (30, _) => $f::<$V, true, 30>($($arg),*),
            (40, _) => $f::<$V, true, 40>($($arg),*),
            (n, _) => panic!("the kernel takes 10, 20, 30 or 40 limbs, not {n}"),
        }
    };
}

/// [`r_squared_n`] on the portable lanes.
pub(crate) fn r_squared_portable(m: &Interleaved, k0: &[u64; 8], rr: &mut Interleaved) {
    let low = lowest_top_bit(m);
    by_limbs!(
        m.len(),
        r_squared_n::<super::lanes::Portable>(m, k0, low, rr)
    )
}

/// [`mul_n`] on the portable lanes.
pub(crate) fn mul_portable(
    m: &Interleaved,
    k0: &[u64; 8],
    a: &Interleaved,
    b: &Interleaved,
    out: &mut Interleaved,
) {
    by_limbs!(m.len(), mul_n::<super::lanes::Portable>(m, k0, a, b, out))
}

/// [`exp_n`] or [`exp_public_n`] on the portable lanes, squarings by Karatsuba's identity
/// when `KARATSUBA` (the portable engine's), else by columns (the IFMA engine's on Intel,
/// here for the secret-taint check); the results are the same bit for bit either way.
pub(crate) fn exp_portable<const KARATSUBA: bool>(call: &ExpCall<'_>, out: &mut Interleaved) {
    by_limbs!(
        call.m.len(),
        karatsuba = KARATSUBA,
        exp_kind_n::<super::lanes::Portable>(call, out)
    )
}

/// [`r_squared_n`] on AVX-512 IFMA; the token proves the CPU has it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) fn r_squared_ifma(_: IfmaToken, m: &Interleaved, k0: &[u64; 8], rr: &mut Interleaved) {
    // SAFETY: an `IfmaToken` exists only where the CPU runs AVX-512F and IFMA.
    let low = lowest_top_bit(m);
    unsafe { by_limbs!(m.len(), r_squared_ifma_n::<ifma::Ifma>(m, k0, low, rr)) }
}

/// [`mul_n`] on AVX-512 IFMA; the token proves the CPU has it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) fn mul_ifma(
    _: IfmaToken,
    m: &Interleaved,
    k0: &[u64; 8],
    a: &Interleaved,
    b: &Interleaved,
    out: &mut Interleaved,
) {
    // SAFETY: an `IfmaToken` exists only where the CPU runs AVX-512F and IFMA.
    unsafe { by_limbs!(m.len(), mul_ifma_n::<ifma::Ifma>(m, k0, a, b, out)) }
}

/// [`exp_n`] or [`exp_public_n`] on AVX-512 IFMA, with the token's squaring; the token
/// proves the CPU has it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) fn exp_ifma(token: IfmaToken, call: &ExpCall<'_>, out: &mut Interleaved) {
    let karatsuba = token.squaring() == Squaring::Karatsuba;
    // SAFETY: an `IfmaToken` exists only where the CPU runs AVX-512F and IFMA.
    unsafe {
        by_limbs!(
            call.m.len(),
            karatsuba = karatsuba,
            exp_ifma_n::<ifma::Ifma>(call, out)
        )
    }
}

// One function per limb count (not inlined into the dispatch): each has a stack frame sized
// for its own N, which matters on an OpenSSL async job's small stack.

/// # Safety
/// The CPU runs AVX-512F and AVX-512 IFMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn r_squared_ifma_n<V: Lanes, const N: usize>(
    m: &Interleaved,
    k0: &[u64; 8],
    low: usize,
    rr: &mut Interleaved,
) {
    r_squared_n::<V, N>(m, k0, low, rr)
}

/// # Safety
/// The CPU runs AVX-512F and AVX-512 IFMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn mul_ifma_n<V: Lanes, const N: usize>(
    m: &Interleaved,
    k0: &[u64; 8],
    a: &Interleaved,
    b: &Interleaved,
    out: &mut Interleaved,
) {
    mul_n::<V, N>(m, k0, a, b, out)
}

/// # Safety
/// The CPU runs AVX-512F and AVX-512 IFMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn exp_ifma_n<V: Lanes, const KARATSUBA: bool, const N: usize>(
    call: &ExpCall<'_>,
    out: &mut Interleaved,
) {
    exp_kind_n::<V, KARATSUBA, N>(call, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mb::lanes::Portable;
    use num_bigint::BigUint;

    /// Lane `lane` of `x` as a number.
    fn value<const N: usize>(x: &[Portable; N], lane: usize) -> BigUint {
        x.iter()
            .rev()
            .fold(BigUint::ZERO, |v, l| (v << 52) + l.0[lane])
    }

    /// `v` in 52-bit limbs in every lane.
    fn limbs<const N: usize>(v: &BigUint) -> [Portable; N] {
        let mask = BigUint::from(MASK52);
        core::array::from_fn(|j| {
            let l: u64 = ((v >> (52 * j)) & &mask).try_into().unwrap();
            Portable([l; 8])
        })
    }

    /// The half products against num-bigint, at and near the bounds the exponentiation gives
    /// them: entries below 2m, the accumulator up to 2.3m, moduli with 4 bits of headroom.
    #[test]
    fn half_products_are_montgomery_products_within_their_bounds() {
        const N: usize = 20;
        let r = BigUint::from(1u8) << (52 * N);
        let h = BigUint::from(1u8) << (26 * N);
        let top = BigUint::from(1u8) << (52 * N - HALF_SLACK_BITS);
        for m in [
            &top - 1u8,
            (&top >> 1) + 0x1234_5677u32,
            (&top / 3u8) | BigUint::from(1u8),
        ] {
            let m_limbs = limbs::<N>(&m);
            let k0 = Portable([neg_inv52(m_limbs[0].0[0]); 8]);
            let md = Modulus { m: m_limbs, k0 };
            let r_inv = r.modinv(&m).unwrap();
            let h_inv = h.modinv(&m).unwrap();
            for t in [&m * 2u8 - 1u8, &m + 1u8, &m / 7u8] {
                for a in [
                    &m * 23u8 / 10u8,
                    &m * 2u8 - 1u8,
                    &m - 1u8,
                    BigUint::from(3u8),
                ] {
                    let (t_l, a_l) = (limbs::<N>(&t), limbs::<N>(&a));
                    let (mut tk, mut got) = ([Portable([0; 8]); N], [Portable([0; 8]); N]);
                    md.half_reduce(&t_l, &mut tk);
                    let tk = value(&tk, 0);
                    assert_eq!(&tk % &m, &t * &h_inv % &m);
                    assert!(tk < &t / &h + &m + 1u8);
                    md.half_mul(&a_l, &t_l, &limbs::<N>(&tk), &mut got);
                    let got = value(&got, 0);
                    assert_eq!(&got % &m, &a * &t * &r_inv % &m, "a·t/R mod m");
                    assert!(got < &tk + &m + &a * &t / &r + 1u8, "half_mul's bound");
                    assert!(got * 10u8 < &m * 23u8, "below 2.3m");
                }
            }
        }
    }

    /// Both squarings against `mul(a, a)` (bit for bit, each lane its own number) and
    /// num-bigint, with the Karatsuba halves' sum carrying out (lo = B^h − 1) and not, at
    /// 2m − 1 and 0.
    fn squaring_is_the_product<const N: usize>() {
        let r = BigUint::from(1u8) << (52 * N);
        let bh = BigUint::from(1u8) << (26 * N);
        let top = BigUint::from(1u8) << (52 * N - 2);
        for m in [
            &top - 1u8,
            (&top >> 1) + 0x1234_5677u32,
            (&top / 3u8) | BigUint::from(1u8),
        ] {
            let m_limbs = limbs::<N>(&m);
            let md = Modulus {
                m: m_limbs,
                k0: Portable([neg_inv52(m_limbs[0].0[0]); 8]),
            };
            let r_inv = r.modinv(&m).unwrap();
            let lanes = [
                &m * 2u8 - 1u8,
                &bh - 1u8 + &bh * 5u8,
                &bh * (&m / &bh) - 1u8,
                &m - 1u8,
                (&m * 3u8) >> 1,
                &m / 7u8 + &bh - 1u8,
                BigUint::from(3u8),
                BigUint::ZERO,
            ];
            let mut a = [Portable([0; 8]); N];
            for (lane, v) in lanes.iter().enumerate() {
                for (j, l) in limbs::<N>(v).iter().enumerate() {
                    a[j].0[lane] = l.0[0];
                }
            }
            let (mut sq, mut cols, mut prod) = (
                [Portable([0; 8]); N],
                [Portable([0; 8]); N],
                [Portable([0; 8]); N],
            );
            md.sqr::<true>(&a, &mut sq);
            md.sqr::<false>(&a, &mut cols);
            md.mul(&a, &a, &mut prod);
            assert_eq!(sq, prod, "N = {N}: sqr(a) is mul(a, a)");
            assert_eq!(cols, prod, "N = {N}: the columns' sqr(a) is mul(a, a)");
            for (lane, v) in lanes.iter().enumerate() {
                let got = value(&sq, lane);
                assert_eq!(&got % &m, v * v * &r_inv % &m, "N = {N}, lane {lane}");
                assert!(got < &m * 2u8, "N = {N}, lane {lane}: below 2m");
            }
        }
    }

    #[test]
    fn squarings_are_products_bit_for_bit() {
        squaring_is_the_product::<10>();
        squaring_is_the_product::<20>();
        squaring_is_the_product::<30>();
        squaring_is_the_product::<40>();
    }

    /// R² mod m when the lanes' moduli differ in width (the doublings start below the
    /// narrowest one): 3, a prime-sized modulus, the class's widest and narrow ones.
    #[test]
    fn r_squared_for_moduli_of_every_width() {
        const N: usize = 20;
        let r2 = BigUint::from(1u8) << (2 * 52 * N);
        let one = BigUint::from(1u8);
        let widths = [2, 1024, 1036, 1024, 513, 1000, 64, 1023];
        let moduli: Vec<BigUint> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| (&one << (w - 1)) + BigUint::from(2 * i as u64 + 1))
            .collect();
        let mut m = vec![[0u64; 8]; N];
        for (lane, v) in moduli.iter().enumerate() {
            for (j, l) in limbs::<N>(v).iter().enumerate() {
                m[j][lane] = l.0[0];
            }
        }
        assert_eq!(lowest_top_bit(&m), 1);
        let k0 = neg_inv52_lanes(&m);
        let mut rr = vec![[0u64; 8]; N];
        r_squared_portable(&m, &k0, &mut rr);
        for (lane, v) in moduli.iter().enumerate() {
            let got = rr
                .iter()
                .rev()
                .fold(BigUint::ZERO, |x, l| (x << 52) + l[lane]);
            assert_eq!(got, &r2 % v, "lane {lane}, {} bits", widths[lane]);
        }
    }

    #[test]
    fn neg_inv52_inverts_odd_numbers() {
        for m0 in [
            1u64,
            3,
            0xF_FFFF_FFFF_FFFF,
            0x1234_5678_9ABC_DEF1 & MASK52,
            MASK52 - 2,
        ] {
            let k0 = neg_inv52(m0);
            assert_eq!(m0.wrapping_mul(k0).wrapping_add(1) & MASK52, 0, "{m0:#x}");
        }
    }
}
