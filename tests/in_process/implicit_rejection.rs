//! Implicit rejection (RSAES-PKCS1-v1_5 decryption that answers a padding failure with a
//! synthetic message instead of an error) checked at the provider level against known answers
//! that do not come from kae, in the running core's terms: kae follows the core it is loaded
//! into, as the core's default provider does.
//!
//! * OpenSSL 3.2+: implicit rejection is on by default and `implicit-rejection=0` turns it
//!   off; every invalid vector decrypts to its known synthetic message, in kae and in the
//!   default provider, byte for byte the same.
//! * Before 3.2: there is no implicit rejection and no parameter for it (setting it is
//!   ignored, as by the default provider): every padding failure is an error in both.
//!
//! Each test prints which of the two it checked and how many vectors ran.
//!
//! The vectors are OpenSSL's "Bleichenbacher workaround" test vectors, from
//! `test/recipes/30-test_evp_data/evppkey_rsa_common.txt` in the OpenSSL 3.2+ source tree
//! (keys RSA-2048-2 and RSA-2049; the expected synthetic messages follow the algorithm of
//! draft-irtf-cfrg-rsa-guidance / draft-kario-rsa-guidance, which OpenSSL >= 3.2 implements).
//! They are transcribed here as data: key, ciphertext, expected message.
//!
//! Each key is read from its PEM text with libcrypto and imported into the kae library context
//! from its raw numbers (n, e, d, p, q, dP, dQ, qInv), so no default-provider key object is
//! involved; every decryption is fetched with `provider=kae` and checked to have run in kae.
//! The default provider with implicit rejection off (every core) serves as an independent
//! check of the transcription: it decrypts the valid vectors to the same message and refuses
//! the others.

use crate::common;

use common::*;

/// One `Decrypt` vector: `valid` ones carry a real PKCS#1 v1.5 message, the others a padding
/// error for which `msg` is the synthetic message.
struct Vector {
    valid: bool,
    ct: &'static str,
    msg: &'static str,
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd-length hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// The vector key in both library contexts: kae's imported from raw numbers, and the default
/// provider's (for the transcription check).
fn vector_key(pem: &str) -> (Pkey, Pkey) {
    let rsa = openssl::rsa::Rsa::private_key_from_pem(pem.as_bytes()).expect("vector key PEM");
    let num = |b: Option<&openssl::bn::BigNumRef>, name: &str| {
        b.unwrap_or_else(|| panic!("vector key has no {name}"))
            .to_vec()
    };
    let params = ParamsBuilder::new()
        .bn("n", &rsa.n().to_vec())
        .bn("e", &rsa.e().to_vec())
        .bn("d", &rsa.d().to_vec())
        .bn("rsa-factor1", &num(rsa.p(), "p"))
        .bn("rsa-factor2", &num(rsa.q(), "q"))
        .bn("rsa-exponent1", &num(rsa.dmp1(), "dP"))
        .bn("rsa-exponent2", &num(rsa.dmq1(), "dQ"))
        .bn("rsa-coefficient1", &num(rsa.iqmp(), "qInv"))
        .build();
    let kae_key = ok(
        kae().import("RSA", ffi::EVP_PKEY_KEYPAIR, &params),
        "import the vector key into kae",
    );
    kae().expect_key(&kae_key, "vector key");
    let ref_key = ok(
        reference().import("RSA", ffi::EVP_PKEY_KEYPAIR, &params),
        "import the vector key into the default provider",
    );
    assert_eq!(kae_key.n(), rsa.n().to_vec(), "modulus after import");
    (kae_key, ref_key)
}

/// The PKCS#1 v1.5 decryption settings every vector runs with: no `implicit-rejection`
/// parameter (the core's default), and the parameter set to 1 and to 0.
fn settings() -> [(&'static str, Params); 3] {
    [
        ("no implicit-rejection parameter", Enc::pkcs1().params()),
        (
            "implicit-rejection=1",
            Enc {
                implicit_rejection: Some(1),
                ..Enc::pkcs1()
            }
            .params(),
        ),
        ("implicit-rejection=0", Enc::pkcs1_explicit().params()),
    ]
}

/// Whether a PKCS#1 v1.5 decryption with `setting` answers a padding failure with the
/// synthetic message: only in a 3.2+ core, and only unless implicit rejection was turned off.
/// Before 3.2 the parameter is unknown and ignored: a padding failure is an error whatever
/// it says, as in that core's default provider.
fn synthetic_expected(setting: &str) -> bool {
    core_has_implicit_rejection() && setting != "implicit-rejection=0"
}

/// How the vectors of one key went.
#[derive(Default)]
struct Counts {
    valid: usize,
    invalid: usize,
    /// Decryptions of invalid vectors whose synthetic message matched the known answer in kae
    /// and in the default provider.
    synthetic: usize,
    /// Decryptions of invalid vectors refused by kae (with a kae reason) and by the default
    /// provider.
    refused: usize,
}

/// One decryption of vector `v` with `setting` in kae and in the default provider of the
/// running core, checked against the expectation of that core (see [`synthetic_expected`]).
/// The default provider is the reference: it must give the expected answer too (test
/// premise), and kae's answer must equal its answer byte for byte.
#[allow(clippy::too_many_arguments)]
fn check_one(
    what: &str,
    setting: &str,
    p: &Params,
    v: &Vector,
    ct: &[u8],
    keys: (&Pkey, &Pkey),
    counts: &mut Counts,
    problems: &mut Vec<String>,
) {
    let want = unhex(v.msg);
    let what = format!("{what} ({setting})");
    let expect_message = v.valid || synthetic_expected(setting);
    let theirs = decrypt(reference(), keys.1, p, ct);
    match (&theirs, expect_message) {
        (Ok(m), true) if *m == want => {}
        (Err(_), false) => {}
        (r, _) => panic!(
            "{what}: the default provider of {} gives {r:?}, expected {} (test premise)",
            implicit_rejection_mode(),
            if expect_message {
                format!("{} ({} bytes)", v.msg, want.len())
            } else {
                "an error".into()
            }
        ),
    }
    let ours = decrypt(kae(), keys.0, p, ct);
    match (ours, expect_message) {
        (Ok(m), true) if m == want => {
            // Equal to the known answer, and so to the default provider's: said explicitly.
            if theirs.as_ref().ok() != Some(&m) {
                problems.push(format!("{what}: kae and the default provider differ"));
            } else if !v.valid {
                counts.synthetic += 1;
            }
        }
        (Ok(m), true) => problems.push(format!(
            "{what}: got {} ({} bytes), expected {} ({} bytes), as the default provider",
            hex(&m),
            m.len(),
            v.msg,
            want.len()
        )),
        (Err(e), true) => problems.push(format!(
            "{what}: error {e}, but the default provider answers {} ({} bytes)",
            v.msg,
            want.len()
        )),
        (r, false) => match check_error(r, &what) {
            Some(p) => problems.push(format!("{p} (the default provider refuses it)")),
            None => counts.refused += 1,
        },
    }
}

/// Runs every vector through kae and the default provider of the running core with every
/// setting of [`settings`], after checking that kae presents the parameter as the default
/// provider does. Returns the problems found.
fn run_vectors(name: &str, pem: &str, vectors: &[Vector], k: usize) -> Vec<String> {
    let (kae_key, ref_key) = vector_key(pem);
    assert_eq!(kae_key.k(), k, "{name}: modulus size");
    check_implicit_rejection_param(&kae_key, &ref_key);
    let settings = settings();
    let explicit = Enc::pkcs1_explicit().params();
    let mut problems = Vec::new();
    let mut counts = Counts::default();
    for (i, v) in vectors.iter().enumerate() {
        let what = format!("{name} vector {i}");
        let ct = unhex(v.ct);
        let want = unhex(v.msg);
        assert_eq!(ct.len(), k, "{what}: transcribed ciphertext length");
        // Transcription check in the default provider with implicit rejection off (so on
        // every core): the valid vectors decrypt to their message, the others are refused.
        match (v.valid, decrypt(reference(), &ref_key, &explicit, &ct)) {
            (true, Ok(m)) => assert_eq!(m, want, "{what}: default provider's plaintext"),
            (true, Err(e)) => panic!("{what}: the default provider refuses a valid vector: {e}"),
            (false, Ok(m)) => panic!(
                "{what}: the default provider accepts an invalid vector ({})",
                hex(&m)
            ),
            (false, Err(_)) => {}
        }
        for (setting, p) in &settings {
            check_one(
                &what,
                setting,
                p,
                v,
                &ct,
                (&kae_key, &ref_key),
                &mut counts,
                &mut problems,
            );
        }
        if v.valid {
            counts.valid += 1;
        } else {
            counts.invalid += 1;
        }
    }
    let mode = implicit_rejection_mode();
    eprintln!(
        "[implicit rejection] {mode}: {name}: {} valid and {} invalid vectors ran with {} \
         settings; {} synthetic messages equal to the known answer and to the default \
         provider's, {} padding failures refused by kae and the default provider",
        counts.valid,
        counts.invalid,
        settings.len(),
        counts.synthetic,
        counts.refused
    );
    assert!(
        counts.valid > 0 && counts.invalid > 0,
        "{name}: no vectors ran"
    );
    if problems.is_empty() {
        // Every invalid vector went through the path of this core with every setting: the
        // synthetic message with the two that keep implicit rejection on (3.2+), an error
        // with the other.
        let on = settings
            .iter()
            .filter(|(s, _)| synthetic_expected(s))
            .count();
        assert_eq!(
            (counts.synthetic, counts.refused),
            (counts.invalid * on, counts.invalid * (settings.len() - on)),
            "{mode}: {name}: not every invalid vector was checked"
        );
        if core_has_implicit_rejection() {
            assert!(counts.synthetic > 0, "{mode}: no synthetic message checked");
        } else {
            assert_eq!(
                counts.synthetic, 0,
                "{mode}: a synthetic message before 3.2"
            );
        }
    }
    problems
}

#[test]
fn openssl_vectors_rsa2048() {
    let p = run_vectors("RSA-2048-2", RSA_2048_2, VECTORS_2048, 256);
    assert!(p.is_empty(), "{} problems:\n  {}", p.len(), p.join("\n  "));
}

/// The 2049-bit key: k = 257 and every ciphertext starts with a zero byte.
#[test]
fn openssl_vectors_rsa2049() {
    let p = run_vectors("RSA-2049", RSA_2049, VECTORS_2049, 257);
    assert!(p.is_empty(), "{} problems:\n  {}", p.len(), p.join("\n  "));
}

/// The vectors whose ciphertext starts with zero bytes, given without them (as OpenSSL's file
/// also does): the default provider reads a short ciphertext as a number with leading zeros, and
/// the synthetic message is derived from the ciphertext padded to k bytes, so the answers are
/// the same as for the full-length ciphertexts (a padding failure is an error before 3.2).
#[test]
fn openssl_vectors_short_ciphertexts() {
    let mut problems = Vec::new();
    let mut counts = Counts::default();
    let settings = settings();
    for (name, pem, vectors, k) in [
        ("RSA-2048-2", RSA_2048_2, VECTORS_2048, 256),
        ("RSA-2049", RSA_2049, VECTORS_2049, 257),
    ] {
        let (kae_key, ref_key) = vector_key(pem);
        for (i, v) in vectors.iter().enumerate() {
            let full = unhex(v.ct);
            assert_eq!(full.len(), k);
            let short = strip_zeros(&full);
            if short.len() == k {
                continue;
            }
            let what = format!(
                "{name} vector {i} without its {} zero bytes",
                k - short.len()
            );
            for (setting, p) in &settings {
                check_one(
                    &what,
                    setting,
                    p,
                    v,
                    short,
                    (&kae_key, &ref_key),
                    &mut counts,
                    &mut problems,
                );
            }
            if v.valid {
                counts.valid += 1;
            } else {
                counts.invalid += 1;
            }
        }
    }
    eprintln!(
        "[implicit rejection] {}: {} valid and {} invalid short ciphertexts ran with {} \
         settings; {} synthetic messages equal to the known answer and to the default \
         provider's, {} padding failures refused by kae and the default provider",
        implicit_rejection_mode(),
        counts.valid,
        counts.invalid,
        settings.len(),
        counts.synthetic,
        counts.refused
    );
    let ran = counts.valid + counts.invalid;
    assert!(ran >= 6, "only {ran} short-ciphertext vectors");
    assert!(
        counts.valid > 0 && counts.invalid > 0,
        "valid and invalid short ciphertexts must both run"
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    if core_has_implicit_rejection() {
        assert_eq!(
            counts.synthetic,
            2 * counts.invalid,
            "synthetic messages checked"
        );
        assert_eq!(
            counts.refused, counts.invalid,
            "refusals with implicit-rejection=0"
        );
    } else {
        assert_eq!((counts.synthetic, counts.refused), (0, 3 * counts.invalid));
    }
}

// ---------------------------------------------------------------------------------------------
// Vectors (OpenSSL, test/recipes/30-test_evp_data/evppkey_rsa_common.txt)
// ---------------------------------------------------------------------------------------------

/// OpenSSL's RSA-2048-2 test key.
const RSA_2048_2: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAyMyDlxQJjaVsqiNkD5PciZfBY3KWj8Gwxt9RE8HJTosh5IrS
KX5lQZARtObY9ec7G3iyV0ADIdHva2AtTsjOjRQclJBetK0wZjmkkgZTS25/JgdC
Ppff/RM8iNchOZ3vvH6WzNy9fzquH+iScSv7SSmBfVEWZkQKH6y3ogj16hZZEK3Y
o/LUlyAjYMy2MgJPDQcWnBkY8xb3lLFDrvVOyHUipMApePlomYC/+/ZJwwfoGBm/
+IQJY41IvZS+FStZ/2SfoL1inQ/6GBPDq/S1a9PC6lRl3/oUWJKSqdiiStJr5+4F
EHQbY4LUPIPVv6QKRmE9BivkRVF9vK8MtOGnaQIDAQABAoIBABRVAQ4PLVh2Y6Zm
pv8czbvw7dgQBkbQKgI5IpCJksStOeVWWSlybvZQjDpxFY7wtv91HTnQdYC7LS8G
MhBELQYD/1DbvXs1/iybsZpHoa+FpMJJAeAsqLWLeRmyDt8yqs+/Ua20vEthubfp
aMqk1XD3DvGNgGMiiJPkfUOe/KeTJZvPLNEIo9hojN8HjnrHmZafIznSwfUiuWlo
RimpM7quwmgWJeq4T05W9ER+nYj7mhmc9xAj4OJXsURBszyE07xnyoAx0mEmGBA6
egpAhEJi912IkM1hblH5A1SI/W4Jnej/bWWk/xGCVIB8n1jS+7qLoVHcjGi+NJyX
eiBOBMECgYEA+PWta6gokxvqRZuKP23AQdI0gkCcJXHpY/MfdIYColY3GziD7UWe
z5cFJkWe3RbgVSL1pF2UdRsuwtrycsf4gWpSwA0YCAFxY02omdeXMiL1G5N2MFSG
lqn32MJKWUl8HvzUVc+5fuhtK200lyszL9owPwSZm062tcwLsz53Yd0CgYEAznou
O0mpC5YzChLcaCvfvfuujdbcA7YUeu+9V1dD8PbaTYYjUGG3Gv2crS00Al5WrIaw
93Q+s14ay8ojeJVCRGW3Bu0iF15XGMjHC2cD6o9rUQ+UW+SOWja7PDyRcytYnfwF
1y2AkDGURSvaITSGR+xylD8RqEbmL66+jrU2sP0CgYB2/hXxiuI5zfHfa0RcpLxr
uWjXiMIZM6T13NKAAz1nEgYswIpt8gTB+9C+RjB0Q+bdSmRWN1Qp1OA4yiVvrxyb
3pHGsXt2+BmV+RxIy768e/DjSUwINZ5OjNalh9e5bWIh/X4PtcVXXwgu5XdpeYBx
sru0oyI4FRtHMUu2VHkDEQKBgQCZiEiwVUmaEAnLx9KUs2sf/fICDm5zZAU+lN4a
AA3JNAWH9+JydvaM32CNdTtjN3sDtvQITSwCfEs4lgpiM7qe2XOLdvEOp1vkVgeL
9wH2fMaz8/3BhuZDNsdrNy6AkQ7ICwrcwj0C+5rhBIaigkgHW06n5W3fzziC5FFW
FHGikQKBgGQ790ZCn32DZnoGUwITR++/wF5jUfghqd67YODszeUAWtnp7DHlWPfp
LCkyjnRWnXzvfHTKvCs1XtQBoaCRS048uwZITlgZYFEWntFMqi76bqBE4FTSYUTM
FinFUBBVigThM/RLfCRNrCW/kTxXuJDuSfVIJZzWNAT+9oWdz5da
-----END RSA PRIVATE KEY-----
";

/// OpenSSL's RSA-2049 test key (a 257-byte modulus starting with 0x01).
const RSA_2049: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEpQIBAAKCAQEBVfiJVWoXdfHHp3hqULGLwoyemG7eVmfKs5uEEk6Q66dcHbCD
rD5EO7qU3CNWD3XjqBaToqQ73HQm2MTq/mjIXeD+dX9uSbue1EfmAkMIANuwTOsi
5/pXoY0zj7ZgJs20Z+cMwEDn02fvQDx78ePfYkZQCUYx8h6v0vtbyRX/BDeazRES
9zLAtGYHwXjTiiD1LtpQny+cBAXVEGnoDM+UFVTQRwRnUFw89UHqCJffyfQAzssp
j/x1M3LZ9pM68XTMQO2W1GcDFzO5f4zd0/krw6A+qFdsQX8kAHteT3UBEFtUTen6
3N/635jftLsFuBmfP4Ws/ZH3qaCUuaOD9QSQlwIDAQABAoIBAQEZwrP1CnrWFSZ5
1/9RCVisLYym8AKFkvMy1VoWc2F4qOZ/F+cFzjAOPodUclEAYBP5dNCj20nvNEyl
omo0wEUHBNDkIuDOI6aUJcFf77bybhBu7/ZMyLnXRC5NpOjIUAjq6zZYWaIpT6OT
e8Jr5WMy59geLBYO9jXMUoqnvlXmM6cj28Hha6KeUrKa7y+eVlT9wGZrsPwlSsvo
DmOHTw9fAgeC48nc/CUg0MnEp7Y05FA/u0k+Gq/us/iL16EzmHJdrm/jmed1zV1M
8J/IODR8TJjasaSIPM5iBRNhWvqhCmM2jm17ed9BZqsWJznvUVpEAu4eBgHFpVvH
HfDjDt+BAoGBAYj2k2DwHhjZot4pUlPSUsMeRHbOpf97+EE99/3jVlI83JdoBfhP
wN3sdw3wbO0GXIETSHVLNGrxaXVod/07PVaGgsh4fQsxTvasZ9ZegTM5i2Kgg8D4
dlxa1A1agfm73OJSftfpUAjLECnLTKvR+em+38KGyWVSJV2n6rGSF473AoGBAN7H
zxHa3oOkxD0vgBl/If1dRv1XtDH0T+gaHeN/agkf/ARk7ZcdyFCINa3mzF9Wbzll
YTqLNnmMkubiP1LvkH6VZ+NBvrxTNxiWJfu+qx87ez+S/7JoHm71p4SowtePfC2J
qqok0s7b0GaBz+ZcNse/o8W6E1FiIi71wukUyYNhAoGAEgk/OnPK7dkPYKME5FQC
+HGrMsjJVbCa9GOjvkNw8tVYSpq7q2n9sDHqRPmEBl0EYehAqyGIhmAONxVUbIsL
ha0m04y0MI9S0H+ZRH2R8IfzndNAONsuk46XrQU6cfvtZ3Xh3IcY5U5sr35lRn2c
ut3H52XIWJ4smN/cJcpOyoECgYEAjM5hNHnPlgj392wkXPkbtJXWHp3mSISQVLTd
G0MW8/mBQg3AlXi/eRb+RpHPrppk5jQLhgMjRSPyXXe2amb8PuWTqfGN6l32PtX3
3+udILpppb71Wf+w7JTbcl9v9uq7o9SVR8DKdPA+AeweSQ0TmqCnlHuNZizOSjwP
G16GF0ECgYEA+ZWbNMS8qM5IiHgbMbHptdit9dDT4+1UXoNn0/hUW6ZEMriHMDXv
iBwrzeANGAn5LEDYeDe1xPms9Is2uNxTpZVhpFZSNALR6Po68wDlTJG2PmzuBv5t
5mbzkpWCoD4fRU53ifsHgaTW+7Um74gWIf0erNIUZuTN2YrtEPTnb3k=
-----END RSA PRIVATE KEY-----
";

const VECTORS_2048: &[Vector] = &[
    // a random positive test case: "lorem ipsum dolor sit amet"
    Vector {
        valid: true,
        ct: "8bfe264e85d3bdeaa6b8851b8e3b956ee3d226fd3f69063a86880173a273d9f283b2eebdd1ed35f7e02d91c571981b6737d5320bd8396b0f3ad5b019daec1b0aab3cbbc026395f4fd14f13673f2dfc81f9b660ec26ac381e6db3299b4e460b43fab9955df2b3cfaa20e900e19c856238fd371899c2bf2ce8c868b76754e5db3b036533fd603746be13c10d4e3e6022ebc905d20c2a7f32b215a4cd53b3f44ca1c327d2c2b651145821c08396c89071f665349c25e44d2733cd9305985ceef6430c3cf57af5fa224089221218fa34737c79c446d28a94c41c96e4e92ac53fbcf384dea8419ea089f8784445a492c812eb0d409467f75afd7d4d1078886205a066",
        msg: "6c6f72656d20697073756d20646f6c6f722073697420616d6574",
    },
    // a random negative test case decrypting to empty
    Vector {
        valid: false,
        ct: "20aaa8adbbc593a924ba1c5c7990b5c2242ae4b99d0fe636a19a4cf754edbcee774e472fe028160ed42634f8864900cb514006da642cae6ae8c7d087caebcfa6dad1551301e130344989a1d462d4164505f6393933450c67bc6d39d8f5160907cabc251b737925a1cf21e5c6aa5781b7769f6a2a583d97cce008c0f8b6add5f0b2bd80bee60237aa39bb20719fe75749f4bc4e42466ef5a861ae3a92395c7d858d430bfe38040f445ea93fa2958b503539800ffa5ce5f8cf51fa8171a91f36cb4f4575e8de6b4d3f096ee140b938fd2f50ee13f0d050222e2a72b0a3069ff3a6738e82c87090caa5aed4fcbe882c49646aa250b98f12f83c8d528113614a29e7",
        msg: "",
    },
    // invalid decrypting to max length message
    Vector {
        valid: false,
        ct: "48cceab10f39a4db32f60074feea473cbcdb7accf92e150417f76b44756b190e843e79ec12aa85083a21f5437e7bad0a60482e601198f9d86923239c8786ee728285afd0937f7dde12717f28389843d7375912b07b991f4fdb0190fced8ba665314367e8c5f9d2981d0f5128feeb46cb50fc237e64438a86df198dd0209364ae3a842d77532b66b7ef263b83b1541ed671b120dfd660462e2107a4ee7b964e734a7bd68d90dda61770658a3c242948532da32648687e0318286473f675b412d6468f013f14d760a358dfcad3cda2afeec5e268a37d250c37f722f468a70dfd92d7294c3c1ee1e7f8843b7d16f9f37ef35748c3ae93aa155cdcdfeb4e78567303",
        msg: "22d850137b9eebe092b24f602dc5bb7918c16bd89ddbf20467b119d205f9c2e4bd7d2592cf1e532106e0f33557565923c73a02d4f09c0c22bea89148183e60317f7028b3aa1f261f91c979393101d7e15f4067e63979b32751658ef769610fe97cf9cef3278b3117d384051c3b1d82c251c2305418c8f6840530e631aad63e70e20e025bcd8efb54c92ec6d3b106a2f8e64eeff7d38495b0fc50c97138af4b1c0a67a1c4e27b077b8439332edfa8608dfeae653cd6a628ac550395f7e74390e42c11682234870925eeaa1fa71b76cf1f2ee3bda69f6717033ff8b7c95c9799e7a3bea5e7e4a1c359772fb6b1c6e6c516661dfe30c3",
    },
    // invalid decrypting to message with length specified by second to last value from PRF
    Vector {
        valid: false,
        ct: "1439e08c3f84c1a7fec74ce07614b20e01f6fa4e8c2a6cffdc3520d8889e5d9a950c6425798f85d4be38d300ea5695f13ecd4cb389d1ff5b82484b494d6280ab7fa78e645933981cb934cce8bfcd114cc0e6811eefa47aae20af638a1cd163d2d3366186d0a07df0c81f6c9f3171cf3561472e98a6006bf75ddb457bed036dcce199369de7d94ef2c68e8467ee0604eea2b3009479162a7891ba5c40cab17f49e1c438cb6eaea4f76ce23cce0e483ff0e96fa790ea15be67671814342d0a23f4a20262b6182e72f3a67cd289711503c85516a9ed225422f98b116f1ab080a80abd6f0216df88d8cfd67c139243be8dd78502a7aaf6bc99d7da71bcdf627e7354",
        msg: "0f9b",
    },
    // invalid decrypting to message with length specified by third to last value from PRF
    Vector {
        valid: false,
        ct: "1690ebcceece2ce024f382e467cf8510e74514120937978576caf684d4a02ad569e8d76cbe365a060e00779de2f0865ccf0d923de3b4783a4e2c74f422e2f326086c390b658ba47f31ab013aa80f468c71256e5fa5679b24e83cd82c3d1e05e398208155de2212993cd2b8bab6987cf4cc1293f19909219439d74127545e9ed8a706961b8ee2119f6bfacafbef91b75a789ba65b8b833bc6149cf49b5c4d2c6359f62808659ba6541e1cd24bf7f7410486b5103f6c0ea29334ea6f4975b17387474fe920710ea61568d7b7c0a7916acf21665ad5a31c4eabcde44f8fb6120d8457afa1f3c85d517cda364af620113ae5a3c52a048821731922737307f77a1081",
        msg: "4f02",
    },
    // positive test with 11 byte long value: "lorem ipsum"
    Vector {
        valid: true,
        ct: "6213634593332c485cef783ea2846e3d6e8b0e005cd8293eaebbaa5079712fd681579bdfbbda138ae4d9d952917a03c92398ec0cb2bb0c6b5a8d55061fed0d0d8d72473563152648cfe640b335dc95331c21cb133a91790fa93ae44497c128708970d2beeb77e8721b061b1c44034143734a77be8220877415a6dba073c3871605380542a9f25252a4babe8331cdd53cf828423f3cc70b560624d0581fb126b2ed4f4ed358f0eb8065cf176399ac1a846a31055f9ae8c9c24a1ba050bc20842125bc1753158f8065f3adb9cc16bfdf83816bdf38b624f12022c5a6fbfe29bc91542be8c0208a770bcd677dc597f5557dc2ce28a11bf3e3857f158717a33f6592",
        msg: "6c6f72656d20697073756d",
    },
    // positive test with 11 byte long value and zero padded ciphertext
    Vector {
        valid: true,
        ct: "00a2e8f114ea8d05d12dc843e3cc3b2edc8229ff2a028bda29ba9d55e3cd02911902fef1f42a075bf05e8016e8567213d6f260fa49e360779dd81aeea3e04c2cb567e0d72b98bf754014561b7511e083d20e0bfb9cd23f8a0d3c88900c49d2fcd5843ff0765607b2026f28202a87aa94678aed22a0c20724541394cd8f44e373eba1d2bae98f516c1e2ba3d86852d064f856b1daf24795e767a2b90396e50743e3150664afab131fe40ea405dcf572dd1079af1d3f0392ccadcca0a12740dbb213b925ca2a06b1bc1383e83a658c82ba2e7427342379084d5f66b544579f07664cb26edd4f10fd913fdbc0de05ef887d4d1ec1ac95652397ea7fd4e4759fda8b",
        msg: "6c6f72656d20697073756d",
    },
    // positive that generates a 0 byte long synthetic message internally
    Vector {
        valid: true,
        ct: "b5e49308f6e9590014ffaffc5b8560755739dd501f1d4e9227a7d291408cf4b753f292322ff8bead613bf2caa181b221bc38caf6392deafb28eb21ad60930841ed02fd6225cc9c463409adbe7d8f32440212fbe3881c51375bb09565efb22e62b071472fb38676e5b4e23a0617db5d14d93519ac0007a30a9c822eb31c38b57fcb1be29608fcf1ca2abdcaf5d5752bbc2b5ac7dba5afcff4a5641da360dd01f7112539b1ed46cdb550a3b1006559b9fe1891030ec80f0727c42401ddd6cbb5e3c80f312df6ec89394c5a7118f573105e7ab00fe57833c126141b50a935224842addfb479f75160659ba28877b512bb9a93084ad8bec540f92640f63a11a010e0",
        msg: "6c6f72656d20697073756d",
    },
    // positive that generates a 245 byte long synthetic message internally
    Vector {
        valid: true,
        ct: "1ea0b50ca65203d0a09280d39704b24fe6e47800189db5033f202761a78bafb270c5e25abd1f7ecc6e7abc4f26d1b0cd9b8c648d529416ee64ccbdd7aa72a771d0353262b543f0e436076f40a1095f5c7dfd10dcf0059ccb30e92dfa5e0156618215f1c3ff3aa997a9d999e506924f5289e3ac72e5e2086cc7b499d71583ed561028671155db4005bee01800a7cdbdae781dd32199b8914b5d4011dd6ff11cd26d46aad54934d293b0bc403dd211bf13b5a5c6836a5e769930f437ffd8634fb7371776f4bc88fa6c271d8aa6013df89ae6470154497c4ac861be2a1c65ebffec139bf7aaba3a81c7c5cdd84da9af5d3edfb957848074686b5837ecbcb6a41c50",
        msg: "6c6f72656d20697073756d",
    },
    // a random negative test that generates an 11 byte long message
    Vector {
        valid: false,
        ct: "5f02f4b1f46935c742ebe62b6f05aa0a3286aab91a49b34780adde6410ab46f7386e05748331864ac98e1da63686e4babe3a19ed40a7f5ceefb89179596aab07ab1015e03b8f825084dab028b6731288f2e511a4b314b6ea3997d2e8fe2825cef8897cbbdfb6c939d441d6e04948414bb69e682927ef8576c9a7090d4aad0e74c520d6d5ce63a154720f00b76de8cc550b1aa14f016d63a7b6d6eaa1f7dbe9e50200d3159b3d099c900116bf4eba3b94204f18b1317b07529751abf64a26b0a0bf1c8ce757333b3d673211b67cc0653f2fe2620d57c8b6ee574a0323a167eab1106d9bc7fd90d415be5f1e9891a0e6c709f4fc0404e8226f8477b4e939b36eb2",
        msg: "af9ac70191c92413cb9f2d",
    },
    // otherwise correct plaintext, but with wrong first byte (0x01 instead of 0x00)
    Vector {
        valid: false,
        ct: "9b2ec9c0c917c98f1ad3d0119aec6be51ae3106e9af1914d48600ab6a2c0c0c8ae02a2dc3039906ff3aac904af32ec798fd65f3ad1afa2e69400e7c1de81f5728f3b3291f38263bc7a90a0563e43ce7a0d4ee9c0d8a716621ca5d3d081188769ce1b131af7d35b13dea99153579c86db31fe07d5a2c14d621b77854e48a8df41b5798563af489a291e417b6a334c63222627376118c02c53b6e86310f728734ffc86ef9d7c8bf56c0c841b24b82b59f51aee4526ba1c4268506d301e4ebc498c6aebb6fd5258c876bf900bac8ca4d309dd522f6a6343599a8bc3760f422c10c72d0ad527ce4af1874124ace3d99bb74db8d69d2528db22c3a37644640f95c05f",
        msg: "a1f8c9255c35cfba403ccc",
    },
    // otherwise correct plaintext, but with wrong second byte (0x01 instead of 0x02)
    Vector {
        valid: false,
        ct: "782c2b59a21a511243820acedd567c136f6d3090c115232a82a5efb0b178285f55b5ec2d2bac96bf00d6592ea7cdc3341610c8fb07e527e5e2d20cfaf2c7f23e375431f45e998929a02f25fd95354c33838090bca838502259e92d86d568bc2cdb132fab2a399593ca60a015dc2bb1afcd64fef8a3834e17e5358d822980dc446e845b3ab4702b1ee41fe5db716d92348d5091c15d35a110555a35deb4650a5a1d2c98025d42d4544f8b32aa6a5e02dc02deaed9a7313b73b49b0d4772a3768b0ea0db5846ace6569cae677bf67fb0acf3c255dc01ec8400c963b6e49b1067728b4e563d7e1e1515664347b92ee64db7efb5452357a02fff7fcb7437abc2e579",
        msg: "e6d700309ca0ed62452254",
    },
    // invalid ciphertext with a zero byte in first byte of ciphertext
    Vector {
        valid: false,
        ct: "0096136621faf36d5290b16bd26295de27f895d1faa51c800dafce73d001d60796cd4e2ac3fa2162131d859cd9da5a0c8a42281d9a63e5f353971b72e36b5722e4ac444d77f892a5443deb3dca49fa732fe855727196e23c26eeac55eeced8267a209ebc0f92f4656d64a6c13f7f7ce544ebeb0f668fe3a6c0f189e4bcd5ea12b73cf63e0c8350ee130dd62f01e5c97a1e13f52fde96a9a1bc9936ce734fdd61f27b18216f1d6de87f49cf4f2ea821fb8efd1f92cdad529baf7e31aff9bff4074f2cad2b4243dd15a711adcf7de900851fbd6bcb53dac399d7c880531d06f25f7002e1aaf1722765865d2c2b902c7736acd27bc6cbd3e38b560e2eecf7d4b576",
        msg: "ba27b1842e7c21c0e7ef6a",
    },
    // invalid ciphertext with two zero bytes in first bytes of ciphertext
    Vector {
        valid: false,
        ct: "0000587cccc6b264bdfe0dc2149a988047fa921801f3502ea64624c510c6033d2f427e3f136c26e88ea9f6519e86a542cec96aad1e5e9013c3cc203b6de15a69183050813af5c9ad79703136d4b92f50ce171eefc6aa7988ecf02f319ffc5eafd6ee7a137f8fce64b255bb1b8dd19cfe767d64fdb468b9b2e9e7a0c24dae03239c8c714d3f40b7ee9c4e59ac15b17e4d328f1100756bce17133e8e7493b54e5006c3cbcdacd134130c5132a1edebdbd01a0c41452d16ed7a0788003c34730d0808e7e14c797a21f2b45a8aa1644357fd5e988f99b017d9df37563a354c788dc0e2f9466045622fa3f3e17db63414d27761f57392623a2bef6467501c63e8d645",
        msg: "d5cf555b1d6151029a429a",
    },
    // positive test with 11 byte long value and double zero padded ciphertext
    Vector {
        valid: true,
        ct: "00001f71879b426127f7dead621f7380a7098cf7d22173aa27991b143c46d53383c209bd0c9c00d84078037e715f6b98c65005a77120070522ede51d472c87ef94b94ead4c5428ee108a345561658301911ec5a8f7dd43ed4a3957fd29fb02a3529bf63f8040d3953490939bd8f78b2a3404b6fb5ff70a4bfdaac5c541d6bcce49c9778cc390be24cbef1d1eca7e870457241d3ff72ca44f9f56bdf31a890fa5eb3a9107b603ccc9d06a5dd911a664c82b6abd4fe036f8db8d5a070c2d86386ae18d97adc1847640c211d91ff5c3387574a26f8ef27ca7f48d2dd1f0c7f14b81cc9d33ee6853031d3ecf10a914ffd90947909c8011fd30249219348ebff76bfc",
        msg: "6c6f72656d20697073756d",
    },
    // invalid ciphertext, otherwise valid but starting with 000002, decrypts to random 11 byte long synthetic plaintext
    Vector {
        valid: false,
        ct: "1786550ce8d8433052e01ecba8b76d3019f1355b212ac9d0f5191b023325a7e7714b7802f8e9a17c4cb3cd3a84041891471b10ca1fcfb5d041d34c82e6d0011cf4dc76b90e9c2e0743590579d55bcd7857057152c4a8040361343d1d22ba677d62b011407c652e234b1d663af25e2386251d7409190f19fc8ec3f9374fdf1254633874ce2ec2bff40ad0cb473f9761ec7b68da45a4bd5e33f5d7dac9b9a20821df9406b653f78a95a6c0ea0a4d57f867e4db22c17bf9a12c150f809a7b72b6db86c22a8732241ebf3c6a4f2cf82671d917aba8bc61052b40ccddd743a94ea9b538175106201971cca9d136d25081739aaf6cd18b2aecf9ad320ea3f89502f955",
        msg: "3d4a054d9358209e9cbbb9",
    },
    // negative test with otherwise valid padding but a zero byte in first byte of padding
    Vector {
        valid: false,
        ct: "179598823812d2c58a7eb50521150a48bcca8b4eb53414018b6bca19f4801456c5e36a940037ac516b0d6412ba44ec6b4f268a55ef1c5ffbf18a2f4e3522bb7b6ed89774b79bffa22f7d3102165565642de0d43a955e96a1f2e80e5430671d7266eb4f905dc8ff5e106dc5588e5b0289e49a4913940e392a97062616d2bda38155471b7d360cfb94681c702f60ed2d4de614ea72bf1c53160e63179f6c5b897b59492bee219108309f0b7b8cb2b136c346a5e98b8b4b8415fb1d713bae067911e3057f1c335b4b7e39101eafd5d28f0189037e4334f4fdb9038427b1d119a6702aa8233319cc97d496cc289ae8c956ddc84042659a2d43d6aa22f12b81ab884e",
        msg: "1f037dd717b07d3e7f7359",
    },
    // negative test with otherwise valid padding but a zero byte at the eighth byte of padding
    Vector {
        valid: false,
        ct: "a7a340675a82c30e22219a55bc07cdf36d47d01834c1834f917f18b517419ce9de2a96460e745024436470ed85e94297b283537d52189c406a3f533cb405cc6a9dba46b482ce98b6e3dd52d8fce2237425617e38c11fbc46b61897ef200d01e4f25f5f6c4c5b38cd0de38ba11908b86595a8036a08a42a3d05b79600a97ac18ba368a08d6cf6ccb624f6e8002afc75599fba4de3d4f3ba7d208391ebe8d21f8282b18e2c10869eb2702e68f9176b42b0ddc9d763f0c86ba0ff92c957aaeab76d9ab8da52ea297ec11d92d770146faa1b300e0f91ef969b53e7d2907ffc984e9a9c9d11fb7d6cba91972059b46506b035efec6575c46d7114a6b935864858445f",
        msg: "63cb0bf65fc8255dd29e17",
    },
    // negative test with an otherwise valid plaintext but with missing separator byte
    Vector {
        valid: false,
        ct: "3d1b97e7aa34eaf1f4fc171ceb11dcfffd9a46a5b6961205b10b302818c1fcc9f4ec78bf18ea0cee7e9fa5b16fb4c611463b368b3312ac11cf9c06b7cf72b54e284848a508d3f02328c62c2999d0fb60929f81783c7a256891bc2ff4d91df2af96a24fc5701a1823af939ce6dbdc510608e3d41eec172ad2d51b9fc61b4217c923cadcf5bac321355ef8be5e5f090cdc2bd0c697d9058247db3ad613fdce87d2955a6d1c948a5160f93da21f731d74137f5d1f53a1923adb513d2e6e1589d44cc079f4c6ddd471d38ac82d20d8b1d21f8d65f3b6907086809f4123e08d86fb38729585de026a485d8f0e703fd4772f6668febf67df947b82195fa3867e3a3065",
        msg: "6f09a0b62699337c497b0b",
    },
];

const VECTORS_2049: &[Vector] = &[
    // malformed that generates length specified by 3rd last value from PRF
    Vector {
        valid: false,
        ct: "00b26f6404b82649629f2704494282443776929122e279a9cf30b0c6fe8122a0a9042870d97cc8ef65490fe58f031eb2442352191f5fbc311026b5147d32df914599f38b825ebb824af0d63f2d541a245c5775d1c4b78630e4996cc5fe413d38455a776cf4edcc0aa7fccb31c584d60502ed2b77398f536e137ff7ba6430e9258e21c2db5b82f5380f566876110ac4c759178900fbad7ab70ea07b1daf7a1639cbb4196543a6cbe8271f35dddb8120304f6eef83059e1c5c5678710f904a6d760c4d1d8ad076be17904b9e69910040b47914a0176fb7eea0c06444a6c4b86d674d19a556a1de5490373cb01ce31bbd15a5633362d3d2cd7d4af1b4c5121288b894",
        msg: "42",
    },
    // simple positive test case
    Vector {
        valid: true,
        ct: "013300edbf0bb3571e59889f7ed76970bf6d57e1c89bbb6d1c3991d9df8e65ed54b556d928da7d768facb395bbcc81e9f8573b45cf8195dbd85d83a59281cddf4163aec11b53b4140053e3bd109f787a7c3cec31d535af1f50e0598d85d96d91ea01913d07097d25af99c67464ebf2bb396fb28a9233e56f31f7e105d71a23e9ef3b736d1e80e713d1691713df97334779552fc94b40dd733c7251bc522b673d3ec9354af3dd4ad44fa71c0662213a57ada1d75149697d0eb55c053aaed5ffd0b815832f454179519d3736fb4faf808416071db0d0f801aca8548311ee708c131f4be658b15f6b54256872c2903ac708bd43b017b073b5707bc84c2cd9da70e967",
        msg: "6c6f72656d20697073756d",
    },
    // positive test case with null padded ciphertext
    Vector {
        valid: true,
        ct: "0002aadf846a329fadc6760980303dbd87bfadfa78c2015ce4d6c5782fd9d3f1078bd3c0a2c5bfbdd1c024552e5054d98b5bcdc94e476dd280e64d650089326542ce7c61d4f1ab40004c2e6a88a883613568556a10f3f9edeab67ae8dddc1e6b0831c2793d2715de943f7ce34c5c05d1b09f14431fde566d17e76c9feee90d86a2c158616ec81dda0c642f58c0ba8fa4495843124a7235d46fb4069715a51bf710fd024259131ba94da73597ace494856c94e7a3ec261545793b0990279b15fa91c7fd13dbfb1df2f221dab9fa9f7c1d21e48aa49f6aaecbabf5ee76dc6c2af2317ffb4e303115386a97f8729afc3d0c89419669235f1a3a69570e0836c79fc162",
        msg: "6c6f72656d20697073756d",
    },
    // positive test case with double null padded ciphertext
    Vector {
        valid: true,
        ct: "0000f36da3b72d8ff6ded74e7efd08c01908f3f5f0de7b55eab92b5f875190809c39d4162e1e6649618f854fd84aeab03970d16bb814e999852c06de38d82b95c0f32e2a7b5714021fe303389be9c0eac24c90a6b7210f929d390fabf903d44e04110bb7a7fd6c383c275804721efa6d7c93aa64c0bb2b18d97c5220a846c66a4895ae52adddbe2a9996825e013585adcec4b32ba61d782737bd343e5fabd68e8a95b8b1340318559860792dd70dffbe05a1052b54cbfb48cfa7bb3c19cea52076bddac5c25ee276f153a610f6d06ed696d192d8ae4507ffae4e5bdda10a625d6b67f32f7cffcd48dee2431fe66f6105f9d17e611cdcc674868e81692a360f4052",
        msg: "6c6f72656d20697073756d",
    },
    // a random negative test case that generates an 11 byte long message
    Vector {
        valid: false,
        ct: "00f910200830fc8fff478e99e145f1474b312e2512d0f90b8cef77f8001d09861688c156d1cbaf8a8957f7ebf35f724466952d0524cad48aad4fba1e45ce8ea27e8f3ba44131b7831b62d60c0762661f4c1d1a88cd06263a259abf1ba9e6b0b172069afb86a7e88387726f8ab3adb30bfd6b3f6be6d85d5dfd044e7ef052395474a9cbb1c3667a92780b43a22693015af6c513041bdaf87d43b24ddd244e791eeaea1066e1f4917117b3a468e22e0f7358852bb981248de4d720add2d15dccba6280355935b67c96f9dcb6c419cc38ab9f6fba2d649ef2066e0c34c9f788ae49babd9025fa85b21113e56ce4f43aa134c512b030dd7ac7ce82e76f0be9ce09ebca",
        msg: "1189b6f5498fd6df532b00",
    },
    // otherwise correct plaintext, but with wrong first byte (0x01 instead of 0x00)
    Vector {
        valid: false,
        ct: "002c9ddc36ba4cf0038692b2d3a1c61a4bb3786a97ce2e46a3ba74d03158aeef456ce0f4db04dda3fe062268a1711250a18c69778a6280d88e133a16254e1f0e30ce8dac9b57d2e39a2f7d7be3ee4e08aec2fdbe8dadad7fdbf442a29a8fb40857407bf6be35596b8eefb5c2b3f58b894452c2dc54a6123a1a38d642e23751746597e08d71ac92704adc17803b19e131b4d1927881f43b0200e6f95658f559f912c889b4cd51862784364896cd6e8618f485a992f82997ad6a0917e32ae5872eaf850092b2d6c782ad35f487b79682333c1750c685d7d32ab3e1538f31dcaa5e7d5d2825875242c83947308dcf63ba4bfff20334c9c140c837dbdbae7a8dee72ff",
        msg: "f6d0f5b78082fe61c04674",
    },
    // otherwise correct plaintext, but with wrong second byte (0x01 instead of 0x02)
    Vector {
        valid: false,
        ct: "00c5d77826c1ab7a34d6390f9d342d5dbe848942e2618287952ba0350d7de6726112e9cebc391a0fae1839e2bf168229e3e0d71d4161801509f1f28f6e1487ca52df05c466b6b0a6fbbe57a3268a970610ec0beac39ec0fa67babce1ef2a86bf77466dc127d7d0d2962c20e66593126f276863cd38dc6351428f884c1384f67cad0a0ffdbc2af16711fb68dc559b96b37b4f04cd133ffc7d79c43c42ca4948fa895b9daeb853150c8a5169849b730cc77d68b0217d6c0e3dbf38d751a1998186633418367e7576530566c23d6d4e0da9b038d0bb5169ce40133ea076472d055001f0135645940fd08ea44269af2604c8b1ba225053d6db9ab43577689401bdc0f3",
        msg: "1ab287fcef3ff17067914d",
    },
];
