//! What the journal knows in memory, behind one lock: the view of the
//! memory, where each content and each version's frame is, the ids it
//! hands out next, and the segments. Rows and contents themselves stay
//! on disk; a history query reads the frames.

use std::collections::{BTreeMap, HashMap};

use super::record::Seal;
use super::versions::Ids;
use super::view::View;
use crate::digest::Sha;

/// Where a content's bytes are: a range of a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub segment: u64,
    pub at: u64,
    pub len: u64,
}

/// One segment's place and size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segment {
    pub bytes: u64,
    /// The last batch it holds (0: none).
    pub last_batch: u64,
    /// When its first batch was written (RFC 3339), for retention by age.
    pub first_time: Option<String>,
    /// Bytes of its snapshot (the state, not history: retention by size
    /// does not count them).
    pub state_bytes: u64,
}

/// The segment appends go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Active {
    pub number: u64,
    /// Where the next frame goes.
    pub end: u64,
    /// Bytes allocated past `end` (kept for small frames on a full disk).
    pub reserved: u64,
    /// The file does not exist yet: the next frame begins it.
    pub fresh: bool,
    /// The next frame must begin a new segment that seals this one here
    /// (an append failed part way, or its flush failed).
    pub seal_at: Option<u64>,
    /// The seal the fresh segment's first frame carries.
    pub prev: Option<Seal>,
}

impl Active {
    /// The segment to begin after this one, sealing this one where it must
    /// be (`seal_at`: nothing of it past that offset is read).
    pub fn next(&self) -> Active {
        Active {
            number: self.number + 1,
            end: 0,
            reserved: 0,
            fresh: true,
            seal_at: None,
            prev: self.seal_at.map(|end| Seal {
                segment: self.number,
                end,
            }),
        }
    }
}

pub struct State {
    pub view: View,
    pub contents: HashMap<Sha, Loc>,
    pub ids: Ids,
    pub next_batch: u64,
    pub origin: String,
    pub segments: BTreeMap<u64, Segment>,
    pub active: Active,
    /// The last checkpoint written to the journal (the newest one the
    /// checkpointer reported goes with the next frame).
    pub checkpoint_written: u64,
    /// How far the journal holds a shared store's versions (see
    /// `Header::follow`); 0 for a memory of one host.
    pub follow: u64,
    /// The last frame, written and not flushed yet (a shared store's: see
    /// `writer::Deferred`); flushed before any other frame is written.
    pub deferred: Option<super::deferred::Deferred>,
}
