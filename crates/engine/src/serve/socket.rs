//! The Unix socket at `DIR/.memfs/sock`: the same JSON-lines protocol as
//! stdio, for many clients at once (each on its own thread; the store's lock
//! orders them, and their writes share group commits).
//!
//! Bounded against clients that misbehave: a client idle between whole calls
//! is legitimate (an adapter holds its connection for a whole agent session),
//! so hundreds are served, and when all slots are taken the longest-idle one
//! is closed to make room. A client that starts a line must finish it within
//! the line timeout; one that stops reading its answers stops being read
//! (see `pipeline`), and is closed if a write to it stalls for that long.

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};
use rustix::fs::{self as rfs, AtFlags, Mode};

use super::pipeline::{Activity, Bounds};
use super::stream;
use crate::control::Control;
use crate::fuse::Hosted;
use crate::store::{Door, Origin};
use crate::tool::Tool;

/// Clients served at once; past that, the longest-idle one makes room.
pub const MAX_CLIENTS: usize = 256;
/// The socket's name in the state dir.
pub const SOCKET_NAME: &str = "sock";
/// How often waiting threads look at their clocks and stop flags.
const POLL: Duration = Duration::from_millis(250);

pub struct SocketServer {
    state: OwnedFd,
    /// Its listener, accepted on by the process's one socket thread.
    listening: Option<Arc<super::hub::Listening>>,
    clients: Clients,
    /// When a client last came or went (or the server started).
    last_client: Arc<Mutex<Instant>>,
}

/// How long stopping waits for clients' calls in flight to be answered.
const FINISH_CALLS: Duration = Duration::from_secs(10);

impl SocketServer {
    /// Listens at `sock` in the state dir `state` (replacing a stale socket:
    /// the caller holds the data-dir lock, so no live memfs owns it). The
    /// socket is made through the checked directory descriptor, inside a
    /// directory only this user can enter, and is 0600 before anyone can
    /// reach it; `line_timeout` bounds how long a started line may take.
    pub fn start(
        tool: Tool,
        control: Arc<Control>,
        state: &OwnedFd,
        line_timeout: Duration,
        max_line: usize,
        hosted: Option<Arc<Hosted>>,
    ) -> io::Result<SocketServer> {
        let state = state.try_clone()?;
        match rfs::unlinkat(&state, SOCKET_NAME, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let listener = UnixListener::bind(through_fd(&state))?;
        rfs::chmodat(
            &state,
            SOCKET_NAME,
            Mode::from_raw_mode(0o600),
            AtFlags::empty(),
        )?;
        let bounds = Bounds {
            max_line,
            line_timeout: Some(line_timeout),
        };
        let clients: Clients = Arc::new(Mutex::new(rank::SOCKET_CLIENTS, HashMap::new()));
        let registry = clients.clone();
        let last_client = Arc::new(Mutex::new(rank::SOCKET_LAST_CLIENT, Instant::now()));
        let accepting = Accepting {
            tool,
            control,
            bounds,
            registry: Registry {
                clients: registry,
                last_client: last_client.clone(),
            },
            hosted,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
        };
        let listening = super::hub::register(listener, Box::new(move |conn| accepting.take(conn)))?;
        Ok(SocketServer {
            state,
            listening: Some(listening),
            clients,
            last_client,
        })
    }

    /// How long no client has been connected and none has made a call;
    /// `None` while one is connected.
    pub fn idle_for(&self) -> Option<Duration> {
        let clients = self.clients.lock();
        if !clients.is_empty() {
            return None;
        }
        Some(self.last_client.lock().elapsed())
    }

    /// Stops accepting and removes the socket file, then lets connected
    /// clients go: each is closed once it has no call in flight (an attached
    /// memfs then takes the data dir over before its next call), and none is
    /// waited for longer than [`FINISH_CALLS`]. Never waits on the socket
    /// file (which may have been removed).
    pub fn stop(&mut self) {
        if let Some(listening) = self.listening.take() {
            super::hub::close(&listening);
        }
        let _ = rfs::unlinkat(&self.state, SOCKET_NAME, AtFlags::empty());
        let deadline = Instant::now() + FINISH_CALLS;
        loop {
            let mut clients = self.clients.lock();
            clients.retain(|_, client| {
                let done = client.is_idle() || Instant::now() >= deadline;
                if done {
                    let _ = client.conn.shutdown(std::net::Shutdown::Both);
                }
                !done
            });
            if clients.is_empty() {
                return;
            }
            drop(clients);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `DIR/.memfs/sock` spelled through the open state dir: no symlink swapped
/// in on the way is followed, and the length of DIR does not matter (a
/// socket path is limited to 108 bytes).
fn through_fd(state: &OwnedFd) -> String {
    format!("/proc/self/fd/{}/{SOCKET_NAME}", state.as_raw_fd())
}

/// One connected client, as the accept loop sees it.
struct Client {
    /// A handle on the connection, to close it when it must make room.
    conn: UnixStream,
    mid_line: AtomicBool,
    in_flight: AtomicUsize,
    /// Milliseconds since the server started, at its last read or write.
    last_active: AtomicU64,
    epoch: Instant,
}

impl Client {
    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_active.store(now, Ordering::Relaxed);
    }

    /// Between whole calls: nothing half-sent, nothing unanswered.
    fn is_idle(&self) -> bool {
        !self.mid_line.load(Ordering::SeqCst) && self.in_flight.load(Ordering::SeqCst) == 0
    }
}

impl Activity for Client {
    fn line_started(&self) {
        self.mid_line.store(true, Ordering::SeqCst);
        self.touch();
    }

    fn line_read(&self, answered: bool) {
        if answered {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
        }
        self.mid_line.store(false, Ordering::SeqCst);
        self.touch();
    }

    fn answer_written(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.touch();
    }
}

type Clients = Arc<Mutex<HashMap<u64, Arc<Client>>>>;

/// The connected clients, and when one last came or went.
struct Registry {
    clients: Clients,
    last_client: Arc<Mutex<Instant>>,
}

/// What a socket does with each client it accepts (on the hub's thread).
struct Accepting {
    tool: Tool,
    control: Arc<Control>,
    bounds: Bounds,
    registry: Registry,
    hosted: Option<Arc<Hosted>>,
    epoch: Instant,
    next_id: AtomicU64,
}

impl Accepting {
    /// Makes room for the client (or refuses it) and serves it on a thread.
    fn take(&self, conn: UnixStream) {
        let clients = &self.registry.clients;
        if let Err(text) = make_room(clients) {
            let _ = conn.set_nonblocking(true);
            let _ = stream::refuse(&conn, &text);
            return;
        }
        let Ok(client) = prepare(conn, self.epoch, self.bounds) else {
            return;
        };
        let client = Arc::new(client);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        clients.lock().insert(id, client.clone());
        *self.registry.last_client.lock() = Instant::now();
        let (tool, control, mine, last_client, hosted, bounds) = (
            self.tool.clone(),
            self.control.clone(),
            clients.clone(),
            self.registry.last_client.clone(),
            self.hosted.clone(),
            self.bounds,
        );
        let spawned = std::thread::Builder::new()
            .name("memfs-client".into())
            .spawn(move || {
                serve_client(&tool, &control, &client, bounds, hosted);
                mine.lock().remove(&id);
                *last_client.lock() = Instant::now();
            });
        if spawned.is_err() {
            crate::say!("memfs: cannot start a thread for a socket client");
            clients.lock().remove(&id);
        }
    }
}

/// Makes a slot free by closing the longest-idle client when all are taken;
/// the error text when every client is in the middle of a call.
fn make_room(clients: &Clients) -> Result<(), String> {
    let mut clients = clients.lock();
    if clients.len() < MAX_CLIENTS {
        return Ok(());
    }
    let victim = clients
        .iter()
        .filter(|(_, c)| c.is_idle())
        .min_by_key(|(_, c)| c.last_active.load(Ordering::Relaxed))
        .map(|(&id, _)| id);
    let Some(id) = victim else {
        return Err(format!(
            "Error: memfs is serving {MAX_CLIENTS} socket clients, each in the middle of a call; try again shortly"
        ));
    };
    if let Some(client) = clients.remove(&id) {
        // Its reader sees the end of input; it had nothing in flight.
        let _ = client.conn.shutdown(std::net::Shutdown::Both);
    }
    Ok(())
}

fn prepare(conn: UnixStream, epoch: Instant, bounds: Bounds) -> io::Result<Client> {
    conn.set_nonblocking(false)?;
    // Reads wake up to look at the clock; a write that stalls this long ends the client.
    conn.set_read_timeout(Some(POLL.min(bounds.line_timeout.unwrap_or(POLL))))?;
    conn.set_write_timeout(bounds.line_timeout)?;
    let client = Client {
        conn,
        mid_line: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        last_active: AtomicU64::new(0),
        epoch,
    };
    client.touch();
    Ok(client)
}

fn serve_client(
    tool: &Tool,
    control: &Arc<Control>,
    client: &Client,
    bounds: Bounds,
    hosted: Option<Arc<Hosted>>,
) {
    let (Ok(input), Ok(output)) = (client.conn.try_clone(), client.conn.try_clone()) else {
        return;
    };
    let tool = tool.with_origin(Origin::agent(Door::Socket));
    let input = BufReader::new(input);
    let _ = stream::serve_client(&tool, control, input, output, bounds, client, hosted);
    let _ = client.conn.shutdown(std::net::Shutdown::Both);
}

/// Connects to the socket in the state dir `state_dir` (a path), through an
/// open descriptor of that directory (see [`through_fd`]).
pub fn connect(state_dir: &Path) -> io::Result<UnixStream> {
    let dir = crate::persist::open_state_dir(state_dir)?;
    UnixStream::connect(through_fd(&dir))
}
