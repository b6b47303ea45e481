//! Applying recorded ops to a tree: what the journal's start-up replay
//! (and, later, another host's versions) makes of the tree, without the
//! checks a door's operation makes (the ops were checked when they were
//! made). Nothing here is seen by the kernel: the tree is not served yet,
//! or the caller invalidates what it returns.

use std::time::SystemTime;

use std::sync::Arc;

use super::change::{ChangeOp, Meta};
use super::interpret::{self, Found, Kind, Removal, Target};
use super::tree::{Attr, Ino, NodeKind, Tree};
use crate::path::MemPath;

fn attr_of(meta: &Meta) -> Attr {
    Attr {
        perm: meta.perm,
        uid: meta.uid,
        gid: meta.gid,
        atime: meta.atime,
        mtime: meta.mtime,
        ctime: meta.mtime,
    }
}

/// The tree as a target of the interpreter: paths resolved per call;
/// removed nodes the kernel holds (`held`) outlive their removal as orphans.
struct OnTree<'a> {
    tree: &'a mut Tree,
    now: SystemTime,
    held: &'a dyn Fn(Ino) -> bool,
}

impl OnTree<'_> {
    /// The directory holding `path` and the name there.
    fn place<'p>(&self, path: &'p MemPath) -> Option<(Ino, &'p str)> {
        let dir = self.tree.resolve(&path.parent()?).ok()?;
        Some((dir, path.file_name()?))
    }

    fn ino(&self, path: &MemPath) -> Option<Ino> {
        self.tree.resolve(path).ok()
    }

    fn add(&mut self, path: &MemPath, kind: NodeKind, meta: &Meta) {
        if let Some((dir, name)) = self.place(path) {
            self.tree.add(dir, name, kind, attr_of(meta));
        }
    }
}

impl Target for OnTree<'_> {
    fn found(&mut self, path: &MemPath) -> Option<Found> {
        let node = self.tree.node(self.ino(path)?);
        let kind = match node.kind {
            NodeKind::File(_) => Kind::File,
            NodeKind::Dir(_) => Kind::Dir,
            NodeKind::Symlink(_) => Kind::Symlink,
            NodeKind::Special { .. } => Kind::Other,
        };
        Some(Found {
            kind,
            meta: Meta::from(&node.attr),
        })
    }

    fn remove(&mut self, path: &MemPath, _why: Removal) {
        if let Some((dir, name)) = self.place(path) {
            self.tree.remove(dir, name, self.now, self.held);
        }
    }

    fn make_dir(&mut self, path: &MemPath, meta: &Meta) {
        self.add(path, NodeKind::Dir(Default::default()), meta);
    }

    fn put_file(&mut self, path: &MemPath, data: &Arc<Vec<u8>>, meta: &Meta) {
        match self.ino(path) {
            // A file of one name is written in place (a process holding it
            // open reads the new bytes); a file of several names is
            // replaced at this one, as the plain files hold one copy a name.
            Some(ino) if self.tree.node(ino).links.len() <= 1 => {
                self.tree.set_data(ino, data.clone(), self.now);
                self.tree.node_mut(ino).attr = attr_of(meta);
            }
            Some(_) => {
                self.remove(path, Removal::Named);
                self.add(path, NodeKind::File(data.clone()), meta);
            }
            None => self.add(path, NodeKind::File(data.clone()), meta),
        }
    }

    fn put_symlink(&mut self, path: &MemPath, target: &str, meta: &Meta) {
        self.add(path, NodeKind::Symlink(target.to_string()), meta);
    }

    fn move_entry(&mut self, from: &MemPath, to: &MemPath) {
        if let (Some((src, name)), Some((dst, new_name))) = (self.place(from), self.place(to)) {
            self.tree.rename(src, name, dst, new_name, self.now);
        }
    }

    fn exchange(&mut self, a: &MemPath, b: &MemPath) {
        let (Some((da, na)), Some((db, nb))) = (self.place(a), self.place(b)) else {
            return;
        };
        let (Some(ia), Some(ib)) = (
            self.tree.unlink(da, na, self.now),
            self.tree.unlink(db, nb, self.now),
        ) else {
            return;
        };
        self.tree.link(db, nb, ia, self.now);
        self.tree.link(da, na, ib, self.now);
    }

    fn set_meta(&mut self, path: &MemPath, meta: &Meta) {
        if let Some(ino) = self.ino(path) {
            let attr = &mut self.tree.node_mut(ino).attr;
            *attr = Attr {
                ctime: attr.ctime,
                ..attr_of(meta)
            };
        }
    }

    fn set_times(&mut self, path: &MemPath, meta: &Meta) {
        if let Some(ino) = self.ino(path) {
            let attr = &mut self.tree.node_mut(ino).attr;
            attr.atime = meta.atime;
            attr.mtime = meta.mtime;
        }
    }
}

impl Tree {
    /// Applies `ops` in order.
    pub fn apply_ops(&mut self, ops: &[ChangeOp]) {
        self.apply_ops_holding(ops, &|_| false);
    }

    /// Applies `ops` in order to a tree that is served: a node `held`
    /// picks (one the kernel still holds) outlives its removal as an orphan.
    pub fn apply_ops_holding(&mut self, ops: &[ChangeOp], held: &dyn Fn(Ino) -> bool) {
        let mut target = OnTree {
            tree: self,
            now: SystemTime::now(),
            held,
        };
        for op in ops {
            interpret::apply(op, &mut target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn p(s: &str) -> MemPath {
        MemPath::parse(s).unwrap()
    }

    fn meta() -> Meta {
        Meta {
            perm: 0o640,
            uid: 1,
            gid: 2,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
        }
    }

    #[test]
    fn ops_applied_to_a_tree_make_what_they_say() {
        let mut tree = Tree::new();
        tree.apply_ops(&[
            ChangeOp::Write {
                path: p("/memories/a/b.md"),
                data: Arc::new(b"one".to_vec()),
                meta: meta(),
            },
            ChangeOp::MakeDir {
                path: p("/memories/c"),
                meta: meta(),
            },
            ChangeOp::Rename {
                from: p("/memories/a"),
                to: p("/memories/c/a"),
                replace: false,
            },
            ChangeOp::Symlink {
                path: p("/memories/l"),
                target: "c/a/b.md".into(),
                meta: meta(),
            },
        ]);
        let ino = tree.resolve(&p("/memories/c/a/b.md")).unwrap();
        assert_eq!(tree.node(ino).attr.perm, 0o640);
        assert!(matches!(&tree.node(ino).kind, NodeKind::File(d) if d.as_slice() == b"one"));
        assert!(tree.resolve(&p("/memories/a")).is_err());
        tree.apply_ops(&[ChangeOp::Remove {
            path: p("/memories/c"),
        }]);
        assert!(tree.resolve(&p("/memories/c")).is_err());
        assert_eq!(tree.total_bytes(), 0);
    }
}
