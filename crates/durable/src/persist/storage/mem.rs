//! An in-memory disk that keeps what was written apart from what was made
//! durable, and can lose power at any step, for the power-loss tests.
//!
//! The model is of inodes, not paths: a handle names a node, and follows it
//! through renames (as a descriptor does). Each directory has its live
//! entries and its durable ones ([`StorageDir::sync`] makes the durable ones
//! the live ones); each file has its live data and its durable data
//! (`sync_data`, `sync_all`, `wait_write_back`, or `sync_child` on it, make
//! the durable data the live data); `sync_fs` makes everything durable. A
//! new name is only live until its directory is synced, a removed one stays
//! durable until then, and a rename between two directories needs both.
//!
//! A *step* is every mutating call (`write_at`, `set_len`, `reserve`,
//! `open_file` with [`Open::Truncate`] or [`Open::New`], `mkdir`,
//! `symlink`, `rename`, `unlink`, the `set_*` calls) and every sync call.
//! A step is counted when the call is made, before its arguments are
//! checked (so a call that fails with `EEXIST` is still a step).
//! [`MemDisk::cut_after`]`(n)` lets `n` more steps happen; the next step
//! attempted does not happen: the power goes there, and from then on every
//! call fails with `EIO`. [`MemDisk::restart`] brings back what survived:
//!
//! - from the root, through durable entries only, every directory reached
//!   gets its durable entries as its entries; a directory durably named
//!   twice (a rename between two directories of which only the target was
//!   synced) keeps only its first name, breadth first and by name; a file
//!   durably named twice keeps both names (a hard link);
//! - every file reached gets its durable data, and, when its live data is
//!   longer and begins with the durable data (an unsynced append), a torn
//!   part of the unsynced tail: a pseudo-random number of whole 4096-byte
//!   pages of it, counted from the durable end (from none to all of it; the
//!   last partial page only when all is kept), drawn from an xorshift64*
//!   generator seeded from the disk's seed and advanced once per such file,
//!   in inode order, so a run is reproducible;
//! - nothing else survives, and every handle from before fails with `EIO`.
//!
//! Simplifications: attributes (owner, mode, times) survive as they were
//! live, not as they were last synced; `reserve` allocates nothing (it only
//! checks the capacity); `start_write_back` does nothing; a directory's
//! size is 0 and a symlink's the length of its target; `.` and `..` are
//! names only for `open_dir` (`EINVAL` elsewhere); `set_mode` on a symlink
//! is `EOPNOTSUPP` (never followed); a file is at most 1 TiB (`EFBIG`).
//!
//! As on Linux: a file opened with [`Open::Read`] cannot be written
//! (`EBADF`, `EINVAL` for `set_len`) and one opened for writing cannot be
//! read (`EBADF`); an open file outlives its name, and a removed directory
//! still open takes no new names (`ENOENT`). The capacity counts the live
//! bytes of every file that is still named or open (a file kept only by
//! a durable name, removed and not yet synced, counts nothing). Nodes
//! that nothing names (live or durably) and no handle holds are dropped
//! from time to time, and at every restart.

use crate::lock::{rank, Mutex, MutexGuard};
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::SystemTime;

use super::{errno, Dir, File, Kind, Open, Rename, Stat, StorageDir, StorageFile};

/// The root directory's inode.
const ROOT: u64 = 1;
/// The unit of a torn append.
const PAGE: usize = 4096;
/// The largest file (a guard against a stray offset, not a real limit).
const MAX_FILE: usize = 1 << 40;

/// An in-memory disk (see the module doc).
pub struct MemDisk {
    state: Mutex<State>,
}

/// A directory of a [`MemDisk`].
pub struct MemDir {
    disk: Arc<MemDisk>,
    ino: u64,
    epoch: u64,
}

/// An open file of a [`MemDisk`].
pub struct MemFile {
    disk: Arc<MemDisk>,
    ino: u64,
    epoch: u64,
    read: bool,
    write: bool,
}

struct State {
    nodes: BTreeMap<u64, Node>,
    next_ino: u64,
    /// Bumped by each restart: a handle of another epoch is dead.
    epoch: u64,
    steps: u64,
    /// The step count at which the power goes.
    cut_at: Option<u64>,
    cut: bool,
    capacity: Option<u64>,
    rng: u64,
    /// The node count at which unreferenced nodes are next collected.
    gc_at: usize,
}

struct Node {
    body: Body,
    perm: u32,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    /// Live entries naming it (the root counts as named once).
    links: u32,
    /// Handles on it (of the current epoch).
    opens: u32,
}

enum Body {
    File(Data),
    Dir(Entries),
    Symlink(OsString),
}

struct Data {
    live: Vec<u8>,
    durable: Durable,
}

/// A file's durable data: the first bytes of its live data (as after a sync,
/// while it is only appended to), or bytes of its own.
enum Durable {
    Prefix(usize),
    Own(Vec<u8>),
}

struct Entries {
    live: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
    /// The live parent (the root's is the root).
    parent: u64,
}

fn eio() -> io::Error {
    errno(libc::EIO)
}

/// One name component: not empty, no `/` or NUL, not `.` or `..`.
fn check_name(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(errno(libc::EINVAL));
    }
    if bytes.contains(&0) {
        return Err(errno(libc::EINVAL));
    }
    if bytes.len() > 255 {
        return Err(errno(libc::ENAMETOOLONG));
    }
    Ok(())
}

/// An offset or length as an index into a file's bytes.
fn index(n: u64) -> io::Result<usize> {
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_FILE)
        .ok_or_else(|| errno(libc::EFBIG))
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// xorshift64*.
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

impl Data {
    fn new() -> Data {
        Data {
            live: Vec::new(),
            durable: Durable::Prefix(0),
        }
    }

    /// Before the live bytes from `from` on change: the durable data gets
    /// its own copy if it shares any of them.
    fn will_change(&mut self, from: usize) {
        if let Durable::Prefix(n) = self.durable {
            if from < n {
                self.durable = Durable::Own(self.live[..n].to_vec());
            }
        }
    }

    fn sync(&mut self) {
        self.durable = Durable::Prefix(self.live.len());
    }

    /// What is left after a power cut: the durable data, and of an unsynced
    /// append a whole number of pages (or all of it), drawn from `rng`.
    fn tear(&mut self, rng: &mut u64) {
        let durable = match std::mem::replace(&mut self.durable, Durable::Prefix(0)) {
            Durable::Prefix(n) => n,
            Durable::Own(bytes) if self.live.starts_with(&bytes) => bytes.len(),
            Durable::Own(bytes) => {
                self.live = bytes;
                self.durable = Durable::Prefix(self.live.len());
                return;
            }
        };
        let tail = self.live.len() - durable;
        if tail > 0 {
            let pages = tail / PAGE;
            let choices = pages + 1 + usize::from(tail > pages * PAGE);
            let pick = (next_random(rng) % choices as u64) as usize;
            let kept = if pick > pages {
                tail
            } else {
                (pick * PAGE).min(tail)
            };
            self.live.truncate(durable + kept);
        }
        self.durable = Durable::Prefix(self.live.len());
    }

    fn durable_len(&self) -> usize {
        match &self.durable {
            Durable::Prefix(n) => *n,
            Durable::Own(bytes) => bytes.len(),
        }
    }
}

impl Node {
    fn new(body: Body, perm: u32) -> Node {
        let now = SystemTime::now();
        Node {
            body,
            perm,
            uid: 0,
            gid: 0,
            atime: now,
            mtime: now,
            ctime: now,
            links: 0,
            opens: 0,
        }
    }

    fn kind(&self) -> Kind {
        match self.body {
            Body::File(_) => Kind::File,
            Body::Dir(_) => Kind::Dir,
            Body::Symlink(_) => Kind::Symlink,
        }
    }

    fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir(_))
    }

    fn stat(&self) -> Stat {
        let size = match &self.body {
            Body::File(data) => data.live.len() as u64,
            Body::Dir(_) => 0,
            Body::Symlink(target) => target.len() as u64,
        };
        Stat {
            kind: self.kind(),
            size,
            attr: crate::store::Attr {
                perm: self.perm & 0o7777,
                uid: self.uid,
                gid: self.gid,
                atime: self.atime,
                mtime: self.mtime,
                ctime: self.ctime,
            },
            id: None,
        }
    }

    fn modified(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

impl State {
    fn new(seed: u64) -> State {
        let root = Entries {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            parent: ROOT,
        };
        let mut root = Node::new(Body::Dir(root), 0o700);
        root.links = 1;
        let rng = match splitmix64(seed) {
            0 => 0x9E37_79B9_7F4A_7C15,
            x => x,
        };
        State {
            nodes: BTreeMap::from([(ROOT, root)]),
            next_ino: ROOT + 1,
            epoch: 0,
            steps: 0,
            cut_at: None,
            cut: false,
            capacity: None,
            rng,
            gc_at: 64,
        }
    }

    /// The gate of every call: `EIO` once the power is cut or for a handle
    /// from before a restart; a step cuts the power when its count is up.
    fn enter(&mut self, epoch: u64, step: bool) -> io::Result<()> {
        if self.cut || epoch != self.epoch {
            return Err(eio());
        }
        if step {
            if self.cut_at == Some(self.steps) {
                self.cut = true;
                return Err(eio());
            }
            self.steps += 1;
        }
        Ok(())
    }

    fn node(&self, ino: u64) -> io::Result<&Node> {
        self.nodes.get(&ino).ok_or_else(|| errno(libc::ENOENT))
    }

    fn node_mut(&mut self, ino: u64) -> io::Result<&mut Node> {
        self.nodes.get_mut(&ino).ok_or_else(|| errno(libc::ENOENT))
    }

    fn entries(&self, dir: u64) -> io::Result<&Entries> {
        match &self.node(dir)?.body {
            Body::Dir(entries) => Ok(entries),
            _ => Err(errno(libc::ENOTDIR)),
        }
    }

    fn entries_mut(&mut self, dir: u64) -> io::Result<&mut Entries> {
        match &mut self.node_mut(dir)?.body {
            Body::Dir(entries) => Ok(entries),
            _ => Err(errno(libc::ENOTDIR)),
        }
    }

    fn data_mut(&mut self, ino: u64) -> io::Result<&mut Data> {
        match &mut self.node_mut(ino)?.body {
            Body::File(data) => Ok(data),
            Body::Dir(_) => Err(errno(libc::EISDIR)),
            Body::Symlink(_) => Err(errno(libc::ELOOP)),
        }
    }

    /// The live node `name` in `dir`, if any (`EINVAL` for a bad name).
    fn lookup(&self, dir: u64, name: &OsStr) -> io::Result<Option<u64>> {
        check_name(name)?;
        Ok(self.entries(dir)?.live.get(name).copied())
    }

    /// The live node `name` in `dir` (`ENOENT` if none).
    fn child(&self, dir: u64, name: &OsStr) -> io::Result<u64> {
        self.lookup(dir, name)?.ok_or_else(|| errno(libc::ENOENT))
    }

    /// `name` in `dir`, or `dir` itself for `None`.
    fn target(&self, dir: u64, name: Option<&OsStr>) -> io::Result<u64> {
        match name {
            None => Ok(dir),
            Some(name) => self.child(dir, name),
        }
    }

    /// A directory removed while a handle held it: nothing can be made in it.
    fn removed(&self, dir: u64) -> bool {
        dir != ROOT && self.nodes.get(&dir).is_none_or(|node| node.links == 0)
    }

    /// A new name in `dir` for a new node (`EEXIST` if the name is taken).
    fn make(&mut self, dir: u64, name: &OsStr, body: Body, perm: u32) -> io::Result<u64> {
        if self.lookup(dir, name)?.is_some() {
            return Err(errno(libc::EEXIST));
        }
        if self.removed(dir) {
            return Err(errno(libc::ENOENT));
        }
        if self.nodes.len() >= self.gc_at {
            self.collect();
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Node::new(body, perm));
        self.link(dir, name, ino)?;
        Ok(ino)
    }

    fn link(&mut self, dir: u64, name: &OsStr, ino: u64) -> io::Result<()> {
        self.entries_mut(dir)?.live.insert(name.to_owned(), ino);
        self.node_mut(dir)?.modified();
        self.node_mut(ino)?.links += 1;
        Ok(())
    }

    fn unlink_entry(&mut self, dir: u64, name: &OsStr) -> io::Result<u64> {
        let ino = self.entries_mut(dir)?.live.remove(name);
        let ino = ino.ok_or_else(|| errno(libc::ENOENT))?;
        self.node_mut(dir)?.modified();
        let node = self.node_mut(ino)?;
        node.links = node.links.saturating_sub(1);
        node.ctime = SystemTime::now();
        Ok(ino)
    }

    /// Whether directory `a` is `b` or above it (by live parents).
    fn is_ancestor(&self, a: u64, mut b: u64) -> bool {
        // At most one step per node: the live parents have no circle, but a
        // loop here must end even if they had.
        for _ in 0..=self.nodes.len() {
            if a == b {
                return true;
            }
            match self.entries(b) {
                Ok(entries) if b != ROOT && entries.parent != b => b = entries.parent,
                _ => return false,
            }
        }
        false
    }

    /// The live bytes of every file still named or open.
    fn used(&self) -> u64 {
        let live = self.nodes.values().filter(|n| n.links > 0 || n.opens > 0);
        live.map(|node| match &node.body {
            Body::File(data) => data.live.len() as u64,
            _ => 0,
        })
        .sum()
    }

    /// `ENOSPC` if a file growing from `old` to `new` bytes would not fit.
    fn check_space(&self, old: usize, new: usize) -> io::Result<()> {
        let Some(capacity) = self.capacity else {
            return Ok(());
        };
        let after = (self.used() + new as u64).saturating_sub(old as u64);
        if new > old && after > capacity {
            return Err(errno(libc::ENOSPC));
        }
        Ok(())
    }

    fn write(&mut self, ino: u64, buf: &[u8], at: u64) -> io::Result<usize> {
        let at = index(at)?;
        let end = index(at as u64 + buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(0);
        }
        let old = self.data_mut(ino)?.live.len();
        self.check_space(old, end)?;
        let data = self.data_mut(ino)?;
        data.will_change(at.min(old));
        if data.live.len() < end {
            data.live.resize(end, 0);
        }
        data.live[at..end].copy_from_slice(buf);
        self.node_mut(ino)?.modified();
        Ok(buf.len())
    }

    fn resize(&mut self, ino: u64, len: u64) -> io::Result<()> {
        let len = index(len)?;
        let old = self.data_mut(ino)?.live.len();
        self.check_space(old, len)?;
        let data = self.data_mut(ino)?;
        data.will_change(len.min(old));
        data.live.resize(len, 0);
        self.node_mut(ino)?.modified();
        Ok(())
    }

    fn reserve(&mut self, ino: u64, at: u64, len: u64) -> io::Result<()> {
        let end = index(index(at)? as u64 + index(len)? as u64)?;
        let old = self.data_mut(ino)?.live.len();
        self.check_space(old, end)
    }

    fn open(&mut self, dir: u64, name: &OsStr, how: Open) -> io::Result<u64> {
        let ino = match (self.lookup(dir, name)?, how) {
            (None, Open::Read | Open::Write) => return Err(errno(libc::ENOENT)),
            (None, _) => return self.make(dir, name, Body::File(Data::new()), 0o600),
            (Some(_), Open::New) => return Err(errno(libc::EEXIST)),
            (Some(ino), _) => ino,
        };
        self.data_mut(ino)?;
        if how == Open::Truncate {
            self.resize(ino, 0)?;
        }
        Ok(ino)
    }

    fn remove(&mut self, dir: u64, name: &OsStr, want_dir: bool) -> io::Result<()> {
        let node = self.node(self.child(dir, name)?)?;
        match (&node.body, want_dir) {
            (Body::Dir(_), false) => return Err(errno(libc::EISDIR)),
            (Body::File(_) | Body::Symlink(_), true) => return Err(errno(libc::ENOTDIR)),
            (Body::Dir(entries), true) if !entries.live.is_empty() => {
                return Err(errno(libc::ENOTEMPTY))
            }
            _ => {}
        }
        self.unlink_entry(dir, name).map(drop)
    }

    /// Checks in the order Linux does (`do_renameat2`, then `vfs_rename`).
    /// The same node under both names is a rename that does nothing.
    fn rename(
        &mut self,
        from: u64,
        name: &OsStr,
        to: u64,
        to_name: &OsStr,
        how: Rename,
    ) -> io::Result<()> {
        let src = self.child(from, name)?;
        let tgt = self.lookup(to, to_name)?;
        match (how, tgt) {
            (Rename::NoReplace, Some(_)) => return Err(errno(libc::EEXIST)),
            (Rename::Exchange, None) => return Err(errno(libc::ENOENT)),
            _ => {}
        }
        if self.removed(to) {
            return Err(errno(libc::ENOENT));
        }
        let src_dir = self.node(src)?.is_dir();
        let tgt_dir = match tgt {
            Some(tgt) => self.node(tgt)?.is_dir(),
            None => false,
        };
        if from != to {
            if src_dir && self.is_ancestor(src, to) {
                return Err(errno(libc::EINVAL));
            }
            if tgt_dir && tgt.is_some_and(|tgt| self.is_ancestor(tgt, from)) {
                return Err(errno(match how {
                    Rename::Exchange => libc::EINVAL,
                    _ => libc::ENOTEMPTY,
                }));
            }
        }
        if tgt == Some(src) {
            return Ok(());
        }
        if let (Rename::Exchange, Some(tgt)) = (how, tgt) {
            return self.exchange(from, name, src, to, to_name, tgt);
        }
        self.replace(from, name, src, to, to_name, tgt)
    }

    /// Moves `src` (`name` in `from`) to `to_name` in `to`, over `tgt` if
    /// that is there (a file over a file, a directory over an empty one).
    fn replace(
        &mut self,
        from: u64,
        name: &OsStr,
        src: u64,
        to: u64,
        to_name: &OsStr,
        tgt: Option<u64>,
    ) -> io::Result<()> {
        let src_dir = self.node(src)?.is_dir();
        if let Some(tgt) = tgt {
            match (src_dir, &self.node(tgt)?.body) {
                (true, Body::File(_) | Body::Symlink(_)) => return Err(errno(libc::ENOTDIR)),
                (false, Body::Dir(_)) => return Err(errno(libc::EISDIR)),
                (true, Body::Dir(entries)) if !entries.live.is_empty() => {
                    return Err(errno(libc::ENOTEMPTY))
                }
                _ => {}
            }
            self.unlink_entry(to, to_name)?;
        }
        self.unlink_entry(from, name)?;
        self.link(to, to_name, src)?;
        if src_dir {
            self.entries_mut(src)?.parent = to;
        }
        Ok(())
    }

    fn exchange(
        &mut self,
        from: u64,
        name: &OsStr,
        src: u64,
        to: u64,
        to_name: &OsStr,
        tgt: u64,
    ) -> io::Result<()> {
        self.entries_mut(from)?.live.insert(name.to_owned(), tgt);
        self.entries_mut(to)?.live.insert(to_name.to_owned(), src);
        for (node, parent) in [(src, to), (tgt, from)] {
            if let Body::Dir(entries) = &mut self.node_mut(node)?.body {
                entries.parent = parent;
            }
            self.node_mut(node)?.ctime = SystemTime::now();
        }
        self.node_mut(from)?.modified();
        self.node_mut(to)?.modified();
        Ok(())
    }

    fn sync_node(&mut self, ino: u64) -> io::Result<()> {
        match &mut self.node_mut(ino)?.body {
            Body::Dir(entries) => entries.durable = entries.live.clone(),
            Body::File(data) => data.sync(),
            Body::Symlink(_) => {}
        }
        Ok(())
    }

    fn sync_everything(&mut self) {
        for node in self.nodes.values_mut() {
            match &mut node.body {
                Body::Dir(entries) => entries.durable = entries.live.clone(),
                Body::File(data) => data.sync(),
                Body::Symlink(_) => {}
            }
        }
    }

    /// Drops the nodes nothing can reach any more: not named (live or
    /// durably) from the root, nor open.
    fn collect(&mut self) {
        let open = self.nodes.iter().filter(|(_, n)| n.opens > 0);
        let mut todo: Vec<u64> = open.map(|(&ino, _)| ino).collect();
        todo.push(ROOT);
        let mut keep = BTreeSet::new();
        while let Some(ino) = todo.pop() {
            if !keep.insert(ino) {
                continue;
            }
            if let Some(Body::Dir(entries)) = self.nodes.get(&ino).map(|n| &n.body) {
                todo.extend(entries.live.values().chain(entries.durable.values()));
            }
        }
        self.nodes.retain(|ino, _| keep.contains(ino));
        self.gc_at = 2 * self.nodes.len() + 64;
    }

    /// The power comes back: what was durable (and a torn part of unsynced
    /// appends) is all there is.
    fn restart(&mut self) {
        let mut seen = BTreeSet::from([ROOT]);
        let mut queue = VecDeque::from([ROOT]);
        let mut links = BTreeMap::from([(ROOT, 1u32)]);
        while let Some(dir) = queue.pop_front() {
            let Ok(durable) = self.entries(dir).map(|e| e.durable.clone()) else {
                continue;
            };
            let mut kept = BTreeMap::new();
            for (name, ino) in durable {
                let Some(node) = self.nodes.get_mut(&ino) else {
                    continue;
                };
                if let Body::Dir(entries) = &mut node.body {
                    if !seen.insert(ino) {
                        continue; // a directory keeps its first name only
                    }
                    entries.parent = dir;
                    queue.push_back(ino);
                }
                seen.insert(ino);
                *links.entry(ino).or_insert(0) += 1;
                kept.insert(name, ino);
            }
            if let Ok(entries) = self.entries_mut(dir) {
                entries.live = kept.clone();
                entries.durable = kept;
            }
        }
        self.nodes.retain(|ino, _| seen.contains(ino));
        for (ino, node) in self.nodes.iter_mut() {
            node.links = links.get(ino).copied().unwrap_or(0);
            node.opens = 0;
            if let Body::File(data) = &mut node.body {
                data.tear(&mut self.rng);
            }
        }
        self.gc_at = 2 * self.nodes.len() + 64;
        self.epoch += 1;
        self.cut = false;
        self.cut_at = None;
    }

    fn dump_dir(&self, dir: u64, path: &str, out: &mut String) {
        let Ok(entries) = self.entries(dir) else {
            return;
        };
        for (name, &ino) in &entries.live {
            let path = format!("{path}/{}", name.to_string_lossy());
            let new = match entries.durable.get(name) == Some(&ino) {
                true => "",
                false => " (name not durable)",
            };
            match self.nodes.get(&ino).map(|node| &node.body) {
                Some(Body::File(data)) => {
                    let (len, durable) = (data.live.len(), data.durable_len());
                    let _ = match (len == durable, &data.durable) {
                        (true, Durable::Prefix(_)) => writeln!(out, "{path} file {len}{new}"),
                        _ => writeln!(out, "{path} file {len} (durable {durable}){new}"),
                    };
                }
                Some(Body::Dir(_)) => {
                    let _ = writeln!(out, "{path} dir{new}");
                    self.dump_dir(ino, &path, out);
                }
                Some(Body::Symlink(target)) => {
                    let target = target.to_string_lossy();
                    let _ = writeln!(out, "{path} symlink -> {target}{new}");
                }
                None => {
                    let _ = writeln!(out, "{path} (missing node {ino})");
                }
            }
        }
    }
}

impl MemDisk {
    /// An empty disk (its root durable and empty); `seed` drives the torn
    /// appends of its restarts.
    pub fn new(seed: u64) -> Arc<MemDisk> {
        Arc::new(MemDisk {
            state: Mutex::new(rank::MEM_DISK, State::new(seed)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The root directory (a fresh handle, of the current epoch).
    pub fn root(self: &Arc<Self>) -> Dir {
        let mut state = self.lock();
        dir_handle(self, &mut state, ROOT)
    }

    /// The power goes after `steps` more steps: that many happen, and the
    /// next one does not (it fails with `EIO`, as does every call after).
    pub fn cut_after(&self, steps: u64) {
        let mut state = self.lock();
        state.cut_at = Some(state.steps.saturating_add(steps));
    }

    /// The power goes now.
    pub fn cut_now(&self) {
        self.lock().cut = true;
    }

    /// The steps done so far (over the disk's whole life).
    pub fn steps(&self) -> u64 {
        self.lock().steps
    }

    pub fn is_cut(&self) -> bool {
        self.lock().cut
    }

    /// The power comes back (whether or not it was cut: a restart loses
    /// what was not durable, as a cut at this instant would): the disk is
    /// what survived, and every handle from before fails with `EIO`.
    pub fn restart(&self) {
        self.lock().restart();
    }

    /// At most `bytes` of live file data in all (`ENOSPC` past it), or no
    /// limit.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.lock().capacity = bytes;
    }

    /// The live tree, one line per path with its kind and size (and what of
    /// it is not durable), for test failure messages.
    pub fn dump(&self) -> String {
        let state = self.lock();
        let mut out = String::from("/ dir\n");
        if state.cut {
            out.insert_str(0, "(power cut)\n");
        }
        state.dump_dir(ROOT, "", &mut out);
        out
    }

    /// A handle on `ino` is gone.
    fn release(&self, ino: u64, epoch: u64) {
        let mut state = self.lock();
        if state.epoch == epoch {
            if let Some(node) = state.nodes.get_mut(&ino) {
                node.opens = node.opens.saturating_sub(1);
            }
        }
    }
}

fn dir_handle(disk: &Arc<MemDisk>, state: &mut State, ino: u64) -> Dir {
    if let Some(node) = state.nodes.get_mut(&ino) {
        node.opens += 1;
    }
    Arc::new(MemDir {
        disk: Arc::clone(disk),
        ino,
        epoch: state.epoch,
    })
}

impl MemDir {
    /// Runs `f` on the state and this directory's inode, past the gate.
    fn with<T>(
        &self,
        step: bool,
        f: impl FnOnce(&mut State, u64) -> io::Result<T>,
    ) -> io::Result<T> {
        gated(&self.disk, self.epoch, self.ino, step, f)
    }
}

/// Runs `f` on the disk's state and inode `ino`, once past the gate: the
/// power is on, the handle (of `epoch`) is from since the last restart, and
/// a step is counted (or the power goes now).
fn gated<T>(
    disk: &MemDisk,
    epoch: u64,
    ino: u64,
    step: bool,
    f: impl FnOnce(&mut State, u64) -> io::Result<T>,
) -> io::Result<T> {
    let mut state = disk.lock();
    state.enter(epoch, step)?;
    f(&mut state, ino)
}

impl Drop for MemDir {
    fn drop(&mut self) {
        self.disk.release(self.ino, self.epoch);
    }
}

impl StorageDir for MemDir {
    fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        self.with(false, |state, dir| {
            let ino = match name.as_bytes() {
                b"." => dir,
                b".." if state.removed(dir) => return Err(errno(libc::ENOENT)),
                b".." => state.entries(dir)?.parent,
                _ => {
                    let ino = state.child(dir, name)?;
                    match state.node(ino)?.body {
                        Body::Dir(_) => ino,
                        Body::File(_) => return Err(errno(libc::ENOTDIR)),
                        Body::Symlink(_) => return Err(errno(libc::ELOOP)),
                    }
                }
            };
            Ok(dir_handle(&self.disk, state, ino))
        })
    }

    fn list(&self) -> io::Result<Vec<(OsString, Kind)>> {
        self.with(false, |state, dir| {
            let entries = &state.entries(dir)?.live;
            let kinds = entries.iter().map(|(name, ino)| {
                let kind = state.nodes.get(ino).map_or(Kind::Other, Node::kind);
                (name.clone(), kind)
            });
            Ok(kinds.collect())
        })
    }

    fn stat(&self, name: Option<&OsStr>) -> io::Result<Stat> {
        self.with(false, |state, dir| {
            let ino = state.target(dir, name)?;
            Ok(state.node(ino)?.stat())
        })
    }

    fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        self.with(false, |state, dir| {
            match &state.node(state.child(dir, name)?)?.body {
                Body::Symlink(target) => Ok(target.clone()),
                _ => Err(errno(libc::EINVAL)),
            }
        })
    }

    fn open_file(&self, name: &OsStr, how: Open) -> io::Result<File> {
        let step = matches!(how, Open::Truncate | Open::New);
        self.with(step, |state, dir| {
            let ino = state.open(dir, name, how)?;
            state.node_mut(ino)?.opens += 1;
            Ok(Box::new(MemFile {
                disk: Arc::clone(&self.disk),
                ino,
                epoch: state.epoch,
                read: how == Open::Read,
                write: how != Open::Read,
            }) as File)
        })
    }

    fn mkdir(&self, name: &OsStr) -> io::Result<()> {
        self.with(true, |state, dir| {
            let entries = Entries {
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
                parent: dir,
            };
            state.make(dir, name, Body::Dir(entries), 0o700).map(drop)
        })
    }

    fn symlink(&self, name: &OsStr, target: &OsStr) -> io::Result<()> {
        self.with(true, |state, dir| {
            check_name(name)?;
            if target.is_empty() {
                return Err(errno(libc::ENOENT));
            }
            let body = Body::Symlink(target.to_owned());
            state.make(dir, name, body, 0o777).map(drop)
        })
    }

    fn rename(
        &self,
        name: &OsStr,
        to: &dyn StorageDir,
        to_name: &OsStr,
        how: Rename,
    ) -> io::Result<()> {
        let to = to.as_any().downcast_ref::<MemDir>();
        let to = to
            .filter(|to| Arc::ptr_eq(&to.disk, &self.disk))
            .ok_or_else(|| errno(libc::EXDEV))?;
        self.with(true, |state, dir| {
            if to.epoch != state.epoch {
                return Err(eio());
            }
            state.rename(dir, name, to.ino, to_name, how)
        })
    }

    fn unlink(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        self.with(true, |state, parent| state.remove(parent, name, dir))
    }

    fn set_owner(&self, name: Option<&OsStr>, uid: u32, gid: u32) -> io::Result<()> {
        self.with(true, |state, dir| {
            let node = state.node_mut(state.target(dir, name)?)?;
            (node.uid, node.gid) = (uid, gid);
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn set_mode(&self, name: Option<&OsStr>, perm: u32) -> io::Result<()> {
        self.with(true, |state, dir| {
            let node = state.node_mut(state.target(dir, name)?)?;
            if let Body::Symlink(_) = node.body {
                return Err(errno(libc::EOPNOTSUPP));
            }
            node.perm = perm & 0o7777;
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn set_times(
        &self,
        name: Option<&OsStr>,
        atime: SystemTime,
        mtime: SystemTime,
    ) -> io::Result<()> {
        self.with(true, |state, dir| {
            let node = state.node_mut(state.target(dir, name)?)?;
            (node.atime, node.mtime) = (atime, mtime);
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn sync(&self) -> io::Result<()> {
        self.with(true, |state, dir| state.sync_node(dir))
    }

    fn sync_child(&self, name: &OsStr, _data_only: bool) -> io::Result<bool> {
        self.with(true, |state, dir| {
            let Some(ino) = state.lookup(dir, name)? else {
                return Ok(false);
            };
            if let Body::Symlink(_) = state.node(ino)?.body {
                return Ok(false);
            }
            state.sync_node(ino)?;
            Ok(true)
        })
    }

    fn sync_fs(&self) -> io::Result<()> {
        self.with(true, |state, _| {
            state.sync_everything();
            Ok(())
        })
    }

    /// The capacity less the live bytes, if there is a capacity (`None` too
    /// once the power is cut or for a handle from before a restart).
    fn free_bytes(&self) -> Option<u64> {
        let mut state = self.disk.lock();
        state.enter(self.epoch, false).ok()?;
        Some(state.capacity?.saturating_sub(state.used()))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl MemFile {
    /// Runs `f` on the state and this file's inode, past the gate.
    fn with<T>(
        &self,
        step: bool,
        f: impl FnOnce(&mut State, u64) -> io::Result<T>,
    ) -> io::Result<T> {
        gated(&self.disk, self.epoch, self.ino, step, f)
    }

    /// `EBADF` unless it was opened for `write` (or for reading).
    fn opened_for(&self, write: bool) -> io::Result<()> {
        match if write { self.write } else { self.read } {
            true => Ok(()),
            false => Err(errno(libc::EBADF)),
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.with(true, |state, ino| state.sync_node(ino))
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        self.disk.release(self.ino, self.epoch);
    }
}

impl StorageFile for MemFile {
    fn size(&self) -> io::Result<u64> {
        self.with(false, |state, ino| {
            Ok(state.data_mut(ino)?.live.len() as u64)
        })
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        self.with(false, |state, ino| {
            self.opened_for(false)?;
            let live = &state.data_mut(ino)?.live;
            let at = usize::try_from(at).unwrap_or(usize::MAX).min(live.len());
            let n = buf.len().min(live.len() - at);
            buf[..n].copy_from_slice(&live[at..at + n]);
            Ok(n)
        })
    }

    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize> {
        self.with(true, |state, ino| {
            self.opened_for(true)?;
            state.write(ino, buf, at)
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(true, |state, ino| {
            self.opened_for(true).map_err(|_| errno(libc::EINVAL))?;
            state.resize(ino, len)
        })
    }

    fn reserve(&self, at: u64, len: u64) -> io::Result<()> {
        self.with(true, |state, ino| {
            self.opened_for(true)?;
            state.reserve(ino, at, len)
        })
    }

    fn set_owner(&self, uid: u32, gid: u32) -> io::Result<()> {
        self.with(true, |state, ino| {
            let node = state.node_mut(ino)?;
            (node.uid, node.gid) = (uid, gid);
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn set_mode(&self, perm: u32) -> io::Result<()> {
        self.with(true, |state, ino| {
            let node = state.node_mut(ino)?;
            node.perm = perm & 0o7777;
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn set_times(&self, atime: SystemTime, mtime: SystemTime) -> io::Result<()> {
        self.with(true, |state, ino| {
            let node = state.node_mut(ino)?;
            (node.atime, node.mtime) = (atime, mtime);
            node.ctime = SystemTime::now();
            Ok(())
        })
    }

    fn start_write_back(&self) {}

    fn wait_write_back(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{read_all, write_all_at};
    use super::*;

    fn os(name: &str) -> &OsStr {
        OsStr::new(name)
    }

    /// The errno of a call that must fail.
    fn code<T>(result: io::Result<T>) -> i32 {
        match result {
            Ok(_) => panic!("succeeded where an error was expected"),
            Err(e) => e.raw_os_error().expect("an errno"),
        }
    }

    /// Writes `bytes` as file `name` and syncs its data (not its name).
    fn put(dir: &Dir, name: &str, bytes: &[u8]) {
        let file = dir.open_file(os(name), Open::Truncate).unwrap();
        write_all_at(file.as_ref(), bytes, 0).unwrap();
        file.sync_data().unwrap();
    }

    /// File `name`'s bytes, or `None` if there is none.
    fn get(dir: &Dir, name: &str) -> Option<Vec<u8>> {
        match dir.open_file(os(name), Open::Read) {
            Ok(file) => Some(read_all(file.as_ref()).unwrap()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => panic!("reading {name}: {e}"),
        }
    }

    fn names(dir: &Dir) -> Vec<String> {
        let list = dir.list().unwrap();
        list.into_iter()
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_synced_file_in_a_synced_directory_survives() {
        let disk = MemDisk::new(1);
        let root = disk.root();
        root.mkdir(os("d")).unwrap();
        root.sync().unwrap();
        let d = root.open_dir(os("d")).unwrap();
        put(&d, "f", b"hello");
        d.sync().unwrap();
        disk.restart();
        let d = disk.root().open_dir(os("d")).unwrap();
        assert_eq!(
            get(&d, "f").as_deref(),
            Some(&b"hello"[..]),
            "{}",
            disk.dump()
        );
    }

    #[test]
    fn names_not_synced_are_lost_and_removals_undone() {
        let disk = MemDisk::new(2);
        let root = disk.root();
        put(&root, "kept", b"k");
        root.mkdir(os("d")).unwrap();
        root.sync().unwrap();
        put(&root, "new", b"n");
        let d = root.open_dir(os("d")).unwrap();
        put(&d, "inner", b"i");
        root.unlink(os("kept"), false).unwrap();
        disk.restart();
        let root = disk.root();
        assert_eq!(names(&root), ["d", "kept"], "{}", disk.dump());
        assert_eq!(get(&root, "kept").as_deref(), Some(&b"k"[..]));
        assert!(names(&root.open_dir(os("d")).unwrap()).is_empty());
    }

    #[test]
    fn a_new_directory_needs_its_parent_synced() {
        let disk = MemDisk::new(3);
        let root = disk.root();
        root.mkdir(os("d")).unwrap();
        let d = root.open_dir(os("d")).unwrap();
        put(&d, "f", b"x");
        d.sync().unwrap();
        disk.restart();
        assert!(names(&disk.root()).is_empty(), "{}", disk.dump());
    }

    #[test]
    fn a_rename_stays_only_once_synced() {
        let disk = MemDisk::new(4);
        let root = disk.root();
        put(&root, "a", b"A");
        root.sync().unwrap();
        root.rename(os("a"), root.as_ref(), os("b"), Rename::Replace)
            .unwrap();
        disk.restart();
        let root = disk.root();
        assert_eq!(names(&root), ["a"], "{}", disk.dump());
        root.rename(os("a"), root.as_ref(), os("b"), Rename::Replace)
            .unwrap();
        root.sync().unwrap();
        disk.restart();
        let root = disk.root();
        assert_eq!(names(&root), ["b"], "{}", disk.dump());
        assert_eq!(get(&root, "b").as_deref(), Some(&b"A"[..]));
    }

    #[test]
    fn a_rename_between_directories_needs_both_synced() {
        let disk = MemDisk::new(5);
        let root = disk.root();
        root.mkdir(os("x")).unwrap();
        root.mkdir(os("y")).unwrap();
        root.sync().unwrap();
        let (x, y) = (
            root.open_dir(os("x")).unwrap(),
            root.open_dir(os("y")).unwrap(),
        );
        put(&x, "f", b"F");
        x.sync().unwrap();
        x.rename(os("f"), y.as_ref(), os("g"), Rename::Replace)
            .unwrap();
        y.sync().unwrap();
        disk.restart();
        let root = disk.root();
        let (x, y) = (
            root.open_dir(os("x")).unwrap(),
            root.open_dir(os("y")).unwrap(),
        );
        // Only the target synced: the file has both names (a hard link).
        assert_eq!((names(&x), names(&y)), (vec!["f".into()], vec!["g".into()]));
        x.rename(os("f"), y.as_ref(), os("h"), Rename::Replace)
            .unwrap();
        x.sync().unwrap();
        y.sync().unwrap();
        disk.restart();
        let root = disk.root();
        let (x, y) = (
            root.open_dir(os("x")).unwrap(),
            root.open_dir(os("y")).unwrap(),
        );
        assert!(names(&x).is_empty(), "{}", disk.dump());
        assert_eq!(names(&y), ["g", "h"]);
        assert_eq!(get(&y, "h").as_deref(), Some(&b"F"[..]));
    }

    /// A file of `head` synced bytes then `tail` unsynced ones, after a
    /// restart of a disk of `seed`: how many of the tail survived.
    fn torn_append(seed: u64, head: usize, tail: usize) -> usize {
        let disk = MemDisk::new(seed);
        let root = disk.root();
        let bytes: Vec<u8> = (0..head + tail).map(|i| (i % 251) as u8).collect();
        put(&root, "f", &bytes[..head]);
        root.sync().unwrap();
        let file = root.open_file(os("f"), Open::Write).unwrap();
        write_all_at(file.as_ref(), &bytes[head..], head as u64).unwrap();
        disk.restart();
        let got = get(&disk.root(), "f").unwrap();
        assert!(got.len() >= head, "{}", disk.dump());
        assert_eq!(got[..], bytes[..got.len()], "a torn append keeps a prefix");
        got.len() - head
    }

    #[test]
    fn an_unsynced_append_survives_as_whole_pages_of_its_tail() {
        let tail = 3 * PAGE + 100;
        let mut seen = BTreeSet::new();
        for seed in 0..64 {
            let kept = torn_append(seed, 1000, tail);
            assert!(
                kept.is_multiple_of(PAGE) || kept == tail,
                "seed {seed}: kept {kept}"
            );
            assert!(kept <= tail, "seed {seed}: kept {kept}");
            assert_eq!(kept, torn_append(seed, 1000, tail), "reproducible");
            seen.insert(kept);
        }
        let all: BTreeSet<usize> = [0, PAGE, 2 * PAGE, 3 * PAGE, tail].into();
        assert_eq!(seen, all, "every outcome is drawn");
    }

    #[test]
    fn an_unsynced_overwrite_is_undone() {
        let disk = MemDisk::new(6);
        let root = disk.root();
        put(&root, "f", b"abcdef");
        root.sync().unwrap();
        let file = root.open_file(os("f"), Open::Write).unwrap();
        write_all_at(file.as_ref(), b"XYZ-appended", 2).unwrap();
        disk.restart();
        assert_eq!(get(&disk.root(), "f").as_deref(), Some(&b"abcdef"[..]));
        let file = disk.root().open_file(os("f"), Open::Write).unwrap();
        file.set_len(2).unwrap();
        disk.restart();
        assert_eq!(get(&disk.root(), "f").as_deref(), Some(&b"abcdef"[..]));
    }

    /// `mkdir a` then `sync_fs`, with the power cut after `n` steps.
    fn cut_workload(n: u64) -> (Arc<MemDisk>, Vec<bool>) {
        let disk = MemDisk::new(8);
        let root = disk.root();
        disk.cut_after(n);
        let done = vec![root.mkdir(os("a")).is_ok(), root.sync_fs().is_ok()];
        (disk, done)
    }

    #[test]
    fn the_step_that_reaches_the_cut_does_not_happen() {
        for (n, want) in [(0, [false, false]), (1, [true, false]), (2, [true, true])] {
            let (disk, done) = cut_workload(n);
            assert_eq!(done, want, "cut after {n}");
            assert_eq!(disk.steps(), n);
            assert_eq!(disk.is_cut(), n < 2);
            disk.restart();
            let survived = names(&disk.root()) == ["a"];
            assert_eq!(survived, n == 2, "cut after {n}: {}", disk.dump());
        }
    }

    #[test]
    fn after_the_cut_every_call_fails() {
        let disk = MemDisk::new(9);
        let root = disk.root();
        put(&root, "f", b"data");
        root.mkdir(os("d")).unwrap();
        disk.set_capacity(Some(1 << 20));
        let file = root.open_file(os("f"), Open::Read).unwrap();
        let steps = disk.steps();
        disk.cut_now();
        assert!(disk.is_cut());
        let eio = libc::EIO;
        assert_eq!(code(root.list()), eio);
        assert_eq!(code(root.stat(None)), eio);
        assert_eq!(code(root.open_dir(os("d"))), eio);
        assert_eq!(code(root.open_file(os("f"), Open::Read)), eio);
        assert_eq!(code(root.read_link(os("f"))), eio);
        assert_eq!(code(root.mkdir(os("e"))), eio);
        assert_eq!(code(root.sync()), eio);
        assert_eq!(code(root.sync_child(os("f"), true)), eio);
        assert_eq!(code(disk.root().list()), eio);
        assert_eq!(code(file.size()), eio);
        assert_eq!(code(file.read_at(&mut [0; 4], 0)), eio);
        assert_eq!(code(file.sync_data()), eio);
        assert_eq!(root.free_bytes(), None);
        file.start_write_back();
        assert_eq!(disk.steps(), steps);
        disk.restart();
        assert!(!disk.is_cut());
        assert!(names(&disk.root()).is_empty(), "{}", disk.dump());
    }

    #[test]
    fn handles_from_before_a_restart_fail() {
        let disk = MemDisk::new(10);
        let root = disk.root();
        root.mkdir(os("d")).unwrap();
        put(&root, "f", b"x");
        root.sync().unwrap();
        let d = root.open_dir(os("d")).unwrap();
        let file = root.open_file(os("f"), Open::Read).unwrap();
        disk.restart();
        assert_eq!(code(root.list()), libc::EIO);
        assert_eq!(code(d.stat(None)), libc::EIO);
        assert_eq!(code(file.size()), libc::EIO);
        assert_eq!(code(root.mkdir(os("e"))), libc::EIO);
        let fresh = disk.root();
        let renamed = fresh.rename(os("f"), d.as_ref(), os("g"), Rename::Replace);
        assert_eq!(code(renamed), libc::EIO);
        assert_eq!(names(&fresh), ["d", "f"]);
        drop((file, d, root));
        assert_eq!(get(&fresh, "f").as_deref(), Some(&b"x"[..]));
    }

    #[test]
    fn exchange_swaps_nodes_and_fixes_parents() {
        let disk = MemDisk::new(11);
        let root = disk.root();
        put(&root, "x", b"X");
        root.mkdir(os("d")).unwrap();
        let d = root.open_dir(os("d")).unwrap();
        d.mkdir(os("y")).unwrap();
        d.open_dir(os("y")).unwrap().mkdir(os("inside")).unwrap();
        root.rename(os("x"), d.as_ref(), os("y"), Rename::Exchange)
            .unwrap();
        assert_eq!(root.stat(Some(os("x"))).unwrap().kind, Kind::Dir);
        assert_eq!(get(&d, "y").as_deref(), Some(&b"X"[..]));
        let x = root.open_dir(os("x")).unwrap();
        assert_eq!(names(&x), ["inside"]);
        assert_eq!(names(&x.open_dir(os("..")).unwrap()), ["d", "x"]);
        let missing = root.rename(os("x"), d.as_ref(), os("none"), Rename::Exchange);
        assert_eq!(code(missing), libc::ENOENT);
        let into_itself = root.rename(os("x"), x.as_ref(), os("inside"), Rename::Exchange);
        assert_eq!(code(into_itself), libc::EINVAL);
        let above = x.rename(os("inside"), root.as_ref(), os("x"), Rename::Exchange);
        assert_eq!(code(above), libc::EINVAL);
    }

    #[test]
    fn rename_errors_are_linux_ones() {
        let disk = MemDisk::new(12);
        let root = disk.root();
        let mv = |from: &str, to: &str, how| root.rename(os(from), root.as_ref(), os(to), how);
        put(&root, "f", b"1");
        put(&root, "g", b"2");
        for dir in ["empty", "full", "sub"] {
            root.mkdir(os(dir)).unwrap();
        }
        put(&root.open_dir(os("full")).unwrap(), "inner", b"");
        assert_eq!(code(mv("none", "x", Rename::Replace)), libc::ENOENT);
        assert_eq!(code(mv("f", "empty", Rename::Replace)), libc::EISDIR);
        assert_eq!(code(mv("sub", "f", Rename::Replace)), libc::ENOTDIR);
        assert_eq!(code(mv("sub", "full", Rename::Replace)), libc::ENOTEMPTY);
        assert_eq!(code(mv("f", "g", Rename::NoReplace)), libc::EEXIST);
        assert_eq!(code(mv("f", "a/b", Rename::Replace)), libc::EINVAL);
        assert_eq!(code(mv("f", "", Rename::Replace)), libc::EINVAL);
        mv("f", "f", Rename::Replace).unwrap();
        mv("f", "g", Rename::Replace).unwrap();
        assert_eq!(get(&root, "g").as_deref(), Some(&b"1"[..]));
        mv("sub", "empty", Rename::Replace).unwrap();
        assert_eq!(names(&root), ["empty", "full", "g"]);
        let sub = root.open_dir(os("empty")).unwrap();
        sub.mkdir(os("deeper")).unwrap();
        let deeper = sub.open_dir(os("deeper")).unwrap();
        let into = root.rename(os("empty"), sub.as_ref(), os("x"), Rename::Replace);
        assert_eq!(code(into), libc::EINVAL);
        let below = root.rename(os("empty"), deeper.as_ref(), os("x"), Rename::Replace);
        assert_eq!(code(below), libc::EINVAL);
        let other = MemDisk::new(12).root();
        let across = root.rename(os("g"), other.as_ref(), os("g"), Rename::Replace);
        assert_eq!(code(across), libc::EXDEV);
    }

    #[test]
    fn open_and_unlink_errors_are_linux_ones() {
        let disk = MemDisk::new(13);
        let root = disk.root();
        put(&root, "f", b"abc");
        root.mkdir(os("d")).unwrap();
        root.symlink(os("l"), os("f")).unwrap();
        put(&root.open_dir(os("d")).unwrap(), "inner", b"");
        assert_eq!(code(root.open_dir(os("none"))), libc::ENOENT);
        assert_eq!(code(root.open_dir(os("f"))), libc::ENOTDIR);
        assert_eq!(code(root.open_dir(os("l"))), libc::ELOOP);
        assert_eq!(code(root.open_file(os("l"), Open::Read)), libc::ELOOP);
        assert_eq!(code(root.open_file(os("d"), Open::Write)), libc::EISDIR);
        assert_eq!(code(root.open_file(os("none"), Open::Write)), libc::ENOENT);
        assert_eq!(code(root.open_file(os("f"), Open::New)), libc::EEXIST);
        assert_eq!(code(root.mkdir(os("f"))), libc::EEXIST);
        assert_eq!(code(root.symlink(os("d"), os("x"))), libc::EEXIST);
        assert_eq!(code(root.unlink(os("d"), false)), libc::EISDIR);
        assert_eq!(code(root.unlink(os("f"), true)), libc::ENOTDIR);
        assert_eq!(code(root.unlink(os("d"), true)), libc::ENOTEMPTY);
        assert_eq!(code(root.unlink(os("none"), false)), libc::ENOENT);
        assert_eq!(code(root.stat(Some(os("a/b")))), libc::EINVAL);
        assert_eq!(root.read_link(os("l")).unwrap(), "f");
        assert_eq!(
            root.open_dir(os("..")).unwrap().stat(None).unwrap().kind,
            Kind::Dir
        );
        drop(root.open_file(os("f"), Open::Truncate).unwrap());
        assert_eq!(get(&root, "f").as_deref(), Some(&b""[..]));
        root.unlink(os("l"), false).unwrap();
        assert_eq!(names(&root), ["d", "f"]);
    }

    #[test]
    fn stat_and_attributes() {
        let disk = MemDisk::new(14);
        let root = disk.root();
        put(&root, "f", b"12345");
        root.mkdir(os("d")).unwrap();
        let st = root.stat(Some(os("f"))).unwrap();
        assert_eq!(
            (st.kind, st.size, st.attr.perm, st.attr.uid),
            (Kind::File, 5, 0o600, 0)
        );
        assert_eq!(root.stat(Some(os("d"))).unwrap().attr.perm, 0o700);
        root.set_owner(Some(os("f")), 7, 8).unwrap();
        root.set_mode(None, 0o755).unwrap();
        let epoch = SystemTime::UNIX_EPOCH;
        root.set_times(Some(os("d")), epoch, epoch).unwrap();
        let st = root.stat(Some(os("f"))).unwrap();
        assert_eq!((st.attr.uid, st.attr.gid), (7, 8));
        assert_eq!(root.stat(None).unwrap().attr.perm, 0o755);
        assert_eq!(root.stat(Some(os("d"))).unwrap().attr.mtime, epoch);
        let file = root.open_file(os("f"), Open::Write).unwrap();
        file.set_times(epoch, epoch).unwrap();
        write_all_at(file.as_ref(), b"z", 9).unwrap();
        assert!(root.stat(Some(os("f"))).unwrap().attr.mtime > epoch);
        assert_eq!(file.size().unwrap(), 10);
        assert_eq!(get(&root, "f").unwrap(), b"12345\0\0\0\0z");
        let reader = root.open_file(os("f"), Open::Read).unwrap();
        assert_eq!(reader.read_at(&mut [0; 4], 20).unwrap(), 0);
        assert_eq!(code(reader.write_at(b"x", 0)), libc::EBADF);
    }

    #[test]
    fn handles_follow_renames_and_outlive_unlinks() {
        let disk = MemDisk::new(15);
        let root = disk.root();
        root.mkdir(os("d")).unwrap();
        let d = root.open_dir(os("d")).unwrap();
        root.rename(os("d"), root.as_ref(), os("e"), Rename::Replace)
            .unwrap();
        put(&d, "f", b"in d");
        let e = root.open_dir(os("e")).unwrap();
        assert_eq!(get(&e, "f").as_deref(), Some(&b"in d"[..]));
        let file = e.open_file(os("f"), Open::Write).unwrap();
        e.unlink(os("f"), false).unwrap();
        write_all_at(file.as_ref(), b"still", 0).unwrap();
        assert_eq!(file.size().unwrap(), 5);
        assert!(names(&e).is_empty());
        root.unlink(os("e"), true).unwrap();
        assert_eq!(code(d.mkdir(os("x"))), libc::ENOENT);
        assert!(disk.dump().lines().count() == 1, "{}", disk.dump());
    }

    #[test]
    fn sync_fs_and_sync_child_make_things_durable() {
        let disk = MemDisk::new(16);
        let root = disk.root();
        root.mkdir(os("d")).unwrap();
        let d = root.open_dir(os("d")).unwrap();
        let file = d.open_file(os("f"), Open::New).unwrap();
        write_all_at(file.as_ref(), &[1; 3 * PAGE], 0).unwrap();
        root.symlink(os("l"), os("d/f")).unwrap();
        root.sync_fs().unwrap();
        disk.restart();
        let root = disk.root();
        assert_eq!(names(&root), ["d", "l"]);
        let d = root.open_dir(os("d")).unwrap();
        assert_eq!(get(&d, "f").unwrap().len(), 3 * PAGE);
        root.mkdir(os("e")).unwrap();
        root.open_dir(os("e")).unwrap().mkdir(os("inner")).unwrap();
        assert!(root.sync_child(os("e"), true).unwrap());
        assert!(!root.sync_child(os("l"), false).unwrap());
        assert!(!root.sync_child(os("none"), false).unwrap());
        root.sync().unwrap();
        disk.restart();
        let e = disk.root().open_dir(os("e")).unwrap();
        assert_eq!(names(&e), ["inner"], "{}", disk.dump());
    }

    #[test]
    fn a_directory_durably_named_twice_keeps_one_name() {
        let disk = MemDisk::new(19);
        let root = disk.root();
        let mv = |from: &Dir, name: &str, to: &Dir| {
            from.rename(os(name), to.as_ref(), os(name), Rename::Replace)
                .unwrap()
        };
        root.mkdir(os("a")).unwrap();
        root.mkdir(os("b")).unwrap();
        root.sync().unwrap();
        let (a, b) = (
            root.open_dir(os("a")).unwrap(),
            root.open_dir(os("b")).unwrap(),
        );
        mv(&root, "b", &a);
        a.sync().unwrap();
        mv(&a, "b", &root);
        mv(&root, "a", &b);
        b.sync().unwrap();
        // Durably: / has a and b, a has b, b has a (a circle).
        disk.restart();
        let root = disk.root();
        assert_eq!(names(&root), ["a", "b"], "{}", disk.dump());
        assert!(names(&root.open_dir(os("a")).unwrap()).is_empty());
        assert!(names(&root.open_dir(os("b")).unwrap()).is_empty());
        assert_eq!(disk.dump().lines().count(), 3, "{}", disk.dump());
    }

    #[test]
    fn capacity_gives_enospc() {
        let disk = MemDisk::new(17);
        let root = disk.root();
        disk.set_capacity(Some(10_000));
        assert_eq!(root.free_bytes(), Some(10_000));
        put(&root, "a", &[0; 8_000]);
        assert_eq!(root.free_bytes(), Some(2_000));
        let b = root.open_file(os("b"), Open::New).unwrap();
        assert_eq!(code(b.write_at(&[0; 3_000], 0)), libc::ENOSPC);
        assert_eq!(code(b.set_len(2_001)), libc::ENOSPC);
        assert_eq!(code(b.reserve(0, 2_001)), libc::ENOSPC);
        b.reserve(0, 2_000).unwrap();
        b.set_len(2_000).unwrap();
        assert_eq!(root.free_bytes(), Some(0));
        let a = root.open_file(os("a"), Open::Read).unwrap();
        root.unlink(os("a"), false).unwrap();
        assert_eq!(root.free_bytes(), Some(0), "an open file keeps its space");
        drop(a);
        assert_eq!(root.free_bytes(), Some(8_000));
        disk.set_capacity(None);
        assert_eq!(root.free_bytes(), None);
    }

    #[test]
    fn unreferenced_nodes_are_collected() {
        let disk = MemDisk::new(18);
        let root = disk.root();
        for i in 0..1000 {
            put(&root, "f", &[i as u8; 100]);
            root.unlink(os("f"), false).unwrap();
        }
        assert!(disk.lock().nodes.len() < 200);
        assert!(names(&root).is_empty());
    }
}
