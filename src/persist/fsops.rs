//! Disk operations below the memory root, relative to directory descriptors.
//!
//! Every step opens one name at a time with `O_NOFOLLOW`, so a symlink planted
//! in the data dir is never followed out of it: the operation fails instead.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags};

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
fn injected(errno: Option<String>) -> io::Error {
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

/// Opens directory `name` in `parent`, refusing symlinks.
pub fn open_dir(parent: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::openat(parent, name, flags, Mode::empty())?)
}

/// The bytes of the file at `path` below `root` (never through a symlink).
pub fn read_file(root: &OwnedFd, path: &MemPath) -> io::Result<Vec<u8>> {
    let parent = open_parent(root, path, false)?;
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let mut out = Vec::new();
    io::Read::read_to_end(
        &mut std::fs::File::from(rfs::openat(&parent, name, flags, Mode::empty())?),
        &mut out,
    )?;
    Ok(out)
}

/// Opens the directory that holds `path`, making missing ones when `create`.
pub fn open_parent(root: &OwnedFd, path: &MemPath, create: bool) -> io::Result<OwnedFd> {
    let names = path.names();
    let mut dir = root.try_clone()?;
    for name in &names[..names.len().saturating_sub(1)] {
        dir = open_or_make_dir(&dir, name, create)?;
    }
    Ok(dir)
}

fn open_or_make_dir(parent: &OwnedFd, name: &str, create: bool) -> io::Result<OwnedFd> {
    match open_dir(parent, name) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
            step!("persist::mkdir");
            match rfs::mkdirat(parent, name, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
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
pub fn place(root: &OwnedFd, tmp: &OwnedFd, staged: &str, path: &MemPath) -> io::Result<()> {
    let names = path.names();
    let (leaf, dirs) = names.split_last().expect("changes never name the root");
    let mut parent = root.try_clone()?;
    let mut existing = 0;
    for name in dirs {
        match open_dir(&parent, name) {
            Ok(dir) => {
                parent = dir;
                existing += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    if existing == dirs.len() {
        return rename(tmp, staged, &parent, leaf);
    }
    let top = format!("{staged}.dirs");
    step!("persist::mkdir");
    rfs::mkdirat(tmp, top.as_str(), Mode::from_raw_mode(DIR_MODE))?;
    let mut inner = open_dir(tmp, &top)?;
    for name in &dirs[existing + 1..] {
        step!("persist::mkdir");
        rfs::mkdirat(&inner, name.as_str(), Mode::from_raw_mode(DIR_MODE))?;
        inner = open_dir(&inner, name)?;
    }
    rename(tmp, staged, &inner, leaf)?;
    rename_noreplace(tmp, &top, &parent, &dirs[existing])
}

/// Writes `data` to a new file `name` in `dir` (which must not exist), with
/// the mode, owner and times of `meta`.
/// Returns the open file, for the batch's barrier to make it durable.
pub fn write_new_file(dir: impl AsFd, name: &str, data: &[u8], meta: &Meta) -> io::Result<OwnedFd> {
    let fd = write_new_file_unsynced(dir, name, data, meta)?;
    write_back(&fd)?;
    Ok(fd)
}

/// [`write_new_file`] without waiting for the data: for many files at once,
/// each one's write-back started here ([`start_write_back`]) and waited for
/// later ([`wait_write_back`]), before any is renamed into place.
pub fn write_new_file_unsynced(
    dir: impl AsFd,
    name: &str,
    data: &[u8],
    meta: &Meta,
) -> io::Result<OwnedFd> {
    step!("persist::write");
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rfs::openat(dir, name, flags, Mode::from_raw_mode(FILE_MODE))?;
    write_all(&fd, data)?;
    // The owner first: chown clears the setuid and setgid bits, chmod sets them.
    if let Some((uid, gid)) = owner_change(meta) {
        rfs::fchown(&fd, Some(uid), Some(gid))?;
    }
    rfs::fchmod(&fd, Mode::from_raw_mode(meta.perm))?;
    rfs::futimens(&fd, &timestamps(meta))?;
    Ok(fd)
}

/// Writes a file's data to the device and waits until the device has it, so
/// that a rename issued afterwards can only become durable together with (or
/// after) the data: the journal commit that makes the rename durable flushes
/// the device's cache first, and the data's block allocation was logged in the
/// same or an earlier transaction. This is no barrier itself (no cache flush,
/// no journal commit), so a batch needs one barrier, after its renames. Where
/// a file system does not support it, a real `fdatasync` takes its place.
fn write_back(fd: &OwnedFd) -> io::Result<()> {
    wait_write_back(fd)
}

/// Starts writing a file's data to the device, without waiting: for many
/// files staged at once, so that the device works on all of them while
/// later ones are written. Best effort: [`wait_write_back`] is the guarantee.
pub fn start_write_back(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: as in `wait_write_back`: a borrowed open descriptor, no memory
    // of this process read or written, the whole file.
    let _ = unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

/// [`wait_write_back`] for a file staged among many: the bulk pass's barrier
/// (and its failpoint).
pub fn wait_staged(fd: &OwnedFd) -> io::Result<()> {
    step!("persist::barrier");
    wait_write_back(fd)
}

/// Waits until a file's data is on the device (see [`write_new_file`]'s
/// write-back): only this file's, never the other dirty pages of the disk,
/// as a `syncfs` would (a neighbour's gigabytes included).
pub fn wait_write_back(fd: &OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: `fd` is an open descriptor borrowed for the whole call, so the
    // kernel acts on the file we wrote; the call reads and writes no memory of
    // this process; offset 0 with length 0 means "the whole file".
    let rc = unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, flags) };
    if rc == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ESPIPE)
        ) =>
        {
            Ok(rfs::fdatasync(fd)?)
        }
        e => Err(e),
    }
}

fn write_all(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    let mut rest = data;
    while !rest.is_empty() {
        match rustix::io::write(fd, rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Gives `name` in `dir` the owner, mode and times of `meta` (a symlink:
/// its own owner and times, never its target's; it has no mode of its own).
pub fn set_meta(dir: &OwnedFd, name: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::meta");
    let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let is_link = FileType::from_raw_mode(stat.st_mode) == FileType::Symlink;
    // The owner first: chown clears the setuid and setgid bits, chmod sets them.
    if let Some((uid, gid)) = owner_change(meta) {
        rfs::chownat(dir, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)?;
    }
    if !is_link {
        rfs::chmodat(dir, name, Mode::from_raw_mode(meta.perm), AtFlags::empty())?;
    }
    rfs::utimensat(dir, name, &timestamps(meta), AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(())
}

/// Sets the times of directory `path` (`parent` holds it; the root is
/// `root` itself), not following a symlink.
pub fn set_times(root: &OwnedFd, parent: &OwnedFd, path: &MemPath, meta: &Meta) -> io::Result<()> {
    match path.file_name() {
        None => Ok(rfs::futimens(root, &timestamps(meta))?),
        Some(name) => Ok(rfs::utimensat(
            parent,
            name,
            &timestamps(meta),
            AtFlags::SYMLINK_NOFOLLOW,
        )?),
    }
}

/// Gives an open directory (the memory root) the owner, mode and times of `meta`.
pub fn set_dir_meta(dir: &OwnedFd, meta: &Meta) -> io::Result<()> {
    step!("persist::meta");
    if let Some((uid, gid)) = owner_change(meta) {
        rfs::fchown(dir, Some(uid), Some(gid))?;
    }
    rfs::fchmod(dir, Mode::from_raw_mode(meta.perm))?;
    rfs::futimens(dir, &timestamps(meta))?;
    Ok(())
}

/// Makes directory `name` in `dir` (or finds it there) with `meta`.
pub fn make_dir(dir: &OwnedFd, name: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::mkdir");
    match rfs::mkdirat(dir, name, Mode::from_raw_mode(DIR_MODE)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    set_meta(dir, name, meta)
}

/// Makes a symbolic link `name` in `dir` pointing at `target` (replacing a
/// file there), owned and timed as `meta` says.
pub fn symlink(dir: &OwnedFd, name: &str, target: &str, meta: &Meta) -> io::Result<()> {
    step!("persist::symlink");
    match rfs::symlinkat(target, dir, name) {
        Err(rustix::io::Errno::EXIST) => {
            rfs::unlinkat(dir, name, AtFlags::empty())?;
            rfs::symlinkat(target, dir, name)?;
        }
        other => other?,
    }
    set_meta(dir, name, meta)
}

/// Swaps `a_name` of `a_dir` and `b_name` of `b_dir`.
pub fn exchange(a_dir: impl AsFd, a_name: &str, b_dir: impl AsFd, b_name: &str) -> io::Result<()> {
    step!("persist::rename");
    Ok(rfs::renameat_with(
        a_dir,
        a_name,
        b_dir,
        b_name,
        RenameFlags::EXCHANGE,
    )?)
}

fn timestamps(meta: &Meta) -> rfs::Timestamps {
    let spec = |t: std::time::SystemTime| {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        rfs::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as _,
        }
    };
    rfs::Timestamps {
        last_access: spec(meta.atime),
        last_modification: spec(meta.mtime),
    }
}

/// The owner to set, when it differs from this process's and we may set it.
fn owner_change(meta: &Meta) -> Option<(rfs::Uid, rfs::Gid)> {
    let me = rustix::process::geteuid();
    let differs = meta.uid != me.as_raw() || meta.gid != rustix::process::getegid().as_raw();
    (differs && me.is_root()).then(|| (rfs::Uid::from_raw(meta.uid), rfs::Gid::from_raw(meta.gid)))
}

/// Moves `from_name` of `from_dir` to `to_name` of `to_dir`, replacing a file there.
pub fn rename(
    from_dir: impl AsFd,
    from_name: &str,
    to_dir: impl AsFd,
    to_name: &str,
) -> io::Result<()> {
    step!("persist::rename");
    Ok(rfs::renameat(from_dir, from_name, to_dir, to_name)?)
}

/// Moves `from_name` of `from_dir` over `to_name` of `to_dir` in one atomic
/// step. A file or an empty directory at the target is replaced by
/// `rename(2)`; a directory that still holds something on disk (names memfs
/// does not load) is swapped out with `RENAME_EXCHANGE` and then moved to
/// `trash` as `aside`. Returns whether something was put in the trash.
pub fn replace(
    from_dir: &OwnedFd,
    from_name: &str,
    to_dir: &OwnedFd,
    to_name: &str,
    trash: &OwnedFd,
    aside: &str,
) -> io::Result<bool> {
    step!("persist::rename");
    match rfs::renameat(from_dir, from_name, to_dir, to_name) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
            exchange(from_dir, from_name, to_dir, to_name)?;
            // The new node is in place; the old one waits at the source's name.
            rename_noreplace(from_dir, from_name, trash, aside)?;
            Ok(true)
        }
        Err(e) => Err(e.into()),
    }
}

/// Like [`rename`], but fails with `EEXIST` instead of replacing anything.
pub fn rename_noreplace(
    from_dir: impl AsFd,
    from_name: &str,
    to_dir: impl AsFd,
    to_name: &str,
) -> io::Result<()> {
    step!("persist::rename");
    Ok(rfs::renameat_with(
        from_dir,
        from_name,
        to_dir,
        to_name,
        RenameFlags::NOREPLACE,
    )?)
}

/// Removes `name` from `dir`, and everything below it if it is a directory.
/// Works on raw names: a directory the agent deletes may hold names that are
/// not UTF-8 (files memfs never loaded), and they must go with it. Walks
/// without recursion and with a bounded number of descriptors, however deep.
pub fn remove_tree(dir: &OwnedFd, name: impl AsRef<OsStr>) -> io::Result<()> {
    /// A directory being emptied: its name in its parent, and what is left in it.
    struct Emptying {
        name: OsString,
        left: Vec<OsString>,
    }
    let name = name.as_ref();
    if !is_dir(dir, name)? {
        return Ok(rfs::unlinkat(dir, name, AtFlags::empty())?);
    }
    let top = open_raw_dir(dir, name)?;
    let left = raw_names(&top)?;
    let mut stack = DirStack::new(
        top,
        Emptying {
            name: name.to_owned(),
            left,
        },
    );
    while let Some(level) = stack.top() {
        match level.left.pop() {
            Some(child) => match is_dir(stack.fd(), &child) {
                Ok(true) => {
                    let sub = open_raw_dir(stack.fd(), &child)?;
                    let left = raw_names(&sub)?;
                    stack.push(sub, Emptying { name: child, left });
                }
                Ok(false) => rfs::unlinkat(stack.fd(), &child, AtFlags::empty())?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
            None => {
                let done = stack.pop()?;
                let parent = if stack.is_empty() { dir } else { stack.fd() };
                rfs::unlinkat(parent, &done.name, AtFlags::REMOVEDIR)?;
            }
        }
    }
    Ok(())
}

fn is_dir(dir: &OwnedFd, name: &OsStr) -> io::Result<bool> {
    let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

fn open_raw_dir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::openat(dir, name, flags, Mode::empty())?)
}

/// Every name in a directory, without `.` and `..`, as the bytes it is.
fn raw_names(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    use std::os::unix::ffi::OsStringExt;
    Ok(list_entries(dir)?
        .into_iter()
        .map(|(name, _)| match name {
            Ok(text) => OsString::from(text),
            Err(bytes) => OsString::from_vec(bytes),
        })
        .collect())
}

/// Each entry's name (or its raw bytes when they are not UTF-8) and type.
#[allow(clippy::type_complexity)]
pub fn list_entries(dir: &OwnedFd) -> io::Result<Vec<(Result<String, Vec<u8>>, FileType)>> {
    let mut out = Vec::new();
    for entry in rfs::Dir::read_from(dir)? {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let name = String::from_utf8(bytes.to_vec()).map_err(|e| e.into_bytes());
        out.push((name, entry.file_type()));
    }
    Ok(out)
}

/// Flushes everything written on the data dir's filesystem: the group barrier.
pub fn sync_filesystem(any_fd: impl AsFd) -> io::Result<()> {
    step!("persist::barrier");
    Ok(rfs::syncfs(any_fd)?)
}

/// Makes a file's data (and the metadata needed to read it) durable.
pub fn sync_data(fd: impl AsFd) -> io::Result<()> {
    step!("persist::barrier");
    Ok(rfs::fdatasync(fd)?)
}

/// Makes a directory's entries and attributes (or a file's metadata) durable.
pub fn sync_all(fd: impl AsFd) -> io::Result<()> {
    step!("persist::barrier");
    Ok(rfs::fsync(fd)?)
}

/// Opens the node at `path` below `root` to sync it (a directory or a file;
/// `None` when it is gone or a symlink, which its directory's sync covers).
pub fn open_to_sync(root: &OwnedFd, path: &MemPath) -> io::Result<Option<OwnedFd>> {
    if path.is_root() {
        return Ok(Some(root.try_clone()?));
    }
    let parent = match open_parent(root, path, false) {
        Ok(parent) => parent,
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let name = path.file_name().expect("not the root");
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    match rfs::openat(&parent, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The UTF-8 names in a directory (others are passed over).
pub fn list_names(dir: &OwnedFd) -> io::Result<Vec<String>> {
    Ok(list_entries(dir)?
        .into_iter()
        .filter_map(|(name, _)| name.ok())
        .collect())
}
