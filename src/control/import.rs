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
}

impl ImportFile {
    pub fn new(path: String, data: &[u8]) -> ImportFile {
        ImportFile {
            path,
            data: base64::engine::general_purpose::STANDARD.encode(data),
        }
    }
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// `/memories/...`.
    pub path: String,
    /// `created`, `updated`, `unchanged`, `skipped` or `failed`.
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
}

fn outcome(path: &str, what: &str, reason: Option<String>) -> Outcome {
    Outcome {
        path: path.to_string(),
        outcome: what.to_string(),
        reason,
    }
}

/// One file to write.
struct Write {
    shown: String,
    at: MemPath,
    data: Vec<u8>,
    /// `created` or `updated`.
    what: &'static str,
    /// It replaces a file.
    overwrite: bool,
}

/// What to do with one file: write it, or the outcome it already has
/// (unchanged, left out, or a dry run's).
fn decide(store: &Store, to: &MemPath, f: &ImportFile, chunk: &Chunk) -> Result<Write, Outcome> {
    let at = MemPath::parse(&format!("{to}/{}", f.path));
    let data = base64::engine::general_purpose::STANDARD.decode(&f.data);
    let (Ok(at), Ok(data)) = (at, data) else {
        return Err(outcome(
            &f.path,
            "skipped",
            Some("not a file an import can carry".into()),
        ));
    };
    let shown = at.to_string();
    let (what, overwrite) = match store.snapshot(&at, 0, Window { skip: 0, take: 0 }, &|_| false) {
        Ok(Snapshot::File(bytes)) if *bytes == data => {
            return Err(outcome(&shown, "unchanged", None))
        }
        Ok(Snapshot::File(_)) if !chunk.overwrite => {
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
    let origin = Origin::Person {
        uid: chunk.uid,
        pid: chunk.pid,
        process: Process::new("memfs-import"),
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
        match store.create_file(&w.at, w.data, w.overwrite, origin.clone()) {
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
