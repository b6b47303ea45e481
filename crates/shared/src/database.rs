//! What one process shares of one database, for every store of it that
//! is open here: the connections kept between one batch and the next
//! (writers') and one catch-up and the next (readers'), and one thread
//! with one connection that listens for wake-ups and polls the heads of
//! the stores followed here.
//!
//! So an open shared store costs no thread and no connection of its own:
//! a store is caught up by a job on the follow pool when the listener
//! hears another host committed to it (`NOTIFY`), when the once-a-second
//! poll finds its head past what its tree has followed (a wake-up lost
//! with a connection is never a change lost), or when its tree holds what
//! the store has not taken yet (sent again). After every reconnection the
//! poll runs first, so every store behind is caught up.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use postgres::Client;

use super::connect::{classify, connect_as, make_tables, Held, Kept, CHANNEL};
use super::reader::Reader;
use super::target::Target;
use crate::journal::UpstreamError;
use crate::lock::{rank, Mutex};

/// Writers' connections kept idle, at most (each batch takes one for its
/// transaction and gives it back; more are made while more batches run
/// at once, across stores, and closed after).
const KEPT_WRITERS: usize = 8;
/// Readers' connections kept idle, at most (one per follow-pool thread).
const KEPT_READERS: usize = 4;
/// The heads are polled this often.
const POLL: Duration = Duration::from_secs(1);
/// How often a long outage is said again.
const STILL_DOWN: Duration = Duration::from_secs(60);

/// A writer's connection, with the batch statement once prepared on it.
pub struct Conn {
    pub client: Client,
    pub write: Option<postgres::Statement>,
}

impl Held for Conn {
    fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl Conn {
    pub fn new(client: Client) -> Conn {
        Conn {
            client,
            write: None,
        }
    }
}

/// A store followed here, as the listener sees it.
pub trait Followed: Send + Sync {
    /// The store's name in the database.
    fn store(&self) -> &str;
    /// This host's origin (its own wake-ups wake nothing).
    fn origin(&self) -> &str;
    /// Whether a catch-up is owed, the store's head being `head`: the tree
    /// is behind it, or holds changes the store has not taken.
    fn due(&self, head: u64) -> bool;
    /// Catches the store up soon (a job; never waits).
    fn wake(self: Arc<Self>);
    /// The database stopped answering at `since`, or answers again (`None`).
    fn reachable(&self, down_since: Option<std::time::SystemTime>);
}

/// One database, as this process uses it.
pub struct Database {
    target: Target,
    writers: Kept<Conn>,
    readers: Kept<Reader>,
    followed: Mutex<HashMap<String, Vec<Arc<dyn Followed>>>>,
    listening: std::sync::Once,
    /// Since when the listener cannot reach the database (seconds since
    /// the epoch; 0 while it can).
    down_since: std::sync::atomic::AtomicU64,
}

/// The database `target` names (its store does not matter), one per
/// process.
pub fn of(target: &Target) -> Arc<Database> {
    static ALL: OnceLock<Mutex<HashMap<String, Arc<Database>>>> = OnceLock::new();
    let all = ALL.get_or_init(|| Mutex::new(rank::DATABASES, HashMap::new()));
    all.lock()
        .entry(target.database_key().to_string())
        .or_insert_with(|| {
            Arc::new(Database {
                target: target.clone(),
                writers: Kept::new(rank::DATABASE_WRITERS, KEPT_WRITERS),
                readers: Kept::new(rank::DATABASE_READERS, KEPT_READERS),
                followed: Mutex::new(rank::DATABASE_FOLLOWED, HashMap::new()),
                listening: std::sync::Once::new(),
                down_since: Default::default(),
            })
        })
        .clone()
}

impl Database {
    /// A writer's connection kept idle, if there is one.
    pub fn writer(&self) -> Option<Conn> {
        self.writers.take()
    }

    /// Keeps a writer's connection for the next batch.
    pub fn keep_writer(&self, conn: Conn) {
        self.writers.keep(conn);
    }

    /// Closes the writers' connections kept (one was found dead).
    pub fn forget_writers(&self) {
        self.writers.clear();
    }

    /// Closes the readers' connections kept (a catch-up failed on one).
    pub fn forget_readers(&self) {
        self.readers.clear();
    }

    /// A reader's connection: one kept idle, else a new one.
    pub fn reader(&self) -> Result<Reader, UpstreamError> {
        match self.readers.take() {
            Some(reader) => Ok(reader),
            None => Reader::open(&self.target),
        }
    }

    /// Keeps a reader's connection for the next catch-up.
    pub fn keep_reader(&self, reader: Reader) {
        self.readers.keep(reader);
    }

    /// Follows a store: wake-ups and the poll wake it from now on. The
    /// listening thread starts with the first.
    pub fn follow(self: &Arc<Self>, store: Arc<dyn Followed>) {
        let down = self.down_since.load(std::sync::atomic::Ordering::Acquire);
        if down != 0 {
            store.reachable(Some(std::time::UNIX_EPOCH + Duration::from_secs(down)));
        }
        self.followed
            .lock()
            .entry(store.store().to_string())
            .or_default()
            .push(store);
        self.listening.call_once(|| {
            let database = self.clone();
            if let Err(e) = std::thread::Builder::new()
                .name("memfs-listen".into())
                .spawn(move || database.listen())
            {
                tracing::warn!(
                    "cannot start the thread that listens to the shared store ({e}); other hosts' changes are not followed"
                );
            }
        });
    }

    /// Stops waking `store`.
    pub fn unfollow(&self, store: &Arc<dyn Followed>) {
        let mut followed = self.followed.lock();
        let name = store.store().to_string();
        if let Some(list) = followed.get_mut(&name) {
            list.retain(|f| !std::ptr::addr_eq(Arc::as_ptr(f), Arc::as_ptr(store)));
            if list.is_empty() {
                followed.remove(&name);
            }
        }
    }

    /// The listening thread: connects (saying when the database cannot be
    /// reached, and when it answers again), then hears and polls until the
    /// connection ends. It runs for the life of the process.
    fn listen(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(100);
        // Since when the database has not answered, and when that was last said.
        let mut down: Option<(Instant, Instant)> = None;
        loop {
            let (mut client, heads) = match self.listening_connection() {
                Ok(c) => c,
                Err(e) => {
                    match &mut down {
                        None => {
                            tracing::warn!(
                                "the shared store cannot be reached ({}); reads keep working from memory, and memfs keeps trying",
                                cause(&e)
                            );
                            down = Some((Instant::now(), Instant::now()));
                            self.set_down(Some(std::time::SystemTime::now()));
                        }
                        Some((since, said)) if said.elapsed() >= STILL_DOWN => {
                            // A long outage says so again, with its cause
                            // now, so that it is never silent after its
                            // first line.
                            *said = Instant::now();
                            tracing::warn!(
                                "the shared store still cannot be reached after {} s ({}); reads keep working from memory, and memfs keeps trying",
                                since.elapsed().as_secs(),
                                cause(&e)
                            );
                        }
                        Some(_) => {}
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            if let Some((since, _)) = down.take() {
                tracing::warn!(
                    "the shared store answers again after {} s; catching up",
                    since.elapsed().as_secs()
                );
            }
            self.set_down(None);
            backoff = Duration::from_millis(100);
            let ended = self.hear(&mut client, &heads);
            tracing::info!(
                "the shared store's connection ended ({}); reconnecting",
                cause(&ended)
            );
        }
    }

    /// Notes, and tells every followed store, that the database stopped
    /// answering at `since` or answers again.
    fn set_down(&self, since: Option<std::time::SystemTime>) {
        let secs = since
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs().max(1));
        self.down_since
            .store(secs, std::sync::atomic::Ordering::Release);
        let all: Vec<Arc<dyn Followed>> =
            self.followed.lock().values().flatten().cloned().collect();
        for f in all {
            f.reachable(since);
        }
    }

    /// A connection that listens for wake-ups, with the poll's query.
    fn listening_connection(&self) -> Result<(Client, postgres::Statement), UpstreamError> {
        let mut client = connect_as(&self.target, "memfs-listen")?;
        make_tables(&mut client)?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(|e| classify(&e))?;
        let heads = client
            .prepare("SELECT name, seq FROM memfs_stores WHERE name = ANY($1)")
            .map_err(|e| classify(&e))?;
        Ok((client, heads))
    }

    /// Wakes the stores other hosts committed to as it hears of them, and
    /// polls every store's head each [`POLL`] (first at once); returns
    /// what ended the connection.
    fn hear(&self, client: &mut Client, heads: &postgres::Statement) -> UpstreamError {
        let mut poll_at = Instant::now();
        loop {
            if client.is_closed() {
                return UpstreamError::Unreachable("the connection was closed".into());
            }
            let left = poll_at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if let Err(e) = self.poll(client, heads) {
                    return e;
                }
                poll_at = Instant::now() + POLL;
                continue;
            }
            let mut notes = client.notifications();
            let mut iter = notes.timeout_iter(left);
            match postgres::fallible_iterator::FallibleIterator::next(&mut iter) {
                Ok(Some(note)) => self.heard(note.payload()),
                Ok(None) => {}
                Err(e) => return classify(&e),
            }
        }
    }

    /// A wake-up (`STORE ORIGIN`): the store's followers of other origins.
    fn heard(&self, payload: &str) {
        let Some((store, origin)) = payload.split_once(' ') else {
            return;
        };
        let woken: Vec<Arc<dyn Followed>> = self
            .followed
            .lock()
            .get(store)
            .map(|list| {
                list.iter()
                    .filter(|f| f.origin() != origin)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for f in woken {
            f.wake();
        }
    }

    /// Every followed store's head, in one query: those owed a catch-up
    /// are woken.
    fn poll(&self, client: &mut Client, heads: &postgres::Statement) -> Result<(), UpstreamError> {
        let names: Vec<String> = self.followed.lock().keys().cloned().collect();
        if names.is_empty() {
            return Ok(());
        }
        let rows = client.query(heads, &[&names]).map_err(|e| classify(&e))?;
        let mut woken = Vec::new();
        {
            let followed = self.followed.lock();
            for row in &rows {
                let (name, head) = (row.get::<_, String>(0), row.get::<_, i64>(1) as u64);
                if let Some(list) = followed.get(&name) {
                    woken.extend(list.iter().filter(|f| f.due(head)).cloned());
                }
            }
        }
        for f in woken {
            f.wake();
        }
        Ok(())
    }
}

/// What a failure was, in words.
pub fn cause(e: &UpstreamError) -> String {
    match e {
        UpstreamError::Unreachable(c) => c.clone(),
        UpstreamError::Again | UpstreamError::Taken(_) => "a transient refusal".into(),
    }
}
