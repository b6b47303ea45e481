//! A search's time bound: a query around another whose scorers stop
//! (say there is nothing more) once the deadline has passed, and mark the
//! search as cut. The engine's own work between two documents is bounded
//! by the query's own bounds (terms, phrase length, the file size limit);
//! this bounds the number of documents.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED};

/// `inner`, stopped at `until`; `cut` is set when it was.
#[derive(Debug)]
pub struct Deadline {
    pub inner: Box<dyn Query>,
    pub until: Instant,
    pub cut: Arc<AtomicBool>,
}

impl Clone for Deadline {
    fn clone(&self) -> Deadline {
        Deadline {
            inner: self.inner.box_clone(),
            until: self.until,
            cut: self.cut.clone(),
        }
    }
}

struct DeadlineWeight {
    inner: Box<dyn Weight>,
    until: Instant,
    cut: Arc<AtomicBool>,
}

struct DeadlineScorer {
    inner: Box<dyn Scorer>,
    until: Instant,
    cut: Arc<AtomicBool>,
    stopped: bool,
}

impl Query for Deadline {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(DeadlineWeight {
            inner: self.inner.weight(scoring)?,
            until: self.until,
            cut: self.cut.clone(),
        }))
    }
}

impl Weight for DeadlineWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(Box::new(DeadlineScorer {
            inner: self.inner.scorer(reader, boost)?,
            until: self.until,
            cut: self.cut.clone(),
            stopped: false,
        }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.inner.explain(reader, doc)
    }
}

impl DeadlineScorer {
    /// Whether the deadline has passed (looked at each step: a step over
    /// one document can take milliseconds, a look at the clock takes
    /// nanoseconds).
    fn over(&mut self) -> bool {
        if self.stopped {
            return true;
        }
        if Instant::now() >= self.until {
            self.stopped = true;
            self.cut.store(true, Ordering::Relaxed);
        }
        self.stopped
    }
}

impl DocSet for DeadlineScorer {
    fn advance(&mut self) -> DocId {
        if self.over() {
            return TERMINATED;
        }
        self.inner.advance()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.over() {
            return TERMINATED;
        }
        self.inner.seek(target)
    }

    fn doc(&self) -> DocId {
        match self.stopped {
            true => TERMINATED,
            false => self.inner.doc(),
        }
    }

    fn size_hint(&self) -> u32 {
        self.inner.size_hint()
    }
}

impl Scorer for DeadlineScorer {
    fn score(&mut self) -> Score {
        self.inner.score()
    }
}
