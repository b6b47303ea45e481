//! The tree's derived state, recomputed from the nodes and compared with
//! what the tree keeps: the property tests call [`Tree::check_invariants`]
//! after every step (docs/DESIGN.md, "Derived state").

use std::collections::{BTreeMap, HashSet};

use super::{Ino, Node, NodeKind, Tree, ROOT_INO};

/// Which piece of the tree's derived state is off, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantError {
    #[error("inode {ino} is not below next_ino {next}")]
    AboveNext { ino: Ino, next: Ino },
    #[error("inode {0} is not a file but has unsaved bytes")]
    UnsavedNotFile(Ino),
    #[error("inode {0} has unsaved bytes and no writer")]
    NoWriter(Ino),
    #[error("directory {ino} keeps subdirs {kept} but has {has}")]
    Subdirs { ino: Ino, kept: u32, has: u32 },
    #[error("directory {ino} has links {links:?}")]
    DirLinks { ino: Ino, links: Vec<(Ino, String)> },
    #[error("orphaned directory {0} still has entries")]
    OrphanEntries(Ino),
    #[error("{dir}/{name} names inode {child}, not in the tree")]
    Dangling { dir: Ino, name: String, child: Ino },
    #[error("{dir}/{name} is not among inode {child}'s links")]
    NotALink { dir: Ino, name: String, child: Ino },
    #[error("inode {ino} has a link twice: {links:?}")]
    LinkTwice { ino: Ino, links: Vec<(Ino, String)> },
    #[error("{links} links, but {entries} directory entries name them")]
    LinkCount { links: usize, entries: usize },
    #[error("the tree keeps bytes {kept} but holds {holds}")]
    Bytes { kept: u64, holds: u64 },
}

impl Tree {
    /// Recomputes every piece of derived state and says which one is off:
    /// - `bytes`: each file's length once per name it has (once for an
    ///   orphan), the store-size limit's count;
    /// - each directory's `subdirs`: how many of its entries are
    ///   directories (`stat`'s link count);
    /// - `links`: every entry of a directory is a link of the node it
    ///   names, and every link is such an entry (a directory has at most
    ///   one, the root none; a directory with none is an orphan held
    ///   open, and empty);
    /// - `next_ino`: above every inode in use;
    /// - `dirty` and `writer`: unsaved bytes of a file always name their
    ///   writer, and only a file has them.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let mut bytes = 0u64;
        let mut entries_seen = 0usize;
        for (&ino, node) in &self.nodes {
            bytes += self.check_node(ino, node)?;
            match &node.kind {
                NodeKind::Dir(entries) => entries_seen += self.check_dir(ino, node, entries)?,
                _ => {
                    let unique: HashSet<_> = node.links.iter().collect();
                    if unique.len() != node.links.len() {
                        let links = node.links.clone();
                        return Err(InvariantError::LinkTwice { ino, links });
                    }
                }
            }
        }
        let links: usize = self.nodes.values().map(|n| n.links.len()).sum();
        if links != entries_seen {
            let entries = entries_seen;
            return Err(InvariantError::LinkCount { links, entries });
        }
        if bytes != self.bytes {
            let (kept, holds) = (self.bytes, bytes);
            return Err(InvariantError::Bytes { kept, holds });
        }
        Ok(())
    }

    /// One node's own state: its inode, its unsaved bytes; the bytes it
    /// counts toward the tree's.
    fn check_node(&self, ino: Ino, node: &Node) -> Result<u64, InvariantError> {
        if ino >= self.next_ino {
            let next = self.next_ino;
            return Err(InvariantError::AboveNext { ino, next });
        }
        let mut bytes = 0;
        if let NodeKind::File(data) = &node.kind {
            bytes = data.len() as u64 * node.copies();
        } else if node.dirty || node.writer.is_some() {
            return Err(InvariantError::UnsavedNotFile(ino));
        }
        if node.dirty && node.writer.is_none() {
            return Err(InvariantError::NoWriter(ino));
        }
        Ok(bytes)
    }

    /// A directory's subdirs, links and entries; how many entries it has.
    fn check_dir(
        &self,
        ino: Ino,
        node: &Node,
        entries: &BTreeMap<String, Ino>,
    ) -> Result<usize, InvariantError> {
        let has = entries
            .values()
            .filter(|c| self.nodes.get(c).is_some_and(|n| n.is_dir()))
            .count() as u32;
        if has != node.subdirs {
            let kept = node.subdirs;
            return Err(InvariantError::Subdirs { ino, kept, has });
        }
        let root = ino == ROOT_INO;
        if node.links.len() > 1 || (root && !node.links.is_empty()) {
            let links = node.links.clone();
            return Err(InvariantError::DirLinks { ino, links });
        }
        // A directory with no name left is an orphan someone still holds
        // open: `remove` emptied it, and nothing can be made in it.
        if !root && node.links.is_empty() && !entries.is_empty() {
            return Err(InvariantError::OrphanEntries(ino));
        }
        for (name, &child) in entries {
            let (dir, name) = (ino, name.clone());
            let Some(c) = self.nodes.get(&child) else {
                return Err(InvariantError::Dangling { dir, name, child });
            };
            if !c.links.iter().any(|(p, n)| *p == ino && *n == name) {
                return Err(InvariantError::NotALink { dir, name, child });
            }
        }
        Ok(entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::super::{Attr, NodeKind, Tree, DIR_MODE, FILE_MODE, ROOT_INO};
    use super::InvariantError;

    fn sample() -> (Tree, u64, u64) {
        let mut t = Tree::new();
        let now = SystemTime::now();
        let dir = t.add(
            ROOT_INO,
            "d",
            NodeKind::Dir(Default::default()),
            Attr::new(DIR_MODE, now),
        );
        let file = t.add(
            dir,
            "f",
            NodeKind::File(Arc::new(b"hello".to_vec())),
            Attr::new(FILE_MODE, now),
        );
        t.link(ROOT_INO, "hard", file, now);
        (t, dir, file)
    }

    #[test]
    fn a_tree_built_by_its_operations_holds() {
        let (mut t, dir, _) = sample();
        assert_eq!(t.check_invariants(), Ok(()));
        assert_eq!(t.bytes, 10, "a hard-linked file counts once per name");
        t.remove(ROOT_INO, "d", SystemTime::now(), &|_| false);
        assert_eq!(t.check_invariants(), Ok(()));
        assert!(!t.nodes.contains_key(&dir));
    }

    #[test]
    fn each_piece_of_derived_state_kept_wrong_is_found() {
        let (mut t, dir, file) = sample();
        t.bytes += 1;
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::Bytes { .. })
        ));

        let (mut t, ..) = sample();
        t.nodes.get_mut(&ROOT_INO).unwrap().subdirs = 2;
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::Subdirs { .. })
        ));

        let (mut t, ..) = sample();
        t.nodes
            .get_mut(&file)
            .unwrap()
            .links
            .retain(|(p, _)| *p != dir);
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::NotALink { .. })
        ));

        let (mut t, dir, file) = sample();
        t.remove(ROOT_INO, "d", SystemTime::now(), &|ino| ino == dir);
        assert_eq!(t.check_invariants(), Ok(()), "an orphan held open");
        if let NodeKind::Dir(entries) = &mut t.nodes.get_mut(&dir).unwrap().kind {
            entries.insert("ghost".into(), file);
        }
        t.nodes
            .get_mut(&file)
            .unwrap()
            .links
            .push((dir, "ghost".into()));
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::OrphanEntries(_))
        ));

        let (mut t, ..) = sample();
        t.nodes.get_mut(&file).unwrap().dirty = true;
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::NoWriter(_))
        ));

        let (mut t, ..) = sample();
        t.next_ino = file;
        assert!(matches!(
            t.check_invariants(),
            Err(InvariantError::AboveNext { .. })
        ));
    }
}
