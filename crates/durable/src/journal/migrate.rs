//! Taking in a history kept before the journal (`DIR/.memfs/history/`: a
//! `log` of JSON rows and `objects/SHA` contents): every version, with its
//! content where one was kept, becomes the journal's first frame, with a
//! snapshot of what each file held by those rows. Then the old history is
//! removed. A crash before the frame is durable leaves the old history as
//! it was (taken in again at the next start); after, the journal is read
//! and the leftover removed.

use std::collections::{BTreeMap, HashSet};
use std::io;

use crate::persist::storage::{self, Dir, Open, Rename};

use super::frame;
use super::record::{ContentRec, Header, MetaRec, NodeRec, NodeRecKind, SegmentInfo};
use super::row::{Op, Row};
use super::segment;
use super::startup::{self, Loaded};
use crate::digest::Sha;
use crate::path::MemPath;

const OLD: &str = "history";

fn read_all(dir: &Dir, name: &str) -> io::Result<Vec<u8>> {
    let file = dir.open_file(std::ffi::OsStr::new(name), Open::Read)?;
    storage::read_all(file.as_ref())
}

/// Removes the old history, once the journal holds it.
pub fn remove_old(state: &Dir) {
    let _ = crate::persist::fsops::remove_tree(state, OLD);
}

/// Takes in `state/history` (if there is one) as the journal in `dir`;
/// returns the journal as read back.
pub fn take_in(state: &Dir, dir: &Dir) -> io::Result<Option<Loaded>> {
    let history = match crate::persist::fsops::open_dir(state.as_ref(), OLD) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = match read_all(&history, "log") {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let objects = crate::persist::fsops::open_dir(history.as_ref(), "objects").ok();
    let rows = old_rows(&text);
    let live = live_files(&rows);
    let (contents, body) = kept_contents(&rows, objects.as_ref());
    let nodes = snapshot_nodes(&live, &contents);
    let batch = rows.iter().map(|r| r.batch).max().unwrap_or(0) + 1;
    let origin = startup::new_state().origin;
    let header = Header {
        segment: Some(SegmentInfo {
            number: 1,
            origin,
            covers: None,
            prev: None,
        }),
        batch: Some(batch),
        time: Some(super::now_text()),
        checkpoint: Some(batch),
        snapshot: Some(nodes),
        kept: rows,
        contents,
        ..Header::default()
    };
    let head = serde_json::to_vec(&header).expect("a header serializes");
    write_first_segment(dir, &frame::encode(&head, &[&body]))?;
    remove_old(state);
    tracing::info!("the history kept before the journal is now in .memfs/journal");
    startup::read(dir, true)
}

/// The rows as the old history read them: void ones, and those they
/// void, left out.
fn old_rows(text: &[u8]) -> Vec<Row> {
    let mut rows: Vec<Row> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    let voided: HashSet<u64> = rows
        .iter()
        .filter(|r| r.op == Op::Void)
        .filter_map(|r| r.replaces.map(|v| v.0))
        .collect();
    rows.retain(|r| r.op != Op::Void && !voided.contains(&r.id()));
    rows
}

/// A file the rows leave in place: its sha256, size, version, and whether
/// only the plain file holds its bytes.
type Live = (String, u64, u64, bool);

/// What each file holds by the rows.
fn live_files(rows: &[Row]) -> BTreeMap<MemPath, Live> {
    let mut live = BTreeMap::new();
    for r in rows {
        let Ok(path) = MemPath::parse(&r.path) else {
            continue;
        };
        if r.op.leaves_content() && r.sha256.is_some() {
            if !r.is_exchanged() {
                if let Some(from) = r.from.as_deref().and_then(|f| MemPath::parse(f).ok()) {
                    live.remove(&from);
                }
            }
            let in_file = r.pruned && r.is_before_history();
            live.insert(
                path,
                (
                    r.sha256.clone().unwrap_or_default(),
                    r.size.unwrap_or(0),
                    r.id(),
                    in_file,
                ),
            );
        } else if matches!(r.op, Op::Delete | Op::Expire | Op::Found) {
            live.remove(&path);
        }
    }
    live
}

/// Each kept content once (a damaged object is not taken in), and the
/// body that holds them in that order.
fn kept_contents(rows: &[Row], objects: Option<&Dir>) -> (Vec<ContentRec>, Vec<u8>) {
    let mut contents = Vec::new();
    let mut body = Vec::new();
    let mut seen = HashSet::new();
    for r in rows {
        let Some(sha) = r.sha256.as_deref() else {
            continue;
        };
        if r.pruned || r.redacted || !seen.insert(sha.to_string()) {
            continue;
        }
        let Some(data) = objects.and_then(|o| read_all(o, sha).ok()) else {
            continue;
        };
        if Sha::parse(sha) != Some(Sha::of(&data)) {
            continue; // damaged: not taken in
        }
        contents.push(ContentRec {
            sha256: sha.to_string(),
            at: body.len() as u64,
            len: data.len() as u64,
        });
        body.extend_from_slice(&data);
    }
    (contents, body)
}

/// The snapshot: every live file, and every directory above one.
fn snapshot_nodes(live: &BTreeMap<MemPath, Live>, contents: &[ContentRec]) -> Vec<NodeRec> {
    let kept_shas: HashSet<&str> = contents.iter().map(|c| c.sha256.as_str()).collect();
    let meta = MetaRec {
        perm: crate::store::FILE_MODE,
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        atime: (0, 0),
        mtime: (0, 0),
    };
    let mut nodes = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    for (path, (sha, size, version, in_file)) in live {
        let mut at = path.parent();
        while let Some(dir) = at.filter(|d| !d.is_root()) {
            at = dir.parent();
            dirs.insert(dir);
        }
        nodes.push(NodeRec {
            path: path.to_string(),
            kind: NodeRecKind::File {
                sha256: sha.clone(),
                size: *size,
                version: *version,
                in_file: *in_file || !kept_shas.contains(sha.as_str()),
            },
            meta,
        });
    }
    for dir in dirs {
        nodes.push(NodeRec {
            path: dir.to_string(),
            kind: NodeRecKind::Dir,
            meta: MetaRec {
                perm: crate::store::DIR_MODE,
                ..meta
            },
        });
    }
    nodes
}

/// Writes the journal's first segment whole (under a temporary name,
/// flushed, then renamed into place and the directory flushed).
fn write_first_segment(dir: &Dir, bytes: &[u8]) -> io::Result<()> {
    let name = segment::name(1);
    let new = format!("{name}.new");
    storage::write_whole(dir.as_ref(), &new, bytes)?;
    let (new, name) = (std::ffi::OsStr::new(&new), std::ffi::OsStr::new(&name));
    dir.rename(new, dir.as_ref(), name, Rename::Replace)?;
    dir.sync()
}
