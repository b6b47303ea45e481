//! The shared store's tables in PostgreSQL, and the transaction that
//! commits one batch of this host's changes.
//!
//! The SQL is kept to what PostgreSQL-compatible distributed engines also
//! run: plain tables, `CREATE ... IF NOT EXISTS`, `SELECT ... FOR UPDATE`,
//! `UNNEST`, `LIKE ANY`; no advisory locks, no triggers, no sequences. The
//! one PostgreSQL-only call is `pg_notify`, a wake-up the follower also
//! does without (it polls): an engine without it drops that line.
//!
//! - `memfs_stores`: one row per store, its `seq` the newest id handed
//!   out. A batch's transaction locks it first (`FOR UPDATE`), so batches
//!   of a store commit one at a time, in the order of their ids: a reader
//!   that has seen id N has seen every batch below it.
//! - `memfs_batches`: each committed batch, by its last id (`seq`), with
//!   its records (JSON, the journal's own format) and its key (origin,
//!   batch number), unique: the COMMIT whose answer was lost is looked up
//!   by it, so a batch is applied once.
//! - `memfs_contents`: contents by sha256.
//! - `memfs_touches`: each path a batch touched, for telling races.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use postgres::error::SqlState;
use postgres::{Client, NoTls};

use super::target::Target;
use crate::journal::{ChangeRec, Outgoing, Transaction, Upstream, UpstreamError};

/// The NOTIFY channel; the payload names the store.
pub const CHANNEL: &str = "memfs";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memfs_stores (
    name TEXT PRIMARY KEY,
    seq BIGINT NOT NULL DEFAULT 0,
    created TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS memfs_batches (
    store TEXT NOT NULL,
    seq BIGINT NOT NULL,
    first BIGINT NOT NULL,
    origin TEXT NOT NULL,
    batch BIGINT NOT NULL,
    time TEXT NOT NULL,
    changes TEXT NOT NULL,
    PRIMARY KEY (store, seq),
    UNIQUE (store, origin, batch)
);
CREATE TABLE IF NOT EXISTS memfs_contents (
    store TEXT NOT NULL,
    sha TEXT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (store, sha)
);
CREATE TABLE IF NOT EXISTS memfs_touches (
    store TEXT NOT NULL,
    path TEXT NOT NULL,
    seq BIGINT NOT NULL,
    origin TEXT NOT NULL,
    PRIMARY KEY (store, path, seq)
);
CREATE INDEX IF NOT EXISTS memfs_touches_by_seq ON memfs_touches (store, seq);
";

/// This host's batches by number, from just before their COMMIT until the
/// follower passes them: `false` while the COMMIT's outcome is not known,
/// `true` once it committed (gone: it did not, or it is not known).
pub type Ours = Arc<Mutex<std::collections::BTreeMap<u64, bool>>>;

/// One committed batch, as the follower reads it.
#[derive(Debug, Clone)]
pub struct Batch {
    pub seq: u64,
    pub origin: String,
    pub batch: u64,
    pub changes: Vec<ChangeRec>,
}

/// The shared store's database, for this host's journal (the writer's
/// connection; the follower has its own).
pub struct Db {
    target: Target,
    origin: String,
    conn: Mutex<Option<Client>>,
    /// Numbers this journal's batches past every one of its origin the
    /// store holds (a crash may have kept some out of the journal), once,
    /// at the first connection.
    renumber: Box<dyn Fn(u64) + Send + Sync>,
    numbered: std::sync::atomic::AtomicBool,
    /// Told of each batch this host committed (the head it found, its last
    /// id): a tree that had followed to the head has followed past it now.
    on_commit: std::sync::OnceLock<Box<dyn Fn(u64, u64) + Send + Sync>>,
    /// Batches of this host's confirmed committed and not yet passed by
    /// the follower (which skips them: the tree and journal have them).
    confirmed: Ours,
}

/// Connects with bounds: a database that does not answer is given up on
/// in seconds, not minutes.
pub fn connect(target: &Target) -> Result<Client, UpstreamError> {
    connect_as(target, "memfs")
}

/// [`connect`], naming the connection (`application_name`: `memfs` for
/// the writer's, `memfs-follow` for the follower's).
pub fn connect_as(target: &Target, name: &str) -> Result<Client, UpstreamError> {
    let mut config = target.config();
    config
        .connect_timeout(Duration::from_secs(3))
        .tcp_user_timeout(Duration::from_secs(6))
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(5))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(2)
        .application_name(name);
    config.connect(NoTls).map_err(|e| classify(&e))
}

/// Makes the tables and the store's row if they are missing (hosts that
/// start at once may race to make them: the loser tries again).
pub fn prepare(client: &mut Client, store: &str) -> Result<(), UpstreamError> {
    let mut tries = 0;
    loop {
        let made = client.batch_execute(SCHEMA).and_then(|_| {
            client.execute(
                "INSERT INTO memfs_stores (name) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&store],
            )
        });
        match made {
            Ok(_) => return Ok(()),
            Err(e) if tries < 3 && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => tries += 1,
            Err(e) => return Err(classify(&e)),
        }
    }
}

/// Why a call failed, in words that name no host path.
pub fn classify(e: &postgres::Error) -> UpstreamError {
    if let Some(code) = e.code() {
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return UpstreamError::Again;
        }
        return UpstreamError::Unreachable(format!(
            "the database refused the request, SQLSTATE {}",
            code.code()
        ));
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    let cause = match io.map(|io| io.kind()) {
        Some(std::io::ErrorKind::ConnectionRefused) => "connection refused",
        Some(std::io::ErrorKind::TimedOut) => "no answer in time",
        Some(std::io::ErrorKind::NotFound) => "no such host",
        _ if e.is_closed() => "the connection was lost",
        _ if e.to_string().contains("timed out") => "no answer in time",
        _ if e.to_string().contains("password") => "the database did not take the password",
        _ => "the connection failed",
    };
    UpstreamError::Unreachable(cause.to_string())
}

fn lost_connection(e: &postgres::Error) -> bool {
    e.code().is_none()
}

impl Db {
    /// The shared store `target` for the journal of origin `origin`;
    /// connects later if the database cannot be reached now.
    pub fn new(target: Target, origin: String, renumber: Box<dyn Fn(u64) + Send + Sync>) -> Db {
        Db {
            target,
            origin,
            conn: Mutex::new(None),
            renumber,
            numbered: Default::default(),
            on_commit: std::sync::OnceLock::new(),
            confirmed: Arc::default(),
        }
    }

    /// Tells `f` of each batch this host commits: the head it found, and
    /// its last id.
    pub fn on_commit(&self, f: Box<dyn Fn(u64, u64) + Send + Sync>) {
        let _ = self.on_commit.set(f);
    }

    fn committed(&self, head: u64, last: u64) {
        if let Some(f) = self.on_commit.get() {
            f(head, last);
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Batches of this host's the follower skips, see [`Db::confirmed`].
    pub fn confirmed(&self) -> Ours {
        self.confirmed.clone()
    }

    /// The connection, made (and the tables with it) if there is none.
    fn client(&self) -> Result<MutexGuard<'_, Option<Client>>, UpstreamError> {
        let mut conn = self.conn.lock();
        if conn.as_ref().is_none_or(|c| c.is_closed()) {
            let mut client = connect(&self.target)?;
            prepare(&mut client, &self.target.store)?;
            if !self.numbered.load(std::sync::atomic::Ordering::Acquire) {
                let row = client
                    .query_one(
                        "SELECT COALESCE(MAX(batch), 0) FROM memfs_batches WHERE store = $1 AND origin = $2",
                        &[&self.target.store, &self.origin],
                    )
                    .map_err(|e| classify(&e))?;
                (self.renumber)(row.get::<_, i64>(0) as u64 + 1);
                self.numbered
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            *conn = Some(client);
        }
        Ok(conn)
    }
}

impl Upstream for Db {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, UpstreamError> {
        let mut conn = self.client()?;
        let client = conn.as_mut().expect("connected");
        // One round trip for both (the simple protocol takes two
        // statements at once). The store's name is inlined as a literal: it
        // is letters, digits, '-', '_' and '.' only (checked when parsed).
        let head = client
            .simple_query(&format!(
                "BEGIN; SELECT seq FROM memfs_stores WHERE name = '{}' FOR UPDATE",
                self.target.store
            ))
            .map(|messages| {
                messages.iter().find_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(row) => {
                        row.get(0).and_then(|v| v.parse::<u64>().ok())
                    }
                    _ => None,
                })
            });
        match head {
            Ok(Some(head)) => Ok(Box::new(Tx {
                db: self,
                conn,
                head,
            })),
            Ok(None) => {
                let _ = client.batch_execute("ROLLBACK");
                Err(UpstreamError::Unreachable(
                    "the store is no longer in the database".into(),
                ))
            }
            Err(e) => {
                if lost_connection(&e) {
                    *conn = None;
                } else {
                    let _ = client.batch_execute("ROLLBACK");
                }
                Err(classify(&e))
            }
        }
    }
}

/// One batch's transaction; rolled back if dropped uncommitted.
struct Tx<'a> {
    db: &'a Db,
    conn: MutexGuard<'a, Option<Client>>,
    head: u64,
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.conn.as_mut() {
            if client.is_closed() || client.batch_execute("ROLLBACK").is_err() {
                *self.conn = None;
            }
        }
    }
}

/// `LIKE` patterns for everything below `path`.
fn below(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    for c in path.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push_str("/%");
    out
}

/// `path` and every directory above it.
fn at_and_above(path: &str) -> Vec<String> {
    let mut out = vec![path.to_string()];
    let mut at = path;
    while let Some(i) = at.rfind('/') {
        at = &at[..i];
        if at.is_empty() {
            break;
        }
        out.push(at.to_string());
    }
    out
}

fn related(a: &str, b: &str) -> bool {
    let under =
        |x: &str, y: &str| x == y || (x.starts_with(y) && x.as_bytes().get(y.len()) == Some(&b'/'));
    under(a, b) || under(b, a)
}

impl Tx<'_> {
    fn client(&mut self) -> &mut Client {
        self.conn
            .as_mut()
            .expect("connected while the transaction lives")
    }

    fn failed(&mut self, e: postgres::Error) -> UpstreamError {
        if lost_connection(&e) {
            *self.conn = None;
        }
        classify(&e)
    }

    /// The batch's rows in one statement (one round trip): its contents,
    /// the batch, the paths it touched, the counter, the wake-up.
    fn send(&mut self, b: &Outgoing) -> Result<(), postgres::Error> {
        let store = self.db.target.store.clone();
        let origin = self.db.origin.clone();
        let shas: Vec<&str> = b.contents.iter().map(|(s, _)| s.as_str()).collect();
        let datas: Vec<&[u8]> = b.contents.iter().map(|(_, d)| d.as_slice()).collect();
        let changes = serde_json::to_string(&b.changes).expect("records serialize");
        let (seq, first) = (b.last as i64, (self.head + 1) as i64);
        self.client().execute(
            "WITH c AS (INSERT INTO memfs_contents (store, sha, data) \
                 SELECT $1, s, d FROM UNNEST($2::text[], $3::bytea[]) AS t(s, d) \
                 ON CONFLICT DO NOTHING), \
             b AS (INSERT INTO memfs_batches (store, seq, first, origin, batch, time, changes) \
                 VALUES ($1, $4, $5, $6, $7, $8, $9)), \
             t AS (INSERT INTO memfs_touches (store, path, seq, origin) \
                 SELECT $1, p, $4, $6 FROM UNNEST($10::text[]) AS t(p) ON CONFLICT DO NOTHING), \
             s AS (UPDATE memfs_stores SET seq = $4 WHERE name = $1) \
             SELECT pg_notify($11, $1)",
            &[
                &store,
                &shas,
                &datas,
                &seq,
                &first,
                &origin,
                &(b.batch as i64),
                &b.time,
                &changes,
                &b.paths,
                &CHANNEL,
            ],
        )?;
        Ok(())
    }

    /// [`Tx::look_up`]; a batch not known to be committed is not this
    /// host's to skip when the follower reads it (if it is there after all,
    /// the follower applies it: the journal and tree do not hold it).
    fn settle_lookup(&mut self, batch: u64, last: u64) -> Result<(), UpstreamError> {
        let found = self.look_up(batch, last);
        match found {
            Ok(()) => {
                self.db.confirmed.lock().insert(batch, true);
            }
            Err(_) => {
                self.db.confirmed.lock().remove(&batch);
            }
        }
        found
    }

    /// After a COMMIT whose answer was lost: asks a new connection whether
    /// the batch is there (for a few seconds, while the database comes back).
    fn look_up(&mut self, batch: u64, last: u64) -> Result<(), UpstreamError> {
        *self.conn = None;
        for _ in 0..10 {
            match connect(&self.db.target) {
                Ok(mut fresh) => {
                    let found = fresh.query_opt(
                        "SELECT seq FROM memfs_batches WHERE store = $1 AND origin = $2 AND batch = $3",
                        &[&self.db.target.store, &self.db.origin, &(batch as i64)],
                    );
                    *self.conn = Some(fresh);
                    return match found {
                        Ok(Some(_)) => {
                            self.db.committed(self.head, last);
                            Ok(())
                        }
                        // Not committed: safe to send again.
                        Ok(None) => Err(UpstreamError::Again),
                        Err(e) => Err(self.failed(e)),
                    };
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
        Err(UpstreamError::Unreachable(
            "the connection was lost during COMMIT and the database could not be asked whether it took the change; if it did, every host gets it when the database is back".into(),
        ))
    }
}

impl Transaction for Tx<'_> {
    fn head(&self) -> u64 {
        self.head
    }

    fn conflicts(
        &mut self,
        asks: &[(u64, Vec<String>)],
    ) -> Result<Vec<Option<u64>>, UpstreamError> {
        let Some(min_seen) = asks.iter().map(|(seen, _)| *seen).min() else {
            return Ok(Vec::new());
        };
        if min_seen >= self.head {
            return Ok(vec![None; asks.len()]);
        }
        let mut exact: Vec<String> = asks
            .iter()
            .flat_map(|(_, paths)| paths.iter().flat_map(|p| at_and_above(p)))
            .collect();
        exact.sort();
        exact.dedup();
        let mut patterns: Vec<String> = asks
            .iter()
            .flat_map(|(_, paths)| paths.iter().map(|p| below(p)))
            .collect();
        patterns.sort();
        patterns.dedup();
        let store = self.db.target.store.clone();
        let origin = self.db.origin.clone();
        let rows = self
            .client()
            .query(
                "SELECT path, seq FROM memfs_touches WHERE store = $1 AND seq > $2 \
                 AND origin <> $3 AND (path = ANY($4) OR path LIKE ANY($5))",
                &[&store, &(min_seen as i64), &origin, &exact, &patterns],
            )
            .map_err(|e| self.failed(e))?;
        let touched: Vec<(String, u64)> = rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
            .collect();
        Ok(asks
            .iter()
            .map(|(seen, paths)| {
                touched
                    .iter()
                    .filter(|(path, seq)| *seq > *seen && paths.iter().any(|p| related(p, path)))
                    .map(|(_, seq)| *seq)
                    .max()
            })
            .collect())
    }

    fn commit(mut self: Box<Self>, batch: Outgoing) -> Result<(), UpstreamError> {
        if let Err(e) = self.send(&batch) {
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                // This origin's batch of that number is there (committed
                // by a run whose answer never came): number past it.
                return Err(UpstreamError::Taken(batch.batch + 1));
            }
            return Err(self.failed(e));
        }
        // Noted before the COMMIT: the follower may read the batch back
        // before the COMMIT's answer is here, and must know it is ours.
        self.db.confirmed.lock().insert(batch.batch, false);
        fail::fail_point!("shared-commit-unanswered", |_| {
            // The COMMIT goes, and its answer is lost.
            let _ = self.client().batch_execute("COMMIT");
            self.settle_lookup(batch.batch, batch.last)
        });
        match self.client().batch_execute("COMMIT") {
            Ok(()) => {
                self.db.confirmed.lock().insert(batch.batch, true);
                self.db.committed(self.head, batch.last);
                Ok(())
            }
            Err(e) if !lost_connection(&e) => {
                self.db.confirmed.lock().remove(&batch.batch);
                Err(self.failed(e))
            }
            Err(_) => self.settle_lookup(batch.batch, batch.last),
        }
    }
}

/// The follower's reads, on its own connection.
pub struct Reader {
    pub client: Client,
    store: String,
}

impl Reader {
    /// Connects, makes the tables if missing, and listens for wake-ups.
    pub fn open(target: &Target) -> Result<Reader, UpstreamError> {
        let mut client = connect_as(target, "memfs-follow")?;
        prepare(&mut client, &target.store)?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(|e| classify(&e))?;
        Ok(Reader {
            client,
            store: target.store.clone(),
        })
    }

    /// Up to `limit` batches after `after`, in order.
    pub fn batches_after(&mut self, after: u64, limit: i64) -> Result<Vec<Batch>, UpstreamError> {
        let rows = self
            .client
            .query(
                "SELECT seq, origin, batch, changes FROM memfs_batches \
                 WHERE store = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&self.store, &(after as i64), &limit],
            )
            .map_err(|e| classify(&e))?;
        rows.iter()
            .map(|r| {
                let text: String = r.get(3);
                let changes = serde_json::from_str(&text).map_err(|_| {
                    UpstreamError::Unreachable(
                        "the database holds a batch this memfs cannot read".into(),
                    )
                })?;
                Ok(Batch {
                    seq: r.get::<_, i64>(0) as u64,
                    origin: r.get(1),
                    batch: r.get::<_, i64>(2) as u64,
                    changes,
                })
            })
            .collect()
    }

    /// The contents of these sha256s the store holds.
    pub fn contents(
        &mut self,
        shas: &[String],
    ) -> Result<std::collections::HashMap<String, Arc<Vec<u8>>>, UpstreamError> {
        if shas.is_empty() {
            return Ok(Default::default());
        }
        let rows = self
            .client
            .query(
                "SELECT sha, data FROM memfs_contents WHERE store = $1 AND sha = ANY($2)",
                &[&self.store, &shas],
            )
            .map_err(|e| classify(&e))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), Arc::new(r.get::<_, Vec<u8>>(1))))
            .collect())
    }

    /// The store's head.
    pub fn head(&mut self) -> Result<u64, UpstreamError> {
        let row = self
            .client
            .query_one(
                "SELECT seq FROM memfs_stores WHERE name = $1",
                &[&self.store],
            )
            .map_err(|e| classify(&e))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// Waits up to `limit` for a wake-up for this store (or any sign the
    /// connection is gone, which is an error).
    pub fn wait(&mut self, limit: Duration) -> Result<(), UpstreamError> {
        let store = self.store.clone();
        let mut notes = self.client.notifications();
        let mut iter = notes.timeout_iter(limit);
        loop {
            match postgres::fallible_iterator::FallibleIterator::next(&mut iter) {
                Ok(Some(n)) if n.payload() == store => return Ok(()),
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(()),
                Err(e) => return Err(classify(&e)),
            }
        }
    }
}
