//! Serving a stream of JSON lines (stdin, one socket client): answers in the
//! same order, one line each, flushed per line.
//!
//! The reader applies each line as soon as it has it; a second thread waits
//! for each change to be durable and writes the answer. So pipelined lines
//! share durability barriers, and no answer is sent before its change is safe.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;

use super::line::{self, Reply};
use super::reader::{LineReader, Next};
use crate::tool::Tool;

/// Answers queued for the writer at most; a reader this far ahead waits.
const IN_FLIGHT: usize = 4096;

/// Answers one line and closes (a client over the limit).
pub fn refuse(mut output: impl Write, text: &str) -> io::Result<()> {
    let line = line::render(&crate::tool::ToolResult::error(text), &line::Framing::Plain);
    output.write_all(line.as_bytes())?;
    output.write_all(b"\n")
}

/// Serves `input` until it ends, answering on `output`.
pub fn serve(
    tool: &Tool,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<()> {
    let (send, receive) = mpsc::sync_channel::<Reply>(IN_FLIGHT);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || write_answers(receive, output));
        let mut lines = LineReader::new(input, max_line);
        let read = loop {
            let reply = match lines.next_line() {
                Ok(Next::Line(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Next::Line(bytes)) => line::handle(tool, bytes),
                Ok(Next::TooLong) => line::too_long(max_line),
                Ok(Next::End) => break Ok(()),
                Err(e) => break Err(e),
            };
            if send.send(reply).is_err() {
                break Ok(()); // The writer stopped: stdout is gone.
            }
        };
        drop(send);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the answer writer panicked")));
        read.and(written)
    })
}

fn write_answers(replies: mpsc::Receiver<Reply>, mut output: impl Write) -> io::Result<()> {
    for reply in replies {
        let mut text = reply.finish();
        text.push('\n');
        output.write_all(text.as_bytes())?;
        output.flush()?;
    }
    Ok(())
}
