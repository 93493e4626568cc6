//! Thread scheduling policy (libc).

/// Puts the calling thread in the SCHED_IDLE class (Linux): it runs only when no thread of
/// normal priority wants its CPU. False when the kernel refused.
pub fn make_current_thread_idle() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for SCHED_IDLE,
        // whose priority must be 0. The call changes nothing but this thread's policy.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
