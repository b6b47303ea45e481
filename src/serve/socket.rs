//! The Unix socket at `DIR/.memfs/sock`: the same JSON-lines protocol as
//! stdio, for any number of clients at once (each on its own thread; the
//! store's lock orders them, and their writes share group commits).

use std::io::{self, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::lines;
use crate::tool::Tool;

/// Clients served at once; one more gets an error line and is closed.
pub const MAX_CLIENTS: usize = 64;

pub struct SocketServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SocketServer {
    /// Listens at `path` (replacing a stale socket: the caller holds the
    /// data-dir lock, so no live memfs owns it), mode 0600.
    pub fn start(tool: Tool, path: &Path, max_line: usize) -> io::Result<SocketServer> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("memfs-socket".into())
            .spawn(move || accept_loop(&listener, &tool, &flag, max_line))?;
        Ok(SocketServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Stops accepting and removes the socket file. Clients already connected
    /// finish the lines they sent.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.path); // wakes the accept loop
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &UnixListener, tool: &Tool, stop: &AtomicBool, max_line: usize) {
    let clients = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        if clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
            clients.fetch_sub(1, Ordering::SeqCst);
            let _ = lines::refuse(
                conn,
                &format!("Error: memfs is serving {MAX_CLIENTS} clients already; try again later"),
            );
            continue;
        }
        let (tool, clients) = (tool.clone(), clients.clone());
        let spawned = std::thread::Builder::new()
            .name("memfs-client".into())
            .spawn(move || {
                if let Ok(output) = conn.try_clone() {
                    let _ = lines::serve(&tool, BufReader::new(conn), output, max_line);
                }
                clients.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            eprintln!("memfs: cannot start a thread for a socket client");
        }
    }
}

/// Sends one line to a running memfs and returns its answer line.
pub fn request(path: &Path, line: &str) -> io::Result<String> {
    use std::io::{BufRead, Write};
    let mut conn = UnixStream::connect(path)?;
    conn.write_all(line.trim_end().as_bytes())?;
    conn.write_all(b"\n")?;
    conn.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    BufReader::new(conn).read_line(&mut answer)?;
    if answer.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "memfs closed the socket without answering",
        ));
    }
    Ok(answer.trim_end().to_string())
}
