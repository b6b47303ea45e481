//! The conflicts a person settles from the page: each file whose content
//! now is a version saved over another that its writer had not read (two
//! hosts of a shared store saving one file from the same version on the
//! same lines, another machine's overlapping edit pulled from a store over
//! HTTP, a person's save over an agent's unread change). The other text is
//! in the history; "use this one instead" makes it the file again (a
//! revert of the overwrite), "keep" settles it as it is.

use std::collections::BTreeSet;

use super::html::time;
use super::model::Model;
use super::pages::{actor, file_link, form, Ctx};
use crate::journal::{Op, Row};

/// The live overwrites not settled yet: (the file's version, the one it
/// was saved over), newest first.
pub fn open<'m>(model: &'m Model, settled: &BTreeSet<u64>) -> Vec<(&'m Row, &'m Row)> {
    let mut out: Vec<(&Row, &Row)> = model
        .live
        .values()
        .map(|&i| &model.rows[i])
        .filter(|r| r.op == Op::Overwrite && !settled.contains(&r.id()))
        .filter_map(|r| Some((r, model.row(r.replaces?.0)?)))
        .collect();
    out.sort_by_key(|(r, _)| std::cmp::Reverse(r.id()));
    out
}

/// The block at the top of the memory's and the review's pages, or
/// nothing when no conflict is open.
pub fn block(model: &Model, settled: &BTreeSet<u64>, ctx: &Ctx, back: &str) -> String {
    let open = open(model, settled);
    if open.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<section class=\"conflicts\"><h2>{} conflict{} to settle</h2>",
        open.len(),
        if open.len() == 1 { "" } else { "s" }
    );
    for (file, lost) in open {
        out.push_str(&format!(
            "<div class=\"conflict\"><p class=\"error\">{}: version <a href=\"/diff?version={}&amp;against={}\">{}</a> (by {}, {}) is the file, saved over <a href=\"/diff?version={}\">version {}</a> (by {}, {}) by a writer who had not read it. Version {} stays in the history.</p><p class=\"acts\">{}{}</p></div>",
            file_link(&file.path),
            file.version,
            lost.version,
            file.version,
            actor(file),
            time(&file.time),
            lost.version,
            lost.version,
            actor(lost),
            time(&lost.time),
            lost.version,
            form(ctx, "/use", file.id(), &format!("Use version {} instead", lost.version), "undo", back),
            form(ctx, "/keep", file.id(), &format!("Keep version {}", file.version), "keep", back),
        ));
    }
    out.push_str("</section>");
    out
}
