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

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::record::ChangeRec;
use super::versions::{Ids, Needed};
use super::writer::Shared;
use crate::error::{DiskError, Error};
use crate::path::MemPath;
use crate::store::{Change, ChangeOp, Ticket};

/// Why a shared store did not take a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// It cannot be reached now, or failed part way: nothing was committed.
    Unreachable(String),
    /// A transient refusal (a serialization failure, a deadlock): nothing
    /// was committed, and the batch goes again at once.
    Again,
}

/// A shared store, as the journal commits to it.
pub trait Upstream: Send + Sync {
    /// Begins a batch's transaction, holding the store's head until it ends.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, UpstreamError>;
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

/// Whether `a` and `b` are the same path or one is below the other.
pub fn related(a: &MemPath, b: &MemPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
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

/// How many times a batch goes again after a transient refusal.
const AGAIN: usize = 8;

impl Shared {
    /// Commits a batch with this host's changes in it: to the shared store
    /// first, then to the journal; a change that lost a race, or a batch
    /// the store could not take, goes back to the store to decide.
    pub(super) fn commit_shared(
        &self,
        up: &dyn Upstream,
        changes: Vec<Change>,
        tickets: Vec<Ticket>,
    ) {
        let mut items: Vec<(Change, Ticket)> = changes.into_iter().zip(tickets).collect();
        for attempt in 0.. {
            let mut tx = match up.begin() {
                Ok(tx) => tx,
                Err(UpstreamError::Again) if attempt < AGAIN => continue,
                Err(e) => return self.unsent(items, e),
            };
            let lost = match self.races(tx.as_mut(), &items) {
                Ok(lost) => lost,
                Err(UpstreamError::Again) if attempt < AGAIN => continue,
                Err(e) => return self.unsent(items, e),
            };
            let (losers, winners): (Vec<_>, Vec<_>) = items
                .into_iter()
                .zip(lost)
                .partition(|(_, lost)| lost.is_some());
            let (changes, tickets): (Vec<Change>, Vec<Ticket>) =
                winners.into_iter().map(|(item, _)| item).unzip();
            if !changes.iter().any(goes_upstream) {
                // Nothing of this host's left to send (the transaction
                // ends unused).
                drop(tx);
                if changes.iter().all(|c| c.ops.is_empty()) {
                    self.settle(&changes, &tickets);
                } else {
                    let _ = self.commit_batch(changes, tickets, None);
                }
                return self.lost(losers);
            }
            match self.commit_batch(changes, tickets, Some(tx)) {
                None => return self.lost(losers),
                Some((changes, tickets, e)) => {
                    // Nothing was committed: all of it goes again, in order.
                    let mut back: Vec<(Change, Ticket)> =
                        changes.into_iter().zip(tickets).collect();
                    back.extend(losers.into_iter().map(|(item, _)| item));
                    back.sort_by_key(|(c, _)| c.seq);
                    items = back;
                    if e != UpstreamError::Again || attempt >= AGAIN {
                        return self.unsent(items, e);
                    }
                }
            }
        }
    }

    /// Which of the batch's own changes lost a race, and to which version:
    /// those another host's change came before, and those made after one
    /// of them at a path of its (made on top of it).
    fn races(
        &self,
        tx: &mut dyn Transaction,
        items: &[(Change, Ticket)],
    ) -> Result<Vec<Option<u64>>, UpstreamError> {
        let own: Vec<usize> = (0..items.len())
            .filter(|&i| goes_upstream(&items[i].0))
            .collect();
        let prints: Vec<Vec<MemPath>> = items.iter().map(|(c, _)| footprint(c)).collect();
        let asks: Vec<(u64, Vec<String>)> = own
            .iter()
            .map(|&i| {
                let paths = prints[i].iter().map(|p| p.to_string()).collect();
                (items[i].0.seen, paths)
            })
            .collect();
        let found = tx.conflicts(&asks)?;
        let mut lost: Vec<Option<u64>> = vec![None; items.len()];
        for (&i, seq) in own.iter().zip(found) {
            lost[i] = seq;
        }
        for i in 0..items.len() {
            if lost[i].is_some() || !goes_upstream(&items[i].0) {
                continue;
            }
            let under = (0..i).filter_map(|j| {
                let overlaps = prints[j]
                    .iter()
                    .any(|a| prints[i].iter().any(|b| related(a, b)));
                lost[j].filter(|_| overlaps)
            });
            lost[i] = under.max();
        }
        Ok(lost)
    }

    /// Changes that lost a race: the store takes back what it can (an
    /// agent's, which the tool then runs again) and keeps the rest in
    /// memory, written again over the winner's.
    fn lost(&self, losers: Vec<((Change, Ticket), Option<u64>)>) {
        if losers.is_empty() {
            return;
        }
        let why = losers
            .iter()
            .map(|(_, seq)| Error::Conflict {
                seq: seq.unwrap_or(0),
            })
            .collect();
        let (changes, tickets): (Vec<Change>, Vec<Ticket>) =
            losers.into_iter().map(|(item, _)| item).unzip();
        self.refuse_each(&changes, &tickets, why);
    }

    /// A batch the shared store did not take: other hosts' changes in it
    /// are still written here; this host's go back to the store.
    fn unsent(&self, items: Vec<(Change, Ticket)>, e: UpstreamError) {
        let cause = match e {
            UpstreamError::Unreachable(cause) => cause,
            UpstreamError::Again => "it kept refusing the transaction".to_string(),
        };
        let (own, foreign): (Vec<_>, Vec<_>) =
            items.into_iter().partition(|(c, _)| goes_upstream(c));
        if !foreign.is_empty() {
            let (changes, tickets) = foreign.into_iter().unzip();
            let _ = self.commit_batch(changes, tickets, None);
        }
        let why = own
            .iter()
            .map(|_| Error::Unreachable(cause.clone()))
            .collect();
        let (changes, tickets): (Vec<Change>, Vec<Ticket>) = own.into_iter().unzip();
        self.refuse_each(&changes, &tickets, why);
    }

    /// Settles changes that did not take effect upstream: each one the
    /// store took back with its own error, each one it kept as unsaved.
    fn refuse_each(&self, changes: &[Change], tickets: &[Ticket], why: Vec<Error>) {
        let undone = self.recover(changes, &[], true);
        let unsent = DiskError::new(
            "sending it to the shared store",
            io::Error::from_raw_os_error(libc::EIO),
        );
        if undone.iter().any(|u| !u) {
            self.taint_queued_barriers(unsent.clone());
        }
        for ((ticket, undone), why) in tickets.iter().zip(&undone).zip(why) {
            ticket.settle(match undone {
                true => Err(why),
                false => Err(Error::Unsaved(unsent.clone())),
            });
        }
        self.forget_unsettled(changes);
    }

    /// Forgets settled changes of this host's (see `unsettled`).
    pub(super) fn forget_unsettled(&self, changes: &[Change]) {
        if self.upstream.get().is_none() {
            return;
        }
        let mut unsettled = self.unsettled.lock();
        unsettled.retain(|(seq, _)| !changes.iter().any(|c| c.seq == *seq));
        drop(unsettled);
        self.settled_now.notify_all();
    }

    /// Whether a change of this host's that is not settled yet touches one
    /// of `paths`, or a path above or below one.
    pub fn busy(&self, paths: &[MemPath]) -> bool {
        self.unsettled
            .lock()
            .iter()
            .any(|(_, mine)| mine.iter().any(|a| paths.iter().any(|b| related(a, b))))
    }

    /// Waits (at most `limit`) for a change of this host's to settle.
    pub fn wait_settled(&self, limit: Duration) {
        let mut unsettled = self.unsettled.lock();
        if !unsettled.is_empty() {
            self.settled_now.wait_for(&mut unsettled, limit);
        }
    }
}
