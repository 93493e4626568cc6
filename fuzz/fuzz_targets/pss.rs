//! EMSA-PSS verification: kae's `verify` must accept exactly what the RFC 8017 reference
//! accepts (same salt length) for every salt policy, modulus size and hash pair; a block
//! kae encoded verifies; any edit of it is refused.
#![no_main]
use kae::rsa::padding::{pss, SaltLen};
use kae_fuzz::{digest, reference, Md, Rd, SeedRng};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let h = Md(digest(r.u8()));
    let mgf = Md(digest(r.u8()));
    let mod_bits = r.u16() as usize % 4200;
    let k = mod_bits.div_ceil(8);
    let policy = |r: &mut Rd| match r.u8() % 6 {
        0 => SaltLen::Digest,
        1 => SaltLen::Max,
        2 => SaltLen::Auto,
        3 => SaltLen::AutoDigestMax,
        _ => SaltLen::Fixed(r.u16() as usize % 600),
    };
    let sign_policy = policy(&mut r);
    let verify_policy = policy(&mut r);
    let m_hash: Vec<u8> = (0..h.0.output_len()).map(|_| r.u8()).collect();
    let mut edited = false;
    let (em, signed_salt) = if r.bool() {
        let mut em = vec![0u8; k];
        let Ok(s) = pss::encode(
            &h,
            &mgf,
            &m_hash,
            sign_policy,
            mod_bits,
            &SeedRng(7),
            &mut em,
        ) else {
            return;
        };
        for _ in 0..(r.u8() % 3) {
            let x = r.u8();
            if k > 0 && x != 0 {
                em[r.u16() as usize % k] ^= x;
                edited = true;
            }
        }
        (em, Some(s))
    } else {
        let mut em = r.rest().to_vec();
        em.resize(k, 0);
        (em, None)
    };
    let hlen = h.0.output_len();
    let em_len = mod_bits.saturating_sub(1).div_ceil(8);
    let expected = match verify_policy {
        SaltLen::Digest => Some(hlen),
        SaltLen::Max => Some(em_len.saturating_sub(hlen + 2)),
        SaltLen::Fixed(n) => Some(n),
        SaltLen::Auto | SaltLen::AutoDigestMax => None,
    };
    let got = pss::verify(&h, &mgf, &m_hash, verify_policy, mod_bits, &em).ok();
    let want = reference::pss(&h, &mgf, &m_hash, mod_bits, expected, &em);
    assert_eq!(got, want, "verify disagrees with the reference");
    if let Some(s) = signed_salt {
        if edited {
            // An edited block verifies only if the edit cancelled out (x ^ x).
            let mut clean = vec![0u8; k];
            pss::encode(
                &h,
                &mgf,
                &m_hash,
                sign_policy,
                mod_bits,
                &SeedRng(7),
                &mut clean,
            )
            .unwrap();
            assert!(got.is_none() || clean == em, "edited block verified");
        } else if expected.is_none_or(|e| e == s) {
            assert_eq!(got, Some(s), "own encoding refused");
        }
    }
});
