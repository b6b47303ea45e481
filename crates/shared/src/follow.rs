//! The follower of one store: reads the shared store's batches in id
//! order and applies other hosts' changes to this tree (and so to the
//! journal and the mount).
//!
//! It has no thread or connection of its own: a catch-up is a job on the
//! follow pool, on a reader's connection of the database's, when the
//! database's listener wakes it (`database.rs`: a wake-up, the poll
//! finding the store's head past the tree, a reconnection), and once when
//! the store opens. A catch-up reads everything after the last id the
//! tree holds; a batch of this host's own is skipped when the tree shows
//! it already (committed by this process, or written to the journal
//! before a restart); one a crash kept out of the journal is applied like
//! another host's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::connect::prepare;
use super::database::{self, cause, Database, Followed};
use super::reader::{Batch, Reader};
use super::target::Target;
use crate::journal::{ChangeRec, OpRec, OwnHeld, Unsettled, UpstreamError};
use crate::lock::{rank, Condvar, Mutex};
use crate::store::{ChangeOp, Foreign, Store};

/// Batches read at once.
const PAGE: i64 = 256;

/// A store followed: stops following when stopped or dropped.
pub struct Follower {
    tracked: Option<Arc<Tracked>>,
}

/// Everything the follower works with.
pub struct Follow {
    pub target: Target,
    pub origin: String,
    /// Which of this origin's batches the journal holds.
    pub held: OwnHeld,
    pub confirmed: super::db::Ours,
    pub store: Weak<Store>,
    pub unsettled: Unsettled,
}

/// A followed store, as its jobs and the listener share it.
struct Tracked {
    follow: Follow,
    database: Arc<Database>,
    turn: Mutex<Turn>,
    /// Told when a catch-up ends (see [`Follower::stop`]).
    ended: Condvar,
    stopping: AtomicBool,
    /// The store's row is made (once, on the first catch-up).
    prepared: AtomicBool,
    /// Told when the first catch-up has run, and how it went
    /// ([`Follow::start`] waits).
    first: Mutex<Option<std::sync::mpsc::Sender<Result<(), UpstreamError>>>>,
}

/// Where the store's catch-up is: at most one runs, and one more is owed
/// at most.
#[derive(Default)]
struct Turn {
    queued: bool,
    running: bool,
    again: bool,
    stopped: bool,
}

impl Follow {
    /// Starts following; the first catch-up runs before this returns (at
    /// most `first` long), so a host opening a store shows what it holds.
    /// Says whether the first catch-up reached the database (a catch-up
    /// still running after `first` counts as reached).
    pub fn start(self, first: Duration) -> (Follower, Result<(), UpstreamError>) {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let database = database::of(&self.target);
        let tracked = Arc::new(Tracked {
            follow: self,
            database: database.clone(),
            turn: Mutex::new(rank::FOLLOW_TURN, Turn::default()),
            ended: Condvar::new(),
            stopping: AtomicBool::new(false),
            prepared: AtomicBool::new(false),
            first: Mutex::new(rank::FOLLOW_FIRST, Some(ready_tx)),
        });
        database.follow(tracked.clone());
        tracked.clone().wake();
        let reached = ready.recv_timeout(first).unwrap_or(Ok(()));
        let follower = Follower {
            tracked: Some(tracked),
        };
        (follower, reached)
    }

    /// Reads and applies every batch past what the tree shows.
    fn catch_up(&self, reader: &mut Reader, stop: &AtomicBool) -> Result<(), UpstreamError> {
        loop {
            let Some(store) = self.store.upgrade() else {
                return Ok(());
            };
            let after = store.followed();
            let page = reader.batches_after(self.name(), after, PAGE)?;
            if page.is_empty() {
                return Ok(());
            }
            let full = page.len() as i64 == PAGE;
            // Other hosts' contents a group of batches at a time (one query,
            // not one a batch), and the batches applied without waiting for
            // each one's frame: the journal takes many in one group commit,
            // and the page is waited for at its end.
            let mut tickets = Vec::new();
            let mut rest = &page[..];
            while !rest.is_empty() {
                let n = group_len(rest, &self.origin);
                let (group, after) = rest.split_at(n);
                rest = after;
                let shas: Vec<String> = group
                    .iter()
                    .filter(|b| b.origin != self.origin)
                    .flat_map(shas_of)
                    .collect();
                let mut contents = reader.contents(self.name(), &shas)?;
                for batch in group {
                    if stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    tickets.extend(self.apply(reader, &store, batch, &mut contents, stop)?);
                }
            }
            for ticket in tickets {
                let _ = ticket.wait();
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Applies one batch to the tree (its contents from `contents`, or
    /// read now for a batch of this host's that it does not hold), or skips
    /// it as this host's own; the tickets are kept once the journal holds
    /// it.
    fn apply(
        &self,
        reader: &mut Reader,
        store: &Store,
        batch: &Batch,
        contents: &mut HashMap<String, Arc<Vec<u8>>>,
        stop: &AtomicBool,
    ) -> Result<Vec<crate::store::Ticket>, UpstreamError> {
        if batch.origin == self.origin {
            match self.judge_own(batch, stop) {
                Own::Held => {
                    store.follow_to(batch.seq);
                    return Ok(Vec::new());
                }
                Own::Stopping => return Ok(Vec::new()),
                Own::Missing => contents.extend(reader.contents(self.name(), &shas_of(batch))?),
            }
        }
        let whole = whole_of(batch, contents);
        Ok(self.apply_whole(store, batch, &whole, stop))
    }

    /// Whether the journal holds a batch of this host's: its frames say
    /// which (`OwnHeld`), so one whose frame a crash lost is applied from
    /// the store, however many batches of this host's were written after
    /// it. One whose COMMIT is still being settled (its answer lost, and
    /// the database being asked) waits until it is.
    fn judge_own(&self, batch: &Batch, stop: &AtomicBool) -> Own {
        if self.held.holds(batch.batch, batch.seq) {
            return Own::Held;
        }
        loop {
            let state = self
                .confirmed
                .lock()
                .get(&batch.batch)
                .map(|(done, _)| *done);
            match state {
                Some(true) => {
                    self.confirmed.lock().remove(&batch.batch);
                    return Own::Held;
                }
                Some(false) if !stop.load(Ordering::Acquire) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Some(false) => return Own::Stopping,
                None => return Own::Missing,
            }
        }
    }

    /// Applies the whole batch at once (one frame holds it): the tree has
    /// then followed through it, whatever was left out. Waits while a
    /// change of this host's not settled yet touches its paths.
    fn apply_whole(
        &self,
        store: &Store,
        batch: &Batch,
        whole: &[(Vec<ChangeOp>, ChangeRec)],
        stop: &AtomicBool,
    ) -> Vec<crate::store::Ticket> {
        loop {
            let changes = whole
                .iter()
                .map(|(ops, rec)| {
                    let foreign = Foreign {
                        seq: batch.seq,
                        record: Arc::new(rec.clone()),
                    };
                    (ops.clone(), foreign)
                })
                .collect();
            match store.apply_foreign(changes, batch.seq, &|paths| self.unsettled.busy(paths)) {
                Ok(tickets) => return tickets,
                Err(_busy) if stop.load(Ordering::Acquire) => return Vec::new(),
                Err(_busy) => self.unsettled.wait(Duration::from_millis(20)),
            }
        }
    }

    /// Forgets batches of this host's confirmed committed that the tree
    /// has followed past (a lone writer's: the follower never reads them).
    fn forget_passed(&self, store: &Store) {
        let followed = store.followed();
        self.confirmed
            .lock()
            .retain(|_, (done, last)| !*done || *last > followed);
    }
}

/// Contents fetched at once: at most this many bytes (by the records' sizes).
const GROUP_BYTES: u64 = 32 << 20;

/// What the follower does with a batch of this host's.
enum Own {
    /// The journal holds it: skipped.
    Held,
    /// Its outcome is still being settled and the follower is stopping.
    Stopping,
    /// Not here (its frame was lost, or it was taken back here and
    /// committed after all): applied like another host's.
    Missing,
}

/// A batch's changes with their ops, each row naming the batch's origin;
/// a change whose content the store does not hold is left out (and said).
fn whole_of(
    batch: &Batch,
    contents: &HashMap<String, Arc<Vec<u8>>>,
) -> Vec<(Vec<ChangeOp>, ChangeRec)> {
    let mut whole = Vec::with_capacity(batch.changes.len());
    for rec in &batch.changes {
        let Some(ops) = ops_of(rec, contents) else {
            tracing::warn!(
                "a change of another host's names content the shared store does not hold; it is left out (version {})",
                batch.seq
            );
            continue;
        };
        let mut rec = rec.clone();
        for row in &mut rec.rows {
            row.origin = Some(batch.origin.clone());
        }
        whole.push((ops, rec));
    }
    whole
}

/// The sha256s a batch's writes name.
fn shas_of(batch: &Batch) -> Vec<String> {
    batch
        .changes
        .iter()
        .flat_map(|c| &c.ops)
        .filter_map(|op| match op {
            OpRec::Write { sha256, .. } => Some(sha256.clone()),
            _ => None,
        })
        .collect()
}

/// How many of `page`'s first batches to fetch the contents of at once:
/// other hosts' writes adding up to at most [`GROUP_BYTES`] (at least one
/// batch).
fn group_len(page: &[Batch], origin: &str) -> usize {
    let mut bytes = 0u64;
    for (i, batch) in page.iter().enumerate() {
        if batch.origin != origin {
            bytes += batch
                .changes
                .iter()
                .flat_map(|c| &c.ops)
                .map(|op| match op {
                    OpRec::Write { size, .. } => *size,
                    _ => 0,
                })
                .sum::<u64>();
        }
        if bytes > GROUP_BYTES && i > 0 {
            return i;
        }
    }
    page.len()
}

/// A record's ops with their contents (`None` if one is missing).
fn ops_of(
    rec: &ChangeRec,
    contents: &HashMap<String, Arc<Vec<u8>>>,
) -> Option<Vec<crate::store::ChangeOp>> {
    let mut ops = Vec::with_capacity(rec.ops.len());
    for op in &rec.ops {
        let data = match op {
            OpRec::Write { sha256, .. } => Some(contents.get(sha256)?.clone()),
            _ => None,
        };
        ops.push(op.to_op(|| data.unwrap_or_default())?);
    }
    Some(ops)
}

impl Follow {
    /// The store's name in the database.
    fn name(&self) -> &str {
        self.target.store.as_str()
    }
}

impl Tracked {
    /// One catch-up, on a follow-pool thread: every batch past what the
    /// tree shows, then what the tree holds that the store has not taken
    /// (a person's save that lost a race, or made while the store could
    /// not be reached) sent again, over what was just applied. A failure
    /// ends it; the listener's next poll wakes the store again.
    fn catch_up_once(&self) {
        // (Tests turn following off here: nothing of other hosts' is applied.)
        fail::fail_point!("shared::follow-off", |_| self.ready(Ok(())));
        let outcome = self.database.reader().and_then(|mut reader| {
            let read = self.read(&mut reader);
            match &read {
                Ok(()) => self.database.keep_reader(reader),
                Err(_) => self.database.forget_readers(),
            }
            read
        });
        match &outcome {
            Ok(()) => {
                if let Some(store) = self.follow.store.upgrade() {
                    // It answered: what this copy shows is current again.
                    store.set_unreachable(None);
                    self.follow.forget_passed(&store);
                    if store.unsaved_paths() > 0 {
                        let _ = store.barrier(crate::store::Origin::Memfs);
                    }
                }
            }
            Err(e) => tracing::info!(
                "catching up with the shared store failed ({}); trying again",
                cause(e)
            ),
        }
        self.ready(outcome);
    }

    fn read(&self, reader: &mut Reader) -> Result<(), UpstreamError> {
        if !self.prepared.load(Ordering::Acquire) {
            prepare(&mut reader.client, self.follow.name())?;
            self.prepared.store(true, Ordering::Release);
        }
        self.follow.catch_up(reader, &self.stopping)
    }

    fn ready(&self, outcome: Result<(), UpstreamError>) {
        if let Some(tx) = self.first.lock().take() {
            let _ = tx.send(outcome);
        }
    }

    /// The job: the catch-up, then one more if woken meanwhile. A catch-up
    /// that panics ends as one that failed (the pool goes on): the store is
    /// woken again by the next poll, and a stop never waits for it.
    fn turn(self: Arc<Self>) {
        {
            let mut turn = self.turn.lock();
            turn.queued = false;
            if turn.stopped {
                return;
            }
            turn.running = true;
        }
        // (Only a panic drops the guard; a normal end is marked below,
        // with `again` read under the same lock.)
        let guard = Ended(&self);
        self.catch_up_once();
        std::mem::forget(guard);
        let again = {
            let mut turn = self.turn.lock();
            turn.running = false;
            let again = turn.again && !turn.stopped;
            turn.again = false;
            self.ended.notify_all();
            again
        };
        if again {
            self.wake();
        }
    }
}

/// Marks a catch-up that panicked ended (dropped while unwinding only).
struct Ended<'a>(&'a Tracked);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        let mut turn = self.0.turn.lock();
        turn.running = false;
        self.0.ended.notify_all();
        drop(turn);
        self.0.ready(Err(UpstreamError::Unreachable(
            "catching up with the shared store failed".into(),
        )));
    }
}

impl Followed for Tracked {
    fn store(&self) -> &str {
        self.follow.name()
    }

    fn origin(&self) -> &str {
        &self.follow.origin
    }

    fn due(&self, head: u64) -> bool {
        self.follow
            .store
            .upgrade()
            .is_some_and(|s| s.followed() < head || s.unsaved_paths() > 0)
    }

    fn reachable(&self, down_since: Option<std::time::SystemTime>) {
        if let Some(store) = self.follow.store.upgrade() {
            store.set_unreachable(down_since);
        }
    }

    fn wake(self: Arc<Self>) {
        let mut turn = self.turn.lock();
        if turn.stopped || turn.queued {
            return;
        }
        if turn.running {
            turn.again = true;
            return;
        }
        turn.queued = true;
        drop(turn);
        crate::pool::follow().now(Box::new(move || self.turn()));
    }
}

impl Follower {
    /// Stops following (before the journal shuts down): no catch-up starts
    /// after this, and the one running has ended when it returns.
    pub fn stop(&mut self) {
        let Some(t) = self.tracked.take() else {
            return;
        };
        t.stopping.store(true, Ordering::Release);
        let followed: Arc<dyn Followed> = t.clone();
        t.database.unfollow(&followed);
        let mut turn = t.turn.lock();
        turn.stopped = true;
        while turn.running {
            t.ended.wait(&mut turn);
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop();
    }
}
