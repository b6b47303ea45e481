//! Reading the data dir's `memories/` into a fresh tree.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

use super::fsops;
use crate::store::{Attr, Ino, NodeKind, Tree, ROOT_INO};

/// What loading passed over, for a warning at start-up.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Names that are not UTF-8, which the tool's paths cannot spell.
    pub non_utf8_names: usize,
    /// FIFOs, sockets and device nodes.
    pub special_files: usize,
}

/// Loads the tree under `root` (the open `memories/` directory).
pub fn load(root: &OwnedFd) -> io::Result<(Tree, Skipped)> {
    let mut tree = Tree::new();
    let mut skipped = Skipped::default();
    load_dir(&mut tree, &mut skipped, root, ROOT_INO)?;
    tree.node_mut(ROOT_INO).attr = attr_of(&rfs::fstat(root)?);
    // Loading is not a change: nothing starts out dirty.
    Ok((tree, skipped))
}

fn load_dir(tree: &mut Tree, skipped: &mut Skipped, dir: &OwnedFd, ino: Ino) -> io::Result<()> {
    for (name, _) in fsops::list_entries(dir)? {
        let Ok(name) = name else {
            skipped.non_utf8_names += 1;
            continue;
        };
        let stat = match rfs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Gone since the listing (another process tidying up): nothing to load.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        let attr = attr_of(&stat);
        let node = match kind {
            FileType::Directory => NodeKind::Dir(Default::default()),
            FileType::RegularFile => NodeKind::File(Arc::new(read_file(dir, &name)?)),
            FileType::Symlink => {
                let target = rfs::readlinkat(dir, name.as_str(), Vec::new())?;
                NodeKind::Symlink(target.to_string_lossy().into_owned())
            }
            _ => {
                skipped.special_files += 1;
                continue;
            }
        };
        let child = tree.add(ino, &name, node, attr);
        if kind == FileType::Directory {
            let sub = fsops::open_dir(dir, &name)?;
            load_dir(tree, skipped, &sub, child)?;
            // Adding children touched the directory's times; keep the ones on disk.
            tree.node_mut(child).attr = attr;
        }
    }
    Ok(())
}

fn read_file(dir: &OwnedFd, name: &str) -> io::Result<Vec<u8>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rfs::openat(dir, name, flags, Mode::empty())?;
    let mut file = std::fs::File::from(fd);
    let mut data = Vec::new();
    io::Read::read_to_end(&mut file, &mut data)?;
    Ok(data)
}

fn attr_of(stat: &rfs::Stat) -> Attr {
    let time = |secs: i64, nanos: i64| {
        let secs = secs.max(0) as u64;
        UNIX_EPOCH + Duration::new(secs, nanos.clamp(0, 999_999_999) as u32)
    };
    Attr {
        perm: stat.st_mode & 0o7777,
        uid: stat.st_uid,
        gid: stat.st_gid,
        atime: time(stat.st_atime, stat.st_atime_nsec as i64),
        mtime: time(stat.st_mtime, stat.st_mtime_nsec as i64),
        ctime: time(stat.st_ctime, stat.st_ctime_nsec as i64),
    }
}
