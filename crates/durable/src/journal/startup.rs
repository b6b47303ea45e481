//! Start-up: reading the journal back, and squaring the plain files with it
//! before anything is served.
//!
//! The journal is the truth for every path a batch after the last
//! checkpoint touched (the tail): those paths are made on disk, and in the
//! tree loaded from it, what the journal says, whatever a crash left there
//! (the checkpoint of those batches may have been cut off anywhere). Any
//! other path where the files and the journal disagree was changed while no
//! memfs ran: the files win, and the journal records it (a `found` version
//! for a file). So after any crash the history holds one version for each
//! change the files show, and none for a change they do not.

use crate::persist::storage::{Dir, Open};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use super::record::{op_rec, ChangeRec, Header, NodeRec, NodeRecKind, OpRec};
use super::row::{Actor, Op, Row, VersionId, BEFORE_HISTORY_NOTE};
use super::segment::{self, Frame};
use super::state::{Active, Loc, Log, State};
use super::versions::{self, Ids, Needed};
use super::view::{self, VKind, VNode, View};
use crate::digest::Sha;
use crate::path::MemPath;
use crate::store::{ChangeOp, Meta, NodeKind, Tree, ROOT_INO};

/// What the batches after the checkpoint touched: paths, and whole
/// subtrees (as view keys, so that a check reads a path once).
#[derive(Debug, Default)]
pub struct Tail {
    exact: HashSet<String>,
    subtrees: HashSet<String>,
}

impl Tail {
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.subtrees.is_empty()
    }

    /// Whether the journal decides what the node at view key `k` is.
    pub fn covers_key(&self, k: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        if self.exact.contains(k) || self.subtrees.contains(k) {
            return true;
        }
        k.match_indices('\0')
            .any(|(i, _)| self.subtrees.contains(&k[..i]))
    }

    /// The journal decides `path`, all below it and what holds it (a path
    /// the checkpoint got stuck on).
    pub fn decide(&mut self, path: &MemPath) {
        let k = view::key(path);
        for (i, _) in k.match_indices('\0') {
            self.exact.insert(k[..i].to_string());
        }
        self.subtrees.insert(k);
    }

    fn touch(&mut self, op: &ChangeOp) {
        let above = |tail: &mut Tail, p: &MemPath| {
            let k = view::key(p);
            for (i, _) in k.match_indices('\0') {
                tail.exact.insert(k[..i].to_string());
            }
        };
        match op {
            ChangeOp::Write { path, .. }
            | ChangeOp::MakeDir { path, .. }
            | ChangeOp::Symlink { path, .. } => {
                above(self, path);
                self.subtrees.insert(view::key(path));
            }
            ChangeOp::Remove { path } => {
                self.subtrees.insert(view::key(path));
            }
            ChangeOp::Rename { from, to, .. } => {
                above(self, to);
                self.subtrees.insert(view::key(from));
                self.subtrees.insert(view::key(to));
            }
            ChangeOp::Exchange { a, b } => {
                self.subtrees.insert(view::key(a));
                self.subtrees.insert(view::key(b));
            }
            ChangeOp::SetMeta { path, .. } | ChangeOp::SetTimes { path, .. } => {
                self.exact.insert(view::key(path));
            }
        }
    }
}

/// The journal as read back.
pub struct Loaded {
    /// (Its `checkpoint_written`: the plain files were current, and
    /// durable, through that batch.)
    pub state: State,
    pub tail: Tail,
    /// How many batches the tail holds.
    pub tail_batches: usize,
}

fn empty_state(origin: String) -> State {
    State {
        view: View::default(),
        contents: HashMap::new(),
        ids: Ids {
            next_version: 1,
            next_change: 1,
        },
        next_batch: 1,
        origin,
        log: Log {
            segments: BTreeMap::new(),
            active: Active {
                number: 1,
                end: 0,
                reserved: 0,
                fresh: true,
                seal_at: None,
                prev: None,
            },
            checkpoint_written: 0,
            deferred: None,
            stuck_written: Vec::new(),
            recent: Default::default(),
        },
        follow: 0,
        own: Default::default(),
        own_since: None,
        named_meanwhile: None,
        in_flight: None,
    }
}

/// A new journal's state (nothing on disk yet: its first frame begins it).
pub fn new_state() -> State {
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is a live, writable buffer of exactly the length
    // passed; getrandom(2) writes at most that many bytes into it and keeps
    // no pointer to it after it returns.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        // No randomness to be had: the time and the pid still tell journals apart.
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        bytes = (now ^ u64::from(std::process::id()).rotate_left(40)).to_le_bytes();
    }
    let origin: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    empty_state(origin)
}

/// A journal being read back, frame by frame: the state it builds, the
/// last checkpoint seen, and the batches read after it with what they
/// touched; with `rows`, every row too (compaction).
pub(super) struct Reading {
    pub state: State,
    pub checkpoint: u64,
    /// The stuck paths of the last checkpoint read.
    pub stuck: Vec<String>,
    pub pending: Vec<(u64, Vec<ChangeOp>)>,
    pub rows: Option<Vec<Row>>,
}

impl Reading {
    pub fn new(origin: String) -> Reading {
        Reading {
            state: empty_state(origin),
            checkpoint: 0,
            stuck: Vec::new(),
            pending: Vec::new(),
            rows: None,
        }
    }

    /// Folds one frame into the reading state, in a fixed order: contents,
    /// snapshot, batch, changes, kept rows, then pending batches and the
    /// checkpoint.
    pub fn take(&mut self, number: u64, frame: Frame) {
        let st = &mut self.state;
        let h = frame.header;
        if let Some(info) = &h.segment {
            if st.origin.is_empty() {
                st.origin = info.origin.clone();
            }
        }
        for c in &h.contents {
            if let Some(sha) = Sha::parse(&c.sha256) {
                let at = frame.body_at + c.at;
                let loc = Loc {
                    segment: number,
                    at,
                    len: c.len,
                };
                st.contents.insert(sha, loc);
            }
        }
        if let Some(nodes) = &h.snapshot {
            st.view.reset(nodes.iter().filter_map(snapshot_node));
        }
        take_batch(st, number, &h);
        let touched = take_changes(st, &h.changes);
        for row in &h.kept {
            st.ids.next_version = st.ids.next_version.max(row.id() + 1);
        }
        if let Some(rows) = &mut self.rows {
            rows.extend(h.kept.iter().cloned());
            rows.extend(h.changes.iter().flat_map(|c| c.rows.iter().cloned()));
        }
        let batch = h.batch.unwrap_or(0);
        if !touched.is_empty() {
            self.pending.push((batch, touched));
        }
        if h.checkpoint.is_some() || h.snapshot.is_some() {
            self.stuck = h.stuck.clone();
        }
        if let Some(c) = h.checkpoint {
            self.checkpoint = self.checkpoint.max(c);
            let c = self.checkpoint;
            self.pending.retain(|(b, _)| *b > c);
        }
        if h.snapshot.is_some() {
            // Everything before a snapshot was checkpointed.
            self.pending.clear();
            self.checkpoint = self.checkpoint.max(batch);
        }
    }
}

/// A snapshot's node as the view holds it (`None` for one it cannot read).
fn snapshot_node(n: &NodeRec) -> Option<(MemPath, VNode)> {
    let path = MemPath::parse(&n.path).ok()?;
    let kind = match &n.kind {
        NodeRecKind::File {
            sha256,
            size,
            version,
            in_file,
        } => VKind::File {
            sha: Sha::parse(sha256)?,
            size: *size,
            version: *version,
            in_file: *in_file,
        },
        NodeRecKind::Dir => VKind::Dir,
        NodeRecKind::Symlink { target } => VKind::Symlink(target.clone()),
    };
    let meta = (&n.meta).into();
    Some((path, VNode { kind, meta }))
}

/// What a frame says of the shared store it follows, of this host's own
/// batches there, and of its batch (in segment `number`).
fn take_batch(st: &mut State, number: u64, h: &Header) {
    if let Some(f) = h.follow {
        st.follow = st.follow.max(f);
    }
    if h.own_since.is_some() {
        st.own_since = h.own_since;
    }
    st.hold_own(h.own.iter().copied());
    if let Some(b) = h.batch {
        st.next_batch = st.next_batch.max(b + 1);
        let seg = st.log.segments.entry(number).or_default();
        seg.last_batch = seg.last_batch.max(b);
        if seg.first_time.is_none() {
            seg.first_time = h.time.clone();
        }
    }
}

/// A frame's changes applied to the view, their ids taken; the ops they
/// make, for the replay.
fn take_changes(st: &mut State, changes: &[ChangeRec]) -> Vec<ChangeOp> {
    let mut touched = Vec::new();
    for rec in changes {
        st.ids.next_change = st.ids.next_change.max(rec.change + 1);
        for op in &rec.ops {
            let Some(cop) = op.to_op(Arc::default) else {
                continue;
            };
            let write = match op {
                OpRec::Write { sha256, size, .. } => Sha::parse(sha256).map(|s| (s, *size)),
                _ => None,
            };
            st.view.apply(&cop, write, None);
            if let (OpRec::Write { in_file: true, .. }, ChangeOp::Write { path, .. }) = (op, &cop) {
                st.view.mark_in_file(path);
            }
            touched.push(cop);
        }
        for row in &rec.rows {
            st.ids.next_version = st.ids.next_version.max(row.id() + 1);
        }
        let contents = &st.contents;
        versions::settle_read(&mut st.view, &rec.rows, &|s| contents.contains_key(s));
    }
    touched
}

/// Reads the journal in `dir`; `None` when there is none. Damage anywhere
/// but a torn tail is an error. With `write`, a torn tail is cut off and
/// what compaction left behind is removed (the owner's start).
pub fn read(dir: &Dir, write: bool) -> io::Result<Option<Loaded>> {
    let numbers = segment::list(dir)?;
    if numbers.is_empty() {
        return Ok(None);
    }
    let chosen = choose_live(dir, &numbers)?;
    let mut reading = Reading::new(String::new());
    let mut last_end = None;
    for (i, &n) in chosen.live.iter().enumerate() {
        let last = i + 1 == chosen.live.len();
        let limit = chosen.limits.get(&n).copied();
        let ending = segment::read(dir, n, limit, last, &mut |frame| {
            reading.take(n, frame);
            Ok(())
        })?;
        reading.state.log.segments.entry(n).or_default().bytes = ending.end;
        if last {
            last_end = Some((n, ending));
        }
    }
    let mut state = std::mem::replace(&mut reading.state, empty_state(String::new()));
    state.log.checkpoint_written = reading.checkpoint;
    state.log.stuck_written = reading.stuck.clone();
    match last_end {
        Some((n, ending)) => set_active(dir, &mut state, n, ending, write),
        None => state.log.active.number = numbers.last().copied().unwrap_or(0) + 1,
    }
    if state.origin.is_empty() {
        state.origin = new_state().origin;
    }
    if write {
        for n in chosen.dead {
            let _ = dir.unlink(std::ffi::OsStr::new(&segment::name(n)), false);
        }
    }
    let (tail, tail_batches) = tail_of(&reading);
    Ok(Some(Loaded {
        state,
        tail,
        tail_batches,
    }))
}

/// The segments a journal is read from, and what else is in its dir.
struct Live {
    /// In order, each read up to its seal (`limits`) if a later one
    /// sealed it.
    live: Vec<u64>,
    limits: HashMap<u64, u64>,
    /// Covered by a compacted segment, or begun and never made durable.
    dead: Vec<u64>,
}

/// Which of `numbers` hold the journal: a compacted segment stands for the
/// ones it covers; segments at the end whose first frame never became
/// durable are not begun.
fn choose_live(dir: &Dir, numbers: &[u64]) -> io::Result<Live> {
    let mut infos = BTreeMap::new();
    for &n in numbers {
        let info = segment::first_header(dir, n)?.and_then(|h: Header| h.segment);
        infos.insert(n, info);
    }
    let mut superseded = BTreeSet::new();
    for (&n, info) in &infos {
        if let Some(last) = info.as_ref().and_then(|i| i.covers) {
            superseded.extend(numbers.iter().copied().filter(|&m| m > n && m <= last));
        }
    }
    let mut live: Vec<u64> = numbers
        .iter()
        .copied()
        .filter(|n| !superseded.contains(n))
        .collect();
    let mut unbegun = Vec::new();
    while let Some(&n) = live.last() {
        if infos[&n].is_some() {
            break;
        }
        unbegun.push(n);
        live.pop();
    }
    let mut limits = HashMap::new();
    for n in &live {
        if let Some(Some(info)) = infos.get(n) {
            if let Some(seal) = info.prev {
                limits.insert(seal.segment, seal.end);
            }
        }
    }
    let dead = superseded.into_iter().chain(unbegun).collect();
    Ok(Live { live, limits, dead })
}

/// The last segment read is the active one; a torn tail is cut off (with
/// `write`), so nothing follows it, or, where that cannot be done, the
/// next frame begins a new segment.
fn set_active(dir: &Dir, state: &mut State, n: u64, ending: segment::Ending, write: bool) {
    state.log.active = Active {
        number: n,
        end: ending.end,
        reserved: 0,
        fresh: false,
        seal_at: None,
        prev: None,
    };
    if ending.longer {
        let cut = write && cut_tail(dir, n, ending.end).is_ok();
        if !cut {
            state.log.active.seal_at = Some(ending.end);
        }
    }
}

/// The paths the batches past the last checkpoint touched, and the paths
/// the plain files were left behind on (the journal decides them); how
/// many batches.
fn tail_of(reading: &Reading) -> (Tail, usize) {
    let mut tail = Tail::default();
    for (_, ops) in &reading.pending {
        for op in ops {
            tail.touch(op);
        }
    }
    for p in reading.stuck.iter().filter_map(|p| MemPath::parse(p).ok()) {
        tail.decide(&p);
    }
    (tail, reading.pending.len())
}

fn cut_tail(dir: &Dir, number: u64, end: u64) -> io::Result<()> {
    let fd = dir.open_file(std::ffi::OsStr::new(&segment::name(number)), Open::Write)?;
    fd.set_len(end)?;
    fd.sync_data()
}

/// A node of the plain files, as loaded.
enum Disk {
    File(Sha, Arc<Vec<u8>>),
    Dir,
    Symlink(String),
}

struct DiskNode {
    kind: Disk,
    meta: Meta,
}

/// What squaring the files with the journal did, and the records it makes.
pub struct Squared {
    /// Ops that made the plain files (and the tree) what the journal says.
    pub replayed: Vec<ChangeOp>,
    /// memfs' own change recording what was found changed on disk.
    pub found: Option<ChangeRec>,
    pub found_files: usize,
    /// New contents the found change needs kept.
    pub needed: Vec<Needed>,
}

fn same_owner_and_mode(a: &Meta, b: &Meta) -> bool {
    a.perm == b.perm && a.uid == b.uid && a.gid == b.gid
}

/// Every node of `tree` but the root, by view key (no recursion, one
/// allocation a node however deep).
fn disk_nodes(tree: &Tree) -> BTreeMap<String, DiskNode> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(String::new(), ROOT_INO)];
    while let Some((k, ino)) = stack.pop() {
        let node = tree.node(ino);
        let kind = match &node.kind {
            NodeKind::File(data) => Disk::File(Sha::of(data), data.clone()),
            NodeKind::Dir(entries) => {
                for (name, child) in entries {
                    let child_key = match k.is_empty() {
                        true => name.clone(),
                        false => format!("{k}\0{name}"),
                    };
                    stack.push((child_key, *child));
                }
                Disk::Dir
            }
            NodeKind::Symlink(target) => Disk::Symlink(target.clone()),
            NodeKind::Special { .. } => continue,
        };
        if !k.is_empty() {
            out.insert(
                k,
                DiskNode {
                    kind,
                    meta: Meta::from(&node.attr),
                },
            );
        }
    }
    out
}

/// The ops that make the plain files `tree` (as loaded) hold what the
/// journal's view in `state` says at and below each of `paths` (a path the
/// checkpoint got stuck on: see `stuck::Stuck`). A content the journal
/// no longer holds is taken from wherever the plain files hold it.
pub fn repair_ops(
    state: &State,
    paths: &[MemPath],
    tree: &Tree,
    content: &dyn Fn(&State, &Sha) -> Option<Vec<u8>>,
) -> Vec<ChangeOp> {
    let mut tail = Tail::default();
    for p in paths {
        tail.decide(p);
    }
    let disk = disk_nodes(tree);
    let mut keys: BTreeSet<String> = disk.keys().cloned().collect();
    keys.extend(state.view.iter().map(|(k, _)| k.to_string()));
    replay_tail(state, &tail, &disk, &keys, content)
}

/// Squares `tree` (the plain files as loaded) with the journal's view in
/// `state`; see the module's text. `first`: the journal begins now (the
/// files found are recorded without copying their contents). `content`
/// reads a content the journal holds.
pub fn square(
    state: &mut State,
    tail: &Tail,
    first: bool,
    tree: &Tree,
    content: &dyn Fn(&State, &Sha) -> Option<Vec<u8>>,
    time: &str,
    batch: u64,
) -> Squared {
    let disk = disk_nodes(tree);
    let mut keys: BTreeSet<String> = disk.keys().cloned().collect();
    keys.extend(state.view.iter().map(|(k, _)| k.to_string()));
    let replayed = replay_tail(state, tail, &disk, &keys, content);

    // Everything else: the files win, and the journal records what it found.
    let mut finder = Finder {
        state,
        filled: filled_dirs(&disk),
        rows: Vec::new(),
        ops: Vec::new(),
        needed: Vec::new(),
        gone: Vec::new(),
        ids: state.ids,
        change: state.ids.next_change,
        time,
        first,
        batch,
    };
    for k in keys.iter().filter(|k| !tail.covers_key(k)) {
        finder.find(k, disk.get(k.as_str()));
    }
    let Finder {
        rows,
        ops,
        needed,
        mut ids,
        change,
        ..
    } = finder;
    let found_files = rows.len();
    let found = if ops.is_empty() && rows.is_empty() {
        None
    } else {
        ids.next_change += 1;
        Some(found_change(state, ops, rows, change, first))
    };
    state.ids = ids;
    Squared {
        replayed,
        found,
        found_files,
        needed,
    }
}

/// Directories on disk with something below them (made with it).
fn filled_dirs(disk: &BTreeMap<String, DiskNode>) -> HashSet<String> {
    disk.keys()
        .filter_map(|k| k.rfind('\0').map(|i| k[..i].to_string()))
        .collect()
}

/// The tail's keys: the journal decides. The ops that make the plain files
/// what the view says, removals first.
fn replay_tail(
    state: &State,
    tail: &Tail,
    disk: &BTreeMap<String, DiskNode>,
    keys: &BTreeSet<String>,
    content: &dyn Fn(&State, &Sha) -> Option<Vec<u8>>,
) -> Vec<ChangeOp> {
    let mut by_sha: HashMap<Sha, Arc<Vec<u8>>> = HashMap::new();
    for node in disk.values() {
        if let Disk::File(sha, data) = &node.kind {
            by_sha.insert(*sha, data.clone());
        }
    }
    let bytes = |sha: &Sha| {
        by_sha
            .get(sha)
            .cloned()
            .or_else(|| content(state, sha).map(Arc::new))
    };
    let mut removals: Vec<ChangeOp> = Vec::new();
    let mut makes: Vec<ChangeOp> = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    let mut remove = |k: &str| {
        if removed.iter().any(|r| view::within(k, r)) {
            return;
        }
        removed.push(k.to_string());
        removals.push(ChangeOp::Remove {
            path: view::path(k),
        });
    };
    for k in keys.iter().filter(|k| tail.covers_key(k)) {
        let have = disk.get(k.as_str());
        let Some(want) = state.view.get_key(k) else {
            if have.is_some() {
                remove(k);
            }
            continue;
        };
        let (replace, op) = make(view::path(k), want, have, &bytes);
        if replace {
            remove(k);
        }
        makes.extend(op);
    }
    removals.extend(makes);
    removals
}

/// What makes the plain files' node at `p` (`have`) what the view wants:
/// whether what is there goes first, and the op that makes it (none when
/// it is so already, or when no content for it is found).
fn make(
    p: MemPath,
    want: &VNode,
    have: Option<&DiskNode>,
    bytes: &dyn Fn(&Sha) -> Option<Arc<Vec<u8>>>,
) -> (bool, Option<ChangeOp>) {
    let meta = want.meta;
    let set_meta = |h: &DiskNode| {
        (!same_owner_and_mode(&meta, &h.meta)).then(|| ChangeOp::SetMeta {
            path: p.clone(),
            meta,
        })
    };
    let there = have.is_some();
    match (&want.kind, have) {
        (VKind::File { sha, .. }, Some(h)) if matches!(&h.kind, Disk::File(s, _) if s == sha) => {
            (false, set_meta(h))
        }
        (VKind::File { sha, .. }, _) => match bytes(sha) {
            Some(data) => (
                there,
                Some(ChangeOp::Write {
                    path: p,
                    data,
                    meta,
                }),
            ),
            None => {
                tracing::error!(
                    "the journal names content {sha} for {p}, and neither the journal nor the plain files hold it; it is left as the plain files have it"
                );
                (false, None)
            }
        },
        (VKind::Dir, Some(h)) if matches!(h.kind, Disk::Dir) => (false, set_meta(h)),
        (VKind::Dir, _) => (there, Some(ChangeOp::MakeDir { path: p, meta })),
        (VKind::Symlink(t), Some(h)) if matches!(&h.kind, Disk::Symlink(u) if u == t) => {
            (false, None)
        }
        (VKind::Symlink(t), _) => {
            let target = t.clone();
            (
                there,
                Some(ChangeOp::Symlink {
                    path: p,
                    target,
                    meta,
                }),
            )
        }
    }
}

/// What start-up found changed in the plain files outside the tail: the
/// files win, and each difference becomes an op and a `found` row of one
/// change of memfs'.
struct Finder<'a> {
    state: &'a State,
    filled: HashSet<String>,
    rows: Vec<Row>,
    ops: Vec<ChangeOp>,
    needed: Vec<Needed>,
    /// Keys removed whole: nothing below them is looked at again.
    gone: Vec<String>,
    ids: Ids,
    change: u64,
    time: &'a str,
    first: bool,
    batch: u64,
}

impl Finder<'_> {
    fn found_row(&mut self, path: &MemPath, sha: Option<(Sha, u64)>, replaces: Option<u64>) {
        let id = self.ids.next_version;
        self.ids.next_version += 1;
        let captured = self.first && sha.is_some();
        self.rows.push(Row {
            sha256: sha.map(|s| s.0.hex()),
            size: sha.map(|s| s.1),
            replaces: replaces.filter(|v| *v > 0).map(VersionId),
            pruned: captured,
            note: captured.then(|| BEFORE_HISTORY_NOTE.to_string()),
            before_history: captured,
            change: Some(self.change),
            ..Row::new(
                id,
                self.time,
                Actor::memfs(),
                Op::Found,
                path.to_string(),
                self.batch,
            )
        });
    }

    /// Every file the view holds at or below `k`, recorded as gone.
    fn files_gone(&mut self, k: &str) {
        for (f, _, _, v, _) in self.state.view.files_under(&view::path(k)) {
            self.found_row(&f, None, Some(v));
        }
    }

    /// `k` removed whole (the view had a directory or a node the disk
    /// does not).
    fn remove_whole(&mut self, k: &str) {
        self.files_gone(k);
        self.ops.push(ChangeOp::Remove {
            path: view::path(k),
        });
        self.gone.push(k.to_string());
    }

    /// The difference at one key, if any.
    ///
    /// Long because it is one match over what the disk has against what
    /// the view had at the key, every pair of node kinds, each arm making
    /// its op and its rows.
    fn find(&mut self, k: &str, have: Option<&DiskNode>) {
        if self.gone.iter().any(|g| view::within(k, g)) {
            return;
        }
        let want = self.state.view.get_key(k).cloned();
        let was_file = want.as_ref().and_then(|w| w.file()).map(|f| f.2);
        let w = want.as_ref().map(|w| &w.kind);
        match have.map(|h| (&h.kind, h.meta)) {
            None if want.is_some() => self.remove_whole(k),
            None => {}
            Some((Disk::File(s, data), meta)) => {
                if matches!(w, Some(VKind::File { sha, .. }) if sha == s) {
                    if !same_owner_and_mode(&meta, &want.as_ref().expect("some").meta) {
                        self.ops.push(ChangeOp::SetMeta {
                            path: view::path(k),
                            meta,
                        });
                    }
                    return;
                }
                if matches!(w, Some(VKind::Dir)) {
                    self.remove_whole(k);
                }
                let path = view::path(k);
                self.found_row(&path, Some((*s, data.len() as u64)), was_file);
                if !self.first {
                    self.needed.push(Needed {
                        sha: *s,
                        data: data.clone(),
                    });
                }
                self.ops.push(ChangeOp::Write {
                    path,
                    data: data.clone(),
                    meta,
                });
            }
            // A directory: made with what is below it, or alone when
            // empty (its mode is the disk's; not compared, not a version).
            Some((Disk::Dir, meta)) => {
                if matches!(w, Some(VKind::Dir)) {
                    return;
                }
                if let Some(v) = was_file {
                    self.found_row(&view::path(k), None, Some(v));
                }
                if was_file.is_some() || !self.filled.contains(k) {
                    self.ops.push(ChangeOp::MakeDir {
                        path: view::path(k),
                        meta,
                    });
                }
            }
            Some((Disk::Symlink(t), meta)) => {
                if matches!(w, Some(VKind::Symlink(u)) if u == t) {
                    return;
                }
                if matches!(w, Some(VKind::Dir)) {
                    self.files_gone(k);
                    self.gone.push(k.to_string());
                }
                if let Some(v) = was_file {
                    self.found_row(&view::path(k), None, Some(v));
                }
                self.ops.push(ChangeOp::Symlink {
                    path: view::path(k),
                    target: t.clone(),
                    meta,
                });
            }
        }
    }
}

/// memfs' change recording what was found: the view takes the files' side
/// first (a content found when the journal begins stays in the file).
fn found_change(
    state: &mut State,
    ops: Vec<ChangeOp>,
    rows: Vec<Row>,
    change: u64,
    first: bool,
) -> ChangeRec {
    for op in &ops {
        let write = match op {
            ChangeOp::Write { data, .. } => Some((Sha::of(data), data.len() as u64)),
            _ => None,
        };
        state.view.apply(op, write, None);
        if let (true, ChangeOp::Write { path, .. }) = (first, op) {
            state.view.mark_in_file(path);
        }
    }
    let mut undo = Vec::new();
    versions::settle_versions(&mut state.view, &rows, &mut undo);
    let op_recs = ops
        .iter()
        .map(|op| {
            let sha = match op {
                ChangeOp::Write { data, .. } => Some(Sha::of(data).hex()),
                _ => None,
            };
            let mut rec = op_rec(op, sha.as_deref());
            if let OpRec::Write { in_file, .. } = &mut rec {
                *in_file = first;
            }
            rec
        })
        .collect();
    ChangeRec {
        change,
        ops: op_recs,
        rows,
    }
}
