//! Segment files: `DIR/.memfs/journal/NNNNNNNNNNNNNNNN.jrn`, frames one
//! after another, numbered in the order they were begun.
//!
//! Reading checks every frame. A frame that the end of the last segment cut
//! short, or that is bad with nothing good after it, is a torn tail: it was
//! never acknowledged, and is dropped. A bad frame anywhere else was
//! durable once and is damaged: reading stops with an error naming the
//! segment and the offset (the journal never skips acknowledged data).

use std::ffi::OsStr;
use std::io;

use crate::persist::storage::{Dir, File, Open};

use super::frame::{self, Checker, Head, HEAD};
use super::record::Header;

pub const SUFFIX: &str = ".jrn";

pub fn name(number: u64) -> String {
    format!("{number:016}{SUFFIX}")
}

/// The number of a segment file's name; `None` for any other name.
pub fn number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    (digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// The segment numbers in `dir`, in order.
pub fn list(dir: &Dir) -> io::Result<Vec<u64>> {
    let mut out: Vec<u64> = crate::persist::list_names(dir.as_ref())?
        .into_iter()
        .filter_map(|n| number(&n))
        .collect();
    out.sort_unstable();
    Ok(out)
}

pub fn open_read(dir: &Dir, number: u64) -> io::Result<File> {
    dir.open_file(OsStr::new(&name(number)), Open::Read)
}

/// One good frame of a segment.
#[derive(Debug)]
pub struct Frame {
    /// Where its body starts in its segment.
    pub body_at: u64,
    pub body_len: u64,
    pub header: Header,
}

impl Frame {
    pub fn end(&self) -> u64 {
        self.body_at + self.body_len
    }
}

/// How a segment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// Where its last good frame ends.
    pub end: u64,
    /// The file is longer than that (a torn tail, or bytes past a seal).
    pub longer: bool,
}

fn read_exact_at(fd: &File, at: u64, buf: &mut [u8]) -> io::Result<()> {
    crate::persist::storage::read_exact_at(fd.as_ref(), buf, at)
}

/// Reads `len` bytes at `at` of segment `fd`.
pub fn read_at(fd: &File, at: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len as usize];
    read_exact_at(fd, at, &mut out)?;
    Ok(out)
}

/// What reading one frame at an offset found.
enum Read {
    Good(Box<Frame>),
    /// Not a good frame (cut short, or bad).
    Bad {
        cut_short: bool,
        why: &'static str,
    },
}

fn read_frame(fd: &File, at: u64, size: u64) -> io::Result<Read> {
    if at + HEAD as u64 > size {
        return Ok(Read::Bad {
            cut_short: true,
            why: "the file ends inside a frame",
        });
    }
    let mut raw = [0u8; HEAD];
    read_exact_at(fd, at, &mut raw)?;
    let Some(head) = frame::head(&raw) else {
        return Ok(Read::Bad {
            cut_short: false,
            why: "no frame starts here",
        });
    };
    if at + head.total() > size {
        return Ok(Read::Bad {
            cut_short: true,
            why: "the file ends inside a frame",
        });
    }
    let header_bytes = read_at(fd, at + HEAD as u64, head.header_len as u64)?;
    let mut check = Checker::new(&raw, &head);
    check.feed(&header_bytes);
    let body_at = at + HEAD as u64 + head.header_len as u64;
    feed_body(fd, body_at, &head, &mut check)?;
    if !check.ok() {
        return Ok(Read::Bad {
            cut_short: false,
            why: "its checksum does not match",
        });
    }
    let Ok(header) = serde_json::from_slice::<Header>(&header_bytes) else {
        return Ok(Read::Bad {
            cut_short: false,
            why: "its header is not one this memfs can read",
        });
    };
    Ok(Read::Good(Box::new(Frame {
        body_at,
        body_len: head.body_len,
        header,
    })))
}

fn feed_body(fd: &File, mut at: u64, head: &Head, check: &mut Checker) -> io::Result<()> {
    let mut left = head.body_len;
    let mut buf = vec![0u8; (1 << 20).min(left as usize)];
    while left > 0 {
        let n = (buf.len() as u64).min(left) as usize;
        read_exact_at(fd, at, &mut buf[..n])?;
        check.feed(&buf[..n]);
        at += n as u64;
        left -= n as u64;
    }
    Ok(())
}

/// Whether a good frame starts anywhere in `fd` after `from`.
fn good_frame_after(fd: &File, from: u64, size: u64) -> io::Result<bool> {
    let mut at = from + 1;
    let mut window = vec![0u8; 1 << 16];
    while at + HEAD as u64 <= size {
        let n = (window.len() as u64).min(size - at) as usize;
        read_exact_at(fd, at, &mut window[..n])?;
        let mut i = 0;
        while let Some(j) = memchr::memmem::find(&window[i..n], frame::MAGIC) {
            if let Read::Good(_) = read_frame(fd, at + (i + j) as u64, size)? {
                return Ok(true);
            }
            i += j + 1;
        }
        // Overlap by the magic's length, so one split across windows is seen.
        at += n.saturating_sub(frame::MAGIC.len() - 1).max(1) as u64;
    }
    Ok(false)
}

/// Reads segment `number` frame by frame, up to `limit` (a seal the next
/// segment put on it) when given. `last`: the segment appends go to, where a
/// torn tail is dropped rather than refused.
pub fn read(
    dir: &Dir,
    number: u64,
    limit: Option<u64>,
    last: bool,
    on_frame: &mut dyn FnMut(Frame) -> io::Result<()>,
) -> io::Result<Ending> {
    read_from(dir, number, 0, limit, last, on_frame)
}

/// [`read`], from offset `from` (where a frame begins: the end of one read before).
pub fn read_from(
    dir: &Dir,
    number: u64,
    from: u64,
    limit: Option<u64>,
    last: bool,
    on_frame: &mut dyn FnMut(Frame) -> io::Result<()>,
) -> io::Result<Ending> {
    let fd = open_read(dir, number)?;
    let size = fd.size()?;
    let stop = limit.map_or(size, |l| l.min(size));
    let mut at = from;
    while at < stop {
        match read_frame(&fd, at, stop)? {
            Read::Good(frame) => {
                at = frame.end();
                on_frame(*frame)?;
            }
            Read::Bad { cut_short, why } => {
                let torn =
                    limit.is_none() && last && (cut_short || !good_frame_after(&fd, at, size)?);
                if torn {
                    return Ok(Ending {
                        end: at,
                        longer: true,
                    });
                }
                return Err(frame::damaged(format!(
                    "the journal is damaged: .memfs/journal/{} at offset {at}: {why}. memfs does not start on a damaged journal, so that no acknowledged change is skipped; nothing was changed. Restore .memfs/journal from a backup, or move that segment out of .memfs/journal to start from the plain files as they are",
                    name(number)
                )));
            }
        }
    }
    Ok(Ending {
        end: at,
        longer: size > at,
    })
}

/// The first frame's header of segment `number` (what it says of itself),
/// if it has a good one.
pub fn first_header(dir: &Dir, number: u64) -> io::Result<Option<Header>> {
    let fd = open_read(dir, number)?;
    let size = fd.size()?;
    Ok(match read_frame(&fd, 0, size)? {
        Read::Good(frame) => Some(frame.header),
        Read::Bad { .. } => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(name(3), "0000000000000003.jrn");
        assert_eq!(number("0000000000000003.jrn"), Some(3));
        assert_eq!(number("0000000000000003.jrn.tmp"), None);
        assert_eq!(number("3.jrn"), None);
        assert_eq!(number("000000000000000x.jrn"), None);
    }
}
