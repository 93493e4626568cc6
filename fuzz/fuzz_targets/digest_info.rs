//! DigestInfo (EMSA-PKCS1-v1_5) handling: `strip_digest_info` returns the digest exactly
//! when the payload is this digest's DigestInfo prefix followed by a digest of the right
//! length, and `verify_signature` accepts a block exactly when it is the canonical
//! type-1 encoding of that DigestInfo.
#![no_main]
use kae::rsa::padding::pkcs1;
use kae_fuzz::{digest, reference, Rd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Rd(data);
    let id = digest(r.u8());
    let mode = r.u8();
    let rest = r.rest();
    let prefix = id.digest_info_prefix().unwrap_or(&[]);
    // Mode 1: a block built from a real DigestInfo with fuzzer edits (reaches the match).
    let em: Vec<u8> = if mode & 1 == 1 && rest.len() >= 2 {
        let k = (prefix.len() + id.output_len() + 11).max(rest[0] as usize);
        let dig: Vec<u8> = (0..id.output_len()).map(|i| rest[i % rest.len()]).collect();
        let mut em = vec![0u8; k];
        pkcs1::encode_signature(id, &dig, &mut em).expect("encode");
        if mode & 2 == 2 {
            let i = rest[1] as usize % k;
            em[i] ^= rest[rest.len() - 1];
        }
        em
    } else {
        rest.to_vec()
    };
    let Some(payload) = reference::type1(&em) else {
        return;
    };
    let stripped = pkcs1::strip_digest_info(id, payload).ok();
    let want = (payload.len() == prefix.len() + id.output_len() && payload.starts_with(prefix))
        .then(|| &payload[prefix.len()..]);
    assert_eq!(stripped, want);
    if let Some(d) = want {
        pkcs1::verify_signature(id, d, &em).expect("valid DigestInfo block refused");
        assert_eq!(pkcs1::digest_info(id, d).unwrap(), payload);
    } else {
        // No digest of the right length makes this block verify.
        let d: Vec<u8> = payload
            .iter()
            .rev()
            .take(id.output_len())
            .copied()
            .collect();
        if d.len() == id.output_len() {
            assert!(
                pkcs1::verify_signature(id, &d, &em).is_err() || {
                    let mut e2 = vec![0u8; em.len()];
                    pkcs1::encode_signature(id, &d, &mut e2).is_ok() && e2 == em
                }
            );
        }
    }
});
