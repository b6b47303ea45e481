//! The plain files as a door (issue 48): what people and programs write in
//! `DIR/memories` beside a running memfs is taken in as versions of the
//! files door (`person:files`), before the next answer of every door, and
//! never written over by a checkpoint.

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::{checkpoint, content, log_rows, memfs, Server};
use serde_json::Value;

fn call(s: &mut Server, json: &str) -> Value {
    let v = s.call(json);
    assert_eq!(v["is_error"], false, "{json}: {v}");
    v
}

fn view(s: &mut Server, path: &str) -> String {
    let v = call(s, &format!(r#"{{"command":"view","path":"{path}"}}"#));
    content(&v).to_string()
}

fn append(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Every row's (who, op, path), oldest first.
fn rows(dir: &Path) -> Vec<(String, String, String)> {
    log_rows(dir)
        .iter()
        .rev()
        .map(|r| {
            (
                r["actor"]["kind"].as_str().unwrap_or("").to_string()
                    + ":"
                    + r["actor"]["door"].as_str().unwrap_or(""),
                r["op"].as_str().unwrap().to_string(),
                r["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn by_files(rows: &[(String, String, String)], op: &str, path: &str) -> bool {
    rows.iter()
        .any(|(who, o, p)| who == "person:files" && o == op && p == path)
}

/// Every file below `memories`, relative, with its bytes.
fn plain_files(memories: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![memories.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(memories)
                    .unwrap()
                    .display()
                    .to_string();
                out.push((rel, fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A memfs serving a fresh data dir (with `flags` and `env`), `path`
/// created with `text` and checkpointed: the temp dir, the data dir, its
/// `memories` and the server.
fn started(
    flags: &[&str],
    env: &[(&str, &str)],
    path: &str,
    text: &str,
) -> (tempfile::TempDir, PathBuf, PathBuf, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mem = dir.join("memories");
    let mut s = Server::start_with_env(&dir, flags, env);
    let create = serde_json::json!({"command": "create", "path": path, "file_text": text});
    call(&mut s, &create.to_string());
    checkpoint(&dir);
    (tmp, dir, mem, s)
}

#[test]
fn outside_changes_beside_a_running_memfs_are_versions_and_the_agent_edits_on_top() {
    let (_tmp, dir, mem, mut s) = started(&[], &[], "/memories/a.md", "one\ntwo\n");
    call(
        &mut s,
        r#"{"command":"create","path":"/memories/gone.md","file_text":"bye\n"}"#,
    );
    checkpoint(&dir);
    // Beside it, with plain file calls: an append, a new file, a new
    // directory renamed, a deletion.
    append(&mem.join("a.md"), "PERSON EDIT\n");
    fs::write(mem.join("b.md"), "written beside memfs\n").unwrap();
    fs::create_dir(mem.join("d1")).unwrap();
    fs::write(mem.join("d1/x.md"), "x\n").unwrap();
    fs::rename(mem.join("d1"), mem.join("d2")).unwrap();
    fs::remove_file(mem.join("gone.md")).unwrap();
    // The very next call sees all of it (no sleep: the kernel queued the
    // events when the writes returned).
    let listing = view(&mut s, "/memories");
    assert!(listing.contains("/memories/b.md"), "{listing}");
    assert!(listing.contains("/memories/d2/x.md"), "{listing}");
    assert!(!listing.contains("/memories/d1"), "{listing}");
    assert!(!listing.contains("gone.md"), "{listing}");
    let edited = call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/a.md","old_str":"two","new_str":"TWO"}"#,
    );
    assert!(content(&edited).contains("PERSON EDIT"), "{edited}");
    call(
        &mut s,
        r#"{"command":"insert","path":"/memories/d2/x.md","insert_line":1,"insert_text":"agent\n"}"#,
    );
    assert!(s.finish().success());
    // Every outside change is a version of the files door, the agent's on top.
    let rows = rows(&dir);
    assert!(by_files(&rows, "write", "/memories/a.md"), "{rows:?}");
    assert!(by_files(&rows, "create", "/memories/b.md"), "{rows:?}");
    assert!(by_files(&rows, "delete", "/memories/gone.md"), "{rows:?}");
    assert!(
        rows.iter()
            .any(|(w, op, p)| w == "person:files" && op == "rename" && p == "/memories/d2/x.md")
            || by_files(&rows, "create", "/memories/d2/x.md"),
        "{rows:?}"
    );
    let last_a = rows.iter().rposition(|r| r.2 == "/memories/a.md").unwrap();
    assert_eq!(rows[last_a].0, "agent:stdio");
    // Nothing lost, and the files on disk are what the memory says.
    let files = plain_files(&mem);
    let expect: Vec<(String, Vec<u8>)> = vec![
        ("a.md".into(), b"one\nTWO\nPERSON EDIT\n".to_vec()),
        ("b.md".into(), b"written beside memfs\n".to_vec()),
        ("d2/x.md".into(), b"x\nagent\n".to_vec()),
    ];
    assert_eq!(files, expect);
    // And a restart finds nothing new: the journal already has it all.
    let mut s = Server::start(&dir, &[]);
    assert!(view(&mut s, "/memories/a.md").contains("PERSON EDIT"));
    assert!(s.finish().success());
    assert_eq!(
        log_rows(&dir).iter().filter(|r| r["op"] == "found").count(),
        0
    );
}

#[test]
fn a_file_written_while_the_agents_change_waits_for_its_checkpoint_is_kept_as_an_overwrite() {
    // A long checkpoint delay: the agent's change waits in memory while a
    // person writes the plain file (which still shows the older content).
    let slow = [("MEMFS_CHECKPOINT_MS", "3000")];
    let (_tmp, dir, mem, mut s) = started(&[], &slow, "/memories/n.md", "v1\n");
    call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/n.md","old_str":"v1","new_str":"agent v2"}"#,
    );
    assert_eq!(fs::read_to_string(mem.join("n.md")).unwrap(), "v1\n");
    fs::write(mem.join("n.md"), "person over v1\n").unwrap();
    checkpoint(&dir);
    let now = view(&mut s, "/memories/n.md");
    assert!(now.contains("person over v1"), "{now}");
    assert!(s.finish().success());
    // Both are versions; the person's is recorded as an overwrite of the
    // agent's change it never saw; the plain file is the person's.
    let rows = log_rows(&dir);
    let ops: Vec<(&str, &str)> = rows
        .iter()
        .rev()
        .filter(|r| r["path"] == "/memories/n.md")
        .map(|r| {
            (
                r["op"].as_str().unwrap(),
                r["actor"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("create", "agent"),
            ("write", "agent"),
            ("overwrite", "person")
        ],
        "{rows:?}"
    );
    assert_eq!(
        fs::read_to_string(mem.join("n.md")).unwrap(),
        "person over v1\n"
    );
}

#[test]
fn what_cannot_be_taken_in_stays_on_disk_and_is_listed() {
    let limit = ["--max-file-size", "1K"];
    let (_tmp, dir, mem, mut s) = started(&limit, &[], "/memories/ok.md", "ok\n");
    let big = "x".repeat(4096);
    fs::write(mem.join("big.md"), &big).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        mem.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let listing = view(&mut s, "/memories");
    assert!(!listing.contains("big.md"), "{listing}");
    assert!(!listing.contains("pipe"), "{listing}");
    // `memfs checkpoint` says what it leaves out, and why.
    let out = memfs()
        .arg("--data")
        .arg(&dir)
        .arg("checkpoint")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("/memories/big.md (4096 bytes, over the limit"),
        "{said}"
    );
    assert!(said.contains("/memories/pipe (a FIFO"), "{said}");
    // The agent's writes elsewhere go on; nothing of the person's is touched.
    call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/ok.md","old_str":"ok","new_str":"ok again"}"#,
    );
    assert!(s.finish().success());
    assert_eq!(fs::read_to_string(mem.join("big.md")).unwrap(), big);
    assert!(mem.join("pipe").exists());
    assert_eq!(fs::read_to_string(mem.join("ok.md")).unwrap(), "ok again\n");
}

#[test]
fn a_program_writing_in_several_writes_gives_one_version() {
    let (_tmp, dir, mem, mut s) = started(&[], &[], "/memories/log.md", "start\n");
    {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(mem.join("log.md"))
            .unwrap();
        for i in 0..20 {
            f.write_all(format!("line {i}\n").as_bytes()).unwrap();
            f.flush().unwrap();
        }
    }
    // And an editor's save through a temp file renamed into place.
    fs::write(mem.join(".tmp-save"), "saved whole\n").unwrap();
    fs::rename(mem.join(".tmp-save"), mem.join("saved.md")).unwrap();
    let text = view(&mut s, "/memories/log.md");
    assert!(text.contains("line 19"), "{text}");
    assert!(view(&mut s, "/memories/saved.md").contains("saved whole"));
    assert!(s.finish().success());
    let rows = rows(&dir);
    let writes = rows
        .iter()
        .filter(|r| r.0 == "person:files" && r.2 == "/memories/log.md")
        .count();
    assert_eq!(writes, 1, "{rows:?}");
    assert!(
        !rows.iter().any(|r| r.2.contains(".tmp-save"))
            || by_files(&rows, "rename", "/memories/saved.md"),
        "{rows:?}"
    );
}
