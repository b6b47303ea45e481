//! memfs's bottom layer (docs/DESIGN.md, "Crates"): what every other crate
//! of memfs builds on, and nothing that touches a disk format, a database
//! or a door.
//!
//! - leaves: [`path`] (the memory's paths), [`digest`], [`text`] (clipping
//!   and labels), [`units`], [`json`] (JSON from peers), [`error`] (the one
//!   domain error), [`lock`] (the ranked locks, every rank in
//!   [`lock::rank`]) and [`pool`] (the shared worker threads);
//! - [`merge`]: the three-way merge of two edits of one text;
//! - [`store`]: the tree, its one lock and the change records;
//! - [`guard`]: policies on content (secrets);
//! - [`tool`]: the six commands of the memory tool on a store.
//!
//! Nothing here may use another memfs crate: the compiler refuses it.

pub mod digest;
pub mod error;
pub mod guard;
pub mod json;
pub mod lock;
pub mod merge;
pub mod path;
pub mod pool;
pub mod store;
pub mod text;
pub mod tool;
pub mod units;

pub use error::Error;
pub use tool::{ToolConfig, ToolResult};

/// `eprintln!` that cannot panic: when stderr cannot be written (closed, or
/// a full disk behind `2>file`), the message is lost, never the process (a
/// panic there would end an owner before it wrote its memory out).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // (What others wrote, quoted in a message, never acts on a terminal.)
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::text::printable_lines(&text));
    }};
}
