//! The memory stores API (the hosted one, or another memfs's
//! `serve --http`) as an import's source and an export's target: one
//! store's memories read page by page with their contents, or written one
//! by one. The key comes from an environment variable, never the command
//! line; the store is looked up first, so an endpoint that cannot be
//! reached or refuses the key is said before anything is read or written.

use std::time::Duration;

use serde_json::{json, Value};

/// One store of one endpoint.
pub struct Api {
    agent: ureq::Agent,
    base: String,
    key: String,
    store: String,
}

/// The API's version header, as the SDK sends it.
const VERSION: &str = "2023-06-01";
/// The beta the memory stores API is in, as the pinned SDK names it.
const BETA: &str = "agent-memory-2026-07-22";

impl Api {
    /// `base`: `http(s)://host[:port]` (a trailing `/v1` or `/` is taken
    /// off).
    pub fn new(base: &str, key: String, store: &str) -> Result<Api, String> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!(
                "`{}` is not an http:// or https:// URL",
                crate::text::clip(base)
            ));
        }
        if store.is_empty()
            || !store
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("`{}` is not a store id", crate::text::clip(store)));
        }
        let base = base
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string();
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        Ok(Api {
            agent: config.into(),
            base,
            key,
            store: store.to_string(),
        })
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/v1/memory_stores/{}{rest}", self.base, self.store)
    }

    /// The answer's JSON, or what went wrong in words.
    fn answer(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, String> {
        let mut response = sent.map_err(|e| format!("cannot reach {}: {e}", self.base))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| format!("{}: the answer could not be read: {e}", self.base))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let said = body["error"]["message"].as_str().unwrap_or("").to_string();
        match status {
            200..=299 => Ok(body),
            401 => Err(format!("{} refused the key (401) {said}", self.base)),
            403 => Err(format!(
                "{} does not let this key do that (403): {said}",
                self.base
            )),
            404 => Err(format!(
                "{}: no store {} there, or the key does not reach it (404)",
                self.base, self.store
            )),
            s => Err(format!("{} answered {s}: {said}", self.base)),
        }
    }

    /// A request with the key, version and beta headers the SDK sends.
    fn signed<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        request
            .header("x-api-key", &self.key)
            .header("anthropic-version", VERSION)
            .header("anthropic-beta", BETA)
    }

    fn get(&self, rest: &str, query: &[(&str, &str)]) -> Result<Value, String> {
        let mut request = self.signed(self.agent.get(&self.url(rest)));
        for (k, v) in query {
            request = request.query(*k, *v);
        }
        self.answer(request.call())
    }

    /// The store, looked up (the first request of an import or export).
    pub fn check(&self) -> Result<Value, String> {
        self.get("", &[])
    }

    /// Whether the store holds no memory.
    pub fn is_empty(&self) -> Result<bool, String> {
        let page = self.get("/memories", &[("limit", "1")])?;
        Ok(page["data"].as_array().is_none_or(Vec::is_empty))
    }

    /// Every memory of the store: its path (`/notes/a.md`) and content.
    pub fn memories(
        &self,
        each: &mut dyn FnMut(&str, &str) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut page: Option<String> = None;
        loop {
            let mut query = vec![("view", "full"), ("limit", "20")];
            if let Some(p) = &page {
                query.push(("page", p.as_str()));
            }
            let got = self.get("/memories", &query)?;
            for m in got["data"].as_array().into_iter().flatten() {
                if m["type"] != "memory" {
                    continue;
                }
                let (Some(path), Some(content)) = (m["path"].as_str(), m["content"].as_str())
                else {
                    continue;
                };
                each(path, content)?;
            }
            match got["next_page"].as_str() {
                Some(next) if Some(next) != page.as_deref() => page = Some(next.to_string()),
                _ => return Ok(()),
            }
        }
    }

    /// Writes one memory (`/notes/a.md`).
    pub fn create(&self, path: &str, content: &str) -> Result<(), String> {
        let sent = self
            .signed(self.agent.post(&self.url("/memories")))
            .header("content-type", "application/json")
            .send(json!({"path": path, "content": content}).to_string());
        self.answer(sent).map(|_| ())
    }
}

/// The key in the environment variable `name`, or why there is none.
pub fn key_from(name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_string()),
        _ => Err(format!(
            "no API key: set the environment variable {name} (or name another with --key-env)"
        )),
    }
}
