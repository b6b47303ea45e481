//! `memfs search` as a request an owner answers: the text a person reads
//! (`path:line: snippet`, grep's shape) or JSON, and grep's exit codes
//! (0 found, 1 nothing found, 2 an error).

use super::reply::Reply;
use super::Control;
use crate::search::{Ask, Hit, SearchError, DEFAULT_RESULTS};
use crate::tool::Hide;

/// What a search that found nothing says (exit code 1, as grep's).
pub const NOTHING_FOUND: &str = "nothing found";

fn failed(err: String) -> Reply {
    Reply {
        code: 2,
        ..Reply::error(err)
    }
}

/// The results of one search as text: each matched line as
/// `path:line: snippet`, and a file found by its path alone as its path.
pub fn as_text(hits: &[Hit]) -> String {
    let mut out = String::new();
    for hit in hits {
        if hit.lines.is_empty() {
            out.push_str(&crate::text::printable(&hit.path));
            out.push('\n');
        }
        for line in &hit.lines {
            out.push_str(&format!(
                "{}:{}: {}\n",
                crate::text::printable(&hit.path),
                line.line,
                crate::text::printable(&line.snippet)
            ));
        }
    }
    out
}

/// The results as the JSON `memfs search --json`, the HTTP endpoint and
/// the MCP tool's structured content share.
pub fn as_json(hits: &[Hit]) -> serde_json::Value {
    serde_json::json!({ "results": hits })
}

/// What `memfs search` and the agent's doors ask (a `Request::Search`).
pub struct Asked<'a> {
    pub query: &'a str,
    pub limit: Option<usize>,
    pub path: Option<&'a str>,
    pub json: bool,
    /// Also editor scratch files and hidden names.
    pub all: bool,
    /// For an agent's door: what the tool hides is left out.
    pub agent: bool,
}

/// Answers one search.
pub fn answer(control: &Control, asked: &Asked) -> Reply {
    let Asked {
        query,
        limit,
        path,
        json,
        all,
        agent,
    } = *asked;
    let Some(search) = control.search() else {
        return failed(
            "this memory keeps no search index (it was started with --no-search)".into(),
        );
    };
    let scratch = Hide::scratch();
    let hide = match (agent, all) {
        (true, _) => Some(control.agent_hide()),
        (false, false) => Some(&scratch),
        (false, true) => None,
    };
    let ask = Ask {
        query,
        limit: limit.unwrap_or(DEFAULT_RESULTS),
        under: path,
        hide,
    };
    let found = match search.search(&ask) {
        Ok(found) => found,
        Err(SearchError::Query(e)) => return failed(e.to_string()),
        Err(e @ (SearchError::Index(_) | SearchError::Closed)) => {
            return failed(format!("the search failed: {e}"))
        }
    };
    // A search cut at its deadline says so: on stderr beside JSON, after
    // the results in text (which the agent reads).
    let note = found.cut.map(|c| c.said());
    let hits = &found.hits;
    let mut reply = match note.as_deref() {
        _ if hits.is_empty() && json => Reply {
            code: 1,
            ..Reply::ok(format!("{}\n", as_json(hits)))
        },
        Some(note) if hits.is_empty() => Reply::error(format!("{NOTHING_FOUND}: {note}")),
        None if hits.is_empty() => Reply::error(NOTHING_FOUND),
        _ if json => Reply::ok(format!("{}\n", as_json(hits))),
        Some(note) => Reply::ok(format!("{}\n({note})\n", as_text(hits).trim_end())),
        None => Reply::ok(as_text(hits)),
    };
    if json {
        if let Some(note) = note {
            reply.err = note;
        }
    }
    reply
}
