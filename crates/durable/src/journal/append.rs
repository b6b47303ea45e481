//! The appender: one frame at a time onto the open segment, through the
//! storage interface, and made durable (one `fdatasync`; a new segment's
//! name by an `fsync` of the directory); a frame whose flush is deferred (a
//! shared store's) flushed before any other is written. A frame the disk
//! refuses is cut away or sealed off, never read back. The failpoints of
//! the journal's own steps (`journal::write`, `journal::sync`) are here.

use std::io;
use std::sync::atomic::Ordering;

use super::deferred::Deferred;
use super::frame;
use super::record::{Header, SegmentInfo};
use super::segment;
use super::state::State;
use super::writer::{Core, Failure};
use crate::digest::Sha;
use crate::error::DiskError;
use crate::persist::storage::{Dir, File, Open};

/// A disk step a test can make fail (the `fail` crate, with the
/// `failpoints` feature): `fail::cfg(NAME, "return(ENOSPC)")`.
macro_rules! step {
    ($name:literal) => {
        fail::fail_point!($name, |errno: Option<String>| Err(injected(errno)))
    };
}

impl Core {
    /// Appends one frame and makes it durable; returns where its body is.
    /// `batch` 0: a frame of no batch (a checkpoint alone).
    pub(super) fn append(
        &self,
        st: &mut State,
        header: Header,
        body: &[&[u8]],
        batch: u64,
    ) -> Result<u64, Failure> {
        self.append_deferring(st, header, body, batch, None)
    }

    /// [`Core::append`]; with `defer`, a shared store's committed batch
    /// (see [`Deferred`]), the frame is flushed later, unless it begins a
    /// segment (whose directory entry is flushed at once). In strict
    /// order: a new segment if needed, the header, the write, the flush or
    /// its deferral, the segment's state; each failure leaves its own seal.
    pub(super) fn append_deferring(
        &self,
        st: &mut State,
        mut header: Header,
        body: &[&[u8]],
        batch: u64,
        defer: Option<Deferred>,
    ) -> Result<u64, Failure> {
        self.flush_deferred(st);
        let fresh = self.begin_frame(st, &mut header);
        let head = serde_json::to_vec(&header).expect("a header serializes");
        let bytes = frame::encode(&head, body);
        let body_at = st.log.active.end + frame::HEAD as u64 + head.len() as u64;
        let (number, end) = (st.log.active.number, st.log.active.end);
        let deferred = defer.filter(|_| !fresh).map(|d| Deferred {
            segment: number,
            at: end,
            ..d
        });
        let synced = self.write_frame_bytes(st, &bytes, fresh, deferred.is_some())?;
        if deferred.is_some() {
            st.log.deferred = deferred;
            self.owed.flush.store(true, Ordering::Release);
        }
        if let Err(e) = synced {
            // It may or may not be on disk: never read it back. A segment
            // it began is begun again by the next frame (same number, same
            // seal of the one before); any other is sealed before it.
            if !fresh {
                st.log.active.seal_at = Some(end);
            }
            let e = DiskError::new("flushing to stable storage", e);
            return Err(Failure::Unconfirmed(e));
        }
        appended(st, &header, number, bytes.len() as u64, batch);
        let rows = header.changes.into_iter().flat_map(|c| c.rows).collect();
        let rewrites = self.upkeep.rewrites.load(Ordering::SeqCst);
        st.log
            .recent
            .push(rewrites, number, end, end + bytes.len() as u64, rows);
        Ok(body_at)
    }

    /// Where the next frame goes: a new segment when this one is full or
    /// must be sealed (the header then says which it is), and the
    /// checkpoint with the stuck paths when they moved. Whether the frame
    /// begins its segment.
    fn begin_frame(&self, st: &mut State, header: &mut Header) -> bool {
        if st.log.active.seal_at.is_some()
            || (!st.log.active.fresh && st.log.active.end >= self.opts.segment_bytes)
        {
            st.log.active = st.log.active.next();
        }
        let fresh = st.log.active.fresh;
        if fresh {
            header.segment = Some(SegmentInfo {
                number: st.log.active.number,
                origin: st.origin.clone(),
                covers: None,
                prev: st.log.active.prev,
            });
        }
        // (Read together: the stuck paths go with the batch they are for.)
        let stuck = self.handoff.stuck.lock();
        let known = self.handoff.checkpointed.load(Ordering::Acquire);
        if known > st.log.checkpoint_written || *stuck != st.log.stuck_written {
            header.checkpoint = Some(known.max(st.log.checkpoint_written));
            header.stuck = stuck.clone();
        }
        fresh
    }

    /// Writes a frame's `bytes` at the end of the active segment and, unless
    /// `deferred`, flushes it (a segment it begins, with its directory).
    /// A write that fails leaves no byte of it (or seals the segment); the
    /// flush's outcome is the inner result.
    fn write_frame_bytes(
        &self,
        st: &mut State,
        bytes: &[u8],
        fresh: bool,
        deferred: bool,
    ) -> Result<io::Result<()>, Failure> {
        let end = st.log.active.end;
        let name = segment::name(st.log.active.number);
        let how = match fresh {
            true => Open::Truncate,
            false => Open::Write,
        };
        let refused = |e: io::Error| Failure::Refused(DiskError::new("writing the journal", e));
        let fd = self
            .dir
            .open_file(std::ffi::OsStr::new(&name), how)
            .map_err(refused)?;
        let len = bytes.len() as u64;
        st.log.active.reserved = reserve(&fd, end + len, st.log.active.reserved, len);
        if let Err(e) = write_all_at(&fd, bytes, end) {
            // Not a byte of it may stay for a later frame to follow.
            if !fresh && fd.set_len(end).is_err() {
                st.log.active.seal_at = Some(end);
            }
            return Err(refused(e));
        }
        Ok(match (deferred, fresh) {
            (true, _) => Ok(()),
            (false, true) => sync_data(&fd).and_then(|()| sync_dir(&self.dir)),
            (false, false) => sync_data(&fd),
        })
    }

    /// The commit pool's flush of a frame written with its flush deferred:
    /// the flush itself outside the journal's state lock, so that the
    /// request that wrote the frame, reading the journal's state for its
    /// answer (the id index, a barrier), does not wait out the disk; then,
    /// under the lock, the frame is settled if nothing was written after
    /// it meanwhile (the flush covered it), else flushed as
    /// [`Core::flush_deferred`] does.
    pub(super) fn flush_deferred_outside(&self) {
        let seen = {
            let st = self.state.lock();
            match &st.log.deferred {
                Some(d) => (d.segment, d.at, st.log.active.number, st.log.active.end),
                None => return,
            }
        };
        let (segment, at, _, _) = seen;
        fail::fail_point!("journal::lose-deferred", |_| lose_and_abort(
            &self.dir, segment, at
        ));
        let flushed = self.sync_segment(segment);
        let mut st = self.state.lock();
        let same = st.log.deferred.as_ref().map(|d| (d.segment, d.at)) == Some((segment, at))
            && (st.log.active.number, st.log.active.end) == (seen.2, seen.3);
        match (flushed, same) {
            (Ok(()), true) => {
                self.owed.flush.store(false, Ordering::Release);
                // (Under the lock, as flush_deferred does: batches reach
                // the checkpointer in their order.)
                if let Some(d) = st.log.deferred.take() {
                    for owed in d.for_checkpointer {
                        self.to_checkpointer(owed);
                    }
                }
            }
            _ => self.flush_deferred(&mut st),
        }
    }

    /// Flushes segment `number`'s file to stable storage.
    fn sync_segment(&self, number: u64) -> io::Result<()> {
        self.dir
            .open_file(std::ffi::OsStr::new(&segment::name(number)), Open::Write)
            .and_then(|fd| sync_data(&fd))
    }

    /// Flushes the frame written with its flush deferred, if there is one,
    /// and hands its batch to the checkpointer. A flush that fails leaves
    /// the frame never to be read back (the next frame seals the segment
    /// where it began) and owes its records and contents to the next frame:
    /// its changes stand, since the database holds them.
    pub(super) fn flush_deferred(&self, st: &mut State) {
        self.owed.flush.store(false, Ordering::Release);
        let Some(d) = st.log.deferred.take() else {
            return;
        };
        // A power cut after the answer: the frame never reaches the disk.
        fail::fail_point!("journal::lose-deferred", |_| lose_and_abort(
            &self.dir, d.segment, d.at
        ));
        let flushed = self.sync_segment(d.segment);
        if let Err(e) = flushed {
            if st.log.active.number == d.segment {
                st.log.active.seal_at = Some(d.at);
            }
            for c in &d.placed {
                if let Some(sha) = Sha::parse(&c.sha256) {
                    if st
                        .contents
                        .get(&sha)
                        .is_some_and(|l| l.segment == d.segment && l.at >= d.at)
                    {
                        st.contents.remove(&sha);
                    }
                }
            }
            self.owe_frame(d.header, d.body, d.placed);
            self.owe_batches(d.for_checkpointer, None);
            if !self.refusals.refusing.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "the disk refuses this host's copy of the journal ({}); the shared store holds every change, and the copy is written again once the disk takes writes",
                    DiskError::new("flushing to stable storage", e)
                );
            }
            return;
        }
        for owed in d.for_checkpointer {
            self.to_checkpointer(owed);
        }
    }
}

/// A frame of `len` bytes in segment `number`, written and flushed (or
/// its flush deferred): the segment's state, and what the frame said of
/// the checkpoint.
fn appended(st: &mut State, header: &Header, number: u64, len: u64, batch: u64) {
    st.log.active.end += len;
    st.log.active.reserved = st.log.active.reserved.saturating_sub(len);
    st.log.active.fresh = false;
    st.log.active.prev = None;
    if let Some(c) = header.checkpoint {
        st.log.checkpoint_written = c;
        st.log.stuck_written = header.stuck.clone();
    }
    let seg = st.log.segments.entry(number).or_default();
    seg.bytes = st.log.active.end;
    if batch > 0 {
        seg.last_batch = batch;
        if seg.first_time.is_none() {
            seg.first_time = header.time.clone();
        }
    }
}

/// What `journal::lose-deferred` does (tests only): drops the unflushed
/// frame from the segment, as a power cut would, and stops the process.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(super) fn lose_and_abort(dir: &Dir, segment: u64, at: u64) -> ! {
    let name = segment::name(segment);
    if let Ok(fd) = dir.open_file(std::ffi::OsStr::new(&name), Open::Write) {
        let _ = fd.set_len(at);
    }
    std::process::abort()
}

#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(super) fn injected(errno: Option<String>) -> io::Error {
    let code = match errno.as_deref() {
        Some("ENOSPC") => libc::ENOSPC,
        Some("EROFS") => libc::EROFS,
        _ => libc::EIO,
    };
    io::Error::from_raw_os_error(code)
}

/// Writes all of a frame's `bytes` at `at` (with the journal's failpoint).
pub(super) fn write_all_at(fd: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    step!("journal::write");
    crate::persist::storage::write_all_at(fd.as_ref(), bytes, at)
}

pub(super) fn sync_data(fd: &File) -> io::Result<()> {
    step!("journal::sync");
    fd.sync_data()
}

pub(super) fn sync_dir(dir: &Dir) -> io::Result<()> {
    step!("journal::sync");
    dir.sync()
}

/// Space kept allocated past a segment's end, so that on a full disk a
/// frame without contents (a delete, which makes room) can still go in.
pub(super) const RESERVE: u64 = 256 << 10;

/// Keeps space allocated past the end (best effort: a disk too full for it
/// just has less reserve). Returns how much is reserved past `end`.
pub(super) fn reserve(fd: &File, end: u64, had: u64, used: u64) -> u64 {
    let left = had.saturating_sub(used);
    if left >= RESERVE / 2 {
        return left;
    }
    for len in [RESERVE, RESERVE / 4, RESERVE / 16] {
        if fd.reserve(end, len).is_ok() {
            return len;
        }
    }
    left
}

/// Free bytes on the journal's file system (for ordinary users).
pub(super) fn free_bytes(dir: &Dir) -> Option<u64> {
    dir.free_bytes()
}
