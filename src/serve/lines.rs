//! The memory tool's own line protocol (stdin/stdout, each socket client):
//! a tool input or a `tool_use` block per line, a result per line.

use std::io::{self, BufRead, Write};

use std::time::Duration;

use std::sync::Arc;

use serde_json::Value;

use super::attach;
use super::line::{self, Reply};
use super::pipeline::{self, Activity, Bounds, Protocol, Unobserved};
use crate::store::{Door, Origin};
use crate::tool::Tool;

/// One peer's session: the tool, its changes credited to the peer's door
/// and to the session a hello line names.
struct ToolLines(parking_lot::Mutex<Tool>);

impl Protocol for ToolLines {
    type Answer = Reply;

    fn handle(&self, line: &[u8]) -> Option<Reply> {
        if let Some(session) = hello(line) {
            let mut tool = self.0.lock();
            let door = match tool.origin() {
                Origin::Agent { door, .. } => *door,
                _ => Door::Socket,
            };
            *tool = tool.with_origin(Origin::Agent {
                door,
                session: session.map(|s| Arc::from(crate::tool::clip_text(&s).as_str())),
            });
            return Some(Reply::text(attach::hello_answer(&tool)));
        }
        let tool = self.0.lock().clone();
        Some(line::handle(&tool, line))
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
    pipeline::serve(
        &ToolLines(tool.clone().into()),
        input,
        output,
        bounds,
        &Unobserved,
    )
}

/// Serves one socket client within `bounds`, telling `activity` what it does.
pub fn serve_client(
    tool: &Tool,
    input: impl BufRead,
    output: impl Write + Send,
    bounds: Bounds,
    activity: &dyn Activity,
) -> io::Result<()> {
    pipeline::serve(
        &ToolLines(tool.clone().into()),
        input,
        output,
        bounds,
        activity,
    )
}

/// The session a hello line names (`Some(None)`: a hello without a name).
fn hello(line: &[u8]) -> Option<Option<String>> {
    // Cheap test first: most lines are tool calls.
    if !line
        .windows(attach::HELLO.len())
        .any(|w| w == attach::HELLO.as_bytes())
    {
        return None;
    }
    let v = crate::json::parse(line).ok()?;
    (v.get("type")? == attach::HELLO)
        .then(|| v.get("session").and_then(Value::as_str).map(str::to_string))
}
