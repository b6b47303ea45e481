//! The analyzer: words split the way code and notes name things. A run is letters and digits joined by `_ . - / :`
//! (`parse_http_reply`, `std::io`, `notes/a.md`); its parts are split again at
//! case and letter/digit boundaries (`parseHTTPReply` → parse, http, reply).
//! Parts go to the body with positions; a run of two parts or more also goes
//! whole, lowercased, to the identifiers. The index and the snippets use
//! the same analyzer, so a line is marked where the index matched.

/// The longest part or run kept (longer ones are hashes and base64).
pub const LONGEST: usize = 64;

/// Bumped whenever the analyzer's output changes: an index made by another
/// version is rebuilt.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub text: String,
    pub from: usize,
    pub to: usize,
    pub position: usize,
}

fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '.' | '-' | '/' | ':')
}

/// Byte ranges of the runs in `text`.
pub fn runs(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !c.is_alphanumeric() {
            continue;
        }
        let mut end = i + c.len_utf8();
        loop {
            match it.peek() {
                Some(&(j, d)) if d.is_alphanumeric() => {
                    end = j + d.len_utf8();
                    it.next();
                }
                Some(&(_, d)) if is_joiner(d) => {
                    // A joiner belongs to the run only when letters or
                    // digits follow it.
                    let rest = &text[end..];
                    let after = rest.trim_start_matches(is_joiner);
                    match after.chars().next() {
                        Some(e) if e.is_alphanumeric() && rest.len() - after.len() <= 2 => {
                            while it.peek().is_some_and(|&(_, d)| is_joiner(d)) {
                                it.next();
                            }
                        }
                        _ => break,
                    }
                }
                _ => break,
            }
        }
        out.push((i, end));
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Lower,
    Upper,
    Digit,
    Other,
}

fn kind(c: char) -> Kind {
    if c.is_numeric() {
        Kind::Digit
    } else if c.is_uppercase() {
        Kind::Upper
    } else if c.is_lowercase() {
        Kind::Lower
    } else {
        Kind::Other
    }
}

/// Byte ranges of the parts of the run `text[from..to]`.
fn parts_of(text: &str, from: usize, to: usize, out: &mut Vec<(usize, usize)>) {
    let run = &text[from..to];
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let mut start: Option<usize> = None;
    for (n, &(i, c)) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                out.push((from + s, from + i));
            }
            continue;
        }
        let Some(s) = start else {
            start = Some(i);
            continue;
        };
        let prev = kind(chars[n - 1].1);
        let here = kind(c);
        let next = chars.get(n + 1).map(|&(_, d)| kind(d));
        let cut = match (prev, here) {
            (Kind::Lower, Kind::Upper) => true,
            // `HTTPReply`: the last capital starts the next part.
            (Kind::Upper, Kind::Upper) => next == Some(Kind::Lower),
            (Kind::Digit, Kind::Lower | Kind::Upper) | (Kind::Lower | Kind::Upper, Kind::Digit) => {
                true
            }
            _ => false,
        };
        if cut {
            out.push((from + s, from + i));
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((from + s, to));
    }
}

/// The body's tokens and the whole identifiers of `text`.
pub fn analyze(text: &str) -> (Vec<Part>, Vec<Part>) {
    let mut body = Vec::new();
    let mut idents = Vec::new();
    let mut ranges = Vec::new();
    for (from, to) in runs(text) {
        ranges.clear();
        parts_of(text, from, to, &mut ranges);
        for &(a, b) in &ranges {
            if b - a <= LONGEST {
                let position = body.len();
                body.push(Part {
                    text: text[a..b].to_lowercase(),
                    from: a,
                    to: b,
                    position,
                });
            }
        }
        if ranges.len() > 1 && to - from <= LONGEST {
            let position = idents.len();
            idents.push(Part {
                text: text[from..to].to_lowercase(),
                from,
                to,
                position,
            });
        }
    }
    (body, idents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &str) -> (Vec<String>, Vec<String>) {
        let (b, i) = analyze(t);
        (
            b.into_iter().map(|p| p.text).collect(),
            i.into_iter().map(|p| p.text).collect(),
        )
    }

    #[test]
    fn splits_the_way_code_names_things() {
        assert_eq!(
            words("Call parseHTTPReply, then snake_case.v2 at notes/a.md."),
            (
                "call parse http reply then snake case v 2 at notes a md"
                    .split(' ')
                    .map(String::from)
                    .collect(),
                vec![
                    "parsehttpreply".into(),
                    "snake_case.v2".into(),
                    "notes/a.md".into()
                ]
            )
        );
        assert_eq!(words("std::io::Read").1, vec!["std::io::read".to_string()]);
        assert_eq!(words("end. Next").1, Vec::<String>::new());
    }

    #[test]
    fn long_runs_are_left_out_and_positions_follow() {
        let hash = "a".repeat(LONGEST + 1);
        let (b, i) = analyze(&format!("x {hash} y_z"));
        assert_eq!(
            b.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
            ["x", "y", "z"]
        );
        assert_eq!(b.iter().map(|p| p.position).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(i[0].text, "y_z");
    }

    proptest::proptest! {
        #[test]
        fn parts_are_the_text_they_cover(text in "\\PC{0,80}") {
            let (body, idents) = analyze(&text);
            for (n, p) in body.iter().enumerate() {
                proptest::prop_assert_eq!(p.position, n);
                proptest::prop_assert_eq!(&text[p.from..p.to].to_lowercase(), &p.text);
                proptest::prop_assert!(!p.text.is_empty());
            }
            for p in &idents {
                proptest::prop_assert_eq!(&text[p.from..p.to].to_lowercase(), &p.text);
            }
        }
    }
}
