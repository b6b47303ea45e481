//! Change records: what each mutation of the tree did, who did it, what the
//! kernel may have cached of it, and the ticket that tells its author when
//! every sink (the persister, the mount's cache invalidator) is done with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use crate::lock::{rank, Condvar, Mutex};

pub use super::origin::{Door, Origin, Process, Writer};
pub use super::touched::Touched;
use super::tree::Attr;
use super::undo::Undo;
use crate::error::Error;
use crate::path::MemPath;

/// The attributes a persister keeps on disk with a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
}

impl From<&Attr> for Meta {
    fn from(a: &Attr) -> Self {
        Meta {
            perm: a.perm,
            uid: a.uid,
            gid: a.gid,
            atime: a.atime,
            mtime: a.mtime,
        }
    }
}

/// One step of a change, in terms a persister can replay on any storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOp {
    /// The file now holds exactly these bytes (missing parents are made).
    Write {
        path: MemPath,
        data: Arc<Vec<u8>>,
        meta: Meta,
    },
    /// The directory now exists (missing parents are made).
    MakeDir { path: MemPath, meta: Meta },
    /// The file, link or whole directory tree is gone.
    Remove { path: MemPath },
    /// `from` moved to `to` (missing parents of `to` are made); `replace`
    /// says whether something at `to` was replaced.
    Rename {
        from: MemPath,
        to: MemPath,
        replace: bool,
    },
    /// `a` and `b` swapped places.
    Exchange { a: MemPath, b: MemPath },
    /// A symbolic link to `target` now exists at `path`.
    Symlink {
        path: MemPath,
        target: String,
        meta: Meta,
    },
    /// The node's mode, owner or times changed.
    SetMeta { path: MemPath, meta: Meta },
    /// The directory's times are these (memory's): on disk, any entry made
    /// or removed in it moved them.
    SetTimes { path: MemPath, meta: Meta },
}

/// Everything one operation changed, in the order the tree applied it. A
/// change with no ops is a barrier: it is done when all before it are durable.
#[derive(Debug, Clone)]
pub struct Change {
    pub seq: u64,
    pub origin: Origin,
    pub ops: Vec<ChangeOp>,
    pub touched: Vec<Touched>,
    /// How to take the change back if the disk refuses it (agent changes,
    /// which nobody has been told of yet).
    pub undo: Option<Arc<Undo>>,
    /// Paths this change (a person's) saves over an agent's change that
    /// the person's process had not read: lost updates, kept as `overwrite`
    /// versions so one revert brings the agent's text back.
    pub overwrites: Vec<MemPath>,
    /// Paths this change (a person's save that lost a race, written again)
    /// holds merged with the other host's change made from the same
    /// version (see `lost.rs`): their versions say so.
    pub merged: Vec<MemPath>,
    /// How far this host's tree had followed a shared store when the change
    /// was made (the newest version of it all of whose predecessors the
    /// tree showed): the precondition of its commit there. 0 for a store
    /// of one host.
    pub seen: u64,
    /// Set when the change is another host's, already committed to the
    /// shared store and now applied to this tree: the journal keeps its
    /// record as it is, and sends it nowhere.
    pub foreign: Option<Arc<Foreign>>,
}

impl Change {
    /// memfs' own change of `ops` (a replay of the journal into the plain
    /// files, a repair): no door's, undoing nothing, touching no inode.
    pub fn of_memfs(ops: Vec<ChangeOp>) -> Change {
        Change {
            seq: 0,
            origin: Origin::Memfs,
            ops,
            touched: Vec::new(),
            undo: None,
            overwrites: Vec::new(),
            merged: Vec::new(),
            seen: 0,
            foreign: None,
        }
    }
}

/// Another host's change as the shared store holds it: its position there
/// and its record (opaque to the store: the journal knows the format).
pub struct Foreign {
    pub seq: u64,
    pub record: Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Foreign").field("seq", &self.seq).finish()
    }
}

impl ChangeOp {
    /// Every path on disk the op changes.
    pub fn paths(&self) -> Vec<&MemPath> {
        match self {
            ChangeOp::Write { path, .. }
            | ChangeOp::MakeDir { path, .. }
            | ChangeOp::Remove { path }
            | ChangeOp::Symlink { path, .. }
            | ChangeOp::SetMeta { path, .. }
            | ChangeOp::SetTimes { path, .. } => vec![path],
            ChangeOp::Rename { from, to, .. } => vec![from, to],
            ChangeOp::Exchange { a, b } => vec![a, b],
        }
    }
}

/// Where the store hands its changes, under its lock, in the order it applied them.
pub trait ChangeSink: Send + Sync {
    fn submit(&self, change: &Change) -> Ticket;
    /// What a change by `origin` that is not a commit yet made stale (a
    /// person's write, recorded as a version only at close): a sink that
    /// keeps caches drops these. Nobody waits for it.
    fn stale(&self, _origin: &Origin, _touched: &[Touched]) {}
    /// Submits changes that belong together (another host's batch): a sink
    /// that batches keeps them in one batch.
    fn submit_all(&self, changes: &[Change]) -> Vec<Ticket> {
        changes.iter().map(|c| self.submit(c)).collect()
    }
}

/// The promise that sinks are done with a change; [`Ticket::wait`] blocks
/// until every part is kept, or one is broken.
#[derive(Clone, Debug, Default)]
pub struct Ticket {
    parts: Vec<Arc<Part>>,
    /// Moved up to the change's number when a wait finds every part kept
    /// (see [`Ticket::marking`]).
    mark: Option<(Arc<AtomicU64>, u64)>,
}

struct Part {
    outcome: Mutex<Option<Result<(), Error>>>,
    settled: Condvar,
    /// Run by a waiter before it blocks: the sink may do the work itself on
    /// the waiter's thread (a journal's group commit, led by whoever waits,
    /// saves two thread switches a write).
    helper: Option<Helper>,
}

/// See [`Ticket::pending_helped`].
pub type Helper = Arc<dyn Fn() + Send + Sync>;

impl Part {
    fn new(helper: Option<Helper>) -> Part {
        Part {
            outcome: Mutex::new(rank::OUTCOME, None),
            settled: Condvar::new(),
            helper,
        }
    }
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part")
            .field("outcome", &self.outcome)
            .field("helped", &self.helper.is_some())
            .finish()
    }
}

impl Ticket {
    pub fn pending() -> Self {
        Ticket {
            parts: vec![Arc::new(Part::new(None))],
            mark: None,
        }
    }

    /// A pending ticket whose waiter first runs `helper` (which may settle
    /// it; it must not block on anything the waiter could hold).
    pub fn pending_helped(helper: Helper) -> Self {
        Ticket {
            parts: vec![Arc::new(Part::new(Some(helper)))],
            mark: None,
        }
    }

    /// A ticket already kept: for stores with nothing to persist.
    pub fn done() -> Self {
        Ticket::default()
    }

    /// One ticket for both promises.
    pub fn and(mut self, other: Ticket) -> Ticket {
        self.parts.extend(other.parts);
        self.mark = self.mark.or(other.mark);
        self
    }

    /// A wait that finds this ticket kept moves `mark` up to `seq`: the
    /// store's record of how far the journal is known to hold its changes,
    /// so that the next answer read from the history needs no barrier of
    /// its own when nothing changed since (see `Store::catch_up`).
    pub fn marking(mut self, mark: &Arc<AtomicU64>, seq: u64) -> Ticket {
        self.mark = Some((Arc::clone(mark), seq));
        self
    }

    /// Keeps (or breaks) the promise and wakes the waiter. The first outcome wins.
    pub fn settle(&self, outcome: Result<(), Error>) {
        for part in &self.parts {
            let mut slot = part.outcome.lock();
            if slot.is_none() {
                *slot = Some(outcome.clone());
                part.settled.notify_all();
            }
        }
    }

    pub fn wait(&self) -> Result<(), Error> {
        let mut result = Ok(());
        for part in &self.parts {
            if let Some(help) = &part.helper {
                if part.outcome.lock().is_none() {
                    help();
                }
            }
            let mut slot = part.outcome.lock();
            while slot.is_none() {
                part.settled.wait(&mut slot);
            }
            if let Some(Err(e)) = slot.as_ref() {
                result = result.and(Err(e.clone()));
            }
        }
        if let (Ok(()), Some((mark, seq))) = (&result, &self.mark) {
            mark.fetch_max(*seq, Ordering::AcqRel);
        }
        result
    }
}

/// A batch the disk refused, handed back to the store through the
/// [`Recover`] its owner gave the journal, so that the store decides what
/// memory becomes before anyone is told (see `Store::recover`): `refused`
/// changes did not reach the disk; `unconfirmed` ones were written but
/// their flush failed. The store answers, for each refused change, whether
/// it took it back.
#[derive(Debug)]
pub struct Refused<'a> {
    pub refused: &'a [Change],
    pub unconfirmed: &'a [Change],
    /// Nothing of the refused changes reached any storage (a shared store
    /// refused them before anything was written): one taken back leaves
    /// nothing to clear.
    pub clean: bool,
    /// What the journal held at each file the refused changes save, before
    /// them: the common version a race's winner was made from too, the
    /// base of the merge when the winner arrives (see
    /// `Store::keep_unsaved_over`). A file the journal did not hold is an
    /// empty base; one whose content it cannot read is missing.
    pub bases: Bases,
}

/// Files' contents by path (see [`Refused::bases`]).
pub type Bases = std::collections::BTreeMap<MemPath, Arc<Vec<u8>>>;

/// How the journal asks the store what to do with refused changes (on the
/// thread that committed them): for each refused change, whether the store
/// took it back.
pub type Recover = Box<dyn Fn(Refused) -> Vec<bool> + Send + Sync>;
