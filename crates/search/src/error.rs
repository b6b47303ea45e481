//! Why the index could not be opened, read or written: the causes a caller
//! tells apart (an index to build again, a disk to see to, a journal that
//! cannot be read), each said in words a person reads.

use std::io;

/// What went wrong with a memory's search index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// No index in its directory (never built, or removed).
    #[error("no search index ({0})")]
    Missing(#[source] io::Error),
    /// An index made by another analyzer or with another schema: built
    /// again, never read.
    #[error("the search index was made by another version")]
    OtherVersion,
    /// The engine failed: a damaged index, or the disk under it.
    #[error("the search index could not be {doing}: {source}")]
    Engine {
        doing: &'static str,
        #[source]
        source: tantivy::TantivyError,
    },
    /// A file or directory of memfs' own beside the engine's.
    #[error("the search index could not be {doing}: {source}")]
    Disk {
        doing: &'static str,
        #[source]
        source: io::Error,
    },
    /// The journal the index follows could not be read.
    #[error("{0}")]
    History(String),
}

impl IndexError {
    /// The disk is full (or the quota reached): building the index again
    /// would fail the same way, and would throw away the one there.
    pub fn disk_full(&self) -> bool {
        let full = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
            )
        };
        match self {
            IndexError::Missing(e) | IndexError::Disk { source: e, .. } => full(e),
            IndexError::Engine { source, .. } => engine_io(source).is_some_and(full),
            _ => false,
        }
    }
}

impl IndexError {
    /// Whether a later try may succeed as it is (the process out of file
    /// descriptors or memory, a full disk, an interrupted call): then the
    /// index is not built again (which would throw away a good one); any
    /// other failure to open it (none there, another version, damaged)
    /// is answered by a build from the tree.
    pub fn passing(&self) -> bool {
        let passing = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::StorageFull
                    | io::ErrorKind::QuotaExceeded
                    | io::ErrorKind::OutOfMemory
                    | io::ErrorKind::Interrupted
                    | io::ErrorKind::WouldBlock
                    | io::ErrorKind::PermissionDenied
            ) || matches!(e.raw_os_error(), Some(23 | 24)) // ENFILE, EMFILE
        };
        match self {
            IndexError::Missing(e) => e.kind() != io::ErrorKind::NotFound && passing(e),
            IndexError::Disk { source, .. } => passing(source),
            IndexError::Engine { source, .. } => engine_io(source).is_some_and(passing),
            IndexError::OtherVersion | IndexError::History(_) => false,
        }
    }
}

/// The I/O error under an engine error, if it is one.
fn engine_io(e: &tantivy::TantivyError) -> Option<&io::Error> {
    match e {
        tantivy::TantivyError::IoError(io) => Some(&**io),
        _ => None,
    }
}

/// An engine error while `doing`.
pub(crate) fn engine(doing: &'static str) -> impl Fn(tantivy::TantivyError) -> IndexError {
    move |source| IndexError::Engine { doing, source }
}

/// A disk error of memfs' own while `doing`.
pub(crate) fn disk(doing: &'static str) -> impl Fn(io::Error) -> IndexError {
    move |source| IndexError::Disk { doing, source }
}
