//! Connections to a shared store's database: how one is made (bounded on
//! both ends), the tables every connection may need, and what a failed
//! call means, in words that name no host path.

use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, NoTls};

use super::target::Target;
use crate::journal::UpstreamError;

/// The NOTIFY channel; the payload names the store and the origin that
/// committed (`STORE ORIGIN`).
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

/// Connects with bounds: a database that does not answer is given up on
/// in seconds, not minutes.
pub fn connect(target: &Target) -> Result<Client, UpstreamError> {
    connect_as(target, "memfs")
}

/// [`connect`], naming the connection (`application_name`: `memfs` for
/// the writer's, `memfs-follow` for the follower's reads, `memfs-listen`
/// for the connection that waits for wake-ups).
///
/// Every session is bounded on the server too: a lock waited for longer
/// than `lock_timeout` is an error (55P03, the store is "unreachable" to
/// that write, which fails fast), and a session idle inside a transaction
/// for `idle_in_transaction_session_timeout` is ended by the server, so a
/// host cut off in the middle of a batch holds the store's head for
/// seconds, not until TCP gives up on it. The idle bound is below the lock
/// bound: a write that waits behind a dead host's transaction gets the
/// head when the server ends it.
pub fn connect_as(target: &Target, name: &str) -> Result<Client, UpstreamError> {
    let mut config = target.config();
    let mut options = config.get_options().unwrap_or("").to_string();
    options.push_str(
        " -c lock_timeout=8s -c idle_in_transaction_session_timeout=4s -c standard_conforming_strings=on",
    );
    config.options(options.trim());
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

/// Makes the tables if they are missing (hosts that start at once may
/// race to make them: the loser tries again).
pub fn make_tables(client: &mut Client) -> Result<(), UpstreamError> {
    let mut tries = 0;
    loop {
        match client.batch_execute(SCHEMA) {
            Ok(()) => return Ok(()),
            Err(e) if tries < 3 && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => tries += 1,
            Err(e) => return Err(classify(&e)),
        }
    }
}

/// Makes the tables and the store's row if they are missing.
pub fn prepare(client: &mut Client, store: &str) -> Result<(), UpstreamError> {
    make_tables(client)?;
    client
        .execute(
            "INSERT INTO memfs_stores (name) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&store],
        )
        .map(|_| ())
        .map_err(|e| classify(&e))
}

/// Why a call failed, in words that name no host path.
pub fn classify(e: &postgres::Error) -> UpstreamError {
    if let Some(code) = e.code() {
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return UpstreamError::Again;
        }
        // A login the server refused, or a database it does not have: its
        // own words say which ("password authentication failed for user
        // \"x\"", "database \"y\" does not exist"), and name no path here.
        let login = code.code().starts_with("28") || *code == SqlState::INVALID_CATALOG_NAME;
        if let Some(db) = e.as_db_error().filter(|_| login) {
            return UpstreamError::Unreachable(format!(
                "{} (SQLSTATE {})",
                db.message(),
                code.code()
            ));
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

/// Whether the connection is gone: an error the server did not send.
pub fn lost_connection(e: &postgres::Error) -> bool {
    e.code().is_none()
}

/// A connection, as [`Kept`] holds it.
pub trait Held {
    fn client(&mut self) -> &mut Client;
}

impl Held for Client {
    fn client(&mut self) -> &mut Client {
        self
    }
}

/// A kept connection unused this long is checked before it is used.
const RECHECK: Duration = Duration::from_secs(2);

/// Connections kept between uses (at most `max`; more are made while
/// busy, and closed after). One kept a while may have been dropped by the
/// network meanwhile (a cut that ended), which the client only learns
/// when it next uses it: [`Kept::take`] asks it first, with one empty
/// round trip, rather than fail a request on it.
pub struct Kept<T> {
    idle: crate::lock::Mutex<Vec<(T, std::time::Instant)>>,
    max: usize,
}

impl<T: Held> Kept<T> {
    pub fn new(rank: crate::lock::Rank, max: usize) -> Kept<T> {
        Kept {
            idle: crate::lock::Mutex::new(rank, Vec::new()),
            max,
        }
    }

    /// A kept connection that answers, if there is one (checked with no
    /// lock held).
    pub fn take(&self) -> Option<T> {
        loop {
            let (mut conn, last) = self.idle.lock().pop()?;
            if conn.client().is_closed() {
                continue;
            }
            if last.elapsed() < RECHECK || conn.client().is_valid(Duration::from_secs(1)).is_ok() {
                return Some(conn);
            }
        }
    }

    /// Keeps a connection for the next use (closed if enough are kept).
    pub fn keep(&self, mut conn: T) {
        if conn.client().is_closed() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() < self.max {
            idle.push((conn, std::time::Instant::now()));
        }
    }

    /// Closes every kept connection (one was found dead: the others likely
    /// are too).
    pub fn clear(&self) {
        self.idle.lock().clear();
    }
}
