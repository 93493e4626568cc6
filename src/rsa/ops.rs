//! Raw RSA operations on the CPU with libcrypto's constant-time Montgomery arithmetic.
//!
//! Private operations (RFC 8017 §5.1.2 RSADP / §5.2.1 RSASP1):
//! 1. blind the input with a fresh-or-refreshed pair (r^e, r^-1),
//! 2. exponentiate with CRT (`BN_mod_exp_mont_consttime_x2` when p and q have the same size),
//! 3. verify the result with the public exponent before releasing it; on mismatch (a fault)
//!    recompute without CRT, as OpenSSL does,
//! 4. unblind.

use crate::error::{KaeError, KaeResult};
use crate::ffi::bn::{arith, BigNum, BnCtx};
use crate::ffi::libctx::LibCtx;
use crate::rsa::ct_limbs::{self, BigNumLimbs, Limbs};
use crate::rsa::key::{Blinding, CrtCache, RsaKey};

/// A blinding pair is refreshed (new r) after this many uses; in between it is updated by
/// squaring, which is much cheaper than an inversion.
pub(crate) const BLINDING_MAX_USES: u32 = 32;
/// Blinding pairs kept per key (one per concurrently signing thread is enough).
const BLINDING_POOL: usize = 16;
/// Blinding pairs made at a time: one inversion serves them all (a pool's worth; libcrypto's
/// inversion costs several times a pair's other work).
pub(crate) const BLINDING_BATCH: usize = BLINDING_POOL;
/// Draws of r for one blinding pair before giving up (as OpenSSL).
const BLINDING_TRIES: usize = 32;

/// Converts the big-endian (public) input to a number and checks it is below the modulus.
fn input_below_modulus(key: &RsaKey, input: &[u8]) -> KaeResult<BigNum> {
    let n = key.n()?;
    if input.len() > key.size() {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    let x = BigNum::from_be_bytes(input, false)?;
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
    let x = input_below_modulus(key, input)?;
    let ctx = BnCtx::new_public()?;
    let mont = key.mont()?;
    let mut r = BigNum::new()?;
    arith::mod_exp_vartime(&mut r, &x, key.e()?, key.n()?, &mont.n, &ctx)?;
    r.write_be_padded(out)
}

/// Fresh pairs (r^e, r^-1) for uniform r in [1, n), `count` of them with one inversion.
/// libcrypto's inversion of a 2048-bit number costs about as much as the 32 private
/// operations a pair serves, constant-time or not, so it is shared (Montgomery's trick) and
/// blinded: t = r·s·R^-1 mod n for a second uniform s is uniform and independent of r, so
/// the t's and their products are public, and r^-1 = t^-1·s·R^-1.
///
/// When one of the 2·`count` draws shares a factor with n (a modulus with small factors, as
/// an imported key may have), the batch has no inverse: then a single pair is made the way
/// OpenSSL makes one, with at most `BLINDING_TRIES` draws.
fn new_blindings(key: &RsaKey, ctx: &BnCtx, count: usize) -> KaeResult<Vec<Blinding>> {
    let n = key.n()?;
    let mont = key.mont()?;
    let ln = &mont.ln;
    let w = ln.width();
    let mut r = BigNum::new_secret()?;
    let mut s = BigNum::new_secret()?;
    let mut drawn = Vec::with_capacity(count);
    let mut t = Vec::with_capacity(count);
    for _ in 0..count {
        arith::priv_rand_range(&mut r, n, ctx)?;
        arith::priv_rand_range(&mut s, n, ctx)?;
        let (rl, sl) = (r.to_limbs(w)?, s.to_limbs(w)?);
        let ti = ln.mont_mul(&rl, &sl);
        ct_limbs::declassify_words(&ti);
        t.push(BigNum::from_limbs(&ti, false)?);
        drawn.push((rl, sl));
    }
    let inverses: Vec<(Limbs, Limbs)> = match invert_all(&t, n, ctx)? {
        Some(t_inv) => drawn
            .into_iter()
            .zip(&t_inv)
            .map(|((rl, sl), ti)| Ok((rl, ln.mont_mul(&ti.to_limbs(w)?, &sl))))
            .collect::<KaeResult<_>>()?,
        None => vec![one_blinding_inverse(n, w, ctx)?],
    };
    let e = key.e()?;
    let e = e.to_limbs(ct_limbs::declassify_usize(e.num_bits()).div_ceil(64).max(1))?;
    let mut pairs = Vec::with_capacity(inverses.len());
    for (rl, ri) in &inverses {
        // r^e in Montgomery form, constant time in r (e is public).
        pairs.push(Blinding {
            a: ln.pow_public_exp(&ln.to_mont(rl), &e),
            ai: ln.to_mont(ri),
            uses: 0,
            pid: std::process::id(),
        });
    }
    key.blindings_made
        .fetch_add(pairs.len() as u32, std::sync::atomic::Ordering::Relaxed);
    Ok(pairs)
}

/// One (r, r^-1 mod n) by libcrypto's constant-time inversion of r, drawing r again when it
/// has no inverse, at most `BLINDING_TRIES` times (OpenSSL's BN_BLINDING_create_param does
/// the same; past that the modulus is not one a private key can have).
fn one_blinding_inverse(n: &BigNum, w: usize, ctx: &BnCtx) -> KaeResult<(Limbs, Limbs)> {
    let mut r = BigNum::new_secret()?;
    let mut ri = BigNum::new_secret()?;
    for _ in 0..BLINDING_TRIES {
        arith::priv_rand_range(&mut r, n, ctx)?;
        if arith::mod_inverse(&mut ri, &r, n, ctx).is_ok() {
            return Ok((r.to_limbs(w)?, ri.to_limbs(w)?));
        }
    }
    Err(KaeError::BignumFailure)
}

/// The inverses mod n of public numbers, with one inversion (Montgomery's trick); `None`
/// when one of them has none. Variable time: for public values only.
fn invert_all(t: &[BigNum], n: &BigNum, ctx: &BnCtx) -> KaeResult<Option<Vec<BigNum>>> {
    // prefix[i] = t[0]·…·t[i] mod n
    let mut prefix: Vec<BigNum> = Vec::with_capacity(t.len());
    for (i, ti) in t.iter().enumerate() {
        let mut p = BigNum::new()?;
        match i {
            0 => arith::nnmod(&mut p, ti, n, ctx)?,
            _ => arith::mod_mul(&mut p, &prefix[i - 1], ti, n, ctx)?,
        }
        prefix.push(p);
    }
    let Some(last) = prefix.last() else {
        return Ok(Some(Vec::new()));
    };
    // inv = (t[0]·…·t[i])^-1, walking i down.
    let mut inv = BigNum::new()?;
    if arith::mod_inverse(&mut inv, last, n, ctx).is_err() {
        return Ok(None);
    }
    // Collected from the last to the first, then put in order.
    let mut out = Vec::with_capacity(t.len());
    for i in (1..t.len()).rev() {
        let mut ti_inv = BigNum::new()?;
        arith::mod_mul(&mut ti_inv, &inv, &prefix[i - 1], n, ctx)?;
        out.push(ti_inv);
        let mut next = BigNum::new()?;
        arith::mod_mul(&mut next, &inv, &t[i], n, ctx)?;
        inv = next;
    }
    out.push(inv);
    out.reverse();
    Ok(Some(out))
}

/// A pooled pair of this process, updated by squaring, or a new one (made with
/// `BLINDING_BATCH - 1` others that go to the pool). Pairs made by another process (the
/// parent of a fork) are dropped: reusing them would give parent and child the same
/// sequence of blinding factors; so are pairs used `BLINDING_MAX_USES` times.
fn take_blinding(key: &RsaKey, ctx: &BnCtx) -> KaeResult<Blinding> {
    let pid = std::process::id();
    let pooled = {
        let mut v = key.blindings.lock();
        v.retain(|b| b.pid == pid && b.uses < BLINDING_MAX_USES);
        v.pop()
    };
    if let Some(mut b) = pooled {
        // (r^e)^2 = (r^2)^e and (r^-1)^2 = (r^2)^-1: still a matching pair.
        let ln = &key.mont()?.ln;
        b.a = ln.mont_mul(&b.a, &b.a);
        b.ai = ln.mont_mul(&b.ai, &b.ai);
        b.uses += 1;
        return Ok(b);
    }
    let mut fresh = new_blindings(key, ctx, BLINDING_BATCH)?;
    let first = fresh.pop().ok_or(KaeError::BignumFailure)?;
    pool_blindings(key, fresh);
    Ok(first)
}

/// `count` fresh pairs (r^e mod n, r⁻¹ mod n) as plain numbers of n's width, made as
/// [`new_blindings`] makes them, for backends that blind in their own arithmetic.
pub fn blinding_values(key: &RsaKey, count: usize) -> KaeResult<Vec<(Limbs, Limbs)>> {
    let ctx = key.bn_ctx()?;
    let ln = &key.mont()?.ln;
    let mut one: Limbs = zeroize::Zeroizing::new(vec![0u64; ln.width()]);
    one[0] = 1;
    Ok(new_blindings(key, &ctx, count)?
        .iter()
        .map(|b| (ln.mont_mul(&b.a, &one), ln.mont_mul(&b.ai, &one)))
        .collect())
}

fn return_blinding(key: &RsaKey, b: Blinding) {
    pool_blindings(key, [b]);
}

/// Pools `pairs` under one lock, as many as the pool has room for (the rest are wiped).
fn pool_blindings(key: &RsaKey, pairs: impl IntoIterator<Item = Blinding>) {
    let mut v = key.blindings.lock();
    let room = BLINDING_POOL.saturating_sub(v.len());
    v.extend(pairs.into_iter().take(room));
}

/// y = x^d mod n without CRT (libcrypto's constant-time exponentiation).
fn exp_with_d(key: &RsaKey, x: &[u64], ctx: &BnCtx) -> KaeResult<Limbs> {
    let mont = key.mont()?;
    let d = key.d.as_ref().ok_or(KaeError::MissingPrivateKey)?;
    let xb = BigNum::from_limbs(x, true)?;
    let mut y = BigNum::new_secret()?;
    arith::mod_exp_consttime(&mut y, &xb, d, key.n()?, &mont.n, ctx)?;
    y.to_limbs(mont.ln.width())
}

/// The fault check: 1 when y^e ≡ x (mod n), 0 otherwise, compared in constant time.
/// y^e is computed with libcrypto's variable-time exponentiation (e is public; y is the
/// blinded result, so its timing says nothing about the unblinded one).
fn verify_limbs(key: &RsaKey, y: &[u64], x: &[u64], ctx: &BnCtx) -> KaeResult<u64> {
    let mont = key.mont()?;
    let yb = BigNum::from_limbs(y, false)?;
    let mut check = BigNum::new_secure_unflagged()?;
    arith::mod_exp_vartime(&mut check, &yb, key.e()?, key.n()?, &mont.n, ctx)?;
    Ok(ct_limbs::eq(&check.to_limbs(mont.ln.width())?, x))
}

/// A private operation between its CPU steps: the blinded input and the blinding pair that
/// undoes it. Made by [`prepare_private`], taken by [`finish_private`]; in between a backend
/// exponentiates `blinded()` (CRT on the CPU, one HPRE request, one lane of a batch). Both
/// parts are zeroized on drop.
pub struct PrivateJob {
    xb: Limbs,
    blinding: Blinding,
}

impl PrivateJob {
    /// The blinded input x·r^e mod n, as limbs of n's width (what the backend raises to d).
    pub fn blinded(&self) -> &[u64] {
        &self.xb
    }
}

/// Step 1 of RSADP / RSASP1: checks the key, the output size and the input (below n), and
/// blinds the input. Everything a backend needs is in the returned job.
pub fn prepare_private(key: &RsaKey, input: &[u8], out_len: usize) -> KaeResult<PrivateJob> {
    let x = private_input(key, input, out_len)?; // blinding and the fault check need e
    let ctx = key.bn_ctx()?; // blinding draws from the owning instance's library context
    let ln = &key.mont()?.ln;
    // Blind: xb = x · r^e mod n (a = r^e·R in Montgomery form).
    let blinding = take_blinding(key, &ctx)?;
    let xb = ln.mont_mul(&x, &blinding.a);
    Ok(PrivateJob { xb, blinding })
}

/// [`prepare_private`]'s checks (the same errors) without the blinding, for backends that
/// blind in their own arithmetic: the input as limbs of n's width.
pub fn private_input(key: &RsaKey, input: &[u8], out_len: usize) -> KaeResult<Limbs> {
    if !key.has_private() {
        return Err(KaeError::MissingPrivateKey);
    }
    key.check_public_shape()?;
    if out_len != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let ln = &key.mont()?.ln;
    if input.len() > key.size() {
        return Err(KaeError::DataTooLargeForKeySize);
    }
    // x < n in constant time: only the outcome (an error or not) is declassified.
    let x = be_limbs(input, ln.width());
    if ct_limbs::declassify_u64(ct_limbs::less_than(&x, ln.limbs())) != 1 {
        return Err(KaeError::DataTooLargeForModulus);
    }
    Ok(x)
}

/// Step 2 on the CPU: y = xb^d mod n, with CRT when the key has it.
pub fn exponentiate_cpu(key: &RsaKey, job: &PrivateJob) -> KaeResult<Limbs> {
    let ctx = key.bn_ctx()?;
    match &key.mont()?.crt {
        Some(crt) => crt_exp(key, &job.xb, crt, &ctx),
        None => exp_with_d(key, &job.xb, &ctx),
    }
}

/// Step 2 on the CPU for an input blinded on another thread (a request of
/// `OpKind::ExponentiateBlinded`): `xb` and `out` are big-endian of the modulus size.
pub fn exponentiate_blinded(key: &RsaKey, xb: &[u8], out: &mut [u8]) -> KaeResult<()> {
    if xb.len() != key.size() || out.len() != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let ctx = key.bn_ctx()?;
    let x = limbs_from_be(key, xb)?;
    let y = match &key.mont()?.crt {
        Some(crt) => crt_exp(key, &x, crt, &ctx)?,
        None => exp_with_d(key, &x, &ctx)?,
    };
    ct_limbs::write_be(&y, out);
    Ok(())
}

/// A big-endian value of the modulus size as limbs of n's width, in constant time.
pub fn limbs_from_be(key: &RsaKey, be: &[u8]) -> KaeResult<Limbs> {
    let width = key.mont()?.ln.width();
    if be.len() != key.size() || be.len().div_ceil(8) != width {
        return Err(KaeError::InvalidLength);
    }
    Ok(be_limbs(be, width))
}

/// Big-endian bytes (at most `width` words of them) as `width` limbs, in constant time.
fn be_limbs(be: &[u8], width: usize) -> Limbs {
    let mut le = zeroize::Zeroizing::new(vec![0u8; width * 8]);
    for (d, s) in le.iter_mut().zip(be.iter().rev()) {
        *d = *s;
    }
    ct_limbs::from_le_bytes(&le)
}

/// A private operation's result, and how many results its fault check rejected on the way
/// (each recomputed without CRT). The arithmetic records nothing: its caller counts them.
#[must_use = "the caller counts the faults"]
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    pub result: KaeResult<()>,
    pub crt_faults: u32,
}

impl Checked {
    fn failed(e: KaeError) -> Checked {
        Checked {
            result: Err(e),
            crt_faults: 0,
        }
    }
}

/// Steps 3 and 4, always on the CPU whoever exponentiated: the fault check with e (in
/// constant time; only its declassified outcome drives a branch), then unblinding and the
/// fixed-length copy out. `y` is the backend's result, or `None` when the backend failed: the
/// exponentiation is then redone on the CPU. A result that fails the check is recomputed
/// without CRT (as OpenSSL does) and checked by libcrypto; if that fails too, nothing is
/// released.
pub fn finish_private(key: &RsaKey, job: PrivateJob, y: Option<Limbs>, out: &mut [u8]) -> Checked {
    let mut crt_faults = 0;
    let result = check_and_unblind(key, job, y, out, &mut crt_faults);
    Checked { result, crt_faults }
}

fn check_and_unblind(
    key: &RsaKey,
    job: PrivateJob,
    y: Option<Limbs>,
    out: &mut [u8],
    crt_faults: &mut u32,
) -> KaeResult<()> {
    if out.len() != key.size() {
        return Err(KaeError::BufferTooSmall);
    }
    let ctx = key.bn_ctx()?;
    let mont = key.mont()?;
    let width = mont.ln.width();
    let mut y = match y {
        Some(y) if y.len() == width => y,
        _ => exponentiate_cpu(key, &job)?,
    };
    if ct_limbs::declassify_u64(verify_limbs(key, &y, &job.xb, &ctx)?) != 1 {
        *crt_faults += 1;
        crate::logging::warn_rate_limited(
            "crt-fault",
            format_args!(
                "RSA {} result failed verification; recomputing without CRT",
                if mont.crt.is_some() { "CRT" } else { "plain" }
            ),
        );
        y = exp_with_d(key, &job.xb, &ctx)?;
        if ct_limbs::declassify_u64(verify_limbs(key, &y, &job.xb, &ctx)?) != 1 {
            return Err(KaeError::FaultDetected);
        }
    }
    // Unblind (y · r^-1 mod n) and copy out: fixed length, straight from the limbs.
    let PrivateJob { xb: _, blinding } = job;
    let m = mont.ln.mont_mul(&y, &blinding.ai);
    return_blinding(key, blinding);
    ct_limbs::write_be(&m, out);
    Ok(())
}

/// RSADP / RSASP1 with blinding, CRT and the fault check, all on the calling thread:
/// [`prepare_private`] → [`exponentiate_cpu`] → [`finish_private`]. `out.len()` must be the
/// modulus size; `input` must be below n (checked).
///
/// After blinding, every step in kae's code is constant time (`ct_limbs`: no branch, index
/// or length depends on a secret); the exponentiations are libcrypto's constant-time ones.
/// The only secret-derived value that drives a branch is the (declassified) outcome of the
/// fault check.
pub fn private_op(key: &RsaKey, input: &[u8], out: &mut [u8]) -> Checked {
    let job = match prepare_private(key, input, out.len()) {
        Ok(job) => job,
        Err(e) => return Checked::failed(e),
    };
    match exponentiate_cpu(key, &job) {
        Ok(y) => finish_private(key, job, Some(y), out),
        Err(e) => Checked::failed(e),
    }
}

/// Garner's CRT recombination (RFC 8017 §5.1.2 step 2.b):
/// m1 = c^dP mod p, m2 = c^dQ mod q, h = qInv·(m1 − m2) mod p, m = m2 + q·h.
///
/// Everything but the two exponentiations is done on fixed-width limbs in constant time
/// (`ct_limbs`): c mod p and c mod q, m2 mod p (m2 may exceed p when q > p, by any width),
/// the subtraction, the product with qInv, q·h and the final addition. Widths are the primes'
/// limb counts. Returns m as limbs of n's width.
fn crt_exp(key: &RsaKey, c: &[u64], crt: &CrtCache, ctx: &BnCtx) -> KaeResult<Limbs> {
    let (p, q) = (&key.primes[0], &key.primes[1]);
    let (dp, dq) = (&key.exps[0], &key.exps[1]);
    let (lp, lq) = (&crt.lp, &crt.lq);
    let cp = BigNum::from_limbs(&lp.reduce(c), true)?;
    let cq = BigNum::from_limbs(&lq.reduce(c), true)?;
    let mut m1 = BigNum::new_secret()?;
    let mut m2 = BigNum::new_secret()?;
    if crt.same_bits {
        // One call for both halves: libcrypto runs them side by side (AVX-512 IFMA when the
        // CPU has it and the size is supported, two plain consttime exponentiations otherwise).
        arith::mod_exp_consttime_x2(
            &mut m1, &cp, dp, p, &crt.p, &mut m2, &cq, dq, q, &crt.q, ctx,
        )?;
    } else {
        arith::mod_exp_consttime(&mut m1, &cp, dp, p, &crt.p, ctx)?;
        arith::mod_exp_consttime(&mut m2, &cq, dq, q, &crt.q, ctx)?;
    }
    let m1 = m1.to_limbs(lp.width())?;
    let m2 = m2.to_limbs(lq.width())?;
    Ok(recombine(
        &m1,
        &m2,
        lp,
        lq,
        &crt.qinv_mont,
        key.mont()?.ln.width(),
    ))
}

/// m = m2 + q·((m1 − m2) · qInv mod p) for m1 < p, m2 < q, qinv_mont = qInv·R mod p;
/// (public for the secret-taint test, tests/ct_taint_crt.rs)
/// `wn` limbs (the modulus's width; the value is below n = p·q).
#[doc(hidden)]
pub fn recombine(
    m1: &[u64],
    m2: &[u64],
    lp: &ct_limbs::Modulus,
    lq: &ct_limbs::Modulus,
    qinv_mont: &[u64],
    wn: usize,
) -> Limbs {
    let d = lp.mod_sub(m1, &lp.reduce(m2));
    let h = lp.mont_mul(&d, qinv_mont); // d·qInv·R·R^-1
    let qh = ct_limbs::mul(lq.limbs(), &h);
    let mut m: Limbs = zeroize::Zeroizing::new(vec![0u64; wn]);
    ct_limbs::add_into(&mut m, &qh, m2);
    m
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
    let mut n = BigNum::new()?;
    arith::mul(&mut n, &p, &q, ctx)?;
    let mut p1 = p.dup(true)?;
    arith::sub_word(&mut p1, 1)?;
    let mut q1 = q.dup(true)?;
    arith::sub_word(&mut q1, 1)?;
    // λ(n) = (p−1)(q−1) / gcd(p−1, q−1)
    let mut g = BigNum::new_secret()?;
    arith::gcd(&mut g, &p1, &q1, ctx)?;
    let mut prod = BigNum::new_secret()?;
    arith::mul(&mut prod, &p1, &q1, ctx)?;
    let mut lambda = BigNum::new_secret()?;
    arith::div(&mut lambda, &prod, &g, ctx)?;
    let mut d = BigNum::new_secret()?;
    arith::mod_inverse(&mut d, e_value, &lambda, ctx)?;
    let mut dp = BigNum::new_secret()?;
    let mut dq = BigNum::new_secret()?;
    arith::nnmod(&mut dp, &d, &p1, ctx)?;
    arith::nnmod(&mut dq, &d, &q1, ctx)?;
    let mut qinv = BigNum::new_secret()?;
    arith::mod_inverse(&mut qinv, &q, &p, ctx)?;
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
    private_op(key, &msg, &mut sig)
        .result
        .map_err(|_| KaeError::PairwiseCheckFailed)?;
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
    generate_in(LibCtx::DEFAULT, kind, bits, e_value)
}

/// [`generate`] with primes and the pairwise test's blinding drawn from `source` (a provider
/// instance's library context), which the key keeps ([`RsaKey::set_rand_source`]).
pub fn generate_in(
    source: LibCtx,
    kind: crate::rsa::KeyType,
    bits: usize,
    e_value: &BigNum,
) -> KaeResult<RsaKey> {
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
    let ctx = BnCtx::new_for(source)?;
    let pbits = bits.div_ceil(2);
    let qbits = bits - pbits;
    let one_gcd = |x: &BigNum| -> KaeResult<bool> {
        let mut x1 = x.dup(true)?;
        arith::sub_word(&mut x1, 1)?;
        let mut g = BigNum::new()?;
        arith::gcd(&mut g, &x1, e_value, &ctx)?;
        Ok(g.is_one())
    };
    for _attempt in 0..64 {
        let mut p = BigNum::new_secret()?;
        let mut q = BigNum::new_secret()?;
        loop {
            arith::generate_prime(&mut p, pbits, &ctx)?;
            if one_gcd(&p)? {
                break;
            }
        }
        loop {
            arith::generate_prime(&mut q, qbits, &ctx)?;
            if one_gcd(&q)? {
                break;
            }
        }
        // |p − q| > 2^(bits/2 − 100) (FIPS 186-4 B.3.3 step 5.4).
        let mut diff = BigNum::new_secret()?;
        arith::sub(&mut diff, &p, &q)?;
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
        let mut key = key;
        key.set_rand_source(source);
        pairwise_test(&key)?;
        return Ok(key);
    }
    Err(KaeError::KeyGenFailed)
}

/// m^d mod n by num-bigint, at the key's size: the tests' oracle, which shares no code with
/// kae or libcrypto.
#[cfg(test)]
pub(crate) fn oracle_private(key: &RsaKey, m: &[u8]) -> Vec<u8> {
    use num_bigint::BigUint;
    let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
    let d = key.d.as_ref().expect("private key");
    let y = BigUint::from_bytes_be(m).modpow(&big(d), &big(key.n().unwrap()));
    let mut out = y.to_bytes_be();
    while out.len() < key.size() {
        out.insert(0, 0);
    }
    out
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
        private_op(key, &m, &mut s).result.unwrap();
        assert_eq!(s, oracle_private(key, &m));
        public_op(key, &s, &mut back).unwrap();
        assert_eq!(back, m);
        key.validate(true, true, true).unwrap();
    }

    /// Each pair of a batch, checked with num-bigint: a = r^e·R and ai = r^-1·R mod n, so
    /// (ai·R^-1)^e · (a·R^-1) = 1 mod n; and no two share r.
    #[test]
    fn a_batch_of_blinding_pairs_shares_one_inversion_and_each_pair_matches() {
        use num_bigint::BigUint;
        let key = key1024();
        let ctx = key.bn_ctx().unwrap();
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let (n, e) = (big(key.n().unwrap()), big(key.e().unwrap()));
        let radix = BigUint::from(1u8) << (key.bits().div_ceil(64) * 64);
        let radix_inv = radix.modinv(&n).unwrap();
        let limbs = |l: &[u64]| BigUint::from_bytes_le(&ct_limbs::to_le_bytes(l)) * &radix_inv % &n;
        for count in [1, 2, BLINDING_BATCH] {
            let pairs = new_blindings(key, &ctx, count).unwrap();
            assert_eq!(pairs.len(), count);
            let mut seen = Vec::new();
            for (i, b) in pairs.iter().enumerate() {
                let (a, ai) = (limbs(&b.a), limbs(&b.ai));
                assert_eq!(
                    ai.modpow(&e, &n) * a % &n,
                    BigUint::from(1u8),
                    "pair {i} of {count}"
                );
                assert!(!seen.contains(&ai), "pair {i} of {count} repeats r");
                seen.push(ai);
            }
        }
    }

    /// A modulus with small factors (an imported key may have one) leaves most batches of
    /// 16 draws without an inverse: pairs still come, a single one, and match.
    #[test]
    fn blinding_pairs_for_a_modulus_with_small_factors() {
        use num_bigint::BigUint;
        let base = key1024();
        let ctx = base.bn_ctx().unwrap();
        let mut n = BigNum::new().unwrap();
        let small = BigNum::from_u64(3 * 5 * 7 * 11 * 13 * 17 * 19 * 23 * 29 * 31).unwrap();
        arith::mul(&mut n, base.n().unwrap(), &small, &ctx).unwrap();
        let mut key = RsaKey::empty(KeyType::Rsa);
        key.n = Some(n);
        key.e = Some(BigNum::from_u64(65537).unwrap());
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let (n, e) = (big(key.n().unwrap()), big(key.e().unwrap()));
        let radix = BigUint::from(1u8) << (key.bits().div_ceil(64) * 64);
        let radix_inv = radix.modinv(&n).unwrap();
        let limbs = |l: &[u64]| BigUint::from_bytes_le(&ct_limbs::to_le_bytes(l)) * &radix_inv % &n;
        for _ in 0..20 {
            let pairs = new_blindings(&key, &ctx, BLINDING_BATCH).unwrap();
            assert!(!pairs.is_empty());
            for b in &pairs {
                let (a, ai) = (limbs(&b.a), limbs(&b.ai));
                assert_eq!(ai.modpow(&e, &n) * a % &n, BigUint::from(1u8));
            }
        }
    }

    #[test]
    fn invert_all_agrees_with_num_bigint() {
        use num_bigint::BigUint;
        let ctx = BnCtx::new().unwrap();
        let n = BigNum::from_u64(1_000_003 * 999_983).unwrap();
        let nums: Vec<BigNum> = [2u64, 3, 1_234_567, 999_999_999]
            .iter()
            .map(|&v| BigNum::from_u64(v).unwrap())
            .collect();
        let inv = invert_all(&nums, &n, &ctx).unwrap().unwrap();
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        for (x, xi) in nums.iter().zip(&inv) {
            assert_eq!(big(xi), big(x).modinv(&big(&n)).unwrap());
        }
        // 1_000_003 shares a factor with n: no inverse for the set.
        let with_factor = [
            BigNum::from_u64(5).unwrap(),
            BigNum::from_u64(1_000_003).unwrap(),
        ];
        assert!(invert_all(&with_factor, &n, &ctx).unwrap().is_none());
    }

    #[test]
    fn crt_fault_is_caught_and_recomputed_without_crt() {
        let good = key1024();
        let mut bad = good.dup(true, true, true).unwrap();
        // Corrupt dP: the CRT half mod p is now wrong, so y^e != x.
        arith::add(
            &mut bad.exps[0],
            &good.exps[0],
            &BigNum::from_u64(2).unwrap(),
        )
        .unwrap();
        bad.exps[0].set_consttime();
        let m = sample(good.size(), 11);
        let want = oracle_private(good, &m);
        let mut got = vec![0u8; good.size()];
        let checked = private_op(&bad, &m, &mut got);
        assert_eq!(checked.result, Ok(()));
        assert_eq!(
            got, want,
            "fallback result must equal the correct signature"
        );
        assert_eq!(checked.crt_faults, 1, "the fault is reported");
        assert!(
            bad.validate(true, true, true).is_err(),
            "validation must reject the corrupted key"
        );
    }

    /// The backend seam: whatever a backend hands to `finish_private` (its correct result, a
    /// wrong one, one of the wrong width, or nothing after a failure), the released output is
    /// the correct signature, and a wrong result is reported as a fault.
    #[test]
    fn finish_private_releases_only_checked_results_whatever_the_backend_gave() {
        let key = key1024();
        let m = sample(key.size(), 13);
        let want = oracle_private(key, &m);
        let width = key.mont().unwrap().ln.width();
        let cases: [(&str, fn(&RsaKey, &PrivateJob, usize) -> Option<Limbs>, bool); 4] = [
            (
                "correct",
                |k, j, _| Some(exponentiate_cpu(k, j).unwrap()),
                false,
            ),
            ("failed backend", |_, _, _| None, false),
            (
                "wrong width",
                |_, _, w| Some(zeroize::Zeroizing::new(vec![1u64; w + 1])),
                false,
            ),
            (
                "wrong value",
                |k, j, _| {
                    let mut y = exponentiate_cpu(k, j).unwrap();
                    y[0] ^= 1;
                    Some(y)
                },
                true,
            ),
        ];
        for (what, backend, counted) in cases {
            let job = prepare_private(key, &m, key.size()).unwrap();
            let again = prepare_private(key, &m, key.size()).unwrap();
            assert_ne!(
                job.blinded(),
                again.blinded(),
                "{what}: each job is blinded afresh"
            );
            drop(again);
            let y = backend(key, &job, width);
            let mut got = vec![0u8; key.size()];
            let checked = finish_private(key, job, y, &mut got);
            assert_eq!(checked.result, Ok(()), "{what}");
            assert_eq!(got, want, "{what}");
            assert_eq!(
                checked.crt_faults,
                u32::from(counted),
                "{what}: the fault is reported"
            );
        }
        // Size checks happen before any work.
        assert_eq!(
            prepare_private(key, &m, key.size() - 1).err(),
            Some(KaeError::BufferTooSmall)
        );
    }

    /// Primes of very different sizes (384 and 640 bits): n has more than twice p's limbs and
    /// m2 is wider than p, so both reductions mod p need more than one Montgomery step. The
    /// CRT result itself must be right, not just repaired by the fault check.
    #[test]
    fn unbalanced_primes_use_crt_correctly() {
        let ctx = BnCtx::new().unwrap();
        let e = BigNum::from_u64(65537).unwrap();
        let (mut p, mut q) = (BigNum::new_secret().unwrap(), BigNum::new_secret().unwrap());
        let key = loop {
            arith::generate_prime(&mut p, 384, &ctx).unwrap();
            arith::generate_prime(&mut q, 640, &ctx).unwrap();
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
            let wn = mont.ln.width();
            let via_crt = crt_exp(&key, &c.to_limbs(wn).unwrap(), crt, &ctx).unwrap();
            let mut via_d = BigNum::new().unwrap();
            let d = key.d.as_ref().unwrap();
            arith::mod_exp_consttime(&mut via_d, &c, d, key.n().unwrap(), &mont.n, &ctx).unwrap();
            assert_eq!(*via_crt, *via_d.to_limbs(wn).unwrap());
            let (mut a, mut b, mut back) = (
                vec![0u8; key.size()],
                vec![0u8; key.size()],
                vec![0u8; key.size()],
            );
            private_op(&key, &m, &mut a).result.unwrap();
            private_op(&plain, &m, &mut b).result.unwrap();
            assert_eq!(a, oracle_private(&key, &m));
            assert_eq!(b, a);
            public_op(&key, &a, &mut back).unwrap();
            assert_eq!(back, m);
        }
    }

    /// Garner's recombination on limbs against num-bigint: prime-size orders both ways,
    /// unequal widths, and the edges m1 = m2 mod p (h = 0), m1 < m2 mod p, m = 0, m = pq − 1.
    #[test]
    fn recombine_matches_the_oracle() {
        use crate::rsa::ct_limbs::{from_le_bytes, Modulus};
        use num_bigint::BigUint;
        let limbs = |x: &BigUint, w: usize| {
            let mut b = x.to_bytes_le();
            b.resize(8 * w, 0);
            from_le_bytes(&b)
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let odd = |next: &mut dyn FnMut() -> u64, w: usize, top: u64| {
            let mut v: Vec<u64> = (0..w).map(|_| next()).collect();
            v[w - 1] = (v[w - 1] >> 2) | top;
            v[0] |= 1;
            BigUint::from_bytes_le(&v.iter().flat_map(|l| l.to_le_bytes()).collect::<Vec<_>>())
        };
        let mut checked = 0;
        // (p limbs, q limbs): equal, p > q, p < q, very unequal both ways
        for (wp, wq, ptop, qtop) in [
            (2, 2, 1 << 63, 1 << 62),
            (2, 2, 1 << 62, 1 << 63),
            (3, 2, 1 << 63, 1 << 63),
            (2, 3, 1 << 63, 1 << 63),
            (1, 4, 1 << 63, 1 << 63),
            (4, 1, 1 << 63, 1 << 63),
        ] {
            let p = odd(&mut next, wp, ptop);
            // any odd q coprime to p will do (primality plays no part in the recombination)
            let (q, qinv) = loop {
                let q = odd(&mut next, wq, qtop);
                if let Some(qinv) = q.modinv(&p) {
                    break (q, qinv);
                }
            };
            let n = &p * &q;
            let wn = (n.bits() as usize).div_ceil(64);
            let (lp, lq) = (Modulus::new(limbs(&p, wp)), Modulus::new(limbs(&q, wq)));
            let qinv_mont = lp.to_mont(&limbs(&qinv, wp));
            let small = std::cmp::min(&p, &q) - 1u8;
            let mut cases = vec![
                BigUint::from(0u8),
                &n - 1u8,
                small.clone(), // m1 = m2 (h = 0)
                &p + 1u8,      // m1 = 1, m2 = p+1 mod q
                &q + 5u8,      // m2 = 5
            ];
            for _ in 0..40 {
                let r: Vec<u64> = (0..wn + 1).map(|_| next()).collect();
                let r = BigUint::from_bytes_le(
                    &r.iter().flat_map(|l| l.to_le_bytes()).collect::<Vec<_>>(),
                );
                cases.push(r % &n);
            }
            let mut below = 0;
            for m in cases {
                let m = m % &n;
                let (m1, m2) = (&m % &p, &m % &q);
                if m1 < (&m2 % &p) {
                    below += 1;
                }
                let got = recombine(&limbs(&m1, wp), &limbs(&m2, wq), &lp, &lq, &qinv_mont, wn);
                let got = BigUint::from_bytes_le(
                    &got.iter().flat_map(|l| l.to_le_bytes()).collect::<Vec<_>>(),
                );
                assert_eq!(got, m, "p {wp} limbs, q {wq} limbs");
                checked += 1;
            }
            assert!(below > 0, "some cases must have m1 < m2 mod p");
        }
        assert_eq!(checked, 6 * 45);
    }

    #[test]
    fn key_without_d_refuses_private_operations() {
        let good = key1024();
        let mut bad = good.dup(true, true, true).unwrap();
        bad.d = None;
        arith::add(
            &mut bad.exps[1],
            &good.exps[1],
            &BigNum::from_u64(2).unwrap(),
        )
        .unwrap();
        let m = sample(good.size(), 13);
        let mut out = vec![0u8; good.size()];
        assert_eq!(
            private_op(&bad, &m, &mut out).result,
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
        private_op(good, &m, &mut a).result.unwrap();
        private_op(&plain, &m, &mut b).result.unwrap();
        assert_eq!(a, oracle_private(good, &m));
        assert_eq!(b, a);
    }

    /// Blinding, seen from outside: every result equals an independent m^d mod n (num-bigint),
    /// and the key's pool shows a batch of pairs, the one in use taken and returned by each
    /// operation, squared on reuse (uses 1, 2, …) and replaced by the next fresh pair after
    /// `BLINDING_MAX_USES` uses. The
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
            private_op(&key, &m, &mut out).result.unwrap();
            assert_eq!(out, oracle_private(&key, &m), "operation {i}: wrong result");
            let pool = key.blindings.lock();
            // A batch of fresh pairs, one fewer once each is used up; the one in use on top.
            // The first pair serves as made (uses 0) and after each squaring (1 to MAX); the
            // next ones come from the pool and are squared before their first use.
            let max = BLINDING_MAX_USES as usize;
            let exhausted = if (i as usize) <= max {
                0
            } else {
                1 + (i as usize - max - 1) / max
            };
            assert_eq!(
                pool.len(),
                BLINDING_BATCH - exhausted,
                "operation {i}: the pair was not returned to the pool"
            );
            let top = pool.last().unwrap();
            let limbs = |l: &[u64]| BigUint::from_bytes_le(&ct_limbs::to_le_bytes(l));
            let (a, ai) = (limbs(&top.a), limbs(&top.ai));
            let plain_a = &a * &radix_inv % &n;
            let plain_ai = &ai * &radix_inv % &n;
            assert_eq!(
                plain_ai.modpow(&e, &n) * plain_a % &n,
                BigUint::from(1u8),
                "operation {i}: blinding pair does not match"
            );
            assert_ne!(Some(&a), last_a.as_ref(), "operation {i}: pair not updated");
            last_a = Some(a);
            uses_seen.push(top.uses);
        }
        // Fresh pair (0), reused and squared up to the limit, then the next of the batch.
        let want: Vec<u32> = (0..=BLINDING_MAX_USES)
            .chain(1..=BLINDING_MAX_USES)
            .chain(1..=3)
            .collect();
        assert_eq!(uses_seen, want, "uses per operation");
    }

    #[test]
    fn input_not_below_modulus_is_rejected() {
        let key = key1024();
        let n = key.n().unwrap().to_be_bytes().unwrap();
        let mut out = vec![0u8; key.size()];
        assert_eq!(
            private_op(key, &n, &mut out).result,
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
