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

use serde_json::{json, Value};

use super::jsonrpc::{Id, Incoming, Outgoing, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use super::mcp_wire::{
    self, CallToolParams, CallToolResult, Empty, Implementation, InitializeParams,
    InitializeResult, McpResult, Reply, ServerCapabilities, ToolAnnotations, ToolDef,
    ToolsCapability, ToolsListResult,
};
use super::pipeline::{self, Protocol};

use super::attach::{self, Attach, Backend};
use crate::search::MOST_RESULTS;
use crate::store::{Door, Origin};
use crate::tool::{Pending, Tool, COMMANDS};

/// The revisions this server speaks, oldest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

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
pub fn tool_definition() -> ToolDef {
    let text = |d: &str| json!({"type": "string", "description": d});
    ToolDef {
        name: "memory",
        title: "Memory",
        description: DESCRIPTION,
        input_schema: json!({
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
        }),
        annotations: ToolAnnotations {
            title: "Memory",
            read_only_hint: false,
            destructive_hint: true,
            idempotent_hint: false,
            open_world_hint: false,
        },
    }
}

/// The second tool, offered when the host asked for it (`--search-tool`).
pub const SEARCH_TOOL: &str = "memory_search";

const SEARCH_DESCRIPTION: &str = "Full-text search over your memory (the files under /memories): finds the files whose text or path has every word of `query`, best first, \
and answers with their matching lines as `path:line: text`. Words match code identifiers in part or whole (`http_reply` finds `parse_http_reply`); \
`\"a phrase\"` matches words in a row, `pref*` a prefix, `-word` leaves files out. Read-only: use the `memory` tool to view or change a file.";

/// `memory_search`, as `tools/list` shows it (with `--search-tool`).
pub fn search_tool_definition() -> ToolDef {
    ToolDef {
        name: SEARCH_TOOL,
        title: "Search memory",
        description: SEARCH_DESCRIPTION,
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The words to find."},
                "path": {"type": "string", "description": "Only files under this directory (e.g. /memories/notes)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MOST_RESULTS, "description": "At most this many files (default 20)."},
            },
            "required": ["query"],
        }),
        annotations: ToolAnnotations {
            title: "Search memory",
            read_only_hint: true,
            destructive_hint: false,
            idempotent_hint: true,
            open_world_hint: false,
        },
    }
}

/// What goes back for one incoming message.
enum Answer {
    Now(Reply),
    Call { id: Id, pending: Pending },
}

impl Answer {
    fn finish(self) -> Reply {
        match self {
            Answer::Now(reply) => reply,
            Answer::Call { id, pending } => Outgoing::result(
                id,
                McpResult::CallTool(CallToolResult::from(pending.finish())),
            ),
        }
    }
}

fn answer(id: Id, result: McpResult) -> Answer {
    Answer::Now(Outgoing::result(id, result))
}

fn error(id: Option<Id>, code: i64, message: impl Into<String>) -> Answer {
    Answer::Now(Outgoing::error(id, code, message))
}

/// Who names an MCP session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// The client, in `initialize` (`clientInfo.name`): stdio and the socket.
    FromInitialize,
    /// The transport (HTTP names the session itself).
    ByTransport,
}

/// Answers one message read ([`Incoming::parse`]); `None` for notifications
/// and stray responses.
fn handle(session: &Session, message: Incoming, naming: Naming) -> Option<Answer> {
    let (id, method, params) = match message {
        Incoming::Invalid { id, error } => {
            return Some(Answer::Now(Outgoing::error(id, error.code, error.message)))
        }
        // Notifications get no answer: initialized, cancelled, and any other.
        Incoming::Notification { .. } | Incoming::Response => return None,
        Incoming::Request { id, method, params } => (id, method, params),
    };
    Some(match method.as_str() {
        "initialize" => {
            let asked: InitializeParams = mcp_wire::take(params);
            if let (Naming::FromInitialize, Some(name)) = (naming, asked.client_name()) {
                session.name_from(name);
            }
            answer(id, McpResult::Initialize(initialize(&asked)))
        }
        "ping" => answer(id, McpResult::Empty(Empty {})),
        "tools/list" => {
            let mut tools = vec![tool_definition()];
            if session.offers_search() {
                tools.push(search_tool_definition());
            }
            answer(id, McpResult::ToolsList(ToolsListResult { tools }))
        }
        "tools/call" => call(session, id, mcp_wire::take(params)),
        other => error(
            Some(id),
            METHOD_NOT_FOUND,
            format!("Method not found: {}", crate::text::clip(other)),
        ),
    })
}

fn initialize(asked: &InitializeParams) -> InitializeResult {
    let asked = asked.protocol_version.as_deref().unwrap_or_default();
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[3]);
    InitializeResult {
        protocol_version: version,
        capabilities: ServerCapabilities {
            tools: ToolsCapability {
                list_changed: false,
            },
        },
        server_info: Implementation {
            name: "memfs",
            title: "memfs memory",
            version: env!("CARGO_PKG_VERSION"),
        },
        instructions: INSTRUCTIONS,
    }
}

fn call(session: &Session, id: Id, params: CallToolParams) -> Answer {
    let no_arguments = "tools/call needs params.arguments, an object";
    match params.name.as_deref() {
        Some("memory") => {}
        Some(SEARCH_TOOL) if session.offers_search() => {
            return match params.arguments {
                Some(arguments) => search(session, id, &Value::Object(arguments)),
                None => error(Some(id), INVALID_PARAMS, no_arguments),
            }
        }
        Some(other) => {
            let unknown = format!("Unknown tool: {}", crate::text::clip(other));
            return error(Some(id), INVALID_PARAMS, unknown);
        }
        None => return error(Some(id), INVALID_PARAMS, "tools/call needs params.name"),
    }
    let Some(arguments) = params.arguments else {
        return error(Some(id), INVALID_PARAMS, no_arguments);
    };
    let arguments = Value::Object(arguments);
    match &mut *session.target.lock() {
        Target::Local(tool) => Answer::Call {
            id,
            pending: tool.start(&arguments),
        },
        Target::Attached { backend, attach } => {
            let answered = backend.call(attach, arguments.to_string().as_bytes());
            let result = CallToolResult::from(attach::result_of(&answered));
            answer(id, McpResult::CallTool(result))
        }
    }
}

/// A `memory_search` argument that does not fit (invalid params).
#[derive(Debug, thiserror::Error)]
enum BadSearch {
    #[error("memory_search needs `query`, a string")]
    Query,
    #[error("memory_search's `path` is a string")]
    Path,
    #[error("memory_search's `limit` is a whole number from 1 to {}", MOST_RESULTS)]
    Limit,
}

/// `memory_search`'s arguments as a search request.
fn search_request(arguments: &Value) -> Result<crate::control::request::Request, BadSearch> {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return Err(BadSearch::Query);
    };
    let path = match arguments.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(_) => return Err(BadSearch::Path),
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MOST_RESULTS as u64).contains(&n) => Some(n as usize),
            _ => return Err(BadSearch::Limit),
        },
    };
    Ok(crate::control::request::Request::Search {
        query: query.to_string(),
        limit,
        path,
        json: false,
        all: false,
        agent: true,
    })
}

/// `memory_search`: the request an agent's search makes, answered by the
/// memory (this process's, or the owner's), as one text block of
/// `path:line: text` lines; a query it cannot run is a tool error.
fn search(session: &Session, id: Id, arguments: &Value) -> Answer {
    let request = match search_request(arguments) {
        Ok(request) => request,
        Err(why) => return error(Some(id), INVALID_PARAMS, why.to_string()),
    };
    let reply = match &mut *session.target.lock() {
        Target::Local(tool) => match &session.control {
            Some(control) => crate::control::request::handle(tool.store(), control, &request),
            None => crate::control::request::Reply::error("this door has no search"),
        },
        Target::Attached { backend, attach } => backend.control(attach, &request),
    };
    let query = arguments.get("query").and_then(Value::as_str).unwrap_or("");
    let (text, is_error) = match reply.code {
        0 => (String::from_utf8_lossy(&reply.out).into_owned(), false),
        // (Code 1 is also any other failure's: only this one is no match.)
        1 if reply.err.starts_with(crate::control::search::NOTHING_FOUND) => {
            (nothing_found(&reply.err, query), false)
        }
        _ => (reply.err, true),
    };
    let result = CallToolResult::text(text, is_error);
    answer(id, McpResult::CallTool(result))
}

/// What a search that found nothing says (with the index's note, if any).
fn nothing_found(err: &str, query: &str) -> String {
    let query = crate::text::label(query);
    match err.split_once(": ") {
        Some((_, note)) => format!("No file in /memories was found to match {query} ({note})."),
        None => format!("No file in /memories matches {query}."),
    }
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

    /// Credits the session's changes to the client that named itself.
    fn name_from(&self, name: &str) {
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
/// the session, which the transport names; `None` for a notification or a
/// stray response.
pub fn answer_one(
    tool: &Tool,
    control: Option<std::sync::Arc<crate::control::Control>>,
    message: Incoming,
) -> Option<Reply> {
    let session = Session {
        target: crate::lock::Mutex::new(crate::lock::rank::MCP_TARGET, Target::Local(tool.clone())),
        control,
    };
    handle(&session, message, Naming::ByTransport).map(Answer::finish)
}

struct Mcp(Session);

impl Protocol for Mcp {
    type Answer = Answer;

    fn handle(&self, line: &[u8]) -> Option<Answer> {
        handle(&self.0, Incoming::parse(line), Naming::FromInitialize)
    }

    fn too_long(&self, limit: usize) -> Answer {
        error(
            None,
            INVALID_REQUEST,
            format!("Invalid Request: the message is longer than {limit} bytes"),
        )
    }

    fn timed_out(&self, after: std::time::Duration) -> Answer {
        error(
            None,
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
        // (It cannot fail: every map key is a string.)
        serde_json::to_string(&answer.finish()).unwrap_or_default()
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
