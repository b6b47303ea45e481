//! The history is the journal: every query reads the frames on disk (the
//! rows are not kept in memory), and a content is read where the journal
//! holds it, checked against its hash.

use crate::persist::storage::Dir;
use std::io;
use std::sync::Arc;

use super::row::{Op, Row};
use super::segment;
use super::state::State;
use super::writer::Core;
use crate::digest::Sha;
use crate::path::MemPath;

/// Why a history request failed, in words for the person who asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

pub(super) fn refuse<T>(text: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(text.into()))
}

/// Calls `each` with every row the journal in `dir` holds, in no set order,
/// keeping none of them (one frame's header at a time).
fn each_row(dir: &Dir, st: &State, each: &mut dyn FnMut(Row)) -> io::Result<()> {
    for (&n, seg) in &st.log.segments {
        segment::read(dir, n, Some(seg.bytes), false, &mut |frame| {
            let h = frame.header;
            h.kept.into_iter().for_each(&mut *each);
            for change in h.changes {
                change.rows.into_iter().for_each(&mut *each);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Whether `path` is at or below one of `tracked`.
fn under(path: &str, tracked: &[MemPath]) -> bool {
    MemPath::parse(path).is_ok_and(|p| tracked.iter().any(|t| p.starts_with(t)))
}

/// Where a page of `log` begins (see [`History::log_page`]): below version
/// `before` (none: the newest), with the paths followed back through
/// renames so far (none: only the path asked about).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogPage {
    #[serde(default)]
    pub before: Option<u64>,
    #[serde(default)]
    pub tracked: Vec<String>,
}

/// A row, ordered newest first in a heap of the oldest kept (by id).
struct ById(Row);

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}
impl Eq for ById {}
impl PartialOrd for ById {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ById {
    /// Reversed: the heap's top is the oldest row, the one to let go.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.id().cmp(&self.0.id())
    }
}

/// Every row the journal in `dir` holds, oldest first (`state` says how far
/// each segment goes), with its origin filled in.
pub(super) fn rows(dir: &Dir, st: &State) -> io::Result<Vec<Row>> {
    let mut out = Vec::new();
    for (&n, seg) in &st.log.segments {
        segment::read(dir, n, Some(seg.bytes), false, &mut |frame| {
            let h = frame.header;
            out.extend(h.kept);
            for change in h.changes {
                out.extend(change.rows);
            }
            Ok(())
        })?;
    }
    for row in &mut out {
        // (Another host's version, from a shared store, names its own.)
        row.origin.get_or_insert_with(|| st.origin.clone());
    }
    // In the order they were made (a compacted segment's prune row, say,
    // is newer than the rows after it).
    out.sort_by_key(Row::id);
    Ok(out)
}

/// The bytes of content `sha`, if the journal holds them (checked).
pub(super) fn content_of(dir: &Dir, st: &State, sha: &Sha) -> io::Result<Option<Vec<u8>>> {
    let Some(loc) = st.contents.get(sha) else {
        return Ok(None);
    };
    let fd = segment::open_read(dir, loc.segment)?;
    let data = segment::read_at(&fd, loc.at, loc.len)?;
    if Sha::of(&data) != *sha {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the kept content is damaged (its sha256 does not match)",
        ));
    }
    Ok(Some(data))
}

/// Where a follower of the journal read up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    rewrites: u64,
    segment: u64,
    offset: u64,
}

/// The history of one memory: versions, their contents, going back.
#[derive(Clone)]
pub struct History {
    pub(super) shared: Arc<Core>,
}

fn no_version(version: u64) -> Refusal {
    Refusal(format!(
        "no version {version} in the history (it may have been pruned)"
    ))
}

impl History {
    fn rows(&self) -> Result<Vec<Row>, Refusal> {
        let st = self.shared.state.lock();
        rows(&self.shared.dir, &st).map_err(|e| {
            Refusal(format!(
                "the history cannot be read: {}",
                crate::units::describe_io(&e)
            ))
        })
    }

    /// The rows about `at` (a file, one that no longer exists, or a whole
    /// directory), newest first, following each file back through its renames.
    pub fn log(&self, at: &MemPath) -> Result<Vec<Row>, Refusal> {
        let rows = self.rows()?;
        let mut tracked: Vec<MemPath> = vec![at.clone()];
        let mut out = Vec::new();
        for row in rows.into_iter().rev() {
            let path = MemPath::parse(&row.path).ok();
            let hit = at.is_root()
                || path
                    .as_ref()
                    .is_some_and(|p| tracked.iter().any(|t| p.starts_with(t)));
            if !hit {
                continue;
            }
            if let Some(from) = row.from.as_deref().and_then(|f| MemPath::parse(f).ok()) {
                if !tracked.iter().any(|t| from.starts_with(t)) {
                    tracked.push(from);
                }
            }
            out.push(row);
        }
        Ok(out)
    }

    /// One page of [`History::log`]: at most `limit` rows, newest first,
    /// below `page.before`, and where the next page begins (`None`: this was
    /// the last). The journal is read through, but only the page's rows are
    /// kept (a heap of the newest `limit` that may be about `at`, renames
    /// included): a running owner asked for a long history keeps nothing of
    /// it. A rename that adds a path to follow ends the page there (the rows
    /// below it about that path were not looked for yet).
    pub fn log_page(
        &self,
        at: &MemPath,
        page: &LogPage,
        limit: usize,
    ) -> Result<(Vec<Row>, Option<LogPage>), Refusal> {
        let limit = limit.max(1);
        let mut tracked: Vec<MemPath> = match page.tracked.is_empty() {
            true => vec![at.clone()],
            false => page
                .tracked
                .iter()
                .filter_map(|p| MemPath::parse(p).ok())
                .collect(),
        };
        let before = page.before.unwrap_or(u64::MAX);
        let (rows, more) = self.newest_about(at, &tracked, before, limit)?;
        let mut out = Vec::new();
        let mut lowest = None;
        for row in rows {
            let id = row.id();
            lowest = Some(id);
            if !(at.is_root() || under(&row.path, &tracked)) {
                continue;
            }
            let from = row.from.as_deref().and_then(|f| MemPath::parse(f).ok());
            out.push(row);
            if let Some(from) = from.filter(|f| !tracked.iter().any(|t| f.starts_with(t))) {
                tracked.push(from);
                if !at.is_root() {
                    let tracked = tracked.iter().map(MemPath::to_string).collect();
                    let next = LogPage {
                        before: Some(id),
                        tracked,
                    };
                    return Ok((out, Some(next)));
                }
            }
        }
        let tracked = tracked.iter().map(MemPath::to_string).collect();
        let next = more.then_some(LogPage {
            before: lowest,
            tracked,
        });
        Ok((out, next))
    }

    /// The newest `limit` rows below version `before` that may be about
    /// `at` (under a path in `tracked`, or a rename), newest first, and
    /// whether older ones were let go. Keeps only those `limit`.
    fn newest_about(
        &self,
        at: &MemPath,
        tracked: &[MemPath],
        before: u64,
        limit: usize,
    ) -> Result<(Vec<Row>, bool), Refusal> {
        let mut heap = std::collections::BinaryHeap::new();
        let mut more = false;
        let st = self.shared.state.lock();
        let origin = st.origin.clone();
        each_row(&self.shared.dir, &st, &mut |mut row| {
            let maybe = at.is_root() || row.from.is_some() || under(&row.path, tracked);
            if row.id() >= before || !maybe {
                return;
            }
            // (Another host's version, from a shared store, names its own.)
            row.origin.get_or_insert_with(|| origin.clone());
            heap.push(ById(row));
            if heap.len() > limit {
                heap.pop();
                more = true;
            }
        })
        .map_err(|e| {
            Refusal(format!(
                "the history cannot be read: {}",
                crate::units::describe_io(&e)
            ))
        })?;
        let rows = heap
            .into_sorted_vec()
            .into_iter()
            .map(|ById(r)| r)
            .collect();
        Ok((rows, more))
    }

    pub fn row(&self, version: u64) -> Result<Option<Row>, Refusal> {
        Ok(self.rows()?.into_iter().find(|r| r.id() == version))
    }

    /// How many redactions this journal has done since it opened.
    pub fn redactions(&self) -> u64 {
        self.shared
            .upkeep
            .redactions
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The rows made since `cursor` was last moved, oldest first, and the
    /// cursor moved past them: only the frames appended since are read. A
    /// new cursor, or one a compaction or redaction overtook, reads all.
    /// Says whether it read everything (the caller then starts over with
    /// these rows, which are all the history has).
    pub fn rows_after(&self, cursor: &mut Option<Cursor>) -> Result<(Vec<Row>, bool), Refusal> {
        let sh = &self.shared;
        let st = sh.state.lock();
        // Under the state lock: a rewrite that began before it changed the
        // count already, one that begins after cannot swap segments until
        // this read is done (and counts again when it ends).
        let rewrites = sh.upkeep.rewrites.load(std::sync::atomic::Ordering::SeqCst);
        let start = cursor.filter(|c| {
            c.rewrites == rewrites
                && st
                    .log
                    .segments
                    .get(&c.segment)
                    .is_some_and(|s| s.bytes >= c.offset)
        });
        let fail = |e: io::Error| {
            Refusal(format!(
                "the history cannot be read: {}",
                crate::units::describe_io(&e)
            ))
        };
        let out = match start {
            None => rows(&sh.dir, &st).map_err(fail)?,
            Some(c) => {
                let mut out = Vec::new();
                for (&n, seg) in st.log.segments.range(c.segment..) {
                    let from = if n == c.segment { c.offset } else { 0 };
                    // (Nothing appended since: the segment is not opened,
                    // so that a follower looking often costs no syscall.)
                    if from >= seg.bytes {
                        continue;
                    }
                    // (The frames just written, from memory when all are kept.)
                    if let Some(rows) = st.log.recent.rows(rewrites, n, from, seg.bytes) {
                        out.extend(rows);
                        continue;
                    }
                    segment::read_from(&sh.dir, n, from, Some(seg.bytes), false, &mut |frame| {
                        out.extend(frame.header.changes.into_iter().flat_map(|c| c.rows));
                        Ok(())
                    })
                    .map_err(fail)?;
                }
                for row in &mut out {
                    // (Another host's version, from a shared store, names its own.)
                    row.origin.get_or_insert_with(|| st.origin.clone());
                }
                out.sort_by_key(Row::id);
                out
            }
        };
        *cursor = st.log.segments.iter().next_back().map(|(&n, seg)| Cursor {
            rewrites,
            segment: n,
            offset: seg.bytes,
        });
        Ok((out, start.is_none()))
    }

    /// This journal's origin: what the rows of this host's changes carry
    /// (a shared store's other hosts' rows carry theirs).
    pub fn origin(&self) -> String {
        self.shared.state.lock().origin.clone()
    }

    /// The number the next version will get: every version below it has
    /// been handed out (and, unless its batch was refused, is in the journal).
    pub fn next_version(&self) -> u64 {
        self.shared.state.lock().ids.next_version
    }

    /// The paths the last checkpoint pass could not write into the plain
    /// files, each with why (`/memories/x/f.md (a symlink is in the way)`):
    /// the journal keeps them and memfs tries again.
    pub fn stuck(&self) -> Vec<String> {
        self.shared.handoff.stuck_reasons.lock().clone()
    }

    /// The plain files memfs leaves out of the memory (a special file, a
    /// name the tool cannot address, a file over the size limit), each
    /// `path (why)`: they stay on disk, untouched.
    pub fn left_out(&self) -> Vec<String> {
        self.shared.files.known.left_out()
    }

    /// Every kept row, oldest first (for `export`).
    pub fn all(&self) -> Result<Vec<Row>, Refusal> {
        self.rows()
    }

    /// The content `sha`, if kept.
    pub fn blob(&self, sha: &str) -> Option<Vec<u8>> {
        let sha = Sha::parse(sha)?;
        let st = self.shared.state.lock();
        content_of(&self.shared.dir, &st, &sha).ok().flatten()
    }

    /// The file's bytes at `version`.
    pub fn content(&self, version: u64) -> Result<(Row, Vec<u8>), Refusal> {
        let row = self.row(version)?.ok_or_else(|| no_version(version))?;
        self.content_of_row(row)
    }

    fn content_of_row(&self, row: Row) -> Result<(Row, Vec<u8>), Refusal> {
        let version = row.id();
        if row.redacted {
            return refuse(format!(
                "version {version} is redacted: its content is erased"
            ));
        }
        if row.pruned && row.is_before_history() {
            return refuse(format!(
                "version {version} is {} as it was when the history began: the file itself holds that content, and the history keeps it at the file's first change",
                row.path
            ));
        }
        if row.pruned {
            return refuse(format!(
                "the content of version {version} is no longer kept (dropped by --history-keep)"
            ));
        }
        let Some(sha) = row.sha256.as_deref().and_then(Sha::parse) else {
            return refuse(format!(
                "version {version} is a {} of {}: no content at it{}",
                row.op.as_str(),
                row.path,
                row.replaces
                    .as_ref()
                    .map(|r| format!(" (the content before it is version {r})"))
                    .unwrap_or_default()
            ));
        };
        let st = self.shared.state.lock();
        match content_of(&self.shared.dir, &st, &sha) {
            Ok(Some(data)) => Ok((row, data)),
            Ok(None) => refuse(format!(
                "the content of version {version} is no longer kept (dropped by --history-keep)"
            )),
            Err(e) => refuse(format!(
                "the content of version {version} cannot be read from the history: {}",
                crate::units::describe_io(&e)
            )),
        }
    }

    /// What `memfs revert VERSION` writes, and where: the content at that
    /// version, or for a delete, an expiry or an overwrite, the content it
    /// took away (revert undoes it).
    pub fn revert_target(&self, version: u64) -> Result<(MemPath, Vec<u8>, Row), Refusal> {
        let rows = self.rows()?;
        let Some(row) = rows.iter().find(|r| r.id() == version).cloned() else {
            return Err(no_version(version));
        };
        let path = MemPath::parse(&row.path).map_err(|_| {
            Refusal(format!(
                "version {version} has no path (it is redacted or not a file's)"
            ))
        })?;
        let source = match row.op {
            Op::Delete | Op::Expire | Op::Overwrite => {
                row.replaces.map(|v| v.0).ok_or_else(|| {
                    Refusal(format!("version {version} names no content to bring back"))
                })?
            }
            Op::Prune | Op::Void => {
                return refuse(format!("version {version} is not a file's version"))
            }
            Op::Found if row.found_gone() => {
                return refuse(format!(
                "version {version} records that the file was gone; there is nothing to bring back"
            ))
            }
            _ => version,
        };
        let source_row = rows
            .into_iter()
            .find(|r| r.id() == source)
            .ok_or_else(|| no_version(source))?;
        let (_, data) = self.content_of_row(source_row)?;
        Ok((path, data, row))
    }

    /// Brings the plain files up to date with every acknowledged change now
    /// and waits until they are on disk.
    pub fn checkpoint(&self) -> Result<(), Refusal> {
        match self.shared.checkpoint_now(std::time::Duration::from_secs(60)) {
            Some(true) => {
                let stuck = self.stuck();
                if stuck.is_empty() {
                    return Ok(());
                }
                refuse(format!(
                    "the plain files are current but for {} path(s) memfs cannot write there; the journal keeps them, nothing else waits for them, and memfs tries again: {}",
                    stuck.len(),
                    stuck.join("; ")
                ))
            }
            Some(false) => refuse(
                "the plain files could not be brought up to date (the disk refused; memfs tries again, and the journal holds every change)",
            ),
            None => refuse("the plain files were not brought up to date within a minute"),
        }
    }

    /// Whether some file in the memory holds content `sha` now.
    pub(super) fn is_live_content(st: &State, sha: &Sha) -> bool {
        st.view
            .iter()
            .any(|(_, n)| n.file().is_some_and(|f| f.0 == *sha))
    }
}
