//! The journal's writer: the commit of one batch (whoever leads the group
//! commit runs it, `journal::group`: a waiter's own thread or the commit
//! pool's), appending the store's changes in the order they were applied,
//! as one frame per batch (all the changes that queued while the last
//! flush ran), made durable by one
//! `fdatasync` of one file, and only then acknowledged. The frame then goes
//! to the checkpointer, which brings the plain files up to date behind it.
//!
//! A segment file is opened for each frame and closed after it, so that
//! no file stays open for writing (a read-only remount of the disk must not
//! be refused as busy).
//!
//! When the disk refuses: a frame that could not be written is truncated
//! away (or, if even that fails, the next frame begins a new segment that
//! seals the old one before it); its changes are handed back to the store,
//! which takes back what it can (an agent's: "did not take effect") and
//! keeps the rest in memory, written again with the next change. A frame
//! written whose flush failed is treated the same way, except that nothing
//! of it is taken back ("is in memory"), and the next frame begins a new
//! segment sealing the old one before it, so a frame whose flush failed is
//! never read back. Either way the view is put back as it was: the versions
//! those changes made are written again when their content is.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use crate::lock::{rank, Mutex, MutexGuard};
use crate::persist::storage::Dir;

use super::batch::{needed_of, plain_bytes, Built, Placement};
use super::deferred::{Deferred, ForCheckpointer};
use super::handoff::Msg;
use super::record::{Header, OwnBatch};
use super::state::State;
use super::upstream::{outgoing, Outgoing, UpstreamError};
use super::versions::{Context, Needed};
use super::Options;
use crate::error::DiskError;
use crate::store::{Change, Ticket};

/// Counters of the journal's work, for benchmarks and `--stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub changes: u64,
    pub batches: u64,
    /// Flushes of the journal (one per frame written).
    pub barriers: u64,
}

/// How much the journal did (see [`Stats`]).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) changes: AtomicU64,
    pub(super) batches: AtomicU64,
    /// Frames written.
    pub(super) barriers: AtomicU64,
}

/// Holds the rewriting lock and counts the rewrite as it begins and ends.
pub(super) struct Rewriting<'a> {
    _alone: crate::lock::MutexGuard<'a, ()>,
    count: &'a AtomicU64,
}

impl Drop for Rewriting<'_> {
    fn drop(&mut self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

impl Core {
    /// Begins a rewrite of segments (one at a time).
    pub(super) fn rewrite(&self) -> Rewriting<'_> {
        let alone = self.upkeep.rewriting.lock();
        self.flush_deferred(&mut self.state.lock());
        self.upkeep.rewrites.fetch_add(1, Ordering::SeqCst);
        Rewriting {
            _alone: alone,
            count: &self.upkeep.rewrites,
        }
    }
}

pub(super) struct Core {
    /// The changes waiting for a commit, and who commits them.
    pub(super) group: super::group::GroupCommit<(Change, Ticket)>,
    pub state: Mutex<State>,
    /// `DIR/.memfs/journal`.
    pub dir: Dir,
    /// The plain files: `DIR/memories` (to read a content found there
    /// before its first change), and what memfs last left in them (and
    /// what it left out).
    pub files: super::Files,
    pub opts: Options,
    /// What the journal owes the next frame.
    pub(super) owed: super::owed::Owed,
    /// Where refusals go, and what they left.
    pub(super) refusals: super::owed::Refusals,
    pub(super) counters: Counters,
    /// Rewrites of segments (compaction, redaction) and their counts.
    pub upkeep: super::upkeep::Upkeep<Core>,
    /// What goes to the checkpointer, and what it reports.
    pub handoff: super::handoff::Handoff,
    /// The shared store, when the memory is one, and this host's changes
    /// not settled there yet.
    pub sharing: super::upstream::Sharing,
    /// This, for the tickets' helpers.
    pub me: std::sync::OnceLock<std::sync::Weak<Core>>,
}

impl Core {
    pub fn new(
        state: State,
        dir: Dir,
        files: &super::Files,
        opts: Options,
        checkpointed: u64,
    ) -> Core {
        Core {
            group: super::group::GroupCommit::new(),
            sharing: super::upstream::Sharing::new(),
            handoff: super::handoff::Handoff::new(state.log.stuck_written.clone(), checkpointed),
            state: Mutex::new(rank::STATE, state),
            dir,
            files: files.clone(),
            opts,
            owed: super::owed::Owed::new(),
            refusals: super::owed::Refusals::new(),
            counters: Counters::default(),
            upkeep: super::upkeep::Upkeep::new(),
            me: std::sync::OnceLock::new(),
        }
    }

    /// Asks the compactor to run if the journal is past its retention.
    pub(super) fn compact_if_due(&self, st: &State) {
        let mut c = self.upkeep.compact.lock();
        if !c.asked && !c.stop && super::retention::due(st, &self.opts.keep, c.last) {
            c.asked = true;
            let (me, run) = (
                self.me.get().cloned(),
                self.upkeep.compaction.get().copied(),
            );
            crate::pool::background().now(Box::new(move || {
                if let (Some(core), Some(run)) =
                    (me.as_ref().and_then(std::sync::Weak::upgrade), run)
                {
                    run(&core);
                }
            }));
        }
    }

    pub fn stats(&self) -> Stats {
        Stats {
            changes: self.counters.changes.load(Ordering::Relaxed),
            batches: self.counters.batches.load(Ordering::Relaxed),
            barriers: self.counters.barriers.load(Ordering::Relaxed),
        }
    }

    pub(super) fn send(&self, msg: Msg) -> bool {
        let ck = self.handoff.checkpointer.lock().clone();
        match ck {
            Some(ck) => ck.send(msg),
            None => false,
        }
    }

    /// At shutdown: the checkpointer writes out everything, then the
    /// journal says so (a clean stop leaves nothing to replay).
    pub(super) fn finish(&self) {
        self.flush_deferred(&mut self.state.lock());
        let (tx, rx) = mpsc::sync_channel(1);
        if self.send(Msg::Stop(tx)) && rx.recv() == Ok(false) {
            tracing::warn!(
                "the plain files could not all be brought up to date before stopping; the journal holds every change, and the next start replays it into them"
            );
        }
        self.write_checkpoint();
    }

    /// Asks the checkpointer to write out what it holds now and waits for it
    /// (at most `limit`): a delete it has not carried out yet may free the
    /// room a write needs.
    /// Whether the plain files are current through everything handed over
    /// (`None`: no answer within `limit`).
    pub(super) fn checkpoint_now(&self, limit: Duration) -> Option<bool> {
        self.flush_deferred(&mut self.state.lock());
        let (tx, rx) = mpsc::sync_channel(1);
        match self.send(Msg::Flush(tx)) {
            true => rx.recv_timeout(limit).ok(),
            false => Some(true),
        }
    }

    /// A frame with nothing but how far the checkpointer got, if that moved.
    pub(super) fn write_checkpoint(&self) {
        let mut st = self.state.lock();
        let known = self.handoff.checkpointed.load(Ordering::Acquire);
        if known <= st.log.checkpoint_written && *self.handoff.stuck.lock() == st.log.stuck_written
        {
            return;
        }
        let header = Header {
            checkpoint: Some(known),
            ..Header::default()
        };
        let _ = self.append(&mut st, header, &[], 0);
    }

    /// Writes one batch as one frame. With `up`, a shared store's
    /// transaction: its head numbers the versions, and it commits this
    /// host's changes of the frame before the frame is written; when it
    /// fails, nothing is written and the batch is handed back. The batch's
    /// records are made and checked for room under the state's lock
    /// ([`Core::prepare`]); the lock is let go for the shared store's round
    /// trips ([`Core::let_go`], [`Core::send_upstream`]) and taken again to
    /// settle the answer ([`Core::settle_upstream`]), write the frame
    /// ([`Core::write_frame`]) and settle it ([`Core::settle_written`]);
    /// each failure path undoes the same changes and owes the same batches
    /// again.
    pub(super) fn commit_batch(
        &self,
        changes: Vec<Change>,
        tickets: Vec<Ticket>,
        up: Option<Box<dyn super::upstream::Transaction + '_>>,
    ) -> Option<(Vec<Change>, Vec<Ticket>, super::upstream::UpstreamError)> {
        let (mut st, mut p) = self.prepare(self.state.lock(), &changes, up.as_deref());
        if let Some(tx) = up {
            // The round trips run with the state let go (see `gate.rs`).
            let sending = p.sending.take();
            let sent;
            (st, sent) = self.let_go(st, p.batch, || Self::send_upstream(tx, sending));
            if let Err(e) = self.settle_upstream(&mut st, &mut p, sent) {
                self.give_back(p.built, &mut st);
                return Some((changes, tickets, e));
            }
        }
        // What the frame says, now in memory too (the follow it reached
        // takes in any batch of this host's that now follows on).
        st.follow = p.followed;
        st.hold_own(p.mine);
        let (written, this_batch) = self.write_frame(&mut st, &p, &changes);
        self.settle_written(st, written, p, (changes, tickets), this_batch);
        None
    }

    /// A batch's records, made and applied to the view (what the journal
    /// owes first), its contents placed, what fits on the disk kept, and
    /// its frame's header. With `tx`, its ids follow the shared store's head.
    fn prepare<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        changes: &[Change],
        tx: Option<&(dyn super::upstream::Transaction + '_)>,
    ) -> (MutexGuard<'a, State>, Pending) {
        let (mut built, time) = self.build(&mut st, changes, tx);
        let batch = st.next_batch;
        let (mut st, fits) = self.fitting(st, &mut built, changes.len());
        // What did not fit is taken out again.
        built.keep(&mut st, fits);
        let (body, placed) = built.take_body(fits);
        let followed = followed(&st, &changes[..fits]);
        let (own, own_since) = st.own_record();
        let header = Header {
            batch: Some(batch),
            time: Some(time.clone()),
            checkpoint: None,
            follow: (followed > 0).then_some(followed),
            own,
            own_since,
            changes: built.frame_changes(fits),
            contents: placed.clone(),
            ..Header::default()
        };
        let sending = tx
            .filter(|_| fits > 0)
            .map(|tx| to_send(tx.head(), batch, &time, &changes[..fits], &built, &st));
        let p = Pending {
            batch,
            built,
            fits,
            body,
            placed,
            header,
            followed,
            mine: None,
            sending,
        };
        (st, p)
    }

    /// Each change's records, made and applied to the view (what the
    /// journal owes goes first), and which contents the frame carries and
    /// which it only names; with the batch's time.
    fn build(
        &self,
        st: &mut State,
        changes: &[Change],
        tx: Option<&(dyn super::upstream::Transaction + '_)>,
    ) -> (Built, String) {
        // (Before what is owed is taken: a failed flush owes its frame.)
        self.flush_deferred(st);
        if let Some(tx) = tx {
            // Ids from the shared counter: unique across hosts, in commit order.
            let next = tx.head() + 1;
            st.ids.next_version = st.ids.next_version.max(next);
            st.ids.next_change = st.ids.next_change.max(next);
        }
        let time = crate::journal::now_text();
        let batch = st.next_batch;
        let read_plain = |path: &crate::path::MemPath| {
            crate::persist::read_file(&self.files.memories, path).ok()
        };
        let cx = Context {
            time: &time,
            batch,
            read_plain: &read_plain,
        };
        let start = std::mem::take(&mut *self.owed.behind.lock());
        let owed_batches = std::mem::take(&mut *self.owed.batches.lock());
        let built = Built::build(st, changes, &cx, start, owed_batches);
        (built, time)
    }

    /// How many of a batch's changes fit on the disk: a change needs room
    /// for its new contents here and for the files it writes in the plain
    /// files (the checkpointer writes them later, with what it has not
    /// written yet); one that writes nothing fits in the reserve. When
    /// some do not, the checkpointer writes out first.
    fn fitting<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        built: &mut Built,
        changes: usize,
    ) -> (MutexGuard<'a, State>, usize) {
        let fits = self.room_for(&st, &built.placing.new_bytes, &built.plain);
        if fits >= changes {
            return (st, fits);
        }
        // The batch is in flight meanwhile: no rewrite changes the view or
        // the contents under it (see `gate.rs`).
        let batch = st.next_batch;
        let (mut st, _) = self.let_go(st, batch, || self.checkpoint_now(Duration::from_secs(2)));
        // Placed again, under this hold: nothing that moves contents runs
        // while a batch is in flight, but the frame must name only what
        // the journal holds, and this is cheap.
        built.place_again(&mut st);
        let fits = self.room_for(&st, &built.placing.new_bytes, &built.plain);
        (st, fits)
    }

    /// The shared store's round trips, with the state let go: WRITE and
    /// COMMIT (and the lookup when the answer is lost), or, when nothing of
    /// the batch fits on the disk here, the transaction's end. Returns the
    /// own batch once it is committed.
    fn send_upstream(
        tx: Box<dyn super::upstream::Transaction + '_>,
        sending: Option<(Outgoing, OwnBatch)>,
    ) -> Result<Option<OwnBatch>, UpstreamError> {
        let Some((out, own)) = sending else {
            drop(tx);
            return Ok(None);
        };
        tx.commit(out).map(|()| Some(own))
    }

    /// Back under the state: what the shared store's answer makes of the
    /// batch. Once committed, this host's changes are the truth: whatever
    /// the disk here does, the batch stands (a frame the disk refuses is
    /// owed). The frame says it holds the batch: by `follow` when it
    /// follows on from every version this journal holds, else in `own`.
    fn settle_upstream(
        &self,
        st: &mut State,
        p: &mut Pending,
        sent: Result<Option<OwnBatch>, UpstreamError>,
    ) -> Result<(), UpstreamError> {
        // Nothing but the committer moves these while a batch is in flight.
        debug_assert_eq!(st.next_batch, p.batch);
        debug_assert!(st.log.deferred.is_none());
        let own = match sent {
            Err(UpstreamError::Taken(next)) => {
                st.next_batch = st.next_batch.max(next);
                return Err(UpstreamError::Again);
            }
            Err(e) => return Err(e),
            Ok(None) => return Ok(()),
            Ok(Some(own)) => own,
        };
        (p.followed, p.header.own) = st.own_after(p.followed, own);
        p.header.follow = (p.followed > 0).then_some(p.followed);
        p.mine = Some(own);
        Ok(())
    }

    /// Writes the batch's frame (deferring its flush when a shared store
    /// holds the batch, see `Deferred`); returns how that went and the
    /// checkpointer's batch for it.
    fn write_frame(
        &self,
        st: &mut State,
        p: &Pending,
        changes: &[Change],
    ) -> (Result<u64, Failure>, ForCheckpointer) {
        let fits = p.fits;
        // A batch the shared store holds (this host's, just committed, or
        // other hosts', followed) is flushed here after it is acknowledged.
        let held_upstream = p.mine.is_some()
            || (self.sharing.upstream.get().is_some()
                && p.built.start.is_empty()
                && changes[..fits]
                    .iter()
                    .all(|c| c.foreign.is_some() || c.ops.is_empty()));
        let this_batch: ForCheckpointer = (
            p.batch,
            changes[..fits]
                .iter()
                .filter(|c| !c.ops.is_empty())
                .cloned()
                .collect(),
            p.built.plain[..fits].iter().sum(),
        );
        let defer = held_upstream.then(|| Deferred {
            segment: 0,
            at: 0,
            header: p.header.clone(),
            body: p.body.clone(),
            placed: p.placed.clone(),
            for_checkpointer: p
                .built
                .owed_batches
                .iter()
                .cloned()
                .chain([this_batch.clone()])
                .collect(),
        });
        if fits == 0 {
            return (Err(Failure::Refused(no_room())), this_batch);
        }
        self.counters.barriers.fetch_add(1, Ordering::Relaxed);
        let parts: Vec<&[u8]> = p.body.iter().map(|b| b.as_slice()).collect();
        let written = self.append_deferring(st, p.header.clone(), &parts, p.batch, defer);
        (written, this_batch)
    }

    /// What a batch's frame came to: its tickets settled, its batch to the
    /// checkpointer (now, or once a deferred frame is flushed); a frame
    /// the disk refused is owed when a shared store holds the batch, else
    /// the batch is taken back and refused.
    fn settle_written(
        &self,
        mut st: MutexGuard<'_, State>,
        written: Result<u64, Failure>,
        p: Pending,
        (changes, tickets): (Vec<Change>, Vec<Ticket>),
        this_batch: ForCheckpointer,
    ) {
        let (batch, fits) = (p.batch, p.fits);
        match written {
            Ok(body_at) => {
                st.hold_contents(body_at, &p.placed);
                st.next_batch = batch + 1;
                let deferred = st.log.deferred.is_some();
                self.compact_if_due(&st);
                drop(st);
                self.say_how_the_disk_is(None);
                // Deferred: acknowledged now; the checkpointer has the
                // batch once the frame is flushed (the commit pool does
                // that next). Otherwise what this frame held that was owed
                // goes to it first.
                if !deferred {
                    for owed in p.built.owed_batches {
                        self.to_checkpointer(owed);
                    }
                }
                let plain = &p.built.plain;
                self.taken(batch, &changes, &tickets, plain, fits, no_room(), !deferred);
                if deferred {
                    // The commit pool flushes it.
                    self.tick_after(Duration::ZERO);
                }
            }
            Err(_) if self.sharing.upstream.get().is_some() => {
                // A shared store holds the batch: the frame is owed, and
                // the changes stand (the view keeps them).
                st.next_batch = batch + 1;
                drop(st);
                self.owe_frame(p.header, p.body, p.placed);
                self.owe_batches(p.built.owed_batches, Some(this_batch));
                let plain = &p.built.plain;
                self.taken(batch, &changes, &tickets, plain, fits, no_room(), false);
            }
            Err(failure) => {
                self.give_back(p.built, &mut st);
                drop(st);
                match failure {
                    // Nothing of the frame reached the disk.
                    Failure::Refused(e) => self.refuse(&changes, &tickets, 0, e, false),
                    // Written, not confirmed: kept, written again.
                    Failure::Unconfirmed(e) => self.refuse(&changes, &tickets, fits, e, true),
                }
            }
        }
    }

    /// A batch whose frame is not written, taken back: the view as it was,
    /// and what it held that was owed, owed again.
    fn give_back(&self, built: Built, st: &mut State) {
        let (start, owed_batches) = built.roll_back(st);
        self.owe(start);
        self.owe_batches(owed_batches, None);
    }

    /// The start's own frame (before the threads run): what was found
    /// changed on disk, and that the plain files are current through it.
    pub fn write_start(
        &self,
        found: Option<super::record::ChangeRec>,
        needed: Vec<Needed>,
        batch: u64,
        time: &str,
        files_current: bool,
    ) -> io::Result<()> {
        let mut st = self.state.lock();
        st.next_batch = batch + 1;
        let placing = Placement::of(&mut st, &[], &[needed]);
        let (body, placed) = (placing.body, placing.placed);
        if files_current {
            self.handoff.checkpointed.fetch_max(batch, Ordering::AcqRel);
        }
        let (own, own_since) = st.own_record();
        let header = Header {
            batch: Some(batch),
            time: Some(time.to_string()),
            changes: found.clone().into_iter().collect(),
            contents: placed.clone(),
            own,
            own_since,
            ..Header::default()
        };
        let parts: Vec<&[u8]> = body.iter().map(|b| b.as_slice()).collect();
        match self.append(&mut st, header, &parts, batch) {
            Ok(body_at) => {
                st.hold_contents(body_at, &placed);
                Ok(())
            }
            Err(Failure::Refused(e) | Failure::Unconfirmed(e)) => {
                // It goes first in the next frame.
                if let Some(found) = found {
                    let needed = needed_of(body, &placed);
                    self.owed.behind.lock().push((found, needed));
                }
                Err(io::Error::from_raw_os_error(e.errno))
            }
        }
    }

    /// Hands a batch to the checkpointer (start-up's replay, to try again).
    pub fn hand_over(&self, batch: u64, changes: Vec<Change>) {
        let plain = changes.iter().map(plain_bytes).sum();
        self.handoff.unwritten.fetch_add(plain, Ordering::AcqRel);
        self.send(Msg::Batch {
            batch,
            changes,
            plain,
        });
    }

    /// Hands a batch whose frame is durable to the checkpointer.
    pub(super) fn to_checkpointer(&self, (batch, changes, plain): ForCheckpointer) {
        if changes.is_empty() {
            return;
        }
        self.handoff.unwritten.fetch_add(plain, Ordering::AcqRel);
        self.send(Msg::Batch {
            batch,
            changes,
            plain,
        });
    }
}

/// A batch between its records and its frame (see [`Core::commit_batch`]).
struct Pending {
    batch: u64,
    built: Built,
    /// How many of its changes fit on the disk (the first ones).
    fits: usize,
    body: Vec<Arc<Vec<u8>>>,
    placed: Vec<super::record::ContentRec>,
    header: Header,
    /// How far the journal follows a shared store with this frame.
    followed: u64,
    /// This host's batch, once the shared store committed it.
    mine: Option<OwnBatch>,
    /// What goes to the shared store, and the own batch it makes there
    /// (with a transaction, when something fits).
    sending: Option<(Outgoing, OwnBatch)>,
}

/// What goes to the shared store, and the own batch it makes there (the
/// store's head `head` before it), built under the state from the ids the
/// batch was built with: the round trips run without the state.
fn to_send(
    head: u64,
    batch: u64,
    time: &str,
    changes: &[Change],
    built: &Built,
    st: &State,
) -> (Outgoing, OwnBatch) {
    let fits = changes.len();
    let (records, needs) = (&built.records[..fits], &built.needs[..fits]);
    let out = outgoing(batch, time, changes, records, needs, &st.ids);
    let last = out.last;
    (out, OwnBatch { batch, head, last })
}

/// How far a journal follows a shared store with a frame of `changes`.
fn followed(st: &State, changes: &[Change]) -> u64 {
    changes
        .iter()
        .filter_map(|c| c.foreign.as_ref().map(|f| f.seq))
        .max()
        .unwrap_or(0)
        .max(st.follow)
}

/// The refusal of a change the disk has no room for.
fn no_room() -> DiskError {
    DiskError::new(
        "writing the journal",
        io::Error::from_raw_os_error(libc::ENOSPC),
    )
}

/// Why a frame did not become durable.
pub(super) enum Failure {
    /// Nothing of it is on disk (or ever read back).
    Refused(DiskError),
    /// Written, but its flush failed: it may or may not be on disk, and is
    /// never read back.
    Unconfirmed(DiskError),
}
