//! fork() safety for process-wide locks: a mutex a forked child can always take.
//!
//! A child of `fork()` has only the forking thread; a lock another parent thread held at that
//! moment stays locked in the child forever. `ForkMutex` is a plain pthread mutex whose owner
//! registers `pthread_atfork` handlers that take it before the fork (`lock_for_fork`), release
//! it in the parent and start it afresh in the child, so the child's copy is never held by a
//! thread it does not have.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// A mutex for statics, made fork-safe by its owner's `pthread_atfork` handlers. Critical
/// sections must be short and must not wait for anything a forking thread could hold (the
/// fork waits for them). No poisoning: a panic inside releases the lock.
pub struct ForkMutex<T> {
    raw: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by the pthread mutex, as for std's Mutex.
unsafe impl<T: Send> Sync for ForkMutex<T> {}
// SAFETY: moving a ForkMutex moves its T (hence T: Send); a move needs ownership, so no
// guard is alive then, and no lock taken by lock_for_fork (which keeps the lock without a
// guard) either: that takes `&'static self`, a ForkMutex that never moves or drops.
unsafe impl<T: Send> Send for ForkMutex<T> {}

pub struct ForkMutexGuard<'a, T> {
    m: &'a ForkMutex<T>,
    /// pthread mutexes are unlocked by the thread that locked them.
    _not_send: PhantomData<*const ()>,
}

impl<T> ForkMutex<T> {
    /// For statics (a pthread mutex must not move once used).
    pub const fn new(v: T) -> ForkMutex<T> {
        ForkMutex {
            raw: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            data: UnsafeCell::new(v),
        }
    }

    /// Takes the lock. Only on a `'static` mutex: POSIX leaves a pthread mutex that moved
    /// after use undefined, and a `'static` borrow guarantees it never moves or drops.
    pub fn lock(&'static self) -> ForkMutexGuard<'static, T> {
        self.raw_lock();
        ForkMutexGuard {
            m: self,
            _not_send: PhantomData,
        }
    }

    fn raw_lock(&self) {
        // SAFETY: an initialised mutex (PTHREAD_MUTEX_INITIALIZER in new, or reset_in_child)
        // at a fixed address: both callers take `&'static self`, so it never moves or drops.
        let r = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        // Only EINVAL/EDEADLK are possible (not for a default mutex used correctly).
        assert_eq!(r, 0, "pthread_mutex_lock failed");
    }

    /// For a `pthread_atfork` prepare handler: takes the lock and keeps it across the fork;
    /// `unlock_in_parent` / `reset_in_child` give it back. Only on a `'static` mutex (a
    /// static, in practice): one held without a guard must never move or be dropped, and a
    /// `'static` borrow guarantees neither happens.
    pub fn lock_for_fork(&'static self) {
        self.raw_lock();
    }

    /// For the parent handler.
    ///
    /// # Safety
    /// The calling thread took the lock with `lock_for_fork` and holds no guard of it.
    pub unsafe fn unlock_in_parent(&self) {
        // SAFETY: by the caller's contract this thread took the lock with lock_for_fork and holds
        // no guard, so unlocking it here is the owner's unlock.
        unsafe { libc::pthread_mutex_unlock(self.raw.get()) };
    }

    /// For the child handler: the child's only thread owns the lock (taken by
    /// `lock_for_fork` before the fork); it starts afresh, unlocked.
    ///
    /// # Safety
    /// Only in the child right after fork, after `lock_for_fork` ran in the prepare handler,
    /// with no guard of it alive.
    pub unsafe fn reset_in_child(&self) {
        // SAFETY: the child is single-threaded here and nothing else refers to the mutex.
        unsafe { self.raw.get().write(libc::PTHREAD_MUTEX_INITIALIZER) };
    }
}

impl<T> Deref for ForkMutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a guard exists only while its thread holds the mutex (taken in lock, released in
        // drop), so no other reference to data is live; the borrow is tied to the guard.
        unsafe { &*self.m.data.get() }
    }
}

impl<T> DerefMut for ForkMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held for the guard's life, and the guard is borrowed mutably.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T> Drop for ForkMutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard's thread took the lock in `lock`.
        unsafe { libc::pthread_mutex_unlock(self.m.raw.get()) };
    }
}

/// A lock the fork handlers hold across `fork()`: taken before it, given back after it in
/// the parent, started afresh in the child. Only [`ForkPlan`]'s handlers give it back.
pub trait ForkLock: Sync {
    fn take_for_fork(&'static self);
    /// # Safety
    /// As [`ForkMutex::unlock_in_parent`].
    unsafe fn give_back_in_parent(&self);
    /// # Safety
    /// As [`ForkMutex::reset_in_child`].
    unsafe fn start_afresh_in_child(&self);
}

impl<T: Send> ForkLock for ForkMutex<T> {
    fn take_for_fork(&'static self) {
        self.lock_for_fork();
    }
    unsafe fn give_back_in_parent(&self) {
        // SAFETY: the caller's contract is unlock_in_parent's.
        unsafe { self.unlock_in_parent() }
    }
    unsafe fn start_afresh_in_child(&self) {
        // SAFETY: the caller's contract is reset_in_child's.
        unsafe { self.reset_in_child() }
    }
}

/// What the process's fork handlers do: take every lock of `locks` (group by group, in
/// order) before a fork, give them back in reverse order after it in the parent, start them
/// afresh in the child and then run `in_child` there.
pub struct ForkPlan {
    pub locks: &'static [&'static [&'static dyn ForkLock]],
    pub in_child: &'static [fn()],
}

static PLAN: std::sync::OnceLock<&'static ForkPlan> = std::sync::OnceLock::new();

/// Runs `f` at process exit (`atexit`). False when it could not be registered.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: a plain extern "C" fn; the module is linked -z nodelete, so it stays mapped
    // after the provider is unloaded, until the process exits.
    unsafe { libc::atexit(f) == 0 }
}

/// Runs `f` in the child after every `fork` (`pthread_atfork`), after the handlers registered
/// before it. False when it could not be registered.
pub fn in_child_after_fork(f: extern "C" fn()) -> bool {
    // SAFETY: as in at_exit: a plain extern "C" fn that stays mapped.
    unsafe { libc::pthread_atfork(None, None, Some(f)) == 0 }
}

/// A count of the forks this process descends from since kae started counting: each child
/// adds one. Counting starts at the first [`fork_generation`] call (kae's init makes one).
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
/// 0: not counting yet; 1: registering the handler; 2: counting.
static COUNTING: AtomicU8 = AtomicU8::new(0);

extern "C" fn count_fork() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// This process's fork generation (see [`FORK_GENERATION`]); starts the counting on first use.
pub fn fork_generation() -> u64 {
    once_per_process(&COUNTING, || {
        in_child_after_fork(count_fork);
    });
    FORK_GENERATION.load(Ordering::Acquire)
}

/// Runs `register` the first time any thread gets here, for a `state` that is 0 before, 1
/// while and 2 after (children inherit it, with the handlers it registered). A thread that
/// loses the race goes on without waiting.
fn once_per_process(state: &AtomicU8, register: impl FnOnce()) {
    if state.load(Ordering::Acquire) != 2
        && state
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        register();
        state.store(2, Ordering::Release);
    }
}

/// Makes `made_in` equal `g` (this process's fork generation), running `replace` first when
/// it held an earlier generation: once per generation, by the one thread that wins the claim
/// (`RENEWING | g`); the others wait for it. A claim an ancestor process left unfinished is
/// taken over.
fn renew_once(made_in: &AtomicU64, g: u64, replace: impl FnOnce()) {
    loop {
        let m = made_in.load(Ordering::Acquire);
        if m == g {
            return;
        }
        if m == RENEWING | g {
            std::hint::spin_loop(); // another thread of this process is at it
            continue;
        }
        if made_in
            .compare_exchange(m, RENEWING | g, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            replace();
            made_in.store(g, Ordering::Release);
            return;
        }
    }
}

/// A value being replaced by a thread of generation `g` (see `ForkSafeMutex::renew`).
const RENEWING: u64 = 1 << 63;

/// A mutex for data that a forked child may start afresh: a per-object lock (a key's caches)
/// that cannot be registered with the fork handlers the way a [`ForkMutex`] is. A child whose
/// parent forked while another thread held it would wait for that lock forever; here the
/// child's first `lock` instead replaces the inherited mutex and its data with a new one
/// holding `T::default()` (the old data is leaked, never dropped: a parent thread may have
/// left it half-changed). So in a child the data always starts from `Default`, whether or not
/// the lock was held at the fork. A critical section must not fork.
pub struct ForkSafeMutex<T: Default> {
    /// The fork generation the mutex was made in, or RENEWING | generation while a thread of
    /// that generation replaces it.
    made_in: AtomicU64,
    inner: UnsafeCell<std::sync::Mutex<T>>,
}

// SAFETY: the data is reached through the std Mutex (which serialises it), and the mutex is
// replaced only by `renew`, in a process where no thread can hold a guard of it: guards are
// taken only after `made_in` equals this process's generation, which renew sets last.
unsafe impl<T: Default + Send> Sync for ForkSafeMutex<T> {}

impl<T: Default> Default for ForkSafeMutex<T> {
    fn default() -> Self {
        ForkSafeMutex::new(T::default())
    }
}

impl<T: Default> ForkSafeMutex<T> {
    pub fn new(v: T) -> Self {
        ForkSafeMutex {
            made_in: AtomicU64::new(fork_generation()),
            inner: UnsafeCell::new(std::sync::Mutex::new(v)),
        }
    }

    /// Takes the lock (poisoning ignored: the data stays usable after a panic).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        let g = fork_generation();
        if self.made_in.load(Ordering::Acquire) != g {
            self.renew(g);
        }
        // SAFETY: made_in == g (checked or set by renew), so the mutex is this process's and
        // renew will not replace it while this borrow lives.
        let m = unsafe { &*self.inner.get() };
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The data, given exclusive access (after a fork, the fresh default).
    pub fn get_mut(&mut self) -> &mut T {
        let g = fork_generation();
        if *self.made_in.get_mut() != g {
            let old = core::mem::replace(self.inner.get_mut(), std::sync::Mutex::new(T::default()));
            core::mem::forget(old);
            *self.made_in.get_mut() = g;
        }
        self.inner
            .get_mut()
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the mutex and its data of an earlier generation, once per generation.
    #[cold]
    fn renew(&self, g: u64) {
        renew_once(&self.made_in, g, || {
            // SAFETY: no thread of this process holds or can take a guard of the old mutex
            // (made_in was not g, and only this thread won the claim); the old mutex and data
            // are overwritten without being dropped (leaked).
            unsafe { core::ptr::write(self.inner.get(), std::sync::Mutex::new(T::default())) };
        });
    }
}

/// Held by every [`ForkRwLock`] writer across its write; the fork handlers registered by
/// [`handle_writers`] take it before a fork, so no write is half done in a child.
static WRITERS: ForkMutex<()> = ForkMutex::new(());
/// 0: the handlers are not registered; 1: being registered; 2: registered.
static WRITERS_HANDLED: AtomicU8 = AtomicU8::new(0);

extern "C" fn writers_prepare() {
    WRITERS.lock_for_fork();
}

extern "C" fn writers_parent() {
    // SAFETY: this thread took the lock in writers_prepare and holds no guard of it.
    unsafe { WRITERS.unlock_in_parent() };
}

extern "C" fn writers_child() {
    // SAFETY: the child right after fork; writers_prepare took the lock; no guard is alive.
    unsafe { WRITERS.reset_in_child() };
}

/// Registers the writers' fork handlers, once per process, before the first write.
fn handle_writers() {
    once_per_process(&WRITERS_HANDLED, || {
        // SAFETY: plain extern "C" fns of this module, linked -z nodelete.
        unsafe {
            libc::pthread_atfork(
                Some(writers_prepare),
                Some(writers_parent),
                Some(writers_child),
            )
        };
    });
}

/// A reader-writer lock for process-wide data a forked child keeps (kae's instances): reads
/// are frequent and short, writes rare. A reader that another parent thread was at the fork
/// would block a child's writer forever; so writes happen under `WRITERS`, which the fork
/// handlers take first (no write is half done at a fork), and a child's first access
/// rebuilds the lock around the same data (the inherited readers are threads it does not
/// have). A critical section must not fork.
pub struct ForkRwLock<T> {
    made_in: AtomicU64,
    inner: UnsafeCell<std::sync::RwLock<T>>,
}

// SAFETY: as for std's RwLock (T: Send + Sync), plus the rebuild, which happens only when no
// thread of this process can hold a guard (the generation check precedes every guard).
unsafe impl<T: Send + Sync> Sync for ForkRwLock<T> {}

impl<T> ForkRwLock<T> {
    /// For statics.
    pub const fn new(v: T) -> Self {
        ForkRwLock {
            made_in: AtomicU64::new(0),
            inner: UnsafeCell::new(std::sync::RwLock::new(v)),
        }
    }

    fn current(&self) -> &std::sync::RwLock<T> {
        let g = fork_generation();
        if self.made_in.load(Ordering::Acquire) != g {
            self.rebuild(g);
        }
        // SAFETY: made_in == g: the lock is this process's and is not rebuilt while borrowed.
        unsafe { &*self.inner.get() }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, T> {
        self.current().read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> ForkRwLockWriteGuard<'_, T> {
        handle_writers();
        let writing = WRITERS.lock();
        ForkRwLockWriteGuard {
            guard: self.current().write().unwrap_or_else(|e| e.into_inner()),
            _writing: writing,
        }
    }

    #[cold]
    fn rebuild(&self, g: u64) {
        renew_once(&self.made_in, g, || {
            // SAFETY: no thread of this process holds or can take a guard of the old lock
            // (made_in was not g and only this thread won the claim); no write was half done
            // at the fork (writers hold WRITERS, which the fork handlers take first). The data
            // moves into a new lock; the old lock is overwritten, not dropped.
            unsafe {
                let old = core::ptr::read(self.inner.get());
                let data = old.into_inner().unwrap_or_else(|e| e.into_inner());
                core::ptr::write(self.inner.get(), std::sync::RwLock::new(data));
            }
        });
    }
}

/// A write guard of a [`ForkRwLock`]: the data, and the writers' lock held with it.
pub struct ForkRwLockWriteGuard<'a, T> {
    guard: std::sync::RwLockWriteGuard<'a, T>,
    _writing: ForkMutexGuard<'static, ()>,
}

impl<T> Deref for ForkRwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for ForkRwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// Registers `plan`'s fork handlers, once per process (children inherit them; a second plan
/// is refused). Returns false when that failed.
pub fn register_fork_plan(plan: &'static ForkPlan) -> bool {
    if PLAN.set(plan).is_err() {
        return PLAN.get().is_some_and(|p| core::ptr::eq(*p, plan));
    }
    // SAFETY: registering plain extern "C" fns; the module is linked -z nodelete, so they
    // stay mapped after the provider is unloaded.
    unsafe { libc::pthread_atfork(Some(plan_prepare), Some(plan_parent), Some(plan_child)) == 0 }
}

fn plan_locks() -> impl DoubleEndedIterator<Item = &'static dyn ForkLock> {
    PLAN.get()
        .into_iter()
        .flat_map(|p| p.locks.iter().flat_map(|g| g.iter().copied()))
}

extern "C" fn plan_prepare() {
    for l in plan_locks() {
        l.take_for_fork();
    }
}

extern "C" fn plan_parent() {
    for l in plan_locks().rev() {
        // SAFETY: a parent handler runs on the forking thread after plan_prepare took every
        // lock of the plan there (PLAN is set before the handlers are registered and never
        // changes); no guard of a lock taken for fork exists.
        unsafe { l.give_back_in_parent() };
    }
}

extern "C" fn plan_child() {
    for l in plan_locks().rev() {
        // SAFETY: a child handler runs in the child right after fork, after plan_prepare took
        // every lock of the plan; the child's only thread holds no guard.
        unsafe { l.start_afresh_in_child() };
    }
    for f in PLAN.get().map_or(&[][..], |p| p.in_child) {
        f();
    }
}

/// Spawns a named thread and returns once it runs `f`, i.e. once std's setup of the new
/// thread is over. That setup takes a lock inside std (its stack-guard bookkeeping) that a
/// fork at that moment would leave held in the child, where every thread started later
/// blocks on it for good. Callers spawn while holding a lock that the fork handlers take, so
/// no fork happens while a kae thread is still starting.
pub fn spawn_settled<F: FnOnce() + Send + 'static>(
    name: String,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
    let h = std::thread::Builder::new().name(name).spawn(move || {
        let _ = tx.send(());
        f()
    })?;
    // An error means the thread ended before sending, i.e. it does not run `f`.
    rx.recv()
        .map_err(|_| std::io::Error::other("a new thread ended before it started"))?;
    Ok(h)
}

/// Test helper: forks; the child runs `child` and leaves with `_exit(0)` when it returns
/// true, `_exit(1)` otherwise (2 on panic); the parent waits at most `limit` (then kills it).
/// Returns the child's exit code, or an error for a hang or a signal.
#[cfg(test)]
pub(crate) fn run_in_child(
    child: impl FnOnce() -> bool,
    limit: std::time::Duration,
) -> Result<core::ffi::c_int, String> {
    // SAFETY: the child only runs `child` (the caller keeps it to what is safe after fork in
    // a multi-threaded process) and leaves with _exit, never returning into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(_) => 2,
        };
        // SAFETY: leaving the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let t0 = std::time::Instant::now();
    loop {
        let mut st: core::ffi::c_int = 0;
        // SAFETY: pid is the child this function forked and has not reaped yet; st is a local.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
        if r == pid {
            return if libc::WIFEXITED(st) {
                Ok(libc::WEXITSTATUS(st))
            } else {
                Err(format!("child {pid} ended with status {st:#x}"))
            };
        }
        if r < 0 {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
        if t0.elapsed() > limit {
            // SAFETY: pid is the child this function forked and has not reaped yet, so kill and
            // waitpid cannot reach another process; st is a local.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut st, 0);
            }
            return Err(format!("child {pid} hung (killed after {limit:?})"));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_gives_exclusive_access_and_releases() {
        static M: ForkMutex<u64> = ForkMutex::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        *M.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*M.lock(), 40_000);
    }

    /// A child of a fork that happened while another thread held a `ForkSafeMutex` takes it
    /// at once, with the data started afresh; the parent's data is untouched.
    #[test]
    fn a_child_takes_a_fork_safe_mutex_another_thread_held() {
        let m = std::sync::Arc::new(ForkSafeMutex::new(vec![7u32]));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut g = m.lock();
                g.push(8); // a change in progress at the fork
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
            })
        };
        held_rx.recv().unwrap();
        let child = run_in_child(|| m.lock().is_empty(), std::time::Duration::from_secs(10));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(child, Ok(0), "the child's lock and fresh data");
        assert_eq!(*m.lock(), [7, 8], "the parent's data");
    }

    /// A child of a fork that happened while another thread was reading a `ForkRwLock` can
    /// write it at once, and keeps the data; the parent's data is untouched.
    #[test]
    fn a_child_writes_a_fork_rw_lock_another_thread_was_reading() {
        static L: ForkRwLock<Vec<u32>> = ForkRwLock::new(Vec::new());
        L.write().push(7);
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let g = L.read();
            held_tx.send(g.len()).unwrap();
            let _ = release_rx.recv();
        });
        assert_eq!(held_rx.recv().unwrap(), 1);
        let child = run_in_child(
            || {
                L.write().push(9);
                *L.read() == [7, 9]
            },
            std::time::Duration::from_secs(10),
        );
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(child, Ok(0), "the child's write and kept data");
        assert_eq!(*L.read(), [7], "the parent's data");
    }
}
