//! memfs' query language, parsed here so that no text of the caller's ever
//! reaches the engine's own syntax:
//!
//! - `word`: a word, or an identifier (`read_to_end`, `HashMap`,
//!   `serde_json::Value`, `notes/a.md`): its parts in a row, or it whole;
//! - `"a phrase"`: the words in a row;
//! - `pref*`: a word beginning so (at least two letters or digits);
//! - `-word`, `-"a phrase"`: leaves out the files that have it;
//! - `path:notes`: only the file or directory at that path and what it
//!   holds (once).
//!
//! A file must have every word and phrase, in its text or its path.

use super::analyze;

/// The longest query taken, in bytes.
pub const LONGEST: usize = 1024;
/// The most words, phrases and prefixes in one query.
pub const MOST_TERMS: usize = 32;
/// The most words one phrase (or identifier) holds: the engine's work on
/// one file grows with it, times the times each word occurs there.
pub const MOST_PHRASE_WORDS: usize = 8;
/// The most words all terms of one query hold together.
pub const MOST_WORDS: usize = 48;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clause {
    /// Its parts in a row, or (two parts or more, one run) the identifier.
    Word {
        parts: Vec<String>,
        ident: Option<String>,
    },
    Phrase(Vec<String>),
    /// Parts in a row, the last a prefix.
    Prefix(Vec<String>),
}

impl Clause {
    pub fn parts(&self) -> &[String] {
        match self {
            Clause::Word { parts, .. } | Clause::Phrase(parts) | Clause::Prefix(parts) => parts,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub must: Vec<Clause>,
    pub not: Vec<Clause>,
    /// Only paths (relative, `notes/a.md`) beginning with this.
    pub under: Option<String>,
}

fn words(text: &str) -> (Vec<String>, Option<String>) {
    let (body, idents) = analyze::analyze(text);
    let runs = analyze::runs(text);
    let ident = match (runs.len(), idents.into_iter().next()) {
        (1, Some(i)) => Some(i.text),
        _ => None,
    };
    (body.into_iter().map(|p| p.text).collect(), ident)
}

/// A `path:` value as a relative path prefix (`/memories/notes` and
/// `/notes` read as `notes`).
pub fn under(value: &str) -> String {
    let v = match value.strip_prefix("/memories") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => value,
    };
    v.trim_start_matches('/').to_string()
}

/// Parses `text`; the error says what is wrong, and where, for a person.
///
/// Long because it is one scanner over the query's characters, each kind of
/// term a few lines.
pub fn parse(text: &str) -> Result<Query, String> {
    if text.len() > LONGEST {
        return Err(format!(
            "the query is too long ({} bytes; at most {LONGEST})",
            text.len()
        ));
    }
    let mut q = Query::default();
    let mut terms = 0;
    let mut words_in = 0;
    let mut rest = text;
    let mut at = 0usize;
    loop {
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        rest = trimmed;
        if rest.is_empty() {
            break;
        }
        let start = at;
        let negated = rest.starts_with('-');
        if negated {
            rest = &rest[1..];
            at += 1;
            if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                return Err(format!(
                    "a `-` at character {} leaves nothing out: write it right before a word (`-draft`)",
                    start + 1
                ));
            }
        }
        let clause = if let Some(inner) = rest.strip_prefix('"') {
            let Some(end) = inner.find('"') else {
                return Err(format!("the quote at character {} is not closed", at + 1));
            };
            let (parts, _) = words(&inner[..end]);
            rest = &inner[end + 1..];
            at += end + 2;
            (!parts.is_empty()).then_some(Clause::Phrase(parts))
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            at += end;
            if let Some(value) = word.strip_prefix("path:") {
                if negated {
                    return Err(
                        "`-path:` is not supported: use `path:` to search only below a path".into(),
                    );
                }
                if q.under.is_some() {
                    return Err("a query takes one `path:`".into());
                }
                q.under = Some(under(value));
                continue;
            }
            if let Some(stem) = word.strip_suffix('*') {
                let (parts, _) = words(stem);
                match parts.last() {
                    Some(last) if last.chars().count() >= 2 && !stem.ends_with('*') => {
                        Some(Clause::Prefix(parts))
                    }
                    _ => {
                        return Err(format!(
                            "`{}` at character {}: a prefix needs at least two letters or digits before its `*`",
                            crate::text::clip(word),
                            start + 1
                        ))
                    }
                }
            } else {
                let (parts, ident) = words(word);
                (!parts.is_empty()).then_some(Clause::Word { parts, ident })
            }
        };
        let Some(clause) = clause else { continue };
        if clause.parts().len() > MOST_PHRASE_WORDS {
            return Err(format!(
                "the term at character {} has {} words; a phrase or a name holds at most {MOST_PHRASE_WORDS} (split it, or search for its rarest words)",
                start + 1,
                clause.parts().len()
            ));
        }
        words_in += clause.parts().len();
        if words_in > MOST_WORDS {
            return Err(format!(
                "the query has too many words (more than {MOST_WORDS} in all its terms)"
            ));
        }
        terms += 1;
        if terms > MOST_TERMS {
            return Err(format!(
                "the query has too many terms (more than {MOST_TERMS})"
            ));
        }
        if negated {
            q.not.push(clause);
        } else {
            q.must.push(clause);
        }
    }
    if q.must.is_empty() {
        return Err(match q.not.is_empty() {
            false => "the query only leaves out: give it a word to search for as well".into(),
            true => "the query has no word to search for".into(),
        });
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(parts: &[&str], ident: Option<&str>) -> Clause {
        Clause::Word {
            parts: parts.iter().map(|s| s.to_string()).collect(),
            ident: ident.map(str::to_string),
        }
    }

    #[test]
    fn parses_each_kind_of_term() {
        let q = parse(r#"HashMap "thread safe" serial* -draft path:/memories/notes"#).unwrap();
        assert_eq!(
            q.must,
            vec![
                word(&["hash", "map"], Some("hashmap")),
                Clause::Phrase(vec!["thread".into(), "safe".into()]),
                Clause::Prefix(vec!["serial".into()]),
            ]
        );
        assert_eq!(q.not, vec![word(&["draft"], None)]);
        assert_eq!(q.under.as_deref(), Some("notes"));
        assert_eq!(
            parse("serde_json::Value").unwrap().must,
            vec![word(&["serde", "json", "value"], Some("serde_json::value"))]
        );
    }

    #[test]
    fn refuses_what_it_cannot_search_with_a_reason() {
        let cases = [
            ("", "no word"),
            ("   ", "no word"),
            ("!!! ???", "no word"),
            ("-draft", "only leaves out"),
            ("a \"b c", "quote at character 3 is not closed"),
            ("a - b", "`-` at character 3"),
            ("x*", "at least two"),
            ("*", "at least two"),
            ("path:a path:b c", "one `path:`"),
            ("-path:a c", "not supported"),
        ];
        for (text, says) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let long = "a ".repeat(LONGEST);
        assert!(parse(&long).unwrap_err().contains("too long"));
        let phrase = format!("\"{}\"", "a ".repeat(MOST_PHRASE_WORDS + 1));
        assert!(parse(&phrase).unwrap_err().contains("at most 8"));
        assert!(parse(&format!("\"{}\"", "a ".repeat(MOST_PHRASE_WORDS))).is_ok());
        let words = "\"a b c d e f g h\" ".repeat(MOST_WORDS / MOST_PHRASE_WORDS + 1);
        assert!(parse(&words).unwrap_err().contains("too many words"));
        let many = "w ".repeat(MOST_TERMS + 1);
        assert!(parse(&many).unwrap_err().contains("too many terms"));
        assert!(parse(&"w ".repeat(MOST_TERMS)).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_says_why(text in "\\PC{0,200}") {
            match parse(&text) {
                Ok(q) => proptest::prop_assert!(!q.must.is_empty()),
                Err(e) => proptest::prop_assert!(!e.is_empty()),
            }
        }
    }
}
