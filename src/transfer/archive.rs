//! Tar (plain or gzip) and zip archives as an import's source, read as
//! streams: each entry through its size bound, all the inflated bytes
//! together through a budget (a decompression bomb stops the read there,
//! keeping what came before, and says so).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::Path;
use std::rc::Rc;

use super::{Checker, Kind, Rules};

/// What one entry may inflate to per byte it takes in the archive, past a
/// mebibyte (zip, which says both sizes).
const MOST_RATIO: u64 = 100;

/// The error a reader over its budget gives (told apart from damage).
const BOMB: &str = "memfs: inflation budget spent";

/// A reader that fails once it has given `budget` bytes (shared by every
/// entry of one archive).
struct Budget<R> {
    inner: R,
    left: Rc<Cell<u64>>,
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let left = self.left.get();
        if n as u64 > left {
            self.left.set(0);
            return Err(io::Error::other(BOMB));
        }
        self.left.set(left - n as u64);
        Ok(n)
    }
}

/// An archive in the SDK's layout (as `memfs export --tar` writes it):
/// `memories/notes/a.md` is `notes/a.md`.
fn sdk_layout(name: &str) -> &str {
    let name = name.trim_start_matches("./");
    match name.strip_prefix("memories") {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => name,
    }
}

fn is_bomb(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.to_string() == BOMB)
}

/// What the whole archive may inflate to: four times the memory's size
/// limit and 64 MiB (skipped entries are read through too).
fn budget(rules: &Rules) -> u64 {
    rules.max_total.saturating_mul(4).saturating_add(64 << 20)
}

/// Reads the archive at `path` (`-`: a tar or .tar.gz on stdin; a tar
/// may come through a pipe, a zip must be a file).
pub fn read(path: &Path, rules: &Rules, checker: &mut Checker) -> Result<(), String> {
    let shown = path.display();
    let cannot = |e: io::Error| format!("cannot read {shown}: {e}");
    let mut file: Box<dyn Read> = match path == Path::new("-") {
        true => Box::new(io::stdin().lock()),
        false => Box::new(File::open(path).map_err(cannot)?),
    };
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]).map_err(cannot)? {
            0 => break,
            n => got += n,
        }
    }
    let left = Rc::new(Cell::new(budget(rules)));
    let whole = io::Cursor::new(magic[..got].to_vec()).chain(file);
    let outcome = match &magic[..got] {
        [b'P', b'K', 3, 4] | [b'P', b'K', 5, 6] => {
            if path == Path::new("-") {
                return Err("a zip archive is read from a file, not from stdin".into());
            }
            let mut file = File::open(path).map_err(cannot)?;
            file.rewind().map_err(cannot)?;
            zip(file, left.clone(), checker)
        }
        [0x1f, 0x8b, ..] => {
            let inflated = Budget {
                inner: flate2::read::MultiGzDecoder::new(whole),
                left: left.clone(),
            };
            tar(inflated, checker)
        }
        _ => tar(
            Budget {
                inner: whole,
                left: left.clone(),
            },
            checker,
        ),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(e) if is_bomb(&e) || left.get() == 0 => checker
            .skip(
                "(the rest of the archive)",
                format!(
                    "the archive inflates to more than {} bytes (a decompression bomb?): the rest is left out",
                    budget(rules)
                ),
            )
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!(
            "{shown} is not a directory, a tar (or .tar.gz) or a zip archive memfs can read ({e})"
        )),
    }
}

fn tar(reader: impl Read, checker: &mut Checker) -> io::Result<()> {
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let Ok(name) = String::from_utf8(entry.path_bytes().into_owned()) else {
            let shown = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            checker.skip(&shown, "a name that is not UTF-8")?;
            continue;
        };
        use tar::EntryType as T;
        let kind = match entry.header().entry_type() {
            T::Regular | T::Continuous => Kind::File,
            T::Directory => Kind::Dir,
            T::Symlink => Kind::Symlink,
            T::Link => Kind::HardLink,
            T::Char | T::Block => Kind::Device,
            T::Fifo => Kind::Fifo,
            _ => Kind::Other,
        };
        let size = entry.header().size().unwrap_or(u64::MAX);
        checker.entry(sdk_layout(&name), kind, size, &mut entry)?;
    }
    Ok(())
}

fn zip(file: File, left: Rc<Cell<u64>>, checker: &mut Checker) -> io::Result<()> {
    let mut archive = zip::ZipArchive::new(file).map_err(io::Error::other)?;
    for i in 0..archive.len() {
        let name = archive.name_for_index(i).unwrap_or("?").to_string();
        let entry = match archive.by_index(i) {
            Ok(entry) => entry,
            Err(e) => {
                checker.skip(&name, format!("cannot be read ({e})"))?;
                continue;
            }
        };
        let kind = if entry.is_dir() {
            Kind::Dir
        } else if entry.is_symlink() {
            Kind::Symlink
        } else {
            match entry.unix_mode().map(|m| m & libc::S_IFMT) {
                Some(libc::S_IFCHR | libc::S_IFBLK) => Kind::Device,
                Some(libc::S_IFIFO) => Kind::Fifo,
                Some(libc::S_IFSOCK) => Kind::Socket,
                _ => Kind::File,
            }
        };
        let (size, packed) = (entry.size(), entry.compressed_size().max(1));
        if kind == Kind::File && size > 1 << 20 && size / packed > MOST_RATIO {
            checker.skip(
                &name,
                format!(
                    "{size} bytes packed into {packed}: a compression ratio over {MOST_RATIO}:1 (a decompression bomb?)"
                ),
            )?;
            continue;
        }
        let mut bounded = Budget {
            inner: entry,
            left: left.clone(),
        };
        checker.entry(sdk_layout(&name), kind, size, &mut bounded)?;
    }
    Ok(())
}
