//! Secret-taint check (ctgrind style): run by `scripts/ctgrind.sh` under valgrind memcheck.
//!
//! The key's private components (d, p, q, dP, dQ, qInv), the blinding pair and every
//! decrypted block are marked *undefined* with memcheck client requests
//! (`kae::ffi::memcheck`). memcheck then reports each conditional jump and each memory
//! address computed from them: a secret-dependent branch or table index. Values that are
//! public by design are marked defined where they become public (a signature; the ok/error
//! result and message length of a decryption that reports padding errors, PKCS#1 without
//! implicit rejection and OAEP, through `ct::declassify` inside the decoders and
//! `public_usize` here).
//!
//! Each operation runs in its own `op_*` function and the setup in `setup_*` functions, so
//! the script can attribute every report to an operation by its stack. `op_canary` branches
//! on a secret on purpose (inside kae's variable-time `unpad_type1`, meant for public
//! blocks): the script requires it to be reported, which proves the marking works.
//!
//! Without valgrind the binary runs the same operations as a functional test (every result
//! is checked) and the client requests are no-ops.
//!
//! Usage: ctgrind [--bits N] [--list] [OPERATION...]   (default: all operations)

use kae::error::KaeResult;
use kae::ffi::bn::{arith, BigNum, BnCtx};
use kae::ffi::digest::Rng;
use kae::ffi::memcheck::{log_marker, mark_public, mark_secret, public_usize, running_on_valgrind};
use kae::rsa::libcrypto::Digest;
use kae::rsa::ops;
use kae::rsa::padding::{oaep, pkcs1, pss, x931, DigestId, SaltLen};
use kae::rsa::{KeyType, RsaKey};
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::rsa::{Padding, Rsa};
use openssl::sign::Verifier;
use std::process::ExitCode;

const TLS_VERSION: u16 = 0x0303;

/// Everything an operation needs; built once (under valgrind key generation is the slow part).
struct Ctx {
    key: RsaKey,
    ossl: PKey<openssl::pkey::Private>,
    sha256: Digest,
    rng: Rng<'static>,
    private_rng: Rng<'static>,
}

fn random(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    openssl::rand::rand_bytes(&mut v).expect("rand");
    v
}

/// A copy of `bytes` marked secret, imported as a secret big number.
#[inline(never)]
fn setup_secret_bn(bytes: &[u8]) -> KaeResult<BigNum> {
    let b = bytes.to_vec();
    mark_secret(&b);
    BigNum::from_be_bytes(&b, true)
}

#[inline(never)]
fn setup_key(bits: u32) -> KaeResult<Ctx> {
    let rsa = Rsa::generate(bits).expect("RSA key generation");
    let mut key = RsaKey::empty(KeyType::Rsa);
    key.n = Some(BigNum::from_be_bytes(&rsa.n().to_vec(), false)?);
    key.e = Some(BigNum::from_be_bytes(&rsa.e().to_vec(), false)?);
    let sec = |b: Option<&openssl::bn::BigNumRef>| setup_secret_bn(&b.expect("component").to_vec());
    key.d = Some(setup_secret_bn(&rsa.d().to_vec())?);
    key.primes = vec![sec(rsa.p())?, sec(rsa.q())?];
    key.exps = vec![sec(rsa.dmp1())?, sec(rsa.dmq1())?];
    key.coeffs = vec![sec(rsa.iqmp())?];
    // Montgomery contexts of p and q (derived from secrets, built once per key).
    key.mont()?;
    Ok(Ctx {
        key,
        ossl: PKey::from_rsa(rsa).expect("pkey"),
        sha256: Digest::fetch_default("SHA256", None)?,
        rng: Rng::default_ctx(false),
        private_rng: Rng::default_ctx(true),
    })
}

/// Gives the key a fresh blinding pair whose bytes are marked secret; the next private
/// operation takes it (the pool is last in, first out).
#[inline(never)]
fn setup_blinding(key: &RsaKey) -> KaeResult<()> {
    let ctx = BnCtx::new()?;
    let n = key.n()?;
    let mont = &key.mont()?.n;
    let (mut r, mut ri, mut a) = (BigNum::new()?, BigNum::new()?, BigNum::new()?);
    loop {
        arith::priv_rand_range(&mut r, n, &ctx)?;
        if !r.is_zero() && arith::mod_inverse(&mut ri, &r, n, &ctx).is_ok() {
            break;
        }
    }
    arith::mod_exp_vartime(&mut a, &r, key.e()?, n, mont, &ctx)?;
    let (mut a_m, mut ai_m) = (BigNum::new()?, BigNum::new()?);
    arith::to_mont(&mut a_m, &a, mont, &ctx)?;
    arith::to_mont(&mut ai_m, &ri, mont, &ctx)?;
    let k = key.size();
    let (mut ab, mut aib) = (vec![0u8; k], vec![0u8; k]);
    a_m.write_be_padded(&mut ab)?;
    ai_m.write_be_padded(&mut aib)?;
    key.push_blinding_pair(setup_secret_bn(&ab)?, setup_secret_bn(&aib)?)?;
    Ok(())
}

/// Ciphertext of `em` (a padded block) under the public key.
#[inline(never)]
fn setup_encrypt(key: &RsaKey, em: &[u8]) -> KaeResult<Vec<u8>> {
    let mut c = vec![0u8; key.size()];
    ops::public_op(key, em, &mut c)?;
    Ok(c)
}

/// The private operation of a decryption, with the block marked secret (it is already
/// derived from secrets; marking it states the intent and covers non-CRT paths alike).
fn decrypt_block(key: &RsaKey, c: &[u8]) -> KaeResult<Vec<u8>> {
    let mut em = vec![0u8; key.size()];
    ops::private_op(key, c, &mut em).result?;
    mark_secret(&em);
    Ok(em)
}

// ---- operations (each reported under its own name) -----------------------------------

#[inline(never)]
fn op_sign_pkcs1(cx: &Ctx, digest: &[u8], sig: &mut [u8]) -> KaeResult<()> {
    let mut em = vec![0u8; cx.key.size()];
    pkcs1::encode_signature(DigestId::Sha256, digest, &mut em)?;
    ops::private_op(&cx.key, &em, sig).result?;
    mark_public(sig); // the signature is the public output
    Ok(())
}

#[inline(never)]
fn op_sign_pss(cx: &Ctx, digest: &[u8], sig: &mut [u8]) -> KaeResult<()> {
    let mut em = vec![0u8; cx.key.size()];
    pss::encode(
        &cx.sha256,
        &cx.sha256,
        digest,
        SaltLen::Digest,
        cx.key.bits(),
        &cx.rng,
        &mut em,
    )?;
    ops::private_op(&cx.key, &em, sig).result?;
    mark_public(sig);
    Ok(())
}

#[inline(never)]
fn op_sign_x931(cx: &Ctx, digest: &[u8], sig: &mut [u8]) -> KaeResult<()> {
    let mut em = vec![0u8; cx.key.size()];
    x931::encode_signature(DigestId::Sha256, digest, &mut em)?;
    ops::private_op(&cx.key, &em, sig).result?;
    // X9.31's min(s, n - s) (signature.rs) works on the public signature.
    mark_public(sig);
    Ok(())
}

/// PKCS#1 v1.5 without implicit rejection: the ok/error result and the message length are
/// the API's (public) output.
#[inline(never)]
fn op_decrypt_pkcs1(cx: &Ctx, c: &[u8], out: &mut [u8]) -> KaeResult<Option<usize>> {
    let em = decrypt_block(&cx.key, c)?;
    match pkcs1::decode_type2(&em, out) {
        Ok(len) => {
            let len = public_usize(len);
            mark_public(&out[..len]);
            Ok(Some(len))
        }
        Err(_) => Ok(None),
    }
}

/// PKCS#1 v1.5 with implicit rejection, as asym_cipher.rs calls it: the returned length
/// (real or synthetic) is the public output.
#[inline(never)]
fn op_decrypt_pkcs1_ir(cx: &Ctx, c: &[u8], out: &mut [u8]) -> KaeResult<usize> {
    let em = decrypt_block(&cx.key, c)?;
    let d = cx.key.d.as_ref().expect("d");
    // As asym_cipher.rs: d at the fixed length k, no length derived from its value.
    let mut d_bytes = zeroize::Zeroizing::new(vec![0u8; cx.key.size()]);
    d.write_be_padded(&mut d_bytes)?;
    let len = pkcs1::decode_type2_implicit_rejection(&cx.sha256, &d_bytes, c, &em, out)?;
    let len = public_usize(len);
    mark_public(&out[..len]);
    Ok(len)
}

/// OAEP (SHA-256, MGF1-SHA-256, empty label): ok/error and the length are public.
#[inline(never)]
fn op_decrypt_oaep(cx: &Ctx, c: &[u8], out: &mut [u8]) -> KaeResult<Option<usize>> {
    let em = decrypt_block(&cx.key, c)?;
    match oaep::decode(&cx.sha256, &cx.sha256, &[], &em, out) {
        Ok(len) => {
            let len = public_usize(len);
            mark_public(&out[..len]);
            Ok(Some(len))
        }
        Err(_) => Ok(None),
    }
}

/// TLS premaster: nothing becomes public (the premaster stays secret).
#[inline(never)]
fn op_decrypt_tls(cx: &Ctx, c: &[u8], pm: &mut [u8; 48]) -> KaeResult<()> {
    let em = decrypt_block(&cx.key, c)?;
    pkcs1::decode_tls_premaster_rng(&em, TLS_VERSION, None, &cx.private_rng, pm)
}

/// Deliberately variable time on a secret block: must be reported (see the module doc).
#[inline(never)]
fn op_canary(cx: &Ctx, c: &[u8]) -> KaeResult<bool> {
    let em = decrypt_block(&cx.key, c)?;
    Ok(pkcs1::unpad_type1(&em).is_ok())
}

// ---- driver --------------------------------------------------------------------------

const OPS: &[&str] = &[
    "sign-pkcs1",
    "sign-pss",
    "sign-x931",
    "decrypt-pkcs1",
    "decrypt-pkcs1-ir",
    "decrypt-oaep",
    "decrypt-tls",
    "canary",
];

/// Runs one operation (valid and invalid inputs where that matters) and checks the results.
fn run(cx: &Ctx, op: &str) -> Result<(), String> {
    let key = &cx.key;
    let k = key.size();
    let e = |x: kae::error::KaeError| format!("{op}: {x:?}");
    let msg = b"ctgrind message".to_vec();
    let digest = openssl::sha::sha256(&msg);
    let mut sig = vec![0u8; k];
    let mut out = vec![0u8; k];
    let check_sig = |pad: Padding, sig: &[u8]| -> Result<(), String> {
        let mut v = Verifier::new(MessageDigest::sha256(), &cx.ossl).map_err(|x| x.to_string())?;
        v.set_rsa_padding(pad).map_err(|x| x.to_string())?;
        if pad == Padding::PKCS1_PSS {
            v.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH)
                .map_err(|x| x.to_string())?;
        }
        v.update(&msg).map_err(|x| x.to_string())?;
        match v.verify(sig) {
            Ok(true) => Ok(()),
            _ => Err(format!("{op}: the default provider rejects the signature")),
        }
    };
    // Blocks: a valid one carrying `payload`, and one with broken padding.
    let type2 = |payload: &[u8]| -> KaeResult<Vec<u8>> {
        let mut em = vec![0u8; k];
        pkcs1::encode_type2(payload, &mut em, &cx.rng)?;
        Ok(em)
    };
    let broken = || {
        let mut em = random(k);
        em[0] = 0;
        em[1] = 0x03; // neither type 1 nor type 2; OAEP: the label hash will not match
        em
    };
    match op {
        "sign-pkcs1" => {
            setup_blinding(key).map_err(e)?;
            op_sign_pkcs1(cx, &digest, &mut sig).map_err(e)?;
            check_sig(Padding::PKCS1, &sig)?;
        }
        "sign-pss" => {
            setup_blinding(key).map_err(e)?;
            op_sign_pss(cx, &digest, &mut sig).map_err(e)?;
            check_sig(Padding::PKCS1_PSS, &sig)?;
        }
        "sign-x931" => {
            setup_blinding(key).map_err(e)?;
            op_sign_x931(cx, &digest, &mut sig).map_err(e)?;
            // The raw result before min(s, n - s) must open to the X9.31 block.
            let mut em = vec![0u8; k];
            ops::public_op(key, &sig, &mut em).map_err(e)?;
            x931::verify_signature(DigestId::Sha256, &digest, &em).map_err(e)?;
        }
        "decrypt-pkcs1" => {
            let good = setup_encrypt(key, &type2(&msg).map_err(e)?).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            let r = op_decrypt_pkcs1(cx, &good, &mut out).map_err(e)?;
            if r.map(|n| &out[..n]) != Some(&msg[..]) {
                return Err(format!("{op}: valid ciphertext not decrypted"));
            }
            let bad = setup_encrypt(key, &broken()).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            if op_decrypt_pkcs1(cx, &bad, &mut out).map_err(e)?.is_some() {
                return Err(format!("{op}: broken padding accepted"));
            }
        }
        "decrypt-pkcs1-ir" => {
            let good = setup_encrypt(key, &type2(&msg).map_err(e)?).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            let n = op_decrypt_pkcs1_ir(cx, &good, &mut out).map_err(e)?;
            if out[..n] != msg[..] {
                return Err(format!("{op}: valid ciphertext not decrypted"));
            }
            let bad = setup_encrypt(key, &broken()).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            let n1 = op_decrypt_pkcs1_ir(cx, &bad, &mut out).map_err(e)?;
            let first = out[..n1].to_vec();
            setup_blinding(key).map_err(e)?;
            let n2 = op_decrypt_pkcs1_ir(cx, &bad, &mut out).map_err(e)?;
            if out[..n2] != first[..] {
                return Err(format!("{op}: synthetic message is not deterministic"));
            }
        }
        "decrypt-oaep" => {
            let mut em = vec![0u8; k];
            oaep::encode(&cx.sha256, &cx.sha256, &[], &msg, &cx.rng, &mut em).map_err(e)?;
            let good = setup_encrypt(key, &em).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            let r = op_decrypt_oaep(cx, &good, &mut out).map_err(e)?;
            if r.map(|n| &out[..n]) != Some(&msg[..]) {
                return Err(format!("{op}: valid ciphertext not decrypted"));
            }
            let bad = setup_encrypt(key, &broken()).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            if op_decrypt_oaep(cx, &bad, &mut out).map_err(e)?.is_some() {
                return Err(format!("{op}: broken padding accepted"));
            }
        }
        "decrypt-tls" => {
            let mut pm = random(48);
            pm[..2].copy_from_slice(&TLS_VERSION.to_be_bytes());
            let mut got = [0u8; 48];
            let good = setup_encrypt(key, &type2(&pm).map_err(e)?).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            op_decrypt_tls(cx, &good, &mut got).map_err(e)?;
            mark_public(&got); // the check below is the harness's, not kae's
            if got[..] != pm[..] {
                return Err(format!("{op}: valid premaster not decrypted"));
            }
            let mut wrong = pm.clone();
            wrong[1] = 0x01; // TLS 1.0 in a TLS 1.2 handshake
            for c in [
                setup_encrypt(key, &type2(&wrong).map_err(e)?).map_err(e)?,
                setup_encrypt(key, &broken()).map_err(e)?,
            ] {
                setup_blinding(key).map_err(e)?;
                op_decrypt_tls(cx, &c, &mut got).map_err(e)?;
                mark_public(&got);
                if got[..] == wrong[..] || got[..] == pm[..] {
                    return Err(format!("{op}: bad premaster not replaced"));
                }
            }
        }
        "canary" => {
            let mut em = vec![0u8; k];
            pkcs1::encode_type1(&msg, &mut em).map_err(e)?;
            let c = setup_encrypt(key, &em).map_err(e)?;
            setup_blinding(key).map_err(e)?;
            if public_usize(op_canary(cx, &c).map_err(e)? as usize) == 0 {
                return Err(format!("{op}: type-1 block not recognised"));
            }
        }
        other => return Err(format!("unknown operation {other:?} (try --list)")),
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut bits = 2048u32;
    let mut ops = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--list" => {
                OPS.iter().for_each(|o| println!("{o}"));
                return ExitCode::SUCCESS;
            }
            "--bits" => match args.next().and_then(|v| v.parse().ok()) {
                Some(b) => bits = b,
                None => {
                    eprintln!("ctgrind: --bits needs a number");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("usage: ctgrind [--bits N] [--list] [OPERATION...]\nrun under valgrind by scripts/ctgrind.sh");
                return ExitCode::SUCCESS;
            }
            o if o.starts_with('-') => {
                eprintln!("ctgrind: unknown option {o}");
                return ExitCode::from(2);
            }
            o => ops.push(o.to_string()),
        }
    }
    if ops.is_empty() {
        ops = OPS.iter().map(|s| s.to_string()).collect();
    }
    println!(
        "ctgrind: {} RSA-{bits}, under valgrind: {}",
        ops.len(),
        running_on_valgrind()
    );
    log_marker("ctgrind-op setup\n");
    let cx = match setup_key(bits) {
        Ok(c) => c,
        Err(x) => {
            eprintln!("ctgrind: key setup failed: {x:?}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    for op in &ops {
        log_marker(&format!("ctgrind-op {op}\n"));
        match run(&cx, op) {
            Ok(()) => println!("ctgrind: op {op} ok"),
            Err(m) => {
                eprintln!("ctgrind: FAIL {m}");
                failed = true;
            }
        }
    }
    log_marker("ctgrind-op teardown\n");
    if failed {
        ExitCode::FAILURE
    } else {
        println!("ctgrind: done");
        ExitCode::SUCCESS
    }
}
