//! `memfs claude-code enable|disable|status` through a user's day (issue 47):
//! a worktree names the main checkout's memory; a mount whose memfs was
//! killed is told apart from a live one and repaired by `enable`; `disable`
//! after a kill -9 gives the files as the journal holds them; `enable`
//! after `disable` takes in what was written to the plain directory
//! meanwhile, deletions included, and after a "reboot" (the mount gone,
//! writes to the plain directory since) keeps the memory's other files.
//! The writer here is a plain program in the place Claude Code writes; the
//! real Claude Code is tests/python/test_claude_code.py's.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A home, a project (a git repository) and the place Claude Code keeps
/// its memory for it.
struct Day {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    data: PathBuf,
}

impl Day {
    fn new() -> Day {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("repo");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&project).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(&project)
                .args(["-c", "user.name=a", "-c", "user.email=a@b"])
                .args(args)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        fs::write(project.join("README"), "x\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        let data = tmp.path().join("data");
        Day {
            _tmp: tmp,
            home,
            project,
            data,
        }
    }

    /// A project whose auto memory holds a MEMORY.md of `text`, not on
    /// memfs yet; the place too.
    fn with_memory(text: &str) -> (Day, PathBuf) {
        let day = Day::new();
        let place = day.place();
        fs::create_dir_all(&place).unwrap();
        fs::write(place.join("MEMORY.md"), text).unwrap();
        (day, place)
    }

    /// Where Claude Code keeps this project's auto memory.
    fn place(&self) -> PathBuf {
        let key: String = self
            .project
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.home.join(".claude/projects").join(key).join("memory")
    }

    /// `memfs claude-code ARGS --memory DATA` in `dir`.
    fn cc(&self, dir: &Path, args: &[&str]) -> (i32, String, String) {
        let out = memfs()
            .arg("claude-code")
            .args(args)
            .arg("--memory")
            .arg(&self.data)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("XDG_DATA_HOME")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn enable(&self) -> u32 {
        let (code, out, err) = self.cc(&self.project, &["enable"]);
        assert_eq!(code, 0, "{out} {err}");
        pid_of(&out)
    }

    fn log(&self) -> Vec<(String, String)> {
        log_rows(&self.data)
            .iter()
            .map(|r| {
                (
                    r["op"].as_str().unwrap_or("").to_string(),
                    r["path"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }
}

impl Drop for Day {
    fn drop(&mut self) {
        let _ = self.cc(&self.project, &["disable"]);
        memfs::fuse::mountpoint::lazy_unmount(&self.place());
    }
}

/// The mount's pid, as `enable` says it.
fn pid_of(said: &str) -> u32 {
    let pid = said.split("memfs pid ").nth(1).unwrap();
    pid[..pid.find(')').unwrap()].parse().unwrap()
}

fn kill9(pid: u32) {
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes and fsyncs `text` at `path` (as Claude Code's Write does).
fn write_synced(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = fs::File::create(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn a_worktree_a_dead_mount_and_a_disable_after_a_crash() {
    if skip_without_fuse("a_worktree_a_dead_mount_and_a_disable_after_a_crash") {
        return;
    }
    let (day, place) = Day::with_memory("# Memory\n");
    let pid = day.enable();
    // In a worktree: the same memory (Claude Code keys it by the main
    // checkout).
    let wt = day.project.parent().unwrap().join("wt");
    let ok = Command::new("git")
        .arg("-C")
        .arg(&day.project)
        .args(["worktree", "add", "-q"])
        .arg(&wt)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let (code, out, err) = day.cc(&wt, &["status"]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains(&place.display().to_string()) && out.contains("on memfs"),
        "{out}"
    );
    let (_, out, _) = day.cc(&wt, &["enable"]);
    assert!(out.contains("already on memfs"), "{out}");
    // A write through the mount, then the mount's memfs killed: status
    // says the mount is dead (exit 1), and names the fix.
    write_synced(&place.join("topic.md"), "a topic\n");
    kill9(pid);
    let (code, out, _) = day.cc(&day.project, &["status"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the mount is dead") && out.contains("memfs claude-code enable"),
        "{out}"
    );
    // `enable` repairs it: the memory is there, with the write.
    let pid = day.enable();
    assert_eq!(
        fs::read_to_string(place.join("topic.md")).unwrap(),
        "a topic\n"
    );
    let (code, out, _) = day.cc(&day.project, &["status"]);
    assert_eq!(code, 0, "{out}");
    // This project's history, from the worktree, with no --data to know.
    let out = memfs()
        .args(["claude-code", "log", "--memory"])
        .arg(&day.data)
        .args(["--json", "--all"])
        .current_dir(&wt)
        .env("HOME", &day.home)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.contains("/memories/topic.md"), "{log}");
    // A new file and a line appended, each fsynced, then kill -9 at once:
    // `disable` gives the plain directory as the journal holds them.
    write_synced(&place.join("new.md"), "new\n");
    write_synced(&place.join("MEMORY.md"), "# Memory\n- a line\n");
    kill9(pid);
    let (code, out, err) = day.cc(&day.project, &["disable"]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(!memfs::fuse::mountpoint::is_mount_point(&place));
    assert_eq!(fs::read_to_string(place.join("new.md")).unwrap(), "new\n");
    assert_eq!(
        fs::read_to_string(place.join("MEMORY.md")).unwrap(),
        "# Memory\n- a line\n"
    );
}

#[test]
fn enable_after_disable_and_after_a_reboot_takes_in_what_was_written_meanwhile() {
    if skip_without_fuse(
        "enable_after_disable_and_after_a_reboot_takes_in_what_was_written_meanwhile",
    ) {
        return;
    }
    let (day, place) = Day::with_memory("# Memory\n");
    fs::write(place.join("old.md"), "old\n").unwrap();
    day.enable();
    write_synced(&place.join("topic.md"), "a topic\n");
    let (code, out, err) = day.cc(&day.project, &["disable"]);
    assert_eq!(code, 0, "{out} {err}");
    // memfs off: the plain directory changes.
    fs::write(place.join("MEMORY.md"), "# Memory\n- written while off\n").unwrap();
    fs::remove_file(place.join("old.md")).unwrap();
    fs::write(place.join("later.md"), "later\n").unwrap();
    let (code, out, err) = day.cc(&day.project, &["enable"]);
    assert_eq!(code, 0, "enable after disable: {out} {err}");
    assert!(
        out.contains("2 file(s) written, 1 deleted, 1 the same"),
        "{out}"
    );
    assert_eq!(
        fs::read_to_string(place.join("MEMORY.md")).unwrap(),
        "# Memory\n- written while off\n"
    );
    assert!(!place.join("old.md").exists());
    // (A write through the mount is a version once the file is closed and
    // the flusher has handed it on, within a moment.)
    let wanted = [
        ("write", "/memories/MEMORY.md"),
        ("delete", "/memories/old.md"),
        ("create", "/memories/later.md"),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = day.log();
        let missing: Vec<_> = wanted
            .iter()
            .filter(|(op, path)| !log.iter().any(|(o, p)| o == op && p == path))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{missing:?} not in {log:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A "reboot": the memfs and its mount go away without disable; the
    // plain directory gets a new file; status says so; enable takes it in
    // and keeps the memory's other files (a file missing there was not
    // deleted).
    kill9(pid_of(&out));
    memfs::fuse::mountpoint::lazy_unmount(&place);
    let deadline = Instant::now() + Duration::from_secs(10);
    while memfs::fuse::mountpoint::is_mount_point(&place) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    fs::write(place.join("after-reboot.md"), "after\n").unwrap();
    let (code, out, _) = day.cc(&day.project, &["status"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("enabled, but not mounted"), "{out}");
    let (code, out, err) = day.cc(&day.project, &["enable"]);
    assert_eq!(code, 0, "enable after a reboot: {out} {err}");
    assert_eq!(
        fs::read_to_string(place.join("after-reboot.md")).unwrap(),
        "after\n"
    );
    assert!(place.join("later.md").exists() && place.join("topic.md").exists());
}

/// `ensure` (the `SessionStart` hook) under another Claude Code config dir
/// leaves a memory enabled for the first one alone; under the first, it
/// mounts the killed memory again and hands over its MEMORY.md.
#[test]
fn the_hook_mounts_again_only_for_the_config_dir_it_was_enabled_for() {
    if skip_without_fuse("the_hook_mounts_again_only_for_the_config_dir_it_was_enabled_for") {
        return;
    }
    let (day, place) = Day::with_memory("- remember the hook\n");
    kill9(day.enable());
    let other = day.home.join("other-config");
    let ensure = |config: Option<&Path>| {
        let mut c = memfs();
        c.args(["claude-code", "ensure", "--memory"])
            .arg(&day.data)
            .current_dir(&day.project)
            .env("HOME", &day.home)
            .env_remove("XDG_DATA_HOME");
        match config {
            Some(dir) => c.env("CLAUDE_CONFIG_DIR", dir),
            None => c.env_remove("CLAUDE_CONFIG_DIR"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(ensure(Some(&other)), "");
    assert!(!other.join("projects").exists());
    let said = ensure(None);
    assert!(
        said.contains("mounted this project's auto memory again")
            && said.contains("- remember the hook"),
        "{said}"
    );
    assert!(memfs::fuse::mountpoint::is_mount_point(&place));
    assert_eq!(ensure(None), "", "nothing to say when the mount is up");
}
