//! RSA KEM (RSASVE): kae's own `OSSL_OP_KEM` against the default provider of the same core.
//!
//! Secrets cross providers both ways (kae encapsulates → default decapsulates and the reverse,
//! with imported and with kae-generated keys); every input the checks look at (ciphertext
//! length and value, output buffer size, size queries, operation name, missing operation,
//! public-only and RSA-PSS keys) gets the same return value from both providers, and the same
//! secret where both accept. A fresh process with kae preferred reads a key from PEM and
//! encapsulates with kae's KEM (the security review's reproduction: the re-listed default KEM
//! used to receive kae's key object).
//!
//! The default provider's rules change with the core (3.5 made RSASVE the default operation,
//! 4.0 refuses the ciphertexts 0, 1 and n − 1); the tests compare with whatever the running
//! core does, so they hold on 3.0 and, with `LD_LIBRARY_PATH` pointing at a newer libcrypto,
//! on 3.5 and 4.0.

use crate::common;
use crate::procs;

use common::ffi::{
    EVP_KEM_fetch, EVP_KEM_free, EVP_KEM_get0_provider, EVP_PKEY_CTX_gettable_params,
    EVP_PKEY_CTX_set_kem_op, EVP_PKEY_CTX_settable_params, EVP_PKEY_decapsulate,
    EVP_PKEY_decapsulate_init, EVP_PKEY_encapsulate, EVP_PKEY_encapsulate_init, EVP_PKEY_KEYPAIR,
    EVP_PKEY_PUBLIC_KEY, OSSL_PARAM,
};
use common::*;
use std::ffi::{c_int, CStr, CString};
use std::ptr;

/// The kae library context of these tests: kae alone, as in the other tests, on every core
/// (its own DRBG fronts give it random numbers on 3.5+ too).
fn kae() -> &'static Lib {
    common::kae()
}

/// The pair's key in [`kae`]'s context.
fn kae_key(kp: &KeyPair) -> Pkey {
    kp.kae.clone()
}

/// The pair's key for `lib` (kae's or the default provider's).
fn key_of(kp: &KeyPair, lib: &Lib) -> Pkey {
    if lib.is_kae() {
        kae_key(kp)
    } else {
        kp.reference.clone()
    }
}

/// A KEM context of `lib` on `key`, initialised for encapsulation or decapsulation, with the
/// operation set to `op` when given. Panics unless the init succeeded in `lib`'s provider.
fn kem_ctx(lib: &Lib, key: &Pkey, decap: bool, op: Option<&str>) -> PkeyCtx {
    clear_errors();
    let ctx = ok(lib.pctx(key), "EVP_PKEY_CTX_new_from_pkey");
    let r = unsafe {
        if decap {
            EVP_PKEY_decapsulate_init(ctx.0, ptr::null())
        } else {
            EVP_PKEY_encapsulate_init(ctx.0, ptr::null())
        }
    };
    ok(cvt(r, &format!("kem init [{}]", lib.label)), "kem init");
    lib.expect_op(ctx.0, "KEM");
    if let Some(op) = op {
        let c = CString::new(op).unwrap();
        ok(
            cvt(
                unsafe { EVP_PKEY_CTX_set_kem_op(ctx.0, c.as_ptr()) },
                "set_kem_op",
            ),
            "set_kem_op",
        );
    }
    ctx
}

/// What one call returned: the return value, the outputs when it succeeded, and the error.
#[derive(Debug)]
struct Outcome {
    ret: c_int,
    out: Vec<u8>,
    secret: Vec<u8>,
    err: Option<SslError>,
}

impl Outcome {
    fn ok(&self) -> bool {
        self.ret > 0
    }
}

fn outcome(ret: c_int, out: Vec<u8>, secret: Vec<u8>, what: &str) -> Outcome {
    let err = (ret <= 0).then(|| take_errors(what));
    clear_errors();
    Outcome {
        ret,
        out,
        secret,
        err,
    }
}

/// `EVP_PKEY_encapsulate` into buffers of `k` bytes, telling the provider `outsize`.
fn encapsulate_sized(ctx: &PkeyCtx, k: usize, outsize: usize) -> Outcome {
    let mut out = vec![0u8; k.max(outsize)];
    let mut secret = vec![0u8; k];
    let (mut olen, mut slen) = (outsize, k);
    let r = unsafe {
        EVP_PKEY_encapsulate(
            ctx.0,
            out.as_mut_ptr(),
            &mut olen,
            secret.as_mut_ptr(),
            &mut slen,
        )
    };
    if r > 0 {
        out.truncate(olen);
        secret.truncate(slen);
    }
    outcome(r, out, secret, "EVP_PKEY_encapsulate")
}

/// `EVP_PKEY_decapsulate` of `ct` into a buffer of which the provider is told `outsize`.
fn decapsulate_sized(ctx: &PkeyCtx, ct: &[u8], outsize: usize) -> Outcome {
    let mut secret = vec![0u8; outsize.max(1)];
    let mut slen = outsize;
    let r = unsafe {
        EVP_PKEY_decapsulate(ctx.0, secret.as_mut_ptr(), &mut slen, ct.as_ptr(), ct.len())
    };
    if r > 0 {
        secret.truncate(slen);
    }
    outcome(r, Vec::new(), secret, "EVP_PKEY_decapsulate")
}

fn encapsulate(lib: &Lib, key: &Pkey) -> (Vec<u8>, Vec<u8>) {
    let ctx = kem_ctx(lib, key, false, Some("RSASVE"));
    let o = encapsulate_sized(&ctx, key.k(), key.k());
    assert!(o.ok(), "encapsulate [{}]: {:?}", lib.label, o.err);
    (o.out, o.secret)
}

fn decapsulate(lib: &Lib, key: &Pkey, ct: &[u8]) -> Outcome {
    let ctx = kem_ctx(lib, key, true, Some("RSASVE"));
    decapsulate_sized(&ctx, ct, key.k())
}

/// Big-endian a ± small, keeping the length (panics on overflow out of the length).
fn be_add(a: &[u8], mut v: i32) -> Vec<u8> {
    let mut r = a.to_vec();
    let mut i = r.len();
    while v != 0 {
        i = i.checked_sub(1).expect("carry out of the number");
        let x = r[i] as i32 + v;
        r[i] = x.rem_euclid(256) as u8;
        v = x.div_euclid(256);
    }
    r
}

/// The same verdict (return value) from both providers, and the same outputs when both accept
/// (the same secret for decapsulation, the same lengths for encapsulation); kae's failures
/// carry a kae reason.
fn same(what: &str, kae: &Outcome, dflt: &Outcome, problems: &mut Vec<String>) {
    eprintln!(
        "{what}: kae {} default {}{}",
        kae.ret,
        dflt.ret,
        kae.err
            .as_ref()
            .map(|e| format!(" (kae: {})", e.first_reason().unwrap_or("-")))
            .unwrap_or_default()
    );
    if kae.ret != dflt.ret {
        problems.push(format!(
            "{what}: kae returned {} ({:?}), the default provider {} ({:?})",
            kae.ret, kae.err, dflt.ret, dflt.err
        ));
        return;
    }
    // Decapsulation is deterministic: the same secret. Encapsulation is random: the same
    // lengths.
    let decap = kae.out.is_empty() && dflt.out.is_empty();
    let differ = if decap {
        kae.secret != dflt.secret
    } else {
        kae.secret.len() != dflt.secret.len() || kae.out.len() != dflt.out.len()
    };
    if kae.ok() && differ {
        problems.push(format!("{what}: both accepted but the outputs differ"));
    }
    if !kae.ok() {
        match &kae.err {
            Some(e) if e.reason_from(kae_lib()).is_some() => {}
            e => problems.push(format!("{what}: kae failed without a kae reason: {e:?}")),
        }
    }
}

fn kae_lib() -> &'static Lib {
    kae()
}

fn finish(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} problems:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

/// 1 < z < n − 1 as big-endian numbers of k bytes.
fn assert_secret_in_range(z: &[u8], n: &[u8], k: usize) {
    assert_eq!(z.len(), k, "secret length");
    let n_minus_1 = be_add(&pad(n, k), -1);
    assert!(be_less(&[1], z), "secret ≤ 1");
    assert!(be_less(z, &n_minus_1), "secret ≥ n − 1");
}

fn pad(v: &[u8], k: usize) -> Vec<u8> {
    let v = strip_zeros(v);
    let mut r = vec![0u8; k - v.len()];
    r.extend_from_slice(v);
    r
}

#[test]
fn kem_is_kae_code() {
    let name = CString::new("RSA").unwrap();
    let kem = unsafe { EVP_KEM_fetch(kae().ptr, name.as_ptr(), kae().propq().as_ptr()) };
    assert!(
        !kem.is_null(),
        "no RSA KEM in kae: {}",
        take_errors("fetch")
    );
    kae().expect_provider(unsafe { EVP_KEM_get0_provider(kem) }, "RSA KEM");
    unsafe { EVP_KEM_free(kem) };
}

fn crossover(bits: u32) {
    let kp = keypair(bits);
    let k = kp.k();
    let n = kp.reference.n();
    for round in 0..3 {
        let (ct, z) = encapsulate(kae(), &kae_key(kp));
        assert_eq!(ct.len(), k, "ciphertext length");
        assert_secret_in_range(&z, &n, k);
        let d = decapsulate(reference(), &kp.reference, &ct);
        assert!(d.ok(), "default decapsulates kae's ciphertext: {:?}", d.err);
        assert_eq!(d.secret, z, "round {round}: default recovers kae's secret");
        // kae's own decapsulation of its ciphertext, too.
        let own = decapsulate(kae(), &kae_key(kp), &ct);
        assert_eq!(own.secret, z, "round {round}: kae recovers its secret");

        let (ct, z) = encapsulate(reference(), &kp.reference);
        let d = decapsulate(kae(), &kae_key(kp), &ct);
        assert!(
            d.ok(),
            "kae decapsulates the default's ciphertext: {:?}",
            d.err
        );
        assert_eq!(
            d.secret, z,
            "round {round}: kae recovers the default's secret"
        );
    }
}

#[test]
fn crossover_1024() {
    crossover(1024)
}
#[test]
fn crossover_1025() {
    crossover(1025)
}
#[test]
fn crossover_2048() {
    crossover(2048)
}

/// Secrets are fresh each time and spread over the whole range (the top byte varies).
#[test]
fn secrets_are_fresh() {
    let kp = keypair(1024);
    let mut seen = std::collections::HashSet::new();
    let mut tops = std::collections::HashSet::new();
    for _ in 0..64 {
        let (_, z) = encapsulate(kae(), &kae_key(kp));
        tops.insert(z[0]);
        assert!(seen.insert(z), "a secret repeated");
    }
    assert!(tops.len() > 8, "top bytes of 64 secrets: {tops:?}");
}

/// A key kae generated itself, moved to the default provider for the other side.
#[test]
fn kae_generated_key() {
    let key = ok(kae().keygen_rsa(2048, None), "kae keygen");
    let theirs = ok(reference().transfer(&key), "export to default");
    let (ct, z) = encapsulate(kae(), &key);
    let d = decapsulate(reference(), &theirs, &ct);
    assert_eq!(
        d.secret, z,
        "default recovers the secret of a kae-generated key"
    );
    let (ct, z) = encapsulate(reference(), &theirs);
    let d = decapsulate(kae(), &key, &ct);
    assert_eq!(d.secret, z, "kae recovers with its generated key");
}

/// Decapsulation of tampered, short, long and out-of-range ciphertexts: the same verdict as
/// the default provider, and the same secret where both accept (RSADP is deterministic).
#[test]
fn decapsulate_inputs_like_default() {
    let kp = keypair(2048);
    let k = kp.k();
    let n = pad(&kp.reference.n(), k);
    let (ct, _) = encapsulate(reference(), &kp.reference);
    let mut flipped = ct.clone();
    flipped[k / 2] ^= 0x10;
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("valid".into(), ct.clone()),
        ("one bit flipped".into(), flipped),
        ("short by one byte".into(), ct[1..].to_vec()),
        ("long by one byte".into(), [&[0u8][..], &ct].concat()),
        ("long, 2k".into(), [&ct[..], &ct].concat()),
        ("one byte".into(), vec![7]),
        ("zero".into(), vec![0u8; k]),
        ("one".into(), be_add(&vec![0u8; k], 1)),
        ("two".into(), be_add(&vec![0u8; k], 2)),
        ("n - 2".into(), be_add(&n, -2)),
        ("n - 1".into(), be_add(&n, -1)),
        ("n".into(), n.clone()),
        ("n + 1".into(), be_add(&n, 1)),
        ("all ones".into(), vec![0xff; k]),
    ];
    for i in 0..6 {
        let mut r = random_bytes(k);
        r[0] &= 0x7f;
        cases.push((format!("random {i}"), r));
    }
    let mut problems = Vec::new();
    for (what, input) in &cases {
        let kae_out = decapsulate(kae(), &kae_key(kp), input);
        let dflt = decapsulate(reference(), &kp.reference, input);
        same(what, &kae_out, &dflt, &mut problems);
    }
    finish(problems);
}

/// Output buffer sizes and size queries (NULL output), both operations.
#[test]
fn sizes_like_default() {
    let kp = keypair(1025);
    let k = kp.k();
    let mut problems = Vec::new();
    let (ct, _) = encapsulate(reference(), &kp.reference);
    for outsize in [0, 1, k - 1, k, k + 7] {
        let o = |lib: &Lib| {
            encapsulate_sized(
                &kem_ctx(lib, &key_of(kp, lib), false, Some("RSASVE")),
                k,
                outsize,
            )
        };
        same(
            &format!("encapsulate, outlen {outsize}"),
            &o(kae()),
            &o(reference()),
            &mut problems,
        );
        let o = |lib: &Lib| {
            decapsulate_sized(
                &kem_ctx(lib, &key_of(kp, lib), true, Some("RSASVE")),
                &ct,
                outsize,
            )
        };
        same(
            &format!("decapsulate, outlen {outsize}"),
            &o(kae()),
            &o(reference()),
            &mut problems,
        );
    }
    // Size queries: (outlen?, secretlen?) for encapsulate; decapsulate with any input length.
    for (want_out, want_secret) in [(true, true), (true, false), (false, true), (false, false)] {
        let q = |lib: &Lib| {
            let ctx = kem_ctx(lib, &key_of(kp, lib), false, Some("RSASVE"));
            let (mut a, mut b) = (0usize, 0usize);
            let r = unsafe {
                EVP_PKEY_encapsulate(
                    ctx.0,
                    ptr::null_mut(),
                    if want_out { &mut a } else { ptr::null_mut() },
                    ptr::null_mut(),
                    if want_secret { &mut b } else { ptr::null_mut() },
                )
            };
            clear_errors();
            (r, a, b)
        };
        let (kq, dq) = (q(kae()), q(reference()));
        eprintln!("encapsulate size query {want_out}/{want_secret}: kae {kq:?} default {dq:?}");
        if kq != dq {
            problems.push(format!(
                "encapsulate size query (outlen {want_out}, secretlen {want_secret}): kae {kq:?}, default {dq:?}"
            ));
        }
        if want_out && kq.0 == 1 && kq.1 != k {
            problems.push(format!("encapsulate size query gave {}", kq.1));
        }
    }
    for inlen in [k, 3, k + 1] {
        let q = |lib: &Lib| {
            let ctx = kem_ctx(lib, &key_of(kp, lib), true, Some("RSASVE"));
            let mut a = 0usize;
            let input = vec![1u8; inlen];
            let r = unsafe {
                EVP_PKEY_decapsulate(ctx.0, ptr::null_mut(), &mut a, input.as_ptr(), input.len())
            };
            clear_errors();
            (r, a)
        };
        let (kq, dq) = (q(kae()), q(reference()));
        if kq != dq || (kq.0 == 1 && kq.1 != k) {
            problems.push(format!(
                "decapsulate size query, input {inlen} bytes: kae {kq:?}, default {dq:?}"
            ));
        }
    }
    finish(problems);
}

/// The operation name: RSASVE in any case is taken, anything else refused; without it the
/// providers agree (3.0-3.4: -2 from both calls; 3.5+: RSASVE by default). The parameter
/// lists are the default provider's.
#[test]
fn operation_name_like_default() {
    let kp = keypair(1024);
    let k = kp.k();
    let mut problems = Vec::new();
    for op in ["RSASVE", "rsasve", "RsaSve", "FOO", "", "RSASVE2", "DHKEM"] {
        let r = |lib: &Lib| {
            let ctx = kem_ctx(lib, &key_of(kp, lib), false, None);
            let c = CString::new(op).unwrap();
            let r = unsafe { EVP_PKEY_CTX_set_kem_op(ctx.0, c.as_ptr()) };
            clear_errors();
            r
        };
        let (a, b) = (r(kae()), r(reference()));
        eprintln!("set_kem_op({op:?}): kae {a} default {b}");
        if a != b {
            problems.push(format!("set_kem_op({op:?}): kae {a}, default {b}"));
        }
    }
    // No operation set.
    let (ct, _) = encapsulate(reference(), &kp.reference);
    let e = |lib: &Lib| encapsulate_sized(&kem_ctx(lib, &key_of(kp, lib), false, None), k, k);
    same(
        "encapsulate without operation",
        &e(kae()),
        &e(reference()),
        &mut problems,
    );
    let d = |lib: &Lib| decapsulate_sized(&kem_ctx(lib, &key_of(kp, lib), true, None), &ct, k);
    same(
        "decapsulate without operation",
        &d(kae()),
        &d(reference()),
        &mut problems,
    );
    let (maj, min) = common::core_version();
    let unset = e(kae()).ret;
    eprintln!("core {maj}.{min}: encapsulate without an operation returns {unset}");
    if (maj, min) >= (3, 5) {
        assert_eq!(unset, 1, "3.5+: RSASVE is the default operation");
    } else {
        assert_eq!(unset, -2, "before 3.5: no default operation");
    }
    // Parameter lists.
    let keys = |p: *const OSSL_PARAM| -> Vec<String> {
        let mut v = Vec::new();
        let mut p = p;
        if p.is_null() {
            return v;
        }
        unsafe {
            while !(*p).key.is_null() {
                v.push(CStr::from_ptr((*p).key).to_string_lossy().into_owned());
                p = p.add(1);
            }
        }
        v
    };
    for decap in [false, true] {
        let lists = |lib: &Lib| {
            let ctx = kem_ctx(lib, &key_of(kp, lib), decap, None);
            unsafe {
                (
                    keys(EVP_PKEY_CTX_settable_params(ctx.0)),
                    keys(EVP_PKEY_CTX_gettable_params(ctx.0)),
                )
            }
        };
        let (a, b) = (lists(kae()), lists(reference()));
        assert!(a.0.contains(&"operation".to_string()), "settable: {a:?}");
        // The default provider's lists, minus FIPS-only indicators (none outside FIPS).
        assert_eq!(a, b, "settable/gettable parameters (decap {decap})");
    }
    // A wrongly typed operation parameter is refused by both.
    let typed = |lib: &Lib| {
        let ctx = kem_ctx(lib, &key_of(kp, lib), false, None);
        let p = ParamsBuilder::new().int("operation", 0).build();
        let r = unsafe { common::ffi::EVP_PKEY_CTX_set_params(ctx.0, p.as_ptr()) };
        clear_errors();
        r
    };
    let (a, b) = (typed(kae()), typed(reference()));
    if a != b {
        problems.push(format!("integer operation parameter: kae {a}, default {b}"));
    }
    finish(problems);
}

/// A public key: encapsulation works; decapsulation can be set up and sized (as the default
/// provider allows) but fails at the operation, with kae's reason.
#[test]
fn public_key_only() {
    let kp = keypair(2048);
    let k = kp.k();
    let pub_ref = ok(
        reference().import(
            "RSA",
            EVP_PKEY_PUBLIC_KEY,
            &ok(kp.reference.export(EVP_PKEY_PUBLIC_KEY), "export"),
        ),
        "public key (default)",
    );
    let pub_kae = ok(kae().transfer(&pub_ref), "public key (kae)");
    assert!(!pub_kae.has_private());
    let (ct, z) = encapsulate(kae(), &pub_kae);
    assert_eq!(decapsulate(reference(), &kp.reference, &ct).secret, z);

    let mut problems = Vec::new();
    let init = |lib: &Lib, key: &Pkey| {
        clear_errors();
        let ctx = ok(lib.pctx(key), "ctx");
        let r = unsafe { EVP_PKEY_decapsulate_init(ctx.0, ptr::null()) };
        clear_errors();
        (r, ctx)
    };
    let (rk, ck) = init(kae(), &pub_kae);
    let (rd, cd) = init(reference(), &pub_ref);
    assert_eq!(
        rk, rd,
        "decapsulate_init with a public key: kae {rk}, default {rd}"
    );
    if rk > 0 {
        kae().expect_op(ck.0, "decapsulate_init");
        for (c, _) in [(&ck, "kae"), (&cd, "default")] {
            let op = CString::new("RSASVE").unwrap();
            assert_eq!(unsafe { EVP_PKEY_CTX_set_kem_op(c.0, op.as_ptr()) }, 1);
        }
        let q = |c: &PkeyCtx| {
            let mut a = 0usize;
            let r = unsafe { EVP_PKEY_decapsulate(c.0, ptr::null_mut(), &mut a, ct.as_ptr(), k) };
            (r, a)
        };
        assert_eq!(q(&ck), q(&cd), "size query with a public key");
        let (a, b) = (
            decapsulate_sized(&ck, &ct, k),
            decapsulate_sized(&cd, &ct, k),
        );
        same("decapsulate with a public key", &a, &b, &mut problems);
        assert!(!a.ok(), "decapsulated with a public key");
        let e = a.err.expect("an error");
        assert!(e.reason_from(kae()).is_some(), "kae's reason: {e}");
    }
    finish(problems);
}

/// RSA-PSS keys are refused by both providers' KEM.
#[test]
fn rsa_pss_key_refused() {
    let pss = ok(
        reference().keygen(
            "RSA-PSS",
            &ParamsBuilder::new().size_t("bits", 1024).build(),
        ),
        "RSA-PSS keygen",
    );
    let pss_kae = ok(kae().transfer(&pss), "RSA-PSS into kae");
    for decap in [false, true] {
        let r = |lib: &Lib, key: &Pkey| {
            clear_errors();
            let ctx = ok(lib.pctx(key), "ctx");
            let r = unsafe {
                if decap {
                    EVP_PKEY_decapsulate_init(ctx.0, ptr::null())
                } else {
                    EVP_PKEY_encapsulate_init(ctx.0, ptr::null())
                }
            };
            (r, take_errors("init"))
        };
        let (a, ea) = r(kae(), &pss_kae);
        let (b, _) = r(reference(), &pss);
        assert_eq!(
            a > 0,
            b > 0,
            "RSA-PSS key, decap {decap}: kae {a}, default {b}"
        );
        assert!(a <= 0, "kae took an RSA-PSS key for RSASVE");
        eprintln!("RSA-PSS (decap {decap}): {ea}");
    }
}

/// The KEM context survives EVP_PKEY_CTX_dup.
#[test]
fn duplicated_context() {
    let kp = keypair(1024);
    let ctx = kem_ctx(kae(), &kae_key(kp), true, Some("RSASVE"));
    let dup = PkeyCtx(unsafe { common::ffi::EVP_PKEY_CTX_dup(ctx.0) });
    assert!(!dup.0.is_null(), "dup: {}", take_errors("dup"));
    drop(ctx);
    let (ct, z) = encapsulate(reference(), &kp.reference);
    let o = decapsulate_sized(&dup, &ct, kp.k());
    assert_eq!(o.secret, z, "{:?}", o.err);
}

/// The security review's reproduction, in a fresh process: kae and the default provider
/// active with kae preferred (`?provider=kae`), an RSA key read from PEM, then
/// EVP_PKEY_encapsulate_init + EVP_PKEY_CTX_set_kem_op("RSASVE") + encapsulate. The preferred
/// KEM used to be the default provider's re-listed under kae's name, which received the key
/// exported to kae's key management (a crash); it must now be kae's own KEM, also with the key
/// moved into kae, and the default provider must recover the secret.
#[test]
fn pem_key_with_kae_preferred_uses_kaes_kem() {
    use procs::{openssl_in, write_prefer_kae_config, TempDir};
    use std::process::Command;
    let dir = TempDir::new("kem-repro");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/kem_repro.c");
    let exe = dir.join("kem_repro");
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-O1", "-o"]).arg(&exe).arg(src);
    // Built against the OpenSSL this test binary was built with (OPENSSL_DIR, as openssl-sys
    // uses it), so that a 4.x run does not mix two libcryptos.
    if let Some(dir) = option_env!("OPENSSL_DIR") {
        cc.arg(format!("-I{dir}/include"))
            .arg(format!("-L{dir}/lib"))
            .arg(format!("-Wl,-rpath,{dir}/lib"));
    }
    let cc = cc
        .arg("-lcrypto")
        .output()
        .expect("cc (build-essential) is needed for this test");
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let gen = openssl_in(dir.path())
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "key.pem",
        ])
        .output()
        .unwrap();
    assert!(gen.status.success(), "genpkey: {gen:?}");
    let cfg = write_prefer_kae_config(dir.path());
    let out = Command::new(&exe)
        .arg("key.pem")
        .current_dir(dir.path())
        .env("OPENSSL_CONF", &cfg)
        .env_remove("OPENSSL_MODULES")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ctx = format!(
        "status {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{ctx}");
    let lines: Vec<&str> = stdout.lines().collect();
    // The PEM key may be decoded into either provider's key object; the KEM must be kae's.
    let keyprov = lines.get(1).copied().unwrap_or("");
    assert!(
        keyprov == "KEYPROV kae" || keyprov == "KEYPROV default",
        "{ctx}"
    );
    assert_eq!(
        lines,
        [
            "ROUND pem",
            keyprov,
            "ENCAP ok kae 256 256",
            "DECAP ok default",
            "ROUND kae-key",
            "KEYPROV kae",
            "ENCAP ok kae 256 256",
            "DECAP ok default",
        ],
        "both rounds encapsulate with kae's KEM: {ctx}"
    );
}

/// The same key pair in kae through a full keypair import (not the cached transfer): the
/// private part travels, so kae's CRT path does the work.
#[test]
fn imported_keypair() {
    let kp = keypair(1024);
    let again = ok(
        kae().import(
            "RSA",
            EVP_PKEY_KEYPAIR,
            &ok(kp.reference.export(EVP_PKEY_KEYPAIR), "export"),
        ),
        "import",
    );
    let (ct, z) = encapsulate(reference(), &kp.reference);
    assert_eq!(decapsulate(kae(), &again, &ct).secret, z);
}
