//! Refusals and owed records: what happens to a batch the disk does not
//! take (its changes handed back to the store, which decides recovery; the
//! view put back), the records and batches the journal owes to its next
//! frame, the room a batch needs, and settling the tickets of what it took.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::append::{free_bytes, RESERVE};
use super::batch::needed_of;
use super::deferred::ForCheckpointer;
use super::handoff::Msg;
use super::record::{ContentRec, Header};
use super::state::State;
use super::versions::Needed;
use super::writer::Core;
use crate::error::{DiskError, Error};
use crate::store::{Bases, Change, Refused, Ticket};

impl Core {
    /// A batch whose first `fits` changes stand: they go to the
    /// checkpointer (unless `to_checkpointer` is false: its frame's flush,
    /// deferred, hands them over), and the rest (no room) back to the store.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn taken(
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
            self.handoff.unwritten.fetch_add(plain, Ordering::AcqRel);
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
    pub(super) fn owe(&self, start: Vec<(super::record::ChangeRec, Vec<Needed>)>) {
        if start.is_empty() {
            return;
        }
        let mut behind = self.owed.behind.lock();
        let newer = std::mem::take(&mut *behind);
        *behind = start;
        behind.extend(newer);
    }

    /// A frame the disk refused whose changes stand (a shared store holds
    /// them): its records and contents go with the next frame.
    pub(super) fn owe_frame(
        &self,
        header: Header,
        body: Vec<Arc<Vec<u8>>>,
        placed: Vec<ContentRec>,
    ) {
        let mut needed = needed_of(body, &placed);
        let mut behind = self.owed.behind.lock();
        for rec in header.changes {
            behind.push((rec, std::mem::take(&mut needed)));
        }
    }

    /// How many of the batch's changes (in order) the disk has room for.
    pub(super) fn room_for(&self, st: &State, new_bytes: &[u64], plain: &[u64]) -> usize {
        let Some(free) = free_bytes(&self.dir) else {
            return new_bytes.len();
        };
        let have = free + st.log.active.reserved.min(RESERVE / 2);
        let mut need = self.handoff.unwritten.load(Ordering::Acquire) + RESERVE / 2;
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
    pub(super) fn refuse(
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
        let undone = self.recover(refused, unconfirmed, false, Bases::new());
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
    pub(super) fn barrier_outcome(&self, change: &Change) -> Result<(), Error> {
        if !change.ops.is_empty() {
            return Ok(());
        }
        let taint = self.refusals.taint.lock();
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
        bases: Bases,
    ) -> Vec<bool> {
        let none = vec![false; refused.len()];
        // Asked on this thread (no thread of the store's own waits for it).
        let Some(recover) = self.refusals.recovery.lock().clone() else {
            return none;
        };
        recover(Refused {
            refused,
            unconfirmed,
            clean,
            bases,
        })
    }

    /// A change was refused (or not confirmed) and kept in memory: its
    /// paths are written again with the next change the store makes, but
    /// the barriers already queued were made before the store knew, so they
    /// do not carry them. Each of those answers `Unsaved` (the caller may
    /// ask again: a new barrier carries the paths).
    pub(super) fn taint_queued_barriers(&self, cause: DiskError) {
        self.group.last_queued(|last| {
            let Some((last, _)) = last else {
                return;
            };
            let mut taint = self.refusals.taint.lock();
            taint.below = taint.below.max(last.seq + 1);
            taint.error = Some(cause);
        });
    }

    /// Logs a refusing disk once (not once per refused change), and when it
    /// takes writes again.
    pub(super) fn say_how_the_disk_is(&self, refused: Option<&DiskError>) {
        let was = self
            .refusals
            .refusing
            .swap(refused.is_some(), Ordering::Relaxed);
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

    /// Puts the checkpointer's batches for owed records back, ahead of any
    /// owed since (and `then` after them).
    pub(super) fn owe_batches(&self, earlier: Vec<ForCheckpointer>, then: Option<ForCheckpointer>) {
        let mut owed = self.owed.batches.lock();
        let newer = std::mem::take(&mut *owed);
        *owed = earlier;
        owed.extend(then);
        owed.extend(newer);
    }
}
