//! Reading the data dir's `memories/` into a fresh tree.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

use super::fsops;
use super::walk::DirStack;
use crate::path::check_name;
use crate::store::{Attr, Ino, NodeKind, Tree, ROOT_INO};

/// What loading passed over, for a warning at start-up.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Names that are not UTF-8, which the tool's paths cannot spell.
    pub non_utf8_names: usize,
    /// UTF-8 names the tool could not address either (control characters,
    /// backslashes, percent-encoded `.`, `/` or `\\`): listing one would
    /// forge a row or carry terminal escapes to the agent.
    pub unaddressable_names: usize,
    /// FIFOs, sockets and device nodes.
    pub special_files: usize,
}

/// One directory of the walk: its node, its attributes as on disk (set
/// again once its children are in, since adding them touched its times),
/// and the subdirectories still to enter.
struct Level {
    ino: Ino,
    attr: Attr,
    subdirs: Vec<(String, Ino, Attr)>,
}

/// Loads the tree under `root` (the open `memories/` directory), depth
/// first without recursion, holding a bounded number of descriptors (see `walk`).
pub fn load(root: &OwnedFd) -> io::Result<(Tree, Skipped)> {
    load_with_progress(root, &mut |_| {})
}

/// [`load`], telling `progress` how many nodes are loaded after each directory.
pub fn load_with_progress(
    root: &OwnedFd,
    progress: &mut dyn FnMut(usize),
) -> io::Result<(Tree, Skipped)> {
    let mut tree = Tree::new();
    let mut skipped = Skipped::default();
    let root_attr = attr_of(&rfs::fstat(root)?);
    let subdirs = load_entries(&mut tree, &mut skipped, root, ROOT_INO)?;
    let mut stack = DirStack::new(
        root.try_clone()?,
        Level {
            ino: ROOT_INO,
            attr: root_attr,
            subdirs,
        },
    );
    while let Some(level) = stack.top() {
        match level.subdirs.pop() {
            Some((name, ino, attr)) => {
                let sub = fsops::open_dir(stack.fd(), &name)?;
                let subdirs = load_entries(&mut tree, &mut skipped, &sub, ino)?;
                progress(tree.node_count());
                stack.push(sub, Level { ino, attr, subdirs });
            }
            None => {
                let done = stack.pop()?;
                tree.node_mut(done.ino).attr = done.attr;
            }
        }
    }
    // Loading is not a change: nothing starts out dirty.
    Ok((tree, skipped))
}

/// Adds the entries of `dir` below `ino`: files and symlinks whole, and
/// directories empty, returned to be entered next.
fn load_entries(
    tree: &mut Tree,
    skipped: &mut Skipped,
    dir: &OwnedFd,
    ino: Ino,
) -> io::Result<Vec<(String, Ino, Attr)>> {
    let mut subdirs = Vec::new();
    for (name, _) in fsops::list_entries(dir)? {
        let Ok(name) = name else {
            skipped.non_utf8_names += 1;
            continue;
        };
        if check_name(&name).is_err() {
            skipped.unaddressable_names += 1;
            continue;
        }
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
            subdirs.push((name, child, attr));
        }
    }
    Ok(subdirs)
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

/// Reads the memory of the data dir at `dir` as it is on disk, without
/// taking its lock (for reports such as `memfs scan`: memfs writes every file
/// atomically, so each is whole, whether or not a memfs runs).
pub fn read_only(dir: &std::path::Path) -> io::Result<Tree> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let top = rfs::open(dir, flags, Mode::empty())?;
    let memories = fsops::open_dir(&top, "memories")?;
    Ok(load(&memories)?.0)
}
