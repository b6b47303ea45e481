//! Group commit: a change is queued under the store's lock; whoever waits
//! for it first and finds nobody committing leads, committing everything
//! queued (the waiter's own thread: no hand-over to another thread and
//! back); the writer thread commits what nobody waits for (a person's
//! closed file) after leaving it a moment to a waiter. One committer at a
//! time (`Core::leader`), in queue order.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::writer::Core;
use crate::error::DiskError;
use crate::store::{Change, ChangeSink, Ticket};

/// How long the writer thread leaves a queued change to its waiter to write.
const LEAD_FIRST: Duration = Duration::from_micros(500);
/// How long an idle writer waits before it writes down how far the
/// checkpointer got (so that a later start has less to replay).
const IDLE: Duration = Duration::from_secs(2);

impl Core {
    /// The writer thread: batches until stopped, then the last checkpoint.
    pub fn run(&self) {
        loop {
            {
                let mut queue = self.queue.lock();
                loop {
                    if self.flush_owed.load(Ordering::Acquire) {
                        drop(queue);
                        self.flush_deferred(&mut self.state.lock());
                        queue = self.queue.lock();
                        continue;
                    }
                    if !queue.items.is_empty() {
                        // A moment for the submitter to lead its own write
                        // (see `lead`), whatever else is submitted
                        // meanwhile; what nobody waits for is written after.
                        let until = std::time::Instant::now() + LEAD_FIRST;
                        while !queue.items.is_empty() && !queue.stop {
                            if self.wake.wait_until(&mut queue, until).timed_out() {
                                break;
                            }
                        }
                        if !queue.items.is_empty() || queue.stop {
                            break;
                        }
                        continue;
                    }
                    if queue.stop {
                        drop(queue);
                        self.finish();
                        return;
                    }
                    let idle = self.wake.wait_for(&mut queue, IDLE).timed_out();
                    if idle && queue.items.is_empty() && !queue.stop {
                        drop(queue);
                        self.write_checkpoint();
                        queue = self.queue.lock();
                    }
                }
            }
            // (A waiter may be leading them already: then there is nothing
            // left once it is done.)
            let _leading = self.leader.lock();
            let items: Vec<(Change, Ticket)> = self.queue.lock().items.drain(..).collect();
            if !items.is_empty() {
                self.commit(items);
            }
        }
    }

    /// Run by a waiting ticket: when nobody commits now, the waiter commits
    /// what is queued itself, on its own thread (no hand-over to the writer
    /// thread and back, which costs two thread switches: for one write at a
    /// time, a large part of its cost). Otherwise the waiter just waits.
    pub fn lead(&self) {
        let Some(_leading) = self.leader.try_lock() else {
            return;
        };
        let items: Vec<(Change, Ticket)> = self.queue.lock().items.drain(..).collect();
        if !items.is_empty() {
            self.commit(items);
        }
    }

    pub(super) fn commit(&self, items: Vec<(Change, Ticket)>) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.changes
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        let (changes, tickets): (Vec<Change>, Vec<Ticket>) = items.into_iter().unzip();
        if changes.iter().all(|c| c.ops.is_empty()) {
            // Barriers only: every frame before them is durable already.
            self.settle(&changes, &tickets);
            return;
        }
        match self.upstream.get() {
            Some(up) if changes.iter().any(super::upstream::goes_upstream) => {
                self.commit_shared(up.as_ref(), changes, tickets)
            }
            _ => {
                let _ = self.commit_batch(changes, tickets, None);
            }
        }
    }
}

impl ChangeSink for Core {
    fn submit(&self, change: &Change) -> Ticket {
        self.submit_all(std::slice::from_ref(change))
            .pop()
            .expect("one ticket for one change")
    }

    /// Queued under one lock: whoever drains the queue takes all of them
    /// into one batch, and so one frame.
    fn submit_all(&self, changes: &[Change]) -> Vec<Ticket> {
        let me = self.me.get().cloned();
        let tickets: Vec<Ticket> = changes
            .iter()
            .map(|_| {
                let me = me.clone();
                Ticket::pending_helped(Arc::new(move || {
                    if let Some(shared) = me.as_ref().and_then(std::sync::Weak::upgrade) {
                        shared.lead();
                    }
                }))
            })
            .collect();
        let mut queue = self.queue.lock();
        if queue.stop {
            for ticket in &tickets {
                ticket.settle(Err(DiskError::new(
                    "shutting down",
                    io::Error::from_raw_os_error(libc::ESHUTDOWN),
                )
                .into()));
            }
            return tickets;
        }
        for (change, ticket) in changes.iter().zip(&tickets) {
            // (Noted before it is queued: the writer may settle it at once.)
            if self.upstream.get().is_some() && super::upstream::goes_upstream(change) {
                self.unsettled
                    .lock()
                    .push((change.seq, super::upstream::footprint(change)));
            }
            queue.items.push_back((change.clone(), ticket.clone()));
        }
        drop(queue);
        self.wake.notify_one();
        tickets
    }
}
