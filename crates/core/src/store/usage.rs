//! When each file was last used (read or written, through either door), for
//! expiry: a write moves the file's mtime; a read is noted here.

use std::time::SystemTime;

use super::{Origin, Store, Ticket};
use crate::error::Error;
use crate::path::MemPath;
use crate::store::tree::{Ino, NodeKind, Tree};

impl Store {
    /// A read of `ino` (a tool view, a read or open through the mount).
    pub fn note_use(&self, ino: Ino) {
        self.used.lock().insert(ino, SystemTime::now());
    }

    /// A person's process `pid` opened `ino` to read it: what they saw, to
    /// tell a lost update from a save.
    pub fn note_open(&self, ino: Ino, pid: u32) {
        self.note_use(ino);
        let (path, seq, seen) = {
            let tree = self.tree.read();
            let seen = match tree.get(ino).map(|n| &n.kind) {
                Some(NodeKind::File(data)) => Some(data.clone()),
                _ => None,
            };
            (
                tree.path_of(ino),
                self.seq.load(std::sync::atomic::Ordering::Relaxed),
                seen,
            )
        };
        if let Some(path) = path {
            self.fresh.lock().note_read(pid, path, seq, seen);
        }
    }

    fn last_use(&self, tree: &Tree, ino: Ino) -> SystemTime {
        let written = tree.node(ino).attr.mtime;
        match self.used.lock().get(&ino) {
            Some(&read) if read > written => read,
            _ => written,
        }
    }

    /// Every file at or below `at` not used since `cutoff`, with its last use.
    pub fn idle_files(&self, at: &MemPath, cutoff: SystemTime) -> Vec<(MemPath, SystemTime)> {
        let tree = self.tree.read();
        let Ok(top) = tree.resolve(at) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut stack = vec![(at.clone(), top)];
        while let Some((path, ino)) = stack.pop() {
            match &tree.node(ino).kind {
                NodeKind::Dir(entries) => {
                    for (name, child) in entries.iter().rev() {
                        stack.push((path.join(name), *child));
                    }
                }
                NodeKind::File(_) => {
                    let last = self.last_use(&tree, ino);
                    if last < cutoff {
                        out.push((path, last));
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Removes the file at `path` as an expiry, if it is still unused since
    /// `cutoff` (checked under the same lock); `None` when it was used meanwhile.
    pub fn expire(&self, path: &MemPath, cutoff: SystemTime) -> Result<Option<Ticket>, Error> {
        self.remove_where(path, Origin::Expiry, false, |tree, ino| {
            Ok(matches!(tree.node(ino).kind, NodeKind::File(_))
                && self.last_use(tree, ino) < cutoff)
        })
    }

    /// Last reads by path, for keeping across restarts. Forgets, on the
    /// way, the reads of files that are gone (an inode number is never
    /// used again) or written since: the table holds only what counts.
    pub fn usage(&self) -> Vec<(MemPath, SystemTime)> {
        let tree = self.tree.read();
        let mut used = self.used.lock();
        used.retain(|&ino, &mut at| tree.get(ino).is_some_and(|node| at > node.attr.mtime));
        used.iter()
            .filter_map(|(&ino, &at)| {
                let node = tree.get(ino)?;
                (at > node.attr.mtime).then(|| Some((tree.path_of(ino)?, at)))?
            })
            .collect()
    }

    /// How many last reads the store holds (for tests of its bound).
    #[doc(hidden)]
    pub fn usage_entries(&self) -> usize {
        self.used.lock().len()
    }

    /// Restores last reads kept by [`Store::usage`] (paths that are gone are passed over).
    pub fn restore_usage(&self, entries: impl IntoIterator<Item = (MemPath, SystemTime)>) {
        let tree = self.tree.read();
        let mut used = self.used.lock();
        for (path, at) in entries {
            if let Ok(ino) = tree.resolve(&path) {
                used.insert(ino, at);
            }
        }
    }
}
