//! Handing a person's unsaved bytes (written through the mount, held
//! dirty in the tree) to the persister: at close, at `fsync`, at shutdown,
//! and barriers that wait for everything before them.

use std::sync::atomic::Ordering;

use crate::lock::RwLockWriteGuard;

use super::change::{ChangeOp, Origin, Ticket};
use super::tree::{Ino, Tree};
use super::{flush_ops, Store};
use crate::error::Error;

impl Store {
    /// Hands a file's unsaved bytes to the persister. With `durable`, the
    /// ticket is kept once they, and everything changed before, are on disk
    /// (`fsync`); without, a clean file costs nothing (`close`).
    pub fn persist_file(&self, ino: Ino, durable: bool, origin: Origin) -> Ticket {
        self.persist(|_| vec![ino], durable, origin)
    }

    /// Hands the unsaved bytes of these files to the persister as one change
    /// (files closed through the mount, gathered by the flusher).
    pub fn persist_files(&self, inos: &[Ino]) -> Ticket {
        self.persist(|_| inos.to_vec(), false, Origin::Memfs)
    }

    /// Hands every file's unsaved bytes to the persister (shutdown, unmount);
    /// the ticket is kept once all of it is on disk.
    pub fn persist_all_dirty(&self, origin: Origin) -> Ticket {
        self.persist(Tree::dirty_files, true, origin)
    }

    /// What must come before an answer that reads the history (the plain
    /// files' changes, taken in), and, if the memory holds a change the
    /// journal is not known to hold (taken in just now, by the background
    /// on its tick or a shared store's follower, or a change nobody waited
    /// for), the journal holding it (a barrier waited for). A change whose
    /// ticket was waited for needs none (`Ticket::marking`).
    pub fn catch_up(&self) {
        self.before_answer();
        if !self.in_step() {
            // The barrier's own number is past the memory's last change:
            // once it settles, every change through it is in the journal,
            // and its ticket's wait says so (`Ticket::marking`).
            let _ = self.barrier(Origin::Memfs).wait();
        }
    }

    /// Whether [`Store::catch_up`] would find nothing to wait for now (no
    /// change the journal is not known to hold).
    pub fn in_step(&self) -> bool {
        self.caught_up.load(Ordering::Acquire) >= self.seq.load(Ordering::Acquire)
    }

    /// A barrier: settles once every change queued before it is in the
    /// journal (or refused), writing nothing of its own.
    pub fn barrier(&self, origin: Origin) -> Ticket {
        self.persist(|_| Vec::new(), true, origin)
    }

    /// Writes out everything memory holds that the disk has not taken
    /// (dirty files, unsaved paths) and waits: `Ok` means all of it is on
    /// disk. A change ahead of the barrier that the disk refused after the
    /// barrier was queued makes the barrier answer `Unsaved`; then once
    /// more (the new barrier carries what that change left unsaved).
    pub fn sync(&self, origin: Origin) -> Result<(), Error> {
        match self.persist_all_dirty(origin.clone()).wait() {
            Err(Error::Unsaved(_)) => self.persist_all_dirty(origin).wait(),
            done => done,
        }
    }

    /// One change with the unsaved bytes of the files `select` picks (under
    /// the same lock). Without `durable`, nothing to write costs nothing.
    fn persist(
        &self,
        select: impl FnOnce(&Tree) -> Vec<Ino>,
        durable: bool,
        origin: Origin,
    ) -> Ticket {
        let mut tree = self.tree.write();
        let inos = select(&tree);
        let Some(written) = self.commit_flushes(&mut tree, inos) else {
            if !durable {
                return Ticket::done();
            }
            // Nothing of its own to write: a barrier after everything before.
            return self.commit(&mut tree, origin, Vec::new(), Vec::new());
        };
        match durable {
            // And a barrier after them, which waits for the unsaved paths
            // these changes found (they are written as a change of their own).
            true => written.and(self.commit(&mut tree, origin, Vec::new(), Vec::new())),
            false => written,
        }
    }

    /// Commits the unsaved bytes of the files `inos`, one change per
    /// writer (each keeps the origin of the bytes it saves); `None` when
    /// none of them had any.
    pub(super) fn commit_flushes(
        &self,
        tree: &mut RwLockWriteGuard<'_, Tree>,
        inos: impl IntoIterator<Item = Ino>,
    ) -> Option<Ticket> {
        let mut by_writer: Vec<(Origin, Vec<ChangeOp>)> = Vec::new();
        for ino in inos {
            if tree.get(ino).is_none() {
                continue;
            }
            let Some((writer, ops)) = flush_ops(tree, ino) else {
                continue;
            };
            match by_writer.iter_mut().find(|(w, _)| *w == writer) {
                Some((_, all)) => all.extend(ops),
                None => by_writer.push((writer, ops)),
            }
        }
        if by_writer.is_empty() {
            return None;
        }
        Some(
            by_writer
                .into_iter()
                .fold(Ticket::done(), |ticket, (writer, ops)| {
                    ticket.and(self.commit(tree, writer, ops, Vec::new()))
                }),
        )
    }
}
