//! memfs's page for people and the listener of the HTTP doors
//! (docs/DESIGN.md, "Crates"):
//!
//! - [`web`]: the page (`memfs web`, and `/web` of `serve --http`);
//! - [`listen`]: the one HTTP/1.1 listener both HTTP doors run on (hyper
//!   on a small tokio runtime at the door only);
//! - [`form`]: query strings and form bodies from untrusted peers.
//!
//! It uses `memfs-core`, `memfs-durable` and `memfs-engine` only; the HTTP
//! door (`memfs-http`) sits above it and serves the page too.

// The lower crates' modules under the names the rest of memfs knows them by.
use memfs_core::{digest, lock, say, tool, units};
use memfs_durable::journal;
use memfs_engine::{control, memory, remote, serve};

pub mod form;
pub mod listen;
pub mod web;
