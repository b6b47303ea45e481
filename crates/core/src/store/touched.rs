//! What the kernel may hold in its caches that a change made stale: the
//! change records carry it, undoing a change computes it, the mount's
//! invalidator drops it.

use super::tree::Ino;

/// Something the kernel may hold in its caches that a change made stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// The node's attributes or contents.
    Inode(Ino),
    /// A name in a directory (present or not).
    Entry(Ino, String),
}
