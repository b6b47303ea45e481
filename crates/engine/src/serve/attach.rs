//! Many sessions, one memory: the first memfs to open a data dir owns it
//! (the tree, the persister, the lock and the socket); every later door on
//! the same data dir attaches to the owner through its socket and forwards
//! its calls. When the owner goes away, an attached process takes the data
//! dir over (or, if another was quicker, attaches to the new owner) before
//! its next call. A call in flight when the owner went away gets an error
//! that says its outcome is unknown: it is never sent twice.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::line::{self, Framing};
use super::socket::{self, SocketServer};
pub use super::vocab::{hello_answer, settings_of, CLEAR, HELLO, MOUNT, UNMOUNT};
use crate::memory::{Memory, Options};
use crate::persist::OpenError;
use crate::store::{Door, Origin};
use crate::tool::{Content, Tool, ToolResult};

/// How long a process keeps trying to become or reach the owner.
const RETRY_FOR: Duration = Duration::from_secs(10);

/// Where and as whom to open a data dir.
#[derive(Clone)]
pub struct Attach {
    pub data: PathBuf,
    pub options: Options,
    pub door: Door,
    pub session: Option<String>,
    pub client_timeout: Duration,
    pub max_line: usize,
}

/// This process's way to the memory.
pub enum Backend {
    /// This process owns the data dir (and serves its socket).
    Owner {
        memory: Box<Memory>,
        server: SocketServer,
        tool: Tool,
    },
    /// Another process does; calls go through its socket.
    Client(Link),
}

impl Attach {
    fn origin(&self) -> Origin {
        Origin::session(self.door, self.session.as_deref())
    }

    /// Becomes the owner if the data dir is free, else attaches to its
    /// owner; retries the race (an owner starting or stopping) for a while.
    pub fn open(&self) -> Result<Backend, OpenError> {
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            match Memory::open(&self.data, self.options.clone()) {
                Ok(memory) => return self.own(memory),
                Err(OpenError::Busy { dir, pid }) => {
                    match Link::forwarding(
                        &self.data.join(".memfs"),
                        self.door,
                        self.session.as_deref(),
                    ) {
                        Ok(link) => {
                            warn_on_different_options(&self.options, &link.owner);
                            return Ok(Backend::Client(link));
                        }
                        Err(_) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => return Err(OpenError::Busy { dir, pid }),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Serves the socket for a memory this process just opened.
    pub fn own(&self, memory: Memory) -> Result<Backend, OpenError> {
        let server = SocketServer::start(
            memory.tool().clone(),
            memory.control().clone(),
            &memory.data_dir().state,
            self.client_timeout,
            self.max_line,
            None,
        )
        .map_err(|err| OpenError::Io {
            dir: memory.data_dir().shown().to_string(),
            doing: "serving its socket",
            err,
        })?;
        let tool = memory.tool().with_origin(self.origin());
        Ok(Backend::Owner {
            memory: Box::new(memory),
            server,
            tool,
        })
    }
}

impl Backend {
    /// Answers one line of the tool's line protocol (a tool input or a
    /// `tool_use` block), as the owner would.
    pub fn call(&mut self, attach: &Attach, line: &[u8]) -> String {
        if let Backend::Client(link) = self {
            if link.is_closed() {
                // The owner went away between calls: nothing was lost.
                self.reopen(attach);
            }
        }
        match self {
            Backend::Owner { tool, .. } => line::handle(tool, line).finish(),
            Backend::Client(link) => match link.call(line) {
                Ok(answer) => match parse_result(&answer) {
                    Ok(_) => answer,
                    Err(text) => error_for(line, text),
                },
                // (Taken over before the next call, not now: a one-call
                // `exec` then leaves the data dir to whoever starts next.)
                Err(_) => lost(line),
            },
        }
    }

    /// A control request (an agent's search) answered by the memory:
    /// this process's own, or the owner's through its socket.
    pub fn control(
        &mut self,
        attach: &Attach,
        request: &crate::control::request::Request,
    ) -> crate::control::request::Reply {
        if let Backend::Client(link) = self {
            if link.is_closed() {
                // The owner went away between calls.
                self.reopen(attach);
            }
        }
        match self {
            Backend::Owner { memory, .. } => {
                crate::control::request::handle(memory.store(), memory.control(), request)
            }
            Backend::Client(_) => through_owner(&attach.data.join(".memfs"), request),
        }
    }

    /// Names the session from now on (an MCP client's `clientInfo`).
    pub fn name_session(&mut self, attach: &mut Attach, name: &str) {
        attach.session = Some(name.to_string());
        match self {
            Backend::Owner { tool, .. } => *tool = tool.with_origin(attach.origin()),
            Backend::Client(link) => {
                let _ = link.hello(Some(name));
            }
        }
    }

    fn reopen(&mut self, attach: &Attach) {
        match attach.open() {
            Ok(backend) => *self = backend,
            Err(e) => {
                crate::say!("memfs: lost the owner of the data dir and cannot take over: {e}")
            }
        }
    }

    /// Stops serving the socket (when this process owns the data dir) and
    /// writes everything out; says whether all of it is on disk.
    pub fn close(self) -> bool {
        match self {
            Backend::Owner {
                memory, mut server, ..
            } => {
                server.stop();
                memory.write_out()
            }
            Backend::Client(_) => true,
        }
    }
}

/// The answer to a line whose call was in flight when the owner went away.
fn lost(line: &[u8]) -> String {
    error_for(line, "Error: the memfs that owned the data dir stopped during this call, so whether it took effect is unknown; view the memory to check before trying again")
}

/// An error result `text` for `line`, framed as its answer would be.
fn error_for(line: &[u8], text: &str) -> String {
    let framing = crate::json::parse(line)
        .ok()
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("tool_use"))
        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string))
        .map_or(Framing::Plain, |tool_use_id| Framing::ToolResult {
            tool_use_id,
        });
    line::render(&ToolResult::error(text), &framing)
}

/// Says on stderr which of the client's settings the owner does not share.
fn warn_on_different_options(mine: &Options, owner: &Value) {
    let settings = &owner["memfs"]["settings"];
    for (name, want) in settings_of(&mine.limits, mine.tool.create_overwrites) {
        let has = &settings[name];
        if !has.is_null() && has != &want {
            crate::say!(
                "memfs: the memfs that owns this data dir (pid {}) runs with {name} = {has}, not {want}; its settings apply",
                owner["memfs"]["pid"]
            );
        }
    }
}

/// One connection to the owner's socket, one call at a time.
pub struct Link {
    conn: UnixStream,
    reader: BufReader<UnixStream>,
    /// The owner's answer to the hello: its pid and settings.
    owner: Value,
    /// The owner's key, which this process could read (same user).
    key: Option<String>,
    /// The door whose agent's lines this link passes on, if it does.
    forwards: Option<Door>,
    /// A call found the owner gone.
    lost: bool,
}

/// The owner went away before answering.
#[derive(Debug)]
pub struct Lost;

impl Link {
    /// Connects and says hello (for the CLI's own requests).
    pub fn connect(state_dir: &std::path::Path) -> io::Result<Link> {
        Link::open(state_dir, None, None)
    }

    /// Connects as `door` (an attached `exec`, `serve --stdio` or `mcp`),
    /// whose agent's tool inputs it passes on as lines: its hello carries
    /// the owner's key and says so, and from then on the owner takes no
    /// line from it for a control line unless it carries the key, which an
    /// agent never has.
    pub fn forwarding(
        state_dir: &std::path::Path,
        door: Door,
        session: Option<&str>,
    ) -> io::Result<Link> {
        Link::open(state_dir, Some(door), session)
    }

    fn open(
        state_dir: &std::path::Path,
        forwards: Option<Door>,
        session: Option<&str>,
    ) -> io::Result<Link> {
        let conn = socket::connect(state_dir)?;
        let reader = BufReader::new(conn.try_clone()?);
        let mut link = Link {
            conn,
            reader,
            owner: Value::Null,
            key: crate::persist::read_key(state_dir).ok(),
            forwards,
            lost: false,
        };
        link.owner = link.hello(session)?;
        Ok(link)
    }

    fn hello(&mut self, session: Option<&str>) -> io::Result<Value> {
        let mut hello = json!({"type": HELLO, "session": session});
        if let Some(door) = self.forwards {
            hello["door"] = json!(door.name());
            hello["forwards"] = json!(true);
        }
        if let Some(key) = &self.key {
            hello["key"] = json!(key);
        }
        let answer = self
            .call(hello.to_string().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let answer: Value = serde_json::from_str(&answer).map_err(io::Error::other)?;
        if answer["is_error"] != false {
            return Err(io::Error::other(
                answer["content"].as_str().unwrap_or("refused").to_string(),
            ));
        }
        Ok(answer)
    }

    /// Sends one line and waits for its answer.
    pub fn call(&mut self, line: &[u8]) -> Result<String, Lost> {
        let mut sent = line.to_vec();
        sent.retain(|&b| b != b'\n');
        sent.push(b'\n');
        let mut answer = String::new();
        let answered = self
            .conn
            .write_all(&sent)
            .and_then(|()| self.reader.read_line(&mut answer));
        match answered {
            Ok(n) if n > 0 => Ok(answer.trim_end().to_string()),
            _ => {
                self.lost = true;
                Err(Lost)
            }
        }
    }

    /// The owner's pid, as its hello said.
    pub fn owner_pid(&self) -> Option<u64> {
        self.owner["memfs"]["pid"].as_u64()
    }

    /// True when the owner has closed the connection (checked without waiting).
    pub fn is_closed(&self) -> bool {
        let mut byte = [0u8; 1];
        self.lost
            || matches!(
                rustix::net::recv(
                    &self.conn,
                    &mut byte,
                    rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT
                ),
                Ok((0, _)) | Err(rustix::io::Errno::CONNRESET | rustix::io::Errno::PIPE)
            )
    }
}

/// A tool result from an answer line `{"content": ..., "is_error": ...}`.
/// An answer of another shape (an owner of another version, or not memfs
/// at all) is an error result that says so, never a panic.
pub fn result_of(answer: &str) -> ToolResult {
    parse_result(answer).unwrap_or_else(ToolResult::error)
}

/// The tool result an owner's answer line holds, or the error text that
/// says it holds none.
fn parse_result(answer: &str) -> Result<ToolResult, &'static str> {
    let Ok(v) = serde_json::from_str::<Value>(answer) else {
        return Err("Error: the owner of the data dir sent an answer that is not JSON; the command may or may not have taken effect");
    };
    let is_error = v["is_error"].as_bool().unwrap_or(true);
    let content = match &v["content"] {
        Value::String(text) => Some(Content::Text(text.clone())),
        Value::Array(blocks) => image_of(blocks),
        _ => None,
    };
    content
        .map(|content| ToolResult { content, is_error })
        .ok_or("Error: the owner of the data dir sent an answer without a text or an image; the command may or may not have taken effect")
}

/// The one image block of an answer's content (the tool's `view` of an
/// image), if that is what `blocks` is.
fn image_of(blocks: &[Value]) -> Option<Content> {
    let [block] = blocks else {
        return None;
    };
    let source = &block["source"];
    let media_type = match source["media_type"].as_str()? {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        _ => return None,
    };
    Some(Content::Image {
        media_type,
        base64: source["data"].as_str()?.to_string(),
    })
}

/// [`Link::connect`], waiting out an owner that holds the data dir but
/// serves no socket yet (it is starting: a store over HTTP catches up
/// first) or any more (it is stopping), for [`RETRY_FOR`].
fn connect_waiting(state_dir: &std::path::Path) -> io::Result<Link> {
    waiting_for_owner(|| Link::connect(state_dir))
}

/// `f` tried again every 20 ms while what it reaches is not there yet (or
/// refuses: an owner starting or stopping), for [`RETRY_FOR`].
fn waiting_for_owner<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match f() {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A history request answered by the owner of the data dir, with its key.
pub fn through_owner(
    state_dir: &std::path::Path,
    request: &crate::control::request::Request,
) -> crate::control::request::Reply {
    use crate::control::request::{Reply, TYPE};
    let mut line = serde_json::to_value(request).expect("a request serializes");
    line["type"] = TYPE.into();
    // (An owner starting writes its key first: waited for as its socket.)
    match waiting_for_owner(|| crate::persist::read_key(state_dir)) {
        Ok(key) => line["key"] = key.into(),
        Err(e) => {
            return Reply::error(format!(
                "cannot read the owner's key in the data dir's .memfs: {e}"
            ))
        }
    }
    let answer = connect_waiting(state_dir)
        .map_err(|e| e.to_string())
        .and_then(|mut link| {
            link.call(line.to_string().as_bytes())
                .map_err(|_| "it went away before answering".to_string())
        });
    match answer {
        Ok(answer) => Reply::from_line(&answer),
        Err(e) => Reply::error(format!(
            "cannot reach the memfs that owns the data dir: {e}"
        )),
    }
}
