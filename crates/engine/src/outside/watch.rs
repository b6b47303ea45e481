//! The kernel's word on what changed in the plain files: one inotify
//! descriptor with a watch on `DIR/memories` and every directory below it,
//! read without blocking. It only says which paths to look at; the taker
//! (`take.rs`) looks.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::path::MemPath;

/// A file written and still open is taken in once it has been quiet this long.
pub const SETTLE: Duration = Duration::from_millis(100);

/// Past this many paths waiting, the queue is dropped for one rescan.
const MAX_QUEUED: usize = 100_000;

/// What to look at, in the order the kernel told it.
pub enum Item {
    Path(MemPath),
    /// A name moved within the plain files: from, to.
    Moved(MemPath, MemPath),
}

/// A name the tool cannot address, seen in an event: shown as its parent's
/// path and the name made printable.
pub struct Unaddressable(pub String);

#[derive(Default)]
pub struct Queue {
    items: VecDeque<Item>,
    queued: HashSet<MemPath>,
    /// Paths someone wrote in place (memfs never does: it renames into
    /// place), whatever their content now.
    written: HashSet<MemPath>,
    /// Files written and not closed yet, with their last write.
    settling: HashMap<MemPath, Instant>,
    /// The kernel lost events (or the queue grew too long): look at everything.
    pub rescan: bool,
    pub unaddressable: Vec<Unaddressable>,
    /// Names just made, not looked at yet (a file settles; anything else
    /// is looked at now).
    pub created: Vec<MemPath>,
}

impl Queue {
    pub fn push(&mut self, path: MemPath) {
        self.push_unbounded(path);
        self.bound();
    }

    /// [`Queue::push`] from a rescan or a listing (what memfs itself asks
    /// to look at, bounded by the tree and the disk, not by the kernel).
    pub fn push_unbounded(&mut self, path: MemPath) {
        self.settling.remove(&path);
        if self.queued.insert(path.clone()) {
            self.items.push_back(Item::Path(path));
        }
    }

    fn moved(&mut self, from: MemPath, to: MemPath) {
        self.items.push_back(Item::Moved(from, to));
        self.bound();
    }

    fn bound(&mut self) {
        if self.items.len() > MAX_QUEUED {
            self.items.clear();
            self.queued.clear();
            self.written.clear();
            self.rescan = true;
        }
    }

    pub fn settle(&mut self, path: MemPath) {
        if !self.queued.contains(&path) {
            self.settling.insert(path, Instant::now());
        }
    }

    /// Files quiet for [`SETTLE`] join the queue.
    pub fn settled(&mut self) {
        let now = Instant::now();
        let quiet: Vec<MemPath> = self
            .settling
            .iter()
            .filter(|(_, at)| now.duration_since(**at) >= SETTLE)
            .map(|(p, _)| p.clone())
            .collect();
        for path in quiet {
            self.push_written(path);
        }
    }

    /// [`Queue::push`] of a path someone wrote in place.
    pub fn push_written(&mut self, path: MemPath) {
        self.written.insert(path.clone());
        self.push(path);
    }

    /// The next thing to look at, and whether someone wrote it in place.
    pub fn pop(&mut self) -> Option<(Item, bool)> {
        let item = self.items.pop_front()?;
        let mut written = false;
        if let Item::Path(p) = &item {
            self.queued.remove(p);
            written = self.written.remove(p);
        }
        Some((item, written))
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && !self.rescan
    }

    pub fn settling(&self) -> bool {
        !self.settling.is_empty()
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.queued.clear();
        self.written.clear();
        self.settling.clear();
    }
}

pub struct Watch {
    fd: std::sync::Arc<OwnedFd>,
    /// `DIR/memories` as a path (inotify watches paths).
    root: PathBuf,
    dirs: HashMap<i32, MemPath>,
    by_path: HashMap<MemPath, i32>,
    /// A MOVED_FROM waiting for its MOVED_TO, by cookie.
    moving: HashMap<u32, MemPath>,
    buf: Vec<MaybeUninit<u8>>,
    /// The kernel refused a watch (its limit): said once.
    refused: bool,
}

/// What a directory's watch asks the kernel to tell.
fn flags() -> WatchFlags {
    WatchFlags::CLOSE_WRITE
        | WatchFlags::MODIFY
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

impl Watch {
    pub fn new(root: PathBuf) -> io::Result<Watch> {
        let fd = std::sync::Arc::new(inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?);
        Ok(Watch {
            fd,
            root,
            dirs: HashMap::new(),
            by_path: HashMap::new(),
            moving: HashMap::new(),
            buf: vec![MaybeUninit::uninit(); 64 * 1024],
            refused: false,
        })
    }

    /// Watches the directory `dir` (again, if it was: a new directory at
    /// the same name gets a new watch).
    pub fn add(&mut self, dir: &MemPath) {
        // (Past PATH_MAX the kernel refuses the path: not even built.)
        let long: usize = dir.names().iter().map(|n| n.len() + 1).sum();
        if long + self.root.as_os_str().len() >= 4096 {
            return;
        }
        let mut real = self.root.clone();
        for name in dir.names() {
            real.push(name);
        }
        match inotify::add_watch(&*self.fd, &real, flags()) {
            Ok(wd) => {
                super::writers::mark(&real);
                if let Some(old) = self.dirs.insert(wd, dir.clone()) {
                    if old != *dir {
                        self.by_path.remove(&old);
                    }
                }
                self.by_path.insert(dir.clone(), wd);
            }
            Err(e) if e == rustix::io::Errno::NOSPC && !self.refused => {
                self.refused = true;
                tracing::warn!(
                    "the kernel allows no more inotify watches (fs.inotify.max_user_watches): changes to the plain files in {dir} and some other directories are seen only at the next start"
                );
            }
            // Gone already, or not a directory any more: its events say so.
            Err(_) => {}
        }
    }

    /// Stops watching `dir` and every directory below it (moved away:
    /// their watches would name the old paths).
    pub fn drop_below(&mut self, dir: &MemPath) {
        let below: Vec<(MemPath, i32)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.starts_with(dir))
            .map(|(p, wd)| (p.clone(), *wd))
            .collect();
        for (path, wd) in below {
            self.by_path.remove(&path);
            self.dirs.remove(&wd);
            let _ = inotify::remove_watch(&*self.fd, wd);
        }
    }

    pub fn watches(&self, dir: &MemPath) -> bool {
        self.by_path.contains_key(dir)
    }

    /// The path an event names, if the tool can address it and the files
    /// door takes such names in (else it is noted, or ignored).
    fn path_of(&self, wd: i32, name: Option<Vec<u8>>, queue: &mut Queue) -> Option<MemPath> {
        let (Some(dir), Some(name)) = (self.dirs.get(&wd), name) else {
            return None;
        };
        let path = match std::str::from_utf8(&name)
            .ok()
            .filter(|n| crate::path::check_name(n).is_ok())
        {
            Some(n) => dir.join(n),
            None => {
                let shown = format!(
                    "{dir}/{}",
                    crate::text::label(&String::from_utf8_lossy(&name))
                );
                queue.unaddressable.push(Unaddressable(shown));
                return None;
            }
        };
        (!super::take::ignored(&path)).then_some(path)
    }

    /// The descriptor, to ask whether events wait without the watcher's lock.
    pub fn fd(&self) -> std::sync::Arc<OwnedFd> {
        self.fd.clone()
    }

    /// Reads every event queued, without blocking, into `queue`.
    pub fn read(&mut self, queue: &mut Queue) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.read_into(&mut buf, queue);
        self.buf = buf;
        // A move whose other half never came: the name left the plain files.
        for (_, from) in self.moving.drain() {
            queue.push(from);
        }
        result
    }

    fn read_into(&mut self, buf: &mut [MaybeUninit<u8>], queue: &mut Queue) -> io::Result<()> {
        let mut events = Vec::new();
        {
            let mut reader = inotify::Reader::new(&*self.fd, buf);
            loop {
                match reader.next() {
                    Ok(ev) => events.push((
                        ev.wd(),
                        ev.events(),
                        ev.cookie(),
                        ev.file_name().map(|n| n.to_bytes().to_vec()),
                    )),
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for (wd, mask, cookie, name) in events {
            self.event(wd, mask, cookie, name, queue);
        }
        Ok(())
    }

    fn event(
        &mut self,
        wd: i32,
        mask: ReadFlags,
        cookie: u32,
        name: Option<Vec<u8>>,
        queue: &mut Queue,
    ) {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            queue.rescan = true;
            return;
        }
        if mask.contains(ReadFlags::IGNORED) {
            if let Some(dir) = self.dirs.remove(&wd) {
                if self.by_path.get(&dir) == Some(&wd) {
                    self.by_path.remove(&dir);
                }
            }
            return;
        }
        let Some(path) = self.path_of(wd, name, queue) else {
            return;
        };
        let is_dir = mask.contains(ReadFlags::ISDIR);
        if mask.contains(ReadFlags::MOVED_FROM) {
            if is_dir {
                self.drop_below(&path);
            }
            self.moving.insert(cookie, path);
        } else if mask.contains(ReadFlags::MOVED_TO) {
            match self.moving.remove(&cookie) {
                Some(from) => queue.moved(from, path),
                None => queue.push(path),
            }
        } else if mask.contains(ReadFlags::CLOSE_WRITE) {
            queue.push_written(path);
        } else if mask.contains(ReadFlags::MODIFY) {
            queue.settle(path);
        } else if mask.contains(ReadFlags::CREATE) && !is_dir {
            // A new file waits for its writes and close; a link or FIFO
            // (no write comes) does not: the drain tells them apart.
            queue.created.push(path);
        } else {
            // Removed, a new directory, attributes.
            queue.push(path);
        }
    }
}
