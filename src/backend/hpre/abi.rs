//! UADK's RSA ABI (`wd_rsa.h`, `wd.h`, `wd_sched.h` of UADK 2.10), declared by hand for
//! run-time loading: kae must build and run on machines without UADK, so nothing here links
//! against it. Layouts are checked at compile time against the sizes and offsets measured from
//! UADK 2.10 (LP64; x86_64 and aarch64 agree), restated in `shared/reference/uadk-rsa-abi.md`.
//!
//! Version hazard: `wd_rsa_sess_setup` grew from 16 to 80 bytes in 2.10 without a SONAME change.
//! kae always passes the zeroed 80-byte form, which older libraries read the first 16 bytes of.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};
use core::mem::{align_of, offset_of, size_of};

/// UADK's `handle_t`: an opaque `uintptr_t`; 0 means "none" (a failed `wd_rsa_alloc_sess`).
pub type handle_t = usize;

/// `struct wd_dtb`: a big-endian number in a buffer (only `data` and `dsize` are read).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wd_dtb {
    pub data: *mut c_char,
    pub dsize: u32,
    pub bsize: u32,
}

/// The completion callback; it receives the library's own copy of the request.
pub type wd_rsa_cb = unsafe extern "C" fn(req: *mut c_void);

/// `struct wd_rsa_req`: one operation. `src_bytes` and `dst_bytes` must both be the key size.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wd_rsa_req {
    pub src: *mut c_void,
    pub dst: *mut c_void,
    pub src_bytes: u32,
    pub dst_bytes: u32,
    pub cb: Option<wd_rsa_cb>,
    pub cb_param: *mut c_void,
    pub status: c_int,
    pub data_fmt: u8,
    pub op_type: u8,
}

/// `struct wd_mm_ops` (UADK 2.10): memory callbacks the library fills in for the AUTO and
/// PROXY memory types; kae leaves it zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wd_mm_ops {
    pub alloc: *mut c_void,
    pub free: *mut c_void,
    pub iova_map: *mut c_void,
    pub iova_unmap: *mut c_void,
    pub get_bufsize: *mut c_void,
    pub usr: *mut c_void,
    pub sva_mode: bool,
}

/// `struct wd_rsa_sess_setup`, the 80-byte form of UADK 2.10 (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wd_rsa_sess_setup {
    pub key_bits: u16,
    pub is_crt: bool,
    pub sched_param: *mut c_void,
    pub mm_ops: wd_mm_ops,
    pub mm_type: c_int,
}

/// `struct sched_params` (20 bytes since 2.10, `dev_id` added).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sched_params {
    pub numa_id: c_int,
    pub type_: u8,
    pub mode: u8,
    pub begin: u32,
    pub end: u32,
    pub dev_id: u32,
}

/// `struct wd_ctx_nums`: queues per NUMA node for one operation type.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct wd_ctx_nums {
    pub sync_ctx_num: u32,
    pub async_ctx_num: u32,
}

/// `struct wd_cap_config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct wd_cap_config {
    pub ctx_msg_num: u32,
    pub resv: u32,
}

/// `struct wd_ctx_params` for `wd_rsa_init2_`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wd_ctx_params {
    pub op_type_num: u32,
    pub ctx_set_num: *mut wd_ctx_nums,
    pub bmp: *mut c_void,
    pub cap: *mut wd_cap_config,
}

// Operation types of `wd_rsa_req.op_type`.
pub const WD_RSA_SIGN: u8 = 1;
pub const WD_RSA_VERIFY: u8 = 2;
// Scheduling policies and task types for `wd_rsa_init2_`.
pub const SCHED_POLICY_RR: u32 = 0;
pub const TASK_HW: c_int = 1;
// Context modes of `sched_params.mode`.
pub const CTX_MODE_SYNC: u8 = 0;
pub const CTX_MODE_ASYNC: u8 = 1;
// Memory types of `wd_rsa_sess_setup.mm_type`.
pub const UADK_MEM_AUTO: c_int = 0;
pub const UADK_MEM_PROXY: c_int = 2;

/// Negated errno values the library returns.
pub mod err {
    pub const EIO: i32 = 5;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const ETIMEDOUT: i32 = 110;
    /// Completion statuses: the hardware did not run it, an input error, an output error.
    pub const STATUS_NOT_RUN: i32 = 22;
    pub const STATUS_OUT_EPARA: i32 = 66;
    pub const STATUS_IN_EPARA: i32 = 67;
}

/// Key sizes HPRE takes (bits); every other size stays on the CPU.
pub const HPRE_KEY_BITS: [u32; 4] = [1024, 2048, 3072, 4096];

// Entry points kae resolves with dlsym (names are the exported symbols).
pub type wd_rsa_init2_fn = unsafe extern "C" fn(
    alg: *mut c_char,
    sched_type: u32,
    task_type: c_int,
    params: *mut wd_ctx_params,
) -> c_int;
pub type wd_rsa_uninit2_fn = unsafe extern "C" fn();
pub type wd_rsa_alloc_sess_fn = unsafe extern "C" fn(setup: *mut wd_rsa_sess_setup) -> handle_t;
pub type wd_rsa_free_sess_fn = unsafe extern "C" fn(sess: handle_t);
pub type wd_rsa_set_crt_prikey_params_fn = unsafe extern "C" fn(
    sess: handle_t,
    dq: *mut wd_dtb,
    dp: *mut wd_dtb,
    qinv: *mut wd_dtb,
    q: *mut wd_dtb,
    p: *mut wd_dtb,
) -> c_int;
pub type wd_rsa_set_pubkey_params_fn =
    unsafe extern "C" fn(sess: handle_t, e: *mut wd_dtb, n: *mut wd_dtb) -> c_int;
pub type wd_do_rsa_sync_fn = unsafe extern "C" fn(sess: handle_t, req: *mut wd_rsa_req) -> c_int;
pub type wd_do_rsa_async_fn = unsafe extern "C" fn(sess: handle_t, req: *mut wd_rsa_req) -> c_int;
pub type wd_rsa_poll_fn = unsafe extern "C" fn(expt: u32, count: *mut u32) -> c_int;

// Layout checks: sizes, alignments and every field offset, as measured from UADK 2.10.
const _: () = {
    assert!(size_of::<wd_dtb>() == 16 && align_of::<wd_dtb>() == 8);
    assert!(offset_of!(wd_dtb, data) == 0);
    assert!(offset_of!(wd_dtb, dsize) == 8);
    assert!(offset_of!(wd_dtb, bsize) == 12);

    assert!(size_of::<wd_rsa_req>() == 48 && align_of::<wd_rsa_req>() == 8);
    assert!(offset_of!(wd_rsa_req, src) == 0);
    assert!(offset_of!(wd_rsa_req, dst) == 8);
    assert!(offset_of!(wd_rsa_req, src_bytes) == 16);
    assert!(offset_of!(wd_rsa_req, dst_bytes) == 20);
    assert!(offset_of!(wd_rsa_req, cb) == 24);
    assert!(offset_of!(wd_rsa_req, cb_param) == 32);
    assert!(offset_of!(wd_rsa_req, status) == 40);
    assert!(offset_of!(wd_rsa_req, data_fmt) == 44);
    assert!(offset_of!(wd_rsa_req, op_type) == 45);

    assert!(size_of::<wd_mm_ops>() == 56 && align_of::<wd_mm_ops>() == 8);
    assert!(offset_of!(wd_mm_ops, usr) == 40);
    assert!(offset_of!(wd_mm_ops, sva_mode) == 48);

    assert!(size_of::<wd_rsa_sess_setup>() == 80 && align_of::<wd_rsa_sess_setup>() == 8);
    assert!(offset_of!(wd_rsa_sess_setup, key_bits) == 0);
    assert!(offset_of!(wd_rsa_sess_setup, is_crt) == 2);
    assert!(offset_of!(wd_rsa_sess_setup, sched_param) == 8);
    assert!(offset_of!(wd_rsa_sess_setup, mm_ops) == 16);
    assert!(offset_of!(wd_rsa_sess_setup, mm_type) == 72);

    assert!(size_of::<sched_params>() == 20 && align_of::<sched_params>() == 4);
    assert!(offset_of!(sched_params, numa_id) == 0);
    assert!(offset_of!(sched_params, type_) == 4);
    assert!(offset_of!(sched_params, mode) == 5);
    assert!(offset_of!(sched_params, begin) == 8);
    assert!(offset_of!(sched_params, end) == 12);
    assert!(offset_of!(sched_params, dev_id) == 16);

    assert!(size_of::<wd_ctx_nums>() == 8 && align_of::<wd_ctx_nums>() == 4);
    assert!(size_of::<wd_cap_config>() == 8 && align_of::<wd_cap_config>() == 4);

    assert!(size_of::<wd_ctx_params>() == 32 && align_of::<wd_ctx_params>() == 8);
    assert!(offset_of!(wd_ctx_params, op_type_num) == 0);
    assert!(offset_of!(wd_ctx_params, ctx_set_num) == 8);
    assert!(offset_of!(wd_ctx_params, bmp) == 16);
    assert!(offset_of!(wd_ctx_params, cap) == 24);
};

impl wd_rsa_sess_setup {
    /// The all-zero 80-byte setup for a CRT session of `key_bits` (AUTO memory, no scheduler
    /// parameters): safe for libraries before and after 2.10.
    pub fn crt(key_bits: u16) -> wd_rsa_sess_setup {
        wd_rsa_sess_setup {
            key_bits,
            is_crt: true,
            sched_param: core::ptr::null_mut(),
            mm_ops: wd_mm_ops {
                alloc: core::ptr::null_mut(),
                free: core::ptr::null_mut(),
                iova_map: core::ptr::null_mut(),
                iova_unmap: core::ptr::null_mut(),
                get_bufsize: core::ptr::null_mut(),
                usr: core::ptr::null_mut(),
                sva_mode: false,
            },
            mm_type: UADK_MEM_AUTO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_is_always_the_zeroed_80_byte_form() {
        let s = wd_rsa_sess_setup::crt(2048);
        assert_eq!(size_of_val(&s), 80);
        assert_eq!(
            (s.key_bits, s.is_crt, s.mm_type),
            (2048, true, UADK_MEM_AUTO)
        );
        assert!(s.sched_param.is_null() && s.mm_ops.alloc.is_null());
    }
}
