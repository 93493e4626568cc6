//! Raw RSA operations on the CPU with libcrypto's constant-time Montgomery arithmetic.
//!
//! Private operations (RFC 8017 §5.1.2 RSADP / §5.2.1 RSASP1):
//! 1. blind the input with a fresh-or-refreshed pair (r^e, r^-1),
//! 2. exponentiate with CRT (`BN_mod_exp_mont_consttime_x2` when p and q have the same size),
//! 3. verify the result with the public exponent before releasing it; on mismatch (a fault)
//!    recompute without CRT, as OpenSSL does,
//! 4. unblind.

use crate::error::{KaeError, KaeResult};
use crate::ffi::bn::MontCtx;
use crate::ffi::bn::{arith, BigNum, BnCtx};
use crate::rsa::key::{Blinding, CrtCache, RsaKey};

/// A blinding pair is refreshed (new r) after this many uses; in between it is updated by
/// squaring, which is much cheaper than an inversion.
const BLINDING_MAX_USES: u32 = 32;
/// Blinding pairs kept per key (one per concurrently signing thread is enough).
const BLINDING_POOL: usize = 16;

/// Converts the big-endian input to a number and checks it is below the modulus.
fn input_below_modulus(key: &RsaKey, input: &[u8], secret: bool) -> KaeResult<BigNum> {
    let n = key.n()?;
    if input.len() > key.size() {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    let x = BigNum::from_be_bytes(input, secret)?;
    if x.cmp_vartime(n) != core::cmp::Ordering::Less {
        return Err(KaeError::DataTooLargeForModulus);
    }
    Ok(x)
}

/// RSAEP / RSAVP1: out = input^e mod n. `out.len()` must be the modulus size.
pub fn public_op(key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    key.check_public_shape()?;
    if out.len() != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let x = input_below_modulus(key, input, false)?;
    let ctx = BnCtx::new_public()?;
    let mont = key.mont()?;
    let r = BigNum::new()?;
    arith::mod_exp_vartime(&r, &x, key.e()?, key.n()?, &mont.n, &ctx)?;
    r.write_be_padded(out)
}

fn new_blinding(key: &RsaKey, ctx: &BnCtx) -> KaeResult<Blinding> {
    let n = key.n()?;
    let mont = &key.mont()?.n;
    let r = BigNum::new_secret()?;
    let ri = BigNum::new_secret()?;
    // r uniform in [1, n): retry the (negligible) zero case and non-invertible r.
    loop {
        arith::priv_rand_range(&r, n, ctx)?;
        if r.is_zero() {
            continue;
        }
        if arith::mod_inverse(&ri, &r, n, ctx).is_ok() {
            break;
        }
    }
    let a = BigNum::new_secret()?;
    arith::mod_exp_vartime(&a, &r, key.e()?, n, mont, ctx)?; // r^e: r is random, e public
    let a_m = BigNum::new_secret()?;
    let ai_m = BigNum::new_secret()?;
    arith::to_mont(&a_m, &a, mont, ctx)?;
    arith::to_mont(&ai_m, &ri, mont, ctx)?;
    Ok(Blinding {
        a: a_m,
        ai: ai_m,
        uses: 0,
    })
}

fn take_blinding(key: &RsaKey, ctx: &BnCtx) -> KaeResult<Blinding> {
    let pooled = key.blindings.lock().ok().and_then(|mut v| v.pop());
    match pooled {
        Some(mut b) if b.uses < BLINDING_MAX_USES => {
            // (r^e)^2 = (r^2)^e and (r^-1)^2 = (r^2)^-1: still a matching pair.
            let mont = &key.mont()?.n;
            let a2 = BigNum::new_secret()?;
            let ai2 = BigNum::new_secret()?;
            arith::mod_mul_mont(&a2, &b.a, &b.a, mont, ctx)?;
            arith::mod_mul_mont(&ai2, &b.ai, &b.ai, mont, ctx)?;
            b.a = a2;
            b.ai = ai2;
            b.uses += 1;
            Ok(b)
        }
        _ => new_blinding(key, ctx),
    }
}

fn return_blinding(key: &RsaKey, b: Blinding) {
    if let Ok(mut v) = key.blindings.lock() {
        if v.len() < BLINDING_POOL {
            v.push(b);
        }
    }
}

/// RSADP / RSASP1 with blinding, CRT and the fault check. `out.len()` must be the modulus
/// size; `input` must be below n (checked).
pub fn private_op(key: &RsaKey, input: &[u8], out: &mut [u8]) -> KaeResult<()> {
    if !key.has_private() {
        return Err(KaeError::MissingPrivateKey);
    }
    key.check_public_shape()?; // blinding and the fault check need e
    if out.len() != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let n = key.n()?;
    let e = key.e()?;
    let ctx = BnCtx::new()?;
    let mont = key.mont()?;
    let x = input_below_modulus(key, input, true)?;

    // 1. Blind: xb = x · r^e mod n.
    let blinding = take_blinding(key, &ctx)?;
    let xb = BigNum::new_secret()?;
    arith::mod_mul_mont(&xb, &x, &blinding.a, &mont.n, &ctx)?;

    // 2. Exponentiate (into an unflagged number: see the fault check).
    let y = BigNum::new_secure_unflagged()?;
    let used_crt = if let Some(crt) = &mont.crt {
        crt_exp(key, &xb, &y, crt, &ctx)?;
        true
    } else {
        let d = key.d.as_ref().ok_or(KaeError::MissingPrivateKey)?;
        arith::mod_exp_consttime(&y, &xb, d, n, &mont.n, &ctx)?;
        false
    };

    // 3. Fault check: y^e must give back the blinded input.
    let check = BigNum::new()?;
    arith::mod_exp_vartime(&check, &y, e, n, &mont.n, &ctx)?;
    if !arith::eq_consttime(&check, &xb, key.size())? {
        crate::stats::note_crt_fault();
        log::warn!(
            "kae: RSA {} result failed verification; recomputing without CRT",
            if used_crt { "CRT" } else { "plain" }
        );
        let d = key.d.as_ref().ok_or(KaeError::FaultDetected)?;
        arith::mod_exp_consttime(&y, &xb, d, n, &mont.n, &ctx)?;
        arith::mod_exp_vartime(&check, &y, e, n, &mont.n, &ctx)?;
        if !arith::eq_consttime(&check, &xb, key.size())? {
            return Err(KaeError::FaultDetected);
        }
    }

    // 4. Unblind: y · r^-1 mod n.
    let out_bn = BigNum::new_secret()?;
    arith::mod_mul_mont(&out_bn, &y, &blinding.ai, &mont.n, &ctx)?;
    return_blinding(key, blinding);
    out_bn.write_be_padded(out)
}

/// Garner's CRT recombination (RFC 8017 §5.1.2 step 2.b):
/// m1 = c^dP mod p, m2 = c^dQ mod q, h = qInv·(m1 − m2) mod p, m = m2 + q·h.
///
/// Reductions use Montgomery conversions instead of division (for primes of equal word size
/// c < n < p·R, so a Montgomery reduction followed by a conversion back gives c mod p in
/// constant time), as OpenSSL does.
fn crt_exp(key: &RsaKey, c: &BigNum, m: &BigNum, crt: &CrtCache, ctx: &BnCtx) -> KaeResult<()> {
    let (p, q) = (&key.primes[0], &key.primes[1]);
    let (dp, dq) = (&key.exps[0], &key.exps[1]);
    // x mod m for x of at most `x_bits` bits (a public bound). A Montgomery reduction reads
    // at most twice the modulus's words, so it is only right when x fits in them; keys with
    // very unequal primes take libcrypto's constant-time division instead.
    let reduce = |r: &BigNum, x: &BigNum, x_bits: usize, m: &BigNum, mont: &MontCtx| {
        if x_bits.div_ceil(64) <= 2 * m.num_bits().div_ceil(64) {
            arith::from_mont(r, x, mont, ctx)?;
            arith::to_mont(r, r, mont, ctx)
        } else {
            arith::nnmod(r, x, m, ctx)
        }
    };
    let n_bits = key.bits();
    let cp = BigNum::new_secret()?;
    let cq = BigNum::new_secret()?;
    reduce(&cp, c, n_bits, p, &crt.p)?;
    reduce(&cq, c, n_bits, q, &crt.q)?;
    let m1 = BigNum::new_secret()?;
    let m2 = BigNum::new_secret()?;
    if p.num_bits() == q.num_bits() {
        // One call for both halves: libcrypto runs them side by side (AVX-512 IFMA when the
        // CPU has it and the size is supported, two plain consttime exponentiations otherwise).
        arith::mod_exp_consttime_x2(&m1, &cp, dp, p, &crt.p, &m2, &cq, dq, q, &crt.q, ctx)?;
    } else {
        arith::mod_exp_consttime(&m1, &cp, dp, p, &crt.p, ctx)?;
        arith::mod_exp_consttime(&m2, &cq, dq, q, &crt.q, ctx)?;
    }
    // h = (m1 − (m2 mod p)) · qInv mod p; m2 < q may exceed p when q > p, so reduce it first.
    let m2p = BigNum::new_secret()?;
    reduce(&m2p, &m2, q.num_bits(), p, &crt.p)?;
    let h = BigNum::new_secret()?;
    arith::mod_sub_quick(&h, &m1, &m2p, p)?;
    arith::mod_mul_mont(&h, &h, &crt.qinv_mont, &crt.p, ctx)?;
    // m = m2 + q·h  (< n: h ≤ p−1, m2 ≤ q−1)
    let qh = BigNum::new_secret()?;
    arith::mul(&qh, &h, q, ctx)?;
    arith::add(m, &qh, &m2)
}

/// The two-prime key with primes p, q and public exponent e: n = p·q, d = e^-1 mod λ(n),
/// the CRT exponents and qInv = q^-1 mod p. No size or distance checks (the caller's job).
pub(crate) fn key_from_primes(
    kind: crate::rsa::KeyType,
    p: BigNum,
    q: BigNum,
    e_value: &BigNum,
    ctx: &BnCtx,
) -> KaeResult<RsaKey> {
    let n = BigNum::new()?;
    arith::mul(&n, &p, &q, ctx)?;
    let p1 = p.dup(true)?;
    arith::sub_word(&p1, 1)?;
    let q1 = q.dup(true)?;
    arith::sub_word(&q1, 1)?;
    // λ(n) = (p−1)(q−1) / gcd(p−1, q−1)
    let g = BigNum::new_secret()?;
    arith::gcd(&g, &p1, &q1, ctx)?;
    let prod = BigNum::new_secret()?;
    arith::mul(&prod, &p1, &q1, ctx)?;
    let lambda = BigNum::new_secret()?;
    arith::div(&lambda, &prod, &g, ctx)?;
    let d = BigNum::new_secret()?;
    arith::mod_inverse(&d, e_value, &lambda, ctx)?;
    let dp = BigNum::new_secret()?;
    let dq = BigNum::new_secret()?;
    arith::nnmod(&dp, &d, &p1, ctx)?;
    arith::nnmod(&dq, &d, &q1, ctx)?;
    let qinv = BigNum::new_secret()?;
    arith::mod_inverse(&qinv, &q, &p, ctx)?;
    let mut key = RsaKey::empty(kind);
    key.n = Some(n);
    key.e = Some(e_value.dup(false)?);
    key.d = Some(d);
    key.primes = vec![p, q];
    key.exps = vec![dp, dq];
    key.coeffs = vec![qinv];
    Ok(key)
}

/// Pairwise consistency test: a private operation on a random value must invert the public one.
pub fn pairwise_test(key: &RsaKey) -> KaeResult<()> {
    let k = key.size();
    let mut msg = vec![0u8; k];
    // A fixed, non-trivial value below n: 0x00 0x01 0x02 ... (leading zero keeps it < n).
    for (i, b) in msg.iter_mut().enumerate().skip(1) {
        *b = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    let mut sig = vec![0u8; k];
    let mut back = vec![0u8; k];
    private_op(key, &msg, &mut sig).map_err(|_| KaeError::PairwiseCheckFailed)?;
    public_op(key, &sig, &mut back).map_err(|_| KaeError::PairwiseCheckFailed)?;
    if back != msg {
        return Err(KaeError::PairwiseCheckFailed);
    }
    Ok(())
}

/// Key generation (FIPS 186-4 B.3.3 style): two primes of half the size each with the top two
/// bits set (so n has exactly `bits` bits), gcd(p−1, e) = gcd(q−1, e) = 1, |p − q| large,
/// d = e^-1 mod lcm(p−1, q−1) with d > 2^(bits/2).
pub fn generate(kind: crate::rsa::KeyType, bits: usize, e_value: &BigNum) -> KaeResult<RsaKey> {
    use crate::rsa::key::{MAX_MODULUS_BITS, MIN_MODULUS_BITS};
    if bits < MIN_MODULUS_BITS {
        return Err(KaeError::KeyTooSmall);
    }
    if bits > MAX_MODULUS_BITS {
        return Err(KaeError::KeyTooLarge);
    }
    if !e_value.is_odd() || e_value.is_one() || e_value.num_bits() > MAX_MODULUS_BITS / 2 {
        return Err(KaeError::BadPublicExponent);
    }
    let ctx = BnCtx::new()?;
    let pbits = bits.div_ceil(2);
    let qbits = bits - pbits;
    let one_gcd = |x: &BigNum| -> KaeResult<bool> {
        let x1 = x.dup(true)?;
        arith::sub_word(&x1, 1)?;
        let g = BigNum::new()?;
        arith::gcd(&g, &x1, e_value, &ctx)?;
        Ok(g.is_one())
    };
    for _attempt in 0..64 {
        let p = BigNum::new_secret()?;
        let q = BigNum::new_secret()?;
        loop {
            arith::generate_prime(&p, pbits, &ctx)?;
            if one_gcd(&p)? {
                break;
            }
        }
        loop {
            arith::generate_prime(&q, qbits, &ctx)?;
            if one_gcd(&q)? {
                break;
            }
        }
        // |p − q| > 2^(bits/2 − 100) (FIPS 186-4 B.3.3 step 5.4).
        let diff = BigNum::new_secret()?;
        arith::sub(&diff, &p, &q)?;
        if diff.num_bits() + 100 <= bits / 2 {
            continue;
        }
        // Keep p > q (conventional; qInv = q^-1 mod p).
        let (p, q) = if p.cmp_vartime(&q) == core::cmp::Ordering::Less {
            (q, p)
        } else {
            (p, q)
        };
        let key = key_from_primes(kind, p, q, e_value, &ctx)?;
        if key.bits() != bits || key.d.as_ref().map_or(0, |d| d.num_bits()) <= bits / 2 {
            continue;
        }
        pairwise_test(&key)?;
        return Ok(key);
    }
    Err(KaeError::KeyGenFailed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rsa::KeyType;
    use std::sync::OnceLock;

    fn key1024() -> &'static RsaKey {
        static K: OnceLock<RsaKey> = OnceLock::new();
        K.get_or_init(|| generate(KeyType::Rsa, 1024, &BigNum::from_u64(65537).unwrap()).unwrap())
    }

    fn sample(k: usize, seed: u8) -> Vec<u8> {
        let mut m: Vec<u8> = (0..k)
            .map(|i| (i as u8).wrapping_mul(seed).wrapping_add(3))
            .collect();
        m[0] = 0; // below n
        m
    }

    #[test]
    fn private_then_public_is_identity() {
        let key = key1024();
        assert_eq!(key.bits(), 1024);
        let m = sample(key.size(), 7);
        let mut s = vec![0u8; key.size()];
        let mut back = vec![0u8; key.size()];
        private_op(key, &m, &mut s).unwrap();
        assert_ne!(s, m);
        public_op(key, &s, &mut back).unwrap();
        assert_eq!(back, m);
        key.validate(true, true, true).unwrap();
    }

    #[test]
    fn crt_fault_is_caught_and_recomputed_without_crt() {
        let good = key1024();
        let bad = good.dup(true, true, true).unwrap();
        // Corrupt dP: the CRT half mod p is now wrong, so y^e != x.
        arith::add(&bad.exps[0], &good.exps[0], &BigNum::from_u64(2).unwrap()).unwrap();
        bad.exps[0].set_consttime();
        let m = sample(good.size(), 11);
        let mut want = vec![0u8; good.size()];
        let mut got = vec![0u8; good.size()];
        private_op(good, &m, &mut want).unwrap();
        let faults = || crate::stats::snapshot().get(crate::stats::idx::CRT_FAULTS);
        let before = faults();
        private_op(&bad, &m, &mut got).unwrap();
        assert_eq!(
            got, want,
            "fallback result must equal the correct signature"
        );
        assert!(faults() > before, "fault counter must rise");
        assert!(
            bad.validate(true, true, true).is_err(),
            "validation must reject the corrupted key"
        );
    }

    /// Primes of very different sizes (384 and 640 bits): c mod p cannot be taken with a
    /// Montgomery reduction (n has more than twice p's words). The CRT result itself must be
    /// right, not just repaired by the fault check.
    #[test]
    fn unbalanced_primes_use_crt_correctly() {
        let ctx = BnCtx::new().unwrap();
        let e = BigNum::from_u64(65537).unwrap();
        let (p, q) = (BigNum::new_secret().unwrap(), BigNum::new_secret().unwrap());
        let key = loop {
            arith::generate_prime(&p, 384, &ctx).unwrap();
            arith::generate_prime(&q, 640, &ctx).unwrap();
            let (p, q) = (p.dup(true).unwrap(), q.dup(true).unwrap());
            // e must be invertible mod λ(n); retry the rare primes where it is not.
            if let Ok(k) = key_from_primes(KeyType::Rsa, p, q, &e, &ctx) {
                break k;
            }
        };
        assert_eq!(key.bits(), 1024);
        let mut plain = key.dup(true, true, true).unwrap();
        plain.primes.clear();
        plain.exps.clear();
        plain.coeffs.clear();
        let mont = key.mont().unwrap();
        let crt = mont.crt.as_ref().expect("CRT parts");
        for seed in 1..=8u8 {
            let m = sample(key.size(), seed);
            // The CRT exponentiation itself (no fault check behind it) against plain m^d.
            let c = BigNum::from_be_bytes(&m, true).unwrap();
            let (via_crt, via_d) = (BigNum::new().unwrap(), BigNum::new().unwrap());
            crt_exp(&key, &c, &via_crt, crt, &ctx).unwrap();
            let d = key.d.as_ref().unwrap();
            arith::mod_exp_consttime(&via_d, &c, d, key.n().unwrap(), &mont.n, &ctx).unwrap();
            assert_eq!(via_crt.to_be_bytes().unwrap(), via_d.to_be_bytes().unwrap());
            let (mut a, mut b, mut back) = (
                vec![0u8; key.size()],
                vec![0u8; key.size()],
                vec![0u8; key.size()],
            );
            private_op(&key, &m, &mut a).unwrap();
            private_op(&plain, &m, &mut b).unwrap();
            assert_eq!(a, b);
            public_op(&key, &a, &mut back).unwrap();
            assert_eq!(back, m);
        }
    }

    #[test]
    fn key_without_d_refuses_private_operations() {
        let good = key1024();
        let mut bad = good.dup(true, true, true).unwrap();
        bad.d = None;
        arith::add(&bad.exps[1], &good.exps[1], &BigNum::from_u64(2).unwrap()).unwrap();
        let m = sample(good.size(), 13);
        let mut out = vec![0u8; good.size()];
        assert_eq!(
            private_op(&bad, &m, &mut out),
            Err(KaeError::MissingPrivateKey)
        );
    }

    #[test]
    fn non_crt_key_gives_same_result() {
        let good = key1024();
        let mut plain = good.dup(true, true, true).unwrap();
        plain.primes.clear();
        plain.exps.clear();
        plain.coeffs.clear();
        let m = sample(good.size(), 5);
        let (mut a, mut b) = (vec![0u8; good.size()], vec![0u8; good.size()]);
        private_op(good, &m, &mut a).unwrap();
        private_op(&plain, &m, &mut b).unwrap();
        assert_eq!(a, b);
    }

    /// m^d mod n computed by num-bigint: an oracle that shares no code with kae or libcrypto.
    fn oracle_private(key: &RsaKey, m: &[u8]) -> Vec<u8> {
        use num_bigint::BigUint;
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let (n, d) = (big(key.n().unwrap()), big(key.d.as_ref().unwrap()));
        let r = BigUint::from_bytes_be(m).modpow(&d, &n).to_bytes_be();
        let mut out = vec![0u8; key.size() - r.len()];
        out.extend_from_slice(&r);
        out
    }

    /// Blinding, seen from outside: every result equals an independent m^d mod n (num-bigint),
    /// and the key's pool shows one pair that is taken and returned by each operation, squared
    /// on reuse (uses 1, 2, …) and replaced by a fresh pair after `BLINDING_MAX_USES` uses. The
    /// pair stays matched: with R the Montgomery radix, a = r^e·R and ai = r^-1·R mod n, so
    /// (ai·R^-1)^e · (a·R^-1) = 1 mod n.
    #[test]
    fn blinding_pairs_are_reused_and_refreshed() {
        use num_bigint::BigUint;
        // A key of its own: the shared one's pool is used by tests running in parallel.
        let key = key1024().dup(true, true, true).unwrap();
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let (n, e) = (big(key.n().unwrap()), big(key.e().unwrap()));
        let radix = BigUint::from(1u8) << (key.bits().div_ceil(64) * 64);
        let radix_inv = radix.modinv(&n).expect("R invertible mod n");
        let mut uses_seen = Vec::new();
        let mut last_a: Option<BigUint> = None;
        for i in 0..(2 * BLINDING_MAX_USES + 4) {
            let m = sample(key.size(), 3 + i as u8);
            let mut out = vec![0u8; key.size()];
            private_op(&key, &m, &mut out).unwrap();
            assert_eq!(out, oracle_private(&key, &m), "operation {i}: wrong result");
            let pool = key.blindings.lock().unwrap();
            assert_eq!(
                pool.len(),
                1,
                "operation {i}: the pair was not returned to the pool"
            );
            let (a, ai) = (big(&pool[0].a), big(&pool[0].ai));
            let plain_a = &a * &radix_inv % &n;
            let plain_ai = &ai * &radix_inv % &n;
            assert_eq!(
                plain_ai.modpow(&e, &n) * plain_a % &n,
                BigUint::from(1u8),
                "operation {i}: blinding pair does not match"
            );
            assert_ne!(Some(&a), last_a.as_ref(), "operation {i}: pair not updated");
            last_a = Some(a);
            uses_seen.push(pool[0].uses);
        }
        // Fresh pair (0), reused and squared up to the limit, then a fresh one again.
        let want: Vec<u32> = (0..=BLINDING_MAX_USES)
            .chain(0..=BLINDING_MAX_USES)
            .chain(0..2)
            .collect();
        assert_eq!(uses_seen, want, "uses per operation");
    }

    #[test]
    fn input_not_below_modulus_is_rejected() {
        let key = key1024();
        let n = key.n().unwrap().to_be_bytes().unwrap();
        let mut out = vec![0u8; key.size()];
        assert_eq!(
            private_op(key, &n, &mut out),
            Err(KaeError::DataTooLargeForModulus)
        );
        assert_eq!(
            public_op(key, &n, &mut out),
            Err(KaeError::DataTooLargeForModulus)
        );
        let too_long = vec![1u8; key.size() + 1];
        assert_eq!(
            public_op(key, &too_long, &mut out),
            Err(KaeError::DataTooLargeForKeySize)
        );
    }

    #[test]
    fn keygen_rejects_bad_parameters() {
        let e = BigNum::from_u64(65537).unwrap();
        assert!(matches!(
            generate(KeyType::Rsa, 256, &e),
            Err(KaeError::KeyTooSmall)
        ));
        let even = BigNum::from_u64(65536).unwrap();
        assert!(matches!(
            generate(KeyType::Rsa, 1024, &even),
            Err(KaeError::BadPublicExponent)
        ));
        let odd = generate(KeyType::Rsa, 1025, &e).unwrap();
        assert_eq!(odd.bits(), 1025);
    }
}
