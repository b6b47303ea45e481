//! Who a FUSE request is from (its process's name, from a small cache) and
//! its span: one place for what every request records.

use parking_lot::Mutex;

use fuser::Request;

use crate::store::{Origin, Process};

/// The span of one FUSE request, made in one place: the operation, the
/// kernel's request id, the inode it is about and the calling process (a
/// log line inside it says which request it belongs to).
pub(super) fn request_span(
    req: &Request,
    op: &'static str,
    ino: u64,
) -> tracing::span::EnteredSpan {
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
    let names = NAMES.get_or_init(Mutex::default);
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
