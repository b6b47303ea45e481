//! Who a FUSE request is from (its process's name, from a small cache) and
//! its span: one place for what every request records.

use std::cell::Cell;

use crate::lock::{rank, Mutex};

use fuser::Request;

use crate::store::{Origin, Process};

/// The span of one FUSE request, made in one place: the operation, the
/// kernel's request id, the inode it is about and the calling process (a
/// log line inside it says which request it belongs to).
pub(super) fn request_span(
    mount: u64,
    req: &Request,
    op: &'static str,
    ino: u64,
) -> tracing::span::EnteredSpan {
    SERVING.with(|s| s.set(mount));
    tracing::debug_span!("fuse", op, req = req.unique().0, ino, pid = req.pid()).entered()
}

pub(super) fn origin(req: &Request) -> Origin {
    Origin::Person {
        uid: req.uid(),
        pid: req.pid(),
        process: process_name(req.pid()),
    }
}

/// The name of process `pid` (its `comm`), from a small cache: a burst of
/// writes from one editor reads `/proc` once.
fn process_name(pid: u32) -> Process {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static NAMES: OnceLock<Mutex<HashMap<u32, Process>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| Mutex::new(rank::PROCESS_NAMES, HashMap::new()));
    if let Some(name) = names.lock().get(&pid) {
        return *name;
    }
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|n| Process::new(n.trim_end()))
        .unwrap_or_default();
    let mut names = names.lock();
    if names.len() >= 1024 {
        names.clear(); // pids are reused; a bounded cache stays fresh enough
    }
    names.insert(pid, name);
    name
}

thread_local! {
    /// The mount whose request this thread is serving (0: none). A change
    /// made on such a thread was made by that mount's kernel, which updated
    /// its own caches; every other mount must drop them (see `invalidate.rs`).
    static SERVING: Cell<u64> = const { Cell::new(0) };
}

/// The mount whose request this thread serves, 0 if none.
pub(super) fn serving() -> u64 {
    SERVING.with(Cell::get)
}

/// A number for a new mount, never 0 and never reused in this process.
pub(super) fn new_mount_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
