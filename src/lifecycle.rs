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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use memfs::control::Control;
use memfs::fuse::{Hosted, MountOptions, Mounted};
use memfs::persist::OpenError;
use memfs::serve::attach::{self, Link};
use memfs::serve::socket::SocketServer;
use memfs::tool::Tool;
use memfs::Memory;
use serde_json::json;

/// What bounds the doors: the longest request line, and how long a socket
/// client may take to finish a line it started.
#[derive(Clone, Copy)]
pub struct Doors {
    pub max_line: usize,
    pub client_timeout: Duration,
    /// A socket-only owner exits after this long with no client, no mount
    /// and no call.
    pub idle_exit: Option<Duration>,
}

/// Why a server stops.
enum Stop {
    Signal,
    InputEnded(io::Result<()>),
    Unmounted,
    Idle,
}

/// A protocol served on stdin/stdout, on its own thread.
pub type StdioServer = Box<dyn FnOnce(Tool, Arc<Control>) -> io::Result<()> + Send>;

/// Serves until a signal, the end of `stdio`'s input, or an outside unmount;
/// then shuts down and says how it went. Start-up, the wait and the
/// shutdown share the same handles (signals, socket server, mount, hosted
/// mounts); the shutdown closes them in order into one exit code.
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
            memfs::say!("memfs: cannot handle signals: {e}");
            return ExitCode::from(2);
        }
    };
    // The owner of a data dir always serves its socket: every later door
    // on the same data dir attaches to it there.
    // ... and serves the mounts they ask for.
    let hosted = Arc::new(Hosted::default());
    let server = match SocketServer::start(
        memory.tool().clone(),
        memory.control().clone(),
        &memory.data_dir().state,
        doors.client_timeout,
        doors.max_line,
        Some(hosted.clone()),
    ) {
        Ok(server) => server,
        Err(e) => {
            memfs::say!("memfs: cannot serve the socket in the data dir: {e}");
            return ExitCode::from(2);
        }
    };
    let mounted = match mount {
        Some((at, options)) => match open_mount(memory, at, options) {
            Ok(mounted) => Some(mounted),
            Err(code) => return code,
        },
        None => None,
    };
    if let Some(serve) = stdio {
        if let Err(code) = serve_stdio(memory, serve, tell.clone()) {
            return code;
        }
    }
    let stop = wait(&told, &hosted, mounted.as_ref(), &server, doors.idle_exit);
    signals.close();
    shut_down(memory, &stop, server, &hosted, mounted)
}

/// Serves `serve` on stdin/stdout on a thread of its own, which tells
/// `tell` when its input ends.
fn serve_stdio(
    memory: &Memory,
    serve: StdioServer,
    tell: mpsc::Sender<Stop>,
) -> Result<(), ExitCode> {
    let tool = memory.tool().clone();
    let control = memory.control().clone();
    let started = std::thread::Builder::new()
        .name("memfs-stdio".into())
        .spawn(move || {
            let _ = tell.send(Stop::InputEnded(serve(tool, control)));
        });
    if let Err(e) = started {
        memfs::say!("memfs: cannot start serving stdio: {e}");
        return Err(ExitCode::from(2));
    }
    Ok(())
}

/// Waits for a reason to stop: told one, the mount unmounted from outside,
/// or nobody using the memory for `idle_exit`.
fn wait(
    told: &mpsc::Receiver<Stop>,
    hosted: &Hosted,
    mounted: Option<&Mounted>,
    server: &SocketServer,
    idle_exit: Option<Duration>,
) -> Stop {
    loop {
        match told.recv_timeout(Duration::from_millis(100)) {
            Ok(stop) => break stop,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                hosted.reap();
                if mounted.is_some_and(Mounted::is_finished) {
                    break Stop::Unmounted;
                }
                let idle = server
                    .idle_for()
                    .filter(|_| hosted.is_empty() && mounted.is_none());
                if let (Some(idle), Some(limit)) = (idle, idle_exit) {
                    if idle >= limit {
                        break Stop::Idle;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Stop::Signal,
        }
    }
}

/// Closes the socket, the hosted mounts and the mount, then writes the
/// memory out: one exit code for how it all went.
fn shut_down(
    memory: &Memory,
    stop: &Stop,
    mut server: SocketServer,
    hosted: &Hosted,
    mounted: Option<Mounted>,
) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    if let Stop::InputEnded(Err(e)) = stop {
        if e.kind() != io::ErrorKind::BrokenPipe {
            memfs::say!("memfs: serving stdio failed: {e}");
            code = ExitCode::FAILURE;
        }
    }
    server.stop();
    if !hosted.unmount_all() {
        memfs::say!("memfs: writing out a mount served for another memfs failed");
        code = ExitCode::FAILURE;
    }
    if let Some(mounted) = mounted {
        if unmount(mounted) != ExitCode::SUCCESS {
            code = ExitCode::FAILURE;
        }
    }
    if !memory.write_out() {
        memfs::say!(
            "memfs: {} path(s) are in memory but could not be written to disk",
            memory.store().unsaved_paths()
        );
        code = ExitCode::FAILURE;
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
        memfs::say!("memfs: {e}");
        ExitCode::from(2)
    })?;
    memfs::say!(
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
            memfs::say!("memfs: unmounted {at}; everything is written out");
            ExitCode::SUCCESS
        }
        Err(e) => {
            memfs::say!("memfs: unmounted {at}, but writing out failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `memfs mount` while another memfs owns the data dir: the owner serves the
/// mount (asked over its socket) until this process is told to stop, or the
/// mount is unmounted from outside. If the owner goes away first, this
/// process takes the data dir over and serves the mount itself, so for the
/// person `memfs mount` behaves as it does alone.
///
/// One retry loop: open, or else ask the owner to mount and wait; if the
/// owner goes away, the loop starts again to take over.
pub fn mount_beside_owner(
    open: impl Fn() -> Result<Memory, OpenError>,
    state_dir: &Path,
    at: &Path,
    options: MountOptions,
    doors: Doors,
) -> ExitCode {
    let (Some(stop), Some(at)) = (stop_flag(), absolute(at)) else {
        return ExitCode::from(2);
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match open() {
            Ok(memory) => return run(&memory, Some((&at, options)), doors, None),
            Err(OpenError::Busy { .. }) => {}
            Err(e) => {
                memfs::say!("memfs: {e}");
                return ExitCode::from(2);
            }
        }
        let mut link = match Link::connect(state_dir) {
            Ok(link) => link,
            // The owner is starting or stopping: try again.
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                memfs::say!("memfs: the data dir is in use, and its owner does not answer: {e}");
                return ExitCode::from(2);
            }
        };
        let key = memfs::persist::read_key(state_dir).unwrap_or_default();
        let answer = match ask_to_mount(&mut link, &at, &key, &options) {
            Some(answer) => answer,
            None => continue, // the owner went away: take over
        };
        if answer.is_error {
            let text = answer.text().unwrap_or_default();
            memfs::say!("memfs: {}", text.trim_start_matches("Error: "));
            return ExitCode::from(2);
        }
        memfs::say!(
            "memfs: mounted at {} by the memfs that owns the data dir (pid {}); Ctrl-C or `umount {}` to stop",
            at.display(),
            link.owner_pid().unwrap_or_default(),
            at.display()
        );
        if let Some(code) = while_hosted(&mut link, &at, &key, &stop) {
            return code;
        }
        // (The owner went away: take over and mount here ourselves.)
    }
}

/// The mount point as an absolute path (none, said, if it cannot be).
fn absolute(at: &Path) -> Option<std::path::PathBuf> {
    std::path::absolute(at)
        .map_err(|e| memfs::say!("memfs: cannot use the mount point {}: {e}", at.display()))
        .ok()
}

/// A flag SIGINT and SIGTERM set (none, said, if they cannot be handled).
fn stop_flag() -> Option<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            memfs::say!("memfs: cannot handle signals: {e}");
            return None;
        }
    }
    Some(stop)
}

/// Asks the owner to mount at `at`: its answer, or none if it went away.
fn ask_to_mount(
    link: &mut Link,
    at: &Path,
    key: &str,
    options: &MountOptions,
) -> Option<memfs::tool::ToolResult> {
    let request = json!({
        "type": attach::MOUNT, "path": at, "read_only": options.read_only, "key": key,
        "allow_other": options.allow_other,
        "uid": options.presented.uid, "gid": options.presented.gid,
        "dir_mode": options.presented.dir_mode, "file_mode": options.presented.file_mode,
    });
    let answer = link.call(request.to_string().as_bytes()).ok()?;
    Some(attach::result_of(&answer))
}

/// While the owner serves the mount: until this process is told to stop
/// (the owner unmounts it), or the mount is unmounted from outside; `None`
/// when the owner went away first (this process takes over).
fn while_hosted(link: &mut Link, at: &Path, key: &str, stop: &AtomicBool) -> Option<ExitCode> {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if stop.load(Ordering::SeqCst) {
            let request = json!({"type": attach::UNMOUNT, "path": at, "key": key});
            return Some(
                match link
                    .call(request.to_string().as_bytes())
                    .map(|a| attach::result_of(&a))
                {
                    Ok(done) if !done.is_error => {
                        memfs::say!(
                            "memfs: unmounted {}; everything is written out",
                            at.display()
                        );
                        ExitCode::SUCCESS
                    }
                    Ok(failed) => {
                        memfs::say!("memfs: {}", failed.text().unwrap_or_default());
                        ExitCode::FAILURE
                    }
                    Err(_) => {
                        memfs::say!("memfs: the owner of the data dir stopped while unmounting; it writes out at its exit");
                        ExitCode::FAILURE
                    }
                },
            );
        }
        if link.is_closed() {
            return None;
        }
        if !memfs::fuse::mountpoint::is_mount_point(at) {
            // An owner that stops closes its clients before it unmounts.
            std::thread::sleep(Duration::from_millis(50));
            if link.is_closed() {
                return None;
            }
            // Unmounted from outside: the owner writes it out.
            return Some(ExitCode::SUCCESS);
        }
    }
}
