//! The memory stores API (the hosted one, or another memfs's
//! `serve --http`) as an import's source and an export's target: one
//! store's memories read page by page with their contents, or written one
//! by one. The key comes from an environment variable, never the command
//! line; the store is looked up first, so an endpoint that cannot be
//! reached or refuses the key is said before anything is read or written.

use std::collections::HashSet;
use std::fmt;
use std::io::BufReader;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};

mod items;
pub use items::{Item, Version};

/// Why an endpoint's store could not be read or written: the causes a
/// caller acts on differently (the key, the store, the network, the
/// endpoint's answers) told apart, each in words for a person.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// What was given is not an endpoint, a store id or a key.
    #[error("{0}")]
    Given(String),
    /// The endpoint cannot be reached (or the connection broke).
    #[error("cannot reach {shown}: {why}")]
    Unreachable { shown: String, why: String },
    /// A redirect, which memfs does not follow (the key goes only to the
    /// URL given).
    #[error("{shown} answered {status}, a redirect to `{to}`: memfs follows no redirect (the key goes only to the URL given); give that URL if it is the API")]
    Redirect {
        shown: String,
        status: u16,
        to: String,
    },
    /// The key was refused (401): revoked, or not a key of this endpoint.
    #[error("{shown} refused the key (401) {said}")]
    KeyRefused { shown: String, said: String },
    /// The key may not do that (403).
    #[error("{shown} does not let this key do that (403): {said}")]
    Forbidden { shown: String, said: String },
    /// No such store, or the key does not reach it (404).
    #[error("{shown}: no store {store} there, or the key does not reach it (404)")]
    NoStore { shown: String, store: String },
    /// Any other answer that is not a success.
    #[error("{shown} answered {status}: {said}")]
    Status {
        shown: String,
        status: u16,
        said: String,
        /// How long the endpoint asked to be left alone (`Retry-After`,
        /// `retry-after-ms`), for a 429 or 503 that said.
        retry_after: Option<std::time::Duration>,
    },
    /// The answer, or a page of it, could not be read or went wrong (too
    /// big, not JSON, pages that go round).
    #[error("{0}")]
    Answer(String),
    /// The caller stopped the read (its own words).
    #[error("{0}")]
    Stopped(String),
}

/// One store of one endpoint.
pub struct Api {
    agent: ureq::Agent,
    base: String,
    /// `base` as messages show it: a password in it replaced by `***`.
    shown: String,
    /// Replaced when the file it came from holds a new one
    /// ([`Api::set_key`]); held only to copy it.
    key: crate::lock::Mutex<String>,
    store: String,
}

/// The most bytes one page of memories may take (it is read as a stream:
/// what is held at once is one memory's content).
pub const PAGE_MOST: u64 = 64 << 20;
/// The most bytes an answer other than a page may take (a store, an
/// error).
const ANSWER_MOST: u64 = 1 << 20;
/// Pages in a row that bring no memory not seen before, after which the
/// endpoint is taken to go round without end.
pub const STALE_PAGES: u32 = 10;

/// `url` with its user part, if any (a name and password, or a token
/// alone), replaced by `***`: everything between `://` and the last `@`
/// (a password may hold `/`, `?` or `#`).
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}"),
        None => url.to_string(),
    }
}

/// The longest page cursor taken (a longer one is no cursor an API gives).
pub const CURSOR_MOST: usize = 4096;

/// A short stand-in for a path or cursor seen (what the loop keeps of
/// each: the endpoint's strings are not held).
fn digest(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// The API's version header, as the SDK sends it.
const VERSION: &str = "2023-06-01";
/// The beta the memory stores API is in, as the pinned SDK names it.
const BETA: &str = "agent-memory-2026-07-22";

impl Api {
    /// `base`: `http(s)://host[:port]` (a trailing `/v1` or `/` is taken
    /// off).
    pub fn new(base: &str, key: String, store: &str) -> Result<Api, RemoteError> {
        Api::timing_out(base, key, store, Duration::from_secs(60))
    }

    /// [`Api::new`] whose every request gives up after `most` (and a
    /// connection after 5 s at most).
    pub fn timing_out(
        base: &str,
        key: String,
        store: &str,
        most: Duration,
    ) -> Result<Api, RemoteError> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(RemoteError::Given(format!(
                "`{}` is not an http:// or https:// URL",
                crate::text::clip(&redacted(base))
            )));
        }
        if store.is_empty()
            || !store
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(RemoteError::Given(format!(
                "`{}` is not a store id",
                crate::text::clip(store)
            )));
        }
        let base = base
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string();
        // No redirect is followed: the key goes to the URL given and to no
        // other host, and https never becomes http.
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(most))
            .timeout_connect(Some(most.min(Duration::from_secs(5))))
            .build();
        Ok(Api {
            agent: config.into(),
            shown: crate::text::printable(&redacted(&base)).into_owned(),
            base,
            key: crate::lock::Mutex::new(crate::lock::rank::API_KEY, key),
            store: store.to_string(),
        })
    }

    /// The endpoint as messages show it (no user part).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/v1/memory_stores/{}{rest}", self.base, self.store)
    }

    /// The answer, if it is a success (2xx), or what went wrong in words.
    fn success(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, RemoteError> {
        let shown = self.shown.clone();
        let mut response = sent.map_err(|e| RemoteError::Unreachable {
            shown: shown.clone(),
            why: crate::text::printable(&redacted(&e.to_string())).into_owned(),
        })?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        if (300..400).contains(&status) {
            let to = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(|l| crate::text::label(&redacted(l)))
                .unwrap_or_default();
            return Err(RemoteError::Redirect { shown, status, to });
        }
        let retry_after = retry_after(response.headers());
        let text = response
            .body_mut()
            .with_config()
            .limit(ANSWER_MOST)
            .read_to_string()
            .unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let said = crate::text::label(body["error"]["message"].as_str().unwrap_or(""));
        Err(match status {
            401 => RemoteError::KeyRefused { shown, said },
            403 => RemoteError::Forbidden { shown, said },
            404 => RemoteError::NoStore {
                shown,
                store: self.store.clone(),
            },
            status => RemoteError::Status {
                shown,
                status,
                said,
                retry_after,
            },
        })
    }

    /// The answer's JSON, or what went wrong in words.
    fn answer(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, RemoteError> {
        let mut response = self.success(sent)?;
        let text = response
            .body_mut()
            .with_config()
            .limit(ANSWER_MOST)
            .read_to_string()
            .map_err(|e| {
                RemoteError::Answer(format!("{}: the answer could not be read: {e}", self.shown))
            })?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Whether `key` is the key this client sends.
    pub fn has_key(&self, key: &str) -> bool {
        *self.key.lock() == key
    }

    /// Sends `key` from the next request on (a key file given a new key).
    pub fn set_key(&self, key: String) {
        *self.key.lock() = key;
    }

    /// A request with the key, version and beta headers the SDK sends.
    fn signed<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        let key = self.key.lock().clone();
        request
            .header("x-api-key", key)
            .header("anthropic-version", VERSION)
            .header("anthropic-beta", BETA)
    }

    fn get(&self, rest: &str, query: &[(&str, &str)]) -> Result<Value, RemoteError> {
        let mut request = self.signed(self.agent.get(&self.url(rest)));
        for (k, v) in query {
            request = request.query(*k, *v);
        }
        self.answer(request.call())
    }

    /// The store, looked up (the first request of an import or export).
    pub fn check(&self) -> Result<Value, RemoteError> {
        self.get("", &[])
    }

    /// Whether the store holds no memory.
    pub fn is_empty(&self) -> Result<bool, RemoteError> {
        let page = self.get("/memories", &[("limit", "1")])?;
        Ok(page["data"].as_array().is_none_or(Vec::is_empty))
    }

    /// Every memory of the store: its path (`/notes/a.md`) and content,
    /// each page read as a stream, `page` told after each. Stops with an
    /// error when the pages go round (a cursor given before, or
    /// [`STALE_PAGES`] pages in a row with nothing new) or name more than
    /// `most` memories.
    pub fn memories(
        &self,
        most: usize,
        each: &mut dyn FnMut(&str, &str) -> Result<(), RemoteError>,
        page: &mut dyn FnMut(u64),
    ) -> Result<(), RemoteError> {
        let mut cursor: Option<String> = None;
        let mut cursors: HashSet<u64> = HashSet::new();
        let mut paths: HashSet<u64> = HashSet::new();
        let (mut pages, mut stale) = (0u64, 0u32);
        loop {
            let before = paths.len();
            let next = self.page(cursor.as_deref(), pages + 1, &mut |path, content| {
                let id = digest(path);
                if paths.len() >= most && !paths.contains(&id) {
                    return Err(RemoteError::Answer(format!(
                        "the store holds more memories than the memory takes (more than {most}, --max-entries): stopped at page {}",
                        pages + 1
                    )));
                }
                paths.insert(id);
                each(path, content)
            })?;
            pages += 1;
            page(pages);
            stale = match paths.len() > before {
                true => 0,
                false => stale + 1,
            };
            let Some(next) = next else {
                return Ok(());
            };
            if next.len() > CURSOR_MOST {
                return Err(RemoteError::Answer(format!(
                    "{} gave a page cursor of {} bytes (at most {CURSOR_MOST}); stopped",
                    self.shown,
                    next.len()
                )));
            }
            if !cursors.insert(digest(&next)) {
                return Err(RemoteError::Answer(format!(
                    "{} gave page `{}` again after {pages} pages: its pages go round; stopped",
                    self.shown,
                    crate::text::label(&next)
                )));
            }
            if stale >= STALE_PAGES {
                return Err(RemoteError::Answer(format!(
                    "{} gave {STALE_PAGES} pages in a row with no memory not seen before ({pages} pages): its pages go on without end; stopped",
                    self.shown
                )));
            }
            cursor = Some(next);
        }
    }

    /// One page of memories (after `cursor`), each handed to `each` as it
    /// is read; the next page's cursor.
    fn page(
        &self,
        cursor: Option<&str>,
        number: u64,
        each: &mut dyn FnMut(&str, &str) -> Result<(), RemoteError>,
    ) -> Result<Option<String>, RemoteError> {
        let mut request = self
            .signed(self.agent.get(&self.url("/memories")))
            .query("view", "full")
            .query("limit", "20");
        if let Some(p) = cursor {
            request = request.query("page", p);
        }
        let mut response = self.success(request.call())?;
        let mut failed = None;
        let mut seed = PageSeed {
            each,
            failed: &mut failed,
        };
        let reader = response.body_mut().with_config().limit(PAGE_MOST).reader();
        let mut json = serde_json::Deserializer::from_reader(BufReader::new(reader));
        let read = (&mut seed).deserialize(&mut json);
        if let Some(e) = failed {
            return Err(e);
        }
        read.map_err(|e| {
            RemoteError::Answer(format!(
                "{}: page {number} of memories could not be read (over {PAGE_MOST} bytes, or not JSON?): {e}",
                self.shown
            ))
        })
    }

    /// Writes one memory (`/notes/a.md`).
    pub fn create(&self, path: &str, content: &str) -> Result<(), RemoteError> {
        let sent = self
            .signed(self.agent.post(&self.url("/memories")))
            .header("content-type", "application/json")
            .send(json!({"path": path, "content": content}).to_string());
        self.answer(sent).map(|_| ())
    }
}

/// The key in the environment variable `name`, or why there is none.
pub fn key_from(name: &str) -> Result<String, RemoteError> {
    match std::env::var(name) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_string()),
        _ => Err(RemoteError::Given(format!(
            "no API key: set the environment variable {name} (or name another with --key-env)"
        ))),
    }
}

/// One memory of a page, as much of it as an import reads.
#[derive(Deserialize)]
struct Listed {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// Reads one page as a stream: each memory of `data` handed to `each` as
/// it is read, `next_page` kept, everything else passed over.
struct PageSeed<'a> {
    each: &'a mut dyn FnMut(&str, &str) -> Result<(), RemoteError>,
    /// The error `each` gave (the read stops there).
    failed: &'a mut Option<RemoteError>,
}

impl<'de> DeserializeSeed<'de> for &mut PageSeed<'_> {
    /// The next page's cursor.
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut PageSeed<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a page of memories")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut next = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "data" => map.next_value_seed(Data(&mut *self))?,
                "next_page" => next = map.next_value::<Option<String>>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(next)
    }
}

/// The `data` array of a page.
struct Data<'s, 'a>(&'s mut PageSeed<'a>);

impl<'de> DeserializeSeed<'de> for Data<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Data<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of memories")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(m) = seq.next_element::<Listed>()? {
            let (Some("memory"), Some(path), Some(content)) =
                (m.kind.as_deref(), m.path.as_deref(), m.content.as_deref())
            else {
                continue;
            };
            if let Err(e) = (self.0.each)(path, content) {
                *self.0.failed = Some(e);
                return Err(de::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}

/// The wait an answer asks for: `retry-after-ms` (the SDKs' header) or
/// `retry-after` in seconds (the HTTP date form is not taken), at most a
/// minute.
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<std::time::Duration> {
    let number = |name: &str| -> Option<f64> {
        let v = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    let secs = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))?;
    Some(std::time::Duration::from_secs_f64(secs.min(60.0)))
}

#[cfg(test)]
mod retry_after_tests {
    use super::retry_after;
    use std::time::Duration;

    fn with(pairs: &[(&'static str, &'static str)]) -> ureq::http::HeaderMap {
        let mut h = ureq::http::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, ureq::http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_milliseconds_first_then_the_seconds_bounded_and_nonsense_ignored() {
        assert_eq!(
            retry_after(&with(&[("retry-after", "2"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&with(&[("retry-after", "3")])),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&with(&[("retry-after", "86400")])),
            Some(Duration::from_secs(60))
        );
        assert_eq!(retry_after(&with(&[("retry-after", "-1")])), None);
        assert_eq!(
            retry_after(&with(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")])),
            None
        );
        assert_eq!(retry_after(&with(&[])), None);
    }
}
