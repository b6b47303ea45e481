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

use super::wire::{self, Reply};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::catalog_pg::LookedStore;
use super::error::{ApiError, ApiResult};
use super::ids::{self, api_path, memory_id, version_id, Entry};
use super::metas;
use super::registry::{is_store_id, Held, Registry, StoreMeta};
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
    /// The record of the store the path names, as the request's head found
    /// it visible to the token ([`head`]): not read again (on a stores root
    /// in PostgreSQL, a round trip to the catalog).
    pub checked: Option<StoreMeta>,
    /// On a stores root in PostgreSQL: that store's head in the database,
    /// read with its record (this server catches up to it, not read again).
    pub head: Option<u64>,
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

/// Who may take a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    /// Any token that reaches the store.
    Read,
    /// A token that may write.
    Write,
    /// An admin token that may write (stores are made, changed and removed).
    Admin,
}

/// What a route runs, by what its path names.
#[derive(Clone, Copy)]
enum Run {
    /// `memory_stores`: no store named.
    Top(fn(&Registry, &Call) -> ApiResult<Reply>),
    /// A store (`memory_stores/{id}...`).
    Store(fn(On) -> ApiResult<Reply>),
    /// A memory or a version of a store (`.../{mid}`, `.../{vid}...`).
    Item(fn(On, &str) -> ApiResult<Reply>),
}

/// One route: `{}` in its path is a segment it takes (a store's id, then a
/// memory's or a version's).
struct Route {
    method: &'static str,
    path: &'static str,
    needs: Needs,
    run: Run,
}

const fn route(method: &'static str, path: &'static str, needs: Needs, run: Run) -> Route {
    Route {
        method,
        path,
        needs,
        run,
    }
}

/// Every route of the API, in one table. What a route needs is checked
/// here, from the request's head before its body is read ([`head`]) and
/// again before the route runs ([`handle`]); a path's methods are listed
/// GET, POST, DELETE, the order a 405 names them in.
#[rustfmt::skip]
const ROUTES: &[Route] = {
    use Needs::*;
    use Run::*;
    &[
        route("GET", "memory_stores", Read, Top(list_stores)),
        route("POST", "memory_stores", Admin, Top(create_store)),
        route("GET", "memory_stores/{}", Read, Store(retrieve_store)),
        route("POST", "memory_stores/{}", Admin, Store(update_store)),
        route("DELETE", "memory_stores/{}", Admin, Store(delete_store)),
        route("POST", "memory_stores/{}/archive", Admin, Store(archive_store)),
        route("GET", "memory_stores/{}/memories", Read, Store(list_memories)),
        route("POST", "memory_stores/{}/memories", Write, Store(create_memory)),
        route("GET", "memory_stores/{}/memories/{}", Read, Item(retrieve_memory)),
        route("POST", "memory_stores/{}/memories/{}", Write, Item(update_memory)),
        route("DELETE", "memory_stores/{}/memories/{}", Write, Item(delete_memory)),
        route("GET", "memory_stores/{}/memory_versions", Read, Store(list_versions)),
        route("GET", "memory_stores/{}/memory_versions/{}", Read, Item(retrieve_version)),
        route("POST", "memory_stores/{}/memory_versions/{}/redact", Write, Item(redact_version)),
        route("GET", "memory_stores/{}/search", Read, Store(search_store)),
    ]
};

/// The segments `{}` took, if `segments` is the route's path.
fn taken<'s>(path: &str, segments: &[&'s str]) -> Option<Vec<&'s str>> {
    let pattern: Vec<&str> = path.split('/').collect();
    if pattern.len() != segments.len() {
        return None;
    }
    let mut took = Vec::new();
    for (want, seg) in pattern.iter().zip(segments) {
        match *want {
            "{}" => took.push(*seg),
            lit if lit == *seg => {}
            _ => return None,
        }
    }
    Some(took)
}

/// The route for `method` on `segments` and the segments it took; a path
/// no route has is a 404, a method its routes lack a 405 naming theirs.
fn find<'s>(method: &str, segments: &[&'s str]) -> ApiResult<(&'static Route, Vec<&'s str>)> {
    let mut allowed = Vec::new();
    for r in ROUTES {
        if let Some(took) = taken(r.path, segments) {
            if r.method == method {
                return Ok((r, took));
            }
            allowed.push(r.method);
        }
    }
    match allowed.split_last() {
        None => Err(ApiError::not_found("no such API path")),
        Some((last, [])) => Err(ApiError::method(last)),
        Some((last, rest)) => Err(ApiError::method(&format!("{} or {last}", rest.join(", ")))),
    }
}

/// The store a request's path names (`/v1/memory_stores/{id}...`), decoded.
pub fn store_in(path: &str) -> Option<String> {
    let raw: Vec<&str> = path.strip_prefix("/v1/")?.split('/').collect();
    store_named(&raw).map(|id| crate::form::decode(id).unwrap_or_default())
}

/// The store a path names, if it names one (`memory_stores/{id}...`).
fn store_named<'s>(segments: &[&'s str]) -> Option<&'s str> {
    match segments {
        ["memory_stores", id, ..] => Some(id),
        _ => None,
    }
}

/// Whether `token` may take a route that needs `needs`.
fn allowed(token: &Token, needs: Needs) -> ApiResult<()> {
    match needs {
        Needs::Read => Ok(()),
        Needs::Write => writer(token),
        Needs::Admin => admin(token).and_then(|()| writer(token)),
    }
}

/// Answers one call: a typed answer (status 200) or the error. A store the
/// path names is checked visible to the token first (the same 404 whether
/// it does not exist or the token does not reach it).
pub fn handle(reg: &Registry, call: &Call) -> ApiResult<Reply> {
    let seg: Vec<&str> = call.segments.iter().map(String::as_str).collect();
    let meta = match (store_named(&seg), &call.checked) {
        (Some(id), Some(checked)) if checked.id == id => Some(checked.clone()),
        (named, _) => named.map(|id| visible(reg, call.token, id)).transpose()?,
    };
    let (route, took) = find(call.method, &seg)?;
    allowed(call.token, route.needs)?;
    // (Every store route's path names a store, so `meta` is there.)
    let on = |meta| On { reg, call, meta };
    match (route.run, &meta) {
        (Run::Top(run), _) => run(reg, call),
        (Run::Store(run), Some(meta)) => run(on(meta)),
        (Run::Item(run), Some(meta)) => run(on(meta), took.get(1).copied().unwrap_or_default()),
        (_, None) => Err(ApiError::not_found("no such API path")),
    }
}

// ---- access -------------------------------------------------------------

/// What a request's head alone decides, before a byte of its body is read:
/// the store it names is one the token reaches, and a token that may not
/// write (or manage stores) is refused a route that needs it: the table's
/// answers, given earlier. A path or method no route has is left to
/// [`handle`], as is whatever the body decides.
pub fn head(
    reg: &Registry,
    token: &Token,
    method: &str,
    path: &str,
    looked: Option<&LookedStore>,
) -> ApiResult<Option<StoreMeta>> {
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Ok(None);
    };
    let raw: Vec<&str> = rest.split('/').collect();
    let meta = match store_in(path) {
        Some(id) => Some(match looked.filter(|l| l.id == id) {
            Some(l) if is_store_id(&id) && token.reaches(&id) => reg
                .took(&id, l.meta.clone())
                .ok_or_else(|| ApiError::no_store(&id))?,
            Some(_) => return Err(ApiError::no_store(&id)),
            None => visible(reg, token, &id)?,
        }),
        None => None,
    };
    if let Ok((route, _)) = find(method, &raw) {
        allowed(token, route.needs)?;
    }
    Ok(meta)
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
