//! Keeping the kernel's caches honest after changes it did not make itself
//! (contract 2): the tool's, another mount's, another host's, a recovery's,
//! an expiry's, a revert's. The kernel keeps names, attributes and pages for
//! minutes (`tuning::TTL`), so every such change must drop them.
//!
//! The store hands every change to [`Invalidator::submit`] under its lock
//! (and a person's write, which is recorded only at close, to
//! [`Invalidator::stale`]); that only queues. A dedicated thread, which holds no store lock and is
//! never a FUSE request handler, tells the kernel to drop what the change made
//! stale. Calling the notifier from a handler, or under the store lock,
//! deadlocks the mount: the kernel may need a handler to finish first.
//! The tool's result waits for the ticket, so the next look through the mount
//! sees the change.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::lock::{rank, Condvar, Mutex};
use fuser::{INodeNo, Notifier};

use crate::store::{Change, ChangeSink, Origin, Ticket, Touched};

pub struct Invalidator {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// The mount this invalidator serves (see `request::serving`).
    mount: u64,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<(Vec<Touched>, Ticket)>,
    stop: bool,
}

impl Invalidator {
    /// Starts the invalidation thread around the session's notifier.
    pub fn start(
        notifier: Notifier,
        mount: u64,
    ) -> std::io::Result<(Arc<Invalidator>, JoinHandle<()>)> {
        let this = Arc::new(Invalidator {
            queue: Mutex::new(rank::INVALIDATOR, Queue::default()),
            wake: Condvar::new(),
            mount,
        });
        let worker = this.clone();
        let thread = std::thread::Builder::new()
            .name("memfs-invalidate".into())
            .spawn(move || worker.run(&notifier))?;
        Ok((this, thread))
    }

    /// Settles what is queued, then ends the thread.
    pub fn stop(&self) {
        self.queue.lock().stop = true;
        self.wake.notify_all();
    }

    fn run(&self, notifier: &Notifier) {
        loop {
            let (touched, ticket) = {
                let mut queue = self.queue.lock();
                loop {
                    if let Some(item) = queue.items.pop_front() {
                        break item;
                    }
                    if queue.stop {
                        return;
                    }
                    self.wake.wait(&mut queue);
                }
            };
            for t in &touched {
                // ENOENT means the kernel had nothing cached: nothing to do.
                let _ = match t {
                    Touched::Inode(ino) => notifier.inval_inode(INodeNo(*ino), 0, 0),
                    Touched::Entry(parent, name) => {
                        notifier.inval_entry(INodeNo(*parent), OsStr::new(name))
                    }
                };
            }
            ticket.settle(Ok(()));
        }
    }
}

impl Invalidator {
    /// Whether this mount's kernel made a change by `origin` itself (and so
    /// updated its own caches): a person's request served on one of this
    /// mount's threads. A person's change through another mount of the
    /// same memory is not.
    fn made_here(&self, origin: &Origin) -> bool {
        matches!(origin, Origin::Person { .. }) && super::request::serving() == self.mount
    }

    fn queue(&self, touched: Vec<Touched>) -> Ticket {
        let ticket = Ticket::pending();
        let mut queue = self.queue.lock();
        if queue.stop {
            return Ticket::done();
        }
        queue.items.push_back((touched, ticket.clone()));
        drop(queue);
        self.wake.notify_one();
        ticket
    }
}

impl ChangeSink for Invalidator {
    fn submit(&self, change: &Change) -> Ticket {
        if change.touched.is_empty() || self.made_here(&change.origin) {
            return Ticket::done();
        }
        self.queue(change.touched.clone())
    }

    fn stale(&self, origin: &Origin, touched: &[Touched]) {
        if !self.made_here(origin) {
            // Nobody waits: a person's write through one mount does not
            // wait for another mount's kernel (it is dropped within the
            // invalidation thread's next turn).
            let _ = self.queue(touched.to_vec());
        }
    }
}
