//! The rows of the last frames appended, kept in memory beside the
//! segments: a reader that follows the history (the API's id index after
//! each write, `History::rows_after`) takes the frames just written from
//! here instead of opening the segment and reading them back.
//!
//! A frame is kept with the segment and the byte range it was written at,
//! and the count of rewrites when it was (a compaction or a redaction
//! changes what a segment holds: a frame kept from before one is never
//! served after it). A reader is served from here only when the frames
//! kept cover its whole range, end to end; otherwise it reads the disk, as
//! before. Bounded by frames and by rows.

use std::collections::VecDeque;

use super::row::Row;

/// At most this many frames are kept...
const MAX_FRAMES: usize = 256;
/// ...holding at most this many rows in all.
const MAX_ROWS: usize = 4096;

#[derive(Default)]
pub struct Recent {
    frames: VecDeque<Frame>,
    rows: usize,
}

struct Frame {
    rewrites: u64,
    segment: u64,
    start: u64,
    end: u64,
    rows: Vec<Row>,
}

impl Recent {
    /// The frame just written at `start..end` of `segment`, holding `rows`.
    pub fn push(&mut self, rewrites: u64, segment: u64, start: u64, end: u64, rows: Vec<Row>) {
        self.rows += rows.len();
        self.frames.push_back(Frame {
            rewrites,
            segment,
            start,
            end,
            rows,
        });
        while self.frames.len() > MAX_FRAMES || (self.rows > MAX_ROWS && self.frames.len() > 1) {
            if let Some(gone) = self.frames.pop_front() {
                self.rows -= gone.rows.len();
            }
        }
    }

    /// The rows of the frames of `segment` from byte `from` to byte `to`,
    /// in the order they were written, when every one of them is kept and
    /// was written since the `rewrites`-th rewrite began or ended.
    pub fn rows(&self, rewrites: u64, segment: u64, from: u64, to: u64) -> Option<Vec<Row>> {
        let first = self
            .frames
            .iter()
            .rposition(|f| f.segment == segment && f.start == from)?;
        let mut out = Vec::new();
        let mut at = from;
        for f in self.frames.iter().skip(first) {
            if at == to {
                break;
            }
            if f.rewrites != rewrites || f.segment != segment || f.start != at {
                return None;
            }
            out.extend(f.rows.iter().cloned());
            at = f.end;
        }
        (at == to).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: u64) -> Row {
        crate::journal::row::example(n, n, crate::journal::row::Op::Write, "/memories/a.md", None)
    }

    fn versions(rows: &[Row]) -> Vec<u64> {
        rows.iter().map(|r| r.version.0).collect()
    }

    #[test]
    fn a_range_of_whole_frames_is_served_and_anything_else_is_not() {
        let mut recent = Recent::default();
        recent.push(0, 1, 0, 100, vec![row(1)]);
        recent.push(0, 1, 100, 250, vec![row(2), row(3)]);
        recent.push(0, 2, 0, 80, vec![row(4)]);
        assert_eq!(versions(&recent.rows(0, 1, 0, 250).unwrap()), [1, 2, 3]);
        assert_eq!(versions(&recent.rows(0, 1, 100, 250).unwrap()), [2, 3]);
        assert_eq!(versions(&recent.rows(0, 2, 0, 80).unwrap()), [4]);
        // Not a frame's start, past what is kept, another segment's end,
        // a frame from before a rewrite.
        assert!(recent.rows(0, 1, 50, 250).is_none());
        assert!(recent.rows(0, 1, 100, 300).is_none());
        assert!(recent.rows(0, 1, 0, 80).is_none());
        assert!(recent.rows(2, 1, 0, 250).is_none());
    }

    #[test]
    fn the_oldest_frames_go_first_past_the_bounds() {
        let mut recent = Recent::default();
        for i in 0..(MAX_FRAMES as u64 + 10) {
            recent.push(0, 1, i * 10, i * 10 + 10, vec![row(i)]);
        }
        assert_eq!(recent.frames.len(), MAX_FRAMES);
        assert!(
            recent.rows(0, 1, 0, 10).is_none(),
            "the first frame is gone"
        );
        let last = MAX_FRAMES as u64 + 9;
        assert_eq!(
            versions(&recent.rows(0, 1, last * 10, last * 10 + 10).unwrap()),
            [last]
        );
        let many: Vec<Row> = (0..MAX_ROWS as u64).map(row).collect();
        recent.push(0, 1, 5000, 6000, many);
        assert_eq!(
            recent.frames.len(),
            1,
            "one frame over the rows' bound stays alone"
        );
        assert_eq!(recent.rows, MAX_ROWS);
    }
}
