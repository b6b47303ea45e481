//! The data dir on disk: loading it, the exclusive lock, and durable, atomic,
//! group-committed writes of the store's changes.

mod committer;
mod datadir;
mod fsops;
pub mod load;
mod walk;

pub use committer::{Persister, Stats};
pub use datadir::{open_state_dir, DataDir, OpenError};
