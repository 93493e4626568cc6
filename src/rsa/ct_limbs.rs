//! Constant-time modular arithmetic on fixed-width little-endian `u64` limb arrays, in safe
//! Rust, for the parts of the RSA private path that libcrypto 3.0's public API cannot do in
//! constant time (its fixed-top helpers are internal symbols): blinding, the reductions of the
//! input modulo the primes, the CRT recombination and the final copy of the result.
//!
//! Rules followed by every function here, so that a secret-taint check (valgrind memcheck
//! with the secrets marked undefined) finds no secret-dependent branch, memory index or
//! length: widths (limb counts) are public; loop bounds and indices depend only on widths;
//! carries, borrows and comparisons become 0/all-ones masks that select with `&`/`|`; no
//! `if`, `match`, early return or slice index is driven by a limb value. Masks pass through
//! `core::hint::black_box`, so the optimizer cannot turn a masked select back into a branch.
//!
//! Results are always fully reduced (`< m`), so widths never shrink with the value.

use crate::error::KaeResult;
use crate::ffi::bn::BigNum;
use zeroize::{Zeroize, Zeroizing};

/// A value derived from secrets that is public by design (a prime's width, whether the fault
/// check passed): marked defined for the secret-taint check, then returned. Only the
/// declassified value may drive a branch.
pub fn declassify_usize(x: usize) -> usize {
    crate::ffi::memcheck::public_usize(x)
}

/// See [`declassify_usize`].
pub fn declassify_u64(x: u64) -> u64 {
    crate::ffi::memcheck::public_usize(x as usize) as u64
}

/// See [`declassify_usize`]: limbs derived from secrets that are public by design.
pub fn declassify_words(x: &[u64]) {
    crate::ffi::memcheck::mark_public_words(x)
}

/// A secret-safe limb vector: wiped on drop.
pub type Limbs = Zeroizing<Vec<u64>>;

/// All-ones when `bit` (0 or 1) is 1, zero when it is 0.
#[inline(always)]
fn mask(bit: u64) -> u64 {
    core::hint::black_box(0u64.wrapping_sub(bit))
}

/// `a` where `m` is all-ones, `b` where `m` is zero.
#[inline(always)]
fn select(m: u64, a: u64, b: u64) -> u64 {
    (a & m) | (b & !m)
}

/// a + b + carry-in → (sum, carry-out).
#[inline(always)]
fn adc(a: u64, b: u64, c: u64) -> (u64, u64) {
    let s = a as u128 + b as u128 + c as u128;
    (s as u64, (s >> 64) as u64)
}

/// a − b − borrow-in → (difference, borrow-out 0/1).
#[inline(always)]
fn sbb(a: u64, b: u64, borrow: u64) -> (u64, u64) {
    let d = (a as u128).wrapping_sub(b as u128 + borrow as u128);
    (d as u64, ((d >> 64) as u64) & 1)
}

/// Working limbs of [`Modulus::mont_mul_into`] kept on the stack: 3w + 1 for w ≤ 64 (4096
/// bits).
const MONT_STACK_LIMBS: usize = 3 * 64 + 1;

/// Working limbs of [`Modulus::reduce_into`] kept on the stack: 2w for w ≤ 64.
const REDUCE_STACK_LIMBS: usize = 2 * 64;

/// `len` zeroed working limbs for secrets: on the stack up to `CAP`, on the heap beyond (no
/// allocation per product or reduction at RSA's sizes); wiped when dropped.
pub(crate) struct Work<const CAP: usize> {
    on_stack: [u64; CAP],
    on_heap: Vec<u64>,
    len: usize,
}

impl<const CAP: usize> Work<CAP> {
    pub(crate) fn new(len: usize) -> Self {
        Work {
            on_stack: [0u64; CAP],
            on_heap: if len > CAP {
                vec![0u64; len]
            } else {
                Vec::new()
            },
            len,
        }
    }

    pub(crate) fn limbs(&mut self) -> &mut [u64] {
        if self.len > CAP {
            &mut self.on_heap
        } else {
            &mut self.on_stack[..self.len]
        }
    }
}

impl<const CAP: usize> Drop for Work<CAP> {
    fn drop(&mut self) {
        self.limbs().zeroize();
    }
}

/// A 192-bit column accumulator for [`Modulus::mont_mul`]: a 128-bit sum and the count of
/// its overflows (at most 2w products per column: far below 2^64). Kept in registers: it is
/// not wiped, since taking its address to wipe it would keep it in memory for every product.
#[derive(Default)]
struct Acc {
    sum: u128,
    top: u64,
}

impl Acc {
    #[inline(always)]
    fn mac(&mut self, x: u64, y: u64) {
        let (s, c) = self.sum.overflowing_add(x as u128 * y as u128);
        self.sum = s;
        self.top += c as u64;
    }

    #[inline(always)]
    fn low(&self) -> u64 {
        self.sum as u64
    }

    /// The accumulator divided by 2^64.
    #[inline(always)]
    fn shift(&mut self) {
        self.sum = (self.sum >> 64) | ((self.top as u128) << 64);
        self.top = 0;
    }

    /// Bits 64..128 (what `shift` would make the low limb).
    #[inline(always)]
    fn shifted_low(&self) -> u64 {
        (self.sum >> 64) as u64
    }
}

/// r = a − b over `r.len()` limbs (missing limbs of a or b read as zero); returns the borrow.
fn sub_into(r: &mut [u64], a: &[u64], b: &[u64]) -> u64 {
    let mut borrow = 0;
    for (i, ri) in r.iter_mut().enumerate() {
        let ai = a.get(i).copied().unwrap_or(0); // i < len is a public bound
        let bi = b.get(i).copied().unwrap_or(0);
        (*ri, borrow) = sbb(ai, bi, borrow);
    }
    borrow
}

/// r += m & mask over r's limbs; returns the carry.
fn add_masked(r: &mut [u64], m: &[u64], msk: u64) -> u64 {
    let mut carry = 0;
    for (ri, &mi) in r.iter_mut().zip(m) {
        (*ri, carry) = adc(*ri, mi & msk, carry);
    }
    carry
}

/// A modulus prepared for Montgomery arithmetic with R = 2^(64·width).
pub struct Modulus {
    m: Limbs,
    /// −m⁻¹ mod 2^64.
    n0: u64,
    /// R² mod m.
    rr: Limbs,
    /// R mod m.
    r1: Limbs,
    /// Whether m's top bit (bit 64·width − 1) is set, as for every RSA prime of a standard
    /// size: then any number of `width` words is below 2m. Public (m's bit length).
    full_width: bool,
    /// The same product on AVX-512 IFMA, where the CPU has it (same R, same results).
    #[cfg(target_arch = "x86_64")]
    ifma: Option<crate::mb::mont1::Prepared>,
}

impl Modulus {
    /// `m` must be odd and greater than 1 (libcrypto's `BN_MONT_CTX_set`, run first on the
    /// same value, refuses even moduli). Constant time in the value of `m`.
    pub fn new(m: Limbs) -> Self {
        let w = m.len();
        // Newton's iteration for m⁻¹ mod 2^64: m·m ≡ 1 (mod 8) for odd m, and each step
        // doubles the number of correct low bits (3, 6, 12, 24, 48, 96).
        let mut inv = m[0];
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(m[0].wrapping_mul(inv)));
        }
        let n0 = inv.wrapping_neg();
        // R mod m and R² mod m by 64·w and 2·64·w modular doublings of 1.
        let mut rr: Limbs = Zeroizing::new(vec![0u64; w]);
        rr[0] = 1;
        let mut r1: Limbs = Zeroizing::new(vec![0u64; w]);
        let mut t: Limbs = Zeroizing::new(vec![0u64; w]);
        for i in 0..(128 * w) {
            if i == 64 * w {
                r1.copy_from_slice(&rr); // public count
            }
            t.copy_from_slice(&rr);
            mod_add_assign(&mut rr, &t, &m);
        }
        #[cfg(target_arch = "x86_64")]
        let ifma = crate::mb::cpu::IfmaToken::detect()
            .and_then(|token| crate::mb::mont1::Prepared::new(token, &m, n0));
        let full_width = declassify_u64(m[w - 1] >> 63) == 1;
        Modulus {
            m,
            n0,
            rr,
            r1,
            full_width,
            #[cfg(target_arch = "x86_64")]
            ifma,
        }
    }

    /// The portable product only: the reference the IFMA one is tested and timed against
    /// (`benches/ct_limbs.rs`).
    #[doc(hidden)]
    pub fn without_ifma(mut self) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            self.ifma = None;
        }
        self
    }

    pub fn width(&self) -> usize {
        self.m.len()
    }

    pub fn limbs(&self) -> &[u64] {
        &self.m
    }

    /// Montgomery product a·b·R⁻¹ mod m. Needs a < R and b < m (so a·b < m·R); the result
    /// is fully reduced. On AVX-512 IFMA the product runs in `mb::mont1` (same R, same
    /// result), elsewhere in [`Self::product`].
    pub fn mont_mul(&self, a: &[u64], b: &[u64]) -> Limbs {
        let mut r: Limbs = Zeroizing::new(vec![0u64; self.width()]);
        self.mont_mul_into(a, b, &mut r);
        r
    }

    /// [`Self::mont_mul`] into `r` (the modulus's width).
    pub fn mont_mul_into(&self, a: &[u64], b: &[u64], r: &mut [u64]) {
        let w = self.width();
        // Working limbs: a padded, q, t.
        let mut work = Work::<MONT_STACK_LIMBS>::new(3 * w + 1);
        let (a_full, rest) = work.limbs().split_at_mut(w);
        let (q, t) = rest.split_at_mut(w);
        // Missing limbs of a (a public length) read as zero.
        let n = a.len().min(w);
        a_full[..n].copy_from_slice(&a[..n]);
        let b = &b[..w];
        #[cfg(target_arch = "x86_64")]
        let done = match &self.ifma {
            Some(p) => {
                p.product(a_full, b, t);
                true
            }
            None => false,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = false;
        if !done {
            self.product(a_full, b, q, t);
        }
        // t < 2m: subtract m once when t ≥ m.
        let r = &mut r[..w];
        let borrow = sub_into(r, &t[..w], &self.m);
        // keep the difference when there was no borrow or when t had a limb above w
        let keep = mask((borrow ^ 1) | t[w]);
        for (ri, &ti) in r.iter_mut().zip(t.iter()) {
            *ri = select(keep, *ri, ti);
        }
    }

    /// t = a·b·R⁻¹ + (0 or m), below 2m, in w + 1 limbs; `q` is w limbs of scratch. Product
    /// scanning with the reduction interleaved (column by column: the products a_j·b_(i−j)
    /// and q_j·m_(i−j) of column i into a 192-bit accumulator, q_i chosen so column i < w
    /// vanishes): the additions chain through the accumulator, not through each
    /// multiplication's carry, about twice as fast as operand scanning.
    fn product(&self, a: &[u64], b: &[u64], q: &mut [u64], t: &mut [u64]) {
        let w = self.width();
        let m = &self.m[..];
        let mut acc = Acc::default();
        for i in 0..w {
            // Column i: a_j·b_(i−j) for j ≤ i, q_j·m_(i−j) for j < i.
            for (x, y) in a[..=i].iter().zip(b[..=i].iter().rev()) {
                acc.mac(*x, *y);
            }
            for (x, y) in q[..i].iter().zip(m[1..=i].iter().rev()) {
                acc.mac(*x, *y);
            }
            let qi = acc.low().wrapping_mul(self.n0);
            q[i] = qi;
            acc.mac(qi, m[0]); // the column's low limb is now 0
            acc.shift();
        }
        for i in w..2 * w - 1 {
            // Column i: j from i − w + 1 to w − 1.
            let lo = i + 1 - w;
            for (x, y) in a[lo..].iter().zip(b[lo..].iter().rev()) {
                acc.mac(*x, *y);
            }
            for (x, y) in q[lo..].iter().zip(m[lo..].iter().rev()) {
                acc.mac(*x, *y);
            }
            t[i - w] = acc.low();
            acc.shift();
        }
        t[w - 1] = acc.low();
        t[w] = acc.shifted_low();
    }

    /// x mod m for x of any (public) width, constant time. One chunk of `width` limbs:
    /// one subtraction of m when m is full width (the chunk is below 2m), else
    /// x·(R mod m)·R⁻¹, one Montgomery product. Two (x = c0 + c1·R, e.g. an RSA input mod
    /// one prime): c0 so, plus c1·(R² mod m)·R⁻¹. Wider: Horner's rule over the chunks in
    /// the Montgomery domain (acc·R² + chunk·R² per step, then one REDC).
    pub fn reduce(&self, x: &[u64]) -> Limbs {
        let mut r: Limbs = Zeroizing::new(vec![0u64; self.width()]);
        self.reduce_into(x, &mut r);
        r
    }

    /// [`Self::reduce`] into `r`'s first `width` limbs (`r` at least that long; the limbs
    /// above are left as they are).
    pub fn reduce_into(&self, x: &[u64], r: &mut [u64]) {
        let w = self.width();
        let acc = &mut r[..w];
        // Working limbs: a chunk of x, and one product.
        let mut work = Work::<REDUCE_STACK_LIMBS>::new(2 * w);
        let (chunk, product) = work.limbs().split_at_mut(w);
        let chunks = x.len().div_ceil(w);
        if chunks <= 2 {
            let lo = x.len().min(w);
            chunk[..lo].copy_from_slice(&x[..lo]);
            if self.full_width {
                // chunk − m, plus m again when that borrowed: chunk < 2^(64w) ≤ 2m.
                let borrow = sub_into(acc, chunk, &self.m);
                add_masked(acc, &self.m, mask(borrow));
            } else {
                self.mont_mul_into(chunk, &self.r1, acc);
            }
            if x.len() <= w {
                return;
            }
            chunk.fill(0);
            chunk[..x.len() - lo].copy_from_slice(&x[lo..]);
            self.mont_mul_into(chunk, &self.rr, product);
            mod_add_assign(acc, product, &self.m);
            return;
        }
        acc.fill(0); // Montgomery form, starts at 0
        for k in (0..chunks).rev() {
            let lo = k * w;
            let hi = (lo + w).min(x.len());
            // acc·R (Montgomery form of acc·R) + chunk·R (Montgomery form of chunk)
            self.mont_mul_into(acc, &self.rr, product);
            acc.copy_from_slice(product);
            chunk.fill(0);
            chunk[..hi - lo].copy_from_slice(&x[lo..hi]);
            self.mont_mul_into(chunk, &self.rr, product);
            mod_add_assign(acc, product, &self.m);
        }
        chunk.fill(0);
        chunk[0] = 1;
        self.mont_mul_into(acc, chunk, product);
        acc.copy_from_slice(product);
    }

    /// a·R mod m (Montgomery form) for a < R.
    pub fn to_mont(&self, a: &[u64]) -> Limbs {
        self.mont_mul(a, &self.rr)
    }

    /// x^e·R mod m for x·R mod m (`x_mont`, below m) and a PUBLIC exponent `e` (little-endian
    /// words): left-to-right binary on the Montgomery product. Constant time in x; the time
    /// depends on e's bits (RSA's e, for blinding pairs). e = 0 gives R mod m (one).
    pub fn pow_public_exp(&self, x_mont: &[u64], e: &[u64]) -> Limbs {
        let bit = |i: usize| (e[i / 64] >> (i % 64)) & 1 == 1;
        let Some(top) = (0..e.len() * 64).rev().find(|&i| bit(i)) else {
            return self.r1.clone();
        };
        let mut acc: Limbs = Zeroizing::new(x_mont.to_vec());
        for i in (0..top).rev() {
            acc = self.mont_mul(&acc, &acc);
            if bit(i) {
                acc = self.mont_mul(&acc, x_mont);
            }
        }
        acc
    }

    /// (a − b) mod m for a, b < m.
    pub fn mod_sub(&self, a: &[u64], b: &[u64]) -> Limbs {
        let mut r: Limbs = Zeroizing::new(vec![0u64; self.width()]);
        let borrow = sub_into(&mut r, a, b);
        add_masked(&mut r, &self.m, mask(borrow));
        r
    }
}

/// a = (a + b) mod m for a, b < m (all of m's width).
fn mod_add_assign(a: &mut [u64], b: &[u64], m: &[u64]) {
    debug_assert!(a.len() == b.len() && a.len() == m.len());
    let mut carry = 0;
    for (ai, &bi) in a.iter_mut().zip(b) {
        (*ai, carry) = adc(*ai, bi, carry);
    }
    // a + b ≥ m exactly when the sum carried out or a − m does not borrow: then subtract m.
    let mut borrow = 0;
    for (&ai, &mi) in a.iter().zip(m) {
        (_, borrow) = sbb(ai, mi, borrow);
    }
    let keep = mask(carry | (borrow ^ 1));
    let mut borrow = 0;
    for (ai, &mi) in a.iter_mut().zip(m) {
        (*ai, borrow) = sbb(*ai, mi & keep, borrow);
    }
}

/// Schoolbook product of two limb arrays: `a.len() + b.len()` limbs.
pub fn mul(a: &[u64], b: &[u64]) -> Limbs {
    let mut r: Limbs = Zeroizing::new(vec![0u64; a.len() + b.len()]);
    for (i, &ai) in a.iter().enumerate() {
        let mut c = 0u64;
        for (j, &bj) in b.iter().enumerate() {
            let s = r[i + j] as u128 + (ai as u128) * (bj as u128) + c as u128;
            r[i + j] = s as u64;
            c = (s >> 64) as u64;
        }
        r[i + b.len()] = c;
    }
    r
}

/// r = a + b over r's limbs (missing limbs read as zero); the carry out of r is dropped (the
/// caller knows the sum fits).
pub fn add_into(r: &mut [u64], a: &[u64], b: &[u64]) {
    let mut carry = 0;
    for (i, ri) in r.iter_mut().enumerate() {
        let ai = a.get(i).copied().unwrap_or(0);
        let bi = b.get(i).copied().unwrap_or(0);
        (*ri, carry) = adc(ai, bi, carry);
    }
}

/// 1 when a < b over the longer width, else 0, in constant time.
pub fn less_than(a: &[u64], b: &[u64]) -> u64 {
    let mut borrow = 0;
    for i in 0..a.len().max(b.len()) {
        let (ai, bi) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        (_, borrow) = sbb(ai, bi, borrow);
    }
    borrow
}

/// Constant-time equality: all-ones (as `1`) when equal over the longer width.
pub fn eq(a: &[u64], b: &[u64]) -> u64 {
    let mut acc = 0u64;
    for i in 0..a.len().max(b.len()) {
        acc |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    // acc == 0 → 1, otherwise 0, without a comparison branch
    let nz = (acc | acc.wrapping_neg()) >> 63;
    nz ^ 1
}

/// Limbs to and from libcrypto's numbers (the conversions live here, with the limbs, so the
/// FFI layer needs nothing of `rsa`). `BigNum::from_limbs` reads as before with this in scope.
pub trait BigNumLimbs: Sized {
    /// The value as `words` little-endian limbs; fails when it does not fit.
    fn to_limbs(&self, words: usize) -> KaeResult<Limbs>;
    /// A number on the secure heap from little-endian limbs, with BN_FLG_CONSTTIME when
    /// `consttime` (leave it off only for a value next raised to a public exponent).
    fn from_limbs(limbs: &[u64], consttime: bool) -> KaeResult<Self>;
}

impl BigNumLimbs for BigNum {
    fn to_limbs(&self, words: usize) -> KaeResult<Limbs> {
        Ok(from_le_bytes(&self.to_le_padded(words * 8)?))
    }

    fn from_limbs(limbs: &[u64], consttime: bool) -> KaeResult<Self> {
        BigNum::from_le_secure(&to_le_bytes(limbs), consttime)
    }
}

/// Little-endian bytes (length a multiple of 8) to limbs.
pub fn from_le_bytes(bytes: &[u8]) -> Limbs {
    Zeroizing::new(
        bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect(),
    )
}

/// Limbs to little-endian bytes (8 per limb).
pub fn to_le_bytes(a: &[u64]) -> Zeroizing<Vec<u8>> {
    Zeroizing::new(a.iter().flat_map(|l| l.to_le_bytes()).collect())
}

/// The low `out.len()` bytes of `a`, big-endian, into `out` (fixed length, no dependence on
/// the value; bytes beyond a's width are zero).
pub fn write_be(a: &[u64], out: &mut [u8]) {
    let k = out.len();
    for (i, o) in out.iter_mut().enumerate() {
        let j = k - 1 - i; // byte index from the little end: public
        let limb = a.get(j / 8).copied().unwrap_or(0);
        *o = (limb >> (8 * (j % 8))) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;

    fn big(a: &[u64]) -> BigUint {
        BigUint::from_bytes_le(&to_le_bytes(a))
    }

    fn limbs(x: &BigUint, w: usize) -> Limbs {
        let mut b = x.to_bytes_le();
        assert!(b.len() <= 8 * w, "value wider than {w} limbs");
        b.resize(8 * w, 0);
        from_le_bytes(&b)
    }

    /// A deterministic pseudo-random generator (xorshift) for test values.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, m: &BigUint, w: usize) -> BigUint {
            let v: Vec<u64> = (0..w + 1).map(|_| self.next()).collect();
            big(&v) % m
        }
        fn odd(&mut self, w: usize) -> BigUint {
            let mut v: Vec<u64> = (0..w).map(|_| self.next()).collect();
            v[0] |= 1;
            v[w - 1] |= 1 << 63;
            big(&v)
        }
    }

    fn modulus(m: &BigUint, w: usize) -> Modulus {
        Modulus::new(limbs(m, w))
    }

    #[test]
    fn setup_constants_match_the_oracle() {
        let mut g = Rng(0x1234_5678_9abc_def1);
        for w in [1usize, 2, 3, 8, 17] {
            let m = g.odd(w);
            let md = modulus(&m, w);
            let r = BigUint::from(1u8) << (64 * w);
            assert_eq!(big(&md.rr), (&r * &r) % &m, "R² mod m, width {w}");
            assert_eq!(big(&md.r1), &r % &m, "R mod m, width {w}");
            let n0 = BigUint::from(md.n0);
            let two64 = BigUint::from(1u8) << 64;
            assert_eq!((n0 * (&m % &two64) + 1u8) % &two64, BigUint::from(0u8));
        }
    }

    #[test]
    fn mont_mul_reduce_sub_match_the_oracle() {
        let mut g = Rng(0xdead_beef_cafe_f00d);
        // 65 limbs: above what `mont_mul` keeps on the stack.
        // Each width with a full-width modulus (top bit set: `reduce` subtracts) and a
        // shorter one (`reduce` multiplies).
        let widths = [1usize, 2, 4, 16, 64, 65];
        for (w, full) in widths.iter().flat_map(|&w| [(w, true), (w, false)]) {
            let m = match full {
                true => g.odd(w),
                false => (g.odd(w) >> 7u32) | BigUint::from(1u8),
            };
            let md = modulus(&m, w);
            assert_eq!(md.full_width, full, "width {w}");
            let r = BigUint::from(1u8) << (64 * w);
            let rinv = r.modinv(&m).unwrap();
            for _ in 0..20 {
                let a = g.below(&m, w);
                let b = g.below(&m, w);
                let p = md.mont_mul(&limbs(&a, w), &limbs(&b, w));
                assert_eq!(big(&p), (&a * &b * &rinv) % &m);
                let s = md.mod_sub(&limbs(&a, w), &limbs(&b, w));
                assert_eq!(big(&s), (&a + &m - &b) % &m);
                // a value of any width: Horner above two chunks, two products for two, one for one
                for xw in [3 * w + 1, 2 * w, w + 1, w, 1] {
                    let x = big(&(0..xw).map(|_| g.next()).collect::<Vec<_>>());
                    assert_eq!(big(&md.reduce(&limbs(&x, xw))), &x % &m, "{xw} limbs");
                }
            }
            // a < R but above m is allowed for the first operand
            let above: Vec<u64> = vec![u64::MAX; w];
            let b = g.below(&m, w);
            let p = md.mont_mul(&above, &limbs(&b, w));
            assert_eq!(big(&p), (big(&above) * &b * &rinv) % &m);
            // edges: equal operands of mod_sub give 0; 0 − (m−1) = 1
            let a = g.below(&m, w);
            assert_eq!(
                big(&md.mod_sub(&limbs(&a, w), &limbs(&a, w))),
                BigUint::from(0u8)
            );
            let m1 = &m - 1u8;
            assert_eq!(
                big(&md.mod_sub(&limbs(&BigUint::from(0u8), w), &limbs(&m1, w))),
                BigUint::from(1u8)
            );
            // reduce of m itself, of m−1 and of 0
            assert_eq!(big(&md.reduce(&limbs(&m, w))), BigUint::from(0u8));
            assert_eq!(big(&md.reduce(&limbs(&m1, w))), m1);
            assert_eq!(big(&md.reduce(&vec![0u64; 2 * w])), BigUint::from(0u8));
        }
    }

    #[test]
    fn pow_public_exp_matches_the_oracle() {
        let mut g = Rng(0x0e0e_5eed_1234_0001);
        for w in [1usize, 4, 16, 32] {
            let m = g.odd(w);
            let md = modulus(&m, w);
            let r = BigUint::from(1u8) << (64 * w);
            let rinv = r.modinv(&m).unwrap();
            let x = g.below(&m, w);
            let xm = md.to_mont(&limbs(&x, w));
            let wide: Vec<u64> = (0..3).map(|_| g.next()).collect();
            for e in [
                vec![0u64],
                vec![1],
                vec![2],
                vec![3],
                vec![65537],
                vec![65537, 0],
                wide,
            ] {
                let got = big(&md.pow_public_exp(&xm, &e)) * &rinv % &m;
                assert_eq!(got, x.modpow(&big(&e), &m), "width {w}, e {e:x?}");
            }
        }
    }

    #[test]
    fn ifma_product_matches_the_portable_one_and_the_oracle() {
        #[cfg(target_arch = "x86_64")]
        let has_ifma = crate::mb::cpu::IfmaToken::detect().is_some();
        #[cfg(not(target_arch = "x86_64"))]
        let has_ifma = false;
        if !has_ifma {
            eprintln!("skipped: this CPU has no AVX-512 IFMA (scripts/ifma-emulate.sh runs it)");
            return;
        }
        let mut g = Rng(0x005e_ed0f_1f4a);
        for w in 1usize..=64 {
            // a full-width modulus, one with its top word small, and one below 2^64·(w−1)+1
            let full = g.odd(w);
            let small_top = (&full >> 40u32) | BigUint::from(1u8);
            for m in [full, small_top] {
                let fast = modulus(&m, w);
                assert!(fast.ifma.is_some(), "width {w} takes the IFMA product");
                let slow = modulus(&m, w).without_ifma();
                let r = BigUint::from(1u8) << (64 * w);
                let rinv = r.modinv(&m).unwrap();
                let m1 = &m - 1u8;
                let mut cases: Vec<(BigUint, BigUint)> =
                    (0..12).map(|_| (g.below(&m, w), g.below(&m, w))).collect();
                cases.push((&r - 1u8, m1.clone()));
                cases.push((m1.clone(), m1.clone()));
                cases.push((BigUint::from(0u8), m1.clone()));
                cases.push((BigUint::from(1u8), BigUint::from(1u8)));
                cases.push((&r - 1u8, BigUint::from(0u8)));
                for (a, b) in cases {
                    let (al, bl) = (limbs(&a, w), limbs(&b, w));
                    let p = fast.mont_mul(&al, &bl);
                    assert_eq!(big(&p), (&a * &b * &rinv) % &m, "width {w}");
                    assert_eq!(p, slow.mont_mul(&al, &bl), "width {w}");
                }
            }
        }
    }

    #[test]
    fn helpers_match_the_oracle() {
        let mut g = Rng(42);
        let a: Vec<u64> = (0..5).map(|_| g.next()).collect();
        let b: Vec<u64> = (0..3).map(|_| g.next()).collect();
        assert_eq!(big(&mul(&a, &b)), big(&a) * big(&b));
        let mut r = vec![0u64; 6];
        add_into(&mut r, &a, &b);
        assert_eq!(big(&r), big(&a) + big(&b));
        assert_eq!(eq(&a, &a), 1);
        let mut a2 = a.clone();
        a2[4] ^= 1 << 40;
        assert_eq!(eq(&a, &a2), 0);
        assert_eq!(eq(&[7, 0, 0], &[7]), 1);
        assert_eq!(eq(&[7, 0, 1], &[7]), 0);
        for (x, y) in [(&a, &a2), (&a2, &a), (&a, &a)] {
            assert_eq!(less_than(x, y), u64::from(big(x) < big(y)));
        }
        assert_eq!(less_than(&b, &a), u64::from(big(&b) < big(&a)));
        assert_eq!(less_than(&[7, 0, 1], &[8]), 0);
        assert_eq!(less_than(&[7], &[0, 1]), 1);
        let mut out = [0u8; 11];
        write_be(&[0x0102_0304_0506_0708, 0x090a_0b0c], &mut out);
        assert_eq!(out, [0x0a, 0x0b, 0x0c, 1, 2, 3, 4, 5, 6, 7, 8]);
        let mut out = [0xffu8; 20];
        write_be(&[0x0102], &mut out);
        assert_eq!(&out[..18], &[0u8; 18]);
        assert_eq!(&out[18..], &[1, 2]);
    }
}
