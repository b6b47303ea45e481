//! What the mount lets the kernel keep and skip: how long it trusts names
//! and attributes, which round trips an open asks it to leave out, and how
//! far it reads ahead. Every cache named here is dropped by `invalidate.rs`
//! when a change the kernel did not make itself touches it.
//!
//! `MEMFS_FUSE_CLASSIC` (a comma-separated list of `ttl`, `noflush`,
//! `readahead`, or `all`) turns single features back to the classic FUSE
//! behaviour, and `MEMFS_FUSE_TRY=cachedir` turns on one that is off by
//! default, for `scripts/bench_mount_effects.py`, which measures what each
//! one is worth. Nothing else should set them.

use std::path::Path;
use std::time::Duration;

use fuser::FopenFlags;

/// How long the kernel may trust names (present or absent), attributes
/// and symlinks: minutes, because every change this mount's kernel did not
/// make itself (the tool, another mount, another host's version, a
/// recovery, an expiry, a revert) drops what it made stale (see
/// `invalidate.rs`). This only bounds how long a missed invalidation could
/// last; the kernel's own changes update its caches.
pub const TTL: Duration = Duration::from_secs(300);

/// The classic TTL, for measuring.
const CLASSIC_TTL: Duration = Duration::from_secs(1);

/// How far the kernel reads ahead of a sequential reader: one request of
/// the largest size the connection takes (`max_pages`, 256 pages = 1 MiB),
/// not the 128 KiB a FUSE mount starts with.
const READ_AHEAD_KB: u32 = 1024;

#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    pub ttl: Duration,
    /// How every file is opened.
    pub file: FopenFlags,
    /// How every directory is opened.
    pub dir: FopenFlags,
    /// Read-ahead to set on the mount's backing device, if any.
    pub read_ahead_kb: Option<u32>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            ttl: TTL,
            // Cached pages are kept across opens (any change the kernel did
            // not make drops them first), and `close(2)` sends no flush:
            // memfs has nothing to do at a flush that the release after it
            // does not do (the file goes to the flusher then), and its flush
            // never fails, so it would be a round trip for nothing.
            file: FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH,
            // Listings are read from memfs each time, not kept by the kernel
            // (FOPEN_CACHE_DIR): measured (docs/BENCHMARKS.md §9), a kept
            // listing makes a listing read again 2x faster, but `ls -l` of
            // files just written 7x slower: a listing from the kernel's
            // cache is never a READDIRPLUS, so every attribute the kernel
            // dropped after its own writes costs a GETATTR each. With
            // `MEMFS_FUSE_TRY=cachedir` it is on (its offsets name their
            // listing, `listings.rs`, so it is correct either way).
            dir: FopenFlags::empty(),
            read_ahead_kb: Some(READ_AHEAD_KB),
        }
    }
}

impl Tuning {
    /// The default, less what `MEMFS_FUSE_CLASSIC` turns off.
    pub fn from_env() -> Tuning {
        let mut t = Tuning::default();
        let classic = std::env::var("MEMFS_FUSE_CLASSIC").unwrap_or_default();
        for what in classic.split(',').map(str::trim) {
            let all = what == "all";
            if all || what == "ttl" {
                t.ttl = CLASSIC_TTL;
            }
            if all || what == "noflush" {
                t.file.remove(FopenFlags::FOPEN_NOFLUSH);
            }
            if all || what == "readahead" {
                t.read_ahead_kb = None;
            }
        }
        let tried = std::env::var("MEMFS_FUSE_TRY").unwrap_or_default();
        if tried.split(',').any(|w| w.trim() == "cachedir") {
            t.dir = FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR;
        }
        t
    }

    /// Sets the read-ahead of the mount at `at` (its backing device's
    /// `read_ahead_kb`, which only root may write: others keep the 128 KiB
    /// a FUSE mount starts with, and are told so at debug level).
    pub fn apply_read_ahead(&self, at: &Path) {
        let Some(kb) = self.read_ahead_kb else {
            return;
        };
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(at) else {
            return;
        };
        let dev = meta.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
        if let Err(e) = std::fs::write(&knob, kb.to_string()) {
            tracing::debug!("the mount keeps the kernel's read-ahead ({knob}: {e})");
        }
    }
}
