//! One memory, many sessions: every door works beside a running memfs. The
//! first memfs on a data dir owns it; later ones attach through its socket;
//! when the owner goes, an attached one takes over. Driven through the real
//! binary: `mcp`, `serve --stdio` and `exec` side by side, with and without
//! a mount, with the owner killed under them.

mod common;

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use common::{content, exec, memfs, skip_without_fuse, Mcp, Mounted, Server};

#[test]
fn two_mcp_servers_share_one_memory_and_lose_no_increment() {
    let dir = tempfile::tempdir().unwrap();
    // Before: the second exited 2 before answering `initialize`.
    let mut a = Mcp::start(dir.path(), "session-a");
    let mut b = Mcp::start(dir.path(), "session-b");
    let (_, err) =
        a.tool(json!({"command": "create", "path": "/memories/counter", "file_text": "0"}));
    assert!(!err);
    // Each sees the other's writes: 40 increments, alternating servers.
    for i in 0..40 {
        let server = if i % 2 == 0 { &mut a } else { &mut b };
        let (text, err) = server.tool(json!({"command": "view", "path": "/memories/counter"}));
        assert!(!err, "{text}");
        let n: u64 = text.rsplit('\t').next().unwrap().trim().parse().unwrap();
        assert_eq!(n, i, "increment {i} saw {n}");
        let (text, err) = server.tool(
            json!({"command": "str_replace", "path": "/memories/counter",
            "old_str": n.to_string(), "new_str": (n + 1).to_string()}),
        );
        assert!(!err, "{text}");
    }
    let (text, _) = b.tool(json!({"command": "view", "path": "/memories/counter"}));
    assert!(text.ends_with("1\t40"), "{text}");
    assert!(a.finish().success());
    assert!(b.finish().success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/counter")).unwrap(),
        "40"
    );
}

#[test]
fn exec_answers_the_same_with_or_without_an_owner_and_keeps_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let block = r#"{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories"}}"#;
    let (code, alone) = exec(dir.path(), block);
    assert_eq!(code, 0, "{alone}");
    assert_eq!(alone["type"], "tool_result", "{alone}");
    let mut owner = Server::start(dir.path(), &[]);
    let ready = owner.call(r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(ready["is_error"], false, "the owner is up");
    let (code, attached) = exec(dir.path(), block);
    assert_eq!(code, 0);
    assert_eq!(attached, alone, "the same tool_result with an owner");
    // A client's different settings are not silently ignored.
    let (code, _, err) = common::exec_with(
        dir.path(),
        &["--create-overwrites", "--as", "cli-session"],
        r#"{"command":"create","path":"/memories/x.md","file_text":"x"}"#,
    );
    assert_eq!(code, 0);
    assert!(
        err.contains("runs with create_overwrites = false, not true; its settings apply"),
        "{err}"
    );
    let seen = owner.call(r#"{"command":"view","path":"/memories/x.md"}"#);
    assert!(content(&seen).ends_with("1\tx"));
    assert!(owner.finish().success());
}

#[test]
fn killing_the_owner_loses_no_acknowledged_change_and_the_clients_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut owner = Server::start(dir.path(), &[]);
    assert!(
        !owner.call(r#"{"command":"view","path":"/memories"}"#)["is_error"]
            .as_bool()
            .unwrap()
    );
    let mut clients = [
        Server::start(dir.path(), &[]),
        Server::start(dir.path(), &[]),
    ];
    let mut acknowledged = Vec::new();
    let mut unknown = 0;
    for round in 0..30 {
        if round == 10 {
            owner.child.kill().unwrap();
            owner.child.wait().unwrap();
        }
        for (c, client) in clients.iter_mut().enumerate() {
            let path = format!("/memories/c{c}-{round}.md");
            let answer = client.call(
                &json!({"command": "create", "path": path, "file_text": format!("{round}\n")})
                    .to_string(),
            );
            match answer["is_error"].as_bool() {
                Some(false) => acknowledged.push(path),
                _ => {
                    assert!(
                        content(&answer).contains("whether it took effect is unknown"),
                        "{answer}"
                    );
                    unknown += 1;
                }
            }
        }
    }
    assert!(unknown <= 2, "{unknown} calls had an unknown outcome");
    assert!(
        acknowledged.len() >= 58,
        "{} acknowledged",
        acknowledged.len()
    );
    // Both clients go on, and see every acknowledged change.
    for client in &mut clients {
        let view = client.call(r#"{"command":"view","path":"/memories"}"#);
        for path in &acknowledged {
            assert!(
                content(&view).contains(path.as_str()),
                "{path} missing from {view}"
            );
        }
    }
    for client in clients {
        assert!(client.finish().success());
    }
    for path in &acknowledged {
        let on_disk = dir
            .path()
            .join("memories")
            .join(path.trim_start_matches("/memories/"));
        assert!(on_disk.exists(), "{path} is not on disk");
    }
}

#[test]
fn every_door_works_while_a_mount_runs() {
    if skip_without_fuse("every_door_works_while_a_mount_runs") {
        return;
    }
    let m = Mounted::start(&[]);
    // serve --stdio, attached.
    let mut server = Server::start(m.data.path(), &[]);
    let made = server
        .call(r#"{"command":"create","path":"/memories/from-stdio.md","file_text":"stdio\n"}"#);
    assert_eq!(made["is_error"], false, "{made}");
    assert!(server.finish().success());
    // mcp, attached.
    let mut mcp = Mcp::start(m.data.path(), "mounted-session");
    let (text, err) = mcp
        .tool(json!({"command": "create", "path": "/memories/from-mcp.md", "file_text": "mcp\n"}));
    assert!(!err, "{text}");
    assert!(mcp.finish().success());
    // exec, attached.
    let (code, v) = exec(
        m.data.path(),
        r#"{"command":"create","path":"/memories/from-exec.md","file_text":"exec\n"}"#,
    );
    assert_eq!(code, 0, "{v}");
    // Each is seen through the mount at once.
    for (name, text) in [
        ("from-stdio.md", "stdio\n"),
        ("from-mcp.md", "mcp\n"),
        ("from-exec.md", "exec\n"),
    ] {
        assert_eq!(std::fs::read_to_string(m.at(name)).unwrap(), text);
    }
}

#[test]
fn a_mount_beside_an_owner_behaves_as_alone_and_outlives_it() {
    if skip_without_fuse("a_mount_beside_an_owner_behaves_as_alone_and_outlives_it") {
        return;
    }
    let mut m = Mounted::unstarted();
    let mut owner = Server::start(m.data.path(), &[]);
    let ready =
        owner.call(r#"{"command":"create","path":"/memories/agent.md","file_text":"agent\n"}"#);
    assert_eq!(ready["is_error"], false, "{ready}");
    // Before: "the data dir is in use by another memfs process", exit 2.
    m.spawn(&[]);
    assert_eq!(
        std::fs::read_to_string(m.at("agent.md")).unwrap(),
        "agent\n"
    );
    std::fs::write(m.at("person.md"), "person\n").unwrap();
    let seen = owner.call(r#"{"command":"view","path":"/memories/person.md"}"#);
    assert!(content(&seen).ends_with("1\tperson"), "{seen}");
    // The owner's session ends: the mount goes on, now served by `memfs mount`
    // itself (it takes the data dir over; the mount is away for that moment).
    let owner_pid = owner.child.id().to_string();
    assert!(owner.finish().success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let pid_file = m.data.path().join(".memfs/pid");
    while std::fs::read_to_string(&pid_file).unwrap_or_default() == owner_pid
        || !memfs::fuse::mountpoint::is_mount_point(m.mnt.path())
        || std::fs::read_to_string(m.at("agent.md")).is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the mount did not come back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(m.at("after.md"), "after\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(m.at("person.md")).unwrap(),
        "person\n"
    );
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    assert!(err.contains("everything is written out"), "{err}");
    for (name, text) in [
        ("agent.md", "agent\n"),
        ("person.md", "person\n"),
        ("after.md", "after\n"),
    ] {
        assert_eq!(std::fs::read_to_string(m.on_disk(name)).unwrap(), text);
    }
}

#[test]
fn a_socket_only_owner_serves_until_idle_then_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = memfs()
        .arg("--data")
        .arg(dir.path())
        .args(["serve", "--idle-exit", "1"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sock = dir.path().join(".memfs/sock");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..3 {
        let (code, v) = exec(
            dir.path(),
            &format!(r#"{{"command":"create","path":"/memories/{i}.md","file_text":"{i}"}}"#),
        );
        assert_eq!(code, 0, "{v}");
    }
    // Idle for a second: it writes out, lets go of the data dir and exits 0.
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!sock.exists());
    // The next door starts a new owner.
    let (code, v) = exec(dir.path(), r#"{"command":"view","path":"/memories/2.md"}"#);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_mount_served_for_another_memfs_can_be_unmounted_from_outside() {
    if skip_without_fuse("a_mount_served_for_another_memfs_can_be_unmounted_from_outside") {
        return;
    }
    let mut m = Mounted::unstarted();
    let mut owner = Server::start(m.data.path(), &[]);
    assert_eq!(
        owner.call(r#"{"command":"view","path":"/memories"}"#)["is_error"],
        false
    );
    m.spawn(&[]);
    std::fs::write(m.at("person.md"), "person\n").unwrap();
    let status = std::process::Command::new("umount")
        .arg(m.mnt.path())
        .status()
        .unwrap();
    assert!(status.success());
    // `memfs mount` ends by itself, and the owner, which served it, writes it
    // out and ends cleanly too.
    let status = m.child.take().unwrap().wait().unwrap();
    assert!(status.success(), "{status}");
    let seen = owner.call(r#"{"command":"view","path":"/memories/person.md"}"#);
    assert!(content(&seen).ends_with("1\tperson"), "{seen}");
    assert!(owner.finish().success());
    assert_eq!(
        std::fs::read_to_string(m.on_disk("person.md")).unwrap(),
        "person\n"
    );
}

/// An owner whose answers are not a tool result (empty content, a block
/// that is not an image, no content at all, not JSON): the attached `exec`
/// and `mcp` say so as an error result and go on; they never panic (issue
/// 39: an empty content list once indexed past its end in `mcp`).
#[test]
fn an_owners_malformed_answer_is_a_clear_error_never_a_panic() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, _) = exec(d, r#"{"command":"view","path":"/memories"}"#);
    assert_eq!(code, 0);
    // A fake owner: it holds the data dir's lock and serves its socket,
    // answering each hello as an owner does and every other line with
    // the bad answer of the moment.
    let state = std::fs::File::open(d.join(".memfs")).unwrap();
    rustix::fs::flock(&state, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let sock = d.join(".memfs/sock");
    let _ = std::fs::remove_file(&sock);
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let bad = std::sync::Arc::new(parking_lot::Mutex::new(String::new()));
    {
        let bad = bad.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let bad = bad.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut conn = conn;
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        let answer = if line.contains("memfs_hello") {
                            r#"{"is_error":false,"content":"hello","memfs":{"pid":1}}"#.to_string()
                        } else {
                            bad.lock().clone()
                        };
                        if writeln!(conn, "{answer}").is_err() {
                            return;
                        }
                        line.clear();
                    }
                });
            }
        });
    }
    let answers = [
        r#"{"content":[],"is_error":false}"#,
        r#"{"content":[{}],"is_error":false}"#,
        r#"{"content":[{"type":"image","source":{"media_type":"image/png"}}]}"#,
        r#"{"is_error":false}"#,
        r#"{"content":7}"#,
        r#"[]"#,
        "not json",
    ];
    for answer in answers {
        *bad.lock() = answer.to_string();
        let (code, v, err) = common::exec_with(d, &[], r#"{"command":"view","path":"/memories"}"#);
        assert!(!err.contains("panicked"), "{answer}: {err}");
        assert_ne!(code, 101, "{answer}: {err}");
        assert_eq!(v["is_error"], true, "{answer}: {v} {err}");
        assert!(
            content(&v).contains("owner of the data dir"),
            "{answer}: {v}"
        );
    }
    let mut mcp = Mcp::start(d, "attached");
    for answer in answers {
        *bad.lock() = answer.to_string();
        let (text, is_error) = mcp.tool(json!({"command": "view", "path": "/memories"}));
        assert!(is_error, "{answer}: {text}");
        assert!(text.contains("owner of the data dir"), "{answer}: {text}");
    }
    assert!(mcp.finish().success());
}
