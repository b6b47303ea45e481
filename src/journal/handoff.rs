//! What the journal's writer hands the checkpointer: durable batches to
//! bring the plain files up to date with, and requests to write out.

use std::sync::mpsc::SyncSender;

use crate::store::Change;

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
