//! What the journal knows in memory, behind one lock: the view of the
//! memory, where each content and each version's frame is, the ids it
//! hands out next, and the segments. Rows and contents themselves stay
//! on disk; a history query reads the frames.

use std::collections::{BTreeMap, HashMap};

use super::record::{OwnBatch, Seal};
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

/// The journal's segments as the appender keeps them: each segment's
/// size and batches, the one frames go to, a frame whose flush is
/// deferred, and the checkpoint (with its stuck paths) the frames said last.
pub struct Log {
    pub segments: BTreeMap<u64, Segment>,
    pub active: Active,
    /// The last checkpoint written to the journal (the newest one the
    /// checkpointer reported goes with the next frame).
    pub checkpoint_written: u64,
    /// The last frame, written and not flushed yet (a shared store's: see
    /// `deferred::Deferred`); flushed before any other frame is written.
    pub deferred: Option<super::deferred::Deferred>,
    /// The stuck paths the last checkpoint written says (`Header::stuck`).
    pub stuck_written: Vec<String>,
    /// The rows of the last frames appended (see `recent.rs`).
    pub recent: super::recent::Recent,
}

pub struct State {
    pub view: View,
    pub contents: HashMap<Sha, Loc>,
    pub ids: Ids,
    pub next_batch: u64,
    pub origin: String,
    /// The segments, the one frames go to, and what the frames said last.
    pub log: Log,
    /// How far the journal holds a shared store's versions (see
    /// `Header::follow`); 0 for a memory of one host.
    pub follow: u64,
    /// Batches of this host's the shared store holds and this journal
    /// holds, past `follow` (see `record::OwnBatch`), by number.
    pub own: BTreeMap<u64, OwnBatch>,
    /// See `Header::own_since`.
    pub own_since: Option<u64>,
    /// While a compaction runs: the contents frames named without carrying
    /// them (it must not drop those). Recorded, taken and checked under
    /// this state's lock only, so that no frame can name a content between
    /// the compaction's check and its install.
    pub named_meanwhile: Option<std::collections::HashSet<crate::digest::Sha>>,
    /// A batch whose records are in the view but not settled (no frame
    /// written, not given back) while its committer has let this lock go:
    /// a shared store's round trips, or the wait for the checkpointer to
    /// free room (see `gate.rs`). Set and cleared by the committer alone.
    pub in_flight: Option<u64>,
}

impl State {
    /// Where a frame just appended to the active segment put the contents
    /// it carries (`placed`, at their offsets in the body at `body_at`):
    /// later frames name them.
    pub fn hold_contents(&mut self, body_at: u64, placed: &[super::record::ContentRec]) {
        let segment = self.log.active.number;
        for c in placed {
            if let Some(sha) = Sha::parse(&c.sha256) {
                let loc = Loc {
                    segment,
                    at: body_at + c.at,
                    len: c.len,
                };
                self.contents.insert(sha, loc);
            }
        }
    }

    /// Takes in batches of this host's the journal holds, and moves
    /// `follow` through every one that now follows on from it: a batch
    /// whose head the journal holds every version through is held whole.
    pub fn hold_own(&mut self, batches: impl IntoIterator<Item = OwnBatch>) {
        self.own.extend(batches.into_iter().map(|b| (b.batch, b)));
        absorb(&mut self.follow, &mut self.own);
    }

    /// `follow`, and the batches of this host's held past it, as they
    /// would be with `follow` at `followed` and `mine` held too (the state
    /// itself unchanged: the batch's frame is not written yet).
    pub fn own_after(&self, followed: u64, mine: OwnBatch) -> (u64, Vec<OwnBatch>) {
        let mut follow = followed.max(self.follow);
        let mut own = self.own.clone();
        own.insert(mine.batch, mine);
        absorb(&mut follow, &mut own);
        (follow, own.into_values().collect())
    }

    /// Whether the journal holds this host's batch `batch`, which the
    /// shared store holds with last id `seq`.
    pub fn holds_own(&self, batch: u64, seq: u64) -> bool {
        seq <= self.follow
            || self.own.contains_key(&batch)
            || self.own_since.is_some_and(|since| batch < since)
    }

    /// What a frame says of this host's batches (every one the journal
    /// holds past `follow`, and `own_since`).
    pub fn own_record(&self) -> (Vec<OwnBatch>, Option<u64>) {
        (self.own.values().copied().collect(), self.own_since)
    }
}

/// Moves `follow` through every batch of `own` that follows on from it
/// (repeatedly: one may follow on from another), then forgets those it
/// passed.
fn absorb(follow: &mut u64, own: &mut BTreeMap<u64, OwnBatch>) {
    loop {
        let through = own
            .values()
            .filter(|b| b.head <= *follow)
            .map(|b| b.last)
            .max();
        match through {
            Some(last) if last > *follow => *follow = last,
            _ => break,
        }
    }
    own.retain(|_, b| b.last > *follow);
}

#[cfg(test)]
mod tests {
    use super::super::record::OwnBatch;

    fn own(batch: u64, head: u64, last: u64) -> OwnBatch {
        OwnBatch { batch, head, last }
    }

    #[test]
    fn own_batches_past_a_gap_wait_and_are_taken_in_once_it_closes() {
        let mut st = super::super::startup::new_state();
        st.follow = 10;
        // 11..=12 is another host's, not held yet: 7 and 8 wait.
        st.hold_own([own(7, 12, 14), own(8, 14, 15)]);
        assert_eq!(st.follow, 10);
        assert!(st.holds_own(7, 14) && st.holds_own(8, 15));
        assert!(!st.holds_own(6, 13), "a batch the journal lost is not held");
        // The other host's batch arrives: everything through 15 is held.
        st.follow = 12;
        st.hold_own([]);
        assert_eq!(st.follow, 15);
        assert!(st.own.is_empty());
        assert!(st.holds_own(7, 14), "held by follow now");
    }

    #[test]
    fn a_batch_that_follows_on_moves_follow_and_is_not_listed() {
        let mut st = super::super::startup::new_state();
        st.follow = 10;
        assert_eq!(st.own_after(10, own(3, 10, 12)), (12, vec![]));
        // Past a gap: listed, follow stays.
        assert_eq!(st.own_after(10, own(3, 11, 12)), (10, vec![own(3, 11, 12)]));
        // One held before now follows on too.
        st.hold_own([own(2, 12, 13)]);
        assert_eq!(st.own_after(10, own(3, 10, 12)), (13, vec![]));
        assert_eq!(st.follow, 10, "the state itself is unchanged");
    }

    #[test]
    fn batches_from_before_the_record_are_judged_by_number() {
        let mut st = super::super::startup::new_state();
        st.own_since = Some(5);
        assert!(st.holds_own(4, 100));
        assert!(!st.holds_own(5, 100));
    }
}
