//! One row of the history: a version of one file (or an event of the
//! history itself), as it is kept on disk and printed by `memfs log --json`.

use serde::{Deserialize, Serialize};

use crate::store::Origin;

/// What a version did to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// The file came to be with this content.
    Create,
    /// The file's content changed.
    Write,
    /// A person saved over an agent's change they had not read (a lost
    /// update); the replaced version is in `replaces`.
    Overwrite,
    /// The file was deleted (alone, or with its directory).
    Delete,
    /// The file moved here from `from`.
    Rename,
    /// memfs removed the file because nobody read or wrote it for a while.
    Expire,
    /// `memfs revert` made the file what it was at another version.
    Revert,
    /// memfs found the file in this state when it started (a change made
    /// while no memfs ran, or one a crash cut off from its version).
    Found,
    /// Old history was dropped by the retention policy (`note` says what).
    Prune,
    /// A version that did not take effect (only in histories written
    /// before the journal; never shown).
    Void,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Write => "write",
            Op::Overwrite => "overwrite",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Expire => "expire",
            Op::Revert => "revert",
            Op::Found => "found",
            Op::Prune => "prune",
            Op::Void => "void",
        }
    }

    /// Whether the version leaves content at its path.
    pub fn leaves_content(self) -> bool {
        matches!(
            self,
            Op::Create | Op::Write | Op::Overwrite | Op::Rename | Op::Revert | Op::Found
        )
    }
}

/// Who made a version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `agent`, `person`, `api` or `memfs`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// The name of the HTTP API token that made it (kind `api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The API request that made it (its tag: a hash of the token and what
    /// it asked), by which a retry of that request is answered from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Who wrote it first, elsewhere (an imported git commit's author,
    /// `Name <email>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// When it was written there (RFC 3339): the row's `time` is when
    /// memfs recorded it (retention's age reads that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authored: Option<String>,
}

impl Actor {
    pub fn memfs() -> Actor {
        Actor {
            kind: "memfs".into(),
            ..Actor::default()
        }
    }

    /// The actor of a change by `origin`.
    pub fn of(origin: &Origin) -> Actor {
        match origin {
            Origin::Agent { door, session } => Actor {
                kind: "agent".into(),
                door: Some(door.name().into()),
                session: session.as_deref().map(str::to_string),
                ..Actor::default()
            },
            Origin::Person { uid, pid, process } => Actor::through_the_mount(*uid, *pid, process),
            Origin::Revert { uid, pid, by, .. } => Actor {
                kind: "person".into(),
                uid: Some(*uid),
                pid: Some(*pid),
                process: Some(by.as_deref().unwrap_or("memfs").to_string()),
                ..Actor::default()
            },
            Origin::Import {
                uid,
                pid,
                author,
                authored,
                key,
            } => Actor {
                kind: "person".into(),
                uid: Some(*uid),
                pid: Some(*pid),
                process: Some("memfs-import".into()),
                request: key.as_deref().map(str::to_string),
                author: author.as_deref().map(str::to_string),
                authored: authored.as_deref().map(str::to_string),
                ..Actor::default()
            },
            Origin::Files { uid, by } => Actor::through_the_files(*uid, by.as_ref()),
            Origin::Remote { host, version } => Actor {
                kind: "remote".into(),
                door: Some("http".into()),
                process: Some(host.to_string()),
                request: version.as_deref().map(str::to_string),
                ..Actor::default()
            },
            Origin::Memfs | Origin::Expiry => Actor::memfs(),
            Origin::Api { token, request } => Actor {
                kind: "api".into(),
                token: Some(token.to_string()),
                request: request.as_deref().map(str::to_string),
                ..Actor::default()
            },
        }
    }

    /// A process writing through the mount: a person's, or an agent's
    /// program (Claude Code's Write and Edit on its auto memory: the
    /// agent's change, for review, with the process it came from).
    fn through_the_mount(uid: u32, pid: u32, process: &crate::store::Process) -> Actor {
        let agent = process.is_agent_program();
        Actor {
            kind: if agent { "agent" } else { "person" }.into(),
            door: agent.then(|| "mount".into()),
            session: agent.then(|| process.as_str().to_string()),
            uid: Some(uid),
            pid: Some(pid),
            process: Some(process.as_str().to_string()),
            ..Actor::default()
        }
    }

    /// A change to the plain files: a person's, or an agent's program's
    /// where the kernel named the writer (Claude Code's auto memory on the
    /// plain files, `claude-code enable --no-mount`).
    fn through_the_files(uid: u32, by: Option<&crate::store::Writer>) -> Actor {
        let mut actor = match by {
            Some(w) => Actor::through_the_mount(uid, w.pid, &w.process),
            None => Actor {
                kind: "person".into(),
                uid: Some(uid),
                ..Actor::default()
            },
        };
        actor.door = Some("files".into());
        actor
    }

    /// Short form for the table: `agent:mcp(claude)`, `person:vim[1000]`,
    /// `person:files(sed)`, `memfs`.
    pub fn short(&self) -> String {
        match self.kind.as_str() {
            "agent" => {
                let mut s = format!("agent:{}", self.door.as_deref().unwrap_or("?"));
                if let Some(session) = &self.session {
                    s.push_str(&format!("({})", crate::text::printable(session)));
                }
                s
            }
            "person" if self.door.as_deref() == Some("files") => match &self.process {
                Some(p) => format!("person:files({})", crate::text::printable(p)),
                None => "person:files".to_string(),
            },
            "person" if self.author.is_some() => format!(
                "person:{}",
                crate::text::printable(self.author.as_deref().unwrap_or("?"))
            ),
            "person" => format!(
                "person:{}[{}]",
                crate::text::printable(self.process.as_deref().unwrap_or("?")),
                self.uid.map_or("?".to_string(), |u| u.to_string())
            ),
            "api" => format!(
                "api:{}",
                crate::text::printable(self.token.as_deref().unwrap_or("?"))
            ),
            "remote" => format!(
                "remote:{}",
                crate::text::printable(self.process.as_deref().unwrap_or("?"))
            ),
            other => other.to_string(),
        }
    }
}

/// A version's id: a number, unique across hosts with its origin, growing
/// with time. It is written as a decimal string (in the journal, the
/// database and `memfs log --json`, as it always was), and read from one or
/// from a number; any other text is an error, never a 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VersionId(pub u64);

impl std::fmt::Display for VersionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for VersionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for VersionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = VersionId;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a version id (a decimal number)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<VersionId, E> {
                Ok(VersionId(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<VersionId, E> {
                v.parse()
                    .map(VersionId)
                    .map_err(|_| E::custom(format!("not a version id: {}", crate::text::clip(v))))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The note on the rows of an exchange.
pub const EXCHANGED_NOTE: &str = "exchanged";
/// The note on a version that merges two changes made from the same
/// version: a person's save that lost a race to another host's change on
/// a shared store (the version before this one is that change's), or this
/// machine's edit and another's met in a store over HTTP (the version
/// before this one is this machine's).
pub const MERGED_NOTE: &str =
    "merged: this host's change and another host's, made from the same version, both kept";
/// The note on a file found when the journal began, its content not copied.
pub const BEFORE_HISTORY_NOTE: &str =
    "there before the history began; its content is kept at its first change";

/// Stands for an erased path.
pub const REDACTED_PATH: &str = "[redacted]";

/// One version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Its id: unique in this data dir, growing with time.
    pub version: VersionId,
    /// When it was recorded (RFC 3339, UTC).
    pub time: String,
    pub actor: Actor,
    pub op: Op,
    /// The file's path (`/memories/...`).
    pub path: String,
    /// A rename's old path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The content at `path` after this version; none for a delete, an
    /// expiry and a redacted version.
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The version whose content stood at `path` before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<VersionId>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// The retention policy dropped this version's content; the row stays
    /// while it is the current version of a file (its `sha256` still says
    /// what the file holds).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pruned: bool,
    /// Words for people (`memfs log` prints them); nothing keys on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// One of the two rows of an exchange (`renameat2(RENAME_EXCHANGE)`):
    /// its `from` still holds a file (the other one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exchanged: bool,
    /// A file found when the history began: its content is the plain
    /// file's, copied into the journal only at the file's first change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_history: bool,
    /// The journal's batch that holds it.
    #[serde(default)]
    pub batch: u64,
    /// The change it is part of: one tool command, one person's save, one
    /// act of memfs' own (a number of the journal's, never reused). Applying
    /// a change twice is a no-op: a replica skips change ids it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<u64>,
    /// The data dir (or host) whose journal made it: a version is unique
    /// across hosts as `origin` plus `version`. Filled in when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl Row {
    /// A row that names no content, replaces nothing and carries no marker
    /// or note (the fields each maker sets on top of it).
    pub fn new(version: u64, time: &str, actor: Actor, op: Op, path: String, batch: u64) -> Row {
        Row {
            version: VersionId(version),
            time: time.to_string(),
            actor,
            op,
            path,
            from: None,
            sha256: None,
            size: None,
            replaces: None,
            redacted: false,
            pruned: false,
            note: None,
            exchanged: false,
            before_history: false,
            batch,
            change: None,
            origin: None,
        }
    }

    /// A `found` row that records the file gone (memfs found it deleted
    /// while no memfs ran): no content, and not because of a redaction.
    pub fn found_gone(&self) -> bool {
        self.op == Op::Found && self.sha256.is_none() && !self.redacted
    }

    /// Whether the row leaves content at its path.
    pub fn leaves_content(&self) -> bool {
        self.op.leaves_content() && !self.found_gone()
    }

    pub fn id(&self) -> u64 {
        self.version.0
    }

    /// Whether the row is one of an exchange's two ([`Row::exchanged`]; a
    /// row written before the field says so in its note).
    pub fn is_exchanged(&self) -> bool {
        self.exchanged || self.note.as_deref() == Some(EXCHANGED_NOTE)
    }

    /// Whether the row is a file found when the history began
    /// ([`Row::before_history`]; a row written before the field says so in
    /// its note).
    pub fn is_before_history(&self) -> bool {
        self.before_history || self.note.as_deref() == Some(BEFORE_HISTORY_NOTE)
    }

    /// One line of `memfs log`: `42  2026-11-30 15:04:05  agent:mcp  write  /memories/a.md`.
    pub fn table_line(&self) -> String {
        let time = self.time.get(..19).unwrap_or(&self.time).replace('T', " ");
        let mut line = format!(
            "{:>6}  {}  {:<22} {:<9} {}",
            self.version,
            time,
            self.actor.short(),
            self.op.as_str(),
            self.path
        );
        if let Some(from) = &self.from {
            line.push_str(&format!(" (from {from})"));
        }
        if let Some(replaces) = &self.replaces {
            if self.op == Op::Overwrite {
                line.push_str(&format!(
                    " (over {replaces}, which its writer had not read)"
                ));
            }
        }
        if self.redacted {
            line.push_str(" [redacted]");
        }
        if self.pruned {
            line.push_str(" [content pruned]");
        }
        if let Some(note) = &self.note {
            line.push_str(&format!("  {note}"));
        }
        // Paths and notes are checked where they come in; this line is
        // printed to a terminal, so whatever an older data dir holds never
        // reaches it raw.
        crate::text::printable(&line).into_owned()
    }
}

/// A row for tests: version `v` of change `change`, by memfs, with a
/// content (none for a delete). (Compiled always: the tests of the crates
/// above use it, and a `cfg(test)` item is only in this crate's own tests.)
#[doc(hidden)]
pub fn example(v: u64, change: u64, op: Op, path: &str, from: Option<&str>) -> Row {
    let time = format!("2026-12-02T00:00:{:02}Z", v % 60);
    Row {
        from: from.map(str::to_string),
        sha256: (op != Op::Delete).then(|| "00".repeat(32)),
        size: Some(1),
        change: Some(change),
        ..Row::new(v, &time, Actor::memfs(), op, path.into(), 0)
    }
}

#[cfg(test)]
mod version_ids {
    use super::VersionId;

    #[test]
    fn a_version_id_is_written_as_text_and_read_from_text_or_a_number() {
        assert_eq!(serde_json::to_string(&VersionId(42)).unwrap(), "\"42\"");
        assert_eq!(
            serde_json::from_str::<VersionId>("\"42\"").unwrap(),
            VersionId(42)
        );
        assert_eq!(
            serde_json::from_str::<VersionId>("42").unwrap(),
            VersionId(42)
        );
        let bad = serde_json::from_str::<VersionId>("\"4x2\"").unwrap_err();
        assert!(bad.to_string().contains("not a version id"), "{bad}");
        assert!(serde_json::from_str::<VersionId>("-1").is_err());
    }
}

#[cfg(test)]
mod markers {
    use super::{example, Op, Row, BEFORE_HISTORY_NOTE, EXCHANGED_NOTE};

    #[test]
    fn a_marker_is_a_field_and_an_older_rows_note_still_says_it() {
        let mut r = example(1, 1, Op::Rename, "/memories/a", Some("/memories/b"));
        assert!(!r.is_exchanged() && !r.is_before_history());
        r.exchanged = true;
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"exchanged\":true"), "{text}");
        assert!(serde_json::from_str::<Row>(&text).unwrap().is_exchanged());
        // Written before the fields: the note alone.
        let mut old = example(2, 2, Op::Found, "/memories/c", None);
        old.note = Some(BEFORE_HISTORY_NOTE.into());
        let read: Row = serde_json::from_str(&serde_json::to_string(&old).unwrap()).unwrap();
        assert!(read.is_before_history() && !read.before_history);
        old.note = Some(EXCHANGED_NOTE.into());
        assert!(old.is_exchanged());
        // Other words in a note mean nothing.
        old.note = Some("exchanged, said a person".into());
        assert!(!old.is_exchanged());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Process;

    #[test]
    fn claude_codes_writes_through_the_mount_are_the_agents() {
        let by = |name: &str| {
            Actor::of(&Origin::Person {
                uid: 1000,
                pid: 4242,
                process: Process::new(name),
            })
        };
        let claude = by("claude");
        assert_eq!(claude.kind, "agent");
        assert_eq!(claude.short(), "agent:mount(claude)");
        assert_eq!((claude.pid, claude.uid), (Some(4242), Some(1000)));
        let vim = by("vim");
        assert_eq!(vim.kind, "person");
        assert_eq!(vim.short(), "person:vim[1000]");
        // A name that only begins like it is a person's program.
        assert_eq!(by("claude-notes").kind, "person");
    }

    #[test]
    fn the_plain_files_writer_is_named_when_the_kernel_told_it() {
        let by = |name: Option<&str>| {
            Actor::of(&Origin::Files {
                uid: 1000,
                by: name.map(|n| crate::store::Writer {
                    pid: 77,
                    process: Process::new(n),
                }),
            })
        };
        let claude = by(Some("claude"));
        assert_eq!(claude.short(), "agent:files(claude)");
        assert_eq!((claude.pid, claude.uid), (Some(77), Some(1000)));
        assert_eq!(by(Some("vim")).short(), "person:files(vim)");
        assert_eq!(by(Some("vim")).session, None);
        assert_eq!(by(None).short(), "person:files");
        assert_eq!(by(None).pid, None);
    }
}
