//! The history on disk, under `DIR/.memfs/history/`:
//!
//! ```text
//! log          one JSON row per line, appended; rewritten whole (to a new
//!              file renamed over it) only to drop or redact rows
//! objects/SHA  each kept content once, named by its sha256
//! ```
//! Every file is opened relative to the checked directory, never through a
//! symlink, and only while it is written: no file stays open for writing
//! (a read-only remount of the disk must not be refused as busy). Nothing
//! here syncs on the write path: the persister's barrier makes a batch's
//! rows and contents durable with its changes.
//!
//! The log keeps a reserve of allocated space past its end, so that on a
//! full disk the rows of a delete, which makes room, can still be written.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use crate::persist::private_subdir;

pub struct Disk {
    dir: OwnedFd,
    objects: OwnedFd,
}

/// Space kept allocated past the log's end (some hundreds of rows).
const RESERVE: u64 = 64 << 10;

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
        reserve(&log);
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
        drop(log);
        Ok((Disk { dir, objects }, text))
    }

    /// Appends whole lines (one `write`, so a crash keeps a prefix of them).
    /// Returns the log, for the batch's barrier to make it durable.
    pub fn append(&mut self, lines: &[u8]) -> io::Result<File> {
        fail::fail_point!("history::append", |e: Option<String>| Err(injected(e)));
        let mut log = open_at(&self.dir, LOG, OFlags::WRONLY | OFlags::APPEND)?;
        log.write_all(lines)?;
        reserve(&log);
        Ok(log)
    }

    /// The contents' directory, for a barrier after new contents were kept.
    pub fn objects_dir(&self) -> io::Result<OwnedFd> {
        self.objects.try_clone()
    }

    /// Keeps `data` as the content `sha` (once: a content already kept whole
    /// is not written again; one a crash cut short is written over).
    /// Returns the new file (none when the content was kept already), for
    /// the batch's barrier to make durable.
    pub fn put(&self, sha: &str, data: &[u8]) -> io::Result<Option<File>> {
        if let Ok(st) = rfs::statat(&self.objects, sha, AtFlags::SYMLINK_NOFOLLOW) {
            if st.st_size as u64 == data.len() as u64 {
                return Ok(None);
            }
        }
        fail::fail_point!("history::put", |e: Option<String>| Err(injected(e)));
        let written = open_at(
            &self.objects,
            sha,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
        )
        .and_then(|mut f| {
            f.write_all(data)?;
            Ok(Some(f))
        });
        if written.is_err() {
            // Not left half written: a later put would take it as kept.
            let _ = rfs::unlinkat(&self.objects, sha, AtFlags::empty());
        }
        written
    }

    /// The content `sha`, checked against its hash.
    pub fn get(&self, sha: &str) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        open_at(&self.objects, sha, OFlags::RDONLY)?.read_to_end(&mut out)?;
        if super::sha256_hex(&out) != sha {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the kept content is damaged (its sha256 does not match)",
            ));
        }
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
        reserve(&new);
        rfs::renameat(&self.dir, LOG_NEW, &self.dir, LOG)?;
        rfs::fsync(&self.dir)?;
        Ok(())
    }

    /// Makes removals of contents durable (redaction must not come back).
    pub fn sync_objects(&self) -> io::Result<()> {
        Ok(rfs::fsync(&self.objects)?)
    }
}

/// Tops up the space allocated past the log's end (best effort: a disk
/// too full for it just has less reserve).
fn reserve(log: &File) {
    let Ok(st) = rfs::fstat(log) else {
        return;
    };
    let size = st.st_size.max(0) as u64;
    let allocated = st.st_blocks.max(0) as u64 * 512;
    if allocated < size + RESERVE / 2 {
        // Less when the disk has not that much left.
        for len in [RESERVE, RESERVE / 4, RESERVE / 16] {
            if rfs::fallocate(log, rfs::FallocateFlags::KEEP_SIZE, size, len).is_ok() {
                break;
            }
        }
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
