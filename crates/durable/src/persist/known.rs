//! What memfs last wrote into the plain files, or took in from them, path
//! by path: how memfs tells its own writes from everyone else's (a person's
//! editor, a script, `git pull`, a sync tool) once the plain files are a
//! door (the `outside` module).
//!
//! The checkpointer records each file it renames into place (its content's
//! hash and the size and times the disk gave it) and each directory it
//! makes; the taker records what it took in. A plain file that no longer
//! matches what is recorded was changed by someone else: the checkpointer
//! never writes over it (it names the path a suspect for the taker), and
//! the taker takes it in.
//!
//! Until `arm` (start-up, and a memory with no watcher: the in-memory disk
//! of the power-loss tests), nothing is recorded or checked: the
//! checkpointer writes as it always did.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use super::storage::{Dir, Kind, Open, Stat};
use crate::digest::Sha;
use crate::lock::{rank, Mutex, MutexGuard};
use crate::path::MemPath;

/// A file's times within this long of when they were recorded may hide a
/// later write in the same clock tick: such a file is hashed again.
const RACY: Duration = Duration::from_millis(50);

/// The size and times a plain file had when memfs recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    size: u64,
    mtime: SystemTime,
    ctime: SystemTime,
    recorded: SystemTime,
}

impl Stamp {
    pub fn of(stat: &Stat) -> Stamp {
        Stamp {
            size: stat.size,
            mtime: stat.attr.mtime,
            ctime: stat.attr.ctime,
            recorded: SystemTime::now(),
        }
    }

    /// Whether `stat` shows the file untouched since: same size and times,
    /// and times old enough when recorded that a write in the same tick
    /// would have moved them.
    pub fn holds(&self, stat: &Stat) -> bool {
        stat.size == self.size
            && stat.attr.mtime == self.mtime
            && stat.attr.ctime == self.ctime
            && self.ctime + RACY <= self.recorded
    }
}

/// What memfs left at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Dir,
    /// A symlink to this target (its hash: the map stays `Copy`).
    Link {
        target: Sha,
    },
    /// A file of this content; its stamp, once memfs has seen it on disk.
    File {
        sha: Sha,
        stamp: Option<Stamp>,
    },
}

#[derive(Default)]
struct Map {
    at: HashMap<MemPath, Seen>,
    /// Paths the checkpointer found changed by someone else.
    suspects: BTreeSet<MemPath>,
    /// Plain files left out of the memory, with why (shown as their path).
    left_out: BTreeMap<String, String>,
}

pub struct Known {
    armed: AtomicBool,
    /// Suspects wait (read without the lock).
    suspected: AtomicBool,
    map: Mutex<Map>,
}

impl Default for Known {
    fn default() -> Self {
        Known {
            armed: AtomicBool::new(false),
            suspected: AtomicBool::new(false),
            map: Mutex::new(rank::KNOWN, Map::default()),
        }
    }
}

/// Where the disk is at a path.
pub enum OnDisk {
    Absent,
    Dir(Stat),
    File(Stat),
    /// A symlink, FIFO, socket or device node (its kind in the stat).
    Other(Stat),
}

/// What is at `path` below `root`, not following a link.
pub fn on_disk(root: &Dir, path: &MemPath) -> io::Result<OnDisk> {
    let Some(leaf) = path.file_name() else {
        return Ok(OnDisk::Dir(root.stat(None)?));
    };
    let stat = super::fsops::open_parent(root, path, false)
        .and_then(|parent| parent.stat(Some(OsStr::new(leaf))));
    match stat {
        Ok(stat) => Ok(match stat.kind {
            Kind::Dir => OnDisk::Dir(stat),
            Kind::File => OnDisk::File(stat),
            _ => OnDisk::Other(stat),
        }),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(OnDisk::Absent)
        }
        Err(e) => Err(e),
    }
}

/// The bytes of the plain file at `path` (not through a link).
pub fn read_plain(root: &Dir, path: &MemPath) -> io::Result<Vec<u8>> {
    let leaf = path.file_name().unwrap_or(".");
    let parent = super::fsops::open_parent(root, path, false)?;
    let file = parent.open_file(OsStr::new(leaf), Open::Read)?;
    super::storage::read_all(file.as_ref())
}

impl Known {
    /// From now on, record and check (the watcher runs).
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// The map, held (a leaf: nothing is locked under it).
    pub fn lock(&self) -> Held<'_> {
        Held(self.map.lock(), &self.suspected)
    }

    /// Whether the checkpointer named suspects not taken yet.
    pub fn suspected(&self) -> bool {
        self.suspected.load(Ordering::Acquire)
    }

    /// The plain files left out of the memory, each `path (why)`.
    pub fn left_out(&self) -> Vec<String> {
        let map = self.map.lock();
        map.left_out
            .iter()
            .map(|(p, why)| format!("{p} ({why})"))
            .collect()
    }
}

/// The map of what memfs left, held.
pub struct Held<'a>(MutexGuard<'a, Map>, &'a AtomicBool);

impl Held<'_> {
    pub fn get(&self, path: &MemPath) -> Option<Seen> {
        self.0.at.get(path).copied()
    }

    pub fn file(&mut self, path: &MemPath, sha: Sha, stamp: Option<Stamp>) {
        self.0.at.insert(path.clone(), Seen::File { sha, stamp });
    }

    pub fn dir(&mut self, path: &MemPath) {
        self.0.at.insert(path.clone(), Seen::Dir);
    }

    /// memfs left a symlink to `target` at `path`.
    pub fn link(&mut self, path: &MemPath, target: &str) {
        let target = Sha::of(target.as_bytes());
        self.0.at.insert(path.clone(), Seen::Link { target });
    }

    /// Forgets `path` and everything below it.
    pub fn forget(&mut self, path: &MemPath) {
        self.0.at.retain(|p, _| !p.starts_with(path));
    }

    /// What was at or below `from` is now at `to` (what was at `to` is gone).
    pub fn moved(&mut self, from: &MemPath, to: &MemPath) {
        self.forget(to);
        let under: Vec<(MemPath, Seen)> = self
            .0
            .at
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, s)| (p.clone(), *s))
            .collect();
        for (p, seen) in under {
            self.0.at.remove(&p);
            self.0.at.insert(p.rebase(from, to), seen);
        }
    }

    /// `a` and `b` traded places.
    pub fn exchanged(&mut self, a: &MemPath, b: &MemPath) {
        let swap = MemPath::root().join(".memfs-exchange");
        self.moved(a, &swap);
        self.moved(b, a);
        self.moved(&swap, b);
    }

    pub fn suspect(&mut self, path: &MemPath) {
        self.0.suspects.insert(path.clone());
        self.1.store(true, Ordering::Release);
    }

    pub fn take_suspects(&mut self) -> Vec<MemPath> {
        self.1.store(false, Ordering::Release);
        std::mem::take(&mut self.0.suspects).into_iter().collect()
    }

    pub fn leave_out(&mut self, shown: &str, why: &str) {
        self.0.left_out.insert(shown.to_string(), why.to_string());
    }

    /// `shown` and everything below it is no longer left out.
    pub fn let_in(&mut self, shown: &str) {
        let below = format!("{shown}/");
        self.0
            .left_out
            .retain(|p, _| p != shown && !p.starts_with(&below));
    }

    /// Whether the disk at `path` holds something memfs did not leave
    /// there: a file whose content is not what memfs last wrote or took
    /// in, a path memfs wrote that someone removed, or anything at a path
    /// memfs never wrote. A file found unchanged gets its stamp.
    pub fn differs(&mut self, root: &Dir, path: &MemPath) -> io::Result<bool> {
        let seen = self.get(path);
        match (on_disk(root, path)?, seen) {
            // (A link memfs left and someone removed is not a file of
            // theirs: links never count.)
            (OnDisk::Absent, seen) => Ok(seen.is_some_and(|s| !matches!(s, Seen::Link { .. }))),
            (OnDisk::Dir(_), Some(Seen::Dir)) => Ok(false),
            (OnDisk::File(stat), Some(Seen::File { .. })) => {
                let parent = super::fsops::open_parent(root, path, false)?;
                let leaf = OsStr::new(path.file_name().unwrap_or("."));
                self.file_differs(&parent, leaf, path, &stat)
            }
            _ => Ok(true),
        }
    }

    /// [`Held::differs`] for the file `name` of `dir` (at `path`, `stat`).
    fn file_differs(
        &mut self,
        dir: &Dir,
        name: &OsStr,
        path: &MemPath,
        stat: &Stat,
    ) -> io::Result<bool> {
        let Some(Seen::File { sha, stamp }) = self.get(path) else {
            return Ok(true);
        };
        if stamp.is_some_and(|s| s.holds(stat)) {
            return Ok(false);
        }
        let file = dir.open_file(name, Open::Read)?;
        let same = Sha::of(&super::storage::read_all(file.as_ref())?) == sha;
        if same {
            self.file(path, sha, Some(Stamp::of(stat)));
        }
        Ok(!same)
    }

    /// The files at or below `path` on disk that memfs did not leave as
    /// they are (see [`Held::differs`]); FIFOs and other special files
    /// count (memfs never writes one), and names it cannot have made; links
    /// do not. A walk with a bounded number of descriptors, each level
    /// opened from the one above (a tree thousands of levels deep costs
    /// one open a level).
    pub fn theirs_below(&mut self, root: &Dir, path: &MemPath) -> io::Result<Vec<MemPath>> {
        let mut out = Vec::new();
        match on_disk(root, path)? {
            OnDisk::Absent => return Ok(out),
            OnDisk::Other(stat) if stat.kind == Kind::Symlink => return Ok(out),
            OnDisk::File(_) | OnDisk::Other(_) => {
                if self.differs(root, path)? {
                    out.push(path.clone());
                }
                return Ok(out);
            }
            OnDisk::Dir(_) => {}
        }
        let top = match path.is_root() {
            true => root.clone(),
            false => super::fsops::open_parent(root, &path.join("x"), false)?,
        };
        let names = |dir: &Dir| -> io::Result<Vec<std::ffi::OsString>> {
            Ok(dir.list()?.into_iter().map(|(n, _)| n).collect())
        };
        let first = names(&top)?;
        let mut stack = super::walk::DirStack::new(top, (path.clone(), first));
        while let Some((at_dir, pending)) = stack.top() {
            let Some(name) = pending.pop() else {
                stack.pop()?;
                continue;
            };
            let at_dir = at_dir.clone();
            let Some(n) = name.to_str().filter(|n| crate::path::check_name(n).is_ok()) else {
                out.push(at_dir);
                continue;
            };
            let at = at_dir.join(n);
            let dir = stack.dir().clone();
            let stat = match dir.stat(Some(&name)) {
                Ok(stat) => stat,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match stat.kind {
                Kind::Dir => {
                    let sub = dir.open_dir(&name)?;
                    let below = names(&sub)?;
                    stack.push(sub, (at, below));
                }
                Kind::File => {
                    if self.file_differs(&dir, &name, &at, &stat)? {
                        out.push(at);
                    }
                }
                Kind::Symlink => {}
                _ => out.push(at),
            }
        }
        Ok(out)
    }

    /// Records the directories on the way to `path` (memfs made them).
    pub fn dirs_to(&mut self, path: &MemPath) {
        let mut at = path.parent();
        while let Some(dir) = at.filter(|d| !d.is_root()) {
            at = dir.parent();
            if self.0.at.insert(dir.clone(), Seen::Dir) == Some(Seen::Dir) {
                break;
            }
        }
    }

    /// Whether the disk has a file of content `sha` (`size` bytes) at
    /// `path` (recorded then as what memfs left there).
    pub fn holds(&mut self, root: &Dir, path: &MemPath, sha: Sha, size: u64) -> io::Result<bool> {
        let OnDisk::File(stat) = on_disk(root, path)? else {
            return Ok(false);
        };
        if let Some(Seen::File {
            sha: s,
            stamp: Some(stamp),
        }) = self.get(path)
        {
            if s == sha && stamp.holds(&stat) {
                return Ok(true);
            }
        }
        if stat.size != size {
            return Ok(false);
        }
        let same = Sha::of(&read_plain(root, path)?) == sha;
        if same {
            self.file(path, sha, Some(Stamp::of(&stat)));
        }
        Ok(same)
    }

    /// Records the file memfs just put at `path`, with content `sha`.
    pub fn wrote(&mut self, root: &Dir, path: &MemPath, sha: Sha) {
        let stamp = match on_disk(root, path) {
            Ok(OnDisk::File(stat)) => Some(Stamp::of(&stat)),
            _ => None,
        };
        self.file(path, sha, stamp);
    }
}
