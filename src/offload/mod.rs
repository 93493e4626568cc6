//! The offload router: each RSA operation goes to the selected backend (inside an ASYNC job,
//! and for hardware outside one too) or is computed on the caller's thread.
//!
//! `route` decides where an operation runs and splits blinded private operations around the
//! backend; `wait` pauses the ASYNC job (or blocks the thread) until the backend answers;
//! `inline` computes on the caller's thread; `offloader` runs one backend with its completer
//! and poller; `instance` holds the process's offloader (lazy start, teardown, fork);
//! `config` keeps the settings it starts with.
//!
//! Request flow in async mode (inside an `ASYNC_JOB`):
//! submit → (queue full: register for a free slot, retry once, then attach the wake-up and
//! pause, retry) → attach the wake-up, pause until our wait fd or the application's callback
//! fires → drain the fd → result (a resume without a result is spurious: pause again). The
//! wake-up (wait fd) is attached only right before a pause that really happens.
//! Without a job the CPU backend computes inline on the caller's thread (no thread hop).
//!
//! Lifecycle: the process-wide offloader is an `Arc` handed out under a lock (teardown takes it
//! out under the same lock, so it never frees what a caller holds); a submit after shutdown
//! began is refused (the caller computes inline); fork handlers keep the router's locks free
//! in a child; a panicking computation fails its request, not its worker.

mod config;
mod inline;
mod instance;
mod offloader;
mod route;
#[cfg(test)]
mod testing;
mod wait;

pub use config::{config, configure};
pub use instance::{add_user, backend_label, current, remove_user, running, selected_kind};
pub use offloader::Offloader;
pub use route::{private_op, public_op};
pub use wait::run_blocking;
