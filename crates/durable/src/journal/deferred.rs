//! A shared store's frame written and flushed after its answer (see
//! [`Deferred`]); the journal's writer makes and flushes them.

use std::sync::Arc;

use super::record::{ContentRec, Header};
use crate::store::Change;

/// A shared store's frame written and not flushed yet. The database holds
/// its batch (committed before the frame was written), so its changes are
/// acknowledged at once and the local flush comes after: on the commit
/// pool soon after, and always before the next frame is written (so
/// that, as for every frame, only the last one can be torn by a crash).
/// A frame a crash tore is taken back from the database at the next start
/// (the follower reads what the journal does not hold). What the frame
/// owes should its flush fail, and the checkpointer's message for it (the
/// plain files follow only a flushed frame), are kept here meanwhile.
pub struct Deferred {
    pub segment: u64,
    pub at: u64,
    pub header: Header,
    pub body: Vec<Arc<Vec<u8>>>,
    pub placed: Vec<ContentRec>,
    /// The batches the frame holds, for the checkpointer once it is flushed.
    pub for_checkpointer: Vec<ForCheckpointer>,
}

/// A batch as the checkpointer takes it: its number, its changes, and the
/// bytes it writes into the plain files.
pub type ForCheckpointer = (u64, Vec<Change>, u64);
