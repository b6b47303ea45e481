//! The one domain error, shared by both doors.
//!
//! The tool door renders it as the spec's text (in `tool/`), the FUSE door as an
//! errno ([`Error::errno`]). No variant carries a host path, so neither
//! rendering can leak one.

use crate::path::PathError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("no such file or directory")]
    NotFound,
    #[error("already exists")]
    Exists,
    #[error("a component of the path is a file, not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("is a symbolic link, which memfs does not follow")]
    IsSymlink,
    #[error("the memory root itself cannot be changed this way")]
    Root,
    #[error("cannot move a directory into itself")]
    IntoItself,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("the file would be {size} bytes, over the limit of {limit} bytes per file")]
    FileTooLarge { size: u64, limit: u64 },
    #[error("the memory would hold {size} bytes, over the limit of {limit} bytes in all")]
    StoreFull { size: u64, limit: u64 },
    #[error("the memory would be deeper than the limit of {limit} levels (--max-depth)")]
    TooDeep { limit: usize },
    #[error("the memory would hold more than the limit of {limit} files and directories (--max-entries)")]
    TooManyEntries { limit: usize },
    #[error("the directory would hold more than the limit of {limit} entries (--max-dir-entries)")]
    DirFull { limit: usize },
    /// A writer's `expected_sha256` does not match the file.
    #[error("its content is not the one expected_sha256 names (its sha256 is now {actual})")]
    Changed { actual: String },
    #[error("{0}")]
    Path(#[from] PathError),
    #[error("{0}")]
    Disk(#[from] DiskError),
    /// The change is in memory (others see it) but the disk has not taken it
    /// yet: it could not be undone, or every step was written and only the
    /// flush failed. memfs writes it again with the next change and at exit.
    #[error("the change is in memory, but not yet safely on disk ({0}); memfs writes it again with the next change and at shutdown")]
    Unsaved(DiskError),
    /// Another host sharing the store changed one of the change's paths
    /// first (after version `seq`'s predecessors this host had seen): the
    /// change was taken back; the tool runs the command again on the new
    /// content once this host has it.
    #[error("another host changed it first (version {seq})")]
    Conflict { seq: u64 },
    /// The shared store (PostgreSQL) could not be reached, or failed part
    /// way: nothing of the change was committed. The cause never names a
    /// host path.
    #[error("the shared store cannot be reached ({0})")]
    Unreachable(String),
}

impl Error {
    /// The errno the FUSE door answers with.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound => libc::ENOENT,
            Error::Exists => libc::EEXIST,
            Error::NotDir => libc::ENOTDIR,
            Error::IsDir => libc::EISDIR,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::IsSymlink => libc::ELOOP,
            Error::Root => libc::EBUSY,
            Error::IntoItself => libc::EINVAL,
            Error::NotPermitted => libc::EPERM,
            Error::FileTooLarge { .. } => libc::EFBIG,
            Error::StoreFull { .. } => libc::ENOSPC,
            Error::TooDeep { .. } => libc::ENAMETOOLONG,
            Error::TooManyEntries { .. } | Error::DirFull { .. } => libc::ENOSPC,
            Error::Path(PathError::NameTooLong | PathError::PathTooLong) => libc::ENAMETOOLONG,
            Error::Path(_) => libc::EINVAL,
            Error::Disk(d) => d.errno,
            Error::Unsaved(_) => libc::EIO,
            Error::Changed { .. } => libc::ESTALE,
            Error::Conflict { .. } => libc::EAGAIN,
            Error::Unreachable(_) => libc::EIO,
        }
    }
}

/// A refusal from the disk under the data dir (full, read-only, I/O error).
///
/// It keeps the errno and what memfs was doing, never the path it was doing it to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the change could not be saved to disk while {doing}: {}", std::io::Error::from_raw_os_error(*.errno))]
pub struct DiskError {
    pub errno: i32,
    pub doing: &'static str,
}

impl DiskError {
    pub fn new(doing: &'static str, err: impl Into<std::io::Error>) -> Self {
        let err: std::io::Error = err.into();
        DiskError {
            errno: err.raw_os_error().unwrap_or(libc::EIO),
            doing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_error_names_the_cause_not_the_path() {
        let e = Error::from(DiskError::new("writing a file", rustix::io::Errno::NOSPC));
        let text = e.to_string();
        assert!(text.contains("No space left on device"), "{text}");
        assert!(text.contains("writing a file"), "{text}");
        assert_eq!(e.errno(), libc::ENOSPC);
    }
}
