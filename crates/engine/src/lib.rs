//! memfs's engine (docs/DESIGN.md, "Crates"): a memory opened on a data
//! dir, and the doors of one machine.
//!
//! - [`memory`]: a store opened on its data dir (or a shared store), with
//!   its journal, checkpointer, search and follower;
//! - [`outside`]: the plain files as a door (the watcher and the taker);
//! - [`control`]: the commands beyond the tool (history, expiry, search,
//!   the keyed control lines);
//! - [`transfer`]: what `memfs import` reads and `memfs export` writes;
//! - [`serve`]: the tool over stdio, the socket and MCP.
//!
//! It uses the crates below it only; the HTTP door and the page sit above.

// The lower crates' modules under the names the rest of memfs knows them by.
use memfs_core::{
    digest, error, guard, json, lock, merge, path, pool, say, store, text, tool, units,
};
use memfs_durable::{journal, persist};
use memfs_fuse as fuse;
use memfs_search as search;
use memfs_shared as shared;

pub mod control;
pub mod memory;
pub mod outside;
pub mod remote;
pub mod serve;
pub mod transfer;
