//! Whether anything changed in one directory since the last look, as the
//! kernel tells it (inotify), so that a file read again "whenever it
//! changed" (the token file) costs one `poll` a request when it did not,
//! rather than a `stat` of its path (a walk of every directory above it).
//!
//! Strict as the `stat` was: the kernel queues an event before the write,
//! rename or unlink that caused it returns, and the events are read before
//! the file is looked at, so a change whose call returned before a request
//! began is seen by that request. Where the kernel cannot tell (no inotify,
//! the directory gone or moved, its watch dropped), every look says
//! "changed" and the caller looks at the file itself, as before.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;

use memfs_engine::outside::readable;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The events that may mean a file of the directory changed.
fn flags() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
}

/// The events after which the watch tells nothing more.
fn ends_it() -> ReadFlags {
    ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::UNMOUNT
}

/// One directory's watch (none: the kernel could not watch it).
pub struct DirWatch {
    fd: Option<OwnedFd>,
    buf: Vec<MaybeUninit<u8>>,
}

impl DirWatch {
    /// Watches `dir`; a watch that cannot be made says "changed" each time.
    pub fn on(dir: &Path) -> DirWatch {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .and_then(|fd| inotify::add_watch(&fd, dir, flags()).map(|_| fd))
            .ok();
        DirWatch {
            fd,
            buf: vec![MaybeUninit::uninit(); 4096],
        }
    }

    /// Whether the kernel watches the directory.
    #[cfg(test)]
    pub fn watching(&self) -> bool {
        self.fd.is_some()
    }

    /// Whether the directory may have changed since the last call: the
    /// events are read (and so forgotten) first, then the caller looks.
    pub fn changed(&mut self) -> bool {
        let Some(fd) = &self.fd else {
            return true;
        };
        if !readable(fd) {
            return false;
        }
        if !matches!(drain(fd, &mut self.buf), Ok(false)) {
            // (The watch ended, or its events could not be read: from now
            // on the caller looks each time.)
            self.fd = None;
        }
        true
    }
}

/// Reads every event the descriptor holds: whether one said the watch
/// ended.
fn drain(fd: &OwnedFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
    let mut reader = inotify::Reader::new(fd, buf);
    let mut ended = false;
    loop {
        match reader.next() {
            Ok(ev) => ended |= ev.events().intersects(ends_it()),
            Err(rustix::io::Errno::AGAIN) => return Ok(ended),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_a_rename_and_an_unlink_are_each_told_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DirWatch::on(dir.path());
        assert!(w.watching());
        assert!(!w.changed());
        std::fs::write(dir.path().join("a"), b"1").unwrap();
        assert!(w.changed());
        assert!(!w.changed());
        std::fs::write(dir.path().join("b.tmp"), b"2").unwrap();
        assert!(w.changed());
        std::fs::rename(dir.path().join("b.tmp"), dir.path().join("a")).unwrap();
        assert!(w.changed());
        assert!(!w.changed());
        std::fs::remove_file(dir.path().join("a")).unwrap();
        assert!(w.changed());
        assert!(!w.changed());
    }

    #[test]
    fn a_directory_gone_or_not_there_says_changed_every_time() {
        let top = tempfile::tempdir().unwrap();
        let mut missing = DirWatch::on(&top.path().join("none"));
        assert!(!missing.watching() && missing.changed() && missing.changed());
        let dir = top.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let mut w = DirWatch::on(&dir);
        std::fs::rename(&dir, top.path().join("e")).unwrap();
        assert!(w.changed());
        assert!(!w.watching() && w.changed() && w.changed());
    }
}
