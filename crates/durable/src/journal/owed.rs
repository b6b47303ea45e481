//! What a journal owes the frames to come (records a refused disk left,
//! the checkpointer's batches for them, a flush) and where its refusals
//! go: the parts `writer::Core` holds, no disk in them.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::deferred::ForCheckpointer;
use super::record::ChangeRec;
use super::versions::Needed;
use crate::error::DiskError;
use crate::lock::{rank, Mutex};
use crate::store::Recover;

/// Every barrier with a sequence number below `below` was queued before a
/// change ahead of it was refused and kept in memory: it must not answer
/// that everything before it is durable.
#[derive(Default)]
pub(super) struct Taint {
    pub(super) below: u64,
    pub(super) error: Option<DiskError>,
}

/// What the journal owes the frames to come.
pub(super) struct Owed {
    /// Records: what start-up found when the disk refused to take it then,
    /// and changes a shared store committed that the disk then refused
    /// here. They go first in the next frame.
    pub(super) behind: Mutex<Vec<(ChangeRec, Vec<Needed>)>>,
    /// The checkpointer's batches for records in `behind` whose changes
    /// stand (a shared store holds them): the plain files follow them
    /// only once a frame holding them is flushed, so that a file on disk
    /// is never ahead of the journal (at the next start it would look
    /// like a change made while no memfs ran).
    pub(super) batches: Mutex<Vec<ForCheckpointer>>,
    /// A frame waits for its flush (see `Deferred`): the commit pool
    /// flushes it at once.
    pub(super) flush: AtomicBool,
}

impl Owed {
    pub(super) fn new() -> Owed {
        Owed {
            behind: Mutex::new(rank::BEHIND, Vec::new()),
            batches: Mutex::new(rank::OWED_BATCHES, Vec::new()),
            flush: AtomicBool::new(false),
        }
    }
}

/// Where the journal's refusals go, and what they leave behind.
pub(super) struct Refusals {
    /// Where refused batches go (taken at shutdown, which ends the
    /// store's side of the channel).
    pub(super) recovery: Mutex<Option<Arc<Recover>>>,
    pub(super) taint: Mutex<Taint>,
    /// The disk refused the last batch (said once, until it takes one again).
    pub(super) refusing: AtomicBool,
}

impl Refusals {
    pub(super) fn new() -> Refusals {
        Refusals {
            recovery: Mutex::new(rank::RECOVERY, None),
            taint: Mutex::new(rank::TAINT, Taint::default()),
            refusing: AtomicBool::new(false),
        }
    }
}
