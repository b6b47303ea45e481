//! Killing the process mid-stream, and disks that refuse writes.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use common::{can_mount, content, exec, skip, Server, Tmpfs};

fn expected(i: usize) -> String {
    // Large enough that a torn write would show: 8 KiB of a pattern unique to i.
    format!("{i:06}-").repeat(1024)
}

/// Every regular file under `memories/`, by relative path.
fn files_on_disk(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn kill_9_during_pipelined_creates_loses_nothing_acknowledged() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Server::start(dir.path(), &[]);
        let total = 3000;
        let mut stdin = s.take_stdin().unwrap();
        let writer = std::thread::spawn(move || {
            for i in 0..total {
                let line = format!(
                    "{{\"command\":\"create\",\"path\":\"/memories/d{}/f{i}.txt\",\"file_text\":\"{}\"}}\n",
                    i % 7,
                    expected(i)
                );
                if stdin.write_all(line.as_bytes()).is_err() {
                    return; // killed
                }
            }
        });
        // Read some replies, then kill without warning at a point that varies.
        let stop_after = 200 + round * 350;
        let mut acknowledged = Vec::new();
        for i in 0..stop_after {
            let r = s.recv().unwrap();
            assert_eq!(r["is_error"], false, "{r}");
            acknowledged.push(i);
        }
        s.child.kill().unwrap(); // SIGKILL
        s.child.wait().unwrap();
        let _ = writer.join();

        // On disk, before any restart (the plain files are a checkpoint the
        // journal is ahead of): every file there is whole, never torn, and
        // nothing else is among the memories.
        let whole = |files: &std::collections::BTreeMap<String, Vec<u8>>| {
            for (rel, bytes) in files {
                let i: usize = rel
                    .split("/f")
                    .nth(1)
                    .unwrap()
                    .trim_end_matches(".txt")
                    .parse()
                    .expect(rel);
                assert!(
                    bytes.as_slice() == expected(i).as_bytes(),
                    "round {round}: torn file {rel} ({} bytes)",
                    bytes.len()
                );
            }
        };
        whole(&files_on_disk(&dir.path().join("memories")));
        // A restart replays the journal into the plain files: every
        // acknowledged file is there, whole; it serves exactly that, and
        // clears the staging area.
        let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories/d3"}"#);
        assert_eq!(code, 0, "{v}");
        let files = files_on_disk(&dir.path().join("memories"));
        whole(&files);
        for i in &acknowledged {
            let rel = format!("d{}/f{i}.txt", i % 7);
            assert!(
                files.get(&rel).map(Vec::as_slice) == Some(expected(*i).as_bytes()),
                "round {round}: acknowledged {rel} is not on disk after the restart"
            );
        }
        let listed = content(&v).lines().count() - 2;
        assert_eq!(
            listed,
            files.keys().filter(|k| k.starts_with("d3/")).count()
        );
        assert_eq!(
            std::fs::read_dir(dir.path().join(".memfs/tmp"))
                .unwrap()
                .count(),
            0
        );
    }
}

#[test]
fn a_full_disk_fails_the_command_and_memory_still_matches_disk() {
    if !can_mount() {
        skip(
            "a_full_disk_fails_the_command_and_memory_still_matches_disk",
            "needs root to mount a tmpfs",
        );
        return;
    }
    let fs = Tmpfs::mount("256k");
    let data = fs.path().join("data");
    let mut s = Server::start(&data, &[]);
    s.call(r#"{"command":"create","path":"/memories/keep.md","file_text":"keep me\n"}"#);
    let mut failed = None;
    for i in 0..100 {
        let r = s.call(&format!(
            r#"{{"command":"create","path":"/memories/fill/{i}.txt","file_text":"{}"}}"#,
            "f".repeat(16 * 1024)
        ));
        if r["is_error"] == true {
            failed = Some((i, content(&r).to_string()));
            break;
        }
    }
    let (i, text) = failed.expect("a 256 KiB disk fills up");
    assert!(text.contains("No space left on device"), "{text}");
    assert!(
        text.starts_with("Error: the change could not be saved to disk"),
        "{text}"
    );
    // The failed file is neither in memory nor on disk; an edit that cannot be
    // saved leaves the old content in both.
    let r = s.call(&format!(
        r#"{{"command":"view","path":"/memories/fill/{i}.txt"}}"#
    ));
    assert!(content(&r).contains("does not exist"), "{r}");
    assert!(!data.join(format!("memories/fill/{i}.txt")).exists());
    let r = s.call(&format!(
        r#"{{"command":"str_replace","path":"/memories/keep.md","old_str":"keep me","new_str":"{}"}}"#,
        "g".repeat(64 * 1024)
    ));
    assert_eq!(r["is_error"], true, "{r}");
    let r = s.call(r#"{"command":"view","path":"/memories/keep.md"}"#);
    assert!(content(&r).ends_with("     1\tkeep me"), "{r}");
    // Deleting makes room again, and the server goes on.
    let r = s.call(r#"{"command":"delete","path":"/memories/fill"}"#);
    assert_eq!(r["is_error"], false, "{r}");
    let r =
        s.call(r#"{"command":"create","path":"/memories/after.md","file_text":"room again\n"}"#);
    assert_eq!(r["is_error"], false, "{r}");
    let before = s.call(r#"{"command":"view","path":"/memories"}"#);
    assert!(s.finish().success());
    // After a clean stop the plain files are current: the refused edit
    // left the old content there too.
    assert_eq!(
        std::fs::read_to_string(data.join("memories/keep.md")).unwrap(),
        "keep me\n"
    );
    let (_, after) = exec(&data, r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(before["content"], after["content"]);
}

#[test]
fn a_read_only_disk_fails_writes_clearly_and_reads_go_on() {
    if !can_mount() {
        skip(
            "a_read_only_disk_fails_writes_clearly_and_reads_go_on",
            "needs root to mount a tmpfs",
        );
        return;
    }
    let fs = Tmpfs::mount("4m");
    let data = fs.path().join("data");
    let mut s = Server::start(&data, &[]);
    s.call(r#"{"command":"create","path":"/memories/a.md","file_text":"one\n"}"#);
    fs.remount("ro");
    let writes = [
        r#"{"command":"create","path":"/memories/b.md","file_text":"two\n"}"#,
        r#"{"command":"str_replace","path":"/memories/a.md","old_str":"one","new_str":"uno"}"#,
        r#"{"command":"insert","path":"/memories/a.md","insert_line":0,"insert_text":"zero"}"#,
        r#"{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/c.md"}"#,
        r#"{"command":"delete","path":"/memories/a.md"}"#,
    ];
    for w in writes {
        let r = s.call(w);
        assert_eq!(r["is_error"], true, "{w}: {r}");
        assert!(content(&r).contains("Read-only file system"), "{w}: {r}");
    }
    let r = s.call(r#"{"command":"view","path":"/memories"}"#);
    assert!(
        content(&r).ends_with("4\t/memories\n4\t/memories/a.md"),
        "{r}"
    );
    let r = s.call(r#"{"command":"view","path":"/memories/a.md"}"#);
    assert!(content(&r).ends_with("     1\tone"), "{r}");
    fs.remount("rw");
    let r = s.call(r#"{"command":"create","path":"/memories/b.md","file_text":"two\n"}"#);
    assert_eq!(r["is_error"], false, "{r}");
}
