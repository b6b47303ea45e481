//! memfs's durable layer (docs/DESIGN.md, "Crates"): what makes a change
//! last and what remembers it.
//!
//! - [`persist`]: the data dir (its lock, key, `tmp/` and `trash/`),
//!   loading the plain files, the plain-file operations the checkpointer
//!   uses, and the one storage interface every durable byte goes through
//!   (the real disk, and the in-memory disk that loses power);
//! - [`journal`]: the journal (group commit, one frame, one `fdatasync`),
//!   the checkpointer that keeps the plain files, the history and its
//!   retention.
//!
//! It uses `memfs-core` only: the compiler keeps it from the doors, search
//! and the shared store (which sits above it and hands it a commit path).

// The core's modules under the names the rest of memfs knows them by.
use memfs_core::{digest, error, lock, path, pool, store, text, units};

pub mod journal;
pub mod persist;
