//! What `memfs log` says of a cache of a store over HTTP before the
//! history: the changes not sent yet (the plain files against the bases
//! kept in `.memfs/remote`), why the store refuses them if it does, and the
//! last conflicts.

use std::path::Path;

use crate::digest::Sha;

use super::state::{Kept, State};

/// The lines to say, or none for a data dir that is no such cache.
pub fn said(data: &Path) -> Vec<String> {
    let state_dir = data.join(".memfs");
    if !state_dir.join("remote").join("state.json").exists() {
        return Vec::new();
    }
    let Ok(state) = Kept::new(&state_dir).and_then(|k| k.load()) else {
        return vec!["this memory is a cache of a memory store, whose state (.memfs/remote/state.json) cannot be read".into()];
    };
    let mut out = Vec::new();
    let unsent = unsent(&data.join("memories"), &state);
    match (unsent.len(), &state.unsent_since) {
        (0, _) => out.push(format!(
            "a cache of {}: everything here is sent",
            state.store
        )),
        (n, since) => out.push(format!(
            "a cache of {}: {n} change(s) not sent yet{} ({})",
            state.store,
            since
                .as_ref()
                .map(|t| format!(", waiting since {t}"))
                .unwrap_or_default(),
            unsent.join(", ")
        )),
    }
    if let Some(why) = &state.halted {
        out.push(format!(
            "the store refuses this cache's changes (they are kept here): {why}"
        ));
    }
    for c in state.conflicts.iter().rev().take(5) {
        out.push(format!(
            "conflict {} at {}: another machine's version is the file; this machine's (sha256 {}) is the version before it in `memfs log {}`",
            c.path,
            c.at,
            &c.ours[..c.ours.len().min(12)],
            c.path
        ));
    }
    out
}

/// The API paths whose plain file differs from its base (or has none, or
/// is gone), at most 20 named.
fn unsent(memories: &Path, state: &State) -> Vec<String> {
    let mut out = Vec::new();
    let mut here = Vec::new();
    walk(memories, memories, &mut here);
    for (path, bytes) in &here {
        let same = state
            .memories
            .get(path)
            .is_some_and(|b| b.sha == Sha::of(bytes).to_string());
        if !same {
            out.push(path.clone());
        }
    }
    for path in state.memories.keys() {
        if !here.iter().any(|(p, _)| p == path) {
            out.push(path.clone());
        }
    }
    out.sort();
    out.truncate(20);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(root, &path, out),
            Ok(t) if t.is_file() => {
                let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
                let api = format!("/{rel}");
                let kept =
                    super::local::mem_path(&api).is_some_and(|p| !crate::outside::ignored(&p));
                if let (true, Ok(bytes)) = (kept, std::fs::read(&path)) {
                    out.push((api, bytes));
                }
            }
            _ => {}
        }
    }
}
