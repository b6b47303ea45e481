//! The `memfs` binary: wiring only; every behaviour lives in the library.

mod allocator;
mod claude_code_cli;
mod cli;
mod cli_error;
mod export_cli;
mod history_cli;
mod http_cli;
mod import_cli;
mod import_git;
mod lifecycle;
mod logging;
mod out;
mod scan_cli;
mod web_cli;

use std::io::{self, IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use cli::{Cli, Cmd};
use lifecycle::Doors;
use memfs::persist::OpenError;
use memfs::serve::attach::{Attach, Backend};
use memfs::serve::line;
use memfs::store::{Door, Origin};
use memfs::Memory;

fn main() -> ExitCode {
    allocator::tune();
    if let Some(code) = mount_helper() {
        return code;
    }
    // FAILPOINTS=... in the environment, in builds for fault-injection tests.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let mut cli = Cli::parse_args();
    logging::init(&cli.common);
    memfs::search::set_deadline(Duration::from_millis(cli.common.search_deadline_ms));
    // A person who typed `serve --stdio` learns what it waits for.
    if matches!(cli.command, Cmd::Serve { stdio: true, .. }) && io::stdin().is_terminal() {
        memfs::say!("memfs: reading tool calls as JSON lines on stdin (one a line, e.g. {{\"command\":\"view\",\"path\":\"/memories\"}}); Ctrl-D to stop");
    }
    // (Completions, the man page, tokens and a stores root never make a
    // data dir of --data.)
    let makes_data = !matches!(
        cli.command,
        Cmd::Completions { .. }
            | Cmd::Man
            | Cmd::Token { .. }
            | Cmd::Mirror { .. }
            | Cmd::Scan { .. }
    ) && cli.common.stores.is_none();
    if let Err(e) = cli.common.resolve(makes_data) {
        memfs::say!("memfs: {e}");
        return ExitCode::from(2);
    }
    if let Some(code) = without_a_memory(&cli) {
        return code;
    }
    let doors = Doors {
        max_line: memfs::serve::max_line_bytes(cli.common.max_file_size),
        client_timeout: Duration::from_secs(cli.common.client_timeout),
        idle_exit: None,
    };
    let memory = match Memory::open(&cli.common.data, cli.common.options()) {
        Ok(memory) => memory,
        // A running memfs owns the data dir: attach to it.
        Err(OpenError::Busy { dir, pid }) => return attached(&cli, doors, &dir, pid),
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    for warning in memory.warnings() {
        memfs::say!("memfs: {warning}");
    }
    on(memory, cli, doors)
}

/// The commands answered without opening a memory here: completions, the
/// man page, `scan`, tokens, the HTTP door and the page on a root, and the
/// history commands (`None`: the command needs the memory).
fn without_a_memory(cli: &Cli) -> Option<ExitCode> {
    match &cli.command {
        Cmd::Scan { path, json } => return Some(scan_cli::scan(&cli.common.data, path, *json)),
        Cmd::Completions { shell } => {
            // Made whole first: the generator panics on a write error, and a
            // reader that stops early (`| head`) is no error.
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command, "memfs", &mut script);
            return Some(match io::Write::write_all(&mut io::stdout(), &script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    memfs::say!("memfs: cannot write the completions: {e}");
                    ExitCode::FAILURE
                }
            });
        }
        Cmd::Man => {
            let page = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
            return Some(match page.render(&mut io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    memfs::say!("memfs: cannot write the man page: {e}");
                    ExitCode::FAILURE
                }
            });
        }
        _ => {}
    }
    match &cli.command {
        Cmd::Token { action } => return Some(http_cli::token(cli, action)),
        Cmd::Mirror { url, name } => return Some(http_cli::mirror(cli, url, name.as_deref())),
        Cmd::ClaudeCode { action } => return Some(claude_code_cli::run(action)),
        Cmd::Web { link: true, .. } => return Some(web_cli::link(&cli.common.data)),
        Cmd::Web { listen, .. } if cli.common.stores.is_none() => {
            return Some(web_cli::web(cli, listen))
        }
        Cmd::Serve {
            http: Some(addr),
            http_options,
            ..
        } => return Some(http_cli::serve(cli, addr, http_options)),
        _ if cli.common.stores.is_some() => {
            memfs::say!("memfs: --stores is for `serve --http` and `token`; other commands take one store's data dir: --data ROOT/STORE_ID");
            return Some(ExitCode::from(2));
        }
        _ => {}
    }
    if let Some(code) = transfer(cli) {
        return Some(code);
    }
    history_cli::request_of(cli).map(|request| history_cli::run(cli, request))
}

/// `import`, and `export` of the files (`--dir`, `--tar`).
fn transfer(cli: &Cli) -> Option<ExitCode> {
    match &cli.command {
        Cmd::Export {
            git: None,
            to: Some(url),
            store,
            key_env,
            ..
        } => Some(export_cli::to_api(cli, url, store.as_deref(), key_env)),
        Cmd::Export {
            git: None,
            dir,
            tar,
            ..
        } => Some(export_cli::run(cli, dir.as_deref(), tar.as_deref())),
        Cmd::Import {
            source,
            to,
            overwrite,
            dry_run,
            quiet,
            json,
            git,
            store,
            key_env,
        } => {
            let asked = import_cli::Asked {
                store: store.as_deref(),
                key_env,
                source,
                to,
                overwrite: *overwrite,
                dry_run: *dry_run,
                quiet: *quiet,
                json: *json,
                git: *git,
            };
            Some(import_cli::run(cli, &asked))
        }
        _ => None,
    }
}

/// The commands that run on the memory this process opened (it owns the
/// data dir): `exec`, `serve`, `mcp`, `mount`.
///
/// Long because it is a match over every command run on the memory this
/// process owns; each arm is short glue into lifecycle or serve.
fn on(memory: Memory, cli: Cli, doors: Doors) -> ExitCode {
    let max_line = doors.max_line;
    let origin = |door| Origin::session(door, cli.common.session.as_deref());
    match cli.command {
        Cmd::Exec { input, raw } => match exec_line(&input, raw) {
            Ok(line) => {
                let tool = memory.tool().with_origin(origin(Door::Exec));
                print_answer(&line::handle(&tool, line.as_bytes()).finish(), raw)
            }
            Err(code) => code,
        },
        Cmd::Serve {
            stdio,
            idle_exit,
            stats,
            mount,
            mount_options,
            ..
        } => {
            let origin = origin(Door::Stdio);
            let stdio: Option<lifecycle::StdioServer> = stdio.then(|| -> lifecycle::StdioServer {
                Box::new(move |tool, control| {
                    let tool = tool.with_origin(origin);
                    let (input, output) = (io::stdin().lock(), io::stdout());
                    memfs::serve::stream::serve(&tool, &control, input, output, max_line)
                })
            });
            let doors = Doors {
                idle_exit: (stdio.is_none() && idle_exit > 0)
                    .then(|| Duration::from_secs(idle_exit)),
                ..doors
            };
            let code = lifecycle::run(
                &memory,
                mount.as_deref().map(|at| (at, mount_options.options())),
                doors,
                stdio,
            );
            if stats {
                let s = memory.persist_stats();
                memfs::say!(
                    "memfs: {} changes in {} batches, {} disk barriers",
                    s.changes,
                    s.batches,
                    s.barriers
                );
            }
            code
        }
        Cmd::Mcp {
            mount,
            mount_options,
        } => lifecycle::run(
            &memory,
            mount.as_deref().map(|at| (at, mount_options.options())),
            doors,
            Some(Box::new(move |tool, control| {
                memfs::serve::mcp::serve(
                    &tool,
                    Some(control),
                    io::stdin().lock(),
                    io::stdout(),
                    max_line,
                )
            })),
        ),
        Cmd::Mount {
            mountpoint,
            mount_options,
        } => lifecycle::run(
            &memory,
            Some((&mountpoint, mount_options.options())),
            doors,
            None,
        ),
        // Answered before the data dir is opened.
        Cmd::Completions { .. }
        | Cmd::Scan { .. }
        | Cmd::Man
        | Cmd::Log { .. }
        | Cmd::Search { .. }
        | Cmd::Show { .. }
        | Cmd::Diff { .. }
        | Cmd::Revert { .. }
        | Cmd::Undo { .. }
        | Cmd::Redact { .. }
        | Cmd::Export { .. }
        | Cmd::Import { .. }
        | Cmd::Expire { .. }
        | Cmd::Checkpoint
        | Cmd::Token { .. }
        | Cmd::Mirror { .. }
        | Cmd::ClaudeCode { .. }
        | Cmd::Web { .. }
        | Cmd::Clear { .. } => ExitCode::SUCCESS,
    }
}

/// The door a command attached to another owner's socket comes through;
/// a command that needs the data dir to itself is refused, exit 2.
fn attached_door(command: &Cmd, dir: &str, pid: Option<u32>) -> Result<Door, ExitCode> {
    match command {
        Cmd::Exec { .. } => Ok(Door::Exec),
        Cmd::Serve {
            mount: None,
            stdio: true,
            ..
        } => Ok(Door::Stdio),
        Cmd::Mcp { mount: None, .. } => Ok(Door::Mcp),
        _ => {
            let busy = OpenError::Busy {
                dir: dir.to_string(),
                pid,
            };
            memfs::say!("memfs: {busy}; `serve` without --stdio, and `--mount`, need the data dir to themselves (run `memfs mount` beside it instead)");
            Err(ExitCode::from(2))
        }
    }
}

/// `memfs mcp` on stdio through the owner's socket; the backend is closed
/// when the client goes (a closed pipe is the client's end, not a failure).
fn serve_mcp_attached(backend: Backend, attach: Attach, max_line: usize) -> ExitCode {
    let served = memfs::serve::mcp::serve_attached(
        backend,
        attach,
        io::stdin().lock(),
        io::stdout(),
        max_line,
    );
    match served {
        Ok(backend) => match backend.close() {
            true => ExitCode::SUCCESS,
            false => ExitCode::FAILURE,
        },
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            memfs::say!("memfs: serving stdio failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Another memfs owns the data dir: `exec`, `serve --stdio` and `mcp`
/// attach to it through its socket (and take the data dir over if it goes
/// away); a mount needs the data dir itself. One backend is opened, the
/// command run, and the backend closed once.
fn attached(cli: &Cli, doors: Doors, dir: &str, pid: Option<u32>) -> ExitCode {
    if let Cmd::Mount {
        mountpoint,
        mount_options,
    } = &cli.command
    {
        let options = cli.common.options();
        return lifecycle::mount_beside_owner(
            || Memory::open(&cli.common.data, options.clone()),
            &cli.common.data.join(".memfs"),
            mountpoint,
            mount_options.options(),
            doors,
        );
    }
    let door = match attached_door(&cli.command, dir, pid) {
        Ok(door) => door,
        Err(code) => return code,
    };
    let attach = Attach {
        data: cli.common.data.clone(),
        options: cli.common.options(),
        door,
        session: cli.common.session.clone(),
        client_timeout: doors.client_timeout,
        max_line: doors.max_line,
    };
    let mut backend = match attach.open() {
        Ok(backend) => backend,
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match &cli.command {
        Cmd::Exec { input, raw } => match exec_line(input, *raw) {
            Ok(line) => print_answer(&backend.call(&attach, line.as_bytes()), *raw),
            Err(code) => code,
        },
        Cmd::Mcp { .. } => return serve_mcp_attached(backend, attach, doors.max_line),
        _ => serve_lines_attached(&mut backend, &attach),
    };
    if backend.close() {
        code
    } else {
        memfs::say!("memfs: some changes could not be written to disk");
        ExitCode::FAILURE
    }
}

/// `serve --stdio` attached to the owner: each line forwarded in turn.
fn serve_lines_attached(backend: &mut Backend, attach: &Attach) -> ExitCode {
    use memfs::serve::reader::{LineReader, Next};
    use std::io::Write;
    let quiet = memfs::serve::pipeline::Unobserved;
    let mut lines = LineReader::new(io::stdin().lock(), attach.max_line, None, &quiet);
    let mut out = io::stdout().lock();
    loop {
        let answer = match lines.next_line() {
            Ok(Next::Line(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Next::Line(bytes)) => backend.call(attach, bytes),
            Ok(Next::TooLong) => line::too_long(attach.max_line).finish(),
            Ok(Next::TimedOut(_)) | Ok(Next::End) => return ExitCode::SUCCESS,
            Err(e) => {
                memfs::say!("memfs: reading stdin failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::SUCCESS; // the reader went away
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
            memfs::say!(
                "memfs: cannot remount {}: {e}",
                Path::new(mountpoint).display()
            );
            Some(ExitCode::from(2))
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
        memfs::say!("memfs: cannot read the command from stdin: {e}");
        ExitCode::from(2)
    })?;
    Ok(text)
}

/// `exec`'s command as one line (a command spread over several lines is
/// folded), or the exit after saying why there is none.
fn exec_line(input: &str, raw: bool) -> Result<String, ExitCode> {
    let text = read_input(input)?;
    match memfs::json::parse(text.as_bytes()) {
        Ok(value) => Ok(value.to_string()),
        Err(e) => Err(print_answer(
            &line::render(
                &memfs::ToolResult::error(format!("Error: the command is not valid JSON: {e}")),
                &line::Framing::Plain,
            ),
            raw,
        )),
    }
}

/// Prints an answer line (with `raw`, its text: to stdout, or to stderr
/// for an error); exits 1 when it is an error.
fn print_answer(answer: &str, raw: bool) -> ExitCode {
    let value = serde_json::from_str::<serde_json::Value>(answer).ok();
    let is_error = value.as_ref().and_then(|v| v["is_error"].as_bool());
    match value.as_ref().map(|v| &v["content"]) {
        Some(serde_json::Value::String(text)) if raw => {
            if is_error == Some(false) {
                crate::out!("{text}");
            } else {
                memfs::say!("{text}");
            }
        }
        _ => crate::out!("{answer}"),
    }
    if is_error == Some(false) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
