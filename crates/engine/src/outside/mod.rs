//! The plain files as a door: what people and programs write in
//! `DIR/memories` while memfs runs is taken into the memory, as changes of
//! the files door (`Origin::Files`, `person:files` in the log), never
//! written over (docs/SEMANTICS.md, "The plain files").
//!
//! The kernel queues an inotify event when a write returns, so every door
//! drains the queue before it answers (`Store::before_answers`): a call
//! sees every change whose write returned before it began. A job on the
//! background pool also drains every [`TICK`] when no call comes. A flood (a `git checkout` of
//! thousands of files) is taken in [`BATCH`] paths per drain, so that no
//! call waits for more than the batch in hand; a lost event (the kernel's
//! queue overflowed) means one rescan of everything.

mod take;
mod watch;
mod writers;

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::digest::Sha;
use crate::lock::{rank, Mutex};
use crate::path::MemPath;
use crate::persist::known::Known;
use crate::persist::storage::Dir;
use crate::store::{NodeKind, Store};

pub use take::ignored;
use take::Taker;
pub use watch::readable;
use watch::{Item, Queue, Ready, Watch};

/// How often the plain files are looked at when no call comes.
pub const TICK: Duration = Duration::from_millis(100);

/// Paths looked at per drain, at most.
pub const BATCH: usize = 256;

thread_local! {
    /// This thread is taking changes in (the store's calls it makes come
    /// back here: they must not drain again).
    static TAKING: Cell<bool> = const { Cell::new(false) };
}

struct State {
    watch: Watch,
    queue: Queue,
}

/// The watcher and taker of one memory's plain files.
pub struct Outside {
    state: Mutex<State>,
    /// Whether the kernel told anything for this memory, and whether its
    /// queue holds anything: with nothing to read and nothing queued, an
    /// answer goes on without the watcher's lock (every door asks, the
    /// mount on each request).
    ready: Ready,
    waiting: AtomicBool,
    store: Weak<Store>,
    root: Dir,
    known: Arc<Known>,
    stopped: AtomicBool,
}

impl Outside {
    /// Watches the plain files at `path` (the directory `root` is open on)
    /// for `store`: what memfs left there is the tree as loaded; from now
    /// on, every answer of the store's comes after what changed there.
    pub fn start(
        store: &Arc<Store>,
        path: PathBuf,
        root: Dir,
        known: Arc<Known>,
    ) -> std::io::Result<Arc<Outside>> {
        // A memory deeper than its limit (loaded all the same, with a
        // warning) is not watched: what memfs left would cost the square
        // of its depth to remember.
        let height = store.with_tree(|t| t.height(crate::store::ROOT_INO));
        let limit = store.limits().max_depth;
        if height > limit + 1 {
            return Err(std::io::Error::other(format!(
                "the memory is {height} levels deep, over --max-depth {limit}"
            )));
        }
        let mut watch = Watch::new(path)?;
        remember(store, &known, &mut watch);
        known.arm();
        let ready = watch.ready();
        let outside = Arc::new(Outside {
            ready,
            waiting: AtomicBool::new(false),
            state: Mutex::new(
                rank::OUTSIDE,
                State {
                    watch,
                    queue: Queue::default(),
                },
            ),
            store: Arc::downgrade(store),
            root,
            known,
            stopped: AtomicBool::new(false),
        });
        let me = Arc::downgrade(&outside);
        store.before_answers(Box::new(move || {
            if let Some(outside) = me.upgrade() {
                outside.drain();
            }
        }));
        // (On the shared background pool: an open memory costs no thread.)
        crate::pool::background().every(TICK, Arc::downgrade(&outside), Outside::drain);
        Ok(outside)
    }

    /// Stops taking changes in (the memory is closing).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Takes in what the kernel has told of, up to [`BATCH`] paths.
    pub fn drain(&self) {
        if self.stopped.load(Ordering::Acquire) || TAKING.with(|t| t.get()) {
            return;
        }
        // (The kernel first: a drain under way sets `waiting` before it
        // reads, so one that read this memory's events is seen below.)
        if !self.readable() && !self.waiting.load(Ordering::Acquire) && !self.known.suspected() {
            return;
        }
        let Some(store) = self.store.upgrade() else {
            return;
        };
        /// Clears `TAKING` however the drain ends (a panic included).
        struct Taking;
        impl Drop for Taking {
            fn drop(&mut self) {
                TAKING.with(|t| t.set(false));
            }
        }
        TAKING.with(|t| t.set(true));
        let _taking = Taking;
        let mut state = self.state.lock();
        // (Set while this drain works: an answer that finds nothing to read
        // meanwhile waits for it, as what it read is not taken in yet.)
        self.waiting.store(true, Ordering::Release);
        self.drain_held(&store, &mut state);
        let waiting = !state.queue.is_empty() || state.queue.settling();
        self.waiting.store(waiting, Ordering::Release);
    }

    /// Whether the kernel told anything for this memory (one `poll`, no
    /// wait).
    fn readable(&self) -> bool {
        self.ready.now()
    }

    fn drain_held(&self, store: &Arc<Store>, state: &mut State) {
        let State { watch, queue } = state;
        if let Err(e) = watch.read(queue) {
            tracing::warn!(
                "the plain files' changes could not be read ({e}); memfs looks at all of them"
            );
            queue.rescan = true;
        }
        for p in self.known.lock().take_suspects() {
            queue.push(p);
        }
        for shown in std::mem::take(&mut queue.unaddressable) {
            self.known
                .lock()
                .leave_out(&shown.0, "a name the memory tool cannot address");
        }
        for path in std::mem::take(&mut queue.created) {
            match crate::persist::known::on_disk(&self.root, &path) {
                Ok(crate::persist::known::OnDisk::File(_)) => queue.settle(path),
                _ => queue.push(path),
            }
        }
        queue.settled();
        if queue.rescan {
            queue.rescan = false;
            queue.clear();
            self.rescan(store, watch, queue);
        }
        let taker = Taker {
            store,
            root: &self.root,
            known: &self.known,
        };
        for _ in 0..BATCH {
            let Some((item, written)) = queue.pop() else {
                break;
            };
            match item {
                Item::Path(path) => {
                    // (A directory already watched has told of its
                    // entries; a new one, moved in or made, is listed.)
                    if let Some(dir) = taker.look(&path, written).dir {
                        if !watch.watches(&dir) {
                            watch.add(&dir);
                            self.entries(&dir, queue);
                        }
                    }
                }
                Item::Moved(from, to) => {
                    if !taker.moved(&from, &to) {
                        queue.push(from);
                    }
                    queue.push(to);
                }
            }
        }
    }

    /// Queues every entry of the directory `dir` on disk.
    fn entries(&self, dir: &MemPath, queue: &mut Queue) {
        let opened = match dir.is_root() {
            true => Ok(self.root.clone()),
            false => crate::persist::fsops::open_parent(&self.root, &dir.join("x"), false),
        };
        let Ok(opened) = opened else {
            return;
        };
        let Ok(names) = opened.list() else {
            return;
        };
        for (name, _) in names {
            match name.to_str().filter(|n| crate::path::check_name(n).is_ok()) {
                Some(n) => {
                    let path = dir.join(n);
                    if !ignored(&path) {
                        queue.push_unbounded(path);
                    }
                }
                None => self.known.lock().leave_out(
                    &format!("{dir}/{}", crate::text::label(&name.to_string_lossy())),
                    "a name the memory tool cannot address",
                ),
            }
        }
    }

    /// The kernel lost events: every path memory holds, and the root's
    /// entries (the walk goes down from there), are looked at again.
    fn rescan(&self, store: &Arc<Store>, watch: &mut Watch, queue: &mut Queue) {
        tracing::info!(
            "looking at every plain file again (the kernel's queue of changes overflowed)"
        );
        let paths: Vec<MemPath> =
            store.with_tree(|t| t.walk().into_iter().map(|(p, _)| p).collect());
        for path in paths.into_iter().filter(|p| !p.is_root() && !ignored(p)) {
            queue.push_unbounded(path);
        }
        // Every directory is watched and listed again as it is looked at.
        watch.drop_below(&MemPath::root());
        watch.add(&MemPath::root());
        self.entries(&MemPath::root(), queue);
    }

    /// Whether changes wait to be taken in (a test's and a flood's question).
    pub fn busy(&self) -> bool {
        let state = self.state.lock();
        !state.queue.is_empty() || state.queue.settling()
    }
}

/// One node of the tree as loaded, as the map records it: a file's bytes
/// (`F`) are shared out under the tree's lock and hashed after it.
enum Left<F> {
    Dir,
    File(F),
    Link(String),
}

/// What memfs left in the plain files: the tree as loaded (read first:
/// the map is a leaf, taken under nothing); every directory watched.
fn remember(store: &Store, known: &Known, watch: &mut Watch) {
    // (The bytes shared out under the tree's lock, hashed after it.)
    let left: Vec<(MemPath, Left<Arc<Vec<u8>>>)> = store.with_tree(|tree| {
        tree.walk()
            .into_iter()
            .filter(|(path, _)| !ignored(path))
            .filter_map(|(path, node)| match &node.kind {
                NodeKind::Dir(_) => Some((path, Left::Dir)),
                NodeKind::File(data) => Some((path, Left::File(data.clone()))),
                NodeKind::Symlink(target) => Some((path, Left::Link(target.clone()))),
                _ => None,
            })
            .collect()
    });
    let hashed: Vec<(MemPath, Left<Sha>)> = left
        .into_iter()
        .map(|(path, left)| match left {
            Left::File(data) => (path, Left::File(Sha::of(&data))),
            Left::Dir => (path, Left::Dir),
            Left::Link(target) => (path, Left::Link(target)),
        })
        .collect();
    let mut held = known.lock();
    for (path, left) in hashed {
        match left {
            Left::Dir => {
                held.dir(&path);
                watch.add(&path);
            }
            Left::File(sha) => held.file(&path, sha, None),
            Left::Link(target) => held.link(&path, &target),
        }
    }
}
