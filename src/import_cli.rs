//! `memfs import SOURCE`: a directory tree, a tar (or .tar.gz) or zip
//! archive into the memory, alone or through the memfs that owns the data
//! dir; progress on stderr after a second, then what was imported and what
//! was left out, with why.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use memfs::control::import::{key, Commit, ImportFile, Outcome};
use memfs::control::request::{handle, Reply, Request};
use memfs::persist::OpenError;
use memfs::serve::attach::through_owner;
use memfs::transfer::{self, Checker, Item, Kind, Rules};
use memfs::Memory;

use crate::cli::Cli;

/// What `memfs import` was asked.
pub struct Asked<'a> {
    pub source: &'a Path,
    pub to: &'a str,
    pub overwrite: bool,
    pub dry_run: bool,
    pub quiet: bool,
    pub json: bool,
    /// SOURCE is a git repository whose history is imported.
    pub git: bool,
}

/// The totals, and what was left out.
#[derive(Default)]
struct Tally {
    read: u64,
    bytes: u64,
    outcomes: Vec<Outcome>,
    skipped: Vec<(String, String)>,
    failed: bool,
}

impl Tally {
    fn count(&self, what: &str) -> usize {
        self.outcomes.iter().filter(|o| o.outcome == what).count()
    }
}

/// Progress on stderr: nothing for the first second, then a line at most
/// twice a second (rewritten in place on a terminal); none under `-q`.
struct Progress {
    quiet: bool,
    began: Instant,
    last: Option<Instant>,
    terminal: bool,
}

impl Progress {
    fn show(&mut self, t: &Tally, done: bool) {
        let now = Instant::now();
        if self.quiet || now - self.began < Duration::from_secs(1) {
            return;
        }
        if !done
            && self
                .last
                .is_some_and(|l| now - l < Duration::from_millis(500))
        {
            return;
        }
        self.last = Some(now);
        let line = format!(
            "memfs: import: {} files read ({}), {} done, {} left out",
            t.read,
            memfs::units::human_bytes(t.bytes),
            t.outcomes.len(),
            t.skipped.len()
        );
        match (self.terminal, done) {
            (true, false) => eprint!("\r{line}"),
            (true, true) => eprintln!("\r{line}"),
            (false, _) => eprintln!("{line}"),
        }
    }
}

/// The most of a chunk's file bytes (the owner's socket takes lines up to
/// six times the file size limit, and base64 makes four of three).
fn chunk_bytes(max_file_size: u64) -> u64 {
    (max_file_size * 3).max(1 << 20)
}

/// The bounds of the memory the import goes into, as this command line
/// gives them.
fn rules(cli: &Cli) -> Rules {
    let options = cli.common.options();
    Rules {
        max_file_size: options.limits.max_file_size,
        max_total: options.limits.max_store_size,
        max_entries: options.limits.max_entries,
        secrets: options.tool.secrets,
    }
}

/// The memory, opened here (`None`: another memfs owns it, and answers).
fn open(cli: &Cli) -> Result<Option<Memory>, ExitCode> {
    // (Opened here for the import only: the search index takes the files
    // in at its next look, in whatever process searches next.)
    let options = memfs::memory::Options {
        no_search: true,
        ..cli.common.options()
    };
    match Memory::open(&cli.common.data, options) {
        Ok(memory) => Ok(Some(memory)),
        Err(OpenError::Busy { .. }) => Ok(None),
        Err(e) => {
            memfs::say!("memfs: {e}");
            Err(ExitCode::from(2))
        }
    }
}

pub fn run(cli: &Cli, asked: &Asked) -> ExitCode {
    let data = &cli.common.data;
    let memory = match open(cli) {
        Ok(memory) => memory,
        Err(code) => return code,
    };
    let send = |request: &Request| match &memory {
        Some(memory) => handle(memory.store(), memory.control(), request),
        None => through_owner(&data.join(".memfs"), request),
    };
    let rules = rules(cli);
    let mut tally = Tally::default();
    let mut progress = Progress {
        quiet: asked.quiet,
        began: Instant::now(),
        last: None,
        terminal: std::io::stderr().is_terminal(),
    };
    let done = match asked.git {
        true => git_history(&send, asked, &rules, &mut tally, &mut progress),
        false => files(&send, asked, rules, &mut tally, &mut progress),
    };
    progress.show(&tally, true);
    if let Err(e) = done {
        memfs::say!("memfs: import: {e}");
        finish(memory);
        return ExitCode::from(2);
    }
    report(&tally, asked);
    match finish(memory) && !tally.failed {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(2),
    }
}

/// A tree's or an archive's files, in chunks.
fn files(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: Rules,
    tally: &mut Tally,
    progress: &mut Progress,
) -> Result<(), String> {
    let mut chunk: Vec<ImportFile> = Vec::new();
    let mut chunk_size = 0u64;
    let most = chunk_bytes(rules.max_file_size);
    let mut error = None;
    let read = transfer::read(asked.source, rules, &mut |item| {
        match item {
            Item::File { path, data } => {
                tally.read += 1;
                tally.bytes += data.len() as u64;
                chunk_size += data.len() as u64;
                chunk.push(ImportFile::new(path, &data));
                if chunk_size >= most || chunk.len() >= 512 {
                    if let Err(e) = flush(send, asked, &mut chunk, tally, None) {
                        error = Some(e.clone());
                        return Err(std::io::Error::other(e));
                    }
                    chunk_size = 0;
                }
            }
            Item::Skip { name, reason } => tally.skipped.push((name, reason)),
        }
        progress.show(tally, false);
        Ok(())
    });
    let read = read.and_then(|()| flush(send, asked, &mut chunk, tally, None));
    error.map_or(read, Err)
}

/// Sends what is gathered as one request and counts what became of it.
fn flush(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    chunk: &mut Vec<ImportFile>,
    tally: &mut Tally,
    commit: Option<&Commit>,
) -> Result<(), String> {
    if chunk.is_empty() {
        return Ok(());
    }
    let request = Request::Import {
        files: std::mem::take(chunk),
        to: asked.to.to_string(),
        overwrite: asked.overwrite,
        dry_run: asked.dry_run,
        // SAFETY: getuid(2) cannot fail and touches no memory.
        uid: unsafe { libc::getuid() },
        pid: std::process::id(),
        commit: commit.cloned(),
    };
    let reply = send(&request);
    let outcomes: Vec<Outcome> = match serde_json::from_slice(&reply.out) {
        Ok(o) => o,
        Err(_) => return Err(reply.err),
    };
    tally.failed |= reply.code != 0;
    tally.outcomes.extend(outcomes);
    Ok(())
}

/// Brings everything to disk when this process opened the memory.
fn finish(memory: Option<Memory>) -> bool {
    match memory {
        Some(memory) => {
            let ok = memory.write_out();
            if !ok {
                memfs::say!("memfs: some changes could not be written to disk");
            }
            ok
        }
        None => true,
    }
}

fn report(tally: &Tally, asked: &Asked) {
    let left_out: Vec<(String, String)> = tally
        .skipped
        .iter()
        .cloned()
        .chain(
            tally
                .outcomes
                .iter()
                .filter(|o| o.outcome == "skipped" || o.outcome == "failed")
                .map(|o| (o.path.clone(), o.reason.clone().unwrap_or_default())),
        )
        .collect();
    if asked.json {
        let v = serde_json::json!({
            "dry_run": asked.dry_run,
            "read": tally.read,
            "bytes": tally.bytes,
            "created": tally.count("created"),
            "updated": tally.count("updated"),
            "deleted": tally.count("deleted"),
            "unchanged": tally.count("unchanged"),
            "failed": tally.count("failed"),
            "left_out": left_out.iter().map(|(n, r)| serde_json::json!({"name": n, "reason": r})).collect::<Vec<_>>(),
        });
        crate::out!("{v}");
        return;
    }
    let would = if asked.dry_run {
        " (a dry run: nothing written)"
    } else {
        ""
    };
    crate::out!(
        "{} files read ({}): {} created, {} updated, {} deleted, {} unchanged, {} left out{would}",
        tally.read,
        memfs::units::human_bytes(tally.bytes),
        tally.count("created"),
        tally.count("updated"),
        tally.count("deleted"),
        tally.count("unchanged"),
        left_out.len()
    );
    for (name, reason) in &left_out {
        crate::out!("  left out {}: {reason}", memfs::text::printable(name));
    }
}

/// One commit's change to one file as an import file (none: left out, and
/// counted so), checked as any entry of an archive is.
fn commit_file(
    blobs: &mut crate::import_git::Blobs,
    rules: &Rules,
    commit: &crate::import_git::GitCommit,
    change: &crate::import_git::Change,
    tally: &mut Tally,
) -> Result<Option<ImportFile>, String> {
    let name = format!("{}:{}", &commit.id[..12.min(commit.id.len())], change.path);
    if change.status == 'D' {
        return Ok(match transfer::relative(&change.path) {
            Ok(Some(rel)) => Some(ImportFile::deleted(rel)),
            _ => None,
        });
    }
    let why = match change.mode.as_str() {
        "120000" => Some("a symlink"),
        "160000" => Some("a submodule"),
        _ => None,
    };
    if let Some(why) = why {
        tally.skipped.push((name, why.into()));
        return Ok(None);
    }
    let (size, data) = blobs.get(&change.blob, rules.max_file_size)?;
    let mut items = Vec::new();
    let mut keep = |item| {
        items.push(item);
        Ok(())
    };
    Checker::new(rules.clone(), &mut keep)
        .entry(&change.path, Kind::File, size, &mut data.as_slice())
        .map_err(|e| e.to_string())?;
    Ok(match items.pop() {
        Some(Item::File { path, data }) => {
            tally.read += 1;
            tally.bytes += data.len() as u64;
            Some(ImportFile::new(path, &data))
        }
        Some(Item::Skip { reason, .. }) => {
            tally.skipped.push((name, reason));
            None
        }
        None => None,
    })
}

/// `--git`: the repository's history, a commit at a time, each file a
/// version by the commit's author at its time. What an earlier run brought
/// in is passed over: every commit up to the newest one any of whose
/// versions the history holds, and that one's files that are in.
fn git_history(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: &Rules,
    tally: &mut Tally,
    progress: &mut Progress,
) -> Result<(), String> {
    let commits = crate::import_git::commits(asked.source, "HEAD")?;
    let reply = send(&Request::ImportKeys {
        prefix: "git:".into(),
    });
    if reply.code != 0 {
        return Err(reply.err);
    }
    let done: std::collections::HashSet<String> = String::from_utf8_lossy(&reply.out)
        .lines()
        .map(str::to_string)
        .collect();
    let is_in = |c: &crate::import_git::GitCommit, path: &str| done.contains(&key(&c.id, path));
    let last_in = commits
        .iter()
        .rposition(|c| c.changes.iter().any(|ch| is_in(c, &ch.path)));
    let mut blobs = crate::import_git::Blobs::open(asked.source)?;
    for (i, c) in commits.iter().enumerate() {
        if last_in.is_some_and(|last| i < last) {
            continue;
        }
        let mut files = Vec::new();
        for change in &c.changes {
            if last_in == Some(i) && is_in(c, &change.path) {
                continue;
            }
            if let Some(f) = commit_file(&mut blobs, rules, c, change, tally)? {
                files.push(f);
            }
        }
        let commit = Commit {
            id: c.id.clone(),
            author: c.author.clone(),
            authored: c.authored.clone(),
        };
        flush(send, asked, &mut files, tally, Some(&commit))?;
        progress.show(tally, false);
    }
    Ok(())
}
