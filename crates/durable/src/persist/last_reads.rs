//! `DIR/.memfs/used`: when each file was last read, kept across restarts
//! for expiry. One JSON object per line, `{"path": ..., "time": ...}`;
//! replaced whole (a new file renamed over it). A crash loses at most the
//! reads since it was last saved, which only makes a file look older.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::time::SystemTime;

use rustix::fs::{self as rfs, Mode, OFlags};

use crate::path::MemPath;

const FILE: &str = "used";
const NEW: &str = "used.new";

pub fn save(state: &OwnedFd, entries: &[(MemPath, SystemTime)]) -> io::Result<()> {
    let mut text = String::new();
    for (path, at) in entries {
        let line = serde_json::json!({
            "path": path.to_string(),
            "time": humantime::format_rfc3339_millis(*at).to_string(),
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = std::fs::File::from(rfs::openat(state, NEW, flags, Mode::from_raw_mode(0o600))?);
    file.write_all(text.as_bytes())?;
    rfs::renameat(state, NEW, state, FILE)?;
    Ok(())
}

pub fn load(state: &OwnedFd) -> Vec<(MemPath, SystemTime)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rfs::openat(state, FILE, flags, Mode::empty()) else {
        return Vec::new();
    };
    let mut text = String::new();
    if std::fs::File::from(fd).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let path = MemPath::parse(v["path"].as_str()?).ok()?;
            let at = humantime::parse_rfc3339_weak(v["time"].as_str()?).ok()?;
            Some((path, at))
        })
        .collect()
}
