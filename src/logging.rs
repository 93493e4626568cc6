//! Minimal logger: `KAE_LOG=error|warn|info|debug|trace` enables messages on stderr.
//! (The operators' issue extends this with syslog/file destinations and config keys.)

use log::{LevelFilter, Log, Metadata, Record};
use std::sync::Once;

struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            eprintln!("kae[{}] {}: {}", std::process::id(), r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;
static INIT: Once = Once::new();

pub fn init() {
    INIT.call_once(|| {
        let level = match std::env::var("KAE_LOG")
            .ok()
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("error") => LevelFilter::Error,
            Some("warn") => LevelFilter::Warn,
            Some("info") => LevelFilter::Info,
            Some("debug") => LevelFilter::Debug,
            Some("trace") => LevelFilter::Trace,
            _ => LevelFilter::Off,
        };
        // Another logger may already be installed by a Rust host application: keep theirs.
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    });
}
