//! When the journal is past its retention (`--history-keep AGE,SIZE`) and
//! the compactor should run: asked by the writer as batches are written.

use std::time::{Duration, Instant, SystemTime};

use super::Keep;

/// The least time between two compactions for size.
const EVERY: Duration = Duration::from_secs(5);

/// Whether the journal is past what `keep` allows (and may be compacted now).
pub(super) fn due(st: &super::state::State, keep: &Keep, last: Option<Instant>) -> bool {
    let history: u64 = st
        .log
        .segments
        .values()
        .map(|s| s.bytes.saturating_sub(s.state_bytes))
        .sum();
    // Far past the budget: whatever the time (a fast writer must not outrun it).
    if history > keep.bytes.saturating_mul(4) + (1 << 20) {
        return true;
    }
    if last.is_some_and(|t| t.elapsed() < EVERY) {
        return false;
    }
    if history > keep.bytes {
        return true;
    }
    let cutoff = cutoff_text(keep.age);
    st.log
        .segments
        .values()
        .filter_map(|s| s.first_time.as_deref())
        .any(|t| t < cutoff.as_str())
}

pub(super) fn cutoff_text(age: Duration) -> String {
    let cutoff = SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    humantime::format_rfc3339_millis(cutoff).to_string()
}
