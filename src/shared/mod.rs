//! A memory several hosts share through PostgreSQL (`--data
//! postgres://...?store=NAME`).
//!
//! Each host keeps its own copy (a data dir of its own: tree, journal,
//! plain files, socket, mount) and the database holds the truth: each
//! batch of this host's changes is committed there (`db.rs`, through the
//! journal's upstream, `journal/upstream.rs`) before it is acknowledged,
//! and the follower (`follow.rs`) applies every other host's batches to the
//! copy in the store's order. `target.rs` reads the URL.

mod db;
mod follow;
mod target;
pub mod unsent;

pub use db::{classify, connect_as, prepare, Db, CHANNEL};
pub use follow::{Follow, Follower, Progress};
pub use target::{is_url, StoreName, Target};
