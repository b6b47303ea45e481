//! The one serving loop every line protocol shares: a reader applies each
//! line as soon as it has it; a second thread waits for each answer to be
//! ready (its change durable) and writes it, in order, flushed per line. So
//! pipelined lines share durability barriers, and no answer goes out before
//! its change is safe.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;

use super::reader::{LineReader, Next};

/// A line protocol: how a line becomes an answer, and an answer text.
pub trait Protocol: Sync {
    type Answer: Send;
    /// Applies one non-blank line; `None` when it wants no answer.
    fn handle(&self, line: &[u8]) -> Option<Self::Answer>;
    /// The answer to a line longer than `limit` bytes.
    fn too_long(&self, limit: usize) -> Self::Answer;
    /// Waits until the answer is ready and renders it (without newline).
    fn finish(answer: Self::Answer) -> String;
}

/// Answers queued for the writer at most; a reader this far ahead waits.
const IN_FLIGHT: usize = 4096;

/// Serves `input` until it ends, answering on `output`.
pub fn serve<P: Protocol>(
    protocol: &P,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<()> {
    let (send, receive) = mpsc::sync_channel::<P::Answer>(IN_FLIGHT);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> io::Result<()> {
            let mut output = output;
            for answer in receive {
                let mut text = P::finish(answer);
                text.push('\n');
                output.write_all(text.as_bytes())?;
                output.flush()?;
            }
            Ok(())
        });
        let mut lines = LineReader::new(input, max_line);
        let read = loop {
            let answer = match lines.next_line() {
                Ok(Next::Line(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Next::Line(bytes)) => match protocol.handle(bytes) {
                    Some(answer) => answer,
                    None => continue,
                },
                Ok(Next::TooLong) => protocol.too_long(max_line),
                Ok(Next::End) => break Ok(()),
                Err(e) => break Err(e),
            };
            if send.send(answer).is_err() {
                break Ok(()); // the writer stopped: the output is gone
            }
        };
        drop(send);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the answer writer panicked")));
        read.and(written)
    })
}
