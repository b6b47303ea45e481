//! The journal's model of the memory: every node the records describe,
//! by path, with what each file holds and the version that made it.
//!
//! It is what the journal needs to write records (a version's `replaces`,
//! which contents it has already) and what start-up compares the plain
//! files with. It holds no file bytes. Applying the same ops as the store
//! keeps it equal to the store's tree (for the nodes that persist).

use std::collections::BTreeMap;

use crate::digest::Sha;
use crate::path::MemPath;
use crate::store::{ChangeOp, Meta, DIR_MODE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VNode {
    pub kind: VKind,
    pub meta: Meta,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VKind {
    File {
        sha: Sha,
        size: u64,
        /// The version that made this content (0: none yet).
        version: u64,
        /// The content is in the plain file only (found when the journal
        /// began, never copied into it).
        in_file: bool,
    },
    Dir,
    Symlink(String),
}

impl VNode {
    pub fn file(&self) -> Option<(Sha, u64, u64, bool)> {
        match self.kind {
            VKind::File {
                sha,
                size,
                version,
                in_file,
            } => Some((sha, size, version, in_file)),
            _ => None,
        }
    }
}

/// What to put back if a batch is refused: each path's node before.
pub type Undo = Vec<(MemPath, Option<VNode>)>;

#[derive(Debug, Default, Clone)]
pub struct View {
    nodes: BTreeMap<MemPath, VNode>,
    /// The memory root's attributes, once a change set them.
    pub root_meta: Option<Meta>,
}

impl View {
    pub fn get(&self, path: &MemPath) -> Option<&VNode> {
        self.nodes.get(path)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&MemPath, &VNode)> {
        self.nodes.iter()
    }

    /// Every node at or below `at`, in path order.
    pub fn under(&self, at: &MemPath) -> Vec<(MemPath, VNode)> {
        if at.is_root() {
            return self
                .nodes
                .iter()
                .map(|(p, n)| (p.clone(), n.clone()))
                .collect();
        }
        self.nodes
            .range(at.clone()..)
            .take_while(|(p, _)| p.starts_with(at))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect()
    }

    /// Every file at or below `at`, with its content and version.
    pub fn files_under(&self, at: &MemPath) -> Vec<(MemPath, Sha, u64, u64, bool)> {
        self.under(at)
            .into_iter()
            .filter_map(|(p, n)| n.file().map(|(s, z, v, f)| (p, s, z, v, f)))
            .collect()
    }

    /// Sets (or removes) the node at `path`, noting what was there in `undo`.
    pub fn set(&mut self, path: &MemPath, node: Option<VNode>, undo: Option<&mut Undo>) {
        let old = match node {
            Some(node) => self.nodes.insert(path.clone(), node),
            None => self.nodes.remove(path),
        };
        if let Some(undo) = undo {
            undo.push((path.clone(), old));
        }
    }

    /// Puts back what `undo` noted, latest first.
    pub fn roll_back(&mut self, undo: Undo) {
        for (path, old) in undo.into_iter().rev() {
            match old {
                Some(node) => self.nodes.insert(path, node),
                None => self.nodes.remove(&path),
            };
        }
    }

    /// Sets the version that made the file at `path` hold its content.
    pub fn set_version(&mut self, path: &MemPath, v: u64, mut undo: Option<&mut Undo>) {
        if let Some(node) = self.nodes.get(path).cloned() {
            if let VKind::File {
                sha, size, in_file, ..
            } = node.kind
            {
                let node = VNode {
                    kind: VKind::File {
                        sha,
                        size,
                        version: v,
                        in_file,
                    },
                    meta: node.meta,
                };
                self.set(path, Some(node), undo.as_deref_mut());
            }
        }
    }

    /// The file at `path` now has its content in the journal too, as
    /// version `v` (a content found when the journal began, just kept).
    pub fn mark_in_journal(&mut self, path: &MemPath, v: u64, undo: Option<&mut Undo>) {
        if let Some(node) = self.nodes.get(path).cloned() {
            if let VKind::File { sha, size, .. } = node.kind {
                let kind = VKind::File {
                    sha,
                    size,
                    version: v,
                    in_file: false,
                };
                self.set(path, Some(VNode { kind, ..node }), undo);
            }
        }
    }

    /// The file at `path` has its content only in the plain file.
    pub fn mark_in_file(&mut self, path: &MemPath) {
        if let Some(node) = self.nodes.get_mut(path) {
            if let VKind::File { in_file, .. } = &mut node.kind {
                *in_file = true;
            }
        }
    }

    /// Replaces everything with the nodes of a snapshot.
    pub fn reset(&mut self, nodes: impl IntoIterator<Item = (MemPath, VNode)>) {
        self.nodes = nodes.into_iter().collect();
    }

    /// Applies one store op; `write` is a write's content hash and size.
    pub fn apply(&mut self, op: &ChangeOp, write: Option<(Sha, u64)>, mut undo: Option<&mut Undo>) {
        match op {
            ChangeOp::Write { path, meta, data } => {
                let (sha, size) = write.unwrap_or_else(|| (Sha::of(data), data.len() as u64));
                self.make_parents(path, meta, undo.as_deref_mut());
                let version = match self.nodes.get(path).map(|n| &n.kind) {
                    Some(VKind::File {
                        sha: old, version, ..
                    }) if *old == sha => *version,
                    _ => 0,
                };
                let kind = VKind::File {
                    sha,
                    size,
                    version,
                    in_file: false,
                };
                self.remove_below(path, undo.as_deref_mut());
                self.set(path, Some(VNode { kind, meta: *meta }), undo);
            }
            ChangeOp::MakeDir { path, meta } => {
                self.make_parents(path, meta, undo.as_deref_mut());
                if !matches!(self.nodes.get(path).map(|n| &n.kind), Some(VKind::Dir)) {
                    self.remove_below(path, undo.as_deref_mut());
                }
                let node = VNode {
                    kind: VKind::Dir,
                    meta: *meta,
                };
                self.set(path, Some(node), undo);
            }
            ChangeOp::Symlink { path, target, meta } => {
                self.make_parents(path, meta, undo.as_deref_mut());
                self.remove_below(path, undo.as_deref_mut());
                let node = VNode {
                    kind: VKind::Symlink(target.clone()),
                    meta: *meta,
                };
                self.set(path, Some(node), undo);
            }
            ChangeOp::Remove { path } => self.remove_tree(path, undo),
            ChangeOp::Rename { from, to, .. } => {
                let moved = self.under(from);
                if moved.is_empty() {
                    return;
                }
                let meta = moved[0].1.meta;
                self.remove_tree(from, undo.as_deref_mut());
                self.remove_tree(to, undo.as_deref_mut());
                self.make_parents(to, &meta, undo.as_deref_mut());
                for (path, node) in moved {
                    self.set(&path.rebase(from, to), Some(node), undo.as_deref_mut());
                }
            }
            ChangeOp::Exchange { a, b } => {
                let side_a = self.under(a);
                let side_b = self.under(b);
                self.remove_tree(a, undo.as_deref_mut());
                self.remove_tree(b, undo.as_deref_mut());
                for (path, node) in side_a {
                    self.set(&path.rebase(a, b), Some(node), undo.as_deref_mut());
                }
                for (path, node) in side_b {
                    self.set(&path.rebase(b, a), Some(node), undo.as_deref_mut());
                }
            }
            ChangeOp::SetMeta { path, meta } => {
                if path.is_root() {
                    self.root_meta = Some(*meta);
                } else if let Some(node) = self.nodes.get(path).cloned() {
                    self.set(path, Some(VNode { meta: *meta, ..node }), undo);
                }
            }
            ChangeOp::SetTimes { path, meta } => {
                if path.is_root() {
                    let mut m = self.root_meta.unwrap_or(*meta);
                    m.atime = meta.atime;
                    m.mtime = meta.mtime;
                    self.root_meta = Some(m);
                } else if let Some(node) = self.nodes.get(path).cloned() {
                    let mut m = node.meta;
                    m.atime = meta.atime;
                    m.mtime = meta.mtime;
                    self.set(path, Some(VNode { meta: m, ..node }), undo);
                }
            }
        }
    }

    /// Removes `path` and everything below it.
    fn remove_tree(&mut self, path: &MemPath, mut undo: Option<&mut Undo>) {
        for (p, _) in self.under(path) {
            self.set(&p, None, undo.as_deref_mut());
        }
    }

    /// Removes what is below `path` (not `path` itself).
    fn remove_below(&mut self, path: &MemPath, mut undo: Option<&mut Undo>) {
        for (p, _) in self.under(path) {
            if &p != path {
                self.set(&p, None, undo.as_deref_mut());
            }
        }
    }

    /// Missing directories above `path` (as the disk makes them: mode 0700,
    /// owned as `like`).
    fn make_parents(&mut self, path: &MemPath, like: &Meta, mut undo: Option<&mut Undo>) {
        let mut at = MemPath::root();
        let names = path.names();
        for name in &names[..names.len().saturating_sub(1)] {
            at = at.join(name);
            match self.nodes.get(&at).map(|n| &n.kind) {
                Some(VKind::Dir) => {}
                _ => {
                    let meta = Meta {
                        perm: DIR_MODE,
                        ..*like
                    };
                    let node = VNode {
                        kind: VKind::Dir,
                        meta,
                    };
                    self.remove_below(&at, undo.as_deref_mut());
                    self.set(&at, Some(node), undo.as_deref_mut());
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
            perm: 0o600,
            uid: 0,
            gid: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
        }
    }

    fn write(path: &str, text: &str) -> ChangeOp {
        ChangeOp::Write {
            path: p(path),
            data: Arc::new(text.as_bytes().to_vec()),
            meta: meta(),
        }
    }

    fn paths(view: &View) -> Vec<String> {
        view.iter().map(|(p, _)| p.to_string()).collect()
    }

    #[test]
    fn writes_make_parents_and_renames_move_subtrees() {
        let mut view = View::default();
        view.apply(&write("/memories/d/e/f.md", "x"), None, None);
        view.apply(&write("/memories/d2.md", "y"), None, None);
        assert_eq!(
            paths(&view),
            [
                "/memories/d",
                "/memories/d/e",
                "/memories/d/e/f.md",
                "/memories/d2.md"
            ]
        );
        let rename = ChangeOp::Rename {
            from: p("/memories/d"),
            to: p("/memories/x/y"),
            replace: false,
        };
        view.apply(&rename, None, None);
        assert_eq!(
            paths(&view),
            [
                "/memories/d2.md",
                "/memories/x",
                "/memories/x/y",
                "/memories/x/y/e",
                "/memories/x/y/e/f.md"
            ]
        );
        let exchange = ChangeOp::Exchange {
            a: p("/memories/d2.md"),
            b: p("/memories/x/y"),
        };
        view.apply(&exchange, None, None);
        assert_eq!(
            view.get(&p("/memories/d2.md/e/f.md")).and_then(|n| n.file()).map(|f| f.1),
            Some(1)
        );
        assert!(view.get(&p("/memories/x/y")).unwrap().file().is_some());
    }

    #[test]
    fn an_undo_log_puts_everything_back() {
        let mut view = View::default();
        view.apply(&write("/memories/a/b.md", "x"), None, None);
        let before = paths(&view);
        let mut undo = Undo::new();
        view.apply(&write("/memories/c/d.md", "y"), None, Some(&mut undo));
        view.apply(
            &ChangeOp::Remove {
                path: p("/memories/a"),
            },
            None,
            Some(&mut undo),
        );
        view.set_version(&p("/memories/c/d.md"), 9, Some(&mut undo));
        view.roll_back(undo);
        assert_eq!(paths(&view), before);
    }
}
