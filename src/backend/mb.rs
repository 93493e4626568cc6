//! The multi-buffer backend: private operations of async jobs, from any thread of the
//! process, are grouped by prime size and their CRT halves exponentiated eight lanes at a time
//! by `mb::mod_exp` (AVX-512 IFMA).
//!
//! Request flow: the caller blinds (`rsa::ops::prepare_private`) and submits a
//! `ExponentiateBlinded` request to the gatherer (`gather.rs`). The submit that completes a full
//! kernel call of its size class ([`PER_CALL`] requests: p and q halves of each side by side)
//! computes it on its own thread; what never fills is taken by the gatherer's flusher, an
//! ordinary-priority thread, within a bounded delay. A batch reduces each blinded input mod p
//! and mod q, runs the halves as lanes, recombines (Garner, in constant time:
//! `rsa::ops::recombine`), raises each result to e mod p and mod q in the same lanes, and
//! completes the requests. The caller then compares those with its blinded input and unblinds
//! (`finish_private`): a wrong lane is caught there and recomputed without CRT, as for any
//! backend.
//!
//! A group too small to pay for a kernel call (see [`min_requests`]), or what is left of a
//! group after its full calls when that is too small, is computed by libcrypto's scalar code;
//! lone requests with nothing else in flight are computed inline by the caller.

use super::gather::{BatchFn, Gather, Shape};
use super::Backend;
use crate::completion::{Completer, OpKind, Request};
use crate::error::{KaeError, KaeResult};
use crate::mb::{self, Engine, PreparedLane, Size};
use crate::rsa::ct_limbs::{self, BigNumLimbs, Limbs};
use crate::rsa::ops::CheckResidues;
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
    let compute = Arc::new(move |b: &mut [Request]| batcher.compute(b)) as BatchFn;
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
        let ok =
            kind == OpKind::ExponentiateBlinded && lane_size(key).is_some() && self.gather.wants();
        if !ok && kind != OpKind::Public {
            crate::stats::note_mb_scalar(1);
        }
        ok
    }
    fn blinds_on_caller(&self) -> bool {
        true
    }
}

/// What the kernel needs of a key, made at its first batch and kept with it
/// (`rsa::key_slot`): both primes prepared (R² mod p and mod q, −p⁻¹ and −q⁻¹ mod 2^52)
/// and the CRT exponents in the size class's width. Secret: wiped when the key goes.
struct KeyLanes {
    p: mb::Prepared,
    q: mb::Prepared,
    dp: Limbs,
    dq: Limbs,
    /// e in the size class's width, for the fault check in the primes' lanes; `None` when e
    /// is wider than the primes (`finish_private` then checks with libcrypto).
    e: Option<PublicExponent>,
}

struct PublicExponent {
    limbs: Limbs,
    bits: usize,
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
        })
    }
}

/// A request of the batch with its result y: its index and its key's lanes.
type Answered = (usize, Arc<KeyLanes>, Limbs);

/// A number mod p and mod q, each padded to the size class's width: two lanes.
struct Residues {
    p: Limbs,
    q: Limbs,
}

/// One request's CRT halves, ready as two lanes.
struct Halves {
    key: Arc<KeyLanes>,
    c: Residues,
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

/// Reduces the blinded input mod p and mod q and takes the key's lanes from its backend
/// state, made here at the key's first batch.
fn halves(req: &Request, size: Size, engine: Engine) -> KaeResult<Halves> {
    let key = &req.key;
    let lanes = key.backend_state.get_or_make_valid(
        BackendKind::MultiBuffer.name(),
        |k: &KeyLanes| k.p.size() == size,
        || KeyLanes::make(engine, key, size),
    )?;
    let x = crate::rsa::ops::limbs_from_be(key, &req.input)?;
    Ok(Halves {
        key: lanes,
        c: residues(key, &x, size)?,
    })
}

/// y = m2 + q·((m1 − m2)·qInv mod p) into the request's output (big-endian, key size);
/// returns y.
fn recombine_into(req: &mut Request, m1: &[u64], m2: &[u64]) -> KaeResult<Limbs> {
    let key = req.key.clone();
    let mont = key.mont()?;
    let crt = mont.crt.as_ref().ok_or(KaeError::MissingPrivateKey)?;
    let (wp, wq) = (crt.lp.width(), crt.lq.width());
    // The halves are below p and q: their words above the primes' widths are zero.
    let y = crate::rsa::ops::recombine(
        &m1[..wp],
        &m2[..wq],
        &crt.lp,
        &crt.lq,
        &crt.qinv_mont,
        mont.ln.width(),
    );
    ct_limbs::write_be(&y, &mut req.output);
    Ok(y)
}

impl Batcher {
    /// The workers' batch function: groups by size class, kernel for groups big enough, scalar
    /// code for the rest.
    fn compute(&self, batch: &mut [Request]) {
        let mut groups: Vec<(Size, Vec<usize>)> = Vec::new();
        let mut scalar: Vec<usize> = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            match (r.kind, lane_size(&r.key)) {
                (OpKind::ExponentiateBlinded, Some(size)) => {
                    match groups.iter_mut().find(|(s, _)| *s == size) {
                        Some((_, v)) => v.push(i),
                        None => groups.push((size, vec![i])),
                    }
                }
                _ => scalar.push(i),
            }
        }
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
                self.run_group(batch, size, &idx);
            }
        }
        for i in scalar {
            super::compute(&mut batch[i]);
        }
    }

    /// Runs the requests `idx` of one size class through the kernel, 8 lanes (4 requests) per
    /// call; a request whose preparation fails gets that error, the others go on.
    fn run_group(&self, batch: &mut [Request], size: Size, idx: &[usize]) {
        let mut results: Vec<Answered> = Vec::with_capacity(idx.len());
        let mut ready: Vec<(usize, Halves)> = Vec::with_capacity(idx.len());
        for &i in idx {
            match halves(&batch[i], size, self.engine) {
                Ok(h) => ready.push((i, h)),
                Err(e) => batch[i].result = Err(e),
            }
        }
        for chunk in ready.chunks(PER_CALL) {
            let mut lanes: Vec<PreparedLane> = Vec::with_capacity(2 * chunk.len());
            for (_, h) in chunk {
                lanes.push(PreparedLane {
                    modulus: &h.key.p,
                    base: &h.c.p,
                    exp: &h.key.dp,
                });
                lanes.push(PreparedLane {
                    modulus: &h.key.q,
                    base: &h.c.q,
                    exp: &h.key.dq,
                });
            }
            let out = mb::mod_exp_prepared(self.engine, &lanes, size.bits());
            crate::stats::note_mb_batch(lanes.len());
            match out {
                Ok(mut out) => {
                    if let Some(k) = self.fault_lane.filter(|&k| k < out.len()) {
                        if let Ok(v) = out[k].as_mut() {
                            v[0] ^= 1; // testing only: a wrong lane for the fault check to catch
                        }
                    }
                    for (n, (i, h)) in chunk.iter().enumerate() {
                        let r = &mut batch[*i];
                        // A lane that failed (a broken key) fails its own request only.
                        r.result = match (&out[2 * n], &out[2 * n + 1]) {
                            (Ok(m1), Ok(m2)) => recombine_into(r, m1, m2).map(|y| {
                                results.push((*i, h.key.clone(), y));
                            }),
                            (Err(e), _) | (_, Err(e)) => Err(*e),
                        };
                    }
                }
                Err(e) => {
                    for (i, _) in chunk {
                        batch[*i].result = Err(e);
                    }
                }
            }
        }
        self.check_in_lanes(batch, results);
    }

    /// The fault check's exponentiations y^e mod p and y^e mod q for the group's results, in
    /// the primes' lanes (4 results per kernel call), into each request's `check`;
    /// `finish_private` compares them with the blinded input mod p and mod q. A request left
    /// without them (e wider than the primes, a failed call) is checked there by libcrypto.
    fn check_in_lanes(&self, batch: &mut [Request], results: Vec<Answered>) {
        let mut ready: Vec<(usize, Arc<KeyLanes>, Residues)> = Vec::with_capacity(results.len());
        for (i, lanes, y) in results {
            if lanes.e.is_none() {
                continue;
            }
            if let Ok(y) = residues(&batch[i].key, &y, lanes.p.size()) {
                ready.push((i, lanes, y));
            }
        }
        for chunk in ready.chunks(PER_CALL) {
            let mut lanes: Vec<PreparedLane> = Vec::with_capacity(2 * chunk.len());
            let mut e_bits = 0;
            for (_, k, y) in chunk {
                let Some(e) = &k.e else {
                    unreachable!("kept only with e")
                };
                e_bits = e_bits.max(e.bits);
                lanes.push(PreparedLane {
                    modulus: &k.p,
                    base: &y.p,
                    exp: &e.limbs,
                });
                lanes.push(PreparedLane {
                    modulus: &k.q,
                    base: &y.q,
                    exp: &e.limbs,
                });
            }
            let Ok(out) = mb::mod_exp_public(self.engine, &lanes, e_bits) else {
                continue;
            };
            for ((i, _, _), pair) in chunk.iter().zip(out.chunks(2)) {
                let r = &mut batch[*i];
                let Ok(crt) = r.key.mont().map(|m| m.crt.as_ref()) else {
                    continue;
                };
                r.check = match (crt, &pair[0], &pair[1]) {
                    (Some(crt), Ok(yp), Ok(yq)) => Some(CheckResidues {
                        mod_p: truncated(yp, crt.lp.width()),
                        mod_q: truncated(yq, crt.lq.width()),
                    }),
                    _ => None,
                };
            }
        }
    }
}

/// The first `words` words of `x` (a value below a prime of that width).
fn truncated(x: &[u64], words: usize) -> Limbs {
    Zeroizing::new(x[..words.min(x.len())].to_vec())
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

    /// A batch hands back, beside each result y, y^e mod p and mod q computed in lanes: the
    /// request's input mod p and mod q when y is right (checked against num-bigint), not
    /// when a lane went wrong.
    #[test]
    fn a_batch_checks_its_results_in_lanes() {
        use crate::completion::Waiter;
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
        let (p, q) = (big(&key.primes[0]), big(&key.primes[1]));
        let value = |l: &[u64]| BigUint::from_bytes_le(&ct_limbs::to_le_bytes(l));
        for fault_lane in [None, Some(2)] {
            let batcher = Batcher {
                engine: Engine::Portable,
                fault_lane,
            };
            let mut batch: Vec<Request> = (0..PER_CALL as u8)
                .map(|t| {
                    let mut x = vec![t.wrapping_mul(37).wrapping_add(5); key.size()];
                    x[0] = 0; // below n
                    Request::new(
                        OpKind::ExponentiateBlinded,
                        key.clone(),
                        &x,
                        Arc::new(Waiter::new(None)),
                    )
                })
                .collect();
            batcher.compute(&mut batch);
            for (i, r) in batch.iter().enumerate() {
                assert_eq!(r.result, Ok(()), "request {i}");
                let x = BigUint::from_bytes_be(&r.input);
                let right = BigUint::from_bytes_be(&r.output) == x.modpow(&d, &n);
                let check = r.check.as_ref().expect("check values from the lanes");
                let matches = value(&check.mod_p) == &x % &p && value(&check.mod_q) == &x % &q;
                // Lane 2 is request 1's p half.
                let wronged = fault_lane == Some(2) && i == 1;
                assert_eq!(right, !wronged, "request {i}, fault lane {fault_lane:?}");
                assert_eq!(matches, right, "request {i}, fault lane {fault_lane:?}");
            }
        }
    }

    #[test]
    fn bigger_halves_need_fewer_requests_per_call() {
        assert!(min_requests(Size::B512) >= min_requests(Size::B1024));
        assert!(min_requests(Size::B1024) >= min_requests(Size::B2048));
        assert!(Size::ALL.iter().all(|&s| min_requests(s) >= 2));
    }
}
