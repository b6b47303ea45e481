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

use std::ffi::OsStr;

use crate::persist::storage::{self, Dir, Rename};

use super::frame;
use super::record::{ContentRec, Header, MetaRec, NodeRec, NodeRecKind, OpRec, SegmentInfo};
use super::retention::cutoff_text;
use super::row::{Actor, Op, Row};
use super::segment;
use super::startup::Reading;
use super::state::{Loc, Segment, State};
use super::view::VKind;
use super::writer::Core;
use super::Keep;
use crate::digest::Sha;
use crate::path::MemPath;

/// Contents per frame of a compacted segment.
const FRAME_CONTENTS: u64 = 8 << 20;

fn row_bytes(r: &Row) -> u64 {
    serde_json::to_vec(r).map_or(256, |v| v.len() as u64)
}

/// One compaction, on the background pool, when the journal asked (see
/// `retention::due`) and is not stopping; the shutdown waits for one that
/// runs (`journal::writer::Core::compacting`).
pub(super) fn run_once(sh: &Core) {
    let _one = sh.upkeep.compacting.lock();
    {
        let mut c = sh.upkeep.compact.lock();
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
    sh.upkeep.compact.lock().last = Some(std::time::Instant::now());
}

/// Compacts what `keep` allows; says what it dropped (`None`: nothing to do).
pub(super) fn compact(sh: &Core, keep: Keep) -> io::Result<Option<String>> {
    let _alone = sh.rewrite();
    close_the_open_segment(sh, true);
    compact_closed(sh, keep)
}

/// [`compact`] at shutdown: the checkpointer has made its last pass, so
/// the open segment is closed without waiting for it.
pub(super) fn compact_at_stop(sh: &Core, keep: Keep) -> io::Result<Option<String>> {
    let _alone = sh.rewrite();
    close_the_open_segment(sh, false);
    compact_closed(sh, keep)
}

/// Compacts the closed segments the plain files hold all of: chosen under
/// the state's lock ([`choose`]), built without it, checked again and
/// installed ([`install`]) under one more hold.
fn compact_closed(sh: &Core, keep: Keep) -> io::Result<Option<String>> {
    let Some(chosen) = choose(sh) else {
        return Ok(None);
    };
    let range = &chosen.range;
    tracing::debug!("compacting segments {range:?}");
    let outcome = build(sh, keep, &chosen);
    // Held here in tests, for a frame to name a content meanwhile.
    fail::fail_point!("journal::compact-built");
    // The contents named meanwhile are taken, checked and the compaction
    // installed under one hold of the state's lock: a frame names a content
    // before (and this gives way) or after (and finds it gone, and carries it).
    // Not while a batch is in flight (its view may still be given back).
    let mut st = sh.settled_state();
    let named = st.named_meanwhile.take().unwrap_or_default();
    let Some(built) = outcome? else {
        return Ok(None);
    };
    // A path the checkpoint got stuck on since: its content stays too.
    let stuck_now = stuck_contents(&st, &sh.handoff.stuck.lock());
    if built
        .dropped
        .iter()
        .any(|s| named.contains(s) || stuck_now.contains(s))
    {
        tracing::debug!("a compaction gave way to a frame that names what it would drop");
        // A new frame named a content this would drop: another time.
        let _ = sh.dir.unlink(OsStr::new(&built.tmp), false);
        return Ok(None);
    }
    install(sh, &mut st, range, &built)?;
    tracing::info!("history: {}", built.note);
    Ok(Some(built.note))
}

/// What a compaction covers, chosen under the journal state's lock.
struct Chosen {
    range: Vec<u64>,
    limits: HashMap<u64, u64>,
    /// The segments after it, with their sizes.
    later: Vec<(u64, u64)>,
    origin: String,
    prune_id: u64,
    /// The contents of paths the plain files are stuck behind on: kept.
    stuck: HashSet<Sha>,
}

/// Which segments: from the first, those the plain files hold all of
/// (the active one closed when it is among them); `None` when none is.
/// From here the state notes the contents frames name meanwhile.
fn choose(sh: &Core) -> Option<Chosen> {
    let mut st = sh.settled_state();
    let checkpoint = st.log.checkpoint_written;
    let active = st.log.active;
    let active_done = !active.fresh
        && st
            .log
            .segments
            .get(&active.number)
            .is_some_and(|s| s.last_batch <= checkpoint && s.bytes > 0);
    let mut range = Vec::new();
    for (&n, seg) in &st.log.segments {
        let sealed = n != active.number || active_done;
        if !sealed || seg.last_batch > checkpoint {
            break;
        }
        range.push(n);
    }
    if range.is_empty() {
        tracing::debug!("nothing to compact yet (checkpoint {checkpoint})");
        return None;
    }
    if range.contains(&active.number) {
        // Closed: the next frame begins a new segment.
        st.log.active = active.next();
    }
    let limits: HashMap<u64, u64> = range
        .iter()
        .map(|n| (*n, st.log.segments[n].bytes))
        .collect();
    let later: Vec<(u64, u64)> = st
        .log
        .segments
        .iter()
        .filter(|(n, _)| !range.contains(n))
        .map(|(n, s)| (*n, s.bytes))
        .collect();
    st.named_meanwhile = Some(HashSet::new());
    let prune_id = st.ids.next_version;
    st.ids.next_version += 1;
    let stuck = stuck_contents(&st, &st.log.stuck_written)
        .into_iter()
        .chain(stuck_contents(&st, &sh.handoff.stuck.lock()))
        .collect::<HashSet<Sha>>();
    let origin = st.origin.clone();
    Some(Chosen {
        range,
        limits,
        later,
        origin,
        prune_id,
        stuck,
    })
}

/// Puts the compacted segment in the place of `range`'s first (one
/// rename, then the directory flushed), removes the others, and brings the
/// state's segments, contents and view along.
fn install(sh: &Core, st: &mut State, range: &[u64], built: &Built) -> io::Result<()> {
    let first = range[0];
    let name = segment::name(first);
    let tmp = OsStr::new(&built.tmp);
    sh.dir
        .rename(tmp, sh.dir.as_ref(), OsStr::new(&name), Rename::Replace)?;
    sh.dir.sync()?;
    for n in &range[1..] {
        let _ = sh.dir.unlink(OsStr::new(&segment::name(*n)), false);
    }
    for n in range {
        st.log.segments.remove(n);
    }
    st.log.segments.insert(first, built.segment.clone());
    st.contents.retain(|_, l| !range.contains(&l.segment));
    for (sha, loc) in &built.locs {
        st.contents.insert(*sha, *loc);
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
    Ok(())
}

/// The segment appends go to holds history too, and is always ahead of
/// the checkpoint: it is closed (the next frame begins a new one), and the
/// checkpoint given a moment to pass it (when `wait`), so that it can be
/// compacted.
fn close_the_open_segment(sh: &Core, wait: bool) {
    let wanted = {
        let mut st = sh.state.lock();
        let active = st.log.active;
        let Some(seg) = st.log.segments.get(&active.number) else {
            return;
        };
        if active.fresh || seg.bytes == 0 || seg.last_batch <= st.log.checkpoint_written {
            return;
        }
        let wanted = seg.last_batch;
        st.log.active = active.next();
        wanted
    };
    if !wait {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    // (Not past a stop: the journal is shutting down.)
    while sh.state.lock().log.checkpoint_written < wanted
        && Instant::now() < deadline
        && !sh.upkeep.compact.lock().stop
    {
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Built {
    tmp: String,
    segment: Segment,
    locs: Vec<Placed>,
    kept: HashSet<Sha>,
    dropped: HashSet<Sha>,
    note: String,
}

/// The contents of the files at or below the paths `stuck` (which the
/// plain files do not hold, so the journal must).
fn stuck_contents(st: &super::state::State, stuck: &[String]) -> HashSet<Sha> {
    let mut out = HashSet::new();
    for p in stuck.iter().filter_map(|p| MemPath::parse(p).ok()) {
        let key = super::view::key(&p);
        let below = format!("{key}\0");
        for (k, n) in st.view.iter() {
            if p.is_root() || k == key || k.starts_with(&below) {
                out.extend(n.file().map(|f| f.0));
            }
        }
    }
    out
}

/// Reads the segments in the range `place` chose, decides which rows and contents stay
/// (see the module's text), and writes the compacted segment under a
/// temporary name; `None` when nothing would change.
fn build(sh: &Core, keep: Keep, place: &Chosen) -> io::Result<Option<Built>> {
    let (range, limits, later) = (&place.range[..], &place.limits, &place.later[..]);
    let (origin, prune_id, stuck) = (&place.origin[..], place.prune_id, &place.stuck);
    let dir = &sh.dir;
    let (reading, rows) = read_range(dir, range, limits, origin)?;
    let batch = reading.state.next_batch.saturating_sub(1);
    let view = &reading.state.view;
    let contents = &reading.state.contents;
    let (mut must_keep, later_bytes) = needed_later(dir, later)?;
    must_keep.extend(stuck.iter().copied());
    // Which rows stay.
    let current: HashSet<u64> = view
        .iter()
        .filter_map(|(_, n)| n.file().map(|f| f.2))
        .filter(|v| *v > 0)
        .collect();
    let mut slots: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    let by_age = drop_older(&mut slots, &current, &cutoff_text(keep.age));
    let by_size = drop_to_size(&mut slots, &current, contents, keep.bytes, later_bytes);
    let dropped_total = by_age + by_size;
    if dropped_total == 0 && range.len() == 1 {
        return Ok(None); // nothing would change
    }
    let note = prune_note(by_age, by_size, keep);
    let mut kept_rows = upgraded(slots);
    if dropped_total > 0 {
        kept_rows.push(prune_row(prune_id, batch, &note));
    }
    let (keep_content, kept, dropped) = contents_kept(&kept_rows, &must_keep, contents);
    let first = range[0];
    let nodes = snapshot_nodes(view, &kept);
    let mut snapshot = snapshot_header(range, origin, batch, reading.state.follow, nodes);
    (snapshot.own, snapshot.own_since) = reading.state.own_record();
    snapshot.stuck = reading.stuck.clone();
    let mut out = frame::encode(&serde_json::to_vec(&snapshot).expect("serializes"), &[]);
    let state_bytes = out.len() as u64;
    let chunks = chunk_contents(&keep_content, contents);
    let (locs, oldest) = kept_frames(dir, first, &mut out, &chunks, kept_rows, contents)?;
    let tmp = format!("{}.new", segment::name(first));
    write_whole(dir, &tmp, &out)?;
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

/// The segments of `range` read as one journal (their state at the end),
/// and every row they hold, by id.
fn read_range(
    dir: &Dir,
    range: &[u64],
    limits: &HashMap<u64, u64>,
    origin: &str,
) -> io::Result<(Reading, Vec<Row>)> {
    let mut reading = Reading::new(origin.to_string());
    reading.rows = Some(Vec::new());
    for n in range {
        segment::read(dir, *n, limits.get(n).copied(), false, &mut |f| {
            reading.take(*n, f);
            Ok(())
        })?;
    }
    let mut rows = reading.rows.take().unwrap_or_default();
    rows.sort_by_key(Row::id);
    Ok((reading, rows))
}

/// What a compaction says it dropped, and why.
fn prune_note(by_age: usize, by_size: usize, keep: Keep) -> String {
    let dropped_total = by_age + by_size;
    let why = match (by_age > 0, by_size > 0) {
        (true, false) => format!("older than {}", humantime::format_duration(keep.age)),
        (false, _) if dropped_total == 0 => "none".to_string(),
        _ => format!("over {} of history", crate::units::human_bytes(keep.bytes)),
    };
    format!(
        "dropped {dropped_total} old version(s) ({why}); a file's current version keeps its row"
    )
}

/// Contents that stay: those a kept row names, and those later segments
/// need, in that order (each once); the same as a set; and those that go.
fn contents_kept(
    kept_rows: &[Row],
    must_keep: &HashSet<Sha>,
    contents: &HashMap<Sha, Loc>,
) -> (Vec<Sha>, HashSet<Sha>, HashSet<Sha>) {
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
    let dropped = contents
        .keys()
        .filter(|s| !kept.contains(s))
        .copied()
        .collect();
    (keep_content, kept, dropped)
}

/// A row's content, unless only the plain file holds it.
fn content_of(r: &Row) -> Option<Sha> {
    r.sha256
        .as_deref()
        .and_then(Sha::parse)
        .filter(|_| !r.pruned)
}

/// Contents later segments name without holding them (kept whatever the
/// policy says), and those segments' bytes.
fn needed_later(dir: &Dir, later: &[(u64, u64)]) -> io::Result<(HashSet<Sha>, u64)> {
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
    let must_keep = named_later.difference(&held_later).copied().collect();
    Ok((must_keep, later_bytes))
}

/// Drops a row (a current version's row stays, its content copy marked
/// pruned); counts it in `n` if anything went.
fn drop_row(slot: &mut Option<Row>, n: &mut usize, current: &HashSet<u64>) {
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
}

/// Drops every row older than `cutoff`; how many went.
fn drop_older(slots: &mut [Option<Row>], current: &HashSet<u64>, cutoff: &str) -> usize {
    let mut by_age = 0;
    for slot in slots.iter_mut() {
        if slot.as_ref().is_some_and(|r| r.time.as_str() < cutoff) {
            drop_row(slot, &mut by_age, current);
        }
    }
    by_age
}

/// When the history is over `limit` bytes (the rows, a current version's
/// row being state, not history, and each named content once, plus the
/// later segments), drops the oldest rows until it fits in half of it (so
/// the next batch does not compact again), measured as it goes; how many
/// went.
fn drop_to_size(
    slots: &mut [Option<Row>],
    current: &HashSet<u64>,
    contents: &HashMap<Sha, Loc>,
    limit: u64,
    later_bytes: u64,
) -> usize {
    // How many kept rows name each content, and the history's size.
    let mut refs: HashMap<Sha, usize> = HashMap::new();
    let mut total = later_bytes;
    for r in slots.iter().flatten() {
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
    let mut by_size = 0;
    if total <= limit {
        return 0;
    }
    for slot in slots.iter_mut() {
        if total <= limit / 2 {
            break;
        }
        let Some((id, bytes, content)) =
            slot.as_ref().map(|r| (r.id(), row_bytes(r), content_of(r)))
        else {
            continue;
        };
        drop_row(slot, &mut by_size, current);
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
    by_size
}

/// The rows that stay. Rows written before the markers were fields say
/// them in their notes: the compacted segment holds them as fields (the
/// format upgraded in place, as each old segment is compacted).
fn upgraded(slots: Vec<Option<Row>>) -> Vec<Row> {
    slots
        .into_iter()
        .flatten()
        .map(|mut r| {
            r.exchanged = r.is_exchanged();
            r.before_history = r.is_before_history();
            r
        })
        .collect()
}

/// The row that says what a compaction dropped.
fn prune_row(id: u64, batch: u64, note: &str) -> Row {
    Row {
        note: Some(note.to_string()),
        ..Row::new(
            id,
            &super::now_text(),
            Actor::memfs(),
            Op::Prune,
            MemPath::root().to_string(),
            batch,
        )
    }
}

/// The compacted segment's first frame: which segments it stands for,
/// and the state after their last batch.
fn snapshot_header(
    range: &[u64],
    origin: &str,
    batch: u64,
    follow: u64,
    nodes: Vec<NodeRec>,
) -> Header {
    Header {
        segment: Some(SegmentInfo {
            number: range[0],
            origin: origin.to_string(),
            covers: range.last().copied(),
            prev: None,
        }),
        batch: Some(batch),
        time: Some(super::now_text()),
        checkpoint: Some(batch),
        follow: (follow > 0).then_some(follow),
        snapshot: Some(nodes),
        ..Header::default()
    }
}

/// The snapshot: the state after the last compacted batch (a file whose
/// content is not kept is read from its plain file).
fn snapshot_nodes(view: &super::view::View, kept: &HashSet<Sha>) -> Vec<NodeRec> {
    view.iter()
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
        .collect()
}

/// A kept content and where the compacted segment holds it.
type Placed = (Sha, Loc);

/// The kept contents in groups of a few MiB, one group a frame.
fn chunk_contents(keep_content: &[Sha], contents: &HashMap<Sha, Loc>) -> Vec<Vec<Sha>> {
    let mut chunks = vec![Vec::new()];
    let mut bytes = 0;
    for sha in keep_content {
        let len = contents[sha].len;
        if bytes + len > FRAME_CONTENTS && !chunks.last().expect("one").is_empty() {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += len;
        chunks.last_mut().expect("one").push(*sha);
    }
    chunks
}

/// After the snapshot in `out`: the kept rows with their contents, a
/// frame per chunk, each row in the frame of its content (or the last
/// one). Returns where each content now is, and the oldest row's time.
fn kept_frames(
    dir: &Dir,
    first: u64,
    out: &mut Vec<u8>,
    chunks: &[Vec<Sha>],
    kept_rows: Vec<Row>,
    contents: &HashMap<Sha, Loc>,
) -> io::Result<(Vec<Placed>, Option<String>)> {
    let chunk_of: HashMap<Sha, usize> = chunks
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter().map(move |s| (*s, i)))
        .collect();
    let mut by_chunk: BTreeMap<usize, Vec<Row>> = BTreeMap::new();
    for r in kept_rows {
        let i = content_of(&r)
            .and_then(|s| chunk_of.get(&s).copied())
            .unwrap_or(chunks.len() - 1);
        by_chunk.entry(i).or_default().push(r);
    }
    let mut locs = Vec::new();
    let mut oldest: Option<String> = None;
    for (i, chunk) in chunks.iter().enumerate() {
        let (body, recs) = read_contents(dir, chunk, contents)?;
        let rows = by_chunk.remove(&i).unwrap_or_default();
        if rows.is_empty() && recs.is_empty() {
            continue;
        }
        for r in &rows {
            if oldest.as_ref().is_none_or(|o| r.time < *o) {
                oldest = Some(r.time.clone());
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
                let loc = Loc {
                    segment: first,
                    at: body_at + c.at,
                    len: c.len,
                };
                locs.push((sha, loc));
            }
        }
        out.extend(frame::encode(&head, &[&body]));
    }
    Ok((locs, oldest))
}

/// The bytes of `chunk`'s contents, one after another, and where each is.
fn read_contents(
    dir: &Dir,
    chunk: &[Sha],
    contents: &HashMap<Sha, Loc>,
) -> io::Result<(Vec<u8>, Vec<ContentRec>)> {
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
    Ok((body, recs))
}

/// Writes `out` to `tmp` in `dir` and flushes it; on failure, nothing of
/// it stays.
fn write_whole(dir: &Dir, tmp: &str, out: &[u8]) -> io::Result<()> {
    storage::write_whole(dir.as_ref(), tmp, out)
}
