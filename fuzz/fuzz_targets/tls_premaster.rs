//! TLS premaster decoding (RFC 5246 §7.4.7.1): the output is the block's 48-byte message
//! exactly when it is a valid type-2 block carrying an accepted version, otherwise the
//! caller's random premaster; never an error for k >= 59.
#![no_main]
use kae::rsa::padding::pkcs1::{self, TLS_PREMASTER_LEN};
use kae_fuzz::{reference, Rd, SeedRng};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let client = r.u16();
    let negotiated = match r.u8() % 3 {
        0 => None,
        1 => Some(0),
        _ => Some(r.u16()),
    };
    let seed = u64::from(r.u32());
    // Often build a block that is valid apart from the fuzzer's edits, so the good path
    // is reached: 00 02 PS 00 version || 46 bytes.
    let em: Vec<u8> = if r.bool() {
        let k = 59 + r.u8() as usize;
        let mut em = vec![0x11u8; k];
        em[0] = 0;
        em[1] = 2;
        em[k - 49] = 0;
        em[k - 48..k - 46].copy_from_slice(&client.to_be_bytes());
        for _ in 0..(r.u8() % 4) {
            let i = r.u8() as usize % k;
            em[i] = r.u8();
        }
        em
    } else {
        r.rest().to_vec()
    };
    let rng = SeedRng(seed);
    let mut fallback = [0u8; TLS_PREMASTER_LEN];
    kae::rsa::padding::RandomSource::fill(&rng, &mut fallback).unwrap();
    let mut out = [0u8; TLS_PREMASTER_LEN];
    let res = pkcs1::decode_tls_premaster(&em, client, negotiated, &fallback, &mut out);
    if em.len() < 59 {
        assert!(res.is_err());
        return;
    }
    res.expect("no error for k >= 59");
    match reference::tls_premaster(&em, client, negotiated) {
        Some(m) => assert_eq!(&out[..], m),
        None => assert_eq!(out, fallback),
    }
    let mut out2 = [0u8; TLS_PREMASTER_LEN];
    pkcs1::decode_tls_premaster_rng(&em, client, negotiated, &SeedRng(seed), &mut out2).unwrap();
    assert_eq!(out, out2);
});
