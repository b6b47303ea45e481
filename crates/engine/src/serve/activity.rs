//! What a server may watch of a peer as it reads and answers: a leaf the
//! line reader and the pipeline both use.

/// Hooks a server uses to see what a peer is doing (the socket evicts only
/// peers idle between whole calls). Every method does nothing by default.
pub trait Activity: Sync {
    /// The first bytes of a line arrived.
    fn line_started(&self) {}
    /// A whole line was read; `answered` says whether an answer will follow.
    fn line_read(&self, _answered: bool) {}
    /// An answer was written.
    fn answer_written(&self) {}
}

/// No hooks.
pub struct Unobserved;
impl Activity for Unobserved {}
