//! PKCS#1 v1.5 block type 1 (signature) decoding: `unpad_type1` / `decode_type1` must
//! accept exactly the blocks the plain reference accepts, return the same payload, and
//! re-encoding an accepted payload must give back the block.
#![no_main]
use kae::rsa::padding::pkcs1;
use kae_fuzz::{reference, Rd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let out_len = r.u8() as usize;
    let em = r.rest();
    let want = reference::type1(em);
    let got = pkcs1::unpad_type1(em).ok();
    assert_eq!(got, want, "unpad_type1 disagrees with the reference");
    let mut out = vec![0xA5u8; out_len];
    match pkcs1::decode_type1(em, &mut out) {
        Ok(n) => {
            let m = want.expect("decode_type1 accepted a block the reference rejects");
            assert_eq!(&out[..n], m);
            let mut again = vec![0u8; em.len()];
            pkcs1::encode_type1(m, &mut again).expect("re-encode");
            assert_eq!(again, em, "accepted block is not the canonical encoding");
        }
        Err(_) => {
            assert!(
                want.is_none_or(|m| m.len() > out_len),
                "valid block refused"
            );
            assert!(out.iter().all(|&b| b == 0xA5), "output written on failure");
        }
    }
});
