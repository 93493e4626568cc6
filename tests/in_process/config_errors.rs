//! A misconfigured kae must fail loudly: every bad value in kae's config section or in a
//! `KAE_*` variable gives an error line on stderr at every log level (naming the key or the
//! variable, the value and what is accepted), kae is left out, and no counter page appears;
//! an unknown key is warned about with the closest known key. Checked under the real
//! `openssl list`, `nginx -t` and `haproxy -c`, which all exit 0 with kae missing.

use crate::procs;

use procs::{module_path, openssl_bin, run, Output, TempDir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A config file activating kae (and nothing else) with `extra` lines in its section.
fn write_config(dir: &Path, extra: &str) -> PathBuf {
    let cnf = dir.join("kae.cnf");
    std::fs::write(
        &cnf,
        format!(
            "openssl_conf = init\n[init]\nproviders = provs\n[provs]\nkae = kae_sect\n\
             [kae_sect]\nmodule = {}\nactivate = 1\n{extra}\n",
            module_path().display()
        ),
    )
    .unwrap();
    cnf
}

/// `openssl list -providers` with `cnf`, a private counter directory, and `env` set.
fn openssl_list(dir: &TempDir, cnf: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(openssl_bin());
    cmd.args(["list", "-providers"])
        .env("OPENSSL_CONF", cnf)
        .env("KAE_STATS_DIR", dir.join("stats"))
        .env_remove("KAE_LOG")
        .env_remove("KAE_LOG_TARGET");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd, None, LIMIT)
}

fn counter_pages(dir: &TempDir) -> usize {
    fn count(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |rd| {
            rd.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
    }
    count(&dir.join("stats"))
}

/// kae refused to load: `problems` error lines (containing `needles`) and the final one.
fn assert_refused(out: &Output, dir: &TempDir, needles: &[&str], problems: usize) {
    assert!(
        out.status.success(),
        "openssl itself exits 0: {}",
        out.describe()
    );
    assert!(
        !out.stdout.contains("kae RSA offload provider"),
        "kae must be left out: {}",
        out.describe()
    );
    for n in needles.iter().chain(&["kae is NOT loaded"]) {
        assert!(
            out.stderr.contains(n),
            "stderr lacks {n:?}: {}",
            out.describe()
        );
    }
    assert_eq!(
        out.stderr.matches("kae: error: ").count(),
        problems + 1,
        "one error line per problem plus the final one: {}",
        out.describe()
    );
    assert_eq!(
        counter_pages(dir),
        0,
        "no counter page from a process without kae"
    );
}

#[test]
fn good_config_loads_quietly() {
    let dir = TempDir::new("cfg-good");
    let cnf = write_config(
        dir.path(),
        "queues = 2\nbackend = cpu\nasync = auto\nlog-level = off",
    );
    // The page is removed at exit: check the provider is listed and nothing is said.
    let out = openssl_list(&dir, &cnf, &[]);
    assert!(
        out.stdout.contains("kae RSA offload provider"),
        "{}",
        out.describe()
    );
    assert!(!out.stderr.contains("kae:"), "{}", out.describe());
    // With logging on, every line carries the logger's one `kae[PID] LEVEL:` prefix.
    let out = openssl_list(&dir, &cnf, &[("KAE_LOG", "debug")]);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("kae")).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("INFO: summary: private ops")),
        "{}",
        out.describe()
    );
    for l in &lines {
        assert!(l.starts_with("kae["), "{l}");
        assert_eq!(l.matches("kae[").count(), 1, "one prefix: {l}");
        assert!(!l.contains("kae: "), "no second prefix: {l}");
    }
}

#[test]
fn each_bad_value_of_a_known_key_refuses_the_load_and_says_why() {
    for (line, needles) in [
        (
            "queues = abc",
            ["'queues' = \"abc\"", "a whole number from 1 to 256"],
        ),
        (
            "queues = 0",
            ["'queues' = \"0\"", "a whole number from 1 to 256"],
        ),
        (
            "backend = gpu",
            ["'backend' = \"gpu\"", "auto, hpre, mb or cpu"],
        ),
        ("async = maybe", ["'async' = \"maybe\"", "auto, yes or no"]),
        (
            "log-level = verbose",
            [
                "'log-level' = \"verbose\"",
                "off, error, warn, info, debug or trace",
            ],
        ),
        (
            "load-default = nope",
            ["'load-default' = \"nope\"", "yes or no"],
        ),
        (
            "queue-depth = 1e3",
            ["'queue-depth' = \"1e3\"", "from 1 to 65536"],
        ),
        (
            "log-target = journal",
            [
                "'log-target' = \"journal\"",
                "stderr, syslog or file:/absolute/path",
            ],
        ),
    ] {
        let dir = TempDir::new("cfg-bad");
        let cnf = write_config(dir.path(), line);
        // At every log level, including off (the default) and the environment's.
        for level in [None, Some("off"), Some("error"), Some("debug")] {
            let env: Vec<(&str, &str)> = level.map(|l| ("KAE_LOG", l)).into_iter().collect();
            // A bad log-level in the file is overridden by KAE_LOG, but still reported.
            let out = openssl_list(&dir, &cnf, &env);
            assert_refused(&out, &dir, &needles, 1);
            assert!(
                !out.stderr.contains("summary:"),
                "no counter summary from a process where kae never loaded: {}",
                out.describe()
            );
            assert!(
                out.stderr
                    .contains(&format!("section [kae_sect] of {}", cnf.display())),
                "the message names the section and the file: {}",
                out.describe()
            );
        }
    }
}

#[test]
fn bad_environment_values_refuse_the_load_and_name_the_variable() {
    for (env, needle) in [
        (vec![("KAE_SPIN_US", "abc")], "KAE_SPIN_US=\"abc\""),
        (vec![("KAE_STATS", "maybe")], "KAE_STATS=\"maybe\""),
        (vec![("KAE_QUEUES", "0")], "KAE_QUEUES=\"0\""),
        (vec![("KAE_LOG", "verbose")], "KAE_LOG=\"verbose\""),
        (
            vec![("KAE_SPIN_US", "500"), ("KAE_SPIN_MAX_US", "300")],
            "KAE_SPIN_US=500 and KAE_SPIN_MAX_US=300",
        ),
    ] {
        let dir = TempDir::new("cfg-env");
        let cnf = write_config(dir.path(), "");
        let out = openssl_list(&dir, &cnf, &env);
        assert_refused(&out, &dir, &[needle], 1);
        assert!(out.stderr.contains("accepted: "), "{}", out.describe());
    }
}

#[test]
fn unknown_keys_are_warned_about_and_kae_still_loads() {
    let dir = TempDir::new("cfg-unknown");
    let cnf = write_config(dir.path(), "queus = 4\nlog-levl = info\nqueue_depth = 8");
    let out = openssl_list(&dir, &cnf, &[]);
    assert!(
        out.stdout.contains("kae RSA offload provider"),
        "{}",
        out.describe()
    );
    for (bad, good) in [
        ("queus", "queues"),
        ("log-levl", "log-level"),
        ("queue_depth", "queue-depth"),
    ] {
        assert!(
            out.stderr
                .contains(&format!("unknown key '{bad}' in section [kae_sect]")),
            "{}",
            out.describe()
        );
        assert!(
            out.stderr.contains(&format!("did you mean '{good}'")),
            "{}",
            out.describe()
        );
    }
    assert!(!out.stderr.contains("kae: error"), "{}", out.describe());
}

#[test]
fn backend_hpre_without_a_device_warns_once_at_start_up() {
    let dir = TempDir::new("cfg-hpre");
    let cnf = write_config(dir.path(), "backend = hpre");
    let out = openssl_list(&dir, &cnf, &[]);
    assert!(
        out.stdout.contains("kae RSA offload provider"),
        "{}",
        out.describe()
    );
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("hpre")).collect();
    assert_eq!(warnings.len(), 1, "{}", out.describe());
    assert!(
        warnings[0].starts_with("kae: warning: backend = hpre, but ")
            && warnings[0].contains("CPU backend"),
        "{}",
        warnings[0]
    );
    // Counted as a fallback (the exit summary shows the counters).
    let out = openssl_list(&dir, &cnf, &[("KAE_LOG", "info")]);
    assert!(
        out.stderr.contains("fallbacks 1,"),
        "the fallback is counted once: {}",
        out.describe()
    );
}

/// The first of `paths` that exists; `None` (the test is skipped) only when it is missing and
/// `KAE_SKIP_<NAME>` is set: CI installs both servers, so there a missing one fails.
fn installed(name: &str, paths: &[&'static str]) -> Option<&'static str> {
    if let Some(p) = paths.iter().find(|p| Path::new(p).exists()) {
        return Some(p);
    }
    let skip = format!("KAE_SKIP_{}", name.to_ascii_uppercase());
    if std::env::var_os(&skip).is_some() {
        eprintln!("{name} not installed; skipped ({skip} set)");
        return None;
    }
    panic!("{name} is not installed (apt-get install {name}, or set {skip}=1)");
}

/// A config file whose kae section is broken, for the servers below.
fn broken_config(dir: &TempDir) -> PathBuf {
    write_config(dir.path(), "queues = abc")
}

#[test]
fn nginx_t_shows_the_error_line() {
    let Some(nginx) = installed("nginx", &["/usr/sbin/nginx", "/usr/local/sbin/nginx"]) else {
        return;
    };
    let dir = TempDir::new("cfg-nginx");
    let cnf = broken_config(&dir);
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "error_log {}/error.log;\npid {}/nginx.pid;\nevents {{}}\nhttp {{ access_log off; }}\n",
            dir.path().display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let out = run(
        Command::new(nginx)
            .args(["-t", "-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .env("OPENSSL_CONF", &cnf)
            .env("KAE_STATS_DIR", dir.join("stats")),
        None,
        LIMIT,
    );
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let seen = format!("{}{log}", out.stderr);
    assert!(
        seen.contains("kae: error: config key 'queues' = \"abc\""),
        "nginx -t: {}\nerror.log: {log}",
        out.describe()
    );
    assert_eq!(counter_pages(&dir), 0);
}

#[test]
fn haproxy_c_shows_the_error_line() {
    let Some(haproxy) = installed("haproxy", &["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"])
    else {
        return;
    };
    let dir = TempDir::new("cfg-haproxy");
    let cnf = broken_config(&dir);
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        "global\n    maxconn 100\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n",
    )
    .unwrap();
    let out = run(
        Command::new(haproxy)
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .env("OPENSSL_CONF", &cnf)
            .env("KAE_STATS_DIR", dir.join("stats")),
        None,
        LIMIT,
    );
    assert!(
        out.stderr
            .contains("kae: error: config key 'queues' = \"abc\""),
        "{}",
        out.describe()
    );
    assert_eq!(counter_pages(&dir), 0);
}
