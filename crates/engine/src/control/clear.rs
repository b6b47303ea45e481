//! Clearing a memory (the SDK's `clear_all_memory`): everything under
//! `/memories` deleted, one top-level entry at a time, each delete kept in
//! the history like any other. An application's act, never an agent's: it
//! is reached only with the owner's key (`memfs clear`, the adapters'
//! `clear_all_memory`, a keyed `memfs_clear` line), on every door alike.

use crate::error::Error;
use crate::path::MemPath;
use crate::store::{Origin, Store, ROOT_INO};

/// What `memfs clear` and `clear_all_memory` answer when it worked.
pub const CLEARED: &str = "All memory cleared";

/// The paths a clear could not delete (the others are gone), each with why.
#[derive(Debug, thiserror::Error)]
#[error("not all memory could be cleared: {}", listed(.failed))]
pub struct ClearError {
    pub failed: Vec<(MemPath, Error)>,
}

fn listed(failed: &[(MemPath, Error)]) -> String {
    let each: Vec<String> = failed.iter().map(|(p, e)| format!("{p}: {e}")).collect();
    each.join("; ")
}

/// Deletes everything in `store` as `origin`. `Err` names every path that
/// could not be deleted (the others are gone).
pub fn clear(store: &Store, origin: &Origin) -> Result<(), ClearError> {
    let names: Vec<String> = store.with_tree(|tree| {
        tree.children(ROOT_INO)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default()
    });
    let mut failed = Vec::new();
    for name in names {
        let path = MemPath::root().join(&name);
        match store
            .remove(&path, origin.clone())
            .and_then(|ticket| ticket.wait())
        {
            Ok(()) | Err(Error::NotFound) => {}
            Err(e) => failed.push((path, e)),
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(ClearError { failed }),
    }
}
