//! The kernel's word on what changed in the plain files: a watch on
//! `DIR/memories` and every directory below it, read without blocking. It
//! only says which paths to look at; the taker (`take.rs`) looks.
//!
//! One inotify instance serves every memory of the process (the [`Hub`]):
//! the kernel allows a user 128 instances by default, and a server of many
//! stores with one each took them all, from its own later stores and from
//! every other program of that user. Whoever reads the instance hands each
//! event to the watch its descriptor belongs to.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::lock::{rank, Mutex};
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

/// One event as read: its watch descriptor, mask, cookie and name.
type Raw = (i32, ReadFlags, u32, Option<Vec<u8>>);

/// The process's inotify instance, while some memory watches.
static HUB: Mutex<Weak<Hub>> = Mutex::new(rank::INOTIFY_HUB, Weak::new());

/// Watches told apart in the hub.
static NEXT_WATCH: AtomicU64 = AtomicU64::new(1);

/// One inotify instance for every watch of the process, and the events
/// read from it for each watch, until that watch reads them.
pub struct Hub {
    fd: OwnedFd,
    inner: Mutex<Inner>,
    /// Reads under way (from before the kernel is read until every event
    /// read is handed over): an answer that finds nothing waits for one.
    handing: AtomicUsize,
}

struct Inner {
    /// Which watch each descriptor belongs to.
    owners: HashMap<i32, u64>,
    /// Events read for a watch and not yet taken, with its flag.
    held: HashMap<u64, (Vec<Raw>, Arc<AtomicBool>)>,
    buf: Vec<MaybeUninit<u8>>,
}

impl Hub {
    /// The process's instance (made when no memory had one open).
    fn get() -> io::Result<Arc<Hub>> {
        let mut hub = HUB.lock();
        if let Some(h) = hub.upgrade() {
            return Ok(h);
        }
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let h = Arc::new(Hub {
            fd,
            inner: Mutex::new(
                rank::INOTIFY_EVENTS,
                Inner {
                    owners: HashMap::new(),
                    held: HashMap::new(),
                    buf: vec![MaybeUninit::uninit(); 64 * 1024],
                },
            ),
            handing: AtomicUsize::new(0),
        });
        *hub = Arc::downgrade(&h);
        Ok(h)
    }

    /// Reads what the kernel holds and hands each event to its watch;
    /// then `id`'s events, taken. An overflow goes to every watch.
    fn take(&self, id: u64) -> io::Result<Vec<Raw>> {
        let mut inner = self.inner.lock();
        self.handing.fetch_add(1, Ordering::SeqCst);
        let taken = self.take_held(&mut inner, id);
        self.handing.fetch_sub(1, Ordering::SeqCst);
        taken
    }

    /// [`Hub::take`], under the hub's lock.
    fn take_held(&self, inner: &mut Inner, id: u64) -> io::Result<Vec<Raw>> {
        let mut buf = std::mem::take(&mut inner.buf);
        let read = read_all(&self.fd, &mut buf);
        inner.buf = buf;
        let events = match read {
            Ok(events) => events,
            Err(e) => {
                // What was read of other memories' events is lost with the
                // batch: each looks at all its files again, as after an
                // overflow (the caller is told, and does too).
                let lost = (-1, ReadFlags::QUEUE_OVERFLOW, 0, None);
                for (held, flag) in inner.held.values_mut() {
                    held.push(lost.clone());
                    flag.store(true, Ordering::Release);
                }
                return Err(e);
            }
        };
        for ev in events {
            if ev.1.contains(ReadFlags::QUEUE_OVERFLOW) {
                for (held, flag) in inner.held.values_mut() {
                    held.push(ev.clone());
                    flag.store(true, Ordering::Release);
                }
                continue;
            }
            let Some(&owner) = inner.owners.get(&ev.0) else {
                continue;
            };
            if ev.1.contains(ReadFlags::IGNORED) {
                inner.owners.remove(&ev.0);
            }
            if let Some((held, flag)) = inner.held.get_mut(&owner) {
                held.push(ev);
                flag.store(true, Ordering::Release);
            }
        }
        Ok(match inner.held.get_mut(&id) {
            Some((held, flag)) => {
                flag.store(false, Ordering::Release);
                std::mem::take(held)
            }
            None => Vec::new(),
        })
    }

    /// Whether events may wait for the watch whose flag is `mine`: read
    /// for it already, or in the kernel. When the kernel holds none, a
    /// read under way may be handing them over: then this waits for it
    /// under the hub's lock; with none under way, what it handed is in
    /// `mine` already (set before its count went down).
    pub fn ready(&self, mine: &AtomicBool) -> bool {
        if mine.load(Ordering::Acquire) || readable(&self.fd) {
            return true;
        }
        if self.handing.load(Ordering::SeqCst) > 0 {
            let _handing = self.inner.lock();
        }
        mine.load(Ordering::Acquire)
    }
}

/// Whether the descriptor holds events (one `poll`, no wait; an error
/// counts as yes). Also the token file's watch's (`memfs-http`).
pub fn readable(fd: &OwnedFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // (An error: look, as if it were.)
    poll(&mut fds, Some(&zero)).map_or(true, |n| n > 0)
}

/// Every event the descriptor holds, without blocking.
fn read_all(fd: &OwnedFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<Vec<Raw>> {
    let mut events = Vec::new();
    let mut reader = inotify::Reader::new(fd, buf);
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
    Ok(events)
}

/// How a memory's outside asks, without its watcher's lock, whether the
/// kernel told anything for it.
pub struct Ready {
    hub: Arc<Hub>,
    mine: Arc<AtomicBool>,
}

impl Ready {
    pub fn now(&self) -> bool {
        self.hub.ready(&self.mine)
    }
}

pub struct Watch {
    hub: Arc<Hub>,
    /// This watch in the hub.
    id: u64,
    /// Set while the hub holds events read for this watch.
    mine: Arc<AtomicBool>,
    /// `DIR/memories` as a path (inotify watches paths).
    root: PathBuf,
    dirs: HashMap<i32, MemPath>,
    by_path: HashMap<MemPath, i32>,
    /// A MOVED_FROM waiting for its MOVED_TO, by cookie.
    moving: HashMap<u32, MemPath>,
    /// The kernel refused a watch (its limit): said once.
    refused: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut inner = self.hub.inner.lock();
        inner.held.remove(&self.id);
        for wd in self.dirs.keys() {
            if inner.owners.get(wd) == Some(&self.id) {
                inner.owners.remove(wd);
                let _ = inotify::remove_watch(&self.hub.fd, *wd);
            }
        }
    }
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
        let hub = Hub::get()?;
        let id = NEXT_WATCH.fetch_add(1, Ordering::Relaxed);
        let mine = Arc::new(AtomicBool::new(false));
        hub.inner.lock().held.insert(id, (Vec::new(), mine.clone()));
        Ok(Watch {
            hub,
            id,
            mine,
            root,
            dirs: HashMap::new(),
            by_path: HashMap::new(),
            moving: HashMap::new(),
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
        // (The descriptor is the hub's from now on: an event read before
        // it is owned has no watch to go to, and the directory is listed
        // after it is watched.)
        let added = {
            let mut inner = self.hub.inner.lock();
            let added = inotify::add_watch(&self.hub.fd, &real, flags());
            if let Ok(wd) = added {
                inner.owners.insert(wd, self.id);
            }
            added
        };
        match added {
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
            let _ = inotify::remove_watch(&self.hub.fd, wd);
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

    /// How to ask whether events wait, without the watcher's lock.
    pub fn ready(&self) -> Ready {
        Ready {
            hub: self.hub.clone(),
            mine: self.mine.clone(),
        }
    }

    /// Reads every event queued for this watch, without blocking, into
    /// `queue`.
    pub fn read(&mut self, queue: &mut Queue) -> io::Result<()> {
        let result = self.hub.take(self.id).map(|events| {
            for (wd, mask, cookie, name) in events {
                self.event(wd, mask, cookie, name, queue);
            }
        });
        // A move whose other half never came: the name left the plain files.
        for (_, from) in self.moving.drain() {
            queue.push(from);
        }
        result
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
