//! The history commands (`memfs log`, `show`, `diff`, `revert`, `redact`,
//! `export --git`, `expire`) as requests: run here by the process that owns
//! the data dir, whether the CLI opened it itself or asked the owner through
//! its socket (`{"type": "memfs_history", ...}`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Control;
use crate::journal::{History, Op, Refusal, Row};
use crate::path::MemPath;
use crate::store::{Origin, Snapshot, Store, Window};

/// The control line's type.
pub const TYPE: &str = "memfs_history";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    Log {
        path: Option<String>,
        json: bool,
        /// Also editor scratch files (swap files, backups) and hidden names.
        #[serde(default)]
        all: bool,
    },
    Show {
        version: String,
    },
    Diff {
        version: String,
        against: Option<String>,
    },
    Revert {
        version: String,
        uid: u32,
        pid: u32,
    },
    Redact {
        version: String,
        path: bool,
    },
    Export,
    /// The plain files brought up to date now.
    Checkpoint,
    Expire {
        idle: String,
        dry_run: bool,
        path: Option<String>,
    },
}

/// What the CLI prints: `out` to stdout, `err` to stderr, and its exit code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub code: u8,
    #[serde(with = "b64")]
    pub out: Vec<u8>,
    pub err: String,
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

impl Reply {
    fn ok(out: impl Into<Vec<u8>>) -> Reply {
        Reply {
            code: 0,
            out: out.into(),
            err: String::new(),
        }
    }

    pub fn error(err: impl Into<String>) -> Reply {
        Reply {
            code: 1,
            out: Vec::new(),
            err: err.into(),
        }
    }

    /// The reply as one control answer line.
    pub fn to_line(&self) -> String {
        let mut v = serde_json::to_value(self).expect("a reply serializes");
        v["type"] = TYPE.into();
        v.to_string()
    }

    pub fn from_line(line: &str) -> Reply {
        match serde_json::from_str::<Reply>(line) {
            Ok(reply) => reply,
            Err(_) => {
                // An owner too old to know history, or an error line.
                let text = serde_json::from_str::<serde_json::Value>(line)
                    .ok()
                    .and_then(|v| v["content"].as_str().map(str::to_string))
                    .unwrap_or_else(|| line.to_string());
                Reply::error(format!(
                    "the memfs that owns the data dir answered: {}",
                    crate::tool::clip_text(&text)
                ))
            }
        }
    }
}

impl From<Refusal> for Reply {
    fn from(r: Refusal) -> Reply {
        Reply::error(r.0)
    }
}

fn version(text: &str) -> Result<u64, Refusal> {
    text.trim().trim_start_matches('v').parse().map_err(|_| {
        Refusal(format!(
            "`{}` is not a version; versions are numbers, as `memfs log` shows them",
            crate::tool::clip_text(text)
        ))
    })
}

fn path(text: Option<&str>) -> Result<MemPath, Refusal> {
    let Some(text) = text else {
        return Ok(MemPath::root());
    };
    // `memfs log notes/a.md` reads as `/memories/notes/a.md`.
    let full = if text.starts_with("/memories") {
        text.to_string()
    } else {
        format!("/memories/{}", text.trim_start_matches('/'))
    };
    MemPath::parse(&full).map_err(|e| {
        Refusal(format!(
            "invalid path `{}`: {e}",
            crate::tool::clip_text(text)
        ))
    })
}

/// Runs a request against the memory `store` serves.
pub fn handle(store: &Arc<Store>, control: &Control, request: &Request) -> Reply {
    let Some(history) = control.history() else {
        return Reply::error("this memory keeps no history");
    };
    match run(store, history, request) {
        Ok(reply) => reply,
        Err(refusal) => refusal.into(),
    }
}

fn run(store: &Arc<Store>, history: &History, request: &Request) -> Result<Reply, Refusal> {
    match request {
        Request::Log {
            path: at,
            json,
            all,
        } => {
            let at = path(at.as_deref())?;
            let scratch = crate::tool::Hide::new(
                crate::tool::EDITOR_ARTIFACTS
                    .iter()
                    .map(|p| p.to_string())
                    .chain([".*".to_string()]),
            );
            let mut out = String::new();
            for row in history.log(&at)? {
                let name = row.path.rsplit('/').next().unwrap_or_default();
                if !*all && row.op != Op::Prune && scratch.hides(name) {
                    continue;
                }
                if *json {
                    out.push_str(&serde_json::to_string(&row).expect("a row serializes"));
                } else {
                    out.push_str(&row.table_line());
                }
                out.push('\n');
            }
            Ok(Reply::ok(out))
        }
        Request::Show { version: v } => Ok(Reply::ok(history.content(version(v)?)?.1)),
        Request::Diff {
            version: v,
            against,
        } => {
            let (row, old) = content_or_empty(history, version(v)?)?;
            let (label, new) = match against {
                Some(w) => {
                    let (other, data) = content_or_empty(history, version(w)?)?;
                    (format!("{} (version {})", other.path, other.version), data)
                }
                None => {
                    let at = MemPath::parse(&row.path)
                        .map_err(|_| Refusal(format!("version {v} has no path to compare with")))?;
                    let now = match store.snapshot(&at, 0, Window { skip: 0, take: 0 }, &|_| false)
                    {
                        Ok(Snapshot::File(data)) => data.to_vec(),
                        _ => Vec::new(),
                    };
                    (format!("{} (now)", row.path), now)
                }
            };
            let before = format!("{} (version {})", row.path, row.version);
            Ok(Reply::ok(unified(&before, &old, &label, &new)))
        }
        Request::Revert {
            version: v,
            uid,
            pid,
        } => {
            let v = version(v)?;
            let (at, data, row) = history.revert_target(v)?;
            let note = match row.op {
                Op::Delete | Op::Expire | Op::Overwrite => {
                    format!("undoes version {v} ({})", row.op.as_str())
                }
                _ => format!("back to version {v}"),
            };
            let origin = Origin::Revert {
                uid: *uid,
                pid: *pid,
                version: v,
                note: Some(note.into()),
            };
            let ticket = store
                .create_file(&at, data, true, origin)
                .map_err(|e| Refusal(format!("cannot revert {at}: {e}")))?;
            ticket
                .wait()
                .map_err(|e| Refusal(format!("cannot revert {at}: {e}")))?;
            Ok(Reply::ok(format!("{at}: back to version {v}\n")))
        }
        Request::Redact { version: v, path } => {
            let said = history.redact(version(v)?, *path)?;
            Ok(Reply::ok(format!("{said}\n")))
        }
        Request::Export => Ok(Reply::ok(super::export::fast_import(history)?)),
        Request::Checkpoint => {
            history.checkpoint()?;
            Ok(Reply::ok("the plain files are current and on disk\n"))
        }
        Request::Expire {
            idle,
            dry_run,
            path: at,
        } => {
            let idle = crate::units::parse_duration(idle).map_err(Refusal)?;
            let at = path(at.as_deref())?;
            super::expire::run(store, &at, idle, *dry_run)
        }
    }
}

/// The content at a version; nothing for a delete (so a diff shows it all removed).
fn content_or_empty(history: &History, v: u64) -> Result<(Row, Vec<u8>), Refusal> {
    match history.content(v) {
        Ok(found) => Ok(found),
        Err(e) => match history.row(v)? {
            Some(row) if row.sha256.is_none() && !row.redacted => Ok((row, Vec::new())),
            _ => Err(e),
        },
    }
}

fn unified(before: &str, old: &[u8], after: &str, new: &[u8]) -> Vec<u8> {
    match (std::str::from_utf8(old), std::str::from_utf8(new)) {
        (Ok(a), Ok(b)) => similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .context_radius(3)
            .header(before, after)
            .to_string()
            .into_bytes(),
        _ if old == new => Vec::new(),
        _ => format!("Binary contents of {before} and {after} differ\n").into_bytes(),
    }
}
