//! Reading newline-terminated lines with a bound on their length, so a huge
//! or endless line costs a clear error, not the process's memory.

use std::io::{self, BufRead};
use std::time::{Duration, Instant};

use super::activity::Activity;

pub enum Next<'a> {
    Line(&'a [u8]),
    /// A line over the limit; it was skipped up to its newline.
    TooLong,
    /// A line was started and not finished within the timeout.
    TimedOut(Duration),
    End,
}

pub struct LineReader<'a, R> {
    input: R,
    max: usize,
    /// How long a started line may take; the input's own read timeout (a
    /// socket's) sets how often the reader looks at the clock.
    timeout: Option<Duration>,
    activity: &'a dyn Activity,
    buf: Vec<u8>,
}

impl<'a, R: BufRead> LineReader<'a, R> {
    pub fn new(
        input: R,
        max: usize,
        timeout: Option<Duration>,
        activity: &'a dyn Activity,
    ) -> Self {
        LineReader {
            input,
            max,
            timeout,
            activity,
            buf: Vec::new(),
        }
    }

    /// Long because it is one read loop whose cases (interrupted, idle, end
    /// of input, newline, too long, slow trickle) share the buffer, the
    /// too-long flag and the line's start time.
    pub fn next_line(&mut self) -> io::Result<Next<'_>> {
        self.buf.clear();
        let mut too_long = false;
        let mut started: Option<Instant> = None;
        loop {
            let available = match self.input.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The input's read timeout: idle between lines is fine; a
                // started line must finish in time.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    match (started, self.timeout) {
                        (Some(at), Some(limit)) if at.elapsed() >= limit => {
                            return Ok(Next::TimedOut(limit))
                        }
                        _ => continue,
                    }
                }
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
            if started.is_none() {
                started = Some(Instant::now());
                self.activity.line_started();
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
            if let (Some(at), Some(limit)) = (started, self.timeout) {
                if at.elapsed() >= limit {
                    return Ok(Next::TimedOut(limit)); // a trickle is no excuse
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &str, max: usize) -> Vec<String> {
        let activity = crate::serve::activity::Unobserved;
        let mut reader = LineReader::new(
            io::BufReader::with_capacity(4, input.as_bytes()),
            max,
            None,
            &activity,
        );
        let mut out = Vec::new();
        loop {
            match reader.next_line().unwrap() {
                Next::Line(l) => out.push(String::from_utf8(l.to_vec()).unwrap()),
                Next::TooLong => out.push("<too long>".into()),
                Next::TimedOut(_) => unreachable!("no timeout was set"),
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
