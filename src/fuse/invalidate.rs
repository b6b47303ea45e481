//! Keeping the kernel's caches honest after tool-side changes (contract 2).
//!
//! The store hands every change to [`Invalidator::submit`] under its lock;
//! that only queues. A dedicated thread, which holds no store lock and is
//! never a FUSE request handler, tells the kernel to drop what the change made
//! stale. Calling the notifier from a handler, or under the store lock,
//! deadlocks the mount: the kernel may need a handler to finish first.
//! The tool's result waits for the ticket, so the next look through the mount
//! sees the change.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::sync::Arc;
use std::thread::JoinHandle;

use fuser::{INodeNo, Notifier};
use parking_lot::{Condvar, Mutex};

use crate::store::{Change, ChangeSink, Origin, Ticket, Touched};

pub struct Invalidator {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<(Vec<Touched>, Ticket)>,
    stop: bool,
}

impl Invalidator {
    /// Starts the invalidation thread around the session's notifier.
    pub fn start(notifier: Notifier) -> std::io::Result<(Arc<Invalidator>, JoinHandle<()>)> {
        let this = Arc::new(Invalidator {
            queue: Mutex::default(),
            wake: Condvar::new(),
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

impl ChangeSink for Invalidator {
    fn submit(&self, change: &Change) -> Ticket {
        // The kernel made (and saw) every change that came through the mount.
        if matches!(change.origin, Origin::Person { .. }) || change.touched.is_empty() {
            return Ticket::done();
        }
        let ticket = Ticket::pending();
        let mut queue = self.queue.lock();
        if queue.stop {
            return Ticket::done();
        }
        queue
            .items
            .push_back((change.touched.clone(), ticket.clone()));
        drop(queue);
        self.wake.notify_one();
        ticket
    }
}
