//! One HTTP/1.1 listener for the HTTP doors (`serve --http`, `web`): hyper
//! on a small tokio runtime of its own, at the door only. Each request is
//! read within its bounds (a header timeout, a body timeout and its route's
//! size, a cap on requests served at once), then answered on a blocking
//! thread by a synchronous handler. A connection that has not yet sent a
//! whole head waits in [`pending`], apart from the requests being served,
//! so that connections trickling their heads cannot keep others waiting.
//! Runs until SIGINT or SIGTERM; then lets requests in flight finish
//! (bounded) and closes every connection.

mod pending;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Notify, Semaphore};

pub type Body = Full<Bytes>;

/// What bounds each connection.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body: usize,
    pub max_headers: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    /// Requests served at once (more wait for a slot, their bodies unread).
    pub max_connections: usize,
    /// Connections that have not yet sent a whole head (over it, the oldest
    /// of them is closed; over half of it, a new one gets 2 s for its head).
    pub max_pending: usize,
    /// The precheck answers from memory (it never waits on a disk or a
    /// network): it may run on the runtime's own thread (see [`Quick`]).
    pub quick_precheck: bool,
}

/// Left in a request head's extensions by the precheck: this request's
/// handler is short (it answers from memory, or waits for one journal
/// flush at most), so that, when no other request is being answered on
/// the runtime's threads, it is answered there, with no handoff to a
/// blocking thread and back (each wake of a sleeping thread costs tens of
/// microseconds on a small VM: docs/BENCHMARKS-HTTP.md). One such request
/// at a time: the other worker goes on serving every other connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick {
    /// Answered from memory, waiting for nothing: run as it is.
    Read,
    /// It may wait for the disk: run through `block_in_place`, which first
    /// hands this worker's queue of other tasks to another thread, so that
    /// none of them waits for it (without it,
    /// test_writes_held_in_their_flush_do_not_hold_the_others failed one
    /// run in three: a read on another store waited for a held write).
    Write,
}

/// Why a body was not read.
pub enum BodyError {
    TooLarge,
    Timeout,
    Broken,
}

/// A request's head, and its body (read within the bounds, or why not).
pub type Handler =
    dyn Fn(hyper::http::request::Parts, Result<Vec<u8>, BodyError>) -> Response<Body> + Send + Sync;

/// Adds `extra` headers to `headers` (a name or value HTTP cannot carry is left out).
pub fn add_headers(headers: &mut hyper::HeaderMap, extra: &[(&str, String)]) {
    for (k, v) in extra {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(v),
        ) {
            headers.insert(name, value);
        }
    }
}

/// Looks at a request's head before its body is read: an answer here (a
/// missing token, say) is sent without reading the body at all; otherwise
/// the body is read up to the cap it returns (its route's largest body).
/// What it found out (the token) it may leave in the head's extensions for
/// the handler.
pub type Precheck =
    dyn Fn(&mut hyper::http::request::Parts) -> Result<usize, Box<Response<Body>>> + Send + Sync;

/// Raises this process's limit on open files as far as it may go (the soft
/// limit to the hard one; the hard one too, up to 1,048,576 and the
/// kernel's `fs.nr_open`, where the process may), so that a server holding
/// many stores open runs out later; returns the limit now in force.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let was = getrlimit(Resource::Nofile);
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let want = nr_open.min(1 << 20);
    let hard = was.maximum.unwrap_or(want);
    let raised = Rlimit {
        current: Some(hard.max(want)),
        maximum: Some(hard.max(want)),
    };
    if hard < want && setrlimit(Resource::Nofile, raised).is_ok() {
        return want;
    }
    let soft = Rlimit {
        current: was.maximum,
        maximum: was.maximum,
    };
    match setrlimit(Resource::Nofile, soft) {
        Ok(()) => hard,
        Err(_) => was.current.unwrap_or(1024),
    }
}

/// Binds `addr` (a failure is the caller's to report).
pub fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// A body being read, at most `cap` bytes within the body timeout: what
/// came so far is kept, so that a read can stop at a budget and go on.
struct Reading {
    body: Limited<Incoming>,
    got: Vec<u8>,
    deadline: tokio::time::Instant,
    refused: Option<BodyError>,
}

impl Reading {
    /// A body of at most `cap` bytes; one declared larger is not read.
    fn new(body: Incoming, cap: usize, limits: &Limits, declared: Option<u64>) -> Reading {
        Reading {
            body: Limited::new(body, cap),
            got: Vec::new(),
            deadline: tokio::time::Instant::now() + limits.body_timeout,
            refused: declared
                .is_some_and(|d| d > cap as u64)
                .then_some(BodyError::TooLarge),
        }
    }

    /// Reads on until the body ends, it is refused, or `budget` (if given)
    /// runs out first: then `None`, and a later call goes on from there.
    async fn more(&mut self, budget: Option<Duration>) -> Option<Result<Vec<u8>, BodyError>> {
        if let Some(why) = self.refused.take() {
            return Some(Err(why));
        }
        let until = match budget {
            Some(b) => self.deadline.min(tokio::time::Instant::now() + b),
            None => self.deadline,
        };
        loop {
            let frame = match tokio::time::timeout_at(until, self.body.frame()).await {
                Err(_) if until < self.deadline => return None,
                Err(_) => return Some(Err(BodyError::Timeout)),
                Ok(frame) => frame,
            };
            match frame {
                None => return Some(Ok(std::mem::take(&mut self.got))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.got.extend_from_slice(&data);
                    }
                }
                Some(Err(e))
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some() =>
                {
                    return Some(Err(BodyError::TooLarge))
                }
                Some(Err(_)) => return Some(Err(BodyError::Broken)),
            }
        }
    }
}

/// How long a request's blocking thread waits for its body before it hands
/// the read back to the runtime (a body that trickles in holds no thread).
const BODY_ON_THREAD: Duration = Duration::from_millis(5);

fn failed() -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(b"the request failed\n")));
    *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// What a request's trip to a blocking thread came back with.
enum Trip {
    Answered(Response<Body>),
    /// The body was not all there within [`BODY_ON_THREAD`]: read on
    /// here, then answer on a blocking thread.
    BodyLate(hyper::http::request::Parts, Reading),
}

/// The one turn at answering on the runtime's threads (see [`Quick`]).
struct Turn(Arc<AtomicBool>);

impl Turn {
    fn take(free: &Arc<AtomicBool>) -> Option<Turn> {
        free.compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| Turn(free.clone()))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Serves one request on the runtime's own thread while it holds the
/// [`Turn`]: the precheck (quick), the body (read here, the turn given up
/// meanwhile) and a [`Quick`] handler; a handler that is not quick, or
/// whose turn another request took while the body was read, goes to a
/// blocking thread.
async fn serve_on_runtime(
    handler: Arc<Handler>,
    precheck: Option<Arc<Precheck>>,
    limits: Limits,
    req: Request<Incoming>,
    turn: Turn,
) -> Response<Body> {
    let free = turn.0.clone();
    let (mut parts, body) = req.into_parts();
    let cap = match precheck {
        None => limits.max_body,
        Some(check) => match caught(|| check(&mut parts)) {
            Some(Err(answer)) => return *answer,
            Some(Ok(cap)) => cap.min(limits.max_body),
            None => return failed(),
        },
    };
    drop(turn);
    let quick = parts.extensions.remove::<Quick>();
    let mut reading = Reading::new(body, cap, &limits, declared_length(&parts));
    let body = reading.more(None).await.unwrap_or(Err(BodyError::Timeout));
    match quick.and_then(|q| Turn::take(&free).map(|turn| (q, turn))) {
        Some((Quick::Read, _turn)) => caught(|| handler(parts, body)).unwrap_or_else(failed),
        Some((Quick::Write, _turn)) => {
            caught(|| tokio::task::block_in_place(|| handler(parts, body))).unwrap_or_else(failed)
        }
        None => tokio::task::spawn_blocking(move || handler(parts, body))
            .await
            .unwrap_or_else(|_| failed()),
    }
}

/// `f`'s answer; none if it panicked (answered 500, as a blocking
/// thread's panic is: the connection goes on).
fn caught<R>(f: impl FnOnce() -> R) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// The body's length its head declares, if it declares one.
pub fn declared_length(parts: &hyper::http::request::Parts) -> Option<u64> {
    parts
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Serves one request while it holds one of the `slots` (its body unread
/// until it has one, and until the precheck lets it through). The precheck,
/// the body's read and the handler take one trip to a blocking thread: the
/// body is read there through the runtime (it usually came with the head),
/// so that a request costs one handoff between threads each way, not two
/// (on an idle machine each wake of a sleeping thread costs tens of
/// microseconds: docs/BENCHMARKS-HTTP.md). A body not there within
/// [`BODY_ON_THREAD`] is read on the runtime, holding no blocking thread,
/// and the handler takes a second trip.
async fn serve_one(
    handler: Arc<Handler>,
    precheck: Option<Arc<Precheck>>,
    limits: Limits,
    slots: Arc<Semaphore>,
    free: Arc<AtomicBool>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let Ok(_slot) = slots.acquire_owned().await else {
        return Ok(failed());
    };
    if let Some(turn) = limits.quick_precheck.then(|| Turn::take(&free)).flatten() {
        return Ok(serve_on_runtime(handler, precheck, limits, req, turn).await);
    }
    let runtime = tokio::runtime::Handle::current();
    let first = {
        let handler = handler.clone();
        tokio::task::spawn_blocking(move || {
            let (mut parts, body) = req.into_parts();
            let cap = match precheck {
                None => limits.max_body,
                Some(check) => match check(&mut parts) {
                    Err(answer) => return Trip::Answered(*answer),
                    Ok(cap) => cap.min(limits.max_body),
                },
            };
            let mut reading = Reading::new(body, cap, &limits, declared_length(&parts));
            // (The connection's task feeds the body meanwhile: it is not
            // waiting on this thread.)
            match runtime.block_on(reading.more(Some(BODY_ON_THREAD))) {
                Some(body) => Trip::Answered(handler(parts, body)),
                None => Trip::BodyLate(parts, reading),
            }
        })
        .await
    };
    let answered = match first {
        Ok(Trip::Answered(r)) => Ok(r),
        Ok(Trip::BodyLate(parts, mut reading)) => {
            let body = reading.more(None).await.unwrap_or(Err(BodyError::Timeout));
            tokio::task::spawn_blocking(move || handler(parts, body)).await
        }
        Err(e) => Err(e),
    };
    Ok(answered.unwrap_or_else(|_| failed()))
}

/// Serves `listener` with `handler` until a signal; `tend` runs every 200 ms
/// meanwhile. The teardown is ordered: stop accepting, let requests in
/// flight finish, stop the runtime, then the signal and tend threads.
pub fn run(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<Handler>,
    precheck: Option<Arc<Precheck>>,
    tend: Box<dyn Fn() + Send>,
) -> Result<(), ListenError> {
    let runtime = runtime().map_err(ListenError::Runtime)?;
    let stop = Arc::new(Notify::new());
    let stopping = Arc::new(AtomicBool::new(false));
    let signals = watch_signals(stop.clone(), stopping.clone()).map_err(ListenError::Signals)?;
    let tender = start_tending(tend, stopping.clone())?;
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let pending = Arc::new(pending::Pending::new(limits.max_pending.max(1)));
    let free = Arc::new(AtomicBool::new(true));
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
            let door = Door {
                handler: handler.clone(),
                precheck: precheck.clone(),
                limits,
                slots: slots.clone(),
                free: free.clone(),
            };
            let waiting = pending.enter();
            tokio::spawn(connection(stream, door, waiting, closing_rx.clone()));
        }
        let _ = closing_tx.send(true);
        // Let requests in flight finish (bounded).
        let all = limits.max_connections.max(1) as u32;
        let _ = tokio::time::timeout(Duration::from_secs(5), slots.acquire_many(all)).await;
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    stopping.store(true, Ordering::SeqCst);
    signals.close();
    let _ = tender.join();
    Ok(())
}

/// The server's runtime: two workers, and room for the blocking handlers.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(32)
        .thread_name("memfs-http")
        .enable_all()
        .build()
}

/// Runs `tend` every 200 ms on a thread of its own until `stopping`.
fn start_tending(
    tend: Box<dyn Fn() + Send>,
    stopping: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, ListenError> {
    std::thread::Builder::new()
        .name("memfs-tend".into())
        .spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                tend();
            }
        })
        .map_err(ListenError::Thread)
}

/// Why a server could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot handle signals: {0}")]
    Signals(#[source] std::io::Error),
    #[error("cannot start a thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// What every connection serves its requests with.
#[derive(Clone)]
struct Door {
    handler: Arc<Handler>,
    precheck: Option<Arc<Precheck>>,
    limits: Limits,
    slots: Arc<Semaphore>,
    /// Whether the turn at answering on the runtime's threads is free.
    free: Arc<AtomicBool>,
}

/// Serves one connection until it ends, until the server closes (then the
/// request in flight finishes first), or, while it has not yet sent a whole
/// head, until it is the oldest such connection over the cap or its time
/// for that head is up.
async fn connection(
    stream: tokio::net::TcpStream,
    door: Door,
    waiting: pending::Waiting,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    let limits = door.limits;
    let headed = waiting.headed();
    let service = hyper::service::service_fn(move |req| {
        headed.arrived();
        let d = door.clone();
        serve_one(d.handler, d.precheck, d.limits, d.slots, d.free, req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_headers.max(8192));
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let first_head = tokio::time::sleep(waiting.first_head_within(limits.header_timeout));
    tokio::pin!(first_head);
    let mut timed = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = closing.changed() => {
                // Finish the request in flight, then close (an idle keep-alive
                // connection closes at once).
                conn.as_mut().graceful_shutdown();
                let _ = conn.as_mut().await;
                break;
            }
            _ = waiting.ended() => {
                if !waiting.has_head() {
                    break;
                }
            }
            _ = &mut first_head, if !timed => {
                timed = true;
                if !waiting.has_head() {
                    break;
                }
            }
        }
    }
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
