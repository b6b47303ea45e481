//! The batch builder: a batch of changes made into one frame under the
//! journal state's lock, with no I/O and no lock of its own. Each change's
//! records (applied to the view, with what undoes them), which contents
//! the frame carries and which it names (decided in one place, recording
//! what it names for a compaction running meanwhile), what each change
//! writes into the plain files, the changes that fit kept and the rest
//! taken back, the frame's changes and body; and one rollback, which gives
//! the view back and hands back what was owed.

use std::sync::Arc;

use super::deferred::ForCheckpointer;
use super::record::{ChangeRec, ContentRec};
use super::state::State;
use super::versions::{self, Context, Needed};
use super::view::Undo;
use crate::digest::Sha;
use crate::store::Change;

/// Records the journal owes to its next frame (a shared store's batch
/// whose frame the disk refused), with the contents they need.
pub(super) type Owed = Vec<(ChangeRec, Vec<Needed>)>;

/// One batch built into a frame (see the module's doc).
pub(super) struct Built {
    /// Each change's records (none for a change without operations).
    pub(super) records: Vec<Option<ChangeRec>>,
    /// The contents each change's records name.
    pub(super) needs: Vec<Vec<Needed>>,
    /// What undoes each change's records in the view.
    undos: Vec<Undo>,
    /// The owed records, first in the frame.
    pub(super) start: Owed,
    /// Checkpointer batches owed, handed over once this frame is written.
    pub(super) owed_batches: Vec<ForCheckpointer>,
    pub(super) placing: Placement,
    /// Bytes each change writes into the plain files.
    pub(super) plain: Vec<u64>,
}

impl Built {
    /// Records `changes` into the view (their versions numbered from the
    /// state's ids) and places their contents after `start`'s.
    pub(super) fn build(
        st: &mut State,
        changes: &[Change],
        cx: &Context,
        start: Owed,
        owed_batches: Vec<ForCheckpointer>,
    ) -> Built {
        let mut records = Vec::with_capacity(changes.len());
        let mut undos = Vec::with_capacity(changes.len());
        let mut needs = Vec::with_capacity(changes.len());
        for change in changes {
            let mut undo = Undo::new();
            let mut needed = Vec::new();
            let State { view, ids, .. } = &mut *st;
            let record = if change.ops.is_empty() {
                None
            } else if let Some(foreign) = &change.foreign {
                versions::record_foreign(view, change, foreign, ids, &mut undo, &mut needed)
            } else {
                Some(versions::record(
                    view,
                    change,
                    ids,
                    cx,
                    &mut undo,
                    &mut needed,
                ))
            };
            records.push(record);
            undos.push(undo);
            needs.push(needed);
        }
        let placing = Placement::of(st, &start, &needs);
        Built {
            records,
            needs,
            undos,
            start,
            owed_batches,
            placing,
            plain: changes.iter().map(plain_bytes).collect(),
        }
    }

    /// Places the contents again, after the state's lock was let go (a
    /// compaction may have dropped a content the frame was to name).
    pub(super) fn place_again(&mut self, st: &mut State) {
        self.placing = Placement::of(st, &self.start, &self.needs);
    }

    /// Keeps the first `fits` changes: the view gives back the others,
    /// latest first.
    pub(super) fn keep(&mut self, st: &mut State, fits: usize) {
        for undo in self.undos.drain(fits.min(self.undos.len())..).rev() {
            st.view.roll_back(undo);
        }
    }

    /// The frame's records: the owed ones, then those of the `fits`
    /// changes kept.
    pub(super) fn frame_changes(&self, fits: usize) -> Vec<ChangeRec> {
        self.start
            .iter()
            .map(|(rec, _)| rec.clone())
            .chain(self.records[..fits].iter().flatten().cloned())
            .collect()
    }

    /// The frame's body and what it places: the owed records' contents and
    /// those of the `fits` changes kept (taken out of the placement).
    pub(super) fn take_body(&mut self, fits: usize) -> (Vec<Arc<Vec<u8>>>, Vec<ContentRec>) {
        let len = self.placing.start_len + self.placing.new_bytes[..fits].iter().sum::<u64>();
        trim_body(
            std::mem::take(&mut self.placing.body),
            std::mem::take(&mut self.placing.placed),
            len,
        )
    }

    /// The one rollback, when the frame is not written: the view as it
    /// was before the batch (latest change first), and what was owed, to
    /// be owed again.
    pub(super) fn roll_back(self, st: &mut State) -> (Owed, Vec<ForCheckpointer>) {
        for undo in self.undos.into_iter().rev() {
            st.view.roll_back(undo);
        }
        (self.start, self.owed_batches)
    }
}

/// Which contents a frame carries in its body and which it only names,
/// decided in one place, under the journal state's lock: a content the
/// journal holds already is named, and recorded for a compaction running
/// meanwhile (which must then not drop it); any other goes in the body,
/// once. The owed records' contents go first.
pub(super) struct Placement {
    pub(super) body: Vec<Arc<Vec<u8>>>,
    pub(super) placed: Vec<ContentRec>,
    /// Bytes of new contents each change brings.
    pub(super) new_bytes: Vec<u64>,
    /// Bytes of the owed records' contents, at the body's start.
    pub(super) start_len: u64,
}

impl Placement {
    pub(super) fn of(
        st: &mut State,
        start: &[(super::record::ChangeRec, Vec<Needed>)],
        needs: &[Vec<Needed>],
    ) -> Placement {
        let mut p = Placement {
            body: Vec::new(),
            placed: Vec::new(),
            new_bytes: vec![0; needs.len()],
            start_len: 0,
        };
        let mut seen = std::collections::HashSet::new();
        let mut at = 0u64;
        let owed = start.iter().map(|(_, needed)| (None, needed));
        let new = needs
            .iter()
            .enumerate()
            .map(|(i, needed)| (Some(i), needed));
        for (change, needed) in owed.chain(new) {
            for n in needed {
                if st.contents.contains_key(&n.sha) {
                    if let Some(named) = st.named_meanwhile.as_mut() {
                        named.insert(n.sha);
                    }
                    continue;
                }
                if !seen.insert(n.sha) {
                    continue;
                }
                let len = n.data.len() as u64;
                p.placed.push(ContentRec {
                    sha256: n.sha.hex(),
                    at,
                    len,
                });
                at += len;
                p.body.push(n.data.clone());
                match change {
                    Some(i) => p.new_bytes[i] += len,
                    None => p.start_len += len,
                }
            }
        }
        p
    }
}

/// Bytes a change writes into the plain files.
pub(super) fn plain_bytes(change: &Change) -> u64 {
    change
        .ops
        .iter()
        .map(|op| match op {
            crate::store::ChangeOp::Write { data, .. } => data.len() as u64,
            _ => 0,
        })
        .sum()
}

/// The body with only the contents of the changes that fit (they come
/// first: contents are placed in change order).
pub(super) fn trim_body(
    body: Vec<Arc<Vec<u8>>>,
    placed: Vec<ContentRec>,
    len: u64,
) -> (Vec<Arc<Vec<u8>>>, Vec<ContentRec>) {
    let keep = placed.iter().take_while(|c| c.at + c.len <= len).count();
    (
        body.into_iter().take(keep).collect(),
        placed.into_iter().take(keep).collect(),
    )
}

/// A frame's body back as the contents it holds (to write them again).
pub(super) fn needed_of(body: Vec<Arc<Vec<u8>>>, placed: &[ContentRec]) -> Vec<Needed> {
    body.into_iter()
        .zip(placed)
        .filter_map(|(data, c)| {
            Some(Needed {
                sha: Sha::parse(&c.sha256)?,
                data,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::record::ChangeRec;
    use crate::journal::state::Loc;

    fn content(text: &str) -> Needed {
        let data = Arc::new(text.as_bytes().to_vec());
        Needed {
            sha: Sha::of(&data),
            data,
        }
    }

    fn held(st: &mut State, n: &Needed) {
        let loc = Loc {
            segment: 1,
            at: 0,
            len: n.data.len() as u64,
        };
        st.contents.insert(n.sha, loc);
    }

    fn owed(needed: Vec<Needed>) -> (ChangeRec, Vec<Needed>) {
        let rec = ChangeRec {
            change: 1,
            ops: Vec::new(),
            rows: Vec::new(),
        };
        (rec, needed)
    }

    fn write(path: &str, text: &str) -> Change {
        let meta = crate::store::Meta {
            perm: 0o644,
            uid: 0,
            gid: 0,
            atime: std::time::UNIX_EPOCH,
            mtime: std::time::UNIX_EPOCH,
        };
        Change::of_memfs(vec![crate::store::ChangeOp::Write {
            path: crate::path::MemPath::parse(path).unwrap(),
            data: Arc::new(text.as_bytes().to_vec()),
            meta,
        }])
    }

    fn view_of(st: &State) -> Vec<(String, super::super::view::VNode)> {
        st.view
            .iter()
            .map(|(k, n)| (k.to_string(), n.clone()))
            .collect()
    }

    fn built(st: &mut State, changes: &[Change], start: Owed) -> Built {
        let read_plain = |_: &crate::path::MemPath| None;
        let cx = Context {
            time: "2026-12-03T00:00:00Z",
            batch: 7,
            read_plain: &read_plain,
        };
        Built::build(st, changes, &cx, start, vec![(3, Vec::new(), 0)])
    }

    #[test]
    fn a_batch_becomes_one_frame_owed_records_first() {
        let mut st = crate::journal::startup::new_state();
        let before = st.ids.next_version;
        let changes = [
            write("/memories/a.md", "one"),
            Change::of_memfs(Vec::new()),
            write("/memories/b.md", "two"),
        ];
        let mut b = built(&mut st, &changes, vec![owed(vec![content("owed")])]);
        // A change without operations has no records; each other one has
        // its own, numbered in order.
        assert!(b.records[1].is_none());
        let (r0, r2) = (b.records[0].clone().unwrap(), b.records[2].clone().unwrap());
        assert_eq!(r0.rows.len() + r2.rows.len(), 2);
        assert!(r0.change < r2.change);
        assert_eq!(st.ids.next_version, before + 2);
        assert_eq!(b.plain, vec![3, 0, 3]);
        // The frame: the owed record, then the batch's, in order.
        let recs = b.frame_changes(3);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].change, 1, "the owed record first");
        assert_eq!((recs[1].change, recs[2].change), (r0.change, r2.change));
        // Its body: the owed content, then each change's new one.
        let (body, placed) = b.take_body(3);
        let texts: Vec<&[u8]> = body.iter().map(|d| d.as_slice()).collect();
        assert_eq!(texts, vec![&b"owed"[..], b"one", b"two"]);
        assert_eq!(
            placed.iter().map(|c| c.at).collect::<Vec<_>>(),
            vec![0, 4, 7]
        );
        assert!(st
            .view
            .get(&crate::path::MemPath::parse("/memories/b.md").unwrap())
            .is_some());
    }

    #[test]
    fn what_does_not_fit_is_taken_back_and_the_one_rollback_restores_the_view() {
        let mut st = crate::journal::startup::new_state();
        // The view already holds a file the batch overwrites.
        let first = built(&mut st, &[write("/memories/a.md", "old")], Vec::new());
        drop(first);
        let before = view_of(&st);
        let changes = [
            write("/memories/a.md", "new"),
            write("/memories/dir/b.md", "bee"),
        ];
        let mut b = built(&mut st, &changes, vec![owed(vec![content("owed")])]);
        assert_ne!(view_of(&st), before);
        // Only the first fits: the second is out of the view, the frame and
        // the body.
        b.keep(&mut st, 1);
        assert!(st
            .view
            .get(&crate::path::MemPath::parse("/memories/dir/b.md").unwrap())
            .is_none());
        assert_eq!(b.frame_changes(1).len(), 2);
        let (body, _) = b.take_body(1);
        assert_eq!(body.len(), 2, "the owed content and the first change's");
        // The frame is not written: one rollback, and the view is what it
        // was, with what was owed handed back.
        let (start, owed_batches) = b.roll_back(&mut st);
        assert_eq!(view_of(&st), before);
        assert_eq!(start.len(), 1);
        assert_eq!(start[0].1[0].sha, content("owed").sha);
        assert_eq!(owed_batches.len(), 1);
        assert_eq!(owed_batches[0].0, 3);
    }

    #[test]
    fn a_new_content_is_carried_once_and_one_the_journal_holds_is_named() {
        let mut st = crate::journal::startup::new_state();
        let (a, b, old) = (content("aa"), content("bbb"), content("old"));
        held(&mut st, &old);
        let needs = vec![
            vec![content("aa"), content("old")],
            vec![content("bbb"), content("aa")],
        ];
        let p = Placement::of(&mut st, &[], &needs);
        let shas: Vec<String> = p.placed.iter().map(|c| c.sha256.clone()).collect();
        assert_eq!(shas, vec![a.sha.hex(), b.sha.hex()]);
        // One after another in the body, each change counting what it brought.
        assert_eq!((p.placed[0].at, p.placed[1].at), (0, 2));
        assert_eq!(p.new_bytes, vec![2, 3]);
        assert_eq!(p.body.len(), 2);
        assert_eq!(p.start_len, 0);
    }

    #[test]
    fn what_a_frame_names_while_a_compaction_runs_is_recorded_owed_records_too() {
        let mut st = crate::journal::startup::new_state();
        let (x, y) = (content("x held"), content("y held"));
        held(&mut st, &x);
        held(&mut st, &y);
        // No compaction running: nothing recorded.
        Placement::of(
            &mut st,
            &[owed(vec![content("y held")])],
            &[vec![content("x held")]],
        );
        assert!(st.named_meanwhile.is_none());
        st.named_meanwhile = Some(Default::default());
        let p = Placement::of(
            &mut st,
            &[owed(vec![content("y held"), content("owed new")])],
            &[vec![content("x held"), content("new")]],
        );
        let named = st.named_meanwhile.clone().unwrap();
        assert!(
            named.contains(&x.sha) && named.contains(&y.sha),
            "{named:?}"
        );
        assert_eq!(named.len(), 2);
        // The owed record's new content goes first, before the batch's own.
        assert_eq!(p.start_len, "owed new".len() as u64);
        assert_eq!(p.placed[0].sha256, content("owed new").sha.hex());
        assert_eq!(p.placed[1].at, p.start_len);
    }
}
