//! What the journal's writer hands the checkpointer: durable batches to
//! bring the plain files up to date with, and requests to write out.

use std::sync::mpsc::SyncSender;

use crate::store::Change;

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
