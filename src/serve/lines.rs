//! The memory tool's own line protocol (stdin/stdout, each socket client):
//! a tool input or a `tool_use` block per line, a result per line.

use std::io::{self, BufRead, Write};

use std::time::Duration;

use super::line::{self, Reply};
use super::pipeline::{self, Activity, Bounds, Protocol, Unobserved};
use crate::tool::Tool;

struct ToolLines<'a>(&'a Tool);

impl Protocol for ToolLines<'_> {
    type Answer = Reply;

    fn handle(&self, line: &[u8]) -> Option<Reply> {
        Some(line::handle(self.0, line))
    }

    fn too_long(&self, limit: usize) -> Reply {
        line::too_long(limit)
    }

    fn timed_out(&self, after: Duration) -> Reply {
        line::timed_out(after)
    }

    fn weight(answer: &Reply) -> usize {
        answer.weight()
    }

    fn finish(answer: Reply) -> String {
        answer.finish()
    }
}

/// Answers one line and closes (a client over the limit).
pub fn refuse(mut output: impl Write, text: &str) -> io::Result<()> {
    let line = line::render(&crate::tool::ToolResult::error(text), &line::Framing::Plain);
    output.write_all(line.as_bytes())?;
    output.write_all(b"\n")
}

/// Serves `input` until it ends, answering on `output` (stdio: one trusted peer).
pub fn serve(
    tool: &Tool,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<()> {
    let bounds = Bounds {
        max_line,
        line_timeout: None,
    };
    pipeline::serve(&ToolLines(tool), input, output, bounds, &Unobserved)
}

/// Serves one socket client within `bounds`, telling `activity` what it does.
pub fn serve_client(
    tool: &Tool,
    input: impl BufRead,
    output: impl Write + Send,
    bounds: Bounds,
    activity: &dyn Activity,
) -> io::Result<()> {
    pipeline::serve(&ToolLines(tool), input, output, bounds, activity)
}
