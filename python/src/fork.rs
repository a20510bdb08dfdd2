//! Fork safety: what a process that used agentstate and then forked (multiprocessing's
//! `fork` start method, `gunicorn --preload`, celery's prefork pool, uWSGI) must not do.
//!
//! A forked child has a copy of the tokio runtime but none of its worker threads, so nothing
//! would drive its I/O (every call hangs); and the copy's epoll descriptor is the *parent's*
//! epoll instance, so a socket the child registered there would hand the parent's workers
//! pointers into the child's memory (the parent dies), and a connection the child dropped
//! would be deregistered from the parent's epoll (the parent's connection stops waking).
//!
//! So every fork starts a new *generation*: a `pthread_atfork` child handler bumps
//! [`generation`] and forgets the runtime pointer (atomics only: a handler that took a lock
//! another thread held at the fork would wait forever). The next call in the child builds a
//! fresh runtime ([`runtime`]), a `Store` reconnects from its configuration, and everything
//! of an older generation sits in a [`Local`], which leaks its value instead of dropping it
//! in a later generation: dropping would deregister the parent's sockets from the shared
//! epoll, close the parent's SQLite handles, or wake the parent's workers.

use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use tokio::runtime::Runtime;

/// Bumped in every forked child, before any of its code runs.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// This generation's runtime; null until the first call (and again in a forked child). A
/// runtime is never freed: one of an older generation belongs to the parent process.
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());

/// The `pthread_atfork` child handler: only atomic stores (no lock, no allocation).
extern "C" fn in_child() {
    RUNTIME.store(ptr::null_mut(), Ordering::SeqCst);
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Registers the fork handler (module init; once per process, as the handler survives forks).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `in_child` is a plain function that only stores to atomics, which is what a
        // child handler of a multi-threaded process may do.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        // ENOMEM is the only failure; without the handler forking is as unsafe as before.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
}

/// The current fork generation: 0 in the process that loaded the module, +1 per fork.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// This process's multi-threaded tokio runtime, built on first use (after a fork: on the
/// child's first call).
pub fn runtime() -> &'static Runtime {
    let current = RUNTIME.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: runtimes are leaked, never freed, so the pointer stays valid.
        return unsafe { &*current };
    }
    let built = Box::into_raw(Box::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("agentstate")
            .build()
            .expect("cannot start the agentstate tokio runtime"),
    ));
    match RUNTIME.compare_exchange(ptr::null_mut(), built, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just leaked into the static.
        Ok(_) => unsafe { &*built },
        Err(won) => {
            // Another thread built one first; ours never ran a task, so it may go.
            // SAFETY: `built` came from Box::into_raw above and was not published.
            drop(unsafe { Box::from_raw(built) });
            // SAFETY: as above, runtimes in the static are never freed.
            unsafe { &*won }
        }
    }
}

/// A value of the generation that made it: dropped normally in that generation, leaked in a
/// later one (a forked child), where its sockets, tasks and files are the parent's.
pub struct Local<T> {
    generation: u64,
    value: ManuallyDrop<T>,
}

impl<T> Local<T> {
    /// `value`, stamped with the current generation.
    pub fn new(value: T) -> Self {
        Local {
            generation: generation(),
            value: ManuallyDrop::new(value),
        }
    }

    /// The value while this process made it; None in a forked child (it is the parent's).
    pub fn get(&self) -> Option<&T> {
        (self.generation == generation()).then_some(&*self.value)
    }

    /// The value whatever the generation, to read plain fields (a forked child reading its
    /// copy of the parent's memory touches nothing of the parent's). Never for I/O.
    pub fn peek(&self) -> &T {
        &self.value
    }

    /// Takes the value out while this process made it; in a forked child it is leaked and
    /// None comes back.
    pub fn take(self) -> Option<T> {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again; the value is moved out exactly once,
        // or (another generation's) never touched.
        (me.generation == generation()).then(|| unsafe { ManuallyDrop::take(&mut me.value) })
    }
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        if self.generation == generation() {
            // SAFETY: dropped once, here; never touched again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}
