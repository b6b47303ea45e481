//! The batch in flight: the committer lets the journal's state go while a
//! shared store's round trips run (WRITE, COMMIT, a lost answer's lookup)
//! and while it waits for the checkpointer to free room, with the batch's
//! records already in the view. Meanwhile readers (the history, the
//! follower) go on; a rewrite of segments (compaction, redaction) waits,
//! because it judges and changes the view and the contents that the batch
//! may still give back; the checkpointer's repair writes nothing from a
//! view that is ahead of the journal.
//!
//! Two marks, both taken and read under nothing but the state's lock or
//! an atomic: `State::in_flight` (set by the committer alone, holding
//! `leader`) and `Upkeep::wants_state` (set by the one rewrite, holding
//! `rewriting`). A rewrite waits for the batch in flight; the committer
//! begins no new shared batch while a rewrite wants the state, so that a
//! steady load cannot starve it.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::state::State;
use super::writer::Core;
use crate::lock::MutexGuard;

/// How often a waiter looks again (a poll, as `close_the_open_segment`'s:
/// it costs only while a rewrite and a batch in flight meet).
const POLL: Duration = Duration::from_millis(1);

/// The state's lock held by a rewrite, with no batch in flight; while it
/// lives, no shared batch begins (see [`Core::give_way`]).
pub(super) struct Settled<'a> {
    st: MutexGuard<'a, State>,
    wanted: &'a AtomicBool,
}

impl Deref for Settled<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl DerefMut for Settled<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

impl Drop for Settled<'_> {
    fn drop(&mut self) {
        self.wanted.store(false, Ordering::SeqCst);
    }
}

/// Clears the in-flight mark if the round trips unwind (a panic inside a
/// transaction), so that no rewrite waits for a batch that is gone.
struct Landing<'a> {
    core: &'a Core,
    armed: bool,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.core.state.lock().in_flight = None;
        }
    }
}

impl Core {
    /// Lets the state go while `f` runs, with `batch`'s records in the
    /// view, marked in flight; then takes the state again and clears the
    /// mark. The committer's alone (it holds `leader`).
    pub(super) fn let_go<'a, R>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        batch: u64,
        f: impl FnOnce() -> R,
    ) -> (MutexGuard<'a, State>, R) {
        debug_assert!(st.in_flight.is_none(), "one batch in flight at a time");
        st.in_flight = Some(batch);
        drop(st);
        let mut landing = Landing {
            core: self,
            armed: true,
        };
        let r = f();
        landing.armed = false;
        let mut st = self.state.lock();
        debug_assert_eq!(st.in_flight, Some(batch), "only the committer marks");
        st.in_flight = None;
        (st, r)
    }

    /// The state's lock for a rewrite (its caller holds `rewriting`, so one
    /// flag is enough) once no batch is in flight; the committer begins no
    /// new shared batch until the returned hold ends.
    pub(super) fn settled_state(&self) -> Settled<'_> {
        self.upkeep.wants_state.store(true, Ordering::SeqCst);
        let mut st = self.state.lock();
        while st.in_flight.is_some() {
            drop(st);
            std::thread::sleep(POLL);
            st = self.state.lock();
        }
        Settled {
            st,
            wanted: &self.upkeep.wants_state,
        }
    }

    /// Before a shared batch begins (holding `leader`, with no transaction
    /// open and no head held): waits while a rewrite wants or holds the
    /// state.
    pub(super) fn give_way(&self) {
        while self.upkeep.wants_state.load(Ordering::SeqCst) {
            std::thread::sleep(POLL);
        }
    }
}
