//! A removal that meets someone else's files: the checkpointer removes
//! only what memfs left (files as it wrote them, links, directories left
//! empty), and leaves the rest, named suspects for the files door to take
//! in (see `persist::known`).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;

use crate::path::MemPath;
use crate::persist::fsops;
use crate::persist::known::{on_disk, Held, OnDisk};
use crate::persist::storage::Dir;

/// Removes what memfs left at and below `path`, keeping `theirs` (the
/// files someone else changed or made); memfs' files go to the trash as
/// `STAGE.N` (listed in `trashed`, emptied after the pass).
pub fn remove_ours(
    (root, trash_dir): (&Dir, &Dir),
    known: &mut Held<'_>,
    path: &MemPath,
    theirs: &[MemPath],
    stage: &str,
    trashed: &mut Vec<String>,
) -> io::Result<()> {
    let keep: HashSet<&MemPath> = theirs.iter().collect();
    for p in theirs {
        known.suspect(p);
    }
    // Depth first: a directory after everything below it.
    let mut order = Vec::new();
    let mut todo = vec![path.clone()];
    while let Some(at) = todo.pop() {
        if let OnDisk::Dir(_) = on_disk(root, &at)? {
            let dir = fsops::open_parent(root, &at.join("x"), false)?;
            for (name, _) in dir.list()? {
                if let Some(n) = name.to_str().filter(|n| crate::path::check_name(n).is_ok()) {
                    todo.push(at.join(n));
                }
            }
        }
        order.push(at);
    }
    for (n, at) in order.iter().rev().enumerate() {
        if keep.contains(at) {
            continue;
        }
        let Some(name) = at.file_name() else {
            continue;
        };
        let parent = fsops::open_parent(root, at, false)?;
        match on_disk(root, at)? {
            OnDisk::Absent => {}
            // Left empty by now, or it holds what is theirs: it stays.
            OnDisk::Dir(_) => match parent.unlink(OsStr::new(name), true) {
                Ok(()) => known.forget(at),
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
                Err(e) => return Err(e),
            },
            _ => {
                let trash = format!("{stage}.{n}");
                fsops::rename_noreplace(parent.as_ref(), name, trash_dir.as_ref(), &trash)?;
                trashed.push(trash);
                known.forget(at);
            }
        }
    }
    Ok(())
}
