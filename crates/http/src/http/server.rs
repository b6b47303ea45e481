//! The HTTP door's requests: who asks (the token), within its rate, then
//! the memory stores API or MCP, answered by the synchronous store on a
//! blocking thread of [`crate::listen`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use super::api::{self, Call};
use super::catalog::CatalogError;
use super::catalog_pg::LookedStore;
use super::error::ApiError;
use super::limits::{Bounds, Rates, Slot, TokenSlots};
use super::mcp::Sessions;
use super::registry::{Registry, SocketBounds};
use super::tokens::{Token, Tokens};
use crate::listen::{self, Body, BodyError};
use crate::memory::Options;

/// How a server is set up.
pub struct Config {
    /// The stores root; for a root in PostgreSQL, this server's cache.
    pub root: PathBuf,
    /// The database of a stores root in PostgreSQL.
    pub database: Option<crate::shared::Target>,
    pub addr: String,
    pub options: Options,
    pub bounds: Bounds,
    pub socket: SocketBounds,
    /// How long an unused store stays open.
    pub idle: Duration,
    /// The most stores held open at once (fewer when the process's limit
    /// on open files would not allow as many).
    pub max_open: usize,
}

/// File descriptors an open store holds (its data dir's directories and
/// lock, its journal directory, its socket), with room for the few it
/// opens for a moment.
const FDS_PER_STORE: u64 = 12;

struct State {
    reg: Arc<Registry>,
    web: super::web::WebDoor,
    tokens: Tokens,
    rates: Rates,
    slots: Arc<TokenSlots>,
    sessions: Sessions,
    bounds: Bounds,
    requests: AtomicU64,
}

fn json_response(
    status: u16,
    body: &impl serde::Serialize,
    extra: &[(&str, String)],
) -> Response<Body> {
    // (Serializing memfs' own types and `Value`s cannot fail: every map
    // key is a string.)
    let text = serde_json::to_string(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    crate::listen::add_headers(h, extra);
    r
}

fn error_response(e: &ApiError, request: u64) -> Response<Body> {
    let mut extra = vec![("request-id", format!("req_{request}"))];
    if let Some(s) = e.retry_after {
        // The SDK's client reads `retry-after-ms` first, then `retry-after`.
        extra.push(("retry-after", s.to_string()));
        extra.push(("retry-after-ms", (s * 1000).to_string()));
        extra.push(("x-should-retry", "true".into()));
    }
    if e.status == 408 || e.status == 413 {
        extra.push(("connection", "close".into()));
    }
    if final_answer(e.status) {
        extra.push(("x-should-retry", "false".into()));
    }
    json_response(e.status, &e.body(), &extra)
}

/// An answer a retry cannot change: the SDK's client is told not to retry
/// it (it retries a 409 twice with back-off otherwise: three requests and
/// about 1.5 s for an answer that was final the first time).
fn final_answer(status: u16) -> bool {
    matches!(status, 400 | 401 | 403 | 404 | 405 | 409 | 413 | 422)
}

/// The tokens cannot be read now (their file, or the database of a root in
/// PostgreSQL): 503, which a client retries, never a 401 it would believe.
fn tokens_unreadable(e: &super::catalog::CatalogError) -> ApiError {
    tracing::warn!("reading the tokens: {e}");
    ApiError::unavailable("the server cannot read its tokens now; try again shortly")
}

/// The token a request presents: `Authorization: Bearer` or `x-api-key`.
fn presented(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            return Some(t.trim().to_string());
        }
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
}

fn serve_request(state: &State, parts: Parts, body: Result<Vec<u8>, BodyError>) -> Response<Body> {
    let n = state.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let path = parts.uri.path();
    if path == "/web" || path.starts_with("/web/") {
        return state.web.answer(&state.reg, &state.tokens, parts, body);
    }
    if path == HEALTH {
        return health(state);
    }
    // (Tests: a handler that panics is answered 500, the connection and
    // the server going on.)
    fail::fail_point!("http::handler-panics", |_| panic!(
        "a failpoint panics in a handler"
    ));
    answer(state, parts, body, n).unwrap_or_else(|e| {
        if e.status >= 500 {
            tracing::warn!("request {n}: {} {}", e.status, e.message);
        } else {
            tracing::debug!("request {n}: {} {}", e.status, e.message);
        }
        error_response(&e, n)
    })
}

/// The health check's path (the name load balancers and Kubernetes use).
const HEALTH: &str = "/healthz";

/// `GET /healthz`, asked without a token: 200 `{"status":"ok",...}` when this
/// server can serve (it holds its root or cache, and reads its tokens: the
/// database answers, for a root in PostgreSQL), else 503
/// `{"status":"unavailable","reason":...}`. It names no path and no host.
fn health(state: &State) -> Response<Body> {
    match state.tokens.list() {
        Ok(_) => json_response(
            200,
            &Health {
                status: "ok",
                stores: Some(state.reg.count()),
                stores_open: Some(state.reg.open_count()),
                reason: None,
            },
            &[],
        ),
        Err(e) => {
            tracing::warn!("health check: reading the tokens: {e}");
            let reason = match state.reg.catalog() {
                Some(_) => "the database does not answer",
                None => "the stores root cannot be read",
            };
            let said = Health {
                status: "unavailable",
                stores: None,
                stores_open: None,
                reason: Some(reason),
            };
            json_response(503, &said, &[("retry-after", "1".into())])
        }
    }
}

/// The health check's answer.
#[derive(serde::Serialize)]
struct Health {
    status: &'static str,
    /// The stores the root holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    stores: Option<usize>,
    /// Of which open in this server now.
    #[serde(skip_serializing_if = "Option::is_none")]
    stores_open: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

fn bad_query() -> ApiError {
    ApiError::invalid("the query string is not valid percent-encoded UTF-8")
}

/// The API path's segments past `/v1/`, decoded (none for MCP); any other
/// path is a 404.
fn segments_of(path: &str, is_mcp: bool) -> Result<Vec<String>, ApiError> {
    match path.strip_prefix("/v1/") {
        Some(rest) if !is_mcp => rest
            .split('/')
            .map(|s| crate::form::decode(s).ok_or_else(bad_query))
            .collect(),
        _ if is_mcp => Ok(Vec::new()),
        _ => Err(ApiError::not_found(
            "no such path; the API is under /v1/, MCP at /mcp, the page at /web/",
        )),
    }
}

/// The request's token: the one the precheck left (it decided from the
/// head what the head allows: the token, its rate, its slot, its store and
/// rights), else looked up and its rate taken.
fn token_of(state: &State, parts: &Parts) -> Result<super::tokens::Token, ApiError> {
    if let Some(found) = parts.extensions.get::<super::tokens::Token>() {
        return Ok(found.clone());
    }
    let secret = presented(&parts.headers).ok_or_else(ApiError::unauthenticated)?;
    let token = state
        .tokens
        .find(&secret)
        .map_err(|e| tokens_unreadable(&e))?
        .ok_or_else(ApiError::unauthenticated)?;
    state
        .rates
        .take(&token.name)
        .map_err(ApiError::rate_limited)?;
    Ok(token)
}

/// One API or MCP request, in order: its path and query, its token (left
/// by the precheck, or looked up), its rate, its body, then the call.
fn answer(
    state: &State,
    parts: Parts,
    body: Result<Vec<u8>, BodyError>,
    n: u64,
) -> Result<Response<Body>, ApiError> {
    let path = parts.uri.path();
    let query: HashMap<String, String> =
        crate::form::parse(parts.uri.query().unwrap_or("")).ok_or_else(bad_query)?;
    let method = parts.method.as_str();
    let is_mcp = path == "/mcp";
    let segments = segments_of(path, is_mcp)?;
    let token = token_of(state, &parts)?;
    let body = body.map_err(|e| body_error(state, e))?;
    let request_id = ("request-id", format!("req_{n}"));
    if is_mcp {
        return mcp(state, &parts, &query, &token, &body, request_id);
    }
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let key = header("idempotency-key");
    let retried = header("x-stainless-retry-count")
        .and_then(|n| n.trim().parse::<u32>().ok())
        .is_some_and(|n| n >= 1);
    let target = parts.uri.path_and_query().map_or(path, |pq| pq.as_str());
    let checked = parts.extensions.get::<Checked>();
    let call = Call {
        method,
        segments,
        query,
        body: &body,
        token: &token,
        request: (method != "GET").then(|| api::tag(&token, key, method, target, &body)),
        retry: retried || key.is_some(),
        checked: checked.map(|c| c.0.clone()),
        head: checked.and_then(|c| c.1),
    };
    let value = api::handle(&state.reg, &call)?;
    // (memfs's own extensions, which a client uses only once offered.)
    let offered = ("memfs-extensions", "versions-wait".to_string());
    Ok(json_response(200, &value, &[request_id, offered]))
}

/// A request to `/mcp` (streamable HTTP, without an event stream): POST a
/// message, DELETE the session.
fn mcp(
    state: &State,
    parts: &Parts,
    query: &HashMap<String, String>,
    token: &super::tokens::Token,
    body: &[u8],
    request_id: (&'static str, String),
) -> Result<Response<Body>, ApiError> {
    // The MCP specification: a server MUST validate Origin (a page in a
    // browser, DNS rebinding). MCP clients are programs and send none; a
    // request that carries one, `null` included, comes from a web page.
    if let Some(origin) = parts.headers.get("origin") {
        let shown = crate::text::label(&String::from_utf8_lossy(origin.as_bytes()));
        return Err(ApiError::forbidden(format!(
            "an MCP request from a web page (Origin: {shown}) is refused; MCP clients send no Origin"
        )));
    }
    let method = parts.method.as_str();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok());
    match method {
        "POST" => {}
        "DELETE" => {
            let closed = match session {
                Some(s) => state.sessions.close(s, token)?,
                None => false,
            };
            return match closed {
                true => Ok(json_response(200, &crate::serve::mcp_wire::Empty {}, &[])),
                false => Err(ApiError::not_found("no such MCP session")),
            };
        }
        _ => {
            return Err(ApiError::method(
                "POST or DELETE (this server opens no event stream)",
            ))
        }
    }
    let store = query.get("store").map(String::as_str);
    let answered = super::mcp::post(&state.reg, &state.sessions, token, store, session, body)?;
    let mut extra = vec![request_id];
    if let Some(s) = answered.session {
        extra.push(("mcp-session-id", s));
    }
    Ok(match answered.body {
        Some(body) => json_response(answered.status, &body, &extra),
        None => {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::ACCEPTED;
            r
        }
    })
}

/// Everything a request's head decides, before its body is read: the
/// token's rate, a slot among its token's ([`Bounds::per_token`]), and the
/// store and rights the route needs.
fn from_head(
    state: &State,
    parts: &Parts,
    token: &Token,
    looked: Option<&LookedStore>,
) -> Result<(Slot, Option<Checked>), ApiError> {
    state
        .rates
        .take(&token.name)
        .map_err(ApiError::rate_limited)?;
    let slot = state
        .slots
        .take(&token.name)
        .ok_or_else(|| ApiError::too_many_in_flight(state.slots.most()))?;
    let path = parts.uri.path();
    if path == "/mcp" {
        // (Only a new session's request names its store: a session's later
        // requests and its DELETE use the session's own.)
        let new_session =
            parts.method == hyper::Method::POST && !parts.headers.contains_key("mcp-session-id");
        let query = crate::form::parse(parts.uri.query().unwrap_or("")).unwrap_or_default();
        if let Some(id) = query.get("store").filter(|_| new_session) {
            if !super::registry::is_store_id(id) || !token.reaches(id) {
                return Err(ApiError::no_store(id));
            }
        }
    } else if let Some(meta) = api::head(&state.reg, token, parts.method.as_str(), path, looked)? {
        let head = looked.filter(|l| l.id == meta.id).map(|l| l.head);
        return Ok((slot, Some(Checked(meta, head))));
    }
    Ok((slot, None))
}

/// The store's record the request's head was checked against (see
/// `api::Call::checked`), handed to the handler with the head; on a root in
/// PostgreSQL, with the store's head read in the same round trip.
#[derive(Clone)]
struct Checked(super::registry::StoreMeta, Option<u64>);

/// A memory's create, retrieve, update or delete of a small body:
/// answered from the store's memory and one journal flush at most, once
/// the store is open (see `listen::Quick`). Listings, versions, search,
/// stores' records, MCP, the page and a body over [`QUICK_BODY`] are not.
fn quick_route(parts: &Parts) -> bool {
    let declared = listen::declared_length(parts);
    if declared.is_some_and(|n| n > QUICK_BODY) || parts.headers.contains_key("transfer-encoding") {
        return false;
    }
    let segments: Vec<&str> = parts.uri.path().split('/').collect();
    match segments.as_slice() {
        ["", "v1", "memory_stores", _, "memories"] => parts.method == hyper::Method::POST,
        ["", "v1", "memory_stores", _, "memories", _] => true,
        _ => false,
    }
}

/// How a request may be answered on the runtime's thread (`listen::Quick`):
/// a quick route on an open store; a read only when that store has no
/// write in flight (its catch-up would wait for the journal).
fn quick(state: &State, parts: &Parts, id: &str) -> Option<listen::Quick> {
    let read = parts.method == hyper::Method::GET;
    (quick_route(parts) && state.reg.is_open(id, read)).then_some(match read {
        true => listen::Quick::Read,
        false => listen::Quick::Write,
    })
}

/// The largest body a quick request may carry (hashing and writing a
/// larger one would hold the runtime's thread for milliseconds).
const QUICK_BODY: u64 = 64 << 10;

/// The largest body a route of the API or MCP takes: a memory's content
/// (or an MCP message) up to `max_body`; a store's record, a redaction or an
/// archive a few kilobytes; a request that carries no body (GET, DELETE) a
/// little, so that a client sending an empty `{}` is still served.
pub fn body_cap(parts: &Parts, max_body: usize) -> usize {
    const RECORD: usize = 64 << 10;
    const NONE: usize = 4 << 10;
    if parts.method != hyper::Method::POST {
        return NONE.min(max_body);
    }
    let path = parts.uri.path();
    let memory = path == "/mcp"
        || path
            .strip_prefix("/v1/memory_stores/")
            .and_then(|rest| rest.split('/').nth(1))
            .is_some_and(|s| s == "memories");
    match memory {
        true => max_body,
        false => RECORD.min(max_body),
    }
}

/// What a request body that could not be read answers.
fn body_error(state: &State, e: BodyError) -> ApiError {
    match e {
        BodyError::TooLarge => ApiError::too_large(format!(
            "the request body is larger than {} bytes",
            state.bounds.max_body
        )),
        BodyError::Timeout => ApiError::timeout(format!(
            "the request body was not sent within {} seconds",
            state.bounds.body_timeout.as_secs()
        )),
        BodyError::Broken => ApiError::invalid("the request body could not be read"),
    }
}

/// Why a server did not start (or stopped serving).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the stores root: {}", crate::units::describe_io(.0))]
    Root(#[source] std::io::Error),
    #[error("cannot open the stores root in {database}: {source}")]
    RootDatabase {
        database: String,
        source: super::catalog::CatalogError,
    },
    #[error(transparent)]
    OpenRoot(#[from] super::registry::OpenRootError),
    #[error(transparent)]
    Catalog(#[from] super::catalog::CatalogError),
    #[error("cannot listen on {addr}: {}", crate::units::describe_io(.source))]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Serve(#[from] crate::listen::ListenError),
    #[error(transparent)]
    Held(#[from] super::root_lock::RootLockError),
}

/// The stores root and its tokens: a directory, or a database (then
/// `root` is this server's cache of it).
fn open_root(config: &Config) -> Result<(Registry, Tokens), StartError> {
    let Some(database) = &config.database else {
        let reg = Registry::open(
            &config.root,
            config.options.clone(),
            config.socket,
            config.idle,
        )
        .map_err(StartError::Root)?;
        let tokens = Tokens::new(reg.state_dir());
        return Ok((reg, tokens));
    };
    let catalog = Arc::new(
        super::catalog_pg::PgCatalog::open(database.clone()).map_err(|source| {
            StartError::RootDatabase {
                database: database.shown_database(),
                source,
            }
        })?,
    );
    let reg = Registry::open_pg(
        &config.root,
        catalog.clone(),
        config.options.clone(),
        config.socket,
        config.idle,
    )?;
    Ok((reg, Tokens::in_catalog(catalog)))
}

/// How many stores may be open at once under the open-files limit
/// `nofile`: room for every connection and request, and what the process
/// itself holds (at most half of a small limit), the rest for stores.
fn stores_open_at_once(config: &Config, nofile: u64) -> usize {
    let b = config.bounds;
    let sockets = (2 * (b.max_connections + b.max_pending) as u64 + 512).min(nofile / 2);
    let fit = (nofile.saturating_sub(sockets) / FDS_PER_STORE).max(1) as usize;
    config.max_open.min(fit)
}

/// The token a request presents, if any; on a root in PostgreSQL, with the
/// store its path names, in one round trip (`PgCatalog::look`).
fn find_token(
    state: &State,
    parts: &Parts,
) -> (
    Option<Result<Option<Token>, CatalogError>>,
    Option<LookedStore>,
) {
    let Some(secret) = presented(&parts.headers) else {
        return (None, None);
    };
    let Some(catalog) = state.reg.catalog() else {
        return (Some(state.tokens.find(&secret)), None);
    };
    let sha = crate::digest::Sha::of(secret.as_bytes()).hex();
    let store = api::store_in(parts.uri.path()).filter(|id| super::registry::is_store_id(id));
    match catalog.look(&sha, store.as_deref()) {
        Ok(looked) => (Some(Ok(looked.token)), looked.store),
        Err(e) => (Some(Err(e)), None),
    }
}

/// The check of a request's head: a request without a valid token (or,
/// for the page, a live session) is answered from its head, its body never
/// read, nor held in memory; an allowed one's body is read up to its
/// route's cap.
fn precheck(state: Arc<State>) -> Arc<listen::Precheck> {
    Arc::new(
        move |parts: &mut Parts| -> Result<usize, Box<Response<Body>>> {
            let path = parts.uri.path();
            if path == "/web" || path.starts_with("/web/") {
                return state.web.precheck(parts, &state.tokens);
            }
            if path == HEALTH {
                // No token, no body.
                return Ok(0);
            }
            let (found, looked) = find_token(&state, parts);
            let refusal = match found {
                Some(Ok(Some(token))) => match from_head(&state, parts, &token, looked.as_ref()) {
                    Ok((slot, checked)) => {
                        // The handler takes it from here: one lookup a
                        // request; the slot is given back with the parts.
                        parts.extensions.insert(slot);
                        parts.extensions.insert(token);
                        if let Some(checked) = checked {
                            if let Some(quick) = quick(&state, parts, &checked.0.id) {
                                parts.extensions.insert(quick);
                            }
                            parts.extensions.insert(checked);
                        }
                        return Ok(body_cap(parts, state.bounds.max_body));
                    }
                    Err(e) => e,
                },
                Some(Err(e)) => tokens_unreadable(&e),
                None | Some(Ok(None)) => ApiError::unauthenticated(),
            };
            let n = state.requests.fetch_add(1, Ordering::Relaxed) + 1;
            let mut r = error_response(&refusal, n);
            r.headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
            Err(Box::new(r))
        },
    )
}

/// The listener's bounds, from the server's.
fn limits_of(config: &Config) -> listen::Limits {
    let b = config.bounds;
    listen::Limits {
        max_body: b.max_body,
        max_headers: b.max_headers,
        header_timeout: b.header_timeout,
        body_timeout: b.body_timeout,
        max_connections: b.max_connections,
        max_pending: b.max_pending,
        // (A token in the catalog, or a store's record, may be a round
        // trip to the database away.)
        quick_precheck: config.database.is_none(),
    }
}

/// Serves until SIGINT or SIGTERM; then closes every store. Ok(false) when
/// some store could not write everything out. One server wired in order:
/// registry and tokens, bind, shared state, the handler, tend and precheck.
pub fn run(config: Config) -> Result<bool, StartError> {
    // One server a root (or a database root's cache), for its whole life.
    let _held = super::root_lock::RootLock::take(&config.root, config.database.is_some())?;
    let (reg, tokens) = open_root(&config)?;
    let nofile = listen::raise_nofile();
    let max_open = stores_open_at_once(&config, nofile);
    reg.set_max_open(max_open);
    tracing::info!("open files: {nofile} at most; up to {max_open} stores open at once");
    if tokens.list().map(|t| t.is_empty()).unwrap_or(false) {
        crate::say!(
            "memfs: no tokens yet; make one with `memfs --stores ROOT token create --admin`"
        );
    }
    let (listener, local) = listen::bind(&config.addr).map_err(|source| StartError::Listen {
        addr: config.addr.clone(),
        source,
    })?;
    let sessions = match reg.catalog() {
        Some(catalog) => Sessions::across(catalog.clone())?,
        None => Sessions::default(),
    };
    let state = Arc::new(State {
        reg: Arc::new(reg),
        web: super::web::WebDoor::default(),
        tokens,
        rates: Rates::new(&config.bounds),
        slots: TokenSlots::new(config.bounds.per_token),
        sessions,
        bounds: config.bounds,
        requests: AtomicU64::new(0),
    });
    crate::say!(
        "memfs: serving {} store(s) on http://{local} (the memory stores API at /v1/memory_stores, MCP at /mcp)",
        state.reg.count()
    );
    let limits = limits_of(&config);
    let handler = {
        let state = state.clone();
        Arc::new(move |parts, body| serve_request(&state, parts, body))
    };
    let tend = {
        let state = state.clone();
        Box::new(move || {
            state.reg.tend();
            state.sessions.expire();
        })
    };
    let precheck = precheck(state.clone());
    listen::run(listener, limits, handler, Some(precheck), tend)?;
    Ok(state.reg.close_all())
}
