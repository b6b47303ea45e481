//! The one serving loop every line protocol shares: a reader applies each
//! line as soon as it has it; a second thread waits for each answer to be
//! ready (its change durable) and writes it, in order, flushed per line. So
//! pipelined lines share durability barriers, and no answer goes out before
//! its change is safe.
//!
//! A peer that sends but does not read its answers is not queued for without
//! bound: once [`QUEUED_BYTES`] of answers wait for the writer, the reader
//! stops reading (backpressure), and the peer's own socket buffer fills.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use crate::lock::{rank, Condvar, Mutex};

use super::reader::{LineReader, Next};

/// A line protocol: how a line becomes an answer, and an answer text.
pub trait Protocol: Sync {
    type Answer: Send;
    /// Applies one non-blank line; `None` when it wants no answer.
    fn handle(&self, line: &[u8]) -> Option<Self::Answer>;
    /// The answer to a line longer than `limit` bytes.
    fn too_long(&self, limit: usize) -> Self::Answer;
    /// The last answer to a peer that started a line and did not finish it in time.
    fn timed_out(&self, after: Duration) -> Self::Answer;
    /// About how many bytes the answer holds while it waits to be written.
    fn weight(answer: &Self::Answer) -> usize;
    /// Waits until the answer is ready and renders it (without newline).
    fn finish(answer: Self::Answer) -> String;
}

/// What one peer may make the server hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The longest line read; a longer one is skipped with an error answer.
    pub max_line: usize,
    /// How long a peer may take to finish a line it started; `None` waits
    /// for ever (stdio: the peer is the process that started memfs). Idle
    /// time between whole lines is never limited.
    pub line_timeout: Option<Duration>,
}

pub use super::activity::{Activity, Unobserved};

/// Bytes of answers waiting for the writer at most (one larger answer may
/// still go through alone).
pub const QUEUED_BYTES: usize = 1 << 20;

/// Serves `input` until it ends, answering on `output`: the writer thread
/// ([`write_answers`]) and the reader loop live in one `thread::scope` and
/// share the channel, the byte budget and the activity observer.
pub fn serve<P: Protocol>(
    protocol: &P,
    input: impl BufRead,
    output: impl Write + Send,
    bounds: Bounds,
    activity: &dyn Activity,
) -> io::Result<()> {
    let (send, receive) = mpsc::channel::<(P::Answer, usize)>();
    let queued = Budget {
        state: Mutex::new(rank::PIPELINE_BUDGET, (0, false)),
        freed: Condvar::new(),
    };
    std::thread::scope(|scope| {
        let queued = &queued;
        let writer = scope.spawn(move || write_answers::<P, _>(receive, output, queued, activity));
        let mut lines = LineReader::new(input, bounds.max_line, bounds.line_timeout, activity);
        let read = loop {
            let (answer, last) = match lines.next_line() {
                Ok(Next::Line(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {
                    activity.line_read(false);
                    continue;
                }
                Ok(Next::Line(bytes)) => match protocol.handle(bytes) {
                    Some(answer) => (answer, false),
                    None => {
                        activity.line_read(false);
                        continue;
                    }
                },
                Ok(Next::TooLong) => (protocol.too_long(bounds.max_line), false),
                Ok(Next::TimedOut(after)) => (protocol.timed_out(after), true),
                Ok(Next::End) => break Ok(()),
                Err(e) => break Err(e),
            };
            activity.line_read(true);
            // Every answer costs something, so the count of queued ones is bounded too.
            let weight = P::weight(&answer).max(64);
            queued.take(weight);
            if send.send((answer, weight)).is_err() || last {
                break Ok(()); // the writer stopped (the output is gone), or we did
            }
        };
        drop(send);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the answer writer panicked")));
        read.and(written)
    })
}

/// The writer: each answer as a line, flushed, its weight given back to
/// the budget, until the reader stops sending or the output fails.
fn write_answers<P: Protocol, W: Write>(
    receive: mpsc::Receiver<(P::Answer, usize)>,
    mut output: W,
    queued: &Budget,
    activity: &dyn Activity,
) -> io::Result<()> {
    let written = receive.iter().try_for_each(|(answer, weight)| {
        let mut text = P::finish(answer);
        text.push('\n');
        let written = output
            .write_all(text.as_bytes())
            .and_then(|()| output.flush());
        queued.release(weight);
        activity.answer_written();
        written
    });
    // The reader must never wait for room that nobody will free.
    queued.close();
    written
}

/// Bytes of answers in the queue; taking blocks while it is over
/// [`QUEUED_BYTES`], until the writer frees some or is gone.
struct Budget {
    state: Mutex<(usize, bool)>,
    freed: Condvar,
}

impl Budget {
    fn take(&self, weight: usize) {
        let mut state = self.state.lock();
        while !state.1 && state.0 > 0 && state.0 + weight > QUEUED_BYTES {
            self.freed.wait(&mut state);
        }
        state.0 += weight;
    }

    fn release(&self, weight: usize) {
        self.state.lock().0 -= weight;
        self.freed.notify_all();
    }

    fn close(&self) {
        self.state.lock().1 = true;
        self.freed.notify_all();
    }
}
