//! A connection that reads a shared store's batches and contents, for
//! catching up; any store of its database, named in each call, so that
//! the followers of many stores share a few of them.

use std::sync::Arc;

use postgres::Client;

use super::connect::{classify, connect_as, make_tables};
use super::target::Target;
use crate::journal::{ChangeRec, UpstreamError};

/// One committed batch, as the follower reads it.
#[derive(Debug, Clone)]
pub struct Batch {
    pub seq: u64,
    pub origin: String,
    pub batch: u64,
    pub changes: Vec<ChangeRec>,
}

/// The follower's reads, on a connection of the database's.
pub struct Reader {
    pub client: Client,
    /// The follower's two queries, prepared once on the connection: each
    /// is asked at every catch-up, and unprepared each would be planned
    /// again and cost a second round trip (the crate's unnamed statement).
    after: postgres::Statement,
    contents: postgres::Statement,
}

impl super::connect::Held for Reader {
    fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl Reader {
    /// Connects (to `target`'s database; its store does not matter) and
    /// makes the tables if missing.
    pub fn open(target: &Target) -> Result<Reader, UpstreamError> {
        let mut client = connect_as(target, "memfs-follow")?;
        make_tables(&mut client)?;
        let after = client
            .prepare(
                "SELECT seq, origin, batch, changes FROM memfs_batches \
                 WHERE store = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .map_err(|e| classify(&e))?;
        let contents = client
            .prepare("SELECT sha, data FROM memfs_contents WHERE store = $1 AND sha = ANY($2)")
            .map_err(|e| classify(&e))?;
        Ok(Reader {
            client,
            after,
            contents,
        })
    }

    /// Up to `limit` batches of `store` after `after`, in order.
    pub fn batches_after(
        &mut self,
        store: &str,
        after: u64,
        limit: i64,
    ) -> Result<Vec<Batch>, UpstreamError> {
        let rows = self
            .client
            .query(&self.after, &[&store, &(after as i64), &limit])
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

    /// The contents of these sha256s that `store` holds.
    pub fn contents(
        &mut self,
        store: &str,
        shas: &[String],
    ) -> Result<std::collections::HashMap<String, Arc<Vec<u8>>>, UpstreamError> {
        if shas.is_empty() {
            return Ok(Default::default());
        }
        let rows = self
            .client
            .query(&self.contents, &[&store, &shas])
            .map_err(|e| classify(&e))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), Arc::new(r.get::<_, Vec<u8>>(1))))
            .collect())
    }
}
