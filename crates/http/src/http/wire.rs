//! The memory stores API's objects as the wire carries them: store, memory,
//! memory prefix, memory version, actor, list page, deletion, search result,
//! error. Every answer a handler gives is one of these ([`Reply`]), so the
//! shape of each object is written once, here, and the compiler checks that
//! a handler fills every field (a `json!` map would not).
//!
//! Field order is the API reference's; an absent value the API spells
//! `null` is an `Option` serialized as `null`, not left out.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::search::Line;

/// `memory_store`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "memory_store")]
pub struct Store {
    pub id: String,
    pub name: String,
    pub description: String,
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// `memory`: `content` is `null` in the basic view.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "memory")]
pub struct Memory {
    pub id: String,
    pub memory_store_id: String,
    pub path: String,
    pub content_sha256: String,
    pub content_size_bytes: usize,
    pub created_at: String,
    pub updated_at: String,
    pub memory_version_id: String,
    pub content: Option<String>,
}

/// One item of a memories listing: a memory, or a path prefix that holds
/// more (`depth`).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Listed {
    Memory(Memory),
    Prefix(Prefix),
}

/// `memory_prefix`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "memory_prefix")]
pub struct Prefix {
    pub path: String,
}

/// Who made (or redacted) a version: one of the API's actor kinds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Actor {
    SessionActor { session_id: String },
    UserActor { user_id: String },
    ApiActor { api_key_id: String },
    ServiceAccountActor { service_account_id: String },
}

impl Actor {
    /// memfs itself (a compaction, an expiry, a redaction of old).
    pub fn memfs() -> Actor {
        Actor::ServiceAccountActor {
            service_account_id: "memfs".to_string(),
        }
    }
}

/// `memory_version`: what was gone (deleted or redacted) has no path,
/// content or digest.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "memory_version")]
pub struct Version {
    pub id: String,
    pub memory_id: String,
    pub memory_store_id: String,
    pub operation: &'static str,
    pub created_at: String,
    pub created_by: Actor,
    pub path: Option<String>,
    pub content: Option<String>,
    pub content_sha256: Option<String>,
    pub content_size_bytes: Option<u64>,
    pub redacted_at: Option<String>,
    pub redacted_by: Option<Actor>,
}

/// A listing's page: `next_page` is the cursor of the next, if any.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_page: Option<String>,
}

/// `memory_store_deleted` and `memory_deleted`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Deleted {
    MemoryStoreDeleted { id: String },
    MemoryDeleted { id: String },
}

/// `memory_search_result` (memfs' own extension).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "memory_search_result")]
pub struct Hit {
    pub memory_id: Option<String>,
    pub path: String,
    pub score: f32,
    pub lines: Vec<Line>,
}

/// A search's answer: cut at its deadline, it says so and why.
#[derive(Debug, Serialize)]
pub struct Found {
    pub data: Vec<Hit>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The error body every refusal carries.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "error")]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize)]
pub struct ErrorDetail<'a> {
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub message: &'a str,
}

/// Every answer a route gives (status 200).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Reply {
    Store(Store),
    Stores(Page<Store>),
    Memory(Memory),
    Memories(Page<Listed>),
    Version(Version),
    Versions(Page<Version>),
    Deleted(Deleted),
    Found(Found),
}

macro_rules! reply_from {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        $(impl From<$ty> for Reply {
            fn from(v: $ty) -> Reply {
                Reply::$variant(v)
            }
        })*
    };
}

reply_from!(
    Store(Store),
    Stores(Page<Store>),
    Memory(Memory),
    Memories(Page<Listed>),
    Version(Version),
    Versions(Page<Version>),
    Deleted(Deleted),
    Found(Found),
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The tags and `null`s as the API reference spells them.
    #[test]
    fn objects_carry_their_type_and_their_nulls() {
        let store = Store {
            id: "memstore_1".into(),
            name: "n".into(),
            description: String::new(),
            metadata: BTreeMap::new(),
            created_at: "t".into(),
            updated_at: "t".into(),
            archived_at: None,
        };
        let v = serde_json::to_value(Reply::from(store)).unwrap();
        assert_eq!(v["type"], "memory_store");
        assert_eq!(v["archived_at"], serde_json::Value::Null);
        assert!(v.as_object().unwrap().contains_key("archived_at"));
        let gone = Deleted::MemoryDeleted { id: "mem_1".into() };
        assert_eq!(
            serde_json::to_value(gone).unwrap(),
            json!({"type": "memory_deleted", "id": "mem_1"})
        );
        assert_eq!(
            serde_json::to_value(Actor::memfs()).unwrap(),
            json!({"type": "service_account_actor", "service_account_id": "memfs"})
        );
        let found = Found {
            data: vec![],
            cut: false,
            note: None,
        };
        assert_eq!(serde_json::to_value(found).unwrap(), json!({"data": []}));
        let err = ErrorBody {
            error: ErrorDetail {
                kind: "not_found_error",
                message: "m",
            },
        };
        assert_eq!(
            serde_json::to_value(err).unwrap(),
            json!({"type": "error", "error": {"type": "not_found_error", "message": "m"}})
        );
    }
}
