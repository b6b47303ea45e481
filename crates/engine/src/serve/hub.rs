//! One thread that accepts on every memory's socket in the process: each
//! socket server (`socket.rs`) registers its listener
//! here instead of running an accept loop of its own, so that a server
//! holding ten thousand memories open runs one accepting thread, not ten
//! thousand (and no thread wakes up four times a second to look at a flag:
//! the hub sleeps in `epoll_wait` until a client comes).

use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustix::event::epoll;

use crate::lock::{rank, Mutex};

/// What a listener does with each client it accepts (on the hub's thread:
/// it must not block).
pub type OnClient = Box<dyn Fn(UnixStream) + Send + Sync>;

/// One registered listener.
pub struct Listening {
    listener: UnixListener,
    on_client: OnClient,
    closed: AtomicBool,
    /// Accepts in flight on the hub's thread.
    busy: AtomicUsize,
    id: u64,
}

struct Hub {
    epoll: std::os::fd::OwnedFd,
    listening: Mutex<HashMap<u64, Arc<Listening>>>,
    next: std::sync::atomic::AtomicU64,
}

fn hub() -> std::io::Result<&'static Hub> {
    // (An io error is not Clone: the one the first attempt met is shared.)
    static HUB: OnceLock<Result<&'static Hub, Arc<std::io::Error>>> = OnceLock::new();
    let made = HUB.get_or_init(|| {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)
            .map_err(|e| Arc::new(std::io::Error::from(e)))?;
        let hub: &'static Hub = Box::leak(Box::new(Hub {
            epoll,
            listening: Mutex::new(rank::SOCKET_HUB, HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(1),
        }));
        std::thread::Builder::new()
            .name("memfs-sockets".into())
            .spawn(move || hub.run())
            .map_err(Arc::new)?;
        Ok(hub)
    });
    made.clone()
        .map_err(|e| std::io::Error::other(format!("cannot start the socket thread: {e}")))
}

/// Accepts on `listener` (non-blocking) from the hub's thread, handing each
/// client to `on_client`, until [`close`] is called.
pub fn register(listener: UnixListener, on_client: OnClient) -> std::io::Result<Arc<Listening>> {
    let hub = hub()?;
    listener.set_nonblocking(true)?;
    let id = hub.next.fetch_add(1, Ordering::Relaxed);
    let listening = Arc::new(Listening {
        listener,
        on_client,
        closed: AtomicBool::new(false),
        busy: AtomicUsize::new(0),
        id,
    });
    hub.listening.lock().insert(id, listening.clone());
    if let Err(e) = epoll::add(
        &hub.epoll,
        &listening.listener,
        epoll::EventData::new_u64(id),
        epoll::EventFlags::IN,
    ) {
        hub.listening.lock().remove(&id);
        return Err(e.into());
    }
    Ok(listening)
}

/// Stops accepting on `listening`: once this returns, no client of it is
/// being accepted or handed over.
pub fn close(listening: &Listening) {
    listening.closed.store(true, Ordering::SeqCst);
    if let Ok(hub) = hub() {
        let _ = epoll::delete(&hub.epoll, &listening.listener);
        hub.listening.lock().remove(&listening.id);
    }
    while listening.busy.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Hub {
    fn run(&self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
        loop {
            events.clear();
            match epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut events),
                None,
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::error!("waiting for socket clients: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
            for event in &events {
                let id = event.data.u64();
                let Some(l) = self.listening.lock().get(&id).cloned() else {
                    continue;
                };
                l.busy.fetch_add(1, Ordering::SeqCst);
                if !l.closed.load(Ordering::SeqCst) {
                    l.accept_all();
                }
                l.busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

impl Listening {
    /// Accepts every client waiting now.
    fn accept_all(&self) {
        loop {
            match self.listener.accept() {
                Ok((conn, _)) => (self.on_client)(conn),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors, say: the client waits in the
                    // backlog and the next event tries again (a moment
                    // later: the event stays ready until it is taken).
                    tracing::warn!("accepting a socket client: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }
}
