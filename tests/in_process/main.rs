//! The in-process tests in one binary: kae loaded as a module into library contexts of the
//! test process (or `openssl` run beside it), checked against OpenSSL's default provider,
//! Wycheproof and bad input. One binary, because each test binary links the whole crate;
//! tests that need a process of their own (fork, the logger's first configuration, process
//! teardown, environment settings) keep their own binaries in tests/.

#[path = "../common/mod.rs"]
mod common;
#[path = "../procs/mod.rs"]
mod procs;
#[path = "../skip/mod.rs"]
mod skip;

mod bad_input;
mod config_errors;
mod cross_provider;
mod encoder;
mod implicit_rejection;
mod kem;
mod pss_keygen;
mod sigalg;
mod wycheproof;
