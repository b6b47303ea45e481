//! Group commit: a change is queued under the store's lock; whoever waits
//! for it first and finds nobody committing leads, committing everything
//! queued (the waiter's own thread: no hand-over to another thread and
//! back); the commit pool (`crate::pool::commit`) commits what nobody waits
//! for (a person's closed file) after leaving it a moment to a waiter. One
//! committer at a time (`GroupCommit::leader`), in queue order. No thread is the
//! journal's own: an open journal that is idle costs none.
//!
//! `GroupCommit` is the queue and its leader, over any item, with no disk
//! in it (unit-tested with threads alone); `Core` gives it the journal's
//! changes and its commit.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::writer::Core;
use crate::error::DiskError;
use crate::lock::{rank, Mutex, MutexGuard};
use crate::store::{Change, ChangeSink, Ticket};

/// How long the commit pool leaves a queued change to its waiter to write.
const LEAD_FIRST: Duration = Duration::from_micros(500);
/// How long after the checkpointer reports, with nothing queued, the
/// journal writes down how far it got (so that a later start has less to
/// replay).
const IDLE: Duration = Duration::from_secs(2);

/// A queue of items committed in groups: whoever leads (nobody else
/// committing) takes everything queued, in queue order, as one batch; one
/// committer at a time. A background job (a tick) takes turns with it.
pub(super) struct GroupCommit<T> {
    queue: Mutex<Queue<T>>,
    /// Held by whoever commits.
    leader: Mutex<()>,
    /// Held by each background turn while it runs, and by the stop: once
    /// the stop holds it, no turn runs.
    job: Mutex<()>,
    /// A tick is scheduled and has not begun.
    ticking: AtomicBool,
}

struct Queue<T> {
    items: VecDeque<T>,
    stop: bool,
}

/// What a call to [`GroupCommit::lead`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Lead {
    /// Someone else commits: they look at the queue again when done.
    Busy,
    /// This call led; `more_queued`: items came while it committed.
    Led { more_queued: bool },
}

impl<T> GroupCommit<T> {
    pub(super) fn new() -> Self {
        GroupCommit {
            queue: Mutex::new(
                rank::QUEUE,
                Queue {
                    items: VecDeque::new(),
                    stop: false,
                },
            ),
            leader: Mutex::new(rank::LEADER, ()),
            job: Mutex::new(rank::JOURNAL_JOB, ()),
            ticking: AtomicBool::new(false),
        }
    }

    /// Queues `items`, each noted by `note` under the queue's lock (before
    /// any leader can take it); once stopped, gives them back.
    pub(super) fn push(&self, items: Vec<T>, mut note: impl FnMut(&T)) -> Result<(), Vec<T>> {
        let mut queue = self.queue.lock();
        if queue.stop {
            return Err(items);
        }
        for item in items {
            note(&item);
            queue.items.push_back(item);
        }
        Ok(())
    }

    /// When nobody commits now: commits everything queued with `commit`,
    /// on this thread. Otherwise returns at once.
    pub(super) fn lead(&self, commit: impl FnOnce(Vec<T>)) -> Lead {
        {
            let Some(_leading) = self.leader.try_lock() else {
                return Lead::Busy;
            };
            let items: Vec<T> = self.queue.lock().items.drain(..).collect();
            if !items.is_empty() {
                commit(items);
            }
        }
        Lead::Led {
            more_queued: !self.queue.lock().items.is_empty(),
        }
    }

    /// Stops: nothing is queued after; waits for a running turn and the
    /// leader, then commits what is left.
    pub(super) fn stop(&self, commit: impl FnOnce(Vec<T>)) {
        self.queue.lock().stop = true;
        let _job = self.job.lock();
        let _leading = self.leader.lock();
        let items: Vec<T> = self.queue.lock().items.drain(..).collect();
        if !items.is_empty() {
            commit(items);
        }
    }

    /// Claims the one scheduled tick: false when one is scheduled already.
    pub(super) fn claim_tick(&self) -> bool {
        !self.ticking.swap(true, Ordering::AcqRel)
    }

    /// A background turn (held while it runs), once its tick began; none
    /// once stopped.
    pub(super) fn turn(&self) -> Option<MutexGuard<'_, ()>> {
        self.ticking.store(false, Ordering::Release);
        let job = self.job.lock();
        (!self.queue.lock().stop).then_some(job)
    }

    /// A background turn for when nothing is queued: none once stopped or
    /// while something is.
    pub(super) fn idle_turn(&self) -> Option<MutexGuard<'_, ()>> {
        let job = self.job.lock();
        let queue = self.queue.lock();
        (!queue.stop && queue.items.is_empty()).then_some(job)
    }

    /// `f` of the last item queued, under the queue's lock (nothing is
    /// queued meanwhile).
    pub(super) fn last_queued<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.queue.lock().items.back())
    }

    /// Holds the leader's place (nobody commits while it is held).
    #[cfg(test)]
    pub(super) fn hold_leader(&self) -> MutexGuard<'_, ()> {
        self.leader.lock()
    }
}

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
        if self.flush_owed.load(Ordering::Acquire) {
            self.flush_deferred(&mut self.state.lock());
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
        self.group.stop(|items| self.commit(items));
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
        let items = changes
            .iter()
            .cloned()
            .zip(tickets.iter().cloned())
            .collect();
        let queued = self.group.push(items, |(change, _)| {
            // (Noted before it is queued: the writer may settle it at once.)
            if self.upstream.get().is_some() && super::upstream::goes_upstream(change) {
                self.unsettled
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
mod group_tests {
    //! The group commit alone: no disk, no journal, threads and items.
    use super::{GroupCommit, Lead};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Barrier, Mutex};

    #[test]
    fn one_leader_commits_everything_queued_in_one_batch_in_order() {
        let group = GroupCommit::new();
        let held = group.hold_leader();
        for i in 1..=3 {
            group.push(vec![i], |_| {}).unwrap();
        }
        // Nobody can lead while the place is held.
        assert_eq!(group.lead(|_| panic!("led while held")), Lead::Busy);
        drop(held);
        let mut batches = Vec::new();
        let led = group.lead(|items| batches.push(items));
        assert_eq!(led, Lead::Led { more_queued: false });
        assert_eq!(batches, [vec![1, 2, 3]]);
        assert_eq!(
            group.lead(|_| panic!("nothing queued")),
            Lead::Led { more_queued: false }
        );
    }

    #[test]
    fn a_leader_busy_committing_turns_others_away_and_is_told_what_came_meanwhile() {
        let group = GroupCommit::new();
        let (inside, done) = (Barrier::new(2), Barrier::new(2));
        std::thread::scope(|s| {
            group.push(vec![1], |_| {}).unwrap();
            let first = s.spawn(|| {
                group.lead(|items| {
                    assert_eq!(items, [1]);
                    inside.wait();
                    done.wait();
                })
            });
            inside.wait();
            assert_eq!(group.lead(|_| panic!("two leaders")), Lead::Busy);
            group.push(vec![2], |_| {}).unwrap();
            done.wait();
            assert_eq!(first.join().unwrap(), Lead::Led { more_queued: true });
        });
        let mut batches = Vec::new();
        group.lead(|items| batches.push(items));
        assert_eq!(batches, [vec![2]]);
    }

    #[test]
    fn no_two_commits_overlap_and_each_item_is_committed_once_in_queue_order() {
        const THREADS: usize = 6;
        const EACH: usize = 300;
        let group = GroupCommit::new();
        let active = AtomicUsize::new(0);
        let noted = Mutex::new(std::collections::HashSet::new());
        let committed = Mutex::new(Vec::new());
        let commit = |items: Vec<(usize, usize)>| {
            assert_eq!(
                active.fetch_add(1, Ordering::SeqCst),
                0,
                "two commits at once"
            );
            {
                let noted = noted.lock().unwrap();
                for item in &items {
                    assert!(
                        noted.contains(item),
                        "{item:?} committed before it was noted"
                    );
                }
            }
            committed.lock().unwrap().extend(items);
            active.fetch_sub(1, Ordering::SeqCst);
        };
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (group, commit, noted) = (&group, &commit, &noted);
                s.spawn(move || {
                    for i in 0..EACH {
                        group
                            .push(vec![(t, i)], |item| {
                                noted.lock().unwrap().insert(*item);
                            })
                            .unwrap();
                        group.lead(commit);
                    }
                });
            }
        });
        // What a last leader left (queued while it committed).
        group.lead(commit);
        let committed = committed.into_inner().unwrap();
        assert_eq!(committed.len(), THREADS * EACH, "each item once");
        for t in 0..THREADS {
            let mine: Vec<usize> = committed.iter().filter(|c| c.0 == t).map(|c| c.1).collect();
            assert_eq!(
                mine,
                (0..EACH).collect::<Vec<_>>(),
                "thread {t}'s items in order"
            );
        }
    }

    #[test]
    fn a_stopped_group_commits_what_is_left_then_gives_items_back() {
        let group = GroupCommit::new();
        group.push(vec!["a", "b"], |_| {}).unwrap();
        let mut last = Vec::new();
        group.stop(|items| last = items);
        assert_eq!(last, ["a", "b"]);
        assert_eq!(
            group.push(vec!["late"], |_| panic!("noted")),
            Err(vec!["late"])
        );
        assert!(group.turn().is_none(), "no turn after the stop");
        assert!(group.idle_turn().is_none());
    }

    #[test]
    fn one_tick_is_scheduled_at_a_time_and_an_idle_turn_waits_for_an_empty_queue() {
        let group = GroupCommit::<u8>::new();
        assert!(group.claim_tick());
        assert!(!group.claim_tick(), "one scheduled already");
        assert!(group.turn().is_some(), "the tick begins");
        assert!(
            group.claim_tick(),
            "the next may be scheduled once it began"
        );
        group.push(vec![1], |_| {}).unwrap();
        assert!(group.idle_turn().is_none(), "something is queued");
        assert_eq!(group.last_queued(|last| last.copied()), Some(1));
    }
}

#[cfg(test)]
mod tests {
    //! Group commit on a journal over the in-memory disk: one committer at
    //! a time, each batch everything queued, in queue order; a waiter leads
    //! its own write; the commit pool writes what nobody waits for.
    use super::*;
    use crate::journal::{Files, Journal, Options};
    use crate::path::MemPath;
    use crate::persist::storage::mem::MemDisk;
    use crate::store::{ChangeOp, Meta};

    struct Opened {
        journal: Journal,
        _data: tempfile::TempDir,
        _dir: crate::persist::DataDir,
    }

    fn open() -> Opened {
        let data = tempfile::tempdir().unwrap();
        let disk = MemDisk::new(5);
        let dir = crate::persist::DataDir::open_on(data.path(), Some(disk.root())).unwrap();
        let files = Files {
            memories: dir.memories.clone(),
            tmp: dir.tmp.clone(),
            trash: dir.trash.clone(),
            known: Default::default(),
        };
        let (mut tree, _) = crate::persist::load::load(&dir.memories).unwrap();
        let (journal, _) =
            Journal::open(&dir.stored, &files, &mut tree, Options::default()).unwrap();
        Opened {
            journal,
            _data: data,
            _dir: dir,
        }
    }

    fn write(path: &str, text: &str) -> Change {
        let meta = Meta {
            perm: 0o644,
            uid: 0,
            gid: 0,
            atime: std::time::UNIX_EPOCH,
            mtime: std::time::UNIX_EPOCH,
        };
        Change::of_memfs(vec![ChangeOp::Write {
            path: MemPath::parse(path).unwrap(),
            data: Arc::new(text.as_bytes().to_vec()),
            meta,
        }])
    }

    fn content_at(j: &Journal, path: &str) -> Option<crate::digest::Sha> {
        let st = j.shared.state.lock();
        let node = st.view.get(&MemPath::parse(path).unwrap())?;
        node.file().map(|(sha, ..)| sha)
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
