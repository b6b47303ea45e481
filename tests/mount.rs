//! The mount as people use it, with the agent working on the same memory:
//! both directions of visibility, durability of mount writes, clean and
//! unclean shutdowns, and the mount point's errors.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use common::{memfs, skip_without_fuse, Mounted};

#[test]
fn tool_changes_are_seen_at_once_through_the_mount() {
    if skip_without_fuse("tool_changes_are_seen_at_once_through_the_mount") {
        return;
    }
    let m = Mounted::start(&[]);
    // A name the kernel has looked up and found missing (a cached negative entry)...
    assert!(fs::metadata(m.at("new.md")).is_err());
    m.tool(r#"{"command":"create","path":"/memories/new.md","file_text":"one\n"}"#);
    // ...exists the moment the tool says so.
    assert_eq!(fs::read_to_string(m.at("new.md")).unwrap(), "one\n");
    // A reader that holds the file open and has its pages cached sees the edit.
    let mut held = fs::File::open(m.at("new.md")).unwrap();
    let mut first = String::new();
    held.read_to_string(&mut first).unwrap();
    let before = fs::metadata(m.at("new.md")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    m.tool(r#"{"command":"str_replace","path":"/memories/new.md","old_str":"one","new_str":"one, two, three"}"#);
    held.seek(SeekFrom::Start(0)).unwrap();
    let mut again = String::new();
    held.read_to_string(&mut again).unwrap();
    assert_eq!(again, "one, two, three\n");
    let after = fs::metadata(m.at("new.md")).unwrap();
    assert_eq!(after.len(), 16);
    assert!(
        after.modified().unwrap() > before.modified().unwrap(),
        "mtime moves so editors notice"
    );
    assert!(after.ctime_nsec() != before.ctime_nsec() || after.ctime() > before.ctime());
    // insert, rename and delete likewise.
    m.tool(
        r#"{"command":"insert","path":"/memories/new.md","insert_line":0,"insert_text":"zero\n"}"#,
    );
    assert_eq!(
        fs::read_to_string(m.at("new.md")).unwrap(),
        "zero\none, two, three\n"
    );
    let listed: Vec<String> = fs::read_dir(m.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, ["new.md"]);
    m.tool(
        r#"{"command":"rename","old_path":"/memories/new.md","new_path":"/memories/dir/moved.md"}"#,
    );
    assert!(fs::metadata(m.at("new.md")).is_err());
    assert_eq!(
        fs::read_to_string(m.at("dir/moved.md")).unwrap(),
        "zero\none, two, three\n"
    );
    m.tool(r#"{"command":"delete","path":"/memories/dir"}"#);
    assert!(fs::metadata(m.at("dir")).is_err());
    assert_eq!(fs::read_dir(m.mnt.path()).unwrap().count(), 0);
}

#[test]
fn mount_changes_are_seen_by_the_tool() {
    if skip_without_fuse("mount_changes_are_seen_by_the_tool") {
        return;
    }
    let m = Mounted::start(&[]);
    fs::create_dir_all(m.at("notes/deep")).unwrap();
    fs::write(m.at("notes/deep/a.md"), "written by a person\n").unwrap();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(m.at("notes/deep/a.md"))
        .unwrap();
    f.write_all(b"and appended\n").unwrap();
    // Still open and unflushed: the agent already sees it.
    assert_eq!(
        m.view("/memories/notes/deep/a.md"),
        "Here's the content of /memories/notes/deep/a.md with line numbers:\n     1\twritten by a person\n     2\tand appended"
    );
    drop(f);
    fs::rename(m.at("notes/deep/a.md"), m.at("notes/b.md")).unwrap();
    assert!(
        m.view("/memories")
            .ends_with("\t/memories/notes/\n33\t/memories/notes/b.md\n0\t/memories/notes/deep/"),
        "{}",
        m.view("/memories")
    );
}

#[test]
fn fsync_makes_a_mount_write_durable_and_shutdown_writes_the_rest() {
    if skip_without_fuse("fsync_makes_a_mount_write_durable_and_shutdown_writes_the_rest") {
        return;
    }
    let mut m = Mounted::start(&[]);
    let mut f = fs::File::create(m.at("synced.md")).unwrap();
    f.write_all(b"durable after fsync\n").unwrap();
    f.sync_all().unwrap();
    // On disk while still mounted and open.
    assert_eq!(
        fs::read_to_string(m.on_disk("synced.md")).unwrap(),
        "durable after fsync\n"
    );
    // Closed without fsync: written out soon after close.
    fs::write(m.at("closed.md"), "closed\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while fs::read_to_string(m.on_disk("closed.md")).ok().as_deref() != Some("closed\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "closed.md was not written out after close"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Still open at shutdown: written at unmount.
    let mut open = fs::File::create(m.at("open.md")).unwrap();
    open.write_all(b"still open\n").unwrap();
    drop(open);
    fs::set_permissions(
        m.at("synced.md"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    drop(f);
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    assert!(err.contains("everything is written out"), "{err}");
    assert_eq!(
        fs::read_to_string(m.on_disk("open.md")).unwrap(),
        "still open\n"
    );
    assert_eq!(
        fs::metadata(m.on_disk("synced.md")).unwrap().mode() & 0o777,
        0o640
    );
    // And a new mount serves it all again.
    m.spawn(&[]);
    assert_eq!(fs::read_to_string(m.at("open.md")).unwrap(), "still open\n");
    assert_eq!(
        fs::metadata(m.at("synced.md")).unwrap().mode() & 0o777,
        0o640
    );
}

#[test]
fn umount_from_outside_ends_memfs_cleanly() {
    if skip_without_fuse("umount_from_outside_ends_memfs_cleanly") {
        return;
    }
    let mut m = Mounted::start(&[]);
    fs::write(m.at("a.md"), "a\n").unwrap();
    let ok = std::process::Command::new("umount")
        .arg(m.mnt.path())
        .status()
        .unwrap()
        .success()
        || std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(m.mnt.path())
            .status()
            .unwrap()
            .success();
    assert!(ok);
    let status = m.child.take().unwrap().wait().unwrap();
    assert!(status.success());
    assert_eq!(fs::read_to_string(m.on_disk("a.md")).unwrap(), "a\n");
}

#[test]
fn a_busy_mount_is_detached_on_shutdown() {
    if skip_without_fuse("a_busy_mount_is_detached_on_shutdown") {
        return;
    }
    let mut m = Mounted::start(&[]);
    let mut busy = fs::File::create(m.at("busy.md")).unwrap();
    busy.write_all(b"open while stopping\n").unwrap();
    let _cwd_holder = fs::read_dir(m.mnt.path()).unwrap();
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    assert!(
        !memfs::fuse::mountpoint::is_mount_point(m.mnt.path()),
        "the mount is detached"
    );
    assert_eq!(
        fs::read_to_string(m.on_disk("busy.md")).unwrap(),
        "open while stopping\n"
    );
}

#[test]
fn a_stale_mount_left_by_a_crash_is_cleared() {
    if skip_without_fuse("a_stale_mount_left_by_a_crash_is_cleared") {
        return;
    }
    let mut m = Mounted::start(&[]);
    fs::write(m.at("kept.md"), "kept\n").unwrap();
    let f = fs::File::open(m.at("kept.md")).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut child = m.child.take().unwrap();
    child.kill().unwrap(); // SIGKILL: the mount is left behind, disconnected
    child.wait().unwrap();
    let stale = fs::read_dir(m.mnt.path()).unwrap_err();
    assert_eq!(stale.raw_os_error(), Some(libc::ENOTCONN));
    m.spawn(&[]);
    assert_eq!(fs::read_to_string(m.at("kept.md")).unwrap(), "kept\n");
}

#[test]
fn read_only_mount_refuses_writes_but_the_agent_writes() {
    if skip_without_fuse("read_only_mount_refuses_writes_but_the_agent_writes") {
        return;
    }
    let m = Mounted::start(&["--read-only"]);
    let err = fs::write(m.at("x.md"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    m.tool(r#"{"command":"create","path":"/memories/agent.md","file_text":"from the agent\n"}"#);
    assert_eq!(
        fs::read_to_string(m.at("agent.md")).unwrap(),
        "from the agent\n"
    );
}

#[test]
fn mount_point_problems_get_clear_errors() {
    if skip_without_fuse("mount_point_problems_get_clear_errors") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let run = |mountpoint: &std::path::Path| {
        let out = memfs()
            .arg("--data")
            .arg(data.path())
            .arg("mount")
            .arg(mountpoint)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let missing = data.path().join("no-such-dir");
    let (code, err) = run(&missing);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("does not exist; make it with: mkdir -p"),
        "{err}"
    );
    let full = tempfile::tempdir().unwrap();
    fs::write(full.path().join("x"), "x").unwrap();
    let (code, err) = run(full.path());
    assert_eq!(code, Some(2));
    assert!(err.contains("is not empty"), "{err}");
    let file = full.path().join("x");
    let (_, err) = run(&file);
    assert!(err.contains("is not a directory"), "{err}");
}

#[test]
fn editor_artifacts_stay_out_of_the_agents_listing() {
    if skip_without_fuse("editor_artifacts_stay_out_of_the_agents_listing") {
        return;
    }
    let m = Mounted::start(&[]);
    for name in [
        "notes.md",
        "4913",
        "notes.md~",
        "#notes.md#",
        ".notes.md.swp",
    ] {
        fs::write(m.at(name), "x").unwrap();
    }
    assert!(
        m.view("/memories")
            .ends_with("\n5\t/memories\n1\t/memories/notes.md"),
        "{}",
        m.view("/memories")
    );
}

#[test]
fn statfs_reports_capacity_from_the_store_limit() {
    if skip_without_fuse("statfs_reports_capacity_from_the_store_limit") {
        return;
    }
    let m = Mounted::start(&["--max-store-size", "64M"]);
    fs::write(m.at("a"), vec![b'a'; 1 << 20]).unwrap();
    let st = rustix::fs::statvfs(m.mnt.path()).unwrap();
    assert_eq!(st.f_blocks * st.f_frsize, 64 << 20);
    assert_eq!(st.f_bavail * st.f_frsize, 63 << 20);
    assert!(st.f_namemax == 255);
    // Over the limits: EFBIG for a file, ENOSPC for the store.
    let big = fs::write(m.at("big"), vec![0u8; (1 << 20) + 1]).unwrap_err();
    assert_eq!(big.raw_os_error(), Some(libc::EFBIG));
}
