//! Translating the store's answers into what the kernel wants: attributes and errnos.

use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::error::Error;
use crate::store::{InfoKind, NodeInfo};

pub const BLOCK_SIZE: u32 = 4096;

/// Owner and modes a mount shows for every node instead of its own
/// (`--uid`, `--gid`, `--dir-mode`, `--file-mode`), as rclone and
/// mountpoint-s3 offer: the way to share one mount with other users. The
/// kernel checks permissions against what is shown (`default_permissions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Presented {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub dir_mode: Option<u32>,
    pub file_mode: Option<u32>,
}

impl Presented {
    pub fn attr(&self, info: &NodeInfo) -> FileAttr {
        let mut attr = file_attr(info);
        attr.uid = self.uid.unwrap_or(attr.uid);
        attr.gid = self.gid.unwrap_or(attr.gid);
        let mode = match info.kind {
            InfoKind::Dir => self.dir_mode,
            InfoKind::File => self.file_mode,
            _ => None,
        };
        if let Some(mode) = mode {
            attr.perm = (mode & 0o7777) as u16;
        }
        attr
    }
}

pub fn file_attr(info: &NodeInfo) -> FileAttr {
    FileAttr {
        ino: INodeNo(info.ino),
        size: info.size,
        blocks: info.size.div_ceil(512),
        atime: info.attr.atime,
        mtime: info.attr.mtime,
        ctime: info.attr.ctime,
        crtime: info.attr.ctime,
        kind: file_type(info.kind),
        perm: (info.attr.perm & 0o7777) as u16,
        nlink: info.nlink,
        uid: info.attr.uid,
        gid: info.attr.gid,
        rdev: info.rdev,
        blksize: BLOCK_SIZE,
        flags: 0,
    }
}

pub fn file_type(kind: InfoKind) -> FileType {
    match kind {
        InfoKind::File => FileType::RegularFile,
        InfoKind::Dir => FileType::Directory,
        InfoKind::Symlink => FileType::Symlink,
        InfoKind::Special(format) => match format {
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFBLK => FileType::BlockDevice,
            libc::S_IFSOCK => FileType::Socket,
            _ => FileType::NamedPipe,
        },
    }
}

pub fn errno(e: &Error) -> Errno {
    match limit_flag(e) {
        // A person's copy that hits a limit only sees EFBIG or ENOSPC: say
        // which limit and which flag, once a minute per limit.
        Some(flag) if once_a_minute(flag) => {
            let mut text = e.to_string();
            if !text.contains(flag) {
                text.push_str(&format!(" ({flag})"));
            }
            tracing::warn!("a request through the mount was refused: {text}")
        }
        _ => tracing::debug!(errno = e.errno(), "request failed: {e}"),
    }
    Errno::from_i32(e.errno())
}

/// The flag that sets the limit an error hit.
fn limit_flag(e: &Error) -> Option<&'static str> {
    Some(match e {
        Error::FileTooLarge { .. } => "--max-file-size",
        Error::StoreFull { .. } => "--max-store-size",
        Error::TooDeep { .. } => "--max-depth",
        Error::TooManyEntries { .. } => "--max-entries",
        Error::DirFull { .. } => "--max-dir-entries",
        _ => return None,
    })
}

fn once_a_minute(what: &'static str) -> bool {
    use crate::lock::{rank, Mutex};
    use std::collections::HashMap;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};
    static LAST: OnceLock<Mutex<HashMap<&'static str, Instant>>> = OnceLock::new();
    let mut last = LAST
        .get_or_init(|| Mutex::new(rank::ATTR_LAST, HashMap::new()))
        .lock();
    match last.get(what) {
        Some(at) if at.elapsed() < Duration::from_secs(60) => false,
        _ => {
            last.insert(what, Instant::now());
            true
        }
    }
}

/// Replies to a request that answers nothing but success or an errno.
pub(super) fn empty(result: Result<(), Error>, reply: fuser::ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}
