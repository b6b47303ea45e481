//! memfs's HTTP door (docs/DESIGN.md, "Crates"), the top layer below the
//! binary: many stores in one server (`serve --http`), the memory stores
//! API, MCP over streamable HTTP, bearer tokens per store, the stores'
//! catalog on disk or in PostgreSQL; it serves the page of `memfs-web`
//! too, on that crate's listener.
//!
//! It uses the crates below it only; nothing below knows it.

// The lower crates' modules under the names the rest of memfs knows them by.
use memfs_core::{digest, error, json, lock, path, pool, say, store, text, tool, units};
use memfs_durable::{journal, persist};
use memfs_engine::{control, memory, remote, serve};
use memfs_fuse as fuse;
use memfs_search as search;
use memfs_shared as shared;
use memfs_web::{form, listen, web};

pub mod http;
