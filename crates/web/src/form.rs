//! Query strings and HTML form bodies (`a=1&b=%2Fx`), percent-decoded into
//! UTF-8 text: for the HTTP doors, from untrusted peers.

use std::collections::HashMap;

/// `a=1&b=%2Fx` as a map (a key given twice keeps the last); `None` when
/// it is not valid percent-encoded UTF-8.
pub fn parse(query: &str) -> Option<HashMap<String, String>> {
    let mut out = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(k)?, decode(v)?);
    }
    Some(out)
}

/// One percent-encoded component (`+` is a space, as forms send it).
pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// `text` percent-encoded for a query string.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_it_encodes_and_refuses_broken_escapes() {
        let text = "/memories/a b/é%&=?";
        assert_eq!(decode(&encode(text)).as_deref(), Some(text));
        assert_eq!(parse("a=1&b=%2Fx&c").unwrap()["b"], "/x");
        assert_eq!(parse("a=%zz"), None);
        assert_eq!(parse("a=%ff"), None);
        assert_eq!(parse("a=%4"), None);
    }
}
