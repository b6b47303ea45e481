//! The `fuser::Filesystem` adapter: each request becomes one store operation
//! and one reply. No logic lives here that the store could own, and nothing
//! here talks to the kernel outside the reply (invalidations have their own
//! thread).

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, Errno, FileHandle, Filesystem, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::attr::{empty, errno, file_type, Presented, BLOCK_SIZE};
use super::flusher::Flusher;
use super::listings::Listings;
use super::request::{origin, request_span};
use super::syncer::Syncer;
use super::tuning::Tuning;
use crate::error::Error;
use crate::store::{DirEntry, NewNode, NodeInfo, RenameMode, SetAttr, Store};

/// File handles say only whether the open can write (then its release
/// hands the file to the flusher).
const READ_ONLY: FileHandle = FileHandle(0);
const WRITABLE: FileHandle = FileHandle(1);

/// Largest write the kernel sends in one request.
const MAX_WRITE: u32 = 1 << 20;

pub struct MemFs {
    store: Arc<Store>,
    flusher: Arc<Flusher>,
    /// Directory listings, named by the offsets handed out (`listings.rs`):
    /// each later read walks on from its offset without a copy.
    dirs: Listings<DirEntry>,
    /// Answers `fsync` once its change is durable, so that no worker thread
    /// waits for the disk.
    syncer: Syncer,
    presented: Presented,
    /// This mount's number (see `request::serving`).
    mount: u64,
    tuning: Tuning,
}

impl MemFs {
    pub fn new(
        store: Arc<Store>,
        flusher: Arc<Flusher>,
        presented: Presented,
        mount: u64,
        tuning: Tuning,
    ) -> Self {
        MemFs {
            mount,
            tuning,
            store,
            flusher,
            dirs: Listings::default(),
            syncer: Syncer::start(),
            presented,
        }
    }

    fn entry(&self, made: Result<NodeInfo, Error>, reply: ReplyEntry) {
        match made {
            Ok(info) => reply.entry(&self.tuning.ttl, &self.presented.attr(&info), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// A lookup answer that says "no such name" and may be cached (node id 0).
fn negative_entry() -> fuser::FileAttr {
    fuser::FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLOCK_SIZE,
        flags: 0,
    }
}

/// Names in the tree are ones the tool's paths can address: UTF-8, at most
/// 255 bytes (the kernel leaves NAME_MAX to FUSE file systems), without
/// control characters, backslashes or percent-encoded `.`, `/` or `\`.
/// Others are refused, so a person cannot make a name that forges a row of
/// the agent's listing or that the agent could never delete.
fn utf8(name: &OsStr) -> Result<&str, Errno> {
    if name.len() > crate::path::MAX_NAME_BYTES {
        return Err(Errno::ENAMETOOLONG);
    }
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    crate::path::check_name(name).map_err(|_| Errno::EINVAL)?;
    Ok(name)
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

macro_rules! name_or_reply {
    ($name:expr, $reply:expr) => {
        match utf8($name) {
            Ok(n) => n,
            Err(e) => return $reply.error(e),
        }
    };
}

impl Filesystem for MemFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        // Read ahead as far as the kernel allows (it caps the value it offers).
        let _ = config.set_max_readahead(MAX_WRITE);
        // `ls -l` and friends get names and attributes in one round trip.
        let _ = config
            .add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _span = request_span(self.mount, req, "lookup", parent.0);
        let name = name_or_reply!(name, reply);
        match self.store.lookup(parent.0, name) {
            // A name that is not there is cached as such for the TTL (a
            // negative entry: `git status`, compilers and shells look up many
            // names that do not exist). A tool change that makes the name
            // invalidates the entry before its result is returned.
            Err(Error::NotFound) => {
                tracing::debug!(
                    errno = libc::ENOENT,
                    "request failed: no such name (cached as absent)"
                );
                reply.entry(&self.tuning.ttl, &negative_entry(), Generation(0))
            }
            found => self.entry(found, reply),
        }
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        let _span = request_span(self.mount, req, "forget", ino.0);
        self.store.unpin(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _span = request_span(self.mount, req, "getattr", ino.0);
        match self.store.info(ino.0) {
            Ok(info) => reply.attr(&self.tuning.ttl, &self.presented.attr(&info)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _span = request_span(self.mount, req, "setattr", ino.0);
        let set = SetAttr {
            perm: mode,
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        match self.store.set_attr(ino.0, set, origin(req)) {
            Ok(info) => reply.attr(&self.tuning.ttl, &self.presented.attr(&info)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let _span = request_span(self.mount, req, "readlink", ino.0);
        match self.store.readlink(ino.0) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _span = request_span(self.mount, req, "mknod", parent.0);
        let name = name_or_reply!(name, reply);
        // FIFOs, sockets and device nodes live in memory only (the mount is
        // nodev, so a device node opens nothing).
        let what = match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => NewNode::File,
            format @ (libc::S_IFIFO | libc::S_IFSOCK | libc::S_IFCHR | libc::S_IFBLK) => {
                NewNode::Special { format, rdev }
            }
            _ => return reply.error(Errno::EINVAL),
        };
        let owner = (req.uid(), req.gid());
        self.entry(
            self.store
                .make_node(parent.0, name, what, mode, owner, origin(req)),
            reply,
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _span = request_span(self.mount, req, "mkdir", parent.0);
        let name = name_or_reply!(name, reply);
        let owner = (req.uid(), req.gid());
        self.entry(
            self.store
                .make_node(parent.0, name, NewNode::Dir, mode, owner, origin(req)),
            reply,
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _span = request_span(self.mount, req, "unlink", parent.0);
        let name = name_or_reply!(name, reply);
        empty(self.store.unlink(parent.0, name, origin(req)), reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _span = request_span(self.mount, req, "rmdir", parent.0);
        let name = name_or_reply!(name, reply);
        empty(self.store.rmdir(parent.0, name, origin(req)), reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _span = request_span(self.mount, req, "symlink", parent.0);
        let name = name_or_reply!(link_name, reply);
        // A target is any UTF-8 text (it is stored, never followed by memfs).
        let Some(target) = target.to_str().map(str::to_string) else {
            return reply.error(Errno::EINVAL);
        };
        let owner = (req.uid(), req.gid());
        self.entry(
            self.store.make_node(
                parent.0,
                name,
                NewNode::Symlink(target),
                0o777,
                owner,
                origin(req),
            ),
            reply,
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "rename", parent.0);
        let name = name_or_reply!(name, reply);
        let newname = name_or_reply!(newname, reply);
        let mode = if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            RenameMode::Exchange
        } else if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            RenameMode::NoReplace
        } else if flags.is_empty() {
            RenameMode::Replace
        } else {
            return reply.error(Errno::EINVAL); // RENAME_WHITEOUT
        };
        empty(
            self.store
                .rename_entry(parent.0, name, newparent.0, newname, mode, origin(req)),
            reply,
        );
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _span = request_span(self.mount, req, "link", ino.0);
        let name = name_or_reply!(newname, reply);
        self.entry(
            self.store.link(ino.0, newparent.0, name, origin(req)),
            reply,
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _span = request_span(self.mount, req, "open", ino.0);
        match self.store.info(ino.0) {
            Ok(_) => {
                self.store.pin(ino.0, 1);
                if flags.0 & libc::O_ACCMODE != libc::O_WRONLY {
                    // What this process saw: a later save of it over an
                    // agent's newer change is a lost update.
                    self.store
                        .note_open(ino.0, super::request::process_pid(req));
                }
                let fh = match flags.0 & libc::O_ACCMODE == libc::O_RDONLY {
                    true => READ_ONLY,
                    false => WRITABLE,
                };
                reply.opened(fh, self.tuning.file);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _span = request_span(self.mount, req, "read", ino.0);
        match self.store.read(ino.0, offset, size) {
            Ok((bytes, range)) => reply.data(&bytes[range]),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _span = request_span(self.mount, req, "write", ino.0);
        let append = flags.0 & libc::O_APPEND != 0;
        match self.store.write(ino.0, offset, data, append, origin(req)) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "flush", ino.0);
        // Only sent by kernels older than FOPEN_NOFLUSH (5.16), which ignore
        // it in `Tuning::file`. Written out soon after close: queued now, durable
        // at the next barrier. A handle that cannot write has nothing to
        // hand over.
        if fh == WRITABLE {
            self.flusher.soon(ino.0);
        }
        reply.ok();
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "release", ino.0);
        if fh == WRITABLE {
            self.flusher.soon(ino.0);
        }
        self.store.unpin(ino.0, 1);
        reply.ok();
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "fsync", ino.0);
        // Answered by the syncer once durable: this worker is free at once.
        self.syncer
            .answer_when_done(self.store.persist_file(ino.0, true, origin(req)), reply);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _span = request_span(self.mount, req, "opendir", ino.0);
        match self.store.info(ino.0) {
            Ok(_) => {
                // No state per handle: offsets name their listing.
                reply.opened(FileHandle(0), self.tuning.dir);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _span = request_span(self.mount, req, "readdir", ino.0);
        let listing = match self.dirs.at(offset, || self.store.read_dir(ino.0)) {
            Ok(listing) => listing,
            Err(e) => return reply.error(errno(&e)),
        };
        let from = listing.index.min(listing.entries.len());
        for (i, e) in listing.entries.iter().enumerate().skip(from) {
            let next = listing.offset_after(i);
            if reply.add(INodeNo(e.ino), next, file_type(e.kind), &e.name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _span = request_span(self.mount, req, "readdirplus", ino.0);
        let listing = match self.dirs.at(offset, || self.store.read_dir(ino.0)) {
            Ok(listing) => listing,
            Err(e) => return reply.error(errno(&e)),
        };
        let from = listing.index.min(listing.entries.len());
        // The names come from the listing's snapshot, but attributes are read
        // now, for the entries this reply holds only: the snapshot may predate
        // a tool change whose invalidation the kernel already saw, and
        // attributes handed out now would be cached past it.
        let mut handed = Vec::new();
        self.store.with_infos(|current| {
            for (i, e) in listing.entries.iter().enumerate().skip(from) {
                // (A node gone since the snapshot is not handed out: the
                // kernel would hold an inode memfs no longer has.)
                let Some(info) = current(e.ino) else {
                    continue;
                };
                if reply.add(
                    INodeNo(info.ino),
                    listing.offset_after(i),
                    &e.name,
                    &self.tuning.ttl,
                    &self.presented.attr(&info),
                    Generation(0),
                ) {
                    break;
                }
                // The kernel takes a reference on every entry but `.` and `..`.
                if e.name != "." && e.name != ".." {
                    handed.push(e.ino);
                }
            }
        });
        self.store.pin_each(&handed);
        reply.ok();
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "releasedir", ino.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "fsyncdir", ino.0);
        // A directory's entries reach the disk with the same barrier as files.
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let _span = request_span(self.mount, req, "statfs", ino.0);
        let limit = self.store.limits().max_store_size;
        let (used, files) = self
            .store
            .with_tree(|t| (t.total_bytes(), t.node_count() as u64));
        let block = u64::from(BLOCK_SIZE);
        let blocks = limit / block;
        let free = limit.saturating_sub(used) / block;
        let max_files = u64::from(u32::MAX);
        reply.statfs(
            blocks,
            free,
            free,
            max_files,
            max_files - files,
            BLOCK_SIZE,
            255,
            BLOCK_SIZE,
        );
    }

    fn access(&self, req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _span = request_span(self.mount, req, "access", ino.0);
        // Mounted with default_permissions: the kernel checks modes itself.
        empty(self.store.info(ino.0).map(|_| ()), reply);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let _span = request_span(self.mount, req, "create", parent.0);
        let name = name_or_reply!(name, reply);
        let owner = (req.uid(), req.gid());
        match self.store.make_node(
            parent.0,
            name,
            NewNode::OpenedFile,
            mode,
            owner,
            origin(req),
        ) {
            Ok(info) => {
                self.store.pin(info.ino, 1); // the open handle
                reply.created(
                    &self.tuning.ttl,
                    &self.presented.attr(&info),
                    Generation(0),
                    WRITABLE,
                    self.tuning.file,
                );
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "fallocate", ino.0);
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        empty(
            self.store.allocate(ino.0, offset, length, origin(req)),
            reply,
        );
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let _span = request_span(self.mount, req, "lseek", ino.0);
        let size = match self.store.info(ino.0) {
            Ok(info) => info.size as i64,
            Err(e) => return reply.error(errno(&e)),
        };
        // Files have no holes: all data up to the size, one hole after it.
        match whence {
            libc::SEEK_DATA if offset < size => reply.offset(offset),
            libc::SEEK_HOLE if offset < size => reply.offset(size),
            libc::SEEK_DATA | libc::SEEK_HOLE => reply.error(Errno::ENXIO),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        let _span = request_span(self.mount, req, "getxattr", ino.0);
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, _size: u32, reply: ReplyXattr) {
        let _span = request_span(self.mount, req, "listxattr", ino.0);
        reply.error(Errno::ENOSYS);
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _span = request_span(self.mount, req, "setxattr", ino.0);
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _span = request_span(self.mount, req, "removexattr", ino.0);
        reply.error(Errno::ENOSYS);
    }
}
