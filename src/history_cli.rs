//! `memfs log`, `show`, `diff`, `revert`, `redact`, `export --git` and
//! `expire`: run on the data dir itself when no memfs owns it, or by the
//! owner through its socket when one does, with the same output either way.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use memfs::control::request::{handle, Reply, Request};
use memfs::persist::OpenError;
use memfs::serve::attach::through_owner;
use memfs::Memory;

use crate::cli::{Cli, Cmd};

/// The request a history subcommand makes; `None` for the other subcommands.
///
/// Long because it is one match from each history subcommand to its
/// request, field by field.
pub fn request_of(cli: &Cli) -> Option<Request> {
    Some(match &cli.command {
        Cmd::Log {
            path, json, all, ..
        } => Request::Log {
            path: path.clone(),
            json: *json,
            all: *all,
            page: Some(memfs::journal::LogPage::default()),
        },
        Cmd::Search {
            query,
            limit,
            path,
            json,
            all,
        } => Request::Search {
            query: query.join(" "),
            limit: *limit,
            path: path.clone(),
            json: *json,
            all: *all,
            agent: false,
        },
        Cmd::Show { version } => Request::Show {
            version: version.clone(),
        },
        Cmd::Diff { version, against } => Request::Diff {
            version: version.clone(),
            against: against.clone(),
        },
        Cmd::Revert { version } => Request::Revert {
            version: version.clone(),
            // SAFETY: getuid(2) cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            pid: std::process::id(),
            via: None,
        },
        Cmd::Undo {
            by,
            since,
            force,
            dry_run,
        } => Request::UndoSession {
            versions: None,
            by: by.clone(),
            since: since.as_deref().map(since_time),
            force: *force,
            dry_run: *dry_run,
            // SAFETY: getuid(2) cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            pid: std::process::id(),
            via: None,
        },
        Cmd::Redact { version, path } => Request::Redact {
            version: version.clone(),
            path: *path,
        },
        Cmd::Export { git: Some(_), .. } => Request::Export,
        Cmd::Checkpoint => Request::Checkpoint,
        Cmd::Clear { .. } => Request::Clear {
            door: memfs::store::Door::Exec.name().to_string(),
            session: cli.common.session.clone(),
        },
        Cmd::Expire {
            idle,
            dry_run,
            path,
        } => Request::Expire {
            idle: humantime::format_duration(*idle).to_string(),
            dry_run: *dry_run,
            path: path.clone(),
        },
        _ => return None,
    })
}

/// `--since`: a duration ago (`2h`), or a time as given (RFC 3339, compared
/// with the history's times).
fn since_time(given: &str) -> String {
    match memfs::units::parse_duration(given) {
        Ok(ago) => {
            let at = std::time::SystemTime::now() - ago;
            humantime::format_rfc3339_millis(at).to_string()
        }
        Err(_) => given.to_string(),
    }
}

/// Whether a memory is at `data` (its state, or its plain files): the
/// commands that read one make none.
pub fn memory_at(data: &std::path::Path) -> bool {
    data.join(".memfs").is_dir() || data.join("memories").is_dir()
}

pub fn run(cli: &Cli, request: Request) -> ExitCode {
    let data = &cli.common.data;
    if !memory_at(data) {
        memfs::say!(
            "memfs: no memory at {} (no memories/ there)",
            data.display()
        );
        return ExitCode::from(2);
    }
    if let Cmd::Clear { yes: false } = &cli.command {
        memfs::say!("memfs: clear deletes everything under /memories (each delete is kept in the history, and `memfs revert` brings a file back); run `memfs clear --yes` to do it");
        return ExitCode::from(2);
    }
    if let Cmd::Export { git: Some(git), .. } = &cli.command {
        if let Err(e) = crate::export_cli::check_empty(git, "a new repository") {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    }
    let memory = match Memory::open(data, cli.common.options()) {
        Ok(memory) => Some(memory),
        Err(OpenError::Busy { .. }) => None,
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let ask = |request: &Request| match &memory {
        Some(memory) => handle(memory.store(), memory.control(), request),
        None => through_owner(&data.join(".memfs"), request),
    };
    if let Cmd::Log { .. } = &cli.command {
        // (A cache of a store over HTTP: what is not sent yet, first.)
        for line in memfs::remote::status::said(data) {
            memfs::say!("memfs: {line}");
        }
    }
    let reply = ask(&request);
    if let (Cmd::Export { git: Some(git), .. }, 0) = (&cli.command, reply.code) {
        return export(git, &reply.out);
    }
    let max_count = match &cli.command {
        Cmd::Log { max_count, .. } => *max_count,
        _ => None,
    };
    let code = print_pages(reply, request, max_count, &ask);
    if let Some(memory) = memory {
        if !memory.write_out() {
            memfs::say!("memfs: some changes could not be written to disk");
            return ExitCode::FAILURE;
        }
    }
    code
}

/// Prints a reply and, for a paged log, each next page as it comes, asking
/// for it until the last (an owner from before pages answers all in one);
/// with `log -n N` (one line a version), the first N lines of the pages.
fn print_pages(
    mut reply: Reply,
    mut request: Request,
    mut left: Option<usize>,
    ask: &dyn Fn(&Request) -> Reply,
) -> ExitCode {
    loop {
        if let Some(n) = &mut left {
            let kept = keep_lines(&mut reply.out, *n);
            *n -= kept;
            if *n == 0 {
                reply.next = None;
            }
        }
        let Some(next) = reply.next.take() else {
            break;
        };
        let Request::Log { page, .. } = &mut request else {
            break;
        };
        match write_reply(&reply) {
            // The reader has gone (`memfs log | head`): no more pages.
            None => return ExitCode::SUCCESS,
            Some(code) if code != ExitCode::SUCCESS => return ExitCode::FAILURE,
            Some(_) => {}
        }
        *page = Some(next);
        reply = ask(&request);
    }
    print(&reply)
}

/// Cuts `out` after its first `n` lines; says how many it kept.
fn keep_lines(out: &mut Vec<u8>, n: usize) -> usize {
    let mut kept = 0;
    let mut end = 0;
    for (i, b) in out.iter().enumerate() {
        if kept == n {
            break;
        }
        if *b == b'\n' {
            kept += 1;
            end = i + 1;
        }
    }
    if kept == n {
        out.truncate(end);
    }
    kept
}

fn print(reply: &Reply) -> ExitCode {
    match write_reply(reply) {
        Some(code) => code,
        None => ExitCode::SUCCESS,
    }
}

/// Prints a reply; `None` when its reader has gone (a closed pipe: no
/// error, and nothing more to print).
fn write_reply(reply: &Reply) -> Option<ExitCode> {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(&reply.out).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return None;
        }
        memfs::say!("memfs: cannot write the output: {e}");
        return Some(ExitCode::FAILURE);
    }
    if !reply.err.is_empty() {
        memfs::say!("memfs: {}", reply.err);
    }
    Some(ExitCode::from(reply.code))
}

/// The export's directory made, private like the memory (0700
/// directories, 0600 files): the export holds every past version, deleted
/// ones too. git and what it runs inherit the mask; this process has
/// nothing else open by now.
fn make_private(dir: &Path) -> Result<(), ExitCode> {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    if let Err(e) =
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(dir)
    {
        memfs::say!("memfs: cannot make {}: {e}", dir.display());
        return Err(ExitCode::from(2));
    }
    // An empty directory given for it becomes private too.
    if let Err(e) =
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
    {
        memfs::say!("memfs: cannot make {} private: {e}", dir.display());
        return Err(ExitCode::from(2));
    }
    Ok(())
}

/// `git fast-import` in `dir`, fed `stream`.
fn fast_import(dir: &Path, stream: &[u8]) -> Result<(), ExitCode> {
    let imported = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let fed = child.stdin.take().expect("piped").write_all(stream);
            let status = child.wait()?;
            fed.map(|()| status)
        });
    match imported {
        Ok(s) if s.success() => Ok(()),
        Ok(_) => {
            memfs::say!("memfs: `git fast-import` refused the history");
            Err(ExitCode::FAILURE)
        }
        Err(e) => {
            memfs::say!("memfs: cannot run git fast-import: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// Feeds the stream to `git fast-import` in a new repository at `dir`,
/// step by step (a private directory, `git init`, `fast-import`, `reset`),
/// each step working before the next.
fn export(dir: &Path, stream: &[u8]) -> ExitCode {
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(dir).args(args).status();
    if let Err(code) = make_private(dir) {
        return code;
    }
    match git(&["init", "-q", "-b", "main"]) {
        Ok(s) if s.success() => {}
        Ok(_) => {
            memfs::say!("memfs: `git init` failed in {}", dir.display());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            memfs::say!("memfs: cannot run git (is it installed?): {e}");
            return ExitCode::from(2);
        }
    }
    if stream.is_empty() {
        crate::out!(
            "the history is empty: {} is an empty repository",
            dir.display()
        );
        return ExitCode::SUCCESS;
    }
    if let Err(code) = fast_import(dir, stream) {
        return code;
    }
    match git(&["reset", "-q", "--hard"]) {
        Ok(s) if s.success() => {
            crate::out!("exported the history to {}", dir.display());
            ExitCode::SUCCESS
        }
        _ => {
            memfs::say!(
                "memfs: the history is in {}, but checking it out failed",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}
