//! Which names the agent's directory listing leaves out.
//!
//! Always: hidden names (starting with `.`) and `node_modules`, as the spec
//! says. By default also the droppings editors leave while a person edits
//! through the mount: vim's `4913` write probe, `name~` backups and emacs'
//! `#name#` autosaves. The list is configurable (`--hide`, `--show-editor-files`).

/// The editor artifacts left out unless configured otherwise.
pub const EDITOR_ARTIFACTS: [&str; 3] = ["4913", "*~", "#*#"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hide {
    patterns: Vec<Pattern>,
}

/// A glob, sorted at construction into the shapes that need no allocation
/// to match (listings check every name against every pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
    Suffix(String),
    PrefixSuffix(String, String),
    General(String),
}

impl Pattern {
    fn new(glob: String) -> Self {
        let wild = |s: &str| s.contains(['*', '?']);
        match glob.split_once('*') {
            None if !wild(&glob) => Pattern::Exact(glob),
            Some((a, b)) if !wild(a) && !wild(b) => match (a.is_empty(), b.is_empty()) {
                (true, _) => Pattern::Suffix(b.to_string()),
                (false, true) => Pattern::Prefix(a.to_string()),
                (false, false) => Pattern::PrefixSuffix(a.to_string(), b.to_string()),
            },
            _ => Pattern::General(glob),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Exact(s) => name == s,
            Pattern::Prefix(p) => name.starts_with(p.as_str()),
            Pattern::Suffix(s) => name.ends_with(s.as_str()),
            Pattern::PrefixSuffix(p, s) => {
                name.len() >= p.len() + s.len()
                    && name.starts_with(p.as_str())
                    && name.ends_with(s.as_str())
            }
            Pattern::General(g) => glob(g, name),
        }
    }
}

impl Default for Hide {
    fn default() -> Self {
        Hide::new(EDITOR_ARTIFACTS.iter().map(|p| p.to_string()))
    }
}

impl Hide {
    /// Leaves out hidden names, `node_modules` and names matching `patterns`
    /// (globs: `*` any run of characters, `?` one character).
    pub fn new(patterns: impl IntoIterator<Item = String>) -> Self {
        Hide {
            patterns: patterns.into_iter().map(Pattern::new).collect(),
        }
    }

    /// What a person's listing leaves out unless they ask for all: editor
    /// scratch files and hidden names (`memfs log`, `memfs search`, the page).
    pub fn scratch() -> Self {
        Hide::new(
            EDITOR_ARTIFACTS
                .iter()
                .map(|p| p.to_string())
                .chain([".*".to_string()]),
        )
    }

    pub fn hides(&self, name: &str) -> bool {
        name.starts_with('.')
            || name == "node_modules"
            || self.patterns.iter().any(|p| p.matches(name))
    }

    /// Whether `path` (`/memories/...`) is hidden or lies under a hidden
    /// name: `/memories/.git/config` is as hidden as `.git` itself.
    pub fn hides_path(&self, path: &str) -> bool {
        path.split('/').any(|n| !n.is_empty() && self.hides(n))
    }
}

/// Matches `name` against a glob of `*` and `?` (no character classes).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer match with backtracking to the last `*`.
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*~", "notes.md~"));
        assert!(!glob("*~", "notes.md"));
        assert!(glob("#*#", "#notes.md#"));
        assert!(!glob("#*#", "#notes.md"));
        assert!(glob("4913", "4913") && !glob("4913", "49130"));
        assert!(glob("a?c*", "abcdef") && !glob("a?c*", "ac"));
        assert!(glob("*", "") && glob("**x", "x"));
    }

    #[test]
    fn compiled_patterns_match_like_the_glob() {
        let names = [
            "", "#", "##", "#a#", "a~", "~", "4913", "ab", "abc", "a#b#c",
        ];
        for pattern in ["4913", "*~", "#*#", "a*", "*", "a*c", "a?c", "*#*", "?"] {
            let compiled = Pattern::new(pattern.to_string());
            for name in names {
                assert_eq!(
                    compiled.matches(name),
                    glob(pattern, name),
                    "{pattern} on {name:?}"
                );
            }
        }
    }

    #[test]
    fn default_hides_editor_droppings_and_hidden_names() {
        let h = Hide::default();
        for name in [
            ".swp",
            ".notes.md.swp",
            "node_modules",
            "4913",
            "notes.md~",
            "#notes.md#",
        ] {
            assert!(h.hides(name), "{name}");
        }
        for name in ["notes.md", "4914", "~notes", "a#b"] {
            assert!(!h.hides(name), "{name}");
        }
        assert!(!Hide::new([]).hides("notes.md~"));
    }
}
