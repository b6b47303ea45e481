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
    match search.search(&ask) {
        Ok(hits) if hits.is_empty() && json => Reply {
            code: 1,
            ..Reply::ok(format!("{}\n", as_json(&hits)))
        },
        Ok(hits) if hits.is_empty() => Reply::error(NOTHING_FOUND),
        Ok(hits) if json => Reply::ok(format!("{}\n", as_json(&hits))),
        Ok(hits) => Reply::ok(as_text(&hits)),
        Err(SearchError::Query(e)) => failed(e),
        Err(SearchError::Index(e)) => failed(format!("the search failed: {e}")),
    }
}
