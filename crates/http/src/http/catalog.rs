//! Why a stores root's catalog (its token file, or its database) could not
//! answer: what was refused, what may pass on its own, and what the disk
//! said, told apart for the door that answers.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// What was asked cannot be done (a name taken or malformed, no such
    /// token): said as it is.
    #[error("{0}")]
    Refused(String),
    /// The database cannot be reached now, or a connection broke.
    #[error("the database: {0}")]
    Unreachable(String),
    /// The database asked to try again (a conflict between servers).
    #[error("the database asked to try again")]
    Again,
    /// The token file or its lock.
    #[error("{}", crate::units::describe_io(.0))]
    Disk(#[from] io::Error),
}

impl CatalogError {
    /// Whether trying again later may succeed (a client is told to retry).
    pub fn passing(&self) -> bool {
        matches!(self, CatalogError::Unreachable(_) | CatalogError::Again)
    }
}

impl From<crate::journal::UpstreamError> for CatalogError {
    fn from(e: crate::journal::UpstreamError) -> CatalogError {
        match e {
            crate::journal::UpstreamError::Unreachable(why) => CatalogError::Unreachable(why),
            _ => CatalogError::Again,
        }
    }
}
