//! A shared store upstream of the journal (a memory several hosts share,
//! `--data postgres://...`): each batch of this host's changes is
//! committed there, in one transaction, before the journal writes its
//! frame, and only a committed batch is acknowledged.
//!
//! The journal knows the shared store only through [`Upstream`]: a
//! transaction that holds the store's head (its counter) from
//! [`Upstream::begin`] to [`Transaction::commit`], says which of this
//! host's changes lost a race ([`Transaction::conflicts`]), and commits the
//! rest. A change loses when another host committed, after the version its
//! tree had followed to when it was made (`Change::seen`), a change at one
//! of its paths, above or below one. What becomes of a change that lost is
//! the store's to decide, as for a change the disk refused: an agent's is
//! taken back (and the tool runs the command again on the new content), a
//! person's stays in memory and is written again over the other host's.
//!
//! Other hosts' changes come back through the follower as changes with a
//! [`crate::store::Foreign`] record: the journal keeps them as they were
//! committed and sends them nowhere.

use std::sync::Arc;

use super::record::ChangeRec;
use super::versions::{Ids, Needed};
use crate::lock::{rank, Condvar, Mutex};
use crate::path::MemPath;
use crate::store::{Change, ChangeOp};

/// Why a shared store did not take a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// It cannot be reached now, or failed part way: nothing was committed.
    Unreachable(String),
    /// A transient refusal (a serialization failure, a deadlock): nothing
    /// was committed, and the batch goes again at once.
    Again,
    /// The batch's number is taken (a batch of this origin committed with
    /// it, though this journal does not hold it): nothing was committed;
    /// the batch goes again, numbered from this one on.
    Taken(u64),
}

/// A shared store, as the journal commits to it.
pub trait Upstream: Send + Sync {
    /// Begins a batch's transaction, holding the store's head until it ends.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, UpstreamError>;
    /// Begins a batch's transaction for changes that had all seen the
    /// store through `seen`: a store may take the head to be `seen` and
    /// check it when the batch commits (one round trip fewer).
    fn begin_after(&self, seen: u64) -> Result<Box<dyn Transaction + '_>, UpstreamError> {
        let _ = seen;
        self.begin()
    }
}

/// One batch's transaction (rolled back when dropped uncommitted).
pub trait Transaction {
    /// The newest version id the store handed out (the head, held by this
    /// transaction: no other host commits until it ends).
    fn head(&self) -> u64;
    /// For each change `(seen, paths)`: the newest version another host
    /// committed after `seen` at one of `paths`, or above or below one.
    fn conflicts(&mut self, asks: &[(u64, Vec<String>)])
        -> Result<Vec<Option<u64>>, UpstreamError>;
    /// Commits the batch; `Ok` only once the COMMIT is confirmed (one whose
    /// answer was lost is looked up by the batch's key).
    fn commit(self: Box<Self>, batch: Outgoing) -> Result<(), UpstreamError>;
}

/// A batch as it goes to the shared store.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// This journal's batch number: with its origin, the key that makes a
    /// COMMIT whose answer was lost safe to ask about.
    pub batch: u64,
    pub time: String,
    /// The newest id the batch hands out: the store's head after it.
    pub last: u64,
    pub changes: Vec<ChangeRec>,
    /// Every content the changes name, by sha256.
    pub contents: Vec<(String, Arc<Vec<u8>>)>,
    /// Every path the changes touch (see [`footprint`]).
    pub paths: Vec<String>,
}

/// Whether the change is this host's own, to be committed to the store.
pub fn goes_upstream(change: &Change) -> bool {
    change.foreign.is_none() && !change.ops.is_empty()
}

/// The paths a change touches, for telling races: every path of its ops
/// but a directory's times (which every change in a directory moves, and
/// which the last writer sets).
pub fn footprint(change: &Change) -> Vec<MemPath> {
    let mut paths: Vec<MemPath> = change
        .ops
        .iter()
        .filter(|op| !matches!(op, ChangeOp::SetTimes { .. }))
        .flat_map(|op| op.paths().into_iter().cloned())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The batch to send: this host's records of the frame and their contents.
pub(super) fn outgoing(
    batch: u64,
    time: &str,
    changes: &[Change],
    records: &[Option<ChangeRec>],
    needs: &[Vec<Needed>],
    ids: &Ids,
) -> Outgoing {
    let mut out = Outgoing {
        batch,
        time: time.to_string(),
        last: ids.next_version.max(ids.next_change) - 1,
        changes: Vec::new(),
        contents: Vec::new(),
        paths: Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    for ((change, record), needed) in changes.iter().zip(records).zip(needs) {
        let (true, Some(record)) = (goes_upstream(change), record) else {
            continue;
        };
        out.changes.push(record.clone());
        out.paths
            .extend(footprint(change).iter().map(|p| p.to_string()));
        for n in needed {
            if seen.insert(n.sha) {
                out.contents.push((n.sha.hex(), n.data.clone()));
            }
        }
    }
    out.paths.sort();
    out.paths.dedup();
    out
}

/// A journal's shared store, if its memory is one, and this host's
/// changes handed over and not settled there yet.
pub struct Sharing {
    /// The shared store this journal's batches are committed to first, if
    /// the memory is one (see `upstream.rs`).
    pub upstream: std::sync::OnceLock<Arc<dyn Upstream>>,
    /// This host's changes handed over and not settled yet, with the paths
    /// they touch: another host's change to one of them waits (a shared
    /// store's follower asks, see `upstream.rs`).
    pub unsettled: Mutex<Vec<(u64, Vec<MemPath>)>>,
    pub settled_now: Condvar,
}

impl Sharing {
    pub fn new() -> Sharing {
        Sharing {
            upstream: std::sync::OnceLock::new(),
            unsettled: Mutex::new(rank::UNSETTLED, Vec::new()),
            settled_now: Condvar::new(),
        }
    }
}
