//! Every change records who made it, at the moment it is made (DESIGN,
//! consistency contract 5): the agent with its door and session name, or a
//! person with uid, pid and process name. Driven without FUSE, through the
//! store's inode operations (what the mount calls) and the real doors' code,
//! with a sink that records every change as history will.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::json;

use memfs::store::{
    Change, ChangeOp, ChangeSink, Door, Limits, NewNode, Origin, Process, Store, Ticket, Tree,
    ROOT_INO,
};
use memfs::tool::{Tool, ToolConfig};

#[derive(Default)]
struct Recorder(Mutex<Vec<Change>>);

impl ChangeSink for Recorder {
    fn submit(&self, change: &Change) -> Ticket {
        self.0.lock().push(change.clone());
        Ticket::done()
    }
}

impl Recorder {
    /// The origins of the changes that wrote `name` (anywhere), in order.
    fn writers_of(&self, name: &str) -> Vec<Origin> {
        self.0
            .lock()
            .iter()
            .filter(|c| {
                c.ops.iter().any(|op| {
                    matches!(op, ChangeOp::Write { path, .. } if path.file_name() == Some(name))
                })
            })
            .map(|c| c.origin.clone())
            .collect()
    }

    fn last(&self) -> Change {
        self.0.lock().last().cloned().unwrap()
    }
}

fn person(uid: u32, pid: u32, name: &str) -> Origin {
    Origin::Person {
        uid,
        pid,
        process: Process::new(name),
    }
}

fn store() -> (Arc<Store>, Arc<Recorder>) {
    let store = Arc::new(Store::new(Tree::new(), Limits::default(), None));
    let recorder = Arc::new(Recorder::default());
    store.observe(recorder.clone());
    (store, recorder)
}

#[test]
fn mount_writes_are_credited_to_the_writer_not_to_who_closes_or_stops() {
    let (store, rec) = store();
    let alice = person(1000, 11, "vim");
    let bob = person(1001, 12, "backup-tool");
    let made = store
        .make_node(
            ROOT_INO,
            "notes.md",
            NewNode::File,
            0o644,
            (1000, 1000),
            alice.clone(),
        )
        .unwrap();
    store
        .write(made.ino, 0, b"typed", false, alice.clone())
        .unwrap();
    // Bob's process closes its own descriptor of the file: the bytes are Alice's.
    let _ = store.persist_file(made.ino, false, bob.clone());
    assert_eq!(rec.writers_of("notes.md"), [alice.clone(), alice.clone()]);
    // Bob writes; then memfs stops and writes out what is unsaved: Bob's.
    store
        .write(made.ino, 5, b" more", false, bob.clone())
        .unwrap();
    let _ = store.persist_all_dirty(Origin::Memfs);
    assert_eq!(rec.writers_of("notes.md").last(), Some(&bob));
    // A person renames a file another person wrote and nobody saved yet: two
    // changes, each with its own author.
    store
        .write(made.ino, 0, b"TYPED", false, alice.clone())
        .unwrap();
    let carol = person(1002, 13, "mv");
    store
        .rename_entry(
            ROOT_INO,
            "notes.md",
            ROOT_INO,
            "moved.md",
            memfs::store::RenameMode::Replace,
            carol.clone(),
        )
        .unwrap();
    assert_eq!(rec.writers_of("notes.md").last(), Some(&alice));
    let renamed = rec.last();
    assert!(
        matches!(renamed.ops[0], ChangeOp::Rename { .. }),
        "{renamed:?}"
    );
    assert_eq!(renamed.origin, carol);
}

#[test]
fn process_names_fit_the_kernels_comm() {
    assert_eq!(Process::new("vim").as_str(), "vim");
    assert_eq!(
        Process::new("a-very-long-process-name").as_str(),
        "a-very-long-pro"
    );
    assert_eq!(Process::new("ééééééééé").as_str(), "ééééééé");
}

#[test]
fn tool_calls_are_credited_to_their_door_and_session() {
    let (store, rec) = store();
    let tool = Tool::new(store.clone(), ToolConfig::default());
    let made = tool.call(&json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}));
    assert!(!made.is_error);
    assert_eq!(rec.last().origin, Origin::agent(Door::Library));
    let socket = tool.with_origin(Origin::agent(Door::Socket));
    socket.call(&json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}));
    assert_eq!(rec.last().origin, Origin::agent(Door::Socket));

    // MCP: the session is the name the client gave in `initialize`.
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-code-session-7", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory",
            "arguments": {"command": "create", "path": "/memories/c.md", "file_text": "x"}}}),
    ]
    .map(|m| m.to_string())
    .join("\n");
    let mut output = Vec::new();
    memfs::serve::mcp::serve(&tool, None, input.as_bytes(), &mut output, 1 << 20).unwrap();
    assert!(String::from_utf8(output)
        .unwrap()
        .contains("File created successfully"));
    assert_eq!(
        rec.last().origin,
        Origin::Agent {
            door: Door::Mcp,
            session: Some(Arc::from("claude-code-session-7")),
        }
    );
}

/// A person's unsaved file below a directory the agent renames or deletes:
/// the person's bytes are their own change first, then the agent's (issue
/// 39: the directory's rename saved nothing below it, so the history had
/// no version at the old path and no rename; its delete had neither).
#[test]
fn a_persons_unsaved_file_below_what_the_agent_moves_or_deletes_is_the_persons_version_first() {
    for command in [
        json!({"command": "rename", "old_path": "/memories/d1", "new_path": "/memories/d2"}),
        json!({"command": "delete", "path": "/memories/d1"}),
    ] {
        let (store, rec) = store();
        let alice = person(1000, 11, "sh");
        let d1 = store
            .make_node(
                ROOT_INO,
                "d1",
                NewNode::Dir,
                0o755,
                (1000, 1000),
                alice.clone(),
            )
            .unwrap();
        let f = store
            .make_node(
                d1.ino,
                "f.txt",
                NewNode::OpenedFile,
                0o644,
                (1000, 1000),
                alice.clone(),
            )
            .unwrap();
        store
            .write(f.ino, 0, b"typed", false, alice.clone())
            .unwrap();
        let tool = Tool::new(store.clone(), ToolConfig::default());
        assert!(!tool.call(&command).is_error, "{command}");
        let changes = rec.0.lock().clone();
        let n = changes.len();
        assert!(
            matches!(&changes[n - 2].ops[0], ChangeOp::Write { path, .. } if path.to_string() == "/memories/d1/f.txt"),
            "{command}: {:?}",
            changes[n - 2]
        );
        assert_eq!(changes[n - 2].origin, alice, "{command}");
        assert!(
            matches!(
                changes[n - 1].ops[0],
                ChangeOp::Rename { .. } | ChangeOp::Remove { .. }
            ),
            "{command}: {:?}",
            changes[n - 1]
        );
        assert!(
            matches!(changes[n - 1].origin, Origin::Agent { .. }),
            "{command}"
        );
        // Saved: a later flush finds nothing to write.
        let _ = store.persist_files(&[f.ino]);
        assert_eq!(rec.0.lock().len(), n, "{command}");
    }
}
