//! kae's logger for the `log` crate: level and destination from the provider config
//! (`log-level`, `log-target`) or the environment (`KAE_LOG`, `KAE_LOG_TARGET`, which win;
//! ignored in setuid/setgid programs, see `crate::env`).
//!
//! Targets: `stderr` (default), `syslog` (facility daemon, ident `kae`), `file:/path` (appended).
//! Off by default: a provider must not write into its host's output unless asked to.

use crate::ffi::posix;
use log::{Level, LevelFilter, Log, Metadata, Record};
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

enum Target {
    Stderr,
    Syslog,
    File(Mutex<std::fs::File>),
}

struct KaeLogger {
    target: OnceLock<Target>,
}

impl KaeLogger {
    fn target(&self) -> &Target {
        self.target.get_or_init(|| Target::Stderr)
    }
}

impl Log for KaeLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let pid = std::process::id();
        // Each line is formatted first and written with one write(2): processes sharing a
        // stream (nginx workers on one error.log) must never interleave mid-line.
        match self.target() {
            Target::Stderr => write_stderr_line(&format!("kae[{pid}] {}: {}", r.level(), r.args())),
            Target::File(f) => {
                if let Ok(mut f) = f.lock() {
                    let line = format!("kae[{pid}] {}: {}\n", r.level(), r.args());
                    let _ = f.write_all(line.as_bytes());
                }
            }
            Target::Syslog => {
                let prio = match r.level() {
                    Level::Error => libc::LOG_ERR,
                    Level::Warn => libc::LOG_WARNING,
                    Level::Info => libc::LOG_INFO,
                    Level::Debug | Level::Trace => libc::LOG_DEBUG,
                };
                posix::syslog(prio, &r.args().to_string());
            }
        }
    }

    fn flush(&self) {}
}

static LOGGER: KaeLogger = KaeLogger {
    target: OnceLock::new(),
};
static INSTALLED: Once = Once::new();

pub fn parse_level(s: &str) -> Option<LevelFilter> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "off" | "none" => LevelFilter::Off,
        "error" => LevelFilter::Error,
        "warn" | "warning" => LevelFilter::Warn,
        "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        "trace" => LevelFilter::Trace,
        _ => return None,
    })
}

/// Installs the logger (once per process) with the environment's level, so even init
/// problems can be logged. `configure` applies the provider config afterwards.
pub fn init() {
    INSTALLED.call_once(|| {
        let level = crate::env::var("KAE_LOG")
            .and_then(|v| parse_level(&v))
            .unwrap_or(LevelFilter::Off);
        // Another logger may already be installed by a Rust host application: keep theirs.
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    });
}

/// Whether `t` names a usable log target: `stderr`, `syslog` or `file:` and an absolute path.
pub fn check_target(t: &str) -> Option<()> {
    let t = t.trim();
    let ok = t.eq_ignore_ascii_case("stderr")
        || t.eq_ignore_ascii_case("syslog")
        || t.strip_prefix("file:").is_some_and(|p| p.starts_with('/'));
    ok.then_some(())
}

/// A configuration problem: written to stderr whatever the log level (kae may be missing from
/// the process because of it, and OpenSSL does not say so), and to syslog as well when that is
/// the log target the configuration asks for.
///
/// Said once per process: each library context that loads kae runs its init again.
pub fn config_diagnostic(line: &str, error: bool, syslog: bool) {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    {
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if said.iter().any(|l| l == line) {
            return;
        }
        said.push(line.to_owned());
    }
    write_stderr_line(line);
    if syslog {
        posix::open_syslog();
        posix::syslog(
            if error {
                libc::LOG_ERR
            } else {
                libc::LOG_WARNING
            },
            line,
        );
    }
}

/// Applies `log-level` / `log-target` from the provider config; the environment wins.
/// Returns an error text for an unusable target.
pub fn configure(level: Option<&str>, target: Option<&str>) -> Result<(), String> {
    init();
    let env_level = crate::env::var("KAE_LOG");
    if let Some(l) = env_level.as_deref().or(level) {
        let lf = parse_level(l).ok_or_else(|| format!("log-level={l}"))?;
        log::set_max_level(lf);
    }
    let env_target = crate::env::var("KAE_LOG_TARGET");
    if let Some(t) = env_target.as_deref().or(target) {
        let t = t.trim();
        let chosen = if t.eq_ignore_ascii_case("stderr") {
            Target::Stderr
        } else if t.eq_ignore_ascii_case("syslog") {
            posix::open_syslog();
            Target::Syslog
        } else if let Some(path) = t.strip_prefix("file:").filter(|p| p.starts_with('/')) {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("log-target={t}: {e}"))?;
            Target::File(Mutex::new(f))
        } else {
            return Err(format!(
                "log-target={t}: accepted: stderr, syslog or file:/absolute/path"
            ));
        };
        // First configuration wins (the logger is per process).
        let _ = LOGGER.target.set(chosen);
    }
    Ok(())
}

/// Warnings that could repeat on every operation (fallbacks) are logged at most once per
/// `WINDOW` per key, with the count of the ones suppressed in between.
const WINDOW: Duration = Duration::from_secs(10);

pub fn warn_rate_limited(key: &'static str, msg: std::fmt::Arguments<'_>) {
    if !log::log_enabled!(Level::Warn) {
        return;
    }
    static LAST: Mutex<Option<HashMap<&'static str, (Instant, u64)>>> = Mutex::new(None);
    let mut g = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    let now = Instant::now();
    match map.get_mut(key) {
        Some((last, suppressed)) if now.duration_since(*last) < WINDOW => *suppressed += 1,
        Some((last, suppressed)) => {
            let n = std::mem::take(suppressed);
            *last = now;
            drop(g);
            if n > 0 {
                log::warn!("{msg} ({n} similar warnings suppressed)");
            } else {
                log::warn!("{msg}");
            }
        }
        None => {
            map.insert(key, (now, 0));
            drop(g);
            log::warn!("{msg}");
        }
    }
}

/// Writes `line` and a newline to stderr with one `write(2)`, whatever the log level: for the
/// few failures after which kae is missing from the process (the operator must see them).
pub fn write_stderr_line(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    posix::write_stderr(&buf);
}
