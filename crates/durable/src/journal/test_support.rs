//! What the journal's own tests share: a journal opened over the
//! in-memory disk, and a change that writes a file.

use std::sync::Arc;

use super::{Files, Journal, Options};
use crate::path::MemPath;
use crate::persist::storage::mem::MemDisk;
use crate::store::{Change, ChangeOp, Meta};

/// A journal, with the folders it lives in (kept for its life).
pub(super) struct Opened {
    pub(super) journal: Journal,
    _data: tempfile::TempDir,
    _dir: crate::persist::DataDir,
}

/// Opens a journal on an empty data dir over the in-memory disk.
pub(super) fn open(opts: Options) -> Opened {
    let data = tempfile::tempdir().unwrap();
    let disk = MemDisk::new(5);
    let dir = crate::persist::DataDir::open_on(data.path(), Some(disk.root())).unwrap();
    let files = Files {
        memories: dir.memories.clone(),
        tmp: dir.tmp.clone(),
        trash: dir.trash.clone(),
        known: Default::default(),
    };
    let (mut tree, _) = crate::persist::load::load(&dir.memories).unwrap();
    let (journal, _) = Journal::open(&dir.stored, &files, &mut tree, opts).unwrap();
    Opened {
        journal,
        _data: data,
        _dir: dir,
    }
}

/// memfs' own change writing `text` to `path`.
pub(super) fn write(path: &str, text: &str) -> Change {
    let meta = Meta {
        perm: 0o644,
        uid: 0,
        gid: 0,
        atime: std::time::UNIX_EPOCH,
        mtime: std::time::UNIX_EPOCH,
    };
    Change::of_memfs(vec![ChangeOp::Write {
        path: MemPath::parse(path).unwrap(),
        data: Arc::new(text.as_bytes().to_vec()),
        meta,
    }])
}

/// The content the journal's view holds at `path`.
pub(super) fn content_at(j: &Journal, path: &str) -> Option<crate::digest::Sha> {
    let st = j.shared.state.lock();
    let node = st.view.get(&MemPath::parse(path).unwrap())?;
    node.file().map(|(sha, ..)| sha)
}
