//! Committing a batch with this host's changes in it when the memory is a
//! shared store's copy (see `upstream.rs`): to the store first, in one
//! transaction, then to the journal; a change that lost a race, or a batch
//! the store could not take, goes back to the store to decide.

use std::io;
use std::time::Duration;

use super::upstream::{footprint, goes_upstream, Transaction, Upstream, UpstreamError};
use super::writer::Core;
use crate::error::{DiskError, Error};
use crate::path::MemPath;
use crate::store::{Bases, Change, Ticket};
use std::sync::Arc;

use super::history;

/// How many times a batch goes again after a transient refusal.
const AGAIN: usize = 8;

impl Core {
    /// Commits a batch with this host's changes in it: to the shared store
    /// first, then to the journal; a change that lost a race, or a batch
    /// the store could not take, goes back to the store to decide. Each
    /// attempt begins, finds lost races and sends the rest ([`Core::attempt`]);
    /// a transient refusal sends all of it again, in order.
    pub(super) fn commit_shared(
        &self,
        up: &dyn Upstream,
        changes: Vec<Change>,
        tickets: Vec<Ticket>,
    ) {
        let mut items: Vec<(Change, Ticket)> = changes.into_iter().zip(tickets).collect();
        for attempt in 0.. {
            // A rewrite waiting for the state goes first (see `gate.rs`).
            self.give_way();
            let again = |e: &UpstreamError| *e == UpstreamError::Again && attempt < AGAIN;
            let seen = items
                .iter()
                .filter(|(c, _)| goes_upstream(c))
                .map(|(c, _)| c.seen)
                .min()
                .unwrap_or(0);
            let mut tx = match up.begin_after(seen) {
                Ok(tx) => tx,
                Err(e) if again(&e) => continue,
                Err(e) => return self.unsent(items, e),
            };
            let lost = match self.races(tx.as_mut(), &items) {
                Ok(lost) => lost,
                Err(e) if again(&e) => continue,
                Err(e) => {
                    // The head is let go before the store is asked to
                    // recover (which takes the tree lock and waits).
                    drop(tx);
                    return self.unsent(items, e);
                }
            };
            let Some((back, e)) = self.attempt(tx, items, lost) else {
                return;
            };
            items = back;
            if !again(&e) {
                return self.unsent(items, e);
            }
        }
    }

    /// One attempt: the changes that lost a race go back to the store,
    /// the others are committed (through `tx` when one is this host's).
    /// When nothing was committed, all of it comes back, in order, with why.
    fn attempt(
        &self,
        tx: Box<dyn Transaction + '_>,
        items: Vec<(Change, Ticket)>,
        lost: Vec<Option<u64>>,
    ) -> Option<(Vec<(Change, Ticket)>, UpstreamError)> {
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
            self.lost(losers);
            return None;
        }
        let Some((changes, tickets, e)) = self.commit_batch(changes, tickets, Some(tx)) else {
            self.lost(losers);
            return None;
        };
        // Nothing was committed: all of it goes again, in order.
        let mut back: Vec<(Change, Ticket)> = changes.into_iter().zip(tickets).collect();
        back.extend(losers.into_iter().map(|(item, _)| item));
        back.sort_by_key(|(c, _)| c.seq);
        Some((back, e))
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
                    .any(|a| prints[i].iter().any(|b| a.overlaps(b)));
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
            UpstreamError::Again | UpstreamError::Taken(_) => {
                "it kept refusing the transaction".to_string()
            }
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
        let bases = self.bases(changes);
        let undone = self.recover(changes, &[], true, bases);
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

    /// What the journal holds at each file `changes` save (the version
    /// they were made from: see `Refused::bases`). Read under the state's
    /// lock, which no batch holds in flight here (the committer calls it).
    fn bases(&self, changes: &[Change]) -> Bases {
        let st = self.state.lock();
        let mut bases = Bases::new();
        for path in changes.iter().flat_map(footprint) {
            if bases.contains_key(&path) {
                continue;
            }
            let content = match st.view.get(&path) {
                None => Some(Vec::new()),
                // Content only the plain file holds (found when the journal
                // began, or pruned) is no base: the save is written again.
                Some(node) => match node.file() {
                    Some((sha, _, _, false)) => {
                        history::content_of(&self.dir, &st, &sha).ok().flatten()
                    }
                    _ => None,
                },
            };
            if let Some(content) = content {
                bases.insert(path, Arc::new(content));
            }
        }
        bases
    }

    /// Forgets settled changes of this host's (see `unsettled`).
    pub(super) fn forget_unsettled(&self, changes: &[Change]) {
        if self.sharing.upstream.get().is_none() {
            return;
        }
        let mut unsettled = self.sharing.unsettled.lock();
        unsettled.retain(|(seq, _)| !changes.iter().any(|c| c.seq == *seq));
        drop(unsettled);
        self.sharing.settled_now.notify_all();
    }

    /// Whether a change of this host's that is not settled yet touches one
    /// of `paths`, or a path above or below one.
    pub fn busy(&self, paths: &[MemPath]) -> bool {
        self.sharing
            .unsettled
            .lock()
            .iter()
            .any(|(_, mine)| mine.iter().any(|a| paths.iter().any(|b| a.overlaps(b))))
    }

    /// Waits (at most `limit`) for a change of this host's to settle.
    pub fn wait_settled(&self, limit: Duration) {
        let mut unsettled = self.sharing.unsettled.lock();
        if !unsettled.is_empty() {
            self.sharing.settled_now.wait_for(&mut unsettled, limit);
        }
    }
}
