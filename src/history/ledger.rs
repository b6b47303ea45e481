//! The history in memory: every kept row, the content each live path holds
//! (by the rows), and how store changes become rows. Nothing here touches
//! the disk; `History` writes what this decides.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::row::{Actor, Op, Row};
use crate::path::MemPath;
use crate::store::{Change, ChangeOp, Origin};

/// What the history says a live path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// Empty when the version is redacted.
    pub sha: String,
    pub size: u64,
    pub version: u64,
}

/// The note on the rows of an exchange (`renameat2(RENAME_EXCHANGE)`).
pub(crate) const EXCHANGED: &str = "exchanged";

/// Content a new row refers to, to be kept under its hash.
pub struct Blob {
    pub sha: String,
    pub data: Arc<Vec<u8>>,
}

pub fn sha256_hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

#[derive(Default)]
pub struct Ledger {
    /// Kept rows, oldest first (voided ones removed).
    pub rows: Vec<Row>,
    pub live: BTreeMap<MemPath, Live>,
    /// The next version id.
    pub next: u64,
    /// The last batch number used.
    pub batch: u64,
    /// For each kept content: how many rows name it, and its size.
    refs: HashMap<String, (u64, u64)>,
    /// Bytes of all kept contents (each once).
    pub kept_bytes: u64,
}

/// What a person last read, and whose content each path holds: for
/// telling a lost update from an ordinary save.
#[derive(Default)]
pub struct Fresh {
    /// (pid, path) → the store's change counter when that process opened the file.
    reads: HashMap<(u32, MemPath), u64>,
    /// path → (change counter, by an agent?, version) of the content there last.
    content_at: HashMap<MemPath, (u64, bool, u64)>,
}

/// Bound on remembered reads: past it, the oldest knowledge is dropped
/// (a save then counts as an ordinary write).
const MAX_READS: usize = 65_536;

impl Fresh {
    pub fn note_read(&mut self, pid: u32, path: MemPath, seq: u64) {
        if self.reads.len() >= MAX_READS {
            self.reads.clear();
        }
        self.reads.insert((pid, path), seq);
    }

    /// The agent's version `pid` is about to overwrite without having read it.
    fn stale(&self, pid: u32, path: &MemPath) -> Option<u64> {
        let read = *self.reads.get(&(pid, path.clone()))?;
        let &(seq, agent, version) = self.content_at.get(path)?;
        (agent && seq > read).then_some(version)
    }

    fn set(&mut self, path: &MemPath, seq: u64, agent: bool, version: u64) {
        if self.content_at.len() >= MAX_READS && !self.content_at.contains_key(path) {
            self.content_at.clear();
        }
        self.content_at.insert(path.clone(), (seq, agent, version));
    }
}

impl Ledger {
    /// The state the rows describe.
    pub fn replay(rows: Vec<Row>) -> Ledger {
        let mut ledger = Ledger::default();
        for row in rows {
            ledger.next = ledger.next.max(row.id() + 1);
            ledger.batch = ledger.batch.max(row.batch);
            ledger.push(row);
        }
        ledger.next = ledger.next.max(1);
        ledger
    }

    /// Adds a row and applies it to the live map and the content counts.
    pub fn push(&mut self, row: Row) {
        if let (Some(sha), Some(size), false) = (&row.sha256, row.size, row.pruned) {
            let entry = self.refs.entry(sha.clone()).or_insert((0, size));
            if entry.0 == 0 {
                self.kept_bytes += size;
            }
            entry.0 += 1;
        }
        let path = MemPath::parse(&row.path).ok();
        if let Some(path) = path {
            if row.op.leaves_content() && !(row.op == Op::Found && row.sha256.is_none()) {
                // (The two sides of an exchange each take the other's place.)
                if row.note.as_deref() != Some(EXCHANGED) {
                    if let Some(from) = row.from.as_deref().and_then(|f| MemPath::parse(f).ok()) {
                        self.live.remove(&from);
                    }
                }
                self.live.insert(
                    path,
                    Live {
                        sha: row.sha256.clone().unwrap_or_default(),
                        size: row.size.unwrap_or(0),
                        version: row.id(),
                    },
                );
            } else if matches!(row.op, Op::Delete | Op::Expire | Op::Found) {
                self.live.remove(&path);
            }
        }
        self.rows.push(row);
    }

    /// Drops the oldest rows: those recorded before `cutoff` (an RFC 3339
    /// time, which sorts as text), then more until the kept contents fit in
    /// `max_bytes`. A row that is still the current version of a file stays,
    /// without its content (`pruned`), so that the history goes on knowing
    /// what each file holds. Returns how many rows went or lost their
    /// content, and the contents nobody names any more.
    pub fn prune(&mut self, cutoff: &str, max_bytes: u64) -> (usize, Vec<String>) {
        let mut gone = Vec::new();
        let mut n = 0;
        let mut drop = HashSet::new();
        for i in 0..self.rows.len() {
            let row = &self.rows[i];
            if row.time.as_str() >= cutoff && self.kept_bytes <= max_bytes {
                break;
            }
            if row.pruned {
                continue;
            }
            n += 1;
            if let (Some(sha), false) = (row.sha256.clone(), row.pruned) {
                if let Some(entry) = self.refs.get_mut(&sha) {
                    entry.0 -= 1;
                    if entry.0 == 0 {
                        self.kept_bytes -= entry.1;
                        self.refs.remove(&sha);
                        gone.push(sha);
                    }
                }
            }
            let current = MemPath::parse(&row.path)
                .ok()
                .and_then(|p| self.live.get(&p))
                .is_some_and(|l| l.version == row.id());
            if current {
                self.rows[i].pruned = true;
            } else {
                drop.insert(row.id());
            }
        }
        self.rows.retain(|r| !drop.contains(&r.id()));
        (n, gone)
    }

    /// Whether some live path holds content `sha`.
    pub fn is_live_content(&self, sha: &str) -> bool {
        self.live.values().any(|l| l.sha == sha)
    }

    /// Erases a content from every row that names it; true if any did.
    pub fn forget_content(&mut self, sha: &str) -> bool {
        let mut any = false;
        for row in self.rows.iter_mut() {
            if row.sha256.as_deref() == Some(sha) {
                row.sha256 = None;
                row.redacted = true;
                any = true;
            }
        }
        if let Some((_, size)) = self.refs.remove(sha) {
            self.kept_bytes -= size;
        }
        for live in self.live.values_mut() {
            if live.sha == sha {
                live.sha.clear();
            }
        }
        any
    }

    pub fn find(&self, version: u64) -> Option<&Row> {
        self.rows
            .binary_search_by_key(&version, Row::id)
            .ok()
            .map(|i| &self.rows[i])
    }

    /// A new row with the next id.
    fn row(&mut self, time: &str, actor: &Actor, op: Op, path: &MemPath) -> Row {
        let id = self.next;
        self.next += 1;
        Row {
            version: id.to_string(),
            time: time.to_string(),
            actor: actor.clone(),
            op,
            path: path.to_string(),
            from: None,
            sha256: None,
            size: None,
            replaces: None,
            redacted: false,
            pruned: false,
            note: None,
            batch: self.batch,
        }
    }

    /// Rows that void the versions `ids` (they did not take effect).
    pub fn voids(&mut self, time: &str, ids: impl IntoIterator<Item = u64>) -> Vec<Row> {
        ids.into_iter()
            .map(|id| {
                let mut void = self.event(time, Op::Void, &MemPath::root(), None);
                void.replaces = Some(id.to_string());
                void
            })
            .collect()
    }

    /// A row of memfs' own (found at start, pruned history).
    pub fn event(&mut self, time: &str, op: Op, path: &MemPath, live: Option<(&str, u64)>) -> Row {
        let mut row = self.row(time, &Actor::memfs(), op, path);
        if let Some((sha, size)) = live {
            row.sha256 = Some(sha.to_string());
            row.size = Some(size);
        }
        row.replaces = self.live.get(path).map(|l| l.version.to_string());
        row
    }

    /// The rows one store change makes (applied here as they are made), and
    /// the contents they need kept.
    pub fn record(
        &mut self,
        change: &Change,
        time: &str,
        fresh: &Mutex<Fresh>,
        blobs: &mut Vec<Blob>,
    ) -> Vec<Row> {
        let actor = Actor::of(&change.origin);
        let agent = change.origin.is_agent();
        let person = match &change.origin {
            Origin::Person { pid, .. } => Some(*pid),
            _ => None,
        };
        let mut out = Vec::new();
        for op in &change.ops {
            match op {
                ChangeOp::Write { path, data, .. } => {
                    let sha = sha256_hex(data);
                    let prev = self.live.get(path).map(|l| (l.sha.clone(), l.version));
                    if prev.as_ref().is_some_and(|(s, _)| *s == sha) {
                        continue; // written again, unchanged: not a version
                    }
                    let stale = person.and_then(|pid| fresh.lock().stale(pid, path));
                    let (kind, replaces) = match (&change.origin, stale, &prev) {
                        (Origin::Revert { .. }, _, p) => (Op::Revert, p.as_ref().map(|p| p.1)),
                        (_, Some(agents), _) => (Op::Overwrite, Some(agents)),
                        (_, None, None) => (Op::Create, None),
                        (_, None, Some(p)) => (Op::Write, Some(p.1)),
                    };
                    let mut row = self.row(time, &actor, kind, path);
                    row.sha256 = Some(sha.clone());
                    row.size = Some(data.len() as u64);
                    row.replaces = replaces.map(|v| v.to_string());
                    if let Origin::Revert { version, .. } = &change.origin {
                        let undoes = self
                            .find(*version)
                            .map(|r| r.op)
                            .filter(|op| matches!(op, Op::Delete | Op::Expire | Op::Overwrite));
                        row.note = Some(match undoes {
                            Some(op) => format!("undoes version {version} ({})", op.as_str()),
                            None => format!("back to version {version}"),
                        });
                    }
                    {
                        let mut fresh = fresh.lock();
                        fresh.set(path, change.seq, agent, row.id());
                        if let Some(pid) = person {
                            fresh.note_read(pid, path.clone(), change.seq);
                        }
                    }
                    blobs.push(Blob {
                        sha,
                        data: data.clone(),
                    });
                    self.push(row.clone());
                    out.push(row);
                }
                ChangeOp::Remove { path } => {
                    let kind = if change.origin == Origin::Expiry {
                        Op::Expire
                    } else {
                        Op::Delete
                    };
                    for (gone, live) in self.under(path) {
                        let mut row = self.row(time, &actor, kind, &gone);
                        row.replaces = Some(live.version.to_string());
                        self.push(row.clone());
                        out.push(row);
                    }
                }
                ChangeOp::Rename { from, to, .. } => {
                    let moved = self.under(from);
                    for (old, _) in self.under(to) {
                        // Replaced by the move: the move's row says what it replaced.
                        if !moved.iter().any(|(m, _)| m.rebase(from, to) == old) {
                            let mut row = self.row(time, &actor, Op::Delete, &old);
                            row.replaces = self.live.get(&old).map(|l| l.version.to_string());
                            self.push(row.clone());
                            out.push(row);
                        }
                    }
                    for (old, live) in moved {
                        let new = old.rebase(from, to);
                        let stale = person.and_then(|pid| fresh.lock().stale(pid, &new));
                        let kind = if stale.is_some() {
                            Op::Overwrite
                        } else {
                            Op::Rename
                        };
                        let replaced = self.live.get(&new).map(|l| l.version);
                        let mut row = self.row(time, &actor, kind, &new);
                        row.from = Some(old.to_string());
                        row.sha256 = (!live.sha.is_empty()).then(|| live.sha.clone());
                        row.size = Some(live.size);
                        row.replaces = stale.or(replaced).map(|v| v.to_string());
                        fresh.lock().set(&new, change.seq, agent, row.id());
                        self.push(row.clone());
                        out.push(row);
                    }
                }
                ChangeOp::Exchange { a, b } => {
                    let side_a = self.under(a);
                    let side_b = self.under(b);
                    for (old, _) in side_a.iter().chain(&side_b) {
                        self.live.remove(old);
                    }
                    let moves = side_a
                        .into_iter()
                        .map(|(p, l)| (p.rebase(a, b), p, l))
                        .chain(side_b.into_iter().map(|(p, l)| (p.rebase(b, a), p, l)))
                        .collect::<Vec<_>>();
                    for (new, old, live) in moves {
                        let mut row = self.row(time, &actor, Op::Rename, &new);
                        row.from = Some(old.to_string());
                        row.sha256 = (!live.sha.is_empty()).then(|| live.sha.clone());
                        row.size = Some(live.size);
                        row.note = Some(EXCHANGED.to_string());
                        self.push(row.clone());
                        out.push(row);
                    }
                }
                ChangeOp::MakeDir { .. }
                | ChangeOp::Symlink { .. }
                | ChangeOp::SetMeta { .. }
                | ChangeOp::SetTimes { .. } => {}
            }
        }
        out
    }

    /// Every live path at or below `at`, with what it holds.
    pub fn under(&self, at: &MemPath) -> Vec<(MemPath, Live)> {
        self.live
            .range(at.clone()..)
            .take_while(|(p, _)| p.starts_with(at))
            .map(|(p, l)| (p.clone(), l.clone()))
            .collect()
    }
}
