//! Where the page gets the memory from: the memory this process owns, or
//! the owner of the data dir through its socket (so the page works beside a
//! running mount or server, as notebook servers do). Either way every act
//! goes through the history commands every door shares.

use std::path::PathBuf;
use std::sync::Arc;

use crate::control::request::{handle, Reply, Request};
use crate::journal::{Cursor, Row};
use crate::memory::Memory;
use crate::serve::attach::through_owner;

use super::PageError;

/// What [`Source::since`] brings.
#[derive(serde::Deserialize)]
pub struct Since {
    pub next: u64,
    pub rows: Vec<Row>,
    cursor: Option<Cursor>,
    pub all: bool,
    /// Paths the last checkpoint could not write, with why (an owner from
    /// before this field says none).
    #[serde(default)]
    pub stuck: Vec<String>,
}

pub enum Source {
    Owner(Arc<Memory>),
    Beside {
        state_dir: PathBuf,
    },
    /// Another door's way to a memory (the HTTP server's stores, opened
    /// when used): it answers each history request.
    Door(Box<dyn Fn(&Request) -> Reply + Send + Sync>),
}

impl Source {
    /// The data dir the page is of, where it is one on this machine.
    pub fn data_dir(&self) -> Option<PathBuf> {
        match self {
            Source::Owner(memory) => memory.data_dir().state_dir.parent().map(PathBuf::from),
            Source::Beside { state_dir } => state_dir.parent().map(PathBuf::from),
            Source::Door(_) => None,
        }
    }

    pub fn request(&self, request: &Request) -> Reply {
        match self {
            Source::Owner(memory) => handle(memory.store(), memory.control(), request),
            Source::Beside { state_dir } => through_owner(state_dir, request),
            Source::Door(answer) => answer(request),
        }
    }

    /// The rows the journal took in since `cursor` (moved past them), the
    /// next version's number, whether they are all it has, and the paths
    /// the plain files cannot hold now.
    pub fn since(&self, cursor: &mut Option<Cursor>) -> Result<Since, PageError> {
        let reply = self.request(&Request::Since { cursor: *cursor });
        if reply.code != 0 {
            return Err(PageError::Refused(reply.err));
        }
        let got: Since = serde_json::from_slice(&reply.out).map_err(PageError::NotHistory)?;
        *cursor = got.cursor;
        Ok(got)
    }

    /// The bytes of a file at `version`.
    pub fn show(&self, version: u64) -> Result<Vec<u8>, PageError> {
        ok(self.request(&Request::Show {
            version: version.to_string(),
        }))
    }

    /// A version's content: read by its hash (one read of the journal),
    /// or, when the history keeps it elsewhere, by its number. A delete's
    /// is empty.
    pub fn content(&self, row: &Row) -> Result<Vec<u8>, PageError> {
        let Some(sha) = &row.sha256 else {
            return match row.redacted {
                true => Err(PageError::Redacted(row.version.0)),
                false => Ok(Vec::new()),
            };
        };
        match ok(self.request(&Request::Blob { sha: sha.clone() })) {
            Ok(bytes) => Ok(bytes),
            Err(_) => self.show(row.id()),
        }
    }

    /// The unified diff from version `old` to version `new`.
    pub fn diff(&self, old: &Row, new: &Row) -> Result<String, PageError> {
        let a = self.content(old)?;
        let b = self.content(new)?;
        let before = format!("{} (version {})", old.path, old.version);
        let after = format!("{} (version {})", new.path, new.version);
        Ok(
            String::from_utf8_lossy(&crate::control::request::unified(&before, &a, &after, &b))
                .into_owned(),
        )
    }

    /// The change `version` made, taken back as `who`'s act (`page:NAME`).
    pub fn undo(&self, version: u64, who: &str) -> Result<String, PageError> {
        ok(self.request(&Request::Undo {
            version: version.to_string(),
            // SAFETY: getuid(2) cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            pid: std::process::id(),
            via: Some(who.to_string()),
        }))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }

    /// The file as version `version` left it (or as before it took it
    /// away: an overwrite's replaced text), as `who`'s act.
    pub fn revert(&self, version: u64, who: &str) -> Result<String, PageError> {
        ok(self.request(&Request::Revert {
            version: version.to_string(),
            // SAFETY: getuid(2) cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            pid: std::process::id(),
            via: Some(who.to_string()),
        }))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }

    /// The changes `versions` of `by`'s, taken back as `who`'s act
    /// (`memfs undo --by`, limited to those versions).
    pub fn undo_by(&self, by: &str, versions: &[u64], who: &str) -> Result<String, PageError> {
        ok(self.request(&Request::UndoSession {
            by: by.to_string(),
            since: None,
            versions: Some(versions.to_vec()),
            force: false,
            dry_run: false,
            // SAFETY: getuid(2) cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            pid: std::process::id(),
            via: Some(who.to_string()),
        }))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }

    pub fn redact(&self, version: u64) -> Result<String, PageError> {
        ok(self.request(&Request::Redact {
            version: version.to_string(),
            path: false,
        }))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }
}

fn ok(reply: Reply) -> Result<Vec<u8>, PageError> {
    match reply.code {
        0 => Ok(reply.out),
        _ => Err(PageError::Refused(reply.err)),
    }
}

/// The login name of the user this process runs as (the person who runs
/// `memfs web`), for the log: `page:alice`.
pub fn login_name() -> String {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 4096];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pw` and `buf` (whose length is passed)
    // only, and sets `out` to `&mut pw` or null; `pw_name` then points into
    // `buf`, which outlives the CStr read below.
    let found =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    if found == 0 && !out.is_null() && !pw.pw_name.is_null() {
        // SAFETY: a non-null pw_name from a successful getpwuid_r is a
        // NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
        return name.to_string_lossy().into_owned();
    }
    format!("uid {uid}")
}
