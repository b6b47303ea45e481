//! Transports for tool calls. They frame lines; the commands live in `tool/`.

pub mod activity;
pub mod attach;
pub mod hub;
pub mod jsonrpc;
pub mod line;
pub mod mcp;
pub mod mcp_wire;
pub mod pipeline;
pub mod reader;
pub mod socket;
pub mod stream;
pub mod vocab;

/// The longest request line a transport reads, for a given file-size limit:
/// room for a whole file's text JSON-escaped at its worst (`\u00XX`, 6 bytes a byte).
pub fn max_line_bytes(max_file_size: u64) -> usize {
    (max_file_size as usize)
        .saturating_mul(6)
        .saturating_add(64 << 10)
}
