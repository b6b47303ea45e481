//! History: every change to a file, from either door, kept as a version
//! with its actor, its content, and what it replaced; reversible and
//! redactable (`memfs log`, `show`, `diff`, `revert`, `redact`, `export`).
//!
//! The persister records each batch's rows here before it touches
//! `memories/`, and its one barrier makes the rows and the changes durable
//! together. A change the disk refuses gets its rows voided. At start, the
//! rows are checked against the files: rows of the last batch whose change
//! never reached the disk are voided, and a file the rows do not describe
//! (changed while no memfs ran, or cut off from its row by a power cut) is
//! recorded as `found`. So after any crash every change has its version
//! and every version its change.

mod disk;
pub mod expire;
pub mod export;
mod ledger;
pub mod request;
pub mod row;

use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use crate::path::MemPath;
use crate::store::{Change, NodeKind, Tree};
use disk::Disk;
pub use ledger::sha256_hex;
use ledger::{Blob, Fresh, Ledger};
pub use row::{Actor, Op, Row};

/// How much history is kept: versions younger than `age`, and at most
/// `bytes` of kept content (older versions are dropped first).
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

impl std::str::FromStr for Keep {
    type Err = String;

    /// `90d`, `512MiB`, or both: `30d,256MiB`.
    fn from_str(s: &str) -> Result<Keep, String> {
        let mut keep = Keep::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            // A size has digits only, or an upper-case K, M or G (`30m` is
            // thirty minutes, `30M` thirty MiB).
            let unit = part.trim_end_matches("iB").trim_end_matches('B');
            if part.bytes().all(|b| b.is_ascii_digit()) || unit.ends_with(['K', 'M', 'G']) {
                keep.bytes = crate::units::parse_size(part)?;
            } else {
                keep.age = humantime::parse_duration(part).map_err(|e| {
                    format!("`{part}` is not an age like 90d or a size like 1GiB: {e}")
                })?;
            }
        }
        Ok(keep)
    }
}

/// Why a history request failed, in words for the person who asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refuse<T>(text: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(text.into()))
}

pub struct History {
    inner: Mutex<Inner>,
    fresh: Mutex<Fresh>,
    keep: Keep,
}

struct Inner {
    ledger: Ledger,
    disk: Disk,
    pruned_at: Instant,
}

/// What a batch recorded: how many rows each change made, in order, and
/// the files the batch's barrier must make durable.
#[derive(Debug, Default)]
pub struct Recorded {
    rows: Vec<Vec<u64>>,
    files: Vec<std::fs::File>,
    objects: Option<OwnedFd>,
}

impl Recorded {
    /// Makes this batch's rows and contents durable (part of the barrier).
    pub fn sync(&self) -> io::Result<()> {
        for file in &self.files {
            crate::persist::sync_data(file)?;
        }
        match &self.objects {
            Some(dir) => crate::persist::sync_all(dir),
            None => Ok(()),
        }
    }
}

pub fn now_text() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn lines_of<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut out, row).expect("a row serializes");
        out.push(b'\n');
    }
    out
}

/// What each file of the tree holds: path → (sha256, bytes).
fn files_of(tree: &Tree) -> Vec<(MemPath, String, std::sync::Arc<Vec<u8>>)> {
    tree.walk()
        .into_iter()
        .filter_map(|(path, node)| match &node.kind {
            NodeKind::File(data) => Some((path, sha256_hex(data), data.clone())),
            _ => None,
        })
        .collect()
}

impl History {
    /// Opens the history in the state dir and squares it with `tree` (the
    /// files as loaded); see the module's text.
    pub fn open(state: &OwnedFd, tree: &Tree, keep: Keep) -> io::Result<History> {
        let (disk, text) = Disk::open(state)?;
        let mut rows = Vec::new();
        let mut voided = HashSet::new();
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            // A line memfs cannot read is left out (it never writes one).
            let Ok(row) = serde_json::from_slice::<Row>(line) else {
                continue;
            };
            if row.op == Op::Void {
                voided.extend(row.replaces.as_deref().and_then(|v| v.parse::<u64>().ok()));
            }
            rows.push(row);
        }
        rows.retain(|r| r.op != Op::Void && !voided.contains(&r.id()));
        let mut ledger = Ledger::replay(rows);
        let next = ledger.next;
        let files = files_of(tree);
        let mut inner = Inner {
            ledger: Ledger::default(),
            disk,
            pruned_at: Instant::now(),
        };
        let time = now_text();

        // Rows of the last batch whose change never reached the disk.
        let differ = differing(&ledger, &files);
        if !differ.is_empty() {
            let last = ledger.batch;
            let cut: HashSet<u64> = ledger
                .rows
                .iter()
                .filter(|r| r.batch == last && r.batch > 0)
                .filter(|r| {
                    [Some(&r.path), r.from.as_ref()]
                        .into_iter()
                        .flatten()
                        .any(|p| differ.contains(p))
                })
                .map(Row::id)
                .collect();
            // Only those whose paths the files show as they were before
            // them: a file changed to something else again (by hand, while
            // no memfs ran) keeps its rows, and is found below.
            let without = {
                let mut rows = ledger.rows.clone();
                rows.retain(|r| !cut.contains(&r.id()));
                Ledger::replay(rows)
            };
            let still = differing(&without, &files);
            let cut: HashSet<u64> = cut
                .iter()
                .copied()
                .filter(|id| {
                    ledger.find(*id).is_some_and(|r| {
                        [Some(&r.path), r.from.as_ref()]
                            .into_iter()
                            .flatten()
                            .all(|p| !still.contains(p))
                    })
                })
                .collect();
            if !cut.is_empty() {
                let mut rows = std::mem::take(&mut ledger.rows);
                rows.retain(|r| !cut.contains(&r.id()));
                ledger = Ledger::replay(rows);
                ledger.next = ledger.next.max(next);
                let voids = ledger.voids(&time, cut.iter().copied());
                inner.disk.append(&lines_of(&voids))?;
            }
        }
        // Files the rows do not describe: recorded as found. When the history
        // begins (no rows yet), their contents are not copied now (a large
        // memory would double on disk at its first start): each is kept at
        // the file's first change, from the file itself (see `capture`).
        let first_start = ledger.rows.is_empty() && ledger.next <= 1;
        ledger.batch += 1;
        let differ = differing(&ledger, &files);
        let mut found = Vec::new();
        for (path, sha, data) in &files {
            if differ.contains(&path.to_string()) {
                let mut row = ledger.event(&time, Op::Found, path, Some((sha, data.len() as u64)));
                if first_start {
                    row.pruned = true;
                    row.note = Some(BEFORE_HISTORY.to_string());
                } else {
                    inner.disk.put(sha, data)?;
                }
                found.push(row);
            }
        }
        let on_disk: HashSet<&MemPath> = files.iter().map(|(p, _, _)| p).collect();
        let gone: Vec<MemPath> = ledger
            .live
            .keys()
            .filter(|p| !on_disk.contains(p))
            .cloned()
            .collect();
        for path in gone {
            found.push(ledger.event(&time, Op::Found, &path, None));
        }
        if !found.is_empty() {
            tracing::info!(
                "the history found {} file(s) changed while no memfs kept it; recorded as found",
                found.len()
            );
            inner.disk.append(&lines_of(&found))?;
            for row in found {
                ledger.push(row);
            }
        }
        inner.ledger = ledger;
        let history = History {
            inner: Mutex::new(inner),
            fresh: Mutex::default(),
            keep,
        };
        history.prune(&mut history.inner.lock())?;
        Ok(history)
    }

    /// Records the versions `batch` makes (contents kept, rows appended; the
    /// persister's barrier makes them durable). On an error nothing of the
    /// batch is recorded, and the batch must not be applied.
    pub fn record(&self, batch: &[Change], memories: &OwnedFd) -> io::Result<Recorded> {
        let mut inner = self.inner.lock();
        let time = now_text();
        let mut blobs = Vec::new();
        let mut recorded = Recorded::default();
        let mut rows = Vec::new();
        inner.ledger.batch += 1;
        // (What people read is locked only for each look-up: the FUSE door
        // notes reads there and must not wait for this batch's hashing.)
        for change in batch {
            rows.extend(capture(
                &mut inner.ledger,
                change,
                memories,
                &time,
                &mut blobs,
            ));
            let made = inner.ledger.record(change, &time, &self.fresh, &mut blobs);
            recorded.rows.push(made.iter().map(Row::id).collect());
            rows.extend(made);
        }
        if rows.is_empty() {
            return Ok(recorded);
        }
        let written = write_blobs(&inner.disk, &blobs).and_then(|new| {
            let log = inner.disk.append(&lines_of(&rows))?;
            if !new.is_empty() {
                recorded.objects = Some(inner.disk.objects_dir()?);
            }
            recorded.files = new;
            recorded.files.push(log);
            Ok(())
        });
        if let Err(e) = written {
            let ids: HashSet<u64> = rows.iter().map(Row::id).collect();
            inner.forget(&ids);
            return Err(e);
        }
        let over = inner.ledger.kept_bytes > self.keep.bytes;
        if over || inner.pruned_at.elapsed() > Duration::from_secs(3600) {
            // Dropping old history is not the change's business: a failure
            // here leaves more history than asked, and is tried again later.
            let _ = self.prune(&mut inner);
        }
        Ok(recorded)
    }

    /// The changes of `recorded` from index `from` on did not take effect:
    /// their rows are voided (on disk by an appended `void` row each).
    pub fn void(&self, recorded: &Recorded, from: usize) -> io::Result<()> {
        let ids: HashSet<u64> = recorded.rows.iter().skip(from).flatten().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let mut inner = self.inner.lock();
        inner.forget(&ids);
        let time = now_text();
        let voids = inner.ledger.voids(&time, ids.iter().copied());
        inner.disk.append(&lines_of(&voids)).map(drop)
    }

    /// A person's process `pid` opened `path` to read it when the store's
    /// change counter stood at `seq`.
    pub fn note_read(&self, pid: u32, path: MemPath, seq: u64) {
        self.fresh.lock().note_read(pid, path, seq);
    }

    /// Drops history past the retention policy, saying so in a `prune` row.
    fn prune(&self, inner: &mut Inner) -> io::Result<()> {
        inner.pruned_at = Instant::now();
        let cutoff = SystemTime::now()
            .checked_sub(self.keep.age)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let cutoff = humantime::format_rfc3339_millis(cutoff).to_string();
        let over = inner.ledger.kept_bytes > self.keep.bytes;
        // Over the size: down to 90% of it, so that the next batch does not prune again.
        let target = if over {
            self.keep.bytes / 10 * 9
        } else {
            self.keep.bytes
        };
        let (n, gone) = inner.ledger.prune(&cutoff, target);
        if n == 0 {
            return Ok(());
        }
        let why = if over {
            format!(
                "over {} of kept content",
                crate::tool::human_size(self.keep.bytes)
            )
        } else {
            format!("older than {}", humantime::format_duration(self.keep.age))
        };
        let mut row = inner
            .ledger
            .event(&now_text(), Op::Prune, &MemPath::root(), None);
        row.note = Some(format!(
            "dropped {n} old version(s) ({why}); a file's current version keeps its row"
        ));
        tracing::info!("history: {}", row.note.as_deref().unwrap_or_default());
        inner.ledger.push(row);
        let text = lines_of(&inner.ledger.rows);
        inner.disk.rewrite(&text)?;
        for sha in gone {
            let _ = inner.disk.remove(&sha);
        }
        Ok(())
    }

    /// The rows about `at` (a file, one that no longer exists, or a whole
    /// directory), newest first, following each file back through its renames.
    pub fn log(&self, at: &MemPath) -> Vec<Row> {
        let inner = self.inner.lock();
        let mut tracked: Vec<MemPath> = vec![at.clone()];
        let mut out = Vec::new();
        for row in inner.ledger.rows.iter().rev() {
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
            out.push(row.clone());
        }
        out
    }

    pub fn row(&self, version: u64) -> Option<Row> {
        self.inner.lock().ledger.find(version).cloned()
    }

    /// The file's bytes at `version`.
    pub fn content(&self, version: u64) -> Result<(Row, Vec<u8>), Refusal> {
        let inner = self.inner.lock();
        let Some(row) = inner.ledger.find(version) else {
            return refuse(format!(
                "no version {version} in the history (it may have been pruned)"
            ));
        };
        if row.redacted {
            return refuse(format!(
                "version {version} is redacted: its content is erased"
            ));
        }
        if row.pruned && row.note.as_deref() == Some(BEFORE_HISTORY) {
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
        let Some(sha) = &row.sha256 else {
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
        match inner.disk.get(sha) {
            Ok(data) => Ok((row.clone(), data)),
            Err(e) => refuse(format!(
                "the content of version {version} cannot be read from the history: {}",
                crate::units::describe_io(&e)
            )),
        }
    }

    /// What `memfs revert VERSION` writes, and where: the content at that
    /// version, or for a delete, an expiry or an overwrite, the content it
    /// took away (revert undoes it).
    pub fn revert_target(&self, version: u64) -> Result<(MemPath, Vec<u8>), Refusal> {
        let Some(row) = self.row(version) else {
            return refuse(format!(
                "no version {version} in the history (it may have been pruned)"
            ));
        };
        let path = MemPath::parse(&row.path).map_err(|_| {
            Refusal(format!(
                "version {version} has no path (it is redacted or not a file's)"
            ))
        })?;
        let source = match row.op {
            Op::Delete | Op::Expire | Op::Overwrite => row
                .replaces
                .as_deref()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    Refusal(format!("version {version} names no content to bring back"))
                })?,
            Op::Prune | Op::Void => {
                return refuse(format!("version {version} is not a file's version"))
            }
            Op::Found if row.sha256.is_none() && !row.redacted => {
                return refuse(format!(
                "version {version} records that the file was gone; there is nothing to bring back"
            ))
            }
            _ => version,
        };
        let (_, data) = self.content(source)?;
        Ok((path, data))
    }

    /// Erases the content of `version` everywhere the history keeps it (every
    /// version with the same content), and with `path`, that path's text
    /// from every row. The rows stay, marked redacted.
    pub fn redact(&self, version: u64, path: bool) -> Result<String, Refusal> {
        let mut inner = self.inner.lock();
        let Some(row) = inner.ledger.find(version).cloned() else {
            return refuse(format!(
                "no version {version} in the history (it may have been pruned)"
            ));
        };
        if let Some(sha) = &row.sha256 {
            if inner.ledger.is_live_content(sha) {
                return refuse(format!(
                    "a file in the memory still holds the content of version {version}; change or delete it first, then redact"
                ));
            }
        }
        let erase_path = path && row.path != row::REDACTED_PATH;
        if erase_path {
            if let Ok(p) = MemPath::parse(&row.path) {
                if inner.ledger.live.contains_key(&p) {
                    return refuse(format!(
                        "{} exists in the memory; rename or delete it first, then redact its path",
                        row.path
                    ));
                }
            }
        }
        let mut versions = 0;
        if let Some(sha) = &row.sha256 {
            versions = inner
                .ledger
                .rows
                .iter()
                .filter(|r| r.sha256.as_ref() == Some(sha))
                .count();
            inner.ledger.forget_content(sha);
        } else if let Some(r) = inner.ledger.rows.iter_mut().find(|r| r.id() == version) {
            r.redacted = true;
        }
        let mut paths = 0;
        if erase_path {
            for r in inner.ledger.rows.iter_mut() {
                for p in [Some(&mut r.path), r.from.as_mut()].into_iter().flatten() {
                    if *p == row.path {
                        *p = row::REDACTED_PATH.to_string();
                        paths += 1;
                    }
                }
            }
        }
        let text = lines_of(&inner.ledger.rows);
        let written = inner.disk.rewrite(&text).and_then(|()| match &row.sha256 {
            Some(sha) => inner
                .disk
                .remove(sha)
                .and_then(|()| inner.disk.sync_objects()),
            None => Ok(()),
        });
        if let Err(e) = written {
            return refuse(format!(
                "the history could not be rewritten: {}",
                crate::units::describe_io(&e)
            ));
        }
        let mut said = format!("version {version}: content erased from {versions} version(s)");
        if erase_path {
            said.push_str(&format!(", path erased from {paths} place(s)"));
        }
        Ok(said)
    }

    /// Every kept row, oldest first (for `export`).
    pub fn all(&self) -> Vec<Row> {
        self.inner.lock().ledger.rows.clone()
    }

    /// The content `sha`, if kept.
    pub fn blob(&self, sha: &str) -> Option<Vec<u8>> {
        self.inner.lock().disk.get(sha).ok()
    }
}

impl Inner {
    /// Takes rows back out of the ledger (they did not take effect).
    fn forget(&mut self, ids: &HashSet<u64>) {
        let next = self.ledger.next;
        let batch = self.ledger.batch;
        let mut rows = std::mem::take(&mut self.ledger.rows);
        rows.retain(|r| !ids.contains(&r.id()));
        self.ledger = Ledger::replay(rows);
        self.ledger.next = next;
        self.ledger.batch = batch;
    }
}

/// The note on a file found when the history began, its content not copied yet.
const BEFORE_HISTORY: &str =
    "there before the history began; its content is kept at its first change";

/// Before a change touches a file whose content the history has not copied
/// yet (found when the history began), keeps that content, read from the
/// file itself (not yet changed on disk), as a `found` version, so that the
/// change's version has something to go back to.
fn capture(
    ledger: &mut Ledger,
    change: &Change,
    memories: &OwnedFd,
    time: &str,
    blobs: &mut Vec<Blob>,
) -> Vec<Row> {
    let mut paths = Vec::new();
    for op in &change.ops {
        for at in op.paths() {
            if !matches!(
                op,
                crate::store::ChangeOp::SetMeta { .. } | crate::store::ChangeOp::SetTimes { .. }
            ) {
                paths.extend(ledger.under(at));
            }
        }
    }
    let mut out = Vec::new();
    for (path, live) in paths {
        let lazy = ledger.find(live.version).is_some_and(|r| {
            r.pruned && r.op == Op::Found && r.note.as_deref() == Some(BEFORE_HISTORY)
        });
        if !lazy || live.sha.is_empty() {
            continue;
        }
        let Ok(data) = crate::persist::read_file(memories, &path) else {
            continue;
        };
        if sha256_hex(&data) != live.sha {
            continue; // changed behind memfs' back: the file is not that content
        }
        let mut row = ledger.event(time, Op::Found, &path, Some((&live.sha, data.len() as u64)));
        row.note = Some("the content it had when the history began".to_string());
        blobs.push(Blob {
            sha: live.sha.clone(),
            data: std::sync::Arc::new(data),
        });
        ledger.push(row.clone());
        out.push(row);
    }
    out
}

/// Keeps each content not kept yet; returns the files written.
fn write_blobs(disk: &Disk, blobs: &[Blob]) -> io::Result<Vec<std::fs::File>> {
    let mut new = Vec::new();
    for blob in blobs {
        new.extend(disk.put(&blob.sha, &blob.data)?);
    }
    Ok(new)
}

/// Paths (as text) where the rows and the files disagree.
fn differing(
    ledger: &Ledger,
    files: &[(MemPath, String, std::sync::Arc<Vec<u8>>)],
) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen = HashSet::new();
    for (path, sha, _) in files {
        seen.insert(path);
        match ledger.live.get(path) {
            Some(live) if live.sha == *sha => {}
            _ => {
                out.insert(path.to_string());
            }
        }
    }
    for path in ledger.live.keys() {
        if !seen.contains(path) {
            out.insert(path.to_string());
        }
    }
    out
}

/// Every kept version's content, read from the data dir at `dir` without
/// taking its lock (for reports such as `memfs scan`): rows newest first,
/// each content once, with the versions that hold it.
pub fn kept_contents(dir: &std::path::Path) -> io::Result<Vec<(Vec<Row>, Vec<u8>)>> {
    let state = crate::persist::open_state_dir(&dir.join(".memfs"))?;
    let history = crate::persist::private_subdir(&state, "history", false)?;
    let objects = crate::persist::private_subdir(&history, "objects", false)?;
    let read = |dir: &OwnedFd, name: &str| -> io::Result<Vec<u8>> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut out = Vec::new();
        io::Read::read_to_end(
            &mut std::fs::File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?),
            &mut out,
        )?;
        Ok(out)
    };
    let text = read(&history, "log")?;
    let mut rows: Vec<Row> = text
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    let voided: HashSet<String> = rows
        .iter()
        .filter(|r| r.op == Op::Void)
        .filter_map(|r| r.replaces.clone())
        .collect();
    rows.retain(|r| r.op != Op::Void && !voided.contains(&r.version));
    let mut by_content: Vec<(Vec<Row>, Vec<u8>)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for row in rows.into_iter().rev() {
        let Some(sha) = row.sha256.clone().filter(|_| !row.pruned && !row.redacted) else {
            continue;
        };
        match index.get(&sha) {
            Some(&i) => {
                let entry: &mut (Vec<Row>, Vec<u8>) = &mut by_content[i];
                entry.0.push(row);
            }
            None => {
                if let Ok(data) = read(&objects, &sha) {
                    index.insert(sha, by_content.len());
                    by_content.push((vec![row], data));
                }
            }
        }
    }
    Ok(by_content)
}
