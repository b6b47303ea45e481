//! A hostile or runaway agent (or local process) cannot crash, freeze or
//! flood memfs: every resource it can drive is bounded, with a clear error
//! that names the limit and its flag, and nothing already stored is lost.
//! Each test drives the real binary through the door the attacker would use.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use common::{content, exec, exec_stdin, memfs, rss_kib, skip_without_fuse, Mounted, Server};

fn ok(v: &Value) -> bool {
    v["is_error"] == false
}

#[test]
fn str_replace_with_a_million_matches_is_quick_and_its_error_short() {
    let dir = tempfile::tempdir().unwrap();
    let text = "a".repeat(1 << 20);
    let made = exec_stdin(
        dir.path(),
        &[],
        &json!({"command": "create", "path": "/memories/a.txt", "file_text": text}),
    );
    assert!(ok(&made.1), "{:?}", made.1);
    // Quadratic before: 201 s of CPU under the write lock, and an error of
    // 786,531 characters listing every line number.
    let (code, v, _) = exec_stdin(
        dir.path(),
        &[],
        &json!({"command": "str_replace", "path": "/memories/a.txt", "old_str": "a", "new_str": "b"}),
    );
    assert_eq!(code, 1);
    let text = content(&v);
    assert!(
        text.starts_with("No replacement was performed. Multiple occurrences of old_str `a` in lines: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, and more. Please ensure it is unique"),
        "{text}"
    );
    // An enormous old_str is echoed clipped, not whole.
    let (_, v, _) = exec_stdin(
        dir.path(),
        &[],
        &json!({"command": "str_replace", "path": "/memories/a.txt", "old_str": "b".repeat(200_000), "new_str": ""}),
    );
    assert!(content(&v).contains("did not appear verbatim"), "{v}");
    assert!(
        content(&v).len() < 1_000,
        "{} characters",
        content(&v).len()
    );
}

#[test]
fn depth_is_limited_for_create_and_rename() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--max-depth", "8"];
    let deep = |n: usize| {
        format!(
            "/memories/{}",
            (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join("/")
        )
    };
    let create = |path: &str| {
        exec_stdin(
            dir.path(),
            &flags,
            &json!({"command": "create", "path": path, "file_text": "x"}),
        )
    };
    assert!(ok(&create(&deep(8)).1));
    let too_deep = format!("{}/z/9", deep(7));
    let (code, v, _) = create(&too_deep);
    assert_eq!(code, 1);
    assert_eq!(
        content(&v),
        format!("Error: Cannot create {too_deep}: the memory would be deeper than the limit of 8 levels (--max-depth)")
    );
    // Rename nests a whole subtree: x/y/z/f (depth 4) moved 5 levels down is 9 deep.
    assert!(ok(&create("/memories/x/y/z/f").1));
    let rename = |to: &str| {
        exec_stdin(
            dir.path(),
            &flags,
            &json!({"command": "rename", "old_path": "/memories/x", "new_path": to}),
        )
    };
    let (code, v, _) = rename("/memories/1/2/3/4/5/x");
    assert_eq!(code, 1);
    assert!(content(&v).contains("(--max-depth)"), "{v}");
    assert!(ok(&rename("/memories/1/2/3/4/x").1));
}

#[test]
fn entry_limits_name_their_flags_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        dir.path(),
        &["--max-entries", "10", "--max-dir-entries", "4"],
    );
    let create = |s: &mut Server, path: &str| {
        s.call(&json!({"command": "create", "path": path, "file_text": "x"}).to_string())
    };
    for i in 0..4 {
        assert!(ok(&create(&mut server, &format!("/memories/d/f{i}"))));
    }
    let full = create(&mut server, "/memories/d/f4");
    assert_eq!(
        content(&full),
        "Error: Cannot create /memories/d/f4: the directory would hold more than the limit of 4 entries (--max-dir-entries)"
    );
    // d and its 4 files are 5 entries; e, e/g1..e/g4 make 10.
    for i in 1..=4 {
        assert!(ok(&create(&mut server, &format!("/memories/e/g{i}"))));
    }
    let over = create(&mut server, "/memories/h");
    assert!(
        content(&over).contains("limit of 10 files and directories (--max-entries)"),
        "{over}"
    );
    // Deleting makes room again; everything made before is still there.
    let gone = server.call(r#"{"command":"delete","path":"/memories/e/g4"}"#);
    assert!(ok(&gone));
    assert!(ok(&create(&mut server, "/memories/h")));
    let view = server.call(r#"{"command":"view","path":"/memories"}"#);
    for name in ["d/f0", "d/f3", "e/g1", "h"] {
        assert!(
            content(&view).contains(&format!("/memories/{name}")),
            "{view}"
        );
    }
    assert!(server.finish().success());
}

/// Makes `levels` nested directories `d` below `root` on disk, one at a time
/// through directory descriptors (the path is far longer than PATH_MAX), with
/// a file at the bottom.
fn make_deep_tree(root: &Path, levels: usize) {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    let mut dir = rustix::fs::open(root, flags, Mode::empty()).unwrap();
    for _ in 0..levels {
        mkdirat(&dir, "d", Mode::from_raw_mode(0o700)).unwrap();
        dir = openat(&dir, "d", flags, Mode::empty()).unwrap();
    }
    let file = openat(
        &dir,
        "bottom.md",
        OFlags::WRONLY | OFlags::CREATE,
        Mode::from_raw_mode(0o600),
    )
    .unwrap();
    rustix::io::write(&file, b"the bottom\n").unwrap();
}

#[test]
fn a_data_dir_far_past_the_depth_limit_loads_under_ulimit_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let memories = dir.path().join("memories");
    fs::create_dir(&memories).unwrap();
    // Before: loading opened one descriptor per level (EMFILE under the common
    // limit), and deleting overflowed the persister thread's stack.
    make_deep_tree(&memories, 5_000);
    let run = |input: &str| {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$0\" --data \"$1\" exec \"$2\"")
            .arg(env!("CARGO_BIN_EXE_memfs"))
            .arg(dir.path())
            .arg(input)
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, v, err) = run(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, Some(0), "{v} {err}");
    assert!(content(&v).contains("/memories/d/d/"), "{v}");
    assert!(
        err.contains("the memory is 5001 levels deep, over --max-depth 64; it loads"),
        "{err}"
    );
    let (code, v, _) = run(r#"{"command":"delete","path":"/memories/d"}"#);
    assert_eq!(code, Some(0), "{v}");
    assert!(!memories.join("d").exists());
    let (code, v, err) = run(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, Some(0), "{v}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn directory_views_are_capped_and_page_through_view_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    const FILES: usize = 3_000;
    for i in 0..FILES {
        server.send(
            &json!({"command": "create", "path": format!("/memories/note-{i:04}.md"), "file_text": "x"})
                .to_string(),
        );
    }
    for _ in 0..FILES {
        assert!(ok(&server.recv().unwrap()));
    }
    let mut seen = Vec::new();
    let mut next = None;
    loop {
        let view = match next {
            None => server.call(r#"{"command":"view","path":"/memories"}"#),
            Some(n) => server.call(
                &json!({"command": "view", "path": "/memories", "view_range": [n, -1]}).to_string(),
            ),
        };
        assert!(ok(&view), "{view}");
        let text = content(&view);
        let (body, note) = match text.rsplit_once('\n') {
            Some((body, last)) if last.starts_with('[') => (body, Some(last)),
            _ => (text, None),
        };
        assert!(
            body.chars().count() <= 16_000,
            "{} characters",
            body.chars().count()
        );
        seen.extend(
            body.lines()
                .skip(2) // the header and the directory's own row
                .map(|row| row.split_once('\t').unwrap().1.to_string()),
        );
        let Some(note) = note else { break };
        let at = note
            .find("view_range [")
            .expect("the note says how to see the rest")
            + 12;
        let n: usize = note[at..].split(',').next().unwrap().parse().unwrap();
        assert_eq!(n, seen.len() + 1, "{note}");
        next = Some(n);
    }
    let want: Vec<String> = (0..FILES)
        .map(|i| format!("/memories/note-{i:04}.md"))
        .collect();
    assert_eq!(seen, want);
    let bad = server.call(r#"{"command":"view","path":"/memories","view_range":[3001,-1]}"#);
    assert!(content(&bad).contains("lists 3000 entries"), "{bad}");
    assert!(server.finish().success());
}

#[test]
fn duplicate_keys_are_refused_at_every_door() {
    let dir = tempfile::tempdir().unwrap();
    // exec: a policy filter reading the first `path` saw /memories/a.
    let (code, v) = exec(
        dir.path(),
        r#"{"command":"create","path":"/memories/a","file_text":"x","path":"/memories/b"}"#,
    );
    assert_eq!(code, 1);
    assert!(
        content(&v).contains("the key `path` appears twice in one object"),
        "{v}"
    );
    assert!(!dir.path().join("memories/a").exists() && !dir.path().join("memories/b").exists());
    // serve --stdio, in a tool_use block's input.
    let mut server = Server::start(dir.path(), &[]);
    let answer = server.call(
        r#"{"type":"tool_use","id":"t1","name":"memory","input":{"command":"view","command":"delete","path":"/memories"}}"#,
    );
    assert!(
        content(&answer).contains("`command` appears twice"),
        "{answer}"
    );
    assert!(server.finish().success());
    // MCP: a parse error.
    let mut mcp = memfs()
        .arg("--data")
        .arg(dir.path())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#;
    mcp.stdin
        .take()
        .unwrap()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
    let mut answer = String::new();
    BufReader::new(mcp.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`id` appears twice"));
    assert!(mcp.wait().unwrap().success());
}

#[test]
fn a_line_of_millions_of_json_values_is_refused_cheaply() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let flood = format!("[{}0]", "0,".repeat(3_000_000));
    for _ in 0..3 {
        server.send(&flood);
    }
    for _ in 0..3 {
        let answer = server.recv().unwrap();
        assert!(
            content(&answer).contains("the message holds more than 10000 JSON values"),
            "{answer}"
        );
    }
    // Before: each line became 3 million `Value`s (about 100 MB) first.
    let rss = rss_kib(server.child.id());
    assert!(rss < 150 * 1024, "memfs holds {rss} KiB");
    assert!(server.finish().success());
}

#[test]
fn state_files_are_never_written_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    let data = dir.path().join("data");
    fs::create_dir_all(data.join(".memfs")).unwrap();
    fs::set_permissions(data.join(".memfs"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&victim, data.join(".memfs/pid")).unwrap();
    let (code, v) = exec(&data, r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0, "{v}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    let pid = fs::symlink_metadata(data.join(".memfs/pid")).unwrap();
    assert!(pid.file_type().is_file());
    let mode = fs::metadata(data.join(".memfs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "a looser .memfs is tightened");

    // A symlinked .memfs: refused, and nothing is written where it points.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let data2 = dir.path().join("data2");
    fs::create_dir(&data2).unwrap();
    std::os::unix::fs::symlink(&elsewhere, data2.join(".memfs")).unwrap();
    let (code, _, err) = common::exec_with(&data2, &[], r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 2);
    assert!(
        err.contains("opening .memfs (it must be a directory, not a symlink)"),
        "{err}"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn names_on_disk_the_tool_cannot_address_are_left_out_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let memories = dir.path().join("memories");
    fs::create_dir(&memories).unwrap();
    // A directory whose name forges a row of the listing: `evil`, then a
    // row `1.0K<TAB>/memories/FAKE.md` for its entry memories/FAKE.md.
    fs::create_dir_all(memories.join("evil\n1.0K\t/memories")).unwrap();
    fs::write(memories.join("evil\n1.0K\t/memories/FAKE.md"), "x").unwrap();
    fs::write(memories.join("esc\u{1b}]0;pwned\u{7}"), "x").unwrap();
    fs::write(memories.join("real.md"), "x").unwrap();
    let (code, v, err) =
        common::exec_with(dir.path(), &[], r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0);
    let text = content(&v);
    assert!(text.contains("/memories/real.md"), "{text}");
    assert!(
        !text.contains("FAKE") && !text.contains('\u{1b}'),
        "{text:?}"
    );
    assert!(
        err.contains("left out 2 name(s) the memory tool cannot address"),
        "{err}"
    );
}

#[test]
fn exec_help_says_to_keep_private_content_out_of_argv() {
    let out = memfs().args(["exec", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Use `-` for anything private"), "{help}");
}

// ---------- through the mount and its socket ----------

#[test]
fn the_mount_refuses_names_the_tool_cannot_address() {
    if skip_without_fuse("the_mount_refuses_names_the_tool_cannot_address") {
        return;
    }
    let m = Mounted::start(&[]);
    for name in [
        "evil\n1.0K\t",
        "esc\u{1b}[31m",
        "back\\slash",
        "%2e%2e",
        "slash%2F",
    ] {
        let err = fs::write(m.at(name), "x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{name:?}");
        let err = fs::create_dir(m.at(name)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{name:?}");
    }
    // A percent sign is a character: only a name that decodes to a
    // traversal is refused.
    fs::write(m.at("100%2easy.md"), "x").unwrap();
    fs::write(m.at("fine.md"), "x").unwrap();
    let err = fs::rename(m.at("fine.md"), m.at("bad\u{7}")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert!(m.view("/memories").contains("/memories/fine.md"));
}

#[test]
fn limits_hold_through_the_mount_with_fitting_errnos() {
    if skip_without_fuse("limits_hold_through_the_mount_with_fitting_errnos") {
        return;
    }
    let m = Mounted::start(&["--max-depth", "3", "--max-dir-entries", "4"]);
    fs::create_dir_all(m.at("a/b/c")).unwrap();
    let err = fs::create_dir(m.at("a/b/c/d")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    let err = fs::write(m.at("a/b/c/f"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    // A rename that would nest a subtree too deep.
    fs::create_dir_all(m.at("x/y")).unwrap();
    let err = fs::rename(m.at("x"), m.at("a/b/x")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    fs::create_dir(m.at("e")).unwrap();
    for i in 0..4 {
        fs::write(m.at(&format!("e/{i}")), "x").unwrap();
    }
    let err = fs::write(m.at("e/4"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    // The agent meets the same limit with its flag named.
    let v = m.tool(r#"{"command":"create","path":"/memories/e/5","file_text":"x"}"#);
    assert!(content(&v).contains("(--max-dir-entries)"), "{v}");
}

#[test]
fn idle_socket_clients_cannot_lock_others_out() {
    if skip_without_fuse("idle_socket_clients_cannot_lock_others_out") {
        return;
    }
    let m = Mounted::start(&[]);
    let sock = m.data.path().join(".memfs/sock");
    // Before: 64 idle connections held every slot for ever.
    let idle: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // One that sent half a line is busy, not idle: it keeps its place.
    let mut half = UnixStream::connect(&sock).unwrap();
    half.write_all(br#"{"command":"view","#).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let v = m.tool(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(v["is_error"], false, "{v}");
    // The oldest idle ones made room: they see the end of the connection.
    let closed = idle
        .iter()
        .filter(|c| {
            c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            matches!((&**c).read(&mut [0u8; 1]), Ok(0))
        })
        .count();
    assert!(closed >= 300 - 256, "{closed} closed");
    assert!(
        matches!(
            idle.last()
                .unwrap()
                .read(&mut [0u8; 1])
                .map_err(|e| e.kind()),
            Err(std::io::ErrorKind::WouldBlock)
        ),
        "the newest idle client is still served"
    );
    half.write_all(b"\"path\":\"/memories\"}\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&half).read_line(&mut answer).unwrap();
    assert!(answer.contains("\"is_error\":false"), "{answer}");
}

#[test]
fn a_half_sent_line_times_out() {
    if skip_without_fuse("a_half_sent_line_times_out") {
        return;
    }
    let m = Mounted::start(&["--client-timeout", "1"]);
    let mut conn = UnixStream::connect(m.data.path().join(".memfs/sock")).unwrap();
    conn.write_all(br#"{"command":"view""#).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(&conn);
    let mut answer = String::new();
    reader.read_line(&mut answer).unwrap();
    assert!(
        answer.contains("the line was not finished within 1 seconds; closing the connection"),
        "{answer}"
    );
    answer.clear();
    assert_eq!(reader.read_line(&mut answer).unwrap(), 0, "closed");
}

#[test]
fn a_client_that_does_not_read_is_not_buffered_without_bound() {
    if skip_without_fuse("a_client_that_does_not_read_is_not_buffered_without_bound") {
        return;
    }
    let m = Mounted::start(&[]);
    // A 1 MiB PNG (as its magic bytes say): each view answers ~1.4 MB of base64.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.resize(1 << 20, 0);
    fs::write(m.at("pic.png"), &png).unwrap();
    let mut conn = UnixStream::connect(m.data.path().join(".memfs/sock")).unwrap();
    const VIEWS: usize = 200;
    let line = "{\"command\":\"view\",\"path\":\"/memories/pic.png\"}\n".repeat(VIEWS);
    conn.write_all(line.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // Before: all 200 answers (280 MB) were queued for the writer.
    let rss = rss_kib(m.child.as_ref().unwrap().id());
    assert!(rss < 100 * 1024, "memfs holds {rss} KiB");
    // Nothing is lost: every answer comes once the client reads.
    let mut reader = BufReader::new(&conn);
    for _ in 0..VIEWS {
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        assert!(
            answer.contains("image/png"),
            "{}",
            &answer[..answer.len().min(200)]
        );
    }
}
