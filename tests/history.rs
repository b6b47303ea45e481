//! History through the doors people use: `memfs log`, `show`, `diff`,
//! `revert`, `redact`, `export --git` and `expire`, with and without a
//! running owner, with changes from the agent, from a person in a real
//! editor through the mount, and from memfs itself.

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

/// `memfs log --json [PATH]`, newest first.
fn log(dir: &Path, path: Option<&str>) -> Vec<Value> {
    let mut args = vec!["log", "--json"];
    args.extend(path);
    let (code, out, err) = run(dir, &args);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ok(dir: &Path, flags: &[&str], input: Value) {
    let (code, v, err) = exec_with(dir, flags, &input.to_string());
    assert_eq!(code, 0, "{v} {err}");
}

fn sha256(bytes: &[u8]) -> String {
    memfs::digest::sha256_hex(bytes)
}

fn ops(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["op"].as_str().unwrap()).collect()
}

#[test]
fn every_agent_change_is_a_version_with_its_actor_and_survives_rename_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let me = ["--as", "planner"];
    ok(
        d,
        &me,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "hello\n"}),
    );
    ok(
        d,
        &me,
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "hello", "new_str": "hello world"}),
    );
    ok(
        d,
        &me,
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
    );
    ok(
        d,
        &me,
        json!({"command": "delete", "path": "/memories/b.md"}),
    );

    let rows = log(d, None);
    assert_eq!(ops(&rows), ["delete", "rename", "write", "create"]);
    for row in &rows {
        assert!(row["version"].is_string(), "{row}");
        let time = row["time"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
        assert_eq!(row["actor"]["kind"], "agent");
        assert_eq!(row["actor"]["door"], "exec");
        assert_eq!(row["actor"]["session"], "planner");
    }
    assert_eq!(rows[3]["sha256"], sha256(b"hello\n"));
    assert_eq!(rows[3]["size"], 6);
    assert_eq!(rows[2]["sha256"], sha256(b"hello world\n"));
    assert_eq!(rows[1]["path"], "/memories/b.md");
    assert_eq!(rows[1]["from"], "/memories/a.md");
    assert_eq!(rows[0]["sha256"], Value::Null);
    // Newest first, versions growing.
    let ids: Vec<u64> = rows
        .iter()
        .map(|r| r["version"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");

    // The deleted file's log reaches back through its rename.
    let b = log(d, Some("/memories/b.md"));
    assert_eq!(ops(&b), ["delete", "rename", "write", "create"]);
    // A directory's log is its subtree's; a relative path reads as under /memories.
    assert_eq!(log(d, Some("a.md")).len(), 2);
    let (code, table, _) = run(d, &["log"]);
    assert_eq!(code, 0);
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("agent:exec(planner)"),
        "{table}"
    );
    assert!(
        table.contains("rename") && table.contains("(from /memories/a.md)"),
        "{table}"
    );
}

#[test]
fn show_diff_and_revert_bring_back_a_deleted_file_as_a_persons_version() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/n.md", "file_text": "one\ntwo\nthree\n"}),
    );
    ok(
        d,
        &[],
        json!({"command": "str_replace", "path": "/memories/n.md", "old_str": "two", "new_str": "TWO"}),
    );
    ok(
        d,
        &[],
        json!({"command": "delete", "path": "/memories/n.md"}),
    );
    let rows = log(d, None);
    let v = |i: usize| rows[i]["version"].as_str().unwrap().to_string();
    let (create, write, delete) = (v(2), v(1), v(0));

    let (code, shown, _) = run(d, &["show", &create]);
    assert_eq!((code, shown.as_str()), (0, "one\ntwo\nthree\n"));
    let (code, diff, _) = run(d, &["diff", &create, &write]);
    assert_eq!(code, 0);
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    assert!(diff.starts_with("--- /memories/n.md (version"), "{diff}");
    // Against the file now (deleted: everything removed).
    let (_, diff_now, _) = run(d, &["diff", &write]);
    assert!(diff_now.contains("-TWO"), "{diff_now}");
    let (code, _, err) = run(d, &["show", &delete]);
    assert_eq!(code, 1);
    assert!(err.contains("is a delete"), "{err}");

    // Reverting the delete brings back what it deleted.
    let (code, out, err) = run(d, &["revert", &delete]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("/memories/n.md"), "{out}");
    assert_eq!(
        fs::read_to_string(d.join("memories/n.md")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let newest = &log(d, None)[0];
    assert_eq!(newest["op"], "revert");
    assert_eq!(newest["actor"]["kind"], "person");
    assert_eq!(newest["actor"]["uid"], rustix::process::getuid().as_raw());
    // And to an older version, as a new version again.
    let (code, _, err) = run(d, &["revert", &create]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(d.join("memories/n.md")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let (code, _, err) = run(d, &["show", "12345"]);
    assert_eq!(code, 1);
    assert!(err.contains("no version 12345"), "{err}");
    let (code, _, err) = run(d, &["show", "nonsense"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a version"), "{err}");
}

#[test]
fn the_history_commands_answer_the_same_through_a_running_owner() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut owner = Server::start(d, &["--as", "stdio-agent"]);
    let v = owner.call(r#"{"command":"create","path":"/memories/o.md","file_text":"v1\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let v = owner.call(r#"{"command":"create","path":"/memories/o2.md","file_text":"x\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    // Asked through the owner's socket.
    let live = log(d, None);
    assert_eq!(ops(&live), ["create", "create"]);
    assert_eq!(live[1]["actor"]["door"], "stdio");
    assert_eq!(live[1]["actor"]["session"], "stdio-agent");
    let first = live[1]["version"].as_str().unwrap().to_string();
    let v = owner
        .call(r#"{"command":"str_replace","path":"/memories/o.md","old_str":"v1","new_str":"v2"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    // The owner applies the revert: its own view shows it at once.
    let (code, _, err) = run(d, &["revert", &first]);
    assert_eq!(code, 0, "{err}");
    let v = owner.call(r#"{"command":"view","path":"/memories/o.md"}"#);
    assert!(v["content"].as_str().unwrap().contains("v1"), "{v}");
    let through_owner = log(d, None);
    assert!(owner.finish().success());
    // Read from the data dir itself: the same rows.
    assert_eq!(log(d, None), through_owner);
    assert_eq!(ops(&through_owner), ["revert", "write", "create", "create"]);
}

#[test]
fn expected_sha256_makes_a_write_conditional_on_every_door() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/p.md", "file_text": "base\n"}),
    );
    let base = sha256(b"base\n");
    let stale = sha256(b"something else\n");
    // exec
    let (code, v, _) = exec_with(
        d,
        &[],
        &json!({"command": "str_replace", "path": "/memories/p.md", "old_str": "base", "new_str": "mine", "expected_sha256": stale}).to_string(),
    );
    assert_eq!(code, 1);
    let text = content(&v);
    assert!(
        text.contains("has changed") && text.contains(&base),
        "{text}"
    );
    assert_eq!(
        fs::read_to_string(d.join("memories/p.md")).unwrap(),
        "base\n"
    );
    // stdio, each command kind
    let mut s = Server::start(d, &[]);
    for input in [
        json!({"command": "insert", "path": "/memories/p.md", "insert_line": 0, "insert_text": "x\n", "expected_sha256": stale}),
        json!({"command": "create", "path": "/memories/p.md", "file_text": "y\n", "expected_sha256": stale}),
        json!({"command": "delete", "path": "/memories/p.md", "expected_sha256": stale}),
        json!({"command": "rename", "old_path": "/memories/p.md", "new_path": "/memories/q.md", "expected_sha256": stale}),
    ] {
        let v = s.call(&input.to_string());
        assert_eq!(v["is_error"], true, "{input}: {v}");
        assert!(
            v["content"]
                .as_str()
                .unwrap()
                .contains("nothing was changed"),
            "{v}"
        );
    }
    let v = s.call(&json!({"command": "create", "path": "/memories/p.md", "file_text": "next\n", "expected_sha256": base}).to_string());
    assert_eq!(v["is_error"], false, "{v}");
    let v =
        s.call(r#"{"command":"delete","path":"/memories/p.md","expected_sha256":"not-a-hash"}"#);
    assert!(
        v["content"].as_str().unwrap().contains("64 hex digits"),
        "{v}"
    );
    assert!(s.finish().success());
    assert_eq!(
        fs::read_to_string(d.join("memories/p.md")).unwrap(),
        "next\n"
    );
    assert_eq!(ops(&log(d, None)), ["write", "create"]);
}

#[test]
fn redact_erases_a_content_from_everything_memfs_keeps_and_keeps_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = "call Dana on 555-0199";
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/dana-555-0199.md", "file_text": format!("{secret}\n")}),
    );
    ok(
        d,
        &[],
        json!({"command": "str_replace", "path": "/memories/dana-555-0199.md", "old_str": "555-0199", "new_str": "(number removed)"}),
    );
    let rows = log(d, None);
    let first = rows[1]["version"].as_str().unwrap().to_string();
    // Refused while a file still holds the text of its path.
    let (code, _, err) = run(d, &["redact", &first, "--path"]);
    assert_eq!(code, 1);
    assert!(err.contains("rename or delete it first"), "{err}");
    ok(
        d,
        &[],
        json!({"command": "rename", "old_path": "/memories/dana-555-0199.md", "new_path": "/memories/dana.md"}),
    );
    let (code, out, err) = run(d, &["redact", &first, "--path"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("content erased"), "{out}");
    // Nowhere under the data dir: not the content, not the name.
    let hits = Command::new("grep")
        .args(["-rla", "555-0199"])
        .arg(d)
        .output()
        .unwrap();
    assert!(
        hits.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&hits.stdout)
    );
    let rows = log(d, None);
    let redacted = rows
        .iter()
        .find(|r| r["version"] == first.as_str())
        .unwrap();
    assert_eq!(redacted["redacted"], true, "{redacted}");
    assert_eq!(redacted["sha256"], Value::Null);
    let (code, _, err) = run(d, &["show", &first]);
    assert_eq!(code, 1);
    assert!(err.contains("redacted"), "{err}");
    // A content a file holds now cannot be redacted.
    let now = rows[0]["version"].as_str().unwrap().to_string();
    let (code, _, err) = run(d, &["redact", &now]);
    assert_eq!(code, 1);
    assert!(err.contains("still holds"), "{err}");
}

#[test]
fn history_keep_drops_the_oldest_versions_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keep = ["--history-keep", "2K"];
    for i in 0..12 {
        let text = format!("{i:03} {}\n", "x".repeat(400));
        ok(
            d,
            &keep,
            json!({"command": "create", "path": format!("/memories/f{i}.md"), "file_text": text}),
        );
    }
    let rows = log(d, None);
    let prune = rows
        .iter()
        .find(|r| r["op"] == "prune")
        .expect("a prune row");
    assert_eq!(prune["actor"]["kind"], "memfs");
    assert!(
        prune["note"].as_str().unwrap().contains("dropped"),
        "{prune}"
    );
    // The first file's row stays (it is the file's current version), its
    // content copy in the history does not.
    let (code, _, err) = run(d, &["show", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no longer kept"), "{err}");
    let first = rows.iter().find(|r| r["version"] == "1").unwrap();
    assert_eq!(first["pruned"], true, "{first}");
    // Nothing is `found` again at the next start: pruning kept what each file holds.
    assert!(rows.iter().all(|r| r["op"] != "found"), "{rows:?}");
    // What the history can still show of old contents fits the budget.
    let kept: usize = rows
        .iter()
        .filter_map(|r| Some(run(d, &["show", r["version"].as_str()?]).1.len()))
        .sum();
    assert!(kept <= 2048, "{kept} bytes of contents kept");
    // And the journal itself stays small: the history in it is bounded,
    // beside the state (one row per file).
    let journal: u64 = fs::read_dir(d.join(".memfs/journal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(journal <= 16 << 10, "{journal} bytes of journal");
    // The newest version is still there.
    let newest = rows.iter().find(|r| r["op"] == "create").unwrap();
    let (code, shown, _) = run(d, &["show", newest["version"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(shown.starts_with("011 "), "{shown}");
}

#[test]
fn export_writes_a_git_repository_with_one_commit_per_version() {
    let test = "export_writes_a_git_repository_with_one_commit_per_version";
    if Command::new("git").arg("--version").output().is_err() {
        skip(test, "git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &["--as", "scribe"],
        json!({"command": "create", "path": "/memories/g/a.md", "file_text": "a\n"}),
    );
    ok(
        d,
        &[],
        json!({"command": "str_replace", "path": "/memories/g/a.md", "old_str": "a", "new_str": "b"}),
    );
    ok(
        d,
        &[],
        json!({"command": "rename", "old_path": "/memories/g/a.md", "new_path": "/memories/g/c.md"}),
    );
    let repo = tempfile::tempdir().unwrap();
    let target = repo.path().join("git");
    let (code, _, err) = run(d, &["export", "--git", target.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&target)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let authors = git(&["log", "--format=%an|%s"]);
    let lines: Vec<&str> = authors.lines().collect();
    assert_eq!(lines.len(), 3, "{authors}");
    assert!(
        lines[2].starts_with("agent via exec (scribe)|create /memories/g/a.md"),
        "{authors}"
    );
    assert_eq!(git(&["show", "HEAD:g/c.md"]), "b\n");
    assert!(git(&["log", "-p", "--format=", "-1", "HEAD~1"]).contains("-a\n+b"));
    assert_eq!(fs::read_to_string(target.join("g/c.md")).unwrap(), "b\n");
    // Not into a folder that holds something.
    let (code, _, err) = run(d, &["export", "--git", target.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("is not empty"), "{err}");
}

/// The files a test leaves idle, and the one it reads.
fn idle_pair(d: &Path) {
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/old.md", "file_text": "old\n"}),
    );
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/used.md", "file_text": "used\n"}),
    );
    // (Idle for 3.5 s against --idle 3s: the read below leaves `used.md`
    // 3 s for the two expire runs, however slow the machine.)
    std::thread::sleep(std::time::Duration::from_millis(3500));
    // A read (in another process: the last read is kept across restarts).
    ok(
        d,
        &[],
        json!({"command": "view", "path": "/memories/used.md"}),
    );
}

#[test]
fn expire_removes_only_idle_files_as_memfs_and_revert_brings_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    idle_pair(d);
    let (code, out, err) = run(d, &["expire", "--idle", "3s", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("would expire /memories/old.md"), "{out}");
    assert!(d.join("memories/old.md").exists());
    let (code, out, err) = run(d, &["expire", "--idle", "3s"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("expired /memories/old.md"), "{out}");
    assert!(!d.join("memories/old.md").exists());
    assert!(d.join("memories/used.md").exists());
    let expiry = &log(d, None)[0];
    assert_eq!(expiry["op"], "expire");
    assert_eq!(expiry["actor"]["kind"], "memfs");
    assert_eq!(expiry["path"], "/memories/old.md");
    let (code, _, err) = run(d, &["revert", expiry["version"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(d.join("memories/old.md")).unwrap(),
        "old\n"
    );
    let (_, table, _) = run(d, &["log"]);
    assert!(table.contains("expire"), "{table}");
    let (code, out, err) = run(d, &["expire", "--idle", "1h", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("nothing to expire"),
        "a line says so: {out}"
    );
    let (code, _, err) = run(d, &["expire", "--idle", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a duration"), "{err}");
}

#[test]
fn an_owner_expires_idle_files_on_a_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = Server::start(d, &["--expire-idle", "1s"]);
    let v = s.call(r#"{"command":"create","path":"/memories/brief.md","file_text":"b\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        // (The listing is no use of the file; a view of it would be.)
        let v = s.call(r#"{"command":"view","path":"/memories"}"#);
        !content(&v).contains("brief.md")
    });
    assert!(gone, "not expired within 10 s");
    assert!(s.finish().success());
    assert!(!d.join("memories/brief.md").exists());
    assert_eq!(log(d, None)[0]["op"], "expire");
}

#[test]
fn a_persons_burst_of_writes_is_one_version_naming_the_process() {
    let test = "a_persons_burst_of_writes_is_one_version_naming_the_process";
    if skip_without_fuse(test) {
        return;
    }
    let mut m = Mounted::start(&[]);
    let script = format!(
        "import os\nf = open({:?}, 'w')\nfor i in range(200):\n    f.write('line %d\\n' % i)\n    f.flush()\nf.close()\n",
        m.at("burst.md")
    );
    let status = Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let (status, _) = m.stop();
    assert!(status.success());
    let rows = log(m.data.path(), Some("/memories/burst.md"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["op"], "create");
    assert_eq!(rows[0]["actor"]["kind"], "person");
    assert!(
        rows[0]["actor"]["process"]
            .as_str()
            .unwrap()
            .starts_with("python"),
        "{rows:?}"
    );
    assert_eq!(rows[0]["actor"]["uid"], rustix::process::getuid().as_raw());
    let expected: String = (0..200).map(|i| format!("line {i}\n")).collect();
    assert_eq!(rows[0]["sha256"], sha256(expected.as_bytes()));
}

/// A mount, where FUSE and vim are here (else the test is skipped, or fails
/// under CI).
fn mounted_with_vim(test: &str) -> Option<Mounted> {
    if skip_without_fuse(test) {
        return None;
    }
    if Command::new("vim").arg("--version").output().is_err() {
        skip(test, "vim is not installed");
        return None;
    }
    Some(Mounted::start(&[]))
}

/// plan.md ("step one\nstep two\n") read by a real vim, then changed by the
/// agent (its second line), then saved from vim's stale buffer after
/// `command` (answering vim's warning with yes).
fn vim_saves_a_stale_buffer(m: &Mounted, command: &str) {
    let v = m.tool(
        r#"{"command":"create","path":"/memories/plan.md","file_text":"step one\nstep two\n"}"#,
    );
    assert_eq!(v["is_error"], false, "{v}");
    let go = m.data.path().join("go");
    let wait = format!(
        "while !filereadable('{}') | sleep 20m | endwhile",
        go.display()
    );
    let mut vim = Command::new("vim")
        .args(["-Es", "-u", "NONE", "-i", "NONE", "-c", &wait])
        .args(["-c", command, "-c", "w", "-c", "q!"])
        .arg(m.at("plan.md"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // vim has read the file once its swap file exists.
    let swap = m.at(".plan.md.swp");
    assert!(
        (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            swap.exists()
        }),
        "vim did not open the file"
    );
    let v = m.tool(r#"{"command":"str_replace","path":"/memories/plan.md","old_str":"step two","new_str":"step two (agent)"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    // "The file has been changed since reading it!!! ... really write?" yes.
    vim.stdin.take().unwrap().write_all(b"y\ny\ny\n").unwrap();
    fs::write(&go, "").unwrap();
    assert!(vim.wait().unwrap().success());
}

/// The same stale save where the person changed another line than the
/// agent: the two are merged (the saver's process read the file, so what
/// both started from is known), nothing is a lost update, and the merge is
/// the person's version, noted as one.
#[test]
fn a_stale_save_in_vim_of_another_line_is_merged_with_the_agents_change() {
    let Some(m) =
        mounted_with_vim("a_stale_save_in_vim_of_another_line_is_merged_with_the_agents_change")
    else {
        return;
    };
    vim_saves_a_stale_buffer(&m, "%s/one/ONE/");
    assert_eq!(
        fs::read_to_string(m.at("plan.md")).unwrap(),
        "step ONE\nstep two (agent)\n"
    );
    let rows = log(m.data.path(), Some("/memories/plan.md"));
    assert!(rows.iter().all(|r| r["op"] != "overwrite"), "{rows:?}");
    assert_eq!(rows[0]["actor"]["process"], "vim", "{rows:?}");
    assert!(
        rows[0]["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("merged:")),
        "{rows:?}"
    );
    let v = m.tool(r#"{"command":"view","path":"/memories/plan.md"}"#);
    assert!(
        content(&v).contains("step ONE") && content(&v).contains("(agent)"),
        "{v}"
    );
}

/// The vim-with-a-stale-buffer case, with a real vim: it reads the file,
/// the agent changes it, the person saves their buffer over it (answering
/// vim's warning with yes). The log marks the overwrite, and one revert
/// brings back the agent's version.
#[test]
fn a_stale_save_in_vim_is_marked_as_an_overwrite_and_one_revert_undoes_it() {
    let Some(m) =
        mounted_with_vim("a_stale_save_in_vim_is_marked_as_an_overwrite_and_one_revert_undoes_it")
    else {
        return;
    };
    // The person changes the line the agent changes: a lost update.
    vim_saves_a_stale_buffer(&m, "%s/two/TWO/");
    assert_eq!(
        fs::read_to_string(m.at("plan.md")).unwrap(),
        "step one\nstep TWO\n"
    );

    let rows = log(m.data.path(), Some("/memories/plan.md"));
    assert_eq!(ops(&rows), ["overwrite", "write", "create"], "{rows:?}");
    assert_eq!(rows[0]["actor"]["process"], "vim");
    assert_eq!(rows[0]["replaces"], rows[1]["version"]);
    let (_, table, _) = run(m.data.path(), &["log", "/memories/plan.md"]);
    assert!(
        table.contains("overwrite") && table.contains("which its writer had not read"),
        "{table}"
    );
    let (code, said, err) = run(
        m.data.path(),
        &["revert", rows[0]["version"].as_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(m.at("plan.md")).unwrap(),
        "step one\nstep two (agent)\n"
    );
    // It says what it did in the words the log uses, and what the file is
    // now (the agent's version the person's save went over), not "back to"
    // the overwrite.
    let (overwrite, agents) = (
        rows[0]["version"].as_str().unwrap(),
        rows[1]["version"].as_str().unwrap(),
    );
    assert_eq!(
        said,
        format!("/memories/plan.md: undoes version {overwrite} (overwrite): the file is version {agents}'s text again\n")
    );
    let newest = &log(m.data.path(), Some("/memories/plan.md"))[0];
    assert_eq!(
        newest["note"],
        format!("undoes version {overwrite} (overwrite)")
    );
    // The swap file's own versions are left out unless asked for.
    let (_, all, _) = run(m.data.path(), &["log", "--all"]);
    assert!(all.contains(".plan.md.swp"), "{all}");
    let (_, plain, _) = run(m.data.path(), &["log"]);
    assert!(!plain.contains(".plan.md.swp"), "{plain}");
}

/// The other side of the lost-update rule: a person who read the agent's
/// change and then saved is an ordinary write, not an overwrite.
#[test]
fn a_persons_save_after_reading_the_agents_change_is_a_plain_write() {
    let test = "a_persons_save_after_reading_the_agents_change_is_a_plain_write";
    if skip_without_fuse(test) {
        return;
    }
    let mut m = Mounted::start(&[]);
    let v = m.tool(r#"{"command":"create","path":"/memories/r.md","file_text":"a\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let v = m.tool(
        r#"{"command":"str_replace","path":"/memories/r.md","old_str":"a","new_str":"agent"}"#,
    );
    assert_eq!(v["is_error"], false, "{v}");
    let script = format!(
        "p = {:?}\nt = open(p).read()\nopen(p, 'w').write(t + 'person\\n')\n",
        m.at("r.md")
    );
    assert!(Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap()
        .success());
    let (status, _) = m.stop();
    assert!(status.success());
    let rows = log(m.data.path(), Some("/memories/r.md"));
    assert_eq!(ops(&rows), ["write", "write", "create"], "{rows:?}");
    assert_eq!(rows[0]["actor"]["kind"], "person");
    assert_eq!(rows[0]["sha256"], sha256(b"agent\nperson\n"));
}

/// `memfs scan` reads the kept versions too: a credential an edit removed
/// is still in the version before it, until that version is redacted.
#[test]
fn scan_finds_a_credential_in_a_kept_version_until_it_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let allow = ["--secrets", "allow"];
    let token = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    ok(
        d,
        &allow,
        json!({"command": "create", "path": "/memories/ci.md", "file_text": format!("token: {token}\n")}),
    );
    ok(
        d,
        &allow,
        json!({"command": "str_replace", "path": "/memories/ci.md", "old_str": token, "new_str": "see $GITHUB_TOKEN"}),
    );
    let (code, out, _) = run(d, &["scan", "--json"]);
    assert_eq!(code, 1, "{out}");
    let hits: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hits.len(), 1, "{out}");
    assert_eq!(hits[0]["path"], "/memories/ci.md");
    assert_eq!(hits[0]["line"], 1);
    let version = hits[0]["version"]
        .as_str()
        .expect("a version, not the file")
        .to_string();
    let (code, _, err) = run(d, &["redact", &version]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(d, &["scan"]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(err.contains("nothing found"), "a line says so: {err}");
}

/// `--no-history` keeps no old versions: the journal, which makes every
/// change durable, holds each file's current version (its row, and its
/// content until the plain file has it) and drops the rest when that is
/// checkpointed. A file edited on disk while no memfs ran is found by the
/// next one, so the history never claims a state the files are not in.
#[test]
fn without_history_only_each_files_current_version_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/k.md", "file_text": "kept\n"}),
    );
    ok(
        d,
        &["--no-history"],
        json!({"command": "str_replace", "path": "/memories/k.md", "old_str": "kept", "new_str": "changed"}),
    );
    let (code, out, err) = run(d, &["--no-history", "log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ops(&rows), ["prune", "write"], "{rows:?}");
    assert_eq!(rows[1]["sha256"], sha256(b"changed\n"));
    // The old content is gone from the journal's disk, not just unlisted.
    let journal_holds = |text: &str| {
        fs::read_dir(d.join(".memfs/journal")).unwrap().any(|e| {
            let bytes = fs::read(e.unwrap().path()).unwrap();
            bytes.windows(text.len()).any(|w| w == text.as_bytes())
        })
    };
    assert!(!journal_holds("kept\n"), "an old content stayed");
    // A file edited on disk while no memfs ran, too.
    fs::write(d.join("memories/k.md"), "by hand\n").unwrap();
    let rows = log(d, None);
    assert_eq!(ops(&rows)[0], "found", "{rows:?}");
    assert_eq!(rows[0]["actor"]["kind"], "memfs");
    assert_eq!(rows[0]["sha256"], sha256(b"by hand\n"));
}

/// A memory that existed before memfs kept history: its files are recorded
/// at the first start without copying them (a large memory would double on
/// disk), and each file's content is kept at its first change, so that
/// change can be reverted.
#[test]
fn files_from_before_the_history_are_kept_at_their_first_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("memories/old")).unwrap();
    fs::write(d.join("memories/old/a.md"), "from before\n").unwrap();
    fs::write(d.join("memories/b.md"), "untouched\n").unwrap();
    let rows = log(d, None);
    assert_eq!(ops(&rows), ["found", "found"]);
    assert!(rows.iter().all(|r| r["pruned"] == true), "{rows:?}");
    // Nothing copied at the first start: the journal names the contents only.
    let journal_holds = |text: &str| {
        fs::read_dir(d.join(".memfs/journal")).unwrap().any(|e| {
            let bytes = fs::read(e.unwrap().path()).unwrap();
            bytes.windows(text.len()).any(|w| w == text.as_bytes())
        })
    };
    assert!(!journal_holds("from before"), "copied at the first start");
    assert!(!journal_holds("untouched"), "copied at the first start");
    ok(
        d,
        &[],
        json!({"command": "str_replace", "path": "/memories/old/a.md", "old_str": "before", "new_str": "now"}),
    );
    let rows = log(d, Some("/memories/old/a.md"));
    assert_eq!(ops(&rows), ["write", "found", "found"], "{rows:?}");
    assert_eq!(rows[1]["sha256"], sha256(b"from before\n"));
    assert_eq!(rows[0]["replaces"], rows[1]["version"]);
    assert!(journal_holds("from before"), "kept at its first change");
    assert!(
        !journal_holds("untouched"),
        "a file never changed is not copied"
    );
    let (code, _, err) = run(d, &["revert", rows[1]["version"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(d.join("memories/old/a.md")).unwrap(),
        "from before\n"
    );
    // The untouched file's first row says where its content is.
    let b = &log(d, Some("/memories/b.md"))[0];
    let (code, _, err) = run(d, &["show", b["version"].as_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("the file itself holds that content"), "{err}");
    // A directory delete keeps what it deletes, too.
    fs::create_dir_all(d.join("memories/dir")).unwrap();
    fs::write(d.join("memories/dir/c.md"), "c\n").unwrap();
    let _ = log(d, None); // a start that finds dir/c.md (the history exists: copied now)
    ok(
        d,
        &[],
        json!({"command": "delete", "path": "/memories/old"}),
    );
    let rows = log(d, Some("/memories/old"));
    assert_eq!(rows[0]["op"], "delete");
    // Deleting a file never changed before keeps its content first: the
    // delete can be undone.
    ok(
        d,
        &[],
        json!({"command": "delete", "path": "/memories/b.md"}),
    );
    let rows = log(d, Some("/memories/b.md"));
    assert_eq!(ops(&rows), ["delete", "found", "found"], "{rows:?}");
    let (code, _, err) = run(d, &["revert", rows[0]["version"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(d.join("memories/b.md")).unwrap(),
        "untouched\n"
    );
}

/// An agent's tool input is passed on as a line by its harness, so a
/// prompt-injected agent could send memfs' own control lines. Those that act
/// beyond the tool (the history: reading deleted versions, redacting the
/// audit trail; mounts) need the owner's key from `.memfs/key`, which the
/// agent cannot read: without it, the line is answered as a line that is
/// not a tool input, and nothing happens.
#[test]
fn an_agent_cannot_send_history_or_mount_control_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = Server::start(d, &[]);
    let v = s.call(r#"{"command":"create","path":"/memories/a.md","file_text":"secret\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let v = s.call(r#"{"command":"delete","path":"/memories/a.md"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let away = tempfile::tempdir().unwrap();
    for line in [
        json!({"type": "memfs_history", "cmd": "show", "version": "1"}),
        json!({"type": "memfs_history", "cmd": "redact", "version": "1", "path": true}),
        json!({"type": "memfs_history", "cmd": "show", "version": "1", "key": "0123456789abcdef"}),
        json!({"type": "memfs_mount", "path": away.path()}),
    ] {
        let v = s.call(&line.to_string());
        assert_eq!(v["is_error"], true, "{line}: {v}");
        assert!(
            content(&v).contains("a line must be a memory tool input"),
            "{line}: {v}"
        );
        assert!(!v.to_string().contains("secret"), "{v}");
    }
    assert!(!memfs::fuse::mountpoint::is_mount_point(away.path()));
    // The CLI, which reads the key, is served.
    let (code, out, err) = run(d, &["show", "1"]);
    assert_eq!((code, out.as_str()), (0, "secret\n"), "{err}");
    assert!(s.finish().success());
    assert!(log(d, None).iter().all(|r| r["redacted"] != true));
}

/// The age half of `--history-keep`: versions older than the age go at the
/// next start (a file's current version keeps its row, without content), and
/// the drop is logged.
#[test]
fn history_keep_by_age_drops_old_versions_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[],
        json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
    );
    ok(
        d,
        &[],
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}),
    );
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let (code, out, err) = run(d, &["--history-keep", "1s", "log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ops(&rows), ["prune", "write"], "{rows:?}");
    assert!(
        rows[0]["note"].as_str().unwrap().contains("older than 1s"),
        "{rows:?}"
    );
    assert_eq!(rows[1]["pruned"], true, "{rows:?}");
    assert_eq!(rows[1]["sha256"], sha256(b"two\n"));
}

/// A stale save by rename (write a new file, rename it over the old one, as
/// many editors do) is an overwrite too, and one revert undoes it.
#[test]
fn a_stale_save_by_rename_is_an_overwrite() {
    let test = "a_stale_save_by_rename_is_an_overwrite";
    if skip_without_fuse(test) {
        return;
    }
    let mut m = Mounted::start(&[]);
    let v = m.tool(r#"{"command":"create","path":"/memories/s.md","file_text":"base\n"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    let go = m.data.path().join("go");
    let read = m.data.path().join("read");
    let script = format!(
        "import os, time\np = {:?}\nt = open(p).read()\nopen({:?}, 'w').close()\nwhile not os.path.exists({:?}): time.sleep(0.02)\nopen(p + '.tmp', 'w').write('mine\\n')\nos.replace(p + '.tmp', p)\n",
        m.at("s.md"),
        read,
        go
    );
    let mut person = Command::new("python3")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    // (Until it has read the file: on a busy machine, starting python
    // takes its time.)
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !read.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let v = m.tool(
        r#"{"command":"str_replace","path":"/memories/s.md","old_str":"base","new_str":"agent"}"#,
    );
    assert_eq!(v["is_error"], false, "{v}");
    fs::write(&go, "").unwrap();
    assert!(person.wait().unwrap().success());
    let (status, _) = m.stop();
    assert!(status.success());
    let rows = log(m.data.path(), Some("/memories/s.md"));
    assert_eq!(rows[0]["op"], "overwrite", "{rows:?}");
    assert_eq!(rows[0]["from"], "/memories/s.md.tmp");
    let agents = rows
        .iter()
        .find(|r| r["actor"]["kind"] == "agent" && r["op"] == "write")
        .unwrap();
    assert_eq!(rows[0]["replaces"], agents["version"]);
    let (code, _, err) = run(
        m.data.path(),
        &["revert", rows[0]["version"].as_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read_to_string(m.on_disk("s.md")).unwrap(), "agent\n");
}

/// A person writes `d1/f.txt` through the mount (still open, so its bytes
/// are unsaved) and the agent renames `d1` to `d2` meanwhile: the history
/// holds the person's create at `d1/f.txt`, then the agent's rename, each
/// with its actor (issue 39: only "person create /memories/d2/f.txt" was
/// there, with no create at d1 and no rename).
#[test]
fn a_persons_unsaved_file_in_a_directory_the_agent_renames_keeps_both_versions() {
    let test = "a_persons_unsaved_file_in_a_directory_the_agent_renames_keeps_both_versions";
    if skip_without_fuse(test) {
        return;
    }
    let m = Mounted::start(&[]);
    fs::create_dir(m.at("d1")).unwrap();
    let mut f = fs::File::create(m.at("d1/f.txt")).unwrap();
    f.write_all(b"typed by a person\n").unwrap();
    let v = m.tool(r#"{"command":"rename","old_path":"/memories/d1","new_path":"/memories/d2"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    drop(f);
    assert_eq!(
        fs::read_to_string(m.at("d2/f.txt")).unwrap(),
        "typed by a person\n"
    );
    let rows = log(m.data.path(), None);
    let about: Vec<(String, String, String)> = rows
        .iter()
        .rev()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.ends_with("f.txt")))
        .map(|r| {
            (
                r["actor"]["kind"].as_str().unwrap_or_default().to_string(),
                r["op"].as_str().unwrap_or_default().to_string(),
                r["path"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let want =
        |kind: &str, op: &str, path: &str| (kind.to_string(), op.to_string(), path.to_string());
    assert_eq!(
        about,
        vec![
            want("person", "create", "/memories/d1/f.txt"),
            want("agent", "rename", "/memories/d2/f.txt"),
        ],
        "{rows:?}"
    );
}

/// `memfs undo --by WHO`: a session's changes taken back in one step (a
/// consolidation that deleted 23 files: they all come back), another
/// session's left alone; refused with nothing changed where someone else
/// changed a file since, unless --force.
#[test]
fn undo_by_a_session_takes_back_everything_it_did_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let create = |who: &str, path: &str, text: &str| {
        ok(
            &d,
            &["--as", who],
            json!({"command": "create", "path": path, "file_text": text}),
        )
    };
    for i in 0..23 {
        create(
            "writer",
            &format!("/memories/notes/n{i:02}.md"),
            &format!("note {i}\n"),
        );
    }
    create("writer", "/memories/keep.md", "kept\n");
    // The consolidation: deletes the 23 notes, writes a summary, edits keep.md.
    for i in 0..23 {
        ok(
            &d,
            &["--as", "consolidate"],
            json!({"command": "delete", "path": format!("/memories/notes/n{i:02}.md")}),
        );
    }
    create("consolidate", "/memories/summary.md", "23 notes in one\n");
    ok(
        &d,
        &["--as", "consolidate"],
        json!({"command": "str_replace", "path": "/memories/keep.md", "old_str": "kept", "new_str": "merged"}),
    );
    create("other", "/memories/other.md", "someone else's\n");
    let (code, out, err) = run(&d, &["undo", "--by", "consolidate", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("would undo 25 file(s):"), "{out}");
    assert!(!d.join("memories/notes/n00.md").exists());
    let (code, out, err) = run(&d, &["undo", "--by", "consolidate"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("undid 25 file(s):"), "{out}");
    for i in 0..23 {
        let text = fs::read_to_string(d.join(format!("memories/notes/n{i:02}.md"))).unwrap();
        assert_eq!(text, format!("note {i}\n"));
    }
    assert!(!d.join("memories/summary.md").exists());
    assert_eq!(
        fs::read_to_string(d.join("memories/keep.md")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        fs::read_to_string(d.join("memories/other.md")).unwrap(),
        "someone else's\n"
    );
    // Each restoration is a version by the person who asked.
    let top = &log(&d, Some("/memories/keep.md"))[0];
    assert_eq!(top["op"], "revert", "{top}");
    assert_eq!(top["actor"]["kind"], "person", "{top}");
    // Again: nothing left to undo.
    let (code, out, _) = run(&d, &["undo", "--by", "consolidate"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("nothing to undo"), "{out}");

    // A later change by someone else: refused, nothing changed; --force goes on.
    create("tidy", "/memories/a.md", "a\n");
    create("tidy", "/memories/b.md", "b\n");
    ok(
        &d,
        &["--as", "other"],
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "a, edited"}),
    );
    let (code, _, err) = run(&d, &["undo", "--by", "tidy"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("/memories/a.md (changed since by someone else)"),
        "{err}"
    );
    assert!(err.contains("nothing was changed"), "{err}");
    assert!(d.join("memories/b.md").exists(), "refused, yet changed");
    let (code, out, err) = run(&d, &["undo", "--by", "tidy", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("undid 2 file(s):"), "{out}");
    assert!(!d.join("memories/a.md").exists() && !d.join("memories/b.md").exists());
    // Nobody by that name.
    let (code, _, err) = run(&d, &["undo", "--by", "nobody"]);
    assert_ne!(code, 0);
    assert!(err.contains("no changes by nobody"), "{err}");
}

/// The same from the page: the review queue has a button for each session,
/// and it takes back everything that session changed (and clears it from
/// the queue).
#[test]
fn the_review_page_undoes_a_sessions_changes_in_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    for i in 0..3 {
        ok(
            &d,
            &["--as", "writer"],
            json!({"command": "create", "path": format!("/memories/n{i}.md"), "file_text": format!("note {i}\n")}),
        );
    }
    for i in 0..3 {
        ok(
            &d,
            &["--as", "consolidate"],
            json!({"command": "delete", "path": format!("/memories/n{i}.md")}),
        );
    }
    let page = Page::start(&d);
    let (_, body) = page.get("/review");
    let by = "agent:exec(consolidate)";
    assert!(
        body.contains(by) && body.contains("Undo this session"),
        "{body}"
    );
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token on the page")
        .to_string();
    // The session's undo form, as the page makes it: exactly its versions
    // the page shows.
    let versions: Vec<String> = log(&d, None)
        .iter()
        .filter(|r| r["actor"]["session"] == "consolidate")
        .map(|r| r["version"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(versions.len(), 3);
    let line = format!("{by}\t{}", versions.join(","));
    assert!(body.contains(&line), "the page's form names them: {body}");
    let form = format!(
        "csrf={}&groups={}&back=%2Freview",
        memfs::form::encode(&csrf),
        memfs::form::encode(&line)
    );
    let (head, _) = page.post("/undo-groups", &form);
    assert!(head.starts_with("http/1.1 303"), "{head}");
    assert!(head.contains("said=undid%203%20file"), "{head}");
    // (The page's memfs owns the memory: its plain files, brought up to date.)
    let (code, _, err) = run(&d, &["checkpoint"]);
    assert_eq!(code, 0, "{err}");
    for i in 0..3 {
        let text = fs::read_to_string(d.join(format!("memories/n{i}.md"))).unwrap();
        assert_eq!(text, format!("note {i}\n"));
    }
    let (_, body) = page.get("/review");
    assert!(!body.contains(by), "{body}");
    // Without the page's CSRF token: refused, nothing done.
    let (head, _) = page.post("/undo-groups", "groups=agent%3Aexec%28writer%29%091");
    assert!(head.starts_with("http/1.1 403"), "{head}");
    assert!(d.join("memories/n0.md").exists());
}

/// Keep and undo on the review page act on exactly what the page showed:
/// a file kept stays kept when the rest of its session is undone after.
#[test]
fn the_review_pages_undo_leaves_what_was_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let s = ["--as", "tidy"];
    ok(
        &d,
        &s,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a1\n"}),
    );
    ok(
        &d,
        &s,
        json!({"command": "create", "path": "/memories/b.md", "file_text": "b1\n"}),
    );
    ok(
        &d,
        &s,
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a1", "new_str": "a2"}),
    );
    let page = Page::start(&d);
    let (_, body) = page.get("/review");
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let rows = log(&d, None);
    let v = |path: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["path"] == path)
            .map(|r| r["version"].as_str().unwrap().to_string())
            .rev()
            .collect()
    };
    let by = "agent:exec(tidy)";
    let a = format!("{by}\t{}", v("/memories/a.md").join(","));
    assert!(body.contains(&a), "a.md's group: {body}");
    let post = |action: &str, groups: &str| {
        let form = format!(
            "csrf={}&groups={}&back=%2Freview",
            memfs::form::encode(&csrf),
            memfs::form::encode(groups)
        );
        page.post(action, &form).0
    };
    assert!(post("/keep-groups", &a).contains("kept%202%20changes"));
    // The session now shows b.md only; its undo takes b.md back, and
    // leaves the kept a.md as it is.
    let (_, body) = page.get("/review");
    let b = format!("{by}\t{}", v("/memories/b.md").join(","));
    assert!(body.contains(&b) && !body.contains(&a), "{body}");
    let head = post("/undo-groups", &b);
    assert!(head.contains("said=undid%201%20file"), "{head}");
    let (code, _, err) = run(&d, &["checkpoint"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read_to_string(d.join("memories/a.md")).unwrap(), "a2\n");
    assert!(!d.join("memories/b.md").exists());
}
