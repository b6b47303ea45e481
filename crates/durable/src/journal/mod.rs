//! The journal: the one write path, and the history.
//!
//! Every batch of store changes (group commit) is appended to
//! `DIR/.memfs/journal/` as one checksummed frame, made durable by one
//! `fdatasync` of one file, and only then acknowledged. Each frame holds
//! the batch's changes as ops (what the files become) and versions (the
//! history), with the contents they need (a content already in the journal
//! is named, not written again). The plain files (`DIR/memories`, the SDK's
//! layout) are a checkpoint: brought up to date behind the acknowledgement,
//! off the write path ([`checkpoint`]); at start any tail past the last
//! checkpoint is replayed into them before anything is served ([`startup`]).
//! The history commands read the journal ([`history`]): there is no second
//! log, so a file's state and its history never disagree.
//!
//! ```text
//! DIR/.memfs/journal/NNNNNNNNNNNNNNNN.jrn   segments, frames one after another
//! ```
//! The format is in `frame.rs` (the framing) and `record.rs` (the headers).
//! Ids: a version is unique across hosts as the journal's origin (random,
//! made with the journal) plus its number, which is never reused; each
//! change has a number too, so a replica applies it once.

#[cfg(test)]
mod agree;
mod append;
mod batch;
mod checkpoint;
mod commit;
mod compact;
mod deferred;
mod frame;
mod gate;
mod group;
mod handoff;
mod history;
#[cfg(test)]
mod in_flight;
mod keep_theirs;
mod migrate;
mod owed;
mod recent;
mod record;
mod refusal;
mod retention;
mod rewrite;
pub mod row;
mod segment;
mod sharing;
mod startup;
mod state;
mod stuck;
#[cfg(test)]
mod test_support;
mod upkeep;
mod upstream;
mod versions;
mod view;
mod writer;

use crate::persist::storage::{self, Dir};
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use checkpoint::Files;
pub use history::{Cursor, History, LogPage, Refusal};
pub use record::{ChangeRec, OpRec};
pub use row::{Actor, Op, Row, REDACTED_PATH};
pub use upstream::{Outgoing, Transaction, Upstream, UpstreamError};
pub use writer::Stats;

use crate::store::{ChangeSink, Recover, Tree};

/// How much history is kept: versions younger than `age`, and at most
/// `bytes` of journal (older versions are dropped first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    pub age: Duration,
    pub bytes: u64,
}

impl Default for Keep {
    fn default() -> Self {
        Keep {
            age: Duration::from_secs(90 * 24 * 3600),
            bytes: 1 << 30,
        }
    }
}

/// A `--history-keep` that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error(transparent)]
    Size(#[from] crate::units::UnitError),
    #[error("`{part}` is not an age like 90d or a size like 1GiB: {source}")]
    Age {
        part: String,
        source: humantime::DurationError,
    },
}

impl std::str::FromStr for Keep {
    type Err = KeepError;

    /// `90d`, `512MiB`, or both: `30d,256MiB`.
    fn from_str(s: &str) -> Result<Keep, KeepError> {
        let mut keep = Keep::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            // A size has digits only, or an upper-case K, M or G (`30m` is
            // thirty minutes, `30M` thirty MiB).
            let unit = part.trim_end_matches("iB").trim_end_matches('B');
            if part.bytes().all(|b| b.is_ascii_digit()) || unit.ends_with(['K', 'M', 'G']) {
                keep.bytes = crate::units::parse_size(part)?;
            } else {
                keep.age = humantime::parse_duration(part).map_err(|source| KeepError::Age {
                    part: part.to_string(),
                    source,
                })?;
            }
        }
        Ok(keep)
    }
}

/// How the journal works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub keep: Keep,
    /// How long the checkpointer waits after a batch before it brings the
    /// plain files up to date (everything that came meanwhile goes at once).
    pub checkpoint_delay: Duration,
    /// A segment is closed, and the next begun, past this size.
    pub segment_bytes: u64,
    /// The memory is a shared store's (its batches go upstream first).
    pub shared: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            keep: Keep::default(),
            checkpoint_delay: Duration::from_millis(
                env_number("MEMFS_CHECKPOINT_MS").unwrap_or(200),
            ),
            segment_bytes: env_number("MEMFS_SEGMENT_BYTES").unwrap_or(32 << 20),
            shared: false,
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

pub fn now_text() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// What opening the journal found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Batches past the last checkpoint, replayed into the plain files.
    pub replayed_batches: usize,
    /// Paths the replay changed on disk.
    pub replayed_paths: usize,
    /// Versions recorded for what was found changed on disk.
    pub found: usize,
    /// A history kept before the journal was taken in.
    pub upgraded: bool,
    /// The replay could not bring the plain files up to date (the
    /// checkpointer tries again): they are behind the tree.
    pub replay_failed: bool,
}

/// See [`Journal::own_held`].
#[derive(Clone)]
pub struct OwnHeld(Arc<writer::Core>);

impl OwnHeld {
    /// Whether the journal holds this host's batch `batch`, which the
    /// shared store holds with last id `seq`: a frame of it is here, or
    /// every version through `seq` is. (One whose frame a crash lost is
    /// not held, and is applied from the store like another host's.)
    pub fn holds(&self, batch: u64, seq: u64) -> bool {
        self.0.state.lock().holds_own(batch, seq)
    }
}

/// See [`Journal::unsettled`].
#[derive(Clone)]
pub struct Unsettled(Arc<writer::Core>);

impl Unsettled {
    /// Whether a change of this host's not settled yet touches one of
    /// `paths` (or a path above or below one).
    pub fn busy(&self, paths: &[crate::path::MemPath]) -> bool {
        self.0.busy(paths)
    }

    /// Waits (at most `limit`) until a change of this host's settles.
    pub fn wait(&self, limit: Duration) {
        self.0.wait_settled(limit)
    }
}

pub struct Journal {
    shared: Arc<writer::Core>,
    /// Not shut down yet.
    running: bool,
}

/// The plain files and `tree` made what the journal's tail says; false
/// when the plain files refused (served all the same: the journal holds
/// it, and the checkpointer tries again).
fn replay(files: &Files, tree: &mut Tree, ops: &[crate::store::ChangeOp]) -> bool {
    if ops.is_empty() {
        return true;
    }
    let done = checkpoint::apply_now(files, ops.to_vec());
    if let Err(e) = &done {
        tracing::warn!(
            "the plain files could not be brought up to date with the journal at start ({e}); memfs tries again"
        );
    }
    tree.apply_ops(ops);
    done.is_ok()
}

/// The journal in `dir` as start-up reads it, or a history kept before it
/// taken in (said in `opened`), or a new one (`first`): its state, its
/// tail past the last checkpoint and how many batches that is.
fn load(
    state: &Dir,
    dir: &Dir,
    opened: &mut Opened,
) -> io::Result<(state::State, startup::Tail, usize, bool)> {
    let mut loaded = startup::read(dir, true)?;
    if loaded.is_none() {
        loaded = migrate::take_in(state, dir)?;
        opened.upgraded = loaded.is_some();
    }
    Ok(match loaded {
        Some(l) => (l.state, l.tail, l.tail_batches, false),
        None => (startup::new_state(), startup::Tail::default(), 0, true),
    })
}

impl Journal {
    /// Opens the journal in the state dir `state` (made if missing, taking
    /// in a history kept before it), squares the plain files in `files` and
    /// `tree` (loaded from them) with it, and starts its threads. Nothing
    /// may be served from `tree` before this returns. In order: read or
    /// take in ([`load`]), square and replay, the start's own frame,
    /// compaction and the checkpointer ([`Journal::begin`]).
    pub fn open(
        state: &Dir,
        files: &Files,
        tree: &mut Tree,
        opts: Options,
    ) -> io::Result<(Journal, Opened)> {
        let dir = journal_dir(state)?;
        rewrite::settle(&dir)?;
        let mut opened = Opened::default();
        let (mut st, tail, tail_batches, first) = load(state, &dir, &mut opened)?;
        let time = now_text();
        let batch = st.next_batch;
        if opts.shared && st.own_since.is_none() {
            // Which batches of this host's the frames before now hold was
            // not written down: those are judged by number (every frame
            // from now on says it).
            st.own_since = Some(batch);
        }
        let content = |st: &state::State, sha: &crate::digest::Sha| {
            history::content_of(&dir, st, sha).ok().flatten()
        };
        let squared = startup::square(&mut st, &tail, first, tree, &content, &time, batch);
        let replay_failed = !replay(files, tree, &squared.replayed);
        opened.replay_failed = replay_failed;
        opened.replayed_batches = tail_batches;
        opened.replayed_paths = squared.replayed.len();
        opened.found = squared.found_files;
        let checkpointed = st.log.checkpoint_written;
        let shared = Arc::new(writer::Core::new(st, dir, files, opts, checkpointed));
        let _ = shared.me.set(Arc::downgrade(&shared));
        let _ = shared.upkeep.compaction.set(compact::run_once);
        // The start's own frame: what was found, and that the files are
        // current through everything before it.
        let must_write = squared.found.is_some() || !tail.is_empty() || opened.upgraded;
        if must_write {
            let written =
                shared.write_start(squared.found, squared.needed, batch, &time, !replay_failed);
            if let Err(e) = written {
                tracing::warn!(
                    "what start-up found could not be written to the journal ({}); it goes with the next change",
                    crate::units::describe_io(&e)
                );
            }
        }
        Journal::begin(&shared, files, &opts);
        if replay_failed {
            let change = crate::store::Change::of_memfs(squared.replayed);
            shared.hand_over(batch, vec![change]);
        }
        Ok((
            Journal {
                shared,
                running: true,
            },
            opened,
        ))
    }

    /// After the start's own frame: old history past the policy goes
    /// (everything is checkpointed now), and the checkpointer starts.
    fn begin(shared: &Arc<writer::Core>, files: &Files, opts: &Options) {
        if retention::due(&shared.state.lock(), &opts.keep, None) {
            if let Err(e) = compact::compact(shared, opts.keep) {
                tracing::warn!("old history could not be compacted: {e}");
            }
            shared.upkeep.compact.lock().last = Some(std::time::Instant::now());
        }
        *shared.handoff.checkpointer.lock() = Some(checkpoint::Checkpointer::new(
            files.clone(),
            shared,
            opts.checkpoint_delay,
        ));
    }

    /// Commits every batch of this host's changes to `up` (a shared store)
    /// before the journal takes it; set before any change is made.
    pub fn share(&self, up: Arc<dyn Upstream>) {
        let _ = self.shared.sharing.upstream.set(up);
    }

    /// This journal's origin id (random, made with the journal).
    pub fn origin(&self) -> String {
        self.shared.state.lock().origin.clone()
    }

    /// How far the journal holds a shared store's versions.
    pub fn followed(&self) -> u64 {
        self.shared.state.lock().follow
    }

    /// Sets the number the next batch gets to at least the one it is
    /// called with (from any thread).
    pub fn batch_numberer(&self) -> impl Fn(u64) + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |at| {
            let mut st = shared.state.lock();
            st.next_batch = st.next_batch.max(at);
        }
    }

    /// Which batches of this host's the journal holds, for a shared
    /// store's follower.
    pub fn own_held(&self) -> OwnHeld {
        OwnHeld(self.shared.clone())
    }

    /// This host's changes not settled yet, for a shared store's follower.
    pub fn unsettled(&self) -> Unsettled {
        Unsettled(self.shared.clone())
    }

    /// The sink to build the store with.
    pub fn sink(&self) -> Arc<dyn ChangeSink> {
        self.shared.clone()
    }

    /// Who decides what memory becomes when a batch is refused (the store).
    pub fn recover_through(&self, recover: Recover) {
        *self.shared.refusals.recovery.lock() = Some(Arc::new(recover));
    }

    pub fn history(&self) -> History {
        History {
            shared: self.shared.clone(),
        }
    }

    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Writes out everything queued, brings the plain files up to date,
    /// and waits for every job of this journal's on the pools to end.
    pub fn shutdown(&mut self) {
        if !std::mem::take(&mut self.running) {
            return; // stopped already
        }
        // No compaction begins from now, and one that runs ends first.
        self.shared.upkeep.compact.lock().stop = true;
        drop(self.shared.upkeep.compacting.lock());
        // What is queued is committed, then the checkpointer told to stop.
        self.shared.stop();
        let checkpointer = self.shared.handoff.checkpointer.lock().take();
        self.shared.refusals.recovery.lock().take();
        // A clean stop leaves the journal within its retention.
        let due = retention::due(&self.shared.state.lock(), &self.shared.opts.keep, None);
        if due {
            if let Err(e) = compact::compact_at_stop(&self.shared, self.shared.opts.keep) {
                tracing::warn!("old history could not be compacted: {e}");
            }
        }
        // (Its last step answered `Stop`; none runs past this.)
        if let Some(ck) = checkpointer {
            ck.quiet();
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `journal/` in the state dir `state` (made if missing; 0700: a journal
/// others could enter is tightened).
fn journal_dir(state: &Dir) -> io::Result<Dir> {
    let name = std::ffi::OsStr::new("journal");
    match state.mkdir(name) {
        // Its name durable before any segment in it is.
        Ok(()) => state.sync()?,
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
        Err(_) => {}
    }
    let dir = state.open_dir(name)?;
    if dir.stat(None)?.attr.perm & 0o077 != 0 {
        dir.set_mode(None, 0o700)?;
    }
    Ok(dir)
}

/// Whether the journal under the data dir `root` (its `.memfs/journal`)
/// ends in a torn frame: its last segment is longer than its last whole
/// frame (a power cut while a frame was written; the next open drops it).
pub fn tail_is_torn(root: &Dir) -> io::Result<bool> {
    let state = crate::persist::fsops::open_dir(root.as_ref(), ".memfs")?;
    let journal = crate::persist::fsops::open_dir(state.as_ref(), "journal")?;
    let Some(&last) = segment::list(&journal)?.last() else {
        return Ok(false);
    };
    Ok(segment::read(&journal, last, None, true, &mut |_| Ok(()))?.longer)
}

/// Every kept version's content, read from the journal of the data dir at
/// `dir` without taking its lock (for reports such as `memfs scan`): rows
/// newest first, each content once, with the versions that hold it.
pub fn kept_contents(dir: &std::path::Path) -> io::Result<Vec<(Vec<Row>, Vec<u8>)>> {
    let state = crate::persist::open_state_dir(&dir.join(".memfs"))?;
    let state = storage::real::dir(state);
    let journal = crate::persist::fsops::open_dir(state.as_ref(), "journal")?;
    let Some(loaded) = startup::read(&journal, false)? else {
        return Ok(Vec::new());
    };
    let st = loaded.state;
    let rows = history::rows(&journal, &st)?;
    let mut by_content: Vec<(Vec<Row>, Vec<u8>)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for row in rows.into_iter().rev() {
        let Some(sha) = row
            .sha256
            .as_deref()
            .filter(|_| !row.pruned && !row.redacted)
            .and_then(crate::digest::Sha::parse)
        else {
            continue;
        };
        match index.get(&sha) {
            Some(&i) => {
                let entry: &mut (Vec<Row>, Vec<u8>) = &mut by_content[i];
                entry.0.push(row);
            }
            None => {
                if let Ok(Some(data)) = history::content_of(&journal, &st, &sha) {
                    index.insert(sha, by_content.len());
                    by_content.push((vec![row], data));
                }
            }
        }
    }
    Ok(by_content)
}
