//! OpenSSL ASYNC job glue: detecting a job, our wait fd (an eventfd registered once per
//! ASYNC_WAIT_CTX under kae's key and reused), the application's wake-up callback, pausing.

use super::sys::*;
use crate::error::{KaeError, KaeResult};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

/// An eventfd shared by the wait context (which keeps one reference until its cleanup
/// callback runs) and every in-flight request that will signal it: the fd is closed only when
/// both are done, so a late completion never writes to a closed or reused descriptor.
pub struct EventFd(c_int);

impl EventFd {
    pub fn new() -> KaeResult<EventFd> {
        // SAFETY: eventfd takes no pointers and has no preconditions; a negative result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(KaeError::BackendFailure);
        }
        Ok(EventFd(fd))
    }

    pub fn fd(&self) -> c_int {
        self.0
    }

    /// Makes the fd readable (the application's poller then resumes the job).
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: we own the fd; writing 8 bytes to an eventfd.
        unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
    }

    /// Consumes pending signals (non-blocking).
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: we own the fd; reading 8 bytes; EAGAIN when empty is fine.
        unsafe { libc::read(self.0, (&mut v as *mut u64).cast(), 8) };
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: self.0 is the descriptor eventfd gave this EventFd, which alone closes it, once
        // (drop); the wait ctx and requests share it only through the Arc.
        unsafe { libc::close(self.0) };
        #[cfg(test)]
        tests::CLOSED_HERE.with(|c| c.borrow_mut().push(self.0));
    }
}

/// The key kae registers its wait fd under (the address of a private static).
static WAIT_FD_KEY: u8 = 0;

fn key() -> *const c_void {
    (&WAIT_FD_KEY as *const u8).cast()
}

unsafe extern "C" fn fd_cleanup(
    _ctx: *mut ASYNC_WAIT_CTX,
    _key: *const c_void,
    _fd: c_int,
    custom: *mut c_void,
) {
    if !custom.is_null() {
        // SAFETY: custom is the Arc<EventFd> we leaked in `AsyncJob::wait_fd`.
        let _ =
            std::panic::catch_unwind(|| drop(unsafe { Arc::from_raw(custom as *const EventFd) }));
    }
}

/// How a finished request wakes its job. Opaque: a callback wake-up is made only by
/// [`JobWake::callback`] (unsafe) or [`AsyncJob::wake`], so the safe [`JobWake::wake`] can
/// trust it.
#[derive(Clone)]
pub struct JobWake(Wake);

#[derive(Clone)]
enum Wake {
    /// The application's callback (ASYNC_WAIT_CTX_set_callback); it polls no fd. `arg` is
    /// kept as an address so that the wake-up can cross threads.
    Callback { cb: ASYNC_callback_fn, arg: usize },
    /// Our eventfd, registered in the wait context.
    Fd(Arc<EventFd>),
}

impl JobWake {
    /// A wake-up that calls `cb(arg)`.
    ///
    /// # Safety
    /// Calling `cb(arg)` is sound from any thread, any number of times, for as long as the
    /// returned value or a clone of it exists. For the callback of an ASYNC wait context this
    /// is ASYNC_WAIT_CTX_set_callback's contract for the life of the job.
    pub unsafe fn callback(cb: ASYNC_callback_fn, arg: *mut c_void) -> JobWake {
        JobWake(Wake::Callback {
            cb,
            arg: arg as usize,
        })
    }

    /// A wake-up that signals our eventfd.
    pub fn fd(fd: Arc<EventFd>) -> JobWake {
        JobWake(Wake::Fd(fd))
    }

    pub fn wake(&self) {
        match &self.0 {
            // SAFETY: cb and arg came through JobWake::callback, whose contract makes calling
            // cb(arg) sound from this thread while this value exists.
            Wake::Callback { cb, arg } => unsafe {
                cb(*arg as *mut c_void);
            },
            Wake::Fd(fd) => fd.signal(),
        }
    }
}

/// The ASYNC job this thread is running inside, if any.
pub struct AsyncJob {
    wait_ctx: *mut ASYNC_WAIT_CTX,
}

impl AsyncJob {
    pub fn current() -> Option<AsyncJob> {
        // SAFETY: ASYNC_get_current_job takes no arguments and only reads this thread's ASYNC
        // state.
        let job = unsafe { ASYNC_get_current_job() };
        if job.is_null() {
            return None;
        }
        // SAFETY: job is the non-NULL job running on this thread, live while we run inside it.
        let wait_ctx = unsafe { ASYNC_get_wait_ctx(job) };
        if wait_ctx.is_null() {
            return None;
        }
        Some(AsyncJob { wait_ctx })
    }

    /// The wake-up the application expects: its callback if it set one, else our eventfd
    /// (created on first use and reused for the life of the wait context).
    pub fn wake(&self) -> KaeResult<JobWake> {
        let mut cb: Option<ASYNC_callback_fn> = None;
        let mut arg: *mut c_void = core::ptr::null_mut();
        // SAFETY: wait_ctx is the wait context of the job running on this thread (from current),
        // kept alive by the application until the job finishes; cb and arg are locals.
        if unsafe { ASYNC_WAIT_CTX_get_callback(self.wait_ctx, &mut cb, &mut arg) } == 1 {
            if let Some(cb) = cb {
                // SAFETY: the application registered cb and arg on the wait context of the job
                // running on this thread, for kae to call from any thread to have the job
                // resumed (ASYNC_WAIT_CTX_set_callback); the application keeps both valid while
                // the job is paused, and the waiter releases this wake-up at completion.
                return Ok(unsafe { JobWake::callback(cb, arg) });
            }
        }
        Ok(JobWake::fd(self.wait_fd()?))
    }

    fn wait_fd(&self) -> KaeResult<Arc<EventFd>> {
        let mut fd: c_int = -1;
        let mut custom: *mut c_void = core::ptr::null_mut();
        // SAFETY: wait_ctx is the live wait context of the current job; key() is our static's
        // address; fd and custom are locals.
        if unsafe { ASYNC_WAIT_CTX_get_fd(self.wait_ctx, key(), &mut fd, &mut custom) } == 1
            && !custom.is_null()
        {
            // SAFETY: custom is our leaked Arc<EventFd>; take another reference.
            unsafe {
                Arc::increment_strong_count(custom as *const EventFd);
                return Ok(Arc::from_raw(custom as *const EventFd));
            }
        }
        let ev = Arc::new(EventFd::new()?);
        let raw = Arc::into_raw(ev.clone()) as *mut c_void;
        // SAFETY: valid wait ctx; ownership of one reference passes to the ctx, released by
        // fd_cleanup when the ctx is freed or the fd cleared.
        if unsafe {
            ASYNC_WAIT_CTX_set_wait_fd(self.wait_ctx, key(), ev.fd(), raw, Some(fd_cleanup))
        } != 1
        {
            // SAFETY: registration failed, so the reference is still ours.
            drop(unsafe { Arc::from_raw(raw as *const EventFd) });
            return Err(KaeError::BackendFailure);
        }
        Ok(ev)
    }

    /// Consumes pending signals on our wait fd, if this wait context has one. Looks the fd up
    /// instead of keeping a reference on the job's stack: a job the application never resumes
    /// must not keep the fd alive.
    pub fn drain_wait_fd(&self) {
        let mut fd: c_int = -1;
        let mut custom: *mut c_void = core::ptr::null_mut();
        // SAFETY: wait_ctx is the live wait context of the current job; key() is our static's
        // address; fd and custom are locals.
        if unsafe { ASYNC_WAIT_CTX_get_fd(self.wait_ctx, key(), &mut fd, &mut custom) } == 1
            && !custom.is_null()
        {
            // SAFETY: custom is our EventFd, kept alive by the wait ctx while registered.
            unsafe { (*(custom as *const EventFd)).drain() };
        }
    }

    pub fn set_status(&self, status: c_int) {
        // SAFETY: wait_ctx is the live wait context of the job running on this thread (from
        // current).
        unsafe { ASYNC_WAIT_CTX_set_status(self.wait_ctx, status) };
    }

    /// Returns to the application; it resumes the job later (after our fd or callback
    /// fired, or spuriously).
    pub fn pause(&self) -> KaeResult<()> {
        // SAFETY: we are inside a job (checked by `current`).
        if unsafe { ASYNC_pause_job() } == 1 {
            Ok(())
        } else {
            Err(KaeError::BackendFailure)
        }
    }
}

/// Runs a closure inside a real ASYNC job with its own wait context, for unit tests of code
/// that pauses (the pool's async path).
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    extern "C" {
        fn ASYNC_WAIT_CTX_new() -> *mut ASYNC_WAIT_CTX;
        fn ASYNC_WAIT_CTX_free(ctx: *mut ASYNC_WAIT_CTX);
        fn ASYNC_WAIT_CTX_get_all_fds(
            ctx: *mut ASYNC_WAIT_CTX,
            fd: *mut c_int,
            numfds: *mut usize,
        ) -> c_int;
        fn ASYNC_start_job(
            job: *mut *mut ASYNC_JOB,
            ctx: *mut ASYNC_WAIT_CTX,
            ret: *mut c_int,
            func: unsafe extern "C" fn(*mut c_void) -> c_int,
            args: *mut c_void,
            size: usize,
        ) -> c_int;
    }

    const ASYNC_PAUSE: c_int = 2;
    const ASYNC_FINISH: c_int = 3;

    type Body = Box<dyn FnMut(&AsyncJob)>;

    #[derive(Debug, PartialEq, Eq)]
    pub enum Step {
        Paused,
        Finished,
    }

    pub struct TestJob {
        ctx: *mut ASYNC_WAIT_CTX,
        job: *mut ASYNC_JOB,
        /// Boxed twice so the job's copy of the argument (a thin pointer) stays valid.
        body: Box<Body>,
    }

    unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
        // SAFETY: arg points at ASYNC's copy of the `*mut Body` passed to ASYNC_start_job,
        // which points into the TestJob that outlives the job.
        let body = unsafe { &mut **(arg as *mut *mut Body) };
        let Some(job) = AsyncJob::current() else {
            return 0;
        };
        // No unwinding through the C frames of the job.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&job))) {
            Ok(()) => 1,
            Err(_) => 0,
        }
    }

    impl TestJob {
        pub fn new(body: impl FnMut(&AsyncJob) + 'static) -> TestJob {
            // SAFETY: ASYNC_WAIT_CTX_new has no preconditions; the result is asserted non-NULL.
            let ctx = unsafe { ASYNC_WAIT_CTX_new() };
            assert!(!ctx.is_null());
            TestJob {
                ctx,
                job: core::ptr::null_mut(),
                body: Box::new(Box::new(body)),
            }
        }

        /// Starts the job, or resumes it after a pause.
        pub fn step(&mut self) -> Step {
            let mut arg: *mut Body = &mut *self.body;
            let mut ret: c_int = 0;
            // SAFETY: valid ctx; args is copied by ASYNC_start_job; the body it points to
            // lives in self, which the caller keeps until the job finished.
            let r = unsafe {
                ASYNC_start_job(
                    &mut self.job,
                    self.ctx,
                    &mut ret,
                    trampoline,
                    (&mut arg as *mut *mut Body).cast(),
                    core::mem::size_of::<*mut Body>(),
                )
            };
            match r {
                ASYNC_PAUSE => Step::Paused,
                ASYNC_FINISH => {
                    assert_eq!(ret, 1, "the job body panicked or found no job");
                    Step::Finished
                }
                other => panic!("ASYNC_start_job returned {other}"),
            }
        }

        /// Wait fds present in the job's wait context.
        pub fn fds(&self) -> usize {
            let mut n: usize = 0;
            // SAFETY: valid ctx; NULL fd array asks for the count only.
            let ok = unsafe { ASYNC_WAIT_CTX_get_all_fds(self.ctx, core::ptr::null_mut(), &mut n) };
            assert_eq!(ok, 1);
            n
        }
    }

    impl Drop for TestJob {
        fn drop(&mut self) {
            assert!(
                self.job.is_null() || std::thread::panicking(),
                "TestJob dropped while its job is paused"
            );
            // SAFETY: self.ctx is the wait ctx this TestJob created and owns; the assert above
            // ensures no paused job still refers to it, and drop runs once.
            unsafe { ASYNC_WAIT_CTX_free(self.ctx) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn ASYNC_WAIT_CTX_new() -> *mut ASYNC_WAIT_CTX;
        fn ASYNC_WAIT_CTX_free(ctx: *mut ASYNC_WAIT_CTX);
    }

    thread_local! {
        /// The fds an `EventFd` closed on this thread. Tests run in parallel and reuse fd
        /// numbers at once, so "fcntl fails" cannot show that *our* fd was closed.
        pub(super) static CLOSED_HERE: std::cell::RefCell<Vec<c_int>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    fn closed_here(fd: c_int) -> bool {
        CLOSED_HERE.with(|c| c.borrow().contains(&fd))
    }

    fn fd_open(fd: c_int) -> bool {
        // SAFETY: fcntl(F_GETFD) only queries a descriptor number; an unused one just fails with
        // EBADF.
        unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
    }

    #[test]
    fn wait_fd_lives_until_the_wait_ctx_and_every_request_let_go() {
        // SAFETY: ASYNC_WAIT_CTX_new has no preconditions.
        let ctx = unsafe { ASYNC_WAIT_CTX_new() };
        let job = AsyncJob { wait_ctx: ctx };
        let ev = job.wait_fd().unwrap();
        let fd = ev.fd();
        let again = job.wait_fd().unwrap();
        assert_eq!(again.fd(), fd, "one fd per wait ctx, reused");
        drop(again);
        drop(ev);
        assert!(
            fd_open(fd) && !closed_here(fd),
            "the wait ctx still holds the fd"
        );
        let in_flight = job.wait_fd().unwrap(); // a request still holding it
        in_flight.signal();
        job.drain_wait_fd();
        // SAFETY: ctx is ours; the cleanup callback releases the ctx's reference.
        unsafe { ASYNC_WAIT_CTX_free(ctx) };
        assert!(
            fd_open(fd),
            "an in-flight request keeps the fd open after the ctx is freed"
        );
        in_flight.signal();
        assert!(!closed_here(fd), "still open while a request holds it");
        drop(in_flight);
        assert!(closed_here(fd), "closed once the last holder let go");
    }
}
