//! Group commit, over any item: items are queued; whoever leads (nobody
//! else committing) takes everything queued, in queue order, as one batch;
//! one committer at a time (`GroupCommit::leader`). A background job takes
//! turns with it. No disk and no journal in it: the journal's use of it is
//! `commit.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::lock::{rank, Mutex, MutexGuard};

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
    /// leader, then commits what is left. The job's place is held by the
    /// guard returned (no turn runs while the caller ends its work).
    pub(super) fn stop(&self, commit: impl FnOnce(Vec<T>)) -> MutexGuard<'_, ()> {
        self.queue.lock().stop = true;
        let job = self.job.lock();
        {
            let _leading = self.leader.lock();
            let items: Vec<T> = self.queue.lock().items.drain(..).collect();
            if !items.is_empty() {
                commit(items);
            }
        }
        job
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
        drop(group.stop(|items| last = items));
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
