//! Reading newline-terminated lines with a bound on their length, so a huge
//! or endless line costs a clear error, not the process's memory.

use std::io::{self, BufRead};

pub enum Next<'a> {
    Line(&'a [u8]),
    /// A line over the limit; it was skipped up to its newline.
    TooLong,
    End,
}

pub struct LineReader<R> {
    input: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(input: R, max: usize) -> Self {
        LineReader {
            input,
            max,
            buf: Vec::new(),
        }
    }

    pub fn next_line(&mut self) -> io::Result<Next<'_>> {
        self.buf.clear();
        let mut too_long = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                // End of input: a last line without newline still counts.
                return Ok(match (too_long, self.buf.is_empty()) {
                    (true, _) => Next::TooLong,
                    (false, true) => Next::End,
                    (false, false) => Next::Line(&self.buf),
                });
            }
            let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], i + 1),
                None => (available, available.len()),
            };
            let found_newline = done > chunk.len();
            if !too_long {
                if self.buf.len() + chunk.len() > self.max {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            self.input.consume(done);
            if found_newline {
                return Ok(if too_long {
                    Next::TooLong
                } else {
                    Next::Line(&self.buf)
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &str, max: usize) -> Vec<String> {
        let mut reader = LineReader::new(io::BufReader::with_capacity(4, input.as_bytes()), max);
        let mut out = Vec::new();
        loop {
            match reader.next_line().unwrap() {
                Next::Line(l) => out.push(String::from_utf8(l.to_vec()).unwrap()),
                Next::TooLong => out.push("<too long>".into()),
                Next::End => return out,
            }
        }
    }

    #[test]
    fn splits_and_bounds_lines() {
        assert_eq!(lines("a\nbb\n\nc", 10), ["a", "bb", "", "c"]);
        assert_eq!(
            lines("short\nthis one is long\nok\n", 8),
            ["short", "<too long>", "ok"]
        );
        assert_eq!(lines("endless-without-newline", 8), ["<too long>"]);
        assert_eq!(lines("12345678\n", 8), ["12345678"]);
    }
}
