//! Why a command of the binary stopped: said once, as its last words
//! (`memfs: {e}`, exit 2). The libraries' errors stay typed up to that
//! line; a sentence composed where the trouble was is `Said`, written out
//! at its site (there is no `From<String>`, so a text cannot slip in
//! unseen).

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An io step on a path: `cannot make /x: Permission denied (os error 13)`.
    #[error("cannot {doing} {}: {source}", .path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// Another memfs (the data dir's owner) refused: its words, as the
    /// control protocol carries them.
    #[error("{0}")]
    Owner(String),
    #[error(transparent)]
    Open(#[from] memfs::persist::OpenError),
    #[error(transparent)]
    Remote(#[from] memfs::transfer::api::RemoteError),
    #[error(transparent)]
    Target(#[from] memfs::shared::TargetError),
    #[error(transparent)]
    Read(#[from] memfs::transfer::ReadError),
    #[error(transparent)]
    Git(#[from] crate::import_git::GitError),
    /// A sentence for the person, composed where the trouble was.
    #[error("{0}")]
    Said(String),
}

impl CliError {
    /// `.map_err(CliError::io("make", &dir))`.
    pub fn io(doing: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CliError {
        let path = path.into();
        move |source| CliError::Io {
            doing,
            path,
            source,
        }
    }
}
