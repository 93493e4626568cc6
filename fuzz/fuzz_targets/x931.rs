//! X9.31 signature padding: `unpad` agrees with the reference, `decode` copies what it
//! returns, `verify_signature` accepts exactly the canonical encoding of the digest.
#![no_main]
use kae::rsa::padding::x931;
use kae_fuzz::{digest, reference, Rd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let id = digest(r.u8());
    let out_len = r.u8() as usize;
    let em = r.rest();
    let want = reference::x931(em);
    assert_eq!(
        x931::unpad(em).ok(),
        want,
        "unpad disagrees with the reference"
    );
    let mut out = vec![0u8; out_len];
    match x931::decode(em, &mut out) {
        Ok(n) => assert_eq!(Some(&out[..n]), want),
        Err(_) => assert!(want.is_none_or(|d| d.len() > out_len)),
    }
    if let (Some(d), Some(hid)) = (want, id.x931_hash_id()) {
        // The digest the block would carry, if its last byte is this digest's id.
        if let Some((&last, dig)) = d.split_last() {
            let ok = x931::verify_signature(id, dig, em).is_ok();
            let canonical = last == hid && dig.len() == id.output_len() && {
                let mut e2 = vec![0u8; em.len()];
                x931::encode_signature(id, dig, &mut e2).is_ok() && e2 == em
            };
            assert_eq!(ok, canonical, "verify_signature vs canonical encoding");
        }
    }
});
