//! The tree and its one lock.
//!
//! Every operation here is whole: it takes the lock once, checks everything,
//! applies everything, hands its [`Change`] to the sinks (still under the
//! lock, so sinks see changes in the order they were applied), and returns.
//! Neither door ever takes the lock itself. Waiting for the sinks happens on
//! the returned [`Ticket`], after the lock is released.
//!
//! The operations by path, for the tool door, are in this file; the
//! operations by inode, for the FUSE door, are in `inode_ops.rs`.

mod apply;
mod change;
mod follow;
mod fresh;
mod inode_ops;
mod limits;
mod origin;
mod touched;
mod tree;
mod undo;
mod usage;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

pub use change::{
    Change, ChangeOp, ChangeSink, Door, Foreign, Meta, Origin, Process, Refused, Ticket, Touched,
};
pub use follow::{Busy, Hold, Unsent};
pub use inode_ops::{DirEntry, InfoKind, NewNode, NodeInfo, RenameMode, SetAttr};
pub use limits::{Growth, Limits};
pub use tree::{Attr, Ino, Node, NodeKind, Tree, DIR_MODE, FILE_MODE, ROOT_INO};

use crate::error::Error;
use crate::path::MemPath;
use undo::Undo;

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

pub struct Store {
    tree: RwLock<Tree>,
    /// The persister, if any.
    persist: Option<Arc<dyn ChangeSink>>,
    /// Others that must see every change (the mount's cache invalidator).
    observers: RwLock<Vec<Arc<dyn ChangeSink>>>,
    /// How many references the kernel holds on each inode (lookups and open
    /// handles). Taken after the tree lock, never before it.
    pins: Mutex<HashMap<Ino, u64>>,
    limits: Limits,
    seq: std::sync::atomic::AtomicU64,
    /// Paths whose state in memory the disk has not taken yet (a refused
    /// change that could not be undone, or a failed flush): written again,
    /// from what memory holds then, with the next change. Taken after the
    /// tree lock, never before it.
    unsaved: Mutex<BTreeSet<MemPath>>,
    /// When each file was last read (writes move its mtime). Taken after the
    /// tree lock, never before it.
    used: Mutex<HashMap<Ino, SystemTime>>,
    /// What people read, for telling lost updates. Taken after the tree
    /// lock, never before it.
    fresh: Mutex<fresh::Fresh>,
    /// Paths of people's changes that lost a race to another host (a
    /// shared store), with who made them: written again in their name, as
    /// an overwrite of the winner. Taken after the tree lock, never before.
    lost: Mutex<HashMap<MemPath, Origin>>,
    /// How far the tree has followed a shared store (see `follow.rs`).
    followed: std::sync::atomic::AtomicU64,
    /// Several hosts share the store.
    shared: std::sync::atomic::AtomicBool,
    /// A shared store's changes of this host's not settled yet (see
    /// `follow.rs`): an agent's change waits for one at its paths.
    hold: std::sync::OnceLock<follow::Hold>,
}

impl Store {
    /// A store over `tree`. Without a persister, changes are in memory only.
    pub fn new(tree: Tree, limits: Limits, persist: Option<Arc<dyn ChangeSink>>) -> Self {
        Store {
            tree: RwLock::new(tree),
            persist,
            observers: RwLock::default(),
            pins: Mutex::default(),
            limits,
            seq: Default::default(),
            unsaved: Mutex::default(),
            used: Mutex::default(),
            fresh: Mutex::default(),
            followed: Default::default(),
            lost: Mutex::default(),
            shared: Default::default(),
            hold: std::sync::OnceLock::new(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Adds a sink that sees every change from now on.
    pub fn observe(&self, sink: Arc<dyn ChangeSink>) {
        self.observers.write().push(sink);
    }

    /// Removes every observer (the mount is going away).
    pub fn clear_observers(&self) {
        self.observers.write().clear();
    }

    /// Runs `f` on the tree under the read lock (snapshots, tests, statistics).
    /// Forgets what the store remembers of paths at or below `at` (who last
    /// read and wrote them), once their path is redacted.
    pub fn forget_paths(&self, at: &MemPath) {
        self.fresh.lock().forget(at);
    }

    pub fn with_tree<R>(&self, f: impl FnOnce(&Tree) -> R) -> R {
        f(&self.tree.read())
    }

    /// The tree's derived state recomputed and compared (see
    /// [`Tree::check_invariants`]); the property tests call it after every
    /// step.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.tree.read().check_invariants()
    }

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
        let tree = self.tree.read();
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

    /// Writes a whole file, making missing parent directories.
    /// An existing file is an error unless `overwrite`.
    pub fn create_file(
        &self,
        path: &MemPath,
        data: Vec<u8>,
        overwrite: bool,
        origin: Origin,
    ) -> Result<Ticket, Error> {
        self.create_file_expecting(path, data, overwrite, origin, None)
    }

    /// [`Store::create_file`], only if the file there now has the sha256
    /// `expect` (checked under the same lock).
    pub fn create_file_expecting(
        &self,
        path: &MemPath,
        data: Vec<u8>,
        overwrite: bool,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        let (parent_path, name) = split(path)?;
        let mut tree = self.write_for(&[path]);
        check_expected(&tree, path, expect)?;
        let parent = tree.check_dir_path(&parent_path)?;
        let existing = match parent {
            Some(dir) => tree.child(dir, name)?,
            None => None,
        };
        let old_len = match existing.map(|ino| &tree.node(ino).kind) {
            None => 0,
            Some(NodeKind::Dir(_)) => return Err(Error::IsDir),
            Some(NodeKind::Symlink(_) | NodeKind::Special { .. }) => return Err(Error::IsSymlink),
            Some(NodeKind::File(_)) if !overwrite => return Err(Error::Exists),
            Some(NodeKind::File(old)) => old.len() as u64,
        };
        let copies = existing.map_or(1, |ino| tree.node(ino).copies());
        self.limits
            .check_size(&tree, old_len, data.len() as u64, copies)?;
        if existing.is_none() {
            let (base, missing) = existing_prefix(&tree, &parent_path);
            self.limits.check_growth(
                &tree,
                Growth {
                    dir: Some(base),
                    entries: missing + 1,
                    depth: path.names().len(),
                },
            )?;
        }
        let now = SystemTime::now();
        let data = Arc::new(data);
        let mut touched = Vec::new();
        let (ino, undo) = match existing {
            Some(ino) => {
                let (old, attr) = file_state(&tree, ino);
                tree.set_data(ino, data.clone(), now);
                let undo = Undo::Restore {
                    ino,
                    old,
                    attr,
                    new: data.clone(),
                };
                (ino, undo)
            }
            None => {
                let (dir, dirs) = make_dirs_touching(&mut tree, &parent_path, now, &mut touched);
                let ino = tree.add(
                    dir,
                    name,
                    NodeKind::File(data.clone()),
                    Attr::new(FILE_MODE, now),
                );
                touched.push(Touched::Entry(dir, name.to_string()));
                touched.push(Touched::Inode(dir));
                let undo = Undo::Unmake {
                    parent: dir,
                    name: name.to_string(),
                    ino,
                    new: data.clone(),
                    dirs,
                };
                (ino, undo)
            }
        };
        touched.push(Touched::Inode(ino));
        let ops = write_ops(&tree, ino, data);
        Ok(self.commit_undoable(&tree, origin, ops, touched, Some(undo)))
    }

    /// Read-modify-write of a file under one lock: `edit` gets the bytes and
    /// returns the new bytes and a value for the caller, or refuses.
    pub fn edit_file<R, E: From<Error>>(
        &self,
        path: &MemPath,
        origin: Origin,
        edit: impl FnOnce(&[u8]) -> Result<(Vec<u8>, R), E>,
    ) -> Result<(R, Ticket), E> {
        let mut tree = self.write_for(&[path]);
        let ino = tree.resolve(path)?;
        let NodeKind::File(old) = &tree.node(ino).kind else {
            return Err(match tree.node(ino).kind {
                NodeKind::Dir(_) => Error::IsDir,
                _ => Error::IsSymlink,
            }
            .into());
        };
        let old_len = old.len() as u64;
        let (new, out) = edit(old)?;
        let copies = tree.node(ino).copies();
        self.limits
            .check_size(&tree, old_len, new.len() as u64, copies)?;
        let data = Arc::new(new);
        let (old, attr) = file_state(&tree, ino);
        tree.set_data(ino, data.clone(), SystemTime::now());
        let ops = write_ops(&tree, ino, data.clone());
        let undo = Undo::Restore {
            ino,
            old,
            attr,
            new: data,
        };
        let touched = vec![Touched::Inode(ino)];
        Ok((
            out,
            self.commit_undoable(&tree, origin, ops, touched, Some(undo)),
        ))
    }

    /// Removes a file or a whole directory tree. The root is refused.
    pub fn remove(&self, path: &MemPath, origin: Origin) -> Result<Ticket, Error> {
        self.remove_expecting(path, origin, None)
    }

    /// [`Store::remove`], only if the file there has the sha256 `expect`.
    pub fn remove_expecting(
        &self,
        path: &MemPath,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        let check = |tree: &Tree, _: Ino| check_expected(tree, path, expect).map(|()| true);
        let removed = self.remove_where(path, origin, true, check)?;
        Ok(removed.expect("the check never declines"))
    }

    /// Removes what is at `path` if `check` (run on it under the same lock)
    /// says so; `None` when it declines. With `undoable`, a removal the disk
    /// refuses is taken back.
    fn remove_where(
        &self,
        path: &MemPath,
        origin: Origin,
        undoable: bool,
        check: impl FnOnce(&Tree, Ino) -> Result<bool, Error>,
    ) -> Result<Option<Ticket>, Error> {
        let (parent_path, name) = split(path)?;
        let mut tree = self.write_for(&[path]);
        let parent = tree.resolve(&parent_path)?;
        let Some(gone) = tree.child(parent, name)? else {
            return Err(Error::NotFound);
        };
        if !check(&tree, gone)? {
            return Ok(None);
        }
        let undo = undoable.then(|| Undo::Relink {
            parent,
            name: name.to_string(),
            copy: undo::copy_subtree(&tree, gone),
        });
        self.remove_entry(&mut tree, parent, name);
        let touched = vec![
            Touched::Entry(parent, name.to_string()),
            Touched::Inode(parent),
        ];
        let ops = vec![ChangeOp::Remove { path: path.clone() }];
        Ok(Some(
            self.commit_undoable(&tree, origin, ops, touched, undo),
        ))
    }

    /// Moves a file or directory to a path that does not exist yet, making the
    /// missing parents of `to` (only once `from` is known to exist).
    pub fn rename(&self, from: &MemPath, to: &MemPath, origin: Origin) -> Result<Ticket, Error> {
        self.rename_expecting(from, to, origin, None)
    }

    /// [`Store::rename`], only if the file at `from` has the sha256 `expect`.
    pub fn rename_expecting(
        &self,
        from: &MemPath,
        to: &MemPath,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        let (from_parent_path, from_name) = split(from)?;
        let mut tree = self.write_for(&[from, to]);
        check_expected(&tree, from, expect)?;
        // Any failure to find the source is "does not exist", so that NotDir
        // below can only be about the destination.
        let from_parent = tree
            .resolve(&from_parent_path)
            .map_err(|_| Error::NotFound)?;
        let Some(moved) = tree.child(from_parent, from_name).ok().flatten() else {
            return Err(Error::NotFound);
        };
        if to.is_root() || tree.resolve(to).is_ok() {
            return Err(Error::Exists);
        }
        if to.starts_with(from) {
            return Err(Error::IntoItself);
        }
        let (to_parent_path, to_name) = split(to)?;
        tree.check_dir_path(&to_parent_path)?;
        let (base, missing) = existing_prefix(&tree, &to_parent_path);
        self.limits.check_growth(
            &tree,
            Growth {
                dir: Some(base),
                entries: missing,
                depth: to.names().len() + tree.height(moved),
            },
        )?;
        let now = SystemTime::now();
        let mut touched = vec![
            Touched::Entry(from_parent, from_name.to_string()),
            Touched::Inode(from_parent),
            Touched::Inode(moved),
        ];
        let (to_parent, dirs) = make_dirs_touching(&mut tree, &to_parent_path, now, &mut touched);
        tree.rename(from_parent, from_name, to_parent, to_name, now);
        touched.push(Touched::Entry(to_parent, to_name.to_string()));
        touched.push(Touched::Inode(to_parent));
        let flushed = self.flush_dirty(&mut tree, moved);
        let ops = vec![ChangeOp::Rename {
            from: from.clone(),
            to: to.clone(),
            replace: false,
        }];
        let undo = Undo::MoveBack {
            ino: moved,
            from: (from_parent, from_name.to_string()),
            to: (to_parent, to_name.to_string()),
            dirs,
        };
        Ok(flushed.and(self.commit_undoable(&tree, origin, ops, touched, Some(undo))))
    }

    /// Unlinks `name` from `parent` and drops what the kernel does not hold.
    fn remove_entry(&self, tree: &mut Tree, parent: Ino, name: &str) -> Vec<Ino> {
        let pins = self.pins.lock();
        tree.remove(parent, name, SystemTime::now(), &|ino| {
            pins.contains_key(&ino)
        })
    }

    /// Records an applied change; called with the write lock held (the guard
    /// is borrowed to prove it), so sinks receive changes in exactly the order
    /// the tree took them.
    fn commit(
        &self,
        held: &RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        ops: Vec<ChangeOp>,
        touched: Vec<Touched>,
    ) -> Ticket {
        self.commit_undoable(held, origin, ops, touched, None)
    }

    /// [`Store::commit`] for a change that can be taken back if the disk
    /// refuses it. Paths the disk has not taken yet are written again after it, as they are now.
    fn commit_undoable(
        &self,
        held: &RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        ops: Vec<ChangeOp>,
        touched: Vec<Touched>,
        undo: Option<Undo>,
    ) -> Ticket {
        let unsaved = std::mem::take(&mut *self.unsaved.lock());
        // Written again as memory holds them now, at the places this change
        // moved them to (the tree already shows the change: an unsaved path
        // under a directory it renamed is found at the new name), as a change
        // of memfs' own right after this one: if the disk refuses that, this
        // change still stands (a delete on a full disk makes room even when
        // an unsaved file cannot be written yet), and the paths stay unsaved.
        let mut saver = (Origin::Memfs, Vec::new());
        let again = match unsaved.is_empty() {
            true => Vec::new(),
            false => {
                let moved: BTreeSet<MemPath> = unsaved
                    .into_iter()
                    .map(|path| moved_by(&ops, path))
                    .collect();
                saver = self.lost_saves(&moved);
                reconcile_ops(held, &moved)
            }
        };
        // A change with no ops is a barrier (everything before it durable):
        // it waits for these too. Any other change does not answer for them.
        let barrier = ops.is_empty();
        let ticket = self.submit(held, origin, ops, touched, undo, Vec::new());
        if again.is_empty() {
            return ticket;
        }
        let (by, over) = saver;
        let rewritten = self.submit(held, by, again, Vec::new(), None, over);
        match barrier {
            true => ticket.and(rewritten),
            false => ticket,
        }
    }

    /// Hands one change to the persister and the observers, in order;
    /// it saves over what is at `over` (lost updates), besides what the
    /// store tells of itself.
    fn submit(
        &self,
        held: &RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        mut ops: Vec<ChangeOp>,
        touched: Vec<Touched>,
        undo: Option<Undo>,
        over: Vec<MemPath>,
    ) -> Ticket {
        ops.extend(parent_times(held, &ops));
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut overwrites = self.fresh.lock().judge(seq, &origin, &ops);
        overwrites.extend(over);
        let change = Change {
            seq,
            origin,
            ops,
            touched,
            undo: undo.map(Arc::new),
            overwrites,
            seen: self.followed(),
            foreign: None,
        };
        let mut ticket = match &self.persist {
            Some(sink) => sink.submit(&change),
            None => Ticket::done(),
        };
        for observer in self.observers.read().iter() {
            ticket = ticket.and(observer.submit(&change));
        }
        ticket
    }
}

impl Store {
    /// The disk refused `refused` (in the order they were applied), and did
    /// not confirm `unconfirmed` (written, but the flush failed). Decides what
    /// memory becomes, before anyone is told: each refused change that can be
    /// taken back is (latest first), and everything else stays in memory with
    /// its paths written again later. Kernel caches are invalidated for what
    /// was taken back. Returns, for each refused change, whether it was.
    pub fn recover(&self, refused: &[Change], unconfirmed: &[Change], clean: bool) -> Vec<bool> {
        let mut tree = self.tree.write();
        let mut touched = Vec::new();
        let mut undone = vec![false; refused.len()];
        let unlink = |tree: &mut Tree, parent: Ino, name: &str| {
            self.remove_entry(tree, parent, name);
        };
        for (i, change) in refused.iter().enumerate().rev() {
            if let Some(undo) = &change.undo {
                undone[i] = undo.apply(&mut tree, &mut touched, &unlink);
            }
        }
        // Every path either change touched goes to disk again as memory has it
        // (for one taken back: whatever it left there is cleared).
        let mut unsaved = self.unsaved.lock();
        let kept = refused
            .iter()
            .zip(&undone)
            .filter(|(_, undone)| !(clean && **undone))
            .map(|(change, _)| change);
        let kept: Vec<&Change> = kept.collect();
        if clean {
            // A person's change that lost a race to another host: written
            // again in their name, over the winner (see `lost_saves`).
            let mut lost = self.lost.lock();
            let people = kept
                .iter()
                .filter(|c| matches!(c.origin, Origin::Person { .. } | Origin::Revert { .. }));
            for change in people {
                let ops = change
                    .ops
                    .iter()
                    .filter(|op| !matches!(op, ChangeOp::SetTimes { .. }));
                for path in ops.flat_map(|op| op.paths()) {
                    lost.insert(path.clone(), change.origin.clone());
                }
            }
        }
        for change in kept.into_iter().chain(unconfirmed) {
            // (A directory's times go with the next change in it.)
            for op in change
                .ops
                .iter()
                .filter(|op| !matches!(op, ChangeOp::SetTimes { .. }))
            {
                unsaved.extend(op.paths().into_iter().cloned());
            }
        }
        drop(unsaved);
        let invalidated = if touched.is_empty() {
            Ticket::done()
        } else {
            let change = Change {
                seq: 0,
                origin: Origin::Memfs,
                ops: Vec::new(),
                touched,
                undo: None,
                overwrites: Vec::new(),
                seen: 0,
                foreign: None,
            };
            let observers = self.observers.read();
            observers
                .iter()
                .fold(Ticket::done(), |t, o| t.and(o.submit(&change)))
        };
        drop(tree);
        // Outside the lock: the kernel may call back into the mount meanwhile.
        let _ = invalidated.wait();
        undone
    }

    /// Who writes `paths` again, and over which of them (a person's save
    /// that lost a race to another host is theirs, saved over the winner;
    /// anything else is memfs' own rewrite).
    fn lost_saves(&self, paths: &BTreeSet<MemPath>) -> (Origin, Vec<MemPath>) {
        let mut lost = self.lost.lock();
        if lost.is_empty() {
            return (Origin::Memfs, Vec::new());
        }
        let mut by = None;
        let mut over = Vec::new();
        for path in paths {
            let found = lost
                .keys()
                .filter(|p| p.starts_with(path))
                .cloned()
                .collect::<Vec<_>>();
            for p in found {
                if let Some(origin) = lost.remove(&p) {
                    by.get_or_insert(origin);
                    over.push(p);
                }
            }
        }
        (by.unwrap_or(Origin::Memfs), over)
    }

    /// How many paths the disk has not taken yet.
    pub fn unsaved_paths(&self) -> usize {
        self.unsaved.lock().len()
    }
}

/// A writer's precondition (`expected_sha256`): the file at `path` holds
/// exactly the content with that hash.
fn check_expected(tree: &Tree, path: &MemPath, expect: Option<&str>) -> Result<(), Error> {
    let Some(expect) = expect else {
        return Ok(());
    };
    let ino = tree.resolve(path)?;
    match &tree.node(ino).kind {
        NodeKind::File(data) => {
            let actual = crate::digest::sha256_hex(data);
            if actual.eq_ignore_ascii_case(expect) {
                Ok(())
            } else {
                Err(Error::Changed { actual })
            }
        }
        NodeKind::Dir(_) => Err(Error::IsDir),
        _ => Err(Error::IsSymlink),
    }
}

/// The times memory holds for every directory the ops change entries in.
fn parent_times(tree: &Tree, ops: &[ChangeOp]) -> Vec<ChangeOp> {
    let mut dirs = BTreeSet::new();
    for op in ops {
        if matches!(op, ChangeOp::SetMeta { .. } | ChangeOp::SetTimes { .. }) {
            continue;
        }
        dirs.extend(op.paths().into_iter().filter_map(MemPath::parent));
    }
    dirs.into_iter()
        .filter_map(|path| {
            let ino = tree.resolve(&path).ok()?;
            let node = tree.node(ino);
            node.is_dir().then(|| ChangeOp::SetTimes {
                path,
                meta: Meta::from(&node.attr),
            })
        })
        .collect()
}

/// A file's bytes and attributes, to put back.
fn file_state(tree: &Tree, ino: Ino) -> (Arc<Vec<u8>>, Attr) {
    let node = tree.node(ino);
    match &node.kind {
        NodeKind::File(data) => (data.clone(), node.attr),
        _ => (Arc::default(), node.attr),
    }
}

/// Where `path` is after `ops` (renames and exchanges move what is below them).
fn moved_by(ops: &[ChangeOp], mut path: MemPath) -> MemPath {
    for op in ops {
        match op {
            ChangeOp::Rename { from, to, .. } if path.starts_with(from) => {
                path = path.rebase(from, to);
            }
            ChangeOp::Exchange { a, b } if path.starts_with(a) => path = path.rebase(a, b),
            ChangeOp::Exchange { a, b } if path.starts_with(b) => path = path.rebase(b, a),
            _ => {}
        }
    }
    path
}

/// Ops that make each of `paths` on disk what memory holds there now:
/// everything that exists first (parents before children), then removals.
/// A path memory does not hold is removed from its highest missing
/// directory down, so directories a refused change made on disk go too.
fn reconcile_ops(tree: &Tree, paths: &BTreeSet<MemPath>) -> Vec<ChangeOp> {
    let mut ops = Vec::new();
    let mut removals = BTreeSet::new();
    for path in paths {
        match tree.resolve(path) {
            Ok(ino) => ops.extend(subtree_ops(tree, ino)),
            Err(_) => {
                removals.insert(highest_missing(tree, path));
            }
        }
    }
    ops.extend(removals.into_iter().map(|path| ChangeOp::Remove { path }));
    ops
}

/// The shortest prefix of `path` that memory does not hold.
fn highest_missing(tree: &Tree, path: &MemPath) -> MemPath {
    let mut at = MemPath::root();
    for name in path.names() {
        at = at.join(name);
        if tree.resolve(&at).is_err() {
            break;
        }
    }
    at
}

/// Ops that write the subtree at `ino` anew, parents before children,
/// without recursion (after it came back from an orphan, or to retry it).
fn subtree_ops(tree: &Tree, ino: Ino) -> Vec<ChangeOp> {
    let mut ops = Vec::new();
    let Some(top) = tree.path_of(ino) else {
        return ops;
    };
    if top.is_root() {
        // The root: its attributes; its entries are paths of their own.
        return ops;
    }
    let mut stack = vec![(top, ino)];
    while let Some((path, ino)) = stack.pop() {
        let node = tree.node(ino);
        let meta = Meta::from(&node.attr);
        match &node.kind {
            NodeKind::File(data) => ops.push(ChangeOp::Write {
                path,
                data: data.clone(),
                meta,
            }),
            NodeKind::Symlink(target) => ops.push(ChangeOp::Symlink {
                path,
                target: target.clone(),
                meta,
            }),
            NodeKind::Special { .. } => {}
            NodeKind::Dir(entries) => {
                stack.extend(entries.iter().rev().map(|(name, &c)| (path.join(name), c)));
                ops.push(ChangeOp::MakeDir { path, meta });
            }
        }
    }
    ops
}

/// Splits a non-root path into its parent and last name.
fn split(path: &MemPath) -> Result<(MemPath, &str), Error> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(Error::Root),
    }
}

/// The deepest existing directory on `path`, and how many of its names are missing
/// below it.
fn existing_prefix(tree: &Tree, path: &MemPath) -> (Ino, usize) {
    let mut ino = ROOT_INO;
    for (i, name) in path.names().iter().enumerate() {
        match tree.child(ino, name).ok().flatten() {
            Some(next) => ino = next,
            None => return (ino, path.names().len() - i),
        }
    }
    (ino, 0)
}

/// Makes missing directories of `path`, noting the entries that now exist.
fn make_dirs_touching(
    tree: &mut Tree,
    path: &MemPath,
    now: SystemTime,
    touched: &mut Vec<Touched>,
) -> (Ino, Vec<Ino>) {
    let (dir, made) = tree.make_dirs(path, now);
    for &ino in &made {
        if let Some((parent, name)) = tree.node(ino).links.first() {
            touched.push(Touched::Entry(*parent, name.clone()));
            touched.push(Touched::Inode(*parent));
        }
    }
    (dir, made)
}

/// The ops that put a file's current bytes at every one of its paths.
fn write_ops(tree: &Tree, ino: Ino, data: Arc<Vec<u8>>) -> Vec<ChangeOp> {
    let meta = Meta::from(&tree.node(ino).attr);
    tree.paths_of(ino)
        .into_iter()
        .map(|path| ChangeOp::Write {
            path,
            data: data.clone(),
            meta,
        })
        .collect()
}

/// For a dirty file, the ops that persist its bytes now (and mark it clean),
/// with whoever wrote them.
fn flush_ops(tree: &mut Tree, ino: Ino) -> Option<(Origin, Vec<ChangeOp>)> {
    let node = tree.node_mut(ino);
    let NodeKind::File(data) = &node.kind else {
        return None;
    };
    if !node.dirty {
        return None;
    }
    let data = data.clone();
    node.dirty = false;
    let writer = node.writer.take().unwrap_or(Origin::Memfs);
    Some((writer, write_ops(tree, ino, data)))
}

impl Store {
    /// Commits a dirty file's unsaved bytes as a change of their writer's, so
    /// that a rename after it never moves stale bytes into place on disk.
    fn flush_dirty(&self, tree: &mut RwLockWriteGuard<'_, Tree>, ino: Ino) -> Ticket {
        match flush_ops(tree, ino) {
            Some((writer, ops)) => self.commit(tree, writer, ops, Vec::new()),
            None => Ticket::done(),
        }
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
