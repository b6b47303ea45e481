//! One interpreter of a change: the rules of each [`ChangeOp`] (what is
//! made on the way, what a node of another kind in the way becomes, what a
//! rename or an exchange does when a side is missing) written once, over a
//! small interface of primitive effects that each target implements: the
//! store's tree (a follower, the journal's replay), the journal's view of
//! the memory and, through it, the history's rows.
//!
//! The rules:
//! - The root is never made, removed, moved or exchanged; only its
//!   attributes change.
//! - A node is put (a file, a directory, a link) after its missing parents
//!   are made (mode `DIR_MODE`, owned and timed as the op's node); a parent
//!   that is not a directory is removed first (`Removal::InTheWay`).
//! - A write over a file replaces its content; over anything else, the
//!   other node (a whole directory, with what is below) goes first. A
//!   directory made where one is gets the op's attributes; a link made
//!   replaces what is there.
//! - A rename whose source is missing removes its target (what the
//!   source's owner made is not on this target: a node that lives in
//!   memory only, such as a FIFO). A rename or an exchange between a path
//!   and one of its own ancestors (or itself) changes nothing.
//! - An exchange with one side missing moves the other side.
//! - Attributes are set only on a node that is there.

use std::sync::Arc;

use super::change::{ChangeOp, Meta};
use super::tree::DIR_MODE;
use crate::path::MemPath;

/// What a target holds at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, a socket or a device node (memory only).
    Other,
}

/// A node as the interpreter needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    pub meta: Meta,
}

/// Why a node goes (a target that writes history tells them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The op removes it.
    Named,
    /// A rename puts its source there.
    Replaced,
    /// A node of another kind stood where the op puts one (or where it
    /// makes a parent directory).
    InTheWay,
}

/// The primitive effects of a change on one target. The interpreter calls
/// each only where its precondition holds.
pub trait Target {
    /// The node at `path` (no link followed), if any.
    fn found(&mut self, path: &MemPath) -> Option<Found>;
    /// Removes the node at `path` (present, not the root) and all below it.
    fn remove(&mut self, path: &MemPath, why: Removal);
    /// Makes a directory at `path` (absent; its parent is a directory).
    fn make_dir(&mut self, path: &MemPath, meta: &Meta);
    /// Puts a file at `path` (absent or a file; its parent is a directory).
    fn put_file(&mut self, path: &MemPath, data: &Arc<Vec<u8>>, meta: &Meta);
    /// Puts a symbolic link at `path` (absent; its parent is a directory).
    fn put_symlink(&mut self, path: &MemPath, target: &str, meta: &Meta);
    /// Moves the node at `from` (present) to `to` (absent; its parent is a
    /// directory; neither is within the other).
    fn move_entry(&mut self, from: &MemPath, to: &MemPath);
    /// Swaps the nodes at `a` and `b` (both present; neither is within the other).
    fn exchange(&mut self, a: &MemPath, b: &MemPath);
    /// Sets the node's mode, owner and times (present, or the root).
    fn set_meta(&mut self, path: &MemPath, meta: &Meta);
    /// Sets the node's access and modification times (present, or the root).
    fn set_times(&mut self, path: &MemPath, meta: &Meta);
}

/// Applies `op` to `target` by the rules above.
pub fn apply<T: Target + ?Sized>(op: &ChangeOp, target: &mut T) {
    match op {
        ChangeOp::Write { path, data, meta } if !path.is_root() => {
            make_parents(target, path, meta);
            match target.found(path).map(|f| f.kind) {
                None | Some(Kind::File) => {}
                Some(_) => target.remove(path, Removal::InTheWay),
            }
            target.put_file(path, data, meta);
        }
        ChangeOp::MakeDir { path, meta } if !path.is_root() => {
            make_parents(target, path, meta);
            match target.found(path).map(|f| f.kind) {
                Some(Kind::Dir) => target.set_meta(path, meta),
                found => {
                    if found.is_some() {
                        target.remove(path, Removal::InTheWay);
                    }
                    target.make_dir(path, meta);
                }
            }
        }
        ChangeOp::Symlink {
            path,
            target: to,
            meta,
        } if !path.is_root() => {
            make_parents(target, path, meta);
            if target.found(path).is_some() {
                target.remove(path, Removal::InTheWay);
            }
            target.put_symlink(path, to, meta);
        }
        ChangeOp::Remove { path } if !path.is_root() && target.found(path).is_some() => {
            target.remove(path, Removal::Named);
        }
        ChangeOp::Rename { from, to, .. } if apart(from, to) => rename(target, from, to),
        ChangeOp::Exchange { a, b } if apart(a, b) => exchange(target, a, b),
        ChangeOp::SetMeta { path, meta } if path.is_root() || target.found(path).is_some() => {
            target.set_meta(path, meta);
        }
        ChangeOp::SetTimes { path, meta } if path.is_root() || target.found(path).is_some() => {
            target.set_times(path, meta);
        }
        // Nothing there to remove or to set; the root named where a node
        // goes; a path moved within itself.
        _ => {}
    }
}

/// Neither path is the root, nor within the other.
fn apart(a: &MemPath, b: &MemPath) -> bool {
    !a.is_root() && !b.is_root() && !a.starts_with(b) && !b.starts_with(a)
}

fn rename<T: Target + ?Sized>(target: &mut T, from: &MemPath, to: &MemPath) {
    match target.found(from) {
        None => {
            if target.found(to).is_some() {
                target.remove(to, Removal::Replaced);
            }
        }
        Some(source) => {
            make_parents(target, to, &source.meta);
            if target.found(to).is_some() {
                target.remove(to, Removal::Replaced);
            }
            target.move_entry(from, to);
        }
    }
}

fn exchange<T: Target + ?Sized>(target: &mut T, a: &MemPath, b: &MemPath) {
    match (target.found(a), target.found(b)) {
        (Some(_), Some(_)) => target.exchange(a, b),
        (Some(side), None) => {
            make_parents(target, b, &side.meta);
            target.move_entry(a, b);
        }
        (None, Some(side)) => {
            make_parents(target, a, &side.meta);
            target.move_entry(b, a);
        }
        (None, None) => {}
    }
}

/// Makes the missing directories above `path` (mode `DIR_MODE`, owned and
/// timed as `like`), removing a node of another kind in the way.
fn make_parents<T: Target + ?Sized>(target: &mut T, path: &MemPath, like: &Meta) {
    let Some(parent) = path.parent() else {
        return;
    };
    // Every target is a tree: when the parent is a directory, so is every
    // directory above it.
    if parent.is_root() || target.found(&parent).map(|f| f.kind) == Some(Kind::Dir) {
        return;
    }
    let meta = Meta {
        perm: DIR_MODE,
        ..*like
    };
    let names = parent.names();
    let mut made = false;
    for depth in 1..=names.len() {
        let dir = MemPath::from_names(names[..depth].iter().cloned());
        // Below a directory just made, nothing is there.
        let found = match made {
            true => None,
            false => target.found(&dir).map(|f| f.kind),
        };
        match found {
            Some(Kind::Dir) => continue,
            Some(_) => target.remove(&dir, Removal::InTheWay),
            None => {}
        }
        target.make_dir(&dir, &meta);
        made = true;
    }
}
