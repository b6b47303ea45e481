//! The API's errors, in the error shape the Anthropic SDK parses:
//! `{"type": "error", "error": {"type": ..., "message": ...}}` with the
//! status code its error classes key on.

use crate::error::Error;

/// One refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    /// Seconds to wait before trying again (`Retry-After`), for 429 and 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A store error as the API answers it, for the memory at `path`: every
    /// mapping of the store's errors to answers is here (the answer's
    /// headers are `http::server`'s).
    pub fn from_store(e: Error, path: &str) -> ApiError {
        let path = crate::text::label(path);
        match e {
            Error::Changed { actual } => ApiError::precondition(format!(
                "the memory's content_sha256 is {actual}, not the one the precondition names; nothing was changed"
            )),
            Error::Exists | Error::IsDir | Error::Root => {
                ApiError::path_conflict(format!("{path} is taken (a memory or a directory is there)"))
            }
            Error::NotDir => ApiError::path_conflict(format!(
                "a segment of {path} is a memory, not a directory"
            )),
            Error::NotFound => ApiError::not_found(format!("no memory at {path}")),
            Error::FileTooLarge { .. } | Error::StoreFull { .. } => ApiError::too_large(e.to_string()),
            e @ (Error::TooDeep { .. } | Error::TooManyEntries { .. } | Error::DirFull { .. } | Error::Path(_)) => {
                ApiError::invalid(e.to_string())
            }
            e @ (Error::Disk(_) | Error::Unsaved(_)) => ApiError::unavailable(e.to_string()),
            e => ApiError::invalid(e.to_string()),
        }
    }

    /// A catalog's failure while `doing` (e.g. "the store's record could
    /// not be saved"): what was refused is the client's to fix (400); the
    /// database or the disk, a retry's (503).
    pub fn from_catalog(e: super::catalog::CatalogError, doing: &str) -> ApiError {
        match e {
            super::catalog::CatalogError::Refused(why) => ApiError::invalid(why),
            e => ApiError::unavailable(format!("{doing} ({e})")),
        }
    }

    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", message)
    }

    pub fn unauthenticated() -> ApiError {
        ApiError::new(
            401,
            "authentication_error",
            "a valid token is needed: send it as `Authorization: Bearer TOKEN` or `x-api-key: TOKEN` (`memfs --stores ROOT token create` makes one)",
        )
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "permission_error", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, "not_found_error", message)
    }

    /// The same answer for a store that does not exist and one the token
    /// does not name: a token never learns that another's store exists.
    pub fn no_store(id: &str) -> ApiError {
        ApiError::not_found(format!(
            "no memory store {} (or this token may not reach it)",
            crate::text::label(id)
        ))
    }

    pub fn method(allowed: &str) -> ApiError {
        ApiError::new(
            405,
            "invalid_request_error",
            format!("this path takes {allowed}"),
        )
    }

    pub fn precondition(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "memory_precondition_failed_error", message)
    }

    pub fn path_conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "memory_path_conflict_error", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "conflict_error", message)
    }

    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "invalid_request_error", message)
    }

    pub fn timeout(message: impl Into<String>) -> ApiError {
        ApiError::new(408, "timeout_error", message)
    }

    /// A token with as many requests in flight as one token may have.
    pub fn too_many_in_flight(most: usize) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                429,
                "rate_limit_error",
                format!(
                    "this token has {most} requests in flight, the most one token may (--http-max-per-token); wait for one to end"
                ),
            )
        }
    }

    pub fn rate_limited(retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after.max(1)),
            ..ApiError::new(
                429,
                "rate_limit_error",
                "this token sent more requests than its rate allows; wait and try again",
            )
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(503, "overloaded_error", message)
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "api_error", message)
    }

    /// The body the refusal is sent with.
    pub fn body(&self) -> super::wire::ErrorBody<'_> {
        super::wire::ErrorBody {
            error: super::wire::ErrorDetail {
                kind: self.kind,
                message: &self.message,
            },
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::super::catalog::CatalogError;
    use super::ApiError;

    /// A catalog's refusal is the client's to fix; its database or disk
    /// failing is a retry's, never a 500 nor a 401 a client would believe.
    #[test]
    fn a_catalog_error_is_answered_by_its_cause() {
        let refused = ApiError::from_catalog(CatalogError::Refused("no".into()), "saving");
        assert_eq!((refused.status, refused.retry_after), (400, None));
        for e in [
            CatalogError::Unreachable("connection refused".into()),
            CatalogError::Again,
            CatalogError::Disk(std::io::Error::from_raw_os_error(28)),
        ] {
            // (A full disk does not pass on its own; the database may.)
            assert_eq!(e.passing(), !matches!(e, CatalogError::Disk(_)));
            let a = ApiError::from_catalog(e, "saving");
            assert_eq!((a.status, a.retry_after), (503, Some(1)), "{}", a.message);
            assert!(a.message.starts_with("saving ("), "{}", a.message);
        }
    }
}
