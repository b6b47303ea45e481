//! Who made a change (an agent through a door, a person through the
//! mount, memfs itself, ...), recorded when it is made: history and audit
//! key on it. A leaf: the tree and the change records both name it.

use std::sync::Arc;

/// Who made a change, recorded when it is made. History and audit key on this.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A memory-tool call, through `door`, from the session that named itself
    /// `session` (an MCP client's `clientInfo`, an adapter's argument).
    Agent {
        door: Door,
        session: Option<Arc<str>>,
    },
    /// A request through the mount, from this user and process.
    Person {
        uid: u32,
        pid: u32,
        process: Process,
    },
    /// A change made to the plain files (`DIR/memories`) while memfs ran,
    /// by a program other than memfs (an editor, a script, `git`, a sync
    /// tool), taken in by the watcher: the files door. `uid` owns the file;
    /// `by` wrote it, where the kernel tells (`outside::writers`: a file's
    /// content, as root; never a removal or a rename).
    Files { uid: u32, by: Option<Writer> },
    /// memfs itself: a recovery after the disk refused a change.
    Memfs,
    /// `memfs revert`, run by this user and process: the file at a path
    /// made what it was at `version` of the history (a person's act);
    /// `note` says so in the version it makes.
    Revert {
        uid: u32,
        pid: u32,
        version: u64,
        note: Option<Arc<str>>,
        /// Through what, and by whom when memfs knows better than the
        /// process (the page: `page:alice`, or `page:TOKEN` on a server).
        by: Option<Arc<str>>,
    },
    /// memfs removing a file nobody read or wrote for a while (`memfs expire`).
    Expiry,
    /// A call of the memory stores API (`serve --http`), made with the
    /// token named `token` (an application's act, not an agent's);
    /// `request` is the request's tag (a hash of the token and what it
    /// asked), by which a retry of it is recognised.
    Api {
        token: Arc<str>,
        request: Option<Arc<str>>,
    },
    /// Another machine's change to the memory store this data dir is a
    /// cache of (`--data https://HOST/v1/memory_stores/ID`), pulled from
    /// that API: `host` is the endpoint as shown (no user part), `version`
    /// the store's version id of it when known.
    Remote {
        host: Arc<str>,
        version: Option<Arc<str>>,
    },
    /// `memfs import`, run by this user and process, of a version made
    /// elsewhere first: a git commit's `author` and time (`authored`), and
    /// the `key` that tells a later run it is in (`git:COMMIT:PATH`).
    Import {
        uid: u32,
        pid: u32,
        author: Option<Arc<str>>,
        authored: Option<Arc<str>>,
        key: Option<Arc<str>>,
    },
}

impl Origin {
    /// An agent's call through `door`, from a session with no name.
    pub fn agent(door: Door) -> Origin {
        Origin::Agent {
            door,
            session: None,
        }
    }

    /// An agent's call through `door`, from the session a client named
    /// `session`: the name is a client's data, kept as a label (control
    /// characters escaped, at most [`crate::text::MAX_LABEL`] characters),
    /// so that no name can forge a row of `memfs log` or act on a terminal.
    pub fn session(door: Door, session: Option<&str>) -> Origin {
        Origin::Agent {
            door,
            session: session.map(|name| Arc::from(crate::text::label(name).as_str())),
        }
    }

    pub fn is_agent(&self) -> bool {
        matches!(self, Origin::Agent { .. })
    }
}

/// How an agent's call reached memfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// The Rust library (`Memory::call`).
    Library,
    /// `memfs exec`.
    Exec,
    /// `memfs serve --stdio`.
    Stdio,
    /// The socket `DIR/.memfs/sock`.
    Socket,
    /// `memfs mcp`.
    Mcp,
    /// The memory tool over MCP's streamable HTTP (`serve --http`, `/mcp`).
    Http,
}

impl Door {
    /// Its name in the history (`exec`, `mcp`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Door::Library => "library",
            Door::Exec => "exec",
            Door::Stdio => "stdio",
            Door::Socket => "socket",
            Door::Mcp => "mcp",
            Door::Http => "http",
        }
    }

    /// The door of that name (not `library`: only a process's own calls).
    pub fn named(name: &str) -> Option<Door> {
        match name {
            "exec" => Some(Door::Exec),
            "stdio" => Some(Door::Stdio),
            "socket" => Some(Door::Socket),
            "mcp" => Some(Door::Mcp),
            "http" => Some(Door::Http),
            _ => None,
        }
    }
}

/// The process that wrote a plain file, as the kernel named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Writer {
    pub pid: u32,
    pub process: Process,
}

/// A process's name as the kernel keeps it (`comm`: at most 15 bytes).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Process([u8; 16]);

/// The programs whose writes through the mount are an agent's, not a
/// person's: Claude Code (its process is `claude`; it writes its auto memory
/// with its own Write and Edit tools). Matched on the process's name.
pub const AGENT_PROGRAMS: [&str; 1] = ["claude"];

impl Process {
    /// Whether this is one of [`AGENT_PROGRAMS`].
    pub fn is_agent_program(&self) -> bool {
        AGENT_PROGRAMS.contains(&self.as_str())
    }

    /// A process's name as memfs keeps it: any character that must not be
    /// printed (a name set with `prctl(PR_SET_NAME)` can hold an escape
    /// sequence) becomes `?`.
    pub fn new(name: &str) -> Process {
        let cleaned: String;
        let name = match crate::text::is_printable(name) {
            true => name,
            false => {
                cleaned = name
                    .chars()
                    .map(|c| if crate::text::unprintable(c) { '?' } else { c })
                    .collect();
                &cleaned
            }
        };
        let mut bytes = [0u8; 16];
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        bytes[..end].copy_from_slice(&name.as_bytes()[..end]);
        Process(bytes)
    }

    /// The name of the running process `pid` (none once it is gone).
    pub fn of_pid(pid: u32) -> Option<Process> {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|n| Process::new(n.trim_end()))
    }

    pub fn as_str(&self) -> &str {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(16);
        std::str::from_utf8(&self.0[..len]).unwrap_or("?")
    }
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}
