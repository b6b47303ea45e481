//! Reading the data dir's `memories/` into a fresh tree.

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;

use rustix::fs::{self as rfs, Mode, OFlags};

use super::fsops;
use super::storage::{Dir, Kind, Open, StorageDir};
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
pub fn load(root: &Dir) -> io::Result<(Tree, Skipped)> {
    load_with_progress(root, &mut |_| {})
}

/// [`load`], telling `progress` how many nodes are loaded after each directory.
pub fn load_with_progress(
    root: &Dir,
    progress: &mut dyn FnMut(usize),
) -> io::Result<(Tree, Skipped)> {
    let mut tree = Tree::new();
    let mut skipped = Skipped::default();
    let root_attr = root.stat(None)?.attr;
    let subdirs = load_entries(&mut tree, &mut skipped, root.as_ref(), ROOT_INO)?;
    let mut stack = DirStack::new(
        root.clone(),
        Level {
            ino: ROOT_INO,
            attr: root_attr,
            subdirs,
        },
    );
    while let Some(level) = stack.top() {
        match level.subdirs.pop() {
            Some((name, ino, attr)) => {
                let sub = fsops::open_dir(stack.dir().as_ref(), &name)?;
                let subdirs = load_entries(&mut tree, &mut skipped, sub.as_ref(), ino)?;
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
    dir: &dyn StorageDir,
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
        let stat = match dir.stat(Some(OsStr::new(&name))) {
            Ok(stat) => stat,
            // Gone since the listing (another process tidying up): nothing to load.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let kind = stat.kind;
        let attr = stat.attr;
        let node = match kind {
            Kind::Dir => NodeKind::Dir(Default::default()),
            Kind::File => NodeKind::File(Arc::new(read_file(dir, &name)?)),
            Kind::Symlink => {
                let target = dir.read_link(OsStr::new(&name))?;
                NodeKind::Symlink(target.to_string_lossy().into_owned())
            }
            _ => {
                skipped.special_files += 1;
                continue;
            }
        };
        let child = tree.add(ino, &name, node, attr);
        if kind == Kind::Dir {
            subdirs.push((name, child, attr));
        }
    }
    Ok(subdirs)
}

fn read_file(dir: &dyn StorageDir, name: &str) -> io::Result<Vec<u8>> {
    let file = dir.open_file(OsStr::new(name), Open::Read)?;
    super::storage::read_all(file.as_ref())
}

/// Reads the memory of the data dir at `dir` as it is on disk, without
/// taking its lock (for reports such as `memfs scan`: memfs writes every file
/// atomically, so each is whole, whether or not a memfs runs).
pub fn read_only(dir: &std::path::Path) -> io::Result<Tree> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let top = super::storage::real::dir(rfs::open(dir, flags, Mode::empty())?);
    let memories = fsops::open_dir(top.as_ref(), "memories")?;
    Ok(load(&memories)?.0)
}
