//! The rewrites of a journal's segments (compaction, redaction): one at a
//! time, counted, and the compaction asked for, running or stopped. A part
//! `writer::Core` holds (generic over it: `C` is the journal a compaction
//! runs on).

use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::lock::{rank, Mutex};

#[derive(Default)]
pub struct Compaction {
    pub asked: bool,
    pub stop: bool,
    pub last: Option<std::time::Instant>,
}

/// The rewrites of a journal's segments: one at a time, counted, and the
/// compaction asked for, running or stopped.
pub struct Upkeep<C> {
    /// Held while segments are rewritten (compaction, redaction).
    pub rewriting: Mutex<()>,
    /// Counts rewrites, as they begin and as they end: a reader that
    /// follows the journal by offset reads it all again when it moved.
    pub rewrites: AtomicU64,
    /// Counts redactions done since the journal opened: what derives from
    /// contents (the search index) rewrites itself when it moved.
    pub redactions: AtomicU64,
    /// Whether a compaction is asked for, stopping; and when it last ran.
    pub compact: Mutex<Compaction>,
    /// Held by the compaction that runs (on the background pool); the
    /// shutdown takes it to wait for one.
    pub compacting: Mutex<()>,
    /// The compaction a job runs (`journal::compact::run_once`, set at open).
    pub compaction: std::sync::OnceLock<fn(&C)>,
    /// A rewrite wants or holds the journal's state with no batch in
    /// flight: no shared batch begins meanwhile (see `gate.rs`). An atomic,
    /// not a lock.
    pub wants_state: AtomicBool,
}

impl<C> Upkeep<C> {
    pub fn new() -> Self {
        Upkeep {
            rewriting: Mutex::new(rank::REWRITING, ()),
            rewrites: AtomicU64::new(0),
            redactions: AtomicU64::new(0),
            compact: Mutex::new(rank::COMPACT, Compaction::default()),
            compacting: Mutex::new(rank::COMPACTING, ()),
            compaction: std::sync::OnceLock::new(),
            wants_state: AtomicBool::new(false),
        }
    }
}
