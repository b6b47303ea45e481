//! The HTTP door (`memfs --stores ROOT serve --http ADDR`): many stores in
//! one server, the memory stores API as the pinned Anthropic SDK's
//! `client.beta.memory_stores` calls it, the memory tool over MCP's
//! streamable HTTP, and bearer tokens that name the stores they reach.
//! Above the store and the journal; nothing below knows it.

pub mod api;
mod atomic;
pub mod catalog;
pub mod catalog_pg;
pub mod changed;
mod dir_watch;
pub mod error;
pub mod ids;
pub mod limits;
pub mod mcp;
pub mod metas;
pub mod registry;
pub mod root_lock;
pub mod server;
pub mod tokens;
pub mod web;
pub mod wire;

pub use limits::Bounds;
pub use registry::SocketBounds;
pub use server::{run, Config};
pub use tokens::{Access, Tokens};
