//! One look at the plain files for a whole request: a door whose request
//! reads the tree several times (the API's retrieve reads it three times:
//! the catch-up, the path check, the bytes) takes in what changed outside
//! once, at its start, instead of before each read.
//!
//! The promise stays the one every door keeps (docs/SEMANTICS.md, "The
//! plain files"): a request sees every change of the plain files whose
//! write returned before it began. Its first look covers those; a write
//! that returns while the request runs is taken in by the next request,
//! or by the watcher's own tick, as it would have been had it come a moment
//! later.

use std::cell::Cell;
use std::marker::PhantomData;

use super::Store;

thread_local! {
    /// The store (its address) whose request this thread is answering,
    /// having looked already; 0 when none.
    static LOOKED: Cell<usize> = const { Cell::new(0) };
}

/// Held while one request of a store is answered on this thread, after its
/// one look ([`Store::look_once`]); dropped, the next request looks again.
/// Not `Send`: the mark is this thread's.
pub struct LookedOnce {
    store: usize,
    before: usize,
    _thread: PhantomData<*const ()>,
}

impl Drop for LookedOnce {
    fn drop(&mut self) {
        LOOKED.with(|l| {
            if l.get() == self.store {
                l.set(self.before);
            }
        });
    }
}

impl Store {
    fn address(&self) -> usize {
        self as *const Store as usize
    }

    /// Takes in what changed in the plain files now, and lets the reads
    /// and writes of this thread's request skip that look until the guard
    /// is dropped.
    pub fn look_once(&self) -> LookedOnce {
        self.before_answer();
        let store = self.address();
        let before = LOOKED.with(|l| l.replace(store));
        LookedOnce {
            store,
            before,
            _thread: PhantomData,
        }
    }

    /// Whether this thread's request of this store looked already.
    pub(super) fn looked(&self) -> bool {
        LOOKED.with(|l| l.get()) == self.address()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn counted() -> (Store, Arc<AtomicUsize>) {
        let store = Store::new(super::super::Tree::new(), Default::default(), None);
        let looks = Arc::new(AtomicUsize::new(0));
        let l = looks.clone();
        store.before_answers(Box::new(move || {
            l.fetch_add(1, Ordering::SeqCst);
        }));
        (store, looks)
    }

    #[test]
    fn a_request_looks_once_and_the_next_looks_again() {
        let (store, looks) = counted();
        {
            let _once = store.look_once();
            store.before_answer();
            store.before_answer();
            assert_eq!(looks.load(Ordering::SeqCst), 1);
        }
        store.before_answer();
        assert_eq!(looks.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn another_store_and_another_thread_still_look() {
        let (store, looks) = counted();
        let (other, other_looks) = counted();
        let _once = store.look_once();
        other.before_answer();
        assert_eq!(other_looks.load(Ordering::SeqCst), 1);
        let store = Arc::new(store);
        std::thread::scope(|s| {
            s.spawn(|| store.before_answer());
        });
        assert_eq!(looks.load(Ordering::SeqCst), 2);
    }
}
