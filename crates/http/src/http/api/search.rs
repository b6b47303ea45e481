//! `GET /v1/memory_stores/{id}/search`: full-text search over a store's
//! memories. memfs' own extension (the hosted API has no search), with the
//! token rules of every other read: a token that reaches the store, read-only
//! or not. Names the tool hides (`--hide`, hidden names) are left out, as
//! they are from every agent's door.

use super::*;
use crate::search::{Ask, SearchError, DEFAULT_RESULTS, MOST_RESULTS};

/// `limit`: 1 to [`MOST_RESULTS`] (default [`DEFAULT_RESULTS`]).
fn limit_of(call: &Call) -> ApiResult<usize> {
    match call.query.get("limit") {
        None => Ok(DEFAULT_RESULTS),
        Some(text) => match text.parse::<usize>() {
            Ok(n @ 1..=MOST_RESULTS) => Ok(n),
            _ => Err(ApiError::invalid(format!(
                "`limit` is a whole number from 1 to {MOST_RESULTS}"
            ))),
        },
    }
}

pub(super) fn search_store(on: On) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let query = call
        .query
        .get("q")
        .ok_or_else(|| ApiError::invalid("`q` is required: the words to search for"))?;
    let limit = limit_of(call)?;
    let under = call.query.get("path_prefix").map(String::as_str);
    if under.is_some_and(|p| !p.starts_with('/')) {
        return Err(ApiError::invalid("`path_prefix` starts with /"));
    }
    let held = held(reg, call, meta)?;
    let Some(search) = held.memory.search() else {
        return Err(ApiError::unavailable(
            "this server keeps no search index (it was started with --no-search)",
        ));
    };
    let hide = &held.memory.tool().config().hide;
    let found = search
        .search(&Ask {
            query,
            limit,
            under,
            hide: Some(hide),
        })
        .map_err(|e| match e {
            SearchError::Query(e) => ApiError::invalid(e.to_string()),
            // (A full disk and a closing store pass: try again.)
            SearchError::Index(e) if e.disk_full() => {
                ApiError::unavailable(format!("the search failed: {e}"))
            }
            SearchError::Index(e) => ApiError::internal(format!("the search failed: {e}")),
            SearchError::Closed => ApiError::unavailable("the store is closing; try again"),
        })?;
    let ids = held.ids.lock();
    let data: Vec<wire::Hit> = found
        .hits
        .into_iter()
        .filter_map(|hit| {
            let path = api_path(&hit.path)?;
            let id = ids.entry(&path).map(|e| memory_id(e.lineage));
            Some(wire::Hit {
                memory_id: id,
                path,
                score: hit.score,
                lines: hit.lines,
            })
        })
        .collect();
    // (Cut at its deadline: what was found, and that more may match.)
    Ok(wire::Found {
        data,
        cut: found.cut.is_some(),
        note: found.cut.map(|cut| cut.said()),
    }
    .into())
}
