//! What the journal's writer hands the checkpointer: durable batches to
//! bring the plain files up to date with, and requests to write out.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use crate::lock::{rank, Mutex};
use crate::store::Change;

/// The journal's side of the checkpointer: where batches go, and what it
/// reports back (how far the plain files are current, what they refused,
/// what they have yet to take).
pub struct Handoff {
    pub checkpointer: Mutex<Option<Arc<dyn Inbox>>>,
    /// The newest batch the checkpointer made the plain files current
    /// (and durable) through.
    pub checkpointed: AtomicU64,
    /// The paths the checkpointer could not bring up to date (see
    /// `stuck::Stuck`), as of `checkpointed`: set under this lock
    /// before `checkpointed` moves, read under it with `checkpointed`.
    pub stuck: Mutex<Vec<String>>,
    /// Each stuck path with why, for reports (set with `stuck`).
    pub stuck_reasons: Mutex<Vec<String>>,
    /// Bytes of plain files the checkpointer has yet to write.
    pub unwritten: AtomicU64,
}

impl Handoff {
    /// With the paths the journal last wrote as stuck, current through
    /// batch `checkpointed`.
    pub fn new(stuck: Vec<String>, checkpointed: u64) -> Handoff {
        Handoff {
            checkpointer: Mutex::new(rank::CHECKPOINTER, None),
            checkpointed: AtomicU64::new(checkpointed),
            stuck: Mutex::new(rank::STUCK, stuck),
            stuck_reasons: Mutex::new(rank::STUCK_REASONS, Vec::new()),
            unwritten: AtomicU64::new(0),
        }
    }
}

/// Where the journal hands the checkpointer its messages (the checkpointer
/// is scheduled on a pool; the writer names only this).
pub trait Inbox: Send + Sync {
    /// Hands over `msg`; false once the checkpointer has stopped.
    fn send(&self, msg: Msg) -> bool;
    /// Returns once no step of the checkpointer runs (after `Stop`).
    fn quiet(&self);
}

/// A message to the checkpointer.
pub enum Msg {
    /// A durable batch to bring the files up to date with, and the bytes
    /// it writes into them.
    Batch {
        batch: u64,
        changes: Vec<Change>,
        plain: u64,
    },
    /// Write out everything held now, then answer whether that worked.
    Flush(SyncSender<bool>),
    /// Write out everything, answer whether that worked, and stop.
    Stop(SyncSender<bool>),
}
