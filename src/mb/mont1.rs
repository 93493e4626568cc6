//! One Montgomery product, a·b·2^(−64w) mod m for a modulus of w 64-bit words, on AVX-512
//! IFMA with the limbs of one number across the register (eight 52-bit limbs per vector). The
//! fast path of [`crate::rsa::ct_limbs::Modulus::mont_mul`] on CPUs with IFMA: blinding,
//! unblinding, the reductions modulo the primes and the recombination run one number at a
//! time, where the eight-lane kernel does not fit.
//!
//! R stays 2^(64w), the portable product's, so both give the same result bit for bit and
//! values in Montgomery form made by either are interchangeable: 64w = 52k + r, so k rows
//! each take one 52-bit digit of b and divide by 2^52, and a last row takes the top digit
//! (below 2^r) and divides by 2^r.
//!
//! Row i: acc += a·b_i; q = acc_0·k0 mod 2^52 makes limb 0 vanish; acc += m·q; the low
//! halves of both products go in place, the high halves one limb up, which after the shift
//! down by one limb (the division) is the same limb: they are added after the shift and
//! stay off the chain through q. Limbs are carry-save (64-bit lanes, 12 bits of headroom): a
//! limb gets at most four terms below 2^52 per row and lives through at most 80 rows (4096
//! bits), below 2^61; the carry out of limb 0 moves up with the shift.
//!
//! Constant time: loop bounds, loads and shifts depend only on w; no branch on a value.

use super::cpu::IfmaToken;
use super::lanes::MASK52;
use super::repack;
use std::arch::x86_64::*;
use zeroize::Zeroize;

/// Largest modulus, in 64-bit words (4096 bits).
pub const MAX_WORDS: usize = 64;
/// Vectors of eight limbs for the largest modulus: 79 limbs of 52 bits, rounded up.
const MAX_VECS: usize = 10;

/// A modulus in 52-bit limbs, ready for [`Prepared::product`]. Only made with an
/// [`IfmaToken`], which it keeps: holding one is proof the CPU runs the instructions.
pub struct Prepared {
    _token: IfmaToken,
    words: usize,
    vecs: usize,
    /// Rows that take a full 52-bit digit of b (k), and the bits of the last one (r < 52).
    full_rows: usize,
    tail_bits: usize,
    /// The modulus in 52-bit limbs, zero above its top limb (a prime is secret: wiped).
    m: Box<[[u64; 8]; MAX_VECS]>,
    /// −m⁻¹ mod 2^52.
    k0: u64,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        self.m.as_flattened_mut().zeroize();
    }
}

impl Prepared {
    /// `m`: odd, `words` = m.len() ≤ [`MAX_WORDS`] (else `None`); `n0` = −m⁻¹ mod 2^64.
    pub fn new(token: IfmaToken, m: &[u64], n0: u64) -> Option<Prepared> {
        let words = m.len();
        if words == 0 || words > MAX_WORDS {
            return None;
        }
        let bits = 64 * words;
        let limbs = bits.div_ceil(52);
        let mut m52 = Box::new([[0u64; 8]; MAX_VECS]);
        repack(m, 64, &mut m52.as_flattened_mut()[..limbs], 52);
        Some(Prepared {
            _token: token,
            words,
            vecs: limbs.div_ceil(8),
            full_rows: bits / 52,
            tail_bits: bits % 52,
            m: m52,
            k0: n0 & MASK52,
        })
    }

    /// t = a·b·2^(−64w) + (0 or m), below 2m, in w + 1 words (`t`), for a < 2^(64w) and
    /// b < m, each of w words. The caller subtracts m when t ≥ m.
    #[allow(unsafe_code)]
    pub fn product(&self, a: &[u64], b: &[u64], t: &mut [u64]) {
        let w = self.words;
        assert!(
            a.len() == w && b.len() == w && t.len() == w + 1,
            "widths are public"
        );
        // SAFETY: `self._token` proves the CPU runs AVX-512F and AVX-512 IFMA; `vecs` is the
        // K of each arm.
        unsafe {
            match self.vecs {
                1 => product_on::<1>(self, a, b, t),
                2 => product_on::<2>(self, a, b, t),
                3 => product_on::<3>(self, a, b, t),
                4 => product_on::<4>(self, a, b, t),
                5 => product_on::<5>(self, a, b, t),
                6 => product_on::<6>(self, a, b, t),
                7 => product_on::<7>(self, a, b, t),
                8 => product_on::<8>(self, a, b, t),
                9 => product_on::<9>(self, a, b, t),
                _ => product_on::<10>(self, a, b, t),
            }
        }
    }
}

/// [`Prepared::product`] on `K` vectors of eight limbs.
///
/// # Safety
/// The CPU runs AVX-512F and AVX-512 IFMA; `p.vecs == K`.
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(unsafe_code)]
unsafe fn product_on<const K: usize>(p: &Prepared, a: &[u64], b: &[u64], t: &mut [u64]) {
    let zero = _mm512_setzero_si512();
    let mut a52 = [[0u64; 8]; K];
    let mut b52 = [[0u64; 8]; K];
    repack(a, 64, a52.as_flattened_mut(), 52);
    repack(b, 64, b52.as_flattened_mut(), 52);
    let load = |x: &[u64; 8]| {
        // SAFETY: reads the 64 bytes of one array of eight limbs (unaligned load).
        unsafe { _mm512_loadu_si512(x.as_ptr().cast()) }
    };
    let mut av = [zero; K];
    let mut mv = [zero; K];
    for v in 0..K {
        av[v] = load(&a52[v]);
        mv[v] = load(&p.m[v]);
    }
    // q = acc₀·k0 mod 2^52 as a product in the vector unit, its lane 0 broadcast: q is on
    // each row's dependency chain, and this is shorter than a trip through a general register.
    let k0 = _mm512_set1_epi64(p.k0 as i64);
    let mut acc = [zero; K];
    let mut hi = [zero; K];
    for &digit in &b52.as_flattened()[..p.full_rows] {
        let bi = _mm512_set1_epi64(digit as i64);
        for v in 0..K {
            acc[v] = _mm512_madd52lo_epu64(acc[v], av[v], bi);
            hi[v] = _mm512_madd52hi_epu64(zero, av[v], bi);
        }
        let q = _mm512_madd52lo_epu64(zero, acc[0], k0);
        let q = _mm512_broadcastq_epi64(_mm512_castsi512_si128(q));
        for v in 0..K {
            acc[v] = _mm512_madd52lo_epu64(acc[v], mv[v], q);
            hi[v] = _mm512_madd52hi_epu64(hi[v], mv[v], q);
        }
        // Limb 0 is now a multiple of 2^52: its carry joins the limb that moves down.
        let carry = _mm512_maskz_srli_epi64::<52>(1, acc[0]);
        for v in 0..K {
            let above = if v + 1 < K { acc[v + 1] } else { zero };
            acc[v] = _mm512_add_epi64(_mm512_alignr_epi64::<1>(above, acc[v]), hi[v]);
        }
        acc[0] = _mm512_add_epi64(acc[0], carry);
    }
    // The last row: digit below 2^r, q below 2^r; its high halves go one limb up (into the
    // limb above the vectors at the top), and the division by 2^r is a shift of the
    // normalised limbs.
    hi = [zero; K];
    if p.tail_bits > 0 {
        let bi = _mm512_set1_epi64(b52.as_flattened()[p.full_rows] as i64);
        for v in 0..K {
            acc[v] = _mm512_madd52lo_epu64(acc[v], av[v], bi);
            hi[v] = _mm512_madd52hi_epu64(zero, av[v], bi);
        }
        let tail_mask = _mm512_set1_epi64(((1u64 << p.tail_bits) - 1) as i64);
        let q = _mm512_and_si512(_mm512_madd52lo_epu64(zero, acc[0], k0), tail_mask);
        let q = _mm512_broadcastq_epi64(_mm512_castsi512_si128(q));
        for v in 0..K {
            acc[v] = _mm512_madd52lo_epu64(acc[v], mv[v], q);
            hi[v] = _mm512_madd52hi_epu64(hi[v], mv[v], q);
        }
    }
    // acc + hi·2^52 (hi one limb up), carry-propagated into `norm`, then repacked into words
    // and shifted down by the last row's r bits (zero by the choice of q).
    for v in 0..K {
        // SAFETY: writes the 64 bytes of one array of eight limbs (unaligned store).
        unsafe {
            _mm512_storeu_si512(a52[v].as_mut_ptr().cast(), acc[v]);
            _mm512_storeu_si512(b52[v].as_mut_ptr().cast(), hi[v]);
        }
    }
    let mut norm = [0u64; 8 * MAX_VECS + 1];
    let mut carry = 0u64;
    let mut below = 0u64; // the high half of the limb below
    for ((n, &x), &h) in norm
        .iter_mut()
        .zip(a52.as_flattened())
        .zip(b52.as_flattened())
    {
        let v = x + below + carry;
        *n = v & MASK52;
        carry = v >> 52;
        below = h;
    }
    norm[8 * K] = below + carry;
    let mut words = [0u64; MAX_WORDS + 2];
    let words = &mut words[..t.len() + 1];
    repack(&norm[..=8 * K], 52, words, 64);
    let r = p.tail_bits;
    for (i, o) in t.iter_mut().enumerate() {
        *o = if r == 0 {
            words[i]
        } else {
            (words[i] >> r) | (words[i + 1] << (64 - r))
        };
    }
    a52.as_flattened_mut().zeroize();
    b52.as_flattened_mut().zeroize();
    norm.zeroize();
    words.zeroize();
}
