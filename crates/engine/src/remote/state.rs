//! What this cache knows of the store over HTTP, kept in
//! `.memfs/remote/`: for each memory the server holds as this cache last
//! agreed with it (the **base**: its id, path and content's SHA-256), the
//! pull's watermark, and the conflicts met. `state.json` is replaced whole
//! (written beside, synced, renamed, the dir synced); each base's content
//! is kept in `base/SHA256` (written before the state that names it), the
//! merge base of a later divergence. Every step of a push or pull is
//! idempotent by digest, so a crash between the server's answer and the
//! save is settled by the next round (a 409, or a pull that finds the
//! server already holding what this cache holds).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::Sha;

/// One memory as the server and this cache last agreed on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Base {
    pub id: String,
    pub sha: String,
}

/// An edit that overlapped another machine's: the server's version stayed
/// the file and this one is kept in the history (`version` there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub path: String,
    pub at: String,
    /// The SHA-256 of this machine's text that did not become the file.
    pub ours: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    /// The store this cache is of (its URL, which holds no secret).
    #[serde(default)]
    pub store: String,
    /// By API path (`/notes/a.md`).
    #[serde(default)]
    pub memories: BTreeMap<String, Base>,
    /// Pushes sent whose answer is not known yet (recorded before they
    /// are sent): API path -> the sha256 of the content sent. The store
    /// may hold it although no answer said so (an answer lost, a crash):
    /// a file deleted here since is then deleted there, not taken back.
    #[serde(default)]
    pub sent: BTreeMap<String, String>,
    /// The newest `created_at` of a version pulled (RFC 3339).
    #[serde(default)]
    pub watermark: Option<String>,
    /// The last conflicts met (at most [`CONFLICTS_KEPT`]).
    #[serde(default)]
    pub conflicts: Vec<Conflict>,
    /// When changes first waited to be sent, while some wait (RFC 3339).
    #[serde(default)]
    pub unsent_since: Option<String>,
    /// Why the server refuses this cache's changes (a revoked key, an
    /// archived or deleted store), while it does.
    #[serde(default)]
    pub halted: Option<String>,
}

pub const CONFLICTS_KEPT: usize = 100;

/// The directory `.memfs/remote` of a data dir's state dir.
pub struct Kept {
    dir: PathBuf,
}

impl Kept {
    pub fn new(state_dir: &Path) -> std::io::Result<Kept> {
        let dir = state_dir.join("remote");
        std::fs::create_dir_all(dir.join("base"))?;
        Ok(Kept { dir })
    }

    /// The `.memfs/remote` of a data dir that has one (made nothing).
    pub fn at(state_dir: &Path) -> Option<Kept> {
        let dir = state_dir.join("remote");
        dir.join("state.json").is_file().then_some(Kept { dir })
    }

    pub fn load(&self) -> std::io::Result<State> {
        match std::fs::read(self.dir.join("state.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(".memfs/remote/state.json cannot be read: {e}"),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e),
        }
    }

    /// `state` on disk, whole; bases no memory names any more removed.
    pub fn save(&self, state: &State) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(state).expect("serializes");
        replace(&self.dir.join("state.json"), &bytes, &self.dir)?;
        let named: std::collections::HashSet<&str> =
            state.memories.values().map(|b| b.sha.as_str()).collect();
        for entry in std::fs::read_dir(self.dir.join("base"))?.flatten() {
            let name = entry.file_name();
            if !named.contains(name.to_string_lossy().as_ref()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// The content of base `sha`, kept if it is not yet (synced).
    pub fn keep_base(&self, content: &[u8]) -> std::io::Result<String> {
        let sha = Sha::of(content).to_string();
        let path = self.dir.join("base").join(&sha);
        if !path.exists() {
            replace(&path, content, &self.dir.join("base"))?;
        }
        Ok(sha)
    }

    /// The content of base `sha`, if kept.
    pub fn base(&self, sha: &str) -> Option<Vec<u8>> {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        std::fs::read(self.dir.join("base").join(sha)).ok()
    }
}

/// `bytes` as the file at `path`, whole or not at all.
fn replace(path: &Path, bytes: &[u8], dir: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_and_its_bases_come_back_and_unnamed_bases_go() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::new(dir.path()).unwrap();
        assert!(kept.load().unwrap().memories.is_empty());
        let a = kept.keep_base(b"alpha\n").unwrap();
        let b = kept.keep_base(b"beta\n").unwrap();
        let mut state = State::default();
        state.memories.insert(
            "/a.md".into(),
            Base {
                id: "mem_1".into(),
                sha: a.clone(),
            },
        );
        kept.save(&state).unwrap();
        assert_eq!(kept.load().unwrap().memories, state.memories);
        assert_eq!(kept.base(&a).as_deref(), Some(&b"alpha\n"[..]));
        assert_eq!(kept.base(&b), None, "a base no memory names is removed");
        assert_eq!(kept.base("../../etc/passwd"), None);
    }
}
