//! Tar (plain or gzip) and zip archives as an import's source, read as
//! streams: each entry through its size bound, all the inflated bytes
//! together through a budget (a decompression bomb stops the read there,
//! keeping what came before, and says so).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::Path;
use std::rc::Rc;

use super::{Checker, Kind, ReadError, Rules};

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
    /// Every byte read through it.
    read: Rc<Cell<u64>>,
}

impl<R> Budget<R> {
    fn new(inner: R, left: &Rc<Cell<u64>>) -> Budget<R> {
        Budget {
            inner,
            left: left.clone(),
            headers: Rc::new(Cell::new(None)),
            read: Rc::new(Cell::new(0)),
        }
    }
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)? as u64;
        self.read.set(self.read.get() + n);
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

/// An io error met reading the archive at `path`.
fn cannot(path: &Path) -> impl Fn(io::Error) -> ReadError + Copy + '_ {
    move |source| ReadError::Cannot {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads the archive at `path` (`-`: a tar or .tar.gz on stdin; a tar
/// may come through a pipe, a zip must be a file).
pub fn read(path: &Path, rules: &Rules, checker: &mut Checker) -> Result<(), ReadError> {
    let (cannot, path_buf) = (cannot(path), || path.to_path_buf());
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
                return Err(ReadError::ZipOnStdin);
            }
            let mut file = File::open(path).map_err(cannot)?;
            file.rewind().map_err(cannot)?;
            zip(file, rules, &left, checker)
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
            .map_err(ReadError::Out),
        Err(e) if says(&e, BOMB) || left.get() == 0 => checker
            .skip(
                "(the rest of the archive)",
                format!(
                    "the archive inflates to more than {} bytes (a decompression bomb?): the rest is left out",
                    budget(rules)
                ),
            )
            .map_err(ReadError::Out),
        Err(e) if e.to_string().starts_with(ZIP_TOO_MANY) => Err(ReadError::TooMany {
            path: path_buf(),
            source: e,
        }),
        Err(e) => Err(ReadError::NotAnArchive {
            path: path_buf(),
            source: e,
        }),
    }
}

fn tar<R: Read>(reader: Budget<R>, checker: &mut Checker) -> io::Result<()> {
    let headers = reader.headers.clone();
    let left = reader.left.clone();
    let read = reader.read.clone();
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive.entries()?;
    // The last entry's data as the reader skips it (its size, padded to a
    // block: for a sparse entry, the bytes the archive holds), and the
    // bytes read when it began.
    let (mut data, mut began) = (0u64, 0u64);
    loop {
        // (Finding the next entry reads the rest of the last one's data,
        // then its own headers: the bound on headers is on top of what of
        // that data was not read.)
        let unread = data.saturating_sub(read.get() - began);
        headers.set(Some(HEADERS_MOST.saturating_add(unread)));
        let next = entries.next();
        headers.set(None);
        let Some(entry) = next else {
            return Ok(());
        };
        let mut entry = entry?;
        let held = match entry.header().entry_type().is_gnu_sparse() {
            true => entry.header().entry_size().unwrap_or(0),
            false => entry.size(),
        };
        data = held.saturating_add(511) / 512 * 512;
        began = read.get();
        match String::from_utf8(entry.path_bytes().into_owned()) {
            Ok(name) => {
                let kind = tar_kind(entry.header().entry_type());
                // (A sparse entry's size is the file's, holes included:
                // one over the file limit is refused before a byte is read.)
                let size = entry.size();
                let sparse = entry.header().entry_type().is_gnu_sparse();
                let mut counted = Holes {
                    inner: &mut entry,
                    left: left.clone(),
                    sparse,
                };
                checker.entry(sdk_layout(&name), kind, size, &mut counted)?;
            }
            Err(e) => {
                let shown = String::from_utf8_lossy(e.as_bytes()).into_owned();
                checker.skip(&shown, "a name that is not UTF-8")?;
            }
        }
        // (What the entry holds past what was read is passed over by the
        // next step: the archive's own bytes, through the budget. A sparse
        // entry's holes are never read through.)
    }
}

/// An entry's bytes, each counted against the archive's budget when the
/// entry is sparse (its holes are bytes the archive does not hold, so the
/// archive's own reader never counts them).
struct Holes<'e, R> {
    inner: &'e mut R,
    left: Rc<Cell<u64>>,
    sparse: bool,
}

impl<R: Read> Read for Holes<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.sparse {
            let left = self.left.get();
            if n as u64 > left {
                self.left.set(0);
                return Err(io::Error::other(BOMB));
            }
            self.left.set(left - n as u64);
        }
        Ok(n)
    }
}

fn tar_kind(kind: tar::EntryType) -> Kind {
    use tar::EntryType as T;
    match kind {
        T::Regular | T::Continuous | T::GNUSparse => Kind::File,
        T::Directory => Kind::Dir,
        T::Symlink => Kind::Symlink,
        T::Link => Kind::HardLink,
        T::Char | T::Block => Kind::Device,
        T::Fifo => Kind::Fifo,
        _ => Kind::Other,
    }
}

/// Where a zip's central directory is and how many entries it lists,
/// from its end record (or, for a zip64 archive, the zip64 end record the
/// locator before it points to); none when memfs cannot find them (the
/// zip reader then says what it can).
fn zip_directory(file: &mut File) -> io::Result<Option<(u64, u64, u64)>> {
    let len = file.seek(io::SeekFrom::End(0))?;
    let tail_len = len.min(22 + 65535 + 20);
    file.seek(io::SeekFrom::Start(len - tail_len))?;
    let mut tail = vec![0u8; tail_len as usize];
    file.read_exact(&mut tail)?;
    let Some(at) = tail.windows(4).rposition(|w| w == [0x50, 0x4b, 5, 6]) else {
        return Ok(None);
    };
    let end = &tail[at..];
    if end.len() < 22 {
        return Ok(None);
    }
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u64;
    let u32_at =
        |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as u64;
    let (count, size, offset) = (u16_at(end, 10), u32_at(end, 12), u32_at(end, 16));
    if count != 0xffff && size != 0xffff_ffff && offset != 0xffff_ffff {
        return Ok(Some((count, size, offset)));
    }
    // Zip64: the locator is the 20 bytes before the end record.
    let Some(locator) = at.checked_sub(20).map(|l| &tail[l..at]) else {
        return Ok(None);
    };
    if locator[..4] != [0x50, 0x4b, 6, 7] {
        return Ok(None);
    }
    let u64_at = |b: &[u8], i: usize| {
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(n)
    };
    let record = u64_at(locator, 8);
    if record > len.saturating_sub(56) {
        return Ok(None);
    }
    let mut z = [0u8; 56];
    file.seek(io::SeekFrom::Start(record))?;
    file.read_exact(&mut z)?;
    if z[..4] != [0x50, 0x4b, 6, 6] {
        return Ok(None);
    }
    Ok(Some((u64_at(&z, 32), u64_at(&z, 40), u64_at(&z, 48))))
}

/// The names a central directory of `count` entries, `size` bytes at
/// `offset`, lists, in order (none when it is not where its end record
/// says).
fn zip_names(
    file: &mut File,
    count: u64,
    size: u64,
    offset: u64,
) -> io::Result<Option<Vec<Vec<u8>>>> {
    let len = file.seek(io::SeekFrom::End(0))?;
    if size > len || offset > len - size {
        return Ok(None);
    }
    file.seek(io::SeekFrom::Start(offset))?;
    let mut dir = vec![0u8; size as usize];
    file.read_exact(&mut dir)?;
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
    let mut names = Vec::with_capacity(count.min(1 << 16) as usize);
    let mut at = 0;
    while (names.len() as u64) < count
        && at + 46 <= dir.len()
        && dir[at..at + 4] == [0x50, 0x4b, 1, 2]
    {
        let (name, extra, comment) = (
            u16_at(&dir, at + 28),
            u16_at(&dir, at + 30),
            u16_at(&dir, at + 32),
        );
        let Some(bytes) = dir.get(at + 46..at + 46 + name) else {
            return Ok(None);
        };
        names.push(bytes.to_vec());
        at += 46 + name + extra + comment;
    }
    Ok(Some(names))
}

/// The largest central directory memfs reads (a name is at most 64 KiB;
/// an entry of a usual name takes about a hundred bytes).
const ZIP_DIRECTORY_MOST: u64 = 64 << 20;

/// How the refusal of a zip memfs does not read begins.
const ZIP_TOO_MANY: &str = "the zip lists";

/// The most entries a zip may list: its central directory is held whole
/// by the zip reader (about a kilobyte an entry), so a zip of more entries
/// than the memory takes is refused before it is read.
fn zip_most(rules: &Rules) -> usize {
    rules.max_entries.saturating_add(1000)
}

/// Says, in the list of what was left out, each name a zip lists twice or
/// more (its last entry is the one read), and refuses a zip of more entries
/// than [`zip_most`].
fn zip_checked(file: &mut File, rules: &Rules, checker: &mut Checker) -> io::Result<()> {
    // (A zip whose directory memfs cannot find and count is not read at
    // all: the zip reader looks further, and would hold what it finds.)
    let unchecked = || {
        io::Error::other(format!(
            "{ZIP_TOO_MANY} a central directory memfs cannot find or count (a zip after other bytes, or damaged): it is not read"
        ))
    };
    let Some((count, size, offset)) = zip_directory(file)? else {
        return Err(unchecked());
    };
    if size > ZIP_DIRECTORY_MOST {
        return Err(io::Error::other(format!(
            "{ZIP_TOO_MANY} a central directory of {size} bytes, more than memfs reads ({ZIP_DIRECTORY_MOST})"
        )));
    }
    if count > zip_most(rules) as u64 {
        return Err(io::Error::other(format!(
            "{ZIP_TOO_MANY} {count} entries, more than memfs reads ({}: --max-entries, and 1000)",
            zip_most(rules)
        )));
    }
    let Some(names) = zip_names(file, count, size, offset)? else {
        return Err(unchecked());
    };
    if (names.len() as u64) < count {
        return Err(unchecked());
    }
    let mut seen = std::collections::HashSet::new();
    for name in &names {
        if !seen.insert(name.as_slice()) {
            checker.skip(
                &String::from_utf8_lossy(name),
                "the zip holds more than one entry of this name: the last one is imported, the others are left out",
            )?;
        }
    }
    Ok(())
}

fn zip(
    mut file: File,
    rules: &Rules,
    left: &Rc<Cell<u64>>,
    checker: &mut Checker,
) -> io::Result<()> {
    zip_checked(&mut file, rules, checker)?;
    file.rewind()?;
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
