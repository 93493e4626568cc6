//! PKCS#1 v1.5 block type 2 (encryption) decoding, with and without implicit rejection.
//! `decode_type2` must succeed exactly when the reference finds a message that fits the
//! output, return it, and leave the output untouched otherwise. `decode_type2_implicit`
//! must return the real message for valid blocks, and for invalid ones a deterministic
//! synthetic message no longer than k - 11 (never an error).
#![no_main]
use kae::rsa::padding::{pkcs1, DigestId};
use kae_fuzz::{reference, Md, Rd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let out_len = r.u16() as usize % 1024;
    let mut kdk = [0u8; pkcs1::KDK_LEN];
    kdk.copy_from_slice(&{
        let mut k = r.take(pkcs1::KDK_LEN).to_vec();
        k.resize(pkcs1::KDK_LEN, 0);
        k
    });
    let em = r.rest();
    let want = reference::type2(em);

    let mut out = vec![0x5Au8; out_len];
    match pkcs1::decode_type2(em, &mut out) {
        Ok(n) => {
            let m = want.expect("decode_type2 accepted a block the reference rejects");
            assert_eq!(&out[..n], m);
            assert!(
                out[n..].iter().all(|&b| b == 0x5A),
                "wrote past the message"
            );
        }
        Err(e) => {
            assert_eq!(e, kae::error::KaeError::PaddingCheckFailed);
            assert!(
                want.is_none_or(|m| m.len() > out_len),
                "valid block refused"
            );
            assert!(out.iter().all(|&b| b == 0x5A), "output written on failure");
        }
    }

    if em.len() < pkcs1::PKCS1_PADDING_SIZE || out_len == 0 {
        return;
    }
    let sha256 = Md(DigestId::Sha256);
    let mut a = vec![0u8; out_len];
    let mut b = vec![0u8; out_len];
    let na = pkcs1::decode_type2_implicit(&sha256, &kdk, em, &mut a).expect("implicit never fails");
    let nb = pkcs1::decode_type2_implicit(&sha256, &kdk, em, &mut b).expect("implicit never fails");
    assert_eq!(
        (na, &a[..na]),
        (nb, &b[..nb]),
        "synthetic message not deterministic"
    );
    match want {
        Some(m) if m.len() <= out_len => assert_eq!(&a[..na], m, "valid block not returned"),
        _ => assert!(
            na <= em.len() - pkcs1::PKCS1_PADDING_SIZE,
            "synthetic too long"
        ),
    }
});
