//! Full-text search over one memory: derived state kept in
//! `DIR/.memfs/search/`, brought up to date from the journal and read for
//! what matched, never for what a file holds (lines and snippets are cut
//! from the live file).
//!
//! A memory's [`Search`] follows its journal a few times a second: the
//! rows since the last look name the paths that changed (from any door, and
//! from other hosts of a shared store, whose changes the journal records
//! too), and each such path is put again as the tree holds it now, or
//! removed. The first look of a process compares the whole tree with the
//! index (an index that is missing, damaged or made by another analyzer is
//! built again from the tree first); so does the first look after the
//! journal was rewritten (a compaction, a redaction), which then also
//! rewrites the index without its deleted documents, so that a redacted
//! content leaves the index's files. A search looks first, so a change is
//! found as soon as its call returned.
//!
//! A crate of its own (docs/DESIGN.md, "Crates"): tantivy is compiled
//! once, here, and search uses `memfs-core` and `memfs-durable` only.

// The lower crates' modules under the names the rest of memfs knows them by.
use memfs_core::{digest, lock, path, pool, store, text, tool};
use memfs_durable::journal;

pub mod analyze;
mod deadline;
pub mod error;
pub mod index;
pub mod lines;
pub mod query;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::digest::Sha;
use crate::journal::{Cursor, History, REDACTED_PATH};
use crate::lock::{rank, Mutex};
use crate::path::MemPath;
use crate::store::{Ino, NodeKind, Store, Tree};
use crate::tool::Hide;

pub use error::IndexError;
pub use index::Index;
pub use lines::Line;
pub use query::Query;

/// How often a memory's index looks at its journal.
pub const PERIOD: Duration = Duration::from_millis(300);

/// How long an index keeps its writer after its last change.
pub const WRITER_IDLE: Duration = Duration::from_secs(10);

/// How long an index stays open after its last search or change: then its
/// reader (the segments' maps and caches) and writer go, and a store
/// nobody searches or writes holds nothing of search but its state here
/// (issue 54). The next change or search opens it again.
pub const INDEX_IDLE: Duration = Duration::from_secs(30);

/// [`INDEX_IDLE`], or `MEMFS_SEARCH_IDLE_MS` from the environment (read
/// once: an operator's choice, and the tests' way to see an index close).
fn index_idle() -> Duration {
    static IDLE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *IDLE.get_or_init(|| {
        std::env::var("MEMFS_SEARCH_IDLE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(INDEX_IDLE, Duration::from_millis)
    })
}

/// The most results one search returns.
pub const MOST_RESULTS: usize = 100;
/// Results when the caller does not say.
pub const DEFAULT_RESULTS: usize = 20;
/// Matched lines shown of one file.
pub const LINES_PER_FILE: usize = 3;

/// Why a search gave no results.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query: the caller's to fix.
    #[error(transparent)]
    Query(#[from] query::QueryError),
    /// The index could not answer (memfs' side).
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The memory closed while the search was asked.
    #[error("the memory is closed")]
    Closed,
}

/// One file that matched.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// `/memories/...`.
    pub path: String,
    pub score: f32,
    /// Its first matched lines (none when only its path matched).
    pub lines: Vec<Line>,
}

/// What a search is asked.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    pub query: &'a str,
    pub limit: usize,
    /// Only paths below this (relative, or `/memories/...`).
    pub under: Option<&'a str>,
    /// Names left out (the agent's doors pass the tool's; none: a person
    /// who asked for all).
    pub hide: Option<&'a Hide>,
}

struct State {
    /// The memory closed: no more looks.
    stopped: bool,
    /// The index while open (see [`INDEX_IDLE`]).
    index: Option<Index>,
    /// The index was compared with the whole tree in this process (built
    /// again if it was lost or damaged): once it is, an index closed for
    /// idleness opens for what the journal names only.
    checked: bool,
    /// The last search or change of the index.
    used: Instant,
    /// Where the journal was read up to.
    cursor: Option<Cursor>,
    /// The journal's redactions when it was last read.
    redactions: u64,
    /// The bytes each path's document was made from (while the tree holds
    /// them unchanged, a comparison needs no hash).
    known: HashMap<String, Known>,
}

/// The bytes a path's document was made from, and their sha256 (what the
/// index holds of it): a document found is current when the tree still
/// holds those very bytes and the document found is that sha's.
type Known = (Weak<Vec<u8>>, String);

/// The index of one memory, and what keeps it current.
pub struct Search {
    state: Mutex<State>,
    store: Weak<Store>,
    history: History,
    dir: PathBuf,
    new_dir: PathBuf,
}

/// A live file as the tree holds it: its relative path and bytes.
type Live = (String, Arc<Vec<u8>>);

impl Search {
    /// The index of the memory `store` in the data dir whose `.memfs` is
    /// `state_dir`, looking at the journal every [`PERIOD`] from now on
    /// (for as long as the returned value is held).
    pub fn start(store: &Arc<Store>, history: History, state_dir: &std::path::Path) -> Arc<Search> {
        let (dir, new_dir) = index::dirs(state_dir);
        let search = Arc::new(Search {
            state: Mutex::new(
                rank::SEARCH,
                State {
                    stopped: false,
                    index: None,
                    checked: false,
                    used: Instant::now(),
                    cursor: None,
                    redactions: 0,
                    known: HashMap::new(),
                },
            ),
            store: Arc::downgrade(store),
            history,
            dir,
            new_dir,
        });
        crate::pool::search().every(PERIOD, Arc::downgrade(&search), Search::tick);
        search
    }

    /// Brings the index up to date with the journal (and the tree).
    pub fn catch_up(&self) -> Result<(), IndexError> {
        self.catch_up_with(false)
    }

    /// [`Search::catch_up`]; with `unrecorded`, also the files written
    /// through the mount that are not a version yet (a save the flusher
    /// has not handed to the journal), so that a search right after a save
    /// finds it.
    fn catch_up_with(&self, unrecorded: bool) -> Result<(), IndexError> {
        let mut st = self.state.lock();
        let Some(store) = self.store.upgrade().filter(|_| !st.stopped) else {
            return Ok(());
        };
        let looked = self.look(&mut st, &store, unrecorded);
        if looked.is_err() {
            // The rows read are not in the index: the next look reads the
            // whole journal again and compares the whole tree.
            st.cursor = None;
        }
        looked
    }

    /// One look (see [`Search::catch_up_with`]), under the state's lock.
    fn look(&self, st: &mut State, store: &Store, unrecorded: bool) -> Result<(), IndexError> {
        let first = !st.checked;
        let (rows, all) = self
            .history
            .rows_after(&mut st.cursor)
            .map_err(|r| IndexError::History(r.0))?;
        // Read after the rows: a redaction counts under the journal's lock
        // that `rows_after` takes.
        let redactions = self.history.redactions();
        let touched = touched(&rows, unrecorded.then_some(store));
        if !first && !all && touched.is_empty() {
            // Nothing changed: an index closed for idleness stays closed.
            return Ok(());
        }
        st.used = Instant::now();
        if st.index.is_none() {
            st.index = Some(self.open_or_build(store)?);
        }
        let Some(index) = st.index.as_mut() else {
            return Ok(());
        };
        if all || first {
            let live = store.with_tree(|t| files_below(t, &MemPath::root()));
            let docs: Vec<String> = index.docs().keys().cloned().collect();
            update(index, &mut st.known, live, docs)?;
            // A redaction (or, on a first look, maybe one while nobody
            // looked): what it erased goes from the index's files too.
            if first || redactions != st.redactions {
                index.purge()?;
                st.redactions = redactions;
            }
            st.checked = true;
            return Ok(());
        }
        let live = store.with_tree(|t| {
            touched
                .iter()
                .flat_map(|at| files_below(t, at))
                .collect::<Vec<_>>()
        });
        let docs = touched
            .iter()
            .flat_map(|at| docs_below(index.docs(), &at.relative()))
            .collect();
        update(index, &mut st.known, live, docs)
    }

    /// The index in the data dir, or a new one of the whole tree when it
    /// is missing, damaged or made by another analyzer.
    /// (Not when the failure may pass, a full disk or no file descriptor
    /// left: a build would fail the same way, or throw a good index away.)
    fn open_or_build(&self, store: &Store) -> Result<Index, IndexError> {
        Index::open(&self.dir).or_else(|why| {
            if why.passing() {
                return Err(why);
            }
            tracing::info!("building the search index ({why})");
            self.rebuild(store)
        })
    }

    /// The background look: [`Search::catch_up`], then the index's writer
    /// let go once idle.
    fn tick(&self) {
        if let Err(e) = self.catch_up() {
            tracing::warn!("the search index is not current: {e}");
        }
        let mut st = self.state.lock();
        if st.used.elapsed() >= index_idle() {
            st.index = None;
        } else if let Some(index) = st.index.as_mut() {
            index.drop_idle_writer(WRITER_IDLE);
        }
    }

    /// Stops looking, once a look under way has ended, and closes the
    /// index (the memory is closing: the next owner of the data dir opens
    /// it).
    pub fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        st.index = None;
    }

    /// A new index of the whole tree, made beside the old one and put in
    /// its place.
    fn rebuild(&self, store: &Store) -> Result<Index, IndexError> {
        let live = store.with_tree(|t| files_below(t, &MemPath::root()));
        let bytes = live.iter().map(|(_, d)| d.len() as u64).sum();
        let puts = live.into_iter().map(|(p, d)| put(p, &d)).collect();
        let _ = std::fs::remove_dir_all(&self.new_dir);
        Index::build(&self.new_dir, puts, bytes)?;
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::rename(&self.new_dir, &self.dir)
            .map_err(error::disk("put in the old one's place"))?;
        Index::open(&self.dir)
    }

    /// The index as it stands now, opened again if it was closed for
    /// idleness (with nothing changed since).
    fn view(&self, store: &Store) -> Result<index::View, SearchError> {
        let mut st = self.state.lock();
        if st.stopped {
            return Err(SearchError::Closed);
        }
        st.used = Instant::now();
        if st.index.is_none() {
            st.index = Some(self.open_or_build(store)?);
        }
        let index = st.index.as_ref().expect("opened above");
        Ok(index.view())
    }

    /// The files that match, best first, and whether the search was cut
    /// at its deadline ([`deadline`]).
    pub fn search(&self, ask: &Ask) -> Result<Found, SearchError> {
        let began = Instant::now();
        let until = began + deadline();
        let mut query = query::parse(ask.query)?;
        if let Some(under) = ask.under {
            if query.under.is_some() {
                return Err(query::QueryError::PathTwice.into());
            }
            query.under = Some(query::under(under));
        }
        let limit = ask.limit.clamp(1, MOST_RESULTS);
        let Some(store) = self.store.upgrade() else {
            return Err(SearchError::Closed);
        };
        // A save through the mount the flusher has handed to the journal
        // but the journal has not committed is neither a dirty file nor a
        // row yet: wait for what is queued (the barrier writes nothing).
        let _ = store.barrier(crate::store::Origin::Memfs).wait();
        self.catch_up_with(true)?;
        // The index as it stands, searched without the lock: a long search
        // holds up no other search and no update.
        let view = self.view(&store)?;
        // More than asked: some may be hidden from the caller, or changed
        // since they were indexed and no longer match.
        let (found, mut cut) = view.search(&query, limit * 2 + 10, until)?;
        // The bytes each found document was made from, while the tree
        // still holds them (then it is current without a hash).
        let made_from: Vec<Option<Known>> = {
            let st = self.state.lock();
            found
                .iter()
                .map(|f| st.known.get(&f.path).cloned())
                .collect()
        };
        let mut hits = Vec::new();
        for (f, made_from) in found.into_iter().zip(made_from) {
            if hits.len() >= limit {
                break;
            }
            // (Past the deadline, what was found is still answered, without
            // its lines.)
            let late = Instant::now() >= until;
            cut |= late;
            if let Some(hit) = checked(&store, &query, ask.hide, f, made_from, late) {
                hits.push(hit);
            }
        }
        Ok(Found {
            hits,
            cut: cut.then(|| Cut { after: deadline() }),
        })
    }
}

/// What a search found.
#[derive(Debug)]
pub struct Found {
    pub hits: Vec<Hit>,
    /// The search was cut at its deadline: files that match may be
    /// missing from `hits`.
    pub cut: Option<Cut>,
}

/// A search cut at its deadline.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    pub after: Duration,
}

impl Cut {
    /// What the caller is told.
    pub fn said(&self) -> String {
        format!(
            "the search was cut after {} ms (its deadline, --search-deadline-ms): files that match may be missing; a narrower query (fewer or rarer words, path:) finds them",
            self.after.as_millis()
        )
    }
}

/// How long one search may take by default (a phrase over pathological
/// text stops there, and says so).
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(500);

/// The deadline in milliseconds, as this process was started with.
static DEADLINE_MS: AtomicU64 = AtomicU64::new(DEFAULT_DEADLINE.as_millis() as u64);

/// How long one search may take in this process.
pub fn deadline() -> Duration {
    Duration::from_millis(DEADLINE_MS.load(Ordering::Relaxed))
}

/// Sets [`deadline`] for this process (`--search-deadline-ms`; at least 1 ms).
pub fn set_deadline(d: Duration) {
    DEADLINE_MS.store(
        d.as_millis().clamp(1, u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// The paths `rows` changed and, given the store, the files written
/// through the mount that are no version yet; sorted, each once.
fn touched(rows: &[crate::journal::Row], unrecorded: Option<&Store>) -> Vec<MemPath> {
    let mut out: Vec<MemPath> = rows
        .iter()
        .flat_map(|row| std::iter::once(&row.path).chain(row.from.as_ref()))
        .filter(|p| p.as_str() != REDACTED_PATH)
        .filter_map(|p| MemPath::parse(p).ok())
        .collect();
    if let Some(store) = unrecorded {
        out.extend(store.with_tree(|t| {
            t.dirty_files()
                .into_iter()
                .filter_map(|ino| t.path_of(ino))
                .collect::<Vec<_>>()
        }));
    }
    out.sort();
    out.dedup();
    out
}

/// A document found, as a result: none when its path is hidden from the
/// caller or gone, or when the file changed since it was indexed and no
/// longer matches; its lines cut from the file as it is now.
///
/// `late`: the search's deadline has passed: a file changed since it was
/// indexed is left out (not looked at again), and no lines are cut.
fn checked(
    store: &Store,
    query: &Query,
    hide: Option<&Hide>,
    f: index::Found,
    made_from: Option<Known>,
    late: bool,
) -> Option<Hit> {
    let at = MemPath::parse(&format!("/memories/{}", f.path)).ok()?;
    let shown = at.to_string();
    if hide.is_some_and(|h| h.hides_path(&shown)) || crate::path::is_tool_state(&shown) {
        return None;
    }
    let data = store.with_tree(|t| file_at(t, &at))?;
    let text = text_of(&data);
    // (Made from these very bytes, and the document found is theirs: a
    // document of older bytes is found, then the path re-indexed, is not.)
    let current = made_from
        .filter(|(_, sha)| *sha == f.sha)
        .and_then(|(bytes, _)| bytes.upgrade())
        .is_some_and(|had| Arc::ptr_eq(&had, &data))
        || Sha::of(&data).to_string() == f.sha;
    if !current && (late || !lines::still_matches(query, &f.path, text.unwrap_or(""))) {
        return None;
    }
    Some(Hit {
        path: shown,
        score: f.score,
        lines: match (text, late) {
            (Some(t), false) => lines::lines(query, t, LINES_PER_FILE),
            _ => Vec::new(),
        },
    })
}

/// Puts what `live` holds that the index does not, and removes the paths
/// of `docs` that are not in `live`.
fn update(
    index: &mut Index,
    known: &mut HashMap<String, Known>,
    live: Vec<Live>,
    docs: Vec<String>,
) -> Result<(), IndexError> {
    // (A path below two touched ones is listed twice: put once.)
    let live: BTreeMap<String, Arc<Vec<u8>>> = live.into_iter().collect();
    let mut puts = Vec::new();
    // (Known only once the index holds them.)
    let mut seen = Vec::new();
    for (path, data) in &live {
        let same = known
            .get(path)
            .and_then(|(bytes, _)| bytes.upgrade())
            .is_some_and(|had| Arc::ptr_eq(&had, data));
        if same && index.docs().contains_key(path) {
            continue;
        }
        let sha = Sha::of(data).to_string();
        seen.push((path.clone(), (Arc::downgrade(data), sha.clone())));
        if index.docs().get(path) != Some(&sha) {
            puts.push(index::Put {
                path: path.clone(),
                sha,
                text: text_of(data).map(str::to_string),
            });
        }
    }
    let mut removes: Vec<String> = docs.into_iter().filter(|d| !live.contains_key(d)).collect();
    removes.sort();
    removes.dedup();
    let gone = removes.clone();
    index.update(puts, removes)?;
    for path in gone {
        known.remove(&path);
    }
    known.extend(seen);
    Ok(())
}

fn put(path: String, data: &[u8]) -> index::Put {
    index::Put {
        sha: Sha::of(data).to_string(),
        text: text_of(data).map(str::to_string),
        path,
    }
}

/// A file's bytes as text: UTF-8 with no NUL (anything else is found by
/// its path only).
fn text_of(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok().filter(|t| !t.contains('\0'))
}

/// The paths of `docs` at or below `at` (relative; empty: all).
fn docs_below(docs: &BTreeMap<String, String>, at: &str) -> Vec<String> {
    if at.is_empty() {
        return docs.keys().cloned().collect();
    }
    let mut out: Vec<String> = docs
        .get_key_value(at)
        .map(|(k, _)| k.clone())
        .into_iter()
        .collect();
    let below = format!("{at}/");
    out.extend(
        docs.range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .map(|(k, _)| k.clone()),
    );
    out
}

/// The bytes of the file at `at`, if a file is there.
fn file_at(tree: &Tree, at: &MemPath) -> Option<Arc<Vec<u8>>> {
    let ino = tree.resolve(at).ok()?;
    match &tree.node(ino).kind {
        NodeKind::File(data) => Some(data.clone()),
        _ => None,
    }
}

/// Every file at or below `at`, with its relative path (memfs' own state
/// in the memory, such as `.git`, left out).
fn files_below(tree: &Tree, at: &MemPath) -> Vec<Live> {
    let mut out = Vec::new();
    let Ok(ino) = tree.resolve(at) else {
        return out;
    };
    let mut stack: Vec<(String, Ino)> = vec![(at.relative(), ino)];
    while let Some((path, ino)) = stack.pop() {
        match &tree.node(ino).kind {
            NodeKind::File(data) if !path.is_empty() && !crate::path::is_tool_state(&path) => {
                out.push((path, data.clone()));
            }
            NodeKind::Dir(entries) => {
                for (name, child) in entries {
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    };
                    stack.push((p, *child));
                }
            }
            _ => {}
        }
    }
    out
}
