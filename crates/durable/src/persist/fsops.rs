//! Disk operations below the memory root, through the storage interface
//! ([`super::storage`]), relative to directory handles.
//!
//! Every step opens one name at a time without following a symlink, so a
//! symlink planted in the data dir is never followed out of it: the
//! operation fails instead.

use std::ffi::{OsStr, OsString};
use std::io;

use super::storage::{Dir, File, Kind, Open, Rename, StorageDir};
use super::walk::DirStack;
use crate::path::MemPath;
use crate::store::Meta;

/// A disk step a test can make fail: with the `failpoints` feature,
/// `fail::cfg(NAME, "return(ENOSPC)")` (or `pause`, `sleep(ms)`, `1*return`)
/// acts here; without it, this is nothing.
macro_rules! step {
    ($name:literal) => {
        fail::fail_point!($name, |errno: Option<String>| Err(injected(errno)))
    };
}

/// The error a failpoint injects: the errno it names (default EIO).
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub fn injected(errno: Option<String>) -> io::Error {
    let code = match errno.as_deref() {
        Some("ENOSPC") => libc::ENOSPC,
        Some("EROFS") => libc::EROFS,
        Some("EDQUOT") => libc::EDQUOT,
        _ => libc::EIO,
    };
    io::Error::from_raw_os_error(code)
}

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

fn os(name: &str) -> &OsStr {
    OsStr::new(name)
}

/// Opens directory `name` in `parent`, refusing symlinks.
pub fn open_dir(parent: &dyn StorageDir, name: &str) -> io::Result<Dir> {
    parent.open_dir(os(name))
}

/// The bytes of the file at `path` below `root` (never through a symlink).
pub fn read_file(root: &Dir, path: &MemPath) -> io::Result<Vec<u8>> {
    let parent = open_parent(root, path, false)?;
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let file = parent.open_file(os(name), Open::Read)?;
    super::storage::read_all(file.as_ref())
}

/// Opens the directory that holds `path`, making missing ones when `create`.
pub fn open_parent(root: &Dir, path: &MemPath, create: bool) -> io::Result<Dir> {
    let names = path.names();
    let mut dir = root.clone();
    for name in &names[..names.len().saturating_sub(1)] {
        dir = open_or_make_dir(dir.as_ref(), name, create)?;
    }
    Ok(dir)
}

fn open_or_make_dir(parent: &dyn StorageDir, name: &str, create: bool) -> io::Result<Dir> {
    match open_dir(parent, name) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
            step!("persist::mkdir");
            match parent.mkdir(os(name)) {
                Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
                _ => {}
            }
            open_dir(parent, name)
        }
        other => other,
    }
}

/// Puts the staged file `staged` (in `tmp`) at `path` below `root` in one
/// atomic step. Missing directories on the way are made around the file in
/// `tmp` first, and the topmost of them is renamed into place with it, so a
/// crash leaves either nothing new or the whole path, never empty directories.
pub fn place(root: &Dir, tmp: &Dir, staged: &str, path: &MemPath) -> io::Result<()> {
    let names = path.names();
    let (leaf, dirs) = names.split_last().expect("changes never name the root");
    let mut parent = root.clone();
    let mut existing = 0;
    for name in dirs {
        match open_dir(parent.as_ref(), name) {
            Ok(dir) => {
                parent = dir;
                existing += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    if existing == dirs.len() {
        return rename(tmp.as_ref(), staged, parent.as_ref(), leaf);
    }
    let top = format!("{staged}.dirs");
    step!("persist::mkdir");
    tmp.mkdir(os(&top))?;
    let mut inner = open_dir(tmp.as_ref(), &top)?;
    for name in &dirs[existing + 1..] {
        step!("persist::mkdir");
        inner.mkdir(os(name))?;
        inner = open_dir(inner.as_ref(), name)?;
    }
    rename(tmp.as_ref(), staged, inner.as_ref(), leaf)?;
    rename_noreplace(tmp.as_ref(), &top, parent.as_ref(), &dirs[existing])
}

/// Writes `data` to a new file `name` in `dir` (which must not exist), with
/// the mode, owner and times of `meta`.
/// Returns the open file, for the batch's barrier to make it durable.
pub fn write_new_file(
    dir: &dyn StorageDir,
    name: &str,
    data: &[u8],
    meta: &Meta,
) -> io::Result<File> {
    let file = write_new_file_unsynced(dir, name, data, meta)?;
    // Its data on the device before it is renamed into place: a rename
    // issued afterwards can only become durable together with (or after)
    // the data (the journal commit that makes the rename durable flushes
    // the device's cache first). No barrier itself: a batch needs one, after
    // its renames.
    file.wait_write_back()?;
    Ok(file)
}

/// [`write_new_file`] without waiting for the data: for many files at once,
/// each one's write-back started (`start_write_back`) and waited for later
/// ([`wait_staged`]), before any is renamed into place.
pub fn write_new_file_unsynced(
    dir: &dyn StorageDir,
    name: &str,
    data: &[u8],
    meta: &Meta,
) -> io::Result<File> {
    step!("persist::write");
    let file = dir.open_file(os(name), Open::New)?;
    super::storage::write_all_at(file.as_ref(), data, 0)?;
    // The owner first: chown clears the setuid and setgid bits, chmod sets them.
    if let Some((uid, gid)) = owner_change(meta) {
        file.set_owner(uid, gid)?;
    }
    file.set_mode(meta.perm)?;
    file.set_times(meta.atime, meta.mtime)?;
    Ok(file)
}

/// Waits for the write-back of a file staged among many: the bulk pass's
/// barrier (and its failpoint).
pub fn wait_staged(file: &File) -> io::Result<()> {
    step!("persist::barrier");
    file.wait_write_back()
}

/// Gives `name` in `dir` the owner, mode and times of `meta` (a symlink:
/// its own owner and times, never its target's; it has no mode of its own).
pub fn set_meta(dir: &dyn StorageDir, name: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::meta");
    let is_link = dir.stat(Some(os(name)))?.kind == Kind::Symlink;
    // The owner first: chown clears the setuid and setgid bits, chmod sets them.
    if let Some((uid, gid)) = owner_change(meta) {
        dir.set_owner(Some(os(name)), uid, gid)?;
    }
    if !is_link {
        dir.set_mode(Some(os(name)), meta.perm)?;
    }
    dir.set_times(Some(os(name)), meta.atime, meta.mtime)
}

/// Sets the times of directory `path` (`parent` holds it; the root is
/// `root` itself), not following a symlink.
pub fn set_times(root: &Dir, parent: &Dir, path: &MemPath, meta: &Meta) -> io::Result<()> {
    match path.file_name() {
        None => root.set_times(None, meta.atime, meta.mtime),
        Some(name) => parent.set_times(Some(os(name)), meta.atime, meta.mtime),
    }
}

/// Gives an open directory (the memory root) the owner, mode and times of `meta`.
pub fn set_dir_meta(dir: &dyn StorageDir, meta: &Meta) -> io::Result<()> {
    step!("persist::meta");
    if let Some((uid, gid)) = owner_change(meta) {
        dir.set_owner(None, uid, gid)?;
    }
    dir.set_mode(None, meta.perm)?;
    dir.set_times(None, meta.atime, meta.mtime)
}

/// Makes directory `name` in `dir` (or finds it there) with `meta`.
pub fn make_dir(dir: &dyn StorageDir, name: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::mkdir");
    match dir.mkdir(os(name)) {
        // A directory there is made already; anything else there is in the
        // way (never chmod-ed into a directory's mode).
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            if dir.stat(Some(os(name)))?.kind != Kind::Dir {
                return Err(e);
            }
        }
        other => other?,
    }
    set_meta(dir, name, meta)
}

/// Makes a symbolic link `name` in `dir` pointing at `target` (replacing a
/// file there), owned and timed as `meta` says.
pub fn symlink(dir: &dyn StorageDir, name: &str, target: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::symlink");
    match dir.symlink(os(name), os(target)) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            dir.unlink(os(name), false)?;
            dir.symlink(os(name), os(target))?;
        }
        other => other?,
    }
    set_meta(dir, name, meta)
}

/// Swaps `a_name` of `a_dir` and `b_name` of `b_dir`.
pub fn exchange(
    a_dir: &dyn StorageDir,
    a_name: &str,
    b_dir: &dyn StorageDir,
    b_name: &str,
) -> io::Result<()> {
    step!("persist::rename");
    a_dir.rename(os(a_name), b_dir, os(b_name), Rename::Exchange)
}

/// The owner to set, when it differs from this process's and we may set it.
fn owner_change(meta: &Meta) -> Option<(u32, u32)> {
    let me = rustix::process::geteuid();
    let differs = meta.uid != me.as_raw() || meta.gid != rustix::process::getegid().as_raw();
    (differs && me.is_root()).then_some((meta.uid, meta.gid))
}

/// Moves `from_name` of `from_dir` to `to_name` of `to_dir`, replacing a file there.
pub fn rename(
    from_dir: &dyn StorageDir,
    from_name: &str,
    to_dir: &dyn StorageDir,
    to_name: &str,
) -> io::Result<()> {
    step!("persist::rename");
    from_dir.rename(os(from_name), to_dir, os(to_name), Rename::Replace)
}

/// Moves `from_name` of `from_dir` over `to_name` of `to_dir` in one atomic
/// step. A file or an empty directory at the target is replaced by
/// `rename(2)`; a directory that still holds something on disk (names memfs
/// does not load) is swapped out with `RENAME_EXCHANGE` and then moved to
/// `trash` as `aside`. Returns whether something was put in the trash.
pub fn replace(
    from_dir: &dyn StorageDir,
    from_name: &str,
    to_dir: &dyn StorageDir,
    to_name: &str,
    trash: &dyn StorageDir,
    aside: &str,
) -> io::Result<bool> {
    step!("persist::rename");
    match from_dir.rename(os(from_name), to_dir, os(to_name), Rename::Replace) {
        Ok(()) => Ok(false),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) => {
            exchange(from_dir, from_name, to_dir, to_name)?;
            // The new node is in place; the old one waits at the source's name.
            rename_noreplace(from_dir, from_name, trash, aside)?;
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// Like [`rename`], but fails with `EEXIST` instead of replacing anything.
pub fn rename_noreplace(
    from_dir: &dyn StorageDir,
    from_name: &str,
    to_dir: &dyn StorageDir,
    to_name: &str,
) -> io::Result<()> {
    step!("persist::rename");
    from_dir.rename(os(from_name), to_dir, os(to_name), Rename::NoReplace)
}

/// Removes `name` from `dir`, and everything below it if it is a directory.
/// Works on raw names: a directory the agent deletes may hold names that are
/// not UTF-8 (files memfs never loaded), and they must go with it. Walks
/// without recursion and with a bounded number of open directories, however
/// deep.
pub fn remove_tree(dir: &Dir, name: impl AsRef<OsStr>) -> io::Result<()> {
    /// A directory being emptied: its name in its parent, and what is left in it.
    struct Emptying {
        name: OsString,
        left: Vec<OsString>,
    }
    let name = name.as_ref();
    if dir.stat(Some(name))?.kind != Kind::Dir {
        return dir.unlink(name, false);
    }
    let top = dir.open_dir(name)?;
    let left = raw_names(top.as_ref())?;
    let mut stack = DirStack::new(
        top,
        Emptying {
            name: name.to_owned(),
            left,
        },
    );
    while let Some(level) = stack.top() {
        match level.left.pop() {
            Some(child) => match stack.dir().stat(Some(&child)).map(|s| s.kind) {
                Ok(Kind::Dir) => {
                    let sub = stack.dir().open_dir(&child)?;
                    let left = raw_names(sub.as_ref())?;
                    stack.push(sub, Emptying { name: child, left });
                }
                Ok(_) => stack.dir().unlink(&child, false)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
            None => {
                let done = stack.pop()?;
                let parent = if stack.is_empty() { dir } else { stack.dir() };
                parent.unlink(&done.name, true)?;
            }
        }
    }
    Ok(())
}

/// Every name in a directory, without `.` and `..`, as the bytes it is.
fn raw_names(dir: &dyn StorageDir) -> io::Result<Vec<OsString>> {
    Ok(dir.list()?.into_iter().map(|(name, _)| name).collect())
}

/// Each entry's name (or its raw bytes when they are not UTF-8) and kind.
#[allow(clippy::type_complexity)]
pub fn list_entries(dir: &dyn StorageDir) -> io::Result<Vec<(Result<String, Vec<u8>>, Kind)>> {
    use std::os::unix::ffi::OsStringExt;
    Ok(dir
        .list()?
        .into_iter()
        .map(|(name, kind)| (name.into_string().map_err(|n| n.into_vec()), kind))
        .collect())
}

/// Flushes everything written on the data dir's filesystem: the group barrier.
pub fn sync_filesystem(dir: &dyn StorageDir) -> io::Result<()> {
    step!("persist::barrier");
    dir.sync_fs()
}

/// Makes the node at `path` below `root` durable: a file's data (and the
/// metadata needed to read it) with `data_only`, else its entries and
/// attributes (a directory). Nothing to do when it is gone or a symlink
/// (which its directory's sync covers).
pub fn sync_node(root: &Dir, path: &MemPath, data_only: bool) -> io::Result<()> {
    step!("persist::barrier");
    if path.is_root() {
        return root.sync();
    }
    let parent = match open_parent(root, path, false) {
        Ok(parent) => parent,
        // Gone, or something not memfs' in its way (a file where a
        // directory would be, a symlink): nothing of memfs' to sync.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) =>
        {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    let name = path.file_name().expect("not the root");
    parent.sync_child(os(name), data_only).map(drop)
}

/// Makes directory `name` in `dir` (0700) and opens it.
pub fn make_fresh(dir: &dyn StorageDir, name: &str) -> io::Result<Dir> {
    dir.mkdir(os(name))?;
    open_dir(dir, name)
}

/// The UTF-8 names in a directory (others are passed over).
pub fn list_names(dir: &dyn StorageDir) -> io::Result<Vec<String>> {
    Ok(dir
        .list()?
        .into_iter()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect())
}
