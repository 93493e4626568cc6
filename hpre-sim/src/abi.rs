//! The C structs of UADK 2.10's RSA API, declared here from `shared/reference/uadk-rsa-abi.md`
//! (independently of the provider's own declarations, so that a layout mistake on one side is
//! caught by the other side's checks), plus the simulator's statistics struct.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};
use core::mem::{align_of, offset_of, size_of};

/// `handle_t` (`uintptr_t`): 0 means "no session".
pub type handle_t = usize;

/// `struct wd_dtb`: a big-endian number; only `data` and `dsize` are read.
#[repr(C)]
pub struct wd_dtb {
    pub data: *mut c_char,
    pub dsize: u32,
    pub bsize: u32,
}

/// `struct wd_rsa_req`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wd_rsa_req {
    pub src: *mut c_void,
    pub dst: *mut c_void,
    pub src_bytes: u32,
    pub dst_bytes: u32,
    pub cb: Option<unsafe extern "C" fn(req: *mut c_void)>,
    pub cb_param: *mut c_void,
    pub status: c_int,
    pub data_fmt: u8,
    pub op_type: u8,
}

/// `struct wd_mm_ops` (UADK 2.10). The simulator never reads or writes it.
#[repr(C)]
pub struct wd_mm_ops {
    pub alloc: *mut c_void,
    pub free: *mut c_void,
    pub iova_map: *mut c_void,
    pub iova_unmap: *mut c_void,
    pub get_bufsize: *mut c_void,
    pub usr: *mut c_void,
    pub sva_mode: bool,
}

/// `struct wd_rsa_sess_setup`, 80-byte form of UADK 2.10. Only `key_bits` and `is_crt` are read.
#[repr(C)]
pub struct wd_rsa_sess_setup {
    pub key_bits: u16,
    pub is_crt: bool,
    pub sched_param: *mut c_void,
    pub mm_ops: wd_mm_ops,
    pub mm_type: c_int,
}

/// `struct wd_ctx_nums`.
#[repr(C)]
pub struct wd_ctx_nums {
    pub sync_ctx_num: u32,
    pub async_ctx_num: u32,
}

/// `struct wd_cap_config`.
#[repr(C)]
pub struct wd_cap_config {
    pub ctx_msg_num: u32,
    pub resv: u32,
}

/// `struct wd_ctx_params`.
#[repr(C)]
pub struct wd_ctx_params {
    pub op_type_num: u32,
    pub ctx_set_num: *mut wd_ctx_nums,
    pub bmp: *mut c_void,
    pub cap: *mut wd_cap_config,
}

/// `wd_rsa_req.op_type`: private-key operation (CRT only in the simulator).
pub const WD_RSA_SIGN: u8 = 1;
/// `wd_rsa_req.op_type`: public-key operation.
pub const WD_RSA_VERIFY: u8 = 2;

/// Returned errnos (the API returns them negated).
pub const EIO: c_int = 5;
pub const ENOMEM: c_int = 12;
pub const EBUSY: c_int = 16;
pub const ETIMEDOUT: c_int = 110;
pub const EEXIST: c_int = 17;
pub const ENODEV: c_int = 19;
pub const EINVAL: c_int = 22;
/// Completion statuses.
pub const STATUS_NOT_RUN: c_int = 22;
pub const STATUS_OUT_EPARA: c_int = 66;
pub const STATUS_IN_EPARA: c_int = 67;

/// The simulator's counters, filled by `kae_sim_stats` (16 `u64`, in this order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KaeSimStats {
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

// Layouts as measured from UADK 2.10 (LP64).
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
    assert!(offset_of!(wd_mm_ops, alloc) == 0);
    assert!(offset_of!(wd_mm_ops, free) == 8);
    assert!(offset_of!(wd_mm_ops, iova_map) == 16);
    assert!(offset_of!(wd_mm_ops, iova_unmap) == 24);
    assert!(offset_of!(wd_mm_ops, get_bufsize) == 32);
    assert!(offset_of!(wd_mm_ops, usr) == 40);
    assert!(offset_of!(wd_mm_ops, sva_mode) == 48);

    assert!(size_of::<wd_rsa_sess_setup>() == 80 && align_of::<wd_rsa_sess_setup>() == 8);
    assert!(offset_of!(wd_rsa_sess_setup, key_bits) == 0);
    assert!(offset_of!(wd_rsa_sess_setup, is_crt) == 2);
    assert!(offset_of!(wd_rsa_sess_setup, sched_param) == 8);
    assert!(offset_of!(wd_rsa_sess_setup, mm_ops) == 16);
    assert!(offset_of!(wd_rsa_sess_setup, mm_type) == 72);

    assert!(size_of::<wd_ctx_nums>() == 8 && align_of::<wd_ctx_nums>() == 4);
    assert!(offset_of!(wd_ctx_nums, sync_ctx_num) == 0);
    assert!(offset_of!(wd_ctx_nums, async_ctx_num) == 4);

    assert!(size_of::<wd_cap_config>() == 8 && align_of::<wd_cap_config>() == 4);
    assert!(offset_of!(wd_cap_config, ctx_msg_num) == 0);
    assert!(offset_of!(wd_cap_config, resv) == 4);

    assert!(size_of::<wd_ctx_params>() == 32 && align_of::<wd_ctx_params>() == 8);
    assert!(offset_of!(wd_ctx_params, op_type_num) == 0);
    assert!(offset_of!(wd_ctx_params, ctx_set_num) == 8);
    assert!(offset_of!(wd_ctx_params, bmp) == 16);
    assert!(offset_of!(wd_ctx_params, cap) == 24);

    assert!(size_of::<KaeSimStats>() == 16 * 8 && align_of::<KaeSimStats>() == 8);
    assert!(offset_of!(KaeSimStats, init_calls) == 0);
    assert!(offset_of!(KaeSimStats, misuse) == 10 * 8);
    assert!(offset_of!(KaeSimStats, callbacks) == 15 * 8);
};
