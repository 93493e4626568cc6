//! The test-only UADK simulator (`hpre-sim/`, `libkae_hpre_sim.so`) on its own: loaded with
//! dlopen and driven through UADK's C API as declared here (again, from
//! `shared/reference/uadk-rsa-abi.md`), checked against the `openssl` crate's raw RSA.
//!
//! Needs the simulator built first: `cargo build --release -p kae-hpre-sim` (or `--workspace`).
//! The simulator has process-wide state and reads its knobs from the environment at init, so the
//! tests take one lock and init/uninit around each case.
#![allow(non_camel_case_types)]

#[path = "common/hpre_sim.rs"]
mod hpre_sim;

use hpre_sim::{fake_sysfs, sim_lib, sim_stats, FakeDevice, SimStats};
use libc::{c_char, c_int, c_void};
use openssl::pkey::Private;
use openssl::rsa::{Padding, Rsa};
use std::ffi::CString;
use std::mem::{align_of, offset_of, size_of};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// UADK 2.10 declarations (this test's own)
// ---------------------------------------------------------------------------------------------

type handle_t = usize;

#[repr(C)]
struct wd_dtb {
    data: *mut c_char,
    dsize: u32,
    bsize: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct wd_rsa_req {
    src: *mut c_void,
    dst: *mut c_void,
    src_bytes: u32,
    dst_bytes: u32,
    cb: Option<unsafe extern "C" fn(*mut c_void)>,
    cb_param: *mut c_void,
    status: c_int,
    data_fmt: u8,
    op_type: u8,
}

#[repr(C)]
struct wd_rsa_sess_setup {
    key_bits: u16,
    is_crt: bool,
    sched_param: *mut c_void,
    /// `struct wd_mm_ops` (56 bytes), left zeroed.
    mm_ops: [u64; 7],
    mm_type: c_int,
}

#[repr(C)]
struct wd_ctx_nums {
    sync_ctx_num: u32,
    async_ctx_num: u32,
}

#[repr(C)]
struct wd_ctx_params {
    op_type_num: u32,
    ctx_set_num: *mut wd_ctx_nums,
    bmp: *mut c_void,
    cap: *mut c_void,
}

const _: () = {
    assert!(size_of::<wd_dtb>() == 16 && offset_of!(wd_dtb, bsize) == 12);
    assert!(size_of::<wd_rsa_req>() == 48 && align_of::<wd_rsa_req>() == 8);
    assert!(offset_of!(wd_rsa_req, src_bytes) == 16 && offset_of!(wd_rsa_req, cb) == 24);
    assert!(offset_of!(wd_rsa_req, cb_param) == 32 && offset_of!(wd_rsa_req, status) == 40);
    assert!(offset_of!(wd_rsa_req, data_fmt) == 44 && offset_of!(wd_rsa_req, op_type) == 45);
    assert!(size_of::<wd_rsa_sess_setup>() == 80);
    assert!(offset_of!(wd_rsa_sess_setup, is_crt) == 2);
    assert!(offset_of!(wd_rsa_sess_setup, mm_ops) == 16);
    assert!(offset_of!(wd_rsa_sess_setup, mm_type) == 72);
    assert!(size_of::<wd_ctx_nums>() == 8 && size_of::<wd_ctx_params>() == 32);
    assert!(offset_of!(wd_ctx_params, ctx_set_num) == 8);
};

const SIGN: u8 = 1;
const VERIFY: u8 = 2;

type DtbPtr = *mut wd_dtb;

/// Declares `struct Api` (one field per entry point) and `load_api`, which resolves each
/// field's symbol with dlsym.
macro_rules! api {
    ($($field:ident: $name:literal => $ty:ty,)*) => {
        struct Api {
            $($field: $ty,)*
        }

        fn load_api(h: *mut c_void) -> Api {
            Api {
                $($field: {
                    // SAFETY: live handle, NUL-terminated name.
                    let p = unsafe { libc::dlsym(h, concat!($name, "\0").as_ptr().cast()) };
                    assert!(!p.is_null(), "{} is not exported", $name);
                    // SAFETY: the symbol has this UADK (or simulator) signature.
                    unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
                },)*
            }
        }
    };
}

api! {
    init: "wd_rsa_init2_" =>
        unsafe extern "C" fn(*mut c_char, u32, c_int, *mut wd_ctx_params) -> c_int,
    uninit: "wd_rsa_uninit2" => unsafe extern "C" fn(),
    alloc: "wd_rsa_alloc_sess" => unsafe extern "C" fn(*mut wd_rsa_sess_setup) -> handle_t,
    free: "wd_rsa_free_sess" => unsafe extern "C" fn(handle_t),
    set_crt: "wd_rsa_set_crt_prikey_params" =>
        unsafe extern "C" fn(handle_t, DtbPtr, DtbPtr, DtbPtr, DtbPtr, DtbPtr) -> c_int,
    set_pub: "wd_rsa_set_pubkey_params" =>
        unsafe extern "C" fn(handle_t, DtbPtr, DtbPtr) -> c_int,
    sync: "wd_do_rsa_sync" => unsafe extern "C" fn(handle_t, *mut wd_rsa_req) -> c_int,
    submit: "wd_do_rsa_async" => unsafe extern "C" fn(handle_t, *mut wd_rsa_req) -> c_int,
    poll: "wd_rsa_poll" => unsafe extern "C" fn(u32, *mut u32) -> c_int,
    is_crt: "wd_rsa_is_crt" => unsafe extern "C" fn(handle_t) -> bool,
    key_bits: "wd_rsa_get_key_bits" => unsafe extern "C" fn(handle_t) -> u32,
    version: "kae_sim_version" => unsafe extern "C" fn() -> u32,
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let path = sim_lib();
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the handle stays open for the process.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
        assert!(!h.is_null(), "cannot dlopen {}", path.display());
        load_api(h)
    })
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

const KNOBS: [&str; 12] = [
    "KAE_SIM_DEVICE_THREADS",
    "KAE_SIM_LATENCY_US",
    "KAE_SIM_DEPTH",
    "KAE_SIM_EBUSY_EVERY",
    "KAE_SIM_ERROR_EVERY",
    "KAE_SIM_DROP_EVERY",
    "KAE_SIM_WRONG_EVERY",
    "KAE_SIM_ISOLATE_AFTER",
    "KAE_SIM_SYSFS",
    "KAE_SIM_COMPUTE",
    "WD_RSA_CTX_NUM",
    "KAE_SIM",
];

static SERIAL: Mutex<()> = Mutex::new(());

/// One test case: holds the lock, sets the knobs (all others removed, KAE_SIM=1), and
/// keeps the simulator initialised until dropped.
struct Case {
    _serial: MutexGuard<'static, ()>,
    inited: bool,
}

fn set_knobs(knobs: &[(&str, &str)]) {
    for k in KNOBS {
        std::env::remove_var(k);
    }
    std::env::set_var("KAE_SIM", "1");
    for (k, v) in knobs {
        std::env::set_var(k, v);
    }
}

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn init(params: *mut wd_ctx_params) -> c_int {
    let alg = CString::new("rsa").unwrap();
    // SAFETY: a NUL-terminated name; params null or valid.
    unsafe { (api().init)(alg.as_ptr() as *mut c_char, 0, 1, params) }
}

impl Case {
    fn new(knobs: &[(&str, &str)]) -> Case {
        Case::with_params(knobs, std::ptr::null_mut())
    }

    fn with_params(knobs: &[(&str, &str)], params: *mut wd_ctx_params) -> Case {
        let s = serial();
        set_knobs(knobs);
        assert_eq!(init(params), 0, "wd_rsa_init2_");
        Case {
            _serial: s,
            inited: true,
        }
    }

    fn uninit(&mut self) {
        if std::mem::take(&mut self.inited) {
            // SAFETY: initialised by this case.
            unsafe { (api().uninit)() };
        }
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        self.uninit();
    }
}

struct Key {
    rsa: Rsa<Private>,
    n: Vec<u8>,
    e: Vec<u8>,
    p: Vec<u8>,
    q: Vec<u8>,
    dp: Vec<u8>,
    dq: Vec<u8>,
    qinv: Vec<u8>,
}

fn key() -> &'static Key {
    static KEY: OnceLock<Key> = OnceLock::new();
    KEY.get_or_init(|| {
        let rsa = Rsa::generate(2048).unwrap();
        Key {
            n: rsa.n().to_vec(),
            e: rsa.e().to_vec(),
            p: rsa.p().unwrap().to_vec(),
            q: rsa.q().unwrap().to_vec(),
            dp: rsa.dmp1().unwrap().to_vec(),
            dq: rsa.dmq1().unwrap().to_vec(),
            qinv: rsa.iqmp().unwrap().to_vec(),
            rsa,
        }
    })
}

fn dtb(v: &[u8]) -> wd_dtb {
    wd_dtb {
        data: v.as_ptr() as *mut c_char,
        dsize: v.len() as u32,
        bsize: v.len() as u32,
    }
}

fn alloc(bits: u16, crt: bool) -> handle_t {
    let mut setup = wd_rsa_sess_setup {
        key_bits: bits,
        is_crt: crt,
        sched_param: std::ptr::null_mut(),
        mm_ops: [0; 7],
        mm_type: 0,
    };
    // SAFETY: a valid 80-byte setup.
    unsafe { (api().alloc)(&mut setup) }
}

/// A 2048-bit CRT session holding the test key (private and public).
fn session() -> handle_t {
    let k = key();
    let h = alloc(2048, true);
    assert_ne!(h, 0, "wd_rsa_alloc_sess");
    let (mut dq, mut dp, mut qinv, mut q, mut p) =
        (dtb(&k.dq), dtb(&k.dp), dtb(&k.qinv), dtb(&k.q), dtb(&k.p));
    let (mut e, mut n) = (dtb(&k.e), dtb(&k.n));
    // SAFETY: valid dtbs over live buffers.
    unsafe {
        assert_eq!(
            (api().set_crt)(h, &mut dq, &mut dp, &mut qinv, &mut q, &mut p),
            0
        );
        assert_eq!((api().set_pub)(h, &mut e, &mut n), 0);
    }
    h
}

fn free(h: handle_t) {
    // SAFETY: the simulator looks handles up in a registry.
    unsafe { (api().free)(h) }
}

/// A 256-byte input below n.
fn message(tag: u8) -> Vec<u8> {
    let mut m: Vec<u8> = (0..256u32)
        .map(|i| (i as u8).wrapping_mul(31) ^ tag)
        .collect();
    m[0] = 0x01;
    m
}

fn reference_sign(m: &[u8]) -> Vec<u8> {
    let mut out = vec![0; 256];
    let n = key()
        .rsa
        .private_encrypt(m, &mut out, Padding::NONE)
        .unwrap();
    assert_eq!(n, 256);
    out
}

fn reference_verify(s: &[u8]) -> Vec<u8> {
    let mut out = vec![0; 256];
    let n = key()
        .rsa
        .public_decrypt(s, &mut out, Padding::NONE)
        .unwrap();
    assert_eq!(n, 256);
    out
}

fn req(src: &[u8], dst: &mut [u8], op: u8, param: usize) -> wd_rsa_req {
    wd_rsa_req {
        src: src.as_ptr() as *mut c_void,
        dst: dst.as_mut_ptr().cast(),
        src_bytes: src.len() as u32,
        dst_bytes: dst.len() as u32,
        cb: Some(record),
        cb_param: param as *mut c_void,
        status: -1,
        data_fmt: 0,
        op_type: op,
    }
}

fn sync(h: handle_t, r: &mut wd_rsa_req) -> c_int {
    // SAFETY: `r` and its buffers are valid.
    unsafe { (api().sync)(h, r) }
}

fn submit(h: handle_t, r: &mut wd_rsa_req) -> c_int {
    // SAFETY: `r` and its buffers are valid; the tests keep buffers alive until delivery.
    unsafe { (api().submit)(h, r) }
}

fn poll(expt: u32) -> (c_int, u32) {
    let mut count = 0u32;
    // SAFETY: `count` is writable.
    let rc = unsafe { (api().poll)(expt, &mut count) };
    (rc, count)
}

#[derive(Clone, Copy, Debug)]
struct Delivery {
    req: usize,
    cb_param: usize,
    status: c_int,
    dst_bytes: u32,
}

static DELIVERED: Mutex<Vec<Delivery>> = Mutex::new(Vec::new());

unsafe extern "C" fn record(req: *mut c_void) {
    // SAFETY: the simulator passes its live copy of the request.
    let r = unsafe { &*(req as *const wd_rsa_req) };
    DELIVERED.lock().unwrap().push(Delivery {
        req: req as usize,
        cb_param: r.cb_param as usize,
        status: r.status,
        dst_bytes: r.dst_bytes,
    });
}

fn take_delivered() -> Vec<Delivery> {
    std::mem::take(&mut *DELIVERED.lock().unwrap())
}

/// Polls until `n` callbacks were recorded (or panics after `limit`); returns them.
fn poll_until(n: usize, limit: Duration) -> Vec<Delivery> {
    let t = Instant::now();
    loop {
        let (rc, _) = poll(64);
        assert_eq!(rc, 0);
        if DELIVERED.lock().unwrap().len() >= n {
            return take_delivered();
        }
        assert!(
            t.elapsed() < limit,
            "only {:?} delivered",
            DELIVERED.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn delta(a: &SimStats, b: &SimStats) -> SimStats {
    SimStats {
        init_calls: b.init_calls - a.init_calls,
        uninit_calls: b.uninit_calls - a.uninit_calls,
        sessions_allocated: b.sessions_allocated - a.sessions_allocated,
        sessions_freed: b.sessions_freed - a.sessions_freed,
        submitted: b.submitted - a.submitted,
        completed_ok: b.completed_ok - a.completed_ok,
        ebusy: b.ebusy - a.ebusy,
        error_completions: b.error_completions - a.error_completions,
        dropped: b.dropped - a.dropped,
        wrong_results: b.wrong_results - a.wrong_results,
        misuse: b.misuse - a.misuse,
        in_flight: b.in_flight,
        max_in_flight: b.max_in_flight,
        sync_calls: b.sync_calls - a.sync_calls,
        polls: b.polls - a.polls,
        callbacks: b.callbacks - a.callbacks,
    }
}

const LIMIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn refuses_to_run_without_kae_sim() {
    let _s = serial();
    set_knobs(&[]);
    std::env::remove_var("KAE_SIM");
    let before = sim_stats();
    assert_eq!(init(std::ptr::null_mut()), -19);
    std::env::set_var("KAE_SIM", "0");
    assert_eq!(init(std::ptr::null_mut()), -19);
    assert_eq!(alloc(2048, true), 0, "no session without init");
    let d = delta(&before, &sim_stats());
    assert_eq!(d.init_calls, 2);
    std::env::set_var("KAE_SIM", "1");
    // SAFETY: plain call.
    assert_eq!(unsafe { (api().version)() }, 1);
}

#[test]
fn init_double_init_and_uninit() {
    let _s = serial();
    set_knobs(&[]);
    let before = sim_stats();
    let dh = CString::new("dh").unwrap();
    // SAFETY: a NUL-terminated name.
    assert_eq!(
        unsafe { (api().init)(dh.as_ptr() as *mut c_char, 0, 1, std::ptr::null_mut()) },
        -22
    );
    let mut nums = wd_ctx_nums {
        sync_ctx_num: 1,
        async_ctx_num: 2,
    };
    let mut params = wd_ctx_params {
        op_type_num: 1,
        ctx_set_num: &mut nums,
        bmp: std::ptr::null_mut(),
        cap: std::ptr::null_mut(),
    };
    assert_eq!(init(&mut params), 0);
    assert_eq!(init(&mut params), -17, "second init without uninit");
    let h = session();
    // SAFETY: registry lookups.
    unsafe {
        assert!((api().is_crt)(h));
        assert_eq!((api().key_bits)(h), 2048);
    }
    assert_eq!(alloc(1536, true), 0, "unsupported key size");
    // SAFETY: initialised above.
    unsafe { (api().uninit)() };
    // Sessions of a finished initialisation are unusable, also after a new init.
    assert_eq!(init(std::ptr::null_mut()), 0);
    let (src, mut dst) = (message(1), vec![0u8; 256]);
    let mut r = req(&src, &mut dst, VERIFY, 0);
    assert_eq!(sync(h, &mut r), -22);
    free(h);
    // SAFETY: initialised above.
    unsafe { (api().uninit)() };
    let d = delta(&before, &sim_stats());
    assert_eq!((d.init_calls, d.uninit_calls), (4, 2));
    assert_eq!((d.sessions_allocated, d.sessions_freed), (1, 1));
    // "dh", the second init, the stale session.
    assert_eq!(d.misuse, 3, "{d:?}");
}

#[test]
fn sync_crt_sign_and_verify_match_openssl() {
    let _c = Case::new(&[]);
    let before = sim_stats();
    let h = session();
    let m = message(7);
    let mut sig = vec![0u8; 256];
    let mut r = req(&m, &mut sig, SIGN, 0);
    assert_eq!(sync(h, &mut r), 0);
    assert_eq!((r.status, r.dst_bytes), (0, 256));
    assert_eq!(sig, reference_sign(&m));
    let mut back = vec![0u8; 256];
    let mut r = req(&sig, &mut back, VERIFY, 0);
    assert_eq!(sync(h, &mut r), 0);
    assert_eq!(back, m);
    assert_eq!(back, reference_verify(&sig));
    free(h);
    let d = delta(&before, &sim_stats());
    assert_eq!((d.sync_calls, d.completed_ok, d.misuse), (2, 2, 0), "{d:?}");
}

#[test]
fn async_callback_gets_the_library_copy() {
    let _c = Case::new(&[]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let m = message(9);
    let mut sig = vec![0u8; 256];
    let marker = Box::new(0x1234u64);
    let param = &*marker as *const u64 as usize;
    let mut r = req(&m, &mut sig, SIGN, param);
    let caller = &r as *const wd_rsa_req as usize;
    assert_eq!(submit(h, &mut r), 0);
    // The caller may reuse its struct at once: scribble over it.
    // SAFETY: `r` is a plain-data struct of ours; 0x5A bytes are valid for every field.
    unsafe {
        std::ptr::write_volatile(
            &mut r,
            std::mem::transmute::<[u8; 48], wd_rsa_req>([0x5A; 48]),
        )
    };
    let mut count = 5u32;
    let t = Instant::now();
    while count == 5 {
        // SAFETY: `count` is writable.
        assert_eq!(unsafe { (api().poll)(8, &mut count) }, 0);
        assert!(t.elapsed() < LIMIT);
    }
    assert_eq!(count, 6, "poll adds to *count");
    let d = take_delivered();
    assert_eq!(d.len(), 1);
    assert_ne!(d[0].req, caller, "the callback must get the library's copy");
    assert_eq!(
        (d[0].cb_param, d[0].status, d[0].dst_bytes),
        (param, 0, 256)
    );
    assert_eq!(sig, reference_sign(&m));
    // Nothing more to deliver: still 0, count untouched.
    assert_eq!(poll(8), (0, 0));
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!(
        (s.submitted, s.completed_ok, s.callbacks),
        (1, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.in_flight, 0);
}

#[test]
fn ebusy_at_depth() {
    let _c = Case::new(&[("KAE_SIM_DEPTH", "2")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let srcs: Vec<Vec<u8>> = (0..4).map(message).collect();
    let mut dsts = vec![vec![0u8; 256]; 4];
    let mut rcs = Vec::new();
    for (i, (s, d)) in srcs.iter().zip(dsts.iter_mut()).enumerate().take(3) {
        rcs.push(submit(h, &mut req(s, d, VERIFY, i)));
    }
    assert_eq!(rcs, [0, 0, -16]);
    assert_eq!(sim_stats().in_flight, 2);
    let got = poll_until(2, LIMIT);
    assert_eq!(got.len(), 2);
    // A slot is free again.
    assert_eq!(submit(h, &mut req(&srcs[3], &mut dsts[3], VERIFY, 3)), 0);
    poll_until(1, LIMIT);
    for i in [0, 1, 3] {
        assert_eq!(dsts[i], reference_verify(&srcs[i]));
    }
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!((s.submitted, s.ebusy, s.in_flight), (3, 1, 0), "{s:?}");
    assert!(s.max_in_flight >= 2);
}

/// Submits `n` VERIFY requests (cb_param = index) and returns (sources, outputs).
fn submit_n(h: handle_t, n: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let srcs: Vec<Vec<u8>> = (0..n).map(|i| message(i as u8)).collect();
    let mut dsts = vec![vec![0u8; 256]; n];
    for (i, (s, d)) in srcs.iter().zip(dsts.iter_mut()).enumerate() {
        assert_eq!(submit(h, &mut req(s, d, VERIFY, i)), 0);
    }
    (srcs, dsts)
}

#[test]
fn error_every() {
    let _c = Case::new(&[("KAE_SIM_ERROR_EVERY", "2")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let (srcs, dsts) = submit_n(h, 4);
    let mut got = poll_until(4, LIMIT);
    got.sort_by_key(|d| d.cb_param);
    let statuses: Vec<c_int> = got.iter().map(|d| d.status).collect();
    assert_eq!(statuses, [0, 67, 0, 67]);
    assert_eq!(dsts[0], reference_verify(&srcs[0]));
    // The 5th completion (sync) is fine, the 6th (sync) fails with -67.
    let (m, mut out) = (message(50), vec![0u8; 256]);
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), 0);
    let mut r = req(&m, &mut out, VERIFY, 0);
    assert_eq!(sync(h, &mut r), -67);
    assert_eq!(r.status, 67);
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!((s.completed_ok, s.error_completions), (3, 3), "{s:?}");
}

#[test]
fn drop_every() {
    let _c = Case::new(&[("KAE_SIM_DROP_EVERY", "2")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let (_srcs, _dsts) = submit_n(h, 4);
    let t = Instant::now();
    while sim_stats().in_flight != 0 {
        poll(64);
        assert!(t.elapsed() < LIMIT);
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got: Vec<usize> = take_delivered().iter().map(|d| d.cb_param).collect();
    got.sort();
    assert_eq!(got, [0, 2], "the 2nd and 4th are lost");
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!((s.dropped, s.callbacks, s.submitted), (2, 2, 4), "{s:?}");
}

#[test]
fn wrong_every() {
    let _c = Case::new(&[("KAE_SIM_WRONG_EVERY", "3")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let (srcs, dsts) = submit_n(h, 3);
    let mut got = poll_until(3, LIMIT);
    got.sort_by_key(|d| d.cb_param);
    assert!(got.iter().all(|d| d.status == 0));
    assert_eq!(dsts[0], reference_verify(&srcs[0]));
    assert_eq!(dsts[1], reference_verify(&srcs[1]));
    let want = reference_verify(&srcs[2]);
    let flipped: u32 = dsts[2]
        .iter()
        .zip(&want)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(flipped, 1, "exactly one bit of the 3rd result is wrong");
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!((s.wrong_results, s.completed_ok), (1, 3), "{s:?}");
}

#[test]
fn ebusy_every() {
    let _c = Case::new(&[("KAE_SIM_EBUSY_EVERY", "2")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let srcs: Vec<Vec<u8>> = (0..3).map(message).collect();
    let mut dsts = vec![vec![0u8; 256]; 3];
    let rcs: Vec<c_int> = srcs
        .iter()
        .zip(dsts.iter_mut())
        .enumerate()
        .map(|(i, (s, d))| submit(h, &mut req(s, d, VERIFY, i)))
        .collect();
    assert_eq!(rcs, [0, -16, 0]);
    // The 4th submission is a sync one: EBUSY too, status not written.
    let (m, mut out) = (message(60), vec![0u8; 256]);
    let mut r = req(&m, &mut out, VERIFY, 0);
    assert_eq!(sync(h, &mut r), -16);
    assert_eq!(r.status, -1);
    poll_until(2, LIMIT);
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!((s.ebusy, s.submitted), (2, 2), "{s:?}");
}

#[test]
fn isolate_after() {
    let dir = std::env::temp_dir().join(format!("kae-hpre-sim-{}", std::process::id()));
    fake_sysfs(&dir, &[FakeDevice::default()]);
    let isolate = dir.join("hisi_hpre-0/isolate");
    assert_eq!(std::fs::read_to_string(&isolate).unwrap().trim(), "0");
    let _c = Case::new(&[
        ("KAE_SIM_ISOLATE_AFTER", "2"),
        ("KAE_SIM_SYSFS", dir.to_str().unwrap()),
    ]);
    take_delivered();
    let h = session();
    let (m, mut out) = (message(1), vec![0u8; 256]);
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), 0);
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), 0);
    assert_eq!(std::fs::read_to_string(&isolate).unwrap().trim(), "1");
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), -5);
    assert_eq!(submit(h, &mut req(&m, &mut out, VERIFY, 0)), -5);
    free(h);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn isolation_completes_pending_requests_with_status_22() {
    // The first completion isolates; the requests queued behind it report 22.
    let _c = Case::new(&[("KAE_SIM_ISOLATE_AFTER", "1")]);
    take_delivered();
    let h = session();
    // CRT signs, so that the device is still busy with the first while the others are
    // submitted; a submission that comes after the isolation gets -5 instead.
    let srcs: Vec<Vec<u8>> = (0..3).map(message).collect();
    let mut dsts = vec![vec![0u8; 256]; 3];
    let mut accepted = 0;
    for (i, (s, d)) in srcs.iter().zip(dsts.iter_mut()).enumerate() {
        match submit(h, &mut req(s, d, SIGN, i)) {
            0 => accepted += 1,
            rc => assert!(i > 0 && rc == -5, "submission {i}: {rc}"),
        }
    }
    let mut got = poll_until(accepted, LIMIT);
    got.sort_by_key(|d| d.cb_param);
    let statuses: Vec<c_int> = got.iter().map(|d| d.status).collect();
    assert_eq!(statuses, [0, 22, 22][..accepted]);
    assert_eq!(dsts[0], reference_sign(&srcs[0]));
    assert_eq!(submit(h, &mut req(&srcs[0], &mut dsts[0], SIGN, 9)), -5);
    free(h);
}

#[test]
fn compute_off_echoes_the_input() {
    let _c = Case::new(&[("KAE_SIM_COMPUTE", "0")]);
    let h = session();
    let (m, mut out) = (message(3), vec![0u8; 256]);
    assert_eq!(sync(h, &mut req(&m, &mut out, SIGN, 0)), 0);
    assert_eq!(out, m);
    free(h);
}

#[test]
fn latency_delays_delivery() {
    let _c = Case::new(&[("KAE_SIM_LATENCY_US", "300000")]);
    take_delivered();
    let h = session();
    let t = Instant::now();
    let (_srcs, _dsts) = submit_n(h, 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(poll(8), (0, 0), "delivered before the latency");
    let got = poll_until(1, LIMIT);
    let waited = t.elapsed();
    assert_eq!(got.len(), 1);
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    // Sync calls take the latency too.
    let t = Instant::now();
    let (m, mut out) = (message(1), vec![0u8; 256]);
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), 0);
    assert!(t.elapsed() >= Duration::from_millis(300));
    free(h);
}

#[test]
fn misuse_is_counted() {
    let _c = Case::new(&[]);
    take_delivered();
    let before = sim_stats();
    let (m, mut out) = (message(1), vec![0u8; 256]);

    // A session before its keys are set.
    let bare = alloc(2048, true);
    assert_ne!(bare, 0);
    assert_eq!(sync(bare, &mut req(&m, &mut out, SIGN, 0)), -22);
    free(bare);
    // A freed handle, and freeing it again; an unknown one.
    assert_eq!(sync(bare, &mut req(&m, &mut out, VERIFY, 0)), -22);
    free(bare);
    assert_eq!(sync(0x42, &mut req(&m, &mut out, VERIFY, 0)), -22);
    let h = session();
    // Wrong src_bytes / dst_bytes.
    let mut r = req(&m[..255], &mut out, VERIFY, 0);
    assert_eq!(sync(h, &mut r), -22);
    assert_eq!(r.status, -1, "status not written");
    let mut r = req(&m, &mut out, VERIFY, 0);
    r.dst_bytes = 512;
    assert_eq!(submit(h, &mut r), -22);
    // Async without a callback.
    let mut r = req(&m, &mut out, VERIFY, 0);
    r.cb = None;
    assert_eq!(submit(h, &mut r), -22);
    // A CRT part longer than half the key.
    let k = key();
    let long = vec![1u8; 129];
    let (mut dq, mut dp, mut qinv, mut q, mut p) =
        (dtb(&k.dq), dtb(&long), dtb(&k.qinv), dtb(&k.q), dtb(&k.p));
    // SAFETY: valid dtbs.
    let rc = unsafe { (api().set_crt)(h, &mut dq, &mut dp, &mut qinv, &mut q, &mut p) };
    assert_eq!(rc, -22);
    // An input not below n: completes (status 0), counted.
    let big = vec![0xFFu8; 256];
    assert_eq!(sync(h, &mut req(&big, &mut out, VERIFY, 0)), 0);
    free(h);
    let s = delta(&before, &sim_stats());
    assert_eq!(s.misuse, 9, "{s:?}");
}

#[test]
fn uninit_discards_pending_without_callbacks() {
    let mut c = Case::new(&[("KAE_SIM_LATENCY_US", "200000")]);
    take_delivered();
    let before = sim_stats();
    let h = session();
    let (_srcs, _dsts) = submit_n(h, 3);
    c.uninit();
    let s = delta(&before, &sim_stats());
    assert_eq!((s.submitted, s.callbacks, s.in_flight), (3, 0, 0), "{s:?}");
    assert!(take_delivered().is_empty());
    // Polling while not initialised is misuse.
    assert_eq!(poll(8).0, -22);
    free(h);
}

#[test]
fn fork_child_resets_and_may_init_again() {
    let c = Case::new(&[]);
    let h = session();
    // SAFETY: the child only calls the simulator and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = {
            let (m, mut out) = (message(1), vec![0u8; 256]);
            let inherited = sync(h, &mut req(&m, &mut out, VERIFY, 0)) == -22;
            let reinit = init(std::ptr::null_mut()) == 0;
            let fresh = session();
            let works = sync(fresh, &mut req(&m, &mut out, VERIFY, 0)) == 0;
            // SAFETY: initialised just above.
            unsafe { (api().uninit)() };
            u8::from(inherited) | u8::from(reinit) << 1 | u8::from(works) << 2
        };
        // SAFETY: leave the child without running the harness's atexit/drop code.
        unsafe { libc::_exit(i32::from(code)) };
    }
    let mut status = 0;
    // SAFETY: our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        7,
        "bits: inherited=-22, reinit, works"
    );
    // The parent is unaffected.
    let (m, mut out) = (message(2), vec![0u8; 256]);
    assert_eq!(sync(h, &mut req(&m, &mut out, VERIFY, 0)), 0);
    free(h);
    drop(c);
}

#[test]
fn two_device_threads_and_ctxs() {
    let mut nums = wd_ctx_nums {
        sync_ctx_num: 1,
        async_ctx_num: 2,
    };
    let mut params = wd_ctx_params {
        op_type_num: 1,
        ctx_set_num: &mut nums,
        bmp: std::ptr::null_mut(),
        cap: std::ptr::null_mut(),
    };
    let _c = Case::with_params(
        &[("KAE_SIM_DEVICE_THREADS", "2"), ("KAE_SIM_DEPTH", "1")],
        &mut params,
    );
    take_delivered();
    // Two sessions land on different ctxs: each takes one request at depth 1.
    let (a, b) = (session(), session());
    let srcs: Vec<Vec<u8>> = (0..3).map(message).collect();
    let mut dsts = vec![vec![0u8; 256]; 3];
    let (d0, rest) = dsts.split_at_mut(1);
    let (d1, d2) = rest.split_at_mut(1);
    assert_eq!(submit(a, &mut req(&srcs[0], &mut d0[0], SIGN, 0)), 0);
    assert_eq!(submit(b, &mut req(&srcs[1], &mut d1[0], SIGN, 1)), 0);
    assert_eq!(submit(a, &mut req(&srcs[2], &mut d2[0], SIGN, 2)), -16);
    poll_until(2, LIMIT);
    assert_eq!(dsts[0], reference_sign(&srcs[0]));
    assert_eq!(dsts[1], reference_sign(&srcs[1]));
    free(a);
    free(b);
}

#[test]
fn threads_submit_and_poll_concurrently() {
    let mut nums = wd_ctx_nums {
        sync_ctx_num: 2,
        async_ctx_num: 2,
    };
    let mut params = wd_ctx_params {
        op_type_num: 1,
        ctx_set_num: &mut nums,
        bmp: std::ptr::null_mut(),
        cap: std::ptr::null_mut(),
    };
    let _c = Case::with_params(
        &[("KAE_SIM_DEVICE_THREADS", "2"), ("KAE_SIM_DEPTH", "8")],
        &mut params,
    );
    take_delivered();
    let before = sim_stats();
    const PER_THREAD: usize = 150;
    let (a, b) = (session(), session());
    let workers: Vec<_> = [(a, 0u8), (b, 1u8)]
        .into_iter()
        .map(|(h, t)| {
            std::thread::spawn(move || {
                let srcs: Vec<Vec<u8>> = (0..PER_THREAD)
                    .map(|i| message((i as u8) ^ (t * 0x80)))
                    .collect();
                let mut dsts = vec![vec![0u8; 256]; PER_THREAD];
                let mut busy = 0;
                for (i, (s, d)) in srcs.iter().zip(dsts.iter_mut()).enumerate() {
                    let tag = usize::from(t) << 16 | i;
                    loop {
                        match submit(h, &mut req(s, d, VERIFY, tag)) {
                            0 => break,
                            -16 => {
                                busy += 1;
                                poll(4);
                            }
                            rc => panic!("submit: {rc}"),
                        }
                    }
                }
                // Drain: every request of this thread may be delivered by either thread.
                let t0 = Instant::now();
                while sim_stats().in_flight != 0 {
                    poll(16);
                    assert!(t0.elapsed() < LIMIT);
                }
                for (s, d) in srcs.iter().zip(&dsts) {
                    assert_eq!(*d, reference_verify(s));
                }
                busy
            })
        })
        .collect();
    let busy: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let got = take_delivered();
    assert_eq!(got.len(), 2 * PER_THREAD);
    let mut tags: Vec<usize> = got.iter().map(|d| d.cb_param).collect();
    tags.sort();
    tags.dedup();
    assert_eq!(tags.len(), 2 * PER_THREAD, "each request delivered once");
    free(a);
    free(b);
    let s = delta(&before, &sim_stats());
    assert_eq!(s.submitted, 2 * PER_THREAD as u64, "{s:?}");
    assert_eq!(s.ebusy, busy as u64);
    assert_eq!(
        (s.callbacks, s.misuse, s.in_flight),
        (2 * PER_THREAD as u64, 0, 0)
    );
    assert!(s.max_in_flight <= 16, "{s:?}");
}
