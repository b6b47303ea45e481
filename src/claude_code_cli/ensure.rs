//! `memfs claude-code ensure`: what the `SessionStart` hook runs each time
//! Claude Code starts. When this project is enabled and its mount is up it
//! prints nothing and returns at once; when the mount is gone (a reboot, a
//! logout) or dead (killed), it mounts the memory again as `enable` does.
//!
//! Claude Code reads MEMORY.md before its `SessionStart` hooks have run
//! (tried with 2.1.332: a MEMORY.md the hook writes is not in the first
//! prompt), and a hook's standard output is put into the session's
//! context: so a repaired mount's MEMORY.md is printed, with a line saying
//! why, and the session starts with its memory all the same.

use crate::cli_error::CliError;
use std::fs::File;
use std::path::Path;

use super::{enable, enabled, enabled_elsewhere, mount_of, Mount, Place};

/// The most of MEMORY.md Claude Code puts in its context: 200 lines, at
/// most 25 KB.
const LINES_MOST: usize = 200;
const BYTES_MOST: usize = 25 * 1024;

/// Holds the data dir's `claude-code.lock` until dropped, so that two
/// Claude Codes starting at once (or an `enable` beside a hook) do not
/// mount twice.
pub struct Held(#[allow(dead_code)] File);

pub fn hold(data: &Path) -> Result<Held, CliError> {
    use rustix::fs::{flock, FlockOperation};
    std::fs::create_dir_all(data).map_err(CliError::io("make", data))?;
    let path = data.join("claude-code.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(CliError::io("open", &path))?;
    flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| CliError::io("lock", &path)(e.into()))?;
    Ok(Held(file))
}

/// What the hook prints (nothing when all is well), or why it could not
/// mount the memory.
pub fn ensure(place: Place) -> Result<String, CliError> {
    // (Not enabled, or enabled for another Claude Code config dir: that
    // one's hook mounts it.)
    if !enabled(&place) || enabled_elsewhere(&place) {
        return Ok(String::new());
    }
    if super::unmounted::chosen(&place) {
        if super::unmounted::running(&place) && super::unmounted::linked(&place) {
            return Ok(String::new());
        }
        let _held = hold(&place.data)?;
        return super::unmounted::ensure(&place);
    }
    let was = match mount_of(&place) {
        Mount::Live => return Ok(String::new()),
        Mount::Dead => "its memfs had stopped (killed, or it crashed)",
        Mount::None => "it was not mounted (after a reboot or a logout)",
    };
    let _held = hold(&place.data)?;
    // (A `disable` that held the lock meanwhile: nothing to do.)
    if !enabled(&place) {
        return Ok(String::new());
    }
    // (Another Claude Code's hook mounted it meanwhile: this session
    // started without its MEMORY.md all the same.)
    if mount_of(&place) != Mount::Live {
        enable(&place)?;
    }
    let md = place.memory_dir.join("MEMORY.md");
    let text = std::fs::read(&md).unwrap_or_default();
    Ok(format!(
        "memfs mounted this project's auto memory again at {}: {was}. This session started before that, without MEMORY.md in its context; here it is:\n\n{}",
        place.memory_dir.display(),
        head(&text)
    ))
}

/// The head of MEMORY.md as Claude Code would load it.
fn head(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(&text[..text.len().min(BYTES_MOST)]);
    let lines: Vec<&str> = text.lines().take(LINES_MOST).collect();
    match lines.is_empty() {
        true => "(MEMORY.md is empty or not there)\n".to_string(),
        false => format!("{}\n", lines.join("\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_claude_codes_share_of_memory_md() {
        let many: String = (0..300).map(|i| format!("line {i}\n")).collect();
        let h = head(many.as_bytes());
        assert_eq!(h.lines().count(), 200);
        assert!(h.ends_with("line 199\n"));
        assert!(head(b"").contains("empty"));
        let big = "x".repeat(40 * 1024);
        assert_eq!(head(big.as_bytes()).len(), BYTES_MOST + 1);
    }
}
