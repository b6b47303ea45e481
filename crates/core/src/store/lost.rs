//! A person's save that lost a race to another host of a shared store: the
//! winner's change, when it arrives, is merged with it (a three-way merge
//! against the version both were made from, `merge::three_way`), so that
//! two people or two Claude Codes each adding a line to MEMORY.md keep both
//! lines. Where the two changed the same lines, the save is written again
//! over the winner in its person's name, recorded as an overwrite of it
//! (the winner's text stays in the history, one revert away).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use super::change::{ChangeOp, Meta, Origin};
use super::tree::{NodeKind, Tree};
use super::Store;
use crate::merge::{three_way, Merged};
use crate::path::MemPath;

/// One path of a lost save.
#[derive(Debug, Clone)]
pub(super) struct Lost {
    /// Who saved it (the save is written again in their name).
    pub origin: Origin,
    /// What the path held before the save, as far as this host had
    /// followed the store (the version the winner was made from too); none
    /// when the journal could not say.
    pub base: Option<Arc<Vec<u8>>>,
    /// The winner's change arrived and was merged into it: the save written
    /// again holds both, and overwrites nothing.
    pub merged: bool,
}

impl Lost {
    pub fn new(origin: Origin, base: Option<Arc<Vec<u8>>>) -> Lost {
        Lost {
            origin,
            base,
            merged: false,
        }
    }
}

impl Store {
    /// Another host's `op` at a path of a lost save, merged: the op (applied
    /// as it is) and a write of the merge after it, or `None` when there is
    /// no merge (not a file's new content, no base, or the two changed the
    /// same lines). `earlier` are the ops of the same change before it
    /// (where a rename's source got its content); `unsaved`, the paths
    /// memory holds that the store has not taken. Runs under the tree's
    /// lock and `unsaved`'s.
    pub(super) fn merged_over(
        &self,
        tree: &Tree,
        earlier: &[ChangeOp],
        op: &ChangeOp,
        unsaved: &BTreeSet<MemPath>,
    ) -> Option<ChangeOp> {
        let (path, theirs) = match op {
            ChangeOp::Write { path, data, .. } => (path, data.clone()),
            ChangeOp::Rename { from, to, .. } => (to, content_at(tree, earlier, from)?),
            _ => return None,
        };
        // Only the one path is memory's: nothing else the op touches.
        let clear = |p: &MemPath| unsaved.iter().all(|u| u == path || !u.overlaps(p));
        if !op.paths().into_iter().all(clear) {
            return None;
        }
        let ino = tree.resolve(path).ok()?;
        let node = tree.node(ino);
        let NodeKind::File(ours) = &node.kind else {
            return None;
        };
        let mut lost = self.lost.lock();
        let l = lost.get_mut(path)?;
        let Merged::Clean(merged) = three_way(l.base.as_deref()?, ours, &theirs) else {
            return None;
        };
        // Another change of the winner's at this path merges from here.
        l.base = Some(theirs);
        l.merged = true;
        Some(ChangeOp::Write {
            path: path.clone(),
            data: Arc::new(merged),
            meta: Meta {
                mtime: SystemTime::now(),
                ..Meta::from(&node.attr)
            },
        })
    }
}

/// The content a file at `path` has once `earlier` ops are applied to
/// `tree`: the last of them that wrote it, or the tree's.
pub(super) fn content_at(
    tree: &Tree,
    earlier: &[ChangeOp],
    path: &MemPath,
) -> Option<Arc<Vec<u8>>> {
    let written = earlier.iter().rev().find_map(|op| match op {
        ChangeOp::Write { path: p, data, .. } if p == path => Some(data.clone()),
        _ => None,
    });
    written.or_else(|| super::file_content(tree, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Bases, Change, ChangeSink, Foreign, Limits, Ticket};

    /// Keeps every change the store hands on.
    #[derive(Default)]
    struct Kept(std::sync::Mutex<Vec<Change>>);

    impl ChangeSink for Kept {
        fn submit(&self, change: &Change) -> Ticket {
            self.0.lock().unwrap().push(change.clone());
            Ticket::done()
        }
    }

    impl Kept {
        fn last(&self) -> Change {
            self.0.lock().unwrap().last().cloned().unwrap()
        }
    }

    fn p(s: &str) -> MemPath {
        MemPath::parse(s).unwrap()
    }

    fn person() -> Origin {
        Origin::Files {
            uid: 1000,
            by: None,
        }
    }

    fn content(store: &Store, path: &MemPath) -> Option<Vec<u8>> {
        store.with_tree(|tree| {
            let node = tree.node(tree.resolve(path).ok()?);
            match &node.kind {
                NodeKind::File(data) => Some(data.to_vec()),
                _ => None,
            }
        })
    }

    /// A store whose changes are kept, and its MEMORY.md holding `base`
    /// (memfs' own write).
    fn memory_md(base: &str) -> (Store, Arc<Kept>, MemPath) {
        let kept = Arc::new(Kept::default());
        let store = Store::new(Tree::new(), Limits::default(), Some(kept.clone()));
        let md = p("/memories/MEMORY.md");
        store
            .create_file(&md, base.as_bytes().to_vec(), true, Origin::Memfs)
            .unwrap();
        (store, kept, md)
    }

    /// `catch_up` waits for the journal (a barrier: a change with no ops)
    /// only while the store holds a change nobody saw settle: not after a
    /// write whose ticket was waited for, nor twice for the same change.
    #[test]
    fn catch_up_waits_only_for_changes_no_wait_saw_settle() {
        let (store, kept, md) = memory_md("a\n"); // (its ticket not waited for)
        let barriers = || {
            kept.0
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.ops.is_empty())
                .count()
        };
        store.catch_up();
        assert_eq!(barriers(), 1, "a change nobody waited for: a barrier");
        store.catch_up();
        assert_eq!(barriers(), 1, "nothing since: none");
        store
            .create_file(&md, b"b\n".to_vec(), true, Origin::Memfs)
            .unwrap()
            .wait()
            .unwrap();
        store.catch_up();
        assert_eq!(barriers(), 1, "a write whose ticket was waited for: none");
    }

    /// A store whose MEMORY.md held `base` when a person saved `ours` over
    /// it, a save the shared store refused (another host's came first);
    /// then the other host's change arrives as its editor makes it (a tmp
    /// file renamed over MEMORY.md) with `theirs`.
    fn race(base: &str, ours: &str, theirs: &str) -> (Store, Arc<Kept>) {
        let (store, kept, md) = memory_md(base);
        store
            .create_file(&md, ours.as_bytes().to_vec(), true, person())
            .unwrap();
        let refused = kept.last();
        let bases = Bases::from([(md.clone(), Arc::new(base.as_bytes().to_vec()))]);
        assert_eq!(store.recover(&[refused], &[], true, &bases), vec![false]);
        let tmp = p("/memories/MEMORY.md.tmp.1");
        let meta = Meta::from(&store.with_tree(|t| t.node(t.resolve(&md).unwrap()).attr));
        let ops = vec![
            ChangeOp::Write {
                path: tmp.clone(),
                data: Arc::new(theirs.as_bytes().to_vec()),
                meta,
            },
            ChangeOp::Rename {
                from: tmp,
                to: md,
                replace: true,
            },
        ];
        let foreign = Foreign {
            seq: 7,
            record: Arc::new(()),
        };
        store
            .apply_foreign(vec![(ops, foreign)], 7, &|_| false)
            .unwrap();
        (store, kept)
    }

    #[test]
    fn a_lost_save_is_merged_when_the_winner_arrives() {
        let (store, kept) = race("# Memory\n", "# Memory\n- a 1\n", "# Memory\n- b 1\n");
        let md = p("/memories/MEMORY.md");
        let both = b"# Memory\n- b 1\n- a 1\n".to_vec();
        assert_eq!(content(&store, &md), Some(both.clone()));
        assert_eq!(content(&store, &p("/memories/MEMORY.md.tmp.1")), None);
        // The merge is written again, in the person's name, over nothing.
        store.barrier(Origin::Memfs);
        let again = kept.last();
        assert_eq!(again.origin, person());
        assert!(again.overwrites.is_empty(), "{:?}", again.overwrites);
        assert_eq!(again.merged, vec![md.clone()]);
        assert!(again.ops.iter().any(|op| matches!(
            op,
            ChangeOp::Write { path, data, .. } if *path == md && **data == both
        )));
    }

    #[test]
    fn a_lost_save_that_changed_the_same_line_is_written_over_the_winner() {
        let (store, kept) = race(
            "# Memory\n- x\n",
            "# Memory\n- mine\n",
            "# Memory\n- yours\n",
        );
        let md = p("/memories/MEMORY.md");
        assert_eq!(content(&store, &md), Some(b"# Memory\n- mine\n".to_vec()));
        // The winner's tmp file is gone here as it is there.
        assert_eq!(content(&store, &p("/memories/MEMORY.md.tmp.1")), None);
        store.barrier(Origin::Memfs);
        let again = kept.last();
        assert_eq!(again.origin, person());
        assert_eq!(again.overwrites, vec![md]);
        assert!(again.merged.is_empty());
    }

    /// A person's process read MEMORY.md (`base`); an agent then wrote
    /// `theirs` there; the person saves `ours`, made from what they read.
    fn save_over_unread(base: &str, theirs: &str, ours: &str) -> (Store, Arc<Kept>, MemPath) {
        let (store, kept, md) = memory_md(base);
        let ino = store.with_tree(|t| t.resolve(&md).unwrap());
        store.note_open(ino, 42);
        let agent = Origin::Agent {
            door: crate::store::Door::Library,
            session: None,
        };
        store
            .create_file(&md, theirs.as_bytes().to_vec(), true, agent)
            .unwrap();
        let person = Origin::Person {
            uid: 1000,
            pid: 42,
            process: crate::store::Process::new("vim"),
        };
        store
            .create_file(&md, ours.as_bytes().to_vec(), true, person)
            .unwrap();
        (store, kept, md)
    }

    #[test]
    fn a_save_over_an_unread_change_of_other_lines_is_merged() {
        let (store, kept, md) =
            save_over_unread("# Memory\n", "# Memory\n- agent\n", "# Memory\n- person\n");
        let both = b"# Memory\n- agent\n- person\n".to_vec();
        assert_eq!(content(&store, &md), Some(both.clone()));
        let save = kept.last();
        assert!(save.overwrites.is_empty(), "{:?}", save.overwrites);
        assert_eq!(save.merged, vec![md.clone()]);
        assert!(matches!(
            save.ops.last(),
            Some(ChangeOp::Write { path, data, .. }) if *path == md && **data == both
        ));
    }

    #[test]
    fn a_save_over_an_unread_change_of_the_same_line_is_a_lost_update() {
        let (store, kept, md) = save_over_unread(
            "# Memory\n- x\n",
            "# Memory\n- agent\n",
            "# Memory\n- person\n",
        );
        assert_eq!(content(&store, &md), Some(b"# Memory\n- person\n".to_vec()));
        let save = kept.last();
        assert_eq!(save.overwrites, vec![md]);
        assert!(save.merged.is_empty());
    }

    #[test]
    fn without_a_base_a_lost_save_is_written_over_the_winner() {
        let kept = std::sync::Arc::new(Kept::default());
        let store = Store::new(Tree::new(), Limits::default(), Some(kept.clone()));
        let md = p("/memories/MEMORY.md");
        store
            .create_file(&md, b"a\n".to_vec(), true, person())
            .unwrap();
        let refused = kept.last();
        store.recover(&[refused], &[], true, &Bases::new());
        let ops = vec![ChangeOp::Write {
            path: md.clone(),
            data: Arc::new(b"b\n".to_vec()),
            meta: Meta::from(&store.with_tree(|t| t.node(t.resolve(&md).unwrap()).attr)),
        }];
        let foreign = Foreign {
            seq: 3,
            record: Arc::new(()),
        };
        store
            .apply_foreign(vec![(ops, foreign)], 3, &|_| false)
            .unwrap();
        assert_eq!(content(&store, &md), Some(b"a\n".to_vec()));
    }
}
