//! The tree itself: inodes, directory entries, file bytes, attributes.
//!
//! Plain data with no lock and no I/O; [`super::Store`] wraps it in the one lock.
//! Methods that mutate assume their caller checked the preconditions (the
//! store validates a whole operation before it applies any part of it).
//!
//! Every node knows its links (parent directory and name), so that a change
//! made by inode (through the mount) can be recorded by path. A node whose
//! last link is gone is an *orphan*: it stays while the kernel still holds it
//! (an open file, a cached inode) and is dropped when the kernel forgets it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

mod invariants;
pub use invariants::InvariantError;

use super::origin::Origin;
use crate::error::Error;
use crate::path::MemPath;

pub type Ino = u64;
/// The inode of the memory root (FUSE's root inode number).
pub const ROOT_INO: Ino = 1;

/// Mode bits of what the tool door makes: owner only, as the SDK does.
pub const FILE_MODE: u32 = 0o600;
pub const DIR_MODE: u32 = 0o700;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    Dir(BTreeMap<String, Ino>),
    File(Arc<Vec<u8>>),
    Symlink(String),
    /// A FIFO, socket or device node made through the mount (`S_IFMT` bits
    /// of its mode, and its device number): it lives in memory only.
    Special {
        format: u32,
        rdev: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Permission bits only (no file-type bits).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

impl Attr {
    /// Attributes of a node this process makes for itself (the tool door).
    pub fn new(perm: u32, now: SystemTime) -> Self {
        Attr::owned(
            perm,
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
            now,
        )
    }

    pub fn owned(perm: u32, uid: u32, gid: u32, now: SystemTime) -> Self {
        Attr {
            perm,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    /// Content changed: mtime and ctime move, so an editor with the file open notices.
    pub fn touch(&mut self, now: SystemTime) {
        self.mtime = now;
        self.ctime = now;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub attr: Attr,
    /// Where the node is linked: (parent directory, name). Empty for an
    /// orphan; one entry for a directory; more for a hard-linked file.
    pub links: Vec<(Ino, String)>,
    /// File bytes changed through the mount and not yet handed to the persister.
    pub dirty: bool,
    /// Who wrote those bytes (the last writer), recorded at the write: the
    /// change that persists them is theirs, whoever closes the file.
    pub writer: Option<Origin>,
    /// For a directory: how many of its entries are directories (kept up to
    /// date by link and unlink, so that `stat` need not count them).
    pub subdirs: u32,
}

impl Node {
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, NodeKind::Dir(_))
    }

    pub fn size(&self) -> u64 {
        match &self.kind {
            NodeKind::File(data) => data.len() as u64,
            NodeKind::Symlink(target) => target.len() as u64,
            NodeKind::Dir(entries) => entries.len() as u64,
            NodeKind::Special { .. } => 0,
        }
    }

    /// Bytes of a file (0 for anything else).
    pub fn file_len(&self) -> u64 {
        match &self.kind {
            NodeKind::File(data) => data.len() as u64,
            _ => 0,
        }
    }

    /// How many copies of the node the data dir holds: one per name (each
    /// hard link is a file of its own on disk), one for an orphan.
    pub fn copies(&self) -> u64 {
        self.links.len().max(1) as u64
    }

    /// Link count as `stat` reports it: a directory counts `.` and its subdirectories' `..`.
    pub fn nlink(&self) -> u32 {
        match &self.kind {
            NodeKind::Dir(_) => 2 + self.subdirs,
            _ => self.links.len() as u32,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Tree {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
    /// Bytes of all files as the data dir holds them (a hard-linked file
    /// once per name), for the store-size limit.
    bytes: u64,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    /// An empty tree: the root directory alone.
    pub fn new() -> Self {
        let root = Node {
            kind: NodeKind::Dir(BTreeMap::new()),
            attr: Attr::new(DIR_MODE, SystemTime::now()),
            links: Vec::new(),
            dirty: false,
            writer: None,
            subdirs: 0,
        };
        Tree {
            nodes: HashMap::from([(ROOT_INO, root)]),
            next_ino: ROOT_INO + 1,
            bytes: 0,
        }
    }

    pub fn node(&self, ino: Ino) -> &Node {
        &self.nodes[&ino]
    }

    pub fn get(&self, ino: Ino) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub fn node_mut(&mut self, ino: Ino) -> &mut Node {
        self.nodes.get_mut(&ino).expect("inode of the tree")
    }

    pub fn total_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes besides the root (orphans the kernel holds included).
    pub fn entry_count(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Levels between the root and `ino` (the root is 0, `/memories/a` 1).
    pub fn depth(&self, mut ino: Ino) -> usize {
        let mut depth = 0;
        while let Some((parent, _)) = self.nodes.get(&ino).and_then(|n| n.links.first()) {
            if ino == ROOT_INO {
                break;
            }
            depth += 1;
            ino = *parent;
        }
        depth
    }

    /// Levels below `ino`: 0 for a file or an empty directory.
    pub fn height(&self, ino: Ino) -> usize {
        let mut height = 0;
        let mut stack = vec![(ino, 0)];
        while let Some((at, level)) = stack.pop() {
            height = height.max(level);
            if let Some(entries) = self.children(at) {
                stack.extend(entries.values().map(|&c| (c, level + 1)));
            }
        }
        height
    }

    /// The deepest level and the most entries in one directory.
    pub fn shape(&self) -> (usize, usize) {
        let widest = self
            .nodes
            .values()
            .filter_map(|n| match &n.kind {
                NodeKind::Dir(entries) => Some(entries.len()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        (self.height(ROOT_INO), widest)
    }

    pub fn children(&self, dir: Ino) -> Option<&BTreeMap<String, Ino>> {
        match &self.node(dir).kind {
            NodeKind::Dir(entries) => Some(entries),
            _ => None,
        }
    }

    /// Finds `name` in directory `dir`.
    pub fn child(&self, dir: Ino, name: &str) -> Result<Option<Ino>, Error> {
        match &self.nodes.get(&dir).ok_or(Error::NotFound)?.kind {
            NodeKind::Dir(entries) => Ok(entries.get(name).copied()),
            NodeKind::Symlink(_) => Err(Error::IsSymlink),
            _ => Err(Error::NotDir),
        }
    }

    /// The inode at `path`. Symlinks on the way are not followed.
    pub fn resolve(&self, path: &MemPath) -> Result<Ino, Error> {
        let mut ino = ROOT_INO;
        for name in path.names() {
            ino = self.child(ino, name)?.ok_or(Error::NotFound)?;
        }
        Ok(ino)
    }

    /// Checks that a directory can be at `path`: every existing component is a
    /// directory. Returns the inode when it already exists.
    pub fn check_dir_path(&self, path: &MemPath) -> Result<Option<Ino>, Error> {
        let mut ino = ROOT_INO;
        for name in path.names() {
            match self.child(ino, name)? {
                Some(next) => ino = next,
                None => return Ok(None),
            }
        }
        match self.node(ino).kind {
            NodeKind::Dir(_) => Ok(Some(ino)),
            NodeKind::Symlink(_) => Err(Error::IsSymlink),
            _ => Err(Error::NotDir),
        }
    }

    /// Makes the directory `path` and its missing parents; the caller ran
    /// [`Tree::check_dir_path`] first. Returns its inode and the directories made.
    pub fn make_dirs(&mut self, path: &MemPath, now: SystemTime) -> (Ino, Vec<Ino>) {
        let mut ino = ROOT_INO;
        let mut made = Vec::new();
        for name in path.names() {
            ino = match self.child(ino, name).ok().flatten() {
                Some(next) => next,
                None => {
                    let dir = self.add(
                        ino,
                        name,
                        NodeKind::Dir(BTreeMap::new()),
                        Attr::new(DIR_MODE, now),
                    );
                    made.push(dir);
                    dir
                }
            };
        }
        (ino, made)
    }

    /// Adds a new node named `name` in directory `parent`.
    pub fn add(&mut self, parent: Ino, name: &str, kind: NodeKind, attr: Attr) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        if let NodeKind::File(data) = &kind {
            self.bytes += data.len() as u64;
        }
        let now = attr.ctime;
        self.nodes.insert(
            ino,
            Node {
                kind,
                attr,
                links: Vec::new(),
                dirty: false,
                writer: None,
                subdirs: 0,
            },
        );
        self.link(parent, name, ino, now);
        ino
    }

    /// Replaces a file's bytes.
    pub fn set_data(&mut self, ino: Ino, data: Arc<Vec<u8>>, now: SystemTime) {
        let node = self.nodes.get_mut(&ino).expect("inode of the tree");
        let copies = node.copies();
        if let NodeKind::File(old) = &mut node.kind {
            self.bytes = self.bytes - old.len() as u64 * copies + data.len() as u64 * copies;
            *old = data;
            node.attr.touch(now);
            node.dirty = false;
        }
    }

    /// Writes `data` at `offset` of a file (zero-filling any gap), in place
    /// unless the bytes are shared with a pending change.
    pub fn write_at(&mut self, ino: Ino, offset: usize, data: &[u8], now: SystemTime) {
        let node = self.nodes.get_mut(&ino).expect("inode of the tree");
        let copies = node.copies();
        if let NodeKind::File(bytes) = &mut node.kind {
            let old_len = bytes.len();
            let bytes = Arc::make_mut(bytes);
            let end = offset + data.len();
            if offset >= bytes.len() {
                // Appending (the common case): no zero-fill before the copy.
                bytes.resize(offset, 0);
                bytes.extend_from_slice(data);
            } else {
                let overlap = end.min(bytes.len());
                bytes[offset..overlap].copy_from_slice(&data[..overlap - offset]);
                bytes.extend_from_slice(&data[overlap - offset..]);
            }
            self.bytes = self.bytes - old_len as u64 * copies + bytes.len() as u64 * copies;
            node.attr.touch(now);
            node.dirty = true;
        }
    }

    /// Sets a file's length, zero-filling when it grows.
    pub fn truncate(&mut self, ino: Ino, len: usize, now: SystemTime) {
        let node = self.nodes.get_mut(&ino).expect("inode of the tree");
        let copies = node.copies();
        if let NodeKind::File(bytes) = &mut node.kind {
            if bytes.len() != len {
                let old_len = bytes.len();
                Arc::make_mut(bytes).resize(len, 0);
                self.bytes = self.bytes - old_len as u64 * copies + len as u64 * copies;
                node.dirty = true;
            }
            node.attr.touch(now);
        }
    }

    /// Links `ino` into `parent` as `name` (the name is free).
    pub fn link(&mut self, parent: Ino, name: &str, ino: Ino, now: SystemTime) {
        let is_dir = self.node(ino).is_dir();
        let dir = self.node_mut(parent);
        if let NodeKind::Dir(entries) = &mut dir.kind {
            entries.insert(name.to_string(), ino);
        }
        dir.subdirs += u32::from(is_dir);
        dir.attr.touch(now);
        let node = self.node_mut(ino);
        let extra_copy = !node.links.is_empty();
        node.links.push((parent, name.to_string()));
        node.attr.ctime = now;
        if extra_copy {
            self.bytes += self.node(ino).file_len();
        }
    }

    /// Takes `name` out of `parent`; the node stays in the tree (maybe as an orphan).
    pub fn unlink(&mut self, parent: Ino, name: &str, now: SystemTime) -> Option<Ino> {
        let dir = self.node_mut(parent);
        let removed = match &mut dir.kind {
            NodeKind::Dir(entries) => entries.remove(name),
            _ => None,
        };
        dir.attr.touch(now);
        let ino = removed?;
        if self.node(ino).is_dir() {
            self.node_mut(parent).subdirs -= 1;
        }
        let node = self.node_mut(ino);
        if let Some(i) = node
            .links
            .iter()
            .position(|(p, n)| *p == parent && n == name)
        {
            node.links.swap_remove(i);
            if !node.links.is_empty() {
                self.bytes -= self.node(ino).file_len(); // one copy fewer
            }
        }
        self.node_mut(ino).attr.ctime = now;
        Some(ino)
    }

    /// Removes `name` from `parent` and everything below it. Nodes nobody
    /// holds are dropped; `held` ones stay as orphans. Returns every inode
    /// that lost its place (for cache invalidation).
    pub fn remove(
        &mut self,
        parent: Ino,
        name: &str,
        now: SystemTime,
        held: &dyn Fn(Ino) -> bool,
    ) -> Vec<Ino> {
        let Some(top) = self.unlink(parent, name, now) else {
            return Vec::new();
        };
        let mut gone = Vec::new();
        let mut stack = vec![top];
        while let Some(ino) = stack.pop() {
            gone.push(ino);
            let node = self.node_mut(ino);
            node.subdirs = 0;
            if let NodeKind::Dir(entries) = &mut node.kind {
                let children: Vec<(String, Ino)> = std::mem::take(entries).into_iter().collect();
                for (child_name, child) in children {
                    let node = self.node_mut(child);
                    node.links.retain(|(p, n)| !(*p == ino && *n == child_name));
                    if !node.links.is_empty() {
                        // A hard link elsewhere keeps it: one copy fewer.
                        self.bytes -= self.node(child).file_len();
                    }
                    stack.push(child);
                }
            }
            self.drop_if_unused(ino, held);
        }
        gone
    }

    /// Drops an orphan that nothing holds any more.
    pub fn drop_if_unused(&mut self, ino: Ino, held: &dyn Fn(Ino) -> bool) {
        let unused = self.nodes.get(&ino).is_some_and(|n| n.links.is_empty())
            && ino != ROOT_INO
            && !held(ino);
        if unused {
            if let Some(Node {
                kind: NodeKind::File(data),
                ..
            }) = self.nodes.remove(&ino)
            {
                self.bytes -= data.len() as u64;
            }
        }
    }

    /// Moves `name` of `parent` to `new_name` in `new_parent` (which has no such entry).
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &str,
        new_parent: Ino,
        new_name: &str,
        now: SystemTime,
    ) {
        if let Some(ino) = self.unlink(parent, name, now) {
            self.link(new_parent, new_name, ino, now);
        }
    }

    /// The path of a node's first link, or `None` for an orphan (or a node
    /// below one).
    pub fn path_of(&self, ino: Ino) -> Option<MemPath> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != ROOT_INO {
            let (parent, name) = self.nodes.get(&at)?.links.first()?;
            names.push(name.as_str());
            at = *parent;
        }
        let mut path = MemPath::root();
        for name in names.iter().rev() {
            path = path.join(name);
        }
        Some(path)
    }

    /// The paths of every link of a node.
    pub fn paths_of(&self, ino: Ino) -> Vec<MemPath> {
        let Some(node) = self.nodes.get(&ino) else {
            return Vec::new();
        };
        node.links
            .iter()
            .filter_map(|(parent, name)| self.path_of(*parent).map(|p| p.join(name)))
            .collect()
    }

    /// True when `ino` is `ancestor` or lies below it.
    pub fn is_within(&self, mut ino: Ino, ancestor: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.nodes.get(&ino).and_then(|n| n.links.first()) {
                Some((parent, _)) if ino != ROOT_INO => ino = *parent,
                _ => return false,
            }
        }
    }

    /// Bytes of all files at or below `ino`, hidden ones included (as `du` counts).
    /// The bytes of the files at or below `ino`, but those of a
    /// version-control tool's state (`crate::path::TOOL_STATE`: a person's
    /// repository in the memory is not the memory's size).
    pub fn subtree_bytes(&self, ino: Ino) -> u64 {
        let mut total = 0;
        let mut stack = vec![ino];
        while let Some(ino) = stack.pop() {
            match &self.node(ino).kind {
                NodeKind::Dir(entries) => stack.extend(
                    entries
                        .iter()
                        .filter(|(name, _)| !crate::path::TOOL_STATE.contains(&name.as_str()))
                        .map(|(_, ino)| *ino),
                ),
                NodeKind::File(data) => total += data.len() as u64,
                _ => {}
            }
        }
        total
    }

    /// The files at or below `ino` changed through the mount and not yet
    /// persisted, by inode (every link of a hard-linked file is reached).
    pub fn dirty_files_below(&self, ino: Ino) -> Vec<Ino> {
        let mut dirty = Vec::new();
        let mut stack = vec![ino];
        while let Some(ino) = stack.pop() {
            let node = self.node(ino);
            match &node.kind {
                NodeKind::Dir(entries) => stack.extend(entries.values().copied()),
                NodeKind::File(_) if node.dirty => dirty.push(ino),
                _ => {}
            }
        }
        dirty.sort_unstable();
        dirty.dedup();
        dirty
    }

    /// Files changed through the mount and not yet persisted.
    pub fn dirty_files(&self) -> Vec<Ino> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.dirty)
            .map(|(&ino, _)| ino)
            .collect()
    }

    /// Every linked node's path, depth first, for comparing trees in tests.
    pub fn walk(&self) -> Vec<(MemPath, &Node)> {
        let mut out = Vec::new();
        let mut stack = vec![(MemPath::root(), ROOT_INO)];
        while let Some((path, ino)) = stack.pop() {
            let node = self.node(ino);
            if let NodeKind::Dir(entries) = &node.kind {
                for (name, child) in entries.iter().rev() {
                    stack.push((path.join(name), *child));
                }
            }
            out.push((path, node));
        }
        out
    }
}
