//! The history on disk, under `DIR/.memfs/history/`:
//!
//! ```text
//! log          one JSON row per line, appended; rewritten whole (to a new
//!              file renamed over it) only to drop or redact rows
//! objects/SHA  each kept content once, named by its sha256
//! ```
//! Every file is opened relative to the checked directory, never through a
//! symlink. Nothing here syncs on the write path: the persister's barrier
//! makes a batch's rows and contents durable with its changes.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use crate::persist::private_subdir;

pub struct Disk {
    dir: OwnedFd,
    objects: OwnedFd,
    log: File,
}

const LOG: &str = "log";
const LOG_NEW: &str = "log.new";

fn open_at(dir: &OwnedFd, name: &str, flags: OFlags) -> io::Result<File> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(rfs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(0o600),
    )?))
}

impl Disk {
    /// Opens (making it if missing) the history in the state dir; returns
    /// it with the log's text.
    pub fn open(state: &OwnedFd) -> io::Result<(Disk, Vec<u8>)> {
        let dir = private_subdir(state, "history", true)?;
        let objects = private_subdir(&dir, "objects", true)?;
        let _ = rfs::unlinkat(&dir, LOG_NEW, AtFlags::empty());
        let mut log = open_at(&dir, LOG, OFlags::RDWR | OFlags::CREATE | OFlags::APPEND)?;
        let mut text = Vec::new();
        log.read_to_end(&mut text)?;
        // A torn last line (a crash mid-append) is cut off, so the next
        // append starts on a line of its own.
        if let Some(end) = text.iter().rposition(|&b| b == b'\n').map(|i| i + 1) {
            if end < text.len() {
                text.truncate(end);
                log.set_len(end as u64)?;
            }
        } else if !text.is_empty() {
            text.clear();
            log.set_len(0)?;
        }
        Ok((Disk { dir, objects, log }, text))
    }

    /// Appends whole lines (one `write`, so a crash keeps a prefix of them).
    pub fn append(&mut self, lines: &[u8]) -> io::Result<()> {
        fail::fail_point!("history::append", |e: Option<String>| Err(injected(e)));
        self.log.write_all(lines)
    }

    /// Keeps `data` as the content `sha` (once: a content already kept is not written again).
    pub fn put(&self, sha: &str, data: &[u8]) -> io::Result<()> {
        if rfs::statat(&self.objects, sha, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            return Ok(());
        }
        fail::fail_point!("history::put", |e: Option<String>| Err(injected(e)));
        let tmp = format!(".{sha}.tmp");
        let written = open_at(
            &self.objects,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
        )
        .and_then(|mut f| f.write_all(data))
        .and_then(|()| Ok(rfs::renameat(&self.objects, &tmp, &self.objects, sha)?));
        if written.is_err() {
            let _ = rfs::unlinkat(&self.objects, tmp.as_str(), AtFlags::empty());
        }
        written
    }

    pub fn get(&self, sha: &str) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        open_at(&self.objects, sha, OFlags::RDONLY)?.read_to_end(&mut out)?;
        Ok(out)
    }

    pub fn remove(&self, sha: &str) -> io::Result<()> {
        match rfs::unlinkat(&self.objects, sha, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the whole log with `text`, durably (dropping or redacting rows).
    pub fn rewrite(&mut self, text: &[u8]) -> io::Result<()> {
        let mut new = open_at(
            &self.dir,
            LOG_NEW,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
        )?;
        new.write_all(text)?;
        new.sync_data()?;
        rfs::renameat(&self.dir, LOG_NEW, &self.dir, LOG)?;
        rfs::fsync(&self.dir)?;
        self.log = open_at(&self.dir, LOG, OFlags::RDWR | OFlags::APPEND)?;
        Ok(())
    }

    /// Makes removals of contents durable (redaction must not come back).
    pub fn sync_objects(&self) -> io::Result<()> {
        Ok(rfs::fsync(&self.objects)?)
    }
}

#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
fn injected(errno: Option<String>) -> io::Error {
    let code = match errno.as_deref() {
        Some("ENOSPC") => libc::ENOSPC,
        _ => libc::EIO,
    };
    io::Error::from_raw_os_error(code)
}
