//! Rewriting a segment: the frames it holds, changed, in a new file that
//! takes its name in one rename (a crash leaves the old segment or the new
//! one, whole). Redaction uses it to take a content's bytes (or a path's
//! text) out of the journal, so that they are gone from the disk.

use std::io;

use std::ffi::OsStr;

use crate::persist::storage::{self, Rename};

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

/// Rewrites segment `number` with `change` applied to each frame (it says
/// whether it changed the frame; a segment no frame of which changed is left
/// as it is); the contents index follows. The segment appends go to is
/// closed first (the next frame begins a new one).
///
/// Long because it rewrites one segment as one unit (read every frame,
/// change them, encode with new offsets, swap the file in, update the
/// contents index), all sharing the frames, buffer and offsets.
pub(super) fn rewrite_segment(
    sh: &Core,
    st: &mut State,
    number: u64,
    change: &mut dyn FnMut(&mut Parts) -> bool,
) -> io::Result<()> {
    let bytes = st.segments.get(&number).map_or(0, |s| s.bytes);
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
    drop(fd);
    let mut changed = false;
    for parts in frames.iter_mut() {
        changed |= change(parts);
    }
    if !changed {
        return Ok(());
    }
    if st.active.number == number && !st.active.fresh {
        st.active = st.active.next();
    }
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
    let name = segment::name(number);
    let new = format!("{name}.new");
    storage::write_whole(sh.dir.as_ref(), &new, &out)?;
    let (new, name) = (OsStr::new(&new), OsStr::new(&name));
    let placed = sh
        .dir
        .rename(new, sh.dir.as_ref(), name, Rename::Replace)
        .and_then(|()| sh.dir.sync());
    if let Err(e) = placed {
        let _ = sh.dir.unlink(new, false);
        return Err(e);
    }
    st.contents.retain(|_, l| l.segment != number);
    for (sha, at, len) in locs {
        st.contents.insert(
            sha,
            Loc {
                segment: number,
                at,
                len,
            },
        );
    }
    if let Some(seg) = st.segments.get_mut(&number) {
        seg.bytes = out.len() as u64;
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
    ///
    /// Long because the refusal checks and the rewrite of every segment run
    /// under the same rewrite and state locks, and the per-frame closure
    /// uses the same locals.
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
        let mut st = sh.state.lock();
        let sha = row.sha256.as_deref().and_then(Sha::parse);
        if let Some(sha) = &sha {
            if History::is_live_content(&st, sha) {
                return refuse(format!(
                    "a file in the memory still holds the content of version {version}; change or delete it first, then redact"
                ));
            }
        }
        let erase_path = path && row.path != REDACTED_PATH;
        if erase_path {
            if let Ok(p) = MemPath::parse(&row.path) {
                if st.view.get(&p).is_some() {
                    return refuse(format!(
                        "{} exists in the memory; rename or delete it first, then redact its path",
                        row.path
                    ));
                }
            }
        }
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
        let stand_in = stand_in(version);
        let mut paths = 0;
        let numbers: Vec<u64> = st.segments.keys().copied().collect();
        for number in numbers {
            let mut redact_frame = |parts: &mut Parts| -> bool {
                let mut touched = false;
                let h = &mut parts.header;
                let mut fix_row = |r: &mut super::row::Row| -> bool {
                    let mut fixed = false;
                    if sha_text.is_some() && r.sha256 == sha_text {
                        r.sha256 = None;
                        r.redacted = true;
                        fixed = true;
                    } else if sha_text.is_none() && r.id() == version {
                        r.redacted = true;
                        fixed = true;
                    }
                    if erase_path {
                        for p in [Some(&mut r.path), r.from.as_mut()].into_iter().flatten() {
                            if *p == row.path {
                                *p = REDACTED_PATH.to_string();
                            } else if !erase_under(p, &top, REDACTED_PATH) {
                                continue;
                            }
                            paths += 1;
                            fixed = true;
                        }
                    }
                    fixed
                };
                for r in h.kept.iter_mut() {
                    touched |= fix_row(r);
                }
                if erase_path {
                    for node in h.snapshot.iter_mut().flatten() {
                        touched |= erase_under(&mut node.path, &top, &stand_in);
                    }
                }
                for c in h.changes.iter_mut() {
                    for r in c.rows.iter_mut() {
                        touched |= fix_row(r);
                    }
                    if erase_path {
                        for op in c.ops.iter_mut() {
                            for p in op_paths(op) {
                                touched |= erase_under(p, &top, &stand_in);
                            }
                        }
                    }
                }
                if let Some(text) = &sha_text {
                    let before = parts.contents.len();
                    parts.contents.retain(|(c, _)| &c.sha256 != text);
                    touched |= parts.contents.len() != before;
                }
                touched
            };
            rewrite_segment(sh, &mut st, number, &mut redact_frame).map_err(|e| {
                Refusal(format!(
                    "the history could not be rewritten: {}",
                    crate::units::describe_io(&e)
                ))
            })?;
        }
        if let Some(sha) = &sha {
            st.contents.remove(sha);
        }
        let mut said = format!("version {version}: content erased from {versions} version(s)");
        if erase_path {
            said.push_str(&format!(", path erased from {paths} place(s)"));
        }
        Ok(said)
    }
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
