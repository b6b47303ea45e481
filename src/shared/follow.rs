//! The follower: one thread per host that reads the shared store's
//! batches in id order, on a connection of its own, and applies other
//! hosts' changes to this tree (and so to the journal and the mount).
//!
//! It wakes on `NOTIFY`, and reads everything after the last id it holds
//! after every wake-up, every reconnection, and every second without one
//! (polling: a wake-up lost with a connection is never a change lost). A
//! batch of this host's own is skipped when the tree shows it already
//! (committed by this process, or written to the journal before a
//! restart); one a crash kept out of the journal is applied like another
//! host's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::db::{Batch, Reader};
use super::target::Target;
use crate::journal::{ChangeRec, OpRec, OwnHeld, Unsettled, UpstreamError};
use crate::store::{ChangeOp, Foreign, Store};

/// Polling, when no wake-up comes.
const POLL: Duration = Duration::from_secs(1);
/// How often a long outage is said again.
const STILL_DOWN: Duration = Duration::from_secs(60);
/// Batches read at once.
const PAGE: i64 = 256;

/// What the follower knows, for `memfs status` and tests.
#[derive(Default)]
pub struct Progress {
    /// The newest id applied (or skipped as this host's own).
    pub applied: AtomicU64,
    /// The newest id read.
    pub head: AtomicU64,
    /// Whether the database answers now.
    pub connected: AtomicBool,
}

pub struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub progress: Arc<Progress>,
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

impl Follow {
    /// Starts following; the first catch-up runs before this returns (at
    /// most `first` long), so a host opening a store shows what it holds.
    pub fn start(self, first: Duration) -> std::io::Result<Follower> {
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress::default());
        if let Some(store) = self.store.upgrade() {
            progress.applied.store(store.followed(), Ordering::Release);
        }
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = {
            let stop = stop.clone();
            let progress = progress.clone();
            std::thread::Builder::new()
                .name("memfs-follow".into())
                .spawn(move || self.run(&stop, &progress, ready_tx))?
        };
        let _ = ready.recv_timeout(first);
        Ok(Follower {
            stop,
            thread: Some(thread),
            progress,
        })
    }

    /// Long because it is the follower's reconnect loop (outage reports and
    /// back-off, then the catch-up-and-wait loop), whose back-off and
    /// outage state is shared by both.
    fn run(self, stop: &AtomicBool, progress: &Progress, ready: std::sync::mpsc::Sender<()>) {
        // (Tests turn following off here: nothing of other hosts' is applied.)
        fail::fail_point!("shared::follow-off", |_| ());
        let mut backoff = Duration::from_millis(100);
        let mut said_down = false;
        let mut down_since = std::time::Instant::now();
        let mut said_at = down_since;
        let mut ready = Some(ready);
        while !stop.load(Ordering::Acquire) {
            let mut reader = match Reader::open(&self.target, &self.origin) {
                Ok(r) => r,
                Err(e) => {
                    progress.connected.store(false, Ordering::Release);
                    if !said_down {
                        tracing::warn!(
                            "the shared store cannot be reached ({}); reads keep working from memory, and memfs keeps trying",
                            cause(&e)
                        );
                        said_down = true;
                        down_since = std::time::Instant::now();
                        said_at = down_since;
                    } else if said_at.elapsed() >= STILL_DOWN {
                        // A long outage says so again, with its cause now,
                        // so that it is never silent after its first line.
                        said_at = std::time::Instant::now();
                        tracing::warn!(
                            "the shared store still cannot be reached after {} s ({}); reads keep working from memory, and memfs keeps trying",
                            down_since.elapsed().as_secs(),
                            cause(&e)
                        );
                    }
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                    sleep_unless(stop, backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            if said_down {
                tracing::warn!(
                    "the shared store answers again after {} s; catching up",
                    down_since.elapsed().as_secs()
                );
                said_down = false;
            }
            progress.connected.store(true, Ordering::Release);
            backoff = Duration::from_millis(100);
            // Catch up after every wake-up (and the first time, and after
            // every reconnection), then wait for the next.
            let mut ended = None;
            while !stop.load(Ordering::Acquire) {
                if let Err(e) = self.catch_up(&mut reader, progress, stop) {
                    ended = Some(e);
                    break;
                }
                // What memory holds that the store has not taken (a person's
                // save that lost a race, or made while the store could not be
                // reached) goes again, over what was just applied.
                if let Some(store) = self.store.upgrade() {
                    self.forget_passed(&store);
                    if store.unsaved_paths() > 0 {
                        let _ = store.barrier(crate::store::Origin::Memfs);
                    }
                }
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                if let Err(e) = reader.wait(POLL) {
                    ended = Some(e);
                    break;
                }
            }
            if let Some(e) = ended {
                progress.connected.store(false, Ordering::Release);
                tracing::info!(
                    "the shared store's connection ended ({}); reconnecting",
                    cause(&e)
                );
            }
        }
    }

    /// Reads and applies every batch past what the tree shows.
    fn catch_up(
        &self,
        reader: &mut Reader,
        progress: &Progress,
        stop: &AtomicBool,
    ) -> Result<(), UpstreamError> {
        loop {
            let Some(store) = self.store.upgrade() else {
                return Ok(());
            };
            let after = store.followed();
            let page = reader.batches_after(after, PAGE)?;
            if let Some(last) = page.last() {
                progress.head.fetch_max(last.seq, Ordering::AcqRel);
            }
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
                let mut contents = reader.contents(&shas)?;
                for batch in group {
                    if stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    tickets.extend(self.apply(reader, &store, batch, &mut contents, stop)?);
                    progress.applied.store(batch.seq, Ordering::Release);
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
                Own::Missing => contents.extend(reader.contents(&shas_of(batch))?),
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

fn cause(e: &UpstreamError) -> String {
    match e {
        UpstreamError::Unreachable(c) => c.clone(),
        UpstreamError::Again | UpstreamError::Taken(_) => "a transient refusal".into(),
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let until = std::time::Instant::now() + d;
    while !stop.load(Ordering::Acquire) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Follower {
    /// Stops following (before the journal shuts down).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop();
    }
}
