//! memfs: a backend for Claude's memory tool (`memory_20250818`).
//!
//! One in-process tree of directories and files holds the memory. The agent's
//! tool calls reach it through [`tool::Tool`]; the tree persists to a data dir
//! laid out as the Python SDK's `BetaLocalFilesystemMemoryTool` lays it out
//! (`DIR/memories/...`), and every change a tool call makes is durable before
//! its result is returned.
//!
//! ```
//! use memfs::{Memory, Options};
//! use serde_json::json;
//!
//! let dir = std::env::temp_dir().join(format!("memfs-doc-{}", std::process::id()));
//! let memory = Memory::open(&dir, Options::default())?;
//! let made = memory.call(&json!({
//!     "command": "create",
//!     "path": "/memories/notes.txt",
//!     "file_text": "Acme prefers email.\n",
//! }));
//! assert!(!made.is_error);
//! let seen = memory.call(&json!({"command": "view", "path": "/memories/notes.txt"}));
//! assert_eq!(
//!     seen.text(),
//!     Some("Here's the content of /memories/notes.txt with line numbers:\n     1\tAcme prefers email.")
//! );
//! drop(memory);
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod control;
pub mod digest;
pub mod error;
pub mod form;
pub mod fuse;
pub mod guard;
pub mod http;
pub mod journal;
pub mod json;
pub mod listen;
pub mod lock;
pub mod memory;
pub mod outside;
pub mod path;
pub mod persist;
pub mod pool;
pub mod search;
pub mod serve;
pub mod shared;
pub mod store;
pub mod text;
pub mod tool;
pub mod transfer;
pub mod units;
pub mod web;

pub use error::Error;
pub use memory::{Memory, Options};
pub use tool::{ToolConfig, ToolResult};

/// `eprintln!` that cannot panic: when stderr cannot be written (closed, or
/// a full disk behind `2>file`), the message is lost, never the process (a
/// panic there would end an owner before it wrote its memory out).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // (What others wrote, quoted in a message, never acts on a terminal.)
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::text::printable_lines(&text));
    }};
}

/// The README's Rust example, compiled as a doc test (its other blocks are
/// not Rust: `tests/python/test_readme.py` runs them).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
