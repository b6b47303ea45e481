//! A directory tree as an import's source: the SDK's layout (`SRC/memories`),
//! Claude Code's auto memory, an Obsidian vault, any folder of notes. Walked
//! without following a symlink (each file opened with `O_NOFOLLOW`).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::{relative, Checker, Kind};

/// Reads the tree at `root` (its `memories/` when it has one: the SDK's
/// layout, as `memfs export --dir` writes it).
pub fn read(root: &Path, checker: &mut Checker) -> io::Result<()> {
    let sdk = root.join("memories");
    let top = match std::fs::symlink_metadata(&sdk) {
        Ok(m) if m.is_dir() => sdk,
        _ => root.to_path_buf(),
    };
    walk(&top, "", checker)
}

fn kind_of(ft: std::fs::FileType) -> Kind {
    if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_fifo() {
        Kind::Fifo
    } else if ft.is_socket() {
        Kind::Socket
    } else if ft.is_char_device() || ft.is_block_device() {
        Kind::Device
    } else {
        Kind::Other
    }
}

fn walk(dir: &Path, prefix: &str, checker: &mut Checker) -> io::Result<()> {
    let mut entries = std::fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let os_name = e.file_name();
        let Some(name) = os_name.to_str() else {
            let shown = format!("{prefix}{}", os_name.to_string_lossy());
            checker.skip(&shown, "a name that is not UTF-8")?;
            continue;
        };
        let rel = format!("{prefix}{name}");
        let meta = match std::fs::symlink_metadata(e.path()) {
            Ok(meta) => meta,
            Err(err) => {
                checker.skip(&rel, format!("cannot be read ({err})"))?;
                continue;
            }
        };
        match kind_of(meta.file_type()) {
            Kind::Dir => match relative(&rel) {
                Err(why) => checker.skip(&rel, why)?,
                Ok(_) => match walk(&e.path(), &format!("{rel}/"), checker) {
                    Err(err) if err.get_ref().is_none() => {
                        checker.skip(&rel, format!("cannot be read ({err})"))?
                    }
                    other => other?,
                },
            },
            Kind::File => {
                // (A file swapped for a symlink or a FIFO since the listing
                // is not followed, and not waited on.)
                let opened = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(e.path())
                    .and_then(|f| match f.metadata()?.is_file() {
                        true => Ok(f),
                        false => Err(std::io::Error::other("no longer a file")),
                    });
                match opened {
                    Ok(mut f) => checker.entry(&rel, Kind::File, meta.len(), &mut f)?,
                    Err(err) => checker.skip(&rel, format!("cannot be read ({err})"))?,
                }
            }
            kind => checker.entry(&rel, kind, 0, &mut io::empty())?,
        }
    }
    Ok(())
}
