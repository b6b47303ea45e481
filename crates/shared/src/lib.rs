//! A memory several hosts share through PostgreSQL (`--data
//! postgres://...?store=NAME`).
//!
//! Each host keeps its own copy (a data dir of its own: tree, journal,
//! plain files, socket, mount) and the database holds the truth: each
//! batch of this host's changes is committed there (`db.rs`, through the
//! journal's upstream, `journal/upstream.rs`) before it is acknowledged,
//! and the follower (`follow.rs`) applies every other host's batches to the
//! copy in the store's order, read on `reader.rs`'s connections.
//! `database.rs` is what the open stores of one database share (kept
//! connections, the one listener), `connect.rs` how a connection is made,
//! and `target.rs` reads the URL.
//!
//! A crate of its own (docs/DESIGN.md, "Crates"): it uses `memfs-core` and
//! `memfs-durable` only, and is handed what it needs from above (the
//! journal's `Upstream` it implements, a `Weak<Store>` to follow into).

// The lower crates' modules under the names the rest of memfs knows them by.
use memfs_core::{error, lock, path, pool, store};
use memfs_durable::journal;

mod connect;
mod database;
mod db;
mod follow;
mod reader;
mod target;
pub mod unsent;

pub use connect::{classify, connect_as, make_tables, prepare, Held, Kept, CHANNEL};
pub use db::Db;
pub use follow::{Follow, Follower};
pub use target::{is_url, StoreName, Target, TargetError};
