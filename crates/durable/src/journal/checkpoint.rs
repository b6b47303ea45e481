//! The checkpointer: brings the plain files (`DIR/memories`, the SDK's
//! layout) up to date from durable journal batches, behind the
//! acknowledgement and off the write path, then says how far it got.
//!
//! It waits a moment after the first batch it is given (`checkpoint_delay`)
//! and then applies all it holds at once: a file written many times is
//! written once. Each new content goes to `.memfs/tmp/`, is written back to
//! the device, and is renamed into place (a reader of the plain files sees
//! each file at its old or its new content); a deleted tree is moved out in
//! one rename. Then every file and directory it changed is flushed, and
//! only then does it report the batch it reached: the journal writes that
//! down, and a later start replays only what came after it.
//!
//! When the disk refuses a step it tries again later, from that step; the
//! journal holds everything meanwhile (and a start replays it), so nothing
//! is lost and nobody is told: the plain files are only behind.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::OsStr;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

pub use super::handoff::Msg;
use super::stuck::Stuck;
use super::writer::Core;
use crate::error::DiskError;
use crate::lock::{rank, Mutex};
use crate::path::MemPath;
use crate::persist::fsops;
use crate::persist::storage::{Dir, File};
use crate::store::{Change, ChangeOp, Meta};

/// The plain files' directories.
#[derive(Clone)]
pub struct Files {
    pub memories: Dir,
    pub tmp: Dir,
    pub trash: Dir,
    /// What memfs last wrote or took in, path by path (once armed: the
    /// plain files are then a door, and a write never goes over a change
    /// of someone else's).
    pub known: Arc<crate::persist::known::Known>,
}

impl Files {
    /// Removes `name` from `.memfs/tmp` (a staged copy), if it is there.
    fn unstage_name(&self, name: &str) {
        let _ = self.tmp.unlink(OsStr::new(name), false);
    }
}

/// Past this many files and directories to flush, one `syncfs` instead.
const MAX_SYNCS: usize = 1024;

/// What the checkpointer carries from one turn of its loop to the next.
struct Turns {
    held: Vec<(u64, Vec<Change>)>,
    held_bytes: u64,
    /// When the first batch held came (or the last failed pass).
    since: Option<Instant>,
    retry: Duration,
    failing: bool,
    progress: Progress,
    stuck: Stuck,
    /// When the stuck paths are tried again with no batch to carry them.
    repair_at: Option<Instant>,
    repair_every: Duration,
}

/// The checkpointer of one journal: no thread of its own, but steps on the
/// checkpoint pool (`crate::pool::checkpoint`). It waits for batches (and a
/// moment more), brings the plain files up to date with all it holds at
/// once, backs off when the disk refuses, and answers those who asked to
/// be told.
pub struct Checkpointer {
    files: Files,
    delay: Duration,
    journal: Weak<Core>,
    me: Weak<Checkpointer>,
    /// Messages not taken in yet, each with when it came.
    inbox: Mutex<VecDeque<(Instant, Msg)>>,
    /// What carries from one step to the next; held by the step that runs
    /// (another step that finds it held leaves a note in `again`).
    turns: Mutex<Turns>,
    again: AtomicBool,
    /// The earliest step scheduled and not begun.
    next: Mutex<Option<Instant>>,
    stopped: AtomicBool,
}

impl Checkpointer {
    pub fn new(files: Files, journal: &Arc<Core>, delay: Duration) -> Arc<Checkpointer> {
        let mut t = Turns {
            held: Vec::new(),
            held_bytes: 0,
            since: None,
            retry: Duration::from_millis(100),
            failing: false,
            progress: Progress::default(),
            stuck: Stuck::from_paths(&journal.handoff.stuck.lock()),
            repair_at: None,
            repair_every: REPAIR_FIRST,
        };
        let repair = !t.stuck.is_empty();
        if repair {
            t.repair_at = Some(Instant::now());
        }
        let ck = Arc::new_cyclic(|me| Checkpointer {
            files,
            delay,
            journal: Arc::downgrade(journal),
            me: me.clone(),
            inbox: Mutex::new(rank::CHECKPOINT_INBOX, VecDeque::new()),
            turns: Mutex::new(rank::CHECKPOINT_TURNS, t),
            again: AtomicBool::new(false),
            next: Mutex::new(rank::CHECKPOINT_NEXT, None),
            stopped: AtomicBool::new(false),
        });
        if repair {
            ck.step_at(Instant::now());
        }
        ck
    }

    /// Schedules a step at `when`, unless one is due by then already.
    fn step_at(&self, when: Instant) {
        {
            let mut next = self.next.lock();
            if next.is_some_and(|at| at <= when) {
                return;
            }
            *next = Some(when);
        }
        let me = self.me.clone();
        crate::pool::checkpoint().at(
            when,
            Box::new(move || {
                if let Some(ck) = me.upgrade() {
                    ck.step();
                }
            }),
        );
    }

    /// Takes in the inbox, makes a pass when one is due, answers; then
    /// schedules the next step when one will be due.
    fn step(&self) {
        {
            let mut next = self.next.lock();
            if next.is_some_and(|at| at <= Instant::now()) {
                *next = None;
            }
        }
        let Some(journal) = self.journal.upgrade() else {
            return;
        };
        let Some(mut t) = self.turns.try_lock() else {
            // The step that holds it looks at the inbox again.
            self.again.store(true, Ordering::Release);
            return;
        };
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        loop {
            self.again.store(false, Ordering::Release);
            let mut answers: Vec<SyncSender<bool>> = Vec::new();
            let mut stop = false;
            let taken: Vec<(Instant, Msg)> = self.inbox.lock().drain(..).collect();
            for (came, msg) in taken {
                if let Msg::Batch { .. } = msg {
                    t.since.get_or_insert(came);
                }
                take(msg, &mut t, &mut answers, &mut stop);
            }
            let now = Instant::now();
            let due = next_wait(&t, self.delay).is_some_and(|d| d.is_zero());
            let repair_due = t.repair_at.is_some_and(|at| at <= now);
            let asked = !answers.is_empty();
            if (!t.held.is_empty() && (due || asked || stop))
                || repair_due
                || (!t.stuck.is_empty() && asked)
            {
                pass(&self.files, &journal, &mut t);
            }
            for tx in answers {
                let _ = tx.send(!t.failing);
            }
            if stop {
                self.stopped.store(true, Ordering::Release);
                return;
            }
            if !self.again.load(Ordering::Acquire) && self.inbox.lock().is_empty() {
                break;
            }
        }
        let wait = next_wait(&t, self.delay);
        drop(t);
        if !self.inbox.lock().is_empty() || self.again.load(Ordering::Acquire) {
            self.step_at(Instant::now());
        } else if let Some(d) = wait {
            self.step_at(Instant::now() + d);
        }
    }
}

impl super::handoff::Inbox for Checkpointer {
    /// Hands the checkpointer a message; false once it has stopped.
    fn send(&self, msg: Msg) -> bool {
        if self.stopped.load(Ordering::Acquire) {
            return false;
        }
        let when = match msg {
            Msg::Batch { .. } => Instant::now() + self.delay,
            Msg::Flush(_) | Msg::Stop(_) => Instant::now(),
        };
        self.inbox.lock().push_back((Instant::now(), msg));
        self.step_at(when);
        true
    }

    /// Waits for a step that runs now to end (at shutdown, after `Stop`).
    fn quiet(&self) {
        drop(self.turns.lock());
    }
}

/// How long to wait for a message before a pass is due (`None`: none is).
fn next_wait(t: &Turns, delay: Duration) -> Option<Duration> {
    let due = [
        t.since.map(|s| s + if t.failing { t.retry } else { delay }),
        t.repair_at,
    ];
    due.into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(Instant::now()))
}

/// How soon stuck paths are first tried again, and at most how seldom.
const REPAIR_FIRST: Duration = Duration::from_secs(1);
const REPAIR_LAST: Duration = Duration::from_secs(30);

/// Takes one message that is not a batch's.
fn take(msg: Msg, t: &mut Turns, answers: &mut Vec<SyncSender<bool>>, stop: &mut bool) {
    match msg {
        Msg::Batch {
            batch,
            changes,
            plain,
        } => {
            t.held.push((batch, changes));
            t.held_bytes += plain;
        }
        Msg::Flush(tx) => answers.push(tx),
        Msg::Stop(tx) => {
            *stop = true;
            answers.push(tx);
        }
    }
}

/// One pass: the stuck paths tried again, then every batch held applied;
/// says how far it got (with the paths it left behind), or backs off.
fn pass(files: &Files, journal: &Core, t: &mut Turns) {
    let was_stuck = t.stuck.clone();
    let done = repair(files, journal, &mut t.stuck).and_then(|()| match t.held.is_empty() {
        true => Ok(()),
        false => apply(files, &t.held, &mut t.progress, Wait::OwnData, &mut t.stuck),
    });
    match done {
        Ok(()) => {
            report(journal, t);
            say_what_changed(&was_stuck, &t.stuck);
            // Written down once the journal is idle a while.
            journal.idle_soon();
            journal
                .handoff
                .unwritten
                .fetch_sub(t.held_bytes, Ordering::AcqRel);
            t.held_bytes = 0;
            t.held.clear();
            t.progress = Progress::default();
            t.since = None;
            if t.failing {
                tracing::info!("the plain files are current again");
            }
            t.failing = false;
            t.retry = Duration::from_millis(100);
            match t.stuck.is_empty() {
                true => {
                    t.repair_at = None;
                    t.repair_every = REPAIR_FIRST;
                }
                false => {
                    t.repair_at = Some(Instant::now() + t.repair_every);
                    t.repair_every = (t.repair_every * 2).min(REPAIR_LAST);
                }
            }
        }
        Err(e) => {
            if !t.failing {
                tracing::warn!(
                    "the plain files could not be brought up to date ({e}); the journal holds every change, and memfs tries again"
                );
            }
            t.failing = true;
            t.since = Some(Instant::now());
            t.retry = (t.retry * 2).min(Duration::from_secs(2));
        }
    }
}

/// Tells the journal how far a pass got: the stuck paths first, under
/// their lock, then the batch they go with (a frame reads both under it).
fn report(journal: &Core, t: &Turns) {
    let handoff = &journal.handoff;
    let mut stuck = handoff.stuck.lock();
    *stuck = t.stuck.list();
    *handoff.stuck_reasons.lock() = t
        .stuck
        .reasons()
        .map(|(p, why)| format!("{p} ({why})"))
        .collect();
    if let Some((last, _)) = t.held.last() {
        handoff.checkpointed.fetch_max(*last, Ordering::AcqRel);
    }
}

/// Logs the paths that got stuck and those that came free.
fn say_what_changed(was: &Stuck, now: &Stuck) {
    for (path, why) in now.reasons() {
        if !was.holds(path) {
            tracing::warn!(
                "the plain file {path} cannot be written ({why}); the journal keeps it, nothing else waits for it, and memfs tries again"
            );
        }
    }
    for (path, _) in was.reasons() {
        if !now.holds(path) {
            tracing::info!("the plain file {path} is current again");
        }
    }
}

/// Brings the stuck paths to what the journal says now (see `stuck.rs`);
/// those still refused stay stuck. Not while a frame waits for its flush,
/// nor while a batch is in flight (the plain files are never ahead of what
/// the journal holds).
fn repair(files: &Files, journal: &Core, stuck: &mut Stuck) -> io::Result<()> {
    if stuck.is_empty() {
        return Ok(());
    }
    let (tree, _) = crate::persist::load::load(&files.memories)?;
    let held = stuck.paths();
    let ops = {
        let st = journal.state.lock();
        if st.log.deferred.is_some() || st.in_flight.is_some() {
            return Ok(());
        }
        let content = |st: &super::state::State, sha: &crate::digest::Sha| {
            super::history::content_of(&journal.dir, st, sha)
                .ok()
                .flatten()
        };
        super::startup::repair_ops(&st, &held, &tree, &content)
    };
    let change = Change::of_memfs(leave_what_is_in_the_way(ops, &held));
    let mut again = Stuck::default();
    apply(
        files,
        &[(0, vec![change])],
        &mut Progress::default(),
        Wait::OwnData,
        &mut again,
    )?;
    *stuck = again;
    Ok(())
}

/// While memfs runs, a repair does not take away what stands where a stuck
/// path's directory should be (a symlink or a file someone put there):
/// that is what the path is stuck on, and it is theirs. Their Remove and
/// MakeDir go; the write below fails as the first try did, and the path
/// stays stuck, named, until they move it (then the directory is made
/// and the file written). Only a start replaces it (the journal decides
/// the tail, `startup::square`).
fn leave_what_is_in_the_way(ops: Vec<ChangeOp>, stuck: &[MemPath]) -> Vec<ChangeOp> {
    let above = |p: &MemPath| stuck.iter().any(|s| s != p && s.starts_with(p));
    let made: Vec<MemPath> = ops
        .iter()
        .filter_map(|op| match op {
            ChangeOp::MakeDir { path, .. } if above(path) => Some(path.clone()),
            _ => None,
        })
        .collect();
    let in_the_way: Vec<MemPath> = ops
        .iter()
        .filter_map(|op| match op {
            ChangeOp::Remove { path } if made.contains(path) => Some(path.clone()),
            _ => None,
        })
        .collect();
    ops.into_iter()
        .filter(|op| match op {
            ChangeOp::Remove { path } | ChangeOp::MakeDir { path, .. } => {
                !in_the_way.contains(path)
            }
            _ => true,
        })
        .collect()
}

/// How far a pass that failed got: ops done are not done again.
#[derive(Default)]
struct Progress {
    /// Ops of the held batches already applied, in order.
    done: usize,
    /// What those ops changed that is not flushed yet.
    sync: SyncSet,
    trash: Vec<String>,
}

/// What a pass changed and must flush: files by their current path (moved
/// along with renames), and directories whose entries or times changed.
#[derive(Default)]
struct SyncSet {
    files: BTreeSet<MemPath>,
    nodes: BTreeSet<MemPath>,
}

impl SyncSet {
    fn moved(&mut self, from: &MemPath, to: &MemPath) {
        for set in [&mut self.files, &mut self.nodes] {
            let under: Vec<MemPath> = set
                .range(from.clone()..)
                .take_while(|p| p.starts_with(from))
                .cloned()
                .collect();
            for p in under {
                set.remove(&p);
                set.insert(p.rebase(from, to));
            }
        }
    }

    fn removed(&mut self, at: &MemPath) {
        for set in [&mut self.files, &mut self.nodes] {
            let under: Vec<MemPath> = set
                .range(at.clone()..)
                .take_while(|p| p.starts_with(at))
                .cloned()
                .collect();
            for p in under {
                set.remove(&p);
            }
        }
    }

    fn with_ancestors(&mut self, path: &MemPath) {
        let mut at = path.parent();
        while let Some(dir) = at {
            at = dir.parent();
            if !self.nodes.insert(dir) {
                break;
            }
        }
    }
}

/// Brings the plain files up to date with `held`, from the op `progress`
/// reached; then flushes everything the pass changed.
/// What a pass of many new files waits for before renaming them in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Each file's own data (while serving: never a neighbour's).
    OwnData,
    /// The whole file system at once, with one `syncfs` (at start-up, before
    /// anything is served: the fastest way through 100,000 new files).
    WholeDisk,
}

fn apply(
    files: &Files,
    held: &[(u64, Vec<Change>)],
    progress: &mut Progress,
    wait: Wait,
    stuck: &mut Stuck,
) -> io::Result<()> {
    let ops: Vec<(u64, &ChangeOp)> = held
        .iter()
        .flat_map(|(b, changes)| {
            changes
                .iter()
                .flat_map(move |c| c.ops.iter().map(move |op| (*b, op)))
        })
        .collect();
    let skip = superseded(&ops);
    let staged = stage_in_bulk(files, &ops, &skip, progress.done, wait)?;
    let mut times: BTreeMap<MemPath, Meta> = BTreeMap::new();
    for (i, (batch, op)) in ops.iter().enumerate().skip(progress.done) {
        if stuck.blocks(op) {
            // It waits for a stuck path, and is part of its repair.
            stuck.add(op, "it waits for a path the plain files refused");
            unstage(files, &ops, staged.get(&i).into_iter());
            progress.done = i + 1;
            continue;
        }
        let stage = format!("{batch}-{i}");
        let step = Step {
            op,
            skip: skip[i],
            stage: &stage,
            staged: staged.contains(&i),
        };
        if let Err((e, doing)) = apply_step(files, &step, progress, &mut times) {
            if super::stuck::disk_wide(&e) {
                // What was staged and not placed goes (staged again next time).
                unstage(files, &ops, staged.iter().filter(|&&j| j >= i));
                return Err(io::Error::new(e.kind(), format!("{doing}: {e}")));
            }
            stuck.add(op, &format!("{doing}: {}", crate::units::describe_io(&e)));
        }
        progress.done = i + 1;
    }
    // Directory times last, once each: the entry ops before moved them.
    for (path, meta) in &times {
        let _ = fsops::open_parent(&files.memories, path, false)
            .and_then(|parent| fsops::set_times(&files.memories, &parent, path, meta));
    }
    flush(files, &progress.sync, stuck)?;
    for name in std::mem::take(&mut progress.trash) {
        let _ = fsops::remove_tree(&files.trash, &name);
    }
    Ok(())
}

/// One op of a pass, as the pass found it.
struct Step<'a> {
    op: &'a ChangeOp,
    skip: Skip,
    /// Its name in `.memfs/tmp` (for a write).
    stage: &'a str,
    /// Its content is staged there already (a bulk pass).
    staged: bool,
}

/// Applies one op of a pass (or, for a write skipped, makes its
/// directories); an error comes with what it was doing.
fn apply_step(
    files: &Files,
    step: &Step<'_>,
    progress: &mut Progress,
    times: &mut BTreeMap<MemPath, Meta>,
) -> Result<(), (io::Error, &'static str)> {
    match (step.skip, step.op) {
        (Skip::No, op) => apply_op(files, op, step.stage, step.staged, progress, times)
            .map_err(|e| (e, doing(op))),
        // A write skipped (superseded, or its file removed later) still
        // made its directories in memory: they are made here too, so that
        // the ops after it (a rename out of such a directory, say) find them.
        // (The map of what memfs left on disk held across and told, as for
        // a write placed: the files door never finds these directories
        // before the map has them, nor takes them for someone else's and
        // brings them back into memory.)
        (_, ChangeOp::Write { path, .. }) if path.parent().is_some_and(|p| !p.is_root()) => {
            let mut known = files.known.armed().then(|| files.known.lock());
            fsops::open_parent(&files.memories, path, true)
                .map(|_| {
                    if let Some(known) = known.as_mut() {
                        known.dirs_to(path);
                    }
                    progress.sync.with_ancestors(path)
                })
                .map_err(|e| (e, "making a directory"))
        }
        _ => Ok(()),
    }
}

/// A pass writing more files than this stages them all first, with the
/// device writing each while the next ones are written, before the first is
/// renamed into place (rather than waiting for each file's data in turn: a
/// start-up that replays 100,000 new files, say). While serving, each file's
/// own data is waited for, never the whole disk's (a `syncfs` would wait for
/// every other program's dirty pages too: stalls of many milliseconds under
/// a neighbour's writes); at start-up one `syncfs` is the faster way.
const BULK: usize = 256;

/// Staged files whose write-back runs at once (and descriptors held open).
const IN_FLIGHT: usize = 256;

/// For a pass of many writes: each new content staged in `.memfs/tmp/`
/// (not yet written back), then all of them made durable at once. Returns
/// the indices of the ops staged.
fn stage_in_bulk(
    files: &Files,
    ops: &[(u64, &ChangeOp)],
    skip: &[Skip],
    from: usize,
    wait: Wait,
) -> io::Result<std::collections::HashSet<usize>> {
    let mut staged = std::collections::HashSet::new();
    let writes = (from..ops.len())
        .filter(|&i| skip[i] == Skip::No && matches!(ops[i].1, ChangeOp::Write { .. }))
        .count();
    if writes <= BULK {
        return Ok(staged);
    }
    let drop_staged =
        |staged: &std::collections::HashSet<usize>| unstage(files, ops, staged.iter());
    let flushing =
        |e: io::Error| io::Error::new(e.kind(), format!("flushing to stable storage: {e}"));
    let mut in_flight: std::collections::VecDeque<File> = std::collections::VecDeque::new();
    for (i, (batch, op)) in ops.iter().enumerate().skip(from) {
        let (Skip::No, ChangeOp::Write { data, meta, .. }) = (skip[i], op) else {
            continue;
        };
        let name = format!("{batch}-{i}");
        match fsops::write_new_file_unsynced(files.tmp.as_ref(), &name, data, meta) {
            Ok(file) if wait == Wait::WholeDisk => drop(file),
            Ok(file) => {
                file.start_write_back();
                in_flight.push_back(file);
            }
            Err(e) => {
                files.unstage_name(&name);
                drop_staged(&staged);
                return Err(io::Error::new(e.kind(), format!("writing a file: {e}")));
            }
        }
        staged.insert(i);
        if in_flight.len() >= IN_FLIGHT {
            let oldest = in_flight.pop_front().expect("a file in flight");
            if let Err(e) = fsops::wait_staged(&oldest) {
                drop_staged(&staged);
                return Err(flushing(e));
            }
        }
    }
    for file in in_flight {
        if let Err(e) = fsops::wait_staged(&file) {
            drop_staged(&staged);
            return Err(flushing(e));
        }
    }
    if wait == Wait::WholeDisk {
        if let Err(e) = fsops::sync_filesystem(files.tmp.as_ref()) {
            drop_staged(&staged);
            return Err(flushing(e));
        }
    }
    Ok(staged)
}

/// Removes the staged copies of the ops at `staged` from `.memfs/tmp/`.
fn unstage<'a>(files: &Files, ops: &[(u64, &ChangeOp)], staged: impl Iterator<Item = &'a usize>) {
    for &j in staged {
        files.unstage_name(&format!("{}-{j}", ops[j].0));
    }
}

fn doing(op: &ChangeOp) -> &'static str {
    match op {
        ChangeOp::Write { .. } => "writing a file",
        ChangeOp::MakeDir { .. } => "making a directory",
        ChangeOp::Remove { .. } => "removing",
        ChangeOp::Rename { .. } | ChangeOp::Exchange { .. } => "renaming",
        ChangeOp::Symlink { .. } => "making a symbolic link",
        ChangeOp::SetMeta { .. } | ChangeOp::SetTimes { .. } => "setting attributes",
    }
}

/// What a pass does with each op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// Apply it.
    No,
    /// A write a later write of the same file makes pointless.
    Superseded,
    /// A write whose file a later op removes (or replaces): only the
    /// directories it would have made are made.
    Removed,
}

/// Which writes later ops make pointless. A write is followed through the
/// renames that move it (a renamed file that is then deleted is never
/// written); an exchange ends what is known of both sides.
fn superseded(ops: &[(u64, &ChangeOp)]) -> Vec<Skip> {
    let mut skip = vec![Skip::No; ops.len()];
    // Each pending write's current path, by the write's index.
    let mut pending: BTreeMap<MemPath, usize> = BTreeMap::new();
    let under = |pending: &BTreeMap<MemPath, usize>, at: &MemPath| -> Vec<MemPath> {
        pending
            .range(at.clone()..)
            .take_while(|(p, _)| p.starts_with(at))
            .map(|(p, _)| p.clone())
            .collect()
    };
    for (i, (_, op)) in ops.iter().enumerate() {
        match op {
            ChangeOp::Write { path, .. } => {
                if let Some(j) = pending.insert(path.clone(), i) {
                    skip[j] = Skip::Superseded;
                }
            }
            ChangeOp::SetMeta { .. } | ChangeOp::SetTimes { .. } => {}
            ChangeOp::MakeDir { path, .. } | ChangeOp::Symlink { path, .. } => {
                if let Some(j) = pending.remove(path) {
                    skip[j] = Skip::Removed;
                }
            }
            ChangeOp::Remove { path } => {
                for p in under(&pending, path) {
                    if let Some(j) = pending.remove(&p) {
                        skip[j] = Skip::Removed;
                    }
                }
            }
            ChangeOp::Rename { from, to, .. } => {
                for p in under(&pending, to) {
                    if let Some(j) = pending.remove(&p) {
                        skip[j] = Skip::Removed;
                    }
                }
                for p in under(&pending, from) {
                    if let Some(j) = pending.remove(&p) {
                        pending.insert(p.rebase(from, to), j);
                    }
                }
            }
            ChangeOp::Exchange { a, b } => {
                for p in under(&pending, a).into_iter().chain(under(&pending, b)) {
                    pending.remove(&p);
                }
            }
        }
    }
    skip
}

fn leaf(path: &MemPath) -> &str {
    path.file_name().expect("changes never name the root")
}

/// Applies one op to the plain files, each kind with its own recovery
/// rules, noting what to sync.
fn apply_op(
    files: &Files,
    op: &ChangeOp,
    stage: &str,
    staged: bool,
    progress: &mut Progress,
    times: &mut BTreeMap<MemPath, Meta>,
) -> io::Result<()> {
    let sync = &mut progress.sync;
    match op {
        ChangeOp::Write { path, data, meta } => {
            write_op(files, path, data, meta, stage, staged, sync)
        }
        ChangeOp::MakeDir { path, meta } => make_dir_op(files, path, meta, sync),
        ChangeOp::Remove { path } => remove_op(files, path, stage, progress),
        ChangeOp::Rename { from, to, replace } => {
            rename_op(files, (from, to, *replace), stage, progress)
        }
        ChangeOp::Exchange { a, b } => exchange_op(files, a, b, sync),
        ChangeOp::Symlink { path, target, meta } => symlink_op(files, path, target, meta, sync),
        ChangeOp::SetTimes { path, meta } => {
            times.insert(path.clone(), *meta);
            sync.nodes.insert(path.clone());
            Ok(())
        }
        ChangeOp::SetMeta { path, meta } => set_meta_op(files, path, meta, sync),
    }
}

/// A write: staged in `.memfs/tmp` and renamed into place, unless the
/// disk holds it already or someone else's change is there.
fn write_op(
    files: &Files,
    path: &MemPath,
    data: &Arc<Vec<u8>>,
    meta: &Meta,
    stage: &str,
    staged: bool,
    sync: &mut SyncSet,
) -> io::Result<()> {
    let root = &files.memories;
    if !staged {
        let written = fsops::write_new_file(files.tmp.as_ref(), stage, data, meta);
        if written.is_err() {
            files.unstage_name(stage);
        }
        drop(written?);
    }
    // (Hashed once, before the map is held.)
    let sha = files.known.armed().then(|| crate::digest::Sha::of(data));
    let mut known = files.known.armed().then(|| files.known.lock());
    if let (Some(known), Some(sha)) = (known.as_mut(), sha) {
        if known.holds(root, path, sha, data.len() as u64)? {
            // The disk has it already (what the files door took
            // in, or a program wrote the same): not written again,
            // so a program holding the file open keeps it.
            files.unstage_name(stage);
            sync.files.insert(path.clone());
            return Ok(());
        }
        if known.differs(root, path)? {
            // Someone else's change is there: it is taken in
            // (and then written back as memory holds it), never
            // written over.
            known.suspect(path);
            files.unstage_name(stage);
            return Ok(());
        }
    }
    if let Err(e) = fsops::place(root, &files.tmp, stage, path) {
        files.unstage_name(stage);
        let _ = fsops::remove_tree(&files.tmp, format!("{stage}.dirs"));
        return Err(e);
    }
    if let (Some(known), Some(sha)) = (known.as_mut(), sha) {
        known.wrote(root, path, sha);
        known.dirs_to(path);
    }
    sync.files.insert(path.clone());
    sync.with_ancestors(path);
    Ok(())
}

fn make_dir_op(files: &Files, path: &MemPath, meta: &Meta, sync: &mut SyncSet) -> io::Result<()> {
    let root = &files.memories;
    // (The map held across the mkdir, as for a write: see `apply_step`.)
    let mut known = files.known.armed().then(|| files.known.lock());
    let parent = fsops::open_parent(root, path, true)?;
    fsops::make_dir(parent.as_ref(), leaf(path), meta)?;
    if let Some(known) = known.as_mut() {
        known.dirs_to(path);
        known.dir(path);
    }
    sync.with_ancestors(path);
    sync.nodes.insert(path.clone());
    Ok(())
}

/// A removal: to the trash (only memfs' own files, when someone else's
/// are below).
fn remove_op(
    files: &Files,
    path: &MemPath,
    stage: &str,
    progress: &mut Progress,
) -> io::Result<()> {
    let root = &files.memories;
    let sync = &mut progress.sync;
    let mut known = files.known.armed().then(|| files.known.lock());
    if let Some(known) = known.as_mut() {
        let theirs = known.theirs_below(root, path)?;
        if !theirs.is_empty() {
            // Someone else's files are there: only memfs' own go.
            super::keep_theirs::remove_ours(
                (root, &files.trash),
                known,
                path,
                &theirs,
                stage,
                &mut progress.trash,
            )?;
            sync.removed(path);
            sync.nodes.extend(path.parent());
            return Ok(());
        }
    }
    match fsops::open_parent(root, path, false).and_then(|parent| {
        fsops::rename_noreplace(parent.as_ref(), leaf(path), files.trash.as_ref(), stage)
    }) {
        Ok(()) => progress.trash.push(stage.to_string()),
        // Already gone from the disk (or a file stands where a
        // directory on its path would be): the removal holds.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(e) => return Err(e),
    }
    if let Some(known) = known.as_mut() {
        known.forget(path);
    }
    sync.removed(path);
    sync.nodes.extend(path.parent());
    Ok(())
}

/// A rename (`from`, `to`, whether it replaces), in one atomic step when
/// it replaces; what it would replace of someone else's stays.
fn rename_op(
    files: &Files,
    (from, to, replace): (&MemPath, &MemPath, bool),
    stage: &str,
    progress: &mut Progress,
) -> io::Result<()> {
    let root = &files.memories;
    let mut known = files.known.armed().then(|| files.known.lock());
    let theirs_in_the_way = match known.as_mut() {
        Some(known) if replace => !known.theirs_below(root, to)?.is_empty(),
        _ => false,
    };
    if let Some(mut held) = known.take_if(|_| theirs_in_the_way) {
        // What the rename would replace is someone else's: it
        // stays (the taker brings it in, over the moved file), and
        // what moved leaves its old name.
        held.suspect(to);
        drop(held);
        return remove_op(files, from, stage, progress);
    }
    let to_dir = fsops::open_parent(root, to, true)?;
    let moved = match fsops::open_parent(root, from, false) {
        Err(e) if absent(&e) => Err(io::Error::from(io::ErrorKind::NotFound)),
        Err(e) => return Err(e),
        Ok(from_dir) => renamed(files, &from_dir, from, &to_dir, to, replace, stage),
    };
    if let (Some(known), Ok(_)) = (known.as_mut(), &moved) {
        known.moved(from, to);
    }
    match moved {
        Ok(true) => progress.trash.push(stage.to_string()),
        Ok(false) => {}
        // The source is not on the disk (a FIFO, socket or device
        // node, which live in memory only; or a file whose write a
        // later one superseded, which that one brings): the target
        // must be gone from the disk, which is all.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if replace
                && fsops::rename_noreplace(to_dir.as_ref(), leaf(to), files.trash.as_ref(), stage)
                    .is_ok()
            {
                progress.trash.push(stage.to_string());
                // (Gone until a later write brings it: not someone
                // else's removal.)
                if let Some(known) = known.as_mut() {
                    known.forget(to);
                }
            }
        }
        Err(e) => return Err(e),
    }
    drop(known);
    let sync = &mut progress.sync;
    sync.removed(to);
    sync.moved(from, to);
    sync.nodes.extend(from.parent());
    sync.with_ancestors(to);
    Ok(())
}

/// An exchange; with a side missing from the disk, the other moves.
fn exchange_op(files: &Files, a: &MemPath, b: &MemPath, sync: &mut SyncSet) -> io::Result<()> {
    let root = &files.memories;
    // (Held across: no look in between takes a side for removed.)
    let mut known = files.known.armed().then(|| files.known.lock());
    // Both parents are made: a side missing from the disk (never
    // written, its write superseded) leaves the other to move.
    let a_dir = fsops::open_parent(root, a, true)?;
    let b_dir = fsops::open_parent(root, b, true)?;
    match fsops::exchange(a_dir.as_ref(), leaf(a), b_dir.as_ref(), leaf(b)) {
        // One side lives in memory only: the other just moves.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let moved = fsops::rename_noreplace(a_dir.as_ref(), leaf(a), b_dir.as_ref(), leaf(b))
                .or_else(|_| {
                    fsops::rename_noreplace(b_dir.as_ref(), leaf(b), a_dir.as_ref(), leaf(a))
                });
            match moved {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        other => other?,
    }
    if let Some(known) = known.as_mut() {
        known.exchanged(a, b);
    }
    drop(known);
    let swap = MemPath::root().join(".memfs-exchange");
    sync.moved(a, &swap);
    sync.moved(b, a);
    sync.moved(&swap, b);
    sync.nodes.extend(a.parent());
    sync.nodes.extend(b.parent());
    Ok(())
}

fn symlink_op(
    files: &Files,
    path: &MemPath,
    target: &str,
    meta: &Meta,
    sync: &mut SyncSet,
) -> io::Result<()> {
    let root = &files.memories;
    // (Held across: what was at the path goes, and no look at it
    // meanwhile takes that for someone's removal.)
    let mut known = files.known.armed().then(|| files.known.lock());
    if let Some(known) = known.as_mut() {
        if !known.theirs_below(root, path)?.is_empty() {
            // Someone else's file is there: it stays, and is taken in.
            known.suspect(path);
            return Ok(());
        }
        known.forget(path);
    }
    let parent = fsops::open_parent(root, path, true)?;
    fsops::symlink(parent.as_ref(), leaf(path), target, meta)?;
    // (Recorded, so that a look at the disk before this link's next move or
    // removal reaches it does not take it for someone's new link.)
    if let Some(known) = known.as_mut() {
        known.link(path, target);
    }
    drop(known);
    sync.with_ancestors(path);
    Ok(())
}

fn set_meta_op(files: &Files, path: &MemPath, meta: &Meta, sync: &mut SyncSet) -> io::Result<()> {
    let root = &files.memories;
    if path.is_root() {
        fsops::set_dir_meta(root.as_ref(), meta)?;
        sync.nodes.insert(path.clone());
        return Ok(());
    }
    let set = fsops::open_parent(root, path, false)
        .and_then(|parent| fsops::set_meta(parent.as_ref(), leaf(path), meta));
    match set {
        Ok(()) => {
            sync.nodes.insert(path.clone());
        }
        // Not on disk (yet, or any more): its next write carries the attributes.
        Err(e) if absent(&e) => {}
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Whether `e` says a path is not on the disk: a name missing, or a file
/// where a directory on its path would be.
fn absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// Moves `from` to `to` on the disk (replacing what is there, in one
/// atomic step, when `replace`); says whether a replaced node went to the
/// trash as `stage`.
fn renamed(
    files: &Files,
    from_dir: &Dir,
    from: &MemPath,
    to_dir: &Dir,
    to: &MemPath,
    replace: bool,
    stage: &str,
) -> io::Result<bool> {
    if replace {
        // One atomic step: a crash leaves the old or the new node at `to`,
        // never none.
        let trash = files.trash.as_ref();
        fsops::replace(
            from_dir.as_ref(),
            leaf(from),
            to_dir.as_ref(),
            leaf(to),
            trash,
            stage,
        )
    } else {
        fsops::rename_noreplace(from_dir.as_ref(), leaf(from), to_dir.as_ref(), leaf(to))
            .map(|()| false)
    }
}

/// Flushes what a pass changed: each file's data, each directory's entries
/// and each node's attributes (or, past `MAX_SYNCS`, the whole file system).
fn flush(files: &Files, sync: &SyncSet, stuck: &Stuck) -> io::Result<()> {
    let flushing =
        |e: io::Error| io::Error::new(e.kind(), format!("flushing to stable storage: {e}"));
    if sync.files.len() + sync.nodes.len() > MAX_SYNCS {
        return fsops::sync_filesystem(files.memories.as_ref()).map_err(flushing);
    }
    // (Not a stuck path's: what is there on disk is not memfs'.)
    for path in sync.files.iter().filter(|p| !stuck.holds(p)) {
        fsops::sync_node(&files.memories, path, true).map_err(flushing)?;
    }
    for path in sync.nodes.iter().filter(|p| !stuck.holds(p)) {
        fsops::sync_node(&files.memories, path, false).map_err(flushing)?;
    }
    Ok(())
}

/// Applies `ops` to the plain files now and flushes them (start-up, when
/// the journal's tail is replayed before anything is served).
pub fn apply_now(files: &Files, ops: Vec<ChangeOp>) -> Result<(), DiskError> {
    if ops.is_empty() {
        return Ok(());
    }
    let change = Change::of_memfs(ops);
    let mut progress = Progress::default();
    let mut stuck = Stuck::default();
    apply(
        files,
        &[(0, vec![change])],
        &mut progress,
        Wait::WholeDisk,
        &mut stuck,
    )
    .map_err(|e| DiskError::new("bringing the plain files up to date", e))?;
    match stuck.is_empty() {
        true => Ok(()),
        // Not all of them: the checkpointer takes them over.
        false => Err(DiskError::new(
            "bringing the plain files up to date",
            io::Error::other(format!("{} path(s) refused", stuck.list().len())),
        )),
    }
}

/// The plain files of a new data dir in a temporary directory, with the
/// data dir (its lock held while it lives), for tests.
#[cfg(test)]
pub fn test_files() -> (tempfile::TempDir, crate::persist::DataDir, Files) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = crate::persist::DataDir::open(tmp.path()).unwrap();
    let files = Files {
        memories: dir.memories.clone(),
        tmp: dir.tmp.clone(),
        trash: dir.trash.clone(),
        known: Arc::new(crate::persist::known::Known::default()),
    };
    (tmp, dir, files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Meta;

    use super::test_files as files;

    fn write(path: &str, text: &str) -> ChangeOp {
        ChangeOp::Write {
            path: MemPath::parse(path).unwrap(),
            data: Arc::new(text.as_bytes().to_vec()),
            meta: Meta {
                perm: 0o600,
                uid: rustix::process::geteuid().as_raw(),
                gid: rustix::process::getegid().as_raw(),
                atime: std::time::SystemTime::now(),
                mtime: std::time::SystemTime::now(),
            },
        }
    }

    fn pass(files: &Files, ops: Vec<ChangeOp>) {
        let mut stuck = Stuck::default();
        apply(
            files,
            &[(1, vec![Change::of_memfs(ops)])],
            &mut Progress::default(),
            Wait::OwnData,
            &mut stuck,
        )
        .unwrap();
    }

    #[test]
    fn a_pass_never_writes_over_a_plain_file_someone_else_changed() {
        let (tmp, _dir, files) = files();
        files.known.arm();
        let plain = tmp.path().join("memories/a.md");
        pass(&files, vec![write("/memories/a.md", "memfs v1\n")]);
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "memfs v1\n");
        // Someone else's write, then memory's newer change comes to disk.
        std::fs::write(&plain, "theirs\n").unwrap();
        pass(&files, vec![write("/memories/a.md", "memfs v2\n")]);
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "theirs\n");
        assert_eq!(
            files.known.lock().take_suspects(),
            vec![MemPath::parse("/memories/a.md").unwrap()]
        );
        // A file nobody knew of is not written over either, nor removed.
        std::fs::write(tmp.path().join("memories/b.md"), "new\n").unwrap();
        pass(&files, vec![write("/memories/b.md", "memfs\n")]);
        pass(
            &files,
            vec![ChangeOp::Remove {
                path: MemPath::parse("/memories/a.md").unwrap(),
            }],
        );
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "theirs\n");
        let b = tmp.path().join("memories/b.md");
        assert_eq!(std::fs::read_to_string(b).unwrap(), "new\n");
        // A directory removed: memfs' own files go, theirs stay.
        pass(&files, vec![write("/memories/d/ours.md", "ours\n")]);
        std::fs::write(tmp.path().join("memories/d/theirs.md"), "theirs\n").unwrap();
        pass(
            &files,
            vec![ChangeOp::Remove {
                path: MemPath::parse("/memories/d").unwrap(),
            }],
        );
        assert!(!tmp.path().join("memories/d/ours.md").exists());
        let theirs = std::fs::read_to_string(tmp.path().join("memories/d/theirs.md"));
        assert_eq!(theirs.unwrap(), "theirs\n");
        // Unarmed (start-up, no watcher): memory wins, as it always did.
        let (tmp, _dir, files) = self::files();
        let plain = tmp.path().join("memories/a.md");
        std::fs::write(&plain, "theirs\n").unwrap();
        pass(&files, vec![write("/memories/a.md", "memfs\n")]);
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "memfs\n");
    }
}
