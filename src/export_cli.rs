//! `memfs export --dir OUT` and `--tar FILE`: the memory's files as they
//! are now, in the SDK's layout (`OUT/memories/...`; the archive's names
//! begin `memories/`), which `memfs import` takes back as it is. The plain
//! files are brought up to date first (by the owner when one runs), then
//! read without following a symlink; other tools' state (`.git` and the
//! like) is left out, as from every listing.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use memfs::control::request::Request;
use memfs::persist::OpenError;

use crate::cli_error::CliError;
use memfs::serve::attach::through_owner;
use memfs::Memory;

use crate::cli::Cli;

/// A file of the memory: its path below `/memories` and where it is on disk.
struct Found {
    rel: String,
    on_disk: PathBuf,
    mtime: u64,
}

pub fn run(cli: &Cli, dir: Option<&Path>, tar: Option<&Path>) -> ExitCode {
    if let Some(out) = dir {
        if let Err(e) = check_empty(out, "into a new directory") {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    }
    let files = match files_now(cli) {
        Ok(files) => files,
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let written = match (dir, tar) {
        (Some(out), _) => to_dir(out, &files),
        (None, Some(file)) => to_tar(file, &files),
        (None, None) => Err(io::Error::other("no target")),
    };
    let (written, bytes) = match written {
        Ok(done) => done,
        Err(e) => {
            memfs::say!("memfs: export: {e}");
            return ExitCode::from(2);
        }
    };
    memfs::say!(
        "memfs: exported {written} files ({})",
        memfs::units::human_bytes(bytes)
    );
    ExitCode::SUCCESS
}

/// The plain files made current: by the owner, or by opening the memory
/// here (which replays the journal) and closing it.
fn bring_up_to_date(cli: &Cli) -> Result<(), CliError> {
    let options = memfs::memory::Options {
        no_search: true,
        ..cli.common.options()
    };
    match Memory::open(&cli.common.data, options) {
        Ok(memory) => match memory.write_out() {
            true => Ok(()),
            false => Err(CliError::Said(
                "some changes could not be written to disk".into(),
            )),
        },
        Err(OpenError::Busy { .. }) => {
            let reply = through_owner(&cli.common.data.join(".memfs"), &Request::Checkpoint);
            match reply.code {
                0 => Ok(()),
                _ => Err(CliError::Owner(reply.err)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// `dir` is missing or empty: an export `writes` (`into a new directory`)
/// there.
pub fn check_empty(dir: &Path, writes: &str) -> Result<(), CliError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(CliError::Said(format!(
            "{} is not empty; export writes {writes}",
            dir.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::io("use", dir)(e)),
    }
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<Found>) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let rel = format!("{prefix}{name}");
        if memfs::path::is_tool_state(&rel) {
            continue;
        }
        let meta = std::fs::symlink_metadata(e.path())?;
        if meta.is_dir() {
            collect(&e.path(), &format!("{rel}/"), out)?;
        } else if meta.is_file() {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            out.push(Found {
                rel,
                on_disk: e.path(),
                mtime,
            });
        }
    }
    Ok(())
}

fn read(f: &Found) -> io::Result<Vec<u8>> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&f.on_disk)?;
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut file, &mut bytes)?;
    Ok(bytes)
}

fn to_dir(out: &Path, files: &[Found]) -> io::Result<(usize, u64)> {
    let root = out.join("memories");
    std::fs::create_dir_all(&root)?;
    let mut bytes = 0;
    for f in files {
        let to = root.join(&f.rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let data = read(f)?;
        bytes += data.len() as u64;
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&to)?
            .write_all(&data)?;
    }
    Ok((files.len(), bytes))
}

/// A tar archive, the same bytes for the same files: names in order,
/// owner 0, mode 0644, each file's time.
fn to_tar(file: &Path, files: &[Found]) -> io::Result<(usize, u64)> {
    let sink: Box<dyn Write> = if file == Path::new("-") {
        Box::new(io::stdout().lock())
    } else {
        Box::new(File::create(file)?)
    };
    let mut builder = tar::Builder::new(io::BufWriter::new(sink));
    let mut bytes = 0;
    for f in files {
        let data = read(f)?;
        bytes += data.len() as u64;
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(f.mtime);
        builder.append_data(&mut header, format!("memories/{}", f.rel), data.as_slice())?;
    }
    builder.into_inner()?.flush()?;
    Ok((files.len(), bytes))
}

/// The store an export writes into: reachable, the key taken, and empty.
fn target(
    url: &str,
    store: Option<&str>,
    key_env: &str,
) -> Result<memfs::transfer::api::Api, CliError> {
    let store = store.ok_or_else(|| {
        CliError::Said("--to needs --store ID (the memory store to write into)".into())
    })?;
    let key = memfs::transfer::api::key_from(key_env)?;
    let api = memfs::transfer::api::Api::new(url, key, store)?;
    api.check()?;
    match api.is_empty()? {
        true => Ok(api),
        false => Err(CliError::Said(format!(
            "store {store} holds memories already; export writes into a new or an empty store"
        ))),
    }
}

/// The memory's files now (the plain files brought up to date first),
/// in path order.
fn files_now(cli: &Cli) -> Result<Vec<Found>, CliError> {
    let data = &cli.common.data;
    if !data.join("memories").is_dir() {
        return Err(CliError::Said(format!(
            "no memory at {} (no memories/ there)",
            data.display()
        )));
    }
    bring_up_to_date(cli)?;
    let mut files = Vec::new();
    collect(&data.join("memories"), "", &mut files)
        .map_err(|e| CliError::Said(format!("cannot read the memory's files: {e}")))?;
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}

/// `memfs export --to URL --store ID`: the files as memories of an empty
/// store of a memory stores API (each path `/notes/a.md`; a file that is
/// not text is left out and said, as the API holds text).
pub fn to_api(cli: &Cli, url: &str, store: Option<&str>, key_env: &str) -> ExitCode {
    let files = target(url, store, key_env).and_then(|api| Ok((api, files_now(cli)?)));
    let (api, files) = match files {
        Ok(got) => got,
        Err(e) => {
            memfs::say!("memfs: export: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut written, mut bytes) = (0, 0);
    for f in &files {
        let text = match read(f).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                memfs::say!(
                    "memfs: export: left out {}: not text (the API holds text)",
                    f.rel
                );
                continue;
            }
            Err(e) => {
                memfs::say!("memfs: export: {}: {e}", f.rel);
                return ExitCode::from(2);
            }
        };
        if let Err(e) = api.create(&format!("/{}", f.rel), &text) {
            memfs::say!(
                "memfs: export: {}: {e} ({written} written before it)",
                f.rel
            );
            return ExitCode::from(2);
        }
        written += 1;
        bytes += text.len() as u64;
    }
    memfs::say!(
        "memfs: exported {written} files ({}) to {}",
        memfs::units::human_bytes(bytes),
        memfs::transfer::api::redacted(url)
    );
    ExitCode::SUCCESS
}
