//! Copying out what a path holds in one lock acquisition: a file's bytes,
//! or a window of a directory's listing (its cost never grows with the
//! directory beyond one count of its entries).

use std::sync::Arc;

use super::tree::{Ino, NodeKind, Tree};
use super::Store;
use crate::error::Error;
use crate::path::MemPath;

/// What a path holds, copied out of the tree in one lock acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    File(Arc<Vec<u8>>),
    Dir(Listing),
    /// A symlink or FIFO: nothing the tool shows.
    Other,
}

/// A directory's size and a window of its visible entries down to some depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Bytes of all files below the directory.
    pub size: u64,
    /// The entries in the window, depth first, each directory's in name order.
    pub entries: Vec<ListEntry>,
    /// The position of the window's first entry among all (0-based).
    pub skipped: usize,
    /// How many entries there are in all.
    pub total: usize,
}

/// Which entries of a listing to copy out: a listing's cost must not grow
/// with the directory beyond one count of its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub skip: usize,
    pub take: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// Path relative to the listed directory, `a` or `a/b`.
    pub relative: String,
    pub size: u64,
    pub is_dir: bool,
}

impl Store {
    /// What is at `path`: a file's bytes, or a window of a directory's
    /// listing `depth` levels deep that leaves out (and does not enter) the
    /// names `hide` picks.
    pub fn snapshot(
        &self,
        path: &MemPath,
        depth: usize,
        window: Window,
        hide: &dyn Fn(&str) -> bool,
    ) -> Result<Snapshot, Error> {
        let tree = self.read_tree();
        let ino = tree.resolve(path)?;
        Ok(match &tree.node(ino).kind {
            NodeKind::File(data) => {
                self.note_use(ino);
                Snapshot::File(data.clone())
            }
            NodeKind::Dir(_) => {
                let mut listing = Listing {
                    size: tree.subtree_bytes(ino),
                    entries: Vec::new(),
                    skipped: window.skip,
                    total: 0,
                };
                let mut walk = ListWalk {
                    tree: &tree,
                    depth,
                    window,
                    hide,
                    out: &mut listing,
                };
                walk.dir(ino, "", 1);
                Snapshot::Dir(listing)
            }
            NodeKind::Symlink(_) | NodeKind::Special { .. } => Snapshot::Other,
        })
    }
}

/// A depth-first walk that counts every visible entry and copies out those
/// in the window.
struct ListWalk<'a> {
    tree: &'a Tree,
    depth: usize,
    window: Window,
    hide: &'a dyn Fn(&str) -> bool,
    out: &'a mut Listing,
}

impl ListWalk<'_> {
    fn dir(&mut self, dir: Ino, prefix: &str, level: usize) {
        let Some(entries) = self.tree.children(dir) else {
            return;
        };
        for (name, &child) in entries {
            if (self.hide)(name) {
                continue;
            }
            let is_dir = match &self.tree.node(child).kind {
                NodeKind::File(_) => false,
                NodeKind::Dir(_) => true,
                // Symlinks are not followed, special nodes hold nothing: neither is listed.
                NodeKind::Symlink(_) | NodeKind::Special { .. } => continue,
            };
            let at = self.out.total;
            self.out.total += 1;
            let wanted = at >= self.window.skip && at - self.window.skip < self.window.take;
            if wanted {
                self.out.entries.push(ListEntry {
                    relative: format!("{prefix}{name}"),
                    size: self.tree.subtree_bytes(child),
                    is_dir,
                });
            }
            if is_dir && level < self.depth {
                self.dir(child, &format!("{prefix}{name}/"), level + 1);
            }
        }
    }
}
