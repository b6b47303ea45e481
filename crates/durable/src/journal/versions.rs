//! How one store change becomes journal records: its ops as they go to
//! disk, and the versions (history rows) it makes, decided against the
//! journal's view of what each path held before it.
//!
//! Every change to a file is a version: an id (never reused), the time, the
//! actor, what it did, the content after it (sha256 and size), and the
//! version it replaces. Directory deletes and renames make one version per
//! file below them. A file written again unchanged makes none.

use std::sync::Arc;

use super::record::{op_rec, ChangeRec};
use super::row::{Actor, Op, Row, VersionId};
use super::view::{OnView, Undo, View};
use crate::digest::Sha;
use crate::path::MemPath;
use crate::store::interpret::{self, Found, Removal, Target};
use crate::store::{Change, ChangeOp, Meta, Origin};

/// The note on the copy of such a content, kept at the file's first change.
pub const CAPTURED: &str = "the content it had when the history began";

/// The ids the journal hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub next_version: u64,
    pub next_change: u64,
}

/// A content a record needs in the journal: new ones go in the frame's body.
pub struct Needed {
    pub sha: Sha,
    pub data: Arc<Vec<u8>>,
}

/// What the journal must know about one change to write it.
pub struct Context<'a> {
    pub time: &'a str,
    pub batch: u64,
    /// Reads a file's bytes from the plain files (a content found when the
    /// journal began, kept at its first change).
    pub read_plain: &'a dyn Fn(&MemPath) -> Option<Vec<u8>>,
}

fn row(ids: &mut Ids, cx: &Context, actor: &Actor, op: Op, path: &MemPath, change: u64) -> Row {
    let id = ids.next_version;
    ids.next_version += 1;
    Row {
        change: Some(change),
        ..Row::new(id, cx.time, actor.clone(), op, path.to_string(), cx.batch)
    }
}

/// The records of `change`, applied to `view` as they are made (noted in
/// `undo`), and the contents they need.
pub fn record(
    view: &mut View,
    change: &Change,
    ids: &mut Ids,
    cx: &Context,
    undo: &mut Undo,
    needed: &mut Vec<Needed>,
) -> ChangeRec {
    let number = ids.next_change;
    ids.next_change += 1;
    let mut rows = Vec::new();
    let mut ops = Vec::new();
    for op in &change.ops {
        // A file found when the history began keeps its content before its
        // first change: the change must have something to go back to.
        rows.extend(capture(view, op, ids, cx, number, undo, needed));
        let mut target = Rows {
            on: OnView::new(view, Some(undo)),
            change,
            number,
            actor: Actor::of(&change.origin),
            ids,
            cx,
            needed,
            made: Vec::new(),
            replaced: Vec::new(),
        };
        interpret::apply(op, &mut target);
        target.finish();
        let Rows { made, on, .. } = target;
        let sha = on.write.map(|(sha, _)| sha);
        settle_versions(view, &made, undo);
        ops.push(op_rec(op, sha.map(|s| s.hex()).as_deref()));
        rows.extend(made);
    }
    ChangeRec {
        change: number,
        ops,
        rows,
    }
}

/// The history's rows as a target of the interpreter: each primitive
/// effect on the view makes the rows of the files it changes, from the
/// view as it was just before.
struct Rows<'a, 'v> {
    on: OnView<'v>,
    change: &'a Change,
    number: u64,
    actor: Actor,
    ids: &'a mut Ids,
    cx: &'a Context<'a>,
    needed: &'a mut Vec<Needed>,
    made: Vec<Row>,
    /// The files a rename's target held, until the move says which of them
    /// a moved file replaced.
    replaced: Vec<(MemPath, u64)>,
}

impl Rows<'_, '_> {
    fn row(&mut self, op: Op, path: &MemPath) -> Row {
        row(self.ids, self.cx, &self.actor, op, path, self.number)
    }

    fn deleted(&mut self, gone: &MemPath, version: u64) {
        let kind = match self.change.origin {
            Origin::Expiry => Op::Expire,
            _ => Op::Delete,
        };
        let mut r = self.row(kind, gone);
        r.replaces = (version > 0).then_some(VersionId(version));
        self.made.push(r);
    }

    /// What a rename's target held and no move replaced is deleted.
    fn finish(&mut self) {
        for (gone, version) in std::mem::take(&mut self.replaced) {
            self.deleted(&gone, version);
        }
    }
}

impl Target for Rows<'_, '_> {
    fn found(&mut self, path: &MemPath) -> Option<Found> {
        self.on.found(path)
    }

    fn remove(&mut self, path: &MemPath, why: Removal) {
        for (gone, _, _, version, _) in self.on.view().files_under(path) {
            match why {
                Removal::Replaced => self.replaced.push((gone, version)),
                Removal::Named | Removal::InTheWay => self.deleted(&gone, version),
            }
        }
        self.on.remove(path, why);
    }

    fn make_dir(&mut self, path: &MemPath, meta: &Meta) {
        self.on.make_dir(path, meta);
    }

    fn put_file(&mut self, path: &MemPath, data: &Arc<Vec<u8>>, meta: &Meta) {
        let new = Sha::of(data);
        self.on.write = Some((new, data.len() as u64));
        let prev = self.on.view().get(path).and_then(|n| n.file());
        // Written again, unchanged: no version (its meta may move).
        if prev.is_none_or(|(s, ..)| s != new) {
            let origin = &self.change.origin;
            let kind = match origin {
                Origin::Revert { .. } => Op::Revert,
                _ if prev.is_none() => Op::Create,
                _ if self.change.overwrites.contains(path) => Op::Overwrite,
                _ => Op::Write,
            };
            let mut r = self.row(kind, path);
            r.sha256 = Some(new.hex());
            r.size = Some(data.len() as u64);
            r.replaces = prev.map(|p| p.2).filter(|v| *v > 0).map(VersionId);
            if let Origin::Revert { note, .. } = origin {
                r.note = note.as_deref().map(str::to_string);
            }
            if self.change.merged.contains(path) {
                r.note = Some(super::row::MERGED_NOTE.to_string());
            }
            self.needed.push(Needed {
                sha: new,
                data: data.clone(),
            });
            self.made.push(r);
        }
        self.on.put_file(path, data, meta);
    }

    fn put_symlink(&mut self, path: &MemPath, target: &str, meta: &Meta) {
        self.on.put_symlink(path, target, meta);
    }

    fn move_entry(&mut self, from: &MemPath, to: &MemPath) {
        let moved = self.on.view().files_under(from);
        let lands = |p: &MemPath| moved.iter().any(|m| m.0.rebase(from, to) == *p);
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.replaced)
            .into_iter()
            .partition(|(p, _)| lands(p));
        for (p, version) in gone {
            self.deleted(&p, version);
        }
        for (old, sha, size, _, _) in moved {
            let new = old.rebase(from, to);
            let replaced = kept.iter().find(|(p, _)| *p == new).map(|r| r.1);
            let kind = match self.change.overwrites.contains(&new) && replaced.is_some() {
                true => Op::Overwrite,
                false => Op::Rename,
            };
            let mut r = self.row(kind, &new);
            r.from = Some(old.to_string());
            r.sha256 = Some(sha.hex());
            r.size = Some(size);
            r.replaces = replaced.filter(|v| *v > 0).map(VersionId);
            self.made.push(r);
        }
        self.on.move_entry(from, to);
    }

    fn exchange(&mut self, a: &MemPath, b: &MemPath) {
        let view = self.on.view();
        let moves: Vec<_> = (view
            .files_under(a)
            .into_iter()
            .map(|f| (f.0.rebase(a, b), f)))
        .chain(
            view.files_under(b)
                .into_iter()
                .map(|f| (f.0.rebase(b, a), f)),
        )
        .collect();
        for (new, (old, sha, size, _, _)) in moves {
            let mut r = self.row(Op::Rename, &new);
            r.from = Some(old.to_string());
            r.sha256 = Some(sha.hex());
            r.size = Some(size);
            r.note = Some(super::row::EXCHANGED_NOTE.to_string());
            r.exchanged = true;
            self.made.push(r);
        }
        self.on.exchange(a, b);
    }

    fn set_meta(&mut self, path: &MemPath, meta: &Meta) {
        self.on.set_meta(path, meta);
    }

    fn set_times(&mut self, path: &MemPath, meta: &Meta) {
        self.on.set_times(path, meta);
    }
}

/// The record of another host's change (see `Change::foreign`): the
/// record it was committed with, applied to the view as it stands; its
/// contents are needed here. `None` if the record is not one (the change
/// is then the follower's to have made right).
pub fn record_foreign(
    view: &mut View,
    change: &Change,
    foreign: &crate::store::Foreign,
    ids: &mut Ids,
    undo: &mut Undo,
    needed: &mut Vec<Needed>,
) -> Option<ChangeRec> {
    let rec = foreign.record.downcast_ref::<ChangeRec>()?.clone();
    for op in &change.ops {
        let write = match op {
            ChangeOp::Write { data, .. } => {
                let sha = Sha::of(data);
                needed.push(Needed {
                    sha,
                    data: data.clone(),
                });
                Some((sha, data.len() as u64))
            }
            _ => None,
        };
        view.apply(op, write, Some(undo));
    }
    settle_versions(view, &rec.rows, undo);
    for row in &rec.rows {
        ids.next_version = ids.next_version.max(row.id() + 1);
    }
    ids.next_change = ids.next_change.max(rec.change + 1);
    Some(rec)
}

/// After an op is applied to the view: each row that leaves content at its
/// path is now that file's version.
pub fn settle_versions(view: &mut View, rows: &[Row], undo: &mut Undo) {
    for r in rows {
        if r.op.leaves_content() && r.sha256.is_some() {
            if let Ok(path) = MemPath::parse(&r.path) {
                view.set_version(&path, r.id(), Some(undo));
            }
        }
    }
}

/// [`settle_versions`] when reading the journal back: a file whose version
/// names a content the journal holds has it in the journal (not only in
/// the plain file).
pub fn settle_read(view: &mut View, rows: &[Row], in_journal: &dyn Fn(&Sha) -> bool) {
    for r in rows {
        if !r.op.leaves_content() {
            continue;
        }
        let (Ok(path), Some(sha)) = (MemPath::parse(&r.path), r.sha256.as_deref()) else {
            continue;
        };
        match Sha::parse(sha) {
            Some(sha) if in_journal(&sha) => view.mark_in_journal(&path, r.id(), None),
            _ => view.set_version(&path, r.id(), None),
        }
    }
}

/// For each file `op` changes, moves or removes whose content is only in
/// the plain file (found when the history began): a `found` version with
/// that content, read from the file (not yet changed on disk: the
/// checkpoint runs behind the journal).
fn capture(
    view: &mut View,
    op: &ChangeOp,
    ids: &mut Ids,
    cx: &Context,
    change: u64,
    undo: &mut Undo,
    needed: &mut Vec<Needed>,
) -> Vec<Row> {
    if matches!(op, ChangeOp::SetMeta { .. } | ChangeOp::SetTimes { .. }) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for at in op.paths() {
        for (path, sha, size, _, in_file) in view.files_under(at) {
            if !in_file {
                continue;
            }
            let Some(data) = (cx.read_plain)(&path).filter(|d| Sha::of(d) == sha) else {
                continue; // changed behind memfs' back: not that content
            };
            let mut r = row(ids, cx, &Actor::memfs(), Op::Found, &path, change);
            r.sha256 = Some(sha.hex());
            r.size = Some(size);
            r.replaces = view
                .get(&path)
                .and_then(|n| n.file())
                .map(|f| f.2)
                .filter(|v| *v > 0)
                .map(VersionId);
            r.note = Some(CAPTURED.to_string());
            needed.push(Needed {
                sha,
                data: Arc::new(data),
            });
            view.mark_in_journal(&path, r.id(), Some(undo));
            out.push(r);
        }
    }
    out
}
