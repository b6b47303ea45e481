//! [`Memory`]: a store opened on a data dir, with its journal and tool.

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;

use crate::control::Control;
use crate::journal::{self, Files, History, Journal, Keep, Stats};
use crate::persist::{last_reads, load, DataDir, OpenError};
use crate::store::{Limits, Refused, Store};
use crate::tool::{Pending, Tool, ToolConfig, ToolResult};

/// How a memory is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub limits: Limits,
    pub tool: ToolConfig,
    /// How much history to keep.
    pub history_keep: Keep,
    /// Keep no history beyond each file's current version
    /// (`--no-history`; the journal, which makes changes durable, holds at
    /// least that).
    pub no_history: bool,
    /// Expire files unused this long, on a schedule (`--expire-idle`).
    pub expire_idle: Option<Duration>,
    /// The shared store the data dir is this host's copy of (`--data
    /// postgres://...`): every change is committed there first, and every
    /// other host's is applied here.
    pub shared: Option<crate::shared::Target>,
    /// How long the checkpointer waits after a change before it brings
    /// the plain files up to date (`None`: `MEMFS_CHECKPOINT_MS`, else
    /// 200 ms).
    pub checkpoint_delay: Option<Duration>,
    /// A journal segment is closed past this size (`None`:
    /// `MEMFS_SEGMENT_BYTES`, else 32 MiB).
    pub segment_bytes: Option<u64>,
    /// Keep no search index (`--no-search`).
    pub no_search: bool,
    /// The memory store over HTTP the data dir is this machine's cache of
    /// (`--data https://HOST/v1/memory_stores/ID`).
    pub remote: Option<crate::remote::Options>,
    /// For a stores root's server: how its stores that are caches of
    /// stores over HTTP (`memfs --stores ROOT mirror URL`) reach them.
    pub mirror_keys: Option<crate::remote::Keys>,
}

impl Options {
    /// These options for a cache of the store at `url`, reached with
    /// [`Options::mirror_keys`] (none without them), the API's limits
    /// refused at the tool.
    pub fn for_cache_of(&self, url: crate::remote::StoreUrl) -> Option<Options> {
        let keys = self.mirror_keys.as_ref()?;
        let mut options = self.clone();
        options.remote = Some(keys.options_for(url));
        let limits = &mut options.limits;
        limits.max_file_size = limits.max_file_size.min(crate::remote::API_MEMORY_MOST);
        limits.max_depth = limits.max_depth.min(crate::remote::API_SEGMENTS_MOST);
        Some(options)
    }
}

/// The memory of one data dir, open and locked for this process.
pub struct Memory {
    tool: Tool,
    journal: Journal,
    data_dir: DataDir,
    control: Arc<Control>,
    /// Saves last reads once a minute on the background pool, while held.
    saver: Option<Arc<UsageSaver>>,
    /// Expires idle files on the background pool (`--expire-idle`), while held.
    expiry: Option<Arc<crate::control::expire::Expiry>>,
    skipped: load::Skipped,
    warnings: Vec<String>,
    opened: journal::Opened,
    /// Applies other hosts' changes (a shared store).
    follower: Option<crate::shared::Follower>,
    /// The search index, kept current while held.
    search: Option<Arc<crate::search::Search>>,
    /// The plain files' watcher (on a real disk), while held.
    outside: Option<Arc<crate::outside::Outside>>,
    /// Keeps a store over HTTP and this cache in step, while held.
    remote: Option<crate::remote::Remote>,
}

/// An io error of opening the data dir (shown as `dir`) while `doing`.
fn io_error(dir: &str, doing: &'static str) -> impl FnOnce(std::io::Error) -> OpenError {
    let dir = dir.to_string();
    move |err| OpenError::Io { dir, doing, err }
}

/// The plain files loaded into a tree (with a progress line for a big
/// memory), and what was skipped.
fn load_tree(data_dir: &DataDir) -> std::io::Result<(crate::store::Tree, load::Skipped)> {
    let mut progress = LoadProgress::new();
    let loaded = load::load_with_progress(&data_dir.memories, &mut |n| progress.at(n));
    progress.done();
    loaded
}

/// The plain files' directories the journal writes through.
fn files_of(data_dir: &DataDir) -> Files {
    Files {
        memories: data_dir.memories.clone(),
        tmp: data_dir.tmp.clone(),
        trash: data_dir.trash.clone(),
        known: Default::default(),
    }
}

/// The plain files watched from here, while the tree is what they hold
/// (before another host's changes or an earlier run's unsent ones come
/// in), when `watches` (a real disk, the replay done). `MEMFS_WATCH=0`: the
/// plain files are read at start only, as on a network file system whose
/// other clients' writes inotify never sees.
fn outside_watcher(
    watches: bool,
    store: &Arc<Store>,
    data_dir: &DataDir,
    files: &Files,
) -> Option<Arc<crate::outside::Outside>> {
    let watch = std::env::var("MEMFS_WATCH").map_or(true, |v| v != "0");
    match watches && watch {
        true => watch_plain_files(store, data_dir, files),
        false => None,
    }
}

/// A batch the disk or the shared store refused is handed to the store to
/// decide what memory becomes (nothing, once the store is gone).
fn recover_through(journal: &Journal, store: &Arc<Store>) {
    let store = Arc::downgrade(store);
    journal.recover_through(Box::new(move |r: Refused| match store.upgrade() {
        Some(store) => store.recover(r.refused, r.unconfirmed, r.clean, &r.bases),
        None => vec![false; r.refused.len()],
    }));
}

/// The search index (unless `--no-search`) and the memory's control (the
/// history and search requests of every door), keyed with the data dir's
/// key.
fn search_and_control(
    options: &Options,
    store: &Arc<Store>,
    journal: &Journal,
    data_dir: &DataDir,
) -> (Option<Arc<crate::search::Search>>, Arc<Control>) {
    let search = (!options.no_search)
        .then(|| crate::search::Search::start(store, journal.history(), &data_dir.state_dir));
    let control = Arc::new(
        Control::new(Some(data_dir.key.clone()), Some(journal.history()))
            .with_search(search.clone(), options.tool.hide.clone()),
    );
    (search, control)
}

impl Memory {
    /// Opens the data dir `dir` (made if missing), loads `dir/memories`,
    /// squares it with the journal, and starts the journal. Fails if
    /// another process has it open.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Memory, OpenError> {
        Memory::open_on(dir, options, None)
    }

    /// [`Memory::open`] with the memory's files (the plain files and the
    /// journal) in the storage whose root `on` is, when given: the
    /// in-memory disk that the power-loss tests cut the power of. The lock,
    /// key and socket stay in `dir/.memfs`. Every part starts in a fixed
    /// order: load, journal, store, shared-store wiring, threads.
    pub fn open_on(
        dir: impl AsRef<Path>,
        options: Options,
        on: Option<crate::persist::storage::Dir>,
    ) -> Result<Memory, OpenError> {
        let on_real_disk = on.is_none();
        let data_dir = DataDir::open_on(dir.as_ref(), on)?;
        let fail = |doing: &'static str| io_error(data_dir.shown(), doing);
        let (mut tree, skipped) = load_tree(&data_dir).map_err(fail("loading memories"))?;
        let files = files_of(&data_dir);
        let (journal, opened) = Journal::open(
            &data_dir.stored,
            &files,
            &mut tree,
            journal_options(&options),
        )
        .map_err(fail("opening its journal (.memfs/journal)"))?;
        let warnings = start_warnings(&skipped, &options.limits.exceeded(&tree));
        let store = Arc::new(Store::new(tree, options.limits, Some(journal.sink())));
        let watches = on_real_disk && !opened.replay_failed;
        let outside = outside_watcher(watches, &store, &data_dir, &files);
        // A shared store: the database commits first (set before any change).
        let shared = options
            .shared
            .as_ref()
            .map(|target| share(target, &journal, &store));
        recover_through(&journal, &store);
        store.restore_usage(last_reads::load(&data_dir.state));
        let saver =
            save_usage_now_and_then(&store, &data_dir).map_err(fail("saving last reads"))?;
        let expiry = options
            .expire_idle
            .map(|idle| crate::control::expire::schedule(&store, idle));
        let follower = match shared {
            Some(follow) => Some(first_follow(follow, options.shared.as_ref(), &store)?),
            None => None,
        };
        if follower.is_some() {
            send_unsent(&data_dir, &store);
        }
        let remote = start_remote(&options, &store, &data_dir)?;
        let (search, control) = search_and_control(&options, &store, &journal, &data_dir);
        Ok(Memory {
            tool: Tool::new(store, options.tool.clone()),
            journal,
            data_dir,
            control,
            saver: Some(saver),
            expiry,
            skipped,
            warnings,
            opened,
            follower,
            search,
            outside,
            remote,
        })
    }

    /// Runs one tool input (a JSON object) to its durable result.
    pub fn call(&self, input: &Value) -> ToolResult {
        self.tool.call(input)
    }

    /// Applies one tool input; see [`Pending::finish`].
    pub fn start(&self, input: &Value) -> Pending {
        self.tool.start(input)
    }

    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    pub fn store(&self) -> &Arc<Store> {
        self.tool.store()
    }

    /// What the load passed over (non-UTF-8 names, special files).
    pub fn skipped(&self) -> &load::Skipped {
        &self.skipped
    }

    /// What the person starting memfs should hear about the data dir: names
    /// left out, and limits it already exceeds (it loads all the same).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Writes out whatever the disk has not taken yet (a refused or
    /// unconfirmed change kept in memory), once more; says whether all of
    /// the memory is now on disk. For the last moments of a process.
    pub fn write_out(&self) -> bool {
        self.save_usage();
        if self.store().unsaved_paths() == 0 {
            return true;
        }
        let written = self.store().sync(crate::store::Origin::Memfs);
        let all = written.is_ok() && self.store().unsaved_paths() == 0;
        if all || self.follower.is_none() {
            return all;
        }
        // A shared store that cannot take them now: kept in this host's
        // copy, and sent by the next start.
        match crate::shared::unsent::keep(&self.data_dir.state_dir, &self.store().unsent()) {
            Ok(n) => {
                crate::say!(
                    "memfs: the shared store could not take {n} path(s) before stopping; they are kept in {}/unsent.json, and the next start sends them",
                    self.data_dir.state_dir.display()
                );
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps when each file was last read, for expiry after a restart
    /// (also done at most once a minute while it runs).
    pub fn save_usage(&self) {
        let _ = last_reads::save(&self.data_dir.state, &self.store().usage());
    }

    pub fn persist_stats(&self) -> Stats {
        self.journal.stats()
    }

    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    /// The owner's key and the history, for the doors' control lines.
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    pub fn history(&self) -> History {
        self.journal.history()
    }

    /// The memory's search index (none under `--no-search`).
    pub fn search(&self) -> Option<&Arc<crate::search::Search>> {
        self.search.as_ref()
    }

    /// What opening the journal found and did.
    pub fn opened(&self) -> &journal::Opened {
        &self.opened
    }
}

/// Saves a store's last reads (held by its memory; a save on the pool
/// finds it gone once the memory closes).
struct UsageSaver {
    store: Weak<Store>,
    state: std::os::fd::OwnedFd,
}

/// Saves last reads once a minute while the memory holds the saver.
fn save_usage_now_and_then(
    store: &Arc<Store>,
    data_dir: &DataDir,
) -> std::io::Result<Arc<UsageSaver>> {
    let saver = Arc::new(UsageSaver {
        store: Arc::downgrade(store),
        state: data_dir.state.try_clone()?,
    });
    crate::pool::background().every(Duration::from_secs(60), Arc::downgrade(&saver), |s| {
        if let Some(store) = s.store.upgrade() {
            let _ = last_reads::save(&s.state, &store.usage());
        }
    });
    Ok(saver)
}

/// Loading a large memory says how far it is, on a terminal only: every
/// 5,000 files and directories, on one line rewritten in place.
struct LoadProgress {
    terminal: bool,
    shown: usize,
    last: usize,
    started: std::time::Instant,
}

const PROGRESS_EVERY: usize = 5_000;

impl LoadProgress {
    fn new() -> Self {
        LoadProgress {
            terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            shown: 0,
            last: 0,
            started: std::time::Instant::now(),
        }
    }

    fn at(&mut self, nodes: usize) {
        self.last = nodes;
        if self.terminal && nodes / PROGRESS_EVERY > self.shown / PROGRESS_EVERY {
            self.shown = nodes;
            {
                use std::io::Write as _;
                let _ = write!(
                    std::io::stderr(),
                    "\rmemfs: loading the memory: {nodes} files and directories"
                );
            }
        }
    }

    fn done(&self) {
        if self.shown > 0 {
            crate::say!(
                "\rmemfs: loaded {} files and directories in {:.1} s          ",
                self.last,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

impl Drop for Memory {
    /// Last reads are kept for the next start, however this process ends its
    /// use of the memory; the journal writes everything out and brings the
    /// plain files up to date.
    fn drop(&mut self) {
        if let Some(outside) = self.outside.take() {
            // What was written there up to now is taken in, then no more.
            outside.drain();
            outside.stop();
        }
        self.save_usage();
        // A push or pull under way ends; what is not sent is found again
        // at the next start.
        self.remote.take();
        if let Some(mut follower) = self.follower.take() {
            follower.stop();
        }
        self.saver.take();
        self.expiry.take();
        if let Some(search) = self.search.take() {
            search.stop();
        }
        self.journal.shutdown();
    }
}

/// The journal's options as the memory's say them.
fn journal_options(options: &Options) -> journal::Options {
    let defaults = journal::Options::default();
    let mut out = journal::Options {
        keep: options.history_keep,
        shared: options.shared.is_some(),
        checkpoint_delay: options
            .checkpoint_delay
            .unwrap_or(defaults.checkpoint_delay),
        segment_bytes: options.segment_bytes.unwrap_or(defaults.segment_bytes),
    };
    if options.no_history {
        out.keep = Keep {
            age: Duration::ZERO,
            bytes: 0,
        };
    }
    out
}

/// A shared store wired in: the database commits first (set before any
/// change), the tree follows what this host committed, and what the
/// follower needs to follow the others.
fn share(
    target: &crate::shared::Target,
    journal: &Journal,
    store: &Arc<Store>,
) -> crate::shared::Follow {
    let origin = journal.origin();
    let db = Arc::new(crate::shared::Db::new(
        target.clone(),
        origin.clone(),
        Box::new(journal.batch_numberer()),
    ));
    journal.share(db.clone());
    // No other host committed between the head a batch found and its
    // last id (it held the head): a tree that had followed to the
    // head has followed through the batch.
    let followed = Arc::downgrade(store);
    db.on_commit(Box::new(move |head, last| {
        if let Some(store) = followed.upgrade() {
            if store.followed() >= head {
                store.follow_to(last);
            }
        }
    }));
    let (busy, wait) = (journal.unsettled(), journal.unsettled());
    store.mark_shared(crate::store::Hold {
        busy: Box::new(move |paths| busy.busy(paths)),
        wait: Box::new(move |limit| wait.wait(limit)),
    });
    store.follow_to(journal.followed());
    crate::shared::Follow {
        target: target.clone(),
        origin,
        held: journal.own_held(),
        confirmed: db.confirmed(),
        store: Arc::downgrade(store),
        unsettled: journal.unsettled(),
    }
}

/// What an earlier run of a shared store kept unsent, sent now.
fn send_unsent(data_dir: &DataDir, store: &Arc<Store>) {
    match crate::shared::unsent::send(&data_dir.state_dir, store) {
        Ok(0) => {}
        Ok(n) => tracing::info!("sent {n} path(s) an earlier run kept unsent"),
        Err(e) => {
            tracing::warn!("what an earlier run kept unsent is not sent yet ({e}); it stays kept")
        }
    }
}

/// Starts the plain files' watcher (`crate::outside`); without it (the
/// kernel refuses one), the plain files are read at the next start only.
fn watch_plain_files(
    store: &Arc<Store>,
    data_dir: &DataDir,
    files: &Files,
) -> Option<Arc<crate::outside::Outside>> {
    let path = data_dir.state_dir.parent()?.join("memories");
    match crate::outside::Outside::start(store, path, files.memories.clone(), files.known.clone()) {
        Ok(outside) => Some(outside),
        Err(e) => {
            tracing::warn!(
                "changes made to the plain files while memfs runs cannot be watched ({}); they are taken in at the next start",
                crate::units::describe_io(&e)
            );
            None
        }
    }
}

/// Starts following a shared store. A store this host has no copy of
/// (nothing followed, no file) that cannot be reached is an error: an
/// empty answer would tell an agent its memory is empty. With a copy, the
/// copy is served while memfs keeps trying.
fn first_follow(
    follow: crate::shared::Follow,
    target: Option<&crate::shared::Target>,
    store: &Store,
) -> Result<crate::shared::Follower, OpenError> {
    let (mut follower, reached) = follow.start(Duration::from_secs(30));
    match reached {
        Err(crate::journal::UpstreamError::Unreachable(cause))
            if store.followed() == 0 && store.with_tree(|t| t.entry_count() == 0) =>
        {
            follower.stop();
            Err(OpenError::SharedUnreachable {
                store: target.map(|t| t.shown()).unwrap_or_default(),
                cause,
            })
        }
        Err(crate::journal::UpstreamError::Unreachable(_)) => {
            store.set_unreachable(Some(std::time::SystemTime::now()));
            Ok(follower)
        }
        _ => Ok(follower),
    }
}

/// Starts keeping the cache and its store over HTTP in step, if the data
/// dir is one's cache.
fn start_remote(
    options: &Options,
    store: &Arc<Store>,
    data_dir: &DataDir,
) -> Result<Option<crate::remote::Remote>, OpenError> {
    let Some(remote) = &options.remote else {
        return Ok(None);
    };
    crate::remote::Remote::start(remote, store, &data_dir.state_dir)
        .map(Some)
        .map_err(|e| OpenError::Remote {
            store: remote.url.shown(),
            cause: e.to_string(),
        })
}

fn start_warnings(skipped: &load::Skipped, exceeded: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let left_out = [
        (skipped.non_utf8_names, "name(s) that are not UTF-8"),
        (
            skipped.unaddressable_names,
            "name(s) the memory tool cannot address (control characters, backslashes, encoded `.` or `/`)",
        ),
        (skipped.special_files, "special file(s)"),
    ];
    for (count, what) in left_out {
        if count > 0 {
            out.push(format!("left out {count} {what} found in the data dir"));
        }
    }
    out.extend(exceeded.iter().map(|e| {
        format!("{e}; it loads, and only changes that would grow it further are refused")
    }));
    out
}
