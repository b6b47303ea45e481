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

use std::collections::{BTreeMap, HashMap};
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

/// What one path's readers saw: pid → (change counter, content).
type Readers = HashMap<u32, (u64, Option<Content>)>;

/// Paths are kept in order, so that a path and everything below it (a
/// directory removed or moved) are one range: what a change removes or
/// moves away is forgotten with it, and nothing is kept of paths that are
/// gone (an editor's temporary file renamed over the file it saves, a
/// deleted file).
#[derive(Default)]
pub struct Fresh {
    /// path → pid → the store's change counter when that process last
    /// opened the file to read it (or wrote it: it knows its own content),
    /// and the content it saw then.
    reads: BTreeMap<MemPath, Readers>,
    /// The (pid, path) pairs `reads` holds.
    read_count: usize,
    /// The bytes of the contents `reads` holds.
    read_bytes: usize,
    /// path → (change counter, unseen?, content) of the change that put its
    /// content there last; unseen: by an agent (through a door, or its
    /// program through the mount) or by another host of a shared store, a
    /// change a person's program may save over without having read it.
    content_at: BTreeMap<MemPath, (u64, bool, Option<Content>)>,
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
        if self.read_count >= MAX {
            self.reads.clear();
            self.read_count = 0;
            self.read_bytes = 0;
        }
        let seen = seen.filter(|c| self.read_bytes + c.len() <= READ_BYTES);
        self.read_bytes += seen.as_ref().map_or(0, |c| c.len());
        match self.reads.entry(path).or_default().insert(pid, (seq, seen)) {
            Some((_, old)) => self.read_bytes -= old.map_or(0, |c| c.len()),
            None => self.read_count += 1,
        }
    }

    /// What process `pid` last read at `path`, if known.
    fn read_by(&self, pid: u32, path: &MemPath) -> Option<(u64, Option<Content>)> {
        self.reads.get(path)?.get(&pid).cloned()
    }

    /// What `op` takes away from a path (a removal; a move's source) is
    /// forgotten.
    fn gone(&mut self, op: &ChangeOp) {
        match op {
            ChangeOp::Remove { path } => self.forget(path),
            ChangeOp::Rename { from, .. } => self.forget(from),
            _ => {}
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
        for op in ops {
            let Some(path) = content_path(op) else {
                self.gone(op);
                continue;
            };
            let mut content = now(path);
            if let Some((pid, unread)) = &person {
                let pid = *pid;
                let read = self.read_by(pid, path).or(unread.clone());
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
            self.gone(op);
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
        for op in ops {
            if let Some(path) = content_path(op) {
                self.put(path, seq, true, now(path));
            }
            self.gone(op);
        }
    }

    /// Forgets every path at or below `at` (a redacted path: memfs keeps
    /// its name nowhere, in memory either).
    pub fn forget(&mut self, at: &MemPath) {
        for path in below(&self.reads, at) {
            for (_, (_, seen)) in self.reads.remove(&path).unwrap_or_default() {
                self.read_count -= 1;
                self.read_bytes -= seen.map_or(0, |c| c.len());
            }
        }
        for path in below(&self.content_at, at) {
            self.content_at.remove(&path);
        }
    }
}

/// The keys of `map` at or below `at` (one range: paths sort by their
/// names, a directory's descendants right after it).
fn below<V>(map: &BTreeMap<MemPath, V>, at: &MemPath) -> Vec<MemPath> {
    map.range(at.clone()..)
        .take_while(|(p, _)| p.starts_with(at))
        .map(|(p, _)| p.clone())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::change::Meta;
    use std::time::SystemTime;

    fn p(s: &str) -> MemPath {
        MemPath::parse(s).unwrap()
    }

    fn write(path: &MemPath, text: &str) -> ChangeOp {
        ChangeOp::Write {
            path: path.clone(),
            data: Arc::new(text.as_bytes().to_vec()),
            meta: Meta {
                perm: 0o600,
                uid: 0,
                gid: 0,
                atime: SystemTime::UNIX_EPOCH,
                mtime: SystemTime::UNIX_EPOCH,
            },
        }
    }

    fn vim() -> Origin {
        Origin::Person {
            uid: 1000,
            pid: 42,
            process: crate::store::Process::new("vim"),
        }
    }

    /// Nothing is kept of a path once it is gone: an editor's saves (a
    /// temporary file of a new name each time, renamed over the file) and
    /// files written then deleted leave what is known about live paths
    /// only, however many there were (the soak's server grew by what this
    /// kept, 0.7 MiB a minute).
    #[test]
    fn what_is_removed_or_moved_away_is_forgotten_with_it() {
        let mut fresh = Fresh::default();
        let file = p("/memories/notes.md");
        for i in 0..1000u64 {
            let tmp = p(&format!("/memories/.notes.md.tmp{i}"));
            let text = format!("save {i}\n");
            let ops = [
                write(&tmp, &text),
                ChangeOp::Rename {
                    from: tmp.clone(),
                    to: file.clone(),
                    replace: true,
                },
            ];
            let now = |_: &MemPath| Some(Arc::new(text.as_bytes().to_vec()));
            fresh.judge(2 * i + 1, &vim(), &ops, &now);
            let gone = p(&format!("/memories/scratch{i}.md"));
            fresh.judge(
                2 * i + 2,
                &Origin::agent(crate::store::Door::Stdio),
                &[write(&gone, "x")],
                &now,
            );
            fresh.judge(
                2 * i + 2,
                &Origin::agent(crate::store::Door::Stdio),
                &[ChangeOp::Remove { path: gone }],
                &now,
            );
        }
        assert_eq!(fresh.content_at.keys().collect::<Vec<_>>(), vec![&file]);
        assert_eq!(fresh.reads.keys().collect::<Vec<_>>(), vec![&file]);
        assert_eq!(
            (fresh.read_count, fresh.read_bytes),
            (1, "save 999\n".len())
        );
        // A directory removed takes what is below it, and only that.
        let (a, ab, b) = (
            p("/memories/a"),
            p("/memories/a/b.md"),
            p("/memories/a!.md"),
        );
        let now = |_: &MemPath| Some(Arc::new(b"y".to_vec()));
        fresh.judge(5000, &vim(), &[write(&ab, "y"), write(&b, "y")], &now);
        fresh.judge(5001, &vim(), &[ChangeOp::Remove { path: a }], &now);
        assert_eq!(fresh.content_at.keys().collect::<Vec<_>>(), vec![&b, &file]);
    }
}
