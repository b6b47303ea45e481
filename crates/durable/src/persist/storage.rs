//! The one storage interface: every byte memfs makes durable (journal
//! segments, their renames and removals, the directory syncs that make
//! names durable, and the checkpoint's plain files) goes through it, and so
//! does every read of them at start-up.
//!
//! Two implementations: the real files ([`real`]: descriptors, every name
//! opened relative to a checked directory and never through a symlink), and
//! an in-memory disk ([`mem`]) that keeps what was written apart from what
//! was made durable and can lose power at any step, for the power-loss
//! tests (kill -9 keeps the page cache; this does not).
//!
//! Handles are trait objects: a [`Dir`] is a directory (cheap to clone, as a
//! descriptor is to duplicate), a [`File`] an open file. A rename between
//! two directories takes both from the same storage.

use std::any::Any;
use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

pub mod mem;
pub mod real;

/// A directory of some storage.
pub type Dir = Arc<dyn StorageDir>;
/// An open file of some storage.
pub type File = Box<dyn StorageFile>;

/// What a node is (the kinds every target of a change knows).
pub use crate::store::interpret::Kind;

/// A node's attributes: what it is, its size, and its mode, owner and
/// times as the store keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub size: u64,
    pub attr: crate::store::Attr,
    /// The node's identity on a real disk (its device and inode: who
    /// wrote it is known by it, `outside::writers`); none on the memory disk.
    pub id: Option<(u64, u64)>,
}

/// How a file is opened (never through a symlink; new files get mode 0600).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    Read,
    /// For writing, as it is.
    Write,
    /// For writing, made if missing, emptied if not.
    Truncate,
    /// For writing, made new: `EEXIST` if something is there.
    New,
}

/// How a rename treats its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rename {
    /// `rename(2)`: a file or an empty directory there is replaced.
    Replace,
    /// `EEXIST` if anything is there.
    NoReplace,
    /// The two names swap their nodes (`ENOENT` unless both exist).
    Exchange,
}

/// A directory. Names are single components (never `/`); `..` is allowed
/// for [`StorageDir::open_dir`] only. Errors are the errnos the real calls
/// give (`ENOENT`, `EEXIST`, `ENOTEMPTY`, `ENOTDIR`, `ELOOP` for a symlink
/// where a directory or file was asked for, ...).
pub trait StorageDir: Send + Sync {
    /// The directory `name` in this one (`ELOOP` or `ENOTDIR` for a
    /// symlink, never followed).
    fn open_dir(&self, name: &OsStr) -> io::Result<Dir>;
    /// Every name in it (without `.` and `..`), with its kind.
    fn list(&self) -> io::Result<Vec<(OsString, Kind)>>;
    /// The attributes of `name` (not following a symlink), or of this
    /// directory itself for `None`.
    fn stat(&self, name: Option<&OsStr>) -> io::Result<Stat>;
    fn read_link(&self, name: &OsStr) -> io::Result<OsString>;
    fn open_file(&self, name: &OsStr, how: Open) -> io::Result<File>;
    /// Makes directory `name` (mode 0700); `EEXIST` if something is there.
    fn mkdir(&self, name: &OsStr) -> io::Result<()>;
    fn symlink(&self, name: &OsStr, target: &OsStr) -> io::Result<()>;
    /// Moves `name` to `to_name` in `to`, a directory of the same storage.
    fn rename(
        &self,
        name: &OsStr,
        to: &dyn StorageDir,
        to_name: &OsStr,
        how: Rename,
    ) -> io::Result<()>;
    /// Removes `name`: a file or symlink, or (with `dir`) an empty directory.
    fn unlink(&self, name: &OsStr, dir: bool) -> io::Result<()>;
    /// Owner, mode and times of `name` (a symlink's own, never its target's;
    /// a symlink has no mode), or of this directory for `None`.
    fn set_owner(&self, name: Option<&OsStr>, uid: u32, gid: u32) -> io::Result<()>;
    fn set_mode(&self, name: Option<&OsStr>, perm: u32) -> io::Result<()>;
    fn set_times(
        &self,
        name: Option<&OsStr>,
        atime: SystemTime,
        mtime: SystemTime,
    ) -> io::Result<()>;
    /// Makes this directory's entries (and attributes) durable: `fsync(2)`.
    fn sync(&self) -> io::Result<()>;
    /// Makes the node `name` durable (`fdatasync(2)` with `data_only`, else
    /// `fsync(2)`); `false` when nothing is there to sync (gone, or a
    /// symlink, which its directory's sync covers).
    fn sync_child(&self, name: &OsStr, data_only: bool) -> io::Result<bool>;
    /// Makes everything on this directory's file system durable: `syncfs(2)`.
    fn sync_fs(&self) -> io::Result<()>;
    /// Bytes free for this process on its file system, if it can tell.
    fn free_bytes(&self) -> Option<u64>;
    fn as_any(&self) -> &dyn Any;
}

/// An open file.
pub trait StorageFile: Send + Sync {
    /// Its size in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Reads at `at`; fewer bytes than asked only at the end.
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize>;
    /// Writes at `at` (possibly fewer bytes than given: see [`write_all_at`]).
    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Allocates `len` bytes at `at` without changing the size (best effort).
    fn reserve(&self, at: u64, len: u64) -> io::Result<()>;
    fn set_owner(&self, uid: u32, gid: u32) -> io::Result<()>;
    fn set_mode(&self, perm: u32) -> io::Result<()>;
    fn set_times(&self, atime: SystemTime, mtime: SystemTime) -> io::Result<()>;
    /// Starts writing its data to the device, without waiting (best effort).
    fn start_write_back(&self);
    /// Waits until its data is on the device (`sync_file_range(2)`, or
    /// `fdatasync(2)` where that is not supported): a rename after it can
    /// only become durable with the data.
    fn wait_write_back(&self) -> io::Result<()>;
    /// `fdatasync(2)`: its data and size durable.
    fn sync_data(&self) -> io::Result<()>;
    /// `fsync(2)`: its data and attributes durable.
    fn sync_all(&self) -> io::Result<()>;
}

/// Writes all of `bytes` at `at`: a short write goes on from where it
/// stopped, an interrupted one is tried again, and one that writes nothing
/// is an error (never a loop).
pub fn write_all_at(file: &dyn StorageFile, mut bytes: &[u8], mut at: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match file.write_at(bytes, at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `at` (`UnexpectedEof` past the end).
pub fn read_exact_at(file: &dyn StorageFile, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, at) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The whole of an open file.
pub fn read_all(file: &dyn StorageFile) -> io::Result<Vec<u8>> {
    let len = file.size()?;
    let mut out = vec![0u8; len as usize];
    let mut at = 0;
    while at < out.len() {
        match file.read_at(&mut out[at..], at as u64) {
            Ok(0) => break, // shorter than it said: what is there
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(at);
    Ok(out)
}

/// Writes `bytes` as the whole of file `name` in `dir` (made, or emptied)
/// and makes its data durable; on failure it is removed again. (The
/// journal's rewrites write their new segment so, then rename it over the
/// old one and sync the directory.)
pub fn write_whole(dir: &dyn StorageDir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let written = (|| {
        let file = dir.open_file(OsStr::new(name), Open::Truncate)?;
        write_all_at(file.as_ref(), bytes, 0)?;
        file.sync_data()
    })();
    if written.is_err() {
        let _ = dir.unlink(OsStr::new(name), false);
    }
    written
}

/// The error for an errno.
pub fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}
