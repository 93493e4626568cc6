//! kae-stat's command line: --version, --help, usage errors, and the `-i` headers. Runs the
//! binary cargo built for this package against scratch page directories (no provider needed;
//! tests/kae_stat.rs at the root runs it against real kae processes).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const STAT: &str = env!("CARGO_BIN_EXE_kae-stat");

/// An empty scratch root for the pages, removed on drop.
struct Root(PathBuf);

impl Root {
    fn new() -> Root {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "kae-stat-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        Root(p)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stat(args: &[&str]) -> (Output, String, String) {
    let root = Root::new();
    let out = Command::new(STAT)
        .env("KAE_STATS_DIR", &root.0)
        .args(args)
        .output()
        .expect("kae-stat runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

#[test]
fn version_names_the_tool_and_the_page_format() {
    for flag in ["--version", "-V"] {
        let (out, so, se) = stat(&[flag]);
        assert!(out.status.success(), "{flag}: {se}");
        assert_eq!(
            so.trim(),
            format!(
                "kae-stat {} (kae-tools; counter page format {})",
                env!("CARGO_PKG_VERSION"),
                kae_counters::VERSION
            )
        );
        assert!(se.is_empty(), "{se}");
    }
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    let (out, so, _) = stat(&["--help"]);
    assert!(out.status.success());
    for opt in ["--json", "--interval", "--count", "--version", "--help"] {
        assert!(so.contains(opt), "--help does not mention {opt}:\n{so}");
    }
}

#[test]
fn unknown_options_and_bad_values_are_refused_with_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["--jsno"], "unknown option '--jsno'"),
        (&["-x"], "unknown option '-x'"),
        (&["stray"], "unexpected argument 'stray'"),
        (&["-i"], "option '-i' needs a value"),
        (&["-i", "soon"], "'soon' is not a number of seconds"),
        (&["-n", "3"], "needs -i"),
    ];
    for (args, want) in cases {
        let (out, so, se) = stat(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {so}{se}");
        assert!(
            se.starts_with("kae-stat: ") && se.contains(want),
            "{args:?}: stderr lacks {want:?}:\n{se}"
        );
        assert!(
            se.contains("--help"),
            "{args:?}: no pointer to --help:\n{se}"
        );
        assert!(so.is_empty(), "{args:?}: printed a table anyway:\n{so}");
    }
}

/// `--- YYYY-MM-DD HH:MM:SSZ` (UTC) before each table, close to the time of the run.
#[test]
fn interval_headers_are_readable_utc_times() {
    let before = std::time::SystemTime::now();
    let (out, so, se) = stat(&["-i", "0.05", "-n", "2"]);
    assert!(out.status.success(), "{se}");
    let headers: Vec<&str> = so.lines().filter(|l| l.starts_with("--- ")).collect();
    assert_eq!(headers.len(), 2, "{so}");
    for h in headers {
        let t = &h[4..];
        let b = t.as_bytes();
        let shape_ok = t.len() == 20
            && t.ends_with('Z')
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b' ',
                13 | 16 => *c == b':',
                19 => true,
                _ => c.is_ascii_digit(),
            });
        assert!(shape_ok, "header {h:?} is not `--- YYYY-MM-DD HH:MM:SSZ`");
        // Same as `date -u` (to the minute, allowing for a minute boundary).
        let now = |t: std::time::SystemTime| {
            let s = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            Command::new("date")
                .args(["-u", "-d", &format!("@{s}"), "+%Y-%m-%d %H:%M"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        let minute = &t[..16];
        let (a, z) = (now(before), now(std::time::SystemTime::now()));
        assert!(
            a.is_empty() || minute == a || minute == z,
            "header {h:?}: date -u says {a} .. {z}"
        );
    }
    assert!(so.contains("no process has kae loaded"), "{so}");
}
