//! The memory stores API (`/v1/memory_stores/...`), as the pinned Anthropic
//! SDK's `client.beta.memory_stores` calls it: stores, the memories in a
//! store (addressed by path, with ids that survive renames), and their
//! versions. Each handler runs on a blocking thread against the same
//! synchronous store every other door uses; what it changes is credited to
//! the request's token.

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
            match (rest, m) {
                ([], "GET") => Ok(store_json(&meta)),
                ([], "POST") => update_store(reg, call, &meta),
                ([], "DELETE") => delete_store(reg, call, &meta),
                ([], _) => Err(ApiError::method("GET, POST or DELETE")),
                (["archive"], "POST") => archive_store(reg, call, &meta),
                (["archive"], _) => Err(ApiError::method("POST")),
                (["memories"], "POST") => create_memory(reg, call, &meta),
                (["memories"], "GET") => list_memories(reg, call, &meta),
                (["memories"], _) => Err(ApiError::method("GET or POST")),
                (["memories", mid], "GET") => retrieve_memory(reg, call, &meta, mid),
                (["memories", mid], "POST") => update_memory(reg, call, &meta, mid),
                (["memories", mid], "DELETE") => delete_memory(reg, call, &meta, mid),
                (["memories", _], _) => Err(ApiError::method("GET, POST or DELETE")),
                (["memory_versions"], "GET") => list_versions(reg, call, &meta),
                (["memory_versions"], _) => Err(ApiError::method("GET")),
                (["memory_versions", vid], "GET") => retrieve_version(reg, call, &meta, vid),
                (["memory_versions", _], _) => Err(ApiError::method("GET")),
                (["memory_versions", vid, "redact"], "POST") => {
                    redact_version(reg, call, &meta, vid)
                }
                (["memory_versions", _, "redact"], _) => Err(ApiError::method("POST")),
                _ => Err(ApiError::not_found("no such API path")),
            }
        }
        _ => Err(ApiError::not_found("no such API path")),
    }
}

// ---- access -------------------------------------------------------------

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

// ---- input --------------------------------------------------------------

fn body(call: &Call) -> ApiResult<Map<String, Value>> {
    if call.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::json::parse(call.body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("the request body must be a JSON object")),
        Err(e) => Err(ApiError::invalid(format!(
            "the request body is not valid JSON: {e}"
        ))),
    }
}

/// A string field: absent and null are `None`.
fn opt_str<'a>(map: &'a Map<String, Value>, key: &str) -> ApiResult<Option<&'a str>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(format!("`{key}` must be a string"))),
    }
}

fn view(call: &Call, default_full: bool) -> ApiResult<bool> {
    match call.query.get("view").map(String::as_str) {
        None => Ok(default_full),
        Some("full") => Ok(true),
        Some("basic") => Ok(false),
        Some(other) => Err(ApiError::invalid(format!(
            "`view` is `basic` or `full`, not `{}`",
            crate::text::label(other)
        ))),
    }
}

fn limit(call: &Call, full: bool) -> ApiResult<usize> {
    let n = match call.query.get("limit") {
        None => 20,
        Some(text) => match text.parse::<usize>() {
            Ok(n @ 1..=100) => n,
            _ => return Err(ApiError::invalid("`limit` is a whole number from 1 to 100")),
        },
    };
    Ok(if full { n.min(20) } else { n })
}

fn bool_query(call: &Call, key: &str) -> ApiResult<bool> {
    match call.query.get(key).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::invalid(format!("`{key}` is `true` or `false`"))),
    }
}

fn is_sha(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A time bound (`created_at[gte]`), as the seconds it names.
fn time_query(call: &Call, key: &str) -> ApiResult<Option<std::time::SystemTime>> {
    let Some(text) = call.query.get(key) else {
        return Ok(None);
    };
    metas::parse_time(text)
        .map(Some)
        .ok_or_else(|| ApiError::invalid(format!("`{key}` must be an RFC 3339 time in UTC")))
}

/// A path as the API takes it (`/notes/a.md`): 1 to 20 segments, none empty,
/// `.` or `..`; no control or format characters, no line or paragraph
/// separator; NFC; at most 1,024 bytes. Also a path memfs can hold.
fn memory_path(text: &str) -> ApiResult<MemPath> {
    let bad = |why: &str| {
        Err(ApiError::invalid(format!(
            "`{}` is not a memory path: {why}",
            crate::text::label(text)
        )))
    };
    if !text.starts_with('/') {
        return bad("it must start with /");
    }
    if text.len() > 1024 {
        return bad("it is longer than 1,024 bytes");
    }
    let segments: Vec<&str> = text[1..].split('/').collect();
    if segments.len() > 20 {
        return bad("it has more than 20 segments");
    }
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return bad("a segment is empty, `.` or `..`");
    }
    if text
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_format_char(c))
    {
        return bad("it holds a control or format character");
    }
    if !unicode_normalization::is_nfc(text) {
        return bad("it is not in Unicode Normalization Form C");
    }
    MemPath::parse(&format!("/memories{text}")).or_else(|e| bad(&e.to_string()))
}

/// Unicode's format characters (category Cf) that can hide in a path.
fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}'
        | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}')
}

// ---- stores -------------------------------------------------------------

fn store_json(meta: &StoreMeta) -> Value {
    json!({
        "type": "memory_store",
        "id": meta.id,
        "name": meta.name,
        "description": meta.description,
        "metadata": meta.metadata,
        "created_at": meta.created_at,
        "updated_at": meta.updated_at,
        "archived_at": meta.archived_at,
    })
}

fn check_name(name: &str) -> ApiResult<()> {
    let n = name.chars().count();
    if n == 0 || n > 255 || name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "`name` is 1 to 255 characters, without control characters",
        ));
    }
    Ok(())
}

fn check_description(text: &str) -> ApiResult<()> {
    match text.chars().count() > 1024 {
        true => Err(ApiError::invalid(
            "`description` is at most 1,024 characters",
        )),
        false => Ok(()),
    }
}

fn check_metadata(map: &BTreeMap<String, String>) -> ApiResult<()> {
    if map.len() > 16 {
        return Err(ApiError::invalid("`metadata` holds at most 16 pairs"));
    }
    for (k, v) in map {
        let kn = k.chars().count();
        if kn == 0 || kn > 64 || v.chars().count() > 512 {
            return Err(ApiError::invalid(
                "`metadata` keys are 1 to 64 characters and values at most 512",
            ));
        }
    }
    Ok(())
}

/// `metadata` of a create: string values only.
fn metadata_of(value: Option<&Value>) -> ApiResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let Value::String(v) = v else {
                    return Err(ApiError::invalid("`metadata` values must be strings"));
                };
                out.insert(k.clone(), v.clone());
            }
        }
        Some(_) => return Err(ApiError::invalid("`metadata` must be an object")),
    }
    check_metadata(&out)?;
    Ok(out)
}

fn create_store(reg: &Registry, call: &Call) -> ApiResult<Value> {
    admin(call.token)?;
    writer(call.token)?;
    let map = body(call)?;
    let name = opt_str(&map, "name")?
        .ok_or_else(|| ApiError::invalid("`name` is required"))?
        .to_string();
    check_name(&name)?;
    let description = opt_str(&map, "description")?.unwrap_or("").to_string();
    check_description(&description)?;
    let metadata = metadata_of(map.get("metadata"))?;
    Ok(store_json(&reg.create(name, description, metadata)?))
}

fn list_stores(reg: &Registry, call: &Call) -> ApiResult<Value> {
    let after = match call.query.get("page") {
        None => None,
        Some(cursor) => match reg.position_of(cursor) {
            Some(position) => Some(position),
            None => Some(decode_cursor(cursor)?),
        },
    };
    let query = metas::Query {
        after,
        include_archived: bool_query(call, "include_archived")?,
        created_gte: time_query(call, "created_at[gte]")?,
        created_lte: time_query(call, "created_at[lte]")?,
        limit: limit(call, false)?,
        only: (!call.token.admin).then_some(call.token.stores.as_slice()),
    };
    // Newest first: by creation time, then id.
    let (page, more) = reg.list(&query);
    let next = more
        .then(|| page.last().map(|m| encode_cursor(&m.created_at, &m.id)))
        .flatten();
    Ok(json!({
        "data": page.iter().map(store_json).collect::<Vec<_>>(),
        "next_page": next,
    }))
}

fn update_store(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    admin(call.token)?;
    writer(call.token)?;
    not_archived(meta)?;
    let map = body(call)?;
    let name = opt_str(&map, "name")?.map(str::to_string);
    if let Some(n) = &name {
        check_name(n)?;
    }
    let description = opt_str(&map, "description")?.map(str::to_string);
    if let Some(d) = &description {
        check_description(d)?;
    }
    let changes: Vec<(String, Option<String>)> = match map.get("metadata") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), Some(s.clone()))),
                Value::Null => Ok((k.clone(), None)),
                _ => Err(ApiError::invalid("`metadata` values are strings or null")),
            })
            .collect::<ApiResult<_>>()?,
        Some(_) => return Err(ApiError::invalid("`metadata` must be an object")),
    };
    let updated = reg.update(&meta.id, |m| {
        if let Some(n) = name {
            m.name = n;
        }
        if let Some(d) = description {
            m.description = d;
        }
        for (k, v) in changes {
            match v {
                Some(v) => m.metadata.insert(k, v),
                None => m.metadata.remove(&k),
            };
        }
        check_metadata(&m.metadata)
    })?;
    Ok(store_json(&updated))
}

fn archive_store(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    admin(call.token)?;
    writer(call.token)?;
    if meta.archived_at.is_some() {
        return Ok(store_json(meta));
    }
    let updated = reg.update(&meta.id, |m| {
        m.archived_at = Some(crate::journal::now_text());
        Ok(())
    })?;
    Ok(store_json(&updated))
}

fn delete_store(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    admin(call.token)?;
    writer(call.token)?;
    reg.delete(&meta.id)?;
    Ok(json!({"type": "memory_store_deleted", "id": meta.id}))
}

// ---- cursors ------------------------------------------------------------

fn encode_cursor(key: &str, path: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{key}\0{path}"))
}

fn decode_cursor(text: &str) -> ApiResult<(String, String)> {
    use base64::Engine as _;
    let bad = || ApiError::invalid("`page` is not a page this server handed out");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (key, path) = text.split_once('\0').ok_or_else(bad)?;
    Ok((key.to_string(), path.to_string()))
}

// ---- memories -----------------------------------------------------------

/// The store held, its id index brought up to date.
fn held(reg: &Registry, meta: &StoreMeta) -> ApiResult<Held> {
    let held = reg.hold(&meta.id)?;
    resync(&held)?;
    Ok(held)
}

/// The id index brought up to date with the history (after a change).
fn resync(held: &Held) -> ApiResult<()> {
    held.ids
        .lock()
        .sync(&held.memory.history())
        .map_err(|e| ApiError::internal(format!("the store's history cannot be read: {e}")))
}

/// The bytes of the file at `path` now, if it is one.
fn bytes_at(held: &Held, path: &MemPath) -> Option<Arc<Vec<u8>>> {
    match held
        .memory
        .store()
        .snapshot(path, 0, Window { skip: 0, take: 0 }, &|_| false)
    {
        Ok(Snapshot::File(bytes)) => Some(bytes),
        _ => None,
    }
}

fn memory_json(store: &str, path: &str, entry: &Entry, bytes: &[u8], full: bool) -> Value {
    json!({
        "type": "memory",
        "id": memory_id(entry.lineage),
        "memory_store_id": store,
        "path": path,
        "content_sha256": Sha::of(bytes).hex(),
        "content_size_bytes": bytes.len(),
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
        "memory_version_id": version_id(entry.version),
        "content": full.then(|| String::from_utf8_lossy(bytes).into_owned()),
    })
}

/// How often a read of a memory that keeps changing under it is tried
/// again with the live bytes before its version's content is read from the
/// journal.
const LIVE_TRIES: usize = 3;

/// The memory now at API path `path`, as the API shows it: its id, hash and
/// content from one version. The id entry (from the history) and the bytes
/// (from the tree) are read at different moments; they are one version's
/// when the bytes hash to what that version recorded. Under concurrent
/// writes the history is followed again and the bytes read again; failing
/// that, the version's own content comes from the journal.
fn memory_at(held: &Held, meta: &StoreMeta, path: &str, full: bool) -> ApiResult<Value> {
    let mem = memory_path(path)?;
    for _ in 0..LIVE_TRIES {
        let bytes = bytes_at(held, &mem)
            .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
        let sha = Sha::of(&bytes).hex();
        resync(held)?;
        let ids = held.ids.lock();
        let entry = ids
            .entry(path)
            .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
        if entry.sha256.as_deref().is_none_or(|s| s == sha) {
            return Ok(memory_json(&meta.id, path, entry, &bytes, full));
        }
    }
    let ids = held.ids.lock();
    let entry = ids
        .entry(path)
        .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
    let bytes = entry
        .sha256
        .as_deref()
        .and_then(|sha| held.memory.history().blob(sha))
        .ok_or_else(|| ApiError::unavailable("the memory changed while it was read; try again"))?;
    Ok(memory_json(&meta.id, path, entry, &bytes, full))
}

/// A store error as the API answers it.
fn refused(e: Error, path: &str) -> ApiError {
    let path = crate::text::label(path);
    match e {
        Error::Changed { actual } => ApiError::precondition(format!(
            "the memory's content_sha256 is {actual}, not the one the precondition names; nothing was changed"
        )),
        Error::Exists | Error::IsDir | Error::Root => {
            ApiError::path_conflict(format!("{path} is taken (a memory or a directory is there)"))
        }
        Error::NotDir => ApiError::path_conflict(format!(
            "a segment of {path} is a memory, not a directory"
        )),
        Error::NotFound => ApiError::not_found(format!("no memory at {path}")),
        Error::FileTooLarge { .. } | Error::StoreFull { .. } => ApiError::too_large(e.to_string()),
        e @ (Error::TooDeep { .. } | Error::TooManyEntries { .. } | Error::DirFull { .. } | Error::Path(_)) => {
            ApiError::invalid(e.to_string())
        }
        e @ (Error::Disk(_) | Error::Unsaved(_)) => ApiError::unavailable(e.to_string()),
        e => ApiError::invalid(e.to_string()),
    }
}

fn wait(ticket: crate::store::Ticket, path: &str) -> ApiResult<()> {
    ticket.wait().map_err(|e| refused(e, path))
}

fn create_memory(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    writer(call.token)?;
    not_archived(meta)?;
    let full = view(call, false)?;
    let map = body(call)?;
    let path = opt_str(&map, "path")?.ok_or_else(|| ApiError::invalid("`path` is required"))?;
    if !map.contains_key("content") {
        return Err(ApiError::invalid(
            "`content` is required (\"\" for an empty memory)",
        ));
    }
    let content = opt_str(&map, "content")?.unwrap_or("");
    let mem = memory_path(path)?;
    let held = held(reg, meta)?;
    // A retry whose first attempt made the memory answers with it (and a
    // first attempt still in flight shows as a conflict, then as made).
    let made_before = |held: &Held| -> ApiResult<Option<Value>> {
        let Some(made) = first_attempt(held, call)?.filter(|m| !m.deleted) else {
            return Ok(None);
        };
        let now = held.ids.lock().path_of(made.lineage).map(str::to_string);
        now.map(|p| memory_at(held, meta, &p, full)).transpose()
    };
    if let Some(answer) = made_before(&held)? {
        return Ok(answer);
    }
    let made = held
        .memory
        .store()
        .create_file(&mem, content.as_bytes().to_vec(), false, origin(call))
        .map_err(|e| refused(e, path))
        .and_then(|ticket| wait(ticket, path));
    if let Err(e) = made {
        return match made_before(&held)? {
            Some(answer) if e.status == 409 => Ok(answer),
            _ => Err(e),
        };
    }
    // (memory_at follows the history itself.)
    memory_at(&held, meta, path, full)
}

/// The live path of memory `mid`.
fn path_of(held: &Held, mid: &str) -> ApiResult<String> {
    let missing = || ApiError::not_found(format!("no memory {}", crate::text::label(mid)));
    let lineage = ids::parse_memory_id(mid).ok_or_else(missing)?;
    held.ids
        .lock()
        .path_of(lineage)
        .map(str::to_string)
        .ok_or_else(missing)
}

/// The live path of memory `mid`, where a file is now. A change another
/// door made a moment ago (a rename through the mount) may be in the tree
/// and not yet in the journal: then it waits for the journal to take what
/// is queued, and looks again.
fn current(held: &Held, mid: &str) -> ApiResult<String> {
    if let Ok(path) = path_of(held, mid) {
        if memory_path(&path).is_ok_and(|m| bytes_at(held, &m).is_some()) {
            return Ok(path);
        }
    }
    let _ = held.memory.store().barrier(Origin::Memfs).wait();
    resync(held)?;
    path_of(held, mid)
}

fn retrieve_memory(reg: &Registry, call: &Call, meta: &StoreMeta, mid: &str) -> ApiResult<Value> {
    let full = view(call, true)?;
    let held = held(reg, meta)?;
    let path = current(&held, mid)?;
    memory_at(&held, meta, &path, full)
}

/// An update's `precondition`: the content's SHA-256 it expects, if any.
fn precondition(given: Option<&Value>) -> ApiResult<Option<String>> {
    match given {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(p)) => {
            if p.get("type").and_then(Value::as_str) != Some("content_sha256") {
                return Err(ApiError::invalid(
                    "`precondition.type` must be `content_sha256`",
                ));
            }
            match p.get("content_sha256").and_then(Value::as_str) {
                Some(s) if is_sha(s) => Ok(Some(s.to_string())),
                _ => Err(ApiError::invalid(
                    "`precondition.content_sha256` is 64 lowercase hex digits",
                )),
            }
        }
        Some(_) => Err(ApiError::invalid("`precondition` must be an object")),
    }
}

/// Long because an update is up to two changes in order (a move, then the
/// content), each checked against the precondition once, after the retry
/// check and the size check that come before anything moves.
fn update_memory(reg: &Registry, call: &Call, meta: &StoreMeta, mid: &str) -> ApiResult<Value> {
    writer(call.token)?;
    not_archived(meta)?;
    let full = view(call, false)?;
    let map = body(call)?;
    let content = opt_str(&map, "content")?;
    let new_path = opt_str(&map, "path")?;
    let mut expect = precondition(map.get("precondition"))?;
    let held = held(reg, meta)?;
    let mut path = current(&held, mid)?;
    match retried_update(&held, call, &path)? {
        None => {}
        Some(true) => expect = None,
        Some(false) => return memory_at(&held, meta, &path, full),
    }
    let store = held.memory.store();
    // A content over the file limit is refused before anything moves.
    let max = store.limits().max_file_size;
    if let Some(text) = content.filter(|t| t.len() as u64 > max) {
        return Err(refused(
            Error::FileTooLarge {
                size: text.len() as u64,
                limit: max,
            },
            &path,
        ));
    }
    let who = origin(call);
    let mut checked = false;
    if let Some(to) = new_path.filter(|p| *p != path) {
        let to_mem = memory_path(to)?;
        let from_mem = memory_path(&path)?;
        let ticket = store
            .rename_expecting(&from_mem, &to_mem, who.clone(), expect.as_deref())
            .map_err(|e| refused(e, to))?;
        wait(ticket, to)?;
        path = to.to_string();
        checked = true;
    }
    let mem = memory_path(&path)?;
    let now = bytes_at(&held, &mem)
        .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
    if !checked {
        if let Some(e) = &expect {
            if Sha::of(&now).hex() != *e {
                return Err(refused(
                    Error::Changed {
                        actual: Sha::of(&now).hex(),
                    },
                    &path,
                ));
            }
        }
    }
    if let Some(text) = content.filter(|t| t.as_bytes() != now.as_slice()) {
        let ticket = store
            .create_file_expecting(&mem, text.as_bytes().to_vec(), true, who, expect.as_deref())
            .map_err(|e| refused(e, &path))?;
        wait(ticket, &path)?;
    }
    // (memory_at follows the history itself.)
    memory_at(&held, meta, &path, full)
}

/// For a retried update whose first attempt reached the store: Some(true)
/// when its version is still the memory's (nothing changed it since: finish
/// what it may have left, its precondition held then and the change is its
/// own now), Some(false) when another changed it since (answer as it is,
/// overwrite nothing).
fn retried_update(held: &Held, call: &Call, path: &str) -> ApiResult<Option<bool>> {
    let Some(made) = first_attempt(held, call)? else {
        return Ok(None);
    };
    let ids = held.ids.lock();
    let entry = ids.entry(path);
    Ok(Some(entry.is_some_and(|e| {
        e.lineage == made.lineage && e.version == made.version
    })))
}

fn delete_memory(reg: &Registry, call: &Call, meta: &StoreMeta, mid: &str) -> ApiResult<Value> {
    writer(call.token)?;
    let expect = call.query.get("expected_content_sha256");
    if let Some(e) = expect.filter(|e| !is_sha(e)) {
        return Err(ApiError::invalid(format!(
            "`expected_content_sha256` is 64 lowercase hex digits, not `{}`",
            crate::text::label(e)
        )));
    }
    let held = held(reg, meta)?;
    let deleted = json!({"type": "memory_deleted", "id": mid});
    // A retry whose first attempt deleted this memory answers as it did.
    let deleted_before = |held: &Held| -> ApiResult<bool> {
        let made = first_attempt(held, call)?;
        Ok(made.is_some_and(|m| m.deleted && Some(m.lineage) == ids::parse_memory_id(mid)))
    };
    if deleted_before(&held)? {
        return Ok(deleted);
    }
    let done = current(&held, mid).and_then(|path| {
        let mem = memory_path(&path)?;
        let ticket = held
            .memory
            .store()
            .remove_expecting(&mem, origin(call), expect.map(String::as_str))
            .map_err(|e| refused(e, &path))?;
        wait(ticket, &path)
    });
    match done {
        Ok(()) => {}
        Err(e) if matches!(e.status, 404 | 409) && deleted_before(&held)? => return Ok(deleted),
        Err(e) => return Err(e),
    }
    resync(&held)?;
    Ok(deleted)
}

/// One item of a listing: a memory, or a directory marker at depth 1.
enum Item<'a> {
    Memory(&'a str, &'a Entry),
    Prefix(String),
}

/// What a memories listing asks for, checked.
struct Listing<'a> {
    prefix: &'a str,
    depth: u8,
    order: &'a str,
    desc: bool,
    after: Option<(String, String)>,
}

impl<'a> Listing<'a> {
    fn parse(call: &'a Call) -> ApiResult<Listing<'a>> {
        let q = |name: &str| call.query.get(name).map(String::as_str);
        let prefix = q("path_prefix").unwrap_or("/");
        if !prefix.starts_with('/') || !prefix.ends_with('/') {
            return Err(ApiError::invalid("`path_prefix` starts and ends with /"));
        }
        let depth = match q("depth") {
            None | Some("0") => 0,
            Some("1") => 1,
            Some(_) => return Err(ApiError::invalid("`depth` is 0 or 1")),
        };
        let order = q("order_by").unwrap_or("path");
        if !matches!(order, "path" | "created_at" | "updated_at") {
            return Err(ApiError::invalid(
                "`order_by` is `path`, `created_at` or `updated_at`",
            ));
        }
        if order != "path" && depth == 1 {
            return Err(ApiError::invalid(
                "with `depth` 1, memories are listed by path only",
            ));
        }
        let desc = match q("order") {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(_) => return Err(ApiError::invalid("`order` is `asc` or `desc`")),
        };
        let after = q("page").map(decode_cursor).transpose()?;
        Ok(Listing {
            prefix,
            depth,
            order,
            desc,
            after,
        })
    }
}

/// The memories (and, at depth 1, the directories) a listing shows, in its
/// order, each with its sort key and path.
fn listed<'e>(
    live: impl Iterator<Item = (&'e String, &'e Entry)>,
    hide: &crate::tool::Hide,
    asked: &Listing,
) -> Vec<(String, String, Item<'e>)> {
    let prefix = asked.prefix;
    let mut items: Vec<(String, String, Item)> = Vec::new();
    let mut last_prefix: Option<String> = None;
    for (path, entry) in live {
        let Some(rest) = path.strip_prefix(prefix) else {
            continue;
        };
        if path
            .split('/')
            .any(|name| !name.is_empty() && hide.hides(name))
        {
            continue;
        }
        if asked.depth == 1 {
            if let Some((dir, _)) = rest.split_once('/') {
                let marker = format!("{prefix}{dir}/");
                if last_prefix.as_deref() != Some(marker.as_str()) {
                    last_prefix = Some(marker.clone());
                    items.push((String::new(), marker.clone(), Item::Prefix(marker)));
                }
                continue;
            }
        }
        let key = match asked.order {
            "created_at" => format!("{:020}", entry.lineage),
            "updated_at" => format!("{:020}", entry.version),
            _ => String::new(),
        };
        items.push((key, path.clone(), Item::Memory(path, entry)));
    }
    items.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    if asked.desc {
        items.reverse();
    }
    items
}

fn list_memories(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    let full = view(call, false)?;
    let limit = limit(call, full)?;
    let asked = Listing::parse(call)?;
    let (desc, after) = (asked.desc, &asked.after);
    let held = held(reg, meta)?;
    let hide = &held.memory.tool().config().hide;
    let ids = held.ids.lock();
    let items = listed(ids.live(), hide, &asked);
    let start = match &after {
        None => 0,
        Some(cursor) => items
            .iter()
            .position(|(k, p, _)| {
                let here = (k, p);
                let at = (&cursor.0, &cursor.1);
                if desc {
                    here < at
                } else {
                    here > at
                }
            })
            .unwrap_or(items.len()),
    };
    let mut data = Vec::new();
    let mut last = None;
    for (key, path, item) in items.iter().skip(start).take(limit) {
        // The page goes past an item left out too, so that the next one
        // starts after it.
        last = Some((key.clone(), path.clone()));
        match item {
            Item::Prefix(p) => data.push(json!({"type": "memory_prefix", "path": p})),
            Item::Memory(p, entry) => {
                let Ok(mem) = memory_path(p) else { continue };
                let Some(bytes) = bytes_at(&held, &mem) else {
                    continue;
                };
                data.push(memory_json(&meta.id, p, entry, &bytes, full));
            }
        }
    }
    let more = start + limit < items.len();
    Ok(json!({
        "data": data,
        "next_page": more.then(|| last.map(|(k, p)| encode_cursor(&k, &p))).flatten(),
    }))
}

// ---- versions -----------------------------------------------------------

fn operation(row: &Row) -> Option<&'static str> {
    match row.op {
        Op::Create => Some("created"),
        Op::Found if row.found_gone() => Some("deleted"),
        Op::Found => Some("created"),
        Op::Write | Op::Overwrite | Op::Rename | Op::Revert => Some("modified"),
        Op::Delete | Op::Expire => Some("deleted"),
        Op::Prune | Op::Void => None,
    }
}

/// Who made a version, as one of the API's actor kinds.
pub fn actor_json(actor: &Actor) -> Value {
    match actor.kind.as_str() {
        "agent" => {
            let door = actor.door.as_deref().unwrap_or("agent");
            let session = match &actor.session {
                Some(s) => format!("{door}:{s}"),
                None => door.to_string(),
            };
            json!({"type": "session_actor", "session_id": session})
        }
        "person" => json!({
            "type": "user_actor",
            "user_id": format!(
                "uid:{}:{}",
                actor.uid.map_or("?".into(), |u| u.to_string()),
                actor.process.as_deref().unwrap_or("?")
            ),
        }),
        "api" => json!({"type": "api_actor", "api_key_id": actor.token.as_deref().unwrap_or("?")}),
        _ => json!({"type": "service_account_actor", "service_account_id": "memfs"}),
    }
}

fn version_json(held: &Held, meta: &StoreMeta, row: &Row, full: bool) -> Option<Value> {
    let op = operation(row)?;
    let v = row.id();
    let lineage = held.ids.lock().lineage_of(v).unwrap_or(v);
    let deleted = op == "deleted";
    let gone = row.redacted || deleted;
    let redaction = held_redaction(meta, v);
    let content = match (full, gone, row.sha256.as_deref()) {
        (true, false, Some(sha)) => held
            .memory
            .history()
            .blob(sha)
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    };
    Some(json!({
        "type": "memory_version",
        "id": version_id(v),
        "memory_id": memory_id(lineage),
        "memory_store_id": meta.id,
        "operation": op,
        "created_at": row.time,
        "created_by": actor_json(&row.actor),
        "path": (!row.redacted).then(|| api_path(&row.path)).flatten(),
        "content": content,
        "content_sha256": if gone { None } else { row.sha256.clone() },
        "content_size_bytes": if gone { None } else { row.size },
        "redacted_at": row.redacted.then(|| redaction.as_ref().map(|r| r.0.clone()).unwrap_or_else(|| row.time.clone())),
        "redacted_by": row.redacted.then(|| redaction.map(|r| json!({"type": "api_actor", "api_key_id": r.1}))
            .unwrap_or_else(|| json!({"type": "service_account_actor", "service_account_id": "memfs"}))),
    }))
}

/// When, and with which token, the API redacted version `v` of a store.
fn held_redaction(meta: &StoreMeta, v: u64) -> Option<(String, String)> {
    meta.redactions.get(&v).cloned()
}

/// What a versions listing keeps, checked: newest first, before `before`.
struct VersionFilter<'a> {
    gte: Option<std::time::SystemTime>,
    lte: Option<std::time::SystemTime>,
    op: Option<&'a str>,
    memory: Option<u64>,
    before: Option<u64>,
    api_key: Option<&'a String>,
    session: Option<&'a String>,
    service_account: Option<&'a String>,
}

impl<'a> VersionFilter<'a> {
    fn parse(call: &'a Call) -> ApiResult<VersionFilter<'a>> {
        // Checked in this order, so a query with several faults names the
        // same one as before.
        let gte = time_query(call, "created_at[gte]")?;
        let lte = time_query(call, "created_at[lte]")?;
        let op = call.query.get("operation").map(String::as_str);
        if let Some(o) = op.filter(|o| !matches!(*o, "created" | "modified" | "deleted")) {
            return Err(ApiError::invalid(format!(
                "`operation` is `created`, `modified` or `deleted`, not `{}`",
                crate::text::label(o)
            )));
        }
        let memory = match call.query.get("memory_id") {
            None => None,
            Some(m) => Some(ids::parse_memory_id(m).ok_or_else(|| {
                ApiError::not_found(format!("no memory {}", crate::text::label(m)))
            })?),
        };
        let before =
            match call.query.get("page") {
                None => None,
                Some(p) => Some(ids::parse_version_id(p).ok_or_else(|| {
                    ApiError::invalid("`page` is not a page this server handed out")
                })?),
            };
        Ok(VersionFilter {
            gte,
            lte,
            op,
            memory,
            before,
            api_key: call.query.get("api_key_id"),
            session: call.query.get("session_id"),
            service_account: call.query.get("service_account_id"),
        })
    }

    /// Whether `row` is listed; `lineage` names the memory a version is of.
    fn keeps(&self, row: &Row, lineage: &dyn Fn(u64) -> u64) -> bool {
        let v = row.id();
        if self.before.is_some_and(|b| v >= b) {
            return false;
        }
        let Some(this_op) = operation(row) else {
            return false;
        };
        if api_path(&row.path).is_none() && !row.redacted {
            return false;
        }
        if self.op.is_some_and(|o| o != this_op) {
            return false;
        }
        if self.memory.is_some_and(|m| lineage(v) != m) {
            return false;
        }
        let t = metas::parse_time(&row.time);
        if self.gte.is_some_and(|g| t.is_none_or(|t| t < g))
            || self.lte.is_some_and(|l| t.is_none_or(|t| t > l))
        {
            return false;
        }
        let actor = &row.actor;
        if let Some(k) = self.api_key {
            if actor.kind != "api" || actor.token.as_deref() != Some(k.as_str()) {
                return false;
            }
        }
        if let Some(s) = self.session {
            match actor_json(actor).get("session_id").and_then(Value::as_str) {
                Some(id) if id == s => {}
                _ => return false,
            }
        }
        if let Some(s) = self.service_account {
            if actor.kind != "memfs" || s != "memfs" {
                return false;
            }
        }
        true
    }
}

fn list_versions(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Value> {
    let full = view(call, false)?;
    let limit = limit(call, full)?;
    let filter = VersionFilter::parse(call)?;
    let held = held(reg, meta)?;
    let rows = held
        .memory
        .history()
        .all()
        .map_err(|r| ApiError::internal(r.0))?;
    let lineage = |v: u64| held.ids.lock().lineage_of(v).unwrap_or(v);
    let mut data = Vec::new();
    let mut more = false;
    let mut last = None;
    for row in rows.iter().rev().filter(|row| filter.keeps(row, &lineage)) {
        if data.len() == limit {
            more = true;
            break;
        }
        if let Some(json) = version_json(&held, meta, row, full) {
            data.push(json);
            last = Some(row.id());
        }
    }
    Ok(json!({
        "data": data,
        "next_page": more.then(|| last.map(version_id)).flatten(),
    }))
}

fn version_row(held: &Held, vid: &str) -> ApiResult<Row> {
    let missing = || ApiError::not_found(format!("no memory version {}", crate::text::label(vid)));
    let v = ids::parse_version_id(vid).ok_or_else(missing)?;
    let row = held
        .memory
        .history()
        .row(v)
        .map_err(|r| ApiError::internal(r.0))?
        .ok_or_else(missing)?;
    match operation(&row) {
        Some(_) if api_path(&row.path).is_some() || row.redacted => Ok(row),
        _ => Err(missing()),
    }
}

fn retrieve_version(reg: &Registry, call: &Call, meta: &StoreMeta, vid: &str) -> ApiResult<Value> {
    let full = view(call, true)?;
    let held = held(reg, meta)?;
    let row = version_row(&held, vid)?;
    version_json(&held, meta, &row, full).ok_or_else(|| ApiError::not_found("no such version"))
}

fn redact_version(reg: &Registry, call: &Call, meta: &StoreMeta, vid: &str) -> ApiResult<Value> {
    writer(call.token)?;
    let held = held(reg, meta)?;
    let row = version_row(&held, vid)?;
    let v = row.id();
    if !row.redacted {
        held.memory
            .history()
            .redact(v, false)
            .map_err(|r| ApiError::conflict(r.0))?;
        reg.note_redaction(&meta.id, v, &call.token.name)?;
    }
    let meta = reg
        .meta(&meta.id)
        .ok_or_else(|| ApiError::no_store(&meta.id))?;
    let row = version_row(&held, vid)?;
    version_json(&held, &meta, &row, false).ok_or_else(|| ApiError::not_found("no such version"))
}
