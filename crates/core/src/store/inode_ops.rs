//! The store's operations by inode, for the FUSE door. Like the path
//! operations, each takes the lock once and records its change; content
//! written through the mount is marked dirty and handed to the persister
//! later (`store/saving.rs`). The kernel's references are `store/pins.rs`.

use std::sync::Arc;
use std::time::SystemTime;

use super::change::{ChangeOp, Meta, Origin, Touched};
use super::recover::subtree_ops;
use super::tree::{Attr, Ino, Node, NodeKind, Tree, ROOT_INO};
use super::{write_ops, Growth, Store};
use crate::error::Error;
use crate::path::MemPath;

/// Whether a read at `now` moves the access time, as `relatime` decides:
/// when it is not after the last change, or is a day old.
fn atime_stale(attr: &Attr, now: SystemTime) -> bool {
    attr.atime <= attr.mtime
        || attr.atime <= attr.ctime
        || now
            .duration_since(attr.atime)
            .is_ok_and(|d| d.as_secs() >= 24 * 3600)
}

/// What `stat` shows of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub ino: Ino,
    pub kind: InfoKind,
    pub size: u64,
    /// The device number of a device node.
    pub rdev: u32,
    pub nlink: u32,
    pub attr: Attr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device: the `S_IFMT` bits.
    Special(u32),
}

/// One entry of a directory listing: its name, inode and kind, what a
/// listing hands out (attributes are read for the entries of each reply
/// as it is sent: a listing of N entries reads no node's size or times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub ino: Ino,
    pub kind: InfoKind,
}

/// What to make with [`Store::make_node`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewNode {
    File,
    /// A file made by `create(2)`, open in the hand of its maker: written to
    /// disk with what they write into it, at close or fsync (one version),
    /// not once empty and again with its content.
    OpenedFile,
    Dir,
    /// A FIFO, socket or device node: `S_IFMT` bits and device number.
    Special {
        format: u32,
        rdev: u32,
    },
    Symlink(String),
}

/// The three ways `rename(2)` can treat an existing target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameMode {
    Replace,
    NoReplace,
    Exchange,
}

/// The attribute changes of a `setattr`; `None` leaves one as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SystemTime>,
    pub mtime: Option<SystemTime>,
}

/// A node's kind as a listing says it, and its device number.
fn kind_of(node: &Node) -> (InfoKind, u32) {
    match node.kind {
        NodeKind::File(_) => (InfoKind::File, 0),
        NodeKind::Dir(_) => (InfoKind::Dir, 0),
        NodeKind::Symlink(_) => (InfoKind::Symlink, 0),
        NodeKind::Special { format, rdev } => (InfoKind::Special(format), rdev),
    }
}

fn info(tree: &Tree, ino: Ino) -> Result<NodeInfo, Error> {
    let node = tree.get(ino).ok_or(Error::NotFound)?;
    let (kind, rdev) = kind_of(node);
    Ok(NodeInfo {
        ino,
        kind,
        size: node.size(),
        rdev,
        nlink: node.nlink(),
        attr: node.attr,
    })
}

fn dir_of(tree: &Tree, ino: Ino) -> Result<(), Error> {
    match tree.get(ino).map(|n| &n.kind) {
        Some(NodeKind::Dir(_)) => Ok(()),
        Some(_) => Err(Error::NotDir),
        None => Err(Error::NotFound),
    }
}

impl Store {
    pub fn info(&self, ino: Ino) -> Result<NodeInfo, Error> {
        info(&self.read_tree(), ino)
    }

    /// Runs `f` with a way to read nodes' current attributes (`None` for one
    /// that is gone), all under one read lock: `f` must not call the kernel.
    pub fn with_infos<R>(&self, f: impl FnOnce(&dyn Fn(Ino) -> Option<NodeInfo>) -> R) -> R {
        let tree = self.read_tree();
        f(&|ino| info(&tree, ino).ok())
    }

    /// Finds `name` in `parent` and pins the result once.
    pub fn lookup(&self, parent: Ino, name: &str) -> Result<NodeInfo, Error> {
        let tree = self.read_tree();
        let ino = tree.child(parent, name)?.ok_or(Error::NotFound)?;
        let found = info(&tree, ino)?;
        self.pin(ino, 1);
        Ok(found)
    }

    /// A file's bytes and the range of them a read of `size` at `offset`
    /// covers. The bytes are shared, not copied: the caller replies from them
    /// after the lock is released (a write meanwhile copies them first).
    pub fn read(
        &self,
        ino: Ino,
        offset: u64,
        size: u32,
    ) -> Result<(Arc<Vec<u8>>, std::ops::Range<usize>), Error> {
        let now = SystemTime::now();
        let (found, stale) = {
            let tree = self.read_tree();
            let node = tree.get(ino).ok_or(Error::NotFound)?;
            match &node.kind {
                NodeKind::File(data) => {
                    let start = (offset.min(data.len() as u64)) as usize;
                    let end = (start + size as usize).min(data.len());
                    let stale = offset == 0 && atime_stale(&node.attr, now);
                    ((data.clone(), start..end), stale)
                }
                NodeKind::Dir(_) => return Err(Error::IsDir),
                _ => {
                    return Err(Error::Disk(crate::error::DiskError {
                        errno: libc::EINVAL,
                        doing: "reading",
                    }))
                }
            }
        };
        // A read from the start is a use of the file (for expiry), and moves
        // its access time when relatime would.
        if offset == 0 {
            self.note_use(ino);
        }
        if stale {
            self.touch_atime(ino, now);
        }
        Ok(found)
    }

    /// Moves the access time of `ino` to `now`, if it is still stale (checked
    /// again under the write lock). In memory; it reaches the disk with the
    /// file's next write.
    fn touch_atime(&self, ino: Ino, now: SystemTime) {
        let mut tree = self.write_tree();
        if tree.get(ino).is_some_and(|n| atime_stale(&n.attr, now)) {
            tree.node_mut(ino).attr.atime = now;
        }
    }

    pub fn readlink(&self, ino: Ino) -> Result<String, Error> {
        match &self.read_tree().get(ino).ok_or(Error::NotFound)?.kind {
            NodeKind::Symlink(target) => Ok(target.clone()),
            _ => Err(Error::Disk(crate::error::DiskError {
                errno: libc::EINVAL,
                doing: "reading a link",
            })),
        }
    }

    /// A directory's entries, `.` and `..` first, in one lock: a name, an
    /// inode and a kind each (one lookup of each child; its attributes are
    /// for [`Store::with_infos`] when they are sent).
    pub fn read_dir(&self, dir: Ino) -> Result<Vec<DirEntry>, Error> {
        let tree = self.read_tree();
        dir_of(&tree, dir)?;
        let parent = tree.node(dir).links.first().map_or(ROOT_INO, |(p, _)| *p);
        let parent = match tree.get(parent) {
            Some(_) => parent,
            None => dir,
        };
        let children = tree.children(dir);
        let mut out = Vec::with_capacity(2 + children.map_or(0, |c| c.len()));
        for (name, ino) in [(".", dir), ("..", parent)] {
            out.push(DirEntry {
                name: name.into(),
                ino,
                kind: InfoKind::Dir,
            });
        }
        for (name, &child) in children.into_iter().flatten() {
            let (kind, _) = kind_of(tree.get(child).ok_or(Error::NotFound)?);
            out.push(DirEntry {
                name: name.clone(),
                ino: child,
                kind,
            });
        }
        Ok(out)
    }

    /// Makes a file, directory, FIFO or symlink named `name` in `parent`, owned
    /// by `uid`/`gid`, and pins it once: under one write lock of the tree,
    /// existence and limits, its attributes ([`attr_in`]), what it holds
    /// ([`NewNode::kind`]), what the journal gets, then pin and commit.
    pub fn make_node(
        &self,
        parent: Ino,
        name: &str,
        what: NewNode,
        perm: u32,
        owner: (u32, u32),
        origin: Origin,
    ) -> Result<NodeInfo, Error> {
        let mut tree = self.write_tree();
        dir_of(&tree, parent)?;
        if tree.child(parent, name)?.is_some() {
            return Err(Error::Exists);
        }
        self.limits.check_growth(
            &tree,
            Growth {
                dir: Some(parent),
                entries: 1,
                depth: tree.depth(parent) + 1,
            },
        )?;
        let is_dir = matches!(what, NewNode::Dir);
        let attr = attr_in(&tree.node(parent).attr, is_dir, perm, owner);
        let ino = tree.add(parent, name, what.kind(), attr);
        let ops = match (what, tree.path_of(ino)) {
            (_, None) | (NewNode::Special { .. }, _) => Vec::new(),
            (NewNode::File, Some(_)) => write_ops(&tree, ino, Arc::default()),
            (NewNode::OpenedFile, Some(_)) => {
                let node = tree.node_mut(ino);
                node.dirty = true;
                node.writer = Some(origin.clone());
                Vec::new()
            }
            (NewNode::Dir, Some(path)) => vec![ChangeOp::MakeDir {
                path,
                meta: Meta::from(&attr),
            }],
            (NewNode::Symlink(target), Some(path)) => vec![ChangeOp::Symlink {
                path,
                target,
                meta: Meta::from(&attr),
            }],
        };
        let made = info(&tree, ino)?;
        self.pin(ino, 1);
        let touched = vec![
            Touched::Entry(parent, name.to_string()),
            Touched::Inode(parent),
        ];
        let _ = self.commit(&mut tree, origin, ops, touched);
        Ok(made)
    }

    /// Writes `data` at `offset`, or at the end of the file when `append`
    /// (`O_APPEND`: decided here, under the lock, so an append never lands on
    /// a stale end the kernel remembered while the agent changed the file).
    /// The bytes reach the disk on the next [`Store::persist_file`].
    pub fn write(
        &self,
        ino: Ino,
        offset: u64,
        data: &[u8],
        append: bool,
        origin: Origin,
    ) -> Result<usize, Error> {
        let mut tree = self.write_tree();
        let old_len = match &tree.get(ino).ok_or(Error::NotFound)?.kind {
            NodeKind::File(bytes) => bytes.len() as u64,
            NodeKind::Dir(_) => return Err(Error::IsDir),
            _ => return Err(Error::NotFound),
        };
        let offset = if append { old_len } else { offset };
        let end = offset.saturating_add(data.len() as u64);
        let copies = tree.node(ino).copies();
        self.limits
            .check_size(&tree, old_len, end.max(old_len), copies)?;
        tree.write_at(ino, offset as usize, data, SystemTime::now());
        tree.node_mut(ino).writer = Some(origin.clone());
        drop(tree);
        self.tell_stale(&origin, &[Touched::Inode(ino)]);
        Ok(data.len())
    }

    /// Grows a file to at least `offset + len` bytes (`fallocate` mode 0).
    pub fn allocate(&self, ino: Ino, offset: u64, len: u64, origin: Origin) -> Result<(), Error> {
        let mut tree = self.write_tree();
        let NodeKind::File(bytes) = &tree.get(ino).ok_or(Error::NotFound)?.kind else {
            return Err(Error::IsDir);
        };
        let old_len = bytes.len() as u64;
        let end = offset.saturating_add(len);
        if end > old_len {
            let copies = tree.node(ino).copies();
            self.limits.check_size(&tree, old_len, end, copies)?;
            tree.truncate(ino, end as usize, SystemTime::now());
            tree.node_mut(ino).writer = Some(origin.clone());
            drop(tree);
            self.tell_stale(&origin, &[Touched::Inode(ino)]);
        }
        Ok(())
    }

    /// Changes mode, owner, size or times.
    pub fn set_attr(&self, ino: Ino, set: SetAttr, origin: Origin) -> Result<NodeInfo, Error> {
        let mut tree = self.write_tree();
        let node = tree.get(ino).ok_or(Error::NotFound)?;
        let now = SystemTime::now();
        if let Some(size) = set.size {
            let NodeKind::File(bytes) = &node.kind else {
                return Err(if node.is_dir() {
                    Error::IsDir
                } else {
                    Error::NotFound
                });
            };
            let old_len = bytes.len() as u64;
            self.limits
                .check_size(&tree, old_len, size, node.copies())?;
            tree.truncate(ino, size as usize, now);
            tree.node_mut(ino).writer = Some(origin.clone());
        }
        let node = tree.node_mut(ino);
        let a = &mut node.attr;
        if let Some(perm) = set.perm {
            a.perm = perm & 0o7777;
        }
        if let Some(uid) = set.uid {
            a.uid = uid;
        }
        if let Some(gid) = set.gid {
            a.gid = gid;
        }
        if let Some(t) = set.atime {
            a.atime = t;
        }
        if let Some(t) = set.mtime {
            a.mtime = t;
        }
        a.ctime = now;
        let meta = Meta::from(&*a);
        let meta_changed = set.perm.is_some()
            || set.uid.is_some()
            || set.gid.is_some()
            || set.atime.is_some()
            || set.mtime.is_some();
        let ops = if meta_changed && !node.dirty && !matches!(node.kind, NodeKind::Special { .. }) {
            // The root has no link, but its attributes live on `memories/` itself.
            let paths = if ino == ROOT_INO {
                vec![crate::path::MemPath::root()]
            } else {
                tree.paths_of(ino)
            };
            paths
                .into_iter()
                .map(|path| ChangeOp::SetMeta { path, meta })
                .collect()
        } else {
            Vec::new()
        };
        let out = info(&tree, ino)?;
        let _ = self.commit(&mut tree, origin, ops, vec![Touched::Inode(ino)]);
        Ok(out)
    }

    /// Removes a non-directory entry (`unlink(2)`).
    pub fn unlink(&self, parent: Ino, name: &str, origin: Origin) -> Result<(), Error> {
        self.remove_named(parent, name, false, origin)
    }

    /// Removes an empty directory (`rmdir(2)`).
    pub fn rmdir(&self, parent: Ino, name: &str, origin: Origin) -> Result<(), Error> {
        self.remove_named(parent, name, true, origin)
    }

    fn remove_named(
        &self,
        parent: Ino,
        name: &str,
        want_dir: bool,
        origin: Origin,
    ) -> Result<(), Error> {
        let mut tree = self.write_tree();
        let ino = tree.child(parent, name)?.ok_or(Error::NotFound)?;
        let path = tree.path_of(parent).map(|p| p.join(name));
        match (&tree.node(ino).kind, want_dir) {
            (NodeKind::Dir(entries), true) if !entries.is_empty() => return Err(Error::NotEmpty),
            (NodeKind::Dir(_), false) => return Err(Error::IsDir),
            (NodeKind::Dir(_), true) => {}
            (_, true) => return Err(Error::NotDir),
            (_, false) => {}
        }
        self.remove_entry(&mut tree, parent, name);
        // A hard-linked file keeps its other names: on disk each name is its own file.
        let ops = path
            .map(|path| vec![ChangeOp::Remove { path }])
            .unwrap_or_default();
        let touched = vec![
            Touched::Entry(parent, name.to_string()),
            Touched::Inode(parent),
            Touched::Inode(ino),
        ];
        let _ = self.commit(&mut tree, origin, ops, touched);
        Ok(())
    }

    /// The limits a rename must keep: each node lands one level below its
    /// new parent, its subtree with it; a plain move also gives the new
    /// parent one more name.
    fn check_rename_growth(
        &self,
        tree: &Tree,
        (parent, new_parent): (Ino, Ino),
        moved: Ino,
        target: Option<Ino>,
        mode: RenameMode,
    ) -> Result<(), Error> {
        let placed = |node: Ino, at: Ino| tree.depth(at) + 1 + tree.height(node);
        let depth = match (mode, target) {
            (RenameMode::Exchange, Some(other)) => {
                placed(moved, new_parent).max(placed(other, parent))
            }
            _ => placed(moved, new_parent),
        };
        let gains = target.is_none() && new_parent != parent;
        self.limits.check_growth(
            tree,
            Growth {
                dir: gains.then_some(new_parent),
                entries: 0,
                depth,
            },
        )
    }

    /// `rename(2)` with its flags: replacing a target, refusing to, or
    /// exchanging; under one write lock of the tree, so that the checks, the
    /// limits, the link changes and the journal's ops see the same nodes.
    pub fn rename_entry(
        &self,
        parent: Ino,
        name: &str,
        new_parent: Ino,
        new_name: &str,
        mode: RenameMode,
        origin: Origin,
    ) -> Result<(), Error> {
        let mut tree = self.write_tree();
        dir_of(&tree, new_parent)?;
        let moved = tree.child(parent, name)?.ok_or(Error::NotFound)?;
        let target = tree.child(new_parent, new_name)?;
        if target == Some(moved) {
            return Ok(()); // the same node: nothing to do
        }
        let moved_is_dir = tree.node(moved).is_dir();
        if moved_is_dir && tree.is_within(new_parent, moved) {
            return Err(Error::IntoItself);
        }
        self.check_rename_growth(&tree, (parent, new_parent), moved, target, mode)?;
        let from = tree.path_of(parent).map(|p| p.join(name));
        let to = tree.path_of(new_parent).map(|p| p.join(new_name));
        let now = SystemTime::now();
        let mut ops = Vec::new();
        let touched = rename_touched((parent, name), (new_parent, new_name), moved, target);
        match (mode, target) {
            (RenameMode::NoReplace, Some(_)) => return Err(Error::Exists),
            (RenameMode::Exchange, None) => return Err(Error::NotFound),
            (RenameMode::Exchange, Some(other)) => {
                if tree.node(other).is_dir() && tree.is_within(parent, other) {
                    return Err(Error::IntoItself);
                }
                let _ = self.flush_dirty(&mut tree, moved);
                let _ = self.flush_dirty(&mut tree, other);
                tree.unlink(parent, name, now);
                tree.unlink(new_parent, new_name, now);
                tree.link(new_parent, new_name, moved, now);
                tree.link(parent, name, other, now);
                if let (Some(a), Some(b)) = (from, to) {
                    ops.push(ChangeOp::Exchange { a, b });
                }
            }
            (_, existing) => {
                if let Some(old) = existing {
                    may_replace(&tree.node(old).kind, moved_is_dir)?;
                    self.remove_entry(&mut tree, new_parent, new_name);
                }
                let _ = self.flush_dirty(&mut tree, moved);
                tree.rename(parent, name, new_parent, new_name, now);
                ops = move_ops(&tree, (from, to), moved, existing.is_some());
            }
        }
        let _ = self.commit(&mut tree, origin, ops, touched);
        Ok(())
    }

    /// A hard link to `ino` named `name` in `parent`; pins it once. On disk the
    /// new name is a copy.
    pub fn link(
        &self,
        ino: Ino,
        parent: Ino,
        name: &str,
        origin: Origin,
    ) -> Result<NodeInfo, Error> {
        let mut tree = self.write_tree();
        dir_of(&tree, parent)?;
        let node = tree.get(ino).ok_or(Error::NotFound)?;
        if node.is_dir() {
            return Err(Error::NotPermitted); // link(2) to a directory
        }
        if tree.child(parent, name)?.is_some() {
            return Err(Error::Exists);
        }
        self.limits.check_growth(
            &tree,
            Growth {
                dir: Some(parent),
                entries: 0,
                depth: tree.depth(parent) + 1,
            },
        )?;
        if !tree.node(ino).links.is_empty() {
            // On disk the new name is a copy, and counts as one.
            self.limits.check_copy(&tree, tree.node(ino).file_len())?;
        }
        tree.link(parent, name, ino, SystemTime::now());
        let ops = match (
            tree.path_of(parent).map(|p| p.join(name)),
            &tree.node(ino).kind,
        ) {
            (Some(path), NodeKind::File(data)) => vec![ChangeOp::Write {
                path,
                data: data.clone(),
                meta: Meta::from(&tree.node(ino).attr),
            }],
            (Some(path), NodeKind::Symlink(target)) => vec![ChangeOp::Symlink {
                path,
                target: target.clone(),
                meta: Meta::from(&tree.node(ino).attr),
            }],
            _ => Vec::new(),
        };
        let out = info(&tree, ino)?;
        self.pin(ino, 1);
        let touched = vec![
            Touched::Entry(parent, name.to_string()),
            Touched::Inode(parent),
            Touched::Inode(ino),
        ];
        let _ = self.commit(&mut tree, origin, ops, touched);
        Ok(out)
    }
}

/// A new node's attributes in `parent` (the parent's): owned by `owner`,
/// made now. A setgid directory passes its group to what is made in it,
/// and the setgid bit to its new subdirectories (as every Linux file
/// system).
fn attr_in(parent: &Attr, is_dir: bool, perm: u32, owner: (u32, u32)) -> Attr {
    let (gid, perm) = match parent.perm & 0o2000 != 0 {
        true if is_dir => (parent.gid, perm | 0o2000),
        true => (parent.gid, perm),
        false => (owner.1, perm),
    };
    Attr::owned(perm & 0o7777, owner.0, gid, SystemTime::now())
}

impl NewNode {
    /// What a new node of this kind holds.
    fn kind(&self) -> NodeKind {
        match self {
            NewNode::File | NewNode::OpenedFile => NodeKind::File(Arc::default()),
            NewNode::Dir => NodeKind::Dir(Default::default()),
            NewNode::Special { format, rdev } => NodeKind::Special {
                format: *format,
                rdev: *rdev,
            },
            NewNode::Symlink(target) => NodeKind::Symlink(target.clone()),
        }
    }
}

/// The journal's ops for `moved`, renamed `from` one path `to` another
/// (`replace`: over what was there); a path is none inside a directory
/// already removed.
fn move_ops(
    tree: &Tree,
    (from, to): (Option<MemPath>, Option<MemPath>),
    moved: Ino,
    replace: bool,
) -> Vec<ChangeOp> {
    match (from, to) {
        (Some(from), Some(to)) => vec![ChangeOp::Rename { from, to, replace }],
        // Moved out of a removed directory: it is new on disk.
        (None, Some(_)) => subtree_ops(tree, moved),
        (Some(from), None) => vec![ChangeOp::Remove { path: from }],
        (None, None) => Vec::new(),
    }
}

/// What a rename touches in the kernel's caches: both entries, both
/// parents, the node moved and the one it replaces or exchanges with.
fn rename_touched(
    (parent, name): (Ino, &str),
    (new_parent, new_name): (Ino, &str),
    moved: Ino,
    target: Option<Ino>,
) -> Vec<Touched> {
    let mut touched = vec![
        Touched::Entry(parent, name.to_string()),
        Touched::Entry(new_parent, new_name.to_string()),
        Touched::Inode(parent),
        Touched::Inode(moved),
    ];
    if new_parent != parent {
        touched.push(Touched::Inode(new_parent));
    }
    touched.extend(target.map(Touched::Inode));
    touched
}

/// Whether a node (a directory or not: `moved_is_dir`) may replace one of
/// `kind`: a directory only an empty directory, anything else only a
/// non-directory.
fn may_replace(kind: &NodeKind, moved_is_dir: bool) -> Result<(), Error> {
    match (kind, moved_is_dir) {
        (NodeKind::Dir(entries), true) if !entries.is_empty() => Err(Error::NotEmpty),
        (NodeKind::Dir(_), false) => Err(Error::IsDir),
        (NodeKind::Dir(_), true) => Ok(()),
        (_, true) => Err(Error::NotDir),
        (_, false) => Ok(()),
    }
}
