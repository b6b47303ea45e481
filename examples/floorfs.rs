//! The FUSE floor: the least a fuser file system can do, as a benchmark peer
//! for the mount. Files and directories live in one map behind one lock; no
//! persistence, no invalidation, no limits, no history. Same fuser version,
//! thread count, mount options and init settings as memfs' mount, with
//! classic FUSE caching (1 s TTLs, a flush at every close, no cached
//! listings, the kernel's read-ahead): what memfs' mount was before it let
//! the kernel keep more (`src/fuse/tuning.rs`), so that `scripts/bench.sh`
//! can tell what classic FUSE costs from what memfs adds or saves.
//!
//!   cargo run --release --example floorfs -- MOUNTPOINT
//!
//! Runs until SIGTERM or SIGINT (or an unmount), then unmounts.

#[path = "support/serve.rs"]
mod serve;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, SessionACL, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;

/// Classic FUSE's TTL; memfs' largest write and worker threads.
const TTL: Duration = Duration::from_secs(1);
const MAX_WRITE: u32 = 1 << 20;
const THREADS: usize = 4;

enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<String, u64>),
    Symlink(String),
}

struct Node {
    attr: FileAttr,
    kind: Kind,
    parent: u64,
}

struct Floor {
    nodes: Mutex<(HashMap<u64, Node>, u64)>,
}

fn new_attr(ino: u64, kind: FileType, perm: u16, req: &Request) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: req.uid(),
        gid: req.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn name_of(name: &OsStr) -> Result<String, Errno> {
    name.to_str().map(str::to_string).ok_or(Errno::EINVAL)
}

impl Floor {
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        kind: Kind,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let name = name_of(name)?;
        let mut guard = self.nodes.lock();
        let (nodes, next) = &mut *guard;
        let ino = *next;
        let Some(Node {
            kind: Kind::Dir(entries),
            ..
        }) = nodes.get_mut(&parent.0)
        else {
            return Err(Errno::ENOTDIR);
        };
        if entries.contains_key(&name) {
            return Err(Errno::EEXIST);
        }
        entries.insert(name, ino);
        *next += 1;
        let file_type = match kind {
            Kind::File(_) => FileType::RegularFile,
            Kind::Dir(_) => FileType::Directory,
            Kind::Symlink(_) => FileType::Symlink,
        };
        let attr = new_attr(ino, file_type, (mode & 0o7777) as u16, req);
        nodes.insert(
            ino,
            Node {
                attr,
                kind,
                parent: parent.0,
            },
        );
        Ok(attr)
    }

    fn remove(&self, parent: INodeNo, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let name = name_of(name)?;
        let mut guard = self.nodes.lock();
        let nodes = &mut guard.0;
        let Some(Node {
            kind: Kind::Dir(entries),
            ..
        }) = nodes.get(&parent.0)
        else {
            return Err(Errno::ENOTDIR);
        };
        let ino = *entries.get(&name).ok_or(Errno::ENOENT)?;
        match (&nodes[&ino].kind, dir) {
            (Kind::Dir(e), true) if !e.is_empty() => return Err(Errno::ENOTEMPTY),
            (Kind::Dir(_), false) => return Err(Errno::EISDIR),
            (Kind::File(_) | Kind::Symlink(_), true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        if let Some(Node {
            kind: Kind::Dir(entries),
            ..
        }) = nodes.get_mut(&parent.0)
        {
            entries.remove(&name);
        }
        nodes.remove(&ino);
        Ok(())
    }

    fn listing(&self, ino: INodeNo) -> Result<Vec<(u64, String, FileAttr)>, Errno> {
        let guard = self.nodes.lock();
        let nodes = &guard.0;
        let node = nodes.get(&ino.0).ok_or(Errno::ENOENT)?;
        let Kind::Dir(entries) = &node.kind else {
            return Err(Errno::ENOTDIR);
        };
        let mut out = vec![
            (ino.0, ".".to_string(), node.attr),
            (node.parent, "..".to_string(), nodes[&node.parent].attr),
        ];
        out.extend(
            entries
                .iter()
                .map(|(name, child)| (*child, name.clone(), nodes[child].attr)),
        );
        Ok(out)
    }
}

fn entry(made: Result<FileAttr, Errno>, reply: ReplyEntry) {
    match made {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn empty(done: Result<(), Errno>, reply: ReplyEmpty) {
    match done {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_readahead(MAX_WRITE);
        let _ = config
            .add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let guard = self.nodes.lock();
        let found = match guard.0.get(&parent.0).map(|n| &n.kind) {
            Some(Kind::Dir(entries)) => name
                .to_str()
                .and_then(|n| entries.get(n))
                .map(|ino| guard.0[ino].attr),
            _ => None,
        };
        match found {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.nodes.lock().0.get(&ino.0) {
            Some(node) => reply.attr(&TTL, &node.attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
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
        let mut guard = self.nodes.lock();
        let Some(node) = guard.0.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(mode) = mode {
            node.attr.perm = (mode & 0o7777) as u16;
        }
        node.attr.uid = uid.unwrap_or(node.attr.uid);
        node.attr.gid = gid.unwrap_or(node.attr.gid);
        if let (Some(size), Kind::File(data)) = (size, &mut node.kind) {
            data.resize(size as usize, 0);
            node.attr.size = size;
            node.attr.blocks = size.div_ceil(512);
            node.attr.mtime = SystemTime::now();
        }
        if let Some(t) = atime {
            node.attr.atime = time(t);
        }
        if let Some(t) = mtime {
            node.attr.mtime = time(t);
        }
        node.attr.ctime = SystemTime::now();
        reply.attr(&TTL, &node.attr);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.nodes.lock().0.get(&ino.0).map(|n| &n.kind) {
            Some(Kind::Symlink(target)) => reply.data(target.as_bytes()),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        entry(
            self.make(req, parent, name, Kind::File(Vec::new()), mode),
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
        entry(
            self.make(req, parent, name, Kind::Dir(BTreeMap::new()), mode),
            reply,
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.remove(parent, name, false), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.remove(parent, name, true), reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.to_string_lossy().into_owned();
        entry(
            self.make(req, parent, link_name, Kind::Symlink(target), 0o777),
            reply,
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (Ok(name), Ok(newname)) = (name_of(name), name_of(newname)) else {
            return reply.error(Errno::EINVAL);
        };
        let mut guard = self.nodes.lock();
        let nodes = &mut guard.0;
        let moved = match nodes.get_mut(&parent.0).map(|n| &mut n.kind) {
            Some(Kind::Dir(entries)) => entries.remove(&name),
            _ => None,
        };
        let Some(moved) = moved else {
            return reply.error(Errno::ENOENT);
        };
        let replaced = match nodes.get_mut(&newparent.0).map(|n| &mut n.kind) {
            Some(Kind::Dir(entries)) => entries.insert(newname, moved),
            _ => return reply.error(Errno::ENOTDIR),
        };
        if let Some(old) = replaced {
            nodes.remove(&old);
        }
        if let Some(node) = nodes.get_mut(&moved) {
            node.parent = newparent.0;
        }
        reply.ok();
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.nodes.lock().0.get(&ino.0).map(|n| &n.kind) {
            Some(Kind::File(data)) => {
                let start = (offset as usize).min(data.len());
                let end = (start + size as usize).min(data.len());
                reply.data(&data[start..end]);
            }
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut guard = self.nodes.lock();
        let Some(node) = guard.0.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let Kind::File(bytes) = &mut node.kind else {
            return reply.error(Errno::EISDIR);
        };
        let end = offset as usize + data.len();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].copy_from_slice(data);
        node.attr.size = bytes.len() as u64;
        node.attr.blocks = node.attr.size.div_ceil(512);
        node.attr.mtime = SystemTime::now();
        reply.written(data.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.listing(ino) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        for (i, (child, name, attr)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*child), i as u64 + 1, attr.kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let entries = match self.listing(ino) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        for (i, (child, name, attr)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo(*child),
                i as u64 + 1,
                name,
                &TTL,
                attr,
                Generation(0),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 32, 1 << 32, 1 << 32, 1 << 32, 1 << 32, 4096, 255, 4096);
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
        match self.make(req, parent, name, Kind::File(Vec::new()), mode) {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }
}

fn main() {
    let Some(mountpoint) = std::env::args_os().nth(1) else {
        eprintln!("usage: floorfs MOUNTPOINT");
        std::process::exit(2);
    };
    let mut root = new_attr_root();
    root.perm = 0o755;
    let mut nodes = HashMap::new();
    nodes.insert(
        1,
        Node {
            attr: root,
            kind: Kind::Dir(BTreeMap::new()),
            parent: 1,
        },
    );
    let floor = Floor {
        nodes: Mutex::new((nodes, 2)),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("floorfs".into()),
        MountOption::Subtype("floorfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::RW,
    ];
    config.acl = SessionACL::Owner;
    config.n_threads = Some(THREADS);
    config.clone_fd = true;
    serve::until_signalled(floor, Path::new(&mountpoint), &config, "floorfs");
}

fn new_attr_root() -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(1),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 2,
        // SAFETY: getuid(2) and getgid(2) cannot fail and touch no memory.
        uid: unsafe { libc::getuid() },
        // SAFETY: as above.
        gid: unsafe { libc::getgid() },
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}
