//! The multi-buffer kernel (`kae::mb`) against OpenSSL's own RSA private operation, per
//! request, for RSA-2048, 3072 and 4096.
//!
//! Per size, in the criterion group `mb_kernel-rsa<bits>`:
//! - `openssl-private`: one `RSA_private_encrypt` with no padding (OpenSSL's CRT with
//!   blinding) of a random input below n, on one core: µs per request = the iteration time.
//! - `<engine>-8req-2calls`: the exponentiations of a full batch of 8 requests, i.e. their 16
//!   CRT halves as 2 calls of 8 lanes (the p halves of the 8 requests, then the q halves):
//!   µs per request = iteration time / 8.
//! - `<engine>-4req-1call`: the p and q halves of 4 requests in ONE call of 8 lanes:
//!   µs per request = iteration time / 4.
//!
//! - `crypto_mb-8req-crt` (when Intel's crypto_mb can be loaded, see below): its whole 8-request
//!   CRT private operation, `mbx_rsa_private_crt_mb8`, on the same 8 inputs and key: µs per
//!   request = iteration time / 8. The peer users would pick instead (QAT_Engine's `qat_sw`).
//!
//! Each kae lane is `c^dp mod p` or `c^dq mod q` with the key's p, q, dmp1, dmq1 and the base
//! `c mod p` / `c mod q` computed beforehand, the primes prepared once (R² mod p and q, as the
//! backend keeps them per key: `mb::Prepared`). So the kernel's figures cover the
//! exponentiations (with `mb::mod_exp_prepared`'s conversions to and from radix 2^52) but not
//! the reductions of c, the CRT recombination, blinding or the fault check that a complete
//! private operation adds; OpenSSL's figure covers all of those, crypto_mb's all but blinding
//! and the fault check (it gets more work than kae's column: kae / crypto_mb understates kae).
//! Before timing, the 1-call shape is checked: its results, recombined, must equal OpenSSL's
//! output for the same inputs; crypto_mb's 8 outputs must equal OpenSSL's too.
//!
//! crypto_mb is a yardstick only: loaded at run time with dlopen from `CRYPTO_MB_LIB`, else
//! `../shared/reference/crypto_mb/lib/libcrypto_mb.so.12.1` from the repository root (see its
//! README). kae never links it. Missing, or on a CPU without IFMA: its column says why.
//!
//! The engine is AVX-512 IFMA when this CPU has it. Without it the bench says so and measures
//! the portable reference engine (plain u64, slow, never used in production) so that it still
//! runs; its rows are labelled `portable`.
//!
//! At the end it prints a table of criterion's medians (µs per request, the ratio
//! OpenSSL / kernel and kae / crypto_mb as speeds). Under `--test` every benchmark runs once and the table shows those single
//! runs instead, marked as such.
//!
//! Run: `cargo bench --bench mb_kernel`; `MB_BENCH_SIZES=2048,4096` limits the sizes (RSA
//! modulus bits; 1024 is accepted too); `cargo bench --bench mb_kernel -- --test` is a quick
//! smoke run.
//!
//! `MB_BENCH_ROUNDS=R` replaces criterion with R alternating rounds per size (kae's two
//! shapes, crypto_mb and OpenSSL in turn, about 0.2 s each) and prints the median of each
//! column and of the per-round ratios: on a shared machine whose speed drifts, a ratio taken
//! within one round is what holds still.
//!
//! `MB_BENCH_SQUARING=karatsuba` or `columns` replaces the squaring the CPU's maker selects
//! (`mb::Squaring::for_this_cpu`), to compare the two on one machine.

use criterion::{Criterion, SamplingMode, Throughput};
use kae::mb::{self, Engine, Lane, PreparedLane, Size};
use openssl::bn::{BigNum, BigNumContext, BigNumRef};
use openssl::rsa::{Padding, Rsa};
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Requests in the full batch (2 calls of 8 lanes).
const BATCH: usize = 8;
/// Requests whose p and q halves fill one call of 8 lanes.
const HALF_BATCH: usize = mb::LANES / 2;

const ID_OPENSSL: &str = "openssl-private";
const ID_CRYPTO_MB: &str = "crypto_mb-8req-crt";

/// Per-iteration times (ns) of every timed call, by `<group>/<id>`: the table's source under
/// `--test`, where criterion stores no estimates.
static RECORDED: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

fn record(group: &str, id: &str, iters: u64, elapsed: Duration) {
    RECORDED.lock().unwrap().push((
        format!("{group}/{id}"),
        elapsed.as_nanos() as f64 / iters.max(1) as f64,
    ));
}

/// `x` as little-endian u64 words, zero-padded to `w` words.
fn words(x: &BigNumRef, w: usize) -> Vec<u64> {
    let be = x
        .to_vec_padded((w * 8) as i32)
        .expect("value wider than its size class");
    be.rchunks(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
        .collect()
}

fn from_words(w: &[u64]) -> BigNum {
    let be: Vec<u8> = w.iter().rev().flat_map(|x| x.to_be_bytes()).collect();
    BigNum::from_slice(&be).unwrap()
}

/// One CRT half of a key: modulus (p or q) and exponent (dp or dq), as words.
struct Half {
    modulus: Vec<u64>,
    exp: Vec<u64>,
    /// The base of each request, `c mod modulus`.
    bases: Vec<Vec<u64>>,
}

impl Half {
    fn prepared_lane<'a>(&'a self, prepared: &'a mb::Prepared, request: usize) -> PreparedLane<'a> {
        PreparedLane {
            modulus: prepared,
            base: &self.bases[request],
            exp: &self.exp,
        }
    }

    fn lane(&self, request: usize) -> Lane<'_> {
        Lane {
            modulus: &self.modulus,
            base: &self.bases[request],
            exp: &self.exp,
        }
    }
}

/// One key size: the key, BATCH random inputs below n, and both CRT halves.
struct Case {
    bits: u32,
    size: Size,
    rsa: Rsa<openssl::pkey::Private>,
    inputs: Vec<Vec<u8>>,
    p: Half,
    q: Half,
}

impl Case {
    fn new(bits: u32) -> Case {
        let size = Size::for_bits(bits as usize / 2)
            .unwrap_or_else(|| panic!("RSA-{bits}: no kernel size for its CRT halves"));
        let rsa = Rsa::generate(bits).unwrap();
        let n_len = rsa.size() as i32;
        let mut ctx = BigNumContext::new().unwrap();
        let mut cs = Vec::new();
        for _ in 0..BATCH {
            let mut c = BigNum::new().unwrap();
            rsa.n().rand_range(&mut c).unwrap();
            cs.push(c);
        }
        let half = |m: &BigNumRef, d: &BigNumRef, ctx: &mut BigNumContext| {
            assert_eq!(
                Size::for_bits(m.num_bits() as usize),
                Some(size),
                "RSA-{bits}: a prime outside the {size:?} class"
            );
            let bases = cs
                .iter()
                .map(|c| {
                    let mut r = BigNum::new().unwrap();
                    r.nnmod(c, m, ctx).unwrap();
                    words(&r, size.words())
                })
                .collect();
            Half {
                modulus: words(m, size.words()),
                exp: words(d, size.words()),
                bases,
            }
        };
        let p = half(rsa.p().unwrap(), rsa.dmp1().unwrap(), &mut ctx);
        let q = half(rsa.q().unwrap(), rsa.dmq1().unwrap(), &mut ctx);
        let inputs = cs.iter().map(|c| c.to_vec_padded(n_len).unwrap()).collect();
        Case {
            bits,
            size,
            rsa,
            inputs,
            p,
            q,
        }
    }

    /// Exponent bits handed to the kernel: the size class (public, the same for every key).
    fn exp_bits(&self) -> usize {
        self.size.bits()
    }

    fn openssl_private(&self, input: &[u8], out: &mut [u8]) {
        let n = self
            .rsa
            .private_encrypt(input, out, Padding::NONE)
            .expect("RSA_private_encrypt");
        assert_eq!(n, out.len());
    }

    /// The lanes of the 1-call shape: p halves of requests 0..4, then their q halves.
    fn one_call_lanes(&self) -> Vec<Lane<'_>> {
        (0..HALF_BATCH)
            .map(|i| self.p.lane(i))
            .chain((0..HALF_BATCH).map(|i| self.q.lane(i)))
            .collect()
    }

    /// Runs the 1-call shape once and checks every request against OpenSSL: the CRT
    /// recombination of its two lanes must be OpenSSL's private-operation output.
    fn verify(&self, engine: Engine) {
        let r = mb::mod_exp(engine, self.size, &self.one_call_lanes(), self.exp_bits())
            .expect("mb::mod_exp");
        let mut ctx = BigNumContext::new().unwrap();
        let (p, q, qinv) = (
            self.rsa.p().unwrap(),
            self.rsa.q().unwrap(),
            self.rsa.iqmp().unwrap(),
        );
        let mut out = vec![0u8; self.rsa.size() as usize];
        for i in 0..HALF_BATCH {
            let (mp, mq) = (from_words(&r[i]), from_words(&r[HALF_BATCH + i]));
            // m = mq + q · (qinv · (mp − mq) mod p)
            let mut d = BigNum::new().unwrap();
            d.mod_sub(&mp, &mq, p, &mut ctx).unwrap();
            let mut h = BigNum::new().unwrap();
            h.mod_mul(&d, qinv, p, &mut ctx).unwrap();
            let mut hq = BigNum::new().unwrap();
            hq.checked_mul(&h, q, &mut ctx).unwrap();
            let mut m = BigNum::new().unwrap();
            m.checked_add(&hq, &mq).unwrap();
            self.openssl_private(&self.inputs[i], &mut out);
            assert_eq!(
                m.to_vec_padded(out.len() as i32).unwrap(),
                out,
                "RSA-{}: the {} kernel's CRT halves of request {i} disagree with OpenSSL",
                self.bits,
                engine.name()
            );
        }
    }
}

/// Intel's crypto_mb, loaded at run time (a yardstick for this bench: never linked).
mod crypto_mb {
    use super::{words, Case, BATCH};
    use std::ffi::{c_int, c_void, CString};

    type CrtFn = unsafe extern "C" fn(
        from: *const *const u8,
        to: *const *mut u8,
        p: *const *const u64,
        q: *const *const u64,
        dp: *const *const u64,
        dq: *const *const u64,
        iq: *const *const u64,
        bits: c_int,
        method: *const c_void,
        buf: *mut u8,
    ) -> u32;
    type MethodFn = unsafe extern "C" fn(bits: c_int) -> *const c_void;
    type BufSizeFn = unsafe extern "C" fn(method: *const c_void) -> c_int;

    /// The three functions of `rsa.h` this bench calls.
    pub struct Lib {
        crt: CrtFn,
        method: MethodFn,
        buf_size: BufSizeFn,
    }

    /// `CRYPTO_MB_LIB`, else the reference build next to the repository.
    fn path() -> String {
        std::env::var("CRYPTO_MB_LIB").unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/reference/crypto_mb/lib/libcrypto_mb.so.12.1"
            )
            .to_string()
        })
    }

    pub fn load() -> Result<Lib, String> {
        let path = path();
        let c = CString::new(path.clone()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen/dlsym with NUL-terminated names; the handle is never closed, so the
        // function pointers stay valid for the process; their types are rsa.h's prototypes.
        unsafe {
            let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if h.is_null() {
                return Err(format!("cannot load {path} (set CRYPTO_MB_LIB)"));
            }
            let sym = |name: &str| -> Result<*mut c_void, String> {
                let n = CString::new(name).unwrap();
                let f = libc::dlsym(h, n.as_ptr());
                if f.is_null() {
                    Err(format!("{path}: no {name}"))
                } else {
                    Ok(f)
                }
            };
            Ok(Lib {
                crt: std::mem::transmute::<*mut c_void, CrtFn>(sym("mbx_rsa_private_crt_mb8")?),
                method: std::mem::transmute::<*mut c_void, MethodFn>(sym(
                    "mbx_RSA_private_crt_Method",
                )?),
                buf_size: std::mem::transmute::<*mut c_void, BufSizeFn>(sym(
                    "mbx_RSA_Method_BufSize",
                )?),
            })
        }
    }

    /// One case's 8 requests in crypto_mb's layout, ready to run.
    pub struct Crt {
        crt: CrtFn,
        method: *const c_void,
        bits: c_int,
        buf: Vec<u8>,
        // Owned values; the pointer arrays below point into them.
        _values: Vec<Vec<u64>>,
        _inputs: Vec<Vec<u8>>,
        outputs: Vec<Vec<u8>>,
        from: Vec<*const u8>,
        to: Vec<*mut u8>,
        key: [Vec<*const u64>; 5],
    }

    impl Crt {
        pub fn new(lib: &Lib, case: &Case) -> Result<Crt, String> {
            let bits = case.bits as c_int;
            // SAFETY: a plain call; null means no method for this size.
            let method = unsafe { (lib.method)(bits) };
            if method.is_null() {
                return Err(format!("no method for RSA-{bits}"));
            }
            // SAFETY: `method` came from crypto_mb.
            let len = unsafe { (lib.buf_size)(method) };
            let rsa = &case.rsa;
            // Each value in 64-bit little-endian words, with a spare word (crypto_mb reads
            // whole words past the half size).
            let w = case.size.words() + 1;
            let comps = [
                rsa.p().unwrap(),
                rsa.q().unwrap(),
                rsa.dmp1().unwrap(),
                rsa.dmq1().unwrap(),
                rsa.iqmp().unwrap(),
            ];
            let values: Vec<Vec<u64>> = comps.iter().map(|v| words(v, w)).collect();
            let inputs: Vec<Vec<u8>> = case.inputs.clone();
            let mut outputs: Vec<Vec<u8>> = vec![vec![0u8; rsa.size() as usize]; BATCH];
            let from = inputs.iter().map(|v| v.as_ptr()).collect();
            let to = outputs.iter_mut().map(|v| v.as_mut_ptr()).collect();
            let key = std::array::from_fn(|k| vec![values[k].as_ptr(); BATCH]);
            let mut c = Crt {
                crt: lib.crt,
                method,
                bits,
                buf: vec![0u8; len.max(0) as usize],
                _values: values,
                _inputs: inputs,
                outputs,
                from,
                to,
                key,
            };
            let status = c.run();
            if status != 0 {
                return Err(format!(
                    "mbx_rsa_private_crt_mb8 status {status:#x} (no AVX-512 IFMA?)"
                ));
            }
            let mut want = vec![0u8; rsa.size() as usize];
            for (i, got) in c.outputs.iter().enumerate() {
                case.openssl_private(&case.inputs[i], &mut want);
                if *got != want {
                    return Err(format!("its request {i} differs from OpenSSL's"));
                }
            }
            Ok(c)
        }

        /// The 8 requests once; crypto_mb's status (0: all lanes done).
        pub fn run(&mut self) -> u32 {
            // SAFETY: every pointer points into a buffer this value owns, of the sizes
            // crypto_mb reads and writes for `bits` (the work buffer from its BufSize).
            unsafe {
                (self.crt)(
                    self.from.as_ptr(),
                    self.to.as_ptr(),
                    self.key[0].as_ptr(),
                    self.key[1].as_ptr(),
                    self.key[2].as_ptr(),
                    self.key[3].as_ptr(),
                    self.key[4].as_ptr(),
                    self.bits,
                    self.method,
                    self.buf.as_mut_ptr(),
                )
            }
        }
    }
}

fn sizes() -> Vec<u32> {
    let Ok(v) = std::env::var("MB_BENCH_SIZES") else {
        return vec![2048, 3072, 4096];
    };
    let sizes: Vec<u32> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse() {
            Ok(b @ (1024 | 2048 | 3072 | 4096)) => b,
            _ => panic!("MB_BENCH_SIZES: {s:?} is not one of 1024, 2048, 3072, 4096"),
        })
        .collect();
    assert!(!sizes.is_empty(), "MB_BENCH_SIZES={v:?} names no size");
    sizes
}

fn id_two_calls(engine: Engine) -> String {
    format!("{}-{BATCH}req-2calls", engine.name())
}

fn id_one_call(engine: Engine) -> String {
    format!("{}-{HALF_BATCH}req-1call", engine.name())
}

fn group_name(bits: u32) -> String {
    format!("mb_kernel-rsa{bits}")
}

/// kae's two batch shapes on one case's requests, the primes prepared once.
struct KaeRuns<'a> {
    engine: Engine,
    exp_bits: usize,
    /// The p halves of BATCH requests, then their q halves: two calls.
    p_lanes: Vec<PreparedLane<'a>>,
    q_lanes: Vec<PreparedLane<'a>>,
    /// The p and q halves of HALF_BATCH requests: one call.
    lanes: Vec<PreparedLane<'a>>,
}

/// The case's p and q prepared once, as the backend keeps them per key.
fn prepare(case: &Case, engine: Engine) -> Vec<mb::Prepared> {
    mb::Prepared::many(engine, case.size, &[&case.p.modulus, &case.q.modulus])
        .expect("mb::Prepared::many")
}

impl<'a> KaeRuns<'a> {
    /// `prepared`: [`prepare`]'s p and q of `case`.
    fn new(case: &'a Case, prepared: &'a [mb::Prepared], engine: Engine) -> KaeRuns<'a> {
        let (pp, pq) = (&prepared[0], &prepared[1]);
        let runs = KaeRuns {
            engine,
            exp_bits: case.exp_bits(),
            p_lanes: (0..BATCH).map(|i| case.p.prepared_lane(pp, i)).collect(),
            q_lanes: (0..BATCH).map(|i| case.q.prepared_lane(pq, i)).collect(),
            lanes: (0..HALF_BATCH)
                .map(|i| case.p.prepared_lane(pp, i))
                .chain((0..HALF_BATCH).map(|i| case.q.prepared_lane(pq, i)))
                .collect(),
        };
        // The prepared path gives what the unprepared one gives (checked against OpenSSL).
        let checked =
            mb::mod_exp(engine, case.size, &case.one_call_lanes(), runs.exp_bits).unwrap();
        let got: Vec<_> = mb::mod_exp_prepared(engine, &runs.lanes, runs.exp_bits)
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(
            got.iter().zip(&checked).all(|(a, b)| a[..] == b[..]),
            "RSA-{}: prepared moduli give other results",
            case.bits
        );
        runs
    }

    fn two_calls(&self) {
        let rp = mb::mod_exp_prepared(self.engine, black_box(&self.p_lanes), self.exp_bits);
        let rq = mb::mod_exp_prepared(self.engine, black_box(&self.q_lanes), self.exp_bits);
        black_box((rp.unwrap(), rq.unwrap()));
    }

    fn one_call(&self) {
        black_box(
            mb::mod_exp_prepared(self.engine, black_box(&self.lanes), self.exp_bits).unwrap(),
        );
    }
}

/// `MB_BENCH_SQUARING`: the squaring to run instead of the CPU's own, if set.
fn squaring_override() -> Option<mb::Squaring> {
    let v = std::env::var("MB_BENCH_SQUARING").ok()?;
    match v.as_str() {
        "karatsuba" => Some(mb::Squaring::Karatsuba),
        "columns" => Some(mb::Squaring::Columns),
        _ => panic!("MB_BENCH_SQUARING={v:?}: not karatsuba or columns"),
    }
}

/// `MB_BENCH_ROUNDS`: rounds of the alternating mode, if set.
fn alternate_rounds() -> Option<usize> {
    let v = std::env::var("MB_BENCH_ROUNDS").ok()?;
    match v.trim().parse() {
        Ok(r) if r > 0 => Some(r),
        _ => panic!("MB_BENCH_ROUNDS={v:?}: not a positive number of rounds"),
    }
}

/// µs per request of `f` (which does `per_call` requests), timed for about `budget`.
fn time_per_request(per_call: usize, budget: Duration, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    let mut calls = 0u32;
    while calls < 2 || t.elapsed() < budget {
        f();
        calls += 1;
    }
    t.elapsed().as_secs_f64() * 1e6 / (calls as usize * per_call) as f64
}

/// The alternating mode: per size, `rounds` rounds of OpenSSL, kae's two shapes and crypto_mb
/// in turn; medians of each and of the per-round ratios.
fn alternate(cases: &[Case], engine: Engine, peers: &mut [Option<crypto_mb::Crt>], rounds: usize) {
    let budget = Duration::from_millis(200);
    println!();
    println!(
        "mb_kernel, {rounds} alternating rounds per size: medians, µs per request (kernel: \
         exponentiations only); ratios are medians of per-round ratios"
    );
    println!("OpenSSL: {}", openssl::version::version());
    println!(
        "{:<9} {:<12} {:>9} {:>12} {:>12} {:>9} {:>14} {:>10}",
        "size",
        "engine",
        "OpenSSL",
        "kae 8req/2c",
        "kae 4req/1c",
        "cmb crt",
        "OpenSSL/kae",
        "kae/cmb"
    );
    for (case, peer) in cases.iter().zip(peers.iter_mut()) {
        let prepared = prepare(case, engine);
        let kae = KaeRuns::new(case, &prepared, engine);
        let mut out = vec![0u8; case.rsa.size() as usize];
        let mut cols: [Vec<f64>; 4] = Default::default();
        let (mut vs_openssl, mut vs_cmb) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut i = 0;
            let o = time_per_request(1, budget, || {
                case.openssl_private(black_box(&case.inputs[i % BATCH]), &mut out);
                i += 1;
            });
            // Which shape goes first alternates too.
            let (k2, k1) = if round % 2 == 0 {
                let a = time_per_request(BATCH, budget, || kae.two_calls());
                (a, time_per_request(HALF_BATCH, budget, || kae.one_call()))
            } else {
                let b = time_per_request(HALF_BATCH, budget, || kae.one_call());
                (time_per_request(BATCH, budget, || kae.two_calls()), b)
            };
            let best = k1.min(k2);
            vs_openssl.push(o / best);
            cols[0].push(o);
            cols[1].push(k2);
            cols[2].push(k1);
            if let Some(p) = peer.as_mut() {
                let c = time_per_request(BATCH, budget, || {
                    p.run();
                });
                cols[3].push(c);
                vs_cmb.push(c / best);
            }
        }
        let [o, k2, k1, c] = cols.map(median);
        let r = |v: &Vec<f64>| median(v.clone()).map_or("-".into(), |m| format!("{m:.2}"));
        println!(
            "{:<9} {:<12} {:>9} {:>12} {:>12} {:>9} {:>14} {:>10}",
            format!("RSA-{}", case.bits),
            engine.name(),
            fmt_us(o),
            fmt_us(k2),
            fmt_us(k1),
            fmt_us(c),
            r(&vs_openssl),
            r(&vs_cmb),
        );
    }
    println!(
        "kae/cmb = crypto_mb µs/request ÷ kae's faster shape in the same round (above 1: kae \
         faster; crypto_mb's figure includes the reductions and recombination kae's does not)"
    );
}

fn bench_case(c: &mut Criterion, case: &Case, engine: Engine, peer: Option<&mut crypto_mb::Crt>) {
    let group = group_name(case.bits);
    let mut g = c.benchmark_group(group.as_str());
    // The portable engine takes a good fraction of a second per call: a fixed iteration count
    // per sample keeps the run short (criterion warns when 10 samples overrun 3 s).
    g.sampling_mode(SamplingMode::Flat);

    g.throughput(Throughput::Elements(1));
    let mut out = vec![0u8; case.rsa.size() as usize];
    g.bench_function(ID_OPENSSL, |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for i in 0..iters {
                let input = &case.inputs[i as usize % BATCH];
                case.openssl_private(black_box(input), &mut out);
                black_box(&out);
            }
            let e = t.elapsed();
            record(&group, ID_OPENSSL, iters, e);
            e
        })
    });

    let prepared = prepare(case, engine);
    let kae = KaeRuns::new(case, &prepared, engine);

    let id = id_two_calls(engine);
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(id.as_str(), |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                kae.two_calls();
            }
            let e = t.elapsed();
            record(&group, &id, iters, e);
            e
        })
    });

    let id = id_one_call(engine);
    g.throughput(Throughput::Elements(HALF_BATCH as u64));
    g.bench_function(id.as_str(), |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                kae.one_call();
            }
            let e = t.elapsed();
            record(&group, &id, iters, e);
            e
        })
    });

    if let Some(peer) = peer {
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function(ID_CRYPTO_MB, |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    peer.run();
                }
                let e = t.elapsed();
                record(&group, ID_CRYPTO_MB, iters, e);
                e
            })
        });
    }
    g.finish();
}

/// Where criterion writes its results: `CRITERION_HOME`, else `<target dir>/criterion` (the
/// target dir from `CARGO_TARGET_DIR`, else the ancestor of this binary holding cargo's
/// `CACHEDIR.TAG`). Set explicitly on the `Criterion`, so the summary reads where it writes.
fn output_directory() -> PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return h.into();
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return Path::new(&t).join("criterion");
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map(|d| d.join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"))
}

/// Criterion's median (ns per iteration) of a benchmark measured by this run, if any.
fn criterion_median(dir: &Path, group: &str, id: &str, since: SystemTime) -> Option<f64> {
    // A function id without parameter is stored under `<group>/<id>` (ids and groups here
    // hold no character criterion would replace).
    let file = dir.join(group).join(id).join("new").join("estimates.json");
    let fresh = std::fs::metadata(&file).ok()?.modified().ok()? >= since;
    if !fresh {
        return None; // from an earlier run, or filtered out of this one
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn fmt_us(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.1}"))
}

fn fmt_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    }
}

enum Source {
    /// Criterion's medians, from its estimates of this run.
    Criterion(PathBuf, SystemTime),
    /// The single run each benchmark gets under `--test`.
    TestRuns,
}

fn summary(cases: &[Case], engine: Engine, source: Source, missing_ifma: Option<&str>) {
    let recorded = std::mem::take(&mut *RECORDED.lock().unwrap());
    let mut by_id: HashMap<String, Vec<f64>> = HashMap::new();
    for (id, ns) in recorded {
        by_id.entry(id).or_default().push(ns);
    }
    // µs per request: the iteration time of `id` in `bits`'s group, divided by `per_iter`
    // requests.
    let per_request = |bits: u32, id: &str, per_iter: usize| -> Option<f64> {
        let ns = match &source {
            Source::Criterion(dir, since) => criterion_median(dir, &group_name(bits), id, *since),
            Source::TestRuns => by_id
                .get(&format!("{}/{id}", group_name(bits)))
                .and_then(|v| median(v.clone())),
        }?;
        Some(ns / per_iter as f64 / 1000.0)
    };

    println!();
    if let Some(reason) = missing_ifma {
        println!("{}", no_ifma_line(reason));
    }
    match &source {
        Source::Criterion(..) => println!(
            "mb_kernel summary: criterion medians, µs per request (kernel: exponentiations only, \
             see the bench's header; '-': not measured by this run)"
        ),
        Source::TestRuns => println!(
            "mb_kernel summary (--test: ONE run of each benchmark, not medians; run without \
             --test for real figures), µs per request"
        ),
    }
    println!("OpenSSL: {}", openssl::version::version());
    let two = format!("kernel {BATCH}req/2calls");
    let one = format!("kernel {HALF_BATCH}req/1call");
    println!(
        "{:<9} {:<12} {:>9} {:>19} {:>6} {:>18} {:>6} {:>15} {:>10}",
        "size", "engine", "OpenSSL", two, "ratio", one, "ratio", "crypto_mb crt", "kae/cmb"
    );
    for case in cases {
        let o = per_request(case.bits, ID_OPENSSL, 1);
        let k2 = per_request(case.bits, &id_two_calls(engine), BATCH);
        let k1 = per_request(case.bits, &id_one_call(engine), HALF_BATCH);
        let cmb = per_request(case.bits, ID_CRYPTO_MB, BATCH);
        let best = match (k1, k2) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        println!(
            "{:<9} {:<12} {:>9} {:>19} {:>6} {:>18} {:>6} {:>15} {:>10}",
            format!("RSA-{}", case.bits),
            engine.name(),
            fmt_us(o),
            fmt_us(k2),
            fmt_ratio(o, k2),
            fmt_us(k1),
            fmt_ratio(o, k1),
            fmt_us(cmb),
            fmt_ratio(cmb, best),
        );
    }
    println!(
        "kae/cmb = crypto_mb µs/request ÷ kae's faster shape (above 1: kae faster; crypto_mb's \
         figure includes the reductions and recombination kae's does not)"
    );
    println!("ratio = OpenSSL µs/op ÷ kernel µs/op (above 1: the kernel's share is faster)");
}

fn no_ifma_line(reason: &str) -> String {
    format!(
        "mb_kernel: this CPU has no AVX-512 IFMA ({reason}): measuring the PORTABLE reference \
         engine only, which is not the production kernel"
    )
}

fn main() {
    let start = SystemTime::now();
    let args: Vec<String> = std::env::args().collect();
    let has = |a: &str| args.iter().any(|x| x == a);
    // criterion's rule: test mode under --test, or when run without --bench (cargo test).
    let list = has("--list");
    let test = !list && (has("--test") || !has("--bench"));
    let profile = args.iter().any(|x| x.starts_with("--profile-time"));

    let missing = mb::ifma_missing_reason();
    let engine = match Engine::ifma() {
        Some(Engine::Ifma(token)) => {
            let squaring = squaring_override().unwrap_or(token.squaring());
            println!("squarings: {}", squaring.name());
            Engine::Ifma(token.with_squaring(squaring))
        }
        Some(e) => e,
        None => {
            let reason = missing.as_deref().unwrap_or("not detected");
            println!("{}", no_ifma_line(reason));
            Engine::Portable
        }
    };

    let dir = output_directory();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .output_directory(&dir)
        .configure_from_args();

    let lib = crypto_mb::load();
    let mut peer_notes = Vec::new();
    let mut cases = Vec::new();
    let mut peers = Vec::new();
    let rounds = alternate_rounds();
    for bits in sizes() {
        let case = Case::new(bits);
        if !list {
            case.verify(engine);
        }
        let mut peer = match &lib {
            Ok(lib) => {
                crypto_mb::Crt::new(lib, &case).map_err(|e| format!("crypto_mb, RSA-{bits}: {e}"))
            }
            Err(e) => Err(format!("crypto_mb: {e}")),
        };
        match &peer {
            Err(e) if !peer_notes.contains(e) => peer_notes.push(e.clone()),
            _ => {}
        }
        if rounds.is_none() {
            bench_case(&mut c, &case, engine, peer.as_mut().ok());
        }
        peers.push(peer.ok());
        cases.push(case);
    }
    match rounds {
        Some(_) if list => return,
        Some(rounds) => alternate(&cases, engine, &mut peers, if test { 1 } else { rounds }),
        None => {
            c.final_summary();
            if list || profile {
                return;
            }
            let source = if test {
                Source::TestRuns
            } else {
                Source::Criterion(dir, start)
            };
            summary(&cases, engine, source, missing.as_deref());
        }
    }
    for note in peer_notes {
        println!("{note}: no crypto_mb column");
    }
}
