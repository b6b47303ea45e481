//! Three-way merge of a file's text: two sides changed one common version
//! (the base), and the merge keeps both sides' changes where they touch
//! different lines (docs/SEMANTICS.md, "Concurrent edits").
//!
//! A line diff3: each side is diffed against the base (`similar`, Myers,
//! with a deadline), each diff becomes hunks in the base's coordinates, and
//! hunks of the two sides that share a base line are one cluster. A cluster
//! changed by one side takes that side; by both sides the same way, takes
//! it once; by both sides as insertions at the same point (two machines
//! each appending a line to MEMORY.md, the common case), takes both,
//! theirs first, the lines both inserted once; otherwise the merge is a [`Merged::Conflict`] and the
//! caller keeps one side as the file and the other as a flagged version.
//!
//! Two changes that only touch (one ends on the line where the other
//! begins, or an insertion right before or after a changed range) share no
//! base line and are both kept: their order is the base's, so nothing is
//! ambiguous. (Git's merge calls these conflicts; for notes, where lines are
//! mostly independent, keeping both loses nothing and asks nobody.)
//!
//! The text is bytes: lines end at `\n`, nothing is decoded. A missing
//! newline at the end of a side is merged on its own (as the rest: changed
//! by one side, it takes that side), so that an append to a file with no
//! final newline is an insertion, not a change of its last line.

use std::time::{Duration, Instant};

use similar::{capture_diff_slices_deadline, Algorithm, DiffTag};

/// How long the diffs of one merge may look for the smallest diff before
/// they settle for a correct, larger one (more hunks, so more conflicts,
/// never a wrong merge).
const DIFF_DEADLINE: Duration = Duration::from_millis(200);

/// The outcome of [`three_way`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// Both sides' changes, in one text.
    Clean(Vec<u8>),
    /// Both sides changed the same lines differently: no merge.
    Conflict,
}

/// Which side a hunk comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Theirs,
}

/// One side's change of the base: base lines `start..end` became `lines`
/// (indices into that side's lines).
#[derive(Debug, Clone)]
struct Hunk {
    side: Side,
    start: usize,
    end: usize,
    lines: std::ops::Range<usize>,
}

/// A text cut into lines, each with its `\n` (the last may lack one), and
/// whether the text ended with a newline.
struct Lines<'a> {
    lines: Vec<&'a [u8]>,
    ends_with_newline: bool,
}

impl<'a> Lines<'a> {
    fn of(text: &'a [u8]) -> Lines<'a> {
        let ends_with_newline = text.is_empty() || text.ends_with(b"\n");
        let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
        if ends_with_newline {
            // What follows the final newline (or the empty text) is no line.
            lines.pop();
        }
        Lines {
            lines,
            ends_with_newline,
        }
    }
}

/// Merges `ours` and `theirs`, two versions made from `base`.
pub fn three_way(base: &[u8], ours: &[u8], theirs: &[u8]) -> Merged {
    if ours == theirs || theirs == base {
        return Merged::Clean(ours.to_vec());
    }
    if ours == base {
        return Merged::Clean(theirs.to_vec());
    }
    let (b, o, t) = (Lines::of(base), Lines::of(ours), Lines::of(theirs));
    let deadline = Instant::now() + DIFF_DEADLINE;
    let mut hunks = hunks_of(Side::Ours, &b, &o, deadline);
    hunks.extend(hunks_of(Side::Theirs, &b, &t, deadline));
    // Insertions before changes at the same base line: an insertion at a
    // range's start is outside the range.
    hunks.sort_by_key(|h| (h.start, h.end));
    let Some(lines) = merge_lines(&b, &o, &t, &hunks) else {
        return Merged::Conflict;
    };
    let ends_with_newline = if o.ends_with_newline == b.ends_with_newline {
        t.ends_with_newline
    } else {
        o.ends_with_newline
    };
    Merged::Clean(join(&lines, ends_with_newline))
}

/// `side`'s hunks against the base.
fn hunks_of(side: Side, base: &Lines, other: &Lines, deadline: Instant) -> Vec<Hunk> {
    let ops =
        capture_diff_slices_deadline(Algorithm::Myers, &base.lines, &other.lines, Some(deadline));
    let mut hunks: Vec<Hunk> = Vec::new();
    // The ops' own indices are not always where they apply (similar 2.7
    // can place an insertion after a deletion at the deletion's start):
    // the ranges are walked from the ops' lengths, which are exact.
    let (mut at_old, mut at_new) = (0, 0);
    for op in ops {
        let (tag, old, new) = op.as_tag_tuple();
        let old = at_old..at_old + old.len();
        let new = at_new..at_new + new.len();
        (at_old, at_new) = (old.end, new.end);
        if tag == DiffTag::Equal {
            continue;
        }
        // Hunks of one side that touch are one change of that side.
        match hunks.last_mut() {
            Some(last) if last.end == old.start && last.lines.end == new.start => {
                last.end = old.end;
                last.lines.end = new.end;
            }
            _ => hunks.push(Hunk {
                side,
                start: old.start,
                end: old.end,
                lines: new,
            }),
        }
    }
    debug_assert_eq!((at_old, at_new), (base.lines.len(), other.lines.len()));
    hunks
}

/// Whether `hunk` shares a base line with the cluster `start..end` (or is
/// an insertion at the same point as a cluster of insertions, or strictly
/// inside the cluster's range).
fn joins(start: usize, end: usize, hunk: &Hunk) -> bool {
    if start == end {
        // A cluster of insertions at one point: another insertion there.
        return hunk.start == start && hunk.end == start;
    }
    if hunk.start == hunk.end {
        return start < hunk.start && hunk.start < end;
    }
    hunk.start < end
}

/// The merged lines, or `None` on a conflict. `hunks` are sorted by start.
fn merge_lines<'a>(
    base: &Lines<'a>,
    ours: &Lines<'a>,
    theirs: &Lines<'a>,
    hunks: &[Hunk],
) -> Option<Vec<&'a [u8]>> {
    let mut out: Vec<&[u8]> = Vec::with_capacity(base.lines.len().max(ours.lines.len()));
    let mut at = 0; // the next base line not yet copied
    let mut i = 0;
    while i < hunks.len() {
        let (start, mut end) = (hunks[i].start, hunks[i].end);
        let mut j = i + 1;
        while j < hunks.len() && joins(start, end, &hunks[j]) {
            end = end.max(hunks[j].end);
            j += 1;
        }
        out.extend_from_slice(&base.lines[at..start]);
        let cluster = &hunks[i..j];
        let mine = side_of(Side::Ours, cluster, base, ours, start, end);
        let yours = side_of(Side::Theirs, cluster, base, theirs, start, end);
        match (mine, yours) {
            (Some(m), None) => out.extend(m),
            (None, Some(t)) => out.extend(t),
            (Some(m), Some(t)) if m == t => out.extend(m),
            // Both inserted at one point: both kept, theirs first.
            (Some(m), Some(t)) if start == end => out.extend(union(&t, &m)),
            (Some(_), Some(_)) => return None,
            (None, None) => {}
        }
        at = end;
        i = j;
    }
    out.extend_from_slice(&base.lines[at..]);
    Some(out)
}

/// Both insertions at one point, `theirs` first, the lines they share
/// (their longest common subsequence) once: an insertion that already
/// holds the other (one side saw part of the other's change, as a save
/// made in place on a file another writer changed meanwhile does) is not
/// doubled.
fn union<'a>(theirs: &[&'a [u8]], ours: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let ops = capture_diff_slices_deadline(
        Algorithm::Myers,
        theirs,
        ours,
        Some(Instant::now() + DIFF_DEADLINE),
    );
    let mut out = Vec::with_capacity(theirs.len() + ours.len());
    let (mut at_t, mut at_o) = (0, 0);
    for op in ops {
        let (tag, t, o) = op.as_tag_tuple();
        let (t, o) = (at_t..at_t + t.len(), at_o..at_o + o.len());
        (at_t, at_o) = (t.end, o.end);
        match tag {
            DiffTag::Equal => out.extend_from_slice(&theirs[t]),
            _ => {
                out.extend_from_slice(&theirs[t]);
                out.extend_from_slice(&ours[o]);
            }
        }
    }
    out
}

/// What `side` made of the base's lines `start..end`, or `None` when it left
/// them alone.
fn side_of<'a>(
    side: Side,
    cluster: &[Hunk],
    base: &Lines<'a>,
    text: &Lines<'a>,
    start: usize,
    end: usize,
) -> Option<Vec<&'a [u8]>> {
    let mut mine = cluster.iter().filter(|h| h.side == side).peekable();
    mine.peek()?;
    let mut out = Vec::new();
    let mut at = start;
    for hunk in mine {
        out.extend_from_slice(&base.lines[at..hunk.start]);
        out.extend_from_slice(&text.lines[hunk.lines.clone()]);
        at = hunk.end;
    }
    out.extend_from_slice(&base.lines[at..end]);
    Some(out)
}

/// The lines as a text: one `\n` after each, but the last when the text
/// ends without one.
fn join(lines: &[&[u8]], ends_with_newline: bool) -> Vec<u8> {
    let mut out = lines.join(&b'\n');
    if ends_with_newline && !lines.is_empty() {
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests;
