//! The unit the journal appends and checks: a frame.
//!
//! ```text
//! offset  size  what
//! 0       4     magic "MJF1"
//! 4       4     header length H (u32, little-endian)
//! 8       8     body length B (u64, little-endian)
//! 16      4     CRC-32C of bytes 4..16, the header and the body
//! 20      4     reserved, zero (covered by nothing; read as zero)
//! 24      H     header: one JSON object (see `record::Header`)
//! 24+H    B     body: the contents the header's `contents` place in it
//! ```
//!
//! One frame is written by one `pwrite` and made durable by one
//! `fdatasync` before the next frame is written, so after a crash at most
//! the last frame of the last segment can be incomplete (torn). Any bad
//! frame that a good frame follows was durable once and is damaged: the
//! journal refuses to start rather than skip it.

use std::io;

pub const MAGIC: &[u8; 4] = b"MJF1";
pub const HEAD: usize = 24;
/// The most a header may hold (a directory of 100,000 files deleted at
/// once is some tens of MiB of rows).
pub const MAX_HEADER: usize = 256 << 20;

/// Builds one frame from its header and body.
pub fn encode(header: &[u8], body: &[&[u8]]) -> Vec<u8> {
    let body_len: usize = body.iter().map(|b| b.len()).sum();
    let mut out = Vec::with_capacity(HEAD + header.len() + body_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body_len as u64).to_le_bytes());
    let mut crc = crc32c::crc32c(&out[4..16]);
    crc = crc32c::crc32c_append(crc, header);
    for part in body {
        crc = crc32c::crc32c_append(crc, part);
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(header);
    for part in body {
        out.extend_from_slice(part);
    }
    out
}

/// What the fixed part of a frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub header_len: usize,
    pub body_len: u64,
    pub crc: u32,
}

impl Head {
    pub fn total(&self) -> u64 {
        HEAD as u64 + self.header_len as u64 + self.body_len
    }
}

/// Reads the fixed part; `None` when it is not a frame's.
pub fn head(bytes: &[u8; HEAD]) -> Option<Head> {
    if &bytes[..4] != MAGIC {
        return None;
    }
    let header_len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let body_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let crc = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
    if header_len > MAX_HEADER {
        return None;
    }
    Some(Head {
        header_len,
        body_len,
        crc,
    })
}

/// Checks a whole frame whose fixed part is `raw_head`.
pub struct Checker {
    crc: u32,
    want: u32,
}

impl Checker {
    pub fn new(raw_head: &[u8; HEAD], head: &Head) -> Checker {
        Checker {
            crc: crc32c::crc32c(&raw_head[4..16]),
            want: head.crc,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
    }

    pub fn ok(&self) -> bool {
        self.crc == self.want
    }
}

/// Why reading a journal stopped.
pub fn damaged(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_checks_and_a_flipped_byte_does_not() {
        let frame = encode(b"{\"batch\":1}", &[b"hello", b" world"]);
        let raw: [u8; HEAD] = frame[..HEAD].try_into().unwrap();
        let h = head(&raw).unwrap();
        assert_eq!(h.header_len, 11);
        assert_eq!(h.body_len, 11);
        assert_eq!(h.total() as usize, frame.len());
        let mut check = Checker::new(&raw, &h);
        check.feed(&frame[HEAD..]);
        assert!(check.ok());
        for i in (4..20).chain(HEAD..frame.len()) {
            let mut bad = frame.clone();
            bad[i] ^= 0x40;
            let raw: [u8; HEAD] = bad[..HEAD].try_into().unwrap();
            let ok = head(&raw).is_some_and(|h| {
                let mut c = Checker::new(&raw, &h);
                c.feed(&bad[HEAD..]);
                c.ok() && h.total() as usize == bad.len()
            });
            assert!(!ok, "byte {i} flipped went unnoticed");
        }
    }
}
