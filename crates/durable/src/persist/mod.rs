//! The data dir on disk: loading it, the exclusive lock, and durable, atomic,
//! group-committed writes of the store's changes.

mod datadir;
pub mod fsops;
pub mod known;
pub mod last_reads;
pub mod load;
pub mod storage;
mod walk;

pub use datadir::{open_state_dir, read_key, DataDir, OpenError};
pub use fsops::{list_names, read_file};
