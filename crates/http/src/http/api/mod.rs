//! The memory stores API (`/v1/memory_stores/...`), as the pinned Anthropic
//! SDK's `client.beta.memory_stores` calls it: stores, the memories in a
//! store (addressed by path, with ids that survive renames), and their
//! versions. Each handler runs on a blocking thread against the same
//! synchronous store every other door uses; what it changes is credited to
//! the request's token.

mod input;
mod memories;
mod search;
mod stores;
mod versions;

use input::*;
use memories::*;
use search::*;
use stores::*;
use versions::*;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::ids::{self, api_path, memory_id, version_id, Entry};
use super::metas;
use super::registry::{Held, Registry, StoreMeta};
use super::tokens::Token;
use crate::digest::Sha;
use crate::error::Error;
use crate::journal::{Actor, Op, Row};
use crate::path::MemPath;
use crate::store::{Origin, Snapshot, Window};

/// One API request, parsed as far as the router does.
pub struct Call<'a> {
    pub method: &'a str,
    /// The path's segments after `/v1/`.
    pub segments: Vec<String>,
    pub query: HashMap<String, String>,
    pub body: &'a [u8],
    pub token: &'a Token,
    /// The request's tag ([`tag`]): what it writes carries it.
    pub request: Option<String>,
    /// A retry of an earlier request (the SDK's `x-stainless-retry-count` of
    /// 1 or more, or an `Idempotency-Key`): what that request made, if it
    /// reached the store, answers it.
    pub retry: bool,
}

/// A request's tag: a hash of the token and the `Idempotency-Key` it sent,
/// else of the token and everything it asked (method, path, query, body).
/// The SDK's client sends the same request again on a retry, so a retry
/// has the first attempt's tag.
pub fn tag(token: &Token, key: Option<&str>, method: &str, target: &str, body: &[u8]) -> String {
    let token = token.sha256.as_bytes();
    let parts: &[&[u8]] = match key {
        Some(key) => &[token, b"key", key.as_bytes()],
        None => &[token, method.as_bytes(), target.as_bytes(), body],
    };
    crate::digest::Sha::of_parts(parts).hex()[..32].to_string()
}

/// One call on one store: the registry, the request, and the store's record
/// (checked visible to the token).
#[derive(Clone, Copy)]
pub(super) struct On<'a> {
    pub reg: &'a Registry,
    pub call: &'a Call<'a>,
    pub meta: &'a StoreMeta,
}

/// Answers one call: a JSON body (status 200) or the error.
pub fn handle(reg: &Registry, call: &Call) -> ApiResult<Value> {
    let seg: Vec<&str> = call.segments.iter().map(String::as_str).collect();
    let m = call.method;
    match seg.as_slice() {
        ["memory_stores"] => match m {
            "POST" => create_store(reg, call),
            "GET" => list_stores(reg, call),
            _ => Err(ApiError::method("GET or POST")),
        },
        ["memory_stores", id, rest @ ..] => {
            let meta = visible(reg, call.token, id)?;
            let on = On {
                reg,
                call,
                meta: &meta,
            };
            match (rest, m) {
                ([], "GET") => Ok(store_json(&meta)),
                ([], "POST") => update_store(on),
                ([], "DELETE") => delete_store(on),
                ([], _) => Err(ApiError::method("GET, POST or DELETE")),
                (["archive"], "POST") => archive_store(on),
                (["archive"], _) => Err(ApiError::method("POST")),
                (["memories"], "POST") => create_memory(on),
                (["memories"], "GET") => list_memories(on),
                (["memories"], _) => Err(ApiError::method("GET or POST")),
                (["memories", mid], "GET") => retrieve_memory(on, mid),
                (["memories", mid], "POST") => update_memory(on, mid),
                (["memories", mid], "DELETE") => delete_memory(on, mid),
                (["memories", _], _) => Err(ApiError::method("GET, POST or DELETE")),
                (["memory_versions"], "GET") => list_versions(on),
                (["memory_versions"], _) => Err(ApiError::method("GET")),
                (["memory_versions", vid], "GET") => retrieve_version(on, vid),
                (["memory_versions", _], _) => Err(ApiError::method("GET")),
                (["memory_versions", vid, "redact"], "POST") => redact_version(on, vid),
                (["memory_versions", _, "redact"], _) => Err(ApiError::method("POST")),
                (["search"], "GET") => search_store(on),
                (["search"], _) => Err(ApiError::method("GET")),
                _ => Err(ApiError::not_found("no such API path")),
            }
        }
        _ => Err(ApiError::not_found("no such API path")),
    }
}

// ---- access -------------------------------------------------------------

/// What a request's head alone decides, before a byte of its body is read:
/// the store it names is one the token reaches, and a token that may not
/// write (or manage stores) is refused a route that does. The same answers
/// the handlers give, given earlier; whatever the body decides is left to
/// them.
pub fn head(reg: &Registry, token: &Token, method: &str, path: &str) -> ApiResult<()> {
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Ok(());
    };
    let seg: Vec<&str> = rest.split('/').collect();
    let writes = method == "POST" || method == "DELETE";
    match seg.as_slice() {
        ["memory_stores"] if method == "POST" => {
            admin(token)?;
            writer(token)
        }
        ["memory_stores", id, rest @ ..] => {
            let id = crate::form::decode(id).unwrap_or_default();
            visible(reg, token, &id)?;
            match rest {
                [] | ["archive"] if writes => {
                    admin(token)?;
                    writer(token)
                }
                ["memories", ..] | ["memory_versions", _, "redact"] if writes => writer(token),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// The store `id` if the token reaches it; the same 404 whether it does
/// not exist or the token does not name it.
fn visible(reg: &Registry, token: &Token, id: &str) -> ApiResult<StoreMeta> {
    if !super::registry::is_store_id(id) || !token.reaches(id) {
        return Err(ApiError::no_store(id));
    }
    reg.meta(id).ok_or_else(|| ApiError::no_store(id))
}

fn admin(token: &Token) -> ApiResult<()> {
    match token.admin {
        true => Ok(()),
        false => Err(ApiError::forbidden(
            "managing stores needs an admin token (`memfs token create --admin`)",
        )),
    }
}

fn writer(token: &Token) -> ApiResult<()> {
    match token.may_write() {
        true => Ok(()),
        false => Err(ApiError::forbidden("this token is read-only")),
    }
}

fn not_archived(meta: &StoreMeta) -> ApiResult<()> {
    match meta.archived_at {
        None => Ok(()),
        Some(_) => Err(ApiError::conflict(format!(
            "store {} is archived: its memories can be read and deleted, not created or changed",
            meta.id
        ))),
    }
}

fn origin(call: &Call) -> Origin {
    Origin::Api {
        token: Arc::from(call.token.name.as_str()),
        request: call.request.as_deref().map(Arc::from),
    }
}

/// How long a request's tag answers its retries.
const RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// For a retry: what its first attempt made, if that reached the store
/// within [`RETRY_WINDOW`] (the index is read up to the history's end).
fn first_attempt(held: &Held, call: &Call) -> ApiResult<Option<ids::Made>> {
    let (true, Some(tag)) = (call.retry, call.request.as_deref()) else {
        return Ok(None);
    };
    resync(held)?;
    let made = held.ids.lock().made_by(tag).cloned();
    Ok(made.filter(|m| {
        metas::parse_time(&m.time)
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < RETRY_WINDOW)
    }))
}

// ---- cursors ------------------------------------------------------------

pub(super) fn encode_cursor(key: &str, path: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{key}\0{path}"))
}

pub(super) fn decode_cursor(text: &str) -> ApiResult<(String, String)> {
    use base64::Engine as _;
    let bad = || ApiError::invalid("`page` is not a page this server handed out");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (key, path) = text.split_once('\0').ok_or_else(bad)?;
    Ok((key.to_string(), path.to_string()))
}
