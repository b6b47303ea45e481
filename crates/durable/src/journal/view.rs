//! The journal's model of the memory: every node the records describe,
//! by path, with what each file holds and the version that made it.
//!
//! It is what the journal needs to write records (a version's `replaces`,
//! which contents it has already) and what start-up compares the plain
//! files with. It holds no file bytes. Applying the same ops as the store
//! keeps it equal to the store's tree (for the nodes that persist).
//!
//! Paths are kept as one string each, the names joined by NUL (a byte no
//! name holds, and the least one, so that a subtree's keys sort together
//! right after its top): one allocation and one comparison per path, however
//! deep.

use std::collections::BTreeMap;

use crate::digest::Sha;
use crate::path::MemPath;
use std::sync::Arc;

use crate::store::interpret::{self, Found, Kind, Removal, Target};
use crate::store::{ChangeOp, Meta};

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
        /// began, or dropped by retention), not in the journal.
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

/// A path as the view keys it: names joined by NUL (the root is empty).
pub fn key(path: &MemPath) -> String {
    path.names().join("\0")
}

/// The path a key stands for.
pub fn path(key: &str) -> MemPath {
    match key.is_empty() {
        true => MemPath::root(),
        false => MemPath::from_names(key.split('\0').map(str::to_string)),
    }
}

/// Whether `key` is `top` or below it.
pub fn within(key: &str, top: &str) -> bool {
    top.is_empty()
        || key == top
        || (key.len() > top.len() && key.starts_with(top) && key.as_bytes()[top.len()] == 0)
}

/// What to put back if a batch is refused: each path's node before.
pub type Undo = Vec<(String, Option<VNode>)>;

#[derive(Debug, Default, Clone)]
pub struct View {
    nodes: BTreeMap<String, VNode>,
    /// The memory root's attributes, once a change set them.
    pub root_meta: Option<Meta>,
}

impl View {
    pub fn get(&self, path: &MemPath) -> Option<&VNode> {
        self.nodes.get(&key(path))
    }

    pub fn get_key(&self, key: &str) -> Option<&VNode> {
        self.nodes.get(key)
    }

    /// Every node, by key, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &VNode)> {
        self.nodes.iter().map(|(k, n)| (k.as_str(), n))
    }

    /// Every node at or below `top` (a key), in path order.
    fn under(&self, top: &str) -> Vec<(String, VNode)> {
        let iter: Box<dyn Iterator<Item = (&String, &VNode)>> = match top.is_empty() {
            true => Box::new(self.nodes.iter()),
            false => Box::new(
                self.nodes
                    .range(top.to_string()..)
                    .take_while(|(k, _)| within(k, top)),
            ),
        };
        iter.map(|(k, n)| (k.clone(), n.clone())).collect()
    }

    /// Every file at or below `at`, with its content and version.
    pub fn files_under(&self, at: &MemPath) -> Vec<(MemPath, Sha, u64, u64, bool)> {
        let top = key(at);
        let files = |(k, n): (&String, &VNode)| n.file().map(|(s, z, v, f)| (path(k), s, z, v, f));
        match top.is_empty() {
            true => self.nodes.iter().filter_map(files).collect(),
            false => self
                .nodes
                .range(top.clone()..)
                .take_while(|(k, _)| within(k, &top))
                .filter_map(files)
                .collect(),
        }
    }

    /// Sets (or removes) the node at `key`, noting what was there in `undo`.
    fn set(&mut self, key: &str, node: Option<VNode>, undo: Option<&mut Undo>) {
        let old = match node {
            Some(node) => self.nodes.insert(key.to_string(), node),
            None => self.nodes.remove(key),
        };
        if let Some(undo) = undo {
            undo.push((key.to_string(), old));
        }
    }

    /// Puts back what `undo` noted, latest first.
    pub fn roll_back(&mut self, undo: Undo) {
        for (key, old) in undo.into_iter().rev() {
            match old {
                Some(node) => self.nodes.insert(key, node),
                None => self.nodes.remove(&key),
            };
        }
    }

    fn update_file(
        &mut self,
        path: &MemPath,
        undo: Option<&mut Undo>,
        f: impl FnOnce(&mut u64, &mut bool),
    ) {
        let k = key(path);
        if let Some(mut node) = self.nodes.get(&k).cloned() {
            if let VKind::File {
                version, in_file, ..
            } = &mut node.kind
            {
                f(version, in_file);
                self.set(&k, Some(node), undo);
            }
        }
    }

    /// Sets the version that made the file at `path` hold its content.
    pub fn set_version(&mut self, path: &MemPath, v: u64, undo: Option<&mut Undo>) {
        self.update_file(path, undo, |version, _| *version = v);
    }

    /// The file at `path` now has its content in the journal too, as
    /// version `v` (a content found when the journal began, just kept).
    pub fn mark_in_journal(&mut self, path: &MemPath, v: u64, undo: Option<&mut Undo>) {
        self.update_file(path, undo, |version, in_file| {
            *version = v;
            *in_file = false;
        });
    }

    /// The file at `path` has its content only in the plain file.
    pub fn mark_in_file(&mut self, path: &MemPath) {
        self.update_file(path, None, |_, in_file| *in_file = true);
    }

    /// Replaces everything with the nodes of a snapshot.
    pub fn reset(&mut self, nodes: impl IntoIterator<Item = (MemPath, VNode)>) {
        self.nodes = nodes.into_iter().map(|(p, n)| (key(&p), n)).collect();
    }

    /// Applies one store op; `write` is a write's content hash and size.
    pub fn apply(&mut self, op: &ChangeOp, write: Option<(Sha, u64)>, undo: Option<&mut Undo>) {
        let mut target = OnView::new(self, undo);
        target.write = write;
        interpret::apply(op, &mut target);
    }

    /// Removes `top` and everything below it.
    fn remove_tree(&mut self, top: &str, mut undo: Option<&mut Undo>) {
        if top.is_empty() {
            return; // the root stays
        }
        for (k, _) in self.under(top) {
            self.set(&k, None, undo.as_deref_mut());
        }
    }
}

/// The view as a target of the interpreter, noting what it changes in
/// `undo`.
pub struct OnView<'a> {
    view: &'a mut View,
    /// The content hash and size of the op's write (computed once).
    pub write: Option<(Sha, u64)>,
    undo: Option<&'a mut Undo>,
}

impl<'a> OnView<'a> {
    pub fn new(view: &'a mut View, undo: Option<&'a mut Undo>) -> Self {
        OnView {
            view,
            write: None,
            undo,
        }
    }

    /// The view as it stands.
    pub fn view(&self) -> &View {
        self.view
    }

    fn put(&mut self, path: &MemPath, kind: VKind, meta: &Meta) {
        let node = VNode { kind, meta: *meta };
        self.view
            .set(&key(path), Some(node), self.undo.as_deref_mut());
    }

    fn moved(&mut self, nodes: Vec<(String, VNode)>, from: &str, to: &str) {
        for (k, node) in nodes {
            let new = format!("{to}{}", &k[from.len()..]);
            self.view.set(&new, Some(node), self.undo.as_deref_mut());
        }
    }
}

impl Target for OnView<'_> {
    fn found(&mut self, path: &MemPath) -> Option<Found> {
        let node = self.view.nodes.get(&key(path))?;
        let kind = match node.kind {
            VKind::File { .. } => Kind::File,
            VKind::Dir => Kind::Dir,
            VKind::Symlink(_) => Kind::Symlink,
        };
        Some(Found {
            kind,
            meta: node.meta,
        })
    }

    fn remove(&mut self, path: &MemPath, _why: Removal) {
        self.view.remove_tree(&key(path), self.undo.as_deref_mut());
    }

    fn make_dir(&mut self, path: &MemPath, meta: &Meta) {
        self.put(path, VKind::Dir, meta);
    }

    fn put_file(&mut self, path: &MemPath, data: &Arc<Vec<u8>>, meta: &Meta) {
        let (sha, size) = self
            .write
            .unwrap_or_else(|| (Sha::of(data), data.len() as u64));
        // The same content again keeps the version that made it.
        let version = match self.view.nodes.get(&key(path)).map(|n| &n.kind) {
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
        self.put(path, kind, meta);
    }

    fn put_symlink(&mut self, path: &MemPath, target: &str, meta: &Meta) {
        self.put(path, VKind::Symlink(target.to_string()), meta);
    }

    fn move_entry(&mut self, from: &MemPath, to: &MemPath) {
        let (from, to) = (key(from), key(to));
        let nodes = self.view.under(&from);
        self.view.remove_tree(&from, self.undo.as_deref_mut());
        self.moved(nodes, &from, &to);
    }

    fn exchange(&mut self, a: &MemPath, b: &MemPath) {
        let (a, b) = (key(a), key(b));
        let (side_a, side_b) = (self.view.under(&a), self.view.under(&b));
        self.view.remove_tree(&a, self.undo.as_deref_mut());
        self.view.remove_tree(&b, self.undo.as_deref_mut());
        self.moved(side_a, &a, &b);
        self.moved(side_b, &b, &a);
    }

    fn set_meta(&mut self, path: &MemPath, meta: &Meta) {
        if path.is_root() {
            self.view.root_meta = Some(*meta);
            return;
        }
        let k = key(path);
        if let Some(node) = self.view.nodes.get(&k).cloned() {
            let node = VNode {
                meta: *meta,
                ..node
            };
            self.view.set(&k, Some(node), self.undo.as_deref_mut());
        }
    }

    fn set_times(&mut self, path: &MemPath, meta: &Meta) {
        let with_times = |m: Meta| Meta {
            atime: meta.atime,
            mtime: meta.mtime,
            ..m
        };
        if path.is_root() {
            self.view.root_meta = Some(with_times(self.view.root_meta.unwrap_or(*meta)));
            return;
        }
        let k = key(path);
        if let Some(node) = self.view.nodes.get(&k).cloned() {
            let node = VNode {
                meta: with_times(node.meta),
                ..node
            };
            self.view.set(&k, Some(node), self.undo.as_deref_mut());
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
        view.iter().map(|(k, _)| path(k).to_string()).collect()
    }

    #[test]
    fn keys_sort_a_subtree_together() {
        assert!(within("a\0b", "a"));
        assert!(!within("a-c", "a"));
        assert!(!within("ab", "a"));
        assert!(within("a", ""));
        let mut keys = vec!["a-c".to_string(), key(&p("/memories/a/b")), "a".to_string()];
        keys.sort();
        assert_eq!(keys, ["a", "a\0b", "a-c"]);
        assert_eq!(path(&key(&p("/memories/x/y"))), p("/memories/x/y"));
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
            view.get(&p("/memories/d2.md/e/f.md"))
                .and_then(|n| n.file())
                .map(|f| f.1),
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
