//! Why the page could not show or do something: said on the page (or as
//! `memfs web`'s last words), never branched on by cause except where a
//! caller falls back.

/// One refusal of the page's.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The owner refused a history request: its words, as the control
    /// protocol carries them (`Reply::err`).
    #[error("{0}")]
    Refused(String),
    #[error("the owner's answer is not the history: {0}")]
    NotHistory(#[source] serde_json::Error),
    #[error("version {0} is redacted")]
    Redacted(u64),
    #[error("version {replaced}, which version {version} replaced, is no longer kept")]
    ReplacedGone { replaced: u64, version: u64 },
    #[error("version {0}, which this replaced, is no longer kept")]
    NetReplacedGone(u64),
    /// `reviewed.json` could not be written.
    #[error("{}", crate::units::describe_io(.0))]
    Reviewed(#[source] std::io::Error),
    #[error("no randomness: {0}")]
    NoRandomness(#[source] std::io::Error),
}
