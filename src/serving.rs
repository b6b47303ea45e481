//! The life of a long-running memfs (`serve`, `mcp`, `mount`): its doors,
//! and the one shutdown path.
//!
//! A signal only tells the main thread; so does the end of stdin and an
//! outside `umount`. The main thread alone then stops the doors (the socket,
//! the mount: lazily if busy), writes everything out, and exits 0 only when
//! all of it is on disk. Every step is bounded: no client, vanished socket
//! file or half-read stdin can hold it up.

use std::io;
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use memfs::fuse::{MountOptions, Mounted};
use memfs::serve::socket::SocketServer;
use memfs::tool::Tool;
use memfs::Memory;

/// What bounds the doors: the longest request line, and how long a socket
/// client may take to finish a line it started.
#[derive(Clone, Copy)]
pub struct Doors {
    pub max_line: usize,
    pub client_timeout: Duration,
}

/// Why a server stops.
enum Stop {
    Signal,
    InputEnded(io::Result<()>),
    Unmounted,
}

/// A protocol served on stdin/stdout, on its own thread.
pub type StdioServer = Box<dyn FnOnce(Tool) -> io::Result<()> + Send>;

/// Serves until a signal, the end of `stdio`'s input, or an outside unmount;
/// then shuts down and says how it went.
pub fn run(
    memory: &Memory,
    mount: Option<(&Path, MountOptions)>,
    doors: Doors,
    stdio: Option<StdioServer>,
) -> ExitCode {
    let (tell, told) = mpsc::channel::<Stop>();
    let signals = match watch_signals(tell.clone()) {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("memfs: cannot handle signals: {e}");
            return ExitCode::from(2);
        }
    };
    // The owner of a data dir always serves its socket: every later door
    // on the same data dir attaches to it there.
    let mut server = match SocketServer::start(
        memory.tool().clone(),
        &memory.data_dir().state,
        doors.client_timeout,
        doors.max_line,
    ) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("memfs: cannot serve the socket in the data dir: {e}");
            return ExitCode::from(2);
        }
    };
    let mut mounted = match mount {
        Some((at, options)) => match open_mount(memory, at, options) {
            Ok(mounted) => Some(mounted),
            Err(code) => return code,
        },
        None => None,
    };
    if let Some(serve) = stdio {
        let tool = memory.tool().clone();
        let tell = tell.clone();
        let started = std::thread::Builder::new()
            .name("memfs-stdio".into())
            .spawn(move || {
                let _ = tell.send(Stop::InputEnded(serve(tool)));
            });
        if let Err(e) = started {
            eprintln!("memfs: cannot start serving stdio: {e}");
            return ExitCode::from(2);
        }
    }
    let stop = loop {
        match told.recv_timeout(Duration::from_millis(100)) {
            Ok(stop) => break stop,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if mounted.as_ref().is_some_and(Mounted::is_finished) {
                    break Stop::Unmounted;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Stop::Signal,
        }
    };
    signals.close();
    let mut code = ExitCode::SUCCESS;
    if let Stop::InputEnded(Err(e)) = &stop {
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("memfs: serving stdio failed: {e}");
            code = ExitCode::FAILURE;
        }
    }
    server.stop();
    if let Some(mounted) = mounted.take() {
        if unmount(mounted) != ExitCode::SUCCESS {
            code = ExitCode::FAILURE;
        }
    }
    code
}

/// Signals only tell the main thread (through `tell`) that it is time to stop.
fn watch_signals(tell: mpsc::Sender<Stop>) -> io::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("memfs-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if tell.send(Stop::Signal).is_err() {
                    return;
                }
            }
        })?;
    Ok(handle)
}

/// Mounts the memory at `at`.
fn open_mount(memory: &Memory, at: &Path, options: MountOptions) -> Result<Mounted, ExitCode> {
    let mounted = memfs::fuse::mount(memory.store().clone(), at, options).map_err(|e| {
        eprintln!("memfs: {e}");
        ExitCode::from(2)
    })?;
    eprintln!(
        "memfs: mounted {} at {}; Ctrl-C or `umount {}` to stop",
        memory.data_dir().shown(),
        at.display(),
        at.display()
    );
    Ok(mounted)
}

/// Unmounts and writes everything out.
fn unmount(mounted: Mounted) -> ExitCode {
    let at = mounted.mountpoint().display().to_string();
    match mounted.unmount() {
        Ok(()) => {
            eprintln!("memfs: unmounted {at}; everything is written out");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memfs: unmounted {at}, but writing out failed: {e}");
            ExitCode::FAILURE
        }
    }
}
