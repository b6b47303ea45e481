//! `memfs import SOURCE`: a directory tree, a tar (or .tar.gz) or zip
//! archive into the memory, alone or through the memfs that owns the data
//! dir; progress on stderr after a second, then what was imported and what
//! was left out, with why.

use crate::cli_error::CliError;
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
    /// SOURCE is an API's URL: its store to read.
    pub store: Option<&'a str>,
    /// The environment variable with the API's key.
    pub key_env: &'a str,
}

/// SOURCE as a memory stores API (`http://` or `https://`), looked up
/// before anything is written: `None` when SOURCE is no URL.
fn api_source(asked: &Asked) -> Option<Result<transfer::api::Api, CliError>> {
    let url = asked.source.to_str().filter(|s| s.contains("://"))?;
    Some((|| {
        let store = asked.store.ok_or_else(|| {
            CliError::Said(
                "an import from an API needs --store ID (the memory store to read)".into(),
            )
        })?;
        let key = transfer::api::key_from(asked.key_env)?;
        let api = transfer::api::Api::new(url, key, store)?;
        api.check()?;
        Ok(api)
    })())
}

/// The most entries the list of what was left out holds: past it they
/// are counted, not listed (a source of millions of links, or a page
/// naming one path 50,000 times, is said in a bounded list).
pub const MOST_LISTED: usize = 1000;

/// The totals, and what was left out.
#[derive(Default)]
struct Tally {
    read: u64,
    bytes: u64,
    outcomes: Vec<Outcome>,
    /// The first [`MOST_LISTED`] entries left out, with why.
    skipped: Vec<(String, String)>,
    /// Those left out past the list.
    unlisted: u64,
    failed: bool,
    /// What this git import (this run or an earlier one) last left at each
    /// path (`/memories/...`): the sha256 of its content. While a file
    /// still holds that, a later commit may change or delete it.
    ours: std::collections::HashMap<String, String>,
    /// The sha256 of each file sent in the chunk under way, by path.
    sent: std::collections::HashMap<String, String>,
}

impl Tally {
    fn count(&self, what: &str) -> usize {
        self.outcomes.iter().filter(|o| o.outcome == what).count()
    }

    /// One entry left out: listed, or counted past the list's bound.
    fn skip(&mut self, name: String, reason: String) {
        match self.skipped.len() < MOST_LISTED {
            true => self.skipped.push((name, reason)),
            false => self.unlisted += 1,
        }
    }

    fn left_out(&self) -> u64 {
        self.skipped.len() as u64 + self.unlisted
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
            t.left_out()
        );
        match (self.terminal, done) {
            (true, false) => eprint!("\r{line}"),
            (true, true) => eprintln!("\r{line}"),
            (false, _) => eprintln!("{line}"),
        }
    }
}

/// The most of a chunk's bytes in base64 (the owner's socket takes lines
/// up to six times the file size limit).
fn chunk_bytes(max_file_size: u64) -> u64 {
    // (Three eighths of a line: a file past the mark still joins the chunk
    // it fills, and the line carries names and quotes too.)
    (memfs::serve::max_line_bytes(max_file_size) as u64).saturating_mul(3) / 8
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
    let api = match api_source(asked) {
        None => None,
        Some(Ok(api)) => Some(api),
        Some(Err(e)) => {
            memfs::say!("memfs: import: {e}");
            return ExitCode::from(2);
        }
    };
    // A source that is not there is said before the memory is opened (and
    // a data dir made).
    if api.is_none() && asked.source != Path::new("-") {
        if let Err(e) = std::fs::metadata(asked.source) {
            memfs::say!("memfs: import: cannot read {}: {e}", asked.source.display());
            return ExitCode::from(2);
        }
    }
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
    let done = match (&api, asked.git) {
        (Some(api), _) => from_api(api, &send, asked, rules, &mut tally, &mut progress),
        (None, true) => git_history(&send, asked, &rules, &mut tally, &mut progress),
        (None, false) => files(&send, asked, rules, &mut tally, &mut progress),
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

/// The most files one chunk carries.
const CHUNK_FILES: usize = 512;

/// Files gathered into chunks the owner's line takes, each sent when full
/// (as versions of the person, or of a git commit's author).
struct Gather {
    chunk: Vec<ImportFile>,
    /// The chunk's bytes as its line carries them (base64).
    size: u64,
    most: u64,
    commit: Option<Commit>,
}

impl Gather {
    fn new(rules: &Rules, commit: Option<Commit>) -> Gather {
        Gather {
            chunk: Vec::new(),
            size: 0,
            most: chunk_bytes(rules.max_file_size),
            commit,
        }
    }

    /// One file joins the chunk, which is sent once full.
    fn add(
        &mut self,
        file: ImportFile,
        send: &dyn Fn(&Request) -> Reply,
        asked: &Asked,
        tally: &mut Tally,
    ) -> Result<(), CliError> {
        self.size += file.data.len() as u64;
        self.chunk.push(file);
        if self.size >= self.most || self.chunk.len() >= CHUNK_FILES {
            self.send(send, asked, tally)?;
        }
        Ok(())
    }

    /// One checked entry: a file is added, a left-out entry counted.
    fn take(
        &mut self,
        item: Item,
        send: &dyn Fn(&Request) -> Reply,
        asked: &Asked,
        tally: &mut Tally,
    ) -> Result<(), CliError> {
        match item {
            Item::File { path, data } => {
                tally.read += 1;
                tally.bytes += data.len() as u64;
                self.add(ImportFile::new(path, &data), send, asked, tally)
            }
            Item::Skip { name, reason } => {
                tally.skip(name, reason);
                Ok(())
            }
        }
    }

    fn send(
        &mut self,
        send: &dyn Fn(&Request) -> Reply,
        asked: &Asked,
        tally: &mut Tally,
    ) -> Result<(), CliError> {
        self.size = 0;
        flush(send, asked, &mut self.chunk, tally, self.commit.as_ref())
    }
}

/// The checked entries `source` reads, gathered into chunks and sent.
fn gathered(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: Rules,
    tally: &mut Tally,
    progress: &mut Progress,
    source: impl FnOnce(Rules, &mut dyn FnMut(Item) -> std::io::Result<()>) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut gather = Gather::new(&rules, None);
    // (The sending's own error, not the reader's account of it.)
    let mut error = None;
    let read = source(rules, &mut |item| {
        let taken = gather.take(item, send, asked, tally);
        progress.show(tally, false);
        taken.map_err(|e| {
            let said = std::io::Error::other(e.to_string());
            error = Some(e);
            said
        })
    });
    let read = read.and_then(|()| gather.send(send, asked, tally));
    error.map_or(read, Err)
}

/// A memory store's memories, each checked as an archive's entry is.
fn from_api(
    api: &transfer::api::Api,
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: Rules,
    tally: &mut Tally,
    progress: &mut Progress,
) -> Result<(), CliError> {
    let began = Instant::now();
    let mut shown = began;
    // (Pages that bring nothing to import are said too, so that a slow or
    // endless source is never silent.)
    let mut page = |n: u64| {
        let now = Instant::now();
        if !asked.quiet
            && now - began >= Duration::from_secs(1)
            && now - shown >= Duration::from_secs(1)
        {
            shown = now;
            memfs::say!("memfs: import: {n} pages of the store read");
        }
    };
    gathered(send, asked, rules, tally, progress, |rules, out| {
        let most = rules.max_entries;
        let mut checker = Checker::new(rules, out);
        api.memories(
            most,
            &mut |path, content| {
                let name = path.trim_start_matches('/');
                let mut bytes = content.as_bytes();
                checker
                    .entry(name, Kind::File, content.len() as u64, &mut bytes)
                    .map_err(|e| transfer::api::RemoteError::Stopped(e.to_string()))
            },
            &mut page,
        )
        .map_err(CliError::from)
    })
}

/// A tree's or an archive's files, in chunks.
fn files(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: Rules,
    tally: &mut Tally,
    progress: &mut Progress,
) -> Result<(), CliError> {
    gathered(send, asked, rules, tally, progress, |rules, out| {
        Ok(transfer::read(asked.source, rules, out)?)
    })
}

/// Sends what is gathered as one request and counts what became of it.
fn flush(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    chunk: &mut Vec<ImportFile>,
    tally: &mut Tally,
    commit: Option<&Commit>,
) -> Result<(), CliError> {
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
        Err(_) => return Err(CliError::Owner(reply.err)),
    };
    tally.failed |= reply.code != 0;
    if commit.is_some() {
        let sent = std::mem::take(&mut tally.sent);
        for o in &outcomes {
            match (o.outcome.as_str(), sent.get(&o.path)) {
                ("created" | "updated", Some(sha)) => {
                    tally.ours.insert(o.path.clone(), sha.clone());
                }
                ("deleted", _) => {
                    tally.ours.remove(&o.path);
                }
                _ => {}
            }
        }
    }
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
            "left_out_unlisted": tally.unlisted,
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
        left_out.len() as u64 + tally.unlisted
    );
    for (name, reason) in &left_out {
        crate::out!(
            "  left out {}: {}",
            memfs::text::printable(name),
            memfs::text::printable(reason)
        );
    }
    if tally.unlisted > 0 {
        crate::out!(
            "  and {} more left out (the first {MOST_LISTED} are listed)",
            tally.unlisted
        );
    }
}

/// `file`, with what this import last left at its path (see
/// [`ImportFile::ours`]), and its own content's sha256 noted as sent.
fn ours(
    mut file: ImportFile,
    to: &memfs::path::MemPath,
    tally: &mut Tally,
    data: Option<&[u8]>,
) -> ImportFile {
    let at = format!("{to}/{}", file.path);
    file.ours = tally.ours.get(&at).cloned();
    if let Some(data) = data {
        tally.sent.insert(at, memfs::digest::Sha::of(data).hex());
    }
    file
}

/// One commit's change to one file as an import file (none: left out, and
/// counted so), checked as any entry of an archive is.
fn commit_file(
    blobs: &mut crate::import_git::Blobs,
    rules: &Rules,
    to: &memfs::path::MemPath,
    commit: &crate::import_git::GitCommit,
    change: &crate::import_git::Change,
    tally: &mut Tally,
) -> Result<Option<ImportFile>, CliError> {
    let short = commit.id.get(..12).unwrap_or(&commit.id);
    let path = match &change.path {
        Ok(path) => path,
        Err(bad) => {
            let lossy = String::from_utf8_lossy(bad.as_bytes());
            tally.skip(
                format!("{short}:{lossy}"),
                "a name that is not UTF-8".into(),
            );
            return Ok(None);
        }
    };
    let name = format!("{short}:{path}");
    if change.status == 'D' {
        return Ok(match transfer::relative(path) {
            Ok(Some(rel)) => Some(ours(ImportFile::deleted(rel), to, tally, None)),
            _ => None,
        });
    }
    let why = match change.mode.as_str() {
        "120000" => Some("a symlink"),
        "160000" => Some("a submodule"),
        _ => None,
    };
    if let Some(why) = why {
        tally.skip(name, why.into());
        return Ok(None);
    }
    let (size, data) = blobs.get(&change.blob, rules.max_file_size)?;
    let mut items = Vec::new();
    let mut keep = |item| {
        items.push(item);
        Ok(())
    };
    Checker::new(rules.clone(), &mut keep)
        .entry(path, Kind::File, size, &mut data.as_slice())
        .map_err(|e| CliError::Said(e.to_string()))?;
    Ok(match items.pop() {
        Some(Item::File { path, data }) => {
            tally.read += 1;
            tally.bytes += data.len() as u64;
            Some(ours(ImportFile::new(path, &data), to, tally, Some(&data)))
        }
        Some(Item::Skip { reason, .. }) => {
            tally.skip(name, reason);
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
) -> Result<(), CliError> {
    let commits = crate::import_git::commits(asked.source, "HEAD")?;
    let reply = send(&Request::ImportKeys {
        prefix: "git:".into(),
    });
    if reply.code != 0 {
        return Err(CliError::Owner(reply.err));
    }
    // Each key (`git:COMMIT:PATH`) with the sha256 of what it left.
    let rows: Vec<(String, String)> = String::from_utf8_lossy(&reply.out)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, sha)| (k.to_string(), sha.to_string()))
        .collect();
    let done: std::collections::HashSet<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
    let to = memfs::path::MemPath::parse(asked.to)
        .map_err(|e| CliError::Said(format!("--to {}: {e}", memfs::text::clip(asked.to))))?;
    // A change is in when the history holds its key, made of the commit
    // and the path where the file landed (below --to).
    let is_in = |c: &crate::import_git::GitCommit, change: &crate::import_git::Change| {
        let Ok(Ok(Some(rel))) = change.path.as_deref().map(transfer::relative) else {
            return false;
        };
        done.contains(key(&c.id, &format!("{to}/{rel}")).as_str())
    };
    let last_in = commits
        .iter()
        .rposition(|c| c.changes.iter().any(|ch| is_in(c, ch)));
    tally.ours = left_by(&commits, &rows);
    let mut blobs = crate::import_git::Blobs::open(asked.source)?;
    for (i, c) in commits.iter().enumerate() {
        if last_in.is_some_and(|last| i < last) {
            continue;
        }
        let skip = |change: &crate::import_git::Change| last_in == Some(i) && is_in(c, change);
        one_commit(send, asked, rules, &to, c, &skip, &mut blobs, tally)?;
        progress.show(tally, false);
    }
    Ok(())
}

/// What an earlier run of this history (`commits`) last left at each path,
/// from the history's import keys and shas (`rows`, oldest first): its
/// later commits may change or delete those files while they hold it (and
/// no others, unless --overwrite).
fn left_by(
    commits: &[crate::import_git::GitCommit],
    rows: &[(String, String)],
) -> std::collections::HashMap<String, String> {
    let ids: std::collections::HashSet<&str> = commits.iter().map(|c| c.id.as_str()).collect();
    let mut left = std::collections::HashMap::new();
    for (k, sha) in rows {
        let Some((id, path)) = k.strip_prefix("git:").and_then(|r| r.split_once(':')) else {
            continue;
        };
        if !ids.contains(id) {
            continue;
        }
        match sha.as_str() {
            "-" => left.remove(path),
            _ => left.insert(path.to_string(), sha.clone()),
        };
    }
    left
}

/// One commit's changes (those `skip` does not pass over) sent as versions
/// by its author, deletions first (a file may take a directory's place),
/// in chunks the owner's line takes.
#[allow(clippy::too_many_arguments)]
fn one_commit(
    send: &dyn Fn(&Request) -> Reply,
    asked: &Asked,
    rules: &Rules,
    to: &memfs::path::MemPath,
    c: &crate::import_git::GitCommit,
    skip: &dyn Fn(&crate::import_git::Change) -> bool,
    blobs: &mut crate::import_git::Blobs,
    tally: &mut Tally,
) -> Result<(), CliError> {
    let commit = Commit {
        id: c.id.clone(),
        author: c.author.clone(),
        authored: c.authored.clone(),
    };
    let mut gather = Gather::new(rules, Some(commit));
    let mut changes: Vec<&crate::import_git::Change> = c.changes.iter().collect();
    changes.sort_by_key(|ch| ch.status != 'D');
    for change in changes {
        if skip(change) {
            continue;
        }
        if let Some(f) = commit_file(blobs, rules, to, c, change, tally)? {
            gather.add(f, send, asked, tally)?;
        }
    }
    gather.send(send, asked, tally)
}
