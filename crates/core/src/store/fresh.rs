//! What people last read, and who last changed each path's content: for
//! telling a lost update (a person saving over an agent's change that
//! their process had not read) from an ordinary save. Decided here, when
//! the change is made, and carried on the change (`Change::overwrites`).

use std::collections::HashMap;

use super::change::{ChangeOp, Origin};
use crate::path::MemPath;

/// Bound on what is remembered: past it, the oldest knowledge is dropped
/// (a save then counts as an ordinary write).
const MAX: usize = 65_536;

/// The reader the files door counts as: what the plain files showed it.
pub const FILES_READER: u32 = u32::MAX;

#[derive(Default)]
pub struct Fresh {
    /// (pid, path) → the store's change counter when that process last
    /// opened the file to read it (or wrote it: it knows its own content).
    reads: HashMap<(u32, MemPath), u64>,
    /// path → (change counter, unseen?) of the change that put its content
    /// there last; unseen: by an agent (through a door, or its program
    /// through the mount) or by another host of a shared store, a change a
    /// person's program may save over without having read it.
    content_at: HashMap<MemPath, (u64, bool)>,
}

impl Fresh {
    pub fn note_read(&mut self, pid: u32, path: MemPath, seq: u64) {
        if self.reads.len() >= MAX {
            self.reads.clear();
        }
        self.reads.insert((pid, path), seq);
    }

    /// The paths change `seq` (by `origin`, doing `ops`) saves over an
    /// agent's change its process had not read; and notes who wrote what.
    pub fn judge(&mut self, seq: u64, origin: &Origin, ops: &[ChangeOp]) -> Vec<MemPath> {
        // (A person's process; for the files door, a path it never saw
        // memory's content at counts as read before any change.)
        let person = match origin {
            Origin::Person { pid, .. } => Some((*pid, None)),
            Origin::Files { .. } => Some((FILES_READER, Some(0))),
            _ => None,
        };
        // (Whether this change's content counts as unread by others.)
        let unseen = match origin {
            Origin::Agent { .. } => true,
            Origin::Person { process, .. } => process.is_agent_program(),
            _ => false,
        };
        let mut stale = Vec::new();
        for path in ops.iter().filter_map(content_path) {
            if let Some((pid, unread)) = person {
                let read = self.reads.get(&(pid, path.clone())).copied().or(unread);
                let by_agent = self.content_at.get(path).copied();
                if let (Some(read), Some((at, true))) = (read, by_agent) {
                    if at > read {
                        stale.push(path.clone());
                    }
                }
                self.note_read(pid, path.clone(), seq);
            }
            self.put(path, seq, unseen);
        }
        stale
    }

    /// Notes who put the content at `path` last (bounded, as `reads` is).
    fn put(&mut self, path: &MemPath, seq: u64, unseen: bool) {
        if self.content_at.len() >= MAX && !self.content_at.contains_key(path) {
            self.content_at.clear();
        }
        self.content_at.insert(path.clone(), (seq, unseen));
    }

    /// Notes another host's change `seq` (a shared store's follower applied
    /// `ops`): a save over it by a program that read the file before it
    /// arrived is a lost update.
    pub fn note_foreign(&mut self, seq: u64, ops: &[ChangeOp]) {
        for path in ops.iter().filter_map(content_path) {
            self.put(path, seq, true);
        }
    }

    /// Forgets every path at or below `at` (a redacted path: memfs keeps
    /// its name nowhere, in memory either).
    pub fn forget(&mut self, at: &MemPath) {
        self.reads.retain(|(_, p), _| !p.starts_with(at));
        self.content_at.retain(|p, _| !p.starts_with(at));
    }
}

/// The path an op puts a file's content at (a write's, a rename's target).
fn content_path(op: &ChangeOp) -> Option<&MemPath> {
    match op {
        ChangeOp::Write { path, .. } => Some(path),
        ChangeOp::Rename { to, .. } => Some(to),
        _ => None,
    }
}
