//! The mount as people use it, with the agent working on the same memory:
//! both directions of visibility, durability of mount writes, clean and
//! unclean shutdowns, and the mount point's errors.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use common::{content, memfs, skip, skip_without_fuse, Mounted};

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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
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

/// The agent renames a file a person is still writing through the mount:
/// the person's bytes follow the file to its new name and survive a
/// restart (they were once flushed at the new name and then overwritten
/// by the rename of the never-saved old name; tests/model.rs keeps the
/// shrunk case).
#[test]
fn a_file_the_agent_renames_while_a_person_writes_it_keeps_the_bytes() {
    if skip_without_fuse("a_file_the_agent_renames_while_a_person_writes_it_keeps_the_bytes") {
        return;
    }
    let mut m = Mounted::start(&[]);
    let mut f = fs::File::create(m.at("draft.md")).unwrap();
    f.write_all(b"typed by a person\n").unwrap();
    let renamed = m.tool(
        r#"{"command":"rename","old_path":"/memories/draft.md","new_path":"/memories/final.md"}"#,
    );
    assert!(
        content(&renamed).contains("Successfully renamed"),
        "{renamed}"
    );
    drop(f);
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    m.spawn(&[]);
    assert_eq!(
        fs::read_to_string(m.at("final.md")).unwrap(),
        "typed by a person\n"
    );
    assert!(fs::metadata(m.at("draft.md")).is_err());
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

#[test]
fn serve_stdio_with_a_mount_does_both_in_one_process() {
    if skip_without_fuse("serve_stdio_with_a_mount_does_both_in_one_process") {
        return;
    }
    use std::io::BufRead;
    let data = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let mut child = memfs()
        .arg("--data")
        .arg(data.path())
        .args(["serve", "--stdio", "--mount"])
        .arg(mnt.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut call = |line: &str| {
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        serde_json::from_str::<serde_json::Value>(&answer).unwrap()
    };
    // The first answer proves the store is up; the mount is made before serving.
    let r =
        call(r#"{"command":"create","path":"/memories/plan.md","file_text":"1. write tests\n"}"#);
    assert_eq!(r["is_error"], false, "{r}");
    assert!(memfs::fuse::mountpoint::is_mount_point(mnt.path()));
    assert_eq!(
        fs::read_to_string(mnt.path().join("plan.md")).unwrap(),
        "1. write tests\n"
    );
    fs::write(mnt.path().join("plan.md"), "1. write tests\n2. ship\n").unwrap();
    let r = call(r#"{"command":"view","path":"/memories/plan.md"}"#);
    assert_eq!(r["content"], "Here's the content of /memories/plan.md with line numbers:\n     1\t1. write tests\n     2\t2. ship");
    drop(stdin); // end of input: unmount, write out, exit 0
    assert!(child.wait().unwrap().success());
    assert!(!memfs::fuse::mountpoint::is_mount_point(mnt.path()));
    assert_eq!(
        fs::read_to_string(data.path().join("memories/plan.md")).unwrap(),
        "1. write tests\n2. ship\n"
    );
}

#[test]
fn the_socket_is_private_and_serves_many_clients_at_once() {
    if skip_without_fuse("the_socket_is_private_and_serves_many_clients_at_once") {
        return;
    }
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;
    let m = Mounted::start(&[]);
    let sock = m.data.path().join(".memfs/sock");
    assert_eq!(fs::metadata(&sock).unwrap().mode() & 0o777, 0o600);
    // A client that sends garbage and one that hangs up mid-line harm nobody.
    let mut rude = UnixStream::connect(&sock).unwrap();
    rude.write_all(b"{\"command\": \"create\", \"path\": \"/memories/half")
        .unwrap();
    drop(rude);
    let mut noisy = UnixStream::connect(&sock).unwrap();
    noisy.write_all(b"\xff\xfe garbage\n[1,2,3]\n").unwrap();
    let mut answers = BufReader::new(noisy.try_clone().unwrap());
    let mut line = String::new();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains("not valid JSON"), "{line}");
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let conn = UnixStream::connect(&sock).unwrap();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                // Pipelined: all lines first, then all answers.
                for k in 0..25 {
                    let line = format!("{{\"command\":\"create\",\"path\":\"/memories/c{c}/f{k}.md\",\"file_text\":\"{c}-{k}\\n\"}}\n");
                    conn.write_all(line.as_bytes()).unwrap();
                }
                for _ in 0..25 {
                    let mut answer = String::new();
                    reader.read_line(&mut answer).unwrap();
                    assert!(answer.contains("File created successfully"), "{answer}");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    for c in 0..8 {
        assert_eq!(fs::read_dir(m.at(&format!("c{c}"))).unwrap().count(), 25);
        assert_eq!(
            fs::read_to_string(m.on_disk(&format!("c{c}/f24.md"))).unwrap(),
            format!("{c}-24\n")
        );
    }
    assert!(!m.at("half").exists());
}

#[test]
fn a_user_without_fusermount3_is_told_what_to_install() {
    if skip_without_fuse("a_user_without_fusermount3_is_told_what_to_install")
        || !rustix::process::geteuid().is_root()
    {
        skip(
            "a_user_without_fusermount3_is_told_what_to_install",
            "needs root to run as nobody",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    // `memfs mount` as user nobody, with the given PATH.
    let mount_as_nobody = |path_env: &str| {
        let out = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "env",
                path_env,
            ])
            .arg(env!("CARGO_BIN_EXE_memfs"))
            .arg("--data")
            .arg(dir.path().join("data"))
            .arg("mount")
            .arg(&mnt)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = mount_as_nobody("PATH=/nonexistent");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("needs fusermount3 on the PATH (Debian: apt-get install fuse3)"),
        "{err}"
    );
    // With fusermount3 but a root-only /dev/fuse (as in some containers), the
    // message says that instead of a bare "Permission denied".
    let dev_fuse_private = fs::metadata("/dev/fuse").unwrap().mode() & 0o006 == 0;
    if dev_fuse_private && std::path::Path::new("/usr/bin/fusermount3").exists() {
        let (_, err) = mount_as_nobody("PATH=/usr/bin:/bin");
        assert!(err.contains("/dev/fuse is not open to this user"), "{err}");
    }
}

#[test]
fn a_client_flooding_the_socket_does_not_stall_the_others() {
    if skip_without_fuse("a_client_flooding_the_socket_does_not_stall_the_others") {
        return;
    }
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;
    let m = Mounted::start(&["--max-file-size", "1K"]);
    let sock = m.data.path().join(".memfs/sock");
    // Floods without ever reading an answer: the server blocks on that
    // client's full socket buffer, in that client's threads only.
    let mut flood = UnixStream::connect(&sock).unwrap();
    let flooder = std::thread::spawn(move || {
        let line = b"{\"command\":\"view\",\"path\":\"/memories\"}\n".repeat(1000);
        for _ in 0..200 {
            if flood.write_all(&line).is_err() {
                break;
            }
        }
        flood
    });
    // An oversized line on another client is refused with a clear error.
    let mut big = UnixStream::connect(&sock).unwrap();
    let huge = format!(
        "{{\"command\":\"create\",\"path\":\"/memories/h\",\"file_text\":\"{}\"}}\n",
        "h".repeat(200_000)
    );
    big.write_all(huge.as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(big).read_line(&mut answer).unwrap();
    assert!(answer.contains("the line is longer than"), "{answer}");
    // Meanwhile a well-behaved client is served as usual.
    let (done, finished) = std::sync::mpsc::channel();
    let polite = std::thread::spawn(move || {
        for k in 0..50 {
            let answer = socket_call(
                &sock,
                &format!(
                    r#"{{"command":"create","path":"/memories/p{k}.md","file_text":"{k}\n"}}"#
                ),
            );
            assert!(answer.contains("File created successfully"), "{answer}");
        }
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("a polite client was stalled by a flooding one");
    polite.join().unwrap();
    drop(flooder); // the flooding thread may still be blocked; its socket closes with the test
    assert_eq!(fs::read_dir(m.mnt.path()).unwrap().count(), 50);
}

fn socket_call(sock: &std::path::Path, line: &str) -> String {
    use std::io::{BufRead, BufReader};
    let mut conn = std::os::unix::net::UnixStream::connect(sock).unwrap();
    conn.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(conn).read_line(&mut answer).unwrap();
    answer
}

/// Sharing a mount with another user: the root is 0700, so with
/// `--allow-other` alone another user is still refused; `--dir-mode` and
/// `--file-mode` show modes that let them read (and, here, not write).
#[test]
fn another_user_reads_the_mount_with_allow_other_and_shown_modes() {
    let test = "another_user_reads_the_mount_with_allow_other_and_shown_modes";
    if skip_without_fuse(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        skip(test, "needs root to act as another user");
        return;
    }
    let as_nobody = |script: &str| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                script,
            ])
            .output()
            .unwrap()
    };
    let mut m = Mounted::start(&["--allow-other"]);
    let v =
        m.tool(r#"{"command":"create","path":"/memories/shared/a.md","file_text":"for all\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let refused = as_nobody(&format!("cat {}", m.at("shared/a.md").display()));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Permission denied"));
    m.stop();

    m.spawn(&["--allow-other", "--dir-mode", "0755", "--file-mode", "0644"]);
    let read = as_nobody(&format!("cat {}", m.at("shared/a.md").display()));
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    assert_eq!(read.stdout, b"for all\n");
    let write = as_nobody(&format!("echo x > {}", m.at("shared/b.md").display()));
    assert!(!write.status.success());
    // What is stored is not changed by what the mount shows.
    let meta = std::fs::metadata(m.on_disk("shared/a.md")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
}

/// POSIX corners, each done on the mount and on a tmpfs, with the same
/// outcome: setgid directories, access times as relatime moves them, and
/// symlink targets up to PATH_MAX - 1 bytes.
#[test]
fn posix_corners_match_tmpfs() {
    let test = "posix_corners_match_tmpfs";
    if skip_without_fuse(test) {
        return;
    }
    if !common::can_mount() {
        skip(test, "needs root to mount a tmpfs");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let corners = |root: &std::path::Path| -> Vec<String> {
        let mut out = Vec::new();
        // setgid: the group passes to new entries, the bit to subdirectories.
        let g = root.join("g");
        fs::create_dir(&g).unwrap();
        std::os::unix::fs::chown(&g, None, Some(100)).unwrap();
        fs::set_permissions(&g, fs::Permissions::from_mode(0o2775)).unwrap();
        fs::write(g.join("f"), "x").unwrap();
        fs::create_dir(g.join("sub")).unwrap();
        for p in [g.join("f"), g.join("sub")] {
            let m = fs::metadata(&p).unwrap();
            out.push(format!(
                "{} gid {} setgid {}",
                p.file_name().unwrap().to_string_lossy(),
                m.gid(),
                m.mode() & 0o2000 != 0
            ));
        }
        // relatime: a read moves an access time older than the last change,
        // and not one that is newer and less than a day old.
        let f = root.join("a.txt");
        fs::write(&f, "data").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
        fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_times(fs::FileTimes::new().set_accessed(old))
            .unwrap();
        let _ = fs::read(&f).unwrap();
        let first = fs::metadata(&f).unwrap().accessed().unwrap();
        out.push(format!("read moved an old atime: {}", first > old));
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let _ = fs::read(&f).unwrap();
        let second = fs::metadata(&f).unwrap().accessed().unwrap();
        out.push(format!("a second read moved it: {}", second != first));
        // Symlink targets: 4,095 bytes is the longest Linux takes.
        let target = format!("{}{}", "d/".repeat(2000), "x".repeat(95));
        std::os::unix::fs::symlink(&target, root.join("long")).unwrap();
        out.push(format!(
            "4095-byte target read back: {}",
            fs::read_link(root.join("long")).unwrap().as_os_str().len()
        ));
        let too_long = format!("{target}y");
        let err = std::os::unix::fs::symlink(&too_long, root.join("longer")).unwrap_err();
        out.push(format!("4096 bytes: {:?}", err.raw_os_error()));
        out
    };
    let tmpfs = common::Tmpfs::mount("16m");
    let expected = corners(tmpfs.path());
    let m = Mounted::start(&[]);
    assert_eq!(corners(m.mnt.path()), expected);
    assert_eq!(expected[2], "read moved an old atime: true");
}

/// Names that are not there are cached as absent (negative entries); a tool
/// change that makes one is still visible through the mount before its
/// result returns, in an existing directory and in new ones.
#[test]
fn a_name_cached_as_absent_appears_as_soon_as_the_agent_makes_it() {
    let test = "a_name_cached_as_absent_appears_as_soon_as_the_agent_makes_it";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    for rel in ["late.md", "new/dir/late.md"] {
        for _ in 0..3 {
            assert!(fs::metadata(m.at(rel)).is_err(), "{rel} is not there yet");
        }
        let v = m.tool(&format!(
            r#"{{"command":"create","path":"/memories/{rel}","file_text":"here\n"}}"#
        ));
        assert_eq!(v["is_error"], false, "{v}");
        assert_eq!(fs::read_to_string(m.at(rel)).unwrap(), "here\n", "{rel}");
    }
    // And a rename's new name.
    assert!(fs::metadata(m.at("moved.md")).is_err());
    let v = m.tool(
        r#"{"command":"rename","old_path":"/memories/late.md","new_path":"/memories/moved.md"}"#,
    );
    assert_eq!(v["is_error"], false, "{v}");
    assert_eq!(fs::read_to_string(m.at("moved.md")).unwrap(), "here\n");
    assert!(fs::metadata(m.at("late.md")).is_err());
}

/// Read-only behaviour, covered here because pjdfstest's six EROFS cases
/// cannot run (their remount is refused as busy by the kernel, on tmpfs too,
/// because of the harness' own open files): on a read-only memfs mount every
/// change fails with EROFS, as on a read-only tmpfs, and reads work.
#[test]
fn a_read_only_mount_refuses_every_change_with_erofs_like_tmpfs() {
    let test = "a_read_only_mount_refuses_every_change_with_erofs_like_tmpfs";
    if skip_without_fuse(test) {
        return;
    }
    if !common::can_mount() {
        skip(test, "needs root to mount a tmpfs");
        return;
    }
    use std::os::unix::fs::{symlink, PermissionsExt};
    let seed = |root: &std::path::Path| {
        fs::write(root.join("f"), "data").unwrap();
        fs::create_dir(root.join("d")).unwrap();
    };
    let attempts = |root: &std::path::Path| -> Vec<(String, Option<i32>)> {
        let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
        let f = root.join("f");
        let new = root.join("new");
        let fifo = std::ffi::CString::new(root.join("fifo").to_str().unwrap()).unwrap();
        vec![
            (
                "chmod".into(),
                errno(fs::set_permissions(&f, fs::Permissions::from_mode(0o600))),
            ),
            (
                "chown".into(),
                errno(std::os::unix::fs::chown(&f, Some(0), Some(0))),
            ),
            ("link".into(), errno(fs::hard_link(&f, &new))),
            ("mkdir".into(), errno(fs::create_dir(&new))),
            // SAFETY: a valid NUL-terminated path; mkfifo reads it only.
            (
                "mkfifo".into(),
                (unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) } != 0)
                    .then(|| std::io::Error::last_os_error().raw_os_error().unwrap()),
            ),
            (
                "open O_CREAT".into(),
                errno(fs::File::create(&new).map(drop)),
            ),
            (
                "open for writing".into(),
                errno(fs::OpenOptions::new().write(true).open(&f).map(drop)),
            ),
            ("rename".into(), errno(fs::rename(&f, &new))),
            ("rmdir".into(), errno(fs::remove_dir(root.join("d")))),
            ("symlink".into(), errno(symlink("f", &new))),
            (
                "truncate".into(),
                errno(
                    fs::OpenOptions::new()
                        .write(true)
                        .open(&f)
                        .and_then(|h| h.set_len(1)),
                ),
            ),
            ("unlink".into(), errno(fs::remove_file(&f))),
            ("read".into(), errno(fs::read(&f).map(drop))),
        ]
    };
    let tmpfs = common::Tmpfs::mount("4m");
    seed(tmpfs.path());
    tmpfs.remount("ro");
    let expected = attempts(tmpfs.path());
    assert!(
        expected
            .iter()
            .filter(|(op, _)| op != "read")
            .all(|(_, e)| *e == Some(libc::EROFS)),
        "{expected:?}"
    );
    let mut m = Mounted::start(&[]);
    seed(m.mnt.path());
    m.stop();
    m.spawn(&["--read-only"]);
    assert_eq!(attempts(m.mnt.path()), expected);
    // And nothing changed on disk.
    assert_eq!(fs::read_to_string(m.on_disk("f")).unwrap(), "data");
}
