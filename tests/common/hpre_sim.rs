//! Test-side helpers for the UADK simulator (`hpre-sim/`, `libkae_hpre_sim.so`): where the
//! built library is, a fake `/sys/class/uacce` tree, and the simulator's counters.
//!
//! The simulator is a separate workspace member (a cdylib nothing links against), so
//! `cargo test` alone does not build it: `cargo build --release --workspace` (or
//! `-p kae-hpre-sim`) first. `KAE_SIM_LIB` overrides the path.
//!
//! Needs std and libc only.
#![allow(dead_code)]

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The built simulator: `$KAE_SIM_LIB` when set, else `target/<profile>/libkae_hpre_sim.so`
/// next to this test binary's `deps/` directory. Panics, saying how to build it, when missing.
pub fn sim_lib() -> PathBuf {
    if let Some(p) = std::env::var_os("KAE_SIM_LIB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe() failed");
    let profile_dir = exe.parent().and_then(Path::parent).unwrap_or_else(|| {
        panic!(
            "test binary {} is not in target/<profile>/deps",
            exe.display()
        )
    });
    let lib = profile_dir.join("libkae_hpre_sim.so");
    if !lib.is_file() {
        let profile = profile_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let build = match profile.as_str() {
            "debug" => "cargo build --workspace".to_string(),
            "release" => "cargo build --release --workspace".to_string(),
            p => format!("cargo build --profile {p} --workspace"),
        };
        panic!(
            "the UADK simulator is not built ({} is missing): run `{build}` (it is the \
             kae-hpre-sim package, which `cargo test` does not build), or set KAE_SIM_LIB",
            lib.display()
        );
    }
    lib
}

/// One fake `hisi_hpre-<N>` device of [`fake_sysfs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeDevice {
    /// `isolate`: 1 when true.
    pub isolate: bool,
    /// `flags`: 1 (UACCE_DEV_SVA) when true, else 0.
    pub sva: bool,
    /// `available_instances`: free queues.
    pub available: u32,
    /// `device/numa_node`.
    pub numa: i32,
}

impl Default for FakeDevice {
    /// A usable device: not isolated, SVA, 16 free queues, NUMA node 0.
    fn default() -> FakeDevice {
        FakeDevice {
            isolate: false,
            sva: true,
            available: 16,
            numa: 0,
        }
    }
}

/// Creates `root/hisi_hpre-<N>/` for each device (N = its index): `algorithms` ("rsa\ndh\n"),
/// `isolate`, `flags`, `available_instances`, `device/numa_node`. Point the simulator's
/// `KAE_SIM_SYSFS` at `root` to see it write `isolate`.
pub fn fake_sysfs(root: &Path, devices: &[FakeDevice]) {
    for (i, d) in devices.iter().enumerate() {
        let dir = root.join(format!("hisi_hpre-{i}"));
        fs::create_dir_all(dir.join("device"))
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let files = [
            ("algorithms", "rsa\ndh\n".to_string()),
            ("isolate", format!("{}\n", u8::from(d.isolate))),
            ("flags", format!("{}\n", u8::from(d.sva))),
            ("available_instances", format!("{}\n", d.available)),
            ("device/numa_node", format!("{}\n", d.numa)),
        ];
        for (name, text) in files {
            let p = dir.join(name);
            fs::write(&p, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
        }
    }
}

/// The simulator's `struct KaeSimStats` (16 `u64`, same order); see hpre-sim's crate docs for
/// what each counts. Process-wide and never reset: compare values before and after.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    pub init_calls: u64,
    pub uninit_calls: u64,
    pub sessions_allocated: u64,
    pub sessions_freed: u64,
    pub submitted: u64,
    pub completed_ok: u64,
    pub ebusy: u64,
    pub error_completions: u64,
    pub dropped: u64,
    pub wrong_results: u64,
    pub misuse: u64,
    pub in_flight: u64,
    pub max_in_flight: u64,
    pub sync_calls: u64,
    pub polls: u64,
    pub callbacks: u64,
}

const _: () = assert!(std::mem::size_of::<SimStats>() == 16 * 8);

/// The simulator library loaded in this process: the one already loaded from the file
/// [`sim_lib`] names (RTLD_NOLOAD; a copy of that file elsewhere would be a different library
/// with its own counters), else loaded now (and kept loaded). Panics if it cannot.
fn sim_handle() -> *mut libc::c_void {
    let path = sim_lib();
    let c = CString::new(path.as_os_str().as_bytes()).expect("library path contains NUL");
    // SAFETY: `c` is a NUL-terminated path; dlopen has no other precondition. The handle is
    // deliberately never closed (the counters must survive).
    let mut h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above.
        h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
    }
    if h.is_null() {
        // SAFETY: dlerror returns null or a NUL-terminated message owned by libdl.
        let err = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                String::from("unknown error")
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        panic!("cannot dlopen {}: {err}", path.display());
    }
    h
}

/// The address of the simulator's symbol `name`; panics when it has none.
fn sim_symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    let h = sim_handle();
    // SAFETY: `h` is a live handle and the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, name.as_ptr()) };
    assert!(
        !sym.is_null(),
        "{} has no {name:?} (rebuild the simulator)",
        sim_lib().display()
    );
    sym
}

/// The simulator's counters in this process (see [`sim_handle`] for which library).
pub fn sim_stats() -> SimStats {
    let sym = sim_symbol(c"kae_sim_stats");
    // SAFETY: kae_sim_stats has this C signature (hpre-sim/src/lib.rs).
    let f: unsafe extern "C" fn(*mut SimStats) -> libc::c_int = unsafe { std::mem::transmute(sym) };
    let mut out = SimStats::default();
    // SAFETY: `out` is a writable SimStats, the layout kae_sim_stats fills.
    let rc = unsafe { f(&mut out) };
    assert_eq!(rc, 0, "kae_sim_stats failed");
    out
}

/// A counter the simulator keeps outside `SimStats`, read through its own function
/// (`uint64_t name(void)`): `kae_sim_isolations`, `kae_sim_isolated_refusals`.
fn sim_u64(name: &std::ffi::CStr) -> u64 {
    let sym = sim_symbol(name);
    // SAFETY: these simulator functions have this C signature (hpre-sim/src/lib.rs).
    let f: extern "C" fn() -> u64 = unsafe { std::mem::transmute(sym) };
    f()
}

/// How many times the simulator isolated its device (`KAE_SIM_ISOLATE_AFTER`, at most once
/// per UADK init), in this process.
pub fn sim_isolations() -> u64 {
    sim_u64(c"kae_sim_isolations")
}

/// Submissions the simulator refused (-5) because its device was isolated, in this process.
pub fn sim_isolated_refusals() -> u64 {
    sim_u64(c"kae_sim_isolated_refusals")
}
