//! Change records: what each mutation of the tree did, who did it, and the
//! ticket that tells its author when the change is durable.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::Error;
use crate::path::MemPath;

/// Who made a change. History and audit features key on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A memory-tool call.
    Agent,
    /// A request through the mount, from this user and process.
    Person { uid: u32, pid: u32 },
}

/// One step of a change, in terms a persister can replay on any storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOp {
    /// The file now holds exactly these bytes (missing parents are made).
    Write { path: MemPath, data: Arc<Vec<u8>> },
    /// The directory now exists (missing parents are made).
    MakeDir { path: MemPath },
    /// The file or whole directory tree is gone.
    Remove { path: MemPath },
    /// `from` moved to `to`, which did not exist (missing parents of `to` are made).
    Rename { from: MemPath, to: MemPath },
}

/// Everything one operation changed, in the order the tree applied it.
#[derive(Debug, Clone)]
pub struct Change {
    pub seq: u64,
    pub origin: Origin,
    pub ops: Vec<ChangeOp>,
}

/// Where the store hands its changes, under its lock, in the order it applied them.
pub trait ChangeSink: Send + Sync {
    fn submit(&self, change: Change) -> Ticket;
}

/// The promise of a change's durability; [`Ticket::wait`] blocks until it is kept or broken.
#[derive(Clone, Debug)]
pub struct Ticket {
    inner: Arc<TicketInner>,
}

#[derive(Debug, Default)]
struct TicketInner {
    outcome: Mutex<Option<Result<(), Error>>>,
    settled: Condvar,
}

impl Ticket {
    pub fn pending() -> Self {
        Ticket {
            inner: Arc::default(),
        }
    }

    /// A ticket already kept: for stores with nothing to persist.
    pub fn done() -> Self {
        let t = Ticket::pending();
        t.settle(Ok(()));
        t
    }

    /// Keeps (or breaks) the promise and wakes the waiter. The first outcome wins.
    pub fn settle(&self, outcome: Result<(), Error>) {
        let mut slot = self.inner.outcome.lock();
        if slot.is_none() {
            *slot = Some(outcome);
            self.inner.settled.notify_all();
        }
    }

    pub fn wait(&self) -> Result<(), Error> {
        let mut slot = self.inner.outcome.lock();
        loop {
            if let Some(outcome) = slot.as_ref() {
                return outcome.clone();
            }
            self.inner.settled.wait(&mut slot);
        }
    }
}
