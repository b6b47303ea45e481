//! The `memfs` binary: wiring only; every behaviour lives in the library.

mod cli;

use std::io::{self, Read};
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Cmd};
use memfs::Memory;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let memory = match Memory::open(&cli.common.data, cli.common.options()) {
        Ok(memory) => memory,
        Err(e) => {
            eprintln!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let skipped = memory.skipped();
    if skipped.non_utf8_names + skipped.special_files > 0 {
        eprintln!(
            "memfs: left out {} name(s) that are not UTF-8 and {} special file(s) found in the data dir",
            skipped.non_utf8_names, skipped.special_files
        );
    }
    match cli.command {
        Cmd::Exec { input } => exec(&memory, &input),
        Cmd::Serve { stdio: _, stats } => {
            let max_line = memfs::serve::max_line_bytes(cli.common.max_file_size);
            let served = memfs::serve::stdio::serve(
                memory.tool(),
                io::stdin().lock(),
                io::stdout(),
                max_line,
            );
            if stats {
                let s = memory.persist_stats();
                eprintln!(
                    "memfs: {} changes in {} batches, {} disk barriers",
                    s.changes, s.batches, s.barriers
                );
            }
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("memfs: serving stdio failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn exec(memory: &Memory, input: &str) -> ExitCode {
    let mut text = input.to_string();
    if input == "-" {
        text.clear();
        if let Err(e) = io::stdin().read_to_string(&mut text) {
            eprintln!("memfs: cannot read the command from stdin: {e}");
            return ExitCode::from(2);
        }
    }
    let result = match serde_json::from_str(&text) {
        Ok(value) => memory.call(&value),
        Err(e) => memfs::ToolResult::error(format!("Error: the command is not valid JSON: {e}")),
    };
    println!("{}", result.to_json());
    if result.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
