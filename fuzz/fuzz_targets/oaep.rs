//! EME-OAEP decoding: kae's constant-time `decode` must agree with the plain reference
//! decoder for any block, hash / MGF1 hash pair, label and output size, and leave the
//! output untouched on failure. Half the inputs are real encodings with fuzzer edits, so
//! the success path and near-misses are reached.
#![no_main]
use kae::rsa::padding::oaep;
use kae_fuzz::{digest, reference, Md, Rd, SeedRng};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let h = Md(digest(r.u8()));
    let mgf = Md(digest(r.u8()));
    let label = r.bytes().to_vec();
    let out_len = r.u16() as usize % 600;
    let em: Vec<u8> = if r.bool() {
        let k = r.u16() as usize % 600;
        let msg = r.bytes().to_vec();
        let mut em = vec![0u8; k];
        if oaep::encode(
            &h,
            &mgf,
            &label,
            &msg,
            &SeedRng(u64::from(r.u32())),
            &mut em,
        )
        .is_err()
        {
            return;
        }
        for _ in 0..(r.u8() % 4) {
            let i = r.u16() as usize % k;
            em[i] ^= r.u8();
        }
        em
    } else {
        r.rest().to_vec()
    };
    let want = reference::oaep(&h, &mgf, &label, &em);
    let mut out = vec![0xC3u8; out_len];
    match oaep::decode(&h, &mgf, &label, &em, &mut out) {
        Ok(n) => {
            let m = want.expect("decode accepted a block the reference rejects");
            assert_eq!(&out[..n], &m[..]);
            assert!(
                out[n..].iter().all(|&b| b == 0xC3),
                "wrote past the message"
            );
        }
        Err(e) => {
            assert_eq!(e, kae::error::KaeError::OaepDecodingError);
            assert!(
                want.is_none_or(|m| m.len() > out_len),
                "valid block refused"
            );
            assert!(out.iter().all(|&b| b == 0xC3), "output written on failure");
        }
    }
});
