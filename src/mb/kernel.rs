//! The 8-lane modular exponentiation, generic over [`Lanes`].
//!
//! Numbers are `n` limbs of 52 bits, limb-major with the eight lanes interleaved (limb j of
//! every lane in one vector), so one `vpmadd52luq` does one limb product for eight independent
//! moduli. The methods follow:
//! - S. Gueron, V. Krasnov, "Accelerating big integer arithmetic using Intel IFMA extensions"
//!   (ARITH 2016): radix 2^52, products accumulated in 64-bit limbs without carry propagation
//!   (each limb has 12 bits of headroom), one normalisation per multiplication;
//! - N. Drucker, S. Gueron, "Fast modular squaring with AVX512IFMA" (ITNG 2019): squaring
//!   computes each cross product once and doubles the sum;
//! - almost-Montgomery multiplication: with R = 2^(52n) ≥ 4m, inputs below 2m give an output
//!   below 2m, so the exponentiation loop never subtracts m; one constant-time subtraction at
//!   the end (after leaving Montgomery form) fully reduces.
//!
//! Constant time: loop bounds and indices depend only on `n`, `exp_bits` and the window
//! width (public). The exponent's window values only become lane masks for a full scan of
//! the table (no secret-dependent address); carries are shifts and masks (no branch).
//!
//! Bounds (why no limb overflows): a product limb collects at most 2n terms below 2^52 from
//! the multiplication and 2n from the reduction, plus carries below 2^12: for n ≤ 40 that is
//! below 162·2^52 < 2^60. Squaring doubles a sum of at most 2n terms before adding the
//! diagonal: the same bound.

use super::lanes::{select, Lanes, MASK52};
use zeroize::Zeroize;

/// Window width of the fixed-window exponentiation: a table of 32 powers.
pub const WINDOW: usize = 5;
const TABLE: usize = 1 << WINDOW;

/// Overwrites `v` with zeros in a way the optimiser keeps (secrets must not outlive a call).
#[inline(always)]
fn wipe<V: Lanes>(v: &mut [V]) {
    for x in v.iter_mut() {
        // SAFETY: `x` is a valid, aligned `&mut V`.
        unsafe { core::ptr::write_volatile(x, V::zero()) };
    }
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// Carry-propagates `t` so every limb but the last is below 2^52.
#[inline(always)]
fn normalize<V: Lanes>(t: &mut [V]) {
    let mask = V::splat(MASK52);
    for j in 0..t.len() - 1 {
        let c = t[j].shr::<52>();
        t[j] = t[j].and(mask);
        t[j + 1] = t[j + 1].add(c);
    }
}

/// row += a·b0 + a·b1·2^52, where `row` has two limbs more than `a`: two rows of a schoolbook
/// product in one pass, so each limb of `row` is loaded and stored once per two rows. The first
/// terms multiply zeros (no edge cases, the same instructions whatever the values).
#[inline(always)]
fn mac_row2<V: Lanes>(row: &mut [V], a: &[V], b0: V, b1: V) {
    let (head, tail) = row.split_at_mut(a.len());
    let (mut p1, mut p2) = (V::zero(), V::zero()); // a[j-1], a[j-2]
    for (r, &aj) in head.iter_mut().zip(a) {
        *r = r
            .madd52lo(aj, b0)
            .madd52hi(p1, b0)
            .madd52lo(p1, b1)
            .madd52hi(p2, b1);
        p2 = p1;
        p1 = aj;
    }
    if let [t0, t1, ..] = tail {
        *t0 = t0.madd52hi(p1, b0).madd52lo(p1, b1).madd52hi(p2, b1);
        *t1 = t1.madd52hi(p1, b1);
    }
}

/// The modulus of each lane, ready for almost-Montgomery arithmetic.
pub(crate) struct Ctx<V: Lanes> {
    n: usize,
    m: Vec<V>,
    /// −m⁻¹ mod 2^52, per lane.
    k0: V,
}

impl<V: Lanes> Ctx<V> {
    /// Montgomery reduction of the 2n-limb `t` into `r`: r = t / R mod m, below 2m when
    /// t < 2m·R (what `mul` and `sqr` hand it).
    #[inline(always)]
    fn redc(&self, t: &mut [V], r: &mut [V]) {
        let n = self.n;
        let m = &self.m[..n];
        // Two rows per pass (n is even): q1 comes from what limb i+1 will hold after row i and
        // the carry out of limb i, computed ahead on copies.
        for i in (0..n).step_by(2) {
            // q makes limb i vanish mod 2^52 (only its low 52 bits matter to madd52lo).
            let q0 = V::zero().madd52lo(t[i], self.k0);
            let c0 = t[i].madd52lo(m[0], q0).shr::<52>();
            let t1 = t[i + 1].madd52lo(m[1], q0).madd52hi(m[0], q0).add(c0);
            let q1 = V::zero().madd52lo(t1, self.k0);
            mac_row2(&mut t[i..i + n + 2], m, q0, q1);
            let c = t[i].shr::<52>();
            t[i + 1] = t[i + 1].add(c);
            let c = t[i + 1].shr::<52>();
            t[i + 2] = t[i + 2].add(c);
        }
        r.copy_from_slice(&t[n..2 * n]);
        normalize(r);
    }

    /// r = a·b/R mod m, below 2m, for a, b below 2m (or a < R and b < m).
    #[inline(always)]
    fn mul(&self, a: &[V], b: &[V], t: &mut [V], r: &mut [V]) {
        let n = self.n;
        let a = &a[..n];
        t.fill(V::zero());
        for (i, pair) in b[..n].chunks_exact(2).enumerate() {
            mac_row2(&mut t[2 * i..2 * i + n + 2], a, pair[0], pair[1]);
        }
        self.redc(t, r);
    }

    /// r = a²/R mod m, below 2m, for a below 2m: each cross product once, doubled, then the
    /// squares on the diagonal. Rows go in pairs (i, i+1) through `mac_row2`, which also
    /// multiplies a[i+1] by itself once; that square is doubled with the cross products, so the
    /// diagonal pass takes it away once for odd limbs instead of adding it.
    #[inline(always)]
    fn sqr(&self, a: &[V], t: &mut [V], r: &mut [V]) {
        let n = self.n;
        let a = &a[..n];
        t.fill(V::zero());
        // Cross products a[i]·a[j], j > i, land from limb 2i+1 on.
        for i in (0..n).step_by(2) {
            mac_row2(&mut t[2 * i + 1..i + n + 2], &a[i + 1..], a[i], a[i + 1]);
        }
        for x in t.iter_mut() {
            *x = x.shl::<1>();
        }
        for (k, (pair, &ak)) in t.chunks_exact_mut(2).zip(a).enumerate() {
            let lo = V::zero().madd52lo(ak, ak);
            let hi = V::zero().madd52hi(ak, ak);
            if k % 2 == 1 {
                // a[k]² is in the doubled sum twice (k is the second row of a pair: public).
                pair[0] = pair[0].sub(lo);
                pair[1] = pair[1].sub(hi);
            } else {
                pair[0] = pair[0].add(lo);
                pair[1] = pair[1].add(hi);
            }
        }
        self.redc(t, r);
    }

    /// x = x − m when x ≥ m (x normalised, below 2^(52n)), in constant time.
    #[inline(always)]
    fn sub_if_ge(&self, x: &mut [V], d: &mut [V]) {
        let mask = V::splat(MASK52);
        let mut borrow = V::zero();
        for j in 0..self.n {
            let t = x[j].sub(self.m[j]).sub(borrow);
            borrow = t.shr::<63>();
            d[j] = t.and(mask);
        }
        // borrow = 1: x < m, keep x.
        let keep_x = borrow.eq_mask(V::splat(1));
        for j in 0..self.n {
            x[j] = select(keep_x, x[j], d[j]);
        }
    }

    /// R² mod m, fully reduced. With 52n = s·2^k (s odd): x = 2^(52n + s) mod m = R·2^s by
    /// 52n + s modular doublings of 1, then k Montgomery squarings, each of which doubles the
    /// power of 2 above R (R·2^a → R·2^(2a)), ending at R·2^(52n) = R². Public-count loops.
    #[inline(always)]
    fn r_squared(&self, t: &mut [V], x: &mut [V], y: &mut [V]) {
        let n = self.n;
        let bits = 52 * n;
        let k = bits.trailing_zeros() as usize;
        let s = bits >> k;
        // x = 2^(52n + s) mod m by doubling 1 with a conditional subtraction each time.
        x.fill(V::zero());
        x[0] = V::splat(1);
        for _ in 0..bits + s {
            for v in x.iter_mut() {
                *v = v.shl::<1>();
            }
            normalize(x);
            self.sub_if_ge(x, y);
        }
        // x = R·2^s; each squaring: R·2^a → R·2^(2a); after k of them, R·2^(52n) = R².
        for _ in 0..k {
            self.sqr(x, t, y);
            x.copy_from_slice(y);
        }
        self.sub_if_ge(x, y);
    }
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

/// out = base^exp mod m in every lane.
/// - `m`: n limbs of 52 bits per lane, odd, above 1;
/// - `base`: n limbs of 52 bits per lane, below 2^(52n) (need not be reduced);
/// - `exp`: 64-bit words per lane, little-endian; only the low `exp_bits` bits are read;
/// - `out`: n limbs, fully reduced (below m).
#[inline(always)]
fn exp_impl<V: Lanes>(
    m: &Interleaved,
    base: &Interleaved,
    exp: &Interleaved,
    exp_bits: usize,
    out: &mut Interleaved,
) {
    let n = m.len();
    // Rows go in pairs (`mac_row2`): every size has an even limb count (`Size::limbs52`).
    assert!(n % 2 == 0, "the kernel takes an even number of limbs");
    let mut k0 = [0u64; 8];
    for (lane, k) in k0.iter_mut().enumerate() {
        *k = neg_inv52(m[0][lane]);
    }
    let ctx = Ctx {
        n,
        m: m.iter().map(|l| V::from_array(*l)).collect(),
        k0: V::from_array(k0),
    };
    // −m⁻¹ mod 2^52 gives away the primes mod 2^52: no copy outlives the call.
    k0.zeroize();
    let mut t = vec![V::zero(); 2 * n];
    let mut rr = vec![V::zero(); n];
    let mut acc = vec![V::zero(); n];
    let mut tmp = vec![V::zero(); n];
    let mut sel = vec![V::zero(); n];
    let mut table = vec![V::zero(); TABLE * n];
    ctx.r_squared(&mut t, &mut rr, &mut tmp);

    // table[0] = R mod m (one), table[1] = base·R mod m, table[i] = table[i-1]·table[1].
    let x: Vec<V> = base.iter().map(|l| V::from_array(*l)).collect();
    let mut one = vec![V::zero(); n];
    one[0] = V::splat(1);
    ctx.mul(&rr, &one, &mut t, &mut tmp);
    table[..n].copy_from_slice(&tmp);
    ctx.mul(&x, &rr, &mut t, &mut tmp);
    table[n..2 * n].copy_from_slice(&tmp);
    for i in 2..TABLE {
        let (done, rest) = table.split_at_mut(i * n);
        ctx.mul(
            &done[(i - 1) * n..],
            &done[n..2 * n],
            &mut t,
            &mut rest[..n],
        );
    }

    // Windows from the top; the first takes the leftover bits (exp_bits mod WINDOW).
    let windows = exp_bits.div_ceil(WINDOW);
    let mut digits = [0u64; 8];
    let mut idx = [V::zero()];
    for w in (0..windows).rev() {
        let lo = w * WINDOW;
        let width = WINDOW.min(exp_bits - lo);
        for (lane, v) in digits.iter_mut().enumerate() {
            *v = window_bits(exp, lane, lo, width);
        }
        idx[0] = V::from_array(digits);
        let idx = idx[0];
        if w + 1 < windows {
            for _ in 0..WINDOW {
                ctx.sqr(&acc, &mut t, &mut tmp);
                core::mem::swap(&mut acc, &mut tmp); // buffers trade places: no copy
            }
        }
        // Full table scan: every entry is read, the lane's own is kept by mask.
        sel.fill(V::zero());
        for (i, entry) in table.chunks_exact(n).enumerate() {
            let hit = idx.eq_mask(V::splat(i as u64));
            for (s, &e) in sel.iter_mut().zip(entry) {
                *s = s.or(hit.and(e));
            }
        }
        if w + 1 < windows {
            ctx.mul(&acc, &sel, &mut t, &mut tmp);
            core::mem::swap(&mut acc, &mut tmp);
        } else {
            acc.copy_from_slice(&sel);
        }
    }
    if windows == 0 {
        acc.copy_from_slice(&table[..n]); // exponent of no bits: one
    }

    // Leave Montgomery form (result ≤ m) and subtract m once if needed.
    ctx.mul(&acc, &one, &mut t, &mut tmp);
    ctx.sub_if_ge(&mut tmp, &mut acc);
    for (o, v) in out.iter_mut().zip(tmp.iter()) {
        *o = v.to_array();
    }

    let Ctx { mut m, k0, .. } = ctx;
    let mut k0 = [k0];
    let mut x = x;
    for buf in [
        &mut t, &mut rr, &mut acc, &mut tmp, &mut sel, &mut table, &mut m, &mut x,
    ] {
        wipe(buf);
    }
    // The exponent's window values (digits of dp and dq) and the lanes' −m⁻¹.
    wipe(&mut idx);
    wipe(&mut k0);
    digits.zeroize();
}

/// `width` (≤ 64) bits of lane `lane`'s exponent from bit `lo` up (positions are public).
#[inline(always)]
fn window_bits(exp: &Interleaved, lane: usize, lo: usize, width: usize) -> u64 {
    let word = lo / 64;
    let shift = lo % 64;
    let mut v = exp[word][lane] >> shift;
    if shift + width > 64 && word + 1 < exp.len() {
        v |= exp[word + 1][lane] << (64 - shift);
    }
    v & ((1u64 << width) - 1)
}

/// [`exp_impl`] on the portable lanes.
pub(crate) fn exp_portable(
    m: &Interleaved,
    base: &Interleaved,
    exp: &Interleaved,
    exp_bits: usize,
    out: &mut Interleaved,
) {
    exp_impl::<super::lanes::Portable>(m, base, exp, exp_bits, out)
}

/// [`exp_impl`] on AVX-512 IFMA.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512 IFMA (`lanes::ifma_available()`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn exp_ifma(
    m: &Interleaved,
    base: &Interleaved,
    exp: &Interleaved,
    exp_bits: usize,
    out: &mut Interleaved,
) {
    exp_impl::<super::lanes::Ifma>(m, base, exp, exp_bits, out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn window_bits_crosses_word_boundaries() {
        let mut exp = vec![[0u64; 8]; 2];
        exp[0][3] = 0xF000_0000_0000_0000;
        exp[1][3] = 0b101;
        assert_eq!(window_bits(&exp, 3, 60, 5), 0b1_1111);
        assert_eq!(window_bits(&exp, 3, 62, 5), 0b101_11);
        assert_eq!(window_bits(&exp, 2, 62, 5), 0);
    }
}
