//! What people last read, and who last changed each path's content: for
//! telling a lost update (a person saving over an agent's change that
//! their process had not read) from an ordinary save. Decided here, when
//! the change is made, and carried on the change (`Change::overwrites`).
//!
//! What was read and what was put are kept too (the tree's own buffers,
//! shared, within a budget): a save through the mount over an unread change
//! is merged with it against what the saver's process read
//! (`merge::three_way`) where the two changed different lines, and is a
//! lost update only where they did not. The files door's saves are not
//! merged: what a program read of a plain file is not known (only what the
//! file showed before its change), so they stay lost updates.

use std::collections::HashMap;
use std::sync::Arc;

use super::change::{ChangeOp, Origin};
use crate::merge::{three_way, Merged};
use crate::path::MemPath;

/// Bound on what is remembered: past it, the oldest knowledge is dropped
/// (a save then counts as an ordinary write).
const MAX: usize = 65_536;

/// Bound on the bytes of what readers read that only `reads` keeps alive
/// (counted per read; past it, a read is remembered without its content,
/// and a save over an unread change by that reader is not merged).
const READ_BYTES: usize = 64 << 20;

/// The reader the files door counts as: what the plain files showed it.
pub const FILES_READER: u32 = u32::MAX;

/// A file's content, shared with the tree.
pub type Content = Arc<Vec<u8>>;

#[derive(Default)]
pub struct Fresh {
    /// (pid, path) → the store's change counter when that process last
    /// opened the file to read it (or wrote it: it knows its own content),
    /// and the content it saw then.
    reads: HashMap<(u32, MemPath), (u64, Option<Content>)>,
    /// The bytes of the contents `reads` holds.
    read_bytes: usize,
    /// path → (change counter, unseen?, content) of the change that put its
    /// content there last; unseen: by an agent (through a door, or its
    /// program through the mount) or by another host of a shared store, a
    /// change a person's program may save over without having read it.
    content_at: HashMap<MemPath, (u64, bool, Option<Content>)>,
}

/// What a change does to what others put (see [`Fresh::judge`]).
#[derive(Debug, Default)]
pub struct Judged {
    /// Paths it saves over an unread change (lost updates).
    pub stale: Vec<MemPath>,
    /// Paths where it saves over an unread change that changed other
    /// lines: the merge of the two, to be the path's content instead.
    pub merges: Vec<(MemPath, Content)>,
}

impl Fresh {
    pub fn note_read(&mut self, pid: u32, path: MemPath, seq: u64, seen: Option<Content>) {
        if self.reads.len() >= MAX {
            self.reads.clear();
            self.read_bytes = 0;
        }
        let seen = seen.filter(|c| self.read_bytes + c.len() <= READ_BYTES);
        self.read_bytes += seen.as_ref().map_or(0, |c| c.len());
        if let Some((_, Some(old))) = self.reads.insert((pid, path), (seq, seen)) {
            self.read_bytes -= old.len();
        }
    }

    /// What change `seq` (by `origin`, doing `ops`) saves over an agent's
    /// change its process had not read, merged where it can be; and notes
    /// who wrote what. `now` is a path's content with the change applied.
    pub fn judge(
        &mut self,
        seq: u64,
        origin: &Origin,
        ops: &[ChangeOp],
        now: &dyn Fn(&MemPath) -> Option<Content>,
    ) -> Judged {
        // (A person's process; for the files door, a path it never saw
        // memory's content at counts as read before any change.)
        let person = match origin {
            Origin::Person { pid, .. } => Some((*pid, None)),
            Origin::Files { .. } => Some((FILES_READER, Some((0, None)))),
            _ => None,
        };
        // (Whether this change's content counts as unread by others.)
        let unseen = match origin {
            Origin::Agent { .. } => true,
            Origin::Person { process, .. } => process.is_agent_program(),
            _ => false,
        };
        let mut judged = Judged::default();
        for path in ops.iter().filter_map(content_path) {
            let mut content = now(path);
            if let Some((pid, unread)) = &person {
                let pid = *pid;
                let read = self
                    .reads
                    .get(&(pid, path.clone()))
                    .cloned()
                    .or(unread.clone());
                let by_agent = self.content_at.get(path).cloned();
                if let (Some((read, seen)), Some((at, true, theirs))) = (read, by_agent) {
                    if at > read {
                        // (Through the mount the saver's read is known; the
                        // files door's is a guess, what it last wrote: no
                        // merge on a guess.)
                        let seen = seen.filter(|_| pid != FILES_READER);
                        match merged(seen, content.clone(), theirs) {
                            // The save already holds the other change (made
                            // in place on the file it changed): nothing lost.
                            Some(m) if content.as_deref() == Some(&*m) => {}
                            Some(m) => {
                                judged.merges.push((path.clone(), m.clone()));
                                content = Some(m);
                            }
                            None => judged.stale.push(path.clone()),
                        }
                    }
                }
                self.note_read(pid, path.clone(), seq, content.clone());
            }
            self.put(path, seq, unseen, content);
        }
        judged
    }

    /// Notes who put the content at `path` last (bounded, as `reads` is).
    fn put(&mut self, path: &MemPath, seq: u64, unseen: bool, content: Option<Content>) {
        if self.content_at.len() >= MAX && !self.content_at.contains_key(path) {
            self.content_at.clear();
        }
        self.content_at.insert(path.clone(), (seq, unseen, content));
    }

    /// Notes another host's change `seq` (a shared store's follower applied
    /// `ops`; `now`, a path's content after them): a save over it by a
    /// program that read the file before it arrived is a lost update, or a
    /// merge.
    pub fn note_foreign(
        &mut self,
        seq: u64,
        ops: &[ChangeOp],
        now: &dyn Fn(&MemPath) -> Option<Content>,
    ) {
        for path in ops.iter().filter_map(content_path) {
            self.put(path, seq, true, now(path));
        }
    }

    /// Forgets every path at or below `at` (a redacted path: memfs keeps
    /// its name nowhere, in memory either).
    pub fn forget(&mut self, at: &MemPath) {
        let bytes = &mut self.read_bytes;
        self.reads.retain(|(_, p), (_, seen)| {
            let keep = !p.starts_with(at);
            if !keep {
                *bytes -= seen.as_ref().map_or(0, |c| c.len());
            }
            keep
        });
        self.content_at.retain(|p, _| !p.starts_with(at));
    }
}

/// The merge of a save (`ours`) over an unread change (`theirs`) against
/// what the saver read (`seen`), where all three are known and the two
/// changed different lines.
fn merged(
    seen: Option<Content>,
    ours: Option<Content>,
    theirs: Option<Content>,
) -> Option<Content> {
    match three_way(&seen?, &ours?, &theirs?) {
        Merged::Clean(m) => Some(Arc::new(m)),
        Merged::Conflict => None,
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
