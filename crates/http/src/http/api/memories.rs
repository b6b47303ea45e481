//! Memories by id: create, retrieve, update, delete, list; each one's
//! content and version read from the store and its history.

use super::*;

/// A store held for one request, which looked at the store's plain files
/// once, at its start (`Store::look_once`): the request's reads of the tree
/// (a retrieve reads it three times) do not look again.
pub(super) struct Answering {
    held: Held,
    _once: crate::store::LookedOnce,
}

impl std::ops::Deref for Answering {
    type Target = Held;
    fn deref(&self) -> &Held {
        &self.held
    }
}

/// The store held (caught up to the head the request's head read, if it
/// read one), what was written in its plain files taken in, its id index
/// brought up to date.
pub(super) fn held(reg: &Registry, call: &Call, meta: &StoreMeta) -> ApiResult<Answering> {
    let head = call
        .checked
        .as_ref()
        .filter(|c| c.id == meta.id)
        .and(call.head);
    let held = reg.hold_after(&meta.id, head)?;
    // What was written in the store's plain files is in its history first.
    let once = held.memory.store().look_once();
    held.memory.store().catch_up();
    resync(&held)?;
    Ok(Answering { held, _once: once })
}

/// The id index brought up to date with the history (after a change).
pub(super) fn resync(held: &Held) -> ApiResult<()> {
    held.ids
        .lock()
        .sync(&held.memory.history())
        .map_err(|e| ApiError::internal(format!("the store's history cannot be read: {e}")))
}

/// The bytes of the file at `path` now, if it is one.
pub(super) fn bytes_at(held: &Held, path: &MemPath) -> Option<Arc<Vec<u8>>> {
    match held
        .memory
        .store()
        .snapshot(path, 0, Window { skip: 0, take: 0 }, &|_| false)
    {
        Ok(Snapshot::File(bytes)) => Some(bytes),
        _ => None,
    }
}

/// A memory as the API shows it: its content only in the full view.
pub(super) fn memory_of(
    store: &str,
    path: &str,
    entry: &Entry,
    bytes: &[u8],
    content_sha256: String,
    full: bool,
) -> wire::Memory {
    wire::Memory {
        id: memory_id(entry.lineage),
        memory_store_id: store.to_string(),
        path: path.to_string(),
        content_sha256,
        content_size_bytes: bytes.len(),
        created_at: entry.created_at.clone(),
        updated_at: entry.updated_at.clone(),
        memory_version_id: version_id(entry.version),
        content: full.then(|| String::from_utf8_lossy(bytes).into_owned()),
    }
}

/// How often a read of a memory that keeps changing under it is tried
/// again with the live bytes before its version's content is read from the
/// journal.
pub(super) const LIVE_TRIES: usize = 3;

/// The memory now at API path `path`, as the API shows it: its id, hash and
/// content from one version. The id entry (from the history) and the bytes
/// (from the tree) are read at different moments; they are one version's
/// when the bytes hash to what that version recorded. Under concurrent
/// writes the history is followed again and the bytes read again; failing
/// that, the version's own content comes from the journal.
pub(super) fn memory_at(
    held: &Held,
    meta: &StoreMeta,
    path: &str,
    full: bool,
) -> ApiResult<wire::Memory> {
    memory_from(held, meta, path, full, None)
}

/// [`memory_at`], its first try on `first` when the caller read the bytes
/// already.
fn memory_from(
    held: &Held,
    meta: &StoreMeta,
    path: &str,
    full: bool,
    mut first: Option<Arc<Vec<u8>>>,
) -> ApiResult<wire::Memory> {
    let mem = memory_path(path)?;
    for _ in 0..LIVE_TRIES {
        let bytes = first
            .take()
            .or_else(|| bytes_at(held, &mem))
            .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
        let sha = Sha::of(&bytes).hex();
        resync(held)?;
        let ids = held.ids.lock();
        let entry = ids
            .entry(path)
            .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
        if entry.sha256.as_deref().is_none_or(|s| s == sha) {
            return Ok(memory_of(&meta.id, path, entry, &bytes, sha, full));
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
    let sha = Sha::of(&bytes).hex();
    Ok(memory_of(&meta.id, path, entry, &bytes, sha, full))
}

pub(super) fn wait(ticket: crate::store::Ticket, path: &str) -> ApiResult<()> {
    ticket.wait().map_err(|e| ApiError::from_store(e, path))
}

pub(super) fn create_memory(on: On) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    not_archived(meta)?;
    let full = view(call, false)?;
    let CreateMemory { path, mem, content } = CreateMemory::parse(call)?;
    let path = path.as_str();
    let held = held(reg, call, meta)?;
    // A retry whose first attempt made the memory answers with it (and a
    // first attempt still in flight shows as a conflict, then as made).
    let made_before = |held: &Held| -> ApiResult<Option<wire::Memory>> {
        let Some(made) = first_attempt(held, call)?.filter(|m| !m.deleted) else {
            return Ok(None);
        };
        let now = held.ids.lock().path_of(made.lineage).map(str::to_string);
        now.map(|p| memory_at(held, meta, &p, full)).transpose()
    };
    if let Some(answer) = made_before(&held)? {
        return Ok(answer.into());
    }
    let made = held
        .memory
        .store()
        .create_file(&mem, content.as_bytes().to_vec(), false, origin(call))
        .map_err(|e| ApiError::from_store(e, path))
        .and_then(|ticket| wait(ticket, path));
    if let Err(e) = made {
        return match made_before(&held)? {
            Some(answer) if e.status == 409 => Ok(answer.into()),
            _ => Err(e),
        };
    }
    // (memory_at follows the history itself.)
    memory_at(&held, meta, path, full).map(Reply::from)
}

/// The live path of memory `mid`.
pub(super) fn path_of(held: &Held, mid: &str) -> ApiResult<String> {
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
pub(super) fn current(held: &Held, mid: &str) -> ApiResult<String> {
    current_bytes(held, mid).map(|(path, _)| path)
}

/// [`current`], with the bytes it found at the path (none when it had to
/// wait for the journal).
fn current_bytes(held: &Held, mid: &str) -> ApiResult<(String, Option<Arc<Vec<u8>>>)> {
    if let Ok(path) = path_of(held, mid) {
        if let Some(bytes) = memory_path(&path).ok().and_then(|m| bytes_at(held, &m)) {
            return Ok((path, Some(bytes)));
        }
    }
    let _ = held.memory.store().barrier(Origin::Memfs).wait();
    resync(held)?;
    path_of(held, mid).map(|path| (path, None))
}

pub(super) fn retrieve_memory(on: On, mid: &str) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let full = view(call, true)?;
    let held = held(reg, call, meta)?;
    let (path, bytes) = current_bytes(&held, mid)?;
    memory_from(&held, meta, &path, full, bytes).map(Reply::from)
}

/// A content over the file limit, refused before anything moves.
fn refuse_too_large(
    store: &crate::store::Store,
    content: Option<&str>,
    path: &str,
) -> ApiResult<()> {
    let max = store.limits().max_file_size;
    match content.filter(|t| t.len() as u64 > max) {
        Some(text) => Err(ApiError::from_store(
            Error::FileTooLarge {
                size: text.len() as u64,
                limit: max,
            },
            path,
        )),
        None => Ok(()),
    }
}

/// The precondition, checked against the content `now`.
fn still_expected(now: &[u8], expect: Option<&str>, path: &str) -> ApiResult<()> {
    let Some(e) = expect else {
        return Ok(()); // (no hash of the content when none is expected)
    };
    let actual = Sha::of(now).hex();
    match actual == e {
        true => Ok(()),
        false => Err(ApiError::from_store(Error::Changed { actual }, path)),
    }
}

/// An update is up to two changes in order (a move, then the content),
/// each checked against the precondition once, after the retry check and
/// the size check that come before anything moves.
pub(super) fn update_memory(on: On, mid: &str) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    not_archived(meta)?;
    let full = view(call, false)?;
    let asked = UpdateMemory::parse(call)?;
    let (content, new_path) = (asked.content.as_deref(), asked.path.as_deref());
    let mut expect = asked.precondition;
    let held = held(reg, call, meta)?;
    let mut path = current(&held, mid)?;
    match retried_update(&held, call, &path)? {
        None => {}
        Some(true) => expect = None,
        Some(false) => return memory_at(&held, meta, &path, full).map(Reply::from),
    }
    let store = held.memory.store();
    refuse_too_large(store, content, &path)?;
    let who = origin(call);
    let mut checked = false;
    if let Some(to) = new_path.filter(|p| *p != path) {
        let to_mem = memory_path(to)?;
        let from_mem = memory_path(&path)?;
        let ticket = store
            .rename_expecting(&from_mem, &to_mem, who.clone(), expect.as_deref())
            .map_err(|e| ApiError::from_store(e, to))?;
        wait(ticket, to)?;
        path = to.to_string();
        checked = true;
    }
    let mem = memory_path(&path)?;
    let now = bytes_at(&held, &mem)
        .ok_or_else(|| ApiError::not_found("the memory was deleted meanwhile"))?;
    if !checked {
        still_expected(&now, expect.as_deref(), &path)?;
    }
    if let Some(text) = content.filter(|t| t.as_bytes() != now.as_slice()) {
        let ticket = store
            .create_file_expecting(&mem, text.as_bytes().to_vec(), true, who, expect.as_deref())
            .map_err(|e| ApiError::from_store(e, &path))?;
        wait(ticket, &path)?;
    }
    // (memory_at follows the history itself.)
    memory_at(&held, meta, &path, full).map(Reply::from)
}

/// For a retried update whose first attempt reached the store: Some(true)
/// when its version is still the memory's (nothing changed it since: finish
/// what it may have left, its precondition held then and the change is its
/// own now), Some(false) when another changed it since (answer as it is,
/// overwrite nothing).
pub(super) fn retried_update(held: &Held, call: &Call, path: &str) -> ApiResult<Option<bool>> {
    let Some(made) = first_attempt(held, call)? else {
        return Ok(None);
    };
    let ids = held.ids.lock();
    let entry = ids.entry(path);
    Ok(Some(entry.is_some_and(|e| {
        e.lineage == made.lineage && e.version == made.version
    })))
}

pub(super) fn delete_memory(on: On, mid: &str) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let expect = call.query.get("expected_content_sha256");
    if let Some(e) = expect.filter(|e| !is_sha(e)) {
        return Err(ApiError::invalid(format!(
            "`expected_content_sha256` is 64 lowercase hex digits, not `{}`",
            crate::text::label(e)
        )));
    }
    let held = held(reg, call, meta)?;
    let deleted = || {
        Reply::from(wire::Deleted::MemoryDeleted {
            id: mid.to_string(),
        })
    };
    // A retry whose first attempt deleted this memory answers as it did.
    let deleted_before = |held: &Held| -> ApiResult<bool> {
        let made = first_attempt(held, call)?;
        Ok(made.is_some_and(|m| m.deleted && Some(m.lineage) == ids::parse_memory_id(mid)))
    };
    if deleted_before(&held)? {
        return Ok(deleted());
    }
    let done = current(&held, mid).and_then(|path| {
        let mem = memory_path(&path)?;
        let ticket = held
            .memory
            .store()
            .remove_expecting(&mem, origin(call), expect.map(String::as_str))
            .map_err(|e| ApiError::from_store(e, &path))?;
        wait(ticket, &path)
    });
    match done {
        Ok(()) => {}
        Err(e) if matches!(e.status, 404 | 409) && deleted_before(&held)? => return Ok(deleted()),
        Err(e) => return Err(e),
    }
    resync(&held)?;
    Ok(deleted())
}

/// One item of a listing: a memory, or a directory marker at depth 1.
pub(super) enum Item<'a> {
    Memory(&'a str, &'a Entry),
    Prefix(String),
}

/// What a memories listing asks for, checked.
pub(super) struct Listing<'a> {
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
pub(super) fn listed<'e>(
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

pub(super) fn list_memories(on: On) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let full = view(call, false)?;
    let limit = limit(call, full)?;
    let asked = Listing::parse(call)?;
    let (desc, after) = (asked.desc, &asked.after);
    let held = held(reg, call, meta)?;
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
            Item::Prefix(p) => data.push(wire::Listed::Prefix(wire::Prefix { path: p.clone() })),
            Item::Memory(p, entry) => {
                let Ok(mem) = memory_path(p) else { continue };
                let Some(bytes) = bytes_at(&held, &mem) else {
                    continue;
                };
                let sha = Sha::of(&bytes).hex();
                data.push(wire::Listed::Memory(memory_of(
                    &meta.id, p, entry, &bytes, sha, full,
                )));
            }
        }
    }
    let more = start + limit < items.len();
    Ok(wire::Page {
        data,
        next_page: more
            .then(|| last.map(|(k, p)| encode_cursor(&k, &p)))
            .flatten(),
    }
    .into())
}
