//! What a host could not send to the shared store before it stopped (the
//! database unreachable): kept in this host's copy, `.memfs/unsent.json`,
//! and sent by the next start, never dropped.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::path::MemPath;
use crate::store::{Origin, Store, Unsent};

const FILE: &str = "unsent.json";

#[derive(Serialize, Deserialize)]
struct Entry {
    path: String,
    /// The file's bytes (base64); none: the path is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content: Option<String>,
}

/// Keeps `unsent` in the state dir `state` (written whole, then renamed
/// into place, then flushed). Returns how many paths.
pub fn keep(state: &Path, unsent: &[Unsent]) -> std::io::Result<usize> {
    let engine = base64::engine::general_purpose::STANDARD;
    let entries: Vec<Entry> = unsent
        .iter()
        .map(|(path, data)| Entry {
            path: path.to_string(),
            content: data.as_ref().map(|d| engine.encode(d.as_slice())),
        })
        .collect();
    let tmp = state.join("unsent.json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(&entries).expect("serializes"))?;
    f.sync_all()?;
    std::fs::rename(&tmp, state.join(FILE))?;
    std::fs::File::open(state)?.sync_all()?;
    Ok(entries.len())
}

/// Why what an earlier run kept was not sent (it stays kept).
#[derive(Debug, thiserror::Error)]
pub enum UnsentError {
    #[error("its unsent.json cannot be read")]
    Unreadable,
    #[error("{0}")]
    Store(#[from] crate::error::Error),
}

/// Sends what an earlier run kept (as memfs' changes, over what the store
/// holds now), and forgets it once the store has taken all of it. Returns
/// how many paths were sent, or why not.
pub fn send(state: &Path, store: &Store) -> Result<usize, UnsentError> {
    let file = state.join(FILE);
    let Ok(text) = std::fs::read(&file) else {
        return Ok(0);
    };
    let entries: Vec<Entry> = serde_json::from_slice(&text).map_err(|_| UnsentError::Unreadable)?;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut tickets = Vec::new();
    for e in &entries {
        let Ok(path) = MemPath::parse(&e.path) else {
            continue;
        };
        let made = match &e.content {
            Some(b64) => {
                let data = engine.decode(b64).map_err(|_| UnsentError::Unreadable)?;
                store.create_file(&path, data, true, Origin::Memfs)
            }
            None => store.remove(&path, Origin::Memfs),
        };
        match made {
            Ok(ticket) => tickets.push(ticket),
            Err(crate::error::Error::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for t in tickets {
        t.wait()?;
    }
    let _ = std::fs::remove_file(&file);
    Ok(entries.len())
}
