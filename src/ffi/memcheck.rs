//! Valgrind memcheck client requests, for the secret-taint check (`scripts/ctgrind.sh`,
//! `examples/ctgrind.rs`).
//!
//! The check marks secret bytes *undefined*: memcheck then reports every conditional jump,
//! and every memory address, that is computed from them. A value that is public by design
//! (a signature, the ok/error result of a decryption that reports padding errors) is marked
//! *defined* again at the point where it becomes public ([`public_usize`],
//! [`crate::rsa::padding::ct::declassify`]).
//!
//! A client request is valgrind's "magic" instruction sequence (x86_64: four rotations of
//! %rdi that add up to 128 bits, then `xchg %rbx,%rbx`, with the request block's address in
//! %rax and the result in %rdx). On a real CPU the sequence changes nothing and leaves the
//! default result in %rdx, so every function here is a few-instruction no-op outside
//! valgrind. Other architectures: no-ops (the check runs on x86_64 only).

/// memcheck's request numbers: `VG_USERREQ_TOOL_BASE('M','C') + 1 / + 2` (memcheck.h).
const MAKE_MEM_UNDEFINED: usize = (((b'M' as usize) << 24) | ((b'C' as usize) << 16)) + 1;
const MAKE_MEM_DEFINED: usize = MAKE_MEM_UNDEFINED + 1;
/// Core requests, answered by any valgrind tool (valgrind.h).
const RUNNING_ON_VALGRIND: usize = 0x1001;
const PRINTF_VALIST_BY_REF: usize = 0x1403;
const STACK_REGISTER: usize = 0x1501;
const STACK_DEREGISTER: usize = 0x1502;

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn client_request(default: usize, request: usize, arg1: usize, arg2: usize) -> usize {
    let args: [usize; 6] = [request, arg1, arg2, 0, 0, 0];
    let result: usize;
    // SAFETY: the four rotations of %rdi add up to 128 bits (a no-op) and `xchg %rbx,%rbx`
    // exchanges a register with itself, so natively the block only moves `default` to %rdx;
    // %rdi is restored (declared clobbered anyway) and no memory is written. Under valgrind
    // the sequence is a client request that reads the six words at `args` (alive and
    // initialised for the whole block) and changes only valgrind's shadow state, never the
    // program's memory or registers other than %rdx.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") default => result,
            out("rdi") _,
            options(nostack),
        );
    }
    result
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
#[inline(always)]
fn client_request(default: usize, _request: usize, _arg1: usize, _arg2: usize) -> usize {
    default
}

/// Tells valgrind that `start..end` (lowest byte, one past the highest) is a stack the program
/// switches to (`ffi::stack`), so a switch is not taken for a huge frame; the id is for
/// [`deregister_stack`]. 0 outside valgrind.
pub fn register_stack(start: usize, end: usize) -> usize {
    client_request(0, STACK_REGISTER, start, end - 1)
}

/// Makes `len` bytes at `start` addressable for memcheck (a switched-to stack's memory below
/// its last frame, which memcheck holds inaccessible once the program left it).
pub fn make_addressable(start: usize, len: usize) {
    client_request(0, MAKE_MEM_UNDEFINED, start, len);
}

/// Undoes [`register_stack`] (before the memory is unmapped).
pub fn deregister_stack(id: usize) {
    if id != 0 {
        client_request(0, STACK_DEREGISTER, id, 0);
    }
}

/// True under valgrind (any tool).
pub fn running_on_valgrind() -> bool {
    client_request(0, RUNNING_ON_VALGRIND, 0, 0) != 0
}

/// Writes `text` into valgrind's log (in XML mode a `<clientmsg>`), in order with the error
/// reports: the taint check uses it to mark where each operation starts. A `%` is replaced
/// (the text is valgrind's format string, with no arguments). No-op outside valgrind.
#[doc(hidden)]
pub fn log_marker(text: &str) {
    let mut fmt: Vec<u8> = text
        .bytes()
        .map(|b| if b == b'%' || b == 0 { b'_' } else { b })
        .collect();
    fmt.push(0);
    // The format has no conversions, so valgrind never reads the argument list; it still
    // gets the address of a zeroed one.
    let no_args = [0usize; 4];
    client_request(
        0,
        PRINTF_VALIST_BY_REF,
        fmt.as_ptr() as usize,
        no_args.as_ptr() as usize,
    );
}

/// Marks `buf` as secret (memcheck: undefined). Its contents are not changed.
#[doc(hidden)]
#[inline(never)]
pub fn mark_secret(buf: &[u8]) {
    client_request(0, MAKE_MEM_UNDEFINED, buf.as_ptr() as usize, buf.len());
}

/// Marks `buf` as public (memcheck: defined). Its contents are not changed.
#[doc(hidden)]
#[inline(never)]
pub fn mark_public(buf: &[u8]) {
    client_request(0, MAKE_MEM_DEFINED, buf.as_ptr() as usize, buf.len());
}

/// Marks the limbs in `buf` as secret (memcheck: undefined), like [`mark_secret`].
#[doc(hidden)]
#[inline(never)]
pub fn mark_secret_words(buf: &[u64]) {
    client_request(
        0,
        MAKE_MEM_UNDEFINED,
        buf.as_ptr() as usize,
        core::mem::size_of_val(buf),
    );
}

/// Marks the limbs in `buf` as public (memcheck: defined), like [`mark_public`].
#[doc(hidden)]
#[inline(never)]
pub fn mark_public_words(buf: &[u64]) {
    client_request(
        0,
        MAKE_MEM_DEFINED,
        buf.as_ptr() as usize,
        core::mem::size_of_val(buf),
    );
}

/// Returns `x` marked public: for a secret-derived word that is allowed to become public
/// (declassification). The value itself is unchanged.
#[doc(hidden)]
#[inline(always)]
pub fn public_usize(x: usize) -> usize {
    let cell = [x];
    // The request reads the address of `cell`, so the compiler must have stored `x` there;
    // black_box makes it reload the (now defined) word afterwards.
    client_request(
        0,
        MAKE_MEM_DEFINED,
        cell.as_ptr() as usize,
        core::mem::size_of::<usize>(),
    );
    core::hint::black_box(cell)[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside valgrind every request is a no-op that returns its default.
    #[test]
    fn requests_are_no_ops_natively() {
        if running_on_valgrind() {
            return; // under valgrind the shadow state changes; nothing visible to check
        }
        assert_eq!(client_request(7, RUNNING_ON_VALGRIND, 0, 0), 7);
        let buf = [1u8, 2, 3];
        mark_secret(&buf);
        mark_public(&buf);
        assert_eq!(buf, [1, 2, 3]);
        assert_eq!(public_usize(0xdead_beef), 0xdead_beef);
        log_marker("100% harmless");
        assert_eq!(MAKE_MEM_UNDEFINED, 0x4d43_0001);
        assert_eq!(MAKE_MEM_DEFINED, 0x4d43_0002);
    }
}
