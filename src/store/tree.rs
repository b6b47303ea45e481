//! The tree itself: inodes, directory entries, file bytes, attributes.
//!
//! Plain data with no lock and no I/O; [`super::Store`] wraps it in the one lock.
//! Methods that mutate assume their caller checked the preconditions (the
//! store validates a whole operation before it applies any part of it).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

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
    pub fn new(perm: u32, now: SystemTime) -> Self {
        Attr {
            perm,
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
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
}

impl Node {
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, NodeKind::Dir(_))
    }
}

#[derive(Debug, Clone)]
pub struct Tree {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
    /// Bytes of all files, for the store-size limit.
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

    pub fn node_mut(&mut self, ino: Ino) -> &mut Node {
        self.nodes.get_mut(&ino).expect("inode of the tree")
    }

    pub fn total_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn children(&self, dir: Ino) -> Option<&BTreeMap<String, Ino>> {
        match &self.node(dir).kind {
            NodeKind::Dir(entries) => Some(entries),
            _ => None,
        }
    }

    /// Finds `name` in directory `dir`.
    pub fn child(&self, dir: Ino, name: &str) -> Result<Option<Ino>, Error> {
        match &self.node(dir).kind {
            NodeKind::Dir(entries) => Ok(entries.get(name).copied()),
            NodeKind::File(_) => Err(Error::NotDir),
            NodeKind::Symlink(_) => Err(Error::IsSymlink),
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
            NodeKind::File(_) => Err(Error::NotDir),
            NodeKind::Symlink(_) => Err(Error::IsSymlink),
        }
    }

    /// Makes the directory `path` and its missing parents; the caller ran
    /// [`Tree::check_dir_path`] first. Returns its inode.
    pub fn make_dirs(&mut self, path: &MemPath, now: SystemTime) -> Ino {
        let mut ino = ROOT_INO;
        for name in path.names() {
            ino = match self.child(ino, name).ok().flatten() {
                Some(next) => next,
                None => self.add(ino, name, NodeKind::Dir(BTreeMap::new()), DIR_MODE, now),
            };
        }
        ino
    }

    /// Adds a new node named `name` in directory `parent`.
    pub fn add(
        &mut self,
        parent: Ino,
        name: &str,
        kind: NodeKind,
        perm: u32,
        now: SystemTime,
    ) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        if let NodeKind::File(data) = &kind {
            self.bytes += data.len() as u64;
        }
        self.nodes.insert(
            ino,
            Node {
                kind,
                attr: Attr::new(perm, now),
            },
        );
        self.link(parent, name, ino, now);
        ino
    }

    /// Replaces a file's bytes.
    pub fn set_data(&mut self, ino: Ino, data: Arc<Vec<u8>>, now: SystemTime) {
        let node = self.nodes.get_mut(&ino).expect("inode of the tree");
        if let NodeKind::File(old) = &mut node.kind {
            self.bytes = self.bytes - old.len() as u64 + data.len() as u64;
            *old = data;
            node.attr.touch(now);
        }
    }

    fn link(&mut self, parent: Ino, name: &str, ino: Ino, now: SystemTime) {
        let dir = self.node_mut(parent);
        if let NodeKind::Dir(entries) = &mut dir.kind {
            entries.insert(name.to_string(), ino);
        }
        dir.attr.touch(now);
    }

    fn unlink(&mut self, parent: Ino, name: &str, now: SystemTime) -> Option<Ino> {
        let dir = self.node_mut(parent);
        let removed = match &mut dir.kind {
            NodeKind::Dir(entries) => entries.remove(name),
            _ => None,
        };
        dir.attr.touch(now);
        removed
    }

    /// Removes `name` from `parent` and drops the whole subtree under it.
    pub fn remove(&mut self, parent: Ino, name: &str, now: SystemTime) {
        let Some(ino) = self.unlink(parent, name, now) else {
            return;
        };
        let mut stack = vec![ino];
        while let Some(ino) = stack.pop() {
            if let Some(node) = self.nodes.remove(&ino) {
                match node.kind {
                    NodeKind::Dir(entries) => stack.extend(entries.into_values()),
                    NodeKind::File(data) => self.bytes -= data.len() as u64,
                    NodeKind::Symlink(_) => {}
                }
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
            self.node_mut(ino).attr.ctime = now;
        }
    }

    /// Bytes of all files at or below `ino`, hidden ones included (as `du` counts).
    pub fn subtree_bytes(&self, ino: Ino) -> u64 {
        let mut total = 0;
        let mut stack = vec![ino];
        while let Some(ino) = stack.pop() {
            match &self.node(ino).kind {
                NodeKind::Dir(entries) => stack.extend(entries.values().copied()),
                NodeKind::File(data) => total += data.len() as u64,
                NodeKind::Symlink(_) => {}
            }
        }
        total
    }

    /// Every node's path, depth first, for comparing trees in tests.
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
