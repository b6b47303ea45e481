//! Text from outside (session names, process names, anything a client
//! labels itself with) made safe to keep and to print: no control character
//! ever reaches a terminal or a row format, and no label grows without
//! bound. A leaf module: it knows nothing else of memfs.

/// The most characters a label (a session's or a process's name) keeps.
pub const MAX_LABEL: usize = 64;

/// Whether `c` must not be printed as it is: C0 and C1 controls, DEL, the
/// line and paragraph separators, and the bidirectional overrides and
/// isolates (which can make a terminal show text other than what it holds).
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that must not be printed written as an
/// escape (`\n`, `\t`, `\u{1b}`), and a backslash as `\\`, so that what is
/// shown says exactly what was given and can never act on a terminal.
pub fn escaped(text: &str) -> String {
    escape(text, true)
}

/// `text` with each unprintable character escaped, and with `backslash`,
/// each backslash too.
fn escape(text: &str, backslash: bool) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' if backslash => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unprintable(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `text` with only the characters that must not be printed escaped (a
/// backslash stays as it is): for printing text that was escaped when it
/// was taken in ([`label`]), so that nothing is escaped twice, while text
/// from an older data dir still never reaches a terminal raw.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if is_printable(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(escape(text, false))
}

/// `text` as [`printable`], but with its line breaks and tabs kept: for a
/// message of several lines that may quote what others wrote.
pub fn printable_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c != '\n' && c != '\t' && unprintable(c))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            line.split('\t')
                .map(|part| escape(part, false))
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    std::borrow::Cow::Owned(lines.join("\n"))
}

/// Whether `text` would print as it is.
pub fn is_printable(text: &str) -> bool {
    !text.chars().any(unprintable)
}

/// A label from a client (a session's name), as memfs keeps it: escaped
/// (see [`escaped`]) and cut to [`MAX_LABEL`] characters.
pub fn label(text: &str) -> String {
    let escaped = escaped(text);
    match escaped.char_indices().nth(MAX_LABEL) {
        Some((at, _)) => format!("{}…", &escaped[..at]),
        None => escaped,
    }
}

/// Shortens agent-supplied text echoed in an error.
pub fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_overrides_are_escaped_never_kept() {
        let forged = "x\n    42  2026-01-01  person:vim[1000]  write\u{1b}]0;pwned\u{7}";
        let kept = label(forged);
        assert!(is_printable(&kept), "{kept:?}");
        assert!(!kept.contains('\n'));
        assert!(
            kept.starts_with("x\\n    42") && kept.ends_with('…'),
            "{kept:?}"
        );
        let whole = escaped(forged);
        assert!(whole.contains("\\n") && whole.contains("\\u{1b}") && whole.contains("\\u{7}"));
        assert_eq!(escaped("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(escaped("back\\slash"), "back\\\\slash");
        assert_eq!(label("claude-code"), "claude-code");
        assert_eq!(printable("a\\b\u{1b}"), "a\\b\\u{1b}");
        assert_eq!(printable(&label("a\\b\n")), label("a\\b\n"));
        let long = "é".repeat(200);
        assert_eq!(label(&long).chars().count(), MAX_LABEL + 1);
    }
}
