//! The vocabulary of memfs' own control lines (`memfs_hello`,
//! `memfs_mount`, `memfs_unmount`, `memfs_clear`) and the owner's answer to
//! a hello: what a client that attaches and the owner that answers share.
//! A leaf of `serve/`.

use serde_json::{json, Value};

use crate::tool::Tool;

/// The control line a client sends first on a connection: it names the
/// session (for attribution) and asks for the owner's settings.
pub const HELLO: &str = "memfs_hello";

/// The control lines a `memfs mount` sends to an owner: mount the memory at
/// `path` (with `read_only`, `allow_other`), and unmount it again.
pub const MOUNT: &str = "memfs_mount";
pub const UNMOUNT: &str = "memfs_unmount";
/// A control line: remove everything in the memory (the SDK's
/// `clear_all_memory`), as the agent's deletes, each kept in the history.
pub const CLEAR: &str = "memfs_clear";

/// The settings that shape a store, as the owner reports them.
pub fn settings_of(
    l: &crate::store::Limits,
    create_overwrites: bool,
) -> Vec<(&'static str, Value)> {
    vec![
        ("max_file_size", json!(l.max_file_size)),
        ("max_store_size", json!(l.max_store_size)),
        ("max_depth", json!(l.max_depth)),
        ("max_entries", json!(l.max_entries)),
        ("max_dir_entries", json!(l.max_dir_entries)),
        ("create_overwrites", json!(create_overwrites)),
    ]
}

/// The owner's answer to a hello on one of its connections: who it is and
/// the settings that shape its store. The session the hello names is the
/// connection's from then on.
pub fn hello_answer(tool: &Tool) -> String {
    let settings: serde_json::Map<String, Value> =
        settings_of(&tool.store().limits(), tool.config().create_overwrites)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    json!({
        "content": format!("memfs {}, pid {}", env!("CARGO_PKG_VERSION"), std::process::id()),
        "is_error": false,
        "memfs": {"pid": std::process::id(), "settings": settings},
    })
    .to_string()
}
