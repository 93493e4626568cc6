//! Secret-taint check (ctgrind style) of the CRT recombination and the limb arithmetic of
//! the private path: the test re-runs itself under valgrind memcheck with every secret input
//! (m1, m2, p, q, qInv·R, the blinding pair, the blinded value) marked undefined; any
//! conditional jump, move or address computed from them is a memcheck error, and the run
//! fails. Only the final result is declassified, after the computation, to compare it.
//!
//! The recombination used before (`BN_mod_sub_quick` on the BIGNUMs) fails this check: its
//! sign test branches on m1 − m2.

use kae::ffi::memcheck::{
    mark_public, mark_public_words as make_defined, mark_secret_words as make_undefined,
};
use kae::rsa::ct_limbs::{self, from_le_bytes, Modulus};
use kae::rsa::ops::recombine;
use num_bigint::BigUint;
mod taint_support;

use taint_support::{assert_taint_child_clean, Xs};

const CHILD: &str = "KAE_TAINT_CHILD";

fn limbs(x: &BigUint, w: usize) -> ct_limbs::Limbs {
    let mut b = x.to_bytes_le();
    b.resize(8 * w, 0);
    from_le_bytes(&b)
}

fn value(l: &[u64]) -> BigUint {
    BigUint::from_bytes_le(&ct_limbs::to_le_bytes(l))
}

/// Runs under valgrind (started by the test below); not a test on its own.
#[test]
#[ignore]
fn taint_child() {
    if std::env::var_os(CHILD).is_none() {
        panic!("run by secret_paths_have_no_secret_dependent_branches under valgrind only");
    }
    if taint_support::canary_branch() {
        return;
    }
    let mut g = Xs(0x0123_4567_89ab_cdef);
    // p > q, p < q, and unequal widths both ways.
    for (wp, wq) in [(4usize, 4usize), (4, 4), (5, 3), (3, 5)] {
        let p = g.odd(wp);
        let (q, qinv) = loop {
            let q = g.odd(wq);
            if let Some(i) = q.modinv(&p) {
                break (q, i);
            }
        };
        let n = &p * &q;
        let wn = (n.bits() as usize).div_ceil(64);
        for case in 0..4 {
            let m = match case {
                0 => BigUint::from(0u8),
                1 => std::cmp::min(&p, &q) - 1u8, // h = 0
                _ => {
                    let v: Vec<u64> = (0..wn).map(|_| g.next()).collect();
                    value(&v) % &n
                }
            };
            let pl = limbs(&p, wp);
            let ql = limbs(&q, wq);
            let m1 = limbs(&(&m % &p), wp);
            let m2 = limbs(&(&m % &q), wq);
            make_undefined(&pl[..]);
            make_undefined(&ql[..]);
            let (lp, lq) = (Modulus::new(pl), Modulus::new(ql));
            let qinv_l = limbs(&qinv, wp);
            make_undefined(&qinv_l[..]);
            let qinv_mont = lp.to_mont(&qinv_l);
            make_undefined(&m1[..]);
            make_undefined(&m2[..]);
            let got = recombine(&m1, &m2, &lp, &lq, &qinv_mont, wn);
            make_defined(&got[..]);
            let got = std::hint::black_box(&got);
            assert_eq!(value(&got), m);

            // The blinding steps and the reductions of the private path on secret values.
            let nl = limbs(&n, wn);
            let ln = Modulus::new(nl);
            let x = limbs(&(&m % &n), wn);
            let r_big = value(&[g.next(), g.next()]) % &n;
            let r = limbs(&r_big, wn);
            make_undefined(&r[..]);
            // r^e of a fresh pair (public e), then its squaring per use.
            let a = ln.pow_public_exp(&ln.to_mont(&r), &[65537]);
            let a2 = ln.mont_mul(&a, &a);
            let xb = ln.mont_mul(&x, &a2);
            let cp = lp.reduce(&xb);
            let cq = lq.reduce(&xb);
            let diff = lp.mod_sub(&cp, &lp.reduce(&cq));
            let mut out = vec![0u8; wn * 8];
            ct_limbs::write_be(&xb, &mut out);
            let eq = [ct_limbs::eq(&xb, &xb)];
            mark_public(&out);
            make_defined(&eq);
            make_defined(&diff[..]);
            // Read back from memory: a copy the optimiser kept in a register before the client
            // requests would still carry the taint into the checks below (it depends on
            // inlining, so on the build profile).
            let (out, eq, diff) = (
                std::hint::black_box(&out),
                std::hint::black_box(&eq),
                std::hint::black_box(&diff),
            );
            let re = r_big.modpow(&BigUint::from(65537u32), &n);
            let want = (&m * &re * &re) % &n;
            assert_eq!(BigUint::from_bytes_be(&out), want);
            assert_eq!(eq[0], 1);
            assert_eq!(value(&diff), (&want % &p + &p - (&want % &q) % &p) % &p);
        }
    }
}

#[test]
fn secret_paths_have_no_secret_dependent_branches() {
    assert_taint_child_clean(CHILD, "the private path's limb code");
}
