//! Change records: what each mutation of the tree did, who did it, what the
//! kernel may have cached of it, and the ticket that tells its author when
//! every sink (the persister, the mount's cache invalidator) is done with it.

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Condvar, Mutex};

use super::tree::{Attr, Ino};
use super::undo::Undo;
use crate::error::Error;
use crate::path::MemPath;

/// Who made a change, recorded when it is made. History and audit key on this.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A memory-tool call, through `door`, from the session that named itself
    /// `session` (an MCP client's `clientInfo`, an adapter's argument).
    Agent {
        door: Door,
        session: Option<Arc<str>>,
    },
    /// A request through the mount, from this user and process.
    Person {
        uid: u32,
        pid: u32,
        process: Process,
    },
    /// memfs itself: a recovery after the disk refused a change.
    Memfs,
    /// `memfs revert`, run by this user and process: the file at a path
    /// made what it was at `version` of the history (a person's act);
    /// `note` says so in the version it makes.
    Revert {
        uid: u32,
        pid: u32,
        version: u64,
        note: Option<Arc<str>>,
    },
    /// memfs removing a file nobody read or wrote for a while (`memfs expire`).
    Expiry,
    /// A call of the memory stores API (`serve --http`), made with the
    /// token named `token` (an application's act, not an agent's).
    Api { token: Arc<str> },
}

impl Origin {
    /// An agent's call through `door`, from a session with no name.
    pub fn agent(door: Door) -> Origin {
        Origin::Agent {
            door,
            session: None,
        }
    }

    /// An agent's call through `door`, from the session a client named
    /// `session`: the name is a client's data, kept as a label (control
    /// characters escaped, at most [`crate::text::MAX_LABEL`] characters),
    /// so that no name can forge a row of `memfs log` or act on a terminal.
    pub fn session(door: Door, session: Option<&str>) -> Origin {
        Origin::Agent {
            door,
            session: session.map(|name| Arc::from(crate::text::label(name).as_str())),
        }
    }

    pub fn is_agent(&self) -> bool {
        matches!(self, Origin::Agent { .. })
    }
}

/// How an agent's call reached memfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// The Rust library (`Memory::call`).
    Library,
    /// `memfs exec`.
    Exec,
    /// `memfs serve --stdio`.
    Stdio,
    /// The socket `DIR/.memfs/sock`.
    Socket,
    /// `memfs mcp`.
    Mcp,
    /// The memory tool over MCP's streamable HTTP (`serve --http`, `/mcp`).
    Http,
}

impl Door {
    /// Its name in the history (`exec`, `mcp`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Door::Library => "library",
            Door::Exec => "exec",
            Door::Stdio => "stdio",
            Door::Socket => "socket",
            Door::Mcp => "mcp",
            Door::Http => "http",
        }
    }

    /// The door of that name (not `library`: only a process's own calls).
    pub fn named(name: &str) -> Option<Door> {
        match name {
            "exec" => Some(Door::Exec),
            "stdio" => Some(Door::Stdio),
            "socket" => Some(Door::Socket),
            "mcp" => Some(Door::Mcp),
            "http" => Some(Door::Http),
            _ => None,
        }
    }
}

/// A process's name as the kernel keeps it (`comm`: at most 15 bytes).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Process([u8; 16]);

impl Process {
    /// A process's name as memfs keeps it: any character that must not be
    /// printed (a name set with `prctl(PR_SET_NAME)` can hold an escape
    /// sequence) becomes `?`.
    pub fn new(name: &str) -> Process {
        let cleaned: String;
        let name = match crate::text::is_printable(name) {
            true => name,
            false => {
                cleaned = name
                    .chars()
                    .map(|c| if crate::text::unprintable(c) { '?' } else { c })
                    .collect();
                &cleaned
            }
        };
        let mut bytes = [0u8; 16];
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        bytes[..end].copy_from_slice(&name.as_bytes()[..end]);
        Process(bytes)
    }

    pub fn as_str(&self) -> &str {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(16);
        std::str::from_utf8(&self.0[..len]).unwrap_or("?")
    }
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

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

/// Something the kernel may hold in its caches that a change made stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// The node's attributes or contents.
    Inode(Ino),
    /// A name in a directory (present or not).
    Entry(Ino, String),
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
}

#[derive(Default)]
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
            parts: vec![Arc::default()],
        }
    }

    /// A pending ticket whose waiter first runs `helper` (which may settle
    /// it; it must not block on anything the waiter could hold).
    pub fn pending_helped(helper: Helper) -> Self {
        Ticket {
            parts: vec![Arc::new(Part {
                helper: Some(helper),
                ..Part::default()
            })],
        }
    }

    /// A ticket already kept: for stores with nothing to persist.
    pub fn done() -> Self {
        Ticket::default()
    }

    /// One ticket for both promises.
    pub fn and(mut self, other: Ticket) -> Ticket {
        self.parts.extend(other.parts);
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
        result
    }
}

/// A batch the disk refused, handed back to the store on a channel its
/// owner made, so that the store decides what memory becomes before anyone
/// is told (see `Store::recover`): `refused` changes did not reach the
/// disk; `unconfirmed` ones were written but their flush failed. The store
/// answers, for each refused change, whether it took it back.
#[derive(Debug)]
pub struct Refused {
    pub refused: Vec<Change>,
    pub unconfirmed: Vec<Change>,
    /// Nothing of the refused changes reached any storage (a shared store
    /// refused them before anything was written): one taken back leaves
    /// nothing to clear.
    pub clean: bool,
    pub answer: std::sync::mpsc::SyncSender<Vec<bool>>,
}
