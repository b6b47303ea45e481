//! Retention (`--history-keep AGE,SIZE`): old segments, all of whose
//! batches the plain files already hold, are compacted into one that
//! begins with a snapshot of the state they ended in, followed by the
//! versions the policy keeps. Versions older than AGE go; then the oldest
//! until the history (everything but the snapshot) fits in half of SIZE.
//! A file's current version keeps its row (and `log` goes on knowing what
//! each file holds); its content copy may go, the plain file holding it.
//! A content a later segment names is always kept. Checked as batches are
//! written, so the journal's size stays bounded while memfs runs.
//!
//! The old segments are read without the journal's lock (they never
//! change); the compacted one is written to a new file, flushed, and takes
//! the first one's name in one rename; the rest are removed. A crash
//! leaves the old segments or the new one (which says which it stands for).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use super::frame;
use super::record::{ContentRec, Header, MetaRec, NodeRec, NodeRecKind, OpRec, SegmentInfo};
use super::retention::cutoff_text;
use super::row::{Actor, Op, Row, VersionId};
use super::segment;
use super::startup::Reading;
use super::state::{Loc, Segment};
use super::view::VKind;
use super::writer::Shared;
use super::Keep;
use crate::digest::Sha;
use crate::path::MemPath;

/// Contents per frame of a compacted segment.
const FRAME_CONTENTS: u64 = 8 << 20;

fn row_bytes(r: &Row) -> u64 {
    serde_json::to_vec(r).map_or(256, |v| v.len() as u64)
}

/// The compactor thread: compacts when the writer asks (see
/// `retention::due`), until the journal stops.
pub(super) fn run(sh: &Shared) {
    loop {
        {
            let mut c = sh.compact.lock();
            while !c.asked && !c.stop {
                sh.compact_wake.wait(&mut c);
            }
            if c.stop {
                return;
            }
            c.asked = false;
        }
        if let Err(e) = compact(sh, sh.opts.keep) {
            tracing::warn!(
                "old history could not be compacted ({}); memfs tries again later",
                crate::units::describe_io(&e)
            );
        }
        sh.compact.lock().last = Some(std::time::Instant::now());
    }
}

/// Compacts what `keep` allows; says what it dropped (`None`: nothing to do).
///
/// Long because one compaction locks, lets go and locks again in order
/// (choose and close segments, build without the lock, check again and
/// install), all three sharing the range and limits.
pub(super) fn compact(sh: &Shared, keep: Keep) -> io::Result<Option<String>> {
    let _alone = sh.rewrite();
    close_the_open_segment(sh);
    // Which segments: from the first, those the plain files hold all of.
    let (range, limits, later, origin, prune_id) = {
        let mut st = sh.state.lock();
        let checkpoint = st.checkpoint_written;
        let active = st.active;
        let active_done = !active.fresh
            && st
                .segments
                .get(&active.number)
                .is_some_and(|s| s.last_batch <= checkpoint && s.bytes > 0);
        let mut range = Vec::new();
        for (&n, seg) in &st.segments {
            let sealed = n != active.number || active_done;
            if !sealed || seg.last_batch > checkpoint {
                break;
            }
            range.push(n);
        }
        if range.is_empty() {
            tracing::debug!("nothing to compact yet (checkpoint {checkpoint})");
            return Ok(None);
        }
        if range.contains(&active.number) {
            // Closed: the next frame begins a new segment.
            st.active = active.next();
        }
        let limits: HashMap<u64, u64> = range.iter().map(|n| (*n, st.segments[n].bytes)).collect();
        let later: Vec<(u64, u64)> = st
            .segments
            .iter()
            .filter(|(n, _)| !range.contains(n))
            .map(|(n, s)| (*n, s.bytes))
            .collect();
        *sh.named_meanwhile.lock() = Some(HashSet::new());
        let prune_id = st.ids.next_version;
        st.ids.next_version += 1;
        (range, limits, later, st.origin.clone(), prune_id)
    };
    tracing::debug!("compacting segments {range:?}");
    let outcome = build(sh, keep, &range, &limits, &later, &origin, prune_id);
    let named = sh.named_meanwhile.lock().take().unwrap_or_default();
    let Some(built) = outcome? else {
        return Ok(None);
    };
    let mut st = sh.state.lock();
    if built.dropped.iter().any(|s| named.contains(s)) {
        tracing::debug!("a compaction gave way to a frame that names what it would drop");
        // A new frame named a content this would drop: another time.
        let _ = rfs::unlinkat(&sh.dir, built.tmp.as_str(), AtFlags::empty());
        return Ok(None);
    }
    let first = range[0];
    let name = segment::name(first);
    rfs::renameat(&sh.dir, built.tmp.as_str(), &sh.dir, name.as_str())?;
    rfs::fsync(&sh.dir)?;
    for n in &range[1..] {
        let _ = rfs::unlinkat(&sh.dir, segment::name(*n).as_str(), AtFlags::empty());
    }
    for n in &range {
        st.segments.remove(n);
    }
    st.segments.insert(first, built.segment);
    st.contents.retain(|_, l| !range.contains(&l.segment));
    for (sha, loc) in built.locs {
        st.contents.insert(sha, loc);
    }
    // Files whose content was only in what went: the plain file holds it.
    let gone: Vec<MemPath> = st
        .view
        .iter()
        .filter_map(|(k, n)| match n.kind {
            VKind::File {
                sha,
                in_file: false,
                ..
            } if !built.kept.contains(&sha) && built.dropped.contains(&sha) => {
                Some(super::view::path(k))
            }
            _ => None,
        })
        .collect();
    for p in gone {
        st.view.mark_in_file(&p);
    }
    tracing::info!("history: {}", built.note);
    Ok(Some(built.note))
}

/// The segment appends go to holds history too, and is always ahead of
/// the checkpoint: it is closed (the next frame begins a new one), and the
/// checkpoint given a moment to pass it, so that it can be compacted.
fn close_the_open_segment(sh: &Shared) {
    let wanted = {
        let mut st = sh.state.lock();
        let active = st.active;
        let Some(seg) = st.segments.get(&active.number) else {
            return;
        };
        if active.fresh || seg.bytes == 0 || seg.last_batch <= st.checkpoint_written {
            return;
        }
        let wanted = seg.last_batch;
        st.active = active.next();
        wanted
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while sh.state.lock().checkpoint_written < wanted && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Built {
    tmp: String,
    segment: Segment,
    locs: Vec<(Sha, Loc)>,
    kept: HashSet<Sha>,
    dropped: HashSet<Sha>,
    note: String,
}

fn build(
    sh: &Shared,
    keep: Keep,
    range: &[u64],
    limits: &HashMap<u64, u64>,
    later: &[(u64, u64)],
    origin: &str,
    prune_id: u64,
) -> io::Result<Option<Built>> {
    let dir = &sh.dir;
    let mut reading = Reading::new(origin.to_string());
    reading.rows = Some(Vec::new());
    for n in range {
        segment::read(dir, *n, limits.get(n).copied(), false, &mut |f| {
            reading.take(*n, f);
            Ok(())
        })?;
    }
    let batch = reading.state.next_batch.saturating_sub(1);
    let mut rows = reading.rows.take().unwrap_or_default();
    rows.sort_by_key(Row::id);
    let view = &reading.state.view;
    let contents = &reading.state.contents;
    // Contents later segments name without holding them.
    let mut named_later = HashSet::new();
    let mut held_later = HashSet::new();
    let mut later_bytes = 0;
    for (n, bytes) in later {
        later_bytes += bytes;
        segment::read(dir, *n, Some(*bytes), false, &mut |f| {
            let h = f.header;
            held_later.extend(h.contents.iter().filter_map(|c| Sha::parse(&c.sha256)));
            for c in &h.changes {
                for op in &c.ops {
                    if let OpRec::Write { sha256, .. } = op {
                        named_later.extend(Sha::parse(sha256));
                    }
                }
                named_later.extend(
                    c.rows
                        .iter()
                        .filter_map(|r| r.sha256.as_deref().and_then(Sha::parse)),
                );
            }
            named_later.extend(
                h.kept
                    .iter()
                    .filter_map(|r| r.sha256.as_deref().and_then(Sha::parse)),
            );
            Ok(())
        })?;
    }
    let must_keep: HashSet<Sha> = named_later.difference(&held_later).copied().collect();
    // Which rows and contents stay.
    let current: HashSet<u64> = view
        .iter()
        .filter_map(|(_, n)| n.file().map(|f| f.2))
        .filter(|v| *v > 0)
        .collect();
    let cutoff = cutoff_text(keep.age);
    let content_of = |r: &Row| {
        r.sha256
            .as_deref()
            .and_then(Sha::parse)
            .filter(|_| !r.pruned)
    };
    let mut kept_rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    let mut by_age = 0usize;
    let drop_row = |slot: &mut Option<Row>, n: &mut usize| {
        let Some(r) = slot.as_mut() else { return };
        if current.contains(&r.id()) {
            if !r.pruned && r.sha256.is_some() {
                r.pruned = true;
                *n += 1;
            }
        } else {
            *slot = None;
            *n += 1;
        }
    };
    for slot in kept_rows.iter_mut() {
        if slot
            .as_ref()
            .is_some_and(|r| r.time.as_str() < cutoff.as_str())
        {
            drop_row(slot, &mut by_age);
        }
    }
    // How many kept rows name each content, and the history's size: the
    // rows (a current version's row is the state, not history) and each
    // named content once.
    let mut refs: HashMap<Sha, usize> = HashMap::new();
    let mut total = later_bytes;
    for r in kept_rows.iter().flatten() {
        if !current.contains(&r.id()) {
            total += row_bytes(r);
        }
        if let Some(sha) = content_of(r) {
            let n = refs.entry(sha).or_insert(0);
            if *n == 0 {
                total += contents.get(&sha).map_or(0, |l| l.len);
            }
            *n += 1;
        }
    }
    let mut by_size = 0usize;
    let target = keep.bytes / 2;
    if total > keep.bytes {
        // Oldest first, down to half of SIZE (so the next batch does not
        // compact again), measured as it goes.
        for slot in kept_rows.iter_mut() {
            if total <= target {
                break;
            }
            let Some((id, bytes, content)) =
                slot.as_ref().map(|r| (r.id(), row_bytes(r), content_of(r)))
            else {
                continue;
            };
            drop_row(slot, &mut by_size);
            if slot.is_none() && !current.contains(&id) {
                total = total.saturating_sub(bytes);
            }
            let lost = slot
                .as_ref()
                .map_or(content, |r| content.filter(|_| r.pruned));
            if let Some(sha) = lost {
                let n = refs.entry(sha).or_insert(1);
                *n -= 1;
                if *n == 0 {
                    total = total.saturating_sub(contents.get(&sha).map_or(0, |l| l.len));
                }
            }
        }
    }
    let dropped_total = by_age + by_size;
    if dropped_total == 0 && range.len() == 1 {
        return Ok(None); // nothing would change
    }
    // Rows written before the markers were fields say them in their notes:
    // the compacted segment holds them as fields (the format upgraded in
    // place, as each old segment is compacted).
    let mut kept_rows: Vec<Row> = kept_rows
        .into_iter()
        .flatten()
        .map(|mut r| {
            r.exchanged = r.is_exchanged();
            r.before_history = r.is_before_history();
            r
        })
        .collect();
    let why = match (by_age > 0, by_size > 0) {
        (true, false) => format!("older than {}", humantime::format_duration(keep.age)),
        (false, _) if dropped_total == 0 => "none".to_string(),
        _ => format!("over {} of history", crate::units::human_bytes(keep.bytes)),
    };
    let note = format!(
        "dropped {dropped_total} old version(s) ({why}); a file's current version keeps its row"
    );
    if dropped_total > 0 {
        kept_rows.push(Row {
            version: VersionId(prune_id),
            time: super::now_text(),
            actor: Actor::memfs(),
            op: Op::Prune,
            path: MemPath::root().to_string(),
            from: None,
            sha256: None,
            size: None,
            replaces: None,
            redacted: false,
            pruned: false,
            note: Some(note.clone()),
            exchanged: false,
            before_history: false,
            batch,
            change: None,
            origin: None,
        });
    }
    // Contents that stay: those a kept row names, and those later ones need.
    let mut keep_content: Vec<Sha> = Vec::new();
    let mut kept = HashSet::new();
    for sha in kept_rows
        .iter()
        .filter_map(content_of)
        .chain(must_keep.iter().copied())
    {
        if contents.contains_key(&sha) && kept.insert(sha) {
            keep_content.push(sha);
        }
    }
    let dropped: HashSet<Sha> = contents
        .keys()
        .filter(|s| !kept.contains(s))
        .copied()
        .collect();
    // The snapshot: the state after the last compacted batch.
    let nodes: Vec<NodeRec> = view
        .iter()
        .map(|(k, n)| NodeRec {
            path: super::view::path(k).to_string(),
            kind: match &n.kind {
                VKind::File {
                    sha,
                    size,
                    version,
                    in_file,
                } => NodeRecKind::File {
                    sha256: sha.hex(),
                    size: *size,
                    version: *version,
                    in_file: *in_file || !kept.contains(sha),
                },
                VKind::Dir => NodeRecKind::Dir,
                VKind::Symlink(t) => NodeRecKind::Symlink { target: t.clone() },
            },
            meta: MetaRec::from(&n.meta),
        })
        .collect();
    let first = range[0];
    let last = *range.last().expect("a range");
    let mut out: Vec<u8> = Vec::new();
    let snapshot = Header {
        segment: Some(SegmentInfo {
            number: first,
            origin: origin.to_string(),
            covers: Some(last),
            prev: None,
        }),
        batch: Some(batch),
        time: Some(super::now_text()),
        checkpoint: Some(batch),
        follow: (reading.state.follow > 0).then_some(reading.state.follow),
        snapshot: Some(nodes),
        ..Header::default()
    };
    out.extend(frame::encode(
        &serde_json::to_vec(&snapshot).expect("serializes"),
        &[],
    ));
    let state_bytes = out.len() as u64;
    // Then the kept rows, with their contents, a few MiB of contents a frame.
    let mut locs = Vec::new();
    let mut by_sha: BTreeMap<usize, Vec<Row>> = BTreeMap::new();
    // Rows go with the frame of their content (or the last frame).
    let chunks: Vec<Vec<Sha>> = {
        let mut chunks = vec![Vec::new()];
        let mut bytes = 0;
        for sha in &keep_content {
            let len = contents[sha].len;
            if bytes + len > FRAME_CONTENTS && !chunks.last().expect("one").is_empty() {
                chunks.push(Vec::new());
                bytes = 0;
            }
            bytes += len;
            chunks.last_mut().expect("one").push(*sha);
        }
        chunks
    };
    let chunk_of: HashMap<Sha, usize> = chunks
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter().map(move |s| (*s, i)))
        .collect();
    for r in kept_rows {
        let i = content_of(&r)
            .and_then(|s| chunk_of.get(&s).copied())
            .unwrap_or(chunks.len() - 1);
        by_sha.entry(i).or_default().push(r);
    }
    let mut oldest = None;
    for (i, chunk) in chunks.iter().enumerate() {
        let mut body = Vec::new();
        let mut recs = Vec::new();
        for sha in chunk {
            let loc = contents[sha];
            let fd = segment::open_read(dir, loc.segment)?;
            let data = segment::read_at(&fd, loc.at, loc.len)?;
            recs.push(ContentRec {
                sha256: sha.hex(),
                at: body.len() as u64,
                len: data.len() as u64,
            });
            body.extend_from_slice(&data);
        }
        let rows = by_sha.remove(&i).unwrap_or_default();
        if rows.is_empty() && recs.is_empty() {
            continue;
        }
        for r in &rows {
            let t = r.time.clone();
            if oldest.as_ref().is_none_or(|o: &String| t < *o) {
                oldest = Some(t);
            }
        }
        let header = Header {
            kept: rows,
            contents: recs.clone(),
            ..Header::default()
        };
        let head = serde_json::to_vec(&header).expect("serializes");
        let body_at = (out.len() + frame::HEAD + head.len()) as u64;
        for c in &recs {
            if let Some(sha) = Sha::parse(&c.sha256) {
                locs.push((
                    sha,
                    Loc {
                        segment: first,
                        at: body_at + c.at,
                        len: c.len,
                    },
                ));
            }
        }
        out.extend(frame::encode(&head, &[&body]));
    }
    let tmp = format!("{}.new", segment::name(first));
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let written = (|| -> io::Result<()> {
        let fd = rfs::openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))?;
        let mut rest = out.as_slice();
        let mut pos = 0u64;
        while !rest.is_empty() {
            let n = rustix::io::pwrite(&fd, rest, pos)?;
            rest = &rest[n..];
            pos += n as u64;
        }
        rfs::fdatasync(&fd)?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = rfs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    Ok(Some(Built {
        tmp,
        segment: Segment {
            bytes: out.len() as u64,
            last_batch: batch,
            first_time: oldest,
            state_bytes,
        },
        locs,
        kept,
        dropped,
        note,
    }))
}
