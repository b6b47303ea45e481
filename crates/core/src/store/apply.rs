//! Applying recorded ops to a tree: what the journal's start-up replay
//! (and, later, another host's versions) makes of the tree, without the
//! checks a door's operation makes (the ops were checked when they were
//! made). Nothing here is seen by the kernel: the tree is not served yet,
//! or the caller invalidates what it returns.

use std::time::SystemTime;

use super::change::{ChangeOp, Meta};
use super::tree::{Attr, Ino, NodeKind, Tree, ROOT_INO};
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

/// The parent directory of `path` (made as needed) and its name there.
fn place(
    tree: &mut Tree,
    path: &MemPath,
    now: SystemTime,
    held: &dyn Fn(Ino) -> bool,
) -> Option<(Ino, String)> {
    let parent = path.parent()?;
    let name = path.file_name()?.to_string();
    // A non-directory in the way goes: the record says this is a directory.
    let mut at = ROOT_INO;
    for n in parent.names() {
        match tree.child(at, n).ok().flatten() {
            Some(next) if tree.node(next).is_dir() => at = next,
            Some(_) => {
                tree.remove(at, n, now, held);
                at = tree.add(
                    at,
                    n,
                    NodeKind::Dir(Default::default()),
                    Attr::new(0o700, now),
                );
            }
            None => {
                at = tree.add(
                    at,
                    n,
                    NodeKind::Dir(Default::default()),
                    Attr::new(0o700, now),
                )
            }
        }
    }
    Some((at, name))
}

impl Tree {
    /// Applies `ops` in order.
    pub fn apply_ops(&mut self, ops: &[ChangeOp]) {
        self.apply_ops_holding(ops, &|_| false);
    }

    /// Applies `ops` in order to a tree that is served: a node `held`
    /// picks (one the kernel still holds) outlives its removal as an orphan.
    pub fn apply_ops_holding(&mut self, ops: &[ChangeOp], held: &dyn Fn(Ino) -> bool) {
        let now = SystemTime::now();
        for op in ops {
            self.apply_op(op, now, held);
        }
    }

    /// Long because it is a match over every change op kind applied to the
    /// tree; each arm is short and stands alone.
    fn apply_op(&mut self, op: &ChangeOp, now: SystemTime, held: &dyn Fn(Ino) -> bool) {
        match op {
            ChangeOp::Write { path, data, meta } => {
                let Some((dir, name)) = place(self, path, now, held) else {
                    return;
                };
                match self.child(dir, &name).ok().flatten() {
                    Some(ino) if matches!(self.node(ino).kind, NodeKind::File(_)) => {
                        self.set_data(ino, data.clone(), now);
                        self.node_mut(ino).attr = attr_of(meta);
                    }
                    existing => {
                        if existing.is_some() {
                            self.remove(dir, &name, now, held);
                        }
                        self.add(dir, &name, NodeKind::File(data.clone()), attr_of(meta));
                    }
                }
            }
            ChangeOp::MakeDir { path, meta } => {
                let Some((dir, name)) = place(self, path, now, held) else {
                    return;
                };
                match self.child(dir, &name).ok().flatten() {
                    Some(ino) if self.node(ino).is_dir() => self.node_mut(ino).attr = attr_of(meta),
                    existing => {
                        if existing.is_some() {
                            self.remove(dir, &name, now, held);
                        }
                        self.add(dir, &name, NodeKind::Dir(Default::default()), attr_of(meta));
                    }
                }
            }
            ChangeOp::Symlink { path, target, meta } => {
                let Some((dir, name)) = place(self, path, now, held) else {
                    return;
                };
                if self.child(dir, &name).ok().flatten().is_some() {
                    self.remove(dir, &name, now, held);
                }
                self.add(dir, &name, NodeKind::Symlink(target.clone()), attr_of(meta));
            }
            ChangeOp::Remove { path } => {
                if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
                    if let Ok(dir) = self.resolve(&parent) {
                        if self.child(dir, name).ok().flatten().is_some() {
                            self.remove(dir, name, now, held);
                        }
                    }
                }
            }
            ChangeOp::Rename { from, to, .. } => {
                let (Some(from_parent), Some(from_name)) = (from.parent(), from.file_name()) else {
                    return;
                };
                let Ok(src_dir) = self.resolve(&from_parent) else {
                    return;
                };
                if self.child(src_dir, from_name).ok().flatten().is_none() {
                    return;
                }
                let Some((dir, name)) = place(self, to, now, held) else {
                    return;
                };
                if self.child(dir, &name).ok().flatten().is_some() {
                    self.remove(dir, &name, now, held);
                }
                // (`place` may have made directories: the source's parent stands.)
                if let Ok(src_dir) = self.resolve(&from_parent) {
                    self.rename(src_dir, from_name, dir, &name, now);
                }
            }
            ChangeOp::Exchange { a, b } => {
                let ends = |tree: &Tree, p: &MemPath| -> Option<(Ino, String, Ino)> {
                    let dir = tree.resolve(&p.parent()?).ok()?;
                    let name = p.file_name()?.to_string();
                    let ino = tree.child(dir, &name).ok().flatten()?;
                    Some((dir, name, ino))
                };
                if let (Some((da, na, ia)), Some((db, nb, ib))) = (ends(self, a), ends(self, b)) {
                    self.unlink(da, &na, now);
                    self.unlink(db, &nb, now);
                    self.link(db, &nb, ia, now);
                    self.link(da, &na, ib, now);
                }
            }
            ChangeOp::SetMeta { path, meta } => {
                if let Ok(ino) = self.resolve(path) {
                    let attr = &mut self.node_mut(ino).attr;
                    let ctime = attr.ctime;
                    *attr = Attr {
                        ctime,
                        ..attr_of(meta)
                    };
                }
            }
            ChangeOp::SetTimes { path, meta } => {
                if let Ok(ino) = self.resolve(path) {
                    let attr = &mut self.node_mut(ino).attr;
                    attr.atime = meta.atime;
                    attr.mtime = meta.mtime;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
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
