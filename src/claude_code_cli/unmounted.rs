//! `memfs claude-code enable --no-mount`: Claude Code's auto memory on
//! memfs without FUSE (a container without `/dev/fuse`, a host where
//! mounting is not allowed). Claude Code keeps this project's auto memory
//! in the data dir's plain files (`DATA/memories`): its
//! `autoMemoryDirectory`, in the project's own local settings
//! (`.claude/settings.local.json`, never checked in; a link would not do:
//! Claude Code refuses to write through a link that leads out of its
//! directories). A `memfs serve` runs on the data dir in the background:
//! its watcher takes in what Claude Code writes there as versions of the
//! files door (`agent:files(claude)` where the kernel names the writer:
//! fanotify, as root; else `person:files`), with the history, review and undo of every other change
//! (docs/SEMANTICS.md, "The plain files").
//!
//! The `SessionStart` hook starts the `serve` again after a reboot, as it
//! mounts a mounted memory again; `disable` stops it and puts a plain
//! directory back.

use crate::cli_error::CliError;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{owner_gone, Place, ENABLED, PLACE};

/// The stamp that says the memory is enabled without a mount.
pub const UNMOUNTED: &str = "claude-code-unmounted";
/// The background `serve`'s pid.
const PID: &str = "claude-code-serve.pid";

/// Where Claude Code's memory directory points when enabled this way.
fn target(place: &Place) -> PathBuf {
    place.data.join("memories")
}

/// Whether this project's memory is enabled without a mount.
pub fn chosen(place: &Place) -> bool {
    place.data.join(UNMOUNTED).exists()
}

/// The project's local settings, where its `autoMemoryDirectory` goes.
fn local_settings(place: &Place) -> PathBuf {
    place.project.join(".claude").join("settings.local.json")
}

const KEY: &str = "autoMemoryDirectory";

/// Whether Claude Code keeps this project's memory in the data dir.
pub fn linked(place: &Place) -> bool {
    super::hook::get_key(&local_settings(place), KEY)
        .is_some_and(|dir| Path::new(&dir) == target(place))
}

/// Whether a memfs holds the data dir (and so watches its plain files).
pub fn running(place: &Place) -> bool {
    !owner_gone(&place.data.join(".memfs"))
}

/// `enable --no-mount`.
pub fn enable(place: &Place) -> Result<String, CliError> {
    let dir = &place.memory_dir;
    if memfs::fuse::mountpoint::is_mount_point(dir) {
        return Err(CliError::Said(format!(
            "{} is mounted (memfs claude-code enable without --no-mount): run memfs claude-code disable first",
            dir.display()
        )));
    }
    let memories = target(place);
    std::fs::create_dir_all(&memories).map_err(CliError::io("make", &memories))?;
    // Claude Code told where the memory is first: a settings file that
    // cannot take it stops here, with nothing changed.
    let settings = local_settings(place);
    let was_set = linked(place);
    if !was_set {
        super::hook::set_key(&settings, KEY, Some(&memories.to_string_lossy()))?;
    }
    let pid = match running(place) {
        true => None,
        false => match start(place) {
            Ok(pid) => Some(pid),
            Err(e) => {
                if !was_set {
                    let _ = super::hook::set_key(&settings, KEY, None);
                }
                return Err(e);
            }
        },
    };
    let data = &place.data;
    let _ = std::fs::write(data.join(ENABLED), place.shared.as_deref().unwrap_or(""));
    let _ = std::fs::write(data.join(PLACE), dir.to_string_lossy().as_bytes());
    let _ = std::fs::write(data.join(UNMOUNTED), "");
    // What Claude Code kept so far goes into the watched files: each file
    // a version (of the files door), over the memory's own where both have
    // one (a plain directory written while memfs was off), except in a
    // shared store, whose files stay and whose others come in.
    let moved = bring_in(dir, &memories, place.shared.is_some())?;
    let started = match pid {
        Some(pid) => format!("memfs pid {pid} watches them"),
        None => "the memfs that holds the data dir watches them".to_string(),
    };
    let hook = super::hook_on(place);
    Ok(format!(
        "Claude Code's auto memory for {} is on memfs without a mount: Claude Code keeps it in {}, the memory's plain files (its autoMemoryDirectory in {}; {moved} file(s) brought in from {}); {started}.\n{hook}memfs claude-code log shows who changed what (Claude Code's writes as agent:files(claude) when memfs runs as root, else person:files); memfs claude-code disable puts the plain directory back.\n",
        place.project.display(),
        memories.display(),
        local_settings(place).display(),
        dir.display(),
    ))
}

/// Moves what the plain directory `dir` holds into `memories` (a file of
/// the same name there is written over: the plain directory's is newer;
/// with `keep_theirs`, a shared store's, it stays), then removes `dir`;
/// how many files.
fn bring_in(dir: &Path, memories: &Path, keep_theirs: bool) -> Result<usize, CliError> {
    if !dir.exists() {
        return Ok(0);
    }
    let files = super::files_under(dir);
    for rel in &files {
        let to = memories.join(rel);
        if keep_theirs && to.exists() {
            continue;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(CliError::io("make", parent))?;
        }
        std::fs::copy(dir.join(rel), &to).map_err(|e| {
            CliError::Said(format!(
                "cannot copy {} into the memory: {e}",
                rel.display()
            ))
        })?;
    }
    std::fs::remove_dir_all(dir).map_err(CliError::io("remove", dir))?;
    Ok(files.len())
}

/// Starts `memfs serve` on the place's data dir in the background (its log
/// in the data dir), until it is stopped; waits until it holds the data
/// dir; its pid.
pub fn start(place: &Place) -> Result<u32, CliError> {
    let log = place.data.join("claude-code-serve.log");
    let args = ["serve", "--idle-exit", "0"].map(std::ffi::OsStr::new);
    let mut child = super::in_background(place, &args, &log)?;
    // Ready when its socket answers (it has loaded the memory and watches
    // the plain files by then); a stale socket file refuses.
    let state = place.data.join(".memfs");
    let deadline = Instant::now() + Duration::from_secs(30);
    while memfs::serve::socket::connect(&state).is_err() {
        if let Ok(Some(_)) = child.try_wait() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(CliError::Said(format!(
                "memfs serve did not start: {}",
                said.trim()
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CliError::Said(format!(
                "memfs serve did not start within 30 s (see {})",
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::write(place.data.join(PID), child.id().to_string());
    Ok(child.id())
}

/// Stops the background `serve` (it writes everything out first).
fn stop(place: &Place) {
    let pid = std::fs::read_to_string(place.data.join(PID))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    // (Only while a memfs holds the data dir, and only a `serve` of this
    // kind: after a reboot the pid may be another program's.)
    let ours = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.contains(&&b"serve"[..]) && args.contains(&&b"--idle-exit"[..])
        })
    };
    if let Some(pid) = pid.filter(|p| running(place) && ours(*p)) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(place) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(place.data.join(PID));
}

/// `disable` of a memory enabled without a mount: the `serve` stopped, the
/// link replaced by a plain directory holding a copy of the memory's files.
pub fn disable(place: &Place) -> Result<String, CliError> {
    stop(place);
    // One that was killed wrote nothing out: the journal holds what it
    // took in, and a checkpoint brings the plain files to it.
    super::checkpoint(place)?;
    let dir = &place.memory_dir;
    if linked(place) {
        super::hook::set_key(&local_settings(place), KEY, None)?;
    }
    let memories = target(place);
    std::fs::create_dir_all(dir).map_err(CliError::io("make", dir))?;
    let files = super::files_under(&memories);
    for rel in &files {
        let to = dir.join(rel);
        if let Some(parent) = to.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        std::fs::copy(memories.join(rel), &to)
            .map_err(|e| CliError::Said(format!("cannot copy {} back: {e}", rel.display())))?;
    }
    let _ = std::fs::remove_file(place.data.join(UNMOUNTED));
    let _ = std::fs::remove_file(place.data.join(ENABLED));
    let hook = super::hook_off(place);
    Ok(format!(
        "Claude Code's auto memory for {} is a plain directory again: {} ({} file(s)); the memory and its history stay in {}\n{hook}",
        place.project.display(),
        dir.display(),
        files.len(),
        place.data.display()
    ))
}

/// `status` of a memory enabled without a mount: its text, and whether
/// all is well.
pub fn status(place: &Place) -> (String, bool) {
    match (linked(place), running(place)) {
        (true, true) => (
            format!(
                "on memfs without a mount: Claude Code keeps it in {}, watched by memfs (data dir {})",
                target(place).display(),
                place.data.display()
            ),
            true,
        ),
        (true, false) => (
            "enabled without a mount, but no memfs runs on it (after a reboot, or it was stopped): Claude Code's writes are taken in when one starts; `memfs claude-code enable --no-mount` starts it".to_string(),
            false,
        ),
        (false, _) => (
            "enabled without a mount, but the project's autoMemoryDirectory no longer names the memory's files; `memfs claude-code enable --no-mount` sets it again".to_string(),
            false,
        ),
    }
}

/// What the hook does for a memory enabled without a mount: starts the
/// `serve` when none runs (nothing to print: Claude Code reads the plain
/// files, which are there whether memfs runs or not).
pub fn ensure(place: &Place) -> Result<String, CliError> {
    if running(place) && linked(place) {
        return Ok(String::new());
    }
    enable(place).map(|_| String::new())
}
