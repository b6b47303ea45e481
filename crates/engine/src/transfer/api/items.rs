//! One memory at a time, as a store over HTTP keeps a cache of it
//! (`memfs --data https://HOST/v1/memory_stores/ID`): a memory read by
//! id, the listing with ids and digests, a create, an update and a delete
//! each with the content's SHA-256 it expects (a 409 when another writer
//! moved it first) and an `Idempotency-Key`, so a retry whose first
//! attempt was applied is not applied twice; and the versions made since
//! a time, newest first, to pull only what changed.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{Api, RemoteError, CURSOR_MOST};

/// A memory as the API answers it (content only when asked in full).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Item {
    pub id: String,
    pub path: String,
    pub content_sha256: String,
    #[serde(default)]
    pub content: Option<String>,
}

/// One version of a listing of versions: what the puller needs of it.
#[derive(Debug, Clone, Deserialize)]
pub struct Version {
    pub id: String,
    pub memory_id: String,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub content_sha256: Option<String>,
}

/// A page of a listing, with its items still as JSON.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    data: Vec<Value>,
    #[serde(default)]
    next_page: Option<String>,
}

/// The most pages one listing may take (2,000 memories are 20 pages of
/// 100; versions since a time may be more).
const PAGES_MOST: u32 = 1000;

impl Api {
    /// A request that changes the store, with its idempotency key.
    fn send_json(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithBody>,
        key: &str,
        body: Value,
    ) -> Result<Value, RemoteError> {
        let sent = self
            .signed(request)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .send(body.to_string());
        self.answer(sent)
    }

    /// The memory `id`, in full; `None` when the store has no such memory
    /// (any more).
    pub fn memory(&self, id: &str) -> Result<Option<Item>, RemoteError> {
        match self.get(&format!("/memories/{id}"), &[("view", "full")]) {
            Ok(v) => item(&self.shown, v).map(Some),
            Err(RemoteError::NoStore { .. }) => self.check().map(|_| None),
            Err(e) => Err(e),
        }
    }

    /// Every memory of the store, with ids and digests (and contents when
    /// `full`), page by page.
    pub fn items(&self, full: bool) -> Result<Vec<Item>, RemoteError> {
        let limit = if full { "20" } else { "100" };
        let view = if full { "full" } else { "basic" };
        let mut out = Vec::new();
        self.pages("/memories", &[("view", view), ("limit", limit)], &mut |v| {
            if v["type"] == "memory" {
                out.push(item(&self.shown, v)?);
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// The versions made at or after `since` (RFC 3339), newest first.
    pub fn versions_since(&self, since: Option<&str>) -> Result<Vec<Version>, RemoteError> {
        let mut query = vec![("limit", "100")];
        if let Some(t) = since {
            query.push(("created_at[gte]", t));
        }
        let mut out = Vec::new();
        self.pages("/memory_versions", &query, &mut |v| {
            let version: Version = serde_json::from_value(v).map_err(|e| {
                RemoteError::Answer(format!("{}: a version could not be read: {e}", self.shown))
            })?;
            out.push(version);
            Ok(true)
        })?;
        Ok(out)
    }

    /// When the newest version of the store was made, if it has one.
    pub fn newest_version(&self) -> Result<Option<String>, RemoteError> {
        let mut newest = None;
        self.pages("/memory_versions", &[("limit", "1")], &mut |v| {
            newest = v["created_at"].as_str().map(str::to_string);
            Ok(false)
        })?;
        Ok(newest)
    }

    /// Whether the endpoint offers memfs's long poll of the versions
    /// listing (a memfs server says so in a header; the hosted API does
    /// not, and is never sent its parameters); and its newest version's id.
    pub fn offers_wait(&self) -> Result<(bool, Option<String>), RemoteError> {
        let request = self
            .signed(self.agent.get(&self.url("/memory_versions")))
            .query("limit", "1");
        let mut response = self.success(request.call())?;
        let offered = (response.headers().get_all("memfs-extensions"))
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|e| e.trim() == "versions-wait"));
        let text = (response.body_mut().with_config().limit(1 << 20))
            .read_to_string()
            .unwrap_or_default();
        let page: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok((offered, page["data"][0]["id"].as_str().map(str::to_string)))
    }

    /// memfs's long poll: the versions newer than `after` (an id), waiting
    /// up to `wait_s` seconds for one; newest first.
    pub fn versions_after(
        &self,
        after: Option<&str>,
        wait_s: u64,
    ) -> Result<Vec<Version>, RemoteError> {
        let wait = wait_s.to_string();
        let mut query = vec![("limit", "100"), ("wait", wait.as_str())];
        if let Some(a) = after {
            query.push(("after", a));
        }
        let page: Page =
            serde_json::from_value(self.get("/memory_versions", &query)?).map_err(|e| {
                RemoteError::Answer(format!("{}: a page could not be read: {e}", self.shown))
            })?;
        page.data
            .into_iter()
            .map(|v| {
                serde_json::from_value(v).map_err(|e| {
                    RemoteError::Answer(format!("{}: a version could not be read: {e}", self.shown))
                })
            })
            .collect()
    }

    /// Each item of each page of a listing at `rest`, until `each` says
    /// stop or the pages end.
    fn pages(
        &self,
        rest: &str,
        query: &[(&str, &str)],
        each: &mut dyn FnMut(Value) -> Result<bool, RemoteError>,
    ) -> Result<(), RemoteError> {
        let mut cursor: Option<String> = None;
        for _ in 0..PAGES_MOST {
            let mut q: Vec<(&str, &str)> = query.to_vec();
            if let Some(c) = &cursor {
                q.push(("page", c));
            }
            let page: Page = serde_json::from_value(self.get(rest, &q)?).map_err(|e| {
                RemoteError::Answer(format!("{}: a page could not be read: {e}", self.shown))
            })?;
            for v in page.data {
                if !each(v)? {
                    return Ok(());
                }
            }
            match page.next_page {
                Some(next) if next.len() <= CURSOR_MOST && Some(&next) != cursor.as_ref() => {
                    cursor = Some(next)
                }
                Some(_) => {
                    return Err(RemoteError::Answer(format!(
                        "{} gave a page cursor memfs cannot follow; stopped",
                        self.shown
                    )))
                }
                None => return Ok(()),
            }
        }
        Err(RemoteError::Answer(format!(
            "{}: more than {PAGES_MOST} pages; stopped",
            self.shown
        )))
    }

    /// A new memory at `path`.
    pub fn create_item(&self, path: &str, content: &str, key: &str) -> Result<Item, RemoteError> {
        let request = self.agent.post(&self.url("/memories"));
        let v = self.send_json(request, key, json!({"path": path, "content": content}))?;
        item(&self.shown, v)
    }

    /// The memory `id` given a new path and/or content, only if its content
    /// is still `expect` (else [`RemoteError::Status`] 409).
    pub fn update_item(
        &self,
        id: &str,
        path: Option<&str>,
        content: Option<&str>,
        expect: &str,
        key: &str,
    ) -> Result<Item, RemoteError> {
        let mut body =
            json!({"precondition": {"type": "content_sha256", "content_sha256": expect}});
        if let Some(p) = path {
            body["path"] = json!(p);
        }
        if let Some(c) = content {
            body["content"] = json!(c);
        }
        let request = self.agent.post(&self.url(&format!("/memories/{id}")));
        match self.send_json(request, key, body) {
            Ok(v) => item(&self.shown, v),
            Err(e) => Err(self.no_memory(e)?),
        }
    }

    /// The memory `id` deleted, only if its content is still `expect`;
    /// a memory already gone is no error.
    pub fn delete_item(&self, id: &str, expect: &str, key: &str) -> Result<(), RemoteError> {
        let request = self
            .signed(self.agent.delete(&self.url(&format!("/memories/{id}"))))
            .query("expected_content_sha256", expect)
            .header("idempotency-key", key);
        match self.answer(request.call()) {
            Ok(_) => Ok(()),
            Err(RemoteError::NoStore { .. }) => self.check().map(|_| ()),
            Err(e) => Err(e),
        }
    }
}

impl Api {
    /// A 404 of a memory's route: the store is looked up, and if it is
    /// there the memory is what is missing (a [`RemoteError::Status`]
    /// 404).
    fn no_memory(&self, e: RemoteError) -> Result<RemoteError, RemoteError> {
        match e {
            RemoteError::NoStore { .. } => {
                self.check()?;
                Ok(RemoteError::Status {
                    shown: self.shown.clone(),
                    status: 404,
                    said: "no such memory".into(),
                    retry_after: None,
                })
            }
            e => Ok(e),
        }
    }
}

/// A memory of an answer.
fn item(shown: &str, v: Value) -> Result<Item, RemoteError> {
    serde_json::from_value(v)
        .map_err(|e| RemoteError::Answer(format!("{shown}: a memory could not be read: {e}")))
}

impl RemoteError {
    /// Whether the endpoint answered `status`.
    pub fn is_status(&self, status: u16) -> bool {
        matches!(self, RemoteError::Status { status: s, .. } if *s == status)
    }

    /// How long the endpoint asked to be left alone, if it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            RemoteError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the endpoint could not be reached, or answered that it
    /// cannot answer now (a 5xx or 429): worth trying again later.
    pub fn is_transient(&self) -> bool {
        match self {
            RemoteError::Unreachable { .. } => true,
            RemoteError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}
