//! RSA-PSS key generation restrictions set in several steps, as `openssl genpkey` does (one
//! `set_params` call per `-pkeyopt`): kae must end with the same restrictions as the default
//! provider. It used to start from the defaults again on every call (so `md:sha256` then
//! `saltlen:32` gave a SHA-1 key), and made the MGF1 digest follow the message digest where
//! the default provider keeps SHA-1.

use crate::procs;

use procs::{openssl_in, run_ok, TempDir};

/// The "PSS parameter restrictions" block of `pkey -text` for a key generated with `opts`
/// (by kae when `kae`, else by the default provider).
fn restrictions(dir: &TempDir, modules: &std::path::Path, kae: bool, opts: &[&str]) -> String {
    let key = dir.p(if kae { "kae.pem" } else { "default.pem" });
    let mut gen = openssl_in(dir.path());
    gen.arg("genpkey");
    if kae {
        gen.arg("-provider-path")
            .arg(modules)
            .args(["-provider", "kae"]);
    }
    gen.args(["-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:1024"]);
    for o in opts {
        gen.args(["-pkeyopt", o]);
    }
    gen.args(["-out", &key]);
    run_ok(&mut gen);
    // Printed by the default provider in both cases: only the key's contents differ.
    let text = run_ok(openssl_in(dir.path()).args(["pkey", "-in", &key, "-text", "-noout"]));
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("PSS parameter restrictions"))
        .collect();
    assert!(
        !block.is_empty(),
        "no PSS restrictions printed for {opts:?}:\n{text}"
    );
    block.join("\n")
}

#[test]
fn pss_keygen_restrictions_accumulate_like_the_default_provider() {
    let dir = TempDir::new("pss_keygen");
    let modules = dir.provider_dir();
    for opts in [
        &["rsa_pss_keygen_md:sha256", "rsa_pss_keygen_saltlen:32"][..],
        &["rsa_pss_keygen_saltlen:32", "rsa_pss_keygen_md:sha256"][..],
        &["rsa_pss_keygen_md:sha512"][..],
        &["rsa_pss_keygen_mgf1_md:sha384", "rsa_pss_keygen_md:sha256"][..],
        &["rsa_pss_keygen_md:sha256", "rsa_pss_keygen_mgf1_md:sha256"][..],
        &["rsa_pss_keygen_saltlen:0"][..],
    ] {
        let ours = restrictions(&dir, &modules, true, opts);
        let theirs = restrictions(&dir, &modules, false, opts);
        assert_eq!(ours, theirs, "restrictions differ for {opts:?}");
        eprintln!("{opts:?}: {}", ours.replace('\n', " | "));
    }
}
