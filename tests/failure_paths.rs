//! Failure paths of the real binary, forced rather than hoped for: kill -9
//! at each step of the persister (strace's signal injection), disk calls that
//! fail (strace's error injection), signals during a slow unmount.
//! Each asks: is every acknowledged change on disk, is every file at an
//! acknowledged state, and does memfs say the truth about what happened?

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{content, disk_state, exec, history_matches_disk, skip, skip_without_fuse, Mounted};

fn have_strace(test: &str) -> bool {
    let found = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found || !skip(test, "strace is not installed (CI installs it)")
}

/// The command line that runs memfs under strace, tracing `trace` and
/// injecting `inject` (strace's `-e trace=... -e inject=...`).
fn strace(trace: &str, inject: &str) -> Vec<String> {
    [
        "strace",
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        trace,
        "-e",
        inject,
    ]
    .map(String::from)
    .to_vec()
}

/// memfs run under strace (see [`strace`]); its arguments follow.
fn strace_command(trace: &str, inject: &str) -> Command {
    let line = strace(trace, inject);
    let mut command = Command::new(&line[0]);
    command.args(&line[1..]).arg(env!("CARGO_BIN_EXE_memfs"));
    command
}

/// Waits for a child to exit by itself, up to `limit`.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The memfs process of a mount started under strace (strace's child).
fn memfs_pid(m: &Mounted) -> rustix::process::Pid {
    let tracer = m.child.as_ref().unwrap().id();
    let children = fs::read_to_string(format!("/proc/{tracer}/task/{tracer}/children")).unwrap();
    let pid: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    rustix::process::Pid::from_raw(pid).unwrap()
}

/// SIGTERM to memfs itself (not to strace), then its exit status (strace's
/// is memfs's) and stderr.
fn terminate(m: &mut Mounted) -> (std::process::ExitStatus, String) {
    rustix::process::kill_process(memfs_pid(m), rustix::process::Signal::TERM).unwrap();
    let mut child = m.child.take().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(30)).expect("memfs stops within 30 s");
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
    (status, err)
}

/// Ends a mount whose memfs was killed, as the next start would.
fn clear(m: &mut Mounted) {
    if let Some(mut child) = m.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    if memfs::fuse::mountpoint::is_mount_point(m.mnt.path()) {
        memfs::fuse::mountpoint::lazy_unmount(m.mnt.path());
    }
}

fn view_file(data: &Path, path: &str) -> Value {
    let (_, v) = exec(data, &format!(r#"{{"command":"view","path":"{path}"}}"#));
    v
}

/// An editor's save: the new text to a swap file, then a rename over the
/// original, then fsync. Before, the replacing rename was two renames on
/// disk (the target to the trash, then the source onto it), and a crash
/// between them left no file at the name. kill -9 at each rename in turn.
#[test]
fn a_crash_at_any_rename_of_a_save_by_rename_leaves_the_old_or_the_new_file() {
    let test = "a_crash_at_any_rename_of_a_save_by_rename_leaves_the_old_or_the_new_file";
    if skip_without_fuse(test) || !have_strace(test) {
        return;
    }
    // strace counts each syscall separately: kill at the k-th of each.
    let points = ["renameat", "renameat2"]
        .into_iter()
        .flat_map(|call| (1..=4).map(move |k| (call, k)));
    for (call, k) in points {
        let mut m = Mounted::unstarted();
        fs::create_dir(m.data.path().join("memories")).unwrap();
        fs::write(m.data.path().join("memories/a.txt"), "old\n").unwrap();
        let inject = format!("inject={call}:signal=KILL:when={k}");
        m.spawn_wrapped(&strace("trace=renameat,renameat2", &inject), &[]);
        // Each step may fail once memfs is dead (ENOTCONN): the crash is the point.
        let _ = fs::write(m.at(".a.txt.swp"), "new\n");
        let _ = fs::rename(m.at(".a.txt.swp"), m.at("a.txt"));
        let _ = fs::File::open(m.at("a.txt")).and_then(|f| f.sync_all());
        let killed = wait_exit(m.child.as_mut().unwrap(), Duration::from_secs(2)).is_some();
        clear(&mut m);
        let v = view_file(m.data.path(), "/memories/a.txt");
        let text = content(&v);
        assert!(
            text.ends_with("1\told") || text.ends_with("1\tnew"),
            "killed at {call} {k} (killed: {killed}): {v}"
        );
    }
}

/// The barrier (an `fdatasync`) failing once after every step of a batch succeeded: the change
/// is in memory and written, only not confirmed durable. Before, the agent
/// was told it "did not take effect", and its retry said "already exists".
#[test]
fn a_failed_barrier_is_not_reported_as_a_change_that_did_not_happen() {
    let test = "a_failed_barrier_is_not_reported_as_a_change_that_did_not_happen";
    if !have_strace(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = strace_command("trace=fdatasync", "inject=fdatasync:error=EIO:when=1")
        .arg("--data")
        .arg(dir.path())
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut call = |line: &str| -> Value {
        use std::io::BufRead;
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    let made = call(r#"{"command":"create","path":"/memories/a.md","file_text":"hello\n"}"#);
    assert_eq!(made["is_error"], true, "{made}");
    let text = content(&made);
    assert!(!text.contains("did not take effect"), "{text}");
    assert!(text.contains("is in memory"), "{text}");
    // The next barrier succeeds and covers it; memory, disk and the message agree.
    let again = call(r#"{"command":"view","path":"/memories/a.md"}"#);
    assert!(content(&again).ends_with("1\thello"), "{again}");
    // strace counts `when=1` per thread, and the journal's appends are made
    // by whichever thread leads a group commit: a later change whose leader
    // had not synced before fails once too, the same way (never "did not
    // take effect"). One of the next few succeeds, with everything before it.
    let mut made = Vec::new();
    let succeeded = (0..8).any(|i| {
        let path = format!("/memories/b{i}.md");
        let next = call(
            &serde_json::json!({"command": "create", "path": path, "file_text": "b\n"}).to_string(),
        );
        made.push(path);
        if next["is_error"] == true {
            let text = content(&next);
            assert!(text.contains("is in memory"), "{text}");
            return false;
        }
        true
    });
    assert!(
        succeeded,
        "no change was confirmed after the disk recovered"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(
        fs::read_to_string(dir.path().join("memories/a.md")).unwrap(),
        "hello\n"
    );
    for path in made {
        let on_disk = dir.path().join(path.trim_start_matches('/'));
        assert_eq!(fs::read_to_string(&on_disk).unwrap(), "b\n", "{path}");
    }
}

/// SIGTERM while the unmount is slow (strace delays umount2 by half a second)
/// and while the socket file has vanished: memfs still writes out everything,
/// including a file still open, and exits 0 only after. Before, the signal
/// thread unmounted while `main` returned and the process exited first.
#[test]
fn a_signal_during_a_slow_unmount_still_writes_everything_out() {
    let test = "a_signal_during_a_slow_unmount_still_writes_everything_out";
    if skip_without_fuse(test) || !have_strace(test) {
        return;
    }
    let mut m = Mounted::unstarted();
    m.spawn_wrapped(
        &strace("trace=umount2", "inject=umount2:delay_enter=500000"),
        &[],
    );
    fs::write(m.at("closed.md"), "closed\n").unwrap();
    let mut open = fs::File::create(m.at("open.md")).unwrap();
    open.write_all(b"still open\n").unwrap();
    fs::remove_file(m.data.path().join(".memfs/sock")).unwrap();
    let (status, err) = terminate(&mut m);
    drop(open);
    assert!(status.success(), "{status}: {err}");
    clear(&mut m);
    assert_eq!(
        fs::read_to_string(m.on_disk("closed.md")).unwrap(),
        "closed\n"
    );
    assert_eq!(
        fs::read_to_string(m.on_disk("open.md")).unwrap(),
        "still open\n"
    );
}

/// A tool change the disk refuses is undone in memory, and the mount's view
/// of it with it; the person's own unsaved bytes in another file are not
/// reloaded away, and a later fsync writes them.
#[test]
fn a_refused_write_undoes_the_agents_change_and_keeps_the_persons() {
    let test = "a_refused_write_undoes_the_agents_change_and_keeps_the_persons";
    if skip_without_fuse(test) || !have_strace(test) {
        return;
    }
    let mut m = Mounted::unstarted();
    fs::create_dir(m.data.path().join("memories")).unwrap();
    fs::write(m.data.path().join("memories/agent.md"), "cat\n").unwrap();
    // Every append to the journal fails with ENOSPC (`pwrite64` is the
    // journal's own syscall): the person's new file lives in memory until
    // its fsync (which must fail); the agent's edit is refused.
    m.spawn_wrapped(
        &strace("trace=pwrite64", "inject=pwrite64:error=ENOSPC"),
        &[],
    );
    let mut person = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(m.at("person.md"))
        .unwrap();
    person.write_all(b"typed text\n").unwrap();
    // The agent's edit: refused by the disk, so it did not happen.
    let edit = m.tool(
        r#"{"command":"str_replace","path":"/memories/agent.md","old_str":"cat","new_str":"dog"}"#,
    );
    assert_eq!(edit["is_error"], true, "{edit}");
    assert!(content(&edit).contains("did not take effect"), "{edit}");
    assert_eq!(
        fs::read_to_string(m.at("agent.md")).unwrap(),
        "cat\n",
        "the mount shows what the agent was told"
    );
    assert!(m.view("/memories/agent.md").ends_with("1\tcat"));
    // The person's bytes are still there, and fsync says the truth.
    assert_eq!(
        fs::read_to_string(m.at("person.md")).unwrap(),
        "typed text\n"
    );
    let synced = person.sync_all();
    assert!(
        synced.is_err(),
        "fsync cannot succeed while the disk refuses"
    );
    drop(person);
    assert_eq!(
        fs::read_to_string(m.at("person.md")).unwrap(),
        "typed text\n"
    );
    let (status, err) = terminate(&mut m);
    assert!(!status.success(), "not everything could be written: {err}");
    assert!(err.contains("writing out failed"), "{err}");
    clear(&mut m);
}

/// A directory read in progress when the agent changes a file: the listing's
/// later chunks must not hand the kernel the file's old attributes. Before,
/// READDIRPLUS replied from the snapshot taken at offset 0, so after the
/// tool's invalidation the kernel cached the old size again: `stat` showed
/// it, and `read` cut the new bytes to it.
#[test]
fn a_listing_in_progress_does_not_recache_stale_attributes() {
    let test = "a_listing_in_progress_does_not_recache_stale_attributes";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    const FILES: usize = 3_000;
    let mut lines = String::new();
    for i in 0..FILES {
        lines.push_str(&format!(
            "{{\"command\":\"create\",\"path\":\"/memories/d/file-with-a-longish-name-{i:05}\",\"file_text\":\"cat\"}}\n"
        ));
    }
    let mut conn =
        std::os::unix::net::UnixStream::connect(m.data.path().join(".memfs/sock")).unwrap();
    conn.write_all(lines.as_bytes()).unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answers = String::new();
    std::io::Read::read_to_string(&mut conn, &mut answers).unwrap();
    assert_eq!(answers.lines().count(), FILES);
    let last = format!("file-with-a-longish-name-{:05}", FILES - 1);
    // The first chunk of the listing (the snapshot is taken here), each
    // entry stat'ed as `ls -l` does (so the kernel keeps asking for
    // attributes with the names) ...
    let mut listing = fs::read_dir(m.at("d")).unwrap();
    listing.next().unwrap().unwrap().metadata().unwrap();
    // ... then the agent grows the last file ...
    let v = m.tool(&format!(
        r#"{{"command":"str_replace","path":"/memories/d/{last}","old_str":"cat","new_str":"a dog"}}"#
    ));
    assert_eq!(v["is_error"], false, "{v}");
    // ... then the rest of the listing, with attributes.
    let mut seen = Vec::new();
    for entry in listing {
        let entry = entry.unwrap();
        let len = entry.metadata().unwrap().len();
        if entry.file_name().to_str() == Some(last.as_str()) {
            seen.push(len);
        }
    }
    assert_eq!(seen, [5], "the listing's stat of the changed file");
    let path = m.at(&format!("d/{last}"));
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        5,
        "stat shows the new size"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "a dog");
}

/// What a person sets through the mount survives a restart: the root's mode
/// and times, setuid and setgid bits with a changed owner, a symlink's own
/// owner. Before, the root's were never written, `fchmod` ran before the
/// `fchown` that clears setuid, and symlinks were stored as root's.
#[test]
fn metadata_set_through_the_mount_survives_a_restart() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let test = "metadata_set_through_the_mount_survives_a_restart";
    if skip_without_fuse(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        skip(test, "needs root to give files away");
        return;
    }
    let mut m = Mounted::start(&[]);
    let root = m.mnt.path().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o750)).unwrap();
    fs::write(m.at("tool"), "#!/bin/sh\n").unwrap();
    std::os::unix::fs::chown(m.at("tool"), Some(1000), Some(1000)).unwrap();
    fs::set_permissions(m.at("tool"), fs::Permissions::from_mode(0o6755)).unwrap();
    std::os::unix::fs::symlink("tool", m.at("link")).unwrap();
    std::os::unix::fs::lchown(m.at("link"), Some(1001), Some(1001)).unwrap();
    // Last, as making entries in a directory moves its mtime.
    let then = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    fs::File::open(&root).unwrap().set_modified(then).unwrap();
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    m.spawn(&[]);
    let root = fs::metadata(m.mnt.path()).unwrap();
    assert_eq!(root.mode() & 0o7777, 0o750);
    assert_eq!(root.modified().unwrap(), then);
    let tool = fs::metadata(m.at("tool")).unwrap();
    assert_eq!(
        (tool.uid(), tool.gid(), tool.mode() & 0o7777),
        (1000, 1000, 0o6755)
    );
    let link = fs::symlink_metadata(m.at("link")).unwrap();
    assert_eq!((link.uid(), link.gid()), (1001, 1001));
}

/// Each hard link is a file of its own in the data dir, so each counts
/// against --max-store-size. Before, 100 links to a 512 KiB file made 50 MiB
/// on disk under a 2 MiB limit.
#[test]
fn hard_links_count_against_the_store_limit_per_copy() {
    let test = "hard_links_count_against_the_store_limit_per_copy";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&["--max-store-size", "2M"]);
    fs::write(m.at("big"), vec![b'x'; 512 << 10]).unwrap();
    let mut made = 0;
    let mut refused = None;
    for i in 0..100 {
        match fs::hard_link(m.at("big"), m.at(&format!("link{i}"))) {
            Ok(()) => made += 1,
            Err(e) => {
                refused = e.raw_os_error();
                break;
            }
        }
    }
    assert_eq!(made, 3, "the file and 3 links fill 2 MiB");
    assert_eq!(refused, Some(libc::ENOSPC));
    // Writing to one name grows every copy, and is refused past the limit too.
    let grow = fs::OpenOptions::new()
        .append(true)
        .open(m.at("big"))
        .unwrap();
    let err = (&grow).write_all(b"one more byte").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    let on_disk: u64 = fs::read_dir(m.data.path().join("memories"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 2 << 20, "{on_disk} bytes on disk");
}

/// kill -9 at the k-th call of each disk syscall the persister makes, while
/// an agent works through `serve --stdio` one command at a time. After a
/// restart, the memory is the state after the last acknowledged command, or
/// (when the crash came after the disk had it but before the answer) after
/// the one in flight: never anything else, never a torn file.
#[test]
fn a_crash_at_any_disk_step_keeps_every_acknowledged_change() {
    let test = "a_crash_at_any_disk_step_keeps_every_acknowledged_change";
    if !have_strace(test) {
        return;
    }
    use serde_json::json;
    let script = [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "first\n"}),
        json!({"command": "create", "path": "/memories/b/c.md", "file_text": "nested\n"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "first", "new_str": "second"}),
        json!({"command": "rename", "old_path": "/memories/b", "new_path": "/memories/d"}),
        json!({"command": "insert", "path": "/memories/d/c.md", "insert_line": 0, "insert_text": "top\n"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
    ];
    // The state after each prefix of the script, from a run without faults.
    let states: Vec<Vec<(String, String)>> = {
        let dir = tempfile::tempdir().unwrap();
        let memory = memfs::Memory::open(dir.path(), memfs::Options::default()).unwrap();
        let mut states = vec![disk_state(dir.path())];
        for command in &script {
            assert!(!memory.call(command).is_error);
            // (The plain files run behind the journal: made current to compare.)
            memory.history().checkpoint().unwrap();
            states.push(disk_state(dir.path()));
        }
        states
    };
    let mut crashes = 0;
    let mut failures = Vec::new();
    // CI kills at the first three calls of each; MEMFS_CRASH_POINTS=N at N.
    let points: usize = std::env::var("MEMFS_CRASH_POINTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    for call in [
        "openat",
        "fallocate",
        "pwrite64",
        "write",
        "renameat",
        "renameat2",
        "mkdirat",
        "fdatasync",
        "fsync",
        "unlinkat",
    ] {
        for k in 1..=points {
            let dir = tempfile::tempdir().unwrap();
            let inject = format!("inject={call}:signal=KILL:when={k}");
            let mut child = strace_command(&format!("trace={call}"), &inject)
                .arg("--data")
                .arg(dir.path())
                .args(["serve", "--stdio"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut acked = 0;
            for command in &script {
                use std::io::BufRead;
                if writeln!(stdin, "{command}").is_err() {
                    break;
                }
                let mut answer = String::new();
                if stdout.read_line(&mut answer).unwrap_or(0) == 0 {
                    break; // killed
                }
                assert!(
                    answer.contains("\"is_error\":false"),
                    "{call} {k}: {answer}"
                );
                acked += 1;
            }
            drop(stdin);
            let status = child.wait().unwrap();
            if !status.success() {
                crashes += 1;
            }
            // The next start clears what the crash left in .memfs.
            let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories"}"#);
            assert_eq!(code, 0, "{call} {k}: {v}");
            let found = disk_state(dir.path());
            let allowed = &states[acked..(acked + 2).min(states.len())];
            if !allowed.contains(&found) {
                failures.push(format!(
                    "killed at {call} #{k} after {acked} acknowledged: {found:?} is none of {allowed:?}"
                ));
            }
            if let Err(e) = history_matches_disk(dir.path()) {
                failures.push(format!("killed at {call} #{k}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(crashes >= 12, "only {crashes} runs crashed");
}

/// Four `fsync`s waiting for a slow disk (strace delays every flush memfs
/// makes by 2 s)
/// do not stall the mount: a `stat` that needs the daemon is answered while
/// they wait. Before, each fsync held one of the 4 FUSE worker threads for
/// its whole barrier, so the stat waited for them.
#[test]
fn fsyncs_waiting_for_the_disk_do_not_stall_the_mount() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let test = "fsyncs_waiting_for_the_disk_do_not_stall_the_mount";
    if skip_without_fuse(test) || !have_strace(test) {
        return;
    }
    let mut m = Mounted::unstarted();
    // (The journal's flush is an fdatasync: that is what a slow disk delays.)
    m.spawn_wrapped(
        &strace("trace=fdatasync", "inject=fdatasync:delay_enter=2000000"),
        &[],
    );
    // Made by the agent, never looked up through the mount: a stat of it
    // needs the daemon.
    let v = m.tool(r#"{"command":"create","path":"/memories/probe.md","file_text":"p"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let done = Arc::new(AtomicUsize::new(0));
    let syncing: Vec<_> = (0..4)
        .map(|i| {
            let mut f = fs::File::create(m.at(&format!("f{i}.md"))).unwrap();
            f.write_all(b"data\n").unwrap();
            let done = done.clone();
            std::thread::spawn(move || {
                f.sync_all().unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300)); // let them all get to the daemon
    let probe = fs::metadata(m.at("probe.md")).unwrap();
    assert_eq!(probe.len(), 1);
    assert_eq!(
        done.load(Ordering::SeqCst),
        0,
        "the stat was answered only after an fsync finished"
    );
    for t in syncing {
        t.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 4);
}

/// `serve --stdio` whose disk never confirms a flush: the agent hears the
/// change is only in memory, and at the end memfs tries once more and exits
/// non-zero saying so, instead of exiting 0 with the change not on disk.
#[test]
fn an_unsaved_change_at_exit_is_a_failure_not_a_silent_success() {
    let test = "an_unsaved_change_at_exit_is_a_failure_not_a_silent_success";
    if !have_strace(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = strace_command("trace=fdatasync", "inject=fdatasync:error=EIO")
        .arg("--data")
        .arg(dir.path())
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"command":"create","path":"/memories/a.md","file_text":"a"}}"#
    )
    .unwrap();
    let mut answer = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut answer,
    )
    .unwrap();
    assert!(answer.contains("is in memory"), "{answer}");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("1 path(s) are in memory but could not be written to disk"),
        "{err}"
    );
}

/// Durability costs what memfs wrote: an agent's changes are made durable
/// with `fdatasync`/`fsync` of the files and directories they touched, never
/// with a `syncfs` that would flush every other program's dirty pages on the
/// disk too (the cause of multi-second stalls under a neighbour's I/O).
#[test]
fn a_change_is_made_durable_without_flushing_the_whole_disk() {
    let test = "a_change_is_made_durable_without_flushing_the_whole_disk";
    if !have_strace(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let mut child = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=syncfs,fdatasync,fsync,sync_file_range",
            "-o",
        ])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_memfs"))
        .arg("--data")
        .arg(dir.path().join("data"))
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        r#"{"command":"create","path":"/memories/a/b.md","file_text":"one\n"}"#,
        r#"{"command":"str_replace","path":"/memories/a/b.md","old_str":"one","new_str":"two"}"#,
        r#"{"command":"rename","old_path":"/memories/a","new_path":"/memories/c"}"#,
        r#"{"command":"delete","path":"/memories/c/b.md"}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    // A burst of new files, pipelined: the checkpoint stages them in bulk
    // (past 256 in one pass), and still waits only for their own data.
    let mut burst = String::new();
    for i in 0..600 {
        burst.push_str(&format!(
            "{{\"command\":\"create\",\"path\":\"/memories/burst/{i}.md\",\"file_text\":\"{i}\\n\"}}\n"
        ));
    }
    stdin.write_all(burst.as_bytes()).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let calls = fs::read_to_string(&trace).unwrap();
    assert!(!calls.contains("syncfs("), "{calls}");
    assert!(
        calls.contains("sync_file_range("),
        "the burst was not staged in bulk"
    );
    // The journal's flush of each batch, and the checkpoint's of the files.
    assert!(calls.matches("fdatasync(").count() >= 2, "{calls}");
    assert!(calls.matches(" fsync(").count() >= 2, "{calls}");
}
