//! What FUSE passthrough would give memfs' mount, and the kernel rule that
//! keeps memfs from using it (docs/BENCHMARKS.md §9, "Passthrough").
//!
//! One file, `data`, of SIZE MiB held in a memfd. In `classic` mode every
//! open is classic FUSE (reads and writes come to this process, as in
//! memfs). In `passthrough` mode a read-only open is answered with
//! `FOPEN_PASSTHROUGH` on the memfd (the kernel reads it without asking),
//! and a writable one classically, the way memfs would have to answer a
//! person's writes to keep seeing them. `scripts/bench_passthrough.py`
//! measures both and tries the mix.
//!
//! usage: passthrough_probe MOUNTPOINT SIZE_MIB classic|passthrough
#[path = "support/serve.rs"]
mod serve;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    BackingId, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use parking_lot::Mutex;

const TTL: Duration = Duration::from_secs(300);
const FILE: INodeNo = INodeNo(2);

struct Probe {
    memfd: OwnedFd,
    size: Mutex<u64>,
    passthrough: bool,
    /// The backing file the kernel knows, shared by every passthrough open
    /// of the file (the kernel refuses a second one for the same inode).
    backing: Mutex<Option<Weak<BackingId>>>,
    /// Each passthrough open's hold on it, by handle.
    held: Mutex<HashMap<u64, Arc<BackingId>>>,
    next_fh: Mutex<u64>,
}

impl Probe {
    fn attr(&self, ino: INodeNo) -> FileAttr {
        let dir = ino == INodeNo::ROOT;
        FileAttr {
            ino,
            size: if dir { 0 } else { *self.size.lock() },
            blocks: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind: if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if dir { 0o755 } else { 0o644 },
            nlink: if dir { 2 } else { 1 },
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }
}

impl Filesystem for Probe {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        if self.passthrough {
            config
                .add_capabilities(InitFlags::FUSE_PASSTHROUGH)
                .map_err(|_| std::io::Error::other("the kernel offers no passthrough"))?;
            config
                .set_max_stack_depth(1)
                .map_err(|_| std::io::Error::other("no stacking depth for passthrough"))?;
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && name == "data" {
            reply.entry(&TTL, &self.attr(FILE), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino {
            INodeNo::ROOT | FILE => reply.attr(&TTL, &self.attr(ino)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        let read_only = flags.0 & libc::O_ACCMODE == libc::O_RDONLY;
        if !(self.passthrough && read_only) {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
        }
        let mut backing = self.backing.lock();
        let id = match backing.as_ref().and_then(Weak::upgrade) {
            Some(id) => id,
            None => match reply.open_backing(&self.memfd) {
                Ok(id) => {
                    let id = Arc::new(id);
                    *backing = Some(Arc::downgrade(&id));
                    id
                }
                Err(e) => {
                    eprintln!("open_backing: {e}");
                    return reply.error(Errno::EIO);
                }
            },
        };
        let fh = {
            let mut next = self.next_fh.lock();
            *next += 1;
            *next
        };
        self.held.lock().insert(fh, id.clone());
        reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut buf = vec![0u8; size as usize];
        match rustix::io::pread(&self.memfd, &mut buf, offset) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match rustix::io::pwrite(&self.memfd, data, offset) {
            Ok(n) => {
                let mut size = self.size.lock();
                *size = (*size).max(offset + n as u64);
                reply.written(n as u32)
            }
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.held.lock().remove(&fh.0);
        reply.ok();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mnt, mib, mode] = args.as_slice() else {
        eprintln!("usage: passthrough_probe MOUNTPOINT SIZE_MIB classic|passthrough");
        std::process::exit(2);
    };
    let mib: u64 = mib.parse().expect("a size in MiB");
    let memfd =
        rustix::fs::memfd_create("probe", rustix::fs::MemfdFlags::CLOEXEC).expect("a memfd");
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    for i in 0..mib {
        let mut at = 0;
        while at < chunk.len() {
            at += rustix::io::pwrite(&memfd, &chunk[at..], i * chunk.len() as u64 + at as u64)
                .expect("the memfd takes the bytes");
        }
    }
    let probe = Probe {
        memfd,
        size: Mutex::new(mib << 20),
        passthrough: mode == "passthrough",
        backing: Mutex::new(None),
        held: Mutex::new(HashMap::new()),
        next_fh: Mutex::new(0),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("probe".into()),
        MountOption::Subtype("probe".into()),
    ];
    config.n_threads = Some(2);
    serve::until_signalled(
        probe,
        std::path::Path::new(mnt),
        &config,
        "passthrough_probe",
    );
}
