//! The HTTP server: hyper (HTTP/1.1) on a small tokio runtime of its own,
//! at the door only. Each request is read within its bounds (header and
//! body timeouts, sizes, a cap on connections, each token's rate), then
//! answered on a blocking thread by the synchronous store.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

use super::api::{self, Call};
use super::error::ApiError;
use super::limits::{Bounds, Rates};
use super::mcp::Sessions;
use super::registry::{Registry, SocketBounds};
use super::tokens::Tokens;
use crate::memory::Options;

/// How a server is set up.
pub struct Config {
    pub root: PathBuf,
    pub addr: String,
    pub options: Options,
    pub bounds: Bounds,
    pub socket: SocketBounds,
    /// How long an unused store stays open.
    pub idle: Duration,
}

struct State {
    reg: Registry,
    tokens: Tokens,
    rates: Rates,
    sessions: Sessions,
    bounds: Bounds,
    requests: AtomicU64,
}

type Body = Full<Bytes>;

fn json_response(status: u16, body: &Value, extra: &[(&str, String)]) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    for (k, v) in extra {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.insert(name, value);
        }
    }
    r
}

fn error_response(e: &ApiError, request: u64) -> Response<Body> {
    let mut extra = vec![("request-id", format!("req_{request}"))];
    if let Some(s) = e.retry_after {
        extra.push(("retry-after", s.to_string()));
    }
    if e.status == 408 || e.status == 413 {
        extra.push(("connection", "close".into()));
    }
    json_response(e.status, &e.body(), &extra)
}

/// `a=1&b=%2Fx` as a map (a key given twice keeps the last).
fn parse_query(query: &str) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(k)?, decode(v)?);
    }
    Ok(out)
}

fn decode(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::invalid("the query string is not valid percent-encoded UTF-8");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| bad())
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

async fn serve_request(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let n = state.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let answer = answer(&state, req, n).await;
    Ok(answer.unwrap_or_else(|e| {
        if e.status >= 500 {
            tracing::warn!("request {n}: {} {}", e.status, e.message);
        } else {
            tracing::debug!("request {n}: {} {}", e.status, e.message);
        }
        error_response(&e, n)
    }))
}

async fn answer(
    state: &Arc<State>,
    req: Request<Incoming>,
    n: u64,
) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let query = parse_query(req.uri().query().unwrap_or(""))?;
    let method = req.method().as_str().to_string();
    let is_mcp = path == "/mcp";
    let segments: Vec<String> = match path.strip_prefix("/v1/") {
        Some(rest) if !is_mcp => rest.split('/').map(decode).collect::<Result<_, _>>()?,
        _ if is_mcp => Vec::new(),
        _ => {
            return Err(ApiError::not_found(
                "no such path; the API is under /v1/ and MCP at /mcp",
            ))
        }
    };
    // Who asks: read outside the runtime's threads (the token file may be re-read).
    let secret = presented(req.headers()).ok_or_else(ApiError::unauthenticated)?;
    let token = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || state.tokens.find(&secret))
            .await
            .map_err(|_| ApiError::internal("the token check failed"))?
            .map_err(|e| {
                tracing::warn!("reading the tokens: {e}");
                ApiError::internal("the server cannot read its tokens; its log says why")
            })?
            .ok_or_else(ApiError::unauthenticated)?
    };
    state
        .rates
        .take(&token.name)
        .map_err(ApiError::rate_limited)?;
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if is_mcp {
        match method.as_str() {
            "POST" => {}
            "DELETE" => {
                let closed = session.is_some_and(|s| state.sessions.close(&s, &token));
                return match closed {
                    true => Ok(json_response(200, &Value::Object(Default::default()), &[])),
                    false => Err(ApiError::not_found("no such MCP session")),
                };
            }
            _ => {
                return Err(ApiError::method(
                    "POST or DELETE (this server opens no event stream)",
                ))
            }
        }
    }
    let body = read_body(state, req).await?;
    let request_id = ("request-id", format!("req_{n}"));
    let state2 = state.clone();
    if is_mcp {
        let store = query.get("store").cloned();
        let answered = tokio::task::spawn_blocking(move || {
            super::mcp::post(
                &state2.reg,
                &state2.sessions,
                &token,
                store.as_deref(),
                session.as_deref(),
                &body,
            )
        })
        .await
        .map_err(|_| ApiError::internal("the request failed"))??;
        let mut extra = vec![request_id];
        if let Some(s) = answered.session {
            extra.push(("mcp-session-id", s));
        }
        return Ok(match answered.body {
            Some(body) => json_response(answered.status, &body, &extra),
            None => {
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = StatusCode::ACCEPTED;
                r
            }
        });
    }
    let value = tokio::task::spawn_blocking(move || {
        let call = Call {
            method: &method,
            segments,
            query,
            body: &body,
            token: &token,
        };
        api::handle(&state2.reg, &call)
    })
    .await
    .map_err(|_| ApiError::internal("the request failed"))??;
    Ok(json_response(200, &value, &[request_id]))
}

async fn read_body(state: &Arc<State>, req: Request<Incoming>) -> Result<Vec<u8>, ApiError> {
    let max = state.bounds.max_body;
    let too_large = || ApiError::too_large(format!("the request body is larger than {max} bytes"));
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|d| d > max as u64) {
        return Err(too_large());
    }
    let limited = Limited::new(req.into_body(), max);
    match tokio::time::timeout(state.bounds.body_timeout, limited.collect()).await {
        Err(_) => Err(ApiError::timeout(format!(
            "the request body was not sent within {} seconds",
            state.bounds.body_timeout.as_secs()
        ))),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Ok(Err(_)) => Err(ApiError::invalid("the request body could not be read")),
        Ok(Ok(collected)) => Ok(collected.to_bytes().to_vec()),
    }
}

/// Serves until SIGINT or SIGTERM; then closes every store. Ok(false) when
/// some store could not write everything out.
pub fn run(config: Config) -> Result<bool, String> {
    let reg = Registry::open(
        &config.root,
        config.options.clone(),
        config.socket,
        config.idle,
    )
    .map_err(|e| {
        format!(
            "cannot open the stores root: {}",
            crate::units::describe_io(&e)
        )
    })?;
    let tokens = Tokens::new(reg.state_dir());
    if tokens.list().map(|t| t.is_empty()).unwrap_or(false) {
        crate::say!(
            "memfs: no tokens yet; make one with `memfs --stores ROOT token create --admin`"
        );
    }
    let listener = std::net::TcpListener::bind(&config.addr).map_err(|e| {
        format!(
            "cannot listen on {}: {}",
            config.addr,
            crate::units::describe_io(&e)
        )
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| crate::units::describe_io(&e))?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|e| crate::units::describe_io(&e))?;
    let state = Arc::new(State {
        reg,
        tokens,
        rates: Rates::new(&config.bounds),
        sessions: Sessions::default(),
        bounds: config.bounds,
        requests: AtomicU64::new(0),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("memfs-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let stop = Arc::new(Notify::new());
    let stopping = Arc::new(AtomicBool::new(false));
    let signals = watch_signals(stop.clone(), stopping.clone())
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    let tender = {
        let state = state.clone();
        let stopping = stopping.clone();
        std::thread::Builder::new()
            .name("memfs-tend".into())
            .spawn(move || {
                while !stopping.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(200));
                    state.reg.tend();
                    state.sessions.expire();
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?
    };
    crate::say!(
        "memfs: serving {} store(s) on http://{local} (the memory stores API at /v1/memory_stores, MCP at /mcp)",
        state.reg.count()
    );
    let limit = Arc::new(Semaphore::new(config.bounds.max_connections.max(1)));
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                crate::say!("memfs: cannot listen: {e}");
                return;
            }
        };
        loop {
            let permit = tokio::select! {
                _ = stop.notified() => break,
                p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            };
            let (stream, _) = tokio::select! {
                _ = stop.notified() => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let state = state.clone();
            let bounds = state.bounds;
            let mut closing = closing_rx.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req| serve_request(state.clone(), req));
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(bounds.header_timeout)
                    .max_buf_size(bounds.max_headers.max(8192));
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = closing.changed() => {
                        // Finish the request in flight, then close (an idle
                        // keep-alive connection closes at once).
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.as_mut().await;
                    }
                }
                drop(permit);
            });
        }
        let _ = closing_tx.send(true);
        // Let requests in flight finish (bounded).
        let all = config.bounds.max_connections.max(1) as u32;
        let _ = tokio::time::timeout(Duration::from_secs(5), limit.acquire_many(all)).await;
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    stopping.store(true, Ordering::SeqCst);
    signals.close();
    let _ = tender.join();
    Ok(state.reg.close_all())
}

fn watch_signals(
    stop: Arc<Notify>,
    stopping: Arc<AtomicBool>,
) -> std::io::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("memfs-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                stopping.store(true, Ordering::SeqCst);
                stop.notify_one();
                stop.notify_waiters();
            }
        })?;
    Ok(handle)
}
