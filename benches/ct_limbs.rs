//! The single-number Montgomery product of `rsa::ct_limbs` (blinding, unblinding, the
//! reductions modulo the primes, the recombination): the AVX-512 IFMA product against the
//! portable one, same inputs, same core, alternating rounds; prints µs per product and the
//! ratio (median of the per-round ratios). On a CPU without IFMA only the portable column.
//!
//! usage: cargo bench --bench ct_limbs   (CT_BENCH_ROUNDS=N, default 7)

use kae::rsa::ct_limbs::{Limbs, Modulus};
use std::hint::black_box;
use std::time::Instant;
use zeroize::Zeroizing;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn odd(w: usize, s: &mut u64) -> Limbs {
    let mut v: Vec<u64> = (0..w).map(|_| xorshift(s)).collect();
    v[0] |= 1;
    v[w - 1] |= 1 << 63;
    Zeroizing::new(v)
}

/// µs per product: `iters` products chained (each result is the next `a`).
fn time(m: &Modulus, a: &Limbs, b: &Limbs, iters: usize) -> f64 {
    let mut x = a.clone();
    let t = Instant::now();
    for _ in 0..iters {
        x = m.mont_mul(black_box(&x), b);
    }
    black_box(&x);
    t.elapsed().as_secs_f64() * 1e6 / iters as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("CT_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut seed = 0x2545_f491_4f6c_dd1d;
    println!("bits  portable µs  ifma µs  portable/ifma (median of {rounds} rounds)");
    for bits in [1024usize, 2048, 3072, 4096] {
        let w = bits / 64;
        let m = odd(w, &mut seed);
        // b < m: the top word one below m's
        let mut b = odd(w, &mut seed);
        b[w - 1] = m[w - 1] - 1;
        let a = odd(w, &mut seed);
        let fast = Modulus::new(m.clone());
        let slow = Modulus::new(m).without_ifma();
        let has_ifma = kae::mb::IfmaToken::detect().is_some();
        let iters = 4_000_000 / (w * w);
        let (mut ps, mut fs, mut rs) = (vec![], vec![], vec![]);
        for _ in 0..rounds {
            let p = time(&slow, &a, &b, iters);
            ps.push(p);
            if has_ifma {
                let f = time(&fast, &a, &b, iters);
                fs.push(f);
                rs.push(p / f);
            }
        }
        if has_ifma {
            println!(
                "{bits:5}  {:11.3}  {:7.3}  {:.2}",
                median(&mut ps),
                median(&mut fs),
                median(&mut rs)
            );
        } else {
            println!("{bits:5}  {:11.3}  (no IFMA)", median(&mut ps));
        }
    }
}
