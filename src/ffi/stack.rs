//! A stack of its own for the multi-buffer kernel.
//!
//! A kernel call can be made on an OpenSSL async job (the request that fills a batch computes
//! it), whose stack is 32 KiB in all; the kernel's frames alone take up to about 23 KiB at
//! RSA-4096, more than what is left there (a segfault, found with `openssl speed -async_jobs`
//! on an IFMA machine). And those frames hold secret-derived values (spilled accumulators,
//! R² mod p) that must not stay behind. So the kernel runs on a stack of [`SIZE`] bytes that
//! belongs to the calling thread, below a guard page, and that stack is zeroed after each
//! call. Made at a thread's first kernel call, unmapped when the thread exits.

use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Usable bytes: more than twice the deepest kernel call measured in an optimised build.
/// Unoptimised (debug) builds keep every unrolled temporary in its own stack slot, so their
/// frames are many times larger: a test or debug build gets a bigger stack, not a segfault.
pub const SIZE: usize = if cfg!(debug_assertions) {
    4 * 1024 * 1024
} else {
    64 * 1024
};

struct KernelStack {
    /// The mapping: one guard page, then `SIZE` usable bytes.
    map: *mut u8,
    guard: usize,
    /// Its registration with valgrind (0 outside it).
    valgrind_id: usize,
}

impl KernelStack {
    fn new() -> Option<KernelStack> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let guard = usize::try_from(page)
            .ok()
            .filter(|&p| p > 0 && SIZE % p == 0)?;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                guard + SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let mut stack = KernelStack {
            map: map.cast(),
            guard,
            valgrind_id: 0,
        };
        // SAFETY: the first page of the mapping made above (the stack grows down onto it).
        if unsafe { libc::mprotect(map, guard, libc::PROT_NONE) } != 0 {
            return None; // dropped: unmapped
        }
        let base = stack.base() as usize;
        stack.valgrind_id = super::memcheck::register_stack(base, base + SIZE);
        Some(stack)
    }

    fn base(&self) -> *mut u8 {
        // SAFETY: `guard` bytes into the mapping, which is `guard + SIZE` long.
        unsafe { self.map.add(self.guard) }
    }

    /// Zeroes the usable part (what the last call left: secret-derived values).
    fn wipe(&mut self) {
        super::memcheck::make_addressable(self.base() as usize, SIZE);
        // SAFETY: the usable part of the mapping, writable, used by no frame now.
        unsafe { std::ptr::write_bytes(self.base(), 0, SIZE) };
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for KernelStack {
    fn drop(&mut self) {
        super::memcheck::deregister_stack(self.valgrind_id);
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.guard + SIZE) };
    }
}

thread_local! {
    static STACK: RefCell<Option<KernelStack>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's kernel stack and zeroes that stack afterwards. None when no
/// stack could be mapped (the caller fails the call: it must not run the kernel on a stack
/// that may be too small). A panic in `f` is carried across and resumed here.
pub fn on_kernel_stack<R>(f: impl FnOnce() -> R) -> Option<R> {
    STACK
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if slot.is_none() {
                *slot = KernelStack::new();
            }
            let stack = slot.as_mut()?;
            let mut f = Some(f);
            let mut out = None;
            // SAFETY: `base..base + SIZE` is writable memory of this thread, used by nothing
            // else while the closure runs (the RefCell is borrowed), page-aligned at both
            // ends, with a guard page below; the closure does not unwind through psm's frame
            // (caught here and resumed after the switch back).
            let caught = unsafe {
                psm::on_stack(stack.base(), SIZE, || {
                    catch_unwind(AssertUnwindSafe(|| {
                        out = f.take().map(|f| f());
                    }))
                })
            };
            stack.wipe();
            match caught {
                Ok(()) => out,
                Err(panic) => resume_unwind(panic),
            }
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_another_stack_and_wipes_it() {
        let here = psm::stack_pointer() as usize;
        let there = on_kernel_stack(|| {
            let probe = [0x5au8; 256];
            std::hint::black_box(&probe);
            psm::stack_pointer() as usize
        })
        .expect("a kernel stack");
        assert!(
            here.abs_diff(there) > SIZE,
            "the closure ran on the caller's stack"
        );
        let clean = STACK.with(|cell| {
            let s = cell.borrow();
            let s = s.as_ref().unwrap();
            // SAFETY: the usable part of the mapping, not in use now.
            let bytes = unsafe { std::slice::from_raw_parts(s.base(), SIZE) };
            bytes.iter().all(|&b| b == 0)
        });
        assert!(clean, "the kernel stack holds what the closure left");
    }

    #[test]
    fn a_panic_comes_back_to_the_caller() {
        let r = catch_unwind(|| on_kernel_stack(|| panic!("in the kernel")));
        assert!(r.is_err());
        assert_eq!(on_kernel_stack(|| 7), Some(7), "the stack is usable again");
    }

    #[test]
    fn deep_frames_fit() {
        // A frame of 40 KiB, more than the kernel's deepest.
        let r = on_kernel_stack(|| {
            let big = [1u8; 40 * 1024];
            std::hint::black_box(&big)
                .iter()
                .map(|&b| b as usize)
                .sum::<usize>()
        });
        assert_eq!(r, Some(40 * 1024));
    }
}
