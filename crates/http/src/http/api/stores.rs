//! Stores: create, list, retrieve, update, archive, delete.

use super::*;

pub(super) fn store_json(meta: &StoreMeta) -> Value {
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

pub(super) fn create_store(reg: &Registry, call: &Call) -> ApiResult<Value> {
    admin(call.token)?;
    writer(call.token)?;
    let asked = CreateStore::parse(call)?;
    // A retry whose first attempt made the store answers with it.
    if let (true, Some(tag)) = (call.retry, call.request.as_deref()) {
        if let Some(made) = reg.made_by(tag, RETRY_WINDOW) {
            return Ok(store_json(&made));
        }
    }
    Ok(store_json(&reg.create(
        asked.name,
        asked.description,
        asked.metadata,
        call.request.clone(),
    )?))
}

pub(super) fn list_stores(reg: &Registry, call: &Call) -> ApiResult<Value> {
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

pub(super) fn update_store(on: On) -> ApiResult<Value> {
    let On { reg, call, meta } = on;
    admin(call.token)?;
    writer(call.token)?;
    not_archived(meta)?;
    let asked = UpdateStore::parse(call)?;
    let updated = reg.update(&meta.id, |m| {
        if let Some(n) = asked.name {
            m.name = n;
        }
        if let Some(d) = asked.description {
            m.description = d;
        }
        for (k, v) in asked.metadata {
            match v {
                Some(v) => m.metadata.insert(k, v),
                None => m.metadata.remove(&k),
            };
        }
        check_metadata(&m.metadata)
    })?;
    Ok(store_json(&updated))
}

pub(super) fn archive_store(on: On) -> ApiResult<Value> {
    let On { reg, call, meta } = on;
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

pub(super) fn delete_store(on: On) -> ApiResult<Value> {
    let On { reg, call, meta } = on;
    admin(call.token)?;
    writer(call.token)?;
    reg.delete(&meta.id)?;
    Ok(json!({"type": "memory_store_deleted", "id": meta.id}))
}
