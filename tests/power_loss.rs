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
//! The workloads: the agent's tool calls alone; two agents and a person's
//! saves, renames and removals at once; a person's moves of a directory of
//! 40 files beside an agent; a redaction (whole or not at all: the content
//! gone from the disk once it is acknowledged); and the first start on a
//! data dir of the release before the journal (every file and version).
//!
//! kill -9 keeps the page cache, so this is the test it cannot be.
//! `MEMFS_POWER_CASES=N` runs more cases (scripts/soak.sh runs 100,000),
//! `MEMFS_POWER_WRITERS_CASES` the writers' and the moves', and
//! `MEMFS_POWER_SEEDS` the restarts of each step of the redaction and the
//! upgrade.

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

// ---------------------------------------------------------------------
// Several writers at once: two agents, each in a directory of its own, and
// a person saving files (write, fsync), renaming and removing them through
// the store's inode operations (what the mount calls), in a third. The
// power goes at a random step; each writer's directory must then be what
// that writer was told, or that plus the one change the cut interrupted.

use memfs::store::{Ino, NewNode, Origin, Process, RenameMode, ROOT_INO};

/// A person's step in their directory.
#[derive(Debug, Clone)]
enum Person {
    /// Create a new file, write it whole, `fsync`, close (one change: a
    /// new file's bytes are saved at once; an existing name is passed over).
    Save(&'static str, String),
    /// `rename(2)`, replacing, then a barrier (the directory's `fsync`).
    Rename(&'static str, &'static str),
    /// `unlink(2)`, then a barrier.
    Unlink(&'static str),
}

fn person_step() -> impl Strategy<Value = Person> {
    let name = || prop::sample::select(vec!["n", "o", "p"]);
    prop_oneof![
        3 => (name(), text()).prop_map(|(n, t)| Person::Save(n, t)),
        1 => (name(), name()).prop_map(|(a, b)| Person::Rename(a, b)),
        1 => name().prop_map(Person::Unlink),
    ]
}

fn someone() -> Origin {
    Origin::Person {
        uid: 0,
        pid: 7,
        process: Process::new("power-loss"),
    }
}

/// What one writer was told before the power went: its directory's files
/// (names relative to it) after the last acknowledged step, and with the
/// interrupted one applied.
#[derive(Debug, Default)]
struct Told {
    acked: BTreeMap<String, String>,
    interrupted: Option<BTreeMap<String, String>>,
}

/// The files below `dir` in `tree` (as the model sees a tree), by their
/// path relative to `dir`.
fn files_below(tree: &BTreeMap<String, Entry>, dir: &str) -> BTreeMap<String, String> {
    let prefix = format!("{dir}/");
    tree.iter()
        .filter_map(|(p, e)| match e {
            Entry::File(t) => p
                .strip_prefix(&prefix)
                .map(|rest| (rest.to_string(), t.clone())),
            Entry::Dir => None,
        })
        .collect()
}

/// An agent in `dir`: the model runs on `/memories/...` paths, memfs on the
/// same paths below `dir`. Outcomes are compared as success or error.
fn agent_in(memory: &Memory, disk: &MemDisk, dir: &str, cmds: &[Cmd]) -> Told {
    let moved = |p: &str| p.replacen(ROOT, dir, 1);
    let mut model = Model::new();
    for c in cmds {
        // (Deleting the model's root is refused; deleting the agent's own
        // directory is not: not asked.)
        if matches!(c, Cmd::Delete(p) if p == ROOT) {
            continue;
        }
        let inside = match c {
            Cmd::View(p, r) => Cmd::View(moved(p), *r),
            Cmd::Create(p, t) => Cmd::Create(moved(p), t.clone()),
            Cmd::Replace(p, o, n) => Cmd::Replace(moved(p), o.clone(), n.clone()),
            Cmd::Insert(p, l, t) => Cmd::Insert(moved(p), *l, t.clone()),
            Cmd::Delete(p) => Cmd::Delete(moved(p)),
            Cmd::Rename(a, b) => Cmd::Rename(moved(a), moved(b)),
        };
        let got = memory.tool().call(&inside.json());
        let mut next = model.clone();
        let (want_error, _) = next.run(c);
        if got.is_error == want_error {
            model = next;
            continue;
        }
        assert!(
            disk.is_cut() && got.is_error,
            "{inside:?}: {:?} with the power on",
            got.text()
        );
        let files = |m: &Model| files_below(&m.entries, ROOT);
        return Told {
            acked: files(&model),
            interrupted: Some(files(&next)),
        };
    }
    Told {
        acked: files_below(&model.entries, ROOT),
        interrupted: None,
    }
}

/// A person in directory `dir` (an inode below the root).
fn person_in(memory: &Memory, dir: Ino, steps: &[Person]) -> Told {
    let store = memory.store();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for step in steps {
        let mut next = files.clone();
        let done = match step {
            Person::Save(name, text) => {
                if next.insert(name.to_string(), text.clone()).is_some() {
                    continue;
                }
                save(store, dir, name, text)
            }
            Person::Rename(a, b) => {
                let Some(moved) = next.remove(*a) else {
                    continue;
                };
                next.insert(b.to_string(), moved);
                store
                    .rename_entry(dir, a, dir, b, RenameMode::Replace, someone())
                    .map_err(|e| e.to_string())
                    .and_then(|()| store.barrier(someone()).wait().map_err(|e| e.to_string()))
            }
            Person::Unlink(name) => {
                if next.remove(*name).is_none() {
                    continue;
                }
                store
                    .unlink(dir, name, someone())
                    .map_err(|e| e.to_string())
                    .and_then(|()| store.barrier(someone()).wait().map_err(|e| e.to_string()))
            }
        };
        match done {
            Ok(()) => files = next,
            Err(_) => {
                return Told {
                    acked: files,
                    interrupted: Some(next),
                }
            }
        }
    }
    Told {
        acked: files,
        interrupted: None,
    }
}

/// A person's save of a new file: create, write, `fsync`, close.
fn save(store: &memfs::store::Store, dir: Ino, name: &str, text: &str) -> Result<(), String> {
    let ino = store
        .make_node(dir, name, NewNode::OpenedFile, 0o644, (0, 0), someone())
        .map_err(|e| e.to_string())?
        .ino;
    let written = store
        .write(ino, 0, text.as_bytes(), false, someone())
        .map_err(|e| e.to_string())
        .and_then(|_| {
            store
                .persist_file(ino, true, someone())
                .wait()
                .map_err(|e| e.to_string())
        });
    store.unpin(ino, 1);
    written
}

fn writers_at_once(
    agents: &[Vec<Cmd>; 2],
    person: &[Person],
    cut: u64,
    seed: u64,
    small_history: bool,
) -> Result<(), TestCaseError> {
    let disk = MemDisk::new(seed);
    let state = tempfile::tempdir().unwrap();
    let options = options(small_history);
    let dirs = ["t0", "t1", "p"];
    let told: Vec<Told> = {
        let memory = Memory::open_on(state.path(), options.clone(), Some(disk.root())).unwrap();
        let store = memory.store();
        let mut inos = Vec::new();
        for d in dirs {
            let made = store
                .make_node(ROOT_INO, d, NewNode::Dir, 0o755, (0, 0), someone())
                .unwrap();
            inos.push(made.ino);
        }
        prop_assert!(store.sync(Origin::Memfs).is_ok());
        disk.cut_after(cut);
        let told = std::thread::scope(|scope| {
            let a: Vec<_> = (0..2)
                .map(|k| {
                    let (memory, disk) = (&memory, &disk);
                    let dir = format!("{ROOT}/t{k}");
                    scope.spawn(move || agent_in(memory, disk, &dir, &agents[k]))
                })
                .collect();
            let p = scope.spawn(|| person_in(&memory, inos[2], person));
            let mut told: Vec<Told> = a.into_iter().map(|h| h.join().unwrap()).collect();
            told.push(p.join().unwrap());
            told
        });
        disk.cut_now();
        drop(memory);
        told
    };
    each_as_told(&disk, state.path(), options, &dirs, &told, cut)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases("MEMFS_POWER_WRITERS_CASES", 32),
        ..ProptestConfig::default()
    })]

    #[test]
    fn agents_and_a_persons_saves_at_once_survive_a_power_cut(
        a0 in prop::collection::vec(cmd(), 1..15),
        a1 in prop::collection::vec(cmd(), 1..15),
        person in prop::collection::vec(person_step(), 1..12),
        cut in 0u64..500,
        seed in any::<u64>(),
        small_history in any::<bool>(),
    ) {
        writers_at_once(&[a0, a1], &person, cut, seed, small_history)?;
    }
}

// ---------------------------------------------------------------------
// A person's renames of a big directory (40 files): one change each, which
// the checkpoint carries out as one rename of the plain directory. An agent
// writes beside. The power goes at a random step.

/// A person's step in their directory, which holds one big directory
/// under one of a few names.
#[derive(Debug, Clone)]
enum Mover {
    /// The big directory (wherever it is) renamed to this name.
    Move(&'static str),
    /// A new file saved in the big directory.
    Add(&'static str, String),
}

const BIG: usize = 40;

fn mover_step() -> impl Strategy<Value = Mover> {
    let dir = prop::sample::select(vec!["big", "b2", "b3"]);
    let name = prop::sample::select(vec!["x.md", "y.md"]);
    prop_oneof![
        3 => dir.prop_map(Mover::Move),
        1 => (name, text()).prop_map(|(n, t)| Mover::Add(n, t)),
    ]
}

/// The big directory's files, by path below the person's directory.
fn big_files(dir: &str) -> BTreeMap<String, String> {
    (0..BIG)
        .map(|i| (format!("{dir}/f{i:02}.md"), format!("file {i}\n")))
        .collect()
}

fn moved_to(files: &BTreeMap<String, String>, from: &str, to: &str) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, t)| match p.strip_prefix(&format!("{from}/")) {
            Some(rest) => (format!("{to}/{rest}"), t.clone()),
            None => (p.clone(), t.clone()),
        })
        .collect()
}

/// A person moving the big directory around in `dir` and saving into it.
fn mover_in(memory: &Memory, dir: Ino, steps: &[Mover]) -> Told {
    let store = memory.store();
    let mut at = "big";
    let mut files = big_files(at);
    for step in steps {
        let (next_at, next, done) = match step {
            Mover::Move(to) if *to == at => continue,
            Mover::Move(to) => {
                let next = moved_to(&files, at, to);
                let done = store
                    .rename_entry(dir, at, dir, to, RenameMode::Replace, someone())
                    .map_err(|e| e.to_string())
                    .and_then(|()| store.barrier(someone()).wait().map_err(|e| e.to_string()));
                (*to, next, done)
            }
            Mover::Add(name, text) => {
                let path = format!("{at}/{name}");
                if files.contains_key(&path) {
                    continue;
                }
                let mut next = files.clone();
                next.insert(path, text.clone());
                let done = match store.lookup(dir, at) {
                    Ok(big) => {
                        let saved = save(store, big.ino, name, text);
                        store.unpin(big.ino, 1);
                        saved
                    }
                    Err(e) => Err(e.to_string()),
                };
                (at, next, done)
            }
        };
        match done {
            Ok(()) => (at, files) = (next_at, next),
            Err(_) => {
                return Told {
                    acked: files,
                    interrupted: Some(next),
                }
            }
        }
    }
    Told {
        acked: files,
        interrupted: None,
    }
}

fn big_directory_moves(
    agent: &[Cmd],
    steps: &[Mover],
    cut: u64,
    seed: u64,
) -> Result<(), TestCaseError> {
    let disk = MemDisk::new(seed);
    let state = tempfile::tempdir().unwrap();
    let options = options(false);
    let told: Vec<Told> = {
        let memory = Memory::open_on(state.path(), options.clone(), Some(disk.root())).unwrap();
        let store = memory.store();
        let mk = |parent, name| {
            store
                .make_node(parent, name, NewNode::Dir, 0o755, (0, 0), someone())
                .unwrap()
                .ino
        };
        mk(ROOT_INO, "t0");
        let p = mk(ROOT_INO, "p");
        let big = mk(p, "big");
        for (path, text) in big_files("big") {
            let name = path.strip_prefix("big/").unwrap();
            prop_assert!(save(store, big, name, &text).is_ok());
        }
        prop_assert!(memory.history().checkpoint().is_ok());
        disk.cut_after(cut);
        let told = std::thread::scope(|scope| {
            let (m, d) = (&memory, &disk);
            let a = scope.spawn(move || agent_in(m, d, &format!("{ROOT}/t0"), agent));
            let p = scope.spawn(move || mover_in(m, p, steps));
            vec![a.join().unwrap(), p.join().unwrap()]
        });
        disk.cut_now();
        drop(memory);
        told
    };
    each_as_told(&disk, state.path(), options, &["t0", "p"], &told, cut)
}

/// After the cut: memfs opens on what survived; each writer's directory
/// (below the root) is what it was told, or that and the change the cut
/// interrupted; the history is exact; a checkpoint makes the plain files
/// equal the tree.
fn each_as_told(
    disk: &Arc<MemDisk>,
    state: &std::path::Path,
    options: Options,
    dirs: &[&str],
    told: &[Told],
    cut: u64,
) -> Result<(), TestCaseError> {
    disk.restart();
    let memory = match Memory::open_on(state, options, Some(disk.root())) {
        Ok(memory) => memory,
        Err(e) => return Err(TestCaseError::fail(format!("no start after the cut: {e}"))),
    };
    let now = memory.store().with_tree(tree_entries);
    for (d, told) in dirs.iter().zip(told) {
        let have = files_below(&now, &format!("{ROOT}/{d}"));
        prop_assert!(
            have == told.acked || Some(&have) == told.interrupted.as_ref(),
            "{d} after the cut at step {cut}: {:?}\nacknowledged {:?}\ninterrupted {:?}",
            have.keys().collect::<Vec<_>>(),
            told.acked.keys().collect::<Vec<_>>(),
            told.interrupted
                .as_ref()
                .map(|i| i.keys().collect::<Vec<_>>())
        );
    }
    history_is_exact(&memory, &now)?;
    prop_assert!(memory.history().checkpoint().is_ok());
    prop_assert!(
        plain_files(disk) == now,
        "the plain files after a checkpoint"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases("MEMFS_POWER_WRITERS_CASES", 24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_persons_moves_of_a_big_directory_survive_a_power_cut(
        agent in prop::collection::vec(cmd(), 1..10),
        steps in prop::collection::vec(mover_step(), 1..10),
        cut in 0u64..120,
        seed in any::<u64>(),
    ) {
        big_directory_moves(&agent, &steps, cut, seed)?;
    }
}

// ---------------------------------------------------------------------
// Redaction under power loss: the journal's segments are written anew
// without a content. Whatever step the power goes at, memfs opens, the
// files are as they were, and a redaction that was acknowledged holds: the
// content is nowhere on the disk. One that was not either happened whole
// or not at all, and runs again.

/// The paths of the files on `disk` whose bytes hold `needle`.
fn disk_holds(disk: &Arc<MemDisk>, needle: &[u8]) -> Vec<String> {
    fn walk(dir: &memfs::persist::storage::Dir, at: &str, needle: &[u8], out: &mut Vec<String>) {
        use memfs::persist::storage::{read_all, Kind, Open};
        for (name, kind) in dir.list().unwrap() {
            let path = format!("{at}/{}", name.to_string_lossy());
            match kind {
                Kind::Dir => walk(&dir.open_dir(&name).unwrap(), &path, needle, out),
                Kind::File => {
                    let file = dir.open_file(&name, Open::Read).unwrap();
                    let bytes = read_all(file.as_ref()).unwrap();
                    if bytes.windows(needle.len()).any(|w| w == needle) {
                        out.push(path);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&disk.root(), "", needle, &mut out);
    out
}

const SECRET: &str = "Ana's door code is 4417\n";

fn tool(memory: &Memory, input: serde_json::Value) {
    let got = memory.tool().call(&input);
    assert!(!got.is_error, "{input}: {:?}", got.text());
}

/// A memory where a file once held [`SECRET`] (its first version) and no
/// longer does; returns that version.
fn with_a_secret_in_the_history(memory: &Memory) -> u64 {
    use serde_json::json;
    let f = "/memories/s.md";
    tool(
        memory,
        json!({"command": "create", "path": f, "file_text": SECRET}),
    );
    // Enough after it that the history spans several segments.
    for i in 0..6 {
        let text = format!("{i}\n").repeat(4000);
        tool(
            memory,
            json!({"command": "create", "path": format!("/memories/fill{i}.md"), "file_text": text}),
        );
    }
    // The same content again, in a later segment, then deleted: the
    // redaction erases it from both.
    let again = "/memories/again.md";
    tool(
        memory,
        json!({"command": "create", "path": again, "file_text": SECRET}),
    );
    tool(memory, json!({"command": "delete", "path": again}));
    tool(
        memory,
        json!({"command": "create", "path": "/memories/o.md", "file_text": "other\n"}),
    );
    tool(
        memory,
        json!({"command": "str_replace", "path": f, "old_str": "4417", "new_str": "(asked)"}),
    );
    assert!(memory.history().checkpoint().is_ok());
    let rows = memory.history().log(&MemPath::parse(f).unwrap()).unwrap();
    rows.last().unwrap().version.0
}

/// One cut `cut` steps into a redaction; whether the redaction was
/// acknowledged before it.
fn cut_in_a_redaction(seed: u64, cut: u64) -> bool {
    let disk = MemDisk::new(seed);
    let state = tempfile::tempdir().unwrap();
    let open = || Memory::open_on(state.path(), options(false), Some(disk.root()));
    let needle = SECRET.trim_end().as_bytes();
    let acked = {
        let memory = open().unwrap();
        let version = with_a_secret_in_the_history(&memory);
        disk.cut_after(cut);
        let acked = memory.history().redact(version, false).is_ok();
        disk.cut_now();
        acked
    };
    disk.restart();
    let memory =
        open().unwrap_or_else(|e| panic!("no start after a cut at {cut}: {e}\n{}", disk.dump()));
    // The start settled what the cut left: no half-placed file remains.
    let journal = disk.root().open_dir(".memfs".as_ref()).unwrap();
    let journal = journal.open_dir("journal".as_ref()).unwrap();
    let left: Vec<String> = journal
        .list()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".new") || n == "rewrite.commit")
        .collect();
    assert!(left.is_empty(), "left after a cut at {cut}: {left:?}");
    let files: BTreeMap<String, Entry> = memory.store().with_tree(tree_entries);
    let mut want: BTreeMap<String, Entry> = [
        ("/memories/o.md", "other\n"),
        ("/memories/s.md", "Ana's door code is (asked)\n"),
    ]
    .into_iter()
    .map(|(p, t)| (p.to_string(), Entry::File(t.to_string())))
    .collect();
    want.insert(ROOT.to_string(), Entry::Dir);
    for i in 0..6 {
        let text = format!("{i}\n").repeat(4000);
        want.insert(format!("/memories/fill{i}.md"), Entry::File(text));
    }
    assert_eq!(files, want, "the files after a cut at step {cut}");
    let rows = memory.history().log(&MemPath::root()).unwrap();
    let first = rows
        .iter()
        .find(|r| r.path == "/memories/s.md" && r.replaces.is_none())
        .unwrap_or_else(|| panic!("the first version is gone (cut {cut}): {rows:?}"));
    let secret_sha = memfs::digest::sha256_hex(SECRET.as_bytes());
    let naming = rows
        .iter()
        .filter(|r| r.sha256.as_deref() == Some(secret_sha.as_str()))
        .count();
    assert!(
        naming == 0 || (naming == 2 && !first.redacted),
        "a redaction half done (cut {cut}): {naming} version(s) still name the content"
    );
    let held = disk_holds(&disk, needle);
    if acked {
        assert!(
            first.redacted,
            "an acknowledged redaction undone by a cut at {cut}"
        );
        assert!(
            held.is_empty(),
            "redacted, yet on the disk (cut {cut}): {held:?}"
        );
    } else if !first.redacted {
        // Not done: the content is all there, and the redaction runs now.
        let (_, bytes) = memory.history().content(first.version.0).unwrap();
        assert_eq!(bytes, SECRET.as_bytes(), "cut {cut}");
        assert!(memory.history().redact(first.version.0, false).is_ok());
    }
    assert!(memory.history().checkpoint().is_ok());
    let held = disk_holds(&disk, needle);
    assert!(
        held.is_empty(),
        "redacted, yet on the disk (cut {cut}): {held:?}"
    );
    acked
}

#[test]
fn a_redaction_survives_a_power_cut_at_any_step_whole_or_not_at_all() {
    // The redaction's steps, counted on a disk that keeps its power.
    let steps = {
        let disk = MemDisk::new(0);
        let state = tempfile::tempdir().unwrap();
        let memory = Memory::open_on(state.path(), options(false), Some(disk.root())).unwrap();
        let version = with_a_secret_in_the_history(&memory);
        let before = disk.steps();
        memory.history().redact(version, false).unwrap();
        disk.steps() - before
    };
    let (mut acked, mut not) = (0, 0);
    for seed in 0..common::cases("MEMFS_POWER_SEEDS", 3) as u64 {
        for cut in 0..=steps + 2 {
            match cut_in_a_redaction(seed, cut) {
                true => acked += 1,
                false => not += 1,
            }
        }
    }
    assert!(acked > 0 && not > 0, "acknowledged {acked}, not {not}");
}

// ---------------------------------------------------------------------
// An upgrade from a data dir of the release before the journal
// (tests/fixtures/pre-journal): its history becomes the journal's first
// segment at the first start. Whatever step the power goes at during that
// start, the next one has every file and every version.

/// Copies the host directory `from` into `to` on the in-memory disk, all
/// of it durable.
fn copy_in(from: &std::path::Path, to: &memfs::persist::storage::Dir) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if entry.file_type().unwrap().is_dir() {
            to.mkdir(&name).unwrap();
            copy_in(&entry.path(), &to.open_dir(&name).unwrap());
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            let name = name.to_str().unwrap();
            memfs::persist::storage::write_whole(to.as_ref(), name, &bytes).unwrap();
        }
    }
    to.sync().unwrap();
}

fn fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-journal")
}

/// The old release's versions (newest first): id, op, path, content hash.
fn old_versions() -> Vec<(String, String, String, Option<String>)> {
    std::fs::read_to_string(fixture().join("log.json"))
        .unwrap()
        .lines()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            let text = |k: &str| r[k].as_str().map(str::to_string);
            (
                text("version").unwrap(),
                text("op").unwrap(),
                text("path").unwrap(),
                text("sha256"),
            )
        })
        .collect()
}

fn versions_now(memory: &Memory) -> Vec<(String, String, String, Option<String>)> {
    let rows = memory.history().log(&MemPath::root()).unwrap();
    rows.iter()
        .map(|r| {
            (
                r.version.to_string(),
                r.op.as_str().to_string(),
                r.path.clone(),
                r.sha256.clone(),
            )
        })
        .collect()
}

/// The fixture's files as the model sees a tree.
fn fixture_files() -> BTreeMap<String, Entry> {
    fn walk(dir: &std::path::Path, at: &str, out: &mut BTreeMap<String, Entry>) {
        out.insert(at.to_string(), Entry::Dir);
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = format!("{at}/{}", entry.file_name().to_string_lossy());
            match entry.file_type().unwrap().is_dir() {
                true => walk(&entry.path(), &path, out),
                false => {
                    let text = std::fs::read_to_string(entry.path()).unwrap();
                    out.insert(path, Entry::File(text));
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&fixture().join("data/memories"), ROOT, &mut out);
    out
}

/// A disk holding the old release's data dir.
fn old_data_dir(seed: u64) -> Arc<MemDisk> {
    let disk = MemDisk::new(seed);
    copy_in(&fixture().join("data"), &disk.root());
    disk
}

#[test]
fn an_upgrade_from_before_the_journal_survives_a_power_cut_at_any_step() {
    let want_files = fixture_files();
    let want_versions = old_versions();
    // The first start's steps, counted on a disk that keeps its power.
    let steps = {
        let disk = old_data_dir(0);
        let state = tempfile::tempdir().unwrap();
        let before = disk.steps();
        let memory = Memory::open_on(state.path(), options(false), Some(disk.root())).unwrap();
        assert!(
            memory.opened().upgraded,
            "the fixture is not taken in as an upgrade"
        );
        assert_eq!(versions_now(&memory), want_versions);
        drop(memory);
        disk.steps() - before
    };
    for seed in 0..common::cases("MEMFS_POWER_SEEDS", 3) as u64 {
        for cut in 0..=steps {
            let disk = old_data_dir(seed);
            let state = tempfile::tempdir().unwrap();
            disk.cut_after(cut);
            let first = Memory::open_on(state.path(), options(false), Some(disk.root()));
            disk.cut_now();
            drop(first);
            disk.restart();
            let memory = Memory::open_on(state.path(), options(false), Some(disk.root()))
                .unwrap_or_else(|e| panic!("no start after a cut at {cut}: {e}\n{}", disk.dump()));
            let files = memory.store().with_tree(tree_entries);
            assert_eq!(
                files, want_files,
                "the files after a cut at step {cut} (seed {seed})"
            );
            assert_eq!(
                versions_now(&memory),
                want_versions,
                "the versions after a cut at step {cut} (seed {seed})"
            );
            assert!(memory.history().checkpoint().is_ok());
            assert_eq!(plain_files(&disk), want_files, "cut {cut}");
        }
    }
}
