//! A small file replaced whole: the registry's records and the token file.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `bytes` as the file at `path`, whole or not at all, on disk when it
/// returns (written beside it, synced, renamed over it, the dir synced).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}
