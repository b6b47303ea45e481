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

/// The kernel gives the calling thread's id: the change is credited to
/// its process (the thread group), by the process's name, not to a worker
/// thread's (Claude Code writes from threads named `Bun Pool 0`).
pub(super) fn origin(req: &Request) -> Origin {
    let (pid, process) = process_of(req.pid());
    Origin::Person {
        uid: req.uid(),
        pid,
        process,
    }
}

/// The process (the thread group) of the calling thread: what a read is
/// noted under, as the change a save makes is credited to it.
pub(super) fn process_pid(req: &Request) -> u32 {
    process_of(req.pid()).0
}

/// The process thread `tid` belongs to and its name (its `comm`), from a
/// small cache: a burst of writes from one editor reads `/proc` once.
fn process_of(tid: u32) -> (u32, Process) {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static NAMES: OnceLock<Mutex<HashMap<u32, (u32, Process)>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| Mutex::new(rank::PROCESS_NAMES, HashMap::new()));
    if let Some(known) = names.lock().get(&tid) {
        return *known;
    }
    let pid = thread_group(tid).unwrap_or(tid);
    let name = Process::of_pid(pid).unwrap_or_default();
    let mut names = names.lock();
    if names.len() >= 1024 {
        names.clear(); // pids are reused; a bounded cache stays fresh enough
    }
    names.insert(tid, (pid, name));
    (pid, name)
}

/// The thread group (the process) of thread `tid`: `Tgid` in its status.
fn thread_group(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    tgid_in(&status)
}

fn tgid_in(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_changes_are_its_processs() {
        assert_eq!(
            tgid_in("Name:\tBun Pool 0\nUmask:\t0022\nState:\tS\nTgid:\t4242\nPid:\t4250\n"),
            Some(4242)
        );
        assert_eq!(tgid_in("Name:\tx\n"), None);
        // A live thread of this test: its changes are this process's.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let me = std::fs::read_link("/proc/thread-self").unwrap();
            let tid: u32 = me.file_name().unwrap().to_str().unwrap().parse().unwrap();
            tx.send(tid).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, std::process::id());
        let (pid, _) = process_of(tid);
        assert_eq!(pid, std::process::id());
        done_tx.send(()).unwrap();
        thread.join().unwrap();
    }
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
