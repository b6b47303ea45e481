//! A directory tree as an import's source: the SDK's layout (`SRC/memories`),
//! Claude Code's auto memory, an Obsidian vault, any folder of notes.
//! Walked through directory descriptors, each name looked up in the one
//! opened before it and never through a symlink (`O_NOFOLLOW`): a
//! directory or file swapped for a symlink while the walk runs is refused,
//! not followed out of the source.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

use super::{relative, Checker, Kind};

/// The SDK's layout: the memories are what this directory holds.
const SDK_DIR: &str = "memories";

/// Reads the tree at `root` (its `memories/` when it has one: the SDK's
/// layout, as `memfs export --dir` writes it; what lies beside that is
/// listed as left out).
pub fn read(root: &Path, checker: &mut Checker) -> io::Result<()> {
    // (The root itself is the person's choice: a symlink to it is followed.)
    let top = rfs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let sdk = rfs::statat(&top, SDK_DIR, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
    if !sdk {
        return walk(&top, "", checker);
    }
    for name in names(&top)? {
        if name.as_bytes() != SDK_DIR.as_bytes() {
            checker.skip(
                &name.to_string_lossy(),
                "beside memories/ (a source in the SDK's layout gives what memories/ holds)",
            )?;
        }
    }
    let memories = open_dir(&top, OsStr::new(SDK_DIR))?;
    walk(&memories, "", checker)
}

fn kind_of(ft: FileType) -> Kind {
    match ft {
        FileType::Symlink => Kind::Symlink,
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Fifo => Kind::Fifo,
        FileType::Socket => Kind::Socket,
        FileType::CharacterDevice | FileType::BlockDevice => Kind::Device,
        _ => Kind::Other,
    }
}

/// Every name in `dir` (without `.` and `..`), sorted.
fn names(dir: &OwnedFd) -> io::Result<Vec<std::ffi::OsString>> {
    let mut out = Vec::new();
    for entry in rfs::Dir::read_from(dir)? {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." {
            out.push(OsStr::from_bytes(bytes).to_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// Directory `name` in `dir`, never through a symlink.
fn open_dir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::openat(dir, name, flags, Mode::empty())?)
}

/// File `name` in `dir`, never through a symlink and never waiting on a
/// FIFO; refused if it is no longer a file.
fn open_file(dir: &OwnedFd, name: &OsStr) -> io::Result<std::fs::File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rfs::openat(dir, name, flags, Mode::empty())?;
    if FileType::from_raw_mode(rfs::fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(io::Error::other("no longer a file"));
    }
    Ok(std::fs::File::from(fd))
}

fn walk(dir: &OwnedFd, prefix: &str, checker: &mut Checker) -> io::Result<()> {
    for os_name in names(dir)? {
        let Some(name) = os_name.to_str() else {
            let shown = format!("{prefix}{}", os_name.to_string_lossy());
            checker.skip(&shown, "a name that is not UTF-8")?;
            continue;
        };
        let rel = format!("{prefix}{name}");
        let st = match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(err) => {
                checker.skip(&rel, format!("cannot be read ({})", io::Error::from(err)))?;
                continue;
            }
        };
        match kind_of(FileType::from_raw_mode(st.st_mode)) {
            Kind::Dir => {
                if let Err(why) = relative(&rel) {
                    checker.skip(&rel, why.to_string())?;
                    continue;
                }
                let walked =
                    open_dir(dir, &os_name).and_then(|sub| walk(&sub, &format!("{rel}/"), checker));
                match walked {
                    // (The checker's own errors end the import; a directory
                    // that cannot be read is left out.)
                    Err(err) if err.get_ref().is_none() => {
                        checker.skip(&rel, format!("cannot be read ({err})"))?
                    }
                    other => other?,
                }
            }
            Kind::File => match open_file(dir, &os_name) {
                Ok(mut f) => checker.entry(&rel, Kind::File, st.st_size as u64, &mut f)?,
                Err(err) => checker.skip(&rel, format!("cannot be read ({err})"))?,
            },
            kind => checker.entry(&rel, kind, 0, &mut io::empty())?,
        }
    }
    Ok(())
}
