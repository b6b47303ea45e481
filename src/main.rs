//! The `memfs` binary: wiring only; every behaviour lives in the library.

mod cli;
mod serving;

use std::io::{self, Read};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use cli::{Cli, Cmd};
use memfs::persist::OpenError;
use memfs::serve::socket;
use memfs::store::{Door, Origin};
use memfs::Memory;
use serving::Doors;

fn main() -> ExitCode {
    if let Some(code) = mount_helper() {
        return code;
    }
    // FAILPOINTS=... in the environment, in builds for fault-injection tests.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
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
    let doors = Doors {
        max_line: memfs::serve::max_line_bytes(cli.common.max_file_size),
        client_timeout: Duration::from_secs(cli.common.client_timeout),
    };
    let max_line = doors.max_line;
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
            let code = serving::run(
                &memory,
                mount.as_deref().map(|at| (at, mount_options.options())),
                doors,
                Some(Box::new(move |tool| {
                    let tool = tool.with_origin(Origin::agent(Door::Stdio));
                    memfs::serve::lines::serve(&tool, io::stdin().lock(), io::stdout(), max_line)
                })),
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
        } => serving::run(
            &memory,
            mount.as_deref().map(|at| (at, mount_options.options())),
            doors,
            Some(Box::new(move |tool| {
                memfs::serve::mcp::serve(&tool, io::stdin().lock(), io::stdout(), max_line)
            })),
        ),
        Cmd::Mount {
            mountpoint,
            mount_options,
        } => serving::run(
            &memory,
            Some((&mountpoint, mount_options.options())),
            doors,
            None,
        ),
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
    match memfs::json::parse(text.as_bytes()) {
        Ok(value) => memory
            .tool()
            .with_origin(Origin::agent(Door::Exec))
            .call(&value),
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
    let line = match memfs::json::parse(text.as_bytes()) {
        Ok(v) => v.to_string(),
        Err(e) => {
            return print_result(&memfs::ToolResult::error(format!(
                "Error: the command is not valid JSON: {e}"
            )))
        }
    };
    match socket::request(&data.join(".memfs"), &line) {
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
