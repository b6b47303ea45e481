//! What `memfs import` reads: the files of a directory tree, a tar archive
//! (plain or gzip) or a zip archive, each entry checked before any of its
//! bytes are kept. Archives are read as streams and never unpacked to disk:
//! nothing of an entry reaches a path, here or in the memory, unless its
//! name is one the tool can address below `/memories`. What is left out is
//! reported with its reason: `..` or absolute names, links, devices,
//! FIFOs, sockets, names the tool cannot address, duplicates, files over
//! the size limit, content that is not text (images aside), what looks
//! like a credential (under `--secrets refuse`), and a decompression bomb
//! (each entry read through a bound, the whole archive's inflated bytes
//! capped).

pub mod api;
pub mod archive;
pub mod dir;

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::guard::{secrets, SecretsPolicy};
use crate::path::MemPath;

/// The bounds an import works within (the memory's limits).
#[derive(Debug, Clone)]
pub struct Rules {
    pub max_file_size: u64,
    /// All files together.
    pub max_total: u64,
    pub max_entries: usize,
    pub secrets: SecretsPolicy,
}

/// One entry of a source, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A file to import: its path below `/memories` (`notes/a.md`).
    File { path: String, data: Vec<u8> },
    /// Left out: the entry's name as the source has it, and why.
    Skip { name: String, reason: String },
}

/// What an entry is, as its source says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    HardLink,
    Device,
    Fifo,
    Socket,
    Other,
}

/// Names of other tools' state, left out of an import (with memfs' own
/// list of repositories' directories).
const OTHER_TOOLS: [&str; 3] = [".obsidian", ".trash", ".DS_Store"];

/// Extensions of the images the tool shows (kept though not text).
const IMAGES: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

/// Checks entries one by one and hands each on, with the running totals.
pub struct Checker<'a> {
    rules: Rules,
    seen: HashSet<String>,
    total: u64,
    out: &'a mut dyn FnMut(Item) -> io::Result<()>,
}

/// Why a source's name is no path below `/memories` (the import leaves it
/// out, saying this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unaddressable {
    #[error("an absolute path")]
    Absolute,
    #[error("a path that leaves the source (`..`)")]
    LeavesSource,
    #[error("a name the tool cannot address ({0})")]
    Name(crate::path::PathError),
    #[error("another tool's state (a repository's or an editor's)")]
    ToolState,
}

/// Why a source could not be read (the import stops, saying this).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}: {source}", .path.display())]
    Cannot { path: PathBuf, source: io::Error },
    #[error("reading {}: {source}", .path.display())]
    Dir { path: PathBuf, source: io::Error },
    #[error("a zip archive is read from a file, not from stdin")]
    ZipOnStdin,
    /// What the entries were handed to refused them (the import's sending).
    #[error("{0}")]
    Out(#[source] io::Error),
    #[error("{}: {source}", .path.display())]
    TooMany { path: PathBuf, source: io::Error },
    #[error("{} is not a directory, a tar (or .tar.gz) or a zip archive memfs can read ({source})", .path.display())]
    NotAnArchive { path: PathBuf, source: io::Error },
}

/// A source's name as a path below `/memories`, or why it is none.
pub fn relative(name: &str) -> Result<Option<String>, Unaddressable> {
    if name.starts_with('/') {
        return Err(Unaddressable::Absolute);
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(Unaddressable::LeavesSource),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let rel = parts.join("/");
    if let Err(e) = MemPath::parse(&format!("/memories/{rel}")) {
        return Err(Unaddressable::Name(e));
    }
    if crate::path::is_tool_state(&rel) || parts.iter().any(|p| OTHER_TOOLS.contains(p)) {
        return Err(Unaddressable::ToolState);
    }
    Ok(Some(rel))
}

/// The longest name a list of what was left out shows whole.
const SHOWN_MOST: usize = 240;

/// A source's name as the list shows it: printable, and a long one cut
/// (`…` and its length).
fn shown(name: &str) -> String {
    let printable = crate::text::printable(name);
    if printable.len() <= SHOWN_MOST {
        return printable.into_owned();
    }
    let mut cut = SHOWN_MOST;
    while !printable.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &printable[..cut], name.len())
}

fn is_image(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| IMAGES.contains(&ext.to_ascii_lowercase().as_str()))
}

impl<'a> Checker<'a> {
    pub fn new(rules: Rules, out: &'a mut dyn FnMut(Item) -> io::Result<()>) -> Checker<'a> {
        Checker {
            rules,
            seen: HashSet::new(),
            total: 0,
            out,
        }
    }

    pub fn skip(&mut self, name: &str, reason: impl Into<String>) -> io::Result<()> {
        (self.out)(Item::Skip {
            name: shown(name),
            reason: reason.into(),
        })
    }

    /// One entry: its name in the source, its kind, the size its source
    /// declares, and its bytes (read only if every check before passes,
    /// and then through a bound).
    pub fn entry(
        &mut self,
        name: &str,
        kind: Kind,
        declared: u64,
        data: &mut dyn Read,
    ) -> io::Result<()> {
        let why = match kind {
            Kind::File | Kind::Dir => None,
            Kind::Symlink => Some("a symlink"),
            Kind::HardLink => Some("a hard link"),
            Kind::Device => Some("a device"),
            Kind::Fifo => Some("a FIFO"),
            Kind::Socket => Some("a socket"),
            Kind::Other => Some("an entry that is not a file"),
        };
        if let Some(why) = why {
            return self.skip(name, why);
        }
        let rel = match relative(name) {
            Ok(Some(rel)) => rel,
            Ok(None) => return Ok(()),
            Err(why) => return self.skip(name, why.to_string()),
        };
        if kind == Kind::Dir {
            return Ok(());
        }
        let max = self.rules.max_file_size;
        if declared > max {
            return self.skip(name, too_big(declared, max));
        }
        let mut bytes = Vec::with_capacity(declared.min(max) as usize);
        data.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return self.skip(name, format!("too big (over {max} bytes, --max-file-size)"));
        }
        self.file(name, rel, bytes)
    }

    fn file(&mut self, name: &str, rel: String, mut bytes: Vec<u8>) -> io::Result<()> {
        if self.seen.contains(&rel) {
            return self.skip(
                name,
                "a second entry of the same path (the first is imported)",
            );
        }
        if !is_image(&rel) {
            let Some(text) = std::str::from_utf8(&bytes)
                .ok()
                .filter(|t| !t.contains('\0'))
            else {
                return self.skip(name, "not text (binary content; images aside)");
            };
            let found = match self.rules.secrets {
                SecretsPolicy::Allow => Vec::new(),
                _ => secrets::scan(text),
            };
            if let Some(first) = found.first() {
                match self.rules.secrets {
                    SecretsPolicy::Refuse => {
                        let reason = format!(
                            "looks like a credential ({}, line {}; --secrets allow or redact imports it)",
                            first.kind, first.line
                        );
                        return self.skip(name, reason);
                    }
                    SecretsPolicy::Redact => bytes = secrets::redact(text, &found).into_bytes(),
                    SecretsPolicy::Allow => {}
                }
            }
        }
        if self.seen.len() >= self.rules.max_entries {
            return self.skip(name, "more files than the memory takes (--max-entries)");
        }
        if self.total + bytes.len() as u64 > self.rules.max_total {
            return self.skip(name, "over the memory's size limit (--max-store-size)");
        }
        self.total += bytes.len() as u64;
        self.seen.insert(rel.clone());
        (self.out)(Item::File {
            path: rel,
            data: bytes,
        })
    }
}

fn too_big(size: u64, max: u64) -> String {
    format!("too big ({size} bytes; --max-file-size is {max})")
}

/// Reads `source`, a directory or an archive (told apart by its first
/// bytes), handing each checked entry to `out`.
pub fn read(
    source: &Path,
    rules: Rules,
    out: &mut dyn FnMut(Item) -> io::Result<()>,
) -> Result<(), ReadError> {
    let mut checker = Checker::new(rules.clone(), out);
    if source == Path::new("-") {
        return archive::read(source, &rules, &mut checker);
    }
    let path = || source.to_path_buf();
    let meta = std::fs::metadata(source).map_err(|e| ReadError::Cannot {
        path: path(),
        source: e,
    })?;
    if meta.is_dir() {
        return dir::read(source, &mut checker).map_err(|e| ReadError::Dir {
            path: path(),
            source: e,
        });
    }
    archive::read(source, &rules, &mut checker)
}
