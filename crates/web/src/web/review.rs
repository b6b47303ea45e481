//! The review queue, as a person reviews a pull request: the agent's
//! changes not reviewed yet, grouped by session (newest session first), and
//! in each session by file (newest first), each file shown as one net diff,
//! from what it held before the session's first unreviewed change to it to
//! what it holds after the last. Keep and undo act on a file, a session,
//! or everything on the page; undoing a file takes back all of that
//! session's changes to it together, so an older change is never refused
//! for a newer one of the same session. Paged by sessions.
//!
//! A group is named in forms by its session and the exact versions the
//! page showed (`BY\tV1,V2,...` lines): keep and undo act on those and on
//! nothing the page did not show ([`Group`], read back by [`groups_of`]).

use std::collections::{BTreeSet, HashMap};

use super::html::{diff, esc, time};
use super::model::{is_agents_change, Model};
use super::pages::{actor, file_link, said, Ctx, View};
use super::source::Source;
use super::PageError;
use crate::journal::Row;

/// Sessions on one page of the queue.
const SESSIONS_PER_PAGE: usize = 10;
/// Files shown of one session (keep and undo still take all of them).
const FILES_SHOWN: usize = 50;

/// Changes of one session to review, as forms name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The session as `memfs log` shows its actor.
    pub by: String,
    /// Exactly the versions the page showed.
    pub versions: Vec<u64>,
}

impl Group {
    fn line(&self) -> String {
        let versions: Vec<String> = self.versions.iter().map(u64::to_string).collect();
        format!("{}\t{}", self.by, versions.join(","))
    }

    /// Whether `row` is one of the group's changes.
    pub fn holds(&self, row: &Row) -> bool {
        row.actor.short() == self.by && self.versions.contains(&row.id())
    }
}

/// The groups a form names (its `groups` field, one per line).
pub fn groups_of(field: Option<&String>) -> Vec<Group> {
    field
        .map(|text| {
            text.lines()
                .filter_map(|line| {
                    let (by, versions) = line.split_once('\t')?;
                    let versions: Option<Vec<u64>> =
                        versions.split(',').map(|v| v.parse().ok()).collect();
                    let versions = versions?;
                    (!by.is_empty() && !versions.is_empty()).then(|| Group {
                        by: by.to_string(),
                        versions,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One session's changes to review: its files, newest first, each with its
/// changes oldest first (a save through a temporary file is in its
/// target's: the temporary file's steps, then the rename).
struct Session<'a> {
    by: String,
    files: Vec<(String, Vec<&'a Row>)>,
    /// The versions that are steps of a save through a temporary file (one
    /// change with its rename, not changes of their own), each with the
    /// path the save ended at.
    steps: &'a HashMap<u64, String>,
}

impl Session<'_> {
    fn rows(&self) -> impl Iterator<Item = &Row> {
        self.files.iter().flat_map(|(_, rows)| rows.iter().copied())
    }

    fn newest(&self) -> &Row {
        self.rows()
            .max_by_key(|r| r.id())
            .expect("a session has a change")
    }

    fn oldest(&self) -> &Row {
        self.rows()
            .min_by_key(|r| r.id())
            .expect("a session has a change")
    }

    fn count(&self) -> usize {
        self.files
            .iter()
            .map(|(_, rows)| self.shown(rows).len())
            .sum()
    }

    /// A file's changes as a person counts them: a save's steps are not.
    fn shown<'r>(&self, rows: &[&'r Row]) -> Vec<&'r Row> {
        rows.iter()
            .copied()
            .filter(|r| !self.steps.contains_key(&r.id()))
            .collect()
    }

    /// The versions of one file of the session (all files: `None`).
    fn group(&self, path: Option<&str>) -> Group {
        let versions = self
            .files
            .iter()
            .filter(|(f, _)| path.is_none_or(|p| p == f))
            .flat_map(|(_, rows)| rows.iter().map(|r| r.id()))
            .collect();
        Group {
            by: self.by.clone(),
            versions,
        }
    }
}

/// The changes a person has not reviewed yet: every agent's, but those kept
/// or undone from the page.
fn to_review<'a>(model: &'a Model, reviewed: &'a BTreeSet<u64>) -> impl Iterator<Item = &'a Row> {
    model
        .rows
        .iter()
        .filter(|r| is_agents_change(r) && !reviewed.contains(&r.id()))
}

/// The saves through a temporary file in the model: each step's version
/// with the path its save ended at.
pub fn save_steps(model: &Model) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    for (rename, steps) in crate::control::saves::saves(&model.rows) {
        if let Some(target) = model.row(rename) {
            out.extend(steps.into_iter().map(|v| (v, target.path.clone())));
        }
    }
    out
}

/// The queue: every unreviewed change of an agent's, by session and file,
/// but a file whose changes are taken back since (`memfs undo` on the
/// command line, a revert, an edit back): it holds what it held before the
/// session's first change to it.
fn sessions<'a>(
    model: &'a Model,
    reviewed: &'a BTreeSet<u64>,
    steps: &'a HashMap<u64, String>,
) -> Vec<Session<'a>> {
    let mut out: Vec<Session<'a>> = Vec::new();
    // Where each session, and each of its files, is in `out`.
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut file_at: HashMap<(usize, &str), usize> = HashMap::new();
    for row in to_review(model, reviewed) {
        let by = row.actor.short();
        let i = *at.entry(by.clone()).or_insert_with(|| {
            out.push(Session {
                by,
                files: Vec::new(),
                steps,
            });
            out.len() - 1
        });
        let path = steps.get(&row.id()).unwrap_or(&row.path).as_str();
        let files = &mut out[i].files;
        match file_at.get(&(i, path)) {
            Some(&f) => files[f].1.push(row),
            None => {
                file_at.insert((i, path), files.len());
                files.push((path.to_string(), vec![row]));
            }
        }
    }
    for s in &mut out {
        s.files
            .retain(|(path, rows)| !taken_back(model, path, rows));
        s.files
            .sort_by_key(|(_, rows)| std::cmp::Reverse(rows.last().map(|r| r.id())));
    }
    out.retain(|s| !s.files.is_empty());
    out.sort_by_key(|s| std::cmp::Reverse(s.newest().id()));
    out
}

/// The first of a file's changes made at its path (a save's steps are at
/// the temporary file's): what it replaced is what the file held before.
fn first_at<'r>(path: &str, rows: &[&'r Row]) -> &'r Row {
    rows.iter()
        .copied()
        .find(|r| r.path == path)
        .unwrap_or(rows[0])
}

/// Whether the file at `path` holds now what it held before `rows` (its
/// changes of one session): nothing of them is left to review.
fn taken_back(model: &Model, path: &str, rows: &[&Row]) -> bool {
    let before = match first_at(path, rows).replaces {
        None => None,
        // (What it held before is not known any more, redacted or pruned:
        // nothing says it is back.)
        Some(r) => match model.row(r.0).and_then(|r| r.sha256.as_deref()) {
            None => return false,
            known => known,
        },
    };
    let now = model
        .live
        .get(path)
        .and_then(|&i| model.rows[i].sha256.as_deref());
    let redacted = rows.iter().any(|r| r.redacted);
    !redacted && before == now
}

/// A file's net change over `rows` (oldest first): from what the first
/// replaced to what the last left.
fn net_diff(
    model: &Model,
    source: &Source,
    path: &str,
    rows: &[&Row],
) -> Result<String, PageError> {
    let (first, last) = (first_at(path, rows), rows[rows.len() - 1]);
    if rows.iter().any(|r| r.redacted) {
        return Ok(String::new());
    }
    let old = match first.replaces.map(|r| r.0) {
        Some(r) => match model.row(r) {
            Some(row) => source.content(row)?,
            None => return Err(PageError::NetReplacedGone(r)),
        },
        None => Vec::new(),
    };
    let new = match last.leaves_content() {
        true => source.content(last)?,
        false => Vec::new(),
    };
    let before = match first.replaces {
        Some(r) => format!("{} (version {})", first.path, r.0),
        None => "/dev/null".to_string(),
    };
    let after = match last.leaves_content() {
        true => format!("{} (version {})", last.path, last.version),
        false => "/dev/null".to_string(),
    };
    let text = crate::control::request::unified(&before, &old, &after, &new);
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// What the file's lost updates replaced: each overwrite's both sides (the
/// version its writer had not read is kept in the history).
fn overwrites(model: &Model, rows: &[&Row]) -> String {
    let mut out = String::new();
    for row in rows
        .iter()
        .filter(|r| r.op == crate::journal::Op::Overwrite)
    {
        let Some(lost) = row.replaces.and_then(|v| model.row(v.0)) else {
            continue;
        };
        // (Two hosts of a shared store: each named.)
        let host = |r: &Row, other: &Row| match (&r.origin, &other.origin) {
            (Some(a), Some(b)) if a != b => format!(" on host @{}", origin_name(a)),
            _ => String::new(),
        };
        out.push_str(&format!(
            "<p class=\"error\">Overwrite: v{} (by {}{}) was saved over <a href=\"/diff?version={}\">v{}</a> (by {}{}), which its writer had not read; v{} stays in the history.</p>",
            row.version,
            esc(&row.actor.short()),
            host(row, lost),
            lost.version,
            lost.version,
            esc(&lost.actor.short()),
            host(lost, row),
            lost.version
        ));
    }
    out
}

/// A host as the page names it: its origin's first 8 characters, as
/// `memfs log` does.
fn origin_name(origin: &str) -> String {
    esc(crate::control::request::short_origin(origin))
}

/// A form acting on groups (`/keep-groups`, `/undo-groups`).
fn act(ctx: &Ctx, action: &str, groups: &[Group], label: &str, class: &str, back: &str) -> String {
    let lines: Vec<String> = groups.iter().map(Group::line).collect();
    format!(
        "<form method=\"post\" action=\"{action}\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"groups\" value=\"{}\"><input type=\"hidden\" name=\"back\" value=\"{}\"><button class=\"{class}\" type=\"submit\">{label}</button></form>",
        esc(ctx.csrf),
        esc(&lines.join("\n")),
        esc(back)
    )
}

/// How many changes wait for review.
pub fn waiting(model: &Model, reviewed: &BTreeSet<u64>) -> usize {
    let steps = save_steps(model);
    sessions(model, reviewed, &steps)
        .iter()
        .map(Session::count)
        .sum()
}

/// `/review[?page=N]`.
pub fn review(
    model: &Model,
    source: &Source,
    reviewed: &BTreeSet<u64>,
    page: usize,
    ctx: &Ctx,
) -> View {
    let steps = save_steps(model);
    let all = sessions(model, reviewed, &steps);
    let changes: usize = all.iter().map(Session::count).sum();
    let files: usize = all.iter().map(|s| s.files.len()).sum();
    let pages = all.len().div_ceil(SESSIONS_PER_PAGE).max(1);
    let page = page.min(pages - 1);
    let shown: Vec<&Session> = all
        .iter()
        .skip(page * SESSIONS_PER_PAGE)
        .take(SESSIONS_PER_PAGE)
        .collect();
    let back = format!("/review?page={page}");
    let mut out = said(ctx);
    out.push_str(&format!(
        "<h1>Review</h1><p class=\"summary\">{changes} change{} to {files} file{} by {} session{} of agents or applications, newest first.</p>",
        plural(changes),
        plural(files),
        all.len(),
        plural(all.len())
    ));
    let everything: Vec<Group> = shown.iter().map(|s| s.group(None)).collect();
    if !everything.is_empty() {
        out.push_str("<p class=\"acts\">");
        out.push_str(&act(
            ctx,
            "/keep-groups",
            &everything,
            "Keep everything shown",
            "keep",
            &back,
        ));
        out.push_str(&act(
            ctx,
            "/undo-groups",
            &everything,
            "Undo everything shown",
            "undo",
            &back,
        ));
        out.push_str("</p>");
    }
    for session in &shown {
        out.push_str(&session_block(model, source, session, ctx, &back));
    }
    out.push_str(&pager(page, pages));
    View {
        title: "review".into(),
        main: out,
    }
}

fn session_block(
    model: &Model,
    source: &Source,
    session: &Session,
    ctx: &Ctx,
    back: &str,
) -> String {
    let whole = session.group(None);
    let mut out = format!(
        "<section class=\"session\"><h2>{} <span class=\"summary\">{} change{} to {} file{}, {} to {}</span></h2><p class=\"acts\">{}{}</p>",
        actor(session.newest()),
        session.count(),
        plural(session.count()),
        session.files.len(),
        plural(session.files.len()),
        time(&session.oldest().time),
        time(&session.newest().time),
        act(ctx, "/keep-groups", std::slice::from_ref(&whole), "Keep this session", "keep", back),
        act(ctx, "/undo-groups", std::slice::from_ref(&whole), "Undo this session", "undo", back),
    );
    for (path, rows) in session.files.iter().take(FILES_SHOWN) {
        out.push_str(&file_block(model, source, session, path, rows, ctx, back));
    }
    if session.files.len() > FILES_SHOWN {
        out.push_str(&format!(
            "<p class=\"note\">and {} more files (kept or undone with the session)</p>",
            session.files.len() - FILES_SHOWN
        ));
    }
    out.push_str("</section>");
    out
}

/// What a file's heading says of its changes (`v7 write`, `3 changes, v4
/// to v9`): a save through a temporary file as the write it is.
fn summary(session: &Session, rows: &[&Row], shown: &[&Row]) -> String {
    let saved = rows.iter().any(|r| session.steps.contains_key(&r.id()));
    match shown {
        [one] if saved => {
            let save = crate::control::saves::as_save(one);
            format!("v{} {}", one.version, esc(save.op.as_str()))
        }
        [one] => format!("v{} {}", one.version, esc(one.op.as_str())),
        _ => format!(
            "{} changes, v{} to v{}",
            shown.len(),
            shown[0].version,
            rows[rows.len() - 1].version
        ),
    }
}

/// One file of a session: its net change, with keep and undo for all of
/// the session's changes to it.
fn file_block(
    model: &Model,
    source: &Source,
    session: &Session,
    path: &str,
    rows: &[&Row],
    ctx: &Ctx,
    back: &str,
) -> String {
    let group = session.group(Some(path));
    let last = rows[rows.len() - 1];
    let shown = match session.shown(rows) {
        none if none.is_empty() => rows.to_vec(),
        some => some,
    };
    let versions = summary(session, rows, &shown);
    let mut out = format!(
        "<section class=\"change\"><h3>{} <span class=\"summary\">{versions}</span> <span class=\"when\">{}</span></h3>",
        file_link(path),
        time(&last.time)
    );
    out.push_str(&overwrites(model, rows));
    match net_diff(model, source, path, rows) {
        Ok(text) if text.is_empty() => out.push_str(
            "<p class=\"note\">No change to the content shown (a redaction, a move, or back as it was).</p>",
        ),
        Ok(text) => out.push_str(&diff(&text)),
        Err(e) => out.push_str(&format!("<p class=\"error\">{}</p>", esc(&e.to_string()))),
    }
    out.push_str("<p class=\"acts\">");
    out.push_str(&act(
        ctx,
        "/keep-groups",
        std::slice::from_ref(&group),
        "keep",
        "keep",
        back,
    ));
    let undo = match shown.len() {
        1 => "undo".to_string(),
        n => format!("undo these {n} together"),
    };
    out.push_str(&act(
        ctx,
        "/undo-groups",
        std::slice::from_ref(&group),
        &undo,
        "undo",
        back,
    ));
    out.push_str("</p></section>");
    out
}

fn pager(page: usize, pages: usize) -> String {
    if pages <= 1 {
        return String::new();
    }
    let mut out = format!("<p class=\"pager\">page {} of {pages} ", page + 1);
    if page > 0 {
        out.push_str(&format!("<a href=\"/review?page={}\">newer</a> ", page - 1));
    }
    if page + 1 < pages {
        out.push_str(&format!("<a href=\"/review?page={}\">older</a>", page + 1));
    }
    out.push_str("</p>");
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
