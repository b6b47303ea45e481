//! `memfs mcp`: the memory tool as an MCP server over stdio (JSON-RPC 2.0,
//! one message per line; stdout carries protocol only, logs go to stderr).
//!
//! Speaks the handshake revisions of MCP (2024-11-05 through 2025-11-25):
//! `initialize` (answering the client's version when it is one of those, else
//! the newest of them), `notifications/initialized`, `ping`, `tools/list` and
//! `tools/call`. A client of the newer, handshake-free revision probes
//! `server/discover` first; "method not found" sends it to `initialize`.
//! Answers come back in request order; tool calls share disk flushes as on
//! the other transports.

use std::io::{self, BufRead, Write};

use serde_json::{json, Map, Value};

use super::pipeline::{self, Protocol};

use super::attach::{self, Attach, Backend};
use crate::search::MOST_RESULTS;
use crate::store::{Door, Origin};
use crate::tool::{Content, Pending, Tool, ToolResult, COMMANDS};

/// The revisions this server speaks, oldest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// The memory protocol the Messages API adds to the system prompt when the
/// memory tool is present (spec, "Prompting guidance"). An MCP host does not
/// add it, so the server hands it over as its instructions.
pub const INSTRUCTIONS: &str = "IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.
MEMORY PROTOCOL:
1. Use the `view` command of your `memory` tool to check for earlier progress.
2. ... (work on the task) ...
   - As you make progress, record status / progress / thoughts etc in your memory.
ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any progress that is not recorded in your memory directory.";

const DESCRIPTION: &str = "Your memory: a directory of files at /memories that persists across conversations. \
Check it before starting a task; record progress, decisions and lessons as you work, and keep it organized. \
Commands: `view` lists a directory (2 levels) or shows a file with line numbers (`view_range` [start, end], end -1 for the end; \
images are shown as images); `create` writes a new file (`file_text`); `str_replace` replaces the one exact occurrence of \
`old_str` with `new_str`; `insert` puts `insert_text` after line `insert_line` (0 for the top); `delete` removes a file or \
directory; `rename` moves `old_path` to `new_path`. Every path starts with /memories.";

/// The one tool, as `tools/list` shows it.
pub fn tool_definition() -> Value {
    let text = |d: &str| json!({"type": "string", "description": d});
    json!({
        "name": "memory",
        "title": "Memory",
        "description": DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": COMMANDS, "description": "The operation to perform."},
                "path": text("The file or directory, under /memories (view, create, str_replace, insert, delete)."),
                "view_range": {
                    "type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                    "description": "view: [start_line, end_line], 1-based and inclusive; end_line -1 for the end of the file."
                },
                "file_text": text("create: the whole content of the new file."),
                "old_str": text("str_replace: the exact text to replace; it must occur exactly once."),
                "new_str": text("str_replace: the replacement (omit it to delete old_str)."),
                "insert_line": {"type": "integer", "minimum": 0, "description": "insert: the line to insert after; 0 inserts at the top."},
                "insert_text": text("insert: the text to insert."),
                "old_path": text("rename: the file or directory to move."),
                "new_path": text("rename: where to move it; it must not exist yet."),
            },
            "required": ["command"],
        },
        "annotations": {
            "title": "Memory",
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": false,
        },
    })
}

/// The second tool, offered when the host asked for it (`--search-tool`).
pub const SEARCH_TOOL: &str = "memory_search";

const SEARCH_DESCRIPTION: &str = "Full-text search over your memory (the files under /memories): finds the files whose text or path has every word of `query`, best first, \
and answers with their matching lines as `path:line: text`. Words match code identifiers in part or whole (`http_reply` finds `parse_http_reply`); \
`\"a phrase\"` matches words in a row, `pref*` a prefix, `-word` leaves files out. Read-only: use the `memory` tool to view or change a file.";

/// `memory_search`, as `tools/list` shows it (with `--search-tool`).
pub fn search_tool_definition() -> Value {
    json!({
        "name": SEARCH_TOOL,
        "title": "Search memory",
        "description": SEARCH_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The words to find."},
                "path": {"type": "string", "description": "Only files under this directory (e.g. /memories/notes)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MOST_RESULTS, "description": "At most this many files (default 20)."},
            },
            "required": ["query"],
        },
        "annotations": {
            "title": "Search memory",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        },
    })
}

/// What goes back for one incoming message.
enum Answer {
    Now(Value),
    Call { id: Value, pending: Pending },
}

impl Answer {
    fn finish(self) -> Value {
        match self {
            Answer::Now(v) => v,
            Answer::Call { id, pending } => response(id, call_result(&pending.finish())),
        }
    }
}

fn response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Answer {
    Answer::Now(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}}),
    )
}

/// A tool result as MCP content blocks.
pub fn call_result(result: &ToolResult) -> Value {
    let block = match &result.content {
        Content::Text(text) => json!({"type": "text", "text": text}),
        Content::Image { media_type, base64 } => {
            json!({"type": "image", "data": base64, "mimeType": media_type})
        }
    };
    json!({"content": [block], "isError": result.is_error})
}

/// Handles one message; `None` for notifications and stray responses.
///
/// Long because it checks one JSON-RPC message in protocol order (parse,
/// object, id, method or stray response, version), each with its own error,
/// then dispatches on the method.
fn handle(session: &Session, line: &[u8]) -> Option<Answer> {
    let message: Value = match crate::json::parse(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, PARSE_ERROR, format!("Parse error: {e}"))),
    };
    let Value::Object(obj) = message else {
        let what = if message.is_array() {
            "batches are not supported"
        } else {
            "a message must be a JSON object"
        };
        return Some(error(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: {what}"),
        ));
    };
    let id = obj.get("id").cloned();
    if let Some(bad) = id.as_ref().filter(|i| !(i.is_string() || i.is_number())) {
        return Some(error(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: an id must be a string or a number, not {bad}"),
        ));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        if obj.contains_key("result") || obj.contains_key("error") {
            return None; // a response; this server sends no requests
        }
        return Some(error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: no method",
        ));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
        ));
    }
    // Notifications (no id) get no answer: initialized, cancelled, and any other.
    let id = id?;
    let params = obj
        .get("params")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    Some(match method {
        "initialize" => {
            session.name_from(&params);
            Answer::Now(response(id, initialize(&params)))
        }
        "ping" => Answer::Now(response(id, json!({}))),
        "tools/list" => {
            let mut tools = vec![tool_definition()];
            if session.offers_search() {
                tools.push(search_tool_definition());
            }
            Answer::Now(response(id, json!({ "tools": tools })))
        }
        "tools/call" => return Some(call(session, id, &params)),
        other => error(
            id,
            METHOD_NOT_FOUND,
            format!("Method not found: {}", crate::text::clip(other)),
        ),
    })
}

fn initialize(params: &Value) -> Value {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[3]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "memfs", "title": "memfs memory", "version": env!("CARGO_PKG_VERSION")},
        "instructions": INSTRUCTIONS,
    })
}

fn call(session: &Session, id: Value, params: &Value) -> Answer {
    match params.get("name").and_then(Value::as_str) {
        Some("memory") => {}
        Some(SEARCH_TOOL) if session.offers_search() => {
            return match params.get("arguments") {
                Some(arguments @ Value::Object(_)) => search(session, id, arguments),
                _ => error(
                    id,
                    INVALID_PARAMS,
                    "tools/call needs params.arguments, an object",
                ),
            }
        }
        Some(other) => {
            return error(
                id,
                INVALID_PARAMS,
                format!("Unknown tool: {}", crate::text::clip(other)),
            )
        }
        None => return error(id, INVALID_PARAMS, "tools/call needs params.name"),
    }
    match params.get("arguments") {
        Some(arguments @ Value::Object(_)) => match &mut *session.target.lock() {
            Target::Local(tool) => Answer::Call {
                id,
                pending: tool.start(arguments),
            },
            Target::Attached { backend, attach } => {
                let answer = backend.call(attach, arguments.to_string().as_bytes());
                Answer::Now(response(id, call_result(&attach::result_of(&answer))))
            }
        },
        _ => error(
            id,
            INVALID_PARAMS,
            "tools/call needs params.arguments, an object",
        ),
    }
}

/// `memory_search`: the request an agent's search makes, answered by the
/// memory (this process's, or the owner's), as one text block of
/// `path:line: text` lines; a query it cannot run is a tool error.
fn search(session: &Session, id: Value, arguments: &Value) -> Answer {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return error(id, INVALID_PARAMS, "memory_search needs `query`, a string");
    };
    let path = match arguments.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(_) => return error(id, INVALID_PARAMS, "memory_search's `path` is a string"),
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MOST_RESULTS as u64).contains(&n) => Some(n as usize),
            _ => {
                return error(
                    id,
                    INVALID_PARAMS,
                    format!("memory_search's `limit` is a whole number from 1 to {MOST_RESULTS}"),
                )
            }
        },
    };
    let request = crate::control::request::Request::Search {
        query: query.to_string(),
        limit,
        path,
        json: false,
        all: false,
        agent: true,
    };
    let reply = match &mut *session.target.lock() {
        Target::Local(tool) => match &session.control {
            Some(control) => crate::control::request::handle(tool.store(), control, &request),
            None => crate::control::request::Reply::error("this door has no search"),
        },
        Target::Attached { backend, attach } => backend.control(attach, &request),
    };
    let (text, is_error) = match reply.code {
        0 => (String::from_utf8_lossy(&reply.out).into_owned(), false),
        // (Code 1 is also any other failure's: only this one is no match.)
        1 if reply.err.starts_with(crate::control::search::NOTHING_FOUND) => (
            match reply.err.split_once(": ") {
                Some((_, note)) => format!(
                    "No file in /memories was found to match {} ({note}).",
                    crate::text::label(query)
                ),
                None => format!(
                    "No file in /memories matches {}.",
                    crate::text::label(query)
                ),
            },
            false,
        ),
        _ => (reply.err, true),
    };
    Answer::Now(response(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": is_error}),
    ))
}

/// One MCP client: the tool, its changes credited to the MCP door and to the
/// session the client named in `initialize` (`clientInfo.name`).
struct Session {
    target: crate::lock::Mutex<Target>,
    /// Where a local target's searches go (the memory's control), when
    /// this door offers `memory_search`.
    control: Option<std::sync::Arc<crate::control::Control>>,
}

/// Where an MCP session's tool calls go.
enum Target {
    /// This process owns the data dir.
    Local(Tool),
    /// Through the owner's socket (see `attach`), or this process's own
    /// store once it has taken the data dir over.
    Attached {
        backend: Box<Backend>,
        attach: Box<Attach>,
    },
}

impl Session {
    fn new(tool: &Tool, control: Option<std::sync::Arc<crate::control::Control>>) -> Session {
        let tool = tool.with_origin(Origin::agent(Door::Mcp));
        Session {
            target: crate::lock::Mutex::new(crate::lock::rank::MCP_TARGET, Target::Local(tool)),
            control,
        }
    }

    /// Whether `tools/list` shows `memory_search` (`--search-tool`).
    fn offers_search(&self) -> bool {
        match &*self.target.lock() {
            Target::Local(tool) => tool.config().search_tool && self.control.is_some(),
            Target::Attached { attach, .. } => attach.options.tool.search_tool,
        }
    }

    fn name_from(&self, params: &Value) {
        let Some(name) = params.pointer("/clientInfo/name").and_then(Value::as_str) else {
            return;
        };
        match &mut *self.target.lock() {
            Target::Local(tool) => {
                *tool = tool.with_origin(Origin::session(Door::Mcp, Some(name)));
            }
            Target::Attached { backend, attach } => backend.name_session(attach, name),
        }
    }
}

/// Answers one message for a transport that carries one message per
/// request (MCP's streamable HTTP): `tool` already credits its changes to
/// the session; `None` for a notification or a stray response.
pub fn answer_one(
    tool: &Tool,
    control: Option<std::sync::Arc<crate::control::Control>>,
    message: &[u8],
) -> Option<Value> {
    let session = Session {
        target: crate::lock::Mutex::new(crate::lock::rank::MCP_TARGET, Target::Local(tool.clone())),
        control,
    };
    handle_keeping_origin(&session, message).map(Answer::finish)
}

/// [`handle`], except that `initialize` leaves the tool's origin as it is
/// (the transport names the session).
fn handle_keeping_origin(session: &Session, message: &[u8]) -> Option<Answer> {
    let keep = match &*session.target.lock() {
        Target::Local(tool) => Some(tool.clone()),
        Target::Attached { .. } => None,
    };
    let answer = handle(session, message);
    if let Some(tool) = keep {
        *session.target.lock() = Target::Local(tool);
    }
    answer
}

struct Mcp(Session);

impl Protocol for Mcp {
    type Answer = Answer;

    fn handle(&self, line: &[u8]) -> Option<Answer> {
        handle(&self.0, line)
    }

    fn too_long(&self, limit: usize) -> Answer {
        error(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: the message is longer than {limit} bytes"),
        )
    }

    fn timed_out(&self, after: std::time::Duration) -> Answer {
        error(
            Value::Null,
            INVALID_REQUEST,
            format!(
                "Invalid Request: the message was not finished within {} seconds",
                after.as_secs()
            ),
        )
    }

    fn weight(answer: &Answer) -> usize {
        match answer {
            Answer::Now(_) => 256,
            Answer::Call { pending, .. } => pending.weight(),
        }
    }

    fn finish(answer: Answer) -> String {
        answer.finish().to_string()
    }
}

/// Serves MCP on `input`/`output` until the input ends; `control` answers
/// `memory_search` (offered with `--search-tool`).
pub fn serve(
    tool: &Tool,
    control: Option<std::sync::Arc<crate::control::Control>>,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<()> {
    serve_session(Session::new(tool, control), input, output, max_line).map(|_| ())
}

/// Serves MCP for a process that attached to the data dir's owner (or owns
/// it through `backend`): tool calls go one at a time through `backend`.
pub fn serve_attached(
    backend: Backend,
    attach: Attach,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<Backend> {
    let session = Session {
        target: crate::lock::Mutex::new(
            crate::lock::rank::MCP_TARGET,
            Target::Attached {
                backend: Box::new(backend),
                attach: Box::new(attach),
            },
        ),
        control: None,
    };
    let served = serve_session(session, input, output, max_line);
    // (The session is gone; the caller closes the backend.)
    served.map(|session| match session.target.into_inner() {
        Target::Attached { backend, .. } => *backend,
        Target::Local(_) => unreachable!("an attached session stays attached"),
    })
}

fn serve_session(
    session: Session,
    input: impl BufRead,
    output: impl Write + Send,
    max_line: usize,
) -> io::Result<Session> {
    let bounds = pipeline::Bounds {
        max_line,
        line_timeout: None,
    };
    let mcp = Mcp(session);
    pipeline::serve(&mcp, input, output, bounds, &pipeline::Unobserved)?;
    Ok(mcp.0)
}
