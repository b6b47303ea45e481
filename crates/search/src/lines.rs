//! Where a query matches a file's live text: its lines, each cut to a
//! snippet with the matched words marked. Uses the index's analyzer, so a
//! line is marked where the index matched (a phrase across a line break is
//! found by the index and marked on no line).

use super::analyze::{self, Part};
use super::query::{Clause, Query};

/// The longest snippet, in characters (a longer line is cut around its
/// first match).
pub const SNIPPET_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Line {
    /// 1-based.
    pub line: usize,
    pub snippet: String,
    /// Byte ranges of the snippet that matched.
    pub highlights: Vec<[usize; 2]>,
}

/// Byte ranges in the text `parts` came from where `clause` matches.
fn occurrences(clause: &Clause, body: &[Part], idents: &[Part], out: &mut Vec<(usize, usize)>) {
    let want = clause.parts();
    if want.is_empty() {
        return;
    }
    let prefix = matches!(clause, Clause::Prefix(_));
    let k = want.len();
    if body.len() >= k {
        for i in 0..=body.len() - k {
            let hit = want.iter().enumerate().all(|(j, w)| {
                let got = &body[i + j].text;
                match prefix && j == k - 1 {
                    true => got.starts_with(w.as_str()),
                    false => got == w,
                }
            });
            if hit {
                out.push((body[i].from, body[i + k - 1].to));
            }
        }
    }
    if let Clause::Word {
        ident: Some(id), ..
    } = clause
    {
        out.extend(
            idents
                .iter()
                .filter(|p| &p.text == id)
                .map(|p| (p.from, p.to)),
        );
    }
}

fn matches_in(clause: &Clause, text: &str) -> bool {
    let (body, idents) = analyze::analyze(text);
    let mut out = Vec::new();
    occurrences(clause, &body, &idents, &mut out);
    !out.is_empty()
}

/// Whether `text` at `path` (relative) matches `query` as the index would:
/// every wanted term in the text or the path, no left-out one in either.
pub fn still_matches(query: &Query, path: &str, text: &str) -> bool {
    query
        .must
        .iter()
        .all(|c| matches_in(c, text) || matches_in(c, path))
        && !query
            .not
            .iter()
            .any(|c| matches_in(c, text) || matches_in(c, path))
}

/// The first `most` lines of `text` where a wanted term matches.
pub fn lines(query: &Query, text: &str, most: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let mut ranges = Vec::new();
    // A line can match only if it holds a clause's first part, in any case
    // (checked on the bytes, for ASCII parts, before the line is analyzed).
    let firsts: Option<Vec<&[u8]>> = query
        .must
        .iter()
        .map(|c| {
            c.parts()
                .first()
                .map(|p| p.as_bytes())
                .filter(|p| p.is_ascii())
        })
        .collect();
    for (n, line) in text.split('\n').enumerate() {
        if out.len() >= most {
            break;
        }
        // (Only on an ASCII line: lowercasing can make ASCII of others,
        // the Kelvin sign's `k`.)
        if let Some(firsts) = firsts.as_ref().filter(|_| line.is_ascii()) {
            let bytes = line.as_bytes();
            let holds = |p: &[u8]| bytes.windows(p.len()).any(|w| w.eq_ignore_ascii_case(p));
            if !firsts.iter().any(|p| holds(p)) {
                continue;
            }
        }
        let (body, idents) = analyze::analyze(line);
        if body.is_empty() {
            continue;
        }
        ranges.clear();
        for clause in &query.must {
            occurrences(clause, &body, &idents, &mut ranges);
        }
        if ranges.is_empty() {
            continue;
        }
        ranges.sort_unstable();
        ranges.dedup();
        out.push(cut(n + 1, line.trim_end_matches('\r'), &ranges));
    }
    out
}

/// The line as a snippet: whole when short, else a window of
/// `SNIPPET_CHARS` characters around its first match, `…` where cut.
fn cut(number: usize, line: &str, ranges: &[(usize, usize)]) -> Line {
    let chars = line.chars().count();
    let (from, to) = if chars <= SNIPPET_CHARS {
        (0, line.len())
    } else {
        let first = ranges[0].0.min(line.len());
        let before = line[..first].chars().count();
        let start_char = before.saturating_sub(SNIPPET_CHARS / 4);
        let start_char = start_char.min(chars - SNIPPET_CHARS);
        let byte = |c: usize| line.char_indices().nth(c).map_or(line.len(), |(i, _)| i);
        (byte(start_char), byte(start_char + SNIPPET_CHARS))
    };
    let lead = if from > 0 { "…" } else { "" };
    let tail = if to < line.len() { "…" } else { "" };
    let snippet = format!("{lead}{}{tail}", &line[from..to]);
    let highlights = ranges
        .iter()
        .filter(|&&(a, b)| a >= from && b <= to)
        .map(|&(a, b)| [a - from + lead.len(), b - from + lead.len()])
        .collect();
    Line {
        line: number,
        snippet,
        highlights,
    }
}

#[cfg(test)]
mod tests {
    use super::super::query::parse;
    use super::*;

    #[test]
    fn marks_words_identifiers_phrases_and_prefixes_on_their_lines() {
        let text = "first line\nwe call parse_http_reply here\r\nnothing\nthe HTTP reply is thread safe\nserialize it";
        let q = parse(r#"http_reply "thread safe" serial*"#).unwrap();
        let got = lines(&q, text, 3);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].line, 2);
        let marked = |l: &Line| -> Vec<String> {
            l.highlights
                .iter()
                .map(|[a, b]| l.snippet[*a..*b].to_string())
                .collect()
        };
        assert_eq!(marked(&got[0]), ["http_reply"]);
        assert_eq!(got[1].line, 4);
        assert_eq!(marked(&got[1]), ["HTTP reply", "thread safe"]);
        assert_eq!(marked(&got[2]), ["serialize"]);
        assert_eq!(lines(&q, text, 1).len(), 1);
    }

    #[test]
    fn a_long_line_is_cut_around_its_match() {
        let line = format!("{} needle {}", "é".repeat(400), "x ".repeat(300));
        let got = lines(&parse("needle").unwrap(), &line, 3);
        let l = &got[0];
        assert!(l.snippet.starts_with('…') && l.snippet.ends_with('…'));
        assert!(l.snippet.chars().count() <= SNIPPET_CHARS + 2);
        let [a, b] = l.highlights[0];
        assert_eq!(&l.snippet[a..b], "needle");
    }

    #[test]
    fn the_quick_look_at_a_line_never_hides_a_match() {
        // The Kelvin sign lowercases to an ASCII `k`; a camelCase word
        // holds its first part only in another case.
        let text = "\u{212A}ey one\nparseKey two\nnone here\n";
        let got = lines(&parse("key").unwrap(), text, 3);
        assert_eq!(got.iter().map(|l| l.line).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn still_matches_checks_text_and_path() {
        let q = parse("alpha -beta").unwrap();
        assert!(still_matches(&q, "notes/alpha.md", "nothing here"));
        assert!(still_matches(&q, "x.md", "Alpha!"));
        assert!(!still_matches(&q, "x.md", "alpha beta"));
        assert!(!still_matches(&q, "beta/x.md", "alpha"));
        assert!(!still_matches(&q, "x.md", "gamma"));
    }
}
