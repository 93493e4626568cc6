//! The exponentiations of the kernel: fixed windows over a table of powers scanned in full
//! for secret exponents, the scan riding on the window's squarings ([`exp_n`], and
//! [`exp_half_n`] with its half products), binary for public ones ([`exp_public_n`]). Every loop
//! bound and index depends on the limb count, `exp_bits` and the window width (public); a
//! window's value only becomes lane masks.

use super::{leave_montgomery, load, modulus, select, wipe, ExpCall, Interleaved, Lanes, Modulus};

/// Window width of the fixed-window exponentiations: 4 bits, a table of 16 powers, at every
/// size. Measured faster on IFMA hardware than 5 bits also at 30 and 40 limbs, where a table
/// of 32 powers (60 and 80 KiB) outgrows the first-level data cache that each window's scan
/// reads it through.
const WINDOW: usize = 4;

/// Table entries scanned after each of a window's squarings: the whole table over a window.
const PER_SQUARING: usize = (1 << WINDOW) / WINDOW;
const _: () = assert!(
    PER_SQUARING * WINDOW == 1 << WINDOW,
    "whole entries per squaring"
);

/// out = base^exp mod m in every lane, with `N` limbs (above [`FUSED_MAX`](super::FUSED_MAX); fewer take
/// [`exp_half_n`]):
/// - `m`: N limbs of 52 bits per lane, odd, above 1; `k0` and `rr` its −m⁻¹ mod 2^52 and
///   R² mod m ([`neg_inv52_lanes`](super::neg_inv52_lanes), [`r_squared_n`](super::r_squared_n));
/// - `base`: N limbs of 52 bits per lane, below 2^(52N) (need not be reduced);
/// - `exp`: 64-bit words per lane, little-endian; only the low `exp_bits` bits are read;
/// - `out`: N limbs, fully reduced (below m).
#[inline(always)]
pub(super) fn exp_n<V: Lanes, const KARATSUBA: bool, const N: usize>(
    call: &ExpCall<'_>,
    out: &mut Interleaved,
) {
    let (exp, exp_bits) = (call.exp, call.exp_bits);
    let mut md = modulus::<V, N>(call.m, call.k0);
    // The working numbers live on the heap: a caller may be an OpenSSL async job, whose
    // stack is small.
    let table_len = 1 << WINDOW;
    // One number per entry, in the shape `scan_limb` shares with `exp_half_n`'s [t, tk].
    let mut table = vec![[[V::zero(); N]; 1]; table_len];
    #[allow(clippy::useless_vec)] // on the heap: see above
    let mut sel = vec![[[V::zero(); N]; 1]];
    let sel = &mut sel[0];
    let mut bufs = vec![[V::zero(); N]; 4];
    let [acc, tmp, x, rr_v] = &mut bufs[..] else {
        unreachable!("four buffers")
    };
    // Results alternate between two buffers: swapping the references copies nothing.
    let (mut acc, mut tmp) = (acc, tmp);
    load(call.rr, rr_v);
    load(call.base, x);

    powers(&md, x, rr_v, &mut table, |e| &e[0], |e| &mut e[0]);

    // Windows from the top; the first takes the leftover bits (exp_bits mod WINDOW).
    let windows = exp_bits.div_ceil(WINDOW);
    let mut idx = [V::zero()];
    for win in (0..windows).rev() {
        idx[0] = window_value(exp, exp_bits, WINDOW, win);
        let idx = idx[0];
        if win + 1 < windows {
            squarings_scanning::<V, KARATSUBA, N, 1>(&md, &mut acc, &mut tmp, &table, sel, idx);
            md.mul(acc, &sel[0], tmp);
            core::mem::swap(&mut acc, &mut tmp);
        } else {
            // The top window is its entry: a full scan.
            for limb in 0..N {
                scan_limb(&table, sel, (V::zero(), idx), 0..table.len(), limb);
            }
            *acc = sel[0];
        }
    }
    if windows == 0 {
        *acc = table[0][0]; // exponent of no bits: one
    }

    leave_montgomery(&md, acc, tmp, out);

    for t in table.iter_mut().flatten().chain(sel.iter_mut()) {
        wipe(t);
    }
    wipe_call(&mut md, &mut bufs, &mut idx);
}

/// Wipes what an exponentiation leaves besides its table: working numbers, the moduli (primes),
/// their −m⁻¹, and the exponent's last window value (digits of dp and dq).
#[inline(always)]
fn wipe_call<V: Lanes, const N: usize>(
    md: &mut Modulus<V, N>,
    bufs: &mut [[V; N]],
    idx: &mut [V; 1],
) {
    for buf in bufs.iter_mut().chain([&mut md.m]) {
        wipe(buf);
    }
    wipe(idx);
    wipe(core::slice::from_mut(&mut md.k0));
}

/// The table's numbers (`num` of each entry): R mod m (one), then base·R mod m and its
/// powers, each entry the one before times base·R.
#[inline(always)]
fn powers<V: Lanes, const N: usize, T>(
    md: &Modulus<V, N>,
    base: &[V; N],
    rr: &[V; N],
    table: &mut [T],
    num: impl Fn(&T) -> &[V; N],
    num_mut: impl Fn(&mut T) -> &mut [V; N],
) {
    let mut one = [V::zero(); N];
    one[0] = V::splat(1);
    md.mul(rr, &one, num_mut(&mut table[0]));
    md.mul(base, rr, num_mut(&mut table[1]));
    for i in 2..table.len() {
        let (done, rest) = table.split_at_mut(i);
        md.mul(num(&done[i - 1]), num(&done[1]), num_mut(&mut rest[0]));
    }
}

/// Window `win`'s value in every lane (`window` bits from the bottom, fewer at the top where
/// `exp_bits` ends), from the exponents' interleaved words by vector shifts: the word and the
/// shift depend on the window's position only.
#[inline(always)]
fn window_value<V: Lanes>(exp: &Interleaved, exp_bits: usize, window: usize, win: usize) -> V {
    let lo = win * window;
    let width = window.min(exp_bits - lo);
    let (word, shift) = (lo / 64, (lo % 64) as u32);
    let mut v = V::from_array(exp[word]).shr_by(shift);
    if shift as usize + width > 64 && word + 1 < exp.len() {
        v = v.or(V::from_array(exp[word + 1]).shl_by(64 - shift));
    }
    v.and(V::splat((1u64 << width) - 1))
}

/// [`exp_n`] for N ≤ [`FUSED_MAX`](super::FUSED_MAX), with cheaper multiplications and no scan of its own:
/// - each table entry t is kept with tk = t·H⁻¹ mod m ([`Modulus::half_reduce`]), so that the
///   window's multiplication is [`Modulus::half_mul`] (3N² products instead of 4N²);
/// - the scan for that multiplication rides along with the window's squarings: after row r
///   of squaring s, limb r of entries s·E..(s+1)·E (E = [`PER_SQUARING`]), both numbers. Its
///   loads and masked stores take other ports than the rows' multiply-adds, so there they
///   cost little, where a pass of their own weighs on the whole exponentiation.
///
/// Bounds: `half_mul`'s result is below tk + m + a·t/R, so up to about 2.3m (R ≥ 16m at
/// the sizes that come here, [`HALF_SLACK_BITS`](super::HALF_SLACK_BITS)); a squaring takes that to below
/// m + (2.3m)²/R < 2m, and leaving Montgomery form to at most m.
#[inline(always)]
pub(super) fn exp_half_n<V: Lanes, const KARATSUBA: bool, const N: usize>(
    call: &ExpCall<'_>,
    out: &mut Interleaved,
) {
    let (exp, exp_bits) = (call.exp, call.exp_bits);
    let mut md = modulus::<V, N>(call.m, call.k0);
    let table_len = 1 << WINDOW;
    // On the heap, as in `exp_n`: [t, tk] per entry, and the two numbers selected.
    let mut table = vec![[[V::zero(); N]; 2]; table_len];
    #[allow(clippy::useless_vec)] // on the heap: see above
    let mut sel = vec![[[V::zero(); N]; 2]];
    let sel = &mut sel[0];
    let mut bufs = vec![[V::zero(); N]; 4];
    let [acc, tmp, x, rr_v] = &mut bufs[..] else {
        unreachable!("four buffers")
    };
    let (mut acc, mut tmp) = (acc, tmp);
    load(call.rr, rr_v);
    load(call.base, x);

    powers(&md, x, rr_v, &mut table, |e| &e[0], |e| &mut e[0]);
    for [t, tk] in table.iter_mut() {
        md.half_reduce(t, tk);
    }

    // Windows from the top; the first takes the leftover bits (exp_bits mod WINDOW).
    let windows = exp_bits.div_ceil(WINDOW);
    let mut idx = [V::zero()];
    for win in (0..windows).rev() {
        idx[0] = window_value(exp, exp_bits, WINDOW, win);
        let idx = idx[0];
        if win + 1 < windows {
            squarings_scanning::<V, KARATSUBA, N, 2>(&md, &mut acc, &mut tmp, &table, sel, idx);
            md.half_mul(acc, &sel[0], &sel[1], tmp);
            core::mem::swap(&mut acc, &mut tmp);
        } else {
            // The top window is its entry. A loop over every limb of every entry, kept a loop:
            // written out, this code (run once) slowed the whole exponentiation by a fifth.
            *sel = table[0];
            for k in 2 * N..2 * table_len * N {
                let (entry, half, limb) = (k / (2 * N), (k / N) % 2, k % N);
                let i = V::splat(entry as u64);
                sel[half][limb] = sel[half][limb].take_where_eq(idx, i, table[entry][half][limb]);
            }
            *acc = sel[0];
        }
    }
    if windows == 0 {
        *acc = table[0][0]; // exponent of no bits: one
    }

    leave_montgomery(&md, acc, tmp, out);

    for t in table.iter_mut().flatten().chain(sel.iter_mut()) {
        wipe(t);
    }
    wipe_call(&mut md, &mut bufs, &mut idx);
}

/// A window's squarings of `acc` (its result left in `acc`; `tmp` is the other buffer), with
/// the scan for the window's multiplication riding on them: after the block of reduction
/// rows that ends with row r, limb r of the squaring's share of the entries ([`PER_SQUARING`]),
/// where its loads overlap the products. Entry 0 starts the selection in every lane: it is
/// compared with a zero key.
#[inline(always)]
fn squarings_scanning<'a, V: Lanes, const KARATSUBA: bool, const N: usize, const H: usize>(
    md: &Modulus<V, N>,
    acc: &mut &'a mut [V; N],
    tmp: &mut &'a mut [V; N],
    table: &[[[V; N]; H]],
    sel: &mut [[V; N]; H],
    idx: V,
) {
    for s in 0..WINDOW {
        let first_key = if s == 0 { V::zero() } else { idx };
        let entries = s * PER_SQUARING..(s + 1) * PER_SQUARING;
        md.sqr_then::<KARATSUBA>(
            acc,
            tmp,
            #[inline(always)]
            |limb| scan_limb(table, sel, (first_key, idx), entries.clone(), limb),
        );
        core::mem::swap(acc, tmp);
    }
}

/// Limb `limb` of both numbers of the table's `entries`, kept in `sel` in the lanes whose
/// window value names the entry (masked moves: no address depends on it). The range's first
/// entry is compared with `first_key`, the others with `idx`: entry 0 is compared with a
/// zero key, so it is copied to every lane and `sel` needs no clearing (the entries after
/// it overwrite it where they match, and every lane's value names exactly one entry). No
/// branch: a branch here splits each squaring row in two, and the compiler then spills
/// the row's accumulators around it.
#[inline(always)]
fn scan_limb<V: Lanes, const N: usize, const H: usize>(
    table: &[[[V; N]; H]],
    sel: &mut [[V; N]; H],
    (first_key, idx): (V, V),
    entries: core::ops::Range<usize>,
    limb: usize,
) {
    // The first entry is peeled: with the key chosen per entry inside the loop, the
    // compiler spilled in every row again.
    let first = entries.start;
    let i = V::splat(first as u64);
    for h in 0..H {
        sel[h][limb] = sel[h][limb].take_where_eq(first_key, i, table[first][h][limb]);
    }
    for e in entries.skip(1) {
        let i = V::splat(e as u64);
        for h in 0..H {
            sel[h][limb] = sel[h][limb].take_where_eq(idx, i, table[e][h][limb]);
        }
    }
}

/// out = base^exp mod m in every lane for a PUBLIC exponent (RSA's e, for the fault check):
/// left-to-right binary, a multiplication only at the bits some lane has set, selected per
/// lane by mask. Time depends on the exponents (public) and never on `base` or `m`. Same
/// layout and conditions as [`exp_n`]; `exp_bits` is the longest exponent's length.
#[inline(always)]
pub(super) fn exp_public_n<V: Lanes, const KARATSUBA: bool, const N: usize>(
    call: &ExpCall<'_>,
    out: &mut Interleaved,
) {
    let (exp, exp_bits) = (call.exp, call.exp_bits);
    let md = modulus::<V, N>(call.m, call.k0);
    // On the heap, as in `exp_n`.
    #[allow(clippy::useless_vec)]
    let mut bufs = vec![[V::zero(); N]; 5];
    let [acc, tmp, x, rr_v, one] = &mut bufs[..] else {
        unreachable!("five buffers")
    };
    load(call.rr, rr_v);
    load(call.base, x);
    one[0] = V::splat(1);
    // acc = one (R mod m), x = base·R mod m.
    md.mul(rr_v, one, acc);
    md.mul(x, rr_v, tmp);
    *x = *tmp;
    for bit in (0..exp_bits).rev() {
        if bit + 1 < exp_bits {
            md.sqr::<KARATSUBA>(acc, tmp);
            *acc = *tmp;
        }
        let mut bits = [0u64; 8];
        for (lane, b) in bits.iter_mut().enumerate() {
            *b = window_bits(exp, lane, bit, 1);
        }
        if bits.contains(&1) {
            let set = V::from_array(bits).eq_mask(V::splat(1));
            md.mul(acc, x, tmp);
            for (a, &t) in acc.iter_mut().zip(tmp.iter()) {
                *a = select(set, t, *a);
            }
        }
    }
    leave_montgomery(&md, acc, tmp, out);
    for buf in bufs.iter_mut() {
        wipe(buf);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mb::lanes::Portable;

    /// The vector window values against `window_bits`, lane by lane: every window of
    /// exponents whose length is not a multiple of the width, so windows cross words and the
    /// top one is short.
    #[test]
    fn window_values_are_each_lanes_bits() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let exp: Vec<[u64; 8]> = (0..5)
            .map(|_| {
                core::array::from_fn(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                })
            })
            .collect();
        for window in [4, 5] {
            for exp_bits in [318usize, 320, 257] {
                for win in 0..exp_bits.div_ceil(window) {
                    let got = window_value::<Portable>(&exp, exp_bits, window, win).0;
                    let width = window.min(exp_bits - win * window);
                    for (lane, g) in got.iter().enumerate() {
                        let want = window_bits(&exp, lane, win * window, width);
                        assert_eq!(*g, want, "width {window}, {exp_bits} bits, window {win}");
                    }
                }
            }
        }
    }

    #[test]
    fn window_bits_crosses_word_boundaries() {
        let mut exp = vec![[0u64; 8]; 2];
        exp[0][3] = 0xF000_0000_0000_0000;
        exp[1][3] = 0b101;
        assert_eq!(window_bits(&exp, 3, 60, 5), 0b1_1111);
        assert_eq!(window_bits(&exp, 3, 62, 5), 0b1_0111);
        assert_eq!(window_bits(&exp, 2, 62, 5), 0);
    }
}
