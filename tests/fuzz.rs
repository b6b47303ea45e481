//! Fuzzing the line door: arbitrary bytes, arbitrary JSON and tool inputs
//! with arbitrary field values, sent to a real `memfs serve --stdio`. Every
//! line that is not blank gets exactly one answer, a JSON object with a
//! boolean `is_error`; memfs never dies, never hangs, and never names a path
//! of the host. Bounded for CI; `MEMFS_FUZZ_CASES=N` runs longer.

mod common;

use proptest::prelude::*;
use serde_json::{json, Value};

use common::Server;

fn cases() -> u32 {
    common::cases("MEMFS_FUZZ_CASES", 64)
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Paths an attacker would try, and plain ones.
fn path() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("/memories")),
        "/memories(/[a-z.%2e\\\\]{1,6}){0,4}".prop_map(Value::from),
        ".{0,30}".prop_map(Value::from),
        any_json(),
    ]
}

/// Tool inputs with the right field names and arbitrary values.
fn tool_input() -> impl Strategy<Value = Value> {
    let command = prop_oneof![
        Just(json!("view")),
        Just(json!("create")),
        Just(json!("str_replace")),
        Just(json!("insert")),
        Just(json!("delete")),
        Just(json!("rename")),
        any_json(),
    ];
    (
        command,
        path(),
        path(),
        any_json(),
        ".{0,60}",
        prop::option::of(any_json()),
    )
        .prop_map(|(command, path, new_path, line, text, range)| {
            let mut input = json!({
                "command": command, "path": path, "old_path": path, "new_path": new_path,
                "file_text": text, "old_str": text, "new_str": text, "insert_line": line,
                "insert_text": text,
            });
            if let Some(range) = range {
                input["view_range"] = range;
            }
            input
        })
}

/// One line: raw bytes (no newline), any JSON, a tool input, or a tool_use block.
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 0..120),
        any_json().prop_map(|v| v.to_string().into_bytes()),
        tool_input().prop_map(|v| v.to_string().into_bytes()),
        (tool_input(), ".{0,10}").prop_map(|(input, id)| {
            json!({"type": "tool_use", "id": id, "name": "memory", "input": input})
                .to_string()
                .into_bytes()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_line_gets_one_well_formed_answer(lines in prop::collection::vec(line(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().display().to_string();
        let mut server = Server::start(dir.path(), &[]);
        let mut expected = 0;
        for bytes in &lines {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue; // blank lines are skipped without an answer
            }
            server.send_raw(bytes);
            server.send_raw(b"\n");
            expected += 1;
        }
        for _ in 0..expected {
            let answer = server.recv().expect("an answer for every line");
            prop_assert!(answer["is_error"].is_boolean(), "{}", answer);
            prop_assert!(!answer.to_string().contains(&host), "a host path in {}", answer);
        }
        let status = server.finish();
        prop_assert!(status.success(), "memfs exited with {}", status);
    }
}
