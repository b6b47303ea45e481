//! `memfs undo --by WHO [--since TIME]`: everything one actor or session
//! did since a time, taken back in one step. Each file it touched is made
//! what it was before that actor's first change to it (a file it deleted
//! comes back, one it made goes, one it moved returns to its old name), as
//! new versions by the person who asked. A file someone else changed since
//! is refused, with nothing done, unless `force` (then their change goes
//! too).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::reply::Reply;
use crate::journal::{History, Op, Refusal, Row};
use crate::path::MemPath;
use crate::store::{Origin, Snapshot, Store, Window};

/// The sha256 of the file at `at` now; none if no file is there.
pub(super) fn sha_now(store: &Store, at: &MemPath) -> Option<String> {
    match store.snapshot(at, 0, Window { skip: 0, take: 0 }, &|_| false) {
        Ok(Snapshot::File(data)) => Some(crate::digest::Sha::of(&data).hex()),
        _ => None,
    }
}

/// What a path held at a moment of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    Absent,
    /// The content of a version (its hash; its bytes are that version's).
    Content {
        version: u64,
        sha: String,
    },
    /// What the history cannot say any more (redacted, or pruned).
    Unknown(&'static str),
}

impl Held {
    fn sha(&self) -> Option<&str> {
        match self {
            Held::Content { sha, .. } => Some(sha),
            _ => None,
        }
    }
}

/// What the undo asks for.
pub struct Ask<'a> {
    /// An actor as `memfs log` shows it (`agent:mount(claude)`), or a
    /// session's name (`claude-code`).
    pub by: &'a str,
    /// RFC 3339 (UTC); changes at or after it. None: all the history keeps.
    pub since: Option<&'a str>,
    pub force: bool,
    pub dry_run: bool,
    pub uid: u32,
    pub pid: u32,
    /// Only these of its changes (the review page's groups). None: all.
    pub versions: Option<&'a [u64]>,
    /// Who asks, when memfs knows better than the process (the page).
    pub via: Option<&'a str>,
}

fn chosen(row: &Row, ask: &Ask) -> bool {
    let actor = &row.actor;
    let by = actor.short() == ask.by || actor.session.as_deref() == Some(ask.by);
    by && ask.since.is_none_or(|s| row.time.as_str() >= s)
        && ask.versions.is_none_or(|v| v.contains(&row.id()))
        && !matches!(row.op, Op::Prune | Op::Void | Op::Found)
}

/// Each path the actor changed: what it held before and after.
type Paths = BTreeMap<String, (Held, Held)>;

/// For each path the chosen rows touched: what it held before the first
/// of them, and after the last.
fn before_and_after(rows: &[Row], ask: &Ask) -> Result<Paths, Refusal> {
    let by_version: HashMap<u64, &Row> = rows.iter().map(|r| (r.id(), r)).collect();
    let content_of = |v: u64| match by_version.get(&v) {
        Some(r) if r.redacted => Held::Unknown("redacted"),
        Some(r) if r.pruned => Held::Unknown("pruned by the retention"),
        Some(r) => r
            .sha256
            .clone()
            .map_or(Held::Absent, |sha| Held::Content { version: v, sha }),
        None => Held::Unknown("pruned by the retention"),
    };
    let mut paths: BTreeMap<String, (Held, Held)> = BTreeMap::new();
    let mut touch = |path: &str, before: Held, after: Held| {
        let kept = after.clone();
        paths.entry(path.to_string()).or_insert((before, kept)).1 = after;
    };
    for row in rows.iter().filter(|r| chosen(r, ask)) {
        if row.exchanged {
            return Err(Refusal(format!(
                "version {} swapped two files; undo it with memfs revert, file by file",
                row.version
            )));
        }
        let before = row.replaces.map_or(Held::Absent, |r| content_of(r.0));
        let after = match (&row.sha256, row.redacted) {
            (_, true) => Held::Unknown("redacted"),
            (Some(sha), false) => Held::Content {
                version: row.id(),
                sha: sha.clone(),
            },
            (None, false) => Held::Absent,
        };
        if let (Some(from), Op::Rename | Op::Overwrite) = (&row.from, row.op) {
            // What moved was at `from` before.
            touch(from, after.clone(), Held::Absent);
        }
        touch(&row.path, before, after);
    }
    Ok(paths)
}

/// `Request::UndoSession`: the history read once, every path checked
/// against what the actor left before anything is done, then each path
/// restored.
pub fn run(store: &Arc<Store>, history: &History, ask: &Ask) -> Result<Reply, Refusal> {
    let rows = history.all()?;
    let paths = before_and_after(&rows, ask)?;
    if paths.is_empty() {
        let since = ask.since.map(|s| format!(" since {s}")).unwrap_or_default();
        return Err(Refusal(format!(
            "no changes by {}{since} in the history (memfs log shows who changed what)",
            crate::text::label(ask.by)
        )));
    }
    let plan = plan(store, &paths, ask)?;
    let verb = |held: &Held| match held {
        Held::Absent => "removed",
        _ => "restored",
    };
    let mut said = String::new();
    for (at, target, _) in &plan {
        said.push_str(&format!("{at}: {}\n", verb(target)));
    }
    if ask.dry_run || plan.is_empty() {
        let head = match plan.is_empty() {
            true => "nothing to undo: every file is already as it was\n".to_string(),
            false => format!("would undo {} file(s):\n", plan.len()),
        };
        return Ok(Reply::ok(format!("{head}{said}")));
    }
    let first = rows
        .iter()
        .filter(|r| chosen(r, ask))
        .map(Row::id)
        .min()
        .unwrap_or(0);
    let origin = Origin::Revert {
        uid: ask.uid,
        pid: ask.pid,
        version: first,
        note: Some(
            format!(
                "undoes what {} changed from version {first}",
                crate::text::label(ask.by)
            )
            .into(),
        ),
        by: ask.via.map(Into::into),
    };
    restore(store, history, &plan, &origin, &said)?;
    Ok(Reply::ok(format!("undid {} file(s):\n{said}", plan.len())))
}

/// One path to bring back: where, what it held before, its sha now.
type Step = (MemPath, Held, Option<String>);

/// What to bring back of `paths`, each checked against what the actor
/// left: refused, with every path that cannot be, when one changed since
/// (unless `force`) or its earlier content is gone.
fn plan(store: &Store, paths: &Paths, ask: &Ask) -> Result<Vec<Step>, Refusal> {
    let mut plan = Vec::new();
    let mut changed_since = Vec::new();
    // A path whose earlier content the history no longer has: refused even
    // with `force` (there is nothing to bring back).
    let mut lost_before = false;
    for (path, (before, after)) in paths {
        let Ok(at) = MemPath::parse(path) else {
            continue; // a redacted path
        };
        let now = sha_now(store, &at);
        if let Held::Unknown(why) = before {
            changed_since.push(format!("{path} (what it held before is {why})"));
            lost_before = true;
            continue;
        }
        if now.as_deref() == before.sha() {
            continue; // as it was already (undone before, or changed back)
        }
        if now.as_deref() != after.sha() || matches!(after, Held::Unknown(_)) {
            changed_since.push(format!("{path} (changed since by someone else)"));
            if !ask.force {
                continue;
            }
        }
        plan.push((at, before.clone(), now));
    }
    let blocked = lost_before || (!changed_since.is_empty() && !ask.force);
    if blocked {
        let more = match ask.force {
            true => "",
            false => "; nothing was changed. `--force` takes back their changes to those files too",
        };
        return Err(Refusal(format!(
            "not undone: {} file(s) cannot be brought back as they were: {}{more}",
            changed_since.len(),
            changed_since.join(", ")
        )));
    }
    Ok(plan)
}

/// Brings each path of `plan` back, as a change of `origin`'s.
fn restore(
    store: &Store,
    history: &History,
    plan: &[Step],
    origin: &Origin,
    said: &str,
) -> Result<(), Refusal> {
    for (at, target, now) in plan {
        let done = match target {
            Held::Absent => store.remove_expecting(at, origin.clone(), now.as_deref()),
            Held::Content { version, .. } => {
                let (_, data) = history.content(*version)?;
                match now {
                    None => store.create_file(at, data, false, origin.clone()),
                    Some(now) => {
                        store.create_file_expecting(at, data, true, origin.clone(), Some(now))
                    }
                }
            }
            Held::Unknown(_) => continue,
        };
        done.and_then(|t| t.wait()).map_err(|e| {
            Refusal(format!(
                "cannot undo {at}: {e} (the files before it in this list were undone)\n{said}"
            ))
        })?;
    }
    Ok(())
}
