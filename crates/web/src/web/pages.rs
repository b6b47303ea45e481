//! The page's views, rendered on the server: the memory's files, a file with
//! its history, the whole history, a version's diff, the review queue, the
//! deleted files, and the redaction's confirmation.

use super::html::{diff, esc, size, time};
use super::model::{is_agents_change, leaves_content, Model};
use super::source::Source;
use super::PageError;
use crate::form::encode;
use crate::journal::{Op, Row};

/// A page's main part, and its title.
pub struct View {
    pub title: String,
    pub main: String,
}

/// The forms on a page carry the session's CSRF token.
pub struct Ctx<'a> {
    pub csrf: &'a str,
    /// A message from the last act (an undo, a keep), shown once.
    pub said: Option<&'a str>,
}

pub(super) fn rel(path: &str) -> &str {
    path.strip_prefix("/memories/").unwrap_or(path)
}

pub(super) fn file_link(path: &str) -> String {
    format!(
        "<a href=\"/file?path={}\">{}</a>",
        encode(path),
        esc(rel(path))
    )
}

fn version_link(row: &Row) -> String {
    format!(
        "<a href=\"/diff?version={}\">v{}</a>",
        row.id(),
        row.version
    )
}

pub(super) fn actor(row: &Row) -> String {
    let a = &row.actor;
    let class = match a.kind.as_str() {
        "agent" => "agent",
        "person" => "person",
        "api" => "api",
        _ => "memfs",
    };
    format!("<span class=\"actor {class}\">{}</span>", esc(&a.short()))
}

pub(super) fn said(ctx: &Ctx) -> String {
    match ctx.said {
        Some(s) if !s.is_empty() => format!("<p class=\"said\" role=\"status\">{}</p>", esc(s)),
        _ => String::new(),
    }
}

pub(super) fn form(
    ctx: &Ctx,
    action: &str,
    version: u64,
    label: &str,
    class: &str,
    back: &str,
) -> String {
    format!(
        "<form method=\"post\" action=\"{action}\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"version\" value=\"{version}\"><input type=\"hidden\" name=\"back\" value=\"{}\"><button class=\"{class}\" type=\"submit\">{label}</button></form>",
        esc(ctx.csrf),
        esc(back)
    )
}

fn history_table(rows: &[&Row]) -> String {
    let mut out = String::from(
        "<table class=\"history\"><thead><tr><th>version</th><th>when</th><th>who</th><th>what</th><th>file</th></tr></thead><tbody>",
    );
    for row in rows {
        let mut what = esc(row.op.as_str());
        if let Some(from) = &row.from {
            what.push_str(&format!(" from {}", esc(rel(from))));
        }
        if row.redacted {
            what.push_str(" <em>[redacted]</em>");
        }
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{what}</td><td>{}</td></tr>",
            version_link(row),
            time(&row.time),
            actor(row),
            file_link(&row.path)
        ));
    }
    out.push_str("</tbody></table>");
    out
}

/// `/`: every live file, with its size and last change.
pub fn tree(model: &Model, hide: &dyn Fn(&str) -> bool, ctx: &Ctx) -> View {
    let mut out = said(ctx);
    let files: Vec<(&String, &Row)> = model
        .live
        .iter()
        .filter(|(p, _)| !p.split('/').any(|n| !n.is_empty() && hide(n)))
        .map(|(p, &i)| (p, &model.rows[i]))
        .collect();
    let bytes: u64 = files.iter().filter_map(|(_, r)| r.size).sum();
    out.push_str(&format!(
        "<h1>/memories</h1><p class=\"summary\">{} files, {}; {} versions in the history.</p>",
        files.len(),
        size(Some(bytes)),
        model.rows.len()
    ));
    out.push_str(&stuck(&model.stuck));
    out.push_str("<table class=\"tree\"><thead><tr><th>file</th><th>size</th><th>last change</th><th>by</th></tr></thead><tbody>");
    for (path, row) in files {
        let depth = rel(path).matches('/').count();
        out.push_str(&format!(
            "<tr><td class=\"d{}\">{}</td><td class=\"num\">{}</td><td>{} {}</td><td>{}</td></tr>",
            depth.min(8),
            file_link(path),
            size(row.size),
            version_link(row),
            time(&row.time),
            actor(row)
        ));
    }
    out.push_str("</tbody></table>");
    View {
        title: "memory".into(),
        main: out,
    }
}

/// The status of the plain files, when some paths cannot be written there.
fn stuck(paths: &[String]) -> String {
    if paths.is_empty() {
        return String::new();
    }
    let items: String = paths
        .iter()
        .map(|p| format!("<li>{}</li>", esc(p)))
        .collect();
    format!(
        "<div class=\"stuck\" role=\"status\"><p>The plain files on disk lack {} path(s) memfs cannot write there. The memory has them (the journal keeps them, every door sees them); nothing else waits for them, and memfs tries again. Move what is in the way:</p><ul>{items}</ul></div>",
        paths.len()
    )
}

fn is_image(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp"]
        .iter()
        .any(|e| lower.ends_with(e))
}

/// `/file?path=...`: the content with line numbers (an image as an image),
/// and the file's history.
pub fn file(model: &Model, source: &Source, path: &str, ctx: &Ctx) -> View {
    let mut out = said(ctx);
    out.push_str(&format!("<h1>{}</h1>", esc(path)));
    let rows = model.file_rows(path);
    match model.live.get(path).map(|&i| &model.rows[i]) {
        Some(row) => {
            out.push_str(&format!(
                "<p class=\"summary\">{}, last changed in {} by {} at {}</p>",
                size(row.size),
                version_link(row),
                actor(row),
                time(&row.time)
            ));
            if is_image(path) {
                out.push_str(&format!(
                    "<p><img class=\"image\" src=\"/raw?version={}\" alt=\"{}\"></p>",
                    row.id(),
                    esc(rel(path))
                ));
            } else {
                match source.content(row) {
                    Ok(bytes) => match std::str::from_utf8(&bytes) {
                        Ok(text) => {
                            out.push_str("<table class=\"content\"><tbody>");
                            for (n, line) in text.lines().enumerate() {
                                out.push_str(&format!(
                                    "<tr id=\"L{0}\"><td class=\"n\">{0}</td><td class=\"l\">{1}</td></tr>",
                                    n + 1,
                                    esc(line)
                                ));
                            }
                            out.push_str("</tbody></table>");
                        }
                        Err(_) => {
                            out.push_str(&format!("<p>A binary file of {} bytes.</p>", bytes.len()))
                        }
                    },
                    Err(e) => {
                        out.push_str(&format!("<p class=\"error\">{}</p>", esc(&e.to_string())))
                    }
                }
            }
        }
        None => out.push_str(
            "<p class=\"summary\">This file does not exist now; its history is below.</p>",
        ),
    }
    out.push_str("<h2>History</h2>");
    out.push_str(&history_table(&rows));
    View {
        title: rel(path).to_string(),
        main: out,
    }
}

/// How many rows a history page shows.
const PAGE: usize = 200;

/// `/history?before=V`: every version, newest first.
pub fn history(model: &Model, hide: &dyn Fn(&str) -> bool, before: Option<u64>, ctx: &Ctx) -> View {
    let mut out = said(ctx);
    out.push_str("<h1>History</h1>");
    let rows: Vec<&Row> = model
        .rows
        .iter()
        .rev()
        .filter(|r| before.is_none_or(|b| r.id() < b))
        .filter(|r| !matches!(r.op, Op::Prune | Op::Void))
        .filter(|r| !r.path.split('/').any(|n| !n.is_empty() && hide(n)))
        .take(PAGE + 1)
        .collect();
    out.push_str(&history_table(&rows[..rows.len().min(PAGE)]));
    if rows.len() > PAGE {
        out.push_str(&format!(
            "<p><a href=\"/history?before={}\">older</a></p>",
            rows[PAGE - 1].id()
        ));
    }
    View {
        title: "history".into(),
        main: out,
    }
}

/// The diff a version made (against the version it replaced), as text.
pub fn diff_of(model: &Model, source: &Source, row: &Row) -> Result<String, PageError> {
    let v = row.id();
    let replaced = row.replaces.map(|r| r.0);
    if row.redacted {
        return Ok(String::new());
    }
    match (row.op, replaced) {
        (Op::Rename, None) => Ok(String::new()),
        (_, Some(r)) => match model.row(r) {
            Some(old) => source.diff(old, row),
            None => Err(PageError::ReplacedGone {
                replaced: r,
                version: v,
            }),
        },
        _ if leaves_content(row) => {
            let bytes = source.content(row)?;
            let text = String::from_utf8_lossy(&bytes);
            let mut out = format!(
                "--- /dev/null\n+++ {} (version {v})\n@@ -0,0 +1,{} @@\n",
                row.path,
                text.lines().count()
            );
            for line in text.lines() {
                out.push('+');
                out.push_str(line);
                out.push('\n');
            }
            Ok(out)
        }
        _ => Ok(String::new()),
    }
}

fn change_block(
    model: &Model,
    source: &Source,
    row: &Row,
    ctx: &Ctx,
    back: &str,
    reviewed: bool,
) -> String {
    let mut out = format!(
        "<section class=\"change\" id=\"v{}\"><h2>{} {} {} <span class=\"when\">{}</span> {}</h2>",
        row.id(),
        version_link(row),
        esc(row.op.as_str()),
        file_link(&row.path),
        time(&row.time),
        actor(row)
    );
    if let Some(from) = &row.from {
        out.push_str(&format!("<p>moved from {}</p>", esc(from)));
    }
    if let Some(note) = &row.note {
        out.push_str(&format!("<p class=\"note\">{}</p>", esc(note)));
    }
    if row.redacted {
        out.push_str("<p class=\"note\">Its content is redacted.</p>");
    } else {
        match diff_of(model, source, row) {
            Ok(text) if text.is_empty() => {
                out.push_str("<p class=\"note\">The content did not change.</p>")
            }
            Ok(text) => out.push_str(&diff(&text)),
            Err(e) => out.push_str(&format!("<p class=\"error\">{}</p>", esc(&e.to_string()))),
        }
    }
    out.push_str("<p class=\"acts\">");
    if is_agents_change(row) && !reviewed {
        out.push_str(&form(ctx, "/keep", row.id(), "keep", "keep", back));
    }
    if !matches!(row.op, Op::Prune | Op::Void) && !row.redacted {
        out.push_str(&form(ctx, "/undo", row.id(), "undo", "undo", back));
    }
    if row.sha256.is_some() && !row.redacted {
        out.push_str(&format!(
            " <a class=\"redact\" href=\"/redact?version={}\">redact…</a>",
            row.id()
        ));
    }
    out.push_str("</p></section>");
    out
}

/// `/diff?version=V[&against=W]`.
pub fn version(
    model: &Model,
    source: &Source,
    row: &Row,
    against: Option<&Row>,
    ctx: &Ctx,
) -> View {
    let mut out = said(ctx);
    let back = format!("/diff?version={}", row.id());
    match against {
        Some(other) => {
            out.push_str(&format!("<h1>v{} → v{}</h1>", row.version, other.version));
            match source.diff(row, other) {
                Ok(text) => out.push_str(&diff(&text)),
                Err(e) => out.push_str(&format!("<p class=\"error\">{}</p>", esc(&e.to_string()))),
            }
        }
        None => out.push_str(&change_block(model, source, row, ctx, &back, false)),
    }
    let others: Vec<&Row> = model
        .file_rows(&row.path)
        .into_iter()
        .filter(|r| r.id() != row.id() && leaves_content(r))
        .take(20)
        .collect();
    if !others.is_empty() {
        out.push_str("<h2>Compare with</h2><ul class=\"compare\">");
        for o in others {
            out.push_str(&format!(
                "<li><a href=\"/diff?version={}&amp;against={}\">v{} → v{}</a> ({} {})</li>",
                o.id(),
                row.id(),
                o.version,
                row.version,
                time(&o.time),
                actor(o)
            ));
        }
        out.push_str("</ul>");
    }
    View {
        title: format!("version {}", row.version),
        main: out,
    }
}

/// `/deleted`: files that no longer exist, and the version that deleted each.
pub fn deleted(model: &Model, hide: &dyn Fn(&str) -> bool, ctx: &Ctx) -> View {
    let mut out = said(ctx);
    out.push_str("<h1>Deleted files</h1>");
    let rows: Vec<&Row> = model
        .gone
        .iter()
        .filter(|(p, _)| !p.split('/').any(|n| !n.is_empty() && hide(n)))
        .map(|(_, &i)| &model.rows[i])
        .collect();
    out.push_str(&history_table(&rows));
    View {
        title: "deleted".into(),
        main: out,
    }
}

/// `/redact?version=V`: what redaction will erase, and a form to do it.
pub fn redact(model: &Model, row: &Row, ctx: &Ctx) -> View {
    let mut out = format!("<h1>Redact version {}</h1>", row.version);
    let same: Vec<&Row> = model
        .rows
        .iter()
        .filter(|r| r.sha256.is_some() && r.sha256 == row.sha256)
        .collect();
    let live = model
        .live
        .values()
        .any(|&i| model.rows[i].sha256 == row.sha256);
    out.push_str(&format!(
        "<p>Redaction erases the content of version {} of {} ({}) from the history, everywhere it is kept: in {} version{} with the same content ({}). Their rows stay, marked redacted; the content cannot be brought back.</p>",
        row.version,
        esc(&row.path),
        size(row.size),
        same.len(),
        if same.len() == 1 { "" } else { "s" },
        same.iter().map(|r| format!("v{}", r.version)).collect::<Vec<_>>().join(", ")
    ));
    if live {
        out.push_str("<p class=\"error\">A file in the memory holds this content now: change or delete it first, then redact.</p>");
    } else {
        out.push_str(&form(
            ctx,
            "/redact",
            row.id(),
            "erase it",
            "danger",
            &format!("/diff?version={}", row.id()),
        ));
    }
    View {
        title: format!("redact version {}", row.version),
        main: out,
    }
}

/// `/search?q=`: the files that match, best first, each with its matched
/// lines (the words marked), linked to the line in the file's page.
pub fn search(source: &Source, q: &str, ctx: &Ctx) -> View {
    let mut out = said(ctx);
    out.push_str(&format!("<h1>search: {}</h1>", esc(q)));
    let view = |main: String| View {
        title: format!("search {q}"),
        main,
    };
    if q.trim().is_empty() {
        out.push_str("<p class=\"summary\">Type words in the search box: every word must be in the file or its path; <code>\"a phrase\"</code>, <code>pref*</code>, <code>-word</code>, <code>path:notes/</code>.</p>");
        return view(out);
    }
    let reply = source.request(&crate::control::request::Request::Search {
        query: q.to_string(),
        limit: Some(50),
        path: None,
        json: true,
        all: false,
        agent: false,
    });
    // (A failure short of the search's own, such as an owner that went
    // away, is code 1 with nothing out: said as the error it is.)
    if reply.code >= 2 || (reply.code == 1 && reply.out.is_empty()) {
        out.push_str(&format!("<p class=\"error\">{}</p>", esc(&reply.err)));
        return view(out);
    }
    let found: serde_json::Value = serde_json::from_slice(&reply.out).unwrap_or_default();
    let results = found["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        out.push_str("<p class=\"summary\">Nothing found.</p>");
        return view(out);
    }
    out.push_str(&format!(
        "<p class=\"summary\">{} file{}, best first.</p>",
        results.len(),
        if results.len() == 1 { "" } else { "s" }
    ));
    for hit in &results {
        let path = hit["path"].as_str().unwrap_or_default();
        out.push_str(&format!("<div class=\"hit\"><h2>{}</h2>", file_link(path)));
        let lines = hit["lines"].as_array().cloned().unwrap_or_default();
        if !lines.is_empty() {
            out.push_str("<table class=\"content\"><tbody>");
        }
        for line in &lines {
            let n = line["line"].as_u64().unwrap_or(0);
            out.push_str(&format!(
                "<tr><td class=\"n\"><a href=\"/file?path={}#L{n}\">{n}</a></td><td class=\"l\">{}</td></tr>",
                encode(path),
                marked(line)
            ));
        }
        if !lines.is_empty() {
            out.push_str("</tbody></table>");
        }
        out.push_str("</div>");
    }
    view(out)
}

/// A result line's snippet, escaped, its matched words in `<mark>`.
fn marked(line: &serde_json::Value) -> String {
    let snippet = line["snippet"].as_str().unwrap_or_default();
    let mut out = String::new();
    let mut at = 0;
    for h in line["highlights"].as_array().into_iter().flatten() {
        let (Some(a), Some(b)) = (h[0].as_u64(), h[1].as_u64()) else {
            continue;
        };
        let (a, b) = (a as usize, b as usize);
        let (Some(before), Some(word)) = (snippet.get(at..a), snippet.get(a..b)) else {
            continue;
        };
        out.push_str(&esc(before));
        out.push_str(&format!("<mark>{}</mark>", esc(word)));
        at = b;
    }
    out.push_str(&esc(snippet.get(at..).unwrap_or_default()));
    out
}
