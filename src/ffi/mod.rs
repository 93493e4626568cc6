//! The thin FFI layer: the only place that touches raw OpenSSL pointers.
//!
//! Everything above this module works with the safe wrappers defined here: `BigNum`,
//! `MontCtx`, `Md`/`MdCtx`, parameter readers/writers, and the panic-catching `guard`.

pub mod async_job;
pub mod bn;
pub mod core;
pub mod digest;
pub mod params;
pub mod sys;

pub use self::core::{guard, guard_ptr, Core};
