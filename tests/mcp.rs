//! `memfs mcp` at the wire: the JSON-RPC envelope, every error code, and a
//! person watching the memory through `--mount`. (The official client drives
//! it in tests/python/test_mcp_client.py.)

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use common::{memfs, skip_without_fuse};
use serde_json::{json, Value};

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Mcp {
    fn start(data: &std::path::Path, extra: &[&std::ffi::OsStr]) -> Mcp {
        let mut child = memfs()
            .arg("--data")
            .arg(data)
            .args(["--max-file-size", "1K", "mcp"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Mcp {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line:?}"))
    }

    fn call(&mut self, line: &str) -> Value {
        self.send(line);
        self.recv()
    }

    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        assert_eq!(rest, "", "nothing but answers on stdout");
        self.child.wait().unwrap()
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {v}"))
}

#[test]
fn handshake_and_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(dir.path(), &[]);
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let r = m.call(&json!({"jsonrpc": "2.0", "id": asked, "method": "initialize", "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).to_string());
        assert_eq!(r["id"], asked);
        assert_eq!(r["result"]["protocolVersion"], answered);
        assert_eq!(
            r["result"]["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        assert!(r["result"]["instructions"]
            .as_str()
            .unwrap()
            .starts_with("IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY"));
    }
    m.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(
        m.call(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#),
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
    let tools = m.call(r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#);
    assert_eq!(tools["result"]["tools"][0]["name"], "memory");
    let r = m.call(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory","arguments":{"command":"create","path":"/memories/x.md","file_text":"x\n"}}}"#);
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "File created successfully at: /memories/x.md"}], "isError": false})
    );
    // A tool-level error is a result with isError, not a protocol error.
    let r = m.call(r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories/nope"}}}"#);
    assert_eq!(r["result"]["isError"], true);
    let r = m.call(r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"memory","arguments":{"command":"fly"}}}"#);
    assert_eq!(r["result"]["isError"], true);
    assert!(m.finish().success());
}

#[test]
fn protocol_errors_are_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(dir.path(), &[]);
    let cases = [
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, \"meth", -32700),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            -32600,
        ),
        ("\"just a string\"", -32600),
        (r#"{"id":2,"method":"ping"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":{"no":"objects"},"method":"ping"}"#,
            -32600,
        ),
        (r#"{"jsonrpc":"2.0","id":3}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bash","arguments":{}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory"}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"memory","arguments":"view"}}"#,
            -32602,
        ),
    ];
    for (line, want) in cases {
        assert_eq!(code(&m.call(line)), want, "{line}");
    }
    // Notifications and stray responses get no answer; the next request does.
    m.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    m.send(r#"{"jsonrpc":"2.0","id":99,"result":{}}"#);
    m.send(r#"{"jsonrpc":"2.0","method":"no/such/notification"}"#);
    // An oversized message (over 6 x 1 KiB + 64 KiB here) is refused, and the server goes on.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"memory","arguments":{{"command":"create","path":"/memories/h","file_text":"{}"}}}}}}"#,
        "h".repeat(100_000)
    );
    let r = m.call(&huge);
    assert_eq!(code(&r), -32600);
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("longer than"));
    assert_eq!(
        m.call(r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#)["id"],
        10
    );
    assert!(m.finish().success());
}

#[test]
fn with_a_mount_the_person_watches_the_same_memory() {
    if skip_without_fuse("with_a_mount_the_person_watches_the_same_memory") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(
        &dir.path().join("data"),
        &["--mount".as_ref(), mnt.path().as_os_str()],
    );
    let r = m.call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory","arguments":{"command":"create","path":"/memories/watch.md","file_text":"seen by a person\n"}}}"#);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(mnt.path().join("watch.md")).unwrap(),
        "seen by a person\n"
    );
    std::fs::write(mnt.path().join("watch.md"), "edited by the person\n").unwrap();
    let r = m.call(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories/watch.md"}}}"#);
    assert_eq!(
        r["result"]["content"][0]["text"],
        "Here's the content of /memories/watch.md with line numbers:\n     1\tedited by the person"
    );
    assert!(m.finish().success());
    assert!(!memfs::fuse::mountpoint::is_mount_point(mnt.path()));
}

/// A program's `expected_sha256` rides in the MCP arguments too (it is not
/// in the tool's schema): a stale one changes nothing, a current one writes.
#[test]
fn expected_sha256_through_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(dir.path(), &[]);
    m.call(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#);
    m.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let call = |m: &mut Mcp, id: u32, arguments: Value| {
        m.call(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "memory", "arguments": arguments}}).to_string())
    };
    let r = call(
        &mut m,
        2,
        json!({"command": "create", "path": "/memories/p.md", "file_text": "one\n"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let stale = memfs::digest::sha256_hex(b"zero\n");
    let r = call(
        &mut m,
        3,
        json!({"command": "str_replace", "path": "/memories/p.md", "old_str": "one", "new_str": "two", "expected_sha256": stale}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("has changed"),
        "{r}"
    );
    let current = memfs::digest::sha256_hex(b"one\n");
    let r = call(
        &mut m,
        4,
        json!({"command": "str_replace", "path": "/memories/p.md", "old_str": "one", "new_str": "two", "expected_sha256": current}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(m.finish().success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memories/p.md")).unwrap(),
        "two\n"
    );
}
