//! End-to-end tests that drive the system `openssl` command-line tool with the
//! kae provider module built by cargo.
//!
//! The module is the one `procs::module_path` finds next to the test binary
//! (`target/<profile>/deps/libkae.so`, else `target/<profile>/libkae.so`). The
//! `kae.so` name that `-provider kae` looks for may only exist for release
//! builds, so each test process makes its own directory with a `kae.so`
//! symlink and passes it as `-provider-path`.
//!
//! Every external command runs with a time limit; a command that hangs is
//! killed and the test fails with what it printed so far.
//!
//! Environment knobs:
//! - `KAE_TEST_OPENSSL`: openssl binary to use (default `openssl` from PATH).
//! - `KAE_TEST_KEEP=1`: keep the temporary directories of passing tests too
//!   (those of failing tests are always kept and their path is printed).
//! - `KAE_MODULE`: the provider module to test instead of the one cargo built.

mod procs;

use procs::{
    module_path, openssl_in, provider_dir_at, rsa2048_speed_line, run, self_signed_cert_args,
    KaeSummary, Output, SServer, TempDir, CMD_LIMIT,
};
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Helpers: locations
// ---------------------------------------------------------------------------

/// Time limit for a command run under `openssl speed`.
const SPEED_TIMEOUT: Duration = Duration::from_secs(120);

/// Property query given with `-propquery` to commands run with kae: every
/// fetch must come from kae. This works because kae re-lists what it takes
/// from its private default provider (store loaders, decoders, digests) under
/// `provider=kae`; if that ever changes, "?provider=kae" (prefer kae) is the
/// fallback, as key loading in pkeyutl would then fail with "unregistered
/// scheme ... Properties (provider=kae)".
const KAE_PROPQ: &str = "provider=kae";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Directory holding `kae.so -> libkae.so`, for `-provider-path`.
/// One per test process; stale ones of finished processes are removed.
fn provider_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        remove_stale_provider_dirs();
        let d = std::env::temp_dir().join(format!("kae-cli-provider-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        provider_dir_at(&d)
    })
}

fn remove_stale_provider_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("kae-cli-provider-") {
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Writes `<dir>/openssl.cnf` from `provider-conf/openssl-test.cnf.in`: kae
/// (absolute module path) + default activated, `default_properties = ?provider=kae`.
fn write_test_config(dir: &TempDir) -> PathBuf {
    let tpl_path = manifest_dir().join("provider-conf/openssl-test.cnf.in");
    let tpl = fs::read_to_string(&tpl_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", tpl_path.display()));
    let text = tpl
        .replace("@KAE_MODULE@", &module_path().to_string_lossy())
        .replace("@CA_DIR@", &dir.path().to_string_lossy());
    assert!(
        !text.contains('@'),
        "unsubstituted placeholder left in {}",
        tpl_path.display()
    );
    let out = dir.join("openssl.cnf");
    fs::write(&out, text).expect("write test config");
    out
}

// ---------------------------------------------------------------------------
// Helpers: running commands with a time limit
// ---------------------------------------------------------------------------

/// Which kind of RSA operation a command must have had kae perform.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    /// sign / decrypt
    Private,
    /// verify / encrypt
    Public,
}

/// Proof that kae (not the default provider) did the RSA work of `out`.
#[track_caller]
fn assert_kae_did(out: &Output, op: Op) {
    assert_kae_did_in(&out.stderr, op, &out.describe());
}

/// Proof from kae's teardown summaries on `stderr` (KAE_LOG=info; summed over
/// all summary lines) that kae did at least one successful `op`.
#[track_caller]
fn assert_kae_did_in(stderr: &str, op: Op, ctx: &str) {
    let st = KaeSummary::all_in(stderr).unwrap_or_else(|| {
        panic!(
            "no kae summary line on stderr (KAE_LOG=info): kae not loaded, or its log format changed?\n{ctx}"
        )
    });
    let (n, kind): (u64, _) = match op {
        Op::Private => (st.iter().map(|s| s.private.ok).sum(), "private"),
        Op::Public => (st.iter().map(|s| s.public.ok).sum(), "public"),
    };
    assert!(
        n >= 1,
        "kae performed no successful {kind} RSA operation ({st:?}): served by another provider?\n{ctx}"
    );
}

/// A command to run: an openssl invocation plus stdin and a time limit.
struct Cmd {
    cmd: Command,
    input: Option<Vec<u8>>,
    timeout: Duration,
}

impl Cmd {
    fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }
    fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(k, v);
        self
    }
    fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    /// Add the options that load kae (and default) and select kae, and ask
    /// kae for its exit summary (see `assert_kae_did`).
    fn kae(self) -> Self {
        let dir = provider_dir().to_string_lossy().into_owned();
        self.args([
            "-provider-path",
            dir.as_str(),
            "-provider",
            "kae",
            "-provider",
            "default",
            "-propquery",
            KAE_PROPQ,
        ])
        .kae_log()
    }
    /// KAE_LOG=info: kae logs a summary of its operation counts at teardown.
    fn kae_log(self) -> Self {
        self.env("KAE_LOG", "info")
    }
    /// Use a configuration file (OPENSSL_CONF) instead of the system one.
    fn conf(self, cfg: &Path) -> Self {
        self.env("OPENSSL_CONF", cfg)
    }

    fn run(self) -> Output {
        let Cmd {
            mut cmd,
            input,
            timeout,
        } = self;
        run(&mut cmd, input.as_deref(), timeout)
    }
}

/// `openssl <args>` in `dir`, with the system configuration (default provider
/// only): OPENSSL_CONF / OPENSSL_MODULES and kae settings of the caller are dropped.
fn openssl(dir: &TempDir, args: &[&str]) -> Cmd {
    let mut cmd = openssl_in(dir.path());
    cmd.args(args);
    Cmd {
        cmd,
        input: None,
        timeout: CMD_LIMIT,
    }
}

// ---------------------------------------------------------------------------
// Helpers: keys and files
// ---------------------------------------------------------------------------

/// Generates `<name>.pem` (private) and `<name>.pub.pem` with the default
/// provider. `alg` is "RSA" or "RSA-PSS".
fn gen_key(dir: &TempDir, name: &str, alg: &str, bits: u32) -> (String, String) {
    let key = dir.p(&format!("{name}.pem"));
    let public = dir.p(&format!("{name}.pub.pem"));
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            alg,
            "-pkeyopt",
            &format!("rsa_keygen_bits:{bits}"),
            "-out",
            &key,
        ],
    )
    .run()
    .ok();
    openssl(dir, &["pkey", "-in", &key, "-pubout", "-out", &public])
        .run()
        .ok();
    (key, public)
}

/// A SHA-256 digest of some message, written as raw bytes (input for `pkeyutl -sign`).
fn write_digest(dir: &TempDir, name: &str) -> String {
    let msg = dir.join(&format!("{name}.msg"));
    fs::write(&msg, b"kae cli test message\n".repeat(7)).unwrap();
    let out = dir.p(&format!("{name}.sha256"));
    openssl(
        dir,
        &[
            "dgst",
            "-sha256",
            "-binary",
            "-out",
            &out,
            &msg.to_string_lossy(),
        ],
    )
    .run()
    .ok();
    assert_eq!(fs::read(&out).unwrap().len(), 32);
    out
}

fn read(path: &str) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

const VERIFY_OK: &str = "Signature Verified Successfully";

/// `pkeyutl -verify` with the default provider only; returns its output.
fn verify_default(dir: &TempDir, public: &str, dgst: &str, sig: &str, opts: &[&str]) -> Output {
    let mut args = vec![
        "pkeyutl", "-verify", "-pubin", "-inkey", public, "-in", dgst, "-sigfile", sig,
    ];
    for o in opts {
        args.extend(["-pkeyopt", *o]);
    }
    openssl(dir, &args).run()
}

/// `pkeyutl -verify` with kae preferred. Whether the signature verifies or not, kae must have
/// done the public-key operation (a full-length signature always gets as far as s^e mod n), so a
/// "Signature Verification Failure" from another provider does not pass for kae's.
fn verify_kae(dir: &TempDir, public: &str, dgst: &str, sig: &str, opts: &[&str]) -> Output {
    let mut args = vec![
        "pkeyutl", "-verify", "-pubin", "-inkey", public, "-in", dgst, "-sigfile", sig,
    ];
    for o in opts {
        args.extend(["-pkeyopt", *o]);
    }
    let out = openssl(dir, &args).kae().run();
    assert_kae_did(&out, Op::Public);
    out
}

fn sign_with(
    dir: &TempDir,
    use_kae: bool,
    key: &str,
    dgst: &str,
    sig: &str,
    opts: &[&str],
) -> Output {
    let mut args = vec!["pkeyutl", "-sign", "-inkey", key, "-in", dgst, "-out", sig];
    for o in opts {
        args.extend(["-pkeyopt", *o]);
    }
    let c = openssl(dir, &args);
    let c = if use_kae { c.kae() } else { c };
    let out = c.run();
    if use_kae && out.status.success() {
        assert_kae_did(&out, Op::Private);
    }
    out
}

fn crypt_with(
    dir: &TempDir,
    use_kae: bool,
    op: &str,
    key: &str,
    input: &str,
    out: &str,
    opts: &[&str],
) -> Output {
    let mut args = vec!["pkeyutl", op, "-inkey", key, "-in", input, "-out", out];
    if op == "-encrypt" {
        args.push("-pubin");
    }
    for o in opts {
        args.extend(["-pkeyopt", *o]);
    }
    let c = openssl(dir, &args);
    let c = if use_kae { c.kae() } else { c };
    let out = c.run();
    if use_kae && out.status.success() {
        let op = if op == "-decrypt" {
            Op::Private
        } else {
            Op::Public
        };
        assert_kae_did(&out, op);
    }
    out
}

/// Flips one bit in a copy of `src`.
fn tampered_copy(src: &str, dst: &str) {
    let mut b = read(src);
    let i = b.len() / 2;
    b[i] ^= 0x01;
    fs::write(dst, b).unwrap();
}

// ---------------------------------------------------------------------------
// Provider loading
// ---------------------------------------------------------------------------

#[test]
fn list_providers_shows_kae_active() {
    let dir = TempDir::new("cli-list");
    let out = openssl(&dir, &["list", "-providers"]).kae().run().ok();
    // Find the block of the kae provider and check its fields.
    let text = &out.stdout;
    let start = text
        .lines()
        .position(|l| l.trim() == "kae")
        .unwrap_or_else(|| panic!("no 'kae' provider entry\n{}", out.describe()));
    let block: Vec<&str> = text
        .lines()
        .skip(start + 1)
        .take_while(|l| l.starts_with("    "))
        .collect();
    let field = |name: &str| {
        block
            .iter()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("{name}:"))
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("kae entry has no {name}: line\n{}", out.describe()))
    };
    assert!(
        !field("name").is_empty(),
        "empty provider name\n{}",
        out.describe()
    );
    let version = field("version");
    assert!(
        version.chars().next().is_some_and(|c| c.is_ascii_digit()) && version.contains('.'),
        "version {version:?} does not look like a version\n{}",
        out.describe()
    );
    assert_eq!(field("status"), "active", "{}", out.describe());
}

#[test]
fn config_file_activates_kae() {
    let dir = TempDir::new("cli-conf");
    let cfg = write_test_config(&dir);
    let out = openssl(&dir, &["list", "-providers"]).conf(&cfg).run().ok();
    // The CLI carries on silently when a configured module fails to load, so
    // the listing is the proof that kae really was loaded from the config.
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    assert!(
        lines.contains(&"kae"),
        "kae not loaded from {}\n{}",
        cfg.display(),
        out.describe()
    );
    assert!(
        lines.contains(&"default"),
        "default not loaded\n{}",
        out.describe()
    );
    assert!(
        out.stdout.matches("status: active").count() >= 2,
        "expected two active providers\n{}",
        out.describe()
    );
}

#[test]
fn kae_registers_rsa_algorithms() {
    let dir = TempDir::new("cli-algs");
    let check = |what: &str, names: &[&str]| {
        let out = openssl(&dir, &["list", what]).kae().run().ok();
        for name in names {
            let found = out.stdout.lines().any(|l| {
                l.trim_end().ends_with("@ kae")
                    && l.split(|c: char| c == ',' || c == '{' || c == '}' || c.is_whitespace())
                        .any(|tok| tok == *name)
            });
            assert!(
                found,
                "`openssl list {what}` has no {name} @ kae\n{}",
                out.describe()
            );
        }
    };
    check("-key-managers", &["RSA", "RSA-PSS"]);
    check("-signature-algorithms", &["RSA"]);
    check("-asymcipher-algorithms", &["RSA"]);
}

// ---------------------------------------------------------------------------
// openssl speed
// ---------------------------------------------------------------------------

/// Checks for a line like `rsa 2048 bits 0.000974s 0.000026s   1026.7  38000.0`.
#[track_caller]
fn assert_rsa2048_speed_line(out: &Output) {
    let (line, nums) = rsa2048_speed_line(out);
    let (sign_s, verify_s) = (nums[nums.len() - 2], nums[nums.len() - 1]);
    assert!(
        sign_s > 0.0 && verify_s > 0.0,
        "zero rate in {line:?}\n{}",
        out.describe()
    );
}

// Note: `openssl speed` (3.0) fetches its RSA operations with no property
// query (it ignores -propquery for RSA). With kae alone, kae must serve them
// (its private default provider is not visible to the application); with kae
// and default both loaded OpenSSL may pick either, so that test only checks
// that speed works; the config variant (default_properties = ?provider=kae)
// must route the RSA work to kae again.
#[test]
fn speed_rsa2048_kae_only() {
    let dir = TempDir::new("cli-speed1");
    let pd = provider_dir().to_string_lossy().into_owned();
    let out = openssl(
        &dir,
        &[
            "speed",
            "-provider-path",
            &pd,
            "-provider",
            "kae",
            "-seconds",
            "1",
            "rsa2048",
        ],
    )
    .kae_log()
    .timeout(SPEED_TIMEOUT)
    .run()
    .ok();
    assert_rsa2048_speed_line(&out);
    assert_kae_did(&out, Op::Private);
    assert_kae_did(&out, Op::Public);
}

#[test]
fn speed_rsa2048_kae_and_default() {
    let dir = TempDir::new("cli-speed2");
    let pd = provider_dir().to_string_lossy().into_owned();
    let out = openssl(
        &dir,
        &[
            "speed",
            "-provider-path",
            &pd,
            "-provider",
            "kae",
            "-provider",
            "default",
            "-seconds",
            "1",
            "rsa2048",
        ],
    )
    .timeout(SPEED_TIMEOUT)
    .run()
    .ok();
    assert_rsa2048_speed_line(&out);
}

#[test]
fn speed_rsa2048_prefer_kae_config() {
    // speed ignores -propquery for RSA; default_properties from the config is
    // what makes its fetches pick kae.
    let dir = TempDir::new("cli-speed3");
    let cfg = write_test_config(&dir);
    let out = openssl(&dir, &["speed", "-seconds", "1", "rsa2048"])
        .conf(&cfg)
        .kae_log()
        .timeout(SPEED_TIMEOUT)
        .run()
        .ok();
    assert_rsa2048_speed_line(&out);
    assert_kae_did(&out, Op::Private);
    assert_kae_did(&out, Op::Public);
}

// ---------------------------------------------------------------------------
// pkeyutl: sign / verify / encrypt / decrypt, cross-checked with default
// ---------------------------------------------------------------------------

#[test]
fn pkcs1_sign_verify_cross() {
    let dir = TempDir::new("cli-pkcs1");
    for bits in [2048u32, 3072] {
        let (key, public) = gen_key(&dir, &format!("k{bits}"), "RSA", bits);
        let dgst = write_digest(&dir, &format!("m{bits}"));
        let opts = ["digest:sha256", "rsa_padding_mode:pkcs1"];
        let sig_kae = dir.p(&format!("kae{bits}.sig"));
        let sig_def = dir.p(&format!("def{bits}.sig"));
        sign_with(&dir, true, &key, &dgst, &sig_kae, &opts).ok();
        sign_with(&dir, false, &key, &dgst, &sig_def, &opts).ok();
        assert_eq!(
            read(&sig_kae).len(),
            (bits / 8) as usize,
            "signature length"
        );
        // PKCS#1 v1.5 signatures are deterministic: both providers must agree.
        assert!(
            read(&sig_kae) == read(&sig_def),
            "kae and default PKCS#1 signatures differ ({bits} bits)"
        );
        // kae signs -> default verifies, default signs -> kae verifies, kae -> kae.
        verify_default(&dir, &public, &dgst, &sig_kae, &opts)
            .ok()
            .stdout_has(VERIFY_OK);
        verify_kae(&dir, &public, &dgst, &sig_def, &opts)
            .ok()
            .stdout_has(VERIFY_OK);
        verify_kae(&dir, &public, &dgst, &sig_kae, &opts)
            .ok()
            .stdout_has(VERIFY_OK);
        // A corrupted signature must be rejected by kae (cleanly).
        let bad = dir.p(&format!("bad{bits}.sig"));
        tampered_copy(&sig_kae, &bad);
        verify_kae(&dir, &public, &dgst, &bad, &opts)
            .failed_cleanly()
            .stdout_has("Signature Verification Failure");
    }
}

#[test]
fn dgst_sign_verify_cross() {
    // The digest-sign path (EVP_DigestSign*), as used by x509/TLS.
    let dir = TempDir::new("cli-dgst");
    let (key, public) = gen_key(&dir, "k", "RSA", 2048);
    let msg = dir.p("msg.txt");
    fs::write(&msg, b"message for openssl dgst -sign\n").unwrap();
    for md in ["-sha256", "-sha384", "-sha512"] {
        let sig = dir.p(&format!("kae{md}.sig"));
        // (options must come before the file operand, so the file is added after .kae())
        let out = openssl(&dir, &["dgst", md, "-sign", &key, "-out", &sig])
            .kae()
            .args([&msg])
            .run()
            .ok();
        assert_kae_did(&out, Op::Private);
        openssl(
            &dir,
            &["dgst", md, "-verify", &public, "-signature", &sig, &msg],
        )
        .run()
        .ok()
        .stdout_has("Verified OK");
        let sig_def = dir.p(&format!("def{md}.sig"));
        openssl(&dir, &["dgst", md, "-sign", &key, "-out", &sig_def, &msg])
            .run()
            .ok();
        let out = openssl(
            &dir,
            &["dgst", md, "-verify", &public, "-signature", &sig_def],
        )
        .kae()
        .args([&msg])
        .run()
        .ok();
        out.stdout_has("Verified OK");
        assert_kae_did(&out, Op::Public);
        assert!(
            read(&sig) == read(&sig_def),
            "dgst {md}: kae and default signatures differ"
        );
        let bad = dir.p(&format!("bad{md}.sig"));
        tampered_copy(&sig, &bad);
        let out = openssl(&dir, &["dgst", md, "-verify", &public, "-signature", &bad])
            .kae()
            .args([&msg])
            .run()
            .failed_cleanly();
        out.stdout_has("Verification failure");
        assert_kae_did(&out, Op::Public);
    }
}

#[test]
fn pss_sign_verify_cross() {
    let dir = TempDir::new("cli-pss");
    let (key, public) = gen_key(&dir, "k", "RSA", 2048);
    let dgst = write_digest(&dir, "m");
    for saltlen in ["digest", "max", "32", "0"] {
        let salt_opt = format!("rsa_pss_saltlen:{saltlen}");
        let opts = ["digest:sha256", "rsa_padding_mode:pss", salt_opt.as_str()];
        let sig_kae = dir.p(&format!("kae-{saltlen}.sig"));
        let sig_def = dir.p(&format!("def-{saltlen}.sig"));
        sign_with(&dir, true, &key, &dgst, &sig_kae, &opts).ok();
        sign_with(&dir, false, &key, &dgst, &sig_def, &opts).ok();
        assert_eq!(read(&sig_kae).len(), 256);
        verify_default(&dir, &public, &dgst, &sig_kae, &opts)
            .ok()
            .stdout_has(VERIFY_OK);
        verify_kae(&dir, &public, &dgst, &sig_def, &opts)
            .ok()
            .stdout_has(VERIFY_OK);
        // Verification with the salt length recovered from the signature.
        let auto = [
            "digest:sha256",
            "rsa_padding_mode:pss",
            "rsa_pss_saltlen:auto",
        ];
        verify_kae(&dir, &public, &dgst, &sig_kae, &auto)
            .ok()
            .stdout_has(VERIFY_OK);
        verify_default(&dir, &public, &dgst, &sig_kae, &auto)
            .ok()
            .stdout_has(VERIFY_OK);
        let bad = dir.p(&format!("bad-{saltlen}.sig"));
        tampered_copy(&sig_kae, &bad);
        verify_kae(&dir, &public, &dgst, &bad, &opts)
            .failed_cleanly()
            .stdout_has("Signature Verification Failure");
    }
    // A PKCS#1 v1.5 signature must not pass as PSS.
    let v15 = dir.p("v15.sig");
    sign_with(
        &dir,
        false,
        &key,
        &dgst,
        &v15,
        &["digest:sha256", "rsa_padding_mode:pkcs1"],
    )
    .ok();
    verify_kae(
        &dir,
        &public,
        &dgst,
        &v15,
        &["digest:sha256", "rsa_padding_mode:pss"],
    )
    .failed_cleanly()
    .stdout_has("Signature Verification Failure");
}

#[test]
fn rsa_pss_key_sign_verify_cross() {
    // Keys of type RSA-PSS (restricted to PSS) go through kae's RSA-PSS keymgmt.
    let dir = TempDir::new("cli-psskey");
    let (key, public) = gen_key(&dir, "k", "RSA-PSS", 2048);
    let dgst = write_digest(&dir, "m");
    let opts = ["digest:sha256"];
    let sig_kae = dir.p("kae.sig");
    let sig_def = dir.p("def.sig");
    sign_with(&dir, true, &key, &dgst, &sig_kae, &opts).ok();
    sign_with(&dir, false, &key, &dgst, &sig_def, &opts).ok();
    verify_default(&dir, &public, &dgst, &sig_kae, &opts)
        .ok()
        .stdout_has(VERIFY_OK);
    verify_kae(&dir, &public, &dgst, &sig_def, &opts)
        .ok()
        .stdout_has(VERIFY_OK);
}

fn encrypt_decrypt_cross(tag: &str, opts: &[&str], plain_len: usize) {
    let dir = TempDir::new(&format!("cli-{tag}"));
    let (key, public) = gen_key(&dir, "k", "RSA", 2048);
    let plain = dir.p("plain.bin");
    let data: Vec<u8> = (0..plain_len).map(|i| (i * 37 + 11) as u8).collect();
    fs::write(&plain, &data).unwrap();
    // default encrypts -> kae decrypts
    let ct_def = dir.p("def.ct");
    let pt_kae = dir.p("kae.pt");
    crypt_with(&dir, false, "-encrypt", &public, &plain, &ct_def, opts).ok();
    assert_eq!(read(&ct_def).len(), 256, "ciphertext length");
    crypt_with(&dir, true, "-decrypt", &key, &ct_def, &pt_kae, opts).ok();
    assert!(
        read(&pt_kae) == data,
        "kae decrypted the default provider's ciphertext wrongly ({tag})"
    );
    // kae encrypts -> default decrypts
    let ct_kae = dir.p("kae.ct");
    let pt_def = dir.p("def.pt");
    crypt_with(&dir, true, "-encrypt", &public, &plain, &ct_kae, opts).ok();
    assert_eq!(read(&ct_kae).len(), 256, "ciphertext length");
    assert!(
        read(&ct_kae) != read(&ct_def),
        "two encryptions gave the same ciphertext (no randomness?)"
    );
    crypt_with(&dir, false, "-decrypt", &key, &ct_kae, &pt_def, opts).ok();
    assert!(
        read(&pt_def) == data,
        "default decrypted kae's ciphertext wrongly ({tag})"
    );
    // kae -> kae
    let pt_kk = dir.p("kk.pt");
    crypt_with(&dir, true, "-decrypt", &key, &ct_kae, &pt_kk, opts).ok();
    assert!(read(&pt_kk) == data, "kae round trip failed ({tag})");
}

#[test]
fn oaep_sha256_encrypt_decrypt_cross() {
    encrypt_decrypt_cross(
        "oaep256",
        &[
            "rsa_padding_mode:oaep",
            "rsa_oaep_md:sha256",
            "rsa_mgf1_md:sha256",
        ],
        190,
    );
}

#[test]
fn oaep_sha1_encrypt_decrypt_cross() {
    encrypt_decrypt_cross("oaep1", &["rsa_padding_mode:oaep"], 32);
}

#[test]
fn pkcs1_encrypt_decrypt_cross() {
    encrypt_decrypt_cross("pkcs1enc", &["rsa_padding_mode:pkcs1"], 245);
}

#[test]
fn genpkey_with_kae() {
    // Key generation through kae's keymgmt; the key is then checked and used
    // by the default provider alone.
    let dir = TempDir::new("cli-genpkey");
    let key = dir.p("kae.pem");
    openssl(
        &dir,
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            &key,
        ],
    )
    .kae()
    .run()
    .ok();
    let out = openssl(&dir, &["pkey", "-in", &key, "-check", "-noout", "-text"])
        .run()
        .ok();
    assert!(
        out.stdout.contains("Private-Key: (2048 bit") && out.stdout.contains("Key is valid")
            || out.stderr.contains("Key is valid") && out.stdout.contains("Private-Key: (2048 bit"),
        "generated key is not a valid 2048-bit RSA key\n{}",
        out.describe()
    );
    let public = dir.p("kae.pub.pem");
    openssl(&dir, &["pkey", "-in", &key, "-pubout", "-out", &public])
        .run()
        .ok();
    let dgst = write_digest(&dir, "m");
    let sig = dir.p("s.sig");
    sign_with(&dir, false, &key, &dgst, &sig, &["digest:sha256"]).ok();
    verify_default(&dir, &public, &dgst, &sig, &["digest:sha256"])
        .ok()
        .stdout_has(VERIFY_OK);
}

// ---------------------------------------------------------------------------
// Failure handling
// ---------------------------------------------------------------------------

/// A failure that kae reported: kae was loaded (its teardown summary is on stderr, KAE_LOG=info)
/// and at least one error line was raised by kae (library field "kae", the name the provider is
/// loaded under) with a registered reason text (not just "reason(N)"). A command in which kae
/// never loaded, or in which another provider refused the input, does not pass.
/// OpenSSL 3 error lines read `<thread>:error:<code>:<library>:<function>:<reason>:<file>:<line>:<data>`.
#[track_caller]
fn assert_kae_error(out: &Output) {
    assert!(
        KaeSummary::all_in(&out.stderr).is_some(),
        "no kae summary line on stderr: kae was not loaded\n{}",
        out.describe()
    );
    let kae_reason = out.stderr.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        let i = f.iter().position(|x| *x == "error")?;
        let (lib, reason) = (f.get(i + 2)?.trim(), f.get(i + 4)?.trim());
        (lib == "kae" && !reason.is_empty() && !reason.starts_with("reason(")).then_some(reason)
    });
    assert!(
        kae_reason.is_some(),
        "no error line raised by kae with a reason text\n{}",
        out.describe()
    );
}

#[test]
fn decrypt_garbage_fails_cleanly() {
    let dir = TempDir::new("cli-garbage");
    let (key, _public) = gen_key(&dir, "k", "RSA", 2048);
    // Too short, too long, all-ones (>= modulus), and full-length random-ish.
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("short", b"not a ciphertext".to_vec()),
        ("long", vec![0x5a; 300]),
        ("ones", vec![0xff; 256]),
        (
            "junk",
            (0..256u32)
                .map(|i| if i == 0 { 0 } else { (i * 97 + 13) as u8 })
                .collect(),
        ),
    ];
    let modes: [&[&str]; 2] = [
        &["rsa_padding_mode:oaep", "rsa_oaep_md:sha256"],
        &["rsa_padding_mode:oaep"],
    ];
    for (name, bytes) in &cases {
        let ct = dir.p(&format!("{name}.ct"));
        fs::write(&ct, bytes).unwrap();
        for (i, opts) in modes.iter().enumerate() {
            let out = crypt_with(
                &dir,
                true,
                "-decrypt",
                &key,
                &ct,
                &dir.p(&format!("{name}-{i}.pt")),
                opts,
            );
            let out = out.failed_cleanly();
            assert_kae_error(&out);
        }
    }
    // PKCS#1 v1.5: a ciphertext longer than the modulus, or not below it, must be
    // rejected. A shorter one is a number with leading zeros, as in OpenSSL's default
    // provider: with implicit rejection on it gets a synthetic message (below).
    for name in ["long", "ones"] {
        let out = crypt_with(
            &dir,
            true,
            "-decrypt",
            &key,
            &dir.p(&format!("{name}.ct")),
            &dir.p(&format!("{name}-pkcs1.pt")),
            &["rsa_padding_mode:pkcs1"],
        )
        .failed_cleanly();
        assert_kae_error(&out);
    }
    // A ciphertext with bad PKCS#1 v1.5 padding (right length, or shorter: a number with
    // leading zeros) is answered as the core's default provider answers it: from OpenSSL 3.2
    // with implicit rejection, a synthetic message that must be the default provider's byte
    // for byte (and the same on every call); before 3.2 with an error raised by kae.
    let (major, minor) = library_version(&dir);
    let implicit = (major, minor) >= (3, 2);
    let mode = format!(
        "core {major}.{minor} ({})",
        if implicit {
            "implicit rejection"
        } else {
            "no implicit rejection"
        }
    );
    for name in ["junk", "short"] {
        let ct = dir.p(&format!("{name}.ct"));
        let reference_pt = dir.p(&format!("{name}-pkcs1-default.pt"));
        let reference = crypt_with(
            &dir,
            false,
            "-decrypt",
            &key,
            &ct,
            &reference_pt,
            &["rsa_padding_mode:pkcs1"],
        );
        assert!(
            reference.status.signal().is_none(),
            "default provider crashed\n{}",
            reference.describe()
        );
        let runs: Vec<(Output, Option<Vec<u8>>)> = (0..2)
            .map(|i| {
                let pt = dir.p(&format!("{name}-pkcs1-{i}.pt"));
                let out = crypt_with(
                    &dir,
                    true,
                    "-decrypt",
                    &key,
                    &ct,
                    &pt,
                    &["rsa_padding_mode:pkcs1"],
                );
                assert!(out.status.signal().is_none(), "crashed\n{}", out.describe());
                let data = if out.status.success() {
                    Some(read(&pt))
                } else {
                    None
                };
                (out, data)
            })
            .collect();
        // The default provider refuses only without implicit rejection (and then almost
        // always: a block with valid padding by chance is decrypted by both).
        assert!(
            !implicit || reference.status.success(),
            "{name} [{mode}]: the default provider refuses (test premise)\n{}",
            reference.describe()
        );
        if reference.status.success() {
            let want = read(&reference_pt);
            for (out, data) in &runs {
                let got = data.as_ref().unwrap_or_else(|| {
                    panic!(
                        "{name} [{mode}]: kae refuses, the default provider answers\n{}",
                        out.describe()
                    )
                });
                assert!(
                    *got == want,
                    "{name} [{mode}]: kae's answer differs from the default provider's\n  \
                     kae:     {got:02x?}\n  default: {want:02x?}"
                );
            }
            assert!(
                want.len() <= 256 - 11,
                "{name}: message too long ({} bytes)",
                want.len()
            );
            eprintln!(
                "[implicit rejection] {mode}: {name}: kae's {} ({} bytes) is the default \
                 provider's, twice",
                if implicit {
                    "synthetic message"
                } else {
                    "message (valid padding by chance)"
                },
                want.len()
            );
        } else {
            for (out, _) in &runs {
                assert!(
                    !out.status.success(),
                    "{name} [{mode}]: kae accepts a padding failure the default provider \
                     refuses\n{}",
                    out.describe()
                );
                assert_kae_error(out);
            }
            eprintln!(
                "[implicit rejection] {mode}: {name}: refused by kae (twice) and by the \
                 default provider"
            );
        }
    }
}

/// `(major, minor)` of the libcrypto the openssl binary runs with (`openssl version`, whose
/// "(Library: ...)" part names it when it is not the one the binary was built with).
fn library_version(dir: &TempDir) -> (u32, u32) {
    let out = openssl(dir, &["version"]).run().ok();
    let line = out.stdout.trim();
    let text = line
        .rsplit_once("(Library: OpenSSL ")
        .map(|(_, v)| v)
        .or_else(|| line.strip_prefix("OpenSSL "))
        .unwrap_or_else(|| panic!("unexpected `openssl version` output: {line:?}"));
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let mut num = || -> u32 {
        parts
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no version number in {line:?}"))
    };
    (num(), num())
}

// ---------------------------------------------------------------------------
// Certificates: req -x509, x509 -signkey, ca
// ---------------------------------------------------------------------------

#[test]
fn req_x509_verify_signkey_and_ca() {
    let dir = TempDir::new("cli-x509");
    let cfg = write_test_config(&dir);
    let cfg_s = cfg.to_string_lossy().into_owned();
    let ca_key = dir.p("ca.key");
    let ca_pem = dir.p("ca.pem");
    // Self-signed CA made with kae preferred.
    let made = openssl(&dir, &[])
        .args(self_signed_cert_args(&ca_key, &ca_pem, "kae-test"))
        .args(["-config", &cfg_s])
        .conf(&cfg)
        .kae_log()
        .run()
        .ok();
    assert_kae_did(&made, Op::Private);
    let text = openssl(&dir, &["x509", "-in", &ca_pem, "-noout", "-text"])
        .conf(&cfg)
        .run()
        .ok();
    text.stdout_has("Subject: CN = kae-test")
        .stdout_has("sha256WithRSAEncryption")
        .stdout_has("CA:TRUE");
    // Verified with kae, and with the default provider alone.
    openssl(&dir, &["verify", "-CAfile", &ca_pem, &ca_pem])
        .conf(&cfg)
        .run()
        .ok()
        .stdout_has(": OK");
    openssl(&dir, &["verify", "-CAfile", &ca_pem, &ca_pem])
        .run()
        .ok()
        .stdout_has(": OK");

    // x509 -signkey: re-sign the certificate with its key through kae.
    let resigned = dir.p("resigned.pem");
    let out = openssl(
        &dir,
        &[
            "x509", "-in", &ca_pem, "-signkey", &ca_key, "-days", "2", "-out", &resigned,
        ],
    )
    .conf(&cfg)
    .kae_log()
    .run()
    .ok();
    assert_kae_did(&out, Op::Private);
    openssl(&dir, &["verify", "-CAfile", &resigned, &resigned])
        .run()
        .ok()
        .stdout_has(": OK");

    // A tiny `openssl ca` flow: the CA (kae) signs a leaf certificate request.
    fs::create_dir_all(dir.join("newcerts")).unwrap();
    fs::write(dir.join("index.txt"), b"").unwrap();
    fs::write(dir.join("serial"), b"1000\n").unwrap();
    let leaf_key = dir.p("leaf.key");
    let leaf_csr = dir.p("leaf.csr");
    let leaf_pem = dir.p("leaf.pem");
    openssl(
        &dir,
        &[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=kae-leaf",
            "-keyout",
            &leaf_key,
            "-out",
            &leaf_csr,
            "-config",
            &cfg_s,
        ],
    )
    .conf(&cfg)
    .run()
    .ok();
    openssl(&dir, &["req", "-in", &leaf_csr, "-verify", "-noout"])
        .run()
        .ok();
    let signed = openssl(
        &dir,
        &[
            "ca", "-batch", "-config", &cfg_s, "-in", &leaf_csr, "-out", &leaf_pem, "-notext",
        ],
    )
    .conf(&cfg)
    .kae_log()
    .run()
    .ok();
    assert_kae_did(&signed, Op::Private);
    openssl(&dir, &["verify", "-CAfile", &ca_pem, &leaf_pem])
        .run()
        .ok()
        .stdout_has(": OK");
    openssl(&dir, &["verify", "-CAfile", &ca_pem, &leaf_pem])
        .conf(&cfg)
        .run()
        .ok()
        .stdout_has(": OK");
    let leaf_text = openssl(
        &dir,
        &["x509", "-in", &leaf_pem, "-noout", "-subject", "-issuer"],
    )
    .run()
    .ok();
    leaf_text
        .stdout_has("subject=CN = kae-leaf")
        .stdout_has("issuer=CN = kae-test");
    // A certificate signed by a different key must not verify against this CA.
    let other_key = dir.p("other.key");
    let other_pem = dir.p("other.pem");
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=kae-test",
            "-keyout",
            &other_key,
            "-out",
            &other_pem,
            "-days",
            "2",
            "-config",
            &cfg_s,
        ],
    )
    .conf(&cfg)
    .run()
    .ok();
    openssl(&dir, &["verify", "-CAfile", &ca_pem, &other_pem])
        .conf(&cfg)
        .run()
        .failed_cleanly();
}

// ---------------------------------------------------------------------------
// TLS: s_server with kae (prefer-kae config), s_client with default only
// ---------------------------------------------------------------------------

/// `openssl s_server` in `dir` with kae preferred (configuration `cfg`) serving
/// one connection with `srv.pem` / `srv.key` and `extra` options.
fn start_server(dir: &TempDir, cfg: &Path, extra: &[&str]) -> SServer {
    SServer::start(|port| {
        let mut cmd = openssl_in(dir.path());
        cmd.env("OPENSSL_CONF", cfg)
            .env("KAE_LOG", "info")
            .args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
            .args(["-cert", "srv.pem", "-key", "srv.key", "-naccept", "1"])
            .args(extra);
        cmd
    })
}

/// Runs one TLS handshake: server with kae preferred (config file), client
/// with the default provider only; checks both sides' reports.
fn tls_handshake(
    tag: &str,
    server_args: &[&str],
    client_args: &[&str],
    proto: &str,
    cipher: &str,
) -> Output {
    let dir = TempDir::new(&format!("cli-{tag}"));
    let cfg = write_test_config(&dir);
    // Server certificate made by the default provider alone.
    openssl(&dir, &[])
        .args(self_signed_cert_args("srv.key", "srv.pem", "kae-test"))
        .run()
        .ok();
    let mut server = start_server(&dir, &cfg, server_args);
    let connect = server.target();
    let client = openssl(
        &dir,
        &[
            "s_client",
            "-connect",
            &connect,
            "-brief",
            "-CAfile",
            "srv.pem",
            "-verify_return_error",
        ],
    )
    .args(client_args)
    .timeout(Duration::from_secs(30))
    .run();
    let status = server.finish(Duration::from_secs(20));
    let ctx = format!("{}\n{}", client.describe(), server.describe());
    assert!(client.status.success(), "s_client failed\n{ctx}");
    for want in [
        "CONNECTION ESTABLISHED".to_string(),
        format!("Protocol version: {proto}"),
        format!("Ciphersuite: {cipher}"),
        "Verification: OK".to_string(),
    ] {
        assert!(
            client.stderr.contains(&want),
            "s_client output lacks {want:?}\n{ctx}"
        );
    }
    assert!(
        status.signal().is_none(),
        "s_server crashed ({status:?})\n{ctx}"
    );
    assert!(status.success(), "s_server exited with {status:?}\n{ctx}");
    assert!(
        server.stdout.contains(&format!("CIPHER is {cipher}")),
        "server did not report the cipher\n{ctx}"
    );
    assert!(
        server.stdout.contains("1 server accepts that finished"),
        "server handshake not finished\n{ctx}"
    );
    // The server's RSA work (key-exchange decryption or handshake signature) was kae's.
    assert_kae_did_in(&server.stderr_text(), Op::Private, &ctx);
    client
}

#[test]
fn tls12_rsa_key_exchange() {
    // Static RSA key exchange: the server decrypts the premaster secret with kae.
    let args = ["-tls1_2", "-cipher", "AES256-GCM-SHA384"];
    tls_handshake("tls12rsa", &args, &args, "TLSv1.2", "AES256-GCM-SHA384");
}

#[test]
fn tls12_ecdhe_rsa() {
    // ECDHE-RSA: the server signs the key exchange with kae.
    let args = ["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"];
    let client = tls_handshake(
        "tls12ecdhe",
        &args,
        &args,
        "TLSv1.2",
        "ECDHE-RSA-AES256-GCM-SHA384",
    );
    assert!(
        client.stderr.contains("Signature type: RSA"),
        "no RSA signature reported\n{}",
        client.describe()
    );
}

#[test]
fn tls12_ecdhe_rsa_pkcs1_signature() {
    // Force a PKCS#1 v1.5 handshake signature (client offers only RSA+SHA256).
    let args = ["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"];
    let client_args = [
        "-tls1_2",
        "-cipher",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "-sigalgs",
        "RSA+SHA256",
    ];
    let client = tls_handshake(
        "tls12pkcs1",
        &args,
        &client_args,
        "TLSv1.2",
        "ECDHE-RSA-AES256-GCM-SHA384",
    );
    assert!(
        client.stderr.contains("Signature type: RSA\n")
            || client.stderr.contains("Signature type: RSA\r\n"),
        "expected a PKCS#1 v1.5 signature\n{}",
        client.describe()
    );
}

#[test]
fn tls13() {
    // TLS 1.3: RSA-PSS handshake signature by kae.
    let client = tls_handshake(
        "tls13",
        &["-tls1_3"],
        &["-tls1_3"],
        "TLSv1.3",
        "TLS_AES_256_GCM_SHA384",
    );
    assert!(
        client.stderr.contains("Signature type: RSA-PSS"),
        "no RSA-PSS signature\n{}",
        client.describe()
    );
}
