//! Policies on what an agent writes: credential screening (`secrets`).
//! Nothing here touches the disk or a door.

pub mod secrets;

pub use secrets::Policy as SecretsPolicy;

use crate::path::MemPath;
use crate::store::{NodeKind, Tree};

/// A credential found in a memory: in a file's content (at `finding.line`)
/// or in the name of a file or directory (`in_name`).
#[derive(Debug, Clone)]
pub struct Found {
    /// The path, with every credential in its names shown as
    /// `[REDACTED:<kind>]`: safe to print.
    pub shown: String,
    pub finding: secrets::Finding,
    pub in_name: bool,
}

/// `path` as it may be printed: each credential in it redacted.
pub fn shown_path(path: &str) -> String {
    secrets::redact(path, &secrets::scan(path))
}

/// Every credential at or below `at` in `tree`: in the names of files and
/// directories, and in the files that are UTF-8 text, by path and line.
pub fn scan_tree(tree: &Tree, at: &MemPath) -> Vec<Found> {
    let mut out = Vec::new();
    for (path, node) in tree.walk() {
        if !path.starts_with(at) {
            continue;
        }
        let full = path.to_string();
        // A person's repository in the memory is its tool's state (compressed
        // objects, hooks), not the memory's content.
        if crate::path::is_tool_state(&full) {
            continue;
        }
        let shown = shown_path(&full);
        // A name's own credentials: those its parent's path did not hold.
        let parent = full.rsplit_once('/').map_or("", |(p, _)| p);
        for finding in secrets::introduced(parent, &full) {
            out.push(Found {
                shown: shown.clone(),
                finding,
                in_name: true,
            });
        }
        if let NodeKind::File(data) = &node.kind {
            if let Ok(text) = std::str::from_utf8(data) {
                out.extend(secrets::scan(text).into_iter().map(|finding| Found {
                    shown: shown.clone(),
                    finding,
                    in_name: false,
                }));
            }
        }
    }
    out
}
