//! The multi-buffer kernel (`kae::mb`) against num-bigint (the oracle) and OpenSSL's
//! `BN_mod_exp`, on every size, with random and edge inputs, partial batches, lane
//! independence and small public exponents, each also by the public-exponent routine (the
//! fault check's); and its secret-taint check under valgrind.
//!
//! Each case runs on the portable lanes and, where the CPU has AVX-512 IFMA, on the IFMA lanes
//! too, each once with each way of squaring (`mb::Squaring`; every run must agree with the
//! first portable one bit for bit). Without IFMA the IFMA half is skipped with a message
//! saying so.

use kae::ffi::memcheck::{mark_public_words, mark_secret_words};
use kae::mb::{self, Engine, Lane, Size};
use num_bigint::BigUint;
mod skip;
mod taint_support;

use taint_support::{assert_taint_child_clean, from_words, Xs};

fn words(x: &BigUint, w: usize) -> Vec<u64> {
    let mut v = x.to_u64_digits();
    assert!(v.len() <= w, "value wider than {w} words");
    v.resize(w, 0);
    v
}

fn engines() -> Vec<Engine> {
    let mut v = vec![Engine::Portable, Engine::PortableColumns];
    match Engine::ifma() {
        Some(Engine::Ifma(token)) => v.extend(
            [mb::Squaring::Karatsuba, mb::Squaring::Columns]
                .map(|s| Engine::Ifma(token.with_squaring(s))),
        ),
        Some(other) => unreachable!("Engine::ifma gave {other:?}"),
        None => skip::skipped(
            "mb_kernel's AVX-512 IFMA engine natively (portable lanes tested; \
             scripts/ifma-emulate.sh runs the IFMA code)",
            &mb::ifma_missing_reason().unwrap_or_default(),
            skip::UnderCi::MayLack,
        ),
    }
    v
}

struct Case {
    m: BigUint,
    b: BigUint,
    e: BigUint,
}

/// Runs `cases` (1 to 8 lanes) on every engine and checks each lane against num-bigint, and
/// OpenSSL's BN_mod_exp; returns the portable results.
fn check(size: Size, cases: &[Case], exp_bits: usize) -> Vec<BigUint> {
    let w = size.words();
    let ew = exp_bits.div_ceil(64).max(1);
    let data: Vec<[Vec<u64>; 3]> = cases
        .iter()
        .map(|c| [words(&c.m, w), words(&c.b, w), words(&c.e, ew)])
        .collect();
    let lanes: Vec<Lane> = data
        .iter()
        .map(|[m, b, e]| Lane {
            modulus: m,
            base: b,
            exp: e,
        })
        .collect();
    let mut first: Option<Vec<BigUint>> = None;
    for engine in engines() {
        let got = mb::mod_exp(engine, size, &lanes, exp_bits).unwrap();
        let got: Vec<BigUint> = got.iter().map(|r| from_words(r)).collect();
        for (i, c) in cases.iter().enumerate() {
            let want = c.b.modpow(&c.e, &c.m);
            assert_eq!(
                got[i],
                want,
                "{} {size:?} lane {i}: m={:x} b={:x} e={:x}",
                format_args!("{engine:?}"),
                c.m,
                c.b,
                c.e
            );
            let mut ctx = openssl::bn::BigNumContext::new().unwrap();
            let mut r = openssl::bn::BigNum::new().unwrap();
            let bn = |x: &BigUint| openssl::bn::BigNum::from_slice(&x.to_bytes_be()).unwrap();
            r.mod_exp(&bn(&c.b), &bn(&c.e), &bn(&c.m), &mut ctx)
                .unwrap();
            assert_eq!(
                BigUint::from_bytes_be(&r.to_vec()),
                got[i],
                "OpenSSL, lane {i}"
            );
        }
        // The public-exponent exponentiation (the fault check's) on the same lanes, moduli
        // prepared once: the same results.
        let moduli: Vec<&[u64]> = data.iter().map(|d| &d[0][..]).collect();
        let prepared = mb::Prepared::many(engine, size, &moduli).unwrap();
        let public_lanes: Vec<mb::PreparedLane> = data
            .iter()
            .zip(&prepared)
            .map(|([_, b, e], p)| mb::PreparedLane {
                modulus: p,
                base: b,
                exp: e,
            })
            .collect();
        let public = mb::mod_exp_public(engine, &public_lanes, exp_bits).unwrap();
        for (i, r) in public.iter().enumerate() {
            let r = from_words(r.as_ref().unwrap());
            assert_eq!(
                r,
                got[i],
                "{} {size:?} public exponent, lane {i}",
                format_args!("{engine:?}")
            );
        }
        match &first {
            None => first = Some(got),
            Some(p) => assert_eq!(p, &got, "IFMA lanes differ from the portable ones"),
        }
    }
    first.unwrap()
}

#[test]
fn random_inputs_on_every_size_with_eight_different_moduli() {
    let mut g = Xs(0x9E37_79B9_7F4A_7C15);
    for size in Size::ALL {
        let bits = size.bits();
        let cases: Vec<Case> = (0..8)
            .map(|i| {
                // Lanes 6 and 7: moduli narrower than the class.
                let mbits = if i >= 6 { bits - 1 - 13 * i } else { bits };
                let m = g.odd_modulus(mbits);
                let b = if i == 5 {
                    g.below_bits(bits) // not reduced: any value of the class's width
                } else {
                    g.below_bits(bits) % &m
                };
                Case {
                    m,
                    b,
                    e: g.below_bits(bits),
                }
            })
            .collect();
        check(size, &cases, bits);
    }
}

#[test]
fn edge_values() {
    let mut g = Xs(0x0123_4567_89AB_CDEF);
    for size in Size::ALL {
        let bits = size.bits();
        let one = BigUint::from(1u8);
        let all_ones = (&one << bits) - 1u8; // odd, every limb all ones
        let top_only = (&one << (bits - 1)) + 1u8; // the top bit (and the low bit for oddness)
        let m = g.odd_modulus(bits);
        let e = g.below_bits(bits);
        let cases = vec![
            Case {
                m: m.clone(),
                b: BigUint::ZERO,
                e: e.clone(),
            },
            Case {
                m: m.clone(),
                b: one.clone(),
                e: e.clone(),
            },
            Case {
                m: m.clone(),
                b: &m - 1u8,
                e: e.clone(),
            },
            Case {
                m: all_ones.clone(),
                b: &all_ones - 2u8,
                e: e.clone(),
            },
            Case {
                m: top_only.clone(),
                b: &top_only - 1u8,
                e: e.clone(),
            },
            Case {
                m: m.clone(),
                b: g.below_bits(bits) % &m,
                e: BigUint::ZERO,
            },
            Case {
                m: m.clone(),
                b: g.below_bits(bits) % &m,
                e: one.clone(),
            },
            Case {
                m: top_only.clone(),
                b: all_ones.clone() >> 1,
                e: all_ones.clone(),
            },
        ];
        check(size, &cases, bits);
    }
}

#[test]
fn small_public_exponents_and_partial_batches() {
    let mut g = Xs(0xDEAD_BEEF_F00D_1234);
    for size in Size::ALL {
        let bits = size.bits();
        for lanes in [1usize, 3, 7] {
            let cases: Vec<Case> = (0..lanes)
                .map(|i| {
                    let m = g.odd_modulus(bits);
                    Case {
                        b: g.below_bits(bits) % &m,
                        m,
                        e: BigUint::from([65537u32, 3, 17][i % 3]),
                    }
                })
                .collect();
            check(size, &cases, 17);
        }
    }
}

#[test]
fn changing_one_lane_never_changes_another() {
    let mut g = Xs(0x5555_AAAA_1234_5678);
    let size = Size::B1024;
    let bits = size.bits();
    let mut cases: Vec<Case> = (0..8)
        .map(|_| {
            let m = g.odd_modulus(bits);
            Case {
                b: g.below_bits(bits) % &m,
                m,
                e: g.below_bits(bits),
            }
        })
        .collect();
    let before = check(size, &cases, bits);
    let mut changed = Vec::new();
    for lane in [0usize, 3, 7] {
        changed.push(lane);
        let m = g.odd_modulus(bits - 7);
        cases[lane] = Case {
            b: g.below_bits(bits),
            e: BigUint::ZERO,
            m,
        };
        let after = check(size, &cases, bits);
        assert_ne!(
            after[lane], before[lane],
            "lane {lane}'s own result must change"
        );
        for i in (0..8).filter(|i| !changed.contains(i)) {
            assert_eq!(after[i], before[i], "lane {i} changed when lane {lane} did");
        }
    }
}

const CHILD: &str = "KAE_MB_TAINT_CHILD";

/// Runs under valgrind (started by the test below); not a test on its own. The moduli, bases
/// and exponents are marked undefined (the public-exponent routine's exponents excepted): any
/// branch, address or length that depends on them is a memcheck error. valgrind has no AVX-512,
/// so this checks the portable instantiations of the generic kernel (with each squaring); the
/// IFMA ones run the same code with instruction-for-lane operations that are themselves
/// constant time. Two sizes:
/// 512 bits (the fused rows) and 1536 bits with a 64-bit exponent (the blocked products of
/// `mb::kernel::wide`, kept short for valgrind's sake).
#[test]
#[ignore]
fn taint_child() {
    if std::env::var_os(CHILD).is_none() {
        panic!("run by kernel_has_no_secret_dependent_branch_or_address under valgrind only");
    }
    if taint_support::canary_branch() {
        return;
    }
    taint_size(Size::B512, Size::B512.bits(), 0x1357_9BDF_2468_ACE0);
    taint_size(Size::B1536, 64, 0x2468_ACE0_1357_9BDF);
}

/// [`taint_child`]'s exponentiations in one size class, secret exponents of `exp_bits` bits.
fn taint_size(size: Size, exp_bits: usize, seed: u64) {
    let mut g = Xs(seed);
    let bits = size.bits();
    let w = size.words();
    let cases: Vec<(BigUint, BigUint, BigUint)> = (0..8)
        .map(|_| {
            let m = g.odd_modulus(bits);
            (m.clone(), g.below_bits(bits) % &m, g.below_bits(exp_bits))
        })
        .collect();
    let data: Vec<[Vec<u64>; 3]> = cases
        .iter()
        .map(|(m, b, e)| [words(m, w), words(b, w), words(e, w)])
        .collect();
    for d in &data {
        for v in d {
            mark_secret_words(v);
        }
    }
    let lanes: Vec<Lane> = data
        .iter()
        .map(|[m, b, e]| Lane {
            modulus: m,
            base: b,
            exp: e,
        })
        .collect();
    for engine in [Engine::Portable, Engine::PortableColumns] {
        let got = mb::mod_exp(engine, size, &lanes, exp_bits).unwrap();
        for (r, (m, b, e)) in got.iter().zip(&cases) {
            mark_public_words(r);
            assert_eq!(from_words(r), b.modpow(e, m), "{size:?}, {engine:?}");
        }
    }
    // The fault check's routine: moduli and bases secret (a blinded result), exponents public.
    let public_e: Vec<Vec<u64>> = (0..8).map(|i| vec![[65537u64, 3, 17][i % 3]]).collect();
    let moduli: Vec<&[u64]> = data.iter().map(|d| &d[0][..]).collect();
    let prepared = mb::Prepared::many(Engine::Portable, size, &moduli).unwrap();
    let public_lanes: Vec<mb::PreparedLane> = data
        .iter()
        .zip(&prepared)
        .zip(&public_e)
        .map(|(([_, b, _], p), e)| mb::PreparedLane {
            modulus: p,
            base: b,
            exp: e,
        })
        .collect();
    let got = mb::mod_exp_public(Engine::Portable, &public_lanes, 17).unwrap();
    for ((r, (m, b, _)), e) in got.iter().zip(&cases).zip(&public_e) {
        let r = r.as_ref().unwrap();
        mark_public_words(r);
        assert_eq!(from_words(r), b.modpow(&BigUint::from(e[0]), m));
    }
    // Blinding in the lanes: the pairs made from secret values, then a blinded call (every
    // input secret) that also squares them.
    let pair_values: Vec<[Vec<u64>; 2]> = cases
        .iter()
        .map(|(m, _, _)| {
            [
                words(&(g.below_bits(bits) % m), w),
                words(&(g.below_bits(bits) % m), w),
            ]
        })
        .collect();
    for v in pair_values.iter().flatten() {
        mark_secret_words(v);
    }
    let plain: Vec<(&mb::Prepared, &[u64], &[u64])> = prepared
        .iter()
        .zip(&pair_values)
        .map(|(p, [a, ai])| (p, &a[..], &ai[..]))
        .collect();
    let mut pairs = mb::LaneBlinding::many(Engine::Portable, &plain).unwrap();
    let mut lanes: Vec<mb::BlindedLane> = data
        .iter()
        .zip(&prepared)
        .zip(pairs.iter_mut())
        .map(|(([_, b, e], p), blinding)| mb::BlindedLane {
            modulus: p,
            base: b,
            exp: e,
            blinding,
        })
        .collect();
    let got = mb::mod_exp_blinded(Engine::Portable, &mut lanes, exp_bits).unwrap();
    for ((r, (m, b, e)), [a, ai]) in got.iter().zip(&cases).zip(&pair_values) {
        let r = r.as_ref().unwrap();
        mark_public_words(r);
        mark_public_words(a);
        mark_public_words(ai);
        let want = (b * from_words(a)).modpow(e, m) * from_words(ai) % m;
        assert_eq!(from_words(r), want, "{size:?}, blinded");
    }
}

#[test]
fn kernel_has_no_secret_dependent_branch_or_address() {
    assert_taint_child_clean(CHILD, "the kernel");
}

/// The kernel's frames are large (tens of KiB at 2048-bit moduli) and a kernel call can be made
/// on an OpenSSL async job, whose whole stack is 32 KiB: every call must run on the kernel's own
/// stack (`kae::ffi::stack`). Here a thread with a 16 KiB stack, less than the kernel's frames
/// alone, makes calls of every size on every engine: without the switch it overflows its stack
/// (the process aborts).
#[test]
fn kernel_calls_fit_on_a_small_stack() {
    for engine in engines() {
        let done = std::thread::Builder::new()
            .name("small-stack".into())
            .stack_size(16 * 1024)
            .spawn(move || {
                for size in Size::ALL {
                    let w = size.words();
                    let mut m = vec![u64::MAX; w];
                    m[0] = u64::MAX - 58; // odd
                    let b = vec![3u64; w];
                    let e = vec![u64::MAX; w];
                    let lanes = vec![
                        Lane {
                            modulus: &m,
                            base: &b,
                            exp: &e,
                        };
                        mb::LANES
                    ];
                    let r = mb::mod_exp(engine, size, &lanes, size.bits()).unwrap();
                    assert_eq!(r.len(), mb::LANES);
                }
                size_of::<usize>()
            })
            .unwrap()
            .join();
        assert!(
            done.is_ok(),
            "{}: a kernel call failed on a small stack",
            format_args!("{engine:?}")
        );
    }
}
