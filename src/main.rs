//! The `memfs` binary: wiring only; every behaviour lives in the library.

mod cli;

use std::io::{self, Read};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use parking_lot::Mutex;

use cli::{Cli, Cmd};
use memfs::fuse::{MountOptions, Mounted};
use memfs::persist::OpenError;
use memfs::serve::socket::{self, SocketServer};
use memfs::Memory;

fn main() -> ExitCode {
    if let Some(code) = mount_helper() {
        return code;
    }
    let cli = Cli::parse();
    let memory = match Memory::open(&cli.common.data, cli.common.options()) {
        Ok(memory) => memory,
        Err(OpenError::Busy { dir, pid }) => {
            // A running memfs owns the data dir: `exec` goes through its socket.
            if let Cmd::Exec { input } = &cli.command {
                return exec_via_socket(&cli.common.data, input, &dir, pid);
            }
            eprintln!("memfs: {}", OpenError::Busy { dir, pid });
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    for warning in memory.warnings() {
        eprintln!("memfs: {warning}");
    }
    let max_line = memfs::serve::max_line_bytes(cli.common.max_file_size);
    match cli.command {
        Cmd::Exec { input } => match read_input(&input) {
            Ok(text) => print_result(&run_line(&memory, &text)),
            Err(code) => code,
        },
        Cmd::Serve {
            stdio: _,
            stats,
            mount,
            mount_options,
        } => {
            let code = serve_stdin(
                &memory,
                mount.as_deref(),
                mount_options.options(),
                max_line,
                |tool| memfs::serve::lines::serve(tool, io::stdin().lock(), io::stdout(), max_line),
            );
            if stats {
                let s = memory.persist_stats();
                eprintln!(
                    "memfs: {} changes in {} batches, {} disk barriers",
                    s.changes, s.batches, s.barriers
                );
            }
            code
        }
        Cmd::Mcp {
            mount,
            mount_options,
        } => serve_stdin(
            &memory,
            mount.as_deref(),
            mount_options.options(),
            max_line,
            |tool| memfs::serve::mcp::serve(tool, io::stdin().lock(), io::stdout(), max_line),
        ),
        Cmd::Mount {
            mountpoint,
            mount_options,
        } => {
            let mounted = match start_mount(&memory, &mountpoint, mount_options.options(), max_line)
            {
                Ok(m) => m,
                Err(code) => return code,
            };
            // Until a signal (handled in start_mount) or an outside `umount`.
            while mounted
                .lock()
                .as_ref()
                .is_some_and(|(m, _)| !m.is_finished())
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            stop_mount(&mounted)
        }
    }
}

/// `memfs MOUNTPOINT -o OPTIONS`: how mount(8) (through mount.fuse3) asks for
/// a remount of a memfs mount, e.g. `mount -o remount,ro MOUNTPOINT`.
fn mount_helper() -> Option<ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let [_, mountpoint, dash_o, options] = args.as_slice() else {
        return None;
    };
    if dash_o != "-o" || !Path::new(mountpoint).is_absolute() {
        return None;
    }
    match memfs::fuse::mountpoint::remount(Path::new(mountpoint), &options.to_string_lossy()) {
        Ok(()) => Some(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!(
                "memfs: cannot remount {}: {e}",
                Path::new(mountpoint).display()
            );
            Some(ExitCode::from(2))
        }
    }
}

/// Serves a protocol on stdin/stdout until stdin ends, with the memory
/// mounted meanwhile when asked; then unmounts and writes everything out.
fn serve_stdin(
    memory: &Memory,
    mount: Option<&Path>,
    options: MountOptions,
    max_line: usize,
    serve: impl FnOnce(&memfs::tool::Tool) -> io::Result<()>,
) -> ExitCode {
    let mounted = match mount {
        Some(at) => match start_mount(memory, at, options, max_line) {
            Ok(m) => Some(m),
            Err(code) => return code,
        },
        None => None,
    };
    let served = serve(memory.tool());
    let unmounted = mounted.map(|m| stop_mount(&m));
    match (served, unmounted) {
        (Err(e), _) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("memfs: serving stdio failed: {e}");
            ExitCode::FAILURE
        }
        (_, Some(code)) => code,
        _ => ExitCode::SUCCESS,
    }
}

/// A live mount and the socket served beside it.
type Running = Arc<Mutex<Option<(Mounted, SocketServer)>>>;

/// Mounts, serves the socket, and has SIGINT/SIGTERM unmount cleanly and exit.
fn start_mount(
    memory: &Memory,
    at: &Path,
    options: MountOptions,
    max_line: usize,
) -> Result<Running, ExitCode> {
    let sock = memory.data_dir().state_dir.join("sock");
    let server = SocketServer::start(memory.tool().clone(), &sock, max_line).map_err(|e| {
        eprintln!("memfs: cannot serve the socket in the data dir: {e}");
        ExitCode::from(2)
    })?;
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
    let running: Running = Arc::new(Mutex::new(Some((mounted, server))));
    let on_signal = running.clone();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| {
        eprintln!("memfs: cannot handle signals: {e}");
        ExitCode::from(2)
    })?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let code = stop_mount(&on_signal);
            std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
        }
    });
    Ok(running)
}

/// Unmounts, writes everything out, stops the socket. Safe to call twice.
fn stop_mount(running: &Running) -> ExitCode {
    let Some((mounted, mut server)) = running.lock().take() else {
        return ExitCode::SUCCESS;
    };
    let at = mounted.mountpoint().display().to_string();
    server.stop();
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

/// The command text: the argument, or stdin for `-`.
fn read_input(input: &str) -> Result<String, ExitCode> {
    if input != "-" {
        return Ok(input.to_string());
    }
    let mut text = String::new();
    io::stdin().read_to_string(&mut text).map_err(|e| {
        eprintln!("memfs: cannot read the command from stdin: {e}");
        ExitCode::from(2)
    })?;
    Ok(text)
}

fn run_line(memory: &Memory, text: &str) -> memfs::ToolResult {
    match serde_json::from_str(text) {
        Ok(value) => memory.call(&value),
        Err(e) => memfs::ToolResult::error(format!("Error: the command is not valid JSON: {e}")),
    }
}

fn print_result(result: &memfs::ToolResult) -> ExitCode {
    println!("{}", result.to_json());
    if result.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn exec_via_socket(data: &Path, input: &str, dir: &str, pid: Option<u32>) -> ExitCode {
    let text = match read_input(input) {
        Ok(t) => t,
        Err(code) => return code,
    };
    // The socket speaks lines: a command spread over several lines is folded.
    let line = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => v.to_string(),
        Err(e) => {
            return print_result(&memfs::ToolResult::error(format!(
                "Error: the command is not valid JSON: {e}"
            )))
        }
    };
    match socket::request(&data.join(".memfs/sock"), &line) {
        Ok(answer) => {
            println!("{answer}");
            let is_error = serde_json::from_str::<serde_json::Value>(&answer)
                .ok()
                .and_then(|v| v["is_error"].as_bool());
            if is_error == Some(false) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(_) => {
            eprintln!(
                "memfs: {}",
                OpenError::Busy {
                    dir: dir.to_string(),
                    pid
                }
            );
            ExitCode::from(2)
        }
    }
}
