//! The cache's side of a sync: what the tree holds at an API path, and the
//! pulled changes made to it, each only if the tree still holds what was
//! looked at (a change made meanwhile by a door is never overwritten: the
//! next round sees it).

use std::sync::Arc;

use crate::digest::Sha;
use crate::error::Error;
use crate::path::MemPath;
use crate::store::{Mark, NodeKind, Origin, Store, Tree, ROOT_INO};

/// What the tree holds at a path.
#[derive(Debug, Clone)]
pub enum Local {
    Absent,
    File(Arc<Vec<u8>>),
    /// A directory or a link: nothing the API holds.
    Other,
}

impl Local {
    pub fn sha(&self) -> Option<String> {
        match self {
            Local::File(data) => Some(Sha::of(data).to_string()),
            _ => None,
        }
    }
}

/// `/notes/a.md` as the tree's path, if it is one.
pub fn mem_path(api: &str) -> Option<MemPath> {
    MemPath::parse(&format!("/memories{api}"))
        .ok()
        .filter(|p| !p.names().is_empty())
}

/// The tree's path as the API's (`/memories/notes/a.md` → `/notes/a.md`).
pub fn api_path(path: &MemPath) -> String {
    format!("/{}", path.names().join("/"))
}

pub fn at(store: &Store, path: &MemPath) -> Local {
    store.with_tree(|t| match t.resolve(path) {
        Err(_) => Local::Absent,
        Ok(ino) => match &t.node(ino).kind {
            NodeKind::File(data) => Local::File(data.clone()),
            _ => Local::Other,
        },
    })
}

/// Every file of the tree (its API path), but what the files door never
/// takes in (editors' swap and backup files, `.git`).
pub fn files(store: &Store) -> Vec<String> {
    store.with_tree(|t| {
        let mut out = Vec::new();
        walk(t, ROOT_INO, &mut Vec::new(), &mut out);
        out
    })
}

/// The files below `dir` (an API path), if it is a directory of the tree.
pub fn files_below(store: &Store, dir: &str) -> Vec<String> {
    let Some(path) = mem_path(dir) else {
        return Vec::new();
    };
    store.with_tree(|t| {
        let mut out = Vec::new();
        if let Ok(ino) = t.resolve(&path) {
            walk(t, ino, &mut path.names().to_vec(), &mut out);
        }
        out
    })
}

fn walk(tree: &Tree, dir: u64, names: &mut Vec<String>, out: &mut Vec<String>) {
    let Some(children) = tree.children(dir) else {
        return;
    };
    for (name, &ino) in children {
        names.push(name.clone());
        match &tree.node(ino).kind {
            NodeKind::Dir(_) => walk(tree, ino, names, out),
            NodeKind::File(_) => {
                let api = format!("/{}", names.join("/"));
                if mem_path(&api).is_some_and(|p| !crate::outside::ignored(&p)) {
                    out.push(api);
                }
            }
            _ => {}
        }
        names.pop();
    }
}

/// The file at `path` made `data`, only if it still holds `was` (its
/// SHA-256), or is still absent (`was` = `None`).
pub fn put(
    store: &Store,
    path: &MemPath,
    data: Vec<u8>,
    was: Option<&str>,
    origin: Origin,
) -> Result<(), Error> {
    store
        .create_file_expecting(path, data, was.is_some(), origin, was)?
        .wait()
}

/// The file at `path`, which holds `was`, replaced by `data` where
/// another machine's edit met this one's: an overwrite of it, or a merge
/// (`mark`), as the history says.
pub fn put_marked(
    store: &Store,
    path: &MemPath,
    data: Vec<u8>,
    was: &str,
    origin: Origin,
    mark: Mark,
) -> Result<(), Error> {
    store
        .create_file_marked(path, data, true, origin, Some(was), mark)?
        .wait()
}

/// The file at `path` removed, only if it still holds `was`.
pub fn remove(store: &Store, path: &MemPath, was: &str, origin: Origin) -> Result<(), Error> {
    store.remove_expecting(path, origin, Some(was))?.wait()
}

/// The file at `from` moved to `to`, only if it still holds `was` and
/// nothing is at `to`.
pub fn rename(
    store: &Store,
    from: &MemPath,
    to: &MemPath,
    was: &str,
    origin: Origin,
) -> Result<(), Error> {
    if !matches!(at(store, to), Local::Absent) {
        return Err(Error::Exists);
    }
    store.rename_expecting(from, to, origin, Some(was))?.wait()
}
