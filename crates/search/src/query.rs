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

/// What is wrong with a query, and where (characters count from 1), in
/// words for the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query is too long ({0} bytes; at most {LONGEST})")]
    TooLong(usize),
    #[error("a `-` at character {0} leaves nothing out: write it right before a word (`-draft`)")]
    LoneMinus(usize),
    #[error("the quote at character {0} is not closed")]
    Unclosed(usize),
    #[error("`-path:` is not supported: use `path:` to search only below a path")]
    NotPath,
    #[error("a query takes one `path:`")]
    TwoPaths,
    #[error("the path is given twice (in the query's `path:` and beside it)")]
    PathTwice,
    #[error(
        "`{word}` at character {at}: a prefix needs at least two letters or digits before its `*`"
    )]
    ShortPrefix { word: String, at: usize },
    #[error("the term at character {at} has {words} words; a phrase or a name holds at most {MOST_PHRASE_WORDS} (split it, or search for its rarest words)")]
    LongTerm { at: usize, words: usize },
    #[error("the query has too many words (more than {MOST_WORDS} in all its terms)")]
    TooManyWords,
    #[error("the query has too many terms (more than {MOST_TERMS})")]
    TooManyTerms,
    #[error("the query only leaves out: give it a word to search for as well")]
    OnlyLeavesOut,
    #[error("the query has no word to search for")]
    NoWord,
}

/// Parses `text`; the error says what is wrong, and where, for a person.
pub fn parse(text: &str) -> Result<Query, QueryError> {
    if text.len() > LONGEST {
        return Err(QueryError::TooLong(text.len()));
    }
    let mut q = Query::default();
    let mut scan = Scan { rest: text, at: 0 };
    let mut count = Count::default();
    while let Some(start) = scan.next_term() {
        let negated = scan.minus(start)?;
        let Some(clause) = scan.clause(start, negated, &mut q)? else {
            continue;
        };
        count.add(&clause, start)?;
        match negated {
            true => q.not.push(clause),
            false => q.must.push(clause),
        }
    }
    match (q.must.is_empty(), q.not.is_empty()) {
        (false, _) => Ok(q),
        (true, false) => Err(QueryError::OnlyLeavesOut),
        (true, true) => Err(QueryError::NoWord),
    }
}

/// The query's text not read yet, and where it begins (bytes from 0).
struct Scan<'a> {
    rest: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn take(&mut self, n: usize) -> &'a str {
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        self.at += n;
        taken
    }

    /// Past the spaces: where the next term begins, if one does.
    fn next_term(&mut self) -> Option<usize> {
        let spaces = self.rest.len() - self.rest.trim_start().len();
        self.take(spaces);
        (!self.rest.is_empty()).then_some(self.at)
    }

    /// Whether the term is left out (a `-` before it).
    fn minus(&mut self, start: usize) -> Result<bool, QueryError> {
        if !self.rest.starts_with('-') {
            return Ok(false);
        }
        self.take(1);
        match self.rest.is_empty() || self.rest.starts_with(char::is_whitespace) {
            true => Err(QueryError::LoneMinus(start + 1)),
            false => Ok(true),
        }
    }

    /// The term's clause; `None` for a `path:` (kept in `q`) or a term
    /// with no word in it.
    fn clause(
        &mut self,
        start: usize,
        negated: bool,
        q: &mut Query,
    ) -> Result<Option<Clause>, QueryError> {
        if self.rest.starts_with('"') {
            let Some(end) = self.rest[1..].find('"') else {
                return Err(QueryError::Unclosed(self.at + 1));
            };
            let phrase = &self.take(end + 2)[1..=end];
            let (parts, _) = words(phrase);
            return Ok((!parts.is_empty()).then_some(Clause::Phrase(parts)));
        }
        let end = self
            .rest
            .find(char::is_whitespace)
            .unwrap_or(self.rest.len());
        let word = self.take(end);
        if let Some(value) = word.strip_prefix("path:") {
            return match (negated, q.under.is_some()) {
                (true, _) => Err(QueryError::NotPath),
                (false, true) => Err(QueryError::TwoPaths),
                (false, false) => {
                    q.under = Some(under(value));
                    Ok(None)
                }
            };
        }
        let Some(stem) = word.strip_suffix('*') else {
            let (parts, ident) = words(word);
            return Ok((!parts.is_empty()).then_some(Clause::Word { parts, ident }));
        };
        let (parts, _) = words(stem);
        match parts.last() {
            Some(last) if last.chars().count() >= 2 && !stem.ends_with('*') => {
                Ok(Some(Clause::Prefix(parts)))
            }
            _ => Err(QueryError::ShortPrefix {
                word: crate::text::clip(word),
                at: start + 1,
            }),
        }
    }
}

/// The terms and words of a query so far, against its bounds.
#[derive(Default)]
struct Count {
    terms: usize,
    words: usize,
}

impl Count {
    fn add(&mut self, clause: &Clause, start: usize) -> Result<(), QueryError> {
        let words = clause.parts().len();
        if words > MOST_PHRASE_WORDS {
            return Err(QueryError::LongTerm {
                at: start + 1,
                words,
            });
        }
        self.words += words;
        if self.words > MOST_WORDS {
            return Err(QueryError::TooManyWords);
        }
        self.terms += 1;
        if self.terms > MOST_TERMS {
            return Err(QueryError::TooManyTerms);
        }
        Ok(())
    }
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
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let long = "a ".repeat(LONGEST);
        assert!(parse(&long).unwrap_err().to_string().contains("too long"));
        let phrase = format!("\"{}\"", "a ".repeat(MOST_PHRASE_WORDS + 1));
        assert!(parse(&phrase)
            .unwrap_err()
            .to_string()
            .contains("at most 8"));
        assert!(parse(&format!("\"{}\"", "a ".repeat(MOST_PHRASE_WORDS))).is_ok());
        let words = "\"a b c d e f g h\" ".repeat(MOST_WORDS / MOST_PHRASE_WORDS + 1);
        assert!(parse(&words)
            .unwrap_err()
            .to_string()
            .contains("too many words"));
        let many = "w ".repeat(MOST_TERMS + 1);
        assert!(parse(&many)
            .unwrap_err()
            .to_string()
            .contains("too many terms"));
        assert!(parse(&"w ".repeat(MOST_TERMS)).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_says_why(text in "\\PC{0,200}") {
            match parse(&text) {
                Ok(q) => proptest::prop_assert!(!q.must.is_empty()),
                Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
