//! The stores of a stores root: `ROOT/STORE_ID/` is each store's data dir
//! (a memory as every other door knows it), `ROOT/.memfs/stores/ID.json`
//! its name, description and metadata. A store is opened (owned by this
//! process, its socket served for the other doors) when a request first
//! needs it, and closed again when it has been idle for a while, so that
//! many thousands fit in one server.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};

use super::atomic::write_atomic;
use super::catalog_pg::PgCatalog;
use super::error::{ApiError, ApiResult};
use super::ids::IdIndex;
pub use super::metas::StoreMeta;
use super::metas::{self, Metas};
use crate::fuse::Hosted;
use crate::memory::{Memory, Options};
use crate::persist::OpenError;
use crate::serve::socket::SocketServer;

/// What bounds the socket each open store serves.
#[derive(Debug, Clone, Copy)]
pub struct SocketBounds {
    pub client_timeout: Duration,
    pub max_line: usize,
}

/// One store, open in this process.
pub struct OpenStore {
    pub id: String,
    pub memory: Memory,
    server: Mutex<Option<SocketServer>>,
    hosted: Arc<Hosted>,
    /// Memory ids, derived from the history.
    pub ids: Mutex<IdIndex>,
    last_used: Mutex<Instant>,
    /// Requests that hold it now.
    busy: AtomicUsize,
    /// A close of it is scheduled on the background pool.
    closing: std::sync::atomic::AtomicBool,
    /// Its changes counted, for the versions listing's long poll.
    pub changed: Arc<super::changed::Changed>,
}

impl OpenStore {
    fn is_idle(&self, idle: Duration) -> bool {
        self.busy.load(Ordering::SeqCst) == 0
            && self.last_used.lock().elapsed() >= idle
            && self.hosted.is_empty()
            && self
                .server
                .lock()
                .as_ref()
                .is_none_or(|s| s.idle_for().is_some_and(|d| d >= idle))
    }

    /// Stops its doors and writes it out; false if something was left unsaved.
    fn close(&self) -> bool {
        if let Some(mut server) = self.server.lock().take() {
            server.stop();
        }
        let unmounted = self.hosted.unmount_all();
        unmounted && self.memory.write_out()
    }
}

/// A request's hold on an open store: while it lives, the store stays open.
pub struct Held {
    store: Arc<OpenStore>,
}

impl std::ops::Deref for Held {
    type Target = OpenStore;
    fn deref(&self) -> &OpenStore {
        &self.store
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        *self.store.last_used.lock() = Instant::now();
        self.store.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether `id` can be a store id: `memstore_` and 1 to 64 ASCII letters
/// and digits (it names a directory: nothing else may reach the disk). This
/// server makes lowercase ones; the hosted API's, which a mirror keeps
/// (`memfs --stores ROOT mirror`), mix cases.
pub fn is_store_id(id: &str) -> bool {
    id.strip_prefix("memstore_").is_some_and(|rest| {
        !rest.is_empty() && rest.len() <= 64 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

pub struct Registry {
    root: PathBuf,
    state: PathBuf,
    options: Options,
    bounds: SocketBounds,
    /// How long an unused store stays open.
    pub idle: Duration,
    metas: Mutex<Metas>,
    open: Mutex<HashMap<String, Arc<OpenStore>>>,
    /// The most stores held open at once (past it, the one unused longest
    /// is closed to make room; when every one is in use, 503).
    max_open: AtomicUsize,
    /// The catalog in PostgreSQL of a stores root there (`root` is then
    /// this server's cache: its copy of each store it opens).
    catalog: Option<Arc<PgCatalog>>,
    /// The catalog's `gen` this server's records are current through.
    seen: std::sync::atomic::AtomicI64,
    /// One lock per store, serializing that store's opening, closing,
    /// deletion and record changes (never held while a request runs). Per
    /// store: one store that is slow to open (a long replay) or to close
    /// (a checkpoint on a slow disk) delays no other store's first use.
    opening: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

/// The process (or the system) has no file descriptor left.
fn out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

fn out_of_files_answer() -> ApiError {
    ApiError::unavailable(
        "the server has no file descriptor left to open this store; try again shortly",
    )
}

fn io_error(doing: &str) -> impl Fn(io::Error) -> ApiError + '_ {
    move |e| {
        tracing::warn!("{doing}: {e}");
        ApiError::internal(format!(
            "the server could not {doing}: {}",
            crate::units::describe_io(&e)
        ))
    }
}

/// Why a stores root in PostgreSQL could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenRootError {
    #[error("cannot make the cache {}: {}", .cache.display(), crate::units::describe_io(.source))]
    Cache {
        cache: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Catalog(#[from] super::catalog::CatalogError),
}

impl Registry {
    /// The stores root `root` (made if missing), its records read.
    pub fn open(
        root: &Path,
        options: Options,
        bounds: SocketBounds,
        idle: Duration,
    ) -> io::Result<Registry> {
        let state = root.join(".memfs");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state.join("stores"))?;
        let mut metas = Metas::default();
        for entry in fs::read_dir(state.join("stores"))? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !is_store_id(id) {
                continue;
            }
            match serde_json::from_slice::<StoreMeta>(&fs::read(entry.path())?) {
                Ok(meta) if meta.id == id => metas.insert(meta),
                _ => tracing::warn!("the record of store {id} is damaged; it is left out"),
            }
        }
        Ok(Registry {
            root: root.to_path_buf(),
            state,
            options,
            bounds,
            idle,
            metas: Mutex::new(rank::REGISTRY_METAS, metas),
            open: Mutex::new(rank::REGISTRY_OPEN, HashMap::new()),
            max_open: AtomicUsize::new(usize::MAX),
            catalog: None,
            seen: std::sync::atomic::AtomicI64::new(0),
            opening: Mutex::new(rank::REGISTRY_OPENING, HashMap::new()),
        })
    }

    /// The catalog in PostgreSQL, for a root there.
    pub fn catalog(&self) -> Option<&Arc<PgCatalog>> {
        self.catalog.as_ref()
    }

    /// The stores root in PostgreSQL that `catalog` holds, each store's copy
    /// kept under `cache` (made if missing).
    pub fn open_pg(
        cache: &Path,
        catalog: Arc<PgCatalog>,
        options: Options,
        bounds: SocketBounds,
        idle: Duration,
    ) -> Result<Registry, OpenRootError> {
        let mut reg = Registry::open(cache, options, bounds, idle).map_err(|source| {
            OpenRootError::Cache {
                cache: cache.to_path_buf(),
                source,
            }
        })?;
        reg.catalog = Some(catalog);
        reg.take_in_catalog()?;
        Ok(reg)
    }

    /// Takes in the records another server changed since this one last
    /// looked; a store deleted there is closed here.
    fn refresh(&self) {
        if let Err(e) = self.take_in_catalog() {
            tracing::warn!("reading the catalog: {e}");
        }
    }

    /// [`Registry::refresh`]'s one round trip: the records changed past
    /// the `gen` this server holds (none, most times).
    fn take_in_catalog(&self) -> Result<(), super::catalog::CatalogError> {
        let Some(catalog) = &self.catalog else {
            return Ok(());
        };
        let (gen, changed) = catalog.changed_since(self.seen.load(Ordering::SeqCst))?;
        for (id, meta) in changed {
            match meta {
                Some(meta) => self.metas.lock().insert(meta),
                None => {
                    self.metas.lock().remove(&id);
                    let open = self.open.lock().get(&id).cloned();
                    if let Some(store) = open {
                        self.close_if_idle(&store, Duration::ZERO);
                    }
                }
            }
        }
        self.seen.fetch_max(gen, Ordering::SeqCst);
        Ok(())
    }

    /// In a root in PostgreSQL: waits until this server's copy of `held`
    /// holds every version the database does (a write another server
    /// acknowledged is seen here on the next read).
    fn caught_up(&self, held: &Held, head: Option<u64>) -> ApiResult<()> {
        let Some(catalog) = &self.catalog else {
            return Ok(());
        };
        let head = match head {
            Some(head) => head,
            None => catalog
                .head(&held.id)
                .map_err(|e| ApiError::from_catalog(e, "the store's database cannot be reached"))?,
        };
        let store = held.memory.store();
        if !store.wait_followed(head, Duration::from_secs(5)) {
            return Err(ApiError::unavailable(
                "this server is still catching up with the store's database",
            ));
        }
        // The tree has them; the history (which ids and versions come from)
        // once the journal takes what the follower queued.
        let _ = store.barrier(crate::store::Origin::Memfs).wait();
        Ok(())
    }

    /// The lock that serializes opening, closing and changing store `id`.
    fn store_lock(&self, id: &str) -> Arc<Mutex<()>> {
        self.opening
            .lock()
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(rank::REGISTRY_STORE, ())))
            .clone()
    }

    /// The data dir of store `id`.
    pub fn data_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Store `id`'s record. In a root in PostgreSQL it is read from the
    /// database each time (another server may have made, changed or
    /// deleted it a moment ago); this server's copy answers only while the
    /// database cannot.
    pub fn meta(&self, id: &str) -> Option<StoreMeta> {
        let Some(catalog) = &self.catalog else {
            let known = self.metas.lock().get(id).cloned();
            return known.or_else(|| self.meta_on_disk(id));
        };
        if !is_store_id(id) {
            return None;
        }
        match catalog.store(id) {
            Ok(found) => self.took(id, found),
            Err(e) => {
                tracing::warn!("reading store {id}'s record: {e}");
                self.metas.lock().get(id).cloned()
            }
        }
    }

    /// Store `id`'s record as just read from the database (none: there is
    /// no such store), kept as this server's copy.
    pub fn took(&self, id: &str, found: Option<StoreMeta>) -> Option<StoreMeta> {
        match &found {
            Some(meta) => self.metas.lock().insert(meta.clone()),
            None => {
                self.metas.lock().remove(id);
            }
        }
        found
    }

    /// One page of a listing of stores, and whether more follow (its cost
    /// is what it returns, not how many stores there are).
    pub fn list(&self, query: &metas::Query) -> (Vec<StoreMeta>, bool) {
        // (In PostgreSQL: what other servers changed first.)
        self.refresh();
        self.metas.lock().page(query)
    }

    /// The store the API request tagged `tag` made within `window`, if any
    /// (its retry is answered with it).
    pub fn made_by(&self, tag: &str, window: Duration) -> Option<StoreMeta> {
        self.refresh();
        let meta = self.metas.lock().made_by(tag).cloned()?;
        let young = metas::parse_time(&meta.created_at)
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < window);
        young.then_some(meta)
    }

    /// Where a listing's cursor that names a store stands.
    pub fn position_of(&self, id: &str) -> Option<(String, String)> {
        self.metas.lock().position_of(id)
    }

    pub fn count(&self) -> usize {
        self.metas.lock().len()
    }

    /// Whether store `id` is open here now (a request on it opens nothing)
    /// and, for `read`, holds no change its journal is still writing (a
    /// read on it waits for nothing).
    pub fn is_open(&self, id: &str, read: bool) -> bool {
        match self.open.lock().get(id) {
            Some(store) => !read || store.memory.store().in_step(),
            None => false,
        }
    }

    pub fn open_count(&self) -> usize {
        self.open.lock().len()
    }

    /// Sets the most stores held open at once.
    pub fn set_max_open(&self, max: usize) {
        self.max_open.store(max.max(1), Ordering::Relaxed);
    }

    /// Closes the open stores unused longest until there is room for
    /// another (each closer takes its own: two requests never pick the same
    /// one); an error when every open store is in use.
    fn make_room(&self) -> ApiResult<()> {
        let max = self.max_open.load(Ordering::Relaxed);
        for _ in 0..64 {
            let victim = {
                let open = self.open.lock();
                if open.len() < max {
                    return Ok(());
                }
                let oldest = open
                    .values()
                    .filter(|s| !s.closing.load(Ordering::SeqCst) && s.is_idle(Duration::ZERO))
                    .min_by_key(|s| *s.last_used.lock())
                    .cloned();
                oldest.filter(|s| !s.closing.swap(true, Ordering::SeqCst))
            };
            let Some(store) = victim else {
                return Err(ApiError::unavailable(format!(
                    "the server holds {max} stores open, each in use; try again shortly"
                )));
            };
            self.close_if_idle(&store, Duration::ZERO);
            store.closing.store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Closes `store` if it has been unused for `idle` (checked again under
    /// its lock: a request may have taken it meanwhile).
    fn close_if_idle(&self, store: &Arc<OpenStore>, idle: Duration) {
        let lock = self.store_lock(&store.id);
        let _one = lock.lock();
        {
            let mut open = self.open.lock();
            if !store.is_idle(idle) || !open.get(&store.id).is_some_and(|s| Arc::ptr_eq(s, store)) {
                return;
            }
            open.remove(&store.id);
        }
        if !store.close() {
            tracing::warn!("store {}: some paths could not be written out", store.id);
        }
        tracing::debug!("closed idle store {}", store.id);
    }

    fn save_meta(&self, meta: &StoreMeta) -> ApiResult<()> {
        if let Some(catalog) = &self.catalog {
            return catalog
                .put_store(meta)
                .map_err(|e| ApiError::from_catalog(e, "the store's record could not be saved"));
        }
        let text =
            serde_json::to_vec_pretty(meta).map_err(|e| ApiError::internal(e.to_string()))?;
        write_atomic(
            &self.state.join("stores").join(format!("{}.json", meta.id)),
            &text,
        )
        .map_err(io_error("save the store's record"))
    }

    /// A store's record that another process wrote into a root on disk
    /// since this one read the records (`memfs --stores ROOT mirror`
    /// beside a running server), taken in.
    fn meta_on_disk(&self, id: &str) -> Option<StoreMeta> {
        if !is_store_id(id) {
            return None;
        }
        let text = fs::read(self.state.join("stores").join(format!("{id}.json"))).ok()?;
        let meta = serde_json::from_slice::<StoreMeta>(&text)
            .ok()
            .filter(|m| m.id == id)?;
        self.metas.lock().insert(meta.clone());
        Some(meta)
    }

    /// Makes a new, empty store.
    pub fn create(
        &self,
        name: String,
        description: String,
        metadata: BTreeMap<String, String>,
        request: Option<String>,
    ) -> ApiResult<StoreMeta> {
        let mut bytes = [0u8; 12];
        super::tokens::random(&mut bytes).map_err(io_error("make a store id"))?;
        let id = format!(
            "memstore_{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        self.make(id, name, description, metadata, request)
    }

    /// Makes store `id` of a root on disk, the record of a mirror of the
    /// store of that id over HTTP (whose cache the caller then fills in
    /// its data dir); refused if the root has a store or a dir of that id.
    pub fn create_mirror(&self, id: &str, name: String) -> ApiResult<StoreMeta> {
        if self.catalog.is_some() {
            return Err(ApiError::invalid(
                "a stores root in PostgreSQL holds no mirror of a store over HTTP",
            ));
        }
        if !is_store_id(id) {
            return Err(ApiError::invalid(format!(
                "`{}` cannot be a store id here (memstore_ and up to 64 letters and digits)",
                crate::text::clip(id)
            )));
        }
        if self.meta(id).is_some() || self.root.join(id).exists() {
            return Err(ApiError::invalid(format!(
                "the stores root already has a store {id}"
            )));
        }
        self.make(id.to_string(), name, String::new(), BTreeMap::new(), None)
    }

    fn make(
        &self,
        id: String,
        name: String,
        description: String,
        metadata: BTreeMap<String, String>,
        request: Option<String>,
    ) -> ApiResult<StoreMeta> {
        let now = crate::journal::now_text();
        let meta = StoreMeta {
            id: id.clone(),
            name,
            description,
            metadata,
            created_at: now.clone(),
            updated_at: now,
            archived_at: None,
            redactions: BTreeMap::new(),
            request,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.root.join(&id).join("memories"))
            .map_err(io_error("make the store's data dir"))?;
        self.save_meta(&meta)?;
        self.metas.lock().insert(meta.clone());
        Ok(meta)
    }

    /// Changes a store's record with `change`.
    pub fn update(
        &self,
        id: &str,
        change: impl FnOnce(&mut StoreMeta) -> ApiResult<()>,
    ) -> ApiResult<StoreMeta> {
        let lock = self.store_lock(id);
        let _one = lock.lock();
        let mut meta = self.meta(id).ok_or_else(|| ApiError::no_store(id))?;
        change(&mut meta)?;
        meta.updated_at = crate::journal::now_text();
        self.save_meta(&meta)?;
        self.metas.lock().insert(meta.clone());
        Ok(meta)
    }

    /// Notes that the API redacted version `version` of store `id` (the
    /// store's `updated_at` stays: it is about the store, not its memories).
    pub fn note_redaction(&self, id: &str, version: u64, token: &str) -> ApiResult<()> {
        let lock = self.store_lock(id);
        let _one = lock.lock();
        let mut meta = self.meta(id).ok_or_else(|| ApiError::no_store(id))?;
        meta.redactions
            .insert(version, (crate::journal::now_text(), token.to_string()));
        self.save_meta(&meta)?;
        self.metas.lock().insert(meta);
        Ok(())
    }

    /// Holds store `id` open for one request (opening it if it is not).
    pub fn hold(&self, id: &str) -> ApiResult<Held> {
        self.hold_after(id, None)
    }

    /// [`Registry::hold`], where the request's head already read the
    /// store's head from the database (`head`: not read again).
    pub fn hold_after(&self, id: &str, head: Option<u64>) -> ApiResult<Held> {
        let held = self.hold_open(id)?;
        self.caught_up(&held, head)?;
        Ok(held)
    }

    fn hold_open(&self, id: &str) -> ApiResult<Held> {
        let open = self.open.lock().get(id).cloned();
        if let Some(store) = open {
            store.busy.fetch_add(1, Ordering::SeqCst);
            return Ok(Held { store });
        }
        // (This server's copy of the records: the request has read the
        // store's from the database already, in a root in PostgreSQL.)
        let known = || self.meta(id).is_some();
        if !known() {
            return Err(ApiError::no_store(id));
        }
        // Before this store's lock: making room takes another store's.
        self.make_room()?;
        let lock = self.store_lock(id);
        let _one = lock.lock();
        if !known() {
            return Err(ApiError::no_store(id));
        }
        let mut open = self.open.lock();
        if let Some(store) = open.get(id) {
            store.busy.fetch_add(1, Ordering::SeqCst);
            return Ok(Held {
                store: store.clone(),
            });
        }
        drop(open);
        let store = Arc::new(self.open_store(id)?);
        store.busy.fetch_add(1, Ordering::SeqCst);
        open = self.open.lock();
        open.insert(id.to_string(), store.clone());
        Ok(Held { store })
    }

    /// Store `id`'s memory, opened on its dir (and its database, for a
    /// root in PostgreSQL).
    fn open_memory(&self, id: &str) -> ApiResult<Memory> {
        let dir = self.root.join(id);
        let mut options = self.options.clone();
        // (A mirror of a store over HTTP: served from its cache, kept in
        // step with the store while open, with the server's key.)
        if self.catalog.is_none() {
            if let Some(cache) =
                crate::remote::cached_store(&dir).and_then(|url| self.options.for_cache_of(url))
            {
                options = cache;
            }
        }
        if let Some(catalog) = &self.catalog {
            options.shared = Some(
                catalog
                    .store_target(id)
                    .map_err(|e| ApiError::internal(e.to_string()))?,
            );
        }
        // One try: a store another process owns now is answered 503 with
        // Retry-After (the SDK retries), never waited for under the lock
        // every store's first use takes.
        match Memory::open(&dir, options) {
            Ok(memory) => Ok(memory),
            Err(OpenError::Busy { pid, .. }) => {
                Err(ApiError::unavailable(format!(
                    "store {id} is open in another memfs process{}; the server serves a store only while it owns it (mount it beside the server instead: `memfs --data ROOT/{id} mount MNT` while the server runs)",
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                )))
            }
            Err(OpenError::Io { err, .. }) if out_of_files(&err) => {
                tracing::warn!("opening store {id}: {err}");
                Err(out_of_files_answer())
            }
            Err(e) => {
                tracing::warn!("opening store {id}: {e}");
                Err(ApiError::internal(format!(
                    "store {id} cannot be opened; the server's log says why"
                )))
            }
        }
    }

    fn open_store(&self, id: &str) -> ApiResult<OpenStore> {
        // Held here in tests: a store slow to open.
        fail::fail_point!("http::open-store", |_| Err(ApiError::unavailable(
            "store held by a failpoint".to_string()
        )));
        let memory = self.open_memory(id)?;
        let hosted = Arc::new(Hosted::default());
        let server = SocketServer::start(
            memory.tool().clone(),
            memory.control().clone(),
            &memory.data_dir().state,
            self.bounds.client_timeout,
            self.bounds.max_line,
            Some(hosted.clone()),
        )
        .map_err(|e| match out_of_files(&e) {
            true => out_of_files_answer(),
            false => io_error("serve the store's socket")(e),
        })?;
        let mut ids = IdIndex::default();
        ids.sync(&memory.history())
            .map_err(|e| ApiError::internal(format!("the store's history cannot be read: {e}")))?;
        tracing::debug!("opened store {id}");
        let changed = Arc::new(super::changed::Changed::default());
        memory
            .store()
            .observe(Arc::new(super::changed::Counting(changed.clone())));
        Ok(OpenStore {
            id: id.to_string(),
            memory,
            server: Mutex::new(rank::STORE_SERVER, Some(server)),
            hosted,
            ids: Mutex::new(rank::STORE_IDS, ids),
            last_used: Mutex::new(rank::STORE_LAST_USED, Instant::now()),
            busy: AtomicUsize::new(0),
            closing: std::sync::atomic::AtomicBool::new(false),
            changed,
        })
    }

    /// Closes every store idle for `self.idle` (on the background pool,
    /// two at a time), and serves the mounts other processes asked for; run
    /// now and then.
    pub fn tend(self: &Arc<Self>) {
        self.refresh();
        let stores: Vec<Arc<OpenStore>> = self.open.lock().values().cloned().collect();
        for store in &stores {
            store.hosted.reap();
        }
        for store in stores {
            if !store.is_idle(self.idle) || store.closing.swap(true, Ordering::SeqCst) {
                continue;
            }
            let reg = self.clone();
            crate::pool::background().now(Box::new(move || {
                reg.close_if_idle(&store, reg.idle);
                store.closing.store(false, Ordering::SeqCst);
            }));
        }
    }

    /// Deletes store `id`, its data dir and every version in it.
    pub fn delete(&self, id: &str) -> ApiResult<()> {
        let lock = self.store_lock(id);
        let _one = lock.lock();
        if self.meta(id).is_none() {
            return Err(ApiError::no_store(id));
        }
        let closing = {
            // Checked and taken out under one guard: `hold` cannot take it between.
            let mut open = self.open.lock();
            match open.get(id) {
                Some(store)
                    if store.busy.load(Ordering::SeqCst) > 0 || !store.hosted.is_empty() =>
                {
                    return Err(ApiError::conflict(format!(
                        "store {id} is in use (a request or a mount); try again when it is not"
                    )));
                }
                Some(_) => open.remove(id),
                None => None,
            }
        };
        if let Some(store) = closing {
            store.close();
            drop(store);
        }
        let mut bytes = [0u8; 6];
        super::tokens::random(&mut bytes).map_err(io_error("delete the store"))?;
        let trash = self.state.join("trash");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&trash)
            .map_err(io_error("delete the store"))?;
        let gone = trash.join(format!(
            "{id}-{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ));
        match fs::rename(self.root.join(id), &gone) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("delete the store")(e)),
        }
        match &self.catalog {
            Some(catalog) => catalog
                .delete_store(id)
                .map_err(|e| ApiError::from_catalog(e, "the store could not be deleted"))?,
            None => fs::remove_file(self.state.join("stores").join(format!("{id}.json")))
                .map_err(io_error("delete the store's record"))?,
        }
        self.metas.lock().remove(id);
        self.opening.lock().remove(id);
        if let Err(e) = fs::remove_dir_all(&gone) {
            tracing::warn!("deleted store {id}, but its files are left in the trash: {e}");
        }
        Ok(())
    }

    /// Closes every open store (at shutdown); false if one left paths unsaved.
    pub fn close_all(&self) -> bool {
        let stores: Vec<Arc<OpenStore>> = self.open.lock().drain().map(|(_, s)| s).collect();
        // Several at once: each waits on its own socket thread and journal.
        let queue = Mutex::new(rank::REGISTRY_CLOSING, stores);
        let ok = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|scope| {
            for _ in 0..16 {
                scope.spawn(|| loop {
                    let Some(store) = queue.lock().pop() else {
                        return;
                    };
                    if !store.close() {
                        ok.store(false, Ordering::SeqCst);
                    }
                    // The last hold goes here: the journal stops, the lock is released.
                    drop(store);
                });
            }
        });
        ok.into_inner()
    }
}
