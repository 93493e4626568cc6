//! Regression tests for the security review (issue 8) at the decryption boundary: the output
//! buffer check, ciphertexts shorter than the modulus and the TLS premaster mode, each checked
//! against what OpenSSL's default provider does with the same input (a caller or a TLS peer
//! must not be able to tell which provider answered).

mod common;
mod procs;

use common::ffi;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn kp() -> &'static KeyPair {
    keypair(2048)
}

/// `EVP_PKEY_decrypt` into a buffer of `cap` bytes of which the provider is told `outsize`.
/// Returns the whole buffer and the reported length.
fn decrypt_sized(
    lib: &Lib,
    key: &Pkey,
    params: &Params,
    ct: &[u8],
    outsize: usize,
    cap: usize,
) -> Res<(Vec<u8>, usize)> {
    let ctx = op_setup(
        lib,
        key,
        ffi::EVP_PKEY_decrypt_init,
        "EVP_PKEY_decrypt",
        params,
    )?;
    let mut buf = vec![0xA5u8; cap];
    let mut len = outsize;
    unsafe {
        cvt(
            ffi::EVP_PKEY_decrypt(ctx.0, buf.as_mut_ptr(), &mut len, ct.as_ptr(), ct.len()),
            &format!("EVP_PKEY_decrypt(outsize {outsize}) [{}]", lib.label),
        )?;
    }
    Ok((buf, len))
}

fn tls_params(client_version: u32) -> Params {
    ParamsBuilder::new()
        .int("pad-mode", ffi::RSA_PKCS1_WITH_TLS_PADDING)
        .uint("tls-client-version", client_version)
        .build()
}

/// A random value below the modulus (the top byte cleared), as a raw "ciphertext".
fn random_below_n(kp: &KeyPair) -> Vec<u8> {
    let mut c = random_bytes(kp.k());
    c[0] = 0;
    c
}

/// Item 1: the caller's buffer size is compared with the largest possible output before any
/// private-key work. A 40-byte buffer used to accept a valid 32-byte message and refuse most
/// random ciphertexts: a padding oracle.
#[test]
fn output_buffer_is_checked_before_decryption() {
    let kp = kp();
    let k = kp.k();
    let settings = [
        (
            "PKCS#1, implicit rejection off",
            Enc::pkcs1_explicit().params(),
        ),
        ("PKCS#1, implicit rejection on", Enc::pkcs1().params()),
        ("OAEP SHA-256", Enc::oaep("SHA256", "SHA256", None).params()),
    ];
    let msg = [0x42u8; 32];
    for (name, p) in &settings {
        let ct = ok(encrypt(reference(), &kp.reference, p, &msg), "encrypt");
        // Control: a buffer of k bytes takes the message.
        let (buf, len) = ok(
            decrypt_sized(kae(), &kp.kae, p, &ct, k, k + 8),
            &format!("{name}: decrypt into k bytes"),
        );
        assert_eq!(&buf[..len], &msg, "{name}: wrong plaintext");
        assert!(
            buf[k..].iter().all(|&b| b == 0xA5),
            "{name}: wrote past the declared size"
        );
        // 40 bytes hold the message but not the largest possible output: refused, for the
        // valid ciphertext and for random ones alike, with a reason that names no secret.
        let mut reasons = Vec::new();
        for (what, c) in [
            ("valid ciphertext", ct.clone()),
            ("random ciphertext", random_below_n(kp)),
            ("random ciphertext", random_below_n(kp)),
        ] {
            let e = match decrypt_sized(kae(), &kp.kae, p, &c, 40, 64) {
                Ok((_, len)) => panic!("{name}: {what} decrypted into a 40-byte buffer ({len})"),
                Err(e) => e,
            };
            let text = e.to_string();
            assert!(e.has_reason(), "{name}: {what}: no reason: {text}");
            assert!(
                !text.contains("need 32") && !text.contains(" 32 bytes"),
                "{name}: {what}: error text carries the message length: {text}"
            );
            reasons.push(e.first_reason().map(str::to_owned));
        }
        assert!(
            reasons.windows(2).all(|w| w[0] == w[1]),
            "{name}: the reason differs between valid and random ciphertexts: {reasons:?}"
        );
        // The default provider refuses the same buffer.
        assert!(
            decrypt_sized(reference(), &kp.reference, p, &ct, 40, 64).is_err(),
            "{name}: the default provider accepts a 40-byte buffer (test premise)"
        );
    }

    // TLS premaster mode: the largest output is 48 bytes.
    let mut pms = vec![0x03u8, 0x03];
    pms.extend(random_bytes(46));
    let ct = ok(
        encrypt(reference(), &kp.reference, &Enc::pkcs1().params(), &pms),
        "encrypt premaster",
    );
    let p = tls_params(0x0303);
    assert!(
        decrypt_sized(kae(), &kp.kae, &p, &ct, 47, 64).is_err(),
        "TLS mode: 47-byte buffer accepted"
    );
    let (buf, len) = ok(
        decrypt_sized(kae(), &kp.kae, &p, &ct, 48, 64),
        "TLS mode: 48-byte buffer",
    );
    assert_eq!((len, &buf[..48]), (48, &pms[..]));
    assert!(
        buf[48..].iter().all(|&b| b == 0xA5),
        "TLS mode wrote past 48 bytes"
    );
}

/// Which of two decryptions of the same input succeeded, and whether their outputs agree.
fn same_outcome(
    what: &str,
    kae_r: Res<Vec<u8>>,
    ref_r: Res<Vec<u8>>,
    compare_output: bool,
) -> Option<String> {
    match (&kae_r, &ref_r) {
        (Ok(a), Ok(b)) if compare_output && a != b => Some(format!(
            "{what}: both succeed but the outputs differ (kae {}, default {})",
            hex(a),
            hex(b)
        )),
        (Ok(a), Ok(b)) if a.len() != b.len() => Some(format!(
            "{what}: output lengths differ (kae {}, default {})",
            a.len(),
            b.len()
        )),
        (Ok(_), Ok(_)) | (Err(_), Err(_)) => {
            eprintln!(
                "[same] {what}: {}",
                if kae_r.is_ok() { "accepted" } else { "refused" }
            );
            None
        }
        (Ok(_), Err(e)) => Some(format!("{what}: kae accepts, default refuses ({e})")),
        (Err(e), Ok(_)) => Some(format!("{what}: kae refuses ({e}), default accepts")),
    }
}

/// A ciphertext (made by the default provider) whose first byte is zero, for a short form.
fn ciphertext_with_leading_zero(kp: &KeyPair, p: &Params, raw: bool) -> (Vec<u8>, Vec<u8>) {
    for _ in 0..5000 {
        let pt = if raw {
            random_below_n(kp)
        } else {
            random_bytes(20)
        };
        let ct = ok(encrypt(reference(), &kp.reference, p, &pt), "encrypt");
        if ct[0] == 0 {
            return (pt, ct);
        }
    }
    panic!("no ciphertext with a leading zero byte in 5000 tries");
}

/// Item 2: a ciphertext shorter than the modulus is the integer it spells (the default
/// provider's rule), in every padding mode; a longer one is refused by both.
#[test]
fn short_and_long_ciphertexts_follow_the_default_provider() {
    let kp = kp();
    let k = kp.k();
    let mut problems = Vec::new();
    // (name, decrypt settings, encrypt settings, outputs comparable with the default's)
    let settings: Vec<(&str, Params, Params, bool)> = vec![
        (
            "PKCS#1",
            Enc::pkcs1_explicit().params(),
            Enc::pkcs1().params(),
            true,
        ),
        // The core's default: implicit rejection from 3.2, where the synthetic messages of
        // the malformed inputs must be the default provider's; before, plain PKCS#1.
        (
            "PKCS#1, no implicit-rejection parameter",
            Enc::pkcs1().params(),
            Enc::pkcs1().params(),
            true,
        ),
        (
            "OAEP",
            Enc::oaep("SHA256", "SHA256", None).params(),
            Enc::oaep("SHA256", "SHA256", None).params(),
            true,
        ),
        (
            "none",
            Enc::pad("none").params(),
            Enc::pad("none").params(),
            true,
        ),
        // Both return a random premaster for a bad block: compare lengths only.
        (
            "TLS premaster",
            tls_params(0x0303),
            Enc::pkcs1().params(),
            false,
        ),
    ];
    for (name, p, enc_p, deterministic) in &settings {
        let raw = *name == "none";
        let (pt, ct) = ciphertext_with_leading_zero(kp, enc_p, raw);
        let stripped = ct[1..].to_vec();
        let mut longer = vec![0u8];
        longer.extend(&ct);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("valid, leading zero byte dropped", stripped.clone()),
            ("empty", Vec::new()),
            ("one byte", vec![1]),
            ("k-1 zero bytes", vec![0; k - 1]),
            ("k zero bytes", vec![0; k]),
            ("k+1 bytes (leading zero)", longer),
            ("k+1 bytes", {
                let mut v = ct.clone();
                v.push(0);
                v
            }),
        ];
        for (what, c) in cases {
            let label = format!("{name}: {what}");
            let a = decrypt(kae(), &kp.kae, p, &c);
            let b = decrypt(reference(), &kp.reference, p, &c);
            if let Some(msg) = same_outcome(&label, a, b, *deterministic) {
                problems.push(msg);
            }
        }
        // The dropped leading zero changes nothing.
        if *deterministic {
            match decrypt(kae(), &kp.kae, p, &stripped) {
                Ok(got) => {
                    if got != pt {
                        problems.push(format!("{name}: short form decrypts to something else"))
                    }
                }
                Err(e) => problems.push(format!("{name}: short form refused: {e}")),
            }
        }
    }
    // PKCS#1 v1.5 without the implicit-rejection parameter (the core's default) and a short
    // ciphertext whose block has bad padding. From OpenSSL 3.2 (implicit rejection) the
    // synthetic message of a short ciphertext is the one of its zero-padded form (the key
    // derivation sees the same integer) and the default provider's, byte for byte; before,
    // both providers refuse both forms.
    let p = Enc::pkcs1().params();
    let mode = implicit_rejection_mode();
    let short = (0..100)
        .map(|_| random_bytes(k - 3))
        .find(|c| {
            let mut padded = vec![0u8; 3];
            padded.extend(c);
            let em = ok(
                decrypt(
                    reference(),
                    &kp.reference,
                    &Enc::pad("none").params(),
                    &padded,
                ),
                "raw decrypt",
            );
            // Not a valid type-2 block (almost every random value).
            !(em[0] == 0
                && em[1] == 2
                && em[2..10].iter().all(|&b| b != 0)
                && em[10..].iter().any(|&b| b == 0))
        })
        .expect("a random short ciphertext with bad padding");
    let mut padded = vec![0u8; 3];
    padded.extend(&short);
    let mut outcomes = Vec::new();
    for (form, c) in [("short", &short), ("zero-padded", &padded)] {
        let label = format!("PKCS#1 bad padding, {form} ciphertext [{mode}]");
        let a = decrypt(kae(), &kp.kae, &p, c);
        let b = decrypt(reference(), &kp.reference, &p, c);
        if core_has_implicit_rejection() {
            match (&a, &b) {
                (Ok(x), Ok(y)) if x == y => {}
                _ => problems.push(format!(
                    "{label}: kae {a:?}, default provider {b:?}: not the same synthetic message"
                )),
            }
        } else {
            if b.is_ok() {
                problems.push(format!(
                    "{label}: the default provider accepts (test premise)"
                ));
            }
            if let Some(e) = check_error(a.clone(), &label) {
                problems.push(e);
            }
        }
        outcomes.push(a.ok());
    }
    if outcomes[0] != outcomes[1] {
        problems.push(format!(
            "{mode}: PKCS#1 bad padding: short and zero-padded forms differ: {outcomes:?}"
        ));
    }
    eprintln!(
        "[implicit rejection] {mode}: bad padding in a {}-byte ciphertext: {}",
        short.len(),
        if core_has_implicit_rejection() {
            "kae's synthetic message is the default provider's, for the short and zero-padded forms"
        } else {
            "refused by kae and the default provider, short and zero-padded"
        }
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// pad-mode "pkcs1" with a TLS client version set is plain PKCS#1 in the default provider
/// (only RSA_PKCS1_WITH_TLS_PADDING selects the premaster rules): kae answers the same.
#[test]
fn pkcs1_with_client_version_is_plain_pkcs1() {
    let kp = kp();
    let p = Enc {
        tls_client_version: Some(0x0303),
        ..Enc::pkcs1_explicit()
    }
    .params();
    // A 48-byte message with the wrong version and a 20-byte one: plain PKCS#1 returns both.
    let mut wrong_version = vec![0x03u8, 0x01];
    wrong_version.extend(random_bytes(46));
    for msg in [wrong_version, random_bytes(20)] {
        let ct = ok(
            encrypt(reference(), &kp.reference, &Enc::pkcs1().params(), &msg),
            "encrypt",
        );
        let want = ok(
            decrypt(reference(), &kp.reference, &p, &ct),
            "default decrypt",
        );
        assert_eq!(want, msg, "test premise: the default returns the message");
        let got = ok(decrypt(kae(), &kp.kae, &p, &ct), "kae decrypt");
        assert_eq!(
            got, msg,
            "kae treated pkcs1 + tls-client-version differently"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// TLS 1.2 RSA key exchange with malformed encrypted premasters, against s_server
// ---------------------------------------------------------------------------------------------

/// What the server answered to our ClientKeyExchange + ChangeCipherSpec + bogus Finished.
#[derive(Debug, PartialEq, Eq, Clone)]
enum Answer {
    /// An alert record (level, description) sent before the connection closed.
    Alert(u8, u8),
    /// The connection closed without an alert.
    Closed,
}

fn record(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![kind, 3, 3];
    r.extend((body.len() as u16).to_be_bytes());
    r.extend(body);
    r
}

fn handshake(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut h = vec![kind];
    h.extend(&(body.len() as u32).to_be_bytes()[1..]);
    h.extend(body);
    h
}

/// Reads one TLS record (type, body); None at EOF or timeout.
fn read_record(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    s.read_exact(&mut head).ok()?;
    let len = u16::from_be_bytes([head[3], head[4]]) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

/// A TLS 1.2 client offering only TLS_RSA_WITH_AES_128_GCM_SHA256 that sends `enc_pms` as
/// its encrypted premaster, then ChangeCipherSpec and a Finished record of random bytes.
fn rsa_kx_with_premaster(port: u16, enc_pms: &[u8]) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut hello = vec![3, 3];
    hello.extend(random_bytes(32));
    hello.push(0); // no session id
    hello.extend([0, 4, 0x00, 0x9c, 0x00, 0xff]); // AES128-GCM-SHA256, renegotiation SCSV
    hello.extend([1, 0]); // no compression
                          // signature_algorithms: rsa_pkcs1_sha256, rsa_pss_rsae_sha256
    let ext = [0x00, 0x0d, 0, 6, 0, 4, 0x04, 0x01, 0x08, 0x04];
    hello.extend((ext.len() as u16).to_be_bytes());
    hello.extend(ext);
    let mut first = record(22, &handshake(1, &hello));
    first[1..3].copy_from_slice(&[3, 1]);
    s.write_all(&first).expect("send ClientHello");
    // Read the server's flight up to ServerHelloDone.
    let mut hs = Vec::new();
    'flight: loop {
        match read_record(&mut s) {
            Some((22, body)) => {
                hs.extend(body);
                let mut i = 0;
                while i + 4 <= hs.len() {
                    let len = u32::from_be_bytes([0, hs[i + 1], hs[i + 2], hs[i + 3]]) as usize;
                    if hs[i] == 14 {
                        break 'flight;
                    }
                    i += 4 + len;
                }
            }
            Some((21, a)) if a.len() == 2 => return Answer::Alert(a[0], a[1]),
            Some((t, _)) => panic!("unexpected record type {t} before ServerHelloDone"),
            None => panic!("server closed before ServerHelloDone"),
        }
    }
    let mut cke = (enc_pms.len() as u16).to_be_bytes().to_vec();
    cke.extend(enc_pms);
    let mut flight = record(22, &handshake(16, &cke));
    flight.extend(record(20, &[1]));
    flight.extend(record(22, &random_bytes(40)));
    // The server may already have closed; what it sent is what counts.
    let _ = s.write_all(&flight);
    loop {
        match read_record(&mut s) {
            Some((21, a)) if a.len() == 2 => return Answer::Alert(a[0], a[1]),
            Some(_) => continue,
            None => return Answer::Closed,
        }
    }
}

/// Item 2 end to end: short, all-zero, over-long and not-below-n encrypted premasters get the
/// same answer from an s_server whose RSA is kae's as from one with the default provider
/// only. A short premaster used to get `decrypt_error` at once from kae, where the default
/// provider takes the random-premaster path and the handshake fails later at Finished.
#[test]
fn tls12_rsa_key_exchange_alerts_match_default() {
    use procs::{openssl_in, self_signed_cert_args, write_prefer_kae_config, SServer, TempDir};
    let dir = TempDir::new("sec-tls-kx");
    let st = openssl_in(dir.path())
        .args(self_signed_cert_args("srv.key", "srv.pem", "kae-test"))
        .output()
        .expect("openssl req");
    assert!(st.status.success(), "openssl req failed: {st:?}");
    let cfg = write_prefer_kae_config(dir.path());
    let pem = std::fs::read_to_string(dir.join("srv.pem")).unwrap();
    // The modulus length from the certificate (2048-bit key).
    assert!(pem.contains("BEGIN CERTIFICATE"));
    let k = 256usize;

    let valid_looking = {
        let mut c = random_bytes(k);
        c[0] = 0x01;
        c
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("random, full length", valid_looking.clone()),
        ("random, one byte short", valid_looking[1..].to_vec()),
        ("random, 16 bytes short", valid_looking[16..].to_vec()),
        ("all zero", vec![0; k]),
        ("one zero byte", vec![0]),
        ("over-long (k+1)", {
            let mut v = vec![0u8];
            v.extend(&valid_looking);
            v
        }),
        ("not below n (all 0xff)", vec![0xff; k]),
    ];
    let n = cases.len().to_string();
    let serve = |with_kae: bool| -> (Vec<Answer>, String) {
        let mut server = SServer::start(|port| {
            let mut cmd = openssl_in(dir.path());
            if with_kae {
                cmd.env("OPENSSL_CONF", &cfg).env("KAE_LOG", "info");
            }
            cmd.args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
                .args(["-cert", "srv.pem", "-key", "srv.key", "-naccept", &n])
                .args(["-tls1_2", "-cipher", "AES128-GCM-SHA256"]);
            cmd
        });
        let answers = cases
            .iter()
            .map(|(_, c)| rsa_kx_with_premaster(server.port, c))
            .collect();
        server.finish(Duration::from_secs(20));
        (answers, server.stderr_text())
    };
    let (with_default, _) = serve(false);
    let (with_kae, kae_log) = serve(true);
    let mut problems = Vec::new();
    for (((what, _), d), kz) in cases.iter().zip(&with_default).zip(&with_kae) {
        eprintln!("{what}: default {d:?}, kae {kz:?}");
        if d != kz {
            problems.push(format!("{what}: default answers {d:?}, kae {kz:?}"));
        }
        if !matches!(d, Answer::Alert(2, _)) {
            problems.push(format!(
                "{what}: no fatal alert from the default server ({d:?})"
            ));
        }
    }
    // The kae server really decrypted with kae.
    let summary = kae_log
        .lines()
        .find(|l| l.contains("summary: private ops"))
        .unwrap_or_else(|| panic!("no kae summary in the server's log:\n{kae_log}"));
    let ops: u64 = summary
        .split("private ops ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse {summary:?}"));
    assert!(ops >= 4, "kae computed {ops} private ops: {summary}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Item 0: no other provider's code ever receives a kae key object
// ---------------------------------------------------------------------------------------------

/// Operation ids whose implementations receive key objects (keymgmt, key exchange, signature,
/// asymmetric cipher, KEM, encoder).
const KEYED_OPS: [u32; 6] = [10, 11, 12, 13, 14, 20];

fn rsa_like(names: &str) -> bool {
    names.split(':').any(|n| {
        let n = n.to_ascii_uppercase();
        n.contains("RSA") || n.starts_with("1.2.840.113549.1.1.")
    })
}

/// A fresh process with kae preferred (as openssl-prefer-kae.cnf does) reads an RSA key pair
/// from PEM, moves it into kae, and uses it for the RSA KEM (RSASVE), signing, OAEP and the
/// PEM/text encoders, under valgrind: the RSA KEM used to be the default provider's code
/// re-listed under kae's name, which then read kae's key object and crashed; kae now has its
/// own RSA KEM, and the probe counts the KEM steps as ok only when they ran in kae. Every
/// algorithm kae lists for an operation that takes keys and whose name is RSA-like must be
/// kae's own code (its first function lives in libkae.so).
#[test]
fn relisted_algorithms_never_get_kae_keys() {
    use procs::{openssl_in, write_prefer_kae_config, TempDir};
    use std::process::Command;
    let dir = TempDir::new("sec-relist");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/relist_probe.c");
    let probe = dir.join("relist_probe");
    let cc = Command::new("cc")
        .args(["-Wall", "-O1", "-o"])
        .arg(&probe)
        .arg(src)
        .args(["-lcrypto", "-ldl"])
        .output()
        .expect("cc (build-essential) is needed for this test");
    assert!(
        cc.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let gen = openssl_in(dir.path())
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .args(["-out", "key.pem"])
        .output()
        .unwrap();
    assert!(gen.status.success(), "genpkey: {gen:?}");
    let pubout = openssl_in(dir.path())
        .args(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        .output()
        .unwrap();
    assert!(pubout.status.success(), "pkey -pubout: {pubout:?}");
    let cfg = write_prefer_kae_config(dir.path());
    let out = Command::new("valgrind")
        .args(["--quiet", "--error-exitcode=99", "--track-origins=no"])
        .arg(&probe)
        .args(["pub.pem", "key.pem"])
        .current_dir(dir.path())
        .env("OPENSSL_CONF", &cfg)
        .env_remove("OPENSSL_MODULES")
        .output()
        .expect("valgrind is needed for this test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ctx = format!(
        "status {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        out.status.success(),
        "the probe crashed or valgrind found errors: {ctx}"
    );

    let keyprov: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("KEYPROV"))
        .collect();
    assert_eq!(
        keyprov.get(1).copied(),
        Some("KEYPROV kae kae"),
        "second round must use kae's key objects: {ctx}"
    );
    let results: Vec<&str> = stdout.lines().filter(|l| l.starts_with("RESULT")).collect();
    assert_eq!(results.len(), 16, "two rounds of eight operations: {ctx}");
    for r in &results {
        assert!(r.ends_with(" ok"), "{r}\n{ctx}");
    }

    let mut own = 0;
    let mut relisted = 0;
    let mut problems = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with("ALG ")) {
        let mut f = line.splitn(4, ' ').skip(1);
        let (op, owner, names) = (
            f.next().unwrap().parse::<u32>().unwrap(),
            f.next().unwrap(),
            f.next().unwrap_or(""),
        );
        if owner.starts_with("libkae") {
            own += 1;
        } else {
            relisted += 1;
            if KEYED_OPS.contains(&op) && rsa_like(names) {
                problems.push(format!("operation {op}: {names} is {owner}'s code"));
            }
        }
    }
    assert!(own >= 4, "kae's own RSA algorithms are missing: {ctx}");
    assert!(
        relisted > 0,
        "nothing re-listed (load-default is on): {ctx}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Item 8: what kae hands OpenSSL as a pointer never changes or expires
// ---------------------------------------------------------------------------------------------

fn get_param(key: &str, data_type: u32, data: *mut std::ffi::c_void, size: usize) -> i32 {
    use std::ffi::CString;
    let k = CString::new(key).unwrap();
    let mut params = [
        ffi::OSSL_PARAM {
            key: k.as_ptr(),
            data_type,
            data,
            data_size: size,
            return_size: usize::MAX,
        },
        ffi::OSSL_PARAM {
            key: std::ptr::null(),
            data_type: 0,
            data: std::ptr::null_mut(),
            data_size: 0,
            return_size: 0,
        },
    ];
    unsafe { ffi::OSSL_PROVIDER_get_params(kae().prov, params.as_mut_ptr()) }
}

/// `buildinfo` is a UTF8_PTR: OpenSSL keeps the pointer. It used to point into a ring of live
/// lines rebuilt every second and reused after about a minute; now it is one static string,
/// and the live numbers are a copied UTF8_STRING parameter of their own (`live`).
#[test]
fn buildinfo_pointer_is_static_and_live_numbers_are_copied() {
    use std::ffi::{c_char, CStr};
    let read_ptr = || -> *const c_char {
        let mut p: *const c_char = std::ptr::null();
        let r = get_param(
            "buildinfo",
            ffi::OSSL_PARAM_UTF8_PTR,
            (&mut p as *mut *const c_char).cast(),
            0,
        );
        assert_eq!(r, 1, "get buildinfo");
        assert!(!p.is_null());
        p
    };
    let first = read_ptr();
    let text = unsafe { CStr::from_ptr(first) }
        .to_str()
        .unwrap()
        .to_owned();
    std::thread::sleep(Duration::from_millis(1100));
    let second = read_ptr();
    assert_eq!(first, second, "buildinfo moved between calls");
    assert_eq!(unsafe { CStr::from_ptr(first) }.to_str().unwrap(), text);
    assert!(text.starts_with("kae "), "{text}");

    // live: copied into the caller's buffer; a buffer too small is refused, not overrun.
    let mut buf = vec![0u8; 1024];
    let r = get_param(
        "live",
        ffi::OSSL_PARAM_UTF8_STRING,
        buf.as_mut_ptr().cast(),
        buf.len(),
    );
    assert_eq!(r, 1, "get live");
    let line = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
    assert!(
        line.contains("backend ") && line.contains("process(es) with kae"),
        "{line}"
    );
    let mut small = vec![0x5Au8; 16];
    let r = get_param(
        "live",
        ffi::OSSL_PARAM_UTF8_STRING,
        small.as_mut_ptr().cast(),
        8,
    );
    common::clear_errors();
    assert_ne!(r, 1, "an 8-byte buffer cannot hold the live line");
    assert!(
        small[8..].iter().all(|&b| b == 0x5A),
        "wrote past the buffer"
    );
}
