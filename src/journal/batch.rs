//! The batch builder's parts that need no lock of their own: which
//! contents a frame carries and which it names (decided in one place, under
//! the journal state's lock, recording what it names for a compaction
//! running meanwhile), what a change writes into the plain files, and the
//! body cut to the changes that fit.

use std::sync::Arc;

use super::record::ContentRec;
use super::state::State;
use super::versions::Needed;
use crate::digest::Sha;
use crate::store::Change;

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
