//! The taker: looks at one path the watcher named, compares what the disk
//! has with what memfs last left there (`persist::known`) and with the
//! tree, and takes a difference in as a change of the files door
//! (`Origin::Files`), through the store's own checks, as start-up would
//! have found it (`found`): files (any bytes), directories and symbolic
//! links. What cannot be taken in stays on disk, untouched, and is listed
//! with why (`Known::left_out`).

use std::ffi::OsStr;
use std::sync::Arc;

use crate::digest::Sha;
use crate::error::Error;
use crate::path::MemPath;
use crate::persist::known::{on_disk, read_plain, Known, OnDisk, Seen, Stamp};
use crate::persist::storage::{Dir, Kind, Stat};
use crate::store::{NewNode, NodeKind, Origin, Store, Tree};

/// Names the files door never takes in: editors' swap files and write
/// probes, backups, and a git repository's own directory.
pub fn ignored(path: &MemPath) -> bool {
    path.names().iter().any(|name| {
        name == ".git"
            || crate::tool::hide::EDITOR_ARTIFACTS
                .iter()
                .any(|p| crate::tool::hide::glob(p, name))
            || (name.starts_with('.')
                && [".swp", ".swo", ".swx", ".swpx"]
                    .iter()
                    .any(|s| name.ends_with(s)))
    })
}

/// What the tree has at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum InTree {
    Absent,
    Dir,
    File(Sha),
    Link(String),
    Other,
}

/// What the tree has at a path, copied out under its lock: a file's bytes
/// are shared, not hashed, there (the hash is taken after the lock).
fn in_tree(tree: &Tree, path: &MemPath) -> Result<InTree, Arc<Vec<u8>>> {
    let Ok(ino) = tree.resolve(path) else {
        return Ok(InTree::Absent);
    };
    Ok(match &tree.node(ino).kind {
        NodeKind::Dir(_) => InTree::Dir,
        NodeKind::File(data) => return Err(data.clone()),
        NodeKind::Symlink(target) => InTree::Link(target.clone()),
        NodeKind::Special { .. } => InTree::Other,
    })
}

pub struct Taker<'a> {
    pub store: &'a Arc<Store>,
    pub root: &'a Dir,
    pub known: &'a Known,
}

/// What looking at a path asks of the watcher next.
#[derive(Default)]
pub struct Next {
    /// A directory to watch, and whose entries to look at.
    pub dir: Option<MemPath>,
}

impl Taker<'_> {
    fn tree(&self, path: &MemPath) -> InTree {
        self.store
            .with_tree(|t| in_tree(t, path))
            .unwrap_or_else(|data| InTree::File(Sha::of(&data)))
    }

    fn leave_out(&self, path: &MemPath, why: &str) {
        self.known.lock().leave_out(&path.to_string(), why);
    }

    /// Looks at `path` and takes in what changed there (`written`: someone
    /// wrote it in place, which memfs never does: even a content memfs
    /// knew is theirs now).
    pub fn look(&self, path: &MemPath, written: bool) -> Next {
        let disk = match on_disk(self.root, path) {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!("the plain file {path} could not be looked at: {e}");
                return Next::default();
            }
        };
        match disk {
            OnDisk::Absent => {
                self.gone(path);
                Next::default()
            }
            OnDisk::Dir(stat) => {
                self.dir(path, &stat);
                Next {
                    dir: Some(path.clone()),
                }
            }
            OnDisk::File(stat) => {
                self.file(path, &stat, written);
                Next::default()
            }
            OnDisk::Other(stat) if stat.kind == Kind::Symlink => {
                self.link(path, &stat);
                Next::default()
            }
            OnDisk::Other(_) => {
                self.leave_out(
                    path,
                    "a FIFO, socket or device node: memfs keeps files, directories and links",
                );
                Next::default()
            }
        }
    }

    /// Nothing at `path` on disk: if memfs had left something there,
    /// someone removed it.
    fn gone(&self, path: &MemPath) {
        {
            let mut known = self.known.lock();
            known.let_in(&path.to_string());
            if known.get(path).is_none() {
                // Never memfs' (or not written yet): nothing to take.
                return;
            }
            // Looked at again under the lock: the checkpointer replacing a
            // file (moving the old one out, the new one in) holds it, and
            // the name was missing only meanwhile.
            if !matches!(on_disk(self.root, path), Ok(OnDisk::Absent)) {
                return;
            }
            known.forget(path);
        }
        if self.tree(path) != InTree::Absent {
            let _ = self.store.remove(
                path,
                Origin::Files {
                    uid: owner_of_parent(self.root, path),
                    by: None,
                },
            );
        }
    }

    fn dir(&self, path: &MemPath, stat: &Stat) {
        let was = {
            let mut known = self.known.lock();
            // Looked at again under the map's lock: the checkpointer moves
            // and removes directories (and what the map says of them) under
            // it, so a directory gone since the look is not someone's new
            // one (its move or removal tells its own event).
            if !matches!(on_disk(self.root, path), Ok(OnDisk::Dir(_))) {
                return;
            }
            let was = known.get(path);
            known.dir(path);
            was
        };
        let origin = Origin::Files {
            uid: stat.attr.uid,
            by: None,
        };
        match self.tree(path) {
            InTree::Dir => return,
            // A directory memfs made and the memory no longer has: its
            // removal has not reached the disk yet.
            InTree::Absent if was == Some(Seen::Dir) => return,
            InTree::Absent => {}
            _ => {
                let _ = self.store.remove(path, origin.clone());
            }
        }
        if let Err(e) = self.make(path, NewNode::Dir, stat, origin) {
            self.leave_out(path, &e.to_string());
        }
    }

    fn link(&self, path: &MemPath, stat: &Stat) {
        let leaf = path.file_name().unwrap_or(".");
        // Read with the map held: the checkpointer holds it across writing
        // a link and across moving one, so the link read and what the map
        // says of it are of one moment (read before, a link memfs has
        // moved since would look like someone's).
        let (target, was) = {
            let known = self.known.lock();
            let target = crate::persist::fsops::open_parent(self.root, path, false)
                .and_then(|parent| parent.read_link(OsStr::new(leaf)));
            (target, known.get(path))
        };
        let Ok(target) = target else {
            return;
        };
        let target = target.to_string_lossy().into_owned();
        let now = self.tree(path);
        if now == InTree::Link(target.clone()) {
            return;
        }
        // The link memfs left there: what the memory did to it since (a
        // move, a removal, something else in its place) has not reached the
        // disk yet.
        let left = Seen::Link {
            target: Sha::of(target.as_bytes()),
        };
        if was == Some(left) {
            return;
        }
        let origin = Origin::Files {
            uid: stat.attr.uid,
            by: None,
        };
        if now != InTree::Absent {
            let _ = self.store.remove(path, origin.clone());
        }
        match self.make(path, NewNode::Symlink(target), stat, origin) {
            Ok(()) => self.known.lock().let_in(&path.to_string()),
            Err(e) => self.leave_out(path, &e.to_string()),
        }
    }

    /// A plain file: taken in unless it is what memfs left there, or what
    /// memory holds already.
    fn file(&self, path: &MemPath, stat: &Stat, written: bool) {
        // Read and compared under the map's lock: the checkpointer never
        // places a file meanwhile (it records what it placed under it).
        let mut known = self.known.lock();
        let seen = known.get(path);
        if let Some(Seen::File {
            stamp: Some(stamp), ..
        }) = seen
        {
            if stamp.holds(stat) && !written {
                return;
            }
        }
        let limit = self.store.limits().max_file_size;
        if stat.size > limit {
            let why = format!(
                "{} bytes, over the limit of {limit} bytes per file",
                stat.size
            );
            known.leave_out(&path.to_string(), &why);
            return;
        }
        let Ok(data) = read_plain(self.root, path) else {
            return;
        };
        let sha = Sha::of(&data);
        let stamp = Some(Stamp::of(stat));
        if !written && matches!(seen, Some(Seen::File { sha: s, .. }) if s == sha) {
            // (Under the same lock as the look: the checkpointer places nothing meanwhile.)
            known.file(path, sha, stamp);
            return known.let_in(&path.to_string());
        }
        drop(known);
        let now = self.tree(path);
        if now == InTree::File(sha) {
            return self.holds(path, sha, stamp);
        }
        let origin = Origin::Files {
            uid: stat.attr.uid,
            by: super::writers::of(stat.id),
        };
        // The plain file showed memory's content when it was changed:
        // what memory held is no lost update.
        if let Some(Seen::File { sha: was, .. }) = seen {
            if now == InTree::File(was) {
                self.store.files_saw(path);
            }
        }
        if !matches!(now, InTree::File(_) | InTree::Absent) {
            let _ = self.store.remove(path, origin.clone());
        }
        match self.store.create_file(path, data, true, origin) {
            Ok(_) => self.holds(path, sha, stamp),
            Err(e) => self.leave_out(path, &e.to_string()),
        }
    }

    /// The plain file at `path` holds what memory does (`sha`, seen as `stamp`).
    fn holds(&self, path: &MemPath, sha: Sha, stamp: Option<Stamp>) {
        let mut known = self.known.lock();
        known.file(path, sha, stamp);
        known.let_in(&path.to_string());
    }

    /// Makes `what` at `path` (and its missing parents) as the files door.
    fn make(
        &self,
        path: &MemPath,
        what: NewNode,
        stat: &Stat,
        origin: Origin,
    ) -> Result<(), Error> {
        let parent_path = path.parent().unwrap_or_else(MemPath::root);
        let mut parent = crate::store::ROOT_INO;
        let mut at = MemPath::root();
        for name in parent_path.names() {
            at = at.join(name);
            parent = match self.store.with_tree(|t| t.resolve(&at)) {
                Ok(ino) => ino,
                Err(_) => {
                    let made = self.store.make_node(
                        parent,
                        name,
                        NewNode::Dir,
                        crate::store::DIR_MODE,
                        (stat.attr.uid, stat.attr.gid),
                        origin.clone(),
                    )?;
                    self.store.unpin(made.ino, 1);
                    made.ino
                }
            };
        }
        let leaf = path.file_name().ok_or(Error::Root)?;
        let perm = stat.attr.perm & 0o7777;
        let made = self.store.make_node(
            parent,
            leaf,
            what,
            perm,
            (stat.attr.uid, stat.attr.gid),
            origin,
        )?;
        self.store.unpin(made.ino, 1);
        Ok(())
    }

    /// A name moved within the plain files: a rename in memory when it
    /// moved what memfs had left there; otherwise both names are looked at.
    pub fn moved(&self, from: &MemPath, to: &MemPath) -> bool {
        // Someone else's move of what memfs left: memfs knows `from`, not
        // `to`, and the disk has `to`, not `from` (the checkpointer's own
        // renames move what it knows along, under the same lock; a new
        // file memfs put at `from` since is no move).
        let theirs = {
            let known = self.known.lock();
            known.get(from).is_some()
                && known.get(to).is_none()
                && matches!(on_disk(self.root, from), Ok(OnDisk::Absent))
                && !matches!(on_disk(self.root, to), Ok(OnDisk::Absent) | Err(_))
        };
        if !theirs || self.tree(from) == InTree::Absent || self.tree(to) != InTree::Absent {
            return false;
        }
        let uid = owner_of_parent(self.root, to);
        if self
            .store
            .rename(from, to, Origin::Files { uid, by: None })
            .is_err()
        {
            return false;
        }
        self.known.lock().moved(from, to);
        true
    }
}

/// Who owns the directory `path` is in (a removal has no file to ask).
fn owner_of_parent(root: &Dir, path: &MemPath) -> u32 {
    let parent = path.parent().unwrap_or_else(MemPath::root);
    match on_disk(root, &parent) {
        Ok(OnDisk::Dir(stat)) => stat.attr.uid,
        _ => rustix::process::geteuid().as_raw(),
    }
}
