//! The binary as a user runs it: `exec`, `serve --stdio`, restarts, the data-dir
//! lock, symlinks planted in the data dir, and what messages never show.

mod common;

use common::{content, exec, exec_stdin, exec_with, memfs, Server};
use serde_json::json;

#[test]
fn exec_runs_one_command_and_sets_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0);
    assert_eq!(v["is_error"], false);
    assert!(content(&v).ends_with("\n0\t/memories"));
    let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories/nope"}"#);
    assert_eq!((code, &v["is_error"]), (1, &json!(true)));
    let (code, v) = exec(dir.path(), "{not json");
    assert_eq!(code, 1);
    assert!(
        content(&v).starts_with("Error: the command is not valid JSON"),
        "{v}"
    );
}

#[test]
fn exec_reads_the_command_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, _) = exec_stdin(
        dir.path(),
        &[],
        &json!({"command":"create","path":"/memories/from-stdin.md","file_text":"hi\n"}),
    );
    assert_eq!(code, 0);
    assert!(content(&v).contains("File created successfully at: /memories/from-stdin.md"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/from-stdin.md")).unwrap(),
        "hi\n"
    );
}

#[test]
fn write_restart_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let r = server.call(
        r#"{"command":"create","path":"/memories/proj/progress.md","file_text":"step 1 done\n"}"#,
    );
    assert_eq!(r["is_error"], false, "{r}");
    server.call(r#"{"command":"insert","path":"/memories/proj/progress.md","insert_line":1,"insert_text":"step 2 done\n"}"#);
    server.call(
        r#"{"command":"rename","old_path":"/memories/proj","new_path":"/memories/archive/proj"}"#,
    );
    assert!(server.finish().success());
    // The files are plain files in the SDK's layout...
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/archive/proj/progress.md")).unwrap(),
        "step 1 done\nstep 2 done\n"
    );
    // ...and a new process serves them.
    let (code, v) = exec(
        dir.path(),
        r#"{"command":"view","path":"/memories/archive/proj/progress.md"}"#,
    );
    assert_eq!(code, 0);
    assert_eq!(
        content(&v),
        "Here's the content of /memories/archive/proj/progress.md with line numbers:\n     1\tstep 1 done\n     2\tstep 2 done"
    );
}

#[test]
fn an_existing_sdk_memory_dir_works_as_is() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memories/notes")).unwrap();
    std::fs::write(dir.path().join("memories/notes/a.md"), "from the SDK\n").unwrap();
    let (_, v) = exec(dir.path(), r#"{"command":"view","path":"/memories"}"#);
    assert!(
        content(&v).ends_with("13\t/memories\n13\t/memories/notes/\n13\t/memories/notes/a.md"),
        "{v}"
    );
}

#[test]
fn serve_with_a_mount_is_told_the_data_dir_is_busy_and_exec_attaches() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    server.call(r#"{"command":"view","path":"/memories"}"#);
    // exec attaches to the running memfs.
    let (code, v, _) = exec_with(dir.path(), &[], r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0, "{v}");
    // `--mount` on a serving memfs needs the data dir to itself (a plain
    // `memfs mount` is served by the owner: see tests/sessions.rs).
    let out = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["serve", "--stdio", "--mount"])
        .arg(mnt.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let pid = server.child.id();
    assert!(
        stderr.contains(&format!("is in use by another memfs process (pid {pid})")),
        "{stderr}"
    );
    assert!(server.finish().success());
    // Once it is gone, the data dir opens again.
    assert_eq!(
        exec(dir.path(), r#"{"command":"view","path":"/memories"}"#).0,
        0
    );
}

#[test]
fn serve_answers_tool_use_blocks_and_survives_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(dir.path(), &["--max-file-size", "1K"]);
    let r = s.call(r#"{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"create","path":"/memories/a.txt","file_text":"x\n"}}"#);
    assert_eq!(
        r,
        json!({"type": "tool_result", "tool_use_id": "toolu_01", "content": "File created successfully at: /memories/a.txt", "is_error": false})
    );
    let r = s.call(r#"{"type":"tool_use","id":"toolu_02","name":"memory","input":{"command":"view","path":"/memories/missing"}}"#);
    assert_eq!(r["tool_use_id"], "toolu_02");
    assert_eq!(r["is_error"], true);
    let r = s.call(r#"{"type":"tool_use","id":"toolu_03","name":"bash","input":{}}"#);
    assert_eq!(
        (r["tool_use_id"].as_str(), r["is_error"].as_bool()),
        (Some("toolu_03"), Some(true))
    );
    assert!(content(&r).contains("runs the `memory` tool, not `bash`"));
    let garbage = [
        ("{\"command\": ", "not valid JSON"),
        ("\u{1}\u{2}binary", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ("42", "must be a JSON object"),
        (r#"{"type":"text","text":"hi"}"#, "not a `text` block"),
        (
            r#"{"type":"tool_use","name":"memory","input":{}}"#,
            "needs a string `id`",
        ),
        (
            r#"{"command":"view","path":["x"]}"#,
            "must be a string, not an array",
        ),
        (
            r#"{"command":"view","path":"/memories/../../etc/passwd"}"#,
            "Invalid path",
        ),
    ];
    for (line, want) in garbage {
        let r = s.call(line);
        assert_eq!(r["is_error"], true, "{line}");
        assert!(content(&r).contains(want), "{line} answered {r}");
    }
    // Invalid UTF-8 and an oversized line (the limit follows --max-file-size).
    s.send_raw(b"{\"command\":\"view\",\"path\":\"\xff\xfe\"}\n");
    assert!(content(&s.recv().unwrap()).contains("not valid JSON"));
    let huge = format!(
        r#"{{"command":"create","path":"/memories/h","file_text":"{}"}}"#,
        "z".repeat(200_000)
    );
    let r = s.call(&huge);
    assert!(content(&r).contains("the line is longer than"), "{r}");
    // Blank lines get no answer; the server is still fine afterwards.
    s.send("");
    s.send("   ");
    let r = s.call(r#"{"command":"view","path":"/memories/a.txt"}"#);
    assert_eq!(
        content(&r),
        "Here's the content of /memories/a.txt with line numbers:\n     1\tx"
    );
    assert!(s.finish().success());
}

#[test]
fn pipelined_answers_come_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(dir.path(), &[]);
    let mut batch = String::new();
    for i in 0..300 {
        batch.push_str(&format!(
            "{{\"command\":\"create\",\"path\":\"/memories/p/{i}.txt\",\"file_text\":\"{i}\\n\"}}\n{{\"command\":\"str_replace\",\"path\":\"/memories/p/{i}.txt\",\"old_str\":\"{i}\",\"new_str\":\"n{i}\"}}\n"
        ));
    }
    let mut stdin = s.take_stdin().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(batch.as_bytes()).unwrap();
    });
    for i in 0..300 {
        let created = s.recv().unwrap();
        assert_eq!(
            content(&created),
            format!("File created successfully at: /memories/p/{i}.txt")
        );
        let edited = s.recv().unwrap();
        assert!(
            content(&edited).ends_with(&format!("     1\tn{i}")),
            "{edited}"
        );
    }
    writer.join().unwrap();
    assert!(s.recv().is_none());
    for i in (0..300).step_by(37) {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(format!("memories/p/{i}.txt"))).unwrap(),
            format!("n{i}\n")
        );
    }
}

#[test]
fn symlinks_in_the_data_dir_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.env"), "TOKEN=1\n").unwrap();
    std::fs::create_dir_all(dir.path().join("memories")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("memories/link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.env"),
        dir.path().join("memories/evil.txt"),
    )
    .unwrap();
    let d = dir.path();
    let (_, v) = exec(d, r#"{"command":"view","path":"/memories/evil.txt"}"#);
    assert_eq!(
        content(&v),
        "Error: /memories/evil.txt is a symbolic link, which memfs does not follow"
    );
    let (_, v) = exec(
        d,
        r#"{"command":"view","path":"/memories/link/secret.env"}"#,
    );
    assert!(content(&v).contains("does not exist"), "{v}");
    let (code, v) = exec(
        d,
        r#"{"command":"create","path":"/memories/link/planted","file_text":"x"}"#,
    );
    assert_eq!(code, 1, "{v}");
    // The error names the link on the way, not the file asked for.
    assert_eq!(
        content(&v),
        "Error: Cannot create /memories/link/planted: /memories/link is a symbolic link, which memfs does not follow"
    );
    let (_, v) = exec(
        d,
        r#"{"command":"str_replace","path":"/memories/evil.txt","old_str":"TOKEN","new_str":"X"}"#,
    );
    assert!(content(&v).contains("does not exist"), "{v}");
    let (_, v) = exec(
        d,
        r#"{"command":"insert","path":"/memories/evil.txt","insert_line":0,"insert_text":"X"}"#,
    );
    assert!(content(&v).contains("does not exist"), "{v}");
    // The listing does not show them; nothing outside changed.
    let (_, v) = exec(d, r#"{"command":"view","path":"/memories"}"#);
    assert!(
        !content(&v).contains("link") && !content(&v).contains("evil"),
        "{v}"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.env")).unwrap(),
        "TOKEN=1\n"
    );
    // Deleting the link removes the link, not its target.
    let (code, _) = exec(d, r#"{"command":"delete","path":"/memories/link"}"#);
    assert_eq!(code, 0);
    assert!(outside.path().join("secret.env").exists());
}

#[test]
fn no_message_names_a_host_path() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().to_str().unwrap().to_string();
    let mut s = Server::start(
        dir.path(),
        &["--max-file-size", "8", "--max-store-size", "12"],
    );
    let inputs = [
        r#"{"command":"view","path":"/memories/x"}"#,
        r#"{"command":"create","path":"/memories/a","file_text":"0123456789"}"#,
        r#"{"command":"create","path":"/memories/a","file_text":"0123"}"#,
        r#"{"command":"create","path":"/memories/b","file_text":"01234567"}"#,
        r#"{"command":"create","path":"/memories/a/b","file_text":"1"}"#,
        r#"{"command":"str_replace","path":"/memories/a","old_str":"0","new_str":"0123456789"}"#,
        r#"{"command":"insert","path":"/memories/zz","insert_line":0,"insert_text":"1"}"#,
        r#"{"command":"delete","path":"/memories/../../x"}"#,
        r#"{"command":"rename","old_path":"/memories/a","new_path":"/memories/a/b"}"#,
        r#"{"command":"view","path":"/etc/passwd"}"#,
    ];
    for input in inputs {
        let r = s.call(input);
        let text = content(&r);
        assert!(
            !text.contains(&host) && !text.contains("/tmp"),
            "{input} answered {text}"
        );
    }
}

#[test]
fn deleting_a_directory_with_a_non_utf8_name_keeps_that_file_and_the_data_dir_usable() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("memories/old");
    std::fs::create_dir_all(&old).unwrap();
    // A file memfs never loads (its name is not UTF-8), inside a directory the agent deletes.
    std::fs::write(
        old.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")),
        "latin-1 name",
    )
    .unwrap();
    std::fs::write(old.join("plain.md"), "x").unwrap();
    let (code, v) = exec(dir.path(), r#"{"command":"delete","path":"/memories/old"}"#);
    assert_eq!(code, 0, "{v}");
    // memfs' own file is gone; the one it cannot address stays, untouched
    // (issue 48: what cannot be taken in is never deleted).
    assert!(!old.join("plain.md").exists());
    let left: Vec<_> = std::fs::read_dir(&old)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsStr::from_bytes(b"caf\xe9.txt")]);
    assert_eq!(
        std::fs::read_dir(dir.path().join(".memfs/trash"))
            .unwrap()
            .count(),
        0
    );
    // And the data dir opens again.
    let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn listing_and_create_options_work_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flags: &[&str], input: &str| {
        // The data dir comes from MEMFS_DATA here, as a user may set it.
        let out = memfs()
            .env("MEMFS_DATA", dir.path())
            .args(flags)
            .arg("exec")
            .arg(input)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), content(&v).to_string())
    };
    for name in ["notes.md", "notes.md~", "draft.tmp"] {
        run(
            &[],
            &format!(r#"{{"command":"create","path":"/memories/{name}","file_text":"x"}}"#),
        );
    }
    let view = r#"{"command":"view","path":"/memories"}"#;
    let (_, default) = run(&[], view);
    assert!(
        default.contains("/memories/draft.tmp") && !default.contains("notes.md~"),
        "{default}"
    );
    let (_, shown) = run(&["--show-editor-files", "--hide", "*.tmp"], view);
    assert!(
        shown.contains("/memories/notes.md~") && !shown.contains("draft.tmp"),
        "{shown}"
    );
    let again = r#"{"command":"create","path":"/memories/notes.md","file_text":"new"}"#;
    assert_eq!(
        run(&[], again),
        (
            Some(1),
            "Error: File /memories/notes.md already exists".to_string()
        )
    );
    assert_eq!(run(&["--create-overwrites"], again).0, Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/notes.md")).unwrap(),
        "new"
    );
}

#[test]
fn data_dir_mistakes_are_caught_before_anything_is_made() {
    let top = tempfile::tempdir().unwrap();
    // --data naming a file: before, "File exists".
    let file = top.path().join("notes.txt");
    std::fs::write(&file, "x").unwrap();
    let (code, _, err) = exec_with(&file, &[], r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 2);
    assert!(err.contains("is a file, not a directory"), "{err}");
    // --data naming the memories folder itself: before, memories/memories.
    let memories = top.path().join("project/memories");
    std::fs::create_dir_all(&memories).unwrap();
    std::fs::write(memories.join("notes.md"), "mine\n").unwrap();
    let (code, _, err) = exec_with(&memories, &[], r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 2);
    assert!(err.contains("looks like a memories folder itself"), "{err}");
    assert!(
        err.contains(&format!("--data {}", top.path().join("project").display())),
        "{err}"
    );
    assert!(!memories.join("memories").exists() && !memories.join(".memfs").exists());
    // Its parent is the data dir, and the notes are there.
    let (code, v) = exec(
        &top.path().join("project"),
        r#"{"command":"view","path":"/memories/notes.md"}"#,
    );
    assert_eq!(code, 0, "{v}");
    // An empty folder named memories is a fine new data dir.
    let fresh = top.path().join("other/memories");
    std::fs::create_dir_all(&fresh).unwrap();
    assert_eq!(
        exec(&fresh, r#"{"command":"view","path":"/memories"}"#).0,
        0
    );
}

#[test]
fn completions_and_the_man_page_are_generated() {
    // bash loads the script and registers the completion function.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"source <("$0" completions bash) && complete -p memfs"#)
        .arg(env!("CARGO_BIN_EXE_memfs"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("-F _memfs"));
    for shell in ["zsh", "fish"] {
        let out = memfs().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in ["exec", "serve", "mcp", "mount", "scan"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let out = memfs().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH memfs 1"), "{page}");
    assert!(
        page.contains("\\-\\-data") && page.contains("completions"),
        "{page}"
    );
}

/// The `ExecStart=` command line of an example systemd unit, with memfs'
/// path and `%h` (the user's home) replaced for a test.
fn unit_command(unit: &str, home: &std::path::Path) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/systemd")
        .join(unit);
    let text = std::fs::read_to_string(path).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    line.split_whitespace()
        .map(|word| {
            word.replace("/usr/local/bin/memfs", env!("CARGO_BIN_EXE_memfs"))
                .replace("%h", &home.display().to_string())
                .replace(
                    "/var/lib/memfs",
                    &home.join("var-lib-memfs").display().to_string(),
                )
        })
        .collect()
}

#[test]
fn the_example_systemd_units_start_serve_and_stop_cleanly() {
    let home = tempfile::tempdir().unwrap();
    // The system unit: a socket-only owner; SIGTERM ends it with 0.
    let argv = unit_command("memfs.service", home.path());
    let mut daemon = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .unwrap();
    let data = home.path().join("var-lib-memfs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(data.join(".memfs/sock")).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the unit's memfs did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (code, v) = exec(
        &data,
        r#"{"command":"create","path":"/memories/a.md","file_text":"a"}"#,
    );
    assert_eq!(code, 0, "{v}");
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&daemon),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    assert!(daemon.wait().unwrap().success());
    assert_eq!(
        std::fs::read_to_string(data.join("memories/a.md")).unwrap(),
        "a"
    );
    // The user unit's command line parses (it mounts; tests/mount.rs covers mounting).
    let argv = unit_command("memfs-mount.service", home.path());
    assert_eq!(
        &argv[argv.len() - 2..],
        ["mount", &home.path().join("memory").display().to_string()]
    );
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..argv.len() - 2])
        .args(["mount", "--help"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_subcommand_groups_its_options_the_same_way() {
    // The global options, grouped, in `memfs --help`; each subcommand's
    // help points there rather than repeating them.
    let out = memfs().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for part in [
        "Data:",
        "--data <DIR>",
        "Limits:",
        "--max-file-size <SIZE>",
        "Sessions:",
        "What the agent may write:",
    ] {
        assert!(help.contains(part), "`memfs --help` lacks {part}:\n{help}");
    }
    for sub in ["exec", "serve", "mcp", "mount", "scan"] {
        let out = memfs().args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.contains("memfs --help"), "{sub}:\n{help}");
    }
    let out = memfs().args(["mount", "--help"]).output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("Mount:\n      --allow-other"));
    let out = memfs().arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("memfs {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `exec --raw`: the result's text as text (tabs and newlines as they are),
/// an error's on stderr, with the same exit codes as without.
#[test]
fn exec_raw_prints_the_text_for_people() {
    let dir = tempfile::tempdir().unwrap();
    let run = |input: &str| {
        let out = memfs()
            .arg("--data")
            .arg(dir.path())
            .args(["exec", "--raw", input])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, out, _) =
        run(r#"{"command":"create","path":"/memories/t.md","file_text":"a\tb\n"}"#);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "File created successfully at: /memories/t.md\n")
    );
    let (code, out, _) = run(r#"{"command":"view","path":"/memories/t.md"}"#);
    assert_eq!(code, Some(0));
    assert!(out.ends_with("     1\ta\tb\n"), "{out:?}");
    let (code, out, err) = run(r#"{"command":"view","path":"/memories/nope"}"#);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert_eq!(
        err,
        "The path /memories/nope does not exist. Please provide a valid path.\n"
    );
    let (code, _, err) = run("{not json");
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("Error: the command is not valid JSON"),
        "{err}"
    );
}

/// Loading a large memory says how far it is when stderr is a terminal
/// (here a pseudo-terminal from script(1)), and nothing when it is not.
#[test]
fn loading_a_large_memory_shows_progress_on_a_terminal() {
    let test = "loading_a_large_memory_shows_progress_on_a_terminal";
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        common::skip(test, "script(1) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for d in 0..60 {
        let sub = dir.path().join(format!("memories/d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..200 {
            std::fs::write(sub.join(format!("f{f}.md")), "x").unwrap();
        }
    }
    let view = r#"'{"command":"view","path":"/memories/d0/f0.md"}'"#;
    let command = format!(
        "{} --data {} --no-history exec {view}",
        env!("CARGO_BIN_EXE_memfs"),
        dir.path().display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("memfs: loading the memory: 10"), "{text}");
    assert!(
        text.contains("memfs: loaded 12061 files and directories in"),
        "{text}"
    );
    let plain = memfs()
        .arg("--data")
        .arg(dir.path())
        .args([
            "--no-history",
            "exec",
            r#"{"command":"view","path":"/memories/d0/f0.md"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stderr), "");
}

/// `scripts/demo.sh --pace` without a number is a usage error, not a
/// shell's "unbound variable".
#[test]
fn the_demo_says_its_usage_for_a_pace_without_a_value() {
    let root = env!("CARGO_MANIFEST_DIR");
    for args in [&["--pace"][..], &["--pace", "soon"][..]] {
        let out = std::process::Command::new("bash")
            .arg(format!("{root}/scripts/demo.sh"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("usage: scripts/demo.sh"), "{err}");
    }
}

/// Every relative link in the README and docs/ names a file in the repo.
#[test]
fn the_docs_link_only_to_files_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)]*)?\)").unwrap();
    let mut missing = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for cap in link.captures_iter(&text) {
            let target = &cap[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !doc.parent().unwrap().join(target).exists() {
                missing.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// `memfs ... | head -1`: a reader that stops early is no error, and no
/// command panics writing into the closed pipe (stdout; `memfs::say!`
/// ignores a closed stderr).
#[test]
fn no_command_panics_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "{{\"command\":\"create\",\"path\":\"/memories/f{i}.md\",\"file_text\":\"{}\\n\"}}\n",
                "x".repeat(200)
            )
        })
        .collect();
    let mut serve = memfs()
        .args(["--data", dir.path().to_str().unwrap(), "serve", "--stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(serve.stdin.as_mut().unwrap(), lines.as_bytes()).unwrap();
    drop(serve.stdin.take());
    assert!(serve.wait().unwrap().success());
    let data = dir.path().to_str().unwrap();
    for args in [
        "completions zsh",
        "completions bash",
        "completions fish",
        "man",
        "--help",
        "log",
        "log --json",
        r#"exec {"command":"view","path":"/memories"}"#,
        "show 3",
        "serve --help",
    ] {
        let out = std::process::Command::new("bash")
            .arg("-c")
            // The reader closes the pipe at once: every write memfs makes
            // meets a closed pipe.
            .arg(r#""$0" --data "$1" $2 | (exec 0<&-; sleep 0.5); exit "${PIPESTATUS[0]}""#)
            .arg(env!("CARGO_BIN_EXE_memfs"))
            .arg(data)
            .arg(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "memfs {args}: {err}");
        assert_ne!(out.status.code(), Some(101), "memfs {args}: {err}");
    }
}

#[test]
fn log_n_lists_only_the_newest_versions() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        let input =
            format!(r#"{{"command":"create","path":"/memories/n{i}.md","file_text":"x\n"}}"#);
        assert_eq!(exec(dir.path(), &input).0, 0);
    }
    let data = dir.path().to_str().unwrap();
    for flags in [&["-n", "3"][..], &["--max-count", "3", "--json"][..]] {
        let out = memfs()
            .args(["--data", data, "log"])
            .args(flags)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].contains("/memories/n4.md"), "newest first: {text}");
        assert!(lines[2].contains("/memories/n2.md"), "{text}");
    }
}

#[test]
fn a_typo_in_data_is_an_error_not_a_new_memory() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("no-such-parent").join("memory");
    let out = memfs()
        .args(["--data", typo.to_str().unwrap(), "exec"])
        .arg(r#"{"command":"view","path":"/memories"}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(out.stdout.is_empty(), "nothing answered: {out:?}");
    assert!(!dir.path().join("no-such-parent").exists(), "nothing made");
    // The memory's own directory is made, as before.
    let fresh = dir.path().join("fresh");
    assert_eq!(
        exec(&fresh, r#"{"command":"view","path":"/memories"}"#).0,
        0
    );
    assert!(fresh.join("memories").is_dir());
}

#[test]
fn a_subcommands_help_lists_its_own_options_and_points_to_the_global_ones() {
    let help = |args: &[&str]| {
        let out = memfs().args(args).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for sub in ["log", "exec", "mount", "web"] {
        let text = help(&[sub, "--help"]);
        assert!(!text.contains("--max-file-size"), "{sub}: {text}");
        assert!(text.contains("memfs --help"), "{sub}: {text}");
        // (Its own options' long help, one blank line between each.)
        assert!(text.lines().count() < 40, "{sub}: {text}");
    }
    let top = help(&["--help"]);
    // One short line a command, within 80 columns.
    let commands = top
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    for line in commands.lines() {
        assert!(
            line.chars().count() <= 80,
            "too long for 80 columns: {line}"
        );
    }
    assert!(
        top.contains("--max-file-size") && top.contains("--data"),
        "{top}"
    );
    // The global options still work after the subcommand.
    let dir = tempfile::tempdir().unwrap();
    let out = memfs()
        .args(["exec", "--data", dir.path().to_str().unwrap()])
        .arg(r#"{"command":"view","path":"/memories"}"#)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn memfs_web_on_a_data_dir_that_is_not_there_is_an_error_and_makes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("memory");
    let out = memfs()
        .arg("--data")
        .arg(&missing)
        .args(["web", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("there is no memory at"), "{err}");
    assert!(!missing.exists(), "a data dir was made");
}
