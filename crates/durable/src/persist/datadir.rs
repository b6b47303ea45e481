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

use rustix::fs::{self as rfs, AtFlags, FlockOperation, Mode, OFlags};

use super::fsops;
use super::storage::{self, Dir};

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the data dir {dir} is in use by another memfs process{}; stop it, or use its socket", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy { dir: String, pid: Option<u32> },
    #[error("the data dir {dir} is a file, not a directory; --data names the folder that holds memories/")]
    NotADir { dir: String },
    #[error("{dir} looks like a memories folder itself (it holds files, but no memories/ and no .memfs/); pass the folder above it: --data {parent}")]
    MemoriesItself { dir: String, parent: String },
    #[error("the shared store {store} cannot be reached ({cause}), and this host has no copy of it yet: check the URL, the user and the password (nothing was answered)")]
    SharedUnreachable { store: String, cause: String },
    #[error("the memory store {store} cannot be this data dir's: {cause}")]
    Remote { store: String, cause: String },
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
    pub memories: Dir,
    /// `DIR/.memfs/tmp`.
    pub tmp: Dir,
    /// `DIR/.memfs/trash`.
    pub trash: Dir,
    /// `DIR/.memfs` (checked: a directory, not a symlink, mode 0700), where
    /// the socket and other state live. Flocked exclusively for as long as
    /// the data dir is open.
    pub state: OwnedFd,
    /// `DIR/.memfs` in the storage that holds the journal (the same
    /// directory as `state`, on the real files).
    pub stored: Dir,
    /// `DIR/.memfs` as a path, for clients to find the socket.
    pub state_dir: PathBuf,
    /// This owner's control key, also in `DIR/.memfs/key` (0600): control
    /// lines that act on the memory beyond the tool (history, mounts) must
    /// carry it. Only a process that can read memfs' own directory can; an
    /// agent, whose tool reaches `/memories` only, cannot.
    pub key: String,
}

impl DataDir {
    /// Opens (creating as needed) and locks the data dir at `dir`. Every
    /// name below `dir` is opened relative to a checked descriptor of its
    /// directory, never through a symlink.
    pub fn open(dir: &Path) -> Result<DataDir, OpenError> {
        DataDir::open_on(dir, None)
    }

    /// [`DataDir::open`], with the memory's files (`memories/`, and in
    /// `.memfs/` the journal, `tmp/` and `trash/`) in the storage whose root
    /// `on` is, when given (the in-memory disk of the power-loss tests);
    /// the lock, key and socket stay in `dir/.memfs` on the real files.
    pub fn open_on(dir: &Path, on: Option<Dir>) -> Result<DataDir, OpenError> {
        let shown = dir.display().to_string();
        let fail = |doing: &'static str| {
            let shown = shown.clone();
            move |err: io::Error| OpenError::Io {
                dir: shown,
                doing,
                err,
            }
        };
        check_not_a_mistake(dir, &shown)?;
        make_private_dir(dir).map_err(fail("creating it"))?;
        let top = open_top(dir).map_err(fail("opening it"))?;
        let state = subdir(&top, STATE_DIR, true).map_err(fail(
            "opening .memfs (it must be a directory, not a symlink)",
        ))?;
        take_lock(&state, &shown)?;
        let key = write_key(&state).map_err(fail("writing .memfs/key"))?;
        let (top, stored) = match on {
            Some(root) => {
                let stored = stored_dir(&root, STATE_DIR).map_err(fail("opening .memfs"))?;
                (root, stored)
            }
            None => {
                let state = state.try_clone().map_err(fail("opening .memfs"))?;
                (storage::real::dir(top), storage::real::dir(state))
            }
        };
        // Its mode is the person's to choose (`chmod` of the mount root).
        let memories = stored_dir(&top, "memories").map_err(fail(
            "opening memories (it must be a directory, not a symlink)",
        ))?;
        let tmp = fresh_dir(&stored, "tmp").map_err(fail("clearing .memfs/tmp"))?;
        let trash = fresh_dir(&stored, "trash").map_err(fail("clearing .memfs/trash"))?;
        Ok(DataDir {
            shown,
            memories,
            tmp,
            trash,
            stored,
            state,
            state_dir: dir.join(STATE_DIR),
            key,
        })
    }

    /// The data dir as the user named it, for messages to that user.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// Catches the common mistakes of `--data`: a file, or the `memories`
/// folder itself (memfs would make `memories/memories` and show nothing).
fn check_not_a_mistake(dir: &Path, shown: &str) -> Result<(), OpenError> {
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(()); // made below
    };
    if !meta.is_dir() {
        return Err(OpenError::NotADir {
            dir: shown.to_string(),
        });
    }
    let named_memories = dir.file_name().is_some_and(|n| n == "memories");
    let ours = dir.join(STATE_DIR).exists() || dir.join("memories").exists();
    let holds_files = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
    if named_memories && !ours && holds_files {
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| ".".to_string(), |p| p.display().to_string());
        return Err(OpenError::MemoriesItself {
            dir: shown.to_string(),
            parent,
        });
    }
    Ok(())
}

/// The file that holds the owner's control key.
const KEY: &str = "key";

/// A new random control key, written to `.memfs/key` (0600, replacing any).
fn write_key(state: &OwnedFd) -> io::Result<String> {
    use std::io::{Read, Write};
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let _ = rfs::unlinkat(state, KEY, AtFlags::empty());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = std::fs::File::from(rfs::openat(state, KEY, flags, Mode::from_raw_mode(0o600))?);
    file.write_all(key.as_bytes())?;
    Ok(key)
}

/// The control key of the memfs that owns the data dir whose state dir is
/// `state_dir` (for the CLI's requests to it).
pub fn read_key(state_dir: &Path) -> io::Result<String> {
    use std::io::Read;
    let state = open_state_dir(state_dir)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut key = String::new();
    std::fs::File::from(rfs::openat(&state, KEY, flags, Mode::empty())?)
        .read_to_string(&mut key)?;
    Ok(key.trim().to_string())
}

/// memfs' own directory in the data dir.
const STATE_DIR: &str = ".memfs";

/// Opens the state dir at `path` (`DIR/.memfs`) without following a symlink there.
pub fn open_state_dir(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::open(path, flags, Mode::empty())?)
}

fn make_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let existed = path.is_dir();
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(fsops::DIR_MODE)
        .create(path)
    {
        // A new data dir's name durable, with what memfs makes durable in it.
        Ok(()) if !existed => {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            std::fs::File::open(parent.unwrap_or(Path::new(".")))?.sync_all()
        }
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes (or finds, 0700) directory `name` in `top` and opens it, refusing
/// a symlink; with `private`, one that others could enter is tightened to 0700.
fn subdir(top: &OwnedFd, name: &str, private: bool) -> io::Result<OwnedFd> {
    match rfs::mkdirat(top, name, Mode::from_raw_mode(fsops::DIR_MODE)) {
        // Its name durable, with what memfs later makes durable inside it.
        Ok(()) => rfs::fsync(top)?,
        Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let dir = open_dir_fd(top, name)?;
    if private && rfs::fstat(&dir)?.st_mode & 0o077 != 0 {
        rfs::fchmod(&dir, Mode::from_raw_mode(fsops::DIR_MODE))?;
    }
    Ok(dir)
}

fn open_top(dir: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rfs::open(dir, flags, Mode::empty())?)
}

/// Opens directory `name` in `parent`, refusing a symlink.
fn open_dir_fd(parent: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::openat(parent, name, flags, Mode::empty())?)
}

/// Makes (or finds) directory `name` in `top` and opens it, refusing a
/// symlink. Its name is made durable (`top` synced) when it is made: what
/// memfs later makes durable inside it would otherwise be lost with it.
fn stored_dir(top: &Dir, name: &str) -> io::Result<Dir> {
    match top.mkdir(std::ffi::OsStr::new(name)) {
        Ok(()) => top.sync()?,
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
        Err(_) => {}
    }
    fsops::open_dir(top.as_ref(), name)
}

/// Empties (or makes) `name` in `state`: leftovers of a crash are never loaded.
fn fresh_dir(state: &Dir, name: &str) -> io::Result<Dir> {
    match fsops::remove_tree(state, name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fsops::make_fresh(state.as_ref(), name)
}

/// Locks the state dir itself (a read-only descriptor, so that the disk can
/// still be remounted read-only under a running memfs), then records our pid
/// in a new file (a symlink planted at `pid` is removed, never written through).
fn take_lock(state: &OwnedFd, shown: &str) -> Result<(), OpenError> {
    let io_err = |err: io::Error| OpenError::Io {
        dir: shown.to_string(),
        doing: "taking its lock",
        err,
    };
    // Held by this very process: a memory of its own closing a moment ago
    // (a pool job, or a child forked meanwhile, can hold the lock's file a
    // little longer); it is waited for, briefly.
    let mut tries = 0;
    loop {
        match rfs::flock(state, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let pid = read_pid(state);
                if pid == Some(std::process::id()) && tries < 50 {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                }
                return Err(OpenError::Busy {
                    dir: shown.to_string(),
                    pid,
                });
            }
            Err(e) => return Err(io_err(e.into())),
        }
    }
    match rfs::unlinkat(state, PID_FILE, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(io_err(e.into())),
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let pid = rfs::openat(
        state,
        PID_FILE,
        flags,
        Mode::from_raw_mode(fsops::FILE_MODE),
    )
    .map_err(|e| io_err(e.into()))?;
    rustix::io::write(&pid, std::process::id().to_string().as_bytes())
        .map_err(|e| io_err(e.into()))?;
    Ok(())
}

const PID_FILE: &str = "pid";

fn read_pid(state: &OwnedFd) -> Option<u32> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rfs::openat(state, PID_FILE, flags, Mode::empty()).ok()?;
    let mut buf = [0u8; 16];
    let n = rustix::io::read(&fd, &mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}
