//! Parsing and validating the agent's `/memories/...` paths.
//!
//! A [`MemPath`] is a list of names below the memory root; it can only be
//! built by [`MemPath::parse`], so holding one proves the path was checked.
//! This module never touches the tree or the disk.

use std::fmt;

use unicode_normalization::UnicodeNormalization;

/// The prefix every agent path starts with.
pub const ROOT: &str = "/memories";
/// Longest accepted path, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted name, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Why a path was refused. The text never names anything of the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path must start with /memories")]
    OutsideRoot,
    #[error("the path contains a `.` or `..` segment; use a plain path under /memories")]
    DotSegment,
    #[error("a name in the path is `.` or `..`, or holds a `/` or `\\`, once percent-decoded (a traversal attempt)")]
    EncodedTraversal,
    #[error("the path contains a backslash")]
    Backslash,
    #[error("the path contains a NUL or another control character")]
    ControlChar,
    #[error("a name in the path is longer than 255 bytes")]
    NameTooLong,
    #[error("the path is longer than 4096 bytes")]
    PathTooLong,
    /// Only a name from the mount or the disk can be one: the tool's paths
    /// are normalized as they are taken in.
    #[error("a name in the path is not in Unicode NFC, the one spelling memfs keeps")]
    NotNfc,
}

/// A validated path below the memory root: zero names is the root itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemPath {
    names: Vec<String>,
}

impl MemPath {
    /// The memory root, `/memories`.
    pub fn root() -> Self {
        MemPath { names: Vec::new() }
    }

    /// Checks an agent path and splits it into names.
    ///
    /// Repeated and trailing slashes are folded (`/memories//a/` is `/memories/a`),
    /// as POSIX does; everything that could step outside the root is refused.
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::PathTooLong);
        }
        check_text(raw)?;
        let rest = match raw.strip_prefix(ROOT) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => return Err(PathError::OutsideRoot),
        };
        // One spelling per name: an agent's path is taken in Unicode NFC
        // (as the hosted memory stores take theirs), so that `café` typed
        // composed or decomposed is one file, never two that look alike.
        let rest: std::borrow::Cow<str> = match unicode_normalization::is_nfc_quick(rest.chars()) {
            unicode_normalization::IsNormalized::Yes => std::borrow::Cow::Borrowed(rest),
            _ => std::borrow::Cow::Owned(rest.nfc().collect()),
        };
        let mut names = Vec::new();
        for name in rest.split('/').filter(|n| !n.is_empty()) {
            check_name(name)?;
            names.push(name.to_string());
        }
        Ok(MemPath { names })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The path of these names, which came from a valid path (not checked
    /// again: the journal's keys, made from paths).
    pub fn from_names(names: impl IntoIterator<Item = String>) -> MemPath {
        MemPath {
            names: names.into_iter().collect(),
        }
    }

    pub fn is_root(&self) -> bool {
        self.names.is_empty()
    }

    /// The last name, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }

    /// The parent path, or `None` for the root.
    pub fn parent(&self) -> Option<MemPath> {
        let (_, init) = self.names.split_last()?;
        Some(MemPath {
            names: init.to_vec(),
        })
    }

    pub fn join(&self, name: &str) -> MemPath {
        let mut names = self.names.clone();
        names.push(name.to_string());
        MemPath { names }
    }

    /// True when `self` is `other` or lies below it.
    /// Whether the two are the same path or one is below the other.
    pub fn overlaps(&self, other: &MemPath) -> bool {
        self.starts_with(other) || other.starts_with(self)
    }

    pub fn starts_with(&self, other: &MemPath) -> bool {
        self.names.starts_with(&other.names)
    }

    /// This path (at or below `from`) as it is once `from` moved to `to`.
    pub fn rebase(&self, from: &MemPath, to: &MemPath) -> MemPath {
        let mut names = to.names.clone();
        names.extend_from_slice(&self.names[from.names.len()..]);
        MemPath { names }
    }

    /// The path relative to the root, `a/b` (empty for the root): its place on disk.
    pub fn relative(&self) -> String {
        self.names.join("/")
    }
}

/// Checks one name (a directory entry) as [`MemPath::parse`] checks each name
/// of a path: a name this refuses is one the agent could never address, so
/// the mount refuses to make it and loading leaves it out.
pub fn check_name(name: &str) -> Result<(), PathError> {
    check_text(name)?;
    if name == "." || name == ".." {
        return Err(PathError::DotSegment);
    }
    if encoded_traversal(name) {
        return Err(PathError::EncodedTraversal);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(PathError::NameTooLong);
    }
    // A name the tool would spell otherwise (it takes paths in NFC) is one
    // it could not address: the mount refuses to make it, and one found on
    // disk is left out as other such names are.
    if !unicode_normalization::is_nfc(name) {
        return Err(PathError::NotNfc);
    }
    Ok(())
}

/// What no part of a path may hold: control characters (a forged listing
/// row, terminal escapes) and backslashes.
fn check_text(text: &str) -> Result<(), PathError> {
    if text.chars().any(|c| c.is_control()) {
        return Err(PathError::ControlChar);
    }
    if text.contains('\\') {
        return Err(PathError::Backslash);
    }
    Ok(())
}

/// Whether a name, percent-decoded (once or twice, for `%252e`), is `.` or
/// `..` or holds a separator: a traversal for any layer that decodes it. A
/// percent in an ordinary name (`100%2easy`, `50%25`) is just a character.
fn encoded_traversal(name: &str) -> bool {
    let mut text = std::borrow::Cow::Borrowed(name);
    for _ in 0..3 {
        let Some(decoded) = percent_decoded(&text) else {
            return false;
        };
        if decoded == "." || decoded == ".." || decoded.contains(['/', '\\']) {
            return true;
        }
        text = std::borrow::Cow::Owned(decoded);
    }
    false
}

/// `text` with each `%XX` decoded, or `None` when it has none.
fn percent_decoded(text: &str) -> Option<String> {
    if !text.contains('%') {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut any = false;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).and_then(|&b| hex(b)),
            bytes.get(i + 2).and_then(|&b| hex(b)),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                any = true;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    any.then(|| String::from_utf8_lossy(&out).into_owned())
}

impl fmt::Display for MemPath {
    /// The canonical agent spelling: `/memories` or `/memories/a/b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ROOT)?;
        for name in &self.names {
            write!(f, "/{name}")?;
        }
        Ok(())
    }
}

/// The directories version-control tools keep their own state in: a
/// repository a person makes inside the memory works through the mount as
/// anywhere, and stays out of what memfs shows of the memory (the sizes in
/// the agent's view, `memfs log` and the page unless asked, export,
/// `memfs scan`).
pub const TOOL_STATE: [&str; 5] = [".git", ".hg", ".svn", ".jj", ".bzr"];

/// Whether `path` is, or lies under, a version-control tool's state.
pub fn is_tool_state(path: &str) -> bool {
    path.split('/').any(|n| TOOL_STATE.contains(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_root_and_plain_paths() {
        assert!(MemPath::parse("/memories").unwrap().is_root());
        assert!(MemPath::parse("/memories/").unwrap().is_root());
        let p = MemPath::parse("/memories//notes/a.txt/").unwrap();
        assert_eq!(p.names(), ["notes", "a.txt"]);
        assert_eq!(p.to_string(), "/memories/notes/a.txt");
        assert_eq!(p.relative(), "notes/a.txt");
        // A literal percent that is not an encoded traversal is a valid name.
        assert!(MemPath::parse("/memories/100%25 done").is_ok());
        assert!(MemPath::parse("/memories/100%2easy").is_ok());
        assert!(MemPath::parse("/memories/%2e%2e.md").is_ok());
        // Composed and decomposed spellings are one name (NFC).
        assert_eq!(
            MemPath::parse("/memories/cafe\u{301}.md").unwrap(),
            MemPath::parse("/memories/caf\u{e9}.md").unwrap()
        );
        assert!(MemPath::parse("/memories/...").is_ok());
        assert!(MemPath::parse("/memories/.hidden").is_ok());
    }

    #[test]
    fn refuses_hostile_paths() {
        use PathError::*;
        let long_name = format!("/memories/{}", "a".repeat(256));
        let long_path = format!("/memories/{}", "abcdefg/".repeat(520));
        let table: &[(&str, PathError)] = &[
            ("", OutsideRoot),
            ("memories/a", OutsideRoot),
            ("/memoriesX/a", OutsideRoot),
            ("/memories-old", OutsideRoot),
            ("/etc/passwd", OutsideRoot),
            ("/Memories/a", OutsideRoot),
            ("./memories/a", OutsideRoot),
            ("/memories/../../secrets.env", DotSegment),
            ("/memories/a/..", DotSegment),
            ("/memories/.", DotSegment),
            ("/memories/./a", DotSegment),
            ("/memories/%2e%2e/x", EncodedTraversal),
            ("/memories/%2E%2E%2Fetc", EncodedTraversal),
            ("/memories/a%2fb", EncodedTraversal),
            ("/memories/a%5Cb", EncodedTraversal),
            ("/memories/.%2e/x", EncodedTraversal),
            ("/memories/%2e", EncodedTraversal),
            ("/memories/%252e%252e/x", EncodedTraversal),
            ("/memories/..\\..\\x", Backslash),
            ("/memories/a\u{0}b", ControlChar),
            ("/memories/a\nb", ControlChar),
            ("/memories/a\u{7f}", ControlChar),
            (long_name.as_str(), NameTooLong),
            (long_path.as_str(), PathTooLong),
        ];
        for (raw, want) in table {
            assert_eq!(MemPath::parse(raw).as_ref(), Err(want), "path {raw:?}");
        }
        // Exactly at the limits is fine.
        let name255 = format!("/memories/{}", "b".repeat(255));
        assert!(MemPath::parse(&name255).is_ok());
    }

    #[test]
    fn a_name_is_checked_as_a_path_checks_it() {
        for name in [
            "ok.md",
            "a\nb",
            "x\u{1b}[31m",
            "a\\b",
            "%2E%2e",
            "a%2Fb",
            ".",
            "..",
            "...",
            "100%25",
            "100%2easy",
            "%2e",
        ] {
            let as_path = MemPath::parse(&format!("/memories/{name}")).map(|_| ());
            assert_eq!(check_name(name), as_path, "{name:?}");
        }
        assert_eq!(check_name(&"n".repeat(256)), Err(PathError::NameTooLong));
    }

    #[test]
    fn prefix_and_parent() {
        let a = MemPath::parse("/memories/a").unwrap();
        let ab = MemPath::parse("/memories/a/b").unwrap();
        let abc = MemPath::parse("/memories/abc").unwrap();
        assert!(ab.starts_with(&a));
        assert!(!abc.starts_with(&a));
        assert_eq!(ab.parent().unwrap(), a);
        assert_eq!(MemPath::root().parent(), None);
        assert_eq!(a.join("b"), ab);
    }
}
