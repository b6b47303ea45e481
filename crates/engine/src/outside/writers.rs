//! Who wrote a plain file, where the kernel can tell: one fanotify group
//! for the whole process (it needs `CAP_SYS_ADMIN`: as root) marks every
//! directory the watchers watch, and each write below one (`FAN_MODIFY`,
//! `FAN_CLOSE_WRITE`) names the writing process and hands over the file
//! written, by which its inode is known. The taker credits a file's content
//! to the process that wrote its inode last: a temporary file renamed into
//! place keeps its inode, so an editor's or Claude Code's atomic save is
//! theirs too.
//!
//! Not known, and the change is the files door's alone: without the
//! privilege; for what is no write (a removal, a rename, a new directory
//! or link); for a writer in another pid namespace (the kernel reports no
//! pid); for a writer gone before its name was read (a listener thread
//! reads each event as it comes, while the writer that just closed its
//! file normally still runs, and a zombie still has its name).

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

use crate::lock::{rank, Mutex};
use crate::store::{Process, Writer};

/// Files whose last writer is remembered, at most (the first noted go first).
const REMEMBERED: usize = 65_536;

/// A file on a real disk: its device and inode.
type FileId = (u64, u64);

struct Recent {
    by_file: HashMap<FileId, Option<Writer>>,
    order: VecDeque<FileId>,
    buf: Vec<u8>,
}

impl Recent {
    fn note(&mut self, file: FileId, writer: Option<Writer>) {
        if self.by_file.insert(file, writer).is_none() {
            self.order.push_back(file);
        }
        while self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.by_file.remove(&old);
            }
        }
    }

    /// The kernel lost events: no file's writer is known any more.
    fn forget_all(&mut self) {
        self.by_file.clear();
        self.order.clear();
    }
}

struct Group {
    fd: OwnedFd,
    /// What the events told, read under this lock (a lookup reads what
    /// the kernel holds first: the writer of a write that returned before
    /// the lookup is known).
    recent: Mutex<Recent>,
    me: u32,
    /// The kernel refused a mark (its limit): said once.
    refused: AtomicBool,
}

static GROUP: OnceLock<Option<Group>> = OnceLock::new();

fn group() -> Option<&'static Group> {
    GROUP.get_or_init(Group::start).as_ref()
}

impl Group {
    fn start() -> Option<Group> {
        let flags = libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK;
        // (Non-blocking: the file handed over may be a FIFO.)
        let file_flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE | libc::O_NONBLOCK;
        // SAFETY: fanotify_init takes two flag words and returns a new
        // descriptor or -1; no memory is passed.
        let fd = unsafe { libc::fanotify_init(flags, file_flags as libc::c_uint) };
        if fd < 0 {
            tracing::debug!(
                "the plain files' writers are not known: fanotify: {}",
                std::io::Error::last_os_error()
            );
            return None;
        }
        // SAFETY: `fd` was just returned by the kernel, is open, and is
        // owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Group {
            fd,
            recent: Mutex::new(
                rank::WRITERS,
                Recent {
                    by_file: HashMap::new(),
                    order: VecDeque::new(),
                    buf: vec![0; 64 * 1024],
                },
            ),
            me: std::process::id(),
            refused: AtomicBool::new(false),
        })
    }

    /// Reads every event the kernel holds, without blocking.
    fn catch_up(&self) {
        let mut recent = self.recent.lock();
        let mut buf = std::mem::take(&mut recent.buf);
        loop {
            match rustix::io::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => break,
                Ok(n) => self.events(&buf[..n], &mut recent),
                Err(rustix::io::Errno::INTR) => continue,
                // (Nothing more now, or an error: what was read stands.)
                Err(_) => break,
            }
        }
        recent.buf = buf;
    }

    fn events(&self, mut bytes: &[u8], recent: &mut Recent) {
        let size = std::mem::size_of::<libc::fanotify_event_metadata>();
        let mut names: HashMap<u32, Option<Process>> = HashMap::new();
        while bytes.len() >= size {
            // SAFETY: at least `size` bytes remain; `read_unaligned` copies
            // them out whatever the buffer's alignment, and the struct is
            // integers only, so every bit pattern is a valid value.
            let meta: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            let file = (meta.fd >= 0).then(|| {
                // SAFETY: the kernel opened this descriptor for this process
                // with the event; it is closed here and nowhere else.
                unsafe { OwnedFd::from_raw_fd(meta.fd) }
            });
            if meta.vers != libc::FANOTIFY_METADATA_VERSION || (meta.event_len as usize) < size {
                break;
            }
            if meta.mask & libc::FAN_Q_OVERFLOW != 0 {
                recent.forget_all();
            } else if let Some(file) = &file {
                self.event(file, meta.pid, &mut names, recent);
            }
            bytes = &bytes[(meta.event_len as usize).min(bytes.len())..];
        }
    }

    fn event(
        &self,
        file: &OwnedFd,
        pid: i32,
        names: &mut HashMap<u32, Option<Process>>,
        recent: &mut Recent,
    ) {
        let Ok(st) = rustix::fs::fstat(file) else {
            return;
        };
        let pid = u32::try_from(pid).unwrap_or(0);
        if pid == self.me {
            return; // memfs's own files (the checkpointer's) are new inodes
        }
        let writer = match pid {
            0 => None, // in another pid namespace
            _ => names
                .entry(pid)
                .or_insert_with(|| Process::of_pid(pid))
                .map(|process| Writer { pid, process }),
        };
        recent.note((st.st_dev, st.st_ino), writer);
    }
}

/// Starts the thread that reads each event as it comes (once).
fn listen(group: &'static Group) {
    static LISTENING: Once = Once::new();
    LISTENING.call_once(|| {
        let started = std::thread::Builder::new()
            .name("memfs-writers".into())
            .spawn(move || loop {
                use rustix::event::{poll, PollFd, PollFlags};
                let mut fds = [PollFd::new(&group.fd, PollFlags::IN)];
                if poll(&mut fds, None).is_err() {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                group.catch_up();
            });
        if let Err(e) = started {
            tracing::debug!("the plain files' writers are read only when looked up: {e}");
        }
    });
}

/// Asks the kernel to name the writers of the files directly in `dir`.
pub fn mark(dir: &Path) {
    let Some(group) = group() else {
        return;
    };
    listen(group);
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    let how = libc::FAN_MARK_ADD | libc::FAN_MARK_ONLYDIR | libc::FAN_MARK_DONT_FOLLOW;
    let what = libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE | libc::FAN_EVENT_ON_CHILD;
    // SAFETY: `path` is a NUL-terminated string that lives across the
    // call; the descriptor is the group's own, open for its life.
    let marked = unsafe {
        libc::fanotify_mark(
            group.fd.as_raw_fd(),
            how,
            what,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if marked != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSPC) && !group.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the kernel allows no more fanotify marks (fs.fanotify.max_user_marks): some plain files' writers are not named"
            );
        }
    }
}

/// The process that last wrote the file `id`, if the kernel named it.
pub fn of(id: Option<(u64, u64)>) -> Option<Writer> {
    let id = id?;
    let group = GROUP.get()?.as_ref()?;
    group.catch_up();
    group.recent.lock().by_file.get(&id).copied().flatten()
}
