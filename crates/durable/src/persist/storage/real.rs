//! The storage of real files: each directory a descriptor, each name opened
//! relative to it with `O_NOFOLLOW`, so a symlink planted in the data dir is
//! never followed out of it.

use std::any::Any;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags};

use super::{Dir, File, Kind, Open, Rename, Stat, StorageDir, StorageFile};
use crate::store::Attr;

/// A directory held by its descriptor.
pub struct RealDir {
    fd: OwnedFd,
}

/// An open file.
pub struct RealFile {
    fd: OwnedFd,
}

/// The directory `fd` as a [`Dir`].
pub fn dir(fd: OwnedFd) -> Dir {
    Arc::new(RealDir { fd })
}

impl RealDir {
    /// Its descriptor (for what is not storage: a lock, a socket's path).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn kind_of(mode: u32) -> Kind {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

fn stat_of(st: &rfs::Stat) -> Stat {
    let time = |secs: i64, nanos: i64| {
        UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32)
    };
    Stat {
        kind: kind_of(st.st_mode),
        size: st.st_size.max(0) as u64,
        attr: Attr {
            perm: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            atime: time(st.st_atime, st.st_atime_nsec as i64),
            mtime: time(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: time(st.st_ctime, st.st_ctime_nsec as i64),
        },
        id: Some((st.st_dev, st.st_ino)),
    }
}

fn timestamps(atime: SystemTime, mtime: SystemTime) -> rfs::Timestamps {
    let spec = |t: SystemTime| {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        rfs::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as _,
        }
    };
    rfs::Timestamps {
        last_access: spec(atime),
        last_modification: spec(mtime),
    }
}

fn other_fd(to: &dyn StorageDir) -> io::Result<&OwnedFd> {
    to.as_any()
        .downcast_ref::<RealDir>()
        .map(|d| &d.fd)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EXDEV))
}

impl StorageDir for RealDir {
    fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(dir(rfs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())?))
    }

    fn list(&self) -> io::Result<Vec<(OsString, Kind)>> {
        use std::os::unix::ffi::OsStrExt;
        let mut out = Vec::new();
        for entry in rfs::Dir::read_from(&self.fd)? {
            let entry = entry?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::RegularFile => Kind::File,
                FileType::Directory => Kind::Dir,
                FileType::Symlink => Kind::Symlink,
                FileType::Unknown => {
                    match rfs::statat(&self.fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => kind_of(st.st_mode),
                        Err(_) => Kind::Other,
                    }
                }
                _ => Kind::Other,
            };
            out.push((OsStr::from_bytes(bytes).to_owned(), kind));
        }
        Ok(out)
    }

    fn stat(&self, name: Option<&OsStr>) -> io::Result<Stat> {
        let st = match name {
            None => rfs::fstat(&self.fd)?,
            Some(name) => rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?,
        };
        Ok(stat_of(&st))
    }

    fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        use std::os::unix::ffi::OsStringExt;
        let target = rfs::readlinkat(&self.fd, name, Vec::new())?;
        Ok(OsString::from_vec(target.into_bytes()))
    }

    fn open_file(&self, name: &OsStr, how: Open) -> io::Result<File> {
        let base = OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let flags = match how {
            Open::Read => base | OFlags::RDONLY | OFlags::NONBLOCK,
            Open::Write => base | OFlags::WRONLY,
            Open::Truncate => base | OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
            Open::New => base | OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        };
        let fd = rfs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o600))?;
        Ok(Box::new(RealFile { fd }))
    }

    fn mkdir(&self, name: &OsStr) -> io::Result<()> {
        Ok(rfs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o700))?)
    }

    fn symlink(&self, name: &OsStr, target: &OsStr) -> io::Result<()> {
        Ok(rfs::symlinkat(target, &self.fd, name)?)
    }

    fn rename(
        &self,
        name: &OsStr,
        to: &dyn StorageDir,
        to_name: &OsStr,
        how: Rename,
    ) -> io::Result<()> {
        let to = other_fd(to)?;
        match how {
            Rename::Replace => rfs::renameat(&self.fd, name, to, to_name)?,
            Rename::NoReplace => {
                rfs::renameat_with(&self.fd, name, to, to_name, RenameFlags::NOREPLACE)?
            }
            Rename::Exchange => {
                rfs::renameat_with(&self.fd, name, to, to_name, RenameFlags::EXCHANGE)?
            }
        }
        Ok(())
    }

    fn unlink(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        Ok(rfs::unlinkat(&self.fd, name, flags)?)
    }

    fn set_owner(&self, name: Option<&OsStr>, uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = (Some(rfs::Uid::from_raw(uid)), Some(rfs::Gid::from_raw(gid)));
        match name {
            None => rfs::fchown(&self.fd, uid, gid)?,
            Some(name) => rfs::chownat(&self.fd, name, uid, gid, AtFlags::SYMLINK_NOFOLLOW)?,
        }
        Ok(())
    }

    fn set_mode(&self, name: Option<&OsStr>, perm: u32) -> io::Result<()> {
        let mode = Mode::from_raw_mode(perm);
        match name {
            None => rfs::fchmod(&self.fd, mode)?,
            Some(name) => rfs::chmodat(&self.fd, name, mode, AtFlags::empty())?,
        }
        Ok(())
    }

    fn set_times(
        &self,
        name: Option<&OsStr>,
        atime: SystemTime,
        mtime: SystemTime,
    ) -> io::Result<()> {
        let times = timestamps(atime, mtime);
        match name {
            None => rfs::futimens(&self.fd, &times)?,
            Some(name) => rfs::utimensat(&self.fd, name, &times, AtFlags::SYMLINK_NOFOLLOW)?,
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(rfs::fsync(&self.fd)?)
    }

    fn sync_child(&self, name: &OsStr, data_only: bool) -> io::Result<bool> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = match rfs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Ok(false)
            }
            Err(e) => return Err(e.into()),
        };
        match data_only {
            true => rfs::fdatasync(&fd)?,
            false => rfs::fsync(&fd)?,
        }
        Ok(true)
    }

    fn sync_fs(&self) -> io::Result<()> {
        Ok(rfs::syncfs(&self.fd)?)
    }

    fn free_bytes(&self) -> Option<u64> {
        let st = rfs::fstatvfs(&self.fd).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl StorageFile for RealFile {
    fn size(&self) -> io::Result<u64> {
        Ok(rfs::fstat(&self.fd)?.st_size.max(0) as u64)
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        Ok(rustix::io::pread(&self.fd, buf, at)?)
    }

    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize> {
        Ok(rustix::io::pwrite(&self.fd, buf, at)?)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        Ok(rfs::ftruncate(&self.fd, len)?)
    }

    fn reserve(&self, at: u64, len: u64) -> io::Result<()> {
        Ok(rfs::fallocate(
            &self.fd,
            rfs::FallocateFlags::KEEP_SIZE,
            at,
            len,
        )?)
    }

    fn set_owner(&self, uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = (Some(rfs::Uid::from_raw(uid)), Some(rfs::Gid::from_raw(gid)));
        Ok(rfs::fchown(&self.fd, uid, gid)?)
    }

    fn set_mode(&self, perm: u32) -> io::Result<()> {
        Ok(rfs::fchmod(&self.fd, Mode::from_raw_mode(perm))?)
    }

    fn set_times(&self, atime: SystemTime, mtime: SystemTime) -> io::Result<()> {
        Ok(rfs::futimens(&self.fd, &timestamps(atime, mtime))?)
    }

    fn start_write_back(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: a descriptor this file owns, open for the whole call; the
        // call reads and writes no memory of this process; offset 0 with
        // length 0 means the whole file.
        let _ = unsafe {
            libc::sync_file_range(self.fd.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE)
        };
    }

    fn wait_write_back(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: a descriptor this file owns, open for the whole call; the
        // call reads and writes no memory of this process; offset 0 with
        // length 0 means the whole file.
        let rc = unsafe { libc::sync_file_range(self.fd.as_raw_fd(), 0, 0, flags) };
        if rc == 0 {
            return Ok(());
        }
        match io::Error::last_os_error() {
            e if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ESPIPE)
            ) =>
            {
                Ok(rfs::fdatasync(&self.fd)?)
            }
            e => Err(e),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(rfs::fdatasync(&self.fd)?)
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(rfs::fsync(&self.fd)?)
    }
}

impl AsFd for RealDir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
