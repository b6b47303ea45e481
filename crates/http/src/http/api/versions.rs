//! Versions: list with filters, retrieve, redact; who made each.

use super::*;

pub(super) fn operation(row: &Row) -> Option<&'static str> {
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
pub fn actor_of(actor: &Actor) -> wire::Actor {
    match actor.kind.as_str() {
        "agent" => {
            let door = actor.door.as_deref().unwrap_or("agent");
            let session_id = match &actor.session {
                Some(s) => format!("{door}:{s}"),
                None => door.to_string(),
            };
            wire::Actor::SessionActor { session_id }
        }
        "person" => wire::Actor::UserActor {
            user_id: format!(
                "uid:{}:{}",
                actor.uid.map_or("?".into(), |u| u.to_string()),
                actor.process.as_deref().unwrap_or("?")
            ),
        },
        "api" => wire::Actor::ApiActor {
            api_key_id: actor.token.as_deref().unwrap_or("?").to_string(),
        },
        _ => wire::Actor::memfs(),
    }
}

pub(super) fn version_of(
    held: &Held,
    meta: &StoreMeta,
    row: &Row,
    full: bool,
) -> Option<wire::Version> {
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
    let (redacted_at, redacted_by) = match (row.redacted, redaction) {
        (false, _) => (None, None),
        (true, Some((at, token))) => (Some(at), Some(wire::Actor::ApiActor { api_key_id: token })),
        (true, None) => (Some(row.time.clone()), Some(wire::Actor::memfs())),
    };
    Some(wire::Version {
        id: version_id(v),
        memory_id: memory_id(lineage),
        memory_store_id: meta.id.clone(),
        operation: op,
        created_at: row.time.clone(),
        created_by: actor_of(&row.actor),
        path: (!row.redacted).then(|| api_path(&row.path)).flatten(),
        content,
        content_sha256: if gone { None } else { row.sha256.clone() },
        content_size_bytes: if gone { None } else { row.size },
        redacted_at,
        redacted_by,
    })
}

/// When, and with which token, the API redacted version `v` of a store.
pub(super) fn held_redaction(meta: &StoreMeta, v: u64) -> Option<(String, String)> {
    meta.redactions.get(&v).cloned()
}

/// What a versions listing keeps, checked: newest first, before `before`.
pub(super) struct VersionFilter<'a> {
    gte: Option<std::time::SystemTime>,
    lte: Option<std::time::SystemTime>,
    op: Option<&'a str>,
    memory: Option<u64>,
    before: Option<u64>,
    /// memfs's extension: only versions newer than this one.
    after: Option<u64>,
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
        let after =
            match call.query.get("after") {
                None => None,
                Some(p) => Some(ids::parse_version_id(p).ok_or_else(|| {
                    ApiError::invalid("`after` is a memory version id (memver_...)")
                })?),
            };
        Ok(VersionFilter {
            gte,
            lte,
            op,
            memory,
            before,
            after,
            api_key: call.query.get("api_key_id"),
            session: call.query.get("session_id"),
            service_account: call.query.get("service_account_id"),
        })
    }

    /// Whether `row` is listed; `lineage` names the memory a version is of.
    fn keeps(&self, row: &Row, lineage: &dyn Fn(u64) -> u64) -> bool {
        let v = row.id();
        if self.before.is_some_and(|b| v >= b) || self.after.is_some_and(|a| v <= a) {
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
            match actor_of(actor) {
                wire::Actor::SessionActor { session_id } if session_id == *s => {}
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

/// The longest a listing of versions waits for one (`wait=S`).
const WAIT_MOST: u64 = 30;

/// `wait=S`: how long the listing may wait for a version when it has none
/// (memfs's extension, offered by the `memfs-extensions: versions-wait`
/// header of every answer; the hosted API has no such parameter).
fn wait_query(call: &Call) -> ApiResult<Option<std::time::Duration>> {
    match call.query.get("wait") {
        None => Ok(None),
        Some(text) => match text.parse::<u64>() {
            Ok(s @ 0..=WAIT_MOST) => Ok(Some(std::time::Duration::from_secs(s))),
            _ => Err(ApiError::invalid(format!(
                "`wait` is a whole number of seconds from 0 to {WAIT_MOST}"
            ))),
        },
    }
}

pub(super) fn list_versions(on: On) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let full = view(call, false)?;
    let limit = limit(call, full)?;
    let filter = VersionFilter::parse(call)?;
    let wait = wait_query(call)?;
    let held = held(reg, call, meta)?;
    let until = wait.map(|w| std::time::Instant::now() + w);
    let _place = until.and_then(|_| crate::http::changed::Waiting::take());
    loop {
        let seen = held.changed.now();
        let page = versions_page(&held, meta, &filter, limit, full)?;
        match (until, &_place) {
            (Some(until), Some(_)) if page.data.is_empty() && page.next_page.is_none() => {
                if !held.changed.wait_past(seen, until) {
                    return Ok(page.into());
                }
                // (The change is in the history once it is durable.)
                held.memory.store().catch_up();
                super::memories::resync(&held)?;
            }
            _ => return Ok(page.into()),
        }
    }
}

/// One page of the versions `filter` keeps, newest first.
fn versions_page(
    held: &Held,
    meta: &StoreMeta,
    filter: &VersionFilter,
    limit: usize,
    full: bool,
) -> ApiResult<wire::Page<wire::Version>> {
    // (Recent versions, a cache's pull or a long poll, from the id
    // index's last rows; else the whole history.)
    let recent = match (filter.after, filter.gte) {
        (None, None) => None,
        (after, gte) => held.ids.lock().recent(after, gte),
    };
    let rows = match recent {
        Some(rows) => rows,
        None => held
            .memory
            .history()
            .all()
            .map_err(|r| ApiError::internal(r.0))?,
    };
    let lineage = |v: u64| held.ids.lock().lineage_of(v).unwrap_or(v);
    let mut data = Vec::new();
    let mut more = false;
    let mut last = None;
    for row in rows.iter().rev().filter(|row| filter.keeps(row, &lineage)) {
        if data.len() == limit {
            more = true;
            break;
        }
        if let Some(version) = version_of(held, meta, row, full) {
            data.push(version);
            last = Some(row.id());
        }
    }
    Ok(wire::Page {
        data,
        next_page: more.then(|| last.map(version_id)).flatten(),
    })
}

pub(super) fn version_row(held: &Held, vid: &str) -> ApiResult<Row> {
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

pub(super) fn retrieve_version(on: On, vid: &str) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let full = view(call, true)?;
    let held = held(reg, call, meta)?;
    let row = version_row(&held, vid)?;
    version_of(&held, meta, &row, full)
        .map(Reply::from)
        .ok_or_else(|| ApiError::not_found("no such version"))
}

pub(super) fn redact_version(on: On, vid: &str) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    let held = held(reg, call, meta)?;
    let row = version_row(&held, vid)?;
    let v = row.id();
    if !row.redacted {
        held.memory
            .history()
            .redact(v, false)
            .map_err(|r| ApiError::conflict(r.0))?;
        crate::control::request::purge_search(held.memory.control());
        reg.note_redaction(&meta.id, v, &call.token.name)?;
    }
    let meta = reg
        .meta(&meta.id)
        .ok_or_else(|| ApiError::no_store(&meta.id))?;
    let row = version_row(&held, vid)?;
    version_of(&held, &meta, &row, false)
        .map(Reply::from)
        .ok_or_else(|| ApiError::not_found("no such version"))
}
