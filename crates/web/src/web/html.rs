//! HTML made safe: every text from the memory (names, contents, actors,
//! notes) goes through [`esc`], so a file that holds markup shows as text.

/// `text` escaped for HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A time as rows keep it (RFC 3339), for reading: `2026-12-02 03:15:39`.
pub fn time(text: &str) -> String {
    esc(&text.get(..19).unwrap_or(text).replace('T', " "))
}

/// A size for people: `812 B`, `3.4 KiB`.
pub fn size(bytes: Option<u64>) -> String {
    match bytes {
        None => String::new(),
        Some(b) => crate::units::human_bytes(b),
    }
}

/// A unified diff as lines marked added, removed, hunk or context.
pub fn diff(text: &str) -> String {
    let mut out = String::from("<pre class=\"diff\">");
    for line in text.lines() {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "head"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else if line.starts_with("@@") {
            "hunk"
        } else {
            "ctx"
        };
        out.push_str(&format!("<span class=\"{class}\">{}</span>", esc(line)));
    }
    out.push_str("</pre>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_a_memory_stays_text() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        let d = diff("--- a\n+++ b\n@@ -1 +1 @@\n-<b>old\n+new\n same");
        assert!(
            d.contains("<span class=\"del\">-&lt;b&gt;old</span>"),
            "{d}"
        );
        assert!(d.contains("<span class=\"add\">+new</span>"), "{d}");
    }
}
