//! The kernel keeps what the mount told it for minutes (names present and
//! absent, attributes, symlinks, pages), so every change
//! it did not make itself must drop what it made stale. Each test here
//! caches first and changes second, through each kind of change: the tool,
//! `memfs revert`, `memfs expire`, and a person's change through another
//! mount of the same memory. (Another host's version: the shared store's
//! pytest `test_a_change_on_one_host_reaches_the_others_mounts_...`; a
//! recovery after the disk refused a change: the fake kernel of
//! tests/failpoints.rs.)

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{memfs, skip_without_fuse, Mounted};

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Fills the kernel's caches for `rel` under `root`: its name, its
/// attributes, its pages (a file) or its listing (a directory).
fn warm(root: &Path, rel: &str) {
    let path = root.join(rel);
    let meta = fs::metadata(&path).unwrap();
    if meta.is_dir() {
        listing(&path);
        listing(&path);
    } else {
        fs::read(&path).unwrap();
    }
}

/// A change through another mount is dropped from this one's caches by that
/// mount's invalidation thread without the person's syscall waiting for it
/// (see docs/SEMANTICS.md): it shows within moments. The caches last
/// minutes, so a missed invalidation fails this (the 20 s are for a
/// loaded machine, not a measure).
fn soon(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(
            Instant::now() < deadline,
            "not seen through the other mount: {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A second `memfs mount` of the same data dir (served by the first).
struct Second {
    child: Child,
    at: tempfile::TempDir,
}

impl Second {
    fn start(data: &Path) -> Second {
        let at = tempfile::tempdir().unwrap();
        let child = memfs()
            .arg("--data")
            .arg(data)
            .arg("mount")
            .arg(at.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !memfs::fuse::mountpoint::is_mount_point(at.path()) {
            assert!(Instant::now() < deadline, "the second mount did not appear");
            std::thread::sleep(Duration::from_millis(20));
        }
        Second { child, at }
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.at.path().join(rel)
    }
}

impl Drop for Second {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        );
        let _ = self.child.wait();
        if memfs::fuse::mountpoint::is_mount_point(self.at.path()) {
            memfs::fuse::mountpoint::lazy_unmount(self.at.path());
        }
    }
}

#[test]
fn the_tool_changes_what_the_kernel_cached_and_the_mount_shows_it_at_once() {
    let test = "the_tool_changes_what_the_kernel_cached_and_the_mount_shows_it_at_once";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    let root = m.mnt.path();
    m.tool(r#"{"command":"create","path":"/memories/dir/a.md","file_text":"aaaa\n"}"#);
    m.tool(r#"{"command":"create","path":"/memories/dir/gone.md","file_text":"x\n"}"#);
    for rel in ["dir", "dir/a.md", "dir/gone.md"] {
        warm(root, rel);
    }
    assert!(
        fs::metadata(m.at("dir/new.md")).is_err(),
        "absent, and cached so"
    );
    let dir_mtime = fs::metadata(m.at("dir")).unwrap().mtime_nsec();
    let mut held = fs::File::open(m.at("dir/gone.md")).unwrap();
    assert_eq!(held.metadata().unwrap().nlink(), 1);
    // Same size: only dropped pages show the new bytes.
    m.tool(r#"{"command":"str_replace","path":"/memories/dir/a.md","old_str":"aaaa","new_str":"bbbb"}"#);
    assert_eq!(read(&m.at("dir/a.md")).unwrap(), "bbbb\n");
    m.tool(r#"{"command":"create","path":"/memories/dir/new.md","file_text":"n\n"}"#);
    assert_eq!(read(&m.at("dir/new.md")).unwrap(), "n\n");
    assert_eq!(listing(&m.at("dir")), ["a.md", "gone.md", "new.md"]);
    let now_mtime = fs::metadata(m.at("dir")).unwrap().mtime_nsec();
    assert_ne!(dir_mtime, now_mtime, "the directory's cached times dropped");
    m.tool(r#"{"command":"delete","path":"/memories/dir/gone.md"}"#);
    assert!(fs::metadata(m.at("dir/gone.md")).is_err());
    assert_eq!(listing(&m.at("dir")), ["a.md", "new.md"]);
    assert_eq!(
        held.metadata().unwrap().nlink(),
        0,
        "an open file sees its name gone"
    );
    m.tool(
        r#"{"command":"rename","old_path":"/memories/dir/new.md","new_path":"/memories/moved.md"}"#,
    );
    assert!(fs::metadata(m.at("dir/new.md")).is_err());
    assert_eq!(read(&m.at("moved.md")).unwrap(), "n\n");
    assert_eq!(listing(root), ["dir", "moved.md"]);
    held.seek(SeekFrom::Start(0)).unwrap();
    let mut old = String::new();
    held.read_to_string(&mut old).unwrap();
    assert_eq!(old, "x\n", "an open file that was deleted still reads");
}

#[test]
fn revert_and_expiry_change_what_the_kernel_cached_and_the_mount_shows_it_at_once() {
    let test = "revert_and_expiry_change_what_the_kernel_cached_and_the_mount_shows_it_at_once";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    let root = m.mnt.path();
    m.tool(r#"{"command":"create","path":"/memories/r.md","file_text":"one\n"}"#);
    m.tool(r#"{"command":"create","path":"/memories/idle/e.md","file_text":"e\n"}"#);
    m.tool(r#"{"command":"str_replace","path":"/memories/r.md","old_str":"one","new_str":"two"}"#);
    let log = memfs()
        .arg("--data")
        .arg(m.data.path())
        .args(["log", "--json", "/memories/r.md"])
        .output()
        .unwrap();
    assert!(log.status.success());
    let first: String = String::from_utf8(log.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|row| row["op"] == "create")
        .and_then(|row| row["version"].as_str().map(str::to_string))
        .expect("the create's version");
    for rel in ["r.md", "idle"] {
        warm(root, rel);
    }
    fs::metadata(m.at("idle/e.md")).unwrap();
    // `memfs revert`, a person's act from outside the mount: same size.
    let status = memfs()
        .arg("--data")
        .arg(m.data.path())
        .args(["revert", &first])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(read(&m.at("r.md")).unwrap(), "one\n");
    // `memfs expire`: nothing read or wrote e.md for a second (a `stat` is
    // not a read).
    std::thread::sleep(Duration::from_millis(1500));
    let status = memfs()
        .arg("--data")
        .arg(m.data.path())
        .args(["expire", "--idle", "1s", "/memories/idle"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(fs::metadata(m.at("idle/e.md")).is_err());
    assert!(listing(&m.at("idle")).is_empty());
}

#[test]
fn a_persons_change_through_one_mount_shows_through_another() {
    let test = "a_persons_change_through_one_mount_shows_through_another";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    let other = Second::start(m.data.path());
    m.tool(r#"{"command":"create","path":"/memories/a.md","file_text":"aaaa\n"}"#);
    m.tool(r#"{"command":"create","path":"/memories/dir/b.md","file_text":"b\n"}"#);
    for rel in ["", "dir", "a.md", "dir/b.md"] {
        warm(other.at.path(), rel);
    }
    assert!(
        fs::metadata(other.at("new.md")).is_err(),
        "absent, and cached so"
    );
    let mut held = fs::File::open(other.at("dir/b.md")).unwrap();
    let mut first = String::new();
    held.read_to_string(&mut first).unwrap();
    assert_eq!(first, "b\n");

    // Same size, through the first mount: only dropped pages show it.
    fs::write(m.at("a.md"), "cccc\n").unwrap();
    soon("a write", || {
        read(&other.at("a.md")).as_deref() == Some("cccc\n")
    });
    fs::write(m.at("new.md"), "n\n").unwrap();
    soon("a new file", || {
        read(&other.at("new.md")).as_deref() == Some("n\n")
    });
    fs::write(m.at("dir/c.md"), "c\n").unwrap();
    soon("a listing", || {
        listing(&other.at("dir")) == ["b.md", "c.md"]
    });
    fs::set_permissions(m.at("a.md"), fs::Permissions::from_mode(0o600)).unwrap();
    soon("a chmod", || {
        fs::metadata(other.at("a.md")).unwrap().mode() & 0o777 == 0o600
    });
    fs::hard_link(m.at("a.md"), m.at("a-link.md")).unwrap();
    soon("a link", || {
        fs::metadata(other.at("a.md")).unwrap().nlink() == 2
    });
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(m.at("dir/b.md"))
        .unwrap();
    f.write_all(b"more\n").unwrap();
    drop(f);
    soon("an append to a file held open", || {
        let mut again = String::new();
        held.seek(SeekFrom::Start(0)).unwrap();
        held.read_to_string(&mut again).unwrap();
        again == "b\nmore\n"
    });
    fs::rename(m.at("dir/b.md"), m.at("moved.md")).unwrap();
    soon("a rename", || {
        fs::metadata(other.at("dir/b.md")).is_err()
            && read(&other.at("moved.md")).as_deref() == Some("b\nmore\n")
    });
    fs::remove_file(m.at("new.md")).unwrap();
    soon("an unlink", || fs::metadata(other.at("new.md")).is_err());
    fs::remove_file(m.at("dir/c.md")).unwrap();
    fs::remove_dir(m.at("dir")).unwrap();
    soon("an rmdir", || fs::metadata(other.at("dir")).is_err());
    soon("the root's listing", || {
        listing(other.at.path()) == ["a-link.md", "a.md", "moved.md"]
    });
    // And the other way: the second mount's changes reach the first.
    warm(m.mnt.path(), "moved.md");
    fs::write(other.at("moved.md"), "B\nMORE\n").unwrap();
    soon("a write through the second", || {
        read(&m.at("moved.md")).as_deref() == Some("B\nMORE\n")
    });
}

/// With listings kept by the kernel (`MEMFS_FUSE_TRY=cachedir`, off by
/// default), a reader it serves from that cache, whose cache is dropped
/// part-way (the agent changed the directory), goes on through its own
/// handle at its offset: memfs must go on in the listing the offset came
/// from, so that nothing is skipped or repeated (before, such a reader's
/// listing ended there: `rm -r` left files behind). And the same without
/// the kernel's cache.
#[test]
fn a_reader_part_way_through_a_cached_listing_goes_on_where_it_was() {
    let test = "a_reader_part_way_through_a_cached_listing_goes_on_where_it_was";
    if skip_without_fuse(test) {
        return;
    }
    for env in [("MEMFS_FUSE_TRY", "cachedir"), ("MEMFS_FUSE_TRY", "")] {
        let m = Mounted::start_with_env(&[], &[env]);
        a_reader_goes_on_where_it_was(&m);
    }
}

fn a_reader_goes_on_where_it_was(m: &Mounted) {
    let dir = m.at("big");
    fs::create_dir(&dir).unwrap();
    for i in 0..3000 {
        fs::write(dir.join(format!("f{i:04}.md")), "x").unwrap();
    }
    // A first reader fills the kernel's cache of the listing.
    let all = listing(&dir);
    assert_eq!(all.len(), 3000);
    // A second one is served from it, part-way (one getdents holds about a
    // thousand of these names)...
    let mut reader = fs::read_dir(&dir).unwrap();
    let mut seen: Vec<String> = (&mut reader)
        .take(10)
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    // ...when the agent makes a name that sorts first: the cache is dropped.
    let v = m.tool(r#"{"command":"create","path":"/memories/big/a-first.md","file_text":"a\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    seen.extend(reader.map(|e| e.unwrap().file_name().into_string().unwrap()));
    for name in &all {
        let times = seen.iter().filter(|s| *s == name).count();
        assert_eq!(
            times,
            1,
            "{name} seen {times} times in {} names",
            seen.len()
        );
    }
    assert_eq!(listing(&dir).len(), 3001);
}
