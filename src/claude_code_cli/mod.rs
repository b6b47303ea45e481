//! `memfs claude-code enable|disable|status`: Claude Code's auto memory for
//! the project in the current directory, on a memfs mount.
//!
//! Claude Code keeps a project's auto memory in
//! `~/.claude/projects/<project>/memory/` (`<project>`: the git root of the
//! working directory, or the directory, with every character but ASCII
//! letters and digits made `-`; `CLAUDE_CONFIG_DIR` moves `~/.claude`). Its
//! `autoMemoryDirectory` setting is one directory for every project, so the
//! per-project way is the default place itself: `enable` moves what is
//! there into a memfs data dir (memfs finds the files at its first start:
//! they are the memory's first versions) and mounts that memory on the
//! place, in the background; `disable` unmounts it and puts the files back
//! as a plain directory (the data dir, with its history, stays). With
//! `--shared URL` the memory is a shared store named after the
//! repository's remote, so the same project meets the same store on every
//! machine wherever its checkout is.

use crate::cli_error::CliError;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use memfs::fuse::mountpoint::is_mount_point;

use crate::cli::ClaudeCodeCmd;

mod ensure;
mod hook;
mod unmounted;

/// Where a project's auto memory is, and the memory memfs keeps it in.
struct Place {
    project: PathBuf,
    memory_dir: PathBuf,
    data: PathBuf,
    /// The shared store's URL (with its `store=`), when shared.
    shared: Option<String>,
    /// Claude Code's config dir (`~/.claude`, or `$CLAUDE_CONFIG_DIR`).
    config: PathBuf,
    /// Where memfs keeps Claude Code's memories by default, a data dir per
    /// project key.
    root: PathBuf,
    /// The project's key.
    key: String,
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    memfs::say!("memfs: {message}");
    ExitCode::from(2)
}

/// The longest project key Claude Code uses whole; a longer one is cut
/// there, and a hash of the whole path follows.
const KEY_MOST: usize = 200;

/// `/work/my app` -> `-work-my-app`, as Claude Code names its project
/// dirs: each UTF-16 unit of the path that is not an ASCII letter or digit
/// becomes `-` (so `é` is one `-` and `🚀` two); past 200 units, the first
/// 200 and `-` and the base-36 absolute value of the path's 32-bit string
/// hash (`h = 31 * h + unit`, as Claude Code 2.1.332 computes it).
pub fn project_key(project: &Path) -> String {
    let path = project.to_string_lossy();
    let units: Vec<u16> = path.encode_utf16().collect();
    let key: String = units
        .iter()
        .map(|&u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if key.len() <= KEY_MOST {
        return key;
    }
    let hash = units.iter().fold(0i32, |h, &u| {
        h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u))
    });
    format!(
        "{}-{}",
        &key[..KEY_MOST],
        base36(i64::from(hash).unsigned_abs())
    )
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}

/// The project as Claude Code keys its auto memory: the repository's main
/// checkout (every worktree of a repository shares one memory), else the
/// git root of `here`, else `here`.
fn main_checkout(here: &Path) -> PathBuf {
    let common = git(
        here,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    );
    if let Some(common) = common.map(PathBuf::from) {
        if common.file_name().is_some_and(|n| n == ".git") {
            if let Some(main) = common.parent() {
                return main.to_path_buf();
            }
        }
    }
    git(here, &["rev-parse", "--show-toplevel"]).map_or(here.to_path_buf(), PathBuf::from)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// A store name for a repository's remote: the same for every clone
/// (`git@github.com:org/repo.git` and `https://github.com/org/repo` give
/// `cc-github.com-org-repo`).
pub fn store_for_remote(remote: &str) -> String {
    let mut r = remote.trim().to_ascii_lowercase();
    for scheme in ["https://", "http://", "ssh://", "git://", "file://"] {
        if let Some(rest) = r.strip_prefix(scheme) {
            r = rest.to_string();
        }
    }
    if let Some((_, rest)) = r.split_once('@') {
        r = rest.to_string();
    }
    let r = r
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .replace(':', "/");
    let name: String = r
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    let name = format!("cc-{}", name.trim_matches('-'));
    match name.len() <= 64 {
        true => name,
        false => {
            let sha = memfs::digest::sha256_hex(name.as_bytes());
            format!("{}-{}", &name[..51], &sha[..12])
        }
    }
}

fn place(shared: Option<&str>, data: Option<&Path>) -> Result<Place, CliError> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::Said(format!("cannot read the current directory: {e}")))?;
    let project = main_checkout(&here);
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| CliError::Said("HOME is not set".into()))?;
    let config = std::env::var_os("CLAUDE_CONFIG_DIR").map_or(home.join(".claude"), PathBuf::from);
    let key = project_key(&project);
    let memory_dir = config.join("projects").join(&key).join("memory");
    let root = std::env::var_os("XDG_DATA_HOME")
        .map_or(home.join(".local/share"), PathBuf::from)
        .join("memfs/claude-code");
    // (`enable --memory DIR` leaves where, for the commands after it.)
    let data = match data {
        Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()),
        None => match std::fs::read_to_string(root.join(format!("{key}.memory"))) {
            Ok(there) if !there.trim().is_empty() => PathBuf::from(there.trim_end_matches('\n')),
            _ => root.join(&key),
        },
    };
    // (A project enabled on a shared store stays on it: the stamp says which.)
    let stamp = std::fs::read_to_string(data.join(ENABLED)).unwrap_or_default();
    let shared = match shared {
        None if !stamp.trim().is_empty() => Some(stamp.trim().to_string()),
        None => None,
        Some(url) if url.contains("store=") || memfs::remote::is_store_url(url) => {
            Some(url.to_string())
        }
        Some(url) => {
            let remote = git(&project, &["remote", "get-url", "origin"]).ok_or_else(|| {
                CliError::Said(format!(
                    "{} has no git remote `origin` to name the shared store after; add one, or give the store yourself in the URL (?store=NAME)",
                    project.display()
                ))
            })?;
            let sep = if url.contains('?') { '&' } else { '?' };
            Some(format!("{url}{sep}store={}", store_for_remote(&remote)))
        }
    };
    Ok(Place {
        project,
        memory_dir,
        data,
        shared,
        config,
        root,
        key,
    })
}

pub fn run(cmd: &ClaudeCodeCmd) -> ExitCode {
    let (shared, data) = match cmd {
        ClaudeCodeCmd::Enable { shared, memory, .. } => (shared.as_deref(), memory.as_deref()),
        ClaudeCodeCmd::Disable { memory }
        | ClaudeCodeCmd::Status { memory }
        | ClaudeCodeCmd::Ensure { memory }
        | ClaudeCodeCmd::Log { memory, .. }
        | ClaudeCodeCmd::Undo { memory, .. }
        | ClaudeCodeCmd::Web { memory, .. } => (None, memory.as_deref()),
    };
    let place = match place(shared, data) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let result = match cmd {
        ClaudeCodeCmd::Enable {
            memory, no_mount, ..
        } => keep_store_key(&place)
            .and_then(|()| ensure::hold(&place.data))
            .and_then(|_held| {
                let enabled = match no_mount {
                    true => unmounted::enable(&place),
                    false => enable(&place),
                };
                enabled.map(|said| said + &remember_where(&place, memory))
            }),
        ClaudeCodeCmd::Disable { .. } => {
            ensure::hold(&place.data).and_then(|_held| disable(&place))
        }
        ClaudeCodeCmd::Ensure { .. } => ensure::ensure(place),
        ClaudeCodeCmd::Status { .. } => {
            let (said, ok) = status(&place);
            crate::out::write(format_args!("{said}"));
            return ExitCode::from(if ok { 0 } else { 1 });
        }
        ClaudeCodeCmd::Log { args, .. } => return on_memory(&place, "log", args),
        ClaudeCodeCmd::Undo { args, .. } => return on_memory(&place, "undo", args),
        ClaudeCodeCmd::Web { args, .. } => return on_memory(&place, "web", args),
    };
    match result {
        Ok(said) => {
            crate::out::write(format_args!("{said}"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// After `enable --memory DIR`: DIR is remembered for this project, so
/// that `status`, `disable`, `log` and the hook find it without `--memory`.
fn remember_where(place: &Place, memory: &Option<PathBuf>) -> String {
    let pointer = place.root.join(format!("{}.memory", place.key));
    let default = place.root.join(&place.key);
    let written = match memory {
        Some(_) if place.data != default => std::fs::create_dir_all(&place.root)
            .and_then(|()| std::fs::write(&pointer, place.data.to_string_lossy().as_bytes())),
        // (Back to the default place: no pointer elsewhere.)
        Some(_) => {
            let _ = std::fs::remove_file(&pointer);
            return String::new();
        }
        None => return String::new(),
    };
    match written {
        Ok(()) => String::new(),
        Err(e) => format!(
            "(cannot write {}: {e}; give --memory {} to the other memfs claude-code commands)\n",
            pointer.display(),
            place.data.display()
        ),
    }
}

/// `memfs COMMAND ARGS` on the place's memory (a shared store's as
/// `enable --shared` named it), run in this process's place (exec): a
/// signal sent to this process reaches it (a `memfs claude-code web`
/// stopped with SIGTERM left its page serving as an orphan), and its exit
/// code is this one's.
fn on_memory(place: &Place, command: &str, args: &[String]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let mut c = match memfs_on(place) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // (Returns only when it could not run.)
    let e = c.arg(command).args(args).exec();
    fail(format!("cannot run memfs {command}: {e}"))
}

/// This very memfs, on the place's memory (`--data DIR`, or a shared
/// store's `--data URL --cache DIR`): the other commands go after it.
fn memfs_on(place: &Place) -> Result<Command, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Said(format!("cannot find memfs itself: {e}")))?;
    let mut c = Command::new(exe);
    match &place.shared {
        None => c.arg("--data").arg(&place.data),
        Some(url) => c.arg("--data").arg(url).arg("--cache").arg(&place.data),
    };
    if let Some(file) = store_key_file(place) {
        c.arg("--store-key-file").arg(file);
    }
    Ok(c)
}

/// Where the key of the place's store over HTTP is kept, if it is on one.
fn store_key_file(place: &Place) -> Option<PathBuf> {
    let url = place
        .shared
        .as_deref()
        .filter(|u| memfs::remote::is_store_url(u))?;
    let url = memfs::remote::StoreUrl::parse(url, true).ok()?;
    memfs::remote::key_file(&url)
}

/// On a store over HTTP: its key (ANTHROPIC_API_KEY here) kept for the
/// memfs started now and by the hook later, whose environment holds
/// Claude Code's own key, not the store's; one kept before serves when
/// the environment has none.
fn keep_store_key(place: &Place) -> Result<(), CliError> {
    let Some(url) = place
        .shared
        .as_deref()
        .filter(|u| memfs::remote::is_store_url(u))
    else {
        return Ok(());
    };
    memfs::remote::StoreUrl::parse(url, false).map_err(|e| CliError::Said(e.to_string()))?;
    let file = store_key_file(place)
        .ok_or_else(|| CliError::Said("no HOME to keep the store's key under".into()))?;
    match std::env::var("ANTHROPIC_API_KEY") {
        Ok(key) if !key.trim().is_empty() => {
            memfs::remote::keep_key(&file, key.trim()).map_err(|e| {
                CliError::Said(format!(
                    "cannot keep the store's key in {}: {e}",
                    file.display()
                ))
            })
        }
        _ if file.exists() => Ok(()),
        _ => Err(CliError::Said(
            "no key for the memory store: set ANTHROPIC_API_KEY to a key that reaches it".into(),
        )),
    }
}

/// What the place is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mount {
    /// Mounted, and its memfs answers.
    Live,
    /// Mounted, and its memfs is gone (killed, or a crash): every access
    /// fails with "Transport endpoint is not connected".
    Dead,
    /// Not mounted.
    None,
}

fn mount_of(place: &Place) -> Mount {
    let dir = &place.memory_dir;
    if !is_mount_point(dir) {
        return Mount::None;
    }
    // (Opening the directory reaches the memfs behind it; a `stat` may be
    // answered from the kernel's cache.)
    match std::fs::read_dir(dir) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Mount::Dead,
        _ if owner_gone(&place.data.join(".memfs")) => Mount::Dead,
        _ => Mount::Live,
    }
}

/// Whether `enable` put this project on memfs and no `disable` took it off
/// since (the mount may be gone since: a reboot, a logout, a kill).
fn enabled(place: &Place) -> bool {
    place.data.join(ENABLED).exists()
}

/// Whether the memory was enabled for another Claude Code config dir (the
/// same project under another `CLAUDE_CONFIG_DIR`): that one's, not this.
fn enabled_elsewhere(place: &Place) -> bool {
    std::fs::read_to_string(place.data.join(PLACE))
        .is_ok_and(|there| Path::new(&there) != place.memory_dir)
}

/// The stamp `enable` leaves in the data dir and `disable` removes.
const ENABLED: &str = "claude-code-enabled";
/// Where `enable` mounted the memory (Claude Code's memory dir under the
/// config dir it was run for).
const PLACE: &str = "claude-code-place";
/// What `disable` copied back to the plain directory, a name a line: on the
/// next `enable`, a name listed and gone from the plain directory was
/// deleted there while memfs was off.
const COPIED_BACK: &str = "claude-code-copied-back";

/// `status`: its text, and whether all is well (a dead or missing mount of
/// an enabled project is not: the exit code says so).
fn status(place: &Place) -> (String, bool) {
    let (said, ok) = match (mount_of(place), enabled(place)) {
        (_, true) if unmounted::chosen(place) => unmounted::status(place),
        (Mount::Live, _) => (format!("on memfs (data dir {})", place.data.display()), true),
        (Mount::Dead, _) => (
            "on memfs, but the mount is dead: the memfs behind it stopped (killed, or it crashed), so Claude Code can neither read nor write this memory now (\"Transport endpoint is not connected\"). `memfs claude-code enable` mounts it again; nothing is lost".to_string(),
            false,
        ),
        (Mount::None, true) => (
            format!(
                "enabled, but not mounted (after a reboot or a logout, or the mount was taken away): Claude Code now reads and writes a plain directory. `memfs claude-code enable` mounts the memory again and takes in what was written there meanwhile (data dir {})",
                place.data.display()
            ),
            false,
        ),
        (Mount::None, false) if !place.memory_dir.exists() => (
            "not made yet (Claude Code makes it when it first keeps a memory); not on memfs".to_string(),
            true,
        ),
        (Mount::None, false) => ("a plain directory (not on memfs)".to_string(), true),
    };
    let mut shared = match &place.shared {
        Some(url) => format!("shared store: {}\n", memfs::transfer::api::redacted(url)),
        None => String::new(),
    };
    if enabled(place) {
        let settings = hook::settings_path(&place.config);
        shared += &match hook::installed(&settings) {
            true => format!("mounted again when Claude Code starts (the SessionStart hook in {})\n", settings.display()),
            false => format!("not mounted again by itself: memfs' SessionStart hook is not in {} (memfs claude-code enable puts it back)\n", settings.display()),
        };
    }
    (
        format!(
            "project {}\nClaude Code's auto memory: {}\n{said}\n{shared}",
            place.project.display(),
            place.memory_dir.display(),
        ),
        ok,
    )
}

/// Moves every entry of `from` into `to` (made if missing); refuses, with
/// nothing moved, if a name is in both.
fn move_entries(from: &Path, to: &Path) -> Result<usize, CliError> {
    let entries: Vec<_> = match std::fs::read_dir(from) {
        Ok(rd) => rd.filter_map(Result::ok).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(CliError::io("read", from)(e)),
    };
    std::fs::create_dir_all(to).map_err(CliError::io("make", to))?;
    if let Some(both) = entries.iter().find(|e| to.join(e.file_name()).exists()) {
        return Err(CliError::Said(format!(
            "{} is in both {} and {}; move one away, then run this again (nothing was moved)",
            both.file_name().to_string_lossy(),
            from.display(),
            to.display()
        )));
    }
    for e in &entries {
        let target = to.join(e.file_name());
        // (Another file system: copied, then removed.)
        if std::fs::rename(e.path(), &target).is_err() && !copy_then_remove(&e.path(), &target) {
            return Err(CliError::Said(format!(
                "cannot move {} to {}",
                e.path().display(),
                target.display()
            )));
        }
    }
    Ok(entries.len())
}

/// `enable`: mounts the memory on the place. A dead mount is cleared
/// first; what the plain directory holds becomes the memory's first
/// versions, or, when the memory is there already (after a `disable`, or a
/// reboot that took the mount away), is taken in through the mount as the
/// changes made while memfs was off.
fn enable(place: &Place) -> Result<String, CliError> {
    if unmounted::chosen(place) {
        return Err(CliError::Said("this project's memory is enabled without a mount (--no-mount): run memfs claude-code disable first, or enable it with --no-mount".to_string()));
    }
    let dir = &place.memory_dir;
    let repaired = match mount_of(place) {
        Mount::Live => {
            return Ok(format!(
                "Claude Code's auto memory for {} is already on memfs ({}); nothing changed\n",
                place.project.display(),
                dir.display()
            ))
        }
        Mount::Dead => {
            clear_dead(dir)?;
            "the dead mount was cleared; "
        }
        Mount::None => "",
    };
    std::fs::create_dir_all(dir).map_err(CliError::io("make", dir))?;
    let cache = &place.data;
    std::fs::create_dir_all(cache).map_err(CliError::io("make", cache))?;
    // What Claude Code kept so far becomes the memory's first versions.
    // (A shared store's files come from the database, and a memory that is
    // there already has its own: what is here waits aside and goes in
    // through the mount.)
    let existing = cache.join(".memfs").is_dir();
    let aside = match (&place.shared, existing) {
        (Some(_), _) => cache.join("claude-code-import"),
        (None, true) => cache.join("claude-code-offline"),
        (None, false) => cache.join("memories"),
    };
    let moved = move_entries(dir, &aside)?;
    let pid = match start_mount(place) {
        Ok(pid) => pid,
        Err(e) => {
            let _ = move_entries(&aside, dir);
            return Err(e);
        }
    };
    let store = brought_in(place, &aside, existing, moved)?;
    // (The stamp keeps a shared store's URL, for `memfs claude-code log`;
    // the place says which Claude Code config dir the memory is mounted
    // for, so that another one's hook leaves it alone.)
    let _ = std::fs::write(cache.join(ENABLED), place.shared.as_deref().unwrap_or(""));
    let _ = std::fs::write(cache.join(PLACE), dir.to_string_lossy().as_bytes());
    let _ = std::fs::remove_file(cache.join(COPIED_BACK));
    let hook = hook_on(place);
    Ok(format!(
        "{repaired}Claude Code's auto memory for {} is on memfs: {} is mounted (memfs pid {}), data dir {}{store}.\n{hook}memfs claude-code log shows who changed what; memfs claude-code disable puts the plain directory back.\n",
        place.project.display(),
        dir.display(),
        pid,
        cache.display(),
    ))
}

/// Adds the `SessionStart` hook that mounts the memory again when Claude
/// Code starts after a reboot; what `enable` says of it.
fn hook_on(place: &Place) -> String {
    // (One project's enable or disable at a time edits the settings.)
    let _held = ensure::hold(&place.root);
    let settings = hook::settings_path(&place.config);
    let added = std::env::current_exe()
        .map_err(|e| CliError::Said(format!("cannot find memfs itself: {e}")))
        .and_then(|exe| hook::install(&settings, &hook::command(&exe)));
    match added {
        Ok(true) => format!(
            "A SessionStart hook in {} mounts it again whenever Claude Code starts after a reboot or a killed mount.\n",
            settings.display()
        ),
        Ok(false) => String::new(),
        Err(e) => format!("Not mounted again by itself after a reboot: {e}; run memfs claude-code enable then.\n"),
    }
}

/// Takes the hook away when no other project is on memfs any more; what
/// `disable` says of it.
fn hook_off(place: &Place) -> String {
    let _held = ensure::hold(&place.root);
    if others_enabled(place) {
        return String::new();
    }
    let settings = hook::settings_path(&place.config);
    match hook::remove(&settings) {
        Ok(true) => format!(
            "memfs' SessionStart hook is out of {}.\n",
            settings.display()
        ),
        Ok(false) => String::new(),
        Err(e) => format!("memfs' SessionStart hook could not be taken out: {e}\n"),
    }
}

/// Whether another project's memory (a data dir under the default root, or
/// one an `enable --memory` named there) is still enabled.
fn others_enabled(place: &Place) -> bool {
    let Ok(entries) = std::fs::read_dir(&place.root) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let path = e.path();
        let data = match path.extension().is_some_and(|x| x == "memory") {
            true => match std::fs::read_to_string(&path) {
                Ok(there) => PathBuf::from(there.trim_end_matches('\n')),
                Err(_) => return false,
            },
            false => path,
        };
        let config = std::fs::read_to_string(data.join(PLACE)).unwrap_or_default();
        let here = config.is_empty() || Path::new(&config).starts_with(&place.config);
        data != place.data && data.join(ENABLED).exists() && here
    })
}

/// Detaches the dead mount at `dir`, or says how to.
fn clear_dead(dir: &Path) -> Result<(), CliError> {
    memfs::fuse::mountpoint::lazy_unmount(dir);
    match is_mount_point(dir) {
        false => Ok(()),
        true => Err(CliError::Said(format!(
            "the dead mount at {} could not be cleared; clear it with: fusermount3 -u -z {} (as root: umount -l {}), then run this again",
            dir.display(),
            dir.display(),
            dir.display()
        ))),
    }
}

/// What was set aside in `aside` before the mount, brought into it now
/// (a shared store's: where the store has no such file; a memory that was
/// there already: as the changes made meanwhile; a new memory's: already
/// its first versions, `moved` of them); what `enable` says of it.
fn brought_in(
    place: &Place,
    aside: &Path,
    existing: bool,
    moved: usize,
) -> Result<String, CliError> {
    let dir = &place.memory_dir;
    Ok(match (&place.shared, existing) {
        (Some(url), _) => {
            let kept = bring_in(aside, dir)?;
            let name = match memfs::remote::StoreUrl::parse(url, true) {
                Ok(store) => store.store,
                Err(_) => url.split("store=").nth(1).unwrap_or("?").to_string(),
            };
            format!(", shared store {name}{kept}")
        }
        (None, true) => format!("; {}", take_in(aside, dir, &place.data.join(COPIED_BACK))?),
        (None, false) => format!("; {moved} file(s) already there are its first versions"),
    })
}

/// Every file below `root`, relative to it (sorted).
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let path = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => out.push(path),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// What the plain directory held while memfs was off (moved to `aside`),
/// taken into the mounted memory at `dir` as changes: each file whose bytes
/// differ written through the mount, and each file `disable` copied back
/// (listed in `copied_back`) that is gone from it deleted. Then `aside` is
/// removed. Says what it did.
fn take_in(aside: &Path, dir: &Path, copied_back: &Path) -> Result<String, CliError> {
    let (mut written, mut same, mut deleted) = (0, 0, 0);
    let here = files_under(aside);
    for rel in &here {
        let bytes = std::fs::read(aside.join(rel)).map_err(|e| {
            CliError::Said(format!("cannot read {}: {e}", aside.join(rel).display()))
        })?;
        let target = dir.join(rel);
        if std::fs::read(&target).is_ok_and(|now| now == bytes) {
            same += 1;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(CliError::io("make", parent))?;
        }
        std::fs::write(&target, &bytes).map_err(|e| {
            CliError::Said(format!(
                "cannot write {} into the memory: {e}",
                target.display()
            ))
        })?;
        written += 1;
    }
    // (Only after a disable: after a reboot, the plain directory holds just
    // what was written since, and a file not there was not deleted.)
    if let Ok(list) = std::fs::read_to_string(copied_back) {
        for name in list.lines().filter(|l| !l.is_empty()) {
            let rel = PathBuf::from(name);
            if here.binary_search(&rel).is_err() && std::fs::remove_file(dir.join(&rel)).is_ok() {
                deleted += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(aside);
    Ok(format!(
        "what the plain directory held meanwhile is taken in: {written} file(s) written, {deleted} deleted, {same} the same"
    ))
}

/// Starts `memfs mount` on the place in the background (its log in the
/// data dir) and waits until it is mounted; its pid.
fn start_mount(place: &Place) -> Result<u32, CliError> {
    let dir = &place.memory_dir;
    let log = place.data.join("claude-code-mount.log");
    let args = [std::ffi::OsStr::new("mount"), dir.as_os_str()];
    let mut child = in_background(place, &args, &log)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_mount_point(dir) {
        if let Ok(Some(_)) = child.try_wait() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(CliError::Said(format!(
                "memfs mount did not start: {}",
                said.trim()
            )));
        }
        if Instant::now() > deadline {
            return Err(CliError::Said(format!(
                "{} was not mounted within 30 s (see {})",
                dir.display(),
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(child.id())
}

/// `memfs ... ARGS` on the place's memory, started in the background (its
/// standard error in `log`, its own process group: a terminal's Ctrl-C
/// does not stop it).
fn in_background(
    place: &Place,
    args: &[&std::ffi::OsStr],
    log: &Path,
) -> Result<std::process::Child, CliError> {
    let log_file = std::fs::File::create(log).map_err(CliError::io("write", log))?;
    let mut command = memfs_on(place)?;
    command.args(args);
    use std::os::unix::process::CommandExt;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            CliError::Said(format!(
                "cannot start memfs {}: {e}",
                args[0].to_string_lossy()
            ))
        })
}

/// What was in the place before a shared store was mounted on it, copied
/// in through the mount where the store has no file of that name; what the
/// store has already stays aside (said in the answer).
fn bring_in(aside: &Path, dir: &Path) -> Result<String, CliError> {
    let Ok(entries) = std::fs::read_dir(aside) else {
        return Ok(String::new());
    };
    let mut kept = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let target = dir.join(entry.file_name());
        if target.exists() {
            kept.push(entry.file_name().to_string_lossy().into_owned());
            continue;
        }
        if !copy_then_remove(&entry.path(), &target) {
            return Err(CliError::Said(format!(
                "cannot copy {} into the memory",
                entry.path().display()
            )));
        }
    }
    Ok(match kept.is_empty() {
        true => String::new(),
        false => format!(
            " (the store already has {}: this machine's copies are in {})",
            kept.join(", "),
            aside.display()
        ),
    })
}

/// `disable`: unmounts the memory (a dead mount too), brings its plain
/// files up to date from the journal, and copies them back as the plain
/// directory. After a reboot took the mount away, the files Claude Code
/// wrote to the plain directory since are kept, and the memory's others
/// copied beside them.
fn disable(place: &Place) -> Result<String, CliError> {
    if unmounted::chosen(place) {
        return unmounted::disable(place);
    }
    let dir = &place.memory_dir;
    let state = mount_of(place);
    if state == Mount::None && !enabled(place) {
        return Ok(format!(
            "Claude Code's auto memory for {} is not on memfs ({} is a plain directory); nothing changed\n",
            place.project.display(),
            dir.display()
        ));
    }
    match state {
        Mount::Live => unmount(dir)?,
        Mount::Dead => {
            memfs::fuse::mountpoint::lazy_unmount(dir);
        }
        Mount::None => {}
    }
    // The mount's memfs writes everything out as it stops: wait for it to
    // let go of its data dir.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !owner_gone(&place.data.join(".memfs")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // One that was killed (or crashed) wrote nothing out: the journal holds
    // what it acknowledged, and a checkpoint brings the plain files to it.
    checkpoint(place)?;
    let memories = place.data.join("memories");
    let copied = copy_back(&memories, dir, state != Mount::None)?;
    let names: Vec<String> = files_under(&memories)
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let _ = std::fs::write(place.data.join(COPIED_BACK), names.join("\n"));
    let _ = std::fs::remove_file(place.data.join(ENABLED));
    let hook = hook_off(place);
    Ok(format!(
        "Claude Code's auto memory for {} is a plain directory again: {} ({copied} file(s)); the memory and its history stay in {}\n{hook}",
        place.project.display(),
        dir.display(),
        place.data.display()
    ))
}

fn unmount(dir: &Path) -> Result<(), CliError> {
    let unmounted = ["fusermount3", "umount"].iter().any(|tool| {
        let mut c = Command::new(tool);
        if *tool == "fusermount3" {
            c.arg("-u");
        }
        c.arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    match unmounted {
        true => Ok(()),
        false => Err(CliError::Said(format!(
            "cannot unmount {} (is a program using it? close it, then run this again)",
            dir.display()
        ))),
    }
}

/// `memfs checkpoint` on the place's memory: its plain files brought up to
/// date with its journal.
fn checkpoint(place: &Place) -> Result<(), CliError> {
    let out = memfs_on(place)?
        .arg("checkpoint")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CliError::Said(format!("cannot run memfs checkpoint: {e}")))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(CliError::Said(format!(
            "the memory's files could not be brought up to date: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Whether no memfs holds the data dir whose state dir is `state` (its
/// lock is free).
fn owner_gone(state: &Path) -> bool {
    use rustix::fs::{flock, open, FlockOperation, Mode, OFlags};
    let Ok(fd) = open(
        state,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return true;
    };
    flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// `cp -a from to` (a file or a whole directory, modes and times kept).
fn copy(from: &Path, to: &Path) -> bool {
    copy_keeping(from, to, false)
}

/// [`copy`]; with `keep`, what is at `to` already stays (`cp -n`).
fn copy_keeping(from: &Path, to: &Path, keep: bool) -> bool {
    let mut cp = Command::new("cp");
    cp.arg("-a");
    if keep {
        cp.arg("-n");
    }
    cp.arg(from).arg(to).status().is_ok_and(|s| s.success())
}

/// [`copy`], then `from` removed: a move across file systems.
fn copy_then_remove(from: &Path, to: &Path) -> bool {
    copy(from, to) && {
        let _ = std::fs::remove_dir_all(from).or_else(|_| std::fs::remove_file(from));
        true
    }
}

/// Copies the memory's files back into the plain directory (`replace`:
/// over what is there; else a file already there is kept).
fn copy_back(memories: &Path, dir: &Path, replace: bool) -> Result<usize, CliError> {
    let mut count = 0;
    for entry in std::fs::read_dir(memories).map_err(CliError::io("read", memories))? {
        let entry = entry.map_err(|e| CliError::Said(e.to_string()))?;
        let to = dir.join(entry.file_name());
        if !copy_keeping(&entry.path(), &to, !replace) {
            return Err(CliError::Said(format!(
                "cannot copy {} back",
                entry.path().display()
            )));
        }
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_keys_are_claude_codes() {
        assert_eq!(
            project_key(Path::new("/tmp/ccprobe/work/My Proj.x")),
            "-tmp-ccprobe-work-My-Proj-x"
        );
        assert_eq!(project_key(Path::new("/work/main")), "-work-main");
        // A UTF-16 unit each: é one, 🚀 (a surrogate pair) two.
        assert_eq!(project_key(Path::new("/p/é🚀")), "-p----");
        // Past 200: cut, then the path's hash (tests/python/
        // test_claude_code.py checks it against the real Claude Code).
        let long = format!("/{}", "a".repeat(250));
        let key = project_key(Path::new(&long));
        assert_eq!(key.len(), 200 + 1 + key.rsplit('-').next().unwrap().len());
        assert!(key.starts_with(&format!("-{}", "a".repeat(199))));
    }

    #[test]
    fn every_clone_of_a_repository_names_the_same_store() {
        let a = store_for_remote("git@github.com:Org/Repo.git");
        assert_eq!(a, "cc-github.com-org-repo");
        assert_eq!(store_for_remote("https://github.com/org/repo"), a);
        assert_eq!(store_for_remote("ssh://git@github.com/org/repo.git/"), a);
        let long = store_for_remote(&format!("https://example.com/{}", "x".repeat(100)));
        let allowed = |n: &str| {
            n.len() <= 64
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        assert!(allowed(&long) && allowed(&a), "{long}");
    }
}
