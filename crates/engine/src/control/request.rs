//! The history commands (`memfs log`, `show`, `diff`, `revert`, `redact`,
//! `export --git`, `expire`) as requests: run here by the process that owns
//! the data dir, whether the CLI opened it itself or asked the owner through
//! its socket (`{"type": "memfs_history", ...}`).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::undo_session::sha_now;
use super::Control;
use crate::journal::{Cursor, History, LogPage, Op, Refusal, Row};
use crate::path::MemPath;
use crate::store::{Origin, Snapshot, Store, Window};

pub use super::reply::{Reply, TYPE};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    Log {
        path: Option<String>,
        json: bool,
        /// Also editor scratch files (swap files, backups) and hidden names.
        #[serde(default)]
        all: bool,
        /// One page of it, from here (the reply's `next` says where the
        /// next begins); none: the whole history in one reply (as before).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        page: Option<crate::journal::LogPage>,
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
        /// Who asks, when memfs knows better than the process (the page).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    Redact {
        version: String,
        path: bool,
    },
    /// Takes back the change `version` made to its file, as this person's
    /// act: what it replaced comes back (a create is deleted, a rename
    /// moved back). Only while the file is still as that version left it.
    Undo {
        version: String,
        uid: u32,
        pid: u32,
        /// Who asks, when memfs knows better than the process (the page).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    Export,
    /// Everything `by` (an actor as `memfs log` shows it, or a session's
    /// name) changed since `since` (RFC 3339), taken back as this person's
    /// act (`memfs undo`; see `control::undo_session`).
    UndoSession {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
        /// Only these of its changes (the review page's groups: exactly
        /// what the page showed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        versions: Option<Vec<u64>>,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        dry_run: bool,
        uid: u32,
        pid: u32,
        /// Who asks, when memfs knows better than the process (the page).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    /// The plain files brought up to date now.
    Checkpoint,
    /// The bytes of content `sha` (a version's `sha256`), if the history keeps them.
    Blob {
        sha: String,
    },
    /// The rows the journal took in since `cursor` (everything, without
    /// one or after a rewrite), with the cursor past them and the number the
    /// next version will get: `{"next", "rows", "cursor", "all", "stuck"}`
    /// (what the page follows the memory with; `all`: start over with these
    /// rows; `stuck`: the paths the plain files cannot hold now, with why).
    Since {
        cursor: Option<crate::journal::Cursor>,
    },
    /// Everything in the memory deleted (`memfs clear`), credited to the
    /// session `session` through `door`.
    Clear {
        door: String,
        session: Option<String>,
    },
    Expire {
        idle: String,
        dry_run: bool,
        path: Option<String>,
    },
    /// One chunk of `memfs import`: files made versions of the person who
    /// ran it, unless the memory holds the same bytes there already (see
    /// `control::import`).
    Import {
        files: Vec<super::import::ImportFile>,
        /// Where they go: `/memories` or below.
        to: String,
        #[serde(default)]
        overwrite: bool,
        #[serde(default)]
        dry_run: bool,
        uid: u32,
        pid: u32,
        /// The git commit the chunk replays.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<super::import::Commit>,
    },
    /// The keys of imported versions beginning with `prefix`, one a line
    /// (what an earlier git import brought in).
    ImportKeys {
        prefix: String,
    },
    /// Full-text search (`memfs search`): the files that match `query`,
    /// best first, each with its first matched lines.
    Search {
        query: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        /// Only files below this path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        #[serde(default)]
        json: bool,
        /// Also editor scratch files and hidden names.
        #[serde(default)]
        all: bool,
        /// For an agent's door: left out is what the tool hides from the
        /// agent (`--hide`, hidden names), whatever `all` says.
        #[serde(default)]
        agent: bool,
    },
}

impl From<Refusal> for Reply {
    fn from(r: Refusal) -> Reply {
        Reply::error(r.0)
    }
}

/// A version as `memfs log` prints it (`42`), or with one `v` (`v42`):
/// digits only, no sign, space or leading zero, so that one version has
/// one spelling.
fn version(text: &str) -> Result<u64, Refusal> {
    let digits = text.strip_prefix('v').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    match canonical.then(|| digits.parse::<u64>().ok()).flatten() {
        Some(v) => Ok(v),
        None => Err(Refusal(format!(
            "`{}` is not a version; versions are numbers, as `memfs log` shows them",
            crate::text::label(text)
        ))),
    }
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
    MemPath::parse(&full)
        .map_err(|e| Refusal(format!("invalid path `{}`: {e}", crate::text::clip(text))))
}

/// Rows in one page of `log`: a page's reply stays near a megabyte.
const LOG_PAGE: usize = 5000;

/// Runs a request against the memory `store` serves.
pub fn handle(store: &Arc<Store>, control: &Control, request: &Request) -> Reply {
    store.catch_up(); // (the plain files' changes first: history, index)
    if let Request::Clear { door, session } = request {
        // Needs no history: the deletes are kept in it when there is one.
        return clear(store, door, session.as_deref());
    }
    if let Some(reply) = import(store, request) {
        return reply;
    }
    if let Request::Search {
        query,
        limit,
        path,
        json,
        all,
        agent,
    } = request
    {
        let asked = super::search::Asked {
            query,
            limit: *limit,
            path: path.as_deref(),
            json: *json,
            all: *all,
            agent: *agent,
        };
        return super::search::answer(control, &asked);
    }
    let Some(history) = control.history() else {
        return Reply::error("this memory keeps no history");
    };
    if store.is_shared() {
        // Other hosts' changes the tree shows reach the history once the
        // journal takes what the follower queued: a person who sees a
        // change in the mount finds it in `memfs log` too.
        let _ = store.barrier(Origin::Memfs).wait();
    }
    let reply = run(store, history, request).unwrap_or_else(Reply::from);
    if matches!(request, Request::Redact { .. }) && reply.code == 0 {
        purge_search(control);
    }
    reply
}

/// After a redaction (through any door): what it erased goes from the
/// search index's files before the answer (a deleted document's words stay
/// in them until the index is rewritten), not at the index's next look.
pub fn purge_search(control: &Control) {
    if let Some(search) = control.search() {
        if let Err(e) = search.catch_up() {
            tracing::warn!("the search index could not be purged after a redaction ({e}); its next look does it");
        }
    }
}

/// `memfs import`'s chunk, applied as one change (for an import request).
fn import(store: &Arc<Store>, request: &Request) -> Option<Reply> {
    let Request::Import {
        files,
        to,
        overwrite,
        dry_run,
        uid,
        pid,
        commit,
    } = request
    else {
        return None;
    };
    let chunk = super::import::Chunk {
        files,
        to,
        overwrite: *overwrite,
        dry_run: *dry_run,
        uid: *uid,
        pid: *pid,
        commit: commit.as_ref(),
    };
    Some(super::import::apply(store, &chunk))
}

/// A host of a shared store by its journal's origin, cut to 8 characters.
pub fn short_origin(origin: &str) -> &str {
    origin.get(..8).unwrap_or(origin)
}

/// A host of a shared store as `memfs log` names it: `here` for the one
/// asking, another by [`short_origin`].
pub fn host_name<'a>(origin: &'a str, here: &str) -> &'a str {
    match origin == here {
        true => "here",
        false => short_origin(origin),
    }
}

/// Every control request kind that reads or changes the history, each
/// arm a call or a line.
fn run(store: &Arc<Store>, history: &History, request: &Request) -> Result<Reply, Refusal> {
    match request {
        Request::Log {
            path: at,
            json,
            all,
            page,
        } => log(history, path(at.as_deref())?, *json, *all, page.as_ref()),
        Request::Show { version: v } => Ok(Reply::ok(history.content(version(v)?)?.1)),
        Request::Diff {
            version: v,
            against,
        } => diff(store, history, v, against.as_deref()),
        Request::Revert {
            version: v,
            uid,
            pid,
            via,
        } => revert(store, history, version(v)?, *uid, *pid, via.as_deref()),
        Request::Undo {
            version: v,
            uid,
            pid,
            via,
        } => undo(store, history, version(v)?, *uid, *pid, via.as_deref()),
        Request::Redact { version: v, path } => redact(store, history, version(v)?, *path),
        Request::Export => Ok(Reply::ok(super::export::fast_import(history)?)),
        r @ Request::UndoSession { .. } => undo_session(store, history, r),
        Request::Blob { sha } => match history.blob(sha) {
            Some(bytes) => Ok(Reply::ok(bytes)),
            None => Err(Refusal(format!(
                "the history does not keep content {}",
                crate::text::label(sha)
            ))),
        },
        Request::Since { cursor } => since(history, *cursor),
        Request::Clear { door, session } => Ok(clear(store, door, session.as_deref())),
        Request::Checkpoint => checkpoint(history),
        Request::Expire {
            idle,
            dry_run,
            path: at,
        } => {
            let idle = crate::units::parse_duration(idle).map_err(|e| Refusal(e.to_string()))?;
            let at = path(at.as_deref())?;
            super::expire::run(store, &at, idle, *dry_run)
        }
        Request::ImportKeys { prefix } => Ok(super::import::keys(history, prefix)),
        // Answered by `handle` before the history is looked for.
        Request::Search { .. } | Request::Import { .. } => {
            Ok(Reply::error("not a history request"))
        }
    }
}

/// `memfs undo --by WHO`: what a session or an actor changed, taken back.
fn undo_session(store: &Arc<Store>, history: &History, r: &Request) -> Result<Reply, Refusal> {
    let Request::UndoSession {
        by,
        since,
        versions,
        force,
        dry_run,
        uid,
        pid,
        via,
    } = r
    else {
        return Ok(Reply::error("not an undo by a session"));
    };
    super::undo_session::run(
        store,
        history,
        &super::undo_session::Ask {
            by,
            since: since.as_deref(),
            versions: versions.as_deref(),
            force: *force,
            dry_run: *dry_run,
            uid: *uid,
            pid: *pid,
            via: via.as_deref(),
        },
    )
}

/// `memfs log [PATH]`: a line per version (JSON with `json`), a page at a
/// time when asked; scratch files only with `all`.
fn log(
    history: &History,
    at: MemPath,
    json: bool,
    all: bool,
    page: Option<&LogPage>,
) -> Result<Reply, Refusal> {
    let scratch = crate::tool::Hide::scratch();
    let (rows, next) = match page {
        Some(page) => history.log_page(&at, page, LOG_PAGE)?,
        None => (history.log(&at)?, None),
    };
    let mut out = String::new();
    let rows = super::saves::fold(rows);
    // (Several hosts of a shared store: each line says whose.)
    let hosts: BTreeSet<&str> = rows.iter().filter_map(|r| r.origin.as_deref()).collect();
    let here = history.origin();
    for row in &rows {
        if !all && row.op != Op::Prune && scratch.hides_path(&row.path) {
            continue;
        }
        if json {
            out.push_str(&serde_json::to_string(row).expect("a row serializes"));
        } else {
            out.push_str(&row.table_line());
            if let Some(host) = row.origin.as_deref().filter(|_| hosts.len() > 1) {
                out.push_str(&format!("  @{}", host_name(host, &here)));
            }
        }
        out.push('\n');
    }
    Ok(Reply {
        next,
        ..Reply::ok(out)
    })
}

/// `memfs diff V [W]`: version V against W, or against the file now.
fn diff(
    store: &Store,
    history: &History,
    v: &str,
    against: Option<&str>,
) -> Result<Reply, Refusal> {
    let (row, old) = content_or_empty(history, version(v)?)?;
    let (label, new) = match against {
        Some(w) => {
            let (other, data) = content_or_empty(history, version(w)?)?;
            (format!("{} (version {})", other.path, other.version), data)
        }
        None => {
            let at = MemPath::parse(&row.path)
                .map_err(|_| Refusal(format!("version {v} has no path to compare with")))?;
            let now = match store.snapshot(&at, 0, Window { skip: 0, take: 0 }, &|_| false) {
                Ok(Snapshot::File(data)) => data.to_vec(),
                _ => Vec::new(),
            };
            (format!("{} (now)", row.path), now)
        }
    };
    let before = format!("{} (version {})", row.path, row.version);
    Ok(Reply::ok(unified(&before, &old, &label, &new)))
}

/// `memfs revert V`: the file as version V left it (or as before V took it
/// away), as a new version of the reverter's.
fn revert(
    store: &Store,
    history: &History,
    v: u64,
    uid: u32,
    pid: u32,
    via: Option<&str>,
) -> Result<Reply, Refusal> {
    let (at, data, row) = history.revert_target(v)?;
    let note = match row.op {
        Op::Delete | Op::Expire | Op::Overwrite => {
            format!("undoes version {v} ({})", row.op.as_str())
        }
        _ => format!("back to version {v}"),
    };
    // Said in the words `memfs log` uses for the new version, and
    // with what the file now is.
    let said = match (row.op, row.replaces) {
        (Op::Delete | Op::Expire | Op::Overwrite, Some(r)) => {
            format!("{at}: {note}: the file is version {}'s text again", r.0)
        }
        (Op::Delete | Op::Expire | Op::Overwrite, None) => {
            format!("{at}: {note}: the file is what it took away")
        }
        _ => format!("{at}: {note}"),
    };
    let origin = Origin::Revert {
        uid,
        pid,
        version: v,
        note: Some(note.into()),
        by: via.map(Into::into),
    };
    let ticket = store
        .create_file(&at, data, true, origin)
        .map_err(|e| Refusal(format!("cannot revert {at}: {e}")))?;
    ticket
        .wait()
        .map_err(|e| Refusal(format!("cannot revert {at}: {e}")))?;
    Ok(Reply::ok(format!("{said}\n")))
}

/// `memfs redact V [--path]`: version V's content (and its path) erased
/// from the history.
fn redact(store: &Store, history: &History, v: u64, path: bool) -> Result<Reply, Refusal> {
    let mut removed = 0;
    if path {
        if let Some(at) = history.row(v)?.and_then(|r| MemPath::parse(&r.path).ok()) {
            removed = remove_empty_dirs_above(store, &at)?;
            store.forget_paths(&at);
        }
    }
    let mut said = history.redact(v, path)?;
    if removed > 0 {
        said.push_str(&format!(
            "; {removed} director{} left empty on that path removed",
            if removed == 1 { "y" } else { "ies" }
        ));
    }
    Ok(Reply::ok(format!("{said}\n")))
}

/// What changed after `cursor`, for a follower of the history (the page,
/// the files door's checks).
fn since(history: &History, cursor: Option<Cursor>) -> Result<Reply, Refusal> {
    let next = history.next_version();
    let mut cursor = cursor;
    let (rows, all) = history.rows_after(&mut cursor)?;
    let stuck = history.stuck();
    let left_out = history.left_out();
    let out = serde_json::json!({"next": next, "rows": rows, "cursor": cursor, "all": all, "stuck": stuck, "left_out": left_out});
    Ok(Reply::ok(out.to_string()))
}

/// `memfs checkpoint`: the plain files current and on disk, and what is
/// left out of the memory.
fn checkpoint(history: &History) -> Result<Reply, Refusal> {
    history.checkpoint()?;
    let mut said = String::from("the plain files are current and on disk\n");
    let left_out = history.left_out();
    if !left_out.is_empty() {
        said.push_str(&format!(
            "{} plain file(s) are left out of the memory (they stay on disk, untouched):\n",
            left_out.len()
        ));
        for line in left_out {
            said.push_str(&format!("  {line}\n"));
        }
    }
    Ok(Reply::ok(said))
}

/// Whether version `v` can be undone: it exists, has a path, changes a
/// file, is not redacted, and the file is as it left it. Its row and path.
fn undoable(store: &Store, history: &History, v: u64) -> Result<(Row, MemPath), Refusal> {
    let row = history.row(v)?.ok_or_else(|| {
        Refusal(format!(
            "no version {v} in the history (it may have been pruned)"
        ))
    })?;
    let at = MemPath::parse(&row.path).map_err(|_| {
        Refusal(format!(
            "version {v} has no path (it is redacted or not a file's)"
        ))
    })?;
    if matches!(row.op, Op::Prune | Op::Void) {
        return Err(Refusal(format!("version {v} is not a change to a file")));
    }
    if row.redacted {
        return Err(Refusal(format!(
            "version {v} is redacted: what it left cannot be checked, so it is not undone"
        )));
    }
    if sha_now(store, &at) != row.sha256 {
        return Err(Refusal(format!(
            "{at} has changed since version {v}; undo the newer change first, or revert to the version you want"
        )));
    }
    Ok((row, at))
}

/// `Request::Undo`: the change `v` made, taken back ([`undoable`] first),
/// by the change's kind with the same row, path and expected hash.
fn undo(
    store: &Arc<Store>,
    history: &History,
    v: u64,
    uid: u32,
    pid: u32,
    via: Option<&str>,
) -> Result<Reply, Refusal> {
    let (row, at) = undoable(store, history, v)?;
    let origin = Origin::Revert {
        uid,
        pid,
        version: v,
        note: Some(format!("undoes version {v} ({})", row.op.as_str()).into()),
        by: via.map(Into::into),
    };
    let replaced = row.replaces.map(|r| r.0);
    let from = row.from.as_deref().and_then(|f| MemPath::parse(f).ok());
    // Each act checks again, under the store's lock, that the file is as
    // version `v` left it (a change between the check above and the act
    // makes it refuse, never overwrite).
    let expect = row.sha256.as_deref();
    let (ticket, said) = match (row.op, from, replaced) {
        (Op::Rename, Some(from), _) => (
            store.rename_expecting(&at, &from, origin, expect),
            format!("{at}: undoes version {v} (rename): moved back to {from}"),
        ),
        (_, _, Some(r)) => {
            let (_, data) = history.content(r)?;
            let made = match expect {
                // The file is gone (a delete, an expiry): it comes back only if nothing is there.
                None => store.create_file(&at, data, false, origin),
                Some(_) => store.create_file_expecting(&at, data, true, origin, expect),
            };
            (
                made,
                format!(
                    "{at}: undoes version {v} ({}): the file is version {r}'s text again",
                    row.op.as_str()
                ),
            )
        }
        (Op::Create | Op::Found | Op::Write | Op::Overwrite | Op::Revert, _, None) => (
            store.remove_expecting(&at, origin, expect),
            format!(
                "{at}: undoes version {v} ({}): deleted, as before it",
                row.op.as_str()
            ),
        ),
        _ => return Err(Refusal(format!("version {v} names nothing to bring back"))),
    };
    ticket
        .and_then(|t| t.wait())
        .map_err(|e| Refusal(format!("cannot undo version {v}: {e}")))?;
    Ok(Reply::ok(format!("{said}\n")))
}

/// Removes the directories on `at` (a path being redacted) that are empty,
/// from the deepest up: their names are part of the path. How many.
fn remove_empty_dirs_above(store: &Store, at: &MemPath) -> Result<usize, Refusal> {
    if store.with_tree(|tree| tree.resolve(at).is_ok()) {
        return Ok(0); // redact refuses a path that exists
    }
    let mut removed = 0;
    let mut dir = at.parent();
    while let Some(d) = dir.filter(|d| !d.is_root()) {
        let empty = store.with_tree(|tree| {
            tree.resolve(&d)
                .ok()
                .and_then(|ino| tree.children(ino))
                .is_some_and(|c| c.is_empty())
        });
        if !empty {
            break;
        }
        store
            .remove(&d, Origin::Memfs)
            .and_then(|ticket| ticket.wait())
            .map_err(|e| Refusal(format!("cannot remove the empty directory {d}: {e}")))?;
        store.forget_paths(&d);
        removed += 1;
        dir = d.parent();
    }
    Ok(removed)
}

/// `memfs clear`: everything deleted as the agent session `session` of
/// `door` (the CLI's own is `exec`).
fn clear(store: &Store, door: &str, session: Option<&str>) -> Reply {
    let door = crate::store::Door::named(door).unwrap_or(crate::store::Door::Exec);
    match super::clear::clear(store, &Origin::session(door, session)) {
        Ok(()) => Reply::ok(format!("{}\n", super::clear::CLEARED)),
        Err(e) => Reply::error(e.to_string()),
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

/// How long `memfs diff` looks for the smallest diff before it settles for
/// a correct, larger one (the contents are an agent's: two files with every
/// line different would otherwise take time quadratic in their lines).
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// The largest side `memfs diff` compares line by line.
pub const DIFF_MAX_BYTES: usize = 16 << 20;

/// A unified diff of two contents (bounded in size and time), as `memfs diff` prints it.
pub fn unified(before: &str, old: &[u8], after: &str, new: &[u8]) -> Vec<u8> {
    if old.len().max(new.len()) > DIFF_MAX_BYTES {
        return format!(
            "{before} and {after} are too large to compare line by line here (over {}); compare `memfs show` of each with other tools\n",
            crate::tool::human_size(DIFF_MAX_BYTES as u64)
        )
        .into_bytes();
    }
    match (std::str::from_utf8(old), std::str::from_utf8(new)) {
        (Ok(a), Ok(b)) => {
            let started = std::time::Instant::now();
            let diff = similar::TextDiff::configure()
                .timeout(DIFF_DEADLINE)
                .diff_lines(a, b);
            let mut out = diff
                .unified_diff()
                .context_radius(3)
                .header(before, after)
                .to_string();
            if started.elapsed() >= DIFF_DEADLINE {
                out.push_str(&format!(
                    "\\ memfs: the search for the smallest diff stopped after {} s; this diff is correct but may mark more lines than changed\n",
                    DIFF_DEADLINE.as_secs()
                ));
            }
            out.into_bytes()
        }
        _ if old == new => Vec::new(),
        _ => format!("Binary contents of {before} and {after} differ\n").into_bytes(),
    }
}
