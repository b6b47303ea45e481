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

/// What the headers of one tar entry may take (its name and link as GNU
/// long-name members, its PAX records): the tar reader keeps them whole
/// in memory.
const HEADERS_MOST: u64 = 1 << 20;

/// The error a reader gives when one entry's headers are over [`HEADERS_MOST`].
const HEADERS: &str = "memfs: an entry's headers are too big";

/// A reader that fails once it has given `budget` bytes (shared by every
/// entry of one archive), or, while `headers` is set, that many more.
struct Budget<R> {
    inner: R,
    left: Rc<Cell<u64>>,
    headers: Rc<Cell<Option<u64>>>,
}

impl<R> Budget<R> {
    fn new(inner: R, left: &Rc<Cell<u64>>) -> Budget<R> {
        Budget {
            inner,
            left: left.clone(),
            headers: Rc::new(Cell::new(None)),
        }
    }
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)? as u64;
        let left = self.left.get();
        if n > left {
            self.left.set(0);
            return Err(io::Error::other(BOMB));
        }
        self.left.set(left - n);
        if let Some(headers) = self.headers.get() {
            if n > headers {
                return Err(io::Error::other(HEADERS));
            }
            self.headers.set(Some(headers - n));
        }
        Ok(n as usize)
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

fn says(e: &io::Error, what: &str) -> bool {
    e.get_ref().is_some_and(|inner| inner.to_string() == what)
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
            zip(file, &left, checker)
        }
        [0x1f, 0x8b, ..] => tar(
            Budget::new(flate2::read::MultiGzDecoder::new(whole), &left),
            checker,
        ),
        _ => tar(Budget::new(whole, &left), checker),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(e) if says(&e, HEADERS) => checker
            .skip(
                "(the rest of the archive)",
                format!(
                    "an entry's name or extended headers are over {HEADERS_MOST} bytes: the rest is left out"
                ),
            )
            .map_err(|e| e.to_string()),
        Err(e) if says(&e, BOMB) || left.get() == 0 => checker
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

fn tar<R: Read>(reader: Budget<R>, checker: &mut Checker) -> io::Result<()> {
    let headers = reader.headers.clone();
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive.entries()?;
    loop {
        // (Finding the next entry reads only headers: the last one's data
        // is read through below.)
        headers.set(Some(HEADERS_MOST));
        let next = entries.next();
        headers.set(None);
        let Some(entry) = next else {
            return Ok(());
        };
        let mut entry = entry?;
        match String::from_utf8(entry.path_bytes().into_owned()) {
            Ok(name) => {
                let kind = tar_kind(entry.header().entry_type());
                let size = entry.header().size().unwrap_or(u64::MAX);
                checker.entry(sdk_layout(&name), kind, size, &mut entry)?;
            }
            Err(e) => {
                let shown = String::from_utf8_lossy(e.as_bytes()).into_owned();
                checker.skip(&shown, "a name that is not UTF-8")?;
            }
        }
        io::copy(&mut entry, &mut io::sink())?;
    }
}

fn tar_kind(kind: tar::EntryType) -> Kind {
    use tar::EntryType as T;
    match kind {
        T::Regular | T::Continuous => Kind::File,
        T::Directory => Kind::Dir,
        T::Symlink => Kind::Symlink,
        T::Link => Kind::HardLink,
        T::Char | T::Block => Kind::Device,
        T::Fifo => Kind::Fifo,
        _ => Kind::Other,
    }
}

fn zip(file: File, left: &Rc<Cell<u64>>, checker: &mut Checker) -> io::Result<()> {
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
        let mut bounded = Budget::new(entry, left);
        checker.entry(sdk_layout(&name), kind, size, &mut bounded)?;
    }
    Ok(())
}
