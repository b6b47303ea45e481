//! Other hosts' changes, applied to this tree (a memory several hosts
//! share through a shared store; the follower in `shared/` reads them).
//!
//! A change of another host's is applied whole under the tree lock, in the
//! store's order, and handed to the sinks like any change: the journal
//! keeps its record as it was committed ([`Foreign`]), the mount's cache
//! invalidator drops what the kernel cached of every node and name it
//! touched (outside the tree lock, as for any change).
//!
//! Two things of this host's come first:
//! - a change of its own that is not settled yet at one of the paths (or
//!   above or below one): the foreign change waits ([`Busy`]) until it is,
//!   so that a change of this host's that lost the race is taken back
//!   before the winner is applied, never after;
//! - a path memory holds that the store has not taken (a person's save
//!   that lost a race, a write made while the store was unreachable): the
//!   foreign change's ops at it (or above or below it) are not applied to
//!   the tree, and memory's state there is written again over them with
//!   the next change (the person's save wins, as an overwrite of it).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::lock::RwLockWriteGuard;

use super::change::{Change, ChangeOp, Foreign, Origin, Ticket, Touched};
use super::tree::Tree;
use super::Store;
use crate::path::MemPath;
use std::collections::BTreeSet;

/// A test of some paths.
pub type PathsTest = dyn Fn(&[MemPath]) -> bool + Send + Sync;

/// What the store asks of a shared store's journal: whether a change of
/// this host's not settled yet touches some paths, and a wait for one to
/// settle.
pub struct Hold {
    pub busy: Box<PathsTest>,
    pub wait: Box<dyn Fn(std::time::Duration) + Send + Sync>,
}

/// A change of this host's, not settled yet, touches the paths of the
/// foreign change: apply it once that one is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

impl Store {
    /// How far the tree has followed a shared store: every version up to
    /// this one is in it. A change made now has seen this far.
    pub fn followed(&self) -> u64 {
        self.followed.load(Ordering::Acquire)
    }

    /// Since when a shared store's database has not answered (`None`
    /// while it answers): what this copy shows may be stale since then.
    pub fn unreachable_since(&self) -> Option<std::time::SystemTime> {
        match self.unreachable_since.load(Ordering::Acquire) {
            0 => None,
            secs => Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)),
        }
    }

    /// Notes that the database stopped answering at `since` (kept if it
    /// was already down), or answers again (`None`).
    pub fn set_unreachable(&self, since: Option<std::time::SystemTime>) {
        match since {
            Some(t) => {
                let secs = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_secs().max(1));
                let _ = self.unreachable_since.compare_exchange(
                    0,
                    secs,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            None => self.unreachable_since.store(0, Ordering::Release),
        }
    }

    /// Marks the store as a cache of a store over HTTP, whose changes made
    /// while it cannot be reached are kept and sent later.
    pub fn mark_keeps_unsent(&self) {
        self.keeps_unsent.store(true, Ordering::Release);
    }

    /// `note` said once, after the next `view` of `path` through the tool
    /// (at most 1,024 paths wait; past that the oldest are not said).
    pub fn note_for_view(&self, path: &MemPath, note: String) {
        let mut notes = self.notes.lock();
        if notes.len() >= 1024 && !notes.contains_key(path) {
            return;
        }
        notes.insert(path.clone(), note);
    }

    /// The note waiting for `path`'s next view, taken.
    pub fn take_view_note(&self, path: &MemPath) -> Option<String> {
        let mut notes = self.notes.lock();
        if notes.is_empty() {
            return None;
        }
        notes.remove(path)
    }

    /// Whether changes made while the store cannot be reached are kept.
    pub fn keeps_unsent(&self) -> bool {
        self.keeps_unsent.load(Ordering::Acquire)
    }

    /// Marks the store as one several hosts share (see `Pending::finish`):
    /// an agent's change waits for a change of this host's at its paths
    /// that is not settled yet, so that one that loses a race to another
    /// host is always taken back whole, never from under a change made on
    /// top of it.
    pub fn mark_shared(&self, hold: Hold) {
        self.shared.store(true, Ordering::Release);
        let _ = self.hold.set(hold);
    }

    /// The write lock, once no change of this host's at `paths` (or above
    /// or below one) is unsettled.
    pub(super) fn write_for(&self, paths: &[&MemPath]) -> RwLockWriteGuard<'_, Tree> {
        self.before_answer();
        loop {
            let tree = self.tree.write();
            let Some(hold) = self.hold.get() else {
                return tree;
            };
            let paths: Vec<MemPath> = paths.iter().map(|p| (*p).clone()).collect();
            if !(hold.busy)(&paths) {
                return tree;
            }
            drop(tree);
            (hold.wait)(std::time::Duration::from_millis(20));
        }
    }

    pub fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    /// Waits (at most `limit`) until the tree has followed through `seq`.
    pub fn wait_followed(&self, seq: u64, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while self.followed() < seq {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        true
    }

    /// The tree has followed the shared store through `seq` (a batch of
    /// this host's own, which the tree shows already).
    pub fn follow_to(&self, seq: u64) {
        self.followed.fetch_max(seq, Ordering::AcqRel);
    }

    /// Applies another host's batch (each change's `ops`, committed as its
    /// `Foreign`) whole, unless `busy` says a change of this host's not
    /// settled yet touches one of its paths; the tree has then followed the
    /// store through `through` (the batch's last id). The changes reach the
    /// journal together, so that one frame holds the whole batch (a crash
    /// never leaves half of it held and the rest skipped). Each ticket is
    /// kept when the journal holds its change and the kernel's caches of it
    /// are dropped (wait for them outside any lock).
    pub fn apply_foreign(
        &self,
        batch: Vec<(Vec<ChangeOp>, Foreign)>,
        through: u64,
        busy: &dyn Fn(&[MemPath]) -> bool,
    ) -> Result<Vec<Ticket>, Busy> {
        let mut tree = self.tree.write();
        let paths: Vec<MemPath> = batch
            .iter()
            .flat_map(|(ops, _)| ops)
            .filter(|op| !matches!(op, ChangeOp::SetTimes { .. }))
            .flat_map(|op| op.paths().into_iter().cloned())
            .collect();
        if busy(&paths) {
            return Err(Busy);
        }
        let mut changes = Vec::with_capacity(batch.len());
        for (ops, foreign) in batch {
            let (applied, merged) = self.keep_unsaved_over(&tree, ops.clone());
            let mut touched = cached(&tree, &applied);
            {
                let pins = self.pins.lock();
                tree.apply_ops_holding(&applied, &|ino| pins.contains_key(&ino));
            }
            touched.extend(cached(&tree, &applied));
            touched.dedup();
            let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
            self.note_foreign(&tree, seq, &applied, &merged);
            changes.push(Change {
                seq,
                origin: Origin::Memfs,
                ops,
                touched,
                undo: None,
                overwrites: Vec::new(),
                merged: Vec::new(),
                seen: foreign.seq,
                foreign: Some(Arc::new(foreign)),
            });
        }
        self.followed.fetch_max(through, Ordering::AcqRel);
        let mut tickets = match &self.persist {
            Some(sink) => sink.submit_all(&changes),
            None => changes.iter().map(|_| Ticket::done()).collect(),
        };
        for observer in self.observers.read().iter() {
            for (ticket, change) in tickets.iter_mut().zip(&changes) {
                *ticket = std::mem::take(ticket).and(observer.submit(change));
            }
        }
        drop(tree);
        Ok(tickets)
    }

    /// Notes who put what where (`applied`, another host's change `seq`):
    /// a person's later save over it unread is a lost update or a merge;
    /// at `merged` paths it is in memory's merge already, unread by nobody.
    fn note_foreign(&self, tree: &Tree, seq: u64, applied: &[ChangeOp], merged: &[MemPath]) {
        let mut fresh = self.fresh.lock();
        fresh.note_foreign(seq, applied, &|p| super::file_content(tree, p));
        for path in merged {
            fresh.forget(path);
        }
    }

    /// The ops to apply of a foreign change: those at no path memory holds
    /// unsaved (or above or below one); the others' paths become unsaved,
    /// so that memory's state there is written again over them. A new
    /// content at the path of a person's lost save is merged with it
    /// instead where the two changed different lines (see `lost.rs`): the
    /// op applies, then the merge, which stays unsaved (it is written again,
    /// in the person's name). Returns the ops and the paths merged.
    fn keep_unsaved_over(&self, tree: &Tree, ops: Vec<ChangeOp>) -> (Vec<ChangeOp>, Vec<MemPath>) {
        let mut unsaved = self.unsaved.lock();
        let mut applied = Vec::with_capacity(ops.len());
        let mut merged = Vec::new();
        let mut kept = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let paths = op.paths();
            if !paths.iter().any(|p| unsaved.iter().any(|u| p.overlaps(u))) {
                applied.push(op.clone());
            } else if let Some(merge) = self.merged_over(tree, &ops[..i], op, &unsaved) {
                if let ChangeOp::Write { path, .. } = &merge {
                    merged.push(path.clone());
                }
                applied.push(op.clone());
                applied.push(merge);
            } else if let Some((source, target)) = moved_file_over(tree, &ops[..i], op, &unsaved) {
                // The winner's file moved over memory's: memory's stays,
                // and the winner's source is gone as it is there (an
                // editor's tmp file is left nowhere).
                applied.push(ChangeOp::Remove { path: source });
                kept.push(target);
            } else if !matches!(op, ChangeOp::SetTimes { .. }) {
                kept.extend(paths.into_iter().cloned());
            }
        }
        unsaved.extend(kept);
        (applied, merged)
    }
}

/// The source and target of `op` when it is a file's rename onto a path
/// memory holds unsaved, from a path it does not (`earlier`: the same
/// change's ops before it).
fn moved_file_over(
    tree: &Tree,
    earlier: &[ChangeOp],
    op: &ChangeOp,
    unsaved: &BTreeSet<MemPath>,
) -> Option<(MemPath, MemPath)> {
    let ChangeOp::Rename { from, to, .. } = op else {
        return None;
    };
    let clear = !unsaved.iter().any(|u| u.overlaps(from));
    (clear && super::lost::content_at(tree, earlier, from).is_some())
        .then(|| (from.clone(), to.clone()))
}

/// What the kernel may have cached of the nodes and names `ops` touch, as
/// the tree stands (called before and after they are applied).
fn cached(tree: &Tree, ops: &[ChangeOp]) -> Vec<Touched> {
    let mut out = Vec::new();
    for op in ops {
        for path in op.paths() {
            if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
                if let Ok(dir) = tree.resolve(&parent) {
                    out.push(Touched::Entry(dir, name.to_string()));
                }
            }
            if let Ok(ino) = tree.resolve(path) {
                out.push(Touched::Inode(ino));
            }
        }
    }
    out
}

/// A path memory holds that the store has not taken, as memory holds it:
/// a file's bytes, or nothing (it is gone).
pub type Unsent = (MemPath, Option<Arc<Vec<u8>>>);

impl Store {
    /// Every path memory holds that the store has not taken (files below
    /// an unsaved directory one by one), as memory holds it now.
    pub fn unsent(&self) -> Vec<Unsent> {
        let tree = self.tree.read();
        let unsaved: Vec<MemPath> = self.unsaved.lock().iter().cloned().collect();
        let (held, gone): (Vec<MemPath>, Vec<MemPath>) =
            unsaved.into_iter().partition(|p| tree.resolve(p).is_ok());
        let mut out: Vec<Unsent> = gone.into_iter().map(|p| (p, None)).collect();
        if !held.is_empty() {
            for (p, node) in tree.walk() {
                if let crate::store::NodeKind::File(data) = &node.kind {
                    if held.iter().any(|h| p.starts_with(h)) {
                        out.push((p, Some(data.clone())));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }
}
