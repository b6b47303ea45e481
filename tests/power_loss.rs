//! Power loss (issue 39): memfs runs on the in-memory disk
//! (`persist::storage::mem`), which keeps what was written apart from what
//! was made durable, and the power goes at a random step of a random
//! workload (a tool call's journal frame, a checkpoint's plain file, a
//! compaction's rename, a segment's rotation: whatever step comes). Then
//! memfs opens on what survived, and:
//! - every acknowledged change is there with its exact bytes (the tree is
//!   the model after the last acknowledged command, or after the one the
//!   cut interrupted, which may or may not have happened);
//! - the history is exact: no id used twice, and each file's current
//!   version names its content;
//! - once a checkpoint pass has run, the plain files equal the tree.
//!
//! kill -9 keeps the page cache, so this is the test it cannot be.
//! `MEMFS_POWER_CASES=N` runs more cases (scripts/soak.sh runs 100,000).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use common::model::*;
use memfs::journal::{Keep, Op};
use memfs::path::MemPath;
use memfs::persist::storage::mem::MemDisk;
use memfs::{Memory, Options};
use proptest::prelude::*;

fn options(small_history: bool) -> Options {
    Options {
        // Short segments (rotations, and the directory syncs they need),
        // quick checkpoints, and in half the cases a history small enough
        // to be compacted while the workload runs.
        segment_bytes: Some(16 << 10),
        checkpoint_delay: Some(Duration::from_millis(2)),
        history_keep: match small_history {
            true => Keep {
                age: Duration::from_secs(3600),
                bytes: 8 << 10,
            },
            false => Keep::default(),
        },
        ..Options::default()
    }
}

/// Few names, so that commands keep meeting the same files; contents from
/// a few bytes to a few pages, so that torn appends cut through them.
fn path() -> impl Strategy<Value = String> {
    let dirs = prop::sample::select(vec!["", "/a", "/b", "/a/b"]);
    let leaf = prop::sample::select(vec!["/f", "/g", ""]);
    (dirs, leaf).prop_map(|(d, f)| format!("{ROOT}{d}{f}"))
}

fn text() -> impl Strategy<Value = String> {
    let piece = || prop::sample::select(vec!["x", "y", "z\n", "xy\n"]);
    prop_oneof![
        (piece(), 0usize..20).prop_map(|(t, n)| t.repeat(n)),
        (piece(), 0usize..3000).prop_map(|(t, n)| t.repeat(n)),
    ]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        4 => (path(), text()).prop_map(|(p, t)| Cmd::Create(p, t)),
        3 => (path(), prop::sample::select(vec!["x", "y"]), prop::sample::select(vec!["xx", "", "q"]))
            .prop_map(|(p, o, n)| Cmd::Replace(p, o.to_string(), n.to_string())),
        1 => (path(), 0i64..2, text()).prop_map(|(p, l, t)| Cmd::Insert(p, l, t)),
        1 => path().prop_map(Cmd::Delete),
        2 => (path(), path()).prop_map(|(a, b)| Cmd::Rename(a, b)),
    ]
}

/// What the run saw before the power went.
struct Before {
    /// The tree after the last acknowledged command.
    acked: BTreeMap<String, Entry>,
    /// The tree with the command the cut interrupted applied, if it
    /// changes anything (it may or may not have reached the disk).
    interrupted: Option<BTreeMap<String, Entry>>,
}

/// Runs `cmds` until the power goes (after `cut` steps of the disk), or
/// to the end and then cuts it.
fn run_until_the_cut(
    memory: &Memory,
    disk: &MemDisk,
    cmds: &[Cmd],
) -> Result<Before, TestCaseError> {
    let mut model = Model::new();
    for c in cmds {
        let got = memory.tool().call(&c.json());
        let mut next = model.clone();
        let want = next.run(c);
        let text = got.text().unwrap_or_default().to_string();
        if (got.is_error, text.clone()) == want {
            model = next;
            continue;
        }
        // Only a disk without power may make memfs differ from the model.
        prop_assert!(
            disk.is_cut(),
            "memfs and the model differ with the power on: {c:?}: {text:?} vs {want:?}"
        );
        prop_assert!(got.is_error, "{c:?} succeeded with the power gone: {text}");
        let interrupted = (!want.0).then_some(next.entries);
        disk.cut_now();
        return Ok(Before {
            acked: model.entries,
            interrupted,
        });
    }
    disk.cut_now();
    Ok(Before {
        acked: model.entries,
        interrupted: None,
    })
}

/// A tree in a line: each path with its size and the start of its sha256.
fn summary(tree: &BTreeMap<String, Entry>) -> String {
    let each = tree.iter().map(|(path, entry)| match entry {
        Entry::Dir => format!("{path}/"),
        Entry::File(text) => {
            let sha = memfs::digest::sha256_hex(text.as_bytes());
            format!("{path} ({} bytes, {})", text.len(), &sha[..8])
        }
    });
    each.collect::<Vec<_>>().join(", ")
}

/// The tree the plain files on `disk` hold now.
fn plain_files(disk: &Arc<MemDisk>) -> BTreeMap<String, Entry> {
    let root = disk.root();
    let memories = root.open_dir(std::ffi::OsStr::new("memories")).unwrap();
    let (tree, _) = memfs::persist::load::load(&memories).unwrap();
    tree_entries(&tree)
}

fn power_cut(cmds: &[Cmd], cut: u64, seed: u64, small_history: bool) -> Result<(), TestCaseError> {
    let disk = MemDisk::new(seed);
    let state = tempfile::tempdir().unwrap();
    let options = options(small_history);
    let before = {
        let memory = Memory::open_on(state.path(), options.clone(), Some(disk.root())).unwrap();
        disk.cut_after(cut);
        let before = run_until_the_cut(&memory, &disk, cmds)?;
        // The process goes on for a moment on a dead disk, then stops:
        // nothing more reaches the disk.
        drop(memory);
        before
    };
    disk.restart();
    let memory = Memory::open_on(state.path(), options, Some(disk.root()));
    let memory = match memory {
        Ok(memory) => memory,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "memfs does not open after the power cut: {e}\n{}",
                disk.dump()
            )))
        }
    };
    let now = memory.store().with_tree(tree_entries);
    prop_assert!(
        now == before.acked || Some(&now) == before.interrupted.as_ref(),
        "after the power cut at step {cut}:\nmemory {}\nacknowledged {}\ninterrupted {}\n{}",
        summary(&now),
        summary(&before.acked),
        before.interrupted.as_ref().map_or("none".into(), summary),
        disk.dump()
    );
    history_is_exact(&memory, &now)?;
    let pass = memory.history().checkpoint();
    prop_assert!(pass.is_ok(), "{pass:?}");
    prop_assert_eq!(
        plain_files(&disk),
        now,
        "the plain files after a checkpoint"
    );
    Ok(())
}

/// No version id used twice; each file's newest version names its content.
fn history_is_exact(memory: &Memory, now: &BTreeMap<String, Entry>) -> Result<(), TestCaseError> {
    let rows = memory.history().log(&MemPath::root());
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "the history cannot be read: {e:?}"
            )))
        }
    };
    let mut ids = HashSet::new();
    for r in &rows {
        prop_assert!(ids.insert(r.id()), "version {} twice", r.id());
    }
    for (path, entry) in now {
        let Entry::File(text) = entry else { continue };
        let newest = rows
            .iter()
            .find(|r| r.path == *path && !matches!(r.op, Op::Prune | Op::Void));
        let Some(newest) = newest else {
            return Err(TestCaseError::fail(format!("{path} has no version")));
        };
        let sha = memfs::digest::sha256_hex(text.as_bytes());
        prop_assert_eq!(
            newest.sha256.as_deref(),
            Some(sha.as_str()),
            "{}: {:?}",
            path,
            newest
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases("MEMFS_POWER_CASES", 64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_acknowledged_change_survives_a_power_cut_at_any_step(
        cmds in prop::collection::vec(cmd(), 1..30),
        cut in 0u64..400,
        seed in any::<u64>(),
        small_history in any::<bool>(),
    ) {
        power_cut(&cmds, cut, seed, small_history)?;
    }
}
