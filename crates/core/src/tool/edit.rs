//! The text of `str_replace` and `insert`: pure functions from old text to new.

use super::format::{numbered, split_lines};

/// Lines of context around a replacement in the success snippet.
const SNIPPET_CONTEXT: usize = 4;

/// Line numbers an ambiguous-match error lists at most; more are summarized.
pub const MAX_LISTED_MATCHES: usize = 10;

/// Why an edit was refused, before the path is put into the message.
#[derive(Debug, PartialEq, Eq)]
pub enum EditError {
    NotFound,
    /// The lines of the first occurrences (at most [`MAX_LISTED_MATCHES`]),
    /// and whether there are more.
    Multiple {
        lines: Vec<usize>,
        more: bool,
    },
    BadInsertLine {
        n_lines: usize,
    },
}

/// Replaces the one occurrence of `old` in `text` by `new`. Occurrences are
/// counted overlapping, so `aa` is not unique in `aaa`. Returns the new text
/// and the numbered snippet around the change.
///
/// Linear in the text: one substring search that stops after the few
/// occurrences an error can list, and line numbers counted incrementally.
pub fn replace(text: &str, old: &str, new: &str) -> Result<(String, String), EditError> {
    let (positions, more) = occurrences(text, old, MAX_LISTED_MATCHES + 1);
    let &[at] = positions.as_slice() else {
        if positions.is_empty() {
            return Err(EditError::NotFound);
        }
        let more = more || positions.len() > MAX_LISTED_MATCHES;
        let mut lines = lines_of(text, &positions);
        lines.truncate(MAX_LISTED_MATCHES);
        return Err(EditError::Multiple { lines, more });
    };
    let mut out = String::with_capacity(text.len() - old.len() + new.len());
    out.push_str(&text[..at]);
    out.push_str(new);
    out.push_str(&text[at + old.len()..]);
    let first = line_of(&out, at);
    let last =
        (first + count_newlines(&out.as_bytes()[at..at + new.len().saturating_sub(1)])).max(first);
    let snippet = snippet(&out, first, last);
    Ok((out, snippet))
}

/// Byte offsets of the first `limit` (overlapping) occurrences of a
/// non-empty `needle`, and whether the search stopped early.
fn occurrences(text: &str, needle: &str, limit: usize) -> (Vec<usize>, bool) {
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&bytes[from..]) {
        if found.len() == limit {
            return (found, true);
        }
        let at = from + i;
        found.push(at);
        // Step one character, not one byte, to stay on a char boundary.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    (found, false)
}

fn count_newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    count_newlines(&text.as_bytes()[..at.min(text.len())]) + 1
}

/// 1-based line numbers of ascending byte offsets, in one pass over the text.
fn lines_of(text: &str, positions: &[usize]) -> Vec<usize> {
    let mut line = 1;
    let mut counted = 0;
    positions
        .iter()
        .map(|&at| {
            line += count_newlines(&text.as_bytes()[counted..at]);
            counted = at;
            line
        })
        .collect()
}

fn snippet(text: &str, first: usize, last: usize) -> String {
    let lines = split_lines(text);
    let from = first.saturating_sub(SNIPPET_CONTEXT).max(1);
    let to = (last + SNIPPET_CONTEXT).min(lines.len());
    let shown = lines.get(from - 1..to).unwrap_or_default();
    numbered(shown, from, lines.len())
}

/// Inserts `insert` after line `after` (0 = the top). One trailing newline of
/// `insert` is its line end, not an extra line; the file's own final newline
/// (or its absence) is kept.
pub fn insert(text: &str, after: i64, insert: &str) -> Result<String, EditError> {
    let mut lines = split_lines(text);
    let n_lines = lines.len();
    if after < 0 || after as u64 > n_lines as u64 {
        return Err(EditError::BadInsertLine { n_lines });
    }
    let body = insert.strip_suffix('\n').unwrap_or(insert);
    lines.insert(after as usize, body);
    let mut out = lines.join("\n");
    let final_newline = if text.is_empty() {
        insert.ends_with('\n')
    } else {
        // The file's final newline, or its absence, is kept; but a text
        // that ends in an empty line, put after the last line of a file
        // without one, can only be written with a final newline (else its
        // empty line would vanish and the insert add nothing).
        text.ends_with('\n')
            || (after as usize == n_lines && (body.is_empty() || body.ends_with('\n')))
    };
    if final_newline {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_exactly_once_and_keeps_bytes() {
        let (out, snip) = replace("a\r\n\tb = 1\r\nc\r\n", "b = 1", "b = 2").unwrap();
        assert_eq!(out, "a\r\n\tb = 2\r\nc\r\n");
        assert_eq!(snip, "     1\ta\r\n     2\t\tb = 2\r\n     3\tc\r");
        let (out, _) = replace("one\ntwo\nthree\n", "two\nthr", "2\n3").unwrap();
        assert_eq!(out, "one\n2\n3ee\n");
        let (out, _) = replace("keep [x]* literal", "[x]*", "").unwrap();
        assert_eq!(out, "keep  literal");
    }

    #[test]
    fn reports_missing_and_multiple() {
        assert_eq!(replace("abc", "x", "y"), Err(EditError::NotFound));
        let multiple = |lines: Vec<usize>, more| Err(EditError::Multiple { lines, more });
        assert_eq!(
            replace("x\ny\nx x\n", "x", "z"),
            multiple(vec![1, 3, 3], false)
        );
        // Overlapping occurrences are ambiguous too.
        assert_eq!(replace("aaa", "aa", "b"), multiple(vec![1, 1], false));
        assert_eq!(replace("ééé", "éé", "b"), multiple(vec![1, 1], false));
        // Past ten, the first ten are listed and the rest summarized.
        let many = "x\n".repeat(11);
        assert_eq!(replace(&many, "x", "y"), multiple((1..=10).collect(), true));
        assert_eq!(
            replace(&"x\n".repeat(10), "x", "y"),
            multiple((1..=10).collect(), false)
        );
    }

    #[test]
    fn snippet_spans_the_new_text_with_context() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let (_, snip) = replace(&text, "line 10\n", "ten\nTEN\n").unwrap();
        let numbers: Vec<usize> = snip
            .lines()
            .map(|l| l.split('\t').next().unwrap().trim().parse().unwrap())
            .collect();
        assert_eq!(numbers, (6..=15).collect::<Vec<_>>());
    }

    #[test]
    fn inserts_after_a_line() {
        assert_eq!(insert("a\nb\n", 0, "x\n").unwrap(), "x\na\nb\n");
        assert_eq!(insert("a\nb\n", 1, "x").unwrap(), "a\nx\nb\n");
        assert_eq!(insert("a\nb\n", 2, "x\n").unwrap(), "a\nb\nx\n");
        assert_eq!(insert("a\nb", 2, "x\n").unwrap(), "a\nb\nx");
        assert_eq!(insert("", 0, "x\n").unwrap(), "x\n");
        assert_eq!(insert("", 0, "x").unwrap(), "x");
        assert_eq!(insert("a\r\nb\r\n", 1, "x\r\n").unwrap(), "a\r\nx\r\nb\r\n");
        assert_eq!(insert("a\n", 1, "x\n\n").unwrap(), "a\nx\n\n");
        // An empty line after the last line of a file without a final
        // newline: the line is there, and so is the newline that ends it.
        assert_eq!(insert("a", 1, "").unwrap(), "a\n\n");
        assert_eq!(insert("a", 1, "\n").unwrap(), "a\n\n");
        assert_eq!(insert("a", 1, "x\n\n").unwrap(), "a\nx\n\n");
        assert_eq!(insert("a", 0, "").unwrap(), "\na");
        assert_eq!(insert("a", 1, "x").unwrap(), "a\nx");
        assert_eq!(
            insert("a\nb\n", 3, "x"),
            Err(EditError::BadInsertLine { n_lines: 2 })
        );
        assert_eq!(
            insert("a\nb\n", -1, "x"),
            Err(EditError::BadInsertLine { n_lines: 2 })
        );
    }
}
