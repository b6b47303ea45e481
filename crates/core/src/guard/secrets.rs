//! Credential screening: finding the documented formats of credentials in
//! text, so that an agent's write can be refused or redacted before anything
//! is stored (the spec's "stricter validation that strips out potentially
//! sensitive information").
//!
//! Each rule is written from the credential's published format (prefixes,
//! lengths, alphabets). Rules with a fixed prefix are exact; the two that
//! are not (a database URL's password and a generic `password = ...`
//! assignment) refuse placeholders, references to the environment and, for
//! secrets and tokens, values of low entropy, so that prose and code that
//! merely talk about passwords and tokens pass.

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

/// What to do with a credential in an agent's write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// An error result naming the kind and the line; nothing changes.
    #[default]
    Refuse,
    /// Each credential is replaced by `[REDACTED:<kind>]` before the write.
    Redact,
    /// No screening.
    Allow,
}

/// One credential found: its kind, its 1-based line, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: &'static str,
    pub line: usize,
    pub start: usize,
    pub end: usize,
}

/// A rule: a kind, a pattern, and (for the rules without a fixed prefix) a
/// check of the captured value.
struct Rule {
    kind: &'static str,
    pattern: &'static str,
    check: Option<fn(&str) -> bool>,
}

const RULES: &[Rule] = &[
    Rule {
        kind: "aws_access_key_id",
        pattern: r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16,}",
        check: None,
    },
    Rule {
        kind: "aws_secret_access_key",
        pattern: r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        check: None,
    },
    // (A capture is the credential itself when the pattern needs the character after it.)
    Rule {
        kind: "gcp_api_key",
        pattern: r"AIza[0-9A-Za-z_\-]{35,}",
        check: None,
    },
    Rule {
        kind: "gcp_service_account_key",
        pattern: r#""private_key_id"\s*:\s*"[0-9a-f]{40}""#,
        check: None,
    },
    Rule {
        kind: "google_oauth_client_secret",
        pattern: r"GOCSPX-[A-Za-z0-9_\-]{28,}",
        check: None,
    },
    Rule {
        kind: "azure_storage_connection_string",
        pattern: r"(?i)AccountKey=([A-Za-z0-9+/]{40,}={0,2})",
        check: None,
    },
    Rule {
        kind: "anthropic_api_key",
        pattern: r"sk-ant-[a-z]{3,5}\d{2}-[A-Za-z0-9_\-]{32,}",
        check: None,
    },
    Rule {
        kind: "openai_api_key",
        pattern: r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}|sk-proj-[A-Za-z0-9_\-]{40,}",
        check: None,
    },
    Rule {
        kind: "github_token",
        pattern: r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{82,}",
        check: None,
    },
    Rule {
        kind: "gitlab_token",
        pattern: r"glpat-[A-Za-z0-9_\-]{20,}",
        check: None,
    },
    Rule {
        kind: "slack_token",
        pattern: r"xox[abposr]-[0-9]{6,}-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
        check: None,
    },
    Rule {
        kind: "stripe_key",
        pattern: r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{24,}",
        check: None,
    },
    Rule {
        kind: "huggingface_token",
        pattern: r"hf_[A-Za-z0-9]{34,}",
        check: None,
    },
    Rule {
        kind: "npm_token",
        pattern: r"npm_[A-Za-z0-9]{36,}",
        check: None,
    },
    Rule {
        kind: "pypi_token",
        pattern: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
        check: None,
    },
    Rule {
        kind: "sendgrid_api_key",
        pattern: r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43,}",
        check: None,
    },
    Rule {
        kind: "private_key",
        // The header, then (after any `Name: value` header lines) key material.
        pattern: r"-----BEGIN (?:RSA |DSA |EC |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----(?:\r?\n[A-Za-z-]+: [^\n]*)*\s+[A-Za-z0-9+/=]{40,}",
        check: None,
    },
    Rule {
        kind: "jwt",
        pattern: r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        check: None,
    },
    Rule {
        kind: "database_url_password",
        pattern: r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver)://[^\s:/@]+:([^\s@/]+)@",
        check: Some(url_password),
    },
    Rule {
        kind: "url_password",
        // Any other scheme's `user:password@` (https, ftp, smtp, ...).
        pattern: r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@]+:([^\s@/:]+)@",
        check: Some(url_password),
    },
    Rule {
        kind: "authorization_header",
        pattern: r#"(?i)\bauthorization["']?\s*[:=]\s*["']?(?:bearer|token|basic)\s+([A-Za-z0-9._~+/\-]{16,}=*)"#,
        check: Some(header_credential),
    },
    // The key names below end in the word (`DB_PASSWORD`, `PGPASSWORD`,
    // `adminPassword`, `API_TOKEN`, `DJANGO_SECRET_KEY`): `.env` files and
    // configs prefix them freely.
    Rule {
        kind: "password_assignment",
        pattern: r#"(?i)\b[a-z0-9_\-]*(?:password|passwd|pwd)["']?\s*[:=]\s*["']?([^\s"'`,;)]+)"#,
        check: Some(literal_password),
    },
    Rule {
        kind: "secret_assignment",
        // (A URL's query value ends at `&`: `?token=abc&logo=x` is `abc`.)
        pattern: r#"(?i)\b[a-z0-9_\-]*(?:secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|auth[_-]?token|secret[_-]?key)["']?\s*[:=]\s*["']?([^\s"'`,;)&]+)"#,
        check: Some(random_secret),
    },
];

/// Values that stand for a password without being one.
fn placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let lower = v.to_ascii_lowercase();
    v.len() < 6
        || value.starts_with(['$', '<', '{', '%', '[', '(', '*', '#', '&', '@', ':'])
        || value.contains("${")
        // A file that holds it (`/run/secrets/db`, `~/.pgpass`), or `$PWD`'s path.
        || (value.starts_with(['/', '~', '.']) && value.contains('/'))
        // Code: a path (`libc::passwd`), a constant's name (`MAX_TOKEN_LEN`).
        || value.contains("::")
        || (value.contains('_')
            && value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        || value.contains("{{")
        || lower.chars().all(|c| c == 'x' || c == '*')
        || [
            "password", "passwd", "secret", "changeme", "example", "placeholder", "redacted",
            "your_password", "yourpassword", "mypassword", "none", "null", "true", "false",
            "required", "optional", "string", "undefined", "hidden", "dummy", "sample",
        ]
        .iter()
        .any(|p| lower == *p || lower.starts_with("your") || lower.starts_with("my_"))
        // A reference: `env["X"]`, `getenv("X")`, `config.db`, `self.pw`
        // (the word alone, not a value that starts like it: `enva00##`).
        || ["env", "getenv", "environ", "process.", "os.", "config", "settings", "self.", "args", "opts", "options"]
            .iter()
            .any(|p| {
                lower.starts_with(p)
                    && (p.ends_with('.')
                        || !v[p.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()))
            })
        // A name, not a value: `password = password_hash(...)`, `pwd = get_pwd()`.
        || value.contains('(')
        // A generic type or an index: `Option<unsafe extern ...>`,
        // `Optional[str]`, `headers["Proxy-Authorization"]`.
        || generic_type(value)
        // The examples of documentation: `password1`, `a%20secret`.
        || (lower.starts_with("password") && lower[8..].chars().all(|c| c.is_ascii_digit()))
        || lower.replace("%20", " ").ends_with(" secret")
        || (value.contains('.')
            && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_'))
}

/// `Name<...` or `name[...`: a type with parameters, or an index, in code.
fn generic_type(value: &str) -> bool {
    let Some(at) = value.find(['<', '[']) else {
        return false;
    };
    let (name, rest) = value.split_at(at);
    let word = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.');
    word && (rest.starts_with('[') || name.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// A token in an `Authorization` header, unless it is a placeholder: long
/// and varied enough to be one.
fn header_credential(value: &str) -> bool {
    !placeholder(value) && entropy(value) >= 3.0
}

/// A password in a URL, unless it is a placeholder.
fn url_password(value: &str) -> bool {
    !placeholder(value)
}

/// A password given literally (not a placeholder or a reference).
fn literal_password(value: &str) -> bool {
    !placeholder(value) && !identifier(value)
}

/// A type named with its width (`Uint8Array`, `Float64Array`): code.
fn sized_type(value: &str) -> bool {
    let b = value.as_bytes();
    let lower = |i: usize| b.get(i).is_some_and(u8::is_ascii_lowercase);
    let mut i = 1;
    if !b.first().is_some_and(u8::is_ascii_uppercase) {
        return false;
    }
    while lower(i) {
        i += 1;
    }
    let digits = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    if i == digits || !b.get(i).is_some_and(u8::is_ascii_uppercase) {
        return false;
    }
    i += 1;
    let rest = i;
    while lower(i) {
        i += 1;
    }
    i > rest && i == b.len()
}

/// An identifier (`user_password`, `newPassword`): code naming a variable.
fn identifier(value: &str) -> bool {
    if sized_type(value) {
        return true;
    }
    let words_only = value.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    words_only
        && (value.contains('_')
            || value.chars().any(|c| c.is_ascii_uppercase())
            || value.len() < 12)
}

/// A secret or token value: long, varied, and random-looking.
fn random_secret(value: &str) -> bool {
    value.len() >= 16
        && !placeholder(value)
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
        && entropy(value) >= 3.5
}

/// Shannon entropy in bits per character.
fn entropy(value: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in value.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = value.chars().count() as f64;
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum()
}

struct Compiled {
    set: RegexSet,
    each: Vec<Regex>,
}

/// A rule's pattern with ASCII word boundaries: every key name and prefix
/// the rules look for is ASCII, and with a Unicode `\b` the regex engine
/// leaves its fast automaton for a slow one on any text that is not all
/// ASCII (measured: 5 MB/s, which made a 100 MB import spend 80% of its
/// time here).
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

fn compiled() -> &'static Compiled {
    static RULESET: OnceLock<Compiled> = OnceLock::new();
    RULESET.get_or_init(|| Compiled {
        set: regex::RegexSetBuilder::new(RULES.iter().map(|r| ascii_boundaries(r.pattern)))
            .dfa_size_limit(16 << 20)
            .build()
            .expect("the rules compile"),
        each: RULES
            .iter()
            .map(|r| Regex::new(&ascii_boundaries(r.pattern)).expect("the rules compile"))
            .collect(),
    })
}

/// Characters that show as nothing (zero-width spaces and joiners, the
/// word joiner, a byte-order mark, a soft hyphen): a key with one inside
/// still works once copied, so the rules look at the text without them.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{ad}'
    )
}

/// Every credential in `text`, in order (positions are `text`'s own, even
/// where invisible characters were skipped to find it).
pub fn scan(text: &str) -> Vec<Finding> {
    // The invisible characters' UTF-8 starts with one of these bytes: most
    // text has none, and is scanned as it is.
    if memchr::memchr3(0xe2, 0xef, 0xc2, text.as_bytes()).is_none() || !text.chars().any(invisible)
    {
        return scan_visible(text);
    }
    let mut visible = String::with_capacity(text.len());
    // For each byte of `visible`, where it is in `text`.
    let mut at = Vec::with_capacity(text.len() + 1);
    for (i, c) in text.char_indices() {
        if !invisible(c) {
            visible.push(c);
            at.extend(i..i + c.len_utf8());
        }
    }
    at.push(text.len());
    scan_visible(&visible)
        .into_iter()
        .map(|f| Finding {
            start: at[f.start],
            end: at[f.end - 1] + 1,
            ..f
        })
        .map(|f| Finding {
            // The last byte of a character, widened to the whole character.
            end: (f.end..=text.len())
                .find(|&e| text.is_char_boundary(e))
                .unwrap_or(text.len()),
            ..f
        })
        .collect()
}

/// Every credential in `text`, in order. One pass decides which rules can
/// match at all; only those look for where.
fn scan_visible(text: &str) -> Vec<Finding> {
    let rules = compiled();
    let mut found = Vec::new();
    for i in rules.set.matches(text).iter() {
        let rule = &RULES[i];
        for caps in rules.each[i].captures_iter(text) {
            let whole = caps.get(0).expect("a match");
            let (start, end) = match caps.get(1) {
                Some(value) => {
                    if rule.check.is_some_and(|ok| !ok(value.as_str())) {
                        continue;
                    }
                    (value.start(), value.end())
                }
                None => (whole.start(), whole.end()),
            };
            found.push(Finding {
                kind: rule.kind,
                line: 0,
                start,
                end,
            });
        }
    }
    found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
    // One finding per place: overlapping rules report the first.
    let mut kept: Vec<Finding> = Vec::with_capacity(found.len());
    for f in found {
        if kept.last().is_none_or(|k| f.start >= k.end) {
            kept.push(f);
        }
    }
    let mut line = 1;
    let mut counted = 0;
    for f in &mut kept {
        line += memchr::memchr_iter(b'\n', &text.as_bytes()[counted..f.start]).count();
        counted = f.start;
        f.line = line;
    }
    kept
}

/// The findings of `new` whose text was not already in `old` (a credential a
/// person stored is not the agent's to answer for; one the agent assembles
/// across two edits is).
pub fn introduced(old: &str, new: &str) -> Vec<Finding> {
    let found = scan(new);
    if found.is_empty() {
        return found; // the common case: one pass over the new text only
    }
    let before: std::collections::HashSet<&str> =
        scan(old).iter().map(|f| &old[f.start..f.end]).collect();
    found
        .into_iter()
        .filter(|f| !before.contains(&new[f.start..f.end]))
        .collect()
}

/// `text` with each finding replaced by `[REDACTED:<kind>]`.
pub fn redact(text: &str, findings: &[Finding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in findings {
        out.push_str(&text[at..f.start]);
        out.push_str(&format!("[REDACTED:{}]", f.kind));
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

/// "an aws_access_key_id on line 3 and a jwt on line 9": for messages,
/// never showing the credential itself.
pub fn describe(findings: &[Finding]) -> String {
    let parts: Vec<String> = findings
        .iter()
        .take(5)
        .map(|f| format!("{} on line {}", f.kind, f.line))
        .collect();
    let more = findings.len().saturating_sub(5);
    let mut out = parts.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

/// Every kind of credential the rules know, for documentation and tests.
pub fn kinds() -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = RULES.iter().map(|r| r.kind).collect();
    kinds.dedup();
    kinds
}
