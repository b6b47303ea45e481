//! `memfs import` as requests an owner answers: each carries a chunk of
//! checked files (see `transfer`), and each file becomes a version of the
//! person who ran the import, unless the memory already holds the same
//! bytes there (so running an import again, or after it was killed, adds
//! nothing twice). A path holding other content is left as it is, unless
//! the import says `overwrite`.

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::reply::Reply;
use crate::path::MemPath;
use crate::store::{Origin, Process, Snapshot, Store, Window};

/// One file of an import, as a request carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportFile {
    /// Below the import's target (`notes/a.md`).
    pub path: String,
    /// The bytes, in base64.
    pub data: String,
    /// The file is deleted (a git commit's deletion).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
    /// The sha256 of what this import (an earlier commit of the same git
    /// history) last left at the path: while the file still holds exactly
    /// that, a commit's change may replace or delete it without
    /// `overwrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ours: Option<String>,
}

impl ImportFile {
    pub fn new(path: String, data: &[u8]) -> ImportFile {
        ImportFile {
            path,
            data: base64::engine::general_purpose::STANDARD.encode(data),
            delete: false,
            ours: None,
        }
    }

    pub fn deleted(path: String) -> ImportFile {
        ImportFile {
            path,
            data: String::new(),
            delete: true,
            ours: None,
        }
    }
}

/// The git commit a chunk replays: its files are versions by its author,
/// at its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub id: String,
    /// `Name <email>`.
    pub author: String,
    /// RFC 3339.
    pub authored: String,
}

/// What tells a later import that this commit's change to the file at
/// `path` (`/memories/...`, where it landed) is in.
pub fn key(commit: &str, path: &str) -> String {
    format!("git:{commit}:{path}")
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// `/memories/...`.
    pub path: String,
    /// `created`, `updated`, `deleted`, `unchanged`, `skipped` or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What an import request asks.
pub struct Chunk<'a> {
    pub files: &'a [ImportFile],
    /// Where the files go (`/memories` or below).
    pub to: &'a str,
    pub overwrite: bool,
    pub dry_run: bool,
    pub uid: u32,
    pub pid: u32,
    /// The git commit the chunk replays (its files are then made over
    /// what the memory holds: the commit's parent's content).
    pub commit: Option<&'a Commit>,
}

fn outcome(path: &str, what: &str, reason: Option<String>) -> Outcome {
    Outcome {
        path: path.to_string(),
        outcome: what.to_string(),
        reason,
    }
}

/// One file to write or delete.
struct Write {
    shown: String,
    at: MemPath,
    data: Vec<u8>,
    /// `created`, `updated` or `deleted`.
    what: &'static str,
    /// It replaces a file.
    overwrite: bool,
}

/// What to do with one file: write or delete it, or the outcome it already
/// has (unchanged, left out, or a dry run's).
fn decide(store: &Store, to: &MemPath, f: &ImportFile, chunk: &Chunk) -> Result<Write, Outcome> {
    let at = MemPath::parse(&format!("{to}/{}", f.path));
    let data = base64::engine::general_purpose::STANDARD.decode(&f.data);
    let (Ok(at), Ok(data)) = (at, data) else {
        let why = "not a file an import can carry";
        return Err(outcome(&f.path, "skipped", Some(why.into())));
    };
    let shown = at.to_string();
    let now = store.snapshot(&at, 0, Window { skip: 0, take: 0 }, &|_| false);
    // A file the memory holds is replaced or deleted only under
    // `overwrite`, or by a git commit while the file holds what an earlier
    // commit of the same import left there (not a person's edit since).
    let ours = |bytes: &[u8]| {
        f.ours
            .as_deref()
            .is_some_and(|sha| crate::digest::Sha::of(bytes).hex() == sha)
    };
    let may_replace = |bytes: &[u8]| chunk.overwrite || ours(bytes);
    let (what, overwrite) = match now {
        Ok(Snapshot::File(bytes)) if f.delete && may_replace(&bytes) => ("deleted", true),
        Ok(Snapshot::File(_)) if f.delete => {
            let why = "the commit deletes a file the import did not bring in: it is kept (--overwrite deletes it)";
            return Err(outcome(&shown, "skipped", Some(why.into())));
        }
        _ if f.delete => return Err(outcome(&shown, "unchanged", None)),
        Ok(Snapshot::File(bytes)) if *bytes == data => {
            return Err(outcome(&shown, "unchanged", None))
        }
        Ok(Snapshot::File(ref bytes)) if !may_replace(bytes) => {
            let why = "the memory holds other content there (--overwrite makes the import a new version of it)";
            return Err(outcome(&shown, "skipped", Some(why.into())));
        }
        Ok(Snapshot::File(_)) => ("updated", true),
        Ok(_) => {
            let why = "something else than a file is there";
            return Err(outcome(&shown, "skipped", Some(why.into())));
        }
        Err(_) => ("created", false),
    };
    if chunk.dry_run {
        return Err(outcome(&shown, what, None));
    }
    Ok(Write {
        shown,
        at,
        data,
        what,
        overwrite,
    })
}

/// Who makes a file's version: the person who ran the import, or, for a
/// git commit, that person on behalf of the commit's author and time.
fn origin_of(chunk: &Chunk, path: &str) -> Origin {
    match chunk.commit {
        None => Origin::Person {
            uid: chunk.uid,
            pid: chunk.pid,
            process: Process::new("memfs-import"),
        },
        Some(c) => Origin::Import {
            uid: chunk.uid,
            pid: chunk.pid,
            author: Some(Arc::from(c.author.as_str())),
            authored: (!c.authored.is_empty()).then(|| Arc::from(c.authored.as_str())),
            key: Some(Arc::from(key(&c.id, path).as_str())),
        },
    }
}

/// Applies one chunk: every file's change is made, then all are waited for
/// together (one journal flush shared by many), so the reply says only
/// what is durable.
pub fn apply(store: &Arc<Store>, chunk: &Chunk) -> Reply {
    let Ok(to) = MemPath::parse(chunk.to) else {
        return Reply::error(format!(
            "`{}` is not a path below /memories",
            crate::text::clip(chunk.to)
        ));
    };
    let mut out = Vec::with_capacity(chunk.files.len());
    let mut waits = Vec::new();
    for f in chunk.files {
        let w = match decide(store, &to, f, chunk) {
            Ok(w) => w,
            Err(done) => {
                out.push(done);
                continue;
            }
        };
        let origin = origin_of(chunk, &w.shown);
        let made = match w.what {
            "deleted" => store.remove(&w.at, origin),
            _ => store.create_file(&w.at, w.data, w.overwrite, origin),
        };
        match made {
            Ok(ticket) => {
                waits.push((out.len(), ticket));
                out.push(outcome(&w.shown, w.what, None));
            }
            Err(e) => out.push(outcome(&w.shown, "skipped", Some(e.to_string()))),
        }
    }
    let mut failed = false;
    for (i, ticket) in waits {
        if let Err(e) = ticket.wait() {
            failed = true;
            out[i].outcome = "failed".into();
            out[i].reason = Some(format!("not kept: {e}"));
        }
    }
    let body = serde_json::to_vec(&out).expect("outcomes serialize");
    Reply {
        code: if failed { 2 } else { 0 },
        ..Reply::ok(body)
    }
}

/// The keys of imported versions the history holds that begin with
/// `prefix` (what a git import already brought in), one a line, oldest
/// first, each with a tab and the sha256 of the content it left (`-`: a
/// deletion).
pub fn keys(history: &crate::journal::History, prefix: &str) -> Reply {
    match history.all() {
        Ok(rows) => {
            let mut out = String::new();
            for row in &rows {
                let Some(key) = row.actor.request.as_deref() else {
                    continue;
                };
                if key.starts_with(prefix) {
                    out.push_str(key);
                    out.push('\t');
                    out.push_str(row.sha256.as_deref().unwrap_or("-"));
                    out.push('\n');
                }
            }
            Reply::ok(out)
        }
        Err(e) => Reply::error(e.0),
    }
}
