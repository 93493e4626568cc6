//! The multi-buffer backend: private operations of async jobs, from any thread of the
//! process, are grouped by prime size and their CRT halves exponentiated eight lanes at a time
//! by `mb::mod_exp` (AVX-512 IFMA).
//!
//! Request flow: the caller submits the private operation as it is (`OpKind::Private`) to the
//! gatherer (`gather.rs`). The submit that completes a full kernel call of its size class
//! ([`PER_CALL`] requests: p and q halves of each side by side) computes it on its own thread;
//! what never fills is taken by the gatherer's flusher, an ordinary-priority thread, within a
//! bounded delay. A batch checks each input as the CPU path does, reduces it mod p and mod q,
//! and runs the halves as lanes blinded in the lanes: each half times r^e before its
//! exponentiation and times r⁻¹ after it, with a pair of the key's kept per prime and squared
//! in the same call (`mb::mod_exp_blinded`). It recombines (Garner, in constant time:
//! `rsa::ops::recombine`), raises each result to e mod p and mod q in the same lanes and
//! compares those with its own second reduction of the input: only a checked result is
//! released; the CPU path (`rsa::ops::private_op`) recomputes any other, and answers a refused
//! input with its error.
//!
//! A group too small to pay for a kernel call (see [`min_requests`]), or what is left of a
//! group after its full calls when that is too small, is computed by libcrypto's scalar code;
//! lone requests with nothing else in flight are computed inline by the caller.

use super::gather::{BatchFn, Gather, Shape};
use super::Backend;
use crate::completion::{Completer, OpKind, Request};
use crate::error::{KaeError, KaeResult};
use crate::ffi::fork::ForkSafeMutex;
use crate::mb::{self, BlindedLane, Engine, PreparedLane, Size};
use crate::rsa::ct_limbs::{self, BigNumLimbs, Limbs};
use crate::rsa::RsaKey;
use crate::settings::mb::MbConfig;
use crate::settings::BackendKind;
use std::sync::Arc;
use zeroize::Zeroizing;

/// Requests per kernel call: p and q halves side by side, 2 lanes each.
const PER_CALL: usize = mb::LANES / 2;

/// The engine this configuration runs on here, or why the backend cannot run.
pub fn usable_here(cfg: &MbConfig) -> Result<Engine, String> {
    if !cfg.enabled {
        return Err("turned off (multibuffer = no)".into());
    }
    if cfg.portable {
        return Ok(Engine::Portable);
    }
    Engine::ifma().ok_or_else(|| mb::ifma_missing_reason().unwrap_or_default())
}

/// The start-up line: engine, batch shape and thresholds.
pub fn startup_line(cfg: &MbConfig) -> String {
    let engine = match usable_here(cfg) {
        Ok(e @ Engine::Ifma(token)) => {
            format!("{} (squarings: {})", e.name(), token.squaring().name())
        }
        Ok(e) => e.name().to_string(),
        Err(_) => "none".to_string(),
    };
    format!(
        "multi-buffer: engine {engine}; {PER_CALL} requests per kernel call (p and q halves \
         side by side), computed by the request that fills the call (or by the flusher when it \
         is free and the caller may run on another CPU), partial batches within \
         {} ms by the flusher; fewest requests per call for RSA-1024/2048/3072/4096: \
         {}/{}/{}/{} (fewer go to the scalar code); lone requests inline",
        super::gather::MAX_WAIT.as_millis(),
        min_requests(Size::B512),
        min_requests(Size::B1024),
        min_requests(Size::B1536),
        min_requests(Size::B2048)
    )
}

/// Fewest requests of one size class worth a kernel call; smaller groups go to the scalar
/// code. A call costs the same with 1 or 8 lanes; a request takes 2 lanes. Set from the
/// per-call and scalar costs quoted in the issue for crypto_mb's kernel against OpenSSL 3.0 on
/// IFMA machines (one 8-lane call of 1024-bit halves ≈ 2.2 scalar RSA-2048 operations, of
/// 1536- and 2048-bit halves ≈ 1.4 and 1.25 scalar operations); to be re-measured with
/// `benches/mb_kernel.rs` on IFMA hardware.
pub const fn min_requests(size: Size) -> usize {
    match size {
        Size::B512 => 4,
        Size::B1024 => 3,
        Size::B1536 | Size::B2048 => 2,
    }
}

/// The size class of `key`'s CRT halves, when the backend takes its private operations:
/// two-prime keys with CRT parameters, primes up to 2048 bits.
pub fn lane_size(key: &RsaKey) -> Option<Size> {
    if !key.has_crt() || key.primes.len() != 2 || key.exps.len() != 2 || key.coeffs.is_empty() {
        return None;
    }
    // The primes' word counts, kept with the key's Montgomery contexts (asked for each
    // pending request at every submit): size classes are multiples of 64 bits, so words
    // give the class that bits would.
    let crt = key.mont().ok()?.crt.as_ref()?;
    Size::for_bits(64 * crt.lp.width().max(crt.lq.width()))
}

/// What the workers compute with (fixed when the backend starts).
#[derive(Clone, Copy)]
struct Batcher {
    engine: Engine,
    fault_lane: Option<usize>,
}

pub struct MbBackend {
    gather: Gather,
}

/// The gatherer's size class of a request: its prime size in bits (0: no lane size; such
/// requests are never submitted, `takes` keeps them on the caller).
fn class_of(r: &Request) -> usize {
    lane_size(&r.key).map_or(0, Size::bits)
}

/// Starts the backend: the gatherer and its flusher thread; at most `queues × depth`
/// requests pending.
pub fn start(
    queues: usize,
    depth: usize,
    cfg: &MbConfig,
    completer: Arc<Completer>,
) -> Result<MbBackend, String> {
    let engine = usable_here(cfg)?;
    let batcher = Batcher {
        engine,
        fault_lane: cfg.fault_lane.filter(|_| engine == Engine::Portable),
    };
    if engine == Engine::Portable {
        crate::logging::warn_rate_limited(
            "mb-portable",
            format_args!(
                "multi-buffer backend on the PORTABLE engine (KAE_MB_ENGINE=portable): for \
                 testing only, far slower than the CPU backend"
            ),
        );
    }
    let shape = Shape {
        class: class_of,
        full: |_| PER_CALL,
        least: |class| Size::for_bits(class).map_or(1, min_requests),
        depth: queues.max(1) * depth.max(PER_CALL),
        hand_off: true,
    };
    let compute = Arc::new(move |b: &mut [Request]| {
        batcher.compute(b);
    }) as BatchFn;
    let gather =
        Gather::start("kae-mb-flush", shape, compute, completer).map_err(|e| e.to_string())?;
    Ok(MbBackend { gather })
}

impl Backend for MbBackend {
    fn name(&self) -> &'static str {
        BackendKind::MultiBuffer.name()
    }
    fn submit(&self, req: Request) -> Result<(), Request> {
        self.gather.submit(req)
    }
    /// Batches complete their requests themselves; nothing is left to poll.
    fn poll(&self, _out: &mut Vec<Request>, _max: usize) -> usize {
        0
    }
    fn in_flight(&self) -> usize {
        self.gather.in_flight()
    }
    fn shutdown(&self) {
        self.gather.shutdown()
    }
    fn high_water(&self) -> usize {
        self.gather.high_water()
    }
    /// Private operations of keys with a lane size, unless they come alone; public ones stay
    /// with the caller (e is small: a batch would only add a wait).
    fn takes(&self, key: &RsaKey, kind: OpKind) -> bool {
        let ok = kind == OpKind::Private && lane_size(key).is_some() && self.gather.wants();
        if !ok && kind != OpKind::Public {
            crate::stats::note_mb_scalar(1);
        }
        ok
    }
}

/// Blinding pairs kept per key: enough for the requests of one key that batches hold at once
/// (more are made when the pool runs dry).
const PAIRS_KEPT: usize = 64;

/// What the kernel needs of a key, made at its first batch and kept with it
/// (`rsa::key_slot`, one per process): both primes prepared (R² mod p and mod q, −p⁻¹ and −q⁻¹
/// mod 2^52), the CRT exponents in the size class's width, e, and the key's blinding pairs.
/// Secret: wiped when the key goes.
struct KeyLanes {
    p: mb::Prepared,
    q: mb::Prepared,
    dp: Limbs,
    dq: Limbs,
    /// e in the size class's width, for the fault check in the primes' lanes; `None` when e
    /// is wider than the primes (such keys' requests go to the scalar code).
    e: Option<PublicExponent>,
    pairs: ForkSafeMutex<Vec<PrimePairs>>,
}

struct PublicExponent {
    limbs: Limbs,
    bits: usize,
}

/// One blinding pair of a key (r^e and r⁻¹ mod n for a random r), reduced mod p and mod q
/// in the lanes' form; squared by each kernel call that uses it.
struct PrimePairs {
    p: mb::LaneBlinding,
    q: mb::LaneBlinding,
    uses: u32,
}

impl KeyLanes {
    fn make(engine: Engine, key: &RsaKey, size: Size) -> KaeResult<KeyLanes> {
        let w = size.words();
        let (p, q) = (key.primes[0].to_limbs(w)?, key.primes[1].to_limbs(w)?);
        let mut both = mb::Prepared::many(engine, size, &[&p, &q])?.into_iter();
        let (Some(p), Some(q)) = (both.next(), both.next()) else {
            unreachable!("two moduli prepared")
        };
        let e = key.e()?;
        Ok(KeyLanes {
            p,
            q,
            dp: key.exps[0].to_limbs(w)?,
            dq: key.exps[1].to_limbs(w)?,
            e: e.to_limbs(w).ok().map(|limbs| PublicExponent {
                limbs,
                bits: ct_limbs::declassify_usize(e.num_bits()),
            }),
            pairs: ForkSafeMutex::default(),
        })
    }

    /// A pooled pair, or a new one (made with others that go to the pool).
    fn take_pair(&self, engine: Engine, key: &RsaKey) -> KaeResult<PrimePairs> {
        if let Some(pair) = self.pairs.lock().pop() {
            return Ok(pair);
        }
        let mut fresh = self.new_pairs(engine, key)?;
        let first = fresh.pop().ok_or(KaeError::BignumFailure)?;
        self.put_back(fresh);
        Ok(first)
    }

    /// Pools `pairs` that have uses left, as many as the pool has room for (the rest are
    /// wiped).
    fn put_back(&self, pairs: impl IntoIterator<Item = PrimePairs>) {
        let mut v = self.pairs.lock();
        let room = PAIRS_KEPT.saturating_sub(v.len());
        v.extend(
            pairs
                .into_iter()
                .filter(|p| p.uses < crate::rsa::ops::BLINDING_MAX_USES)
                .take(room),
        );
    }

    /// Fresh pairs from the key's blinding (`rsa::ops::blinding_values`), reduced mod p and
    /// mod q and put in the lanes' form.
    fn new_pairs(&self, engine: Engine, key: &RsaKey) -> KaeResult<Vec<PrimePairs>> {
        let size = self.p.size();
        let values = crate::rsa::ops::blinding_values(key, crate::rsa::ops::BLINDING_BATCH)?;
        let reduced = values
            .iter()
            .map(|(a, ai)| Ok((residues(key, a, size)?, residues(key, ai, size)?)))
            .collect::<KaeResult<Vec<_>>>()?;
        let mut plain: Vec<(&mb::Prepared, &[u64], &[u64])> = Vec::with_capacity(2 * values.len());
        for (a, ai) in &reduced {
            plain.push((&self.p, &a.p, &ai.p));
            plain.push((&self.q, &a.q, &ai.q));
        }
        let mut made = mb::LaneBlinding::many(engine, &plain)?.into_iter();
        let mut pairs = Vec::with_capacity(values.len());
        while let (Some(p), Some(q)) = (made.next(), made.next()) {
            pairs.push(PrimePairs { p, q, uses: 0 });
        }
        Ok(pairs)
    }
}

/// A number mod p and mod q, each padded to the size class's width: two lanes.
struct Residues {
    p: Limbs,
    q: Limbs,
}

/// One private operation ready as two lanes: the input (n's width, for the fault check's own
/// reduction), its residues and a blinding pair.
struct Halves {
    key: Arc<KeyLanes>,
    x: Limbs,
    c: Residues,
    pair: PrimePairs,
}

/// x mod p and x mod q in constant time (`ct_limbs`), for `size`'s lanes.
fn residues(key: &RsaKey, x: &[u64], size: Size) -> KaeResult<Residues> {
    let crt = key
        .mont()?
        .crt
        .as_ref()
        .ok_or(KaeError::MissingPrivateKey)?;
    let w = size.words();
    let mod_prime = |lm: &ct_limbs::Modulus| -> KaeResult<Limbs> {
        if lm.width() > w {
            return Err(KaeError::InvalidLength);
        }
        let mut v: Limbs = Zeroizing::new(vec![0u64; w]);
        lm.reduce_into(x, &mut v);
        Ok(v)
    };
    Ok(Residues {
        p: mod_prime(&crt.lp)?,
        q: mod_prime(&crt.lq)?,
    })
}

/// Checks the request's input (the CPU path's checks: `rsa::ops::private_input`), reduces it
/// mod p and mod q and takes a blinding pair and the key's lanes (made here at the key's first
/// batch; `pid` is this process's id, asked once per group). `None` for a key whose e is
/// wider than its primes.
fn halves(req: &Request, size: Size, engine: Engine, pid: u32) -> KaeResult<Option<Halves>> {
    let key = &req.key;
    let x = crate::rsa::ops::private_input(key, &req.input, req.output.len())?;
    let lanes = key.backend_state.get_or_make_valid_in(
        pid,
        BackendKind::MultiBuffer.name(),
        |k: &KeyLanes| k.p.size() == size,
        || KeyLanes::make(engine, key, size),
    )?;
    if lanes.e.is_none() {
        return Ok(None);
    }
    let c = residues(key, &x, size)?;
    let pair = lanes.take_pair(engine, key)?;
    Ok(Some(Halves {
        key: lanes,
        x,
        c,
        pair,
    }))
}

/// m = m2 + q·((m1 − m2)·qInv mod p), as limbs of n's width.
fn recombine(key: &RsaKey, m1: &[u64], m2: &[u64]) -> KaeResult<Limbs> {
    let mont = key.mont()?;
    let crt = mont.crt.as_ref().ok_or(KaeError::MissingPrivateKey)?;
    let (wp, wq) = (crt.lp.width(), crt.lq.width());
    // The halves are below p and q: their words above the primes' widths are zero.
    Ok(crate::rsa::ops::recombine(
        &m1[..wp],
        &m2[..wq],
        &crt.lp,
        &crt.lq,
        &crt.qinv_mont,
        mont.ln.width(),
    ))
}

/// A result of the batch before its fault check: the request's index, its halves and m.
type Answered = (usize, Halves, Limbs);

impl Batcher {
    /// The workers' batch function: groups by size class, kernel for groups big enough, scalar
    /// code for the rest. Returns how many results the fault check rejected.
    fn compute(&self, batch: &mut [Request]) -> u32 {
        let mut groups: Vec<(Size, Vec<usize>)> = Vec::new();
        let mut scalar: Vec<usize> = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            match (r.kind, lane_size(&r.key)) {
                (OpKind::Private, Some(size)) => {
                    match groups.iter_mut().find(|(s, _)| *s == size) {
                        Some((_, v)) => v.push(i),
                        None => groups.push((size, vec![i])),
                    }
                }
                _ => scalar.push(i),
            }
        }
        let mut faults = 0;
        for (size, mut idx) in groups {
            // Full calls of 4 requests; a remainder too small to pay for a call of its own
            // (1 request of RSA-2048 after 4) goes to the scalar code.
            let rest = idx.len() % PER_CALL;
            if rest > 0 && rest < min_requests(size) {
                let small = idx.split_off(idx.len() - rest);
                crate::stats::note_mb_scalar(small.len());
                scalar.extend(small);
            }
            if !idx.is_empty() {
                let before = scalar.len();
                faults += self.run_group(batch, size, &idx, &mut scalar);
                // Refused inputs, failed calls, rejected results, keys with a wide e.
                crate::stats::note_mb_scalar(scalar.len() - before);
            }
        }
        for i in scalar {
            super::compute(&mut batch[i]);
        }
        faults
    }

    /// Runs the requests `idx` of one size class through the kernel, 8 lanes (4 requests) per
    /// call, checks and releases their results; a request that cannot go through the lanes
    /// (its input refused, a failed call or a rejected result) joins `scalar`, where the CPU
    /// path answers it (with the same error, for a refused input). Returns the rejections.
    fn run_group(
        &self,
        batch: &mut [Request],
        size: Size,
        idx: &[usize],
        scalar: &mut Vec<usize>,
    ) -> u32 {
        let mut ready: Vec<(usize, Halves)> = Vec::with_capacity(idx.len());
        let pid = std::process::id();
        for &i in idx {
            match halves(&batch[i], size, self.engine, pid) {
                Ok(Some(h)) => ready.push((i, h)),
                _ => scalar.push(i),
            }
        }
        let mut answered: Vec<Answered> = Vec::with_capacity(ready.len());
        let mut spent: Vec<(Arc<KeyLanes>, PrimePairs)> = Vec::with_capacity(ready.len());
        let mut ready = ready.into_iter().peekable();
        while ready.peek().is_some() {
            let mut chunk: Vec<(usize, Halves)> = ready.by_ref().take(PER_CALL).collect();
            let out = self.exponentiate(&mut chunk, size);
            for (n, (i, mut h)) in chunk.into_iter().enumerate() {
                h.pair.uses += 1;
                let m = match &out {
                    Ok(out) => match (&out[2 * n], &out[2 * n + 1]) {
                        (Ok(m1), Ok(m2)) => recombine(&batch[i].key, m1, m2).ok(),
                        _ => None, // a failed lane (a broken key) fails its own request only
                    },
                    Err(_) => None,
                };
                match m {
                    Some(m) => answered.push((i, h, m)),
                    None => {
                        scalar.push(i);
                        spent.push((h.key, h.pair));
                    }
                }
            }
        }
        let faults = self.check_and_release(batch, answered, scalar, &mut spent);
        for (key, pair) in spent {
            key.put_back([pair]);
        }
        faults
    }

    /// One kernel call: the chunk's halves as lanes (p and q of each request side by side),
    /// blinded with each request's pair in the lanes.
    fn exponentiate(
        &self,
        chunk: &mut [(usize, Halves)],
        size: Size,
    ) -> KaeResult<Vec<KaeResult<Limbs>>> {
        let mut lanes: Vec<BlindedLane> = Vec::with_capacity(2 * chunk.len());
        for (_, h) in chunk.iter_mut() {
            let Halves { key, c, pair, .. } = h;
            lanes.push(BlindedLane {
                modulus: &key.p,
                base: &c.p,
                exp: &key.dp,
                blinding: &mut pair.p,
            });
            lanes.push(BlindedLane {
                modulus: &key.q,
                base: &c.q,
                exp: &key.dq,
                blinding: &mut pair.q,
            });
        }
        let mut out = mb::mod_exp_blinded(self.engine, &mut lanes, size.bits());
        crate::stats::note_mb_batch(lanes.len());
        if let (Some(k), Ok(out)) = (self.fault_lane, out.as_mut()) {
            if let Some(Ok(v)) = out.get_mut(k) {
                v[0] ^= 1; // testing only: a wrong lane for the fault check to catch
            }
        }
        out
    }

    /// The fault check, before any result is released: m^e mod p and mod q in the primes'
    /// lanes (4 results per kernel call), compared in constant time with the input reduced
    /// mod p and mod q again (its own reduction: a fault in the lanes' one cannot pass).
    /// Checked results are written out; the others join `scalar`. The pairs go to `spent`.
    fn check_and_release(
        &self,
        batch: &mut [Request],
        answered: Vec<Answered>,
        scalar: &mut Vec<usize>,
        spent: &mut Vec<(Arc<KeyLanes>, PrimePairs)>,
    ) -> u32 {
        let mut faults = 0;
        let mut answered = answered.into_iter().peekable();
        while answered.peek().is_some() {
            let chunk: Vec<Answered> = answered.by_ref().take(PER_CALL).collect();
            let ok = self.verify(batch, &chunk);
            for ((i, h, m), ok) in chunk.into_iter().zip(ok) {
                match ok {
                    Some(true) => {
                        let r = &mut batch[i];
                        ct_limbs::write_be(&m, &mut r.output);
                        r.result = Ok(());
                    }
                    Some(false) => {
                        faults += 1;
                        crate::logging::warn_rate_limited(
                            "crt-fault",
                            format_args!(
                                "RSA CRT result of the multi-buffer lanes failed verification; \
                                 recomputing on the CPU"
                            ),
                        );
                        scalar.push(i);
                    }
                    None => scalar.push(i),
                }
                spent.push((h.key, h.pair));
            }
        }
        crate::stats::note_crt_faults(faults);
        faults
    }

    /// Whether m^e ≡ x (mod p and mod q) for each result of `chunk` (`None`: not checked).
    fn verify(&self, batch: &[Request], chunk: &[Answered]) -> Vec<Option<bool>> {
        let mut none = vec![None; chunk.len()];
        let Some(size) = chunk.first().map(|(_, h, _)| h.key.p.size()) else {
            return none;
        };
        let mut powers: Vec<Residues> = Vec::with_capacity(chunk.len());
        for (i, _, m) in chunk {
            match residues(&batch[*i].key, m, size) {
                Ok(r) => powers.push(r),
                Err(_) => return none,
            }
        }
        let mut lanes: Vec<PreparedLane> = Vec::with_capacity(2 * chunk.len());
        let mut e_bits = 0;
        for ((_, h, _), y) in chunk.iter().zip(&powers) {
            let Some(e) = &h.key.e else {
                return none; // kept only with e (`halves`)
            };
            e_bits = e_bits.max(e.bits);
            lanes.push(PreparedLane {
                modulus: &h.key.p,
                base: &y.p,
                exp: &e.limbs,
            });
            lanes.push(PreparedLane {
                modulus: &h.key.q,
                base: &y.q,
                exp: &e.limbs,
            });
        }
        let Ok(out) = mb::mod_exp_public(self.engine, &lanes, e_bits) else {
            return none;
        };
        for (((i, h, _), pair), ok) in chunk.iter().zip(out.chunks(2)).zip(none.iter_mut()) {
            let Ok(x) = residues(&batch[*i].key, &h.x, size) else {
                continue;
            };
            if let (Ok(yp), Ok(yq)) = (&pair[0], &pair[1]) {
                let same = ct_limbs::eq(yp, &x.p) & ct_limbs::eq(yq, &x.q);
                *ok = Some(ct_limbs::declassify_u64(same) == 1);
            }
        }
        none
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turned_off_or_without_ifma_it_says_why() {
        let off = MbConfig {
            enabled: false,
            ..Default::default()
        };
        assert!(usable_here(&off).unwrap_err().contains("multibuffer = no"));
        let portable = MbConfig {
            portable: true,
            ..Default::default()
        };
        assert_eq!(usable_here(&portable), Ok(Engine::Portable));
        match usable_here(&MbConfig::default()) {
            Ok(e) => assert!(matches!(e, Engine::Ifma(_))),
            Err(why) => assert!(why.contains("IFMA"), "{why}"),
        }
    }

    /// `count` private requests of `key`, request t with input `input(t)`.
    fn private_requests(
        key: &Arc<RsaKey>,
        count: usize,
        input: impl Fn(u8) -> Vec<u8>,
    ) -> Vec<Request> {
        (0..count as u8)
            .map(|t| {
                let waiter = Arc::new(crate::completion::Waiter::new(None));
                Request::new(OpKind::Private, key.clone(), &input(t), waiter)
            })
            .collect()
    }

    /// A batch answers private operations with x^d mod n (checked against num-bigint); a
    /// corrupted lane is caught by the fault check and its request recomputed, still right;
    /// an input the CPU path refuses gets the same error there; each request's pair goes back
    /// to the key's pool, its use counted.
    #[test]
    fn a_batch_checks_its_results_before_releasing_them() {
        use num_bigint::BigUint;
        let key = Arc::new(
            crate::rsa::ops::generate(
                crate::rsa::KeyType::Rsa,
                1024,
                &crate::ffi::bn::BigNum::from_u64(65537).unwrap(),
            )
            .unwrap(),
        );
        let big = |b: &crate::ffi::bn::BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let (n, d) = (big(key.n().unwrap()), big(key.d.as_ref().unwrap()));
        let too_big = key.n().unwrap().to_be_bytes().unwrap();
        let mut refused = vec![0u8; key.size()];
        let want_err = crate::rsa::ops::private_op(&key, &too_big, &mut refused).result;
        assert!(want_err.is_err());
        for fault_lane in [None, Some(2)] {
            let batcher = Batcher {
                engine: Engine::Portable,
                fault_lane,
            };
            let mut batch = private_requests(&key, 2 * PER_CALL, |t| {
                let mut x = vec![t.wrapping_mul(37).wrapping_add(5); key.size() - t as usize % 2];
                x[0] = 0; // below n
                if t == 5 {
                    x = too_big.clone();
                }
                x
            });
            let faults = batcher.compute(&mut batch);
            // Lane 2 of each call is its second request's p half: requests 1 and 6 (5 was
            // refused before the calls).
            let want = if fault_lane.is_some() { 2 } else { 0 };
            assert_eq!(faults, want, "fault lane {fault_lane:?}");
            for (i, r) in batch.iter().enumerate() {
                if i == 5 {
                    assert_eq!(r.result, want_err, "request {i}: the CPU path's error");
                    continue;
                }
                assert_eq!(r.result, Ok(()), "request {i}");
                let x = BigUint::from_bytes_be(&r.input);
                assert_eq!(
                    BigUint::from_bytes_be(&r.output),
                    x.modpow(&d, &n),
                    "request {i}, fault lane {fault_lane:?}"
                );
            }
        }
        let lanes = key
            .backend_state
            .get_or_make_valid(
                BackendKind::MultiBuffer.name(),
                |_: &KeyLanes| true,
                || unreachable!("made by the batch"),
            )
            .unwrap();
        let pool = lanes.pairs.lock();
        // One batch of pairs made; 7 requests in each of the two rounds used one each.
        assert_eq!(pool.len(), crate::rsa::ops::BLINDING_BATCH);
        assert_eq!(pool.iter().map(|p| p.uses).sum::<u32>(), 14);
    }

    /// Keys of unusual shapes through a batch on the portable engine, each request against
    /// num-bigint: unbalanced primes (384 and 640 bits, either first), e = 3, and an e wider
    /// than the primes (its requests go to the scalar code).
    #[test]
    fn unusual_keys_get_right_results_from_a_batch() {
        use crate::ffi::bn::{arith, BigNum, BnCtx};
        use num_bigint::BigUint;
        let ctx = BnCtx::new().unwrap();
        let key_of = |bits: (usize, usize), e: &BigNum| loop {
            let (mut p, mut q) = (BigNum::new_secret().unwrap(), BigNum::new_secret().unwrap());
            arith::generate_prime(&mut p, bits.0, &ctx).unwrap();
            arith::generate_prime(&mut q, bits.1, &ctx).unwrap();
            if let Ok(k) = crate::rsa::ops::key_from_primes(crate::rsa::KeyType::Rsa, p, q, e, &ctx)
            {
                break Arc::new(k);
            }
        };
        let f4 = BigNum::from_u64(65537).unwrap();
        let mut wide = vec![0xA5u8; 75]; // 600 bits, odd
        wide[74] |= 1;
        let wide = BigNum::from_be_bytes(&wide, false).unwrap();
        let keys = [
            ("384/640", key_of((384, 640), &f4), true),
            ("640/384", key_of((640, 384), &f4), true),
            (
                "e = 3",
                key_of((512, 512), &BigNum::from_u64(3).unwrap()),
                true,
            ),
            ("600-bit e", key_of((512, 512), &wide), false),
        ];
        let big = |b: &BigNum| BigUint::from_bytes_be(&b.to_be_bytes().unwrap());
        let batcher = Batcher {
            engine: Engine::Portable,
            fault_lane: None,
        };
        for (what, key, in_lanes) in keys {
            let (n, d) = (big(key.n().unwrap()), big(key.d.as_ref().unwrap()));
            let mut batch = private_requests(&key, PER_CALL, |t| {
                let mut x = vec![t.wrapping_mul(91).wrapping_add(7); key.size()];
                x[0] = 0; // below n
                x
            });
            assert_eq!(batcher.compute(&mut batch), 0, "{what}");
            for (i, r) in batch.iter().enumerate() {
                assert_eq!(r.result, Ok(()), "{what}, request {i}");
                let x = BigUint::from_bytes_be(&r.input);
                let y = BigUint::from_bytes_be(&r.output);
                assert_eq!(y, x.modpow(&d, &n), "{what}, request {i}");
            }
            let pooled = key
                .backend_state
                .get_or_make_valid(
                    BackendKind::MultiBuffer.name(),
                    |_: &KeyLanes| true,
                    || unreachable!("made by the batch"),
                )
                .map(|l| l.pairs.lock().len())
                .unwrap();
            // Only keys whose requests went through the lanes took pairs.
            assert_eq!(pooled > 0, in_lanes, "{what}");
        }
    }

    #[test]
    fn bigger_halves_need_fewer_requests_per_call() {
        assert!(min_requests(Size::B512) >= min_requests(Size::B1024));
        assert!(min_requests(Size::B1024) >= min_requests(Size::B2048));
        assert!(Size::ALL.iter().all(|&s| min_requests(s) >= 2));
    }
}
