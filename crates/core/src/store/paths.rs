//! The operations by path, for the tool door: create, edit, remove and
//! rename, each whole under the one lock (the operations by inode, for the
//! mount, are in `inode_ops.rs`).

use std::sync::Arc;
use std::time::SystemTime;

use super::change::{ChangeOp, Origin, Ticket, Touched};
use super::limits::Growth;
use super::tree::{Attr, Ino, NodeKind, Tree, FILE_MODE, ROOT_INO};
use super::undo::{self, Undo};
use super::write_ops;
use super::Store;
use crate::error::Error;
use crate::path::MemPath;

/// What the history says of a file put whole besides its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Plain,
    /// Written without reading what it replaces: an overwrite.
    Unread,
    /// A merge of two edits made from the same version.
    Merged,
}

impl Store {
    /// Writes a whole file, making missing parent directories.
    /// An existing file is an error unless `overwrite`.
    pub fn create_file(
        &self,
        path: &MemPath,
        data: Vec<u8>,
        overwrite: bool,
        origin: Origin,
    ) -> Result<Ticket, Error> {
        self.create_file_expecting(path, data, overwrite, origin, None)
    }

    /// [`Store::create_file`], only if the file there now has the sha256
    /// `expect` (checked under the same lock). One create or overwrite under
    /// one lock: the expected hash, then [`Store::check_create`], then the
    /// tree's change with its undo and ops.
    pub fn create_file_expecting(
        &self,
        path: &MemPath,
        data: Vec<u8>,
        overwrite: bool,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        self.create_file_marked(path, data, overwrite, origin, expect, Mark::Plain)
    }

    /// [`Store::create_file_expecting`], the history saying more of it
    /// as `mark` tells: written over a text its writer had not read (an
    /// overwrite: one revert brings that text back), or a merge of two
    /// changes made from the same version (noted `merged:`). For an edit
    /// that met another machine's or host's (a store over HTTP, an agent's
    /// create that lost a race on a shared store).
    pub fn create_file_marked(
        &self,
        path: &MemPath,
        data: Vec<u8>,
        overwrite: bool,
        origin: Origin,
        expect: Option<&str>,
        mark: Mark,
    ) -> Result<Ticket, Error> {
        let (parent_path, name) = split(path)?;
        let mut tree = self.write_for(&[path]);
        check_expected(&tree, path, expect)?;
        let size = data.len() as u64;
        let existing = self.check_create(&tree, path, &parent_path, name, size, overwrite)?;
        let now = SystemTime::now();
        let data = Arc::new(data);
        let mut touched = Vec::new();
        let (ino, undo) = match existing {
            Some(ino) => {
                let (old, attr) = file_state(&tree, ino);
                tree.set_data(ino, data.clone(), now);
                let undo = Undo::Restore {
                    ino,
                    old,
                    attr,
                    new: data.clone(),
                };
                (ino, undo)
            }
            None => make_file(&mut tree, &parent_path, name, &data, now, &mut touched),
        };
        touched.push(Touched::Inode(ino));
        let ops = write_ops(&tree, ino, data);
        let mut said = super::recover::Rewrite::default();
        match mark {
            Mark::Plain => {}
            Mark::Unread => said.over.push(path.clone()),
            Mark::Merged => said.merged.push(path.clone()),
        }
        Ok(self.commit_saying(&mut tree, origin, ops, touched, Some(undo), said))
    }

    /// Whether a file of `size` bytes may be made (or, `overwrite`, put over
    /// the one) at `path`: the kind there, the size, and for a new one the
    /// growth its parents and entry make. The file there now, if any.
    fn check_create(
        &self,
        tree: &Tree,
        path: &MemPath,
        parent_path: &MemPath,
        name: &str,
        size: u64,
        overwrite: bool,
    ) -> Result<Option<Ino>, Error> {
        let parent = tree.check_dir_path(parent_path)?;
        let existing = match parent {
            Some(dir) => tree.child(dir, name)?,
            None => None,
        };
        let old_len = match existing.map(|ino| &tree.node(ino).kind) {
            None => 0,
            Some(NodeKind::Dir(_)) => return Err(Error::IsDir),
            Some(NodeKind::Symlink(_) | NodeKind::Special { .. }) => return Err(Error::IsSymlink),
            Some(NodeKind::File(_)) if !overwrite => return Err(Error::Exists),
            Some(NodeKind::File(old)) => old.len() as u64,
        };
        let copies = existing.map_or(1, |ino| tree.node(ino).copies());
        self.limits.check_size(tree, old_len, size, copies)?;
        if existing.is_none() {
            let (base, missing) = existing_prefix(tree, parent_path);
            self.limits.check_growth(
                tree,
                Growth {
                    dir: Some(base),
                    entries: missing + 1,
                    depth: path.names().len(),
                },
            )?;
        }
        Ok(existing)
    }

    /// Read-modify-write of a file under one lock: `edit` gets the bytes and
    /// returns the new bytes and a value for the caller, or refuses.
    pub fn edit_file<R, E: From<Error>>(
        &self,
        path: &MemPath,
        origin: Origin,
        edit: impl FnOnce(&[u8]) -> Result<(Vec<u8>, R), E>,
    ) -> Result<(R, Ticket), E> {
        let mut tree = self.write_for(&[path]);
        let ino = tree.resolve(path)?;
        let NodeKind::File(old) = &tree.node(ino).kind else {
            return Err(match tree.node(ino).kind {
                NodeKind::Dir(_) => Error::IsDir,
                _ => Error::IsSymlink,
            }
            .into());
        };
        let old_len = old.len() as u64;
        let (new, out) = edit(old)?;
        let copies = tree.node(ino).copies();
        self.limits
            .check_size(&tree, old_len, new.len() as u64, copies)?;
        let data = Arc::new(new);
        let (old, attr) = file_state(&tree, ino);
        tree.set_data(ino, data.clone(), SystemTime::now());
        let ops = write_ops(&tree, ino, data.clone());
        let undo = Undo::Restore {
            ino,
            old,
            attr,
            new: data,
        };
        let touched = vec![Touched::Inode(ino)];
        Ok((
            out,
            self.commit_undoable(&mut tree, origin, ops, touched, Some(undo)),
        ))
    }

    /// Removes a file or a whole directory tree. The root is refused.
    pub fn remove(&self, path: &MemPath, origin: Origin) -> Result<Ticket, Error> {
        self.remove_expecting(path, origin, None)
    }

    /// [`Store::remove`], only if the file there has the sha256 `expect`.
    pub fn remove_expecting(
        &self,
        path: &MemPath,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        let check = |tree: &Tree, _: Ino| check_expected(tree, path, expect).map(|()| true);
        let removed = self.remove_where(path, origin, true, check)?;
        Ok(removed.expect("the check never declines"))
    }

    /// Removes what is at `path` if `check` (run on it under the same lock)
    /// says so; `None` when it declines. With `undoable`, a removal the disk
    /// refuses is taken back.
    pub(super) fn remove_where(
        &self,
        path: &MemPath,
        origin: Origin,
        undoable: bool,
        check: impl FnOnce(&Tree, Ino) -> Result<bool, Error>,
    ) -> Result<Option<Ticket>, Error> {
        let (parent_path, name) = split(path)?;
        let mut tree = self.write_for(&[path]);
        let parent = tree.resolve(&parent_path)?;
        let Some(gone) = tree.child(parent, name)? else {
            return Err(Error::NotFound);
        };
        if !check(&tree, gone)? {
            return Ok(None);
        }
        // A person's unsaved bytes below it are their version first.
        let flushed = self.flush_dirty(&mut tree, gone);
        let undo = undoable.then(|| Undo::Relink {
            parent,
            name: name.to_string(),
            copy: undo::copy_subtree(&tree, gone),
        });
        self.remove_entry(&mut tree, parent, name);
        // The removed node too: a process holding it open sees its links
        // gone (what was below a removed directory is unreachable by name).
        let touched = vec![
            Touched::Entry(parent, name.to_string()),
            Touched::Inode(parent),
            Touched::Inode(gone),
        ];
        let ops = vec![ChangeOp::Remove { path: path.clone() }];
        Ok(Some(flushed.and(
            self.commit_undoable(&mut tree, origin, ops, touched, undo),
        )))
    }

    /// Moves a file or directory to a path that does not exist yet, making the
    /// missing parents of `to` (only once `from` is known to exist).
    pub fn rename(&self, from: &MemPath, to: &MemPath, origin: Origin) -> Result<Ticket, Error> {
        self.rename_expecting(from, to, origin, None)
    }

    /// [`Store::rename`], only if the file at `from` has the sha256 `expect`.
    pub fn rename_expecting(
        &self,
        from: &MemPath,
        to: &MemPath,
        origin: Origin,
        expect: Option<&str>,
    ) -> Result<Ticket, Error> {
        let (from_parent_path, from_name) = split(from)?;
        let mut tree = self.write_for(&[from, to]);
        check_expected(&tree, from, expect)?;
        // Any failure to find the source is "does not exist", so that NotDir
        // below can only be about the destination.
        let from_parent = tree
            .resolve(&from_parent_path)
            .map_err(|_| Error::NotFound)?;
        let Some(moved) = tree.child(from_parent, from_name).ok().flatten() else {
            return Err(Error::NotFound);
        };
        if to.is_root() || tree.resolve(to).is_ok() {
            return Err(Error::Exists);
        }
        if to.starts_with(from) {
            return Err(Error::IntoItself);
        }
        let (to_parent_path, to_name) = split(to)?;
        tree.check_dir_path(&to_parent_path)?;
        let (base, missing) = existing_prefix(&tree, &to_parent_path);
        self.limits.check_growth(
            &tree,
            Growth {
                dir: Some(base),
                entries: missing,
                depth: to.names().len() + tree.height(moved),
            },
        )?;
        let now = SystemTime::now();
        let mut touched = vec![
            Touched::Entry(from_parent, from_name.to_string()),
            Touched::Inode(from_parent),
            Touched::Inode(moved),
        ];
        // Unsaved bytes go down at the old name, before the move (see flush_dirty).
        let flushed = self.flush_dirty(&mut tree, moved);
        let (to_parent, dirs) = make_dirs_touching(&mut tree, &to_parent_path, now, &mut touched);
        tree.rename(from_parent, from_name, to_parent, to_name, now);
        touched.push(Touched::Entry(to_parent, to_name.to_string()));
        touched.push(Touched::Inode(to_parent));
        let ops = vec![ChangeOp::Rename {
            from: from.clone(),
            to: to.clone(),
            replace: false,
        }];
        let undo = Undo::MoveBack {
            ino: moved,
            from: (from_parent, from_name.to_string()),
            to: (to_parent, to_name.to_string()),
            dirs,
        };
        Ok(flushed.and(self.commit_undoable(&mut tree, origin, ops, touched, Some(undo))))
    }
}

/// A writer's precondition (`expected_sha256`): the file at `path` holds
/// exactly the content with that hash.
pub(super) fn check_expected(
    tree: &Tree,
    path: &MemPath,
    expect: Option<&str>,
) -> Result<(), Error> {
    let Some(expect) = expect else {
        return Ok(());
    };
    let ino = tree.resolve(path)?;
    match &tree.node(ino).kind {
        NodeKind::File(data) => {
            let actual = crate::digest::sha256_hex(data);
            if actual.eq_ignore_ascii_case(expect) {
                Ok(())
            } else {
                Err(Error::Changed { actual })
            }
        }
        NodeKind::Dir(_) => Err(Error::IsDir),
        _ => Err(Error::IsSymlink),
    }
}

/// A file's bytes and attributes, to put back.
pub(super) fn file_state(tree: &Tree, ino: Ino) -> (Arc<Vec<u8>>, Attr) {
    let node = tree.node(ino);
    match &node.kind {
        NodeKind::File(data) => (data.clone(), node.attr),
        _ => (Arc::default(), node.attr),
    }
}

/// Splits a non-root path into its parent and last name.
pub(super) fn split(path: &MemPath) -> Result<(MemPath, &str), Error> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(Error::Root),
    }
}

/// The deepest existing directory on `path`, and how many of its names are missing
/// below it.
pub(super) fn existing_prefix(tree: &Tree, path: &MemPath) -> (Ino, usize) {
    let mut ino = ROOT_INO;
    for (i, name) in path.names().iter().enumerate() {
        match tree.child(ino, name).ok().flatten() {
            Some(next) => ino = next,
            None => return (ino, path.names().len() - i),
        }
    }
    (ino, 0)
}

/// Makes missing directories of `path`, noting the entries that now exist.
pub(super) fn make_dirs_touching(
    tree: &mut Tree,
    path: &MemPath,
    now: SystemTime,
    touched: &mut Vec<Touched>,
) -> (Ino, Vec<Ino>) {
    let (dir, made) = tree.make_dirs(path, now);
    for &ino in &made {
        if let Some((parent, name)) = tree.node(ino).links.first() {
            touched.push(Touched::Entry(*parent, name.clone()));
            touched.push(Touched::Inode(*parent));
        }
    }
    (dir, made)
}

/// A new file `name` holding `data` in the directory `parent_path` (its
/// missing directories made): its inode and the undo that takes it all
/// back.
fn make_file(
    tree: &mut Tree,
    parent_path: &MemPath,
    name: &str,
    data: &Arc<Vec<u8>>,
    now: SystemTime,
    touched: &mut Vec<Touched>,
) -> (Ino, Undo) {
    let (dir, dirs) = make_dirs_touching(tree, parent_path, now, touched);
    let ino = tree.add(
        dir,
        name,
        NodeKind::File(data.clone()),
        Attr::new(FILE_MODE, now),
    );
    touched.push(Touched::Entry(dir, name.to_string()));
    touched.push(Touched::Inode(dir));
    let undo = Undo::Unmake {
        parent: dir,
        name: name.to_string(),
        ino,
        new: data.clone(),
        dirs,
    };
    (ino, undo)
}
