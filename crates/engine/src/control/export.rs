//! The history as a `git fast-import` stream: one commit per version, its
//! author the version's actor, so that `git log -p` and `git blame` work on it.

use std::io::Write;

use crate::journal::{History, Op, Refusal, Row};

/// A name git will not check out (`.git` in any case, and the spellings
/// Windows and macOS take for it: trailing dots or spaces, `git~1`).
fn refused_by_git(name: &str) -> bool {
    let bare = name.trim_end_matches(['.', ' ']).to_ascii_lowercase();
    bare == ".git" || bare == "git~1"
}

/// The name a file or directory has in the export: its own, except that a
/// name git refuses gets `~memfs` after it (`.git` is exported as
/// `.git~memfs`), so that the rest of the memory still checks out.
pub fn exported_name(name: &str) -> std::borrow::Cow<'_, str> {
    match refused_by_git(name) {
        true => std::borrow::Cow::Owned(format!("{name}~memfs")),
        false => std::borrow::Cow::Borrowed(name),
    }
}

/// A path as fast-import reads it: C-style quoted, relative to the memory.
fn quoted(path: &str) -> Option<String> {
    let rel = path.strip_prefix("/memories/")?;
    let rel: Vec<_> = rel.split('/').map(exported_name).collect();
    let rel = rel.join("/");
    let mut out = String::from("\"");
    for c in rel.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    Some(out)
}

fn author(row: &Row) -> String {
    let a = &row.actor;
    if let Some(author) = &a.author {
        // An imported version keeps its author (`Name <email>`).
        let (name, email) = match author.rsplit_once(" <") {
            Some((name, rest)) => (name, rest.trim_end_matches('>')),
            None => (author.as_str(), "unknown"),
        };
        return format!("{} <{}>", clean(name), clean(email));
    }
    match a.kind.as_str() {
        "agent" => {
            let mut name = format!("agent via {}", a.door.as_deref().unwrap_or("?"));
            if let Some(s) = &a.session {
                name.push_str(&format!(" ({s})"));
            }
            format!("{} <agent@memfs>", clean(&name))
        }
        "person" => format!(
            "{} <uid{}@memfs>",
            clean(&format!(
                "person, {} (uid {})",
                a.process.as_deref().unwrap_or("?"),
                a.uid.map_or("?".into(), |u| u.to_string())
            )),
            a.uid.map_or("?".into(), |u| u.to_string())
        ),
        _ => "memfs <memfs@memfs>".to_string(),
    }
}

/// A name git accepts between `author ` and ` <`: no angle brackets or newlines.
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, '<' | '>' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

fn data(out: &mut Vec<u8>, bytes: &[u8]) {
    let _ = writeln!(out, "data {}", bytes.len());
    out.extend_from_slice(bytes);
    out.push(b'\n');
}

/// The whole kept history, oldest first, as a fast-import stream for `refs/heads/main`.
pub fn fast_import(history: &History) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::new();
    for row in history.all()? {
        // A repository a person keeps inside the memory is its tool's state,
        // not the memory's (`crate::path::TOOL_STATE`).
        if matches!(row.op, Op::Prune | Op::Void) || crate::path::is_tool_state(&row.path) {
            continue;
        }
        let Some(path) = quoted(&row.path) else {
            continue;
        };
        // (An imported version's time is its author's.)
        let when = row.actor.authored.as_deref().unwrap_or(&row.time);
        let secs = humantime::parse_rfc3339_weak(when)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let _ = writeln!(out, "commit refs/heads/main");
        let _ = writeln!(out, "author {} {secs} +0000", author(&row));
        let _ = writeln!(out, "committer memfs <memfs@memfs> {secs} +0000");
        let mut message = format!("{} {} (version {})", row.op.as_str(), row.path, row.version);
        if let Some(from) = &row.from {
            message.push_str(&format!("\n\nfrom {from}"));
        }
        if let Some(note) = &row.note {
            message.push_str(&format!("\n\n{note}"));
        }
        message.push('\n');
        data(&mut out, message.as_bytes());
        let from = row
            .from
            .as_deref()
            .filter(|f| !row.is_exchanged() && !crate::path::is_tool_state(f));
        if let Some(from) = from {
            if let Some(from) = quoted(from) {
                let _ = writeln!(out, "D {from}");
            }
        }
        match row.sha256.as_deref().and_then(|sha| history.blob(sha)) {
            Some(bytes) if row.op.leaves_content() => {
                let _ = writeln!(out, "M 100644 inline {path}");
                data(&mut out, &bytes);
            }
            _ if matches!(row.op, Op::Delete | Op::Expire)
                || row.sha256.is_none() && row.op == Op::Found =>
            {
                let _ = writeln!(out, "D {path}");
            }
            _ => {}
        }
        out.push(b'\n');
    }
    Ok(out)
}
