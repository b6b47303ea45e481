//! Text shapes of the tool's results: sizes, line splitting, numbered lines.

/// Most lines a file may have for `view`.
pub const MAX_LINES: usize = 999_999;
/// Most characters of numbered text one result carries.
pub const VIEW_CHAR_CAP: usize = 16_000;

/// A size as `du -h --apparent-size` prints it: 1024-based, rounded up, one
/// decimal below 10 (`0`, `512`, `1.0K`, `1.5K`, `11K`, `1.2M`).
pub fn human_size(bytes: u64) -> String {
    let mut out = String::new();
    write_human_size(&mut out, bytes);
    out
}

/// [`human_size`], written into `out`.
pub fn write_human_size(out: &mut String, bytes: u64) {
    use std::fmt::Write;
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if bytes < 1024 {
        let _ = write!(out, "{bytes}");
        return;
    }
    let bytes = bytes as u128;
    let mut scale: u128 = 1024;
    for unit in UNITS {
        let tenths = bytes.saturating_mul(10).div_ceil(scale);
        if tenths < 100 {
            let _ = write!(out, "{}.{}{unit}", tenths / 10, tenths % 10);
            return;
        }
        let whole = bytes.div_ceil(scale);
        if whole < 1024 {
            let _ = write!(out, "{whole}{unit}");
            return;
        }
        scale *= 1024;
    }
    unreachable!("u64 sizes end below 1024 EiB")
}

/// Splits text into lines on `\n` (a `\r` stays with its line); a final
/// newline does not make an extra empty line, and empty text has no lines.
pub fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// `lines` numbered from `first` (1-based) as `{:>6}\t{line}`, joined by
/// newlines and capped at [`VIEW_CHAR_CAP`] characters: whole lines that
/// fit, then a note of what was shown and how to see the rest.
pub fn numbered(lines: &[&str], first: usize, total_lines: usize) -> String {
    let bytes: usize = lines.iter().map(|l| l.len() + 8).sum();
    let mut out = String::with_capacity(bytes.min(4 * VIEW_CHAR_CAP + 256));
    let mut used = 0;
    for (i, line) in lines.iter().enumerate() {
        let number = first + i;
        let gutter = LineNumber::new(number);
        // Characters, not bytes: counted only when the line is not ASCII.
        let chars = if line.is_ascii() {
            line.len()
        } else {
            line.chars().count()
        };
        let cost = gutter.as_str().len() + 1 + chars + usize::from(i > 0);
        if used + cost > VIEW_CHAR_CAP {
            return truncated(
                out,
                format!("{}\t{line}", gutter.as_str()),
                first,
                number,
                total_lines,
            );
        }
        if i > 0 {
            out.push('\n');
        }
        out.push_str(gutter.as_str());
        out.push('\t');
        out.push_str(line);
        used += cost;
    }
    out
}

/// A line number right-aligned in 6 columns (`{:>6}`), without the
/// formatting machinery: views number every line, so this is their hot path.
struct LineNumber {
    buf: [u8; 20],
    start: usize,
}

impl LineNumber {
    fn new(mut n: usize) -> Self {
        let mut buf = [b' '; 20];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        LineNumber {
            buf,
            start: i.min(buf.len() - 6),
        }
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits and spaces were written.
        std::str::from_utf8(&self.buf[self.start..]).unwrap_or_default()
    }
}

/// Ends a capped view. `stop` is the first line that did not fit.
fn truncated(mut out: String, row: String, first: usize, stop: usize, total: usize) -> String {
    if stop == first {
        // Not even one whole line fits: show the start of it, and say so.
        out = row.chars().take(VIEW_CHAR_CAP).collect();
        out.push_str(&format!(
            "\n[line {stop} is longer than {VIEW_CHAR_CAP} characters and was cut; the file has {total} lines. \
             Use view_range [{next}, -1] for the lines after it.]",
            next = stop + 1
        ));
        return out;
    }
    out.push_str(&format!(
        "\n[showing lines {first}-{last} of {total}: a view is capped at {VIEW_CHAR_CAP} characters. \
         Use view_range [{stop}, -1] to see the rest.]",
        last = stop - 1
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_du() {
        let table = [
            (0, "0"),
            (1, "1"),
            (512, "512"),
            (1023, "1023"),
            (1024, "1.0K"),
            (1025, "1.1K"),
            (1536, "1.5K"),
            (10 * 1024 - 1, "10K"),
            (10 * 1024, "10K"),
            (11 * 1024, "11K"),
            (11 * 1024 + 1, "12K"),
            ((1 << 20) - 1, "1.0M"),
            (1 << 20, "1.0M"),
            (1_258_291, "1.2M"),
            (1 << 30, "1.0G"),
            (u64::MAX, "16E"),
        ];
        for (bytes, want) in table {
            assert_eq!(human_size(bytes), want, "{bytes} bytes");
        }
    }

    #[test]
    fn lines_split_on_lf_only() {
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("a"), ["a"]);
        assert_eq!(split_lines("a\n"), ["a"]);
        assert_eq!(split_lines("a\n\n"), ["a", ""]);
        assert_eq!(split_lines("a\r\nb\r\n"), ["a\r", "b\r"]);
        assert_eq!(split_lines("\n"), [""]);
    }

    #[test]
    fn numbers_are_six_wide() {
        assert_eq!(numbered(&["x", "y"], 9, 10), "     9\tx\n    10\ty");
        assert_eq!(numbered(&["z"], 999_999, 999_999), "999999\tz");
        for n in [0, 1, 9, 10, 99_999, 100_000, 999_999, 1_000_000, usize::MAX] {
            assert_eq!(LineNumber::new(n).as_str(), format!("{n:>6}"));
        }
    }

    #[test]
    fn caps_at_whole_lines() {
        let line = "a".repeat(93); // 100 characters with the number and tab
        let lines: Vec<&str> = vec![line.as_str(); 300];
        let out = numbered(&lines, 1, 300);
        let (body, note) = out.rsplit_once('\n').unwrap();
        assert!(body.chars().count() <= VIEW_CHAR_CAP);
        // 158 rows of 100 characters and 157 newlines fit (15,957); a 159th does not.
        assert_eq!(body.lines().count(), 158);
        assert_eq!(
            note,
            "[showing lines 1-158 of 300: a view is capped at 16000 characters. Use view_range [159, -1] to see the rest.]"
        );
    }

    #[test]
    fn cuts_a_single_huge_line() {
        let line = "b".repeat(20_000);
        let out = numbered(&[line.as_str(), "next"], 1, 2);
        let (body, note) = out.rsplit_once('\n').unwrap();
        assert_eq!(body.chars().count(), VIEW_CHAR_CAP);
        assert!(
            note.contains("line 1 is longer than 16000 characters"),
            "{note}"
        );
        assert!(note.contains("view_range [2, -1]"), "{note}");
    }
}
