//! What memory becomes when the disk (or a shared store) refuses a batch:
//! the store decides (an agent's change taken back, a person's kept and
//! written again), and the ops that make the disk what memory holds.

use std::collections::BTreeSet;

use super::change::{Bases, Change, ChangeOp, Meta, Origin, Ticket, Touched};
use super::lost::Lost;
use super::tree::{Ino, NodeKind, Tree};
use super::Store;
use crate::path::MemPath;

impl Store {
    /// The disk refused `refused` (in the order they were applied), and did
    /// not confirm `unconfirmed` (written, but the flush failed). Decides what
    /// memory becomes, before anyone is told: each refused change that can be
    /// taken back is (latest first), and everything else stays in memory with
    /// its paths written again later. Kernel caches are invalidated for what
    /// was taken back. Returns, for each refused change, whether it was.
    /// Every step runs under one write lock of the tree, in order (undo
    /// refused changes newest first, record lost saves, mark paths unsaved,
    /// queue the invalidation); the wait comes after the lock is let go.
    /// `bases` are what the journal held at the refused changes' files
    /// before them (see [`Refused::bases`](super::Refused)).
    pub fn recover(
        &self,
        refused: &[Change],
        unconfirmed: &[Change],
        clean: bool,
        bases: &Bases,
    ) -> Vec<bool> {
        let mut tree = self.tree.write();
        let mut touched = Vec::new();
        let mut undone = vec![false; refused.len()];
        let unlink = |tree: &mut Tree, parent: Ino, name: &str| {
            self.remove_entry(tree, parent, name);
        };
        for (i, change) in refused.iter().enumerate().rev() {
            if let Some(undo) = &change.undo {
                undone[i] = undo.apply(&mut tree, &mut touched, &unlink);
            }
        }
        // Every path either change touched goes to disk again as memory has it
        // (for one taken back: whatever it left there is cleared).
        let mut unsaved = self.unsaved.lock();
        let kept = refused
            .iter()
            .zip(&undone)
            .filter(|(_, undone)| !(clean && **undone))
            .map(|(change, _)| change);
        let kept: Vec<&Change> = kept.collect();
        if clean {
            self.note_lost_saves(&kept, bases);
        }
        for change in kept.into_iter().chain(unconfirmed) {
            unsaved.extend(saved_paths(change).cloned());
        }
        drop(unsaved);
        let invalidated = self.invalidate(touched);
        drop(tree);
        // Outside the lock: the kernel may call back into the mount meanwhile.
        let _ = invalidated.wait();
        undone
    }

    /// A person's change that lost a race to another host (or could not be
    /// sent to it): merged with the winner's when that arrives, or written
    /// again in their name over it (see `lost.rs`). The first refusal at a
    /// path gives its base: later ones were made on top of it.
    fn note_lost_saves(&self, kept: &[&Change], bases: &Bases) {
        let mut lost = self.lost.lock();
        let people = kept.iter().filter(|c| {
            matches!(
                c.origin,
                Origin::Person { .. } | Origin::Revert { .. } | Origin::Files { .. }
            )
        });
        for change in people {
            for path in saved_paths(change) {
                let base = bases.get(path).cloned();
                lost.entry(path.clone())
                    .and_modify(|l| l.origin = change.origin.clone())
                    .or_insert_with(|| Lost::new(change.origin.clone(), base));
            }
        }
    }

    /// The kernel caches of what was taken back, queued for invalidation
    /// (done at once when nothing was).
    fn invalidate(&self, touched: Vec<Touched>) -> Ticket {
        if touched.is_empty() {
            return Ticket::done();
        }
        let change = Change {
            seq: 0,
            origin: Origin::Memfs,
            ops: Vec::new(),
            touched,
            undo: None,
            overwrites: Vec::new(),
            merged: Vec::new(),
            seen: 0,
            foreign: None,
        };
        let observers = self.observers.read();
        observers
            .iter()
            .fold(Ticket::done(), |t, o| t.and(o.submit(&change)))
    }

    /// Who writes `paths` again, over which of them and merging which (a
    /// person's save that lost a race to another host is theirs, merged
    /// with the winner or saved over it; anything else is memfs' own
    /// rewrite).
    pub(super) fn lost_saves(&self, paths: &BTreeSet<MemPath>) -> (Origin, Rewrite) {
        let mut rewrite = Rewrite::default();
        let mut lost = self.lost.lock();
        if lost.is_empty() {
            return (Origin::Memfs, rewrite);
        }
        let mut by = None;
        for path in paths {
            let found = lost
                .keys()
                .filter(|p| p.starts_with(path))
                .cloned()
                .collect::<Vec<_>>();
            for p in found {
                if let Some(l) = lost.remove(&p) {
                    by.get_or_insert(l.origin);
                    // A merge holds the winner's change: it overwrites nothing.
                    match l.merged {
                        true => rewrite.merged.push(p),
                        false => rewrite.over.push(p),
                    }
                }
            }
        }
        (by.unwrap_or(Origin::Memfs), rewrite)
    }

    /// How many paths the disk has not taken yet.
    pub fn unsaved_paths(&self) -> usize {
        self.unsaved.lock().len()
    }
}

/// What a rewrite of lost saves says of its paths (see `Store::lost_saves`).
#[derive(Debug, Default)]
pub(super) struct Rewrite {
    /// Saved over another host's change (an overwrite of it).
    pub over: Vec<MemPath>,
    /// Merged with another host's change.
    pub merged: Vec<MemPath>,
}

/// Where `path` is after `ops` (renames and exchanges move what is below them).
pub(super) fn moved_by(ops: &[ChangeOp], mut path: MemPath) -> MemPath {
    for op in ops {
        match op {
            ChangeOp::Rename { from, to, .. } if path.starts_with(from) => {
                path = path.rebase(from, to);
            }
            ChangeOp::Exchange { a, b } if path.starts_with(a) => path = path.rebase(a, b),
            ChangeOp::Exchange { a, b } if path.starts_with(b) => path = path.rebase(b, a),
            _ => {}
        }
    }
    path
}

/// Ops that make each of `paths` on disk what memory holds there now:
/// everything that exists first (parents before children), then removals.
/// A path memory does not hold is removed from its highest missing
/// directory down, so directories a refused change made on disk go too.
pub(super) fn reconcile_ops(tree: &Tree, paths: &BTreeSet<MemPath>) -> Vec<ChangeOp> {
    let mut ops = Vec::new();
    let mut removals = BTreeSet::new();
    for path in paths {
        match tree.resolve(path) {
            Ok(ino) => ops.extend(subtree_ops(tree, ino)),
            Err(_) => {
                removals.insert(highest_missing(tree, path));
            }
        }
    }
    ops.extend(removals.into_iter().map(|path| ChangeOp::Remove { path }));
    ops
}

/// The shortest prefix of `path` that memory does not hold.
pub(super) fn highest_missing(tree: &Tree, path: &MemPath) -> MemPath {
    let mut at = MemPath::root();
    for name in path.names() {
        at = at.join(name);
        if tree.resolve(&at).is_err() {
            break;
        }
    }
    at
}

/// Ops that write the subtree at `ino` anew, parents before children,
/// without recursion (after it came back from an orphan, or to retry it).
pub(super) fn subtree_ops(tree: &Tree, ino: Ino) -> Vec<ChangeOp> {
    let mut ops = Vec::new();
    let Some(top) = tree.path_of(ino) else {
        return ops;
    };
    if top.is_root() {
        // The root: its attributes; its entries are paths of their own.
        return ops;
    }
    let mut stack = vec![(top, ino)];
    while let Some((path, ino)) = stack.pop() {
        let node = tree.node(ino);
        let meta = Meta::from(&node.attr);
        match &node.kind {
            NodeKind::File(data) => ops.push(ChangeOp::Write {
                path,
                data: data.clone(),
                meta,
            }),
            NodeKind::Symlink(target) => ops.push(ChangeOp::Symlink {
                path,
                target: target.clone(),
                meta,
            }),
            NodeKind::Special { .. } => {}
            NodeKind::Dir(entries) => {
                stack.extend(entries.iter().rev().map(|(name, &c)| (path.join(name), c)));
                ops.push(ChangeOp::MakeDir { path, meta });
            }
        }
    }
    ops
}

/// The paths a change writes (a directory's times go with the next change
/// in it).
fn saved_paths(change: &Change) -> impl Iterator<Item = &MemPath> {
    change
        .ops
        .iter()
        .filter(|op| !matches!(op, ChangeOp::SetTimes { .. }))
        .flat_map(|op| op.paths())
}
