//! The persister: one thread that writes the store's changes to the data dir
//! in the order they were applied, sharing each durability barrier among all
//! the changes that queued up while the previous one ran (group commit).
//!
//! A batch goes to disk in two phases, so that a crash at any instant leaves
//! every file at its old or its new content:
//! 1. each new file content is written to `.memfs/tmp/` and written back to
//!    the device (no flush: see `fsops::write_back` for why that orders the
//!    data before the rename that follows);
//! 2. the batch's renames, moves-to-trash and mkdirs run in order; one
//!    barrier makes everything durable (a sync of each file and directory
//!    the batch wrote, and of its versions: see `Shared::barrier`); then
//!    every ticket of the batch is settled. One barrier per batch, however
//!    many changes it holds.
//!
//! Before all of that (phase 0), the batch's versions go to the history.
//!
//! When the disk refuses a step, that change and the rest of its batch are
//! handed to the store, which decides what memory becomes (see
//! `Store::recover`): an agent's change is taken back (its error says it did
//! not take effect), anything else stays in memory and is written again with
//! the next change. When only the barrier fails, the batch's changes are
//! kept and written again. Nothing is ever reloaded from disk.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::datadir::DataDir;
use super::fsops;
use crate::error::{DiskError, Error};
use crate::history::History;
use crate::path::MemPath;
use crate::store::{Change, ChangeOp, ChangeSink, Meta, Store, Ticket};

/// Counters of the persister's work, for benchmarks and `--stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub changes: u64,
    pub batches: u64,
    pub barriers: u64,
}

pub struct Persister {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    dir: DataDir,
    store: OnceLock<Weak<Store>>,
    history: OnceLock<Arc<History>>,
    changes: AtomicU64,
    batches: AtomicU64,
    barriers: AtomicU64,
    /// The disk refused the last batch (said once, until it takes one again).
    refusing: std::sync::atomic::AtomicBool,
    /// Barriers that were queued when a change ahead of them was kept in
    /// memory unsaved (see `Shared::taint_queued_barriers`).
    taint: Mutex<Taint>,
}

/// Every barrier with a sequence number below `below` was queued before a
/// change ahead of it was refused and kept in memory: it must not answer
/// that everything before it is durable.
#[derive(Default)]
struct Taint {
    below: u64,
    error: Option<DiskError>,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<(Change, Ticket)>,
    stop: bool,
}

impl Persister {
    /// Starts the persister thread for `dir`.
    pub fn start(dir: DataDir) -> io::Result<Persister> {
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            wake: Condvar::new(),
            dir,
            store: OnceLock::new(),
            history: OnceLock::new(),
            changes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            refusing: Default::default(),
            taint: Mutex::default(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("memfs-persist".into())
            .spawn(move || worker.run())?;
        Ok(Persister {
            shared,
            thread: Some(thread),
        })
    }

    /// The sink to build the store with.
    pub fn sink(&self) -> Arc<dyn ChangeSink> {
        self.shared.clone()
    }

    /// Lets the persister hand refused changes to `store` for recovery.
    pub fn attach(&self, store: &Arc<Store>) {
        let _ = self.shared.store.set(Arc::downgrade(store));
    }

    /// Records every batch's versions in `history` before writing it.
    pub fn keep_history(&self, history: Arc<History>) {
        let _ = self.shared.history.set(history);
    }

    pub fn data_dir(&self) -> &DataDir {
        &self.shared.dir
    }

    pub fn stats(&self) -> Stats {
        Stats {
            changes: self.shared.changes.load(Ordering::Relaxed),
            batches: self.shared.batches.load(Ordering::Relaxed),
            barriers: self.shared.barriers.load(Ordering::Relaxed),
        }
    }

    /// Writes out everything queued, then stops the thread.
    pub fn shutdown(&mut self) {
        self.shared.queue.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Persister {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl ChangeSink for Shared {
    fn submit(&self, change: &Change) -> Ticket {
        let ticket = Ticket::pending();
        let mut queue = self.queue.lock();
        if queue.stop {
            ticket.settle(Err(DiskError::new(
                "shutting down",
                io::Error::from_raw_os_error(libc::ESHUTDOWN),
            )
            .into()));
            return ticket;
        }
        queue.items.push_back((change.clone(), ticket.clone()));
        drop(queue);
        self.wake.notify_one();
        ticket
    }
}

/// Where one change's staged file contents wait in `.memfs/tmp/`.
type Staged = Vec<Option<String>>;

impl Shared {
    fn run(&self) {
        let mut usage_saved = std::time::Instant::now();
        loop {
            let batch: (Vec<Change>, Vec<Ticket>) = {
                let mut queue = self.queue.lock();
                while queue.items.is_empty() && !queue.stop {
                    self.wake.wait(&mut queue);
                }
                if queue.items.is_empty() {
                    return;
                }
                queue.items.drain(..).unzip()
            };
            self.commit(batch.0, batch.1);
            self.save_usage_now_and_then(&mut usage_saved);
        }
    }

    fn commit(&self, batch: Vec<Change>, tickets: Vec<Ticket>) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.changes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut failure: Option<DiskError> = None;

        // Phase 0: the batch's versions, kept before any of it is applied
        // (a change is never on disk without its version).
        let recorded = match self
            .history
            .get()
            .map(|h| h.record(&batch, &self.dir.memories))
        {
            Some(Err(e)) => {
                failure = Some(DiskError::new("keeping the history", e));
                None
            }
            Some(Ok(recorded)) => Some(recorded),
            None => None,
        };

        // Phase 1: stage contents, written back to the device (not flushed).
        let mut staged: Vec<Staged> = Vec::with_capacity(batch.len());
        let stageable = if failure.is_none() { &batch[..] } else { &[] };
        let mut written = Vec::new();
        for change in stageable {
            match self.stage(change, &mut written) {
                Ok(names) => staged.push(names),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }

        // Phase 2: put everything in place, in order, then one barrier.
        let mut applied = 0;
        let mut trash = Vec::new();
        let mut times = BTreeMap::new();
        for (change, names) in batch.iter().zip(&staged) {
            if let Err(e) = self.apply(change, names, &mut trash, &mut times) {
                failure = Some(e);
                break;
            }
            applied += 1;
        }
        self.discard(&staged[applied..]);
        if let (Some(history), Some(recorded)) = (self.history.get(), &recorded) {
            if applied < batch.len() {
                // Refused changes did not happen: nor did their versions. (If
                // even this append fails, the next start squares the rows
                // with the files.)
                let _ = history.void(recorded, applied);
            }
        }
        // Directory times last, once each: every entry op before them moved them.
        for (path, meta) in times {
            let _ = fsops::open_parent(&self.dir.memories, path, false)
                .and_then(|parent| fsops::set_times(&self.dir.memories, &parent, path, meta));
        }
        let durable = if applied > 0 {
            self.barrier(&batch[..applied], &written, recorded.as_ref())
        } else {
            Ok(())
        };

        // The store decides what memory becomes before anyone hears of a
        // failure: refused changes are taken back where they can be, and
        // everything else is written again later. Nothing is reloaded.
        self.say_how_the_disk_is(failure.as_ref().or(durable.as_ref().err()));
        let (done, refused) = batch.split_at(applied);
        let unconfirmed = if durable.is_err() { done } else { &[] };
        let undone = match (&failure, unconfirmed.is_empty()) {
            (None, true) => Vec::new(),
            _ => match self.store.get().and_then(Weak::upgrade) {
                Some(store) => store.recover(refused, unconfirmed),
                None => vec![false; refused.len()],
            },
        };
        let kept = undone.iter().any(|u| !u) || !unconfirmed.is_empty();
        if kept {
            let cause = failure.clone().or(durable.clone().err());
            self.taint_queued_barriers(cause.expect("kept only after a failure"));
        }
        let taint = self.taint.lock();
        for (i, ticket) in tickets.iter().enumerate() {
            let outcome = match (i.checked_sub(applied), &durable) {
                // A barrier promises that everything queued before it is on
                // disk: not so when a change ahead of it was kept unsaved
                // after the barrier was queued (it could not carry it).
                (None, Ok(())) if batch[i].ops.is_empty() && batch[i].seq < taint.below => {
                    Err(Error::Unsaved(taint.error.clone().expect("set with below")))
                }
                (None, Ok(())) => Ok(()),
                (None, Err(e)) => Err(Error::Unsaved(e.clone())),
                (Some(j), _) => {
                    let e = failure
                        .clone()
                        .expect("a change was left out only after a failure");
                    Err(if undone[j] {
                        Error::Disk(e)
                    } else {
                        Error::Unsaved(e)
                    })
                }
            };
            ticket.settle(outcome);
        }
        drop(taint);
        for name in trash {
            let _ = fsops::remove_tree(&self.dir.trash, &name);
        }
    }

    /// A change of this batch was refused (or not confirmed) and kept in
    /// memory: its paths are written again with the next change the store
    /// makes, but the barriers already queued were made before the store
    /// knew, so they do not carry them. Each of those answers `Unsaved`
    /// (the caller may ask again: a new barrier carries the paths).
    fn taint_queued_barriers(&self, cause: DiskError) {
        let queue = self.queue.lock();
        let Some((last, _)) = queue.items.back() else {
            return;
        };
        let mut taint = self.taint.lock();
        taint.below = taint.below.max(last.seq + 1);
        taint.error = Some(cause);
    }

    /// Logs a refusing disk once (not once per refused change), and when it
    /// takes writes again.
    fn say_how_the_disk_is(&self, refused: Option<&DiskError>) {
        let was = self.refusing.swap(refused.is_some(), Ordering::Relaxed);
        match (refused, was) {
            (Some(e), false) => tracing::warn!(
                "the disk refuses writes ({e}); agents' changes are taken back, people's kept in memory and written again later"
            ),
            (None, true) => tracing::info!("the disk takes writes again; everything kept in memory is written"),
            _ => {}
        }
    }

    /// Keeps the last reads of files (for expiry) at most once a minute.
    fn save_usage_now_and_then(&self, saved: &mut std::time::Instant) {
        if saved.elapsed() < std::time::Duration::from_secs(60) {
            return;
        }
        *saved = std::time::Instant::now();
        if let Some(store) = self.store.get().and_then(Weak::upgrade) {
            let _ = super::usage::save(&self.dir.state, &store.usage());
        }
    }

    /// Makes the batch durable: what it wrote, and no more. Each new file's
    /// data, each directory whose entries or attributes it changed, each
    /// node whose attributes it set, and the history's rows and contents,
    /// each synced on its own, so the cost is what memfs wrote, not what
    /// the whole file system holds dirty (other programs' writes included).
    /// A batch that touched very many nodes is flushed with one `syncfs`.
    fn barrier(
        &self,
        applied: &[Change],
        written: &[OwnedFd],
        recorded: Option<&crate::history::Recorded>,
    ) -> Result<(), DiskError> {
        self.barriers.fetch_add(1, Ordering::Relaxed);
        let flushing = |e| DiskError::new("flushing to stable storage", e);
        let nodes = nodes_to_sync(applied);
        if written.len() + nodes.len() > MAX_SYNCS {
            return fsops::sync_filesystem(&self.dir.memories).map_err(flushing);
        }
        for fd in written {
            fsops::sync_data(fd).map_err(flushing)?;
        }
        if let Some(recorded) = recorded {
            recorded.sync().map_err(flushing)?;
        }
        for path in &nodes {
            if let Some(fd) = fsops::open_to_sync(&self.dir.memories, path).map_err(flushing)? {
                fsops::sync_all(&fd).map_err(flushing)?;
            }
        }
        Ok(())
    }

    /// Writes each new file content of `change` to `.memfs/tmp/`.
    /// Their open files go into `written`, for the barrier.
    fn stage(&self, change: &Change, written: &mut Vec<OwnedFd>) -> Result<Staged, DiskError> {
        let mut names = Vec::with_capacity(change.ops.len());
        for (i, op) in change.ops.iter().enumerate() {
            let ChangeOp::Write { data, meta, .. } = op else {
                names.push(None);
                continue;
            };
            let name = format!("{}-{i}", change.seq);
            match fsops::write_new_file(&self.dir.tmp, &name, data, meta) {
                Ok(fd) => written.push(fd),
                Err(e) => {
                    let _ = rustix::fs::unlinkat(
                        &self.dir.tmp,
                        name.as_str(),
                        rustix::fs::AtFlags::empty(),
                    );
                    self.discard(std::slice::from_ref(&names));
                    return Err(DiskError::new("writing a file", e));
                }
            }
            names.push(Some(name));
        }
        Ok(names)
    }

    fn discard(&self, staged: &[Staged]) {
        for name in staged.iter().flatten().flatten() {
            let _ =
                rustix::fs::unlinkat(&self.dir.tmp, name.as_str(), rustix::fs::AtFlags::empty());
        }
    }

    /// Puts one change's steps in place under `memories/`.
    fn apply<'a>(
        &self,
        change: &'a Change,
        staged: &Staged,
        trash: &mut Vec<String>,
        times: &mut BTreeMap<&'a MemPath, &'a Meta>,
    ) -> Result<(), DiskError> {
        let root = &self.dir.memories;
        for (i, (op, tmp)) in change.ops.iter().zip(staged).enumerate() {
            match op {
                ChangeOp::Write { path, .. } => {
                    let tmp = tmp.as_deref().expect("a write is staged");
                    fsops::place(root, &self.dir.tmp, tmp, path)
                        .map_err(disk("renaming a file into place"))?;
                }
                ChangeOp::MakeDir { path, meta } => {
                    let parent =
                        fsops::open_parent(root, path, true).map_err(disk("making a directory"))?;
                    fsops::make_dir(&parent, leaf(path), meta)
                        .map_err(disk("making a directory"))?;
                }
                ChangeOp::Remove { path } => {
                    let name = format!("{}-{i}", change.seq);
                    match fsops::open_parent(root, path, false).and_then(|parent| {
                        fsops::rename_noreplace(&parent, leaf(path), &self.dir.trash, &name)
                    }) {
                        Ok(()) => trash.push(name),
                        // Already gone from the disk (or a file stands where a
                        // directory on its path would be): the removal holds.
                        Err(e)
                            if e.kind() == io::ErrorKind::NotFound
                                || e.raw_os_error() == Some(libc::ENOTDIR) => {}
                        Err(e) => return Err(DiskError::new("removing", e)),
                    }
                }
                ChangeOp::Rename { from, to, replace } => {
                    let from_dir =
                        fsops::open_parent(root, from, false).map_err(disk("renaming"))?;
                    let to_dir =
                        fsops::open_parent(root, to, true).map_err(disk("making a directory"))?;
                    let aside = format!("{}-{i}", change.seq);
                    let moved = if *replace {
                        // One atomic step: a crash leaves the old or the new node at
                        // `to`, never none.
                        fsops::replace(
                            &from_dir,
                            leaf(from),
                            &to_dir,
                            leaf(to),
                            &self.dir.trash,
                            &aside,
                        )
                    } else {
                        fsops::rename_noreplace(&from_dir, leaf(from), &to_dir, leaf(to))
                            .map(|()| false)
                    };
                    match moved {
                        Ok(true) => trash.push(aside),
                        Ok(false) => {}
                        // The source lives in memory only (a FIFO, socket or device
                        // node): the target must be gone from the disk, which is all.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            if *replace
                                && fsops::rename_noreplace(
                                    &to_dir,
                                    leaf(to),
                                    &self.dir.trash,
                                    &aside,
                                )
                                .is_ok()
                            {
                                trash.push(aside);
                            }
                        }
                        Err(e) => return Err(DiskError::new("renaming", e)),
                    }
                }
                ChangeOp::Exchange { a, b } => {
                    let a_dir = fsops::open_parent(root, a, false).map_err(disk("renaming"))?;
                    let b_dir = fsops::open_parent(root, b, false).map_err(disk("renaming"))?;
                    match fsops::exchange(&a_dir, leaf(a), &b_dir, leaf(b)) {
                        // One side lives in memory only: the other just moves.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            let moved = fsops::rename_noreplace(&a_dir, leaf(a), &b_dir, leaf(b))
                                .or_else(|_| {
                                    fsops::rename_noreplace(&b_dir, leaf(b), &a_dir, leaf(a))
                                });
                            match moved {
                                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                                other => other.map_err(disk("renaming"))?,
                            }
                        }
                        other => other.map_err(disk("renaming"))?,
                    }
                }
                ChangeOp::Symlink { path, target, meta } => {
                    let parent =
                        fsops::open_parent(root, path, true).map_err(disk("making a directory"))?;
                    fsops::symlink(&parent, leaf(path), target, meta)
                        .map_err(disk("making a symbolic link"))?;
                }
                ChangeOp::SetTimes { path, meta } => {
                    times.insert(path, meta);
                }
                ChangeOp::SetMeta { path, meta } if path.is_root() => {
                    fsops::set_dir_meta(root, meta).map_err(disk("setting attributes"))?;
                }
                ChangeOp::SetMeta { path, meta } => {
                    let parent = fsops::open_parent(root, path, false)
                        .map_err(disk("setting attributes"))?;
                    match fsops::set_meta(&parent, leaf(path), meta) {
                        Ok(()) => {}
                        // Not on disk (yet, or any more): its next write carries the attributes.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(DiskError::new("setting attributes", e)),
                    }
                }
            }
        }
        Ok(())
    }
}

/// Past this many files and directories to sync, a batch is flushed with one
/// `syncfs` instead (cheaper than thousands of calls).
const MAX_SYNCS: usize = 256;

/// The directories and nodes a batch's ops changed on disk: the parent of
/// every entry made, moved or removed (and, for what was made, every
/// directory above it, some of which it may have made), and every node
/// whose attributes were set.
fn nodes_to_sync(changes: &[Change]) -> std::collections::BTreeSet<MemPath> {
    let mut out = std::collections::BTreeSet::new();
    let with_ancestors = |out: &mut std::collections::BTreeSet<MemPath>, path: &MemPath| {
        let mut at = path.parent();
        while let Some(dir) = at {
            at = dir.parent();
            if !out.insert(dir) {
                break; // its ancestors are in already
            }
        }
    };
    for op in changes.iter().flat_map(|c| &c.ops) {
        match op {
            ChangeOp::Write { path, .. } | ChangeOp::Symlink { path, .. } => {
                with_ancestors(&mut out, path)
            }
            ChangeOp::MakeDir { path, .. } => {
                with_ancestors(&mut out, path);
                out.insert(path.clone());
            }
            ChangeOp::Remove { path } => out.extend(path.parent()),
            ChangeOp::Rename { from, to, .. } => {
                out.extend(from.parent());
                with_ancestors(&mut out, to);
            }
            ChangeOp::Exchange { a, b } => {
                out.extend(a.parent());
                out.extend(b.parent());
            }
            ChangeOp::SetMeta { path, .. } | ChangeOp::SetTimes { path, .. } => {
                out.insert(path.clone());
            }
        }
    }
    out
}

fn leaf(path: &MemPath) -> &str {
    path.file_name().expect("changes never name the root")
}

fn disk(doing: &'static str) -> impl Fn(io::Error) -> DiskError {
    move |e| DiskError::new(doing, e)
}
