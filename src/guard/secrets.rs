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
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
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
        pattern: r"\b(AIza[0-9A-Za-z_\-]{35})(?:[^0-9A-Za-z_\-]|$)",
        check: None,
    },
    Rule {
        kind: "gcp_service_account_key",
        pattern: r#""private_key_id"\s*:\s*"[0-9a-f]{40}""#,
        check: None,
    },
    Rule {
        kind: "google_oauth_client_secret",
        pattern: r"\bGOCSPX-[A-Za-z0-9_\-]{28}",
        check: None,
    },
    Rule {
        kind: "azure_storage_connection_string",
        pattern: r"(?i)AccountKey=([A-Za-z0-9+/]{40,}={0,2})",
        check: None,
    },
    Rule {
        kind: "anthropic_api_key",
        pattern: r"\bsk-ant-[a-z]{3,5}\d{2}-[A-Za-z0-9_\-]{32,}",
        check: None,
    },
    Rule {
        kind: "openai_api_key",
        pattern: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}|\bsk-proj-[A-Za-z0-9_\-]{40,}",
        check: None,
    },
    Rule {
        kind: "github_token",
        pattern: r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}\b|\bgithub_pat_[A-Za-z0-9_]{82}\b",
        check: None,
    },
    Rule {
        kind: "gitlab_token",
        pattern: r"\b(glpat-[A-Za-z0-9_\-]{20})(?:[^A-Za-z0-9_\-]|$)",
        check: None,
    },
    Rule {
        kind: "slack_token",
        pattern: r"\bxox[abposr]-[0-9]{6,}-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
        check: None,
    },
    Rule {
        kind: "stripe_key",
        pattern: r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{24,}\b",
        check: None,
    },
    Rule {
        kind: "huggingface_token",
        pattern: r"\bhf_[A-Za-z0-9]{34}\b",
        check: None,
    },
    Rule {
        kind: "npm_token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        check: None,
    },
    Rule {
        kind: "pypi_token",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
        check: None,
    },
    Rule {
        kind: "sendgrid_api_key",
        pattern: r"\b(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})(?:[^A-Za-z0-9_\-]|$)",
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
        pattern: r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        check: None,
    },
    Rule {
        kind: "database_url_password",
        pattern: r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver)://[^\s:/@]+:([^\s@/]+)@",
        check: Some(url_password),
    },
    Rule {
        kind: "password_assignment",
        pattern: r#"(?i)\b(?:password|passwd|pwd)["']?\s*[:=]\s*["']?([^\s"'`,;)]+)"#,
        check: Some(literal_password),
    },
    Rule {
        kind: "secret_assignment",
        pattern: r#"(?i)\b(?:secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|auth[_-]?token|secret[_-]?key)["']?\s*[:=]\s*["']?([^\s"'`,;)]+)"#,
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
        || ["env", "getenv", "environ", "process.", "os.", "config", "settings", "self.", "args", "opts", "options"]
            .iter()
            .any(|p| lower.starts_with(p))
        // A name, not a value: `password = password_hash(...)`, `pwd = get_pwd()`.
        || value.contains('(')
        || (value.contains('.')
            && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_'))
}

/// A password in a URL, unless it is a placeholder.
fn url_password(value: &str) -> bool {
    !placeholder(value)
}

/// A password given literally (not a placeholder or a reference).
fn literal_password(value: &str) -> bool {
    !placeholder(value) && !identifier(value)
}

/// An identifier (`user_password`, `newPassword`): code naming a variable.
fn identifier(value: &str) -> bool {
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

fn compiled() -> &'static Compiled {
    static RULESET: OnceLock<Compiled> = OnceLock::new();
    RULESET.get_or_init(|| Compiled {
        set: RegexSet::new(RULES.iter().map(|r| r.pattern)).expect("the rules compile"),
        each: RULES
            .iter()
            .map(|r| Regex::new(r.pattern).expect("the rules compile"))
            .collect(),
    })
}

/// Every credential in `text`, in order. One pass decides which rules can
/// match at all; only those look for where.
pub fn scan(text: &str) -> Vec<Finding> {
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
