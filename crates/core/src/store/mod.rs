//! The tree and its one lock.
//!
//! Every operation here is whole: it takes the lock once, checks everything,
//! applies everything, hands its [`Change`] to the sinks (still under the
//! lock, so sinks see changes in the order they were applied), and returns.
//! Neither door ever takes the lock itself. Waiting for the sinks happens on
//! the returned [`Ticket`], after the lock is released.
//!
//! This file holds the store itself and its commit (a change handed to the
//! sinks, and the rewriting of paths the disk has not taken); the
//! operations by path, for the tool door, are in `paths.rs`; by inode, for
//! the FUSE door, in `inode_ops.rs`; listings in `listing.rs`; what memory
//! becomes when a batch is refused in `recover.rs`.

mod apply;
mod change;
mod follow;
mod fresh;
mod inode_ops;
pub mod interpret;
mod limits;
mod listing;
mod lost;
mod once;
mod origin;
mod paths;
mod pins;
mod recover;
mod saving;
mod touched;
mod tree;
mod undo;
mod usage;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use crate::lock::{rank, Mutex, RwLock, RwLockWriteGuard};

pub use change::{
    Bases, Change, ChangeOp, ChangeSink, Door, Foreign, Meta, Origin, Process, Recover, Refused,
    Ticket, Touched, Writer,
};
pub use follow::{Busy, Hold, Unsent};
pub use inode_ops::{DirEntry, InfoKind, NewNode, NodeInfo, RenameMode, SetAttr};
pub use limits::{Growth, Limits};
pub use listing::{ListEntry, Listing, Snapshot, Window};
pub use once::LookedOnce;
pub use paths::Mark;
pub use tree::{Attr, Ino, InvariantError, Node, NodeKind, Tree, DIR_MODE, FILE_MODE, ROOT_INO};

use crate::path::MemPath;
use recover::{moved_by, reconcile_ops};
use undo::Undo;

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
    /// shared store), with who made them and from what: merged with the
    /// winner when it arrives, or written again over it in their name (see
    /// `recover.rs`). Taken after the tree lock, never before.
    lost: Mutex<HashMap<MemPath, lost::Lost>>,
    /// How far the tree has followed a shared store (see `follow.rs`).
    followed: std::sync::atomic::AtomicU64,
    /// The change number through which the journal is known to hold every
    /// change (see `Store::catch_up`): moved by a barrier, and by the wait
    /// of any change's ticket that settled well (the journal takes changes
    /// in the order they were made, so all before it are in too).
    caught_up: Arc<std::sync::atomic::AtomicU64>,
    /// Since when a shared store's database has not answered (seconds
    /// since the epoch; 0 while it answers).
    unreachable_since: std::sync::atomic::AtomicU64,
    /// Several hosts share the store.
    shared: std::sync::atomic::AtomicBool,
    /// One-line notes for the next `view` of a path through the tool, said
    /// once (another machine's version kept as the file over this one's).
    notes: Mutex<HashMap<MemPath, String>>,
    /// The store is a cache of a store over HTTP: changes made while it
    /// cannot be reached are kept and sent later (not refused).
    keeps_unsent: std::sync::atomic::AtomicBool,
    /// A shared store's changes of this host's not settled yet (see
    /// `follow.rs`): an agent's change waits for one at its paths.
    hold: std::sync::OnceLock<follow::Hold>,
    /// Run before every answer of every door, before the tree is locked:
    /// takes in what was changed in the plain files (the `outside` module).
    before: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Store {
    /// A store over `tree`. Without a persister, changes are in memory only.
    pub fn new(tree: Tree, limits: Limits, persist: Option<Arc<dyn ChangeSink>>) -> Self {
        Store {
            tree: RwLock::new(rank::TREE, tree),
            persist,
            observers: RwLock::new(rank::OBSERVERS, Vec::new()),
            pins: Mutex::new(rank::PINS, HashMap::new()),
            limits,
            seq: Default::default(),
            unsaved: Mutex::new(rank::UNSAVED, BTreeSet::new()),
            used: Mutex::new(rank::USED, HashMap::new()),
            fresh: Mutex::new(rank::FRESH, Default::default()),
            followed: Default::default(),
            caught_up: Default::default(),
            unreachable_since: Default::default(),
            lost: Mutex::new(rank::LOST, HashMap::new()),
            shared: Default::default(),
            keeps_unsent: Default::default(),
            notes: Mutex::new(rank::NOTES, HashMap::new()),
            hold: std::sync::OnceLock::new(),
            before: std::sync::OnceLock::new(),
        }
    }

    /// Sets what runs before every answer (once; the plain files' watcher).
    pub fn before_answers(&self, run: Box<dyn Fn() + Send + Sync>) {
        let _ = self.before.set(run);
    }

    /// Runs what must come before an answer: called before the tree is
    /// locked, holding no lock of the store's (and by the doors whose
    /// answers do not read the tree: the history, search). What it took
    /// in is a change like any other (see `catch_up`).
    pub fn before_answer(&self) {
        if self.looked() {
            return; // (this thread's request looked at its start: `once`)
        }
        if let Some(run) = self.before.get() {
            run();
        }
    }

    /// The tree to read, for an answer (after what must come before it).
    fn read_tree(&self) -> crate::lock::RwLockReadGuard<'_, Tree> {
        self.before_answer();
        self.tree.read()
    }

    /// The tree to change, for an answer (after what must come before it).
    fn write_tree(&self) -> RwLockWriteGuard<'_, Tree> {
        self.before_answer();
        self.tree.write()
    }

    /// The files door (`Origin::Files`) saw memory's content at `path`
    /// before its change (the plain file held it): a change of its on top
    /// is not a lost update.
    pub fn files_saw(&self, path: &MemPath) {
        let seq = self.seq.load(std::sync::atomic::Ordering::Relaxed);
        let seen = file_content(&self.tree.read(), path);
        self.fresh
            .lock()
            .note_read(fresh::FILES_READER, path.clone(), seq, seen);
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
        f(&self.read_tree())
    }

    /// The tree's derived state recomputed and compared (see
    /// [`Tree::check_invariants`]); the property tests call it after every
    /// step.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        self.tree.read().check_invariants()
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
        held: &mut RwLockWriteGuard<'_, Tree>,
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
        held: &mut RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        ops: Vec<ChangeOp>,
        touched: Vec<Touched>,
        undo: Option<Undo>,
    ) -> Ticket {
        self.commit_saying(held, origin, ops, touched, undo, Default::default())
    }

    /// [`Store::commit_undoable`] of a change that saves over paths it had
    /// not read, or holds merges, as `said` tells (the history says so).
    fn commit_saying(
        &self,
        held: &mut RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        ops: Vec<ChangeOp>,
        touched: Vec<Touched>,
        undo: Option<Undo>,
        said: recover::Rewrite,
    ) -> Ticket {
        let unsaved = std::mem::take(&mut *self.unsaved.lock());
        // Written again as memory holds them now, at the places this change
        // moved them to (the tree already shows the change: an unsaved path
        // under a directory it renamed is found at the new name), as a change
        // of memfs' own right after this one: if the disk refuses that, this
        // change still stands (a delete on a full disk makes room even when
        // an unsaved file cannot be written yet), and the paths stay unsaved.
        let mut saver = (Origin::Memfs, recover::Rewrite::default());
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
        // What the files door took in is on disk already: never taken back.
        let undo = undo.filter(|_| !matches!(origin, Origin::Files { .. }));
        let ticket = self.submit(held, origin, ops, touched, undo, said);
        if again.is_empty() {
            return ticket;
        }
        let (by, rewrite) = saver;
        let rewritten = self.submit(held, by, again, Vec::new(), None, rewrite);
        match barrier {
            true => ticket.and(rewritten),
            false => ticket,
        }
    }

    /// Tells the observers what a change not committed yet made stale (a
    /// person's write: another mount's kernel must drop its pages).
    fn tell_stale(&self, origin: &Origin, touched: &[Touched]) {
        for observer in self.observers.read().iter() {
            observer.stale(origin, touched);
        }
    }

    /// Hands one change to the persister and the observers, in order;
    /// it saves over what is at `rewrite.over` (lost updates), besides what
    /// the store tells of itself, and holds merges at `rewrite.merged`.
    fn submit(
        &self,
        held: &mut RwLockWriteGuard<'_, Tree>,
        origin: Origin,
        mut ops: Vec<ChangeOp>,
        mut touched: Vec<Touched>,
        undo: Option<Undo>,
        mut rewrite: recover::Rewrite,
    ) -> Ticket {
        ops.extend(parent_times(held, &ops));
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let judged = {
            let now = |p: &MemPath| file_content(held, p);
            self.fresh.lock().judge(seq, &origin, &ops, &now)
        };
        let mut overwrites = judged.stale;
        overwrites.extend(rewrite.over);
        for (path, merged) in judged.merges {
            // A save over an unread change that changed other lines: the
            // merge is the file (see `fresh.rs`).
            if let Some(op) = put_merge(held, &path, merged, &mut touched) {
                ops.push(op);
                rewrite.merged.push(path);
            }
        }
        let change = Change {
            seq,
            origin,
            ops,
            touched,
            undo: undo.map(Arc::new),
            overwrites,
            merged: rewrite.merged,
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
        ticket.marking(&self.caught_up, seq)
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
    /// Commits the unsaved bytes of a dirty file, or of every dirty file
    /// below a directory, as changes of their writers', so that a rename
    /// or removal after it never moves stale bytes into place on disk, and
    /// the history holds the writer's version before the change that
    /// moves or removes it (each change its own version, with its actor).
    /// Called before the tree moves the file: called after, it would write
    /// them at the new name, and the rename would then put the old name's
    /// bytes (or nothing, for a file never saved) over them.
    fn flush_dirty(&self, tree: &mut RwLockWriteGuard<'_, Tree>, ino: Ino) -> Ticket {
        let dirty = tree.dirty_files_below(ino);
        self.commit_flushes(tree, dirty)
            .unwrap_or_else(Ticket::done)
    }
}

/// The content of the file at `path` in `tree`, if one is there.
fn file_content(tree: &Tree, path: &MemPath) -> Option<Arc<Vec<u8>>> {
    match &tree.node(tree.resolve(path).ok()?).kind {
        NodeKind::File(data) => Some(data.clone()),
        _ => None,
    }
}

/// Makes `merged` the content of the file at `path` (its kernel caches
/// dropped with the change's): the op that says so.
fn put_merge(
    tree: &mut Tree,
    path: &MemPath,
    merged: Arc<Vec<u8>>,
    touched: &mut Vec<Touched>,
) -> Option<ChangeOp> {
    let ino = tree.resolve(path).ok()?;
    tree.set_data(ino, merged.clone(), std::time::SystemTime::now());
    touched.push(Touched::Inode(ino));
    Some(ChangeOp::Write {
        path: path.clone(),
        data: merged,
        meta: Meta::from(&tree.node(ino).attr),
    })
}
