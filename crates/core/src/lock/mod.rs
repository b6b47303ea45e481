//! The crate's locks, each with its rank in the lock order
//! (`docs/DESIGN.md`, "Lock order"; the ranks are [`rank`]'s constants).
//!
//! [`Mutex`], [`RwLock`] and [`Condvar`] are parking_lot's, carrying a
//! [`Rank`]. In debug builds every blocking acquisition checks the order:
//! a thread that takes a lock while it holds one of the same or a higher
//! rank aborts the process, naming both, so the whole test suite checks the
//! lock table on every acquisition it makes. A `try_lock` cannot wait, so it cannot
//! close a cycle: it is not checked, but what it takes counts as held. In
//! release builds a rank is a number kept beside the lock and nothing is
//! checked or recorded.

pub mod rank;

use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

/// A lock's place in the order: a lock may be taken only while every lock
/// the thread holds has a lower `order`. Locks of one rank are never
/// nested (two stores' trees, two tickets' outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    pub order: u16,
    pub name: &'static str,
}

impl Rank {
    pub const fn new(order: u16, name: &'static str) -> Rank {
        Rank { order, name }
    }
}

/// Why `rank` may not be taken while `held` is: the first held lock of the
/// same or a higher rank.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
fn out_of_order(held: &[(u64, Rank)], rank: Rank) -> Option<String> {
    let (_, over) = held.iter().find(|(_, h)| h.order >= rank.order)?;
    let all: Vec<&str> = held.iter().map(|(_, h)| h.name).collect();
    Some(format!(
        "lock order: {} (rank {}) taken while {} (rank {}) is held (held: {}); \
         see docs/DESIGN.md, \"Lock order\"",
        rank.name,
        rank.order,
        over.name,
        over.order,
        all.join(", ")
    ))
}

#[cfg(debug_assertions)]
mod held {
    //! What this thread holds, in debug builds.
    use super::Rank;
    use std::cell::RefCell;

    thread_local! {
        static HELD: RefCell<Vec<(u64, Rank)>> = const { RefCell::new(Vec::new()) };
        static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// One acquisition, recorded until its guard drops (on this thread:
    /// parking_lot's guards are not `Send`).
    pub struct Held(u64);

    /// Checks that `rank` may be taken now. A lock taken out of order
    /// aborts the process with both names: a panic could be caught, or end
    /// a background thread unseen, and parking_lot's locks are not
    /// poisoned, so only an abort makes every test that meets it fail.
    pub fn check(rank: Rank) {
        let wrong = HELD.with(|held| super::out_of_order(&held.borrow(), rank));
        if let Some(message) = wrong {
            crate::say!("{message}\n{}", std::backtrace::Backtrace::force_capture());
            std::process::abort();
        }
    }

    /// The ranks this thread holds, oldest first (for tests).
    #[cfg(test)]
    pub fn ranks() -> Vec<Rank> {
        HELD.with(|held| held.borrow().iter().map(|(_, r)| *r).collect())
    }

    pub fn record(rank: Rank) -> Held {
        let id = NEXT.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        HELD.with(|held| held.borrow_mut().push((id, rank)));
        Held(id)
    }

    impl Drop for Held {
        fn drop(&mut self) {
            // `try_with`: a guard dropped while the thread's locals are torn
            // down finds nothing to take itself out of.
            let _ = HELD.try_with(|held| {
                let mut held = held.borrow_mut();
                if let Some(at) = held.iter().rposition(|(id, _)| *id == self.0) {
                    held.remove(at);
                }
            });
        }
    }
}

#[cfg(not(debug_assertions))]
mod held {
    //! Release builds record nothing.
    use super::Rank;

    pub struct Held;

    #[inline(always)]
    pub fn check(_rank: Rank) {}

    #[inline(always)]
    pub fn record(_rank: Rank) -> Held {
        Held
    }
}

use held::Held;

/// parking_lot's `Mutex` with a rank.
pub struct Mutex<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::Mutex<T>,
}

/// A [`Mutex`]'s guard: the lock, and its place among what the thread holds.
pub struct MutexGuard<'a, T: ?Sized> {
    inner: parking_lot::MutexGuard<'a, T>,
    _held: Held,
}

impl<T> Mutex<T> {
    pub const fn new(rank: Rank, value: T) -> Mutex<T> {
        Mutex {
            rank,
            inner: parking_lot::Mutex::new(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    pub fn lock(&self) -> MutexGuard<'_, T> {
        held::check(self.rank);
        let inner = self.inner.lock();
        MutexGuard {
            inner,
            _held: held::record(self.rank),
        }
    }

    /// Never waits, so it is not checked against the order; what it takes
    /// counts as held.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let inner = self.inner.try_lock()?;
        Some(MutexGuard {
            inner,
            _held: held::record(self.rank),
        })
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("rank", &self.rank.name)
            .finish()
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

/// parking_lot's `RwLock` with a rank (a read counts as holding it: two
/// reads of one lock on one thread can deadlock behind a waiting writer).
pub struct RwLock<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::RwLock<T>,
}

pub struct RwLockReadGuard<'a, T: ?Sized> {
    inner: parking_lot::RwLockReadGuard<'a, T>,
    _held: Held,
}

pub struct RwLockWriteGuard<'a, T: ?Sized> {
    inner: parking_lot::RwLockWriteGuard<'a, T>,
    _held: Held,
}

impl<T> RwLock<T> {
    pub const fn new(rank: Rank, value: T) -> RwLock<T> {
        RwLock {
            rank,
            inner: parking_lot::RwLock::new(value),
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        held::check(self.rank);
        let inner = self.inner.read();
        RwLockReadGuard {
            inner,
            _held: held::record(self.rank),
        }
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        held::check(self.rank);
        let inner = self.inner.write();
        RwLockWriteGuard {
            inner,
            _held: held::record(self.rank),
        }
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

/// parking_lot's `Condvar`, waiting on a ranked [`Mutex`]'s guard. The
/// waiter keeps its place as the lock's holder while it sleeps: nothing
/// else runs on its thread meanwhile.
#[derive(Default)]
pub struct Condvar {
    inner: parking_lot::Condvar,
}

/// Whether a timed wait ended by its time.
pub struct WaitTimeout(bool);

impl WaitTimeout {
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    pub const fn new() -> Condvar {
        Condvar {
            inner: parking_lot::Condvar::new(),
        }
    }

    pub fn wait<T: ?Sized>(&self, guard: &mut MutexGuard<'_, T>) {
        self.inner.wait(&mut guard.inner);
    }

    pub fn wait_for<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        limit: Duration,
    ) -> WaitTimeout {
        WaitTimeout(self.inner.wait_for(&mut guard.inner, limit).timed_out())
    }

    pub fn wait_until<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        until: Instant,
    ) -> WaitTimeout {
        WaitTimeout(self.inner.wait_until(&mut guard.inner, until).timed_out())
    }

    pub fn notify_one(&self) -> bool {
        self.inner.notify_one()
    }

    pub fn notify_all(&self) -> usize {
        self.inner.notify_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOW: Rank = Rank::new(1, "low");
    const HIGH: Rank = Rank::new(2, "high");

    #[test]
    fn the_order_allows_only_higher_ranks_under_what_is_held() {
        assert_eq!(out_of_order(&[], LOW), None);
        assert_eq!(out_of_order(&[(0, LOW)], HIGH), None);
        let under = out_of_order(&[(0, LOW), (1, HIGH)], LOW).expect("out of order");
        assert!(
            under.starts_with(
                "lock order: low (rank 1) taken while low (rank 1) is held (held: low, high)"
            ),
            "{under}"
        );
        let same = out_of_order(&[(0, HIGH)], HIGH).expect("one rank twice");
        assert!(
            same.contains("high (rank 2) taken while high (rank 2)"),
            "{same}"
        );
    }

    #[cfg(debug_assertions)]
    #[test]
    fn what_a_thread_holds_is_recorded_and_forgotten_in_any_order() {
        let low = Mutex::new(LOW, 1);
        let high = RwLock::new(HIGH, 2);
        let a = low.lock();
        let b = high.write();
        assert_eq!(*a + *b, 3);
        assert_eq!(held::ranks(), vec![LOW, HIGH]);
        drop(a);
        assert_eq!(held::ranks(), vec![HIGH]);
        drop(b);
        assert_eq!(held::ranks(), vec![]);
        let r = high.read();
        let t = low.try_lock().expect("free");
        assert_eq!(held::ranks(), vec![HIGH, LOW], "a try_lock counts as held");
        drop((r, t));
        assert_eq!(held::ranks(), vec![]);
    }

    /// The real check, in a child process (it aborts): the test binary runs
    /// itself with this one test and `MEMFS_LOCK_ORDER_CHILD` set.
    #[cfg(debug_assertions)]
    #[test]
    fn taking_locks_out_of_order_aborts_naming_both() {
        if std::env::var_os("MEMFS_LOCK_ORDER_CHILD").is_some() {
            let high = Mutex::new(HIGH, ());
            let low = Mutex::new(LOW, ());
            let _h = high.lock();
            let _l = low.lock();
            crate::say!("taken out of order and not stopped");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "lock::tests::taking_locks_out_of_order_aborts_naming_both",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MEMFS_LOCK_ORDER_CHILD", "1")
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child went on: {err}");
        assert!(
            err.contains("lock order: low (rank 1) taken while high (rank 2) is held"),
            "{err}"
        );
        assert!(!err.contains("not stopped"), "{err}");
    }

    #[test]
    fn a_condvar_wait_wakes() {
        let m = std::sync::Arc::new(Mutex::new(LOW, false));
        let cv = std::sync::Arc::new(Condvar::new());
        let (m2, cv2) = (m.clone(), cv.clone());
        let t = std::thread::spawn(move || {
            *m2.lock() = true;
            cv2.notify_all();
        });
        let mut g = m.lock();
        while !*g {
            cv.wait_for(&mut g, Duration::from_millis(50));
        }
        drop(g);
        t.join().unwrap();
    }
}
