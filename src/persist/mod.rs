//! The data dir on disk: loading it, the exclusive lock, and durable, atomic,
//! group-committed writes of the store's changes.

mod committer;
mod datadir;
mod fsops;
pub mod load;
pub mod usage;
mod walk;

pub use committer::{Persister, Stats};
pub(crate) use datadir::subdir as private_subdir;
pub use datadir::{open_state_dir, read_key, DataDir, OpenError};
pub(crate) use fsops::{read_file, sync_all, sync_data};
