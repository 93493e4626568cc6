//! Multi-buffer modular exponentiation: eight independent `base^exp mod m` per call, in
//! radix 2^52 with the lanes interleaved, on AVX-512 IFMA (`vpmadd52luq`/`vpmadd52huq`).
//!
//! The safe API is [`mod_exp`]: up to eight [`Lane`]s of one [`Size`], numbers as
//! little-endian `u64` words (the layout of `rsa::ct_limbs`), results fully reduced. The
//! arithmetic is in `kernel` (methods and references in its docs), the lane operations in
//! `lanes`. [`Engine::Portable`] runs the same kernel on plain `u64`s: the reference the IFMA
//! lanes are tested against, and what tests and the secret-taint check use on a CPU without
//! IFMA. It is far slower than libcrypto's scalar code and is never picked for production.
//!
//! Everything here is constant time in the moduli, bases and exponents: only the size, the
//! lane count and `exp_bits` (public) shape loops and indices.

pub mod cpu;
pub(crate) mod kernel;
pub(crate) mod lanes;
#[cfg(target_arch = "x86_64")]
pub(crate) mod mont1;

use kernel::{ExpCall, Exponent};

use crate::error::{KaeError, KaeResult};
use crate::ffi::stack::on_kernel_stack;
use crate::rsa::ct_limbs::{self, Limbs, Work};
use zeroize::{Zeroize, Zeroizing};

pub use cpu::{IfmaToken, Squaring};
pub use lanes::ifma_available;

/// Lanes per call.
pub const LANES: usize = 8;

/// The modulus sizes the kernel takes: the CRT halves of RSA-1024 to RSA-4096.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B512,
    B1024,
    B1536,
    B2048,
}

impl Size {
    pub const ALL: [Size; 4] = [Size::B512, Size::B1024, Size::B1536, Size::B2048];

    /// Largest modulus, in bits.
    pub const fn bits(self) -> usize {
        match self {
            Size::B512 => 512,
            Size::B1024 => 1024,
            Size::B1536 => 1536,
            Size::B2048 => 2048,
        }
    }

    /// 64-bit words of an operand.
    pub const fn words(self) -> usize {
        self.bits() / 64
    }

    /// 52-bit limbs: the smallest n with 52n ≥ bits + 2 (R ≥ 4m for almost-Montgomery).
    pub const fn limbs52(self) -> usize {
        (self.bits() + 2).div_ceil(52)
    }

    /// The smallest size class that holds a modulus of `bits` bits.
    pub fn for_bits(bits: usize) -> Option<Size> {
        Size::ALL.into_iter().find(|s| bits <= s.bits())
    }
}

// The sizes whose private exponentiations take the half products keep their headroom.
const _: () = {
    let mut i = 0;
    while i < Size::ALL.len() {
        let s = Size::ALL[i];
        assert!(
            s.limbs52() > kernel::FUSED_MAX
                || 52 * s.limbs52() >= s.bits() + kernel::HALF_SLACK_BITS
        );
        i += 1;
    }
};

/// Which implementation of the lanes runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// AVX-512 IFMA, with the token that CPU detection made ([`Engine::ifma`]).
    Ifma(IfmaToken),
    /// Plain `u64` arithmetic (tests, and the secret-taint check without IFMA).
    Portable,
    /// [`Engine::Portable`] with the squarings by columns ([`Squaring::Columns`], the IFMA
    /// engine's on Intel; the portable engine's are Karatsuba's): for the secret-taint check,
    /// which runs under valgrind, without AVX-512. Never configured.
    #[doc(hidden)]
    PortableColumns,
}

impl Engine {
    /// The IFMA engine when this CPU has AVX-512F and AVX-512 IFMA.
    pub fn ifma() -> Option<Engine> {
        IfmaToken::detect().map(Engine::Ifma)
    }

    pub fn name(self) -> &'static str {
        match self {
            Engine::Ifma(_) => "avx512-ifma",
            Engine::Portable => "portable",
            Engine::PortableColumns => "portable (squarings: columns)",
        }
    }
}

/// Why this CPU cannot run the IFMA kernel, or None when it can (for start-up lines).
pub fn ifma_missing_reason() -> Option<String> {
    if ifma_available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let f = std::arch::is_x86_feature_detected!("avx512f");
        Some(if f {
            "this CPU has AVX-512F but not AVX-512 IFMA".to_string()
        } else {
            "this CPU has no AVX-512 (the kernel needs AVX-512F and AVX-512 IFMA)".to_string()
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Some("AVX-512 IFMA is x86_64 only".to_string())
    }
}

/// One lane: `base^exp mod modulus`. `modulus` and `base` have `size.words()` words; `exp`
/// has at least `exp_bits` bits (the same word count in every lane).
#[derive(Clone, Copy)]
pub struct Lane<'a> {
    pub modulus: &'a [u64],
    pub base: &'a [u64],
    pub exp: &'a [u64],
}

/// Repacks little-endian limbs of `from` bits into `out` limbs of `to` bits (both ≤ 64).
/// Shifts by public amounts only.
fn repack(input: &[u64], from: u32, out: &mut [u64], to: u32) {
    let mut acc: u128 = 0;
    let mut have: u32 = 0;
    let mut src = input.iter();
    let to_mask: u128 = (1u128 << to) - 1;
    for o in out.iter_mut() {
        while have < to {
            let next = src.next().copied().unwrap_or(0) as u128; // length: public
            acc |= next << have;
            have += from;
        }
        *o = (acc & to_mask) as u64;
        acc >>= to;
        have -= to;
    }
    acc.zeroize();
}

/// Copies lane-major values into the kernel's interleaved layout, `limbs` entries per lane:
/// 64-bit words repacked into 52-bit limbs when `words_to_limbs`, copied as they are otherwise
/// (the exponent's words). Lanes past `lanes.len()` repeat lane 0.
fn interleave(lanes: &[&[u64]], words_to_limbs: bool, limbs: usize) -> Zeroizing<Vec<[u64; 8]>> {
    let mut v = Zeroizing::new(vec![[0u64; LANES]; limbs]);
    // One lane's limbs: on the stack up to the largest size class's limbs.
    let mut one = Work::<{ Size::B2048.limbs52() }>::new(limbs);
    let one = one.limbs();
    for lane in 0..LANES {
        let src = lanes[if lane < lanes.len() { lane } else { 0 }];
        if words_to_limbs {
            repack(src, 64, one, 52);
        } else {
            one.fill(0);
            one[..src.len()].copy_from_slice(src);
        }
        for (j, l) in one.iter().enumerate() {
            v[j][lane] = *l;
        }
    }
    v
}

/// Not API: one [`mont1`] product, t = a·b·2^(−64w) + (0 or m) in w + 1 words, with an
/// assumed token: the emulator's entry (examples/ifma_emulate.rs) runs it under an instruction
/// emulator on machines without IFMA. `n0` = −m⁻¹ mod 2^64. False when the width is not
/// supported.
///
/// # Safety
/// The CPU (real or emulated) runs AVX-512F and AVX-512 IFMA instructions.
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub unsafe fn mont1_product_assumed(
    m: &[u64],
    n0: u64,
    a: &[u64],
    b: &[u64],
    t: &mut [u64],
) -> bool {
    // SAFETY: this function's contract is assume's.
    let token = unsafe { IfmaToken::assume() };
    match mont1::Prepared::new(token, m, n0) {
        Some(p) => {
            p.product(a, b, t);
            true
        }
        None => false,
    }
}

/// Not API: the IFMA kernel (R² mod m, then the exponentiation) on its own interleaved layout (`limbs[j][lane]`: 52-bit limbs for
/// `m`, `base` and `out`, 64-bit words for `exp`), for `examples/ifma_emulate.rs`, which runs
/// the compiled IFMA code under an instruction emulator (`scripts/ifma-emulate.sh`) and
/// compares it with [`exp_portable_interleaved`]. No checks beyond the lengths: `m` must be
/// odd and above 1 in every lane.
///
/// # Safety
/// The CPU (real or emulated) runs AVX-512F and AVX-512 IFMA instructions.
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub unsafe fn exp_ifma_interleaved(
    m: &[[u64; LANES]],
    base: &[[u64; LANES]],
    exp: &[[u64; LANES]],
    exp_bits: usize,
    out: &mut [[u64; LANES]],
) {
    // SAFETY: this function's contract is assume's: the CPU running the kernel executes AVX-512F
    // and AVX-512 IFMA instructions.
    let token = unsafe { IfmaToken::assume() };
    exp_interleaved(
        m,
        base,
        exp,
        exp_bits,
        out,
        |m, k0, rr| kernel::r_squared_ifma(token, m, k0, rr),
        |call, out| kernel::exp_ifma(token, call, out),
    )
}

/// Not API: the portable twin of [`exp_ifma_interleaved`] (same layout and conditions).
#[doc(hidden)]
pub fn exp_portable_interleaved(
    m: &[[u64; LANES]],
    base: &[[u64; LANES]],
    exp: &[[u64; LANES]],
    exp_bits: usize,
    out: &mut [[u64; LANES]],
) {
    exp_interleaved(
        m,
        base,
        exp,
        exp_bits,
        out,
        kernel::r_squared_portable,
        kernel::exp_portable::<true>,
    )
}

/// The body of both interleaved entry points, on the engine whose R² and exponentiation
/// `r_squared` and `exp_n` run.
fn exp_interleaved(
    m: &[[u64; LANES]],
    base: &[[u64; LANES]],
    exp: &[[u64; LANES]],
    exp_bits: usize,
    out: &mut [[u64; LANES]],
    r_squared: impl FnOnce(&[[u64; LANES]], &[u64; LANES], &mut [[u64; LANES]]),
    exp_n: impl FnOnce(&ExpCall<'_>, &mut [[u64; LANES]]),
) {
    assert!(m.len() == base.len() && m.len() == out.len() && exp.len() * 64 >= exp_bits);
    let k0 = kernel::neg_inv52_lanes(m);
    let mut rr = vec![[0u64; LANES]; m.len()];
    r_squared(m, &k0, &mut rr);
    let call = ExpCall {
        kind: Exponent::Secret,
        m,
        k0: &k0,
        rr: &rr,
        base,
        exp,
        exp_bits,
    };
    exp_n(&call, out)
}

/// `base^exp mod modulus` for each lane, fully reduced, as `size.words()` words each.
///
/// Errors (public facts only): no lane or more than 8, a width that does not match `size`,
/// exponent words that differ between lanes or hold fewer than `exp_bits` bits, an even
/// modulus or a modulus of 1 (any lane: see [`mod_exp_per_lane`] for errors per lane).
pub fn mod_exp(
    engine: Engine,
    size: Size,
    lanes: &[Lane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<Limbs>> {
    mod_exp_per_lane(engine, size, lanes, exp_bits)?
        .into_iter()
        .collect()
}

/// [`mod_exp`] with the modulus checked per lane: a lane whose modulus is even or 1 gets
/// `InvalidModulus` and the other lanes their results (one bad key does not fail the call's
/// other requests). The outer error is for what concerns the whole call (lane count, widths).
/// Prepares the moduli in the same call; a caller that keeps them ([`Prepared`]) uses
/// [`mod_exp_prepared`].
pub fn mod_exp_per_lane(
    engine: Engine,
    size: Size,
    lanes: &[Lane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<KaeResult<Limbs>>> {
    if lanes.is_empty() || lanes.len() > LANES {
        return Err(KaeError::InvalidLength);
    }
    let moduli: Vec<&[u64]> = lanes.iter().map(|l| l.modulus).collect();
    let prepared = Prepared::many(engine, size, &moduli)?;
    let lanes: Vec<PreparedLane> = lanes
        .iter()
        .zip(&prepared)
        .map(|(l, p)| PreparedLane {
            modulus: p,
            base: l.base,
            exp: l.exp,
        })
        .collect();
    mod_exp_prepared(engine, &lanes, exp_bits)
}

/// A modulus made ready for the kernel, once per key rather than once per call: its 52-bit
/// limbs, −m⁻¹ mod 2^52 and R² mod m (R = 2^(52N)). For an RSA prime
/// all three are secret: wiped when dropped.
pub struct Prepared {
    size: Size,
    /// False for an even modulus or 1 (a broken key), replaced by 3 in the kernel.
    usable: bool,
    limbs: Zeroizing<Vec<u64>>,
    k0: Zeroizing<u64>,
    rr: Zeroizing<Vec<u64>>,
}

impl Prepared {
    /// Prepares `moduli` (`size.words()` words each, at most 8) in one kernel call.
    pub fn many(engine: Engine, size: Size, moduli: &[&[u64]]) -> KaeResult<Vec<Prepared>> {
        let words = size.words();
        if moduli.is_empty() || moduli.len() > LANES || moduli.iter().any(|m| m.len() != words) {
            return Err(KaeError::InvalidLength);
        }
        // A bad modulus (a broken key: whether a prime is odd is no secret of a valid key) is
        // replaced by 3, and its lanes' results by the error.
        let mut three = vec![0u64; words];
        three[0] = 3;
        let mut one = vec![0u64; words];
        one[0] = 1;
        let usable: Vec<bool> = moduli
            .iter()
            .map(|m| {
                let odd = m[0] & 1;
                let is_one = ct_limbs::eq(m, &one);
                ct_limbs::declassify_u64(odd & (is_one ^ 1)) == 1
            })
            .collect();
        let moduli: Vec<&[u64]> = moduli
            .iter()
            .zip(&usable)
            .map(|(&m, &ok)| if ok { m } else { &three[..] })
            .collect();
        let n = size.limbs52();
        let m = interleave(&moduli, true, n);
        let mut k0 = Zeroizing::new(kernel::neg_inv52_lanes(&m));
        let mut rr = Zeroizing::new(vec![[0u64; LANES]; n]);
        on_kernel_stack(|| match engine {
            #[cfg(target_arch = "x86_64")]
            Engine::Ifma(token) => kernel::r_squared_ifma(token, &m, &k0, &mut rr),
            #[cfg(not(target_arch = "x86_64"))]
            Engine::Ifma(_) => unreachable!("no IFMA engine off x86_64"),
            Engine::Portable | Engine::PortableColumns => {
                kernel::r_squared_portable(&m, &k0, &mut rr)
            }
        })
        .ok_or(KaeError::OutOfMemory)?;
        let out = usable
            .iter()
            .enumerate()
            .map(|(lane, &usable)| Prepared {
                size,
                usable,
                limbs: lane_of(&m, lane),
                k0: Zeroizing::new(k0[lane]),
                rr: lane_of(&rr, lane),
            })
            .collect();
        k0.zeroize();
        Ok(out)
    }

    pub fn size(&self) -> Size {
        self.size
    }
}

/// One lane of [`mod_exp_prepared`]: `base^exp mod modulus`, the modulus prepared.
#[derive(Clone, Copy)]
pub struct PreparedLane<'a> {
    pub modulus: &'a Prepared,
    pub base: &'a [u64],
    pub exp: &'a [u64],
}

/// [`mod_exp_per_lane`] on prepared moduli (all of one size): no R² in the call.
pub fn mod_exp_prepared(
    engine: Engine,
    lanes: &[PreparedLane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<KaeResult<Limbs>>> {
    run_prepared(engine, Exponent::Secret, lanes, exp_bits)
}

/// [`mod_exp_prepared`] for public exponents (RSA's e: the fault check), lanes' exponents of
/// any length up to `exp_bits`: binary, one multiplication per bit that some lane has set,
/// time depending on the exponents only. The moduli may be public too (RSA moduli n).
pub fn mod_exp_public(
    engine: Engine,
    lanes: &[PreparedLane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<KaeResult<Limbs>>> {
    run_prepared(engine, Exponent::Public, lanes, exp_bits)
}

fn run_prepared(
    engine: Engine,
    kind: Exponent,
    lanes: &[PreparedLane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<KaeResult<Limbs>>> {
    let (moduli, bases, exps) = columns(lanes.iter().map(|l| (l.modulus, l.base, l.exp)));
    let call = CallLanes::new(&moduli, &bases, &exps, exp_bits)?;
    let mut out = call.zeros();
    on_kernel_stack(|| exponentiate(engine, kind, &call, &call.base, &mut out))
        .ok_or(KaeError::OutOfMemory)?;
    Ok(call.results(&out))
}

/// One lane of [`mod_exp_blinded`]: a private exponentiation with the lane's blinding pair.
pub struct BlindedLane<'a> {
    pub modulus: &'a Prepared,
    pub base: &'a [u64],
    pub exp: &'a [u64],
    pub blinding: &'a mut LaneBlinding,
}

/// A blinding pair of one lane's modulus m: a = r^e and a⁻¹ = r⁻¹ mod m for a random r, kept in
/// the lanes' Montgomery form (times R = 2^(52N), 52-bit limbs). Secret: wiped when dropped.
pub struct LaneBlinding {
    a: Zeroizing<Vec<u64>>,
    ai: Zeroizing<Vec<u64>>,
}

impl LaneBlinding {
    /// The pairs (a, a⁻¹) of `plain`, each pair below its prepared modulus in
    /// `size.words()` words, in the lanes' form: up to eight per kernel call.
    pub fn many(
        engine: Engine,
        plain: &[(&Prepared, &[u64], &[u64])],
    ) -> KaeResult<Vec<LaneBlinding>> {
        let mut made = Vec::with_capacity(plain.len());
        for chunk in plain.chunks(LANES) {
            let moduli: Vec<&Prepared> = chunk.iter().map(|c| c.0).collect();
            let a: Vec<&[u64]> = chunk.iter().map(|c| c.1).collect();
            let ai: Vec<&[u64]> = chunk.iter().map(|c| c.2).collect();
            let call = CallLanes::new(&moduli, &a, &[&[0u64][..]], 0)?;
            let ai = interleave_words(&ai, &moduli)?;
            let (mut a_r, mut ai_r) = (call.zeros(), call.zeros());
            on_kernel_stack(|| {
                mul_lanes(engine, &call, &call.base, &call.rr, &mut a_r);
                mul_lanes(engine, &call, &ai, &call.rr, &mut ai_r);
            })
            .ok_or(KaeError::OutOfMemory)?;
            made.extend((0..chunk.len()).map(|lane| LaneBlinding {
                a: lane_of(&a_r, lane),
                ai: lane_of(&ai_r, lane),
            }));
        }
        Ok(made)
    }
}

/// Private exponentiations blinded in the lanes: per lane y = (base·a)^exp·a⁻¹ mod m with the
/// lane's pair (a, a⁻¹), which then becomes (a², a⁻²), the same pair for r². For an RSA
/// prime m, its CRT exponent and a = r^e, y = base^exp mod m; the exponentiation sees only
/// base·a. Same checks and errors as [`mod_exp_prepared`]; a pair is squared only when the
/// call ran.
pub fn mod_exp_blinded(
    engine: Engine,
    lanes: &mut [BlindedLane<'_>],
    exp_bits: usize,
) -> KaeResult<Vec<KaeResult<Limbs>>> {
    let (moduli, bases, exps) = columns(lanes.iter().map(|l| (l.modulus, l.base, l.exp)));
    let call = CallLanes::new(&moduli, &bases, &exps, exp_bits)?;
    let n = moduli[0].size.limbs52();
    if lanes
        .iter()
        .any(|l| l.blinding.a.len() != n || l.blinding.ai.len() != n)
    {
        return Err(KaeError::InvalidLength);
    }
    let a = interleave(
        &lanes.iter().map(|l| &l.blinding.a[..]).collect::<Vec<_>>(),
        false,
        n,
    );
    let ai = interleave(
        &lanes.iter().map(|l| &l.blinding.ai[..]).collect::<Vec<_>>(),
        false,
        n,
    );
    let (mut blinded, mut a2, mut y, mut out, mut ai2) = (
        call.zeros(),
        call.zeros(),
        call.zeros(),
        call.zeros(),
        call.zeros(),
    );
    on_kernel_stack(|| {
        // a·R·R⁻¹ = a: base·a comes out plain, as the exponentiation takes its base.
        mul_lanes(engine, &call, &call.base, &a, &mut blinded);
        mul_lanes(engine, &call, &a, &a, &mut a2);
        exponentiate(engine, Exponent::Secret, &call, &blinded, &mut y);
        mul_lanes(engine, &call, &y, &ai, &mut out);
        mul_lanes(engine, &call, &ai, &ai, &mut ai2);
    })
    .ok_or(KaeError::OutOfMemory)?;
    for (lane, l) in lanes.iter_mut().enumerate() {
        l.blinding.a = lane_of(&a2, lane);
        l.blinding.ai = lane_of(&ai2, lane);
    }
    Ok(call.results(&out))
}

/// One kernel call's lanes, interleaved and checked: the prepared moduli, the bases (64-bit
/// words repacked into 52-bit limbs), the exponents.
struct CallLanes {
    usable: Vec<bool>,
    words: usize,
    k0: Zeroizing<[u64; LANES]>,
    m: Zeroizing<Vec<[u64; LANES]>>,
    rr: Zeroizing<Vec<[u64; LANES]>>,
    base: Zeroizing<Vec<[u64; LANES]>>,
    exp: Zeroizing<Vec<[u64; LANES]>>,
    exp_bits: usize,
}

impl CallLanes {
    /// Errors (public facts only): no lane or more than 8, moduli of different sizes, a base
    /// that is not the size's width, exponents of different word counts or fewer than
    /// `exp_bits` bits. `exps` may hold one exponent for every lane.
    fn new(
        moduli: &[&Prepared],
        bases: &[&[u64]],
        exps: &[&[u64]],
        exp_bits: usize,
    ) -> KaeResult<CallLanes> {
        let Some(first) = moduli.first() else {
            return Err(KaeError::InvalidLength);
        };
        let size = first.size;
        let words = size.words();
        let exp_words = exps.first().map_or(0, |e| e.len());
        if moduli.len() > LANES || exp_words * 64 < exp_bits || bases.len() != moduli.len() {
            return Err(KaeError::InvalidLength);
        }
        if moduli.iter().any(|m| m.size != size)
            || exps.iter().any(|e| e.len() != exp_words)
            || bases.iter().any(|b| b.len() != words)
        {
            return Err(KaeError::InvalidLength);
        }
        let n = size.limbs52();
        // Lanes past `moduli.len()` repeat lane 0 (as `interleave` does).
        let mut k0 = Zeroizing::new([0u64; LANES]);
        for (i, k) in k0.iter_mut().enumerate() {
            *k = *moduli[if i < moduli.len() { i } else { 0 }].k0;
        }
        let m = interleave(
            &moduli.iter().map(|p| &p.limbs[..]).collect::<Vec<_>>(),
            false,
            n,
        );
        let rr = interleave(
            &moduli.iter().map(|p| &p.rr[..]).collect::<Vec<_>>(),
            false,
            n,
        );
        Ok(CallLanes {
            usable: moduli.iter().map(|p| p.usable).collect(),
            words,
            k0,
            m,
            rr,
            base: interleave(bases, true, n),
            exp: interleave(exps, false, exp_words.max(1)),
            exp_bits,
        })
    }

    /// An interleaved number of the call's width, zero.
    fn zeros(&self) -> Zeroizing<Vec<[u64; LANES]>> {
        Zeroizing::new(vec![[0u64; LANES]; self.m.len()])
    }

    /// The lanes' results as `words` words each; `InvalidModulus` for an unusable modulus.
    fn results(&self, out: &kernel::Interleaved) -> Vec<KaeResult<Limbs>> {
        let mut results = Vec::with_capacity(self.usable.len());
        for (i, &usable) in self.usable.iter().enumerate() {
            let limbs = lane_of(out, i);
            let mut w: Limbs = Zeroizing::new(vec![0u64; self.words]);
            repack(&limbs, 52, &mut w, 64);
            results.push(if usable {
                Ok(w)
            } else {
                Err(KaeError::InvalidModulus)
            });
        }
        results
    }
}

/// The lanes' moduli, bases and exponents, each in a list of its own.
type Columns<'a> = (Vec<&'a Prepared>, Vec<&'a [u64]>, Vec<&'a [u64]>);

fn columns<'a>(lanes: impl Iterator<Item = (&'a Prepared, &'a [u64], &'a [u64])>) -> Columns<'a> {
    let (mut moduli, mut bases, mut exps) = (Vec::new(), Vec::new(), Vec::new());
    for (m, b, e) in lanes {
        moduli.push(m);
        bases.push(b);
        exps.push(e);
    }
    (moduli, bases, exps)
}

/// Values of the moduli's width (64-bit words) interleaved as 52-bit limbs.
fn interleave_words(
    values: &[&[u64]],
    moduli: &[&Prepared],
) -> KaeResult<Zeroizing<Vec<[u64; LANES]>>> {
    let size = moduli[0].size;
    if values.iter().any(|v| v.len() != size.words()) {
        return Err(KaeError::InvalidLength);
    }
    Ok(interleave(values, true, size.limbs52()))
}

/// Lane `lane` of an interleaved number.
fn lane_of(v: &kernel::Interleaved, lane: usize) -> Zeroizing<Vec<u64>> {
    Zeroizing::new(v.iter().map(|limb| limb[lane]).collect())
}

/// out = a·b·R⁻¹ mod m in every lane of `call`, fully reduced (a, b below m).
fn mul_lanes(
    engine: Engine,
    call: &CallLanes,
    a: &kernel::Interleaved,
    b: &kernel::Interleaved,
    out: &mut kernel::Interleaved,
) {
    match engine {
        #[cfg(target_arch = "x86_64")]
        Engine::Ifma(token) => kernel::mul_ifma(token, &call.m, &call.k0, a, b, out),
        #[cfg(not(target_arch = "x86_64"))]
        Engine::Ifma(_) => unreachable!("no IFMA engine off x86_64"),
        Engine::Portable | Engine::PortableColumns => {
            kernel::mul_portable(&call.m, &call.k0, a, b, out)
        }
    }
}

/// `base`^exp mod m in every lane of `call` into `out` (run on the kernel's stack).
fn exponentiate(
    engine: Engine,
    kind: Exponent,
    call: &CallLanes,
    base: &kernel::Interleaved,
    out: &mut kernel::Interleaved,
) {
    let exp = ExpCall {
        kind,
        m: &call.m,
        k0: &call.k0,
        rr: &call.rr,
        base,
        exp: &call.exp,
        exp_bits: call.exp_bits,
    };
    match engine {
        #[cfg(target_arch = "x86_64")]
        Engine::Ifma(token) => kernel::exp_ifma(token, &exp, out),
        #[cfg(not(target_arch = "x86_64"))]
        Engine::Ifma(_) => unreachable!("no IFMA engine off x86_64"),
        Engine::Portable => kernel::exp_portable::<true>(&exp, out),
        Engine::PortableColumns => kernel::exp_portable::<false>(&exp, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_headroom_for_almost_montgomery() {
        for s in Size::ALL {
            assert!(52 * s.limbs52() >= s.bits() + 2, "{s:?}");
            assert!(
                [10, 20, 30, 40].contains(&s.limbs52()),
                "{s:?}: a limb count the kernel is instantiated for"
            );
            assert!(
                52 * s.limbs52() <= 64 * 40 + 52,
                "{s:?}: limb bound of the kernel"
            );
        }
        assert_eq!(Size::for_bits(1024), Some(Size::B1024));
        assert_eq!(Size::for_bits(1025), Some(Size::B1536));
        assert_eq!(Size::for_bits(2048), Some(Size::B2048));
        assert_eq!(Size::for_bits(2049), None);
        assert_eq!(Size::for_bits(300), Some(Size::B512));
    }

    /// Words copied as they are, also beyond the largest size class's limb count (an
    /// exponent may be longer than its modulus); missing lanes repeat lane 0.
    #[test]
    fn interleave_takes_any_length() {
        let long: Vec<u64> = (1..=50u64).collect();
        let short = vec![7u64; 3];
        let v = interleave(&[&long, &short], false, 50);
        for (j, limb) in v.iter().enumerate() {
            assert_eq!(limb[0], long[j]);
            assert_eq!(limb[1], if j < 3 { 7 } else { 0 });
            assert!(limb[2..].iter().all(|&x| x == long[j]));
        }
    }

    #[test]
    fn repack_round_trips() {
        let words: Vec<u64> = (0..16u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let mut limbs = vec![0u64; Size::B1024.limbs52()];
        repack(&words, 64, &mut limbs, 52);
        assert!(limbs.iter().all(|&l| l < (1 << 52)));
        let mut back = vec![0u64; 16];
        repack(&limbs, 52, &mut back, 64);
        assert_eq!(back, words);
    }

    #[test]
    fn small_numbers_in_every_lane() {
        // 3^5 mod 7 = 5, 2^10 mod 1023 = 1, ... in the 512-bit class.
        let cases: [(u64, u64, u64); 8] = [
            (7, 3, 5),
            (1023, 2, 10),
            (101, 100, 0),
            (101, 0, 7),
            (65537, 65536, 2),
            (3, 5, 1),
            (99991, 12345, 99990),
            (u64::MAX, u64::MAX - 1, 3),
        ];
        let w = Size::B512.words();
        let nums: Vec<[Vec<u64>; 3]> = cases
            .iter()
            .map(|&(m, b, e)| {
                let mut mv = vec![0u64; w];
                mv[0] = m;
                let mut bv = vec![0u64; w];
                bv[0] = b;
                [mv, bv, vec![e]]
            })
            .collect();
        let lanes: Vec<Lane> = nums
            .iter()
            .map(|[m, b, e]| Lane {
                modulus: m,
                base: b,
                exp: e,
            })
            .collect();
        let r = mod_exp(Engine::Portable, Size::B512, &lanes, 64).unwrap();
        for (i, &(m, b, e)) in cases.iter().enumerate() {
            let mut want: u128 = 1;
            for _ in 0..e {
                want = want * (b as u128 % m as u128) % m as u128;
            }
            assert_eq!(r[i][0] as u128, want, "lane {i}");
            assert!(r[i][1..].iter().all(|&x| x == 0));
        }
    }

    /// Each lane's result is (base·a)^exp·a⁻¹ mod m for its pair, and the pair is squared
    /// for the next call (checked there and against num-bigint), on every engine here: lanes
    /// of different moduli in the 1024-bit class, 7 lanes (the eighth repeats lane 0).
    #[test]
    fn blinded_lanes_unblind_and_square_their_pairs() {
        use num_bigint::BigUint;
        let size = Size::B1024;
        let w = size.words();
        let words = |x: &BigUint| -> Vec<u64> {
            let mut v = x.to_u64_digits();
            v.resize(w, 0);
            v
        };
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut random = |bits: usize| {
            let d: Vec<u64> = (0..bits.div_ceil(64)).map(|_| next()).collect();
            BigUint::from_slice(
                &d.iter()
                    .flat_map(|x| [*x as u32, (*x >> 32) as u32])
                    .collect::<Vec<_>>(),
            ) % (BigUint::from(1u8) << bits)
        };
        let lanes = 7;
        let moduli: Vec<BigUint> = (0..lanes)
            .map(|i| random(1024 - 3 * i) | BigUint::from(1u8) | (BigUint::from(1u8) << 700))
            .collect();
        let vals = |k: usize, random: &mut dyn FnMut(usize) -> BigUint| -> Vec<BigUint> {
            moduli.iter().map(|m| random(1100 + k) % m).collect()
        };
        let (bases, a, ai) = (
            vals(0, &mut random),
            vals(1, &mut random),
            vals(2, &mut random),
        );
        let exp = random(1024);
        let exp_words = words(&exp);
        let mw: Vec<Vec<u64>> = moduli.iter().map(&words).collect();
        let mut engines = vec![Engine::Portable, Engine::PortableColumns];
        engines.extend(Engine::ifma());
        for engine in engines {
            let refs: Vec<&[u64]> = mw.iter().map(|m| &m[..]).collect();
            let prepared = Prepared::many(engine, size, &refs).unwrap();
            let (aw, aiw): (Vec<Vec<u64>>, Vec<Vec<u64>>) = (
                a.iter().map(&words).collect(),
                ai.iter().map(&words).collect(),
            );
            let plain: Vec<(&Prepared, &[u64], &[u64])> = (0..lanes)
                .map(|i| (&prepared[i], &aw[i][..], &aiw[i][..]))
                .collect();
            let mut pairs = LaneBlinding::many(engine, &plain).unwrap();
            let bw: Vec<Vec<u64>> = bases.iter().map(&words).collect();
            for round in 0..2u32 {
                let mut call: Vec<BlindedLane> = pairs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, blinding)| BlindedLane {
                        modulus: &prepared[i],
                        base: &bw[i],
                        exp: &exp_words,
                        blinding,
                    })
                    .collect();
                let out = mod_exp_blinded(engine, &mut call, 1024).unwrap();
                for (i, m) in moduli.iter().enumerate() {
                    let sq = BigUint::from(1u8 << round);
                    let (ar, air) = (a[i].modpow(&sq, m), ai[i].modpow(&sq, m));
                    let want = (&bases[i] * ar).modpow(&exp, m) * air % m;
                    let got = BigUint::from_slice(
                        &out[i]
                            .as_ref()
                            .unwrap()
                            .iter()
                            .flat_map(|x| [*x as u32, (*x >> 32) as u32])
                            .collect::<Vec<_>>(),
                    );
                    assert_eq!(got, want, "{}: lane {i}, call {round}", engine.name());
                }
            }
        }
    }

    #[test]
    fn a_bad_modulus_fails_its_own_lane_only() {
        let mut good = vec![0u64; 8];
        good[0] = 0xffff_ffff_ffff_ffc5; // odd
        good[7] = 0x8000_0000_0000_0000;
        let even = vec![8u64; 8];
        let base: Vec<u64> = (1..=8u64).collect();
        let exp = [65537u64];
        let lane = |m: &'static [u64]| Lane {
            modulus: m,
            base: &base,
            exp: &exp,
        };
        let (good, even): (&'static [u64], &'static [u64]) = (
            Box::leak(good.into_boxed_slice()),
            Box::leak(even.into_boxed_slice()),
        );
        let lanes = [lane(good), lane(even), lane(good)];
        let per = mod_exp_per_lane(Engine::Portable, Size::B512, &lanes, 17).unwrap();
        let alone = mod_exp(Engine::Portable, Size::B512, &[lane(good)], 17).unwrap();
        assert_eq!(per.len(), 3);
        assert_eq!(per[1], Err(KaeError::InvalidModulus));
        assert_eq!(per[0].as_ref().unwrap()[..], alone[0][..]);
        assert_eq!(per[2].as_ref().unwrap()[..], alone[0][..]);
        // The bad lane first (it also pads the missing lanes): still only its own error.
        let per =
            mod_exp_per_lane(Engine::Portable, Size::B512, &[lane(even), lane(good)], 17).unwrap();
        assert_eq!(per[0], Err(KaeError::InvalidModulus));
        assert_eq!(per[1].as_ref().unwrap()[..], alone[0][..]);
        assert!(mod_exp(Engine::Portable, Size::B512, &lanes, 17).is_err());
    }

    #[test]
    fn bad_lanes_are_refused() {
        let m = vec![8u64; 8]; // even
        let l = Lane {
            modulus: &m,
            base: &m,
            exp: &m[..1],
        };
        assert!(mod_exp(Engine::Portable, Size::B512, &[l], 64).is_err());
        assert!(mod_exp(Engine::Portable, Size::B512, &[], 64).is_err());
        let mut one = vec![0u64; 8];
        one[0] = 1;
        let l = Lane {
            modulus: &one,
            base: &one,
            exp: &one[..1],
        };
        assert!(mod_exp(Engine::Portable, Size::B512, &[l], 64).is_err());
        let l = Lane {
            modulus: &one[..4],
            base: &one,
            exp: &one[..1],
        };
        assert!(mod_exp(Engine::Portable, Size::B512, &[l], 64).is_err());
        let mut odd = vec![0u64; 8];
        odd[0] = 7;
        let l = Lane {
            modulus: &odd,
            base: &odd,
            exp: &odd[..1],
        };
        assert!(mod_exp(Engine::Portable, Size::B512, &[l], 65).is_err());
    }
}
