//! What an agent (or anything that writes where an agent can) tries against
//! memfs through the real doors, and what it must not get: forged history
//! rows and terminal escapes from session and process names, a session
//! renamed from inside a tool input, a wipe of the memory in one call, a
//! diff that never ends, exports others can read, redacted names that
//! linger, and the small things (a panic on a full stderr, loose version
//! numbers, look-alike names). Each test does what the attacker did.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use common::{content, exec, exec_stdin, memfs, skip_without_fuse, Mcp, Mounted, Server};

fn run(dir: &Path, args: &[&str]) -> Output {
    memfs().arg("--data").arg(dir).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The rows of `memfs log --json`.
fn rows(dir: &Path) -> Vec<Value> {
    let out = run(dir, &["log", "--json"]);
    assert!(out.status.success(), "{out:?}");
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `memfs log` as a person reads it: one line per row, nothing a terminal
/// would act on.
fn assert_log_is_plain(dir: &Path, rows_expected: usize) -> String {
    let out = run(dir, &["log"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert_eq!(
        text.lines().count(),
        rows_expected,
        "forged rows in:\n{text}"
    );
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' || matches!(c, '\u{202e}')),
        "a control character reaches the terminal: {text:?}"
    );
    text
}

const FORGED: &str =
    "x\n    42  2026-01-01 00:00:00  person:vim[1000]  write  /memories/plan.md\u{1b}]0;pwned\u{7}";

#[test]
fn a_session_name_cannot_forge_a_log_row_or_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let hello = json!({"type": "memfs_hello", "session": FORGED}).to_string();
    assert_eq!(server.call(&hello)["is_error"], false);
    let made = server.call(r#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#);
    assert_eq!(made["is_error"], false, "{made}");
    assert!(server.finish().success());
    // `--as` with the same name, and a name far too long.
    let long = "n".repeat(10_000);
    for name in [FORGED, long.as_str()] {
        let out = memfs()
            .arg("--data")
            .arg(dir.path())
            .args(["--as", name, "exec"])
            .arg(r#"{"command":"create","path":"/memories/b.md","file_text":"b\n"}"#)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        exec(
            dir.path(),
            r#"{"command":"delete","path":"/memories/b.md"}"#,
        );
    }
    let text = assert_log_is_plain(dir.path(), 5);
    assert!(
        text.contains(r"x\n    42"),
        "the name is shown escaped: {text}"
    );
    for row in rows(dir.path()) {
        let session = row["actor"]["session"].as_str().unwrap_or_default();
        assert!(
            session.chars().count() <= memfs::text::MAX_LABEL + 1,
            "{session}"
        );
    }
}

#[test]
fn a_process_name_cannot_reach_the_terminal() {
    if skip_without_fuse("a_process_name_cannot_reach_the_terminal") {
        return;
    }
    let mut m = Mounted::start(&[]);
    // A process's name is its program's file name (up to 15 bytes): a link
    // to tee named with an escape sequence writes into the mount.
    let bin = tempfile::tempdir().unwrap();
    let named = bin.path().join("x\u{1b}]0;pwned\u{7}");
    std::os::unix::fs::symlink("/usr/bin/tee", &named).unwrap();
    let mut tee = std::process::Command::new(&named)
        .arg(m.at("a.md"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tee.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    assert!(tee.wait().unwrap().success());
    // A person's burst of writes becomes its version when the mount stops.
    let (status, _) = m.stop();
    assert!(status.success());
    let text = assert_log_is_plain(m.data.path(), 1);
    assert!(text.contains("person:x?]0;pwned?"), "{text}");
}

/// A memfs that owns `dir` and serves its socket until dropped.
fn owner(dir: &Path) -> Server {
    let mut server = Server::start(dir, &[]);
    // Its first answer says it is up (and its socket with it).
    let up = server.call(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(up["is_error"], false, "{up}");
    server
}

#[test]
fn a_hello_inside_a_tool_input_renames_no_session_and_calls_keep_their_door() {
    let dir = tempfile::tempdir().unwrap();
    let _owner = owner(dir.path());
    // An attached MCP server passes its agent's arguments on to the owner.
    let mut mcp = Mcp::start(dir.path(), "mcp-client");
    let (text, is_error) = mcp.tool(json!({"type": "memfs_hello", "session": "evil"}));
    assert!(is_error, "{text}");
    let (text, is_error) =
        mcp.tool(json!({"command": "create", "path": "/memories/by-mcp.md", "file_text": "m\n"}));
    assert!(!is_error, "{text}");
    assert!(mcp.finish().success());
    // So does an attached exec, named with --as.
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["--as", "exec-client", "exec"])
        .arg(json!({"type": "memfs_hello", "session": "evil"}).to_string())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["--as", "exec-client", "exec"])
        .arg(r#"{"command":"create","path":"/memories/by-exec.md","file_text":"e\n"}"#)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // On a connection of its own, a hello after a tool call is a tool call.
    let sock = dir.path().join(".memfs/sock");
    let conn = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut call = |line: String| -> Value {
        (&conn).write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    let hello = |name: &str| json!({"type": "memfs_hello", "session": name}).to_string();
    assert_eq!(call(hello("app"))["is_error"], false);
    let made =
        call(r#"{"command":"create","path":"/memories/by-app.md","file_text":"s\n"}"#.into());
    assert_eq!(made["is_error"], false, "{made}");
    assert_eq!(call(hello("evil"))["is_error"], true);
    let made =
        call(r#"{"command":"create","path":"/memories/by-app-2.md","file_text":"s\n"}"#.into());
    assert_eq!(made["is_error"], false, "{made}");
    let actors: Vec<(String, String, String)> = rows(dir.path())
        .iter()
        .map(|r| {
            let a = &r["actor"];
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (s(&r["path"]), s(&a["door"]), s(&a["session"]))
        })
        .collect();
    let want = |p: &str, door: &str, session: &str| {
        (
            format!("/memories/{p}"),
            door.to_string(),
            session.to_string(),
        )
    };
    for expected in [
        want("by-mcp.md", "mcp", "mcp-client"),
        want("by-exec.md", "exec", "exec-client"),
        want("by-app.md", "socket", "app"),
        want("by-app-2.md", "socket", "app"),
    ] {
        assert!(actors.contains(&expected), "{expected:?} not in {actors:?}");
    }
}

const CLEAR: &str = r#"{"type":"memfs_clear"}"#;

/// An agent's `memfs_clear` as its MCP tool input: refused, nothing lost.
fn clear_through_mcp(dir: &Path, what: &str) {
    let mut mcp = Mcp::start(dir, "agent");
    let (text, is_error) = mcp.tool(json!({"type": "memfs_clear"}));
    assert!(mcp.finish().success());
    assert_refused_and_kept(dir, &json!({"is_error": is_error, "t": text}), what);
}

fn assert_refused_and_kept(dir: &Path, answer: &Value, door: &str) {
    assert_eq!(answer["is_error"], true, "{door}: {answer}");
    assert!(
        dir.join("memories/keep.md").exists() || {
            common::checkpoint(dir);
            dir.join("memories/keep.md").exists()
        },
        "{door} cleared the memory"
    );
}

#[test]
fn no_agent_door_clears_the_memory_and_every_door_agrees() {
    // Without an owner: exec, serve --stdio and mcp each on their own.
    let alone = tempfile::tempdir().unwrap();
    exec(
        alone.path(),
        r#"{"command":"create","path":"/memories/keep.md","file_text":"k\n"}"#,
    );
    let (_, answer) = exec(alone.path(), CLEAR);
    assert_refused_and_kept(alone.path(), &answer, "a local exec");
    let mut server = Server::start(alone.path(), &[]);
    let answer = server.call(CLEAR);
    assert!(server.finish().success());
    assert_refused_and_kept(alone.path(), &answer, "serve --stdio");
    clear_through_mcp(alone.path(), "a local mcp");

    // Beside an owner: the socket, an attached exec, an attached mcp.
    let dir = tempfile::tempdir().unwrap();
    let mut own = owner(dir.path());
    let made = own.call(r#"{"command":"create","path":"/memories/keep.md","file_text":"k\n"}"#);
    assert_eq!(made["is_error"], false);
    let answer = own.call(CLEAR);
    assert_refused_and_kept(dir.path(), &answer, "the owner's stdio");
    let conn = std::os::unix::net::UnixStream::connect(dir.path().join(".memfs/sock")).unwrap();
    (&conn).write_all(format!("{CLEAR}\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line).unwrap();
    assert_refused_and_kept(
        dir.path(),
        &serde_json::from_str(&line).unwrap(),
        "the socket",
    );
    let (_, answer) = exec(dir.path(), CLEAR);
    assert_refused_and_kept(dir.path(), &answer, "an attached exec");
    clear_through_mcp(dir.path(), "an attached mcp");

    // The application's own act: `memfs clear`, which asks before it acts.
    let out = run(dir.path(), &["clear"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_refused_and_kept(
        dir.path(),
        &json!({"is_error": true}),
        "clear without --yes",
    );
    let out = run(dir.path(), &["--as", "cleanup-job", "clear", "--yes"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out).trim(), "All memory cleared");
    let listing = own.call(r#"{"command":"view","path":"/memories"}"#);
    assert!(!content(&listing).contains("keep.md"), "{listing}");
    assert!(own.finish().success());
    let deleted = rows(dir.path())
        .into_iter()
        .find(|r| r["op"] == "delete")
        .expect("the clear is in the history");
    assert_eq!(deleted["actor"]["session"], "cleanup-job");
}

/// `count` lines, each different from every line of another `seed`.
fn distinct_lines(seed: char, count: usize) -> String {
    (0..count)
        .map(|i| format!("{seed}{i:07}-{seed}{seed}\n"))
        .collect()
}

#[test]
fn a_diff_of_two_files_with_every_line_different_ends_and_says_it_was_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    // Each side just under the default file limit (1 MiB).
    for (name, seed) in [("a.md", 'a'), ("b.md", 'b')] {
        let create = json!({"command": "create", "path": format!("/memories/{name}"),
                            "file_text": distinct_lines(seed, 80_000)});
        let (code, answer, _) = exec_stdin(dir.path(), &[], &create);
        assert_eq!(code, 0, "{answer}");
    }
    let versions: Vec<String> = rows(dir.path())
        .iter()
        .map(|r| r["version"].as_str().unwrap().to_string())
        .collect();
    let (a, b) = (&versions[versions.len() - 1], &versions[versions.len() - 2]);
    let check = |out: Output| {
        assert!(
            out.status.success(),
            "{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = stdout(&out);
        assert!(text.starts_with("--- "), "{}", &text[..200.min(text.len())]);
        assert!(
            text.contains("the search for the smallest diff stopped after 2 s"),
            "no notice at the end: {}",
            &text[text.len().saturating_sub(300)..]
        );
    };
    check(run(dir.path(), &["diff", a, b]));
    // Through a running owner: the same, and the owner goes on answering.
    let mut own = owner(dir.path());
    check(run(dir.path(), &["diff", a, b]));
    let listing = own.call(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(listing["is_error"], false);
    assert!(own.finish().success());
}

#[test]
fn an_export_is_private_and_checks_out_names_git_refuses() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        ".git/config",
        ".GIT/HEAD",
        "sub/.git/config",
        "sub/.git./x",
        "ok.md",
    ] {
        let create = json!({"command": "create", "path": format!("/memories/{path}"),
                            "file_text": format!("{path}\n")});
        let (code, answer, _) = exec_stdin(dir.path(), &[], &create);
        assert_eq!(code, 0, "{path}: {answer}");
    }
    let repo = tempfile::tempdir().unwrap();
    let git = repo.path().join("export");
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .arg("export")
        .arg("--git")
        .arg(&git)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (path, holds) in [
        ("ok.md", "ok.md"),
        (".GIT~memfs/HEAD", ".GIT/HEAD"),
        ("sub/.git.~memfs/x", "sub/.git./x"),
    ] {
        let text = std::fs::read_to_string(git.join(path)).unwrap_or_default();
        assert_eq!(text, format!("{holds}\n"), "{path}");
    }
    // A repository's own state in the memory (`.git`) is left out of the
    // export altogether (crate::path::TOOL_STATE), never checked out.
    for path in [".git~memfs", "sub/.git~memfs"] {
        assert!(!git.join(path).exists(), "{path}");
    }
    // Nothing in it, the repository included, is open to group or others.
    let mut stack = vec![git.clone()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", p.display());
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.to_string_lossy().contains(needle) {
            found.push(p.display().to_string());
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if meta.is_file() {
            let bytes = std::fs::read(&p).unwrap_or_default();
            if memchr::memmem::find(&bytes, needle.as_bytes()).is_some() {
                found.push(p.display().to_string());
            }
        }
    }
    found
}

#[test]
fn redacting_a_path_leaves_no_directory_of_that_name_with_or_without_an_owner() {
    for with_owner in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let name = "phoenix-codename";
        for input in [
            json!({"command": "create", "path": format!("/memories/{name}/deep/plan.md"), "file_text": "the plan\n"}),
            json!({"command": "create", "path": "/memories/other.md", "file_text": "other\n"}),
            json!({"command": "delete", "path": format!("/memories/{name}/deep/plan.md")}),
        ] {
            let (code, answer, _) = exec_stdin(dir.path(), &[], &input);
            assert_eq!(code, 0, "{answer}");
        }
        let created = rows(dir.path())
            .into_iter()
            .find(|r| r["op"] == "create" && r["path"].as_str().unwrap().contains(name))
            .unwrap();
        let own = with_owner.then(|| owner(dir.path()));
        let version = created["version"].as_str().unwrap();
        let out = run(dir.path(), &["redact", "--path", version]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout(&out).contains("2 directories left empty"),
            "{}",
            stdout(&out)
        );
        if let Some(own) = own {
            common::checkpoint(dir.path());
            assert!(own.finish().success());
        }
        assert_eq!(
            files_holding(dir.path(), name),
            Vec::<String>::new(),
            "owner: {with_owner}"
        );
        assert!(dir.path().join("memories/other.md").exists());
        // The history still replays to the memory as it is.
        let (_, listing) = exec(dir.path(), r#"{"command":"view","path":"/memories"}"#);
        assert!(content(&listing).contains("other.md"), "{listing}");
        assert!(!content(&listing).contains(name), "{listing}");
    }
}

#[test]
fn the_last_use_table_forgets_files_that_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memfs::Memory::open(dir.path(), memfs::memory::Options::default()).unwrap();
    let tool = memory.tool();
    for i in 0..300 {
        let path = format!("/memories/f{i}.md");
        for input in [
            json!({"command": "create", "path": path, "file_text": "x\n"}),
            json!({"command": "view", "path": path}),
            json!({"command": "delete", "path": path}),
        ] {
            assert!(!tool.call(&input).is_error, "{input}");
        }
    }
    let kept =
        tool.call(&json!({"command": "create", "path": "/memories/kept.md", "file_text": "k\n"}));
    assert!(!kept.is_error);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(
        !tool
            .call(&json!({"command": "view", "path": "/memories/kept.md"}))
            .is_error
    );
    assert!(memory.store().usage_entries() >= 300);
    // What the owner saves every minute, and forgets the dead on the way.
    let saved = memory.store().usage();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(memory.store().usage_entries(), 1);
    assert!(memory.write_out());
}

#[test]
fn a_full_stderr_loses_the_message_not_the_process() {
    let dir = tempfile::tempdir().unwrap();
    exec(
        dir.path(),
        r#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#,
    );
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["show", "999"])
        .stderr(full.try_clone().unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A log line too (-v: the index is built, there being none): the
    // logger's report that stderr refused it was an eprintln!, which
    // panicked (exit 101).
    let out = memfs()
        .arg("-v")
        .arg("--data")
        .arg(dir.path())
        .args(["search", "--", "zebra"])
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn a_version_has_one_spelling() {
    let dir = tempfile::tempdir().unwrap();
    exec(
        dir.path(),
        r#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#,
    );
    let v = rows(dir.path())[0]["version"].as_str().unwrap().to_string();
    for good in [v.clone(), format!("v{v}")] {
        let out = run(dir.path(), &["show", &good]);
        assert!(out.status.success(), "{good}: {out:?}");
        assert_eq!(stdout(&out), "a\n");
    }
    for bad in [
        format!("+{v}"),
        format!(" {v}"),
        format!("0{v}"),
        format!("vvv{v}"),
        format!("{v} "),
        "-1".into(),
        "".into(),
    ] {
        let out = run(dir.path(), &["show", "--", &bad]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("is not a version"),
            "{out:?}"
        );
    }
}

#[test]
fn a_percent_in_a_name_is_a_character_and_one_name_has_one_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let create = |path: &str| {
        let input = json!({"command": "create", "path": path, "file_text": "x\n"});
        exec_stdin(dir.path(), &[], &input).1
    };
    assert_eq!(create("/memories/100%2easy.md")["is_error"], false);
    assert!(
        dir.path().join("memories/100%2easy.md").exists() || {
            common::checkpoint(dir.path());
            dir.path().join("memories/100%2easy.md").exists()
        }
    );
    for hostile in [
        "/memories/%2e%2e/x.md",
        "/memories/.%2e/x.md",
        "/memories/%252e%252e/x.md",
        "/memories/a%2fb.md",
    ] {
        let answer = create(hostile);
        assert_eq!(answer["is_error"], true, "{hostile}: {answer}");
    }
    // Composed and decomposed: one file, as the hosted memory stores have it.
    assert_eq!(create("/memories/cafe\u{301}.md")["is_error"], false);
    let again = create("/memories/caf\u{e9}.md");
    assert_eq!(again["is_error"], true, "{again}");
    assert!(content(&again).contains("already exists"), "{again}");
    let view = json!({"command": "view", "path": "/memories/cafe\u{301}.md"});
    assert_eq!(exec_stdin(dir.path(), &[], &view).1["is_error"], false);
    let on_disk: Vec<String> = std::fs::read_dir(dir.path().join("memories"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(on_disk.contains(&"caf\u{e9}.md".to_string()), "{on_disk:?}");
}

#[test]
fn the_mount_and_the_disk_keep_the_one_spelling_the_tool_addresses() {
    if skip_without_fuse("the_mount_and_the_disk_keep_the_one_spelling_the_tool_addresses") {
        return;
    }
    // A decomposed name found on disk is one the tool could not address:
    // left out (and left alone), as other such names are.
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("memories")).unwrap();
    std::fs::write(data.path().join("memories/cafe\u{301}.md"), "nfd\n").unwrap();
    let view = json!({"command": "view", "path": "/memories"});
    let (_, listing, stderr) = exec_stdin(data.path(), &[], &view);
    assert!(!content(&listing).contains("caf"), "{listing}");
    assert!(stderr.contains("left out 1 name"), "{stderr}");
    assert!(data.path().join("memories/cafe\u{301}.md").exists());
    // Through the mount, a person cannot make one; the composed name works
    // and is the file the tool sees.
    let m = Mounted::start(&[]);
    let err = std::fs::write(m.at("cafe\u{301}.md"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    std::fs::write(m.at("caf\u{e9}.md"), "nfc\n").unwrap();
    assert_eq!(
        m.view("/memories/cafe\u{301}.md"),
        "Here's the content of /memories/caf\u{e9}.md with line numbers:\n     1\tnfc"
    );
}
