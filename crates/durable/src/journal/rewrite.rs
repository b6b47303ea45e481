//! Rewriting segments: the frames each holds, changed, in a new file beside
//! it; then all of them take their segments' names as one (a commit file
//! marks the point after which a start finishes the renames; before it, a
//! start removes the new files), so that a crash leaves every segment old
//! or every one new. Redaction uses it to take a content's bytes (or a
//! path's text) out of the journal, so that they are gone from the disk.

use std::io;

use std::ffi::OsStr;

use crate::persist::storage::{self, Dir, Open, Rename};

use super::frame;
use super::history::{refuse, History, Refusal};
use super::record::{ContentRec, Header, OpRec};
use super::row::REDACTED_PATH;
use super::segment;
use super::state::{Loc, State};
use super::writer::Core;
use crate::digest::Sha;
use crate::path::MemPath;

/// A frame as rewriting sees it: its header and each of its contents.
pub struct Parts {
    pub header: Header,
    pub contents: Vec<(ContentRec, Vec<u8>)>,
}

/// A segment written anew beside the old one (`NNN.new`, its data
/// durable), not yet in its place.
pub(super) struct Prepared {
    number: u64,
    tmp: String,
    len: u64,
    /// Where each content is in the new file.
    locs: Vec<(Sha, u64, u64)>,
}

/// Names the segments whose `.new` files take their places: once this file
/// is durable the rewrite is done (a start finishes it), before it, it
/// never happened (a start removes the `.new` files).
const COMMIT: &str = "rewrite.commit";

/// Writes segment `number` anew, beside it, with `change` applied to each
/// frame (it says whether it changed the frame); none if no frame changed.
/// The segment appends go to is closed first (the next frame begins a new
/// one). [`install`] puts what this prepares in place.
pub(super) fn prepare(
    sh: &Core,
    st: &mut State,
    number: u64,
    change: &mut dyn FnMut(&mut Parts) -> bool,
) -> io::Result<Option<Prepared>> {
    let bytes = st.log.segments.get(&number).map_or(0, |s| s.bytes);
    let mut frames = read_frames(sh, number, bytes)?;
    let mut changed = false;
    for parts in frames.iter_mut() {
        changed |= change(parts);
    }
    if !changed {
        return Ok(None);
    }
    if st.log.active.number == number && !st.log.active.fresh {
        st.log.active = st.log.active.next();
    }
    let (out, locs) = encode_frames(frames);
    let tmp = format!("{}.new", segment::name(number));
    storage::write_whole(sh.dir.as_ref(), &tmp, &out)?;
    Ok(Some(Prepared {
        number,
        tmp,
        len: out.len() as u64,
        locs,
    }))
}

/// Every frame of segment `number` (its first `bytes`), each with its
/// contents read.
fn read_frames(sh: &Core, number: u64, bytes: u64) -> io::Result<Vec<Parts>> {
    let fd = segment::open_read(&sh.dir, number)?;
    let mut frames: Vec<Parts> = Vec::new();
    segment::read(&sh.dir, number, Some(bytes), false, &mut |f| {
        let mut contents = Vec::with_capacity(f.header.contents.len());
        for c in &f.header.contents {
            let data = segment::read_at(&fd, f.body_at + c.at, c.len)?;
            contents.push((c.clone(), data));
        }
        frames.push(Parts {
            header: f.header,
            contents,
        });
        Ok(())
    })?;
    Ok(frames)
}

/// The frames encoded one after another, each content's offset set anew;
/// with where each content landed (its hash, offset and length).
fn encode_frames(frames: Vec<Parts>) -> (Vec<u8>, Vec<(Sha, u64, u64)>) {
    let mut out = Vec::new();
    let mut locs = Vec::new();
    for mut parts in frames {
        let mut at = 0;
        let mut recs = Vec::new();
        for (c, data) in &parts.contents {
            recs.push(ContentRec {
                sha256: c.sha256.clone(),
                at,
                len: data.len() as u64,
            });
            at += data.len() as u64;
        }
        parts.header.contents = recs.clone();
        let head = serde_json::to_vec(&parts.header).expect("a header serializes");
        let body: Vec<&[u8]> = parts.contents.iter().map(|(_, d)| d.as_slice()).collect();
        let body_at = (out.len() + frame::HEAD + head.len()) as u64;
        for c in &recs {
            if let Some(sha) = Sha::parse(&c.sha256) {
                locs.push((sha, body_at + c.at, c.len));
            }
        }
        out.extend(frame::encode(&head, &body));
    }
    (out, locs)
}

/// Puts the prepared segments in place as one: their names made durable,
/// then the commit file (the point after which the rewrite holds, power
/// lost or not), then each renamed over its segment, with the contents
/// index following. Before the commit point a failure removes the `.new`
/// files and nothing changed; after it, [`settle`] finishes at the next
/// start what a failure here left.
pub(super) fn install(sh: &Core, st: &mut State, prepared: Vec<Prepared>) -> io::Result<()> {
    if prepared.is_empty() {
        return Ok(());
    }
    let dir = &sh.dir;
    let numbers: String = prepared.iter().map(|p| format!("{}\n", p.number)).collect();
    let committed = dir
        .sync()
        .and_then(|()| storage::write_whole(dir.as_ref(), COMMIT, numbers.as_bytes()))
        .and_then(|()| dir.sync());
    if let Err(e) = committed {
        let _ = dir.unlink(OsStr::new(COMMIT), false);
        for p in &prepared {
            let _ = dir.unlink(OsStr::new(&p.tmp), false);
        }
        return Err(e);
    }
    for p in prepared {
        let name = segment::name(p.number);
        dir.rename(
            OsStr::new(&p.tmp),
            dir.as_ref(),
            OsStr::new(&name),
            Rename::Replace,
        )?;
        st.contents.retain(|_, l| l.segment != p.number);
        for (sha, at, len) in p.locs {
            let loc = Loc {
                segment: p.number,
                at,
                len,
            };
            st.contents.insert(sha, loc);
        }
        if let Some(seg) = st.log.segments.get_mut(&p.number) {
            seg.bytes = p.len;
        }
    }
    dir.sync()?;
    // (Left behind, it only makes the next start rename nothing.)
    let _ = dir.unlink(OsStr::new(COMMIT), false);
    Ok(())
}

/// At a start, before the segments are read: a rewrite whose commit file
/// is there is finished (each `.new` it names renamed into place); then
/// every `.new` file left (a rewrite, compaction or upgrade that stopped
/// before its commit point) is removed.
pub(super) fn settle(dir: &Dir) -> io::Result<()> {
    let commit = match dir.open_file(OsStr::new(COMMIT), Open::Read) {
        Ok(file) => Some(storage::read_all(file.as_ref())?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(text) = commit {
        for number in String::from_utf8_lossy(&text).lines() {
            let Ok(number) = number.trim().parse::<u64>() else {
                continue;
            };
            let name = segment::name(number);
            let tmp = format!("{name}.new");
            match dir.rename(
                OsStr::new(&tmp),
                dir.as_ref(),
                OsStr::new(&name),
                Rename::Replace,
            ) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        dir.sync()?;
        dir.unlink(OsStr::new(COMMIT), false)?;
    }
    for name in crate::persist::list_names(dir.as_ref())? {
        if name.ends_with(".new") {
            dir.unlink(OsStr::new(&name), false)?;
        }
    }
    Ok(())
}

/// The stand-in for an erased path in the ops that name it, so that the
/// journal still replays to the same state (the path exists nowhere now).
fn stand_in(version: u64) -> String {
    format!("/memories/.memfs-redacted-{version}")
}

impl History {
    /// Erases the content of `version` everywhere the journal keeps it (every
    /// version with the same content), and with `path`, that path's text
    /// from every row. The rows stay, marked redacted. Refused while a file
    /// holds the content (or the path).
    pub fn redact(&self, version: u64, path: bool) -> Result<String, Refusal> {
        let rows = self.all()?;
        let Some(row) = rows.iter().find(|r| r.id() == version).cloned() else {
            return refuse(format!(
                "no version {version} in the history (it may have been pruned)"
            ));
        };
        let sh = &self.shared;
        // Not beside a compaction (it reads segments outside the state lock).
        let _alone = sh.rewrite();
        // It judges the view: not while a batch in flight may give it back.
        let mut st = sh.settled_state();
        let sha = row.sha256.as_deref().and_then(Sha::parse);
        let erase_path = path && row.path != REDACTED_PATH;
        still_in_use(&st, &row, sha.as_ref(), erase_path)?;
        // With the path, the names of the directories on it that no longer
        // exist go too: `top` is the highest of them (or the path itself),
        // and every path at or below it is erased (ops keep a stand-in, so
        // that the journal replays to the same state).
        let top = match erase_path {
            true => erased_top(&st.view, &row.path),
            false => row.path.clone(),
        };
        let sha_text = sha.map(|s| s.hex());
        let versions = rows
            .iter()
            .filter(|r| sha_text.is_some() && r.sha256 == sha_text)
            .count();
        let mut redaction = Redaction {
            version,
            sha: sha_text,
            path: erase_path.then_some(row.path),
            top,
            stand_in: stand_in(version),
            paths: 0,
        };
        let prepared = redaction.prepare(sh, &mut st)?;
        install(sh, &mut st, prepared).map_err(|e| {
            cannot_rewrite(&e, "; if the power or the disk failed after the rewrite began, memfs finishes it at its next start")
        })?;
        if let Some(sha) = &sha {
            st.contents.remove(sha);
        }
        sh.upkeep
            .redactions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut said = format!("version {version}: content erased from {versions} version(s)");
        if erase_path {
            said.push_str(&format!(", path erased from {} place(s)", redaction.paths));
        }
        Ok(said)
    }
}

/// Refuses a redaction of what the memory still holds: the content (a
/// file holds it) or, with the path, the path.
fn still_in_use(
    st: &State,
    row: &super::row::Row,
    sha: Option<&Sha>,
    erase_path: bool,
) -> Result<(), Refusal> {
    let version = row.id();
    if sha.is_some_and(|sha| History::is_live_content(st, sha)) {
        return refuse(format!(
            "a file in the memory still holds the content of version {version}; change or delete it first, then redact"
        ));
    }
    let exists = MemPath::parse(&row.path).is_ok_and(|p| st.view.get(&p).is_some());
    if erase_path && exists {
        return refuse(format!(
            "{} exists in the memory; rename or delete it first, then redact its path",
            row.path
        ));
    }
    Ok(())
}

/// What one redaction erases from each frame it rewrites.
struct Redaction {
    version: u64,
    /// The content erased (hex); none for a version without one.
    sha: Option<String>,
    /// The path erased, when it is.
    path: Option<String>,
    /// The highest path erased with it (see `erased_top`).
    top: String,
    /// What ops name instead of an erased path.
    stand_in: String,
    /// How many places the path was erased from.
    paths: usize,
}

impl Redaction {
    /// Every segment that holds what it erases, rewritten beside it (not
    /// yet installed); on a failure, none.
    fn prepare(&mut self, sh: &Core, st: &mut State) -> Result<Vec<Prepared>, Refusal> {
        let numbers: Vec<u64> = st.log.segments.keys().copied().collect();
        let mut prepared = Vec::new();
        for number in numbers {
            match prepare(sh, st, number, &mut |parts| self.frame(parts)) {
                Ok(Some(p)) => prepared.push(p),
                Ok(None) => {}
                Err(e) => {
                    for p in &prepared {
                        let _ = sh.dir.unlink(OsStr::new(&p.tmp), false);
                    }
                    return Err(cannot_rewrite(&e, ""));
                }
            }
        }
        Ok(prepared)
    }

    /// Erases what it erases from one row; whether it changed it.
    fn row(&mut self, r: &mut super::row::Row) -> bool {
        let mut fixed = false;
        if self.sha.is_some() && r.sha256 == self.sha {
            r.sha256 = None;
            r.redacted = true;
            fixed = true;
        } else if self.sha.is_none() && r.id() == self.version {
            r.redacted = true;
            fixed = true;
        }
        let Some(path) = &self.path else {
            return fixed;
        };
        for p in [Some(&mut r.path), r.from.as_mut()].into_iter().flatten() {
            if p == path {
                *p = REDACTED_PATH.to_string();
            } else if !erase_under(p, &self.top, REDACTED_PATH) {
                continue;
            }
            self.paths += 1;
            fixed = true;
        }
        fixed
    }

    /// Erases what it erases from one frame; whether it changed it.
    fn frame(&mut self, parts: &mut Parts) -> bool {
        let mut touched = false;
        let h = &mut parts.header;
        for r in h.kept.iter_mut() {
            touched |= self.row(r);
        }
        let erase_path = self.path.is_some();
        if erase_path {
            for node in h.snapshot.iter_mut().flatten() {
                touched |= erase_under(&mut node.path, &self.top, &self.stand_in);
            }
        }
        for c in h.changes.iter_mut() {
            for r in c.rows.iter_mut() {
                touched |= self.row(r);
            }
            for p in c.ops.iter_mut().filter(|_| erase_path).flat_map(op_paths) {
                touched |= erase_under(p, &self.top, &self.stand_in);
            }
        }
        if let Some(text) = &self.sha {
            let before = parts.contents.len();
            parts.contents.retain(|(c, _)| &c.sha256 != text);
            touched |= parts.contents.len() != before;
        }
        touched
    }
}

fn cannot_rewrite(e: &io::Error, more: &str) -> Refusal {
    Refusal(format!(
        "the history could not be rewritten: {}{more}",
        crate::units::describe_io(e)
    ))
}

/// The highest directory on `path` that no longer exists in `view` (its
/// name is part of the path being erased), or `path` itself.
fn erased_top(view: &super::view::View, path: &str) -> String {
    let Ok(mut at) = MemPath::parse(path) else {
        return path.to_string();
    };
    while let Some(parent) = at.parent() {
        if parent.is_root() || view.get(&parent).is_some() {
            break;
        }
        at = parent;
    }
    at.to_string()
}

/// `path` at or below `top` written with `with` in place of `top`
/// (`top/x` becomes `with/x`); whether it was.
fn erase_under(path: &mut String, top: &str, with: &str) -> bool {
    if path == top {
        *path = with.to_string();
        return true;
    }
    match path.strip_prefix(top).filter(|rest| rest.starts_with('/')) {
        Some(rest) => {
            *path = format!("{with}{rest}");
            true
        }
        None => false,
    }
}

/// The path texts an op record names.
fn op_paths(op: &mut OpRec) -> Vec<&mut String> {
    match op {
        OpRec::Write { path, .. }
        | OpRec::Mkdir { path, .. }
        | OpRec::Remove { path }
        | OpRec::Symlink { path, .. }
        | OpRec::Meta { path, .. }
        | OpRec::Times { path, .. } => vec![path],
        OpRec::Rename { from, to, .. } => vec![from, to],
        OpRec::Exchange { a, b } => vec![a, b],
    }
}
