//! A stores root in PostgreSQL (`--stores postgres://...`): the stores'
//! records and the tokens (their hashes) in tables beside the shared
//! store's, so that any number of servers on any hosts serve one set of
//! stores. Each store's memory is one of the database's shared stores
//! (named by its id), so `--data postgres://...?store=ID` on any host is
//! the same memory, live.
//!
//! - `memfs_catalog`: one row, `gen`, moved by every change of a record;
//!   each server reads the records changed past the `gen` it holds, a few
//!   times a second (`http::registry::Registry::tend`).
//! - `memfs_catalog_stores`: each store's record (JSON, as a local root
//!   keeps it), with the `gen` of its last change; a deleted store keeps
//!   its row with no record, so that every server hears of the deletion.
//! - `memfs_catalog_tokens`: each token's record by the sha256 of its
//!   secret. A server looks a presented token up here on every request: a
//!   token made on one host works on every server at once, and one revoked
//!   is refused by every server from its next request.
//!
//! What a request's head needs (its token, the record of the store it
//! names and that store's head) is one statement, one round trip
//! ([`PgCatalog::look`]), prepared once on each of the catalog's
//! connections (a statement named by its text is prepared anew on each
//! call: a second round trip, and the database plans it each time).

use std::io;

use postgres::error::SqlState;

use postgres::{Client, Statement};

use super::catalog::CatalogError;
use super::metas::StoreMeta;
use super::tokens::{Token, TokenStore};
use crate::lock::rank;
use crate::shared::{Kept, StoreName, Target};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memfs_catalog (id INT PRIMARY KEY, gen BIGINT NOT NULL);
INSERT INTO memfs_catalog (id, gen) VALUES (1, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS memfs_catalog_stores (
    id TEXT PRIMARY KEY,
    record TEXT,
    gen BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS memfs_catalog_stores_by_gen ON memfs_catalog_stores (gen);
CREATE TABLE IF NOT EXISTS memfs_catalog_secret (id INT PRIMARY KEY, secret TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memfs_catalog_mcp_ended (
    id TEXT PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS memfs_catalog_tokens (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
";

/// Connections kept for the catalog's queries (more are made while busy).
const KEPT: usize = 4;

/// A record changed past a `gen`: the store's record, or none (deleted).
pub type Changed = (String, Option<StoreMeta>);

/// What the catalog holds for a request's head ([`PgCatalog::look`]).
pub struct Looked {
    /// The token whose secret was presented, if any.
    pub token: Option<Token>,
    /// The store the path names, if it names one.
    pub store: Option<LookedStore>,
}

/// A store as a request's head found it in the database.
#[derive(Clone, Debug)]
pub struct LookedStore {
    pub id: String,
    /// Its record; none if there is no such store (or it was deleted).
    pub meta: Option<StoreMeta>,
    /// The newest version of its memory in the database (0: none yet).
    pub head: u64,
}

pub struct PgCatalog {
    target: Target,
    idle: Kept<Conn>,
}

/// One of the catalog's connections, and [`LOOK`] once prepared on it.
struct Conn {
    client: Client,
    look: Option<Statement>,
}

impl crate::shared::Held for Conn {
    fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// [`PgCatalog::look`]'s statement.
const LOOK: &str = "SELECT (SELECT record FROM memfs_catalog_tokens WHERE sha256 = $1), \
                           (SELECT record FROM memfs_catalog_stores WHERE id = $2), \
                           (SELECT seq FROM memfs_stores WHERE name = $2)";

impl PgCatalog {
    /// Connects to the database `target` names and makes the tables (and
    /// the shared store's) if missing.
    pub fn open(target: Target) -> Result<PgCatalog, CatalogError> {
        let catalog = PgCatalog {
            target,
            idle: Kept::new(rank::CATALOG_CONNS, KEPT),
        };
        catalog.with(|c| {
            let mut tries = 0;
            loop {
                match c.batch_execute(SCHEMA) {
                    Err(e) if tries < 3 && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                        tries += 1
                    }
                    done => return done,
                }
            }
        })?;
        // (The shared stores' tables too: a request's head reads a store's
        // head from them before any store was opened here.)
        let mut client = crate::shared::connect_as(&catalog.target, "memfs-catalog")?;
        crate::shared::make_tables(&mut client)?;
        catalog.idle.keep(Conn { client, look: None });
        Ok(catalog)
    }

    /// The database, as a shared store's target.
    pub fn store_target(&self, id: &str) -> Result<Target, CatalogError> {
        Ok(self
            .target
            .with_store(StoreName::parse(id).map_err(|e| CatalogError::Refused(e.to_string()))?))
    }

    /// Runs `f` on a connection of the catalog's (a broken one is dropped).
    fn with<R>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error>,
    ) -> Result<R, CatalogError> {
        self.with_conn(|conn| f(&mut conn.client))
    }

    /// [`PgCatalog::with`], with the connection's prepared statements.
    fn with_conn<R>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, postgres::Error>,
    ) -> Result<R, CatalogError> {
        let mut conn = match self.idle.take() {
            Some(c) => c,
            None => Conn {
                client: crate::shared::connect_as(&self.target, "memfs-catalog")?,
                look: None,
            },
        };
        let done = f(&mut conn);
        // (A connection that is gone is not kept.)
        if !matches!(&done, Err(e) if e.code().is_none()) {
            self.idle.keep(conn);
        }
        done.map_err(|e| crate::shared::classify(&e).into())
    }

    /// Writes a store's record (none: deleted) with a new `gen`.
    fn put(&self, id: &str, record: Option<String>) -> Result<(), CatalogError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let gen: i64 = tx
                .query_one(
                    "UPDATE memfs_catalog SET gen = gen + 1 WHERE id = 1 RETURNING gen",
                    &[],
                )?
                .get(0);
            tx.execute(
                "INSERT INTO memfs_catalog_stores (id, record, gen) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, gen = EXCLUDED.gen",
                &[&id, &record, &gen],
            )?;
            tx.commit()
        })
    }

    pub fn put_store(&self, meta: &StoreMeta) -> Result<(), CatalogError> {
        let record = serde_json::to_string(meta).map_err(io::Error::from)?;
        self.put(&meta.id, Some(record))
    }

    /// Marks store `id` deleted, and deletes its memory's rows.
    pub fn delete_store(&self, id: &str) -> Result<(), CatalogError> {
        self.put(id, None)?;
        self.with(|c| {
            let mut tx = c.transaction()?;
            for table in ["memfs_touches", "memfs_contents", "memfs_batches"] {
                tx.execute(&format!("DELETE FROM {table} WHERE store = $1"), &[&id])?;
            }
            tx.execute("DELETE FROM memfs_stores WHERE name = $1", &[&id])?;
            tx.commit()
        })
    }

    /// The records changed past `gen`, and the `gen` they bring it to.
    pub fn changed_since(&self, gen: i64) -> Result<(i64, Vec<Changed>), CatalogError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT id, record, gen FROM memfs_catalog_stores WHERE gen > $1 ORDER BY gen",
                &[&gen],
            )
        })?;
        let mut top = gen;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.get(0);
            let record: Option<String> = row.get(1);
            top = top.max(row.get::<_, i64>(2));
            let meta = match record {
                None => None,
                Some(text) => match serde_json::from_str::<StoreMeta>(&text) {
                    Ok(meta) if meta.id == id => Some(meta),
                    _ => {
                        tracing::warn!("the record of store {id} is damaged; it is left out");
                        continue;
                    }
                },
            };
            out.push((id, meta));
        }
        Ok((top, out))
    }

    /// Store `id`'s record now, if it has one.
    pub fn store(&self, id: &str) -> Result<Option<StoreMeta>, CatalogError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT record FROM memfs_catalog_stores WHERE id = $1",
                &[&id],
            )
        })?;
        Ok(row
            .and_then(|r| r.get::<_, Option<String>>(0))
            .and_then(|t| serde_json::from_str::<StoreMeta>(&t).ok())
            .filter(|m| m.id == id))
    }

    /// The key every server of the database signs what it hands out with
    /// (MCP session ids): made once, by the first server.
    pub fn secret(&self) -> Result<Vec<u8>, CatalogError> {
        let mine = crate::digest::random_hex(32)?;
        let row = self.with(|c| {
            c.execute(
                "INSERT INTO memfs_catalog_secret (id, secret) VALUES (1, $1) ON CONFLICT DO NOTHING",
                &[&mine],
            )?;
            c.query_one("SELECT secret FROM memfs_catalog_secret WHERE id = 1", &[])
        })?;
        Ok(row.get::<_, String>(0).into_bytes())
    }

    /// Notes that MCP session `id` ended (a client's DELETE through any
    /// server), and forgets those ended more than a week ago.
    pub fn end_mcp_session(&self, id: &str) -> Result<(), CatalogError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO memfs_catalog_mcp_ended (id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&id],
            )?;
            c.execute(
                "DELETE FROM memfs_catalog_mcp_ended WHERE at < now() - interval '7 days'",
                &[],
            )
        })
        .map(|_| ())
    }

    /// Whether MCP session `id` was ended through some server.
    pub fn mcp_session_ended(&self, id: &str) -> Result<bool, CatalogError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT 1 FROM memfs_catalog_mcp_ended WHERE id = $1",
                &[&id],
            )
        })?;
        Ok(row.is_some())
    }

    /// The token whose secret hashes to `sha256`, and the store `store`
    /// (its record and its head), in one round trip.
    pub fn look(&self, sha256: &str, store: Option<&str>) -> Result<Looked, CatalogError> {
        let id = store.unwrap_or_default();
        let rows = self.with_conn(|conn| {
            let look = match &conn.look {
                Some(s) => s.clone(),
                None => conn.look.insert(conn.client.prepare(LOOK)?).clone(),
            };
            conn.client.query(&look, &[&sha256, &id])
        })?;
        let row = rows.first();
        let text = |i: usize| row.and_then(|r| r.get::<_, Option<String>>(i));
        Ok(Looked {
            token: text(0).and_then(|t| serde_json::from_str::<Token>(&t).ok()),
            store: store.map(|id| LookedStore {
                id: id.to_string(),
                meta: text(1)
                    .and_then(|t| serde_json::from_str::<StoreMeta>(&t).ok())
                    .filter(|m| m.id == id),
                head: row
                    .and_then(|r| r.get::<_, Option<i64>>(2))
                    .map_or(0, |seq| seq.max(0) as u64),
            }),
        })
    }

    /// The newest version id of store `id`'s memory in the database.
    pub fn head(&self, id: &str) -> Result<u64, CatalogError> {
        let row =
            self.with(|c| c.query_opt("SELECT seq FROM memfs_stores WHERE name = $1", &[&id]))?;
        Ok(row.map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))
    }
}

impl TokenStore for PgCatalog {
    /// The token whose secret hashes to `sha256`, if any.
    fn token(&self, sha256: &str) -> Result<Option<Token>, CatalogError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT record FROM memfs_catalog_tokens WHERE sha256 = $1",
                &[&sha256],
            )
        })?;
        Ok(row.and_then(|r| serde_json::from_str::<Token>(&r.get::<_, String>(0)).ok()))
    }

    fn tokens(&self) -> Result<Vec<Token>, CatalogError> {
        let rows =
            self.with(|c| c.query("SELECT record FROM memfs_catalog_tokens ORDER BY name", &[]))?;
        Ok(rows
            .iter()
            .filter_map(|r| serde_json::from_str::<Token>(&r.get::<_, String>(0)).ok())
            .collect())
    }

    /// Adds `token`; an error if its name is taken.
    fn add_token(&self, token: &Token) -> Result<(), CatalogError> {
        let record = serde_json::to_string(token).map_err(io::Error::from)?;
        let added = self.with(|c| {
            c.execute(
                "INSERT INTO memfs_catalog_tokens (sha256, name, record) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
                &[&token.sha256, &token.name, &record],
            )
        })?;
        match added {
            1 => Ok(()),
            _ => Err(CatalogError::Refused(format!(
                "a token named {} exists; revoke it first, or pick another --name",
                token.name
            ))),
        }
    }

    /// Revokes the token named `name`; false if there is none.
    fn revoke(&self, name: &str) -> Result<bool, CatalogError> {
        let gone =
            self.with(|c| c.execute("DELETE FROM memfs_catalog_tokens WHERE name = $1", &[&name]))?;
        Ok(gone > 0)
    }
}
