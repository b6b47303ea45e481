//! The tree's derived state, recomputed from the nodes and compared with
//! what the tree keeps: the property tests call [`Tree::check_invariants`]
//! after every step (docs/DESIGN.md, "Derived state").

use std::collections::HashSet;

use super::{NodeKind, Tree, ROOT_INO};

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
    ///
    /// Long because it is one pass over every node checking each invariant
    /// while it counts bytes and entries, compared with the tree's own
    /// counters after the loop.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut bytes = 0u64;
        let mut entries_seen = 0usize;
        for (&ino, node) in &self.nodes {
            if ino >= self.next_ino {
                return Err(format!(
                    "inode {ino} is not below next_ino {}",
                    self.next_ino
                ));
            }
            if let NodeKind::File(data) = &node.kind {
                bytes += data.len() as u64 * node.copies();
            } else if node.dirty || node.writer.is_some() {
                return Err(format!("inode {ino} is not a file but has unsaved bytes"));
            }
            if node.dirty && node.writer.is_none() {
                return Err(format!("inode {ino} has unsaved bytes and no writer"));
            }
            match &node.kind {
                NodeKind::Dir(entries) => {
                    let subdirs = entries
                        .values()
                        .filter(|c| self.nodes.get(c).is_some_and(|n| n.is_dir()))
                        .count() as u32;
                    if subdirs != node.subdirs {
                        return Err(format!(
                            "directory {ino} keeps subdirs {} but has {subdirs}",
                            node.subdirs
                        ));
                    }
                    let root = ino == ROOT_INO;
                    if node.links.len() > 1 || (root && !node.links.is_empty()) {
                        return Err(format!("directory {ino} has links {:?}", node.links));
                    }
                    // A directory with no name left is an orphan someone
                    // still holds open: `remove` emptied it, and nothing
                    // can be made in it.
                    if !root && node.links.is_empty() && !entries.is_empty() {
                        return Err(format!("orphaned directory {ino} still has entries"));
                    }
                    for (name, child) in entries {
                        let Some(c) = self.nodes.get(child) else {
                            return Err(format!(
                                "{ino}/{name} names inode {child}, not in the tree"
                            ));
                        };
                        if !c.links.iter().any(|(p, n)| *p == ino && n == name) {
                            return Err(format!("{ino}/{name} is not among inode {child}'s links"));
                        }
                        entries_seen += 1;
                    }
                }
                _ => {
                    let unique: HashSet<_> = node.links.iter().collect();
                    if unique.len() != node.links.len() {
                        return Err(format!("inode {ino} has a link twice: {:?}", node.links));
                    }
                }
            }
        }
        let links: usize = self.nodes.values().map(|n| n.links.len()).sum();
        if links != entries_seen {
            return Err(format!(
                "{links} links, but {entries_seen} directory entries name them"
            ));
        }
        if bytes != self.bytes {
            return Err(format!(
                "the tree keeps bytes {} but holds {bytes}",
                self.bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::super::{Attr, NodeKind, Tree, DIR_MODE, FILE_MODE, ROOT_INO};

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
        assert!(t.check_invariants().unwrap_err().contains("bytes"));

        let (mut t, ..) = sample();
        t.nodes.get_mut(&ROOT_INO).unwrap().subdirs = 2;
        assert!(t.check_invariants().unwrap_err().contains("subdirs"));

        let (mut t, ..) = sample();
        t.nodes
            .get_mut(&file)
            .unwrap()
            .links
            .retain(|(p, _)| *p != dir);
        assert!(t.check_invariants().unwrap_err().contains("links"));

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
        assert!(t.check_invariants().unwrap_err().contains("orphaned"));

        let (mut t, ..) = sample();
        t.nodes.get_mut(&file).unwrap().dirty = true;
        assert!(t.check_invariants().unwrap_err().contains("no writer"));

        let (mut t, ..) = sample();
        t.next_ino = file;
        assert!(t.check_invariants().unwrap_err().contains("next_ino"));
    }
}
