//! How the journal's changes reach a commit: a change is queued under the
//! store's lock (`GroupCommit`); whoever waits for it first and finds
//! nobody committing leads, committing everything queued (the waiter's own
//! thread: no hand-over to another thread and back); the commit pool
//! (`crate::pool::commit`) commits what nobody waits for (a person's closed
//! file) after leaving it a moment to a waiter. No thread is the journal's
//! own: an open journal that is idle costs none.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::group::Lead;
use super::writer::Core;
use crate::error::DiskError;
use crate::store::{Change, ChangeSink, Ticket};

/// How long the commit pool leaves a queued change to its waiter to write.
const LEAD_FIRST: Duration = Duration::from_micros(500);
/// How long after the checkpointer reports, with nothing queued, the
/// journal writes down how far it got (so that a later start has less to
/// replay).
const IDLE: Duration = Duration::from_secs(2);

impl Core {
    /// Schedules a tick on the commit pool `after` from now, unless one is
    /// scheduled and not begun.
    pub(super) fn tick_after(&self, after: Duration) {
        if !self.group.claim_tick() {
            return;
        }
        let me = self.me.get().cloned();
        crate::pool::commit().at(
            std::time::Instant::now() + after,
            Box::new(move || {
                if let Some(core) = me.as_ref().and_then(std::sync::Weak::upgrade) {
                    core.tick();
                }
            }),
        );
    }

    /// One background turn, on the commit pool: a
    /// deferred flush; then what is queued and nobody led within
    /// [`LEAD_FIRST`] (a person's closed file), unless a leader is at it
    /// (it looks again when it is done, see [`Core::lead`]).
    fn tick(&self) {
        let Some(_turn) = self.group.turn() else {
            return;
        };
        if self.owed.flush.load(Ordering::Acquire) {
            self.flush_deferred_outside();
        }
        self.lead();
    }

    /// After [`IDLE`] with nothing queued: a frame with how far the
    /// checkpointer got, if that moved (so that a later start has less to
    /// replay). Scheduled when the checkpointer reports.
    pub(super) fn idle_soon(&self) {
        let me = self.me.get().cloned();
        crate::pool::commit().at(
            std::time::Instant::now() + IDLE,
            Box::new(move || {
                let Some(core) = me.as_ref().and_then(std::sync::Weak::upgrade) else {
                    return;
                };
                // (With something queued, the next batch's frame says it.)
                let turn = core.group.idle_turn();
                if turn.is_some() {
                    core.write_checkpoint();
                }
                drop(turn);
            }),
        );
    }

    /// At shutdown, once no tick runs or will: commits what is still
    /// queued, then the last checkpoint (see [`Core::finish`]).
    pub(super) fn stop(&self) {
        // (The job's place held through the last checkpoint, as DESIGN's
        // lock table says.)
        let _job = self.group.stop(|items| self.commit(items));
        self.finish();
    }

    /// Run by a waiting ticket, and by the commit pool: when nobody commits
    /// now, commits what is queued, on this thread (a waiter's own: no
    /// hand-over to another thread and back, which costs two thread
    /// switches: for one write at a time, a large part of its cost).
    /// Otherwise returns at once: the leader looks at the queue again when
    /// it is done, and what it finds there is ticked.
    pub fn lead(&self) {
        let led = self.group.lead(|items| self.commit(items));
        if led == (Lead::Led { more_queued: true }) {
            // Queued while this leader committed: its waiter may be waiting
            // for the leader's place; a moment for it, then the pool.
            self.tick_after(LEAD_FIRST);
        }
    }

    pub(super) fn commit(&self, items: Vec<(Change, Ticket)>) {
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .changes
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        let (changes, tickets): (Vec<Change>, Vec<Ticket>) = items.into_iter().unzip();
        if changes.iter().all(|c| c.ops.is_empty()) {
            // Barriers only: every frame before them is durable already.
            self.settle(&changes, &tickets);
            return;
        }
        match self.sharing.upstream.get() {
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
        let items = changes
            .iter()
            .cloned()
            .zip(tickets.iter().cloned())
            .collect();
        let queued = self.group.push(items, |(change, _)| {
            // (Noted before it is queued: the writer may settle it at once.)
            if self.sharing.upstream.get().is_some() && super::upstream::goes_upstream(change) {
                self.sharing
                    .unsettled
                    .lock()
                    .push((change.seq, super::upstream::footprint(change)));
            }
        });
        if queued.is_err() {
            for ticket in &tickets {
                ticket.settle(Err(DiskError::new(
                    "shutting down",
                    io::Error::from_raw_os_error(libc::ESHUTDOWN),
                )
                .into()));
            }
            return tickets;
        }
        // A moment for the waiter to lead its own write; what nobody waits
        // for is written by the commit pool after it.
        self.tick_after(LEAD_FIRST);
        tickets
    }
}

#[cfg(test)]
mod tests {
    //! Group commit on a journal over the in-memory disk: one committer at
    //! a time, each batch everything queued, in queue order; a waiter leads
    //! its own write; the commit pool writes what nobody waits for.
    use super::super::test_support::{content_at, write, Opened};
    use super::*;
    use crate::journal::Options;
    use crate::path::MemPath;

    fn open() -> Opened {
        super::super::test_support::open(Options::default())
    }

    #[test]
    fn whoever_leads_next_commits_everything_queued_in_one_batch_in_order() {
        let o = open();
        let sink = o.journal.sink();
        let before = o.journal.stats();
        // Nobody can commit while the leader's place is taken: three
        // changes queue up, submitted one by one.
        let held = o.journal.shared.group.hold_leader();
        let tickets: Vec<Ticket> = ["one", "two", "three"]
            .iter()
            .map(|t| sink.submit(&write("/memories/f.md", t)))
            .collect();
        drop(held);
        // The last ticket's waiter (or the commit pool) leads: one batch
        // takes all three, and the last one queued is the file's content.
        tickets.last().unwrap().wait().unwrap();
        for t in &tickets {
            t.wait().unwrap();
        }
        let after = o.journal.stats();
        assert_eq!(after.changes - before.changes, 3);
        assert_eq!(after.batches - before.batches, 1, "one batch for the three");
        assert_eq!(after.barriers - before.barriers, 1, "one frame written");
        assert_eq!(
            content_at(&o.journal, "/memories/f.md"),
            Some(crate::digest::Sha::of(b"three"))
        );
    }

    #[test]
    fn every_writer_is_served_and_each_ones_changes_keep_their_order() {
        let o = open();
        const THREADS: usize = 4;
        const EACH: usize = 40;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let sink = o.journal.sink();
                s.spawn(move || {
                    for i in 0..EACH {
                        let path = format!("/memories/t{t}.md");
                        let ticket = sink.submit(&write(&path, &format!("{t}:{i}")));
                        ticket.wait().expect("settled");
                    }
                });
            }
        });
        let stats = o.journal.stats();
        assert_eq!(stats.changes as usize, THREADS * EACH);
        assert!(stats.batches as usize <= THREADS * EACH);
        for t in 0..THREADS {
            let last = format!("{t}:{}", EACH - 1);
            assert_eq!(
                content_at(&o.journal, &format!("/memories/t{t}.md")),
                Some(crate::digest::Sha::of(last.as_bytes())),
                "thread {t}'s last write is its file's content"
            );
        }
        // Each thread's versions in the history, oldest first, are its
        // writes in the order it made them.
        let history = o.journal.history();
        for t in 0..THREADS {
            let path = MemPath::parse(&format!("/memories/t{t}.md")).unwrap();
            let mut rows = history.log(&path).unwrap();
            rows.reverse();
            assert_eq!(rows.len(), EACH, "thread {t}: one version a write");
            for (i, row) in rows.iter().enumerate() {
                let (_, bytes) = history.content(row.version.0).unwrap();
                assert_eq!(
                    bytes,
                    format!("{t}:{i}").into_bytes(),
                    "thread {t}, write {i}"
                );
            }
        }
    }

    #[test]
    fn the_commit_pool_writes_what_nobody_waits_for_and_a_stopped_journal_refuses() {
        let mut o = open();
        let sink = o.journal.sink();
        let before = o.journal.stats().batches;
        let _never_waited = sink.submit(&write("/memories/closed.md", "a person's file"));
        // Liveness, not speed: the commit pool gets to it on its own.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while o.journal.stats().batches == before {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(content_at(&o.journal, "/memories/closed.md").is_some());
        o.journal.shutdown();
        let late = sink.submit(&write("/memories/late.md", "too late"));
        let err = late.wait().unwrap_err().to_string();
        assert!(err.contains("shutting down"), "{err}");
    }
}
