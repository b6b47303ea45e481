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
//!
//! (`connect.rs` makes them.) A batch's transaction runs on a connection
//! the database keeps for any of its stores' batches (`database.rs`),
//! taken for the batch and given back when it ends.

use std::sync::Arc;
use std::time::Duration;

use crate::lock::{rank, Mutex, MutexGuard};
use postgres::error::SqlState;
use postgres::Client;

use super::connect::{classify, connect, lost_connection, prepare, CHANNEL};
use super::database::{self, Conn, Database};
use super::target::Target;
use crate::journal::{Outgoing, Transaction, Upstream, UpstreamError};

/// One batch's write, as one statement: the store's counter moved from
/// the head the batch was numbered after ($2) to its last id ($3), its
/// contents ($9, $10), the paths it touched ($11), the batch, and the
/// wake-up. The main query reads the counter's update first: unless the
/// head is still $2 (and the store's row there), it divides by zero and
/// nothing of the statement stays. A batch numbered past a head that moved
/// may also meet another batch of its id first (a unique violation on
/// `memfs_batches_pkey`): the same outcome, told apart in [`Tx::commit`].
const WRITE: &str = "WITH \
    u AS (UPDATE memfs_stores SET seq = $3 WHERE name = $1 AND seq = $2 RETURNING 1), \
    c AS (INSERT INTO memfs_contents (store, sha, data) \
          SELECT $1, x.sha, x.data FROM UNNEST($9::text[], $10::bytea[]) AS x(sha, data) \
          ON CONFLICT DO NOTHING), \
    t AS (INSERT INTO memfs_touches (store, path, seq, origin) \
          SELECT $1, x.path, $3, $5 FROM UNNEST($11::text[]) AS x(path) \
          ON CONFLICT DO NOTHING), \
    b AS (INSERT INTO memfs_batches (store, seq, first, origin, batch, time, changes) \
          VALUES ($1, $3, $4, $5, $6, $7, $8)) \
    SELECT 1 / (SELECT COUNT(*) FROM u), pg_notify($12, $13)";

/// This host's batches by number, from just before their COMMIT until the
/// follower passes them (or the tree has followed past their last id):
/// `false` while the COMMIT's outcome is not known, `true` once it
/// committed (gone: it did not, or it is not known), with the batch's last
/// id.
pub type Ours = Arc<Mutex<std::collections::BTreeMap<u64, (bool, u64)>>>;

/// How long the lookup of a COMMIT whose answer was lost goes on, in all.
const LOOKUP: Duration = Duration::from_secs(10);

/// The shared store's database, for this host's journal.
pub struct Db {
    target: Target,
    origin: String,
    database: Arc<Database>,
    /// The connection of the batch being sent (none between batches: it
    /// is the database's again).
    conn: Mutex<Option<Conn>>,
    /// Numbers this journal's batches past every one of its origin the
    /// store holds (a crash may have kept some out of the journal), once,
    /// at the first connection.
    renumber: Box<dyn Fn(u64) + Send + Sync>,
    /// The store's row is made and the batches numbered (once).
    numbered: std::sync::atomic::AtomicBool,
    /// Told of each batch this host committed (the head it found, its last
    /// id): a tree that had followed to the head has followed past it now.
    on_commit: std::sync::OnceLock<Box<dyn Fn(u64, u64) + Send + Sync>>,
    /// Batches of this host's confirmed committed and not yet passed by
    /// the follower (which skips them: the tree and journal have them).
    confirmed: Ours,
    /// Batches of this host's whose COMMIT's outcome could not be learned
    /// (their changes were taken back here): asked about again, holding
    /// the head, before the next batch is sent.
    unknown: Mutex<Vec<u64>>,
    /// The last ids of batches of this host's that committed after all
    /// though their changes were taken back here: other hosts' changes as
    /// far as the race check goes (the follower applies them as such).
    disowned: Mutex<Vec<i64>>,
    /// The store's head as this host last knew it (from a transaction or a
    /// commit of its own; `u64::MAX` while unknown): see [`Db::begin_after`].
    last_head: std::sync::atomic::AtomicU64,
}

/// Whether [`WRITE`] failed because the head is no longer the one the
/// batch was numbered after: its guard divided by zero, or its batch met
/// one of the same id that another host committed.
fn head_moved(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::DIVISION_BY_ZERO)
        || (e.code() == Some(&SqlState::UNIQUE_VIOLATION)
            && e.as_db_error().and_then(|d| d.constraint()) == Some("memfs_batches_pkey"))
}

/// Whether a COMMIT's error says the transaction did not commit: a
/// serialization failure or deadlock (class 40) or a constraint checked at
/// commit (class 23). Any other may have come after it committed.
fn refused_before_commit(e: &postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| c.code().starts_with("40") || c.code().starts_with("23"))
}

impl Db {
    /// The shared store `target` for the journal of origin `origin`;
    /// connects later if the database cannot be reached now.
    pub fn new(target: Target, origin: String, renumber: Box<dyn Fn(u64) + Send + Sync>) -> Db {
        Db {
            database: database::of(&target),
            target,
            origin,
            conn: Mutex::new(rank::DB_CONN, None),
            renumber,
            numbered: Default::default(),
            on_commit: std::sync::OnceLock::new(),
            confirmed: Arc::new(Mutex::new(rank::DB_CONFIRMED, Default::default())),
            unknown: Mutex::new(rank::DB_UNKNOWN, Vec::new()),
            disowned: Mutex::new(rank::DB_DISOWNED, Vec::new()),
            last_head: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    /// Tells `f` of each batch this host commits: the head it found, and
    /// its last id.
    pub fn on_commit(&self, f: Box<dyn Fn(u64, u64) + Send + Sync>) {
        let _ = self.on_commit.set(f);
    }

    fn committed(&self, head: u64, last: u64) {
        self.knew_head(last);
        if let Some(f) = self.on_commit.get() {
            f(head, last);
        }
    }

    fn knew_head(&self, head: u64) {
        self.last_head
            .store(head, std::sync::atomic::Ordering::Release);
    }

    /// The batch's connection back to the database, for any next batch.
    fn give_back(&self, conn: &mut Option<Conn>) {
        if let Some(conn) = conn.take() {
            self.database.keep_writer(conn);
        }
    }

    /// Makes `client` the batch's connection.
    fn install(&self, conn: &mut Option<Conn>, client: Client) {
        *conn = Some(Conn::new(client));
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Batches of this host's the follower skips, see [`Db::confirmed`].
    pub fn confirmed(&self) -> Ours {
        self.confirmed.clone()
    }

    /// The batch's connection: one the database kept, else a new one;
    /// the first time, the store's row is made (with the tables) and this
    /// journal's batches numbered.
    fn client(&self) -> Result<MutexGuard<'_, Option<Conn>>, UpstreamError> {
        let mut conn = self.conn.lock();
        if conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            let mut taken = match self.database.writer() {
                Some(kept) => kept,
                None => Conn::new(connect(&self.target)?),
            };
            if !self.numbered.load(std::sync::atomic::Ordering::Acquire) {
                let client = &mut taken.client;
                prepare(client, self.target.store.as_str())?;
                let row = client
                    .query_one(
                        "SELECT COALESCE(MAX(batch), 0) FROM memfs_batches WHERE store = $1 AND origin = $2",
                        &[&self.target.store.as_str(), &self.origin],
                    )
                    .map_err(|e| classify(&e))?;
                (self.renumber)(row.get::<_, i64>(0) as u64 + 1);
                self.numbered
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            *conn = Some(taken);
        }
        Ok(conn)
    }
}

/// Begins a transaction and locks the store's head in one round trip (the
/// simple protocol takes two statements at once): the head's sequence
/// number, or none when the store is gone. The store's name is inlined as a
/// literal: a StoreName is letters, digits, '-', '_' and '.' only (no other
/// value can be made).
fn lock_head(
    client: &mut postgres::Client,
    target: &crate::Target,
) -> Result<Option<u64>, postgres::Error> {
    let messages = client.simple_query(&format!(
        "BEGIN; SELECT seq FROM memfs_stores WHERE name = {} FOR UPDATE",
        target.store.literal()
    ))?;
    Ok(messages.iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(row) => row.get(0).and_then(|v| v.parse::<u64>().ok()),
        _ => None,
    }))
}

impl Upstream for Db {
    /// One round trip ([`lock_head`]) with its three outcomes, and the one
    /// retry on a new connection when a kept one turns out dead.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, UpstreamError> {
        for attempt in 0.. {
            let mut conn = self.client()?;
            let client = &mut conn.as_mut().expect("connected").client;
            let head = lock_head(client, &self.target);
            match head {
                Ok(Some(head)) => {
                    // (Tests: a host that stops here holds the head, as one
                    // cut off inside its transaction does.)
                    fail::fail_point!("shared-holding-head");
                    self.knew_head(head);
                    let mut tx = Tx {
                        db: self,
                        conn,
                        head,
                        open: true,
                    };
                    tx.resolve_unknown()?;
                    return Ok(Box::new(tx));
                }
                Ok(None) => {
                    let _ = client.batch_execute("ROLLBACK");
                    self.give_back(&mut conn);
                    return Err(UpstreamError::Unreachable(
                        "the store is no longer in the database".into(),
                    ));
                }
                Err(e) if lost_connection(&e) => {
                    // A kept connection the database ended (a restart, an
                    // administrator): the others kept are likely gone too,
                    // and nothing was sent; once more on a new one.
                    *conn = None;
                    self.database.forget_writers();
                    if attempt == 0 {
                        continue;
                    }
                    return Err(classify(&e));
                }
                Err(e) => {
                    let _ = client.batch_execute("ROLLBACK");
                    self.give_back(&mut conn);
                    return Err(classify(&e));
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// A batch whose changes were all made after the tree had followed to
    /// `seen`, when nothing this host knows of was committed since: its
    /// transaction takes the head to be `seen` without asking, and asks
    /// with the batch itself, in its one round trip (one statement that
    /// fails unless the head is still `seen`, committed as it ends; see
    /// [`Tx::send_and_commit`]). No race check is owed: no
    /// other host committed after any change's `seen` if the guard holds.
    /// When it fails, nothing was committed and the batch goes again with
    /// [`Db::begin`]. One host writing alone so commits in one round trip.
    fn begin_after(&self, seen: u64) -> Result<Box<dyn Transaction + '_>, UpstreamError> {
        let known = self.last_head.load(std::sync::atomic::Ordering::Acquire);
        if known == u64::MAX || seen < known || !self.unknown.lock().is_empty() {
            return self.begin();
        }
        let conn = self.client()?;
        Ok(Box::new(Tx {
            db: self,
            conn,
            head: seen,
            open: false,
        }))
    }
}

/// One batch's transaction; rolled back if dropped uncommitted.
struct Tx<'a> {
    db: &'a Db,
    conn: MutexGuard<'a, Option<Conn>>,
    head: u64,
    /// [`Db::begin`]'s transaction is open on the connection (rolled back
    /// if dropped). None is for a head taken without asking
    /// ([`Db::begin_after`]): the batch's statement commits alone.
    open: bool,
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            if let Some(conn) = self.conn.as_mut() {
                if conn.client.is_closed() || conn.client.batch_execute("ROLLBACK").is_err() {
                    *self.conn = None;
                }
            }
        }
        self.db.give_back(&mut self.conn);
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
        &mut self
            .conn
            .as_mut()
            .expect("connected while the transaction lives")
            .client
    }

    fn failed(&mut self, e: postgres::Error) -> UpstreamError {
        if lost_connection(&e) {
            *self.conn = None;
        }
        classify(&e)
    }

    /// The batch's rows and its commit. One statement holds it all (the
    /// counter moved from the head the batch was numbered after, which
    /// fails with a division by zero unless the head is still that one;
    /// its contents; the paths it touched; the batch; the wake-up),
    /// prepared once per connection (see [`WRITE`]). Guessed (no
    /// transaction open), it runs alone and commits as it ends: one round
    /// trip. In the transaction [`Db::begin`] opened, the `COMMIT` follows.
    ///
    /// Prepared, with the rows as arrays, because planning the statement
    /// anew each time (as a simple query with the values inlined) cost
    /// more than the round trips it saved: on this machine the statement
    /// alone went from 0.60 ms to 0.37 ms (pgbench, `-M simple` against
    /// `-M prepared`).
    fn send_and_commit(&mut self, b: &Outgoing) -> Result<(), postgres::Error> {
        let write = self.write_statement()?;
        let changes = serde_json::to_string(&b.changes).expect("records serialize");
        let shas: Vec<&str> = b.contents.iter().map(|(sha, _)| sha.as_str()).collect();
        let data: Vec<&[u8]> = b.contents.iter().map(|(_, d)| d.as_slice()).collect();
        let paths: Vec<&str> = b.paths.iter().map(String::as_str).collect();
        let db = self.db;
        let payload = format!("{} {}", db.target.store, db.origin);
        let (head, last, first) = (self.head as i64, b.last as i64, (self.head + 1) as i64);
        let batch = b.batch as i64;
        self.client().execute(
            &write,
            &[
                &db.target.store.as_str(),
                &head,
                &last,
                &first,
                &db.origin,
                &batch,
                &b.time,
                &changes,
                &shas,
                &data,
                &paths,
                &CHANNEL,
                &payload,
            ],
        )?;
        if self.open {
            self.client().batch_execute("COMMIT")?;
            self.open = false;
        }
        Ok(())
    }

    /// [`WRITE`], prepared on this connection once.
    fn write_statement(&mut self) -> Result<postgres::Statement, postgres::Error> {
        let conn = self
            .conn
            .as_mut()
            .expect("connected while the transaction lives");
        if let Some(s) = &conn.write {
            return Ok(s.clone());
        }
        let s = conn.client.prepare(WRITE)?;
        conn.write = Some(s.clone());
        Ok(s)
    }

    /// [`Tx::look_up`]; a batch not known to be committed is not this
    /// host's to skip when the follower reads it (if it is there after all,
    /// the follower applies it: the journal and tree do not hold it), and
    /// one whose outcome could not be learned is asked about again before
    /// the next batch (see [`Tx::resolve_unknown`]).
    fn settle_lookup(&mut self, batch: u64, last: u64) -> Result<(), UpstreamError> {
        let found = self.look_up(batch, last);
        match &found {
            Ok(()) => {
                self.db.confirmed.lock().insert(batch, (true, last));
            }
            Err(e) => {
                self.db.confirmed.lock().remove(&batch);
                if matches!(e, UpstreamError::Unreachable(_)) {
                    self.db.unknown.lock().push(batch);
                }
            }
        }
        found
    }

    /// Batches of this host's whose outcome was not learned: those that
    /// committed after all are other hosts' changes now, as far as the
    /// race check goes (the tree took them back; the follower applies
    /// them), so a change made since on top of what the tree held loses
    /// to them instead of being applied under them. Asked holding the
    /// head: the transaction that sent them has ended.
    fn resolve_unknown(&mut self) -> Result<(), UpstreamError> {
        let unknown: Vec<i64> = self.db.unknown.lock().iter().map(|&b| b as i64).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let store = self.db.target.store.as_str().to_string();
        let origin = self.db.origin.clone();
        let rows = self
            .client()
            .query(
                "SELECT seq FROM memfs_batches WHERE store = $1 AND origin = $2 AND batch = ANY($3)",
                &[&store, &origin, &unknown],
            )
            .map_err(|e| self.failed(e))?;
        self.db
            .disowned
            .lock()
            .extend(rows.iter().map(|r| r.get::<_, i64>(0)));
        self.db
            .unknown
            .lock()
            .retain(|b| !unknown.contains(&(*b as i64)));
        Ok(())
    }

    /// After a COMMIT whose answer was lost: asks a new connection whether
    /// the batch is there, for at most [`LOOKUP`] while the database comes
    /// back. It asks holding the store's head (`FOR UPDATE`), so that a
    /// COMMIT still running on the old connection has ended, one way or
    /// the other, before the answer is read (the server ends a session
    /// left idle in its transaction within seconds, see [`connect_as`]).
    fn look_up(&mut self, batch: u64, last: u64) -> Result<(), UpstreamError> {
        *self.conn = None;
        let until = std::time::Instant::now() + LOOKUP;
        let mut last_cause = "the connection was lost during COMMIT".to_string();
        while std::time::Instant::now() < until {
            let mut fresh = match connect(&self.db.target) {
                Ok(fresh) => fresh,
                Err(e) => {
                    if let UpstreamError::Unreachable(c) = e {
                        last_cause = c;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            let found = asked_holding_the_head(
                &mut fresh,
                self.db.target.store.as_str(),
                &self.db.origin,
                batch,
            );
            match found {
                Ok(found) => {
                    self.db.install(&mut self.conn, fresh);
                    if !found {
                        // Not committed: safe to send again.
                        return Err(UpstreamError::Again);
                    }
                    self.db.committed(self.head, last);
                    return Ok(());
                }
                Err(e) => {
                    if let UpstreamError::Unreachable(c) = classify(&e) {
                        last_cause = c;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        Err(UpstreamError::Unreachable(format!(
            "{last_cause}, and the database could not be asked whether it took the change; if it did, every host gets it when the database is back"
        )))
    }
}

/// Whether this origin's batch `batch` is in the store, asked inside a
/// transaction that holds the store's head (and rolled back).
fn asked_holding_the_head(
    client: &mut Client,
    store: &str,
    origin: &str,
    batch: u64,
) -> Result<bool, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.query_opt(
        "SELECT seq FROM memfs_stores WHERE name = $1 FOR UPDATE",
        &[&store],
    )?;
    let found = tx.query_opt(
        "SELECT seq FROM memfs_batches WHERE store = $1 AND origin = $2 AND batch = $3",
        &[&store, &origin, &(batch as i64)],
    )?;
    tx.rollback()?;
    Ok(found.is_some())
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
        let store = self.db.target.store.as_str().to_string();
        let origin = self.db.origin.clone();
        let disowned = self.db.disowned.lock().clone();
        let rows = self
            .client()
            .query(
                "SELECT path, seq FROM memfs_touches WHERE store = $1 AND seq > $2 \
                 AND (origin <> $3 OR seq = ANY($6)) AND (path = ANY($4) OR path LIKE ANY($5))",
                &[
                    &store,
                    &(min_seen as i64),
                    &origin,
                    &exact,
                    &patterns,
                    &disowned,
                ],
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
        // Noted before the COMMIT: the follower may read the batch back
        // before the COMMIT's answer is here, and must know it is ours.
        self.db
            .confirmed
            .lock()
            .insert(batch.batch, (false, batch.last));
        fail::fail_point!("shared-commit-unanswered", |_| {
            // The COMMIT goes, and its answer is lost.
            let _ = self.send_and_commit(&batch);
            self.settle_lookup(batch.batch, batch.last)
        });
        match self.send_and_commit(&batch) {
            Ok(()) => {
                self.db
                    .confirmed
                    .lock()
                    .insert(batch.batch, (true, batch.last));
                self.db.committed(self.head, batch.last);
                Ok(())
            }
            Err(e) if head_moved(&e) => {
                // The head moved (or the store's row is gone): nothing was
                // committed; the batch goes again, asking first.
                self.db.confirmed.lock().remove(&batch.batch);
                self.db.knew_head(u64::MAX);
                Err(UpstreamError::Again)
            }
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                // This origin's batch of that number is there (committed
                // by a run whose answer never came): number past it.
                self.db.confirmed.lock().remove(&batch.batch);
                Err(UpstreamError::Taken(batch.batch + 1))
            }
            Err(e) if refused_before_commit(&e) => {
                self.db.confirmed.lock().remove(&batch.batch);
                Err(self.failed(e))
            }
            // The connection was lost, or the server answered with an
            // error that does not say the transaction was rolled back (an
            // administrator's shutdown, an I/O error on the server): it
            // may have committed, so the database is asked.
            Err(_) => self.settle_lookup(batch.batch, batch.last),
        }
    }
}
