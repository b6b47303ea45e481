//! Stores: create, list, retrieve, update, archive, delete.

use super::*;

/// A store's record as the API shows it.
pub(super) fn store_of(meta: &StoreMeta) -> wire::Store {
    wire::Store {
        id: meta.id.clone(),
        name: meta.name.clone(),
        description: meta.description.clone(),
        metadata: meta.metadata.clone(),
        created_at: meta.created_at.clone(),
        updated_at: meta.updated_at.clone(),
        archived_at: meta.archived_at.clone(),
    }
}

pub(super) fn retrieve_store(on: On) -> ApiResult<Reply> {
    Ok(store_of(on.meta).into())
}

pub(super) fn create_store(reg: &Registry, call: &Call) -> ApiResult<Reply> {
    let asked = CreateStore::parse(call)?;
    // A retry whose first attempt made the store answers with it.
    if let (true, Some(tag)) = (call.retry, call.request.as_deref()) {
        if let Some(made) = reg.made_by(tag, RETRY_WINDOW) {
            return Ok(store_of(&made).into());
        }
    }
    let made = reg.create(
        asked.name,
        asked.description.unwrap_or_default(),
        asked.metadata.unwrap_or_default(),
        call.request.clone(),
    )?;
    Ok(store_of(&made).into())
}

pub(super) fn list_stores(reg: &Registry, call: &Call) -> ApiResult<Reply> {
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
    Ok(wire::Page {
        data: page.iter().map(store_of).collect(),
        next_page: next,
    }
    .into())
}

pub(super) fn update_store(on: On) -> ApiResult<Reply> {
    let On { reg, call, meta } = on;
    not_archived(meta)?;
    let asked = UpdateStore::parse(call)?;
    let updated = reg.update(&meta.id, |m| {
        if let Some(n) = asked.name {
            m.name = n;
        }
        if let Some(d) = asked.description {
            m.description = d;
        }
        for (k, v) in asked.metadata.unwrap_or_default() {
            match v {
                Some(v) => m.metadata.insert(k, v),
                None => m.metadata.remove(&k),
            };
        }
        check_metadata(&m.metadata)
    })?;
    Ok(store_of(&updated).into())
}

pub(super) fn archive_store(on: On) -> ApiResult<Reply> {
    let On { reg, meta, .. } = on;
    if meta.archived_at.is_some() {
        return Ok(store_of(meta).into());
    }
    let updated = reg.update(&meta.id, |m| {
        m.archived_at = Some(crate::journal::now_text());
        Ok(())
    })?;
    Ok(store_of(&updated).into())
}

pub(super) fn delete_store(on: On) -> ApiResult<Reply> {
    let On { reg, meta, .. } = on;
    reg.delete(&meta.id)?;
    Ok(wire::Deleted::MemoryStoreDeleted {
        id: meta.id.clone(),
    }
    .into())
}
