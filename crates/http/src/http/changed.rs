//! An open store's changes counted, so that a long poll of its versions
//! listing (`wait=S`, memfs's extension) sleeps until there is one, and
//! how many such polls a server lets wait at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::lock::{rank, Condvar, Mutex};
use crate::store::{Change, ChangeSink, Ticket};

/// The count of changes made to one store since it was opened.
pub struct Changed {
    count: Mutex<u64>,
    moved: Condvar,
}

impl Default for Changed {
    fn default() -> Self {
        Changed {
            count: Mutex::new(rank::VERSIONS_CHANGED, 0),
            moved: Condvar::new(),
        }
    }
}

impl Changed {
    pub fn now(&self) -> u64 {
        *self.count.lock()
    }

    /// Waits until the count is past `seen`, or `until`; whether it is.
    pub fn wait_past(&self, seen: u64, until: Instant) -> bool {
        let mut count = self.count.lock();
        while *count <= seen {
            if self.moved.wait_until(&mut count, until).timed_out() {
                return *count > seen;
            }
        }
        true
    }
}

/// Counts each change the store makes (an observer of it).
pub struct Counting(pub Arc<Changed>);

impl ChangeSink for Counting {
    fn submit(&self, change: &Change) -> Ticket {
        if !change.ops.is_empty() {
            *self.0.count.lock() += 1;
            self.0.moved.notify_all();
        }
        Ticket::done()
    }
}

/// The most long polls a server lets wait at once (each holds one of the
/// handlers' threads); past it a poll is answered at once.
pub const WAITING_MOST: usize = 16;
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// A place among the waiting polls, while held; `None` when all are taken.
pub struct Waiting(());

impl Waiting {
    pub fn take() -> Option<Waiting> {
        let mut now = WAITING.load(Ordering::Acquire);
        loop {
            if now >= WAITING_MOST {
                return None;
            }
            match WAITING.compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Waiting(())),
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}
