//! The data dir: `DIR/memories/` (the SDK's layout) and memfs' own `DIR/.memfs/`.
//!
//! ```text
//! DIR/memories/...     the memory, readable without memfs
//! DIR/.memfs/          flock(LOCK_EX)ed by the one process serving DIR
//! DIR/.memfs/pid       that process's id, for the message a second one prints
//! DIR/.memfs/tmp/      new file contents before they are renamed into place
//! DIR/.memfs/trash/    deleted trees, moved out atomically, removed afterwards
//! ```
//! Anything left in `tmp/` and `trash/` by a crash is removed at open.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, FlockOperation, Mode, OFlags};

use super::fsops;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the data dir {dir} is in use by another memfs process{}; stop it, or use its socket", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy { dir: String, pid: Option<u32> },
    #[error("cannot open the data dir {dir} while {doing}: {err}")]
    Io {
        dir: String,
        doing: &'static str,
        err: io::Error,
    },
}

/// An open, locked data dir.
pub struct DataDir {
    shown: String,
    /// `DIR/memories`.
    pub memories: OwnedFd,
    /// `DIR/.memfs/tmp`.
    pub tmp: OwnedFd,
    /// `DIR/.memfs/trash`.
    pub trash: OwnedFd,
    /// `DIR/.memfs`, where the socket and other state live.
    pub state_dir: PathBuf,
    /// `DIR/.memfs`, flocked exclusively for as long as the data dir is open.
    _lock: OwnedFd,
}

impl DataDir {
    /// Opens (creating as needed) and locks the data dir at `dir`.
    pub fn open(dir: &Path) -> Result<DataDir, OpenError> {
        let shown = dir.display().to_string();
        let fail = |doing: &'static str| {
            let shown = shown.clone();
            move |err: io::Error| OpenError::Io {
                dir: shown,
                doing,
                err,
            }
        };
        make_private_dir(dir).map_err(fail("creating it"))?;
        let state_dir = dir.join(".memfs");
        make_private_dir(&state_dir).map_err(fail("creating .memfs"))?;
        let lock = take_lock(&state_dir, &shown)?;
        make_private_dir(&dir.join("memories")).map_err(fail("creating memories"))?;
        let top = open_top(dir).map_err(fail("opening it"))?;
        let memories = fsops::open_dir(&top, "memories").map_err(fail(
            "opening memories (it must be a directory, not a symlink)",
        ))?;
        let state = fsops::open_dir(&top, ".memfs").map_err(fail("opening .memfs"))?;
        let tmp = fresh_dir(&state, "tmp").map_err(fail("clearing .memfs/tmp"))?;
        let trash = fresh_dir(&state, "trash").map_err(fail("clearing .memfs/trash"))?;
        Ok(DataDir {
            shown,
            memories,
            tmp,
            trash,
            state_dir,
            _lock: lock,
        })
    }

    /// The data dir as the user named it, for messages to that user.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

fn make_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(fsops::DIR_MODE)
        .create(path)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

fn open_top(dir: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rfs::open(dir, flags, Mode::empty())?)
}

/// Empties (or makes) `name` in `state`: leftovers of a crash are never loaded.
fn fresh_dir(state: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    match fsops::remove_tree(state, name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    rfs::mkdirat(state, name, Mode::from_raw_mode(fsops::DIR_MODE))?;
    fsops::open_dir(state, name)
}

/// Locks the state dir itself (a read-only descriptor, so that the disk can
/// still be remounted read-only under a running memfs), then records our pid.
fn take_lock(state_dir: &Path, shown: &str) -> Result<OwnedFd, OpenError> {
    let io_err = |err: io::Error| OpenError::Io {
        dir: shown.to_string(),
        doing: "taking its lock",
        err,
    };
    let fd = open_top(state_dir).map_err(io_err)?;
    let pid_file = state_dir.join("pid");
    match rfs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok());
            return Err(OpenError::Busy {
                dir: shown.to_string(),
                pid,
            });
        }
        Err(e) => return Err(io_err(e.into())),
    }
    std::fs::write(&pid_file, std::process::id().to_string()).map_err(io_err)?;
    Ok(fd)
}
