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

// The layers below are crates of their own (crates/*): re-exported here under
// the names it always had, so that `memfs::store` (and, inside this crate,
// `crate::store`) means what it did.
pub use memfs_core::{
    digest, error, guard, json, lock, merge, path, pool, say, store, text, tool, units,
};
pub use memfs_durable::{journal, persist};
pub use memfs_engine::{control, memory, outside, remote, serve, transfer};
pub use memfs_fuse as fuse;
pub use memfs_http::http;
pub use memfs_search as search;
pub use memfs_shared as shared;
pub use memfs_web::{form, listen, web};

pub use error::Error;
pub use memory::{Memory, Options};
pub use tool::{ToolConfig, ToolResult};

/// The README's Rust example, compiled as a doc test (its other blocks are
/// not Rust: `tests/python/test_readme.py` runs them).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
