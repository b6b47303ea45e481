//! The journal's writer: one thread that appends the store's changes in
//! the order they were applied, as one frame per batch (group commit: all
//! the changes that queued while the last flush ran), made durable by one
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

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::persist::storage::{Dir, File, Open};
use parking_lot::{Condvar, Mutex};

use super::deferred::{Deferred, ForCheckpointer};
use super::frame;
use super::handoff::Msg;
use super::record::{ContentRec, Header, OwnBatch, SegmentInfo};
use super::segment;
use super::state::{Loc, State};
use super::versions::{self, Context, Needed};
use super::view::Undo;
use super::Options;
use crate::digest::Sha;
use crate::error::{DiskError, Error};
use crate::store::{Change, ChangeSink, Refused, Ticket};

/// Counters of the journal's work, for benchmarks and `--stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub changes: u64,
    pub batches: u64,
    /// Flushes of the journal (one per frame written).
    pub barriers: u64,
}

#[derive(Default)]
pub(super) struct Queue {
    pub items: VecDeque<(Change, Ticket)>,
    pub stop: bool,
}

/// Every barrier with a sequence number below `below` was queued before a
/// change ahead of it was refused and kept in memory: it must not answer
/// that everything before it is durable.
#[derive(Default)]
struct Taint {
    below: u64,
    error: Option<DiskError>,
}

/// Holds the rewriting lock and counts the rewrite as it begins and ends.
pub(super) struct Rewriting<'a> {
    _alone: parking_lot::MutexGuard<'a, ()>,
    count: &'a AtomicU64,
}

impl Drop for Rewriting<'_> {
    fn drop(&mut self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

impl Shared {
    /// Begins a rewrite of segments (one at a time).
    pub(super) fn rewrite(&self) -> Rewriting<'_> {
        let alone = self.rewriting.lock();
        self.flush_deferred(&mut self.state.lock());
        self.rewrites.fetch_add(1, Ordering::SeqCst);
        Rewriting {
            _alone: alone,
            count: &self.rewrites,
        }
    }
}

pub(super) struct Shared {
    pub queue: Mutex<Queue>,
    pub wake: Condvar,
    pub state: Mutex<State>,
    /// `DIR/.memfs/journal`.
    pub dir: Dir,
    /// `DIR/memories`, to read a content found there before its first change.
    pub memories: Dir,
    pub opts: Options,
    /// Where refused batches go (taken at shutdown, which ends the
    /// store's side of the channel).
    pub recovery: Mutex<Option<Sender<Refused>>>,
    pub checkpointer: Mutex<Option<Sender<Msg>>>,
    /// The newest batch the checkpointer made the plain files current
    /// (and durable) through.
    pub checkpointed: AtomicU64,
    /// The paths the checkpointer could not bring up to date (see
    /// `checkpoint::Stuck`), as of `checkpointed`: set under this lock
    /// before `checkpointed` moves, read under it with `checkpointed`.
    pub stuck: Mutex<Vec<String>>,
    /// Each stuck path with why, for reports (set with `stuck`).
    pub stuck_reasons: Mutex<Vec<String>>,
    /// Bytes of plain files the checkpointer has yet to write.
    pub unwritten: AtomicU64,
    pub changes: AtomicU64,
    pub batches: AtomicU64,
    pub barriers: AtomicU64,
    taint: Mutex<Taint>,
    /// The disk refused the last batch (said once, until it takes one again).
    refusing: AtomicBool,
    /// Held while segments are rewritten (compaction, redaction).
    pub rewriting: Mutex<()>,
    /// Counts rewrites, as they begin and as they end: a reader that
    /// follows the journal by offset reads it all again when it moved.
    pub rewrites: AtomicU64,
    /// Records the journal owes: what start-up found when the disk refused
    /// to take it then, and changes a shared store committed that the disk
    /// then refused here. They go first in the next frame.
    behind: Mutex<Vec<(super::record::ChangeRec, Vec<Needed>)>>,
    /// The checkpointer's batches for records in `behind` whose changes
    /// stand (a shared store holds them): the plain files follow them
    /// only once a frame holding them is flushed, so that a file on disk
    /// is never ahead of the journal (at the next start it would look
    /// like a change made while no memfs ran).
    owed_batches: Mutex<Vec<ForCheckpointer>>,
    /// The shared store this journal's batches are committed to first, if
    /// the memory is one (see `upstream.rs`).
    pub upstream: std::sync::OnceLock<Arc<dyn super::upstream::Upstream>>,
    /// A frame waits for its flush (see `Deferred`): the writer thread
    /// flushes it when it next wakes.
    pub flush_owed: AtomicBool,
    /// This host's changes handed over and not settled yet, with the paths
    /// they touch: another host's change to one of them waits (a shared
    /// store's follower asks, see `upstream.rs`).
    pub unsettled: Mutex<Vec<(u64, Vec<crate::path::MemPath>)>>,
    pub settled_now: Condvar,
    /// Held by whoever commits batches (the writer thread, or a waiter that
    /// leads: see `lead`), so that batches go to disk one at a time, in order.
    leader: Mutex<()>,
    /// This, for the tickets' helpers.
    pub me: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// Wakes the compactor; and when it last ran.
    pub compact: Mutex<Compaction>,
    pub compact_wake: Condvar,
}

#[derive(Default)]
pub(super) struct Compaction {
    pub asked: bool,
    pub stop: bool,
    pub last: Option<std::time::Instant>,
}

/// How long the writer thread leaves a queued change to its waiter to write.
const LEAD_FIRST: Duration = Duration::from_micros(500);
/// How long an idle writer waits before it writes down how far the
/// checkpointer got (so that a later start has less to replay).
const IDLE: Duration = Duration::from_secs(2);
/// Space kept allocated past a segment's end, so that on a full disk a
/// frame without contents (a delete, which makes room) can still go in.
const RESERVE: u64 = 256 << 10;

impl Shared {
    pub fn new(state: State, dir: Dir, memories: Dir, opts: Options, checkpointed: u64) -> Shared {
        Shared {
            queue: Mutex::default(),
            wake: Condvar::new(),
            stuck: Mutex::new(state.stuck_written.clone()),
            stuck_reasons: Mutex::new(Vec::new()),
            state: Mutex::new(state),
            dir,
            memories,
            opts,
            recovery: Mutex::new(None),
            checkpointer: Mutex::new(None),
            checkpointed: AtomicU64::new(checkpointed),
            unwritten: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            taint: Mutex::default(),
            refusing: AtomicBool::new(false),
            rewriting: Mutex::new(()),
            rewrites: AtomicU64::new(0),
            behind: Mutex::new(Vec::new()),
            owed_batches: Mutex::new(Vec::new()),
            upstream: std::sync::OnceLock::new(),
            flush_owed: AtomicBool::new(false),
            unsettled: Mutex::new(Vec::new()),
            settled_now: Condvar::new(),
            leader: Mutex::new(()),
            me: std::sync::OnceLock::new(),
            compact: Mutex::default(),
            compact_wake: Condvar::new(),
        }
    }

    /// Asks the compactor to run if the journal is past its retention.
    fn compact_if_due(&self, st: &State) {
        let mut c = self.compact.lock();
        if !c.asked && super::retention::due(st, &self.opts.keep, c.last) {
            c.asked = true;
            self.compact_wake.notify_one();
        }
    }

    pub fn stats(&self) -> Stats {
        Stats {
            changes: self.changes.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            barriers: self.barriers.load(Ordering::Relaxed),
        }
    }

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

    fn send(&self, msg: Msg) -> bool {
        match self.checkpointer.lock().as_ref() {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    /// At shutdown: the checkpointer writes out everything, then the
    /// journal says so (a clean stop leaves nothing to replay).
    fn finish(&self) {
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
    fn write_checkpoint(&self) {
        let mut st = self.state.lock();
        let known = self.checkpointed.load(Ordering::Acquire);
        if known <= st.checkpoint_written && *self.stuck.lock() == st.stuck_written {
            return;
        }
        let header = Header {
            checkpoint: Some(known),
            ..Header::default()
        };
        let _ = self.append(&mut st, header, &[], 0);
    }

    fn commit(&self, items: Vec<(Change, Ticket)>) {
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

    /// Writes one batch as one frame. With `up`, a shared store's
    /// transaction: its head numbers the versions, and it commits this
    /// host's changes of the frame before the frame is written; when it
    /// fails, nothing is written and the batch is handed back.
    ///
    /// Long because it is one batch commit under the state lock: record,
    /// place contents, check room, commit upstream, write; each failure
    /// path undoes the same changes and owes the same batches again.
    pub(super) fn commit_batch(
        &self,
        changes: Vec<Change>,
        tickets: Vec<Ticket>,
        up: Option<Box<dyn super::upstream::Transaction + '_>>,
    ) -> Option<(Vec<Change>, Vec<Ticket>, super::upstream::UpstreamError)> {
        let mut st = self.state.lock();
        // (Before what is owed is taken: a failed flush owes its frame.)
        self.flush_deferred(&mut st);
        if let Some(tx) = &up {
            // Ids from the shared counter: unique across hosts, in commit order.
            let next = tx.head() + 1;
            st.ids.next_version = st.ids.next_version.max(next);
            st.ids.next_change = st.ids.next_change.max(next);
        }
        let time = crate::journal::now_text();
        let batch = st.next_batch;
        let read_plain =
            |path: &crate::path::MemPath| crate::persist::read_file(&self.memories, path).ok();
        let cx = Context {
            time: &time,
            batch,
            read_plain: &read_plain,
        };
        // Each change's records, applied to the view as they are made.
        let mut records = Vec::with_capacity(changes.len());
        let mut undos: Vec<Undo> = Vec::with_capacity(changes.len());
        let mut needs: Vec<Vec<Needed>> = Vec::with_capacity(changes.len());
        for change in &changes {
            let mut undo = Undo::new();
            let mut needed = Vec::new();
            let record = if change.ops.is_empty() {
                None
            } else if let Some(foreign) = &change.foreign {
                let State { view, ids, .. } = &mut *st;
                versions::record_foreign(view, change, foreign, ids, &mut undo, &mut needed)
            } else {
                let State { view, ids, .. } = &mut *st;
                Some(versions::record(
                    view,
                    change,
                    ids,
                    &cx,
                    &mut undo,
                    &mut needed,
                ))
            };
            records.push(record);
            undos.push(undo);
            needs.push(needed);
        }
        // What the journal owes goes first.
        let start = std::mem::take(&mut *self.behind.lock());
        let owed_batches = std::mem::take(&mut *self.owed_batches.lock());
        // Which contents the frame carries and which it only names.
        let mut placing = Placement::of(&mut st, &start, &needs);
        // Room on the disk: a change needs room for its new contents here
        // and for the files it writes in the plain files (the checkpointer
        // writes them later, with what it has not written yet); one that
        // writes nothing fits in the reserve.
        let plain: Vec<u64> = changes.iter().map(plain_bytes).collect();
        let mut fits = self.room_for(&st, &placing.new_bytes, &plain);
        if fits < changes.len() {
            drop(st);
            self.checkpoint_now(Duration::from_secs(2));
            st = self.state.lock();
            // The lock was let go: a compaction may have dropped a content
            // this frame was to name. Placed again, under this hold.
            placing = Placement::of(&mut st, &start, &needs);
            fits = self.room_for(&st, &placing.new_bytes, &plain);
        }
        let no_room = DiskError::new(
            "writing the journal",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        // What did not fit is taken out again: the view back, latest first.
        for undo in undos.drain(fits..).rev() {
            st.view.roll_back(undo);
        }
        let body_len: u64 = placing.start_len + placing.new_bytes[..fits].iter().sum::<u64>();
        let (body, placed) = trim_body(placing.body, placing.placed, body_len);
        // How far this journal followed a shared store, with every frame.
        let followed = changes[..fits]
            .iter()
            .filter_map(|c| c.foreign.as_ref().map(|f| f.seq))
            .max()
            .unwrap_or(0)
            .max(st.follow);
        let follow = (followed > 0).then_some(followed);
        let (own, own_since) = st.own_record();
        let mut header = Header {
            batch: Some(batch),
            time: Some(time.clone()),
            checkpoint: None,
            follow,
            own,
            own_since,
            changes: start
                .iter()
                .map(|(rec, _)| rec.clone())
                .chain(records[..fits].iter().flatten().cloned())
                .collect(),
            contents: placed.clone(),
            ..Header::default()
        };
        let mut committed_upstream = false;
        let mut followed = followed;
        let mut mine = None;
        if let Some(tx) = up.filter(|_| fits > 0) {
            let head = tx.head();
            let sent = super::upstream::outgoing(
                batch,
                &time,
                &changes[..fits],
                &records[..fits],
                &needs[..fits],
                &st.ids,
            );
            let last = sent.last;
            if let Err(e) = tx.commit(sent) {
                for undo in undos.into_iter().rev() {
                    st.view.roll_back(undo);
                }
                self.owe(start);
                self.owe_batches(owed_batches, None);
                let e = match e {
                    super::upstream::UpstreamError::Taken(next) => {
                        st.next_batch = st.next_batch.max(next);
                        super::upstream::UpstreamError::Again
                    }
                    e => e,
                };
                return Some((changes, tickets, e));
            }
            // Committed: the truth now. Whatever the disk here does, the
            // batch stands (a frame the disk refuses is owed). The frame
            // says it holds the batch: by `follow` when it follows on from
            // every version this journal holds, else in `own`.
            committed_upstream = true;
            let own = OwnBatch { batch, head, last };
            (followed, header.own) = st.own_after(followed, own);
            header.follow = (followed > 0).then_some(followed);
            mine = Some(own);
        }
        // What the frame says, now in memory too (the follow it reached
        // takes in any batch of this host's that now follows on).
        st.follow = followed;
        st.hold_own(mine);
        let parts: Vec<&[u8]> = body.iter().map(|b| b.as_slice()).collect();
        // A batch the shared store holds (this host's, just committed, or
        // other hosts', followed) is flushed here after it is acknowledged
        // (see `Deferred`).
        let held_upstream = committed_upstream
            || (self.upstream.get().is_some()
                && start.is_empty()
                && changes[..fits]
                    .iter()
                    .all(|c| c.foreign.is_some() || c.ops.is_empty()));
        let this_batch: ForCheckpointer = (
            batch,
            changes[..fits]
                .iter()
                .filter(|c| !c.ops.is_empty())
                .cloned()
                .collect(),
            plain[..fits].iter().sum(),
        );
        let defer = held_upstream.then(|| Deferred {
            segment: 0,
            at: 0,
            header: header.clone(),
            body: body.clone(),
            placed: placed.clone(),
            for_checkpointer: owed_batches
                .iter()
                .cloned()
                .chain([this_batch.clone()])
                .collect(),
        });
        let written = if fits > 0 {
            self.barriers.fetch_add(1, Ordering::Relaxed);
            self.append_deferring(&mut st, header.clone(), &parts, batch, defer)
        } else {
            Err(Failure::Refused(no_room.clone()))
        };
        match written {
            Ok(body_at) => {
                let segment = st.active.number;
                for c in &placed {
                    if let Some(sha) = Sha::parse(&c.sha256) {
                        st.contents.insert(
                            sha,
                            Loc {
                                segment,
                                at: body_at + c.at,
                                len: c.len,
                            },
                        );
                    }
                }
                st.next_batch = batch + 1;
                let deferred = st.deferred.is_some();
                self.compact_if_due(&st);
                drop(st);
                self.say_how_the_disk_is(None);
                // Deferred: acknowledged now; the checkpointer has the
                // batch once the frame is flushed (the writer thread does
                // that next). Otherwise what this frame held that was owed
                // goes to it first.
                if !deferred {
                    for owed in owed_batches {
                        self.to_checkpointer(owed);
                    }
                }
                self.taken(batch, &changes, &tickets, &plain, fits, no_room, !deferred);
                if deferred {
                    // (Under the queue's lock, which the writer thread holds
                    // from its look at `flush_owed` to its wait: the wake-up
                    // cannot fall between them.)
                    let _queue = self.queue.lock();
                    self.wake.notify_one();
                }
            }
            Err(_) if self.upstream.get().is_some() => {
                // A shared store holds the batch: the frame is owed, and
                // the changes stand (the view keeps them).
                st.next_batch = batch + 1;
                drop(st);
                self.owe_frame(header, body, placed);
                self.owe_batches(owed_batches, Some(this_batch));
                self.taken(batch, &changes, &tickets, &plain, fits, no_room, false);
            }
            Err(failure) => {
                for undo in undos.into_iter().rev() {
                    st.view.roll_back(undo);
                }
                self.owe(start);
                self.owe_batches(owed_batches, None);
                drop(st);
                match failure {
                    // Nothing of the frame reached the disk.
                    Failure::Refused(e) => self.refuse(&changes, &tickets, 0, e, false),
                    // Written, not confirmed: kept, written again.
                    Failure::Unconfirmed(e) => self.refuse(&changes, &tickets, fits, e, true),
                }
            }
        }
        None
    }

    /// A batch whose first `fits` changes stand: they go to the
    /// checkpointer (unless `to_checkpointer` is false: its frame's flush,
    /// deferred, hands them over), and the rest (no room) back to the store.
    #[allow(clippy::too_many_arguments)]
    fn taken(
        &self,
        batch: u64,
        changes: &[Change],
        tickets: &[Ticket],
        plain: &[u64],
        fits: usize,
        no_room: DiskError,
        to_checkpointer: bool,
    ) {
        let durable: Vec<Change> = changes[..fits]
            .iter()
            .filter(|c| !c.ops.is_empty())
            .cloned()
            .collect();
        if to_checkpointer && !durable.is_empty() {
            let plain = plain[..fits].iter().sum();
            self.unwritten.fetch_add(plain, Ordering::AcqRel);
            self.send(Msg::Batch {
                batch,
                changes: durable,
                plain,
            });
        }
        if fits < changes.len() {
            self.refuse(changes, tickets, fits, no_room, false);
        } else {
            self.settle(changes, tickets);
        }
    }

    /// Puts records the journal still owes back, ahead of any owed since.
    fn owe(&self, start: Vec<(super::record::ChangeRec, Vec<Needed>)>) {
        if start.is_empty() {
            return;
        }
        let mut behind = self.behind.lock();
        let newer = std::mem::take(&mut *behind);
        *behind = start;
        behind.extend(newer);
    }

    /// A frame the disk refused whose changes stand (a shared store holds
    /// them): its records and contents go with the next frame.
    fn owe_frame(&self, header: Header, body: Vec<Arc<Vec<u8>>>, placed: Vec<ContentRec>) {
        let mut needed = needed_of(body, &placed);
        let mut behind = self.behind.lock();
        for rec in header.changes {
            behind.push((rec, std::mem::take(&mut needed)));
        }
    }

    /// The start's own frame (before the threads run): what was found
    /// changed on disk, and that the plain files are current through it.
    ///
    /// Long because it writes one frame under the state lock (place the
    /// contents, append, then record where they landed or put the found
    /// change back); both outcomes need `placed` and `body`.
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
        let mut body: Vec<Arc<Vec<u8>>> = Vec::new();
        let mut placed = Vec::new();
        let mut at = 0;
        let mut seen = std::collections::HashSet::new();
        for n in needed {
            if st.contents.contains_key(&n.sha) || !seen.insert(n.sha) {
                continue;
            }
            placed.push(ContentRec {
                sha256: n.sha.hex(),
                at,
                len: n.data.len() as u64,
            });
            at += n.data.len() as u64;
            body.push(n.data);
        }
        if files_current {
            self.checkpointed.fetch_max(batch, Ordering::AcqRel);
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
                let segment = st.active.number;
                for c in &placed {
                    if let Some(sha) = Sha::parse(&c.sha256) {
                        let loc = Loc {
                            segment,
                            at: body_at + c.at,
                            len: c.len,
                        };
                        st.contents.insert(sha, loc);
                    }
                }
                Ok(())
            }
            Err(Failure::Refused(e) | Failure::Unconfirmed(e)) => {
                // It goes first in the next frame.
                if let Some(found) = found {
                    let needed = needed_of(body, &placed);
                    self.behind.lock().push((found, needed));
                }
                Err(io::Error::from_raw_os_error(e.errno))
            }
        }
    }

    /// Hands a batch to the checkpointer (start-up's replay, to try again).
    pub fn hand_over(&self, batch: u64, changes: Vec<Change>) {
        let plain = changes.iter().map(plain_bytes).sum();
        self.unwritten.fetch_add(plain, Ordering::AcqRel);
        self.send(Msg::Batch {
            batch,
            changes,
            plain,
        });
    }

    /// How many of the batch's changes (in order) the disk has room for.
    fn room_for(&self, st: &State, new_bytes: &[u64], plain: &[u64]) -> usize {
        let Some(free) = free_bytes(&self.dir) else {
            return new_bytes.len();
        };
        let have = free + st.active.reserved.min(RESERVE / 2);
        let mut need = self.unwritten.load(Ordering::Acquire) + RESERVE / 2;
        for (i, (&n, &p)) in new_bytes.iter().zip(plain).enumerate() {
            if n + p == 0 {
                continue; // rows only: the reserve takes them
            }
            need += n + p;
            if need > have {
                return i;
            }
        }
        new_bytes.len()
    }

    /// Changes from `from` on did not take effect on disk (with `kept`, the
    /// ones before `from` were written but not confirmed): the store decides
    /// what memory becomes, then every ticket is settled.
    fn refuse(
        &self,
        changes: &[Change],
        tickets: &[Ticket],
        from: usize,
        e: DiskError,
        kept: bool,
    ) {
        self.say_how_the_disk_is(Some(&e));
        let (done, refused) = changes.split_at(from);
        let unconfirmed = if kept { done } else { &[] };
        let undone = self.recover(refused, unconfirmed, false);
        let kept_any = kept || undone.iter().any(|u| !u);
        if kept_any {
            self.taint_queued_barriers(e.clone());
        }
        for (i, ticket) in tickets.iter().enumerate() {
            let outcome = match i.checked_sub(from) {
                None if kept => Err(Error::Unsaved(e.clone())),
                None => self.barrier_outcome(&changes[i]),
                Some(j) if undone[j] => Err(Error::Disk(e.clone())),
                Some(_) => Err(Error::Unsaved(e.clone())),
            };
            ticket.settle(outcome);
        }
        self.forget_unsettled(changes);
    }

    /// Every change of the batch is durable.
    pub(super) fn settle(&self, changes: &[Change], tickets: &[Ticket]) {
        for (change, ticket) in changes.iter().zip(tickets) {
            ticket.settle(self.barrier_outcome(change));
        }
        self.forget_unsettled(changes);
    }

    /// Ok, unless `change` is a barrier queued before a change ahead of it
    /// was kept unsaved (it promises everything before it is on disk).
    fn barrier_outcome(&self, change: &Change) -> Result<(), Error> {
        if !change.ops.is_empty() {
            return Ok(());
        }
        let taint = self.taint.lock();
        match (&taint.error, change.seq < taint.below) {
            (Some(e), true) => Err(Error::Unsaved(e.clone())),
            _ => Ok(()),
        }
    }

    /// The store decides what memory becomes before anyone hears of a
    /// failure: what it can take back it does; the rest stays in memory and
    /// is written again with its next change. Nothing is reloaded.
    /// With `clean`, nothing of the refused changes reached any storage
    /// (a shared store refused them): only what memory keeps of them is
    /// to be written again.
    pub(super) fn recover(
        &self,
        refused: &[Change],
        unconfirmed: &[Change],
        clean: bool,
    ) -> Vec<bool> {
        let none = vec![false; refused.len()];
        let Some(tx) = self.recovery.lock().clone() else {
            return none;
        };
        let (answer, rx) = mpsc::sync_channel(1);
        let asked = tx.send(Refused {
            refused: refused.to_vec(),
            unconfirmed: unconfirmed.to_vec(),
            clean,
            answer,
        });
        match asked {
            Ok(()) => rx.recv().unwrap_or(none),
            Err(_) => none,
        }
    }

    /// A change was refused (or not confirmed) and kept in memory: its
    /// paths are written again with the next change the store makes, but
    /// the barriers already queued were made before the store knew, so they
    /// do not carry them. Each of those answers `Unsaved` (the caller may
    /// ask again: a new barrier carries the paths).
    pub(super) fn taint_queued_barriers(&self, cause: DiskError) {
        let queue = self.queue.lock();
        let Some((last, _)) = queue.items.back() else {
            return;
        };
        let mut taint = self.taint.lock();
        taint.below = taint.below.max(last.seq + 1);
        taint.error = Some(cause);
    }

    /// Logs a refusing disk once (not once per refused change), and when it
    /// takes writes again.
    fn say_how_the_disk_is(&self, refused: Option<&DiskError>) {
        let was = self.refusing.swap(refused.is_some(), Ordering::Relaxed);
        match (refused, was) {
            (Some(e), false) => tracing::warn!(
                "the disk refuses writes ({e}); agents' changes are taken back, people's kept in memory and written again later"
            ),
            (None, true) => {
                tracing::info!("the disk takes writes again; everything kept in memory is written")
            }
            _ => {}
        }
    }

    /// Flushes the frame written with its flush deferred, if there is one,
    /// and hands its batch to the checkpointer. A flush that fails leaves
    /// the frame never to be read back (the next frame seals the segment
    /// where it began) and owes its records and contents to the next frame:
    /// its changes stand, since the database holds them.
    pub(super) fn flush_deferred(&self, st: &mut State) {
        self.flush_owed.store(false, Ordering::Release);
        let Some(d) = st.deferred.take() else {
            return;
        };
        // A power cut after the answer: the frame never reaches the disk.
        fail::fail_point!("journal::lose-deferred", |_| lose_and_abort(
            &self.dir, d.segment, d.at
        ));
        let name = segment::name(d.segment);
        let flushed = self
            .dir
            .open_file(std::ffi::OsStr::new(&name), Open::Write)
            .and_then(|fd| sync_data(&fd));
        if let Err(e) = flushed {
            if st.active.number == d.segment {
                st.active.seal_at = Some(d.at);
            }
            for c in &d.placed {
                if let Some(sha) = Sha::parse(&c.sha256) {
                    if st
                        .contents
                        .get(&sha)
                        .is_some_and(|l| l.segment == d.segment && l.at >= d.at)
                    {
                        st.contents.remove(&sha);
                    }
                }
            }
            self.owe_frame(d.header, d.body, d.placed);
            self.owe_batches(d.for_checkpointer, None);
            if !self.refusing.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "the disk refuses this host's copy of the journal ({}); the shared store holds every change, and the copy is written again once the disk takes writes",
                    DiskError::new("flushing to stable storage", e)
                );
            }
            return;
        }
        for owed in d.for_checkpointer {
            self.to_checkpointer(owed);
        }
    }

    /// Hands a batch whose frame is durable to the checkpointer.
    fn to_checkpointer(&self, (batch, changes, plain): ForCheckpointer) {
        if changes.is_empty() {
            return;
        }
        self.unwritten.fetch_add(plain, Ordering::AcqRel);
        self.send(Msg::Batch {
            batch,
            changes,
            plain,
        });
    }

    /// Puts the checkpointer's batches for owed records back, ahead of any
    /// owed since (and `then` after them).
    fn owe_batches(&self, earlier: Vec<ForCheckpointer>, then: Option<ForCheckpointer>) {
        let mut owed = self.owed_batches.lock();
        let newer = std::mem::take(&mut *owed);
        *owed = earlier;
        owed.extend(then);
        owed.extend(newer);
    }

    /// Appends one frame and makes it durable; returns where its body is.
    /// `batch` 0: a frame of no batch (a checkpoint alone).
    pub(super) fn append(
        &self,
        st: &mut State,
        header: Header,
        body: &[&[u8]],
        batch: u64,
    ) -> Result<u64, Failure> {
        self.append_deferring(st, header, body, batch, None)
    }

    /// [`Shared::append`]; with `defer`, a shared store's committed batch
    /// (see [`Deferred`]), the frame is flushed later, unless it begins a
    /// segment (whose directory entry is flushed at once).
    ///
    /// Long because it appends one frame in strict order (a new segment if
    /// needed, the header, the write, the flush or its deferral, the
    /// segment's state); each failure leaves its own seal, and the steps
    /// share the offsets.
    fn append_deferring(
        &self,
        st: &mut State,
        mut header: Header,
        body: &[&[u8]],
        batch: u64,
        defer: Option<Deferred>,
    ) -> Result<u64, Failure> {
        self.flush_deferred(st);
        // A new segment when this one is full, or must be sealed.
        if st.active.seal_at.is_some()
            || (!st.active.fresh && st.active.end >= self.opts.segment_bytes)
        {
            st.active = st.active.next();
        }
        let fresh = st.active.fresh;
        if fresh {
            header.segment = Some(SegmentInfo {
                number: st.active.number,
                origin: st.origin.clone(),
                covers: None,
                prev: st.active.prev,
            });
        }
        // (Read together: the stuck paths go with the batch they are for.)
        let stuck = self.stuck.lock();
        let known = self.checkpointed.load(Ordering::Acquire);
        if known > st.checkpoint_written || *stuck != st.stuck_written {
            header.checkpoint = Some(known.max(st.checkpoint_written));
            header.stuck = stuck.clone();
        }
        drop(stuck);
        let head = serde_json::to_vec(&header).expect("a header serializes");
        let bytes = frame::encode(&head, body);
        let body_at = st.active.end + frame::HEAD as u64 + head.len() as u64;
        let number = st.active.number;
        let end = st.active.end;
        let name = segment::name(number);
        let how = match fresh {
            true => Open::Truncate,
            false => Open::Write,
        };
        let refused = |e: io::Error| Failure::Refused(DiskError::new("writing the journal", e));
        let fd = self
            .dir
            .open_file(std::ffi::OsStr::new(&name), how)
            .map_err(refused)?;
        st.active.reserved = reserve(
            &fd,
            end + bytes.len() as u64,
            st.active.reserved,
            bytes.len() as u64,
        );
        if let Err(e) = write_all_at(&fd, &bytes, end) {
            // Not a byte of it may stay for a later frame to follow.
            if !fresh && fd.set_len(end).is_err() {
                st.active.seal_at = Some(end);
            }
            return Err(refused(e));
        }
        let unconfirmed =
            |e: io::Error| Failure::Unconfirmed(DiskError::new("flushing to stable storage", e));
        let deferred = defer.filter(|_| !fresh).map(|d| Deferred {
            segment: number,
            at: end,
            ..d
        });
        let synced = match (&deferred, fresh) {
            (Some(_), _) => Ok(()),
            (None, true) => sync_data(&fd).and_then(|()| sync_dir(&self.dir)),
            (None, false) => sync_data(&fd),
        };
        drop(fd);
        if deferred.is_some() {
            st.deferred = deferred;
            self.flush_owed.store(true, Ordering::Release);
        }
        if let Err(e) = synced {
            // It may or may not be on disk: never read it back. A segment
            // it began is begun again by the next frame (same number, same
            // seal of the one before); any other is sealed before it.
            if !fresh {
                st.active.seal_at = Some(end);
            }
            return Err(unconfirmed(e));
        }
        st.active.end = end + bytes.len() as u64;
        st.active.reserved = st.active.reserved.saturating_sub(bytes.len() as u64);
        st.active.fresh = false;
        st.active.prev = None;
        if let Some(c) = header.checkpoint {
            st.checkpoint_written = c;
            st.stuck_written = header.stuck.clone();
        }
        let seg = st.segments.entry(number).or_default();
        seg.bytes = st.active.end;
        if batch > 0 {
            seg.last_batch = batch;
            if seg.first_time.is_none() {
                seg.first_time = header.time.clone();
            }
        }
        Ok(body_at)
    }
}

/// Why a frame did not become durable.
pub(super) enum Failure {
    /// Nothing of it is on disk (or ever read back).
    Refused(DiskError),
    /// Written, but its flush failed: it may or may not be on disk, and is
    /// never read back.
    Unconfirmed(DiskError),
}

/// Bytes a change writes into the plain files.
/// Which contents a frame carries in its body and which it only names,
/// decided in one place, under the journal state's lock: a content the
/// journal holds already is named, and recorded for a compaction running
/// meanwhile (which must then not drop it); any other goes in the body,
/// once. The owed records' contents go first.
struct Placement {
    body: Vec<Arc<Vec<u8>>>,
    placed: Vec<ContentRec>,
    /// Bytes of new contents each change brings.
    new_bytes: Vec<u64>,
    /// Bytes of the owed records' contents, at the body's start.
    start_len: u64,
}

impl Placement {
    fn of(
        st: &mut State,
        start: &[(super::record::ChangeRec, Vec<Needed>)],
        needs: &[Vec<Needed>],
    ) -> Placement {
        let mut p = Placement {
            body: Vec::new(),
            placed: Vec::new(),
            new_bytes: vec![0; needs.len()],
            start_len: 0,
        };
        let mut seen = std::collections::HashSet::new();
        let mut at = 0u64;
        let owed = start.iter().map(|(_, needed)| (None, needed));
        let new = needs
            .iter()
            .enumerate()
            .map(|(i, needed)| (Some(i), needed));
        for (change, needed) in owed.chain(new) {
            for n in needed {
                if st.contents.contains_key(&n.sha) {
                    if let Some(named) = st.named_meanwhile.as_mut() {
                        named.insert(n.sha);
                    }
                    continue;
                }
                if !seen.insert(n.sha) {
                    continue;
                }
                let len = n.data.len() as u64;
                p.placed.push(ContentRec {
                    sha256: n.sha.hex(),
                    at,
                    len,
                });
                at += len;
                p.body.push(n.data.clone());
                match change {
                    Some(i) => p.new_bytes[i] += len,
                    None => p.start_len += len,
                }
            }
        }
        p
    }
}

fn plain_bytes(change: &Change) -> u64 {
    change
        .ops
        .iter()
        .map(|op| match op {
            crate::store::ChangeOp::Write { data, .. } => data.len() as u64,
            _ => 0,
        })
        .sum()
}

/// The body with only the contents of the changes that fit (they come
/// first: contents are placed in change order).
fn trim_body(
    body: Vec<Arc<Vec<u8>>>,
    placed: Vec<ContentRec>,
    len: u64,
) -> (Vec<Arc<Vec<u8>>>, Vec<ContentRec>) {
    let keep = placed.iter().take_while(|c| c.at + c.len <= len).count();
    (
        body.into_iter().take(keep).collect(),
        placed.into_iter().take(keep).collect(),
    )
}

impl ChangeSink for Shared {
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

/// A frame's body back as the contents it holds (to write them again).
fn needed_of(body: Vec<Arc<Vec<u8>>>, placed: &[ContentRec]) -> Vec<Needed> {
    body.into_iter()
        .zip(placed)
        .filter_map(|(data, c)| {
            Some(Needed {
                sha: Sha::parse(&c.sha256)?,
                data,
            })
        })
        .collect()
}

/// A disk step a test can make fail (the `fail` crate, with the
/// `failpoints` feature): `fail::cfg(NAME, "return(ENOSPC)")`.
macro_rules! step {
    ($name:literal) => {
        fail::fail_point!($name, |errno: Option<String>| Err(injected(errno)))
    };
}

/// What `journal::lose-deferred` does (tests only): drops the unflushed
/// frame from the segment, as a power cut would, and stops the process.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
fn lose_and_abort(dir: &Dir, segment: u64, at: u64) -> ! {
    let name = segment::name(segment);
    if let Ok(fd) = dir.open_file(std::ffi::OsStr::new(&name), Open::Write) {
        let _ = fd.set_len(at);
    }
    std::process::abort()
}

#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
fn injected(errno: Option<String>) -> io::Error {
    let code = match errno.as_deref() {
        Some("ENOSPC") => libc::ENOSPC,
        Some("EROFS") => libc::EROFS,
        _ => libc::EIO,
    };
    io::Error::from_raw_os_error(code)
}

/// Writes all of a frame's `bytes` at `at` (with the journal's failpoint).
fn write_all_at(fd: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    step!("journal::write");
    crate::persist::storage::write_all_at(fd.as_ref(), bytes, at)
}

fn sync_data(fd: &File) -> io::Result<()> {
    step!("journal::sync");
    fd.sync_data()
}

fn sync_dir(dir: &Dir) -> io::Result<()> {
    step!("journal::sync");
    dir.sync()
}

/// Keeps space allocated past the end (best effort: a disk too full for it
/// just has less reserve). Returns how much is reserved past `end`.
fn reserve(fd: &File, end: u64, had: u64, used: u64) -> u64 {
    let left = had.saturating_sub(used);
    if left >= RESERVE / 2 {
        return left;
    }
    for len in [RESERVE, RESERVE / 4, RESERVE / 16] {
        if fd.reserve(end, len).is_ok() {
            return len;
        }
    }
    left
}

/// Free bytes on the journal's file system (for ordinary users).
fn free_bytes(dir: &Dir) -> Option<u64> {
    dir.free_bytes()
}
