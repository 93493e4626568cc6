//! Thread scheduling knobs (libc).

/// Asks the kernel to wake the calling thread's short sleeps close to their deadline (timer
/// slack 1 µs instead of 50 µs): the multi-buffer flusher sleeps for tens of microseconds.
/// Best effort: a refusal only makes those sleeps longer.
pub fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument (nanoseconds) and
        // changes only the calling thread's timer slack; no pointer is passed.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
        }
    }
}

/// Puts the calling thread in SCHED_BATCH: the same share of CPU as any ordinary thread (it is
/// never starved, unlike SCHED_IDLE), but its wake-ups do not preempt the thread running on its
/// CPU; it runs when that thread blocks or at the scheduler's next turn. Best effort: a refusal
/// leaves it an ordinary thread.
pub fn no_wakeup_preemption() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call; pid 0 is the calling thread.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
}

/// The calling thread's scheduling policy (`SCHED_*`), for tests.
#[cfg(all(test, target_os = "linux"))]
pub fn current_policy() -> i32 {
    // SAFETY: no pointer is passed; pid 0 is the calling thread.
    unsafe { libc::sched_getscheduler(0) }
}

/// The calling thread's kernel id (0 where there is none to give).
pub fn current_tid() -> i32 {
    #[cfg(target_os = "linux")]
    {
        thread_local! {
            static TID: i32 = {
                // SAFETY: gettid takes no argument and cannot fail.
                unsafe { libc::gettid() }
            };
        }
        TID.with(|t| *t)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// How many CPUs the calling thread may run on (its affinity mask); 1 when that cannot be
/// told.
pub fn cpus_allowed() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // size_of::<cpu_set_t>() bytes into it, and CPU_COUNT only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                return (libc::CPU_COUNT(&set) as usize).max(1);
            }
        }
        1
    }
    #[cfg(not(target_os = "linux"))]
    {
        1
    }
}

/// Restricts the calling thread (and the threads it starts afterwards) to the first CPU of
/// its current affinity mask. For tests that need a one-CPU caller.
pub fn pin_current_thread_to_one_cpu() -> std::io::Result<()> {
    // SAFETY: zeroed cpu_set_t values are valid empty sets; sched_getaffinity writes at most
    // their size into `cur`, CPU_ISSET/CPU_SET read and write inside them, and
    // sched_setaffinity only reads `one` and changes the calling thread's mask.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut cur: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut cur) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &cur))
            .unwrap_or(0);
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(first, &mut one);
        if libc::sched_setaffinity(0, size, &one) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether thread `tid` of this process is running or waiting for a CPU (state R), read from
/// procfs; None when that cannot be told (no such thread, no procfs).
pub fn thread_is_runnable(tid: i32) -> Option<bool> {
    if tid <= 0 {
        return None;
    }
    let stat = std::fs::read(format!("/proc/self/task/{tid}/stat")).ok()?;
    // "tid (comm) S ...": the comm may hold spaces and parentheses, the state follows the
    // last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let state = *stat.get(close + 2)?;
    Some(state == b'R')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_is_runnable_and_a_sleeping_one_is_not() {
        use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
        use std::sync::Arc;
        assert_eq!(thread_is_runnable(current_tid()), Some(true));
        let tid = Arc::new(AtomicI32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (t2, s2) = (tid.clone(), stop.clone());
        let h = std::thread::spawn(move || {
            t2.store(current_tid(), Ordering::SeqCst);
            while !s2.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let sleeping = (0..50).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            thread_is_runnable(tid.load(Ordering::SeqCst)) == Some(false)
        });
        stop.store(true, Ordering::SeqCst);
        h.join().unwrap();
        assert!(sleeping, "a sleeping thread never read as not runnable");
        assert_eq!(thread_is_runnable(i32::MAX), None);
    }
}
