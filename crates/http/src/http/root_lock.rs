//! One server a stores root (or a database root's cache dir): a second
//! `serve --http` on the same dir stops at start, saying which dir, which
//! process holds it and how to give it its own (`--cache`), instead of
//! answering every request for a store with 503 while the first owns the
//! stores (issue 51).
//!
//! `DIR/.memfs/server.lock`, `flock(LOCK_EX)`ed for the server's life (the
//! kernel lets go when the process ends, however it ends), holding the
//! holder's pid for the message.

use std::fs;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The lock's file, in the root's (or cache's) state dir.
const LOCK_FILE: &str = "server.lock";

/// Held while the server runs; dropped, it lets go.
#[derive(Debug)]
pub struct RootLock {
    _file: fs::File,
}

/// Why the server cannot have its root.
#[derive(Debug, thiserror::Error)]
pub enum RootLockError {
    #[error("the {what} {dir} is in use by another memfs server{}; {hint}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Held {
        what: &'static str,
        dir: String,
        pid: Option<u32>,
        hint: &'static str,
    },
    #[error("cannot take the {what} {dir}: {}", crate::units::describe_io(.source))]
    Io {
        what: &'static str,
        dir: String,
        source: io::Error,
    },
}

impl RootLock {
    /// Takes `root` for this server: a stores root, or (`cache`) the cache
    /// dir of a database root.
    pub fn take(root: &Path, cache: bool) -> Result<RootLock, RootLockError> {
        let what = match cache {
            true => "cache dir",
            false => "stores root",
        };
        let dir = root.display().to_string();
        let io_err = |source: io::Error| RootLockError::Io {
            what,
            dir: dir.clone(),
            source,
        };
        let state = root.join(".memfs");
        fs::create_dir_all(&state).map_err(io_err)?;
        let mut file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(state.join(LOCK_FILE))
            .map_err(io_err)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(RootLockError::Held {
                    what,
                    dir,
                    pid: text.trim().parse().ok(),
                    hint: match cache {
                        true => "each server needs a cache dir of its own: give this one another with --cache DIR",
                        false => "stop it, or serve another root",
                    },
                });
            }
            Err(e) => return Err(io_err(e.into())),
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(std::process::id().to_string().as_bytes()))
            .map_err(io_err)?;
        Ok(RootLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_firsts_pid_and_the_way_out() {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("memfs-root-lock-{pid}"));
        let first = RootLock::take(&dir, true).unwrap();
        // (flock: a second open of the file is a second holder, even in
        // one process.)
        let said = RootLock::take(&dir, true).unwrap_err().to_string();
        assert!(said.contains(&format!("(pid {pid})")), "{said}");
        assert!(said.contains("--cache DIR"), "{said}");
        assert!(said.contains(&dir.display().to_string()), "{said}");
        drop(first);
        // Let go, it is free again.
        RootLock::take(&dir, false).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
