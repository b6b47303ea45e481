//! The memory tool's own line protocol (stdin/stdout, each socket client):
//! a tool input or a `tool_use` block per line, a result per line.

use std::io::{self, BufRead, Write};

use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use super::line::{self, Answer};
use super::pipeline::{self, Activity, Bounds, Protocol, Unobserved};
use super::vocab;
use crate::control::Control;
use crate::fuse::Hosted;
use crate::store::{Door, Origin};
use crate::tool::Tool;

/// One peer's session: the tool, its changes credited to the peer's door
/// and to the session a hello line names.
struct ToolLines {
    tool: crate::lock::Mutex<Arc<Tool>>,
    /// The owner's key and history, for control lines.
    control: Arc<Control>,
    /// Where mounts asked for over the socket are served (none on stdio).
    hosted: Option<Arc<Hosted>>,
    /// A tool line has been answered: a hello without the key comes too late.
    called: AtomicBool,
    /// The peer is another memfs door (an attached `exec` or `mcp`) that
    /// passes its agent's tool inputs on as lines: nothing after its keyed
    /// hello is a control line unless it carries the key.
    forwards: AtomicBool,
}

impl Protocol for ToolLines {
    type Answer = Answer;

    fn handle(&self, line: &[u8]) -> Option<Answer> {
        if let Some(answer) = self.control(line) {
            return Some(Answer::text(answer));
        }
        self.called.store(true, Ordering::Relaxed);
        let tool = self.tool.lock().clone();
        let answer = line::handle(&tool, line);
        // (Tests stop the owner here: the call is done, its answer lost.)
        #[cfg(feature = "failpoints")]
        if fail::eval("stream::lose-answer", |_| ()).is_some() {
            drop(answer.finish());
            std::process::abort();
        }
        Some(answer)
    }

    fn too_long(&self, limit: usize) -> Answer {
        line::too_long(limit)
    }

    fn timed_out(&self, after: Duration) -> Answer {
        line::timed_out(after)
    }

    fn weight(answer: &Answer) -> usize {
        answer.weight()
    }

    fn finish(answer: Answer) -> String {
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
    control: &Arc<Control>,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<()> {
    let bounds = Bounds {
        max_line,
        line_timeout: None,
    };
    let lines = ToolLines::new(tool, control, None);
    pipeline::serve(&lines, input, output, bounds, &Unobserved)
}

/// Serves one socket client within `bounds`, telling `activity` what it
/// does; its mount requests are served by `hosted`.
pub fn serve_client(
    tool: &Tool,
    control: &Arc<Control>,
    input: impl BufRead,
    output: impl Write + Send,
    bounds: Bounds,
    activity: &dyn Activity,
    hosted: Option<Arc<Hosted>>,
) -> io::Result<()> {
    let lines = ToolLines::new(tool, control, hosted);
    pipeline::serve(&lines, input, output, bounds, activity)
}

impl ToolLines {
    fn new(tool: &Tool, control: &Arc<Control>, hosted: Option<Arc<Hosted>>) -> Self {
        ToolLines {
            tool: crate::lock::Mutex::new(crate::lock::rank::STREAM_TOOL, Arc::new(tool.clone())),
            control: control.clone(),
            hosted,
            called: AtomicBool::new(false),
            forwards: AtomicBool::new(false),
        }
    }

    /// A control line of memfs' own (`{"type": "memfs_..."}`): a hello that
    /// names the session, a clear, a history command, or a `memfs mount`
    /// beside this owner asking it to mount or unmount. The answer line;
    /// `None` for anything else (answered as the tool line it then is).
    ///
    /// Every control line that acts must carry the owner's key: an agent's
    /// tool input, passed on as a line by its harness, cannot (the agent
    /// never sees memfs' own directory). The one line taken without it is
    /// an application's hello naming its session, as the connection's first
    /// line, on a connection that does not forward an agent's lines.
    fn control(&self, line: &[u8]) -> Option<String> {
        // Most lines are tool calls: not even parsed here.
        memchr::memmem::find(line, b"memfs_")?;
        let v = crate::json::parse(line).ok()?;
        let kind = v.get("type")?.as_str()?;
        let keyed = self.control.is_key(v.get("key").and_then(Value::as_str));
        if !keyed {
            let first = !self.called.load(Ordering::Relaxed);
            let forwarded = self.forwards.load(Ordering::Relaxed);
            return match kind == vocab::HELLO && first && !forwarded {
                true => Some(self.hello(&v, false)),
                false => None,
            };
        }
        match kind {
            vocab::HELLO => Some(self.hello(&v, true)),
            kind @ (vocab::MOUNT | vocab::UNMOUNT) => Some(self.mount(kind, &v)),
            crate::control::request::TYPE => Some(self.history(v)),
            vocab::CLEAR => Some(self.clear()),
            _ => None,
        }
    }

    /// Names the session; a keyed hello (another memfs door attaching) also
    /// says which door its calls come through and whether it forwards an
    /// agent's lines.
    fn hello(&self, v: &Value, keyed: bool) -> String {
        let mut tool = self.tool.lock();
        let mut door = match tool.origin() {
            Origin::Agent { door, .. } => *door,
            _ => Door::Socket,
        };
        if keyed {
            if let Some(named) = v.get("door").and_then(Value::as_str).and_then(Door::named) {
                door = named;
            }
            if v.get("forwards").and_then(Value::as_bool) == Some(true) {
                self.forwards.store(true, Ordering::Relaxed);
            }
        }
        let session = v.get("session").and_then(Value::as_str);
        *tool = Arc::new(tool.with_origin(Origin::session(door, session)));
        vocab::hello_answer(&tool)
    }

    /// Everything in the memory deleted, as this connection's agent
    /// (only ever asked for with the owner's key).
    fn clear(&self) -> String {
        let tool = self.tool.lock().clone();
        let result = match crate::control::clear::clear(tool.store(), tool.origin()) {
            Ok(()) => crate::tool::ToolResult::ok(crate::control::clear::CLEARED.to_string()),
            Err(e) => crate::tool::ToolResult::error(format!("Error: {e}")),
        };
        line::render(&result, &line::Framing::Plain)
    }

    /// A history command from `memfs log` and its siblings beside this owner.
    fn history(&self, v: Value) -> String {
        use crate::control::request::{handle, Reply, Request};
        let reply = match serde_json::from_value::<Request>(v) {
            Ok(request) => handle(self.tool.lock().store(), &self.control, &request),
            Err(e) => Reply::error(format!("not a history request this memfs knows: {e}")),
        };
        reply.to_line()
    }

    fn mount(&self, kind: &str, v: &Value) -> String {
        let at = v
            .get("path")
            .and_then(Value::as_str)
            .map(std::path::Path::new)
            .filter(|at| at.is_absolute());
        let result = match (&self.hosted, at) {
            (None, _) => Err("this memfs does not serve mounts for others".to_string()),
            (_, None) => Err("a mount request needs an absolute `path`".to_string()),
            (Some(hosted), Some(at)) if kind == vocab::MOUNT => {
                let number = |k: &str| v[k].as_u64().and_then(|n| u32::try_from(n).ok());
                let options = crate::fuse::MountOptions {
                    allow_other: v["allow_other"].as_bool().unwrap_or(false),
                    read_only: v["read_only"].as_bool().unwrap_or(false),
                    presented: crate::fuse::Presented {
                        uid: number("uid"),
                        gid: number("gid"),
                        dir_mode: number("dir_mode"),
                        file_mode: number("file_mode"),
                    },
                };
                let store = self.tool.lock().store().clone();
                hosted.mount(store, at, options).map_err(|e| e.to_string())
            }
            (Some(hosted), Some(at)) => hosted.unmount(at).map_err(|e| e.to_string()),
        };
        let result = match result {
            Ok(()) => crate::tool::ToolResult::ok(format!("{kind}: done")),
            Err(e) => crate::tool::ToolResult::error(format!("Error: {e}")),
        };
        line::render(&result, &line::Framing::Plain)
    }
}
