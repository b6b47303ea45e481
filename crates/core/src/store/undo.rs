//! Undoing an agent's change that the disk refused.
//!
//! An error result must mean the change did not happen. The store applies a
//! change in memory first (both doors see it at once) and the persister makes
//! it durable after; when the disk refuses, the agent has not been answered
//! yet, so the change can still be taken back. Each tool change carries an
//! [`Undo`] made when it was applied. It is applied only while what the change
//! made is still there untouched: a later change by anyone (a person's write
//! through the mount, say) wins, and the change is then kept in memory and
//! written again later instead (the store's `unsaved` paths).

use std::sync::Arc;
use std::time::SystemTime;

use super::touched::Touched;
use super::tree::{Attr, Ino, NodeKind, Tree};

/// How to take back one change.
#[derive(Debug)]
pub enum Undo {
    /// Put back a file's bytes and attributes (an edit, or create over a file)
    /// while it still holds exactly the bytes the change gave it.
    Restore {
        ino: Ino,
        old: Arc<Vec<u8>>,
        attr: Attr,
        new: Arc<Vec<u8>>,
    },
    /// Take away a file a create made (while it holds exactly what the create
    /// wrote), and the directories made for it (while they are empty).
    Unmake {
        parent: Ino,
        name: String,
        ino: Ino,
        new: Arc<Vec<u8>>,
        dirs: Vec<Ino>,
    },
    /// Move a renamed node back (while it is where the rename put it and its
    /// old name is free), and take away the directories made for it.
    MoveBack {
        ino: Ino,
        from: (Ino, String),
        to: (Ino, String),
        dirs: Vec<Ino>,
    },
    /// Put back a deleted subtree (a copy taken when it was deleted) while
    /// its name is free.
    Relink {
        parent: Ino,
        name: String,
        copy: Vec<Copied>,
    },
}

/// One node of a deleted subtree: where it was (the index of its parent in
/// the copy, and its name; `None` for the top), what it was, its attributes.
#[derive(Debug)]
pub struct Copied {
    pub parent: Option<(usize, String)>,
    pub kind: NodeKind,
    pub attr: Attr,
}

/// Copies the subtree at `ino`, parents before children, directories empty
/// (file bytes are shared, not copied): linear in the subtree.
pub fn copy_subtree(tree: &Tree, ino: Ino) -> Vec<Copied> {
    let mut out = Vec::new();
    let mut stack = vec![(None, ino)];
    while let Some((parent, ino)) = stack.pop() {
        let node = tree.node(ino);
        let at = out.len();
        if let NodeKind::Dir(entries) = &node.kind {
            for (name, &child) in entries.iter().rev() {
                stack.push((Some((at, name.clone())), child));
            }
        }
        let kind = match &node.kind {
            NodeKind::Dir(_) => NodeKind::Dir(Default::default()),
            other => other.clone(),
        };
        out.push(Copied {
            parent,
            kind,
            attr: node.attr,
        });
    }
    out
}

impl Undo {
    /// Applies the undo if what the change made is still there untouched;
    /// returns whether it did, noting what the kernel may have cached.
    /// `unlink` removes an entry the way the store does (dropping nodes the
    /// kernel does not hold). Each kind checks that what the change made
    /// is still there, reverses it and records what was touched.
    pub fn apply(
        &self,
        tree: &mut Tree,
        touched: &mut Vec<Touched>,
        unlink: &dyn Fn(&mut Tree, Ino, &str),
    ) -> bool {
        let now = SystemTime::now();
        match self {
            Undo::Restore {
                ino,
                old,
                attr,
                new,
            } => {
                if !holds(tree, *ino, new) {
                    return false;
                }
                tree.set_data(*ino, old.clone(), now);
                tree.node_mut(*ino).attr = *attr;
                touched.push(Touched::Inode(*ino));
                true
            }
            Undo::Unmake {
                parent,
                name,
                ino,
                new,
                dirs,
            } => {
                let here = tree.get(*parent).is_some()
                    && tree.child(*parent, name).ok().flatten() == Some(*ino);
                if !here || !holds(tree, *ino, new) {
                    return false;
                }
                unlink(tree, *parent, name);
                touched.push(Touched::Entry(*parent, name.clone()));
                touched.push(Touched::Inode(*parent));
                remove_empty_dirs(tree, dirs, touched, unlink);
                true
            }
            Undo::MoveBack {
                ino,
                from,
                to,
                dirs,
            } => {
                let back = MoveBack {
                    ino: *ino,
                    from,
                    to,
                    dirs,
                };
                back.apply(tree, touched, unlink, now)
            }
            Undo::Relink { parent, name, copy } => relink(tree, (*parent, name), copy, touched),
        }
    }
}

/// An entry a rename moved, to be moved back to where it was.
struct MoveBack<'a> {
    ino: Ino,
    from: &'a (Ino, String),
    to: &'a (Ino, String),
    dirs: &'a [Ino],
}

impl MoveBack<'_> {
    /// Moves it back if it is still at `to` and `from` is free in a
    /// directory that is still linked.
    fn apply(
        &self,
        tree: &mut Tree,
        touched: &mut Vec<Touched>,
        unlink: &dyn Fn(&mut Tree, Ino, &str),
        now: SystemTime,
    ) -> bool {
        let (from, to) = (self.from, self.to);
        let at_to =
            tree.get(to.0).is_some() && tree.child(to.0, &to.1).ok().flatten() == Some(self.ino);
        let linked_dir = |n: &super::tree::Node| {
            n.is_dir() && (from.0 == super::ROOT_INO || !n.links.is_empty())
        };
        let from_free = tree.get(from.0).is_some_and(linked_dir)
            && tree.child(from.0, &from.1).ok().flatten().is_none();
        if !at_to || !from_free {
            return false;
        }
        tree.rename(to.0, &to.1, from.0, &from.1, now);
        for (dir, name) in [to, from] {
            touched.push(Touched::Entry(*dir, name.clone()));
            touched.push(Touched::Inode(*dir));
        }
        remove_empty_dirs(tree, self.dirs, touched, unlink);
        true
    }
}

/// Puts back a removed entry (`name` in `parent`, free again) from its
/// copy: parents come first in the copy, each landing below the node made
/// for its parent.
fn relink(
    tree: &mut Tree,
    (parent, name): (Ino, &String),
    copy: &[Copied],
    touched: &mut Vec<Touched>,
) -> bool {
    let free = tree.get(parent).is_some_and(|n| n.is_dir())
        && tree.child(parent, name).ok().flatten().is_none();
    if !free {
        return false;
    }
    let mut made: Vec<Ino> = Vec::with_capacity(copy.len());
    for node in copy {
        let (dir, leaf) = match &node.parent {
            None => (parent, name.as_str()),
            Some((at, leaf)) => (made[*at], leaf.as_str()),
        };
        made.push(tree.add(dir, leaf, node.kind.clone(), node.attr));
    }
    touched.push(Touched::Entry(parent, name.clone()));
    touched.push(Touched::Inode(parent));
    true
}

/// Whether file `ino` still holds exactly `bytes` (the same allocation: any
/// write since made a copy).
fn holds(tree: &Tree, ino: Ino, bytes: &Arc<Vec<u8>>) -> bool {
    matches!(tree.get(ino).map(|n| &n.kind), Some(NodeKind::File(data)) if Arc::ptr_eq(data, bytes))
}

/// Removes the directories a change made (deepest first) while they are empty.
fn remove_empty_dirs(
    tree: &mut Tree,
    dirs: &[Ino],
    touched: &mut Vec<Touched>,
    unlink: &dyn Fn(&mut Tree, Ino, &str),
) {
    for &dir in dirs.iter().rev() {
        let empty =
            matches!(tree.get(dir).map(|n| &n.kind), Some(NodeKind::Dir(e)) if e.is_empty());
        let Some((parent, name)) = tree.get(dir).and_then(|n| n.links.first()).cloned() else {
            continue;
        };
        if empty {
            unlink(tree, parent, &name);
            touched.push(Touched::Entry(parent, name));
            touched.push(Touched::Inode(parent));
        }
    }
}
