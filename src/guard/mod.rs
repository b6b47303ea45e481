//! Policies on what an agent writes: credential screening (`secrets`).
//! Nothing here touches the disk or a door.

pub mod secrets;

pub use secrets::Policy as SecretsPolicy;

use crate::path::MemPath;
use crate::store::{NodeKind, Tree};

/// Every credential in the files at or below `at` in `tree`, by path and
/// line (files that are not UTF-8 text are not read).
pub fn scan_tree(tree: &Tree, at: &MemPath) -> Vec<(MemPath, secrets::Finding)> {
    let mut out = Vec::new();
    for (path, node) in tree.walk() {
        if !path.starts_with(at) {
            continue;
        }
        if let NodeKind::File(data) = &node.kind {
            if let Ok(text) = std::str::from_utf8(data) {
                out.extend(secrets::scan(text).into_iter().map(|f| (path.clone(), f)));
            }
        }
    }
    out
}
