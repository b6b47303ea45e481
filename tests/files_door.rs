//! The plain files as a door (issue 48): what people and programs write in
//! `DIR/memories` beside a running memfs is taken in as versions of the
//! files door (`person:files`), before the next answer of every door, and
//! never written over by a checkpoint.

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::{checkpoint, content, log_rows, memfs, Server};
use serde_json::Value;

fn call(s: &mut Server, json: &str) -> Value {
    let v = s.call(json);
    assert_eq!(v["is_error"], false, "{json}: {v}");
    v
}

fn view(s: &mut Server, path: &str) -> String {
    let v = call(s, &format!(r#"{{"command":"view","path":"{path}"}}"#));
    content(&v).to_string()
}

fn append(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Every row's (who, op, path), oldest first.
fn rows(dir: &Path) -> Vec<(String, String, String)> {
    log_rows(dir)
        .iter()
        .rev()
        .map(|r| {
            (
                r["actor"]["kind"].as_str().unwrap_or("").to_string()
                    + ":"
                    + r["actor"]["door"].as_str().unwrap_or(""),
                r["op"].as_str().unwrap().to_string(),
                r["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn by_files(rows: &[(String, String, String)], op: &str, path: &str) -> bool {
    rows.iter()
        .any(|(who, o, p)| who == "person:files" && o == op && p == path)
}

/// Every file below `memories`, relative, with its bytes.
fn plain_files(memories: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![memories.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(memories)
                    .unwrap()
                    .display()
                    .to_string();
                out.push((rel, fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A memfs serving a fresh data dir (with `flags` and `env`), `path`
/// created with `text` and checkpointed: the temp dir, the data dir, its
/// `memories` and the server.
fn started(
    flags: &[&str],
    env: &[(&str, &str)],
    path: &str,
    text: &str,
) -> (tempfile::TempDir, PathBuf, PathBuf, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mem = dir.join("memories");
    let mut s = Server::start_with_env(&dir, flags, env);
    let create = serde_json::json!({"command": "create", "path": path, "file_text": text});
    call(&mut s, &create.to_string());
    checkpoint(&dir);
    (tmp, dir, mem, s)
}

#[test]
fn outside_changes_beside_a_running_memfs_are_versions_and_the_agent_edits_on_top() {
    let (_tmp, dir, mem, mut s) = started(&[], &[], "/memories/a.md", "one\ntwo\n");
    call(
        &mut s,
        r#"{"command":"create","path":"/memories/gone.md","file_text":"bye\n"}"#,
    );
    checkpoint(&dir);
    // Beside it, with plain file calls: an append, a new file, a new
    // directory renamed, a deletion.
    append(&mem.join("a.md"), "PERSON EDIT\n");
    fs::write(mem.join("b.md"), "written beside memfs\n").unwrap();
    fs::create_dir(mem.join("d1")).unwrap();
    fs::write(mem.join("d1/x.md"), "x\n").unwrap();
    fs::rename(mem.join("d1"), mem.join("d2")).unwrap();
    fs::remove_file(mem.join("gone.md")).unwrap();
    // The very next call sees all of it (no sleep: the kernel queued the
    // events when the writes returned).
    let listing = view(&mut s, "/memories");
    assert!(listing.contains("/memories/b.md"), "{listing}");
    assert!(listing.contains("/memories/d2/x.md"), "{listing}");
    assert!(!listing.contains("/memories/d1"), "{listing}");
    assert!(!listing.contains("gone.md"), "{listing}");
    let edited = call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/a.md","old_str":"two","new_str":"TWO"}"#,
    );
    assert!(content(&edited).contains("PERSON EDIT"), "{edited}");
    call(
        &mut s,
        r#"{"command":"insert","path":"/memories/d2/x.md","insert_line":1,"insert_text":"agent\n"}"#,
    );
    assert!(s.finish().success());
    // Every outside change is a version of the files door, the agent's on top.
    let rows = rows(&dir);
    assert!(by_files(&rows, "write", "/memories/a.md"), "{rows:?}");
    assert!(by_files(&rows, "create", "/memories/b.md"), "{rows:?}");
    assert!(by_files(&rows, "delete", "/memories/gone.md"), "{rows:?}");
    assert!(
        rows.iter()
            .any(|(w, op, p)| w == "person:files" && op == "rename" && p == "/memories/d2/x.md")
            || by_files(&rows, "create", "/memories/d2/x.md"),
        "{rows:?}"
    );
    let last_a = rows.iter().rposition(|r| r.2 == "/memories/a.md").unwrap();
    assert_eq!(rows[last_a].0, "agent:stdio");
    // Nothing lost, and the files on disk are what the memory says.
    let files = plain_files(&mem);
    let expect: Vec<(String, Vec<u8>)> = vec![
        ("a.md".into(), b"one\nTWO\nPERSON EDIT\n".to_vec()),
        ("b.md".into(), b"written beside memfs\n".to_vec()),
        ("d2/x.md".into(), b"x\nagent\n".to_vec()),
    ];
    assert_eq!(files, expect);
    // And a restart finds nothing new: the journal already has it all.
    let mut s = Server::start(&dir, &[]);
    assert!(view(&mut s, "/memories/a.md").contains("PERSON EDIT"));
    assert!(s.finish().success());
    assert_eq!(
        log_rows(&dir).iter().filter(|r| r["op"] == "found").count(),
        0
    );
}

#[test]
fn a_file_written_while_the_agents_change_waits_for_its_checkpoint_is_kept_as_an_overwrite() {
    // A long checkpoint delay: the agent's change waits in memory while a
    // person writes the plain file (which still shows the older content).
    let slow = [("MEMFS_CHECKPOINT_MS", "3000")];
    let (_tmp, dir, mem, mut s) = started(&[], &slow, "/memories/n.md", "v1\n");
    call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/n.md","old_str":"v1","new_str":"agent v2"}"#,
    );
    assert_eq!(fs::read_to_string(mem.join("n.md")).unwrap(), "v1\n");
    fs::write(mem.join("n.md"), "person over v1\n").unwrap();
    checkpoint(&dir);
    let now = view(&mut s, "/memories/n.md");
    assert!(now.contains("person over v1"), "{now}");
    assert!(s.finish().success());
    // Both are versions; the person's is recorded as an overwrite of the
    // agent's change it never saw; the plain file is the person's.
    let rows = log_rows(&dir);
    let ops: Vec<(&str, &str)> = rows
        .iter()
        .rev()
        .filter(|r| r["path"] == "/memories/n.md")
        .map(|r| {
            (
                r["op"].as_str().unwrap(),
                r["actor"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("create", "agent"),
            ("write", "agent"),
            ("overwrite", "person")
        ],
        "{rows:?}"
    );
    assert_eq!(
        fs::read_to_string(mem.join("n.md")).unwrap(),
        "person over v1\n"
    );
}

#[test]
fn what_cannot_be_taken_in_stays_on_disk_and_is_listed() {
    let limit = ["--max-file-size", "1K"];
    let (_tmp, dir, mem, mut s) = started(&limit, &[], "/memories/ok.md", "ok\n");
    let big = "x".repeat(4096);
    fs::write(mem.join("big.md"), &big).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        mem.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let listing = view(&mut s, "/memories");
    assert!(!listing.contains("big.md"), "{listing}");
    assert!(!listing.contains("pipe"), "{listing}");
    // `memfs checkpoint` says what it leaves out, and why.
    let out = memfs()
        .arg("--data")
        .arg(&dir)
        .arg("checkpoint")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("/memories/big.md (4096 bytes, over the limit"),
        "{said}"
    );
    assert!(said.contains("/memories/pipe (a FIFO"), "{said}");
    // The agent's writes elsewhere go on; nothing of the person's is touched.
    call(
        &mut s,
        r#"{"command":"str_replace","path":"/memories/ok.md","old_str":"ok","new_str":"ok again"}"#,
    );
    assert!(s.finish().success());
    assert_eq!(fs::read_to_string(mem.join("big.md")).unwrap(), big);
    assert!(mem.join("pipe").exists());
    assert_eq!(fs::read_to_string(mem.join("ok.md")).unwrap(), "ok again\n");
}

#[test]
fn a_program_writing_in_several_writes_gives_one_version() {
    let (_tmp, dir, mem, mut s) = started(&[], &[], "/memories/log.md", "start\n");
    {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(mem.join("log.md"))
            .unwrap();
        for i in 0..20 {
            f.write_all(format!("line {i}\n").as_bytes()).unwrap();
            f.flush().unwrap();
        }
    }
    // And an editor's save through a temp file renamed into place.
    fs::write(mem.join(".tmp-save"), "saved whole\n").unwrap();
    fs::rename(mem.join(".tmp-save"), mem.join("saved.md")).unwrap();
    let text = view(&mut s, "/memories/log.md");
    assert!(text.contains("line 19"), "{text}");
    assert!(view(&mut s, "/memories/saved.md").contains("saved whole"));
    assert!(s.finish().success());
    let rows = rows(&dir);
    let writes = rows
        .iter()
        .filter(|r| r.0 == "person:files" && r.2 == "/memories/log.md")
        .count();
    assert_eq!(writes, 1, "{rows:?}");
    assert!(
        !rows.iter().any(|r| r.2.contains(".tmp-save"))
            || by_files(&rows, "rename", "/memories/saved.md"),
        "{rows:?}"
    );
}

#[test]
fn a_flood_that_overflows_the_kernels_queue_is_taken_in_by_one_rescan() {
    if !rustix::process::geteuid().is_root() {
        common::skip(
            "the overflow test",
            "setting fs.inotify.max_queued_events needs root",
        );
        return;
    }
    // A queue of 16 events for the memfs started now (the kernel reads the
    // limit when the watcher is made), the machine's own limit back at once.
    let knob = "/proc/sys/fs/inotify/max_queued_events";
    let was = fs::read_to_string(knob).unwrap();
    fs::write(knob, "16").unwrap();
    let started =
        std::panic::catch_unwind(|| started(&["-v"], &[], "/memories/first.md", "first\n"));
    fs::write(knob, was.trim()).unwrap();
    let (_tmp, dir, mem, mut s) = started.unwrap();
    // (In a watched directory: each file is three events.)
    for i in 0..300 {
        fs::write(mem.join(format!("f{i:03}.md")), format!("{i}\n")).unwrap();
    }
    fs::remove_file(mem.join("first.md")).unwrap();
    let mut listing = String::new();
    let count = |l: &str| l.lines().filter(|l| l.contains("/memories/f")).count();
    for _ in 0..50 {
        // (A flood is taken in a batch of paths per answer: a few answers.)
        listing = view(&mut s, "/memories");
        if count(&listing) == 300 {
            break;
        }
    }
    let files = count(&listing);
    assert_eq!(files, 300, "{listing}");
    assert!(!listing.contains("first.md"), "{listing}");
    assert!(listing.contains("f299.md"), "{listing}");
    let mut err = String::new();
    let mut stderr = s.child.stderr.take().unwrap();
    assert!(s.finish().success());
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    assert!(err.contains("looking at every plain file again"), "{err}");
    let rows = rows(&dir);
    let taken = rows
        .iter()
        .filter(|r| {
            r.0 == "person:files"
                && r.1 == "create"
                && r.2.starts_with("/memories/f")
                && r.2 != "/memories/first.md"
        })
        .count();
    assert_eq!(taken, 300);
    assert!(by_files(&rows, "delete", "/memories/first.md"), "{rows:?}");
}

/// Runs `script` with `sh` under the name `name` (a link to it: the
/// kernel names a process by what it ran), and keeps it running until the
/// returned child's stdin is closed: a writer that still runs, as an editor
/// or Claude Code does when memfs reads its name.
fn writer_named(bin: &Path, name: &str, script: &str) -> std::process::Child {
    let program = bin.join(name);
    if !program.exists() {
        std::os::unix::fs::symlink("/bin/sh", &program).unwrap();
    }
    std::process::Command::new(&program)
        .arg("-c")
        .arg(format!("{script} && echo written && read _"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `writer` to say it wrote.
fn wrote(writer: &mut std::process::Child) {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(writer.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "written\n");
}

#[test]
fn the_writer_is_named_where_the_kernel_tells_and_claude_codes_writes_are_the_agents() {
    if !rustix::process::geteuid().is_root() {
        common::skip(
            "the writer test",
            "fanotify, which names the writing process, needs root",
        );
        return;
    }
    let (tmp, dir, mem, mut s) = started(&[], &[], "/memories/a.md", "one\n");
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let a = mem.join("a.md");
    let b = mem.join("b.md");
    let mut person = writer_named(
        &bin,
        "sh",
        &format!("printf 'by hand\\n' >> '{}'", a.display()),
    );
    wrote(&mut person);
    // Claude Code saves as editors do: a temporary file renamed into place
    // (the inode it wrote is the one that lands).
    let mut claude = writer_named(
        &bin,
        "claude",
        &format!(
            "printf 'agent note\\n' > '{}.tmp' && mv '{}.tmp' '{}'",
            b.display(),
            b.display(),
            b.display()
        ),
    );
    wrote(&mut claude);
    let listing = view(&mut s, "/memories");
    assert!(listing.contains("/memories/b.md"), "{listing}");
    // A removal is no write: the kernel names nobody.
    fs::remove_file(&a).unwrap();
    assert!(!view(&mut s, "/memories").contains("a.md"));
    for w in [&mut person, &mut claude] {
        drop(w.stdin.take());
        w.wait().unwrap();
    }
    assert!(s.finish().success());
    let shorts: Vec<(String, String, String)> = log_rows(&dir)
        .iter()
        .rev()
        .map(|r| {
            (
                r["actor"]["kind"].as_str().unwrap_or("").to_string(),
                r["actor"]["process"].as_str().unwrap_or("").to_string()
                    + "/"
                    + r["actor"]["door"].as_str().unwrap_or(""),
                r["op"].as_str().unwrap().to_string() + " " + r["path"].as_str().unwrap(),
            )
        })
        .collect();
    let row = |kind: &str, who: &str, what: &str| {
        shorts
            .iter()
            .any(|(k, w, op)| k == kind && w == who && op == what)
    };
    assert!(
        row("person", "sh/files", "write /memories/a.md"),
        "{shorts:?}"
    );
    assert!(
        row("agent", "claude/files", "create /memories/b.md"),
        "{shorts:?}"
    );
    assert!(
        row("person", "/files", "delete /memories/a.md"),
        "{shorts:?}"
    );
    // The table says who: `memfs log` as a person reads it.
    let table = memfs().arg("--data").arg(&dir).arg("log").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("agent:files(claude)"), "{table}");
    assert!(table.contains("person:files(sh)"), "{table}");
}

#[test]
fn through_the_mount_the_plain_files_writes_are_seen_at_once() {
    if common::skip_without_fuse("the files door beside a mount") {
        return;
    }
    let m = common::Mounted::start(&[]);
    let mem = m.data.path().join("memories");
    {
        let mut f = fs::File::create(m.at("agent.md")).unwrap();
        f.write_all(b"through the mount\n").unwrap();
        f.sync_all().unwrap();
    }
    checkpoint(m.data.path());
    append(&mem.join("agent.md"), "and the plain file\n");
    fs::write(mem.join("plain.md"), "beside\n").unwrap();
    // A person reading the mount sees both at once.
    assert_eq!(
        fs::read_to_string(m.at("agent.md")).unwrap(),
        "through the mount\nand the plain file\n"
    );
    assert_eq!(fs::read_to_string(m.at("plain.md")).unwrap(), "beside\n");
    // The tool through the owner's socket too.
    assert!(m.view("/memories").contains("/memories/plain.md"));
    // A name the kernel has cached is answered without asking memfs: the
    // removal reaches it when the next 100 ms look takes it in.
    fs::remove_file(mem.join("plain.md")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while m.at("plain.md").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the removal never reached the mount"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let rows = rows(m.data.path());
    assert!(by_files(&rows, "write", "/memories/agent.md"), "{rows:?}");
    assert!(by_files(&rows, "delete", "/memories/plain.md"), "{rows:?}");
}

/// A symlink memfs wrote and then moved is not taken back from the plain
/// files by a look that falls between the checkpointer's two steps (the
/// link written, the move not yet): every look (a lookup through the mount
/// runs one) finds the link memfs left, and passes it. Found by the mount's
/// model test as a stray `b -> c` (ELOOP where a local file system said
/// ENOENT); before the fix some cases in 300 kept the stray link.
#[test]
fn a_link_memfs_wrote_and_moved_is_not_taken_back_from_the_plain_files() {
    if common::skip_without_fuse("links moved through the mount") {
        return;
    }
    let m = common::Mounted::start(&[]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let cases = 300;
    // Lookups that miss: each runs a look at the plain files first.
    let noise = m.at("noise");
    fs::create_dir(&noise).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let _ = fs::symlink_metadata(noise.join(format!("n{i}")));
            }
        });
        for i in 0..cases {
            let case = m.at(&format!("case-{i}"));
            fs::create_dir(&case).unwrap();
            std::os::unix::fs::symlink("c", case.join("b")).unwrap();
            fs::rename(case.join("b"), case.join("c")).unwrap();
        }
        checkpoint(m.data.path());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Looks still queued are done by the time a checkpoint is asked twice.
    std::thread::sleep(std::time::Duration::from_millis(300));
    checkpoint(m.data.path());
    let stray: Vec<usize> = (0..cases)
        .filter(|i| m.at(&format!("case-{i}/b")).symlink_metadata().is_ok())
        .collect();
    assert!(stray.is_empty(), "links memfs moved came back: {stray:?}");
    // A person's removal of a link memfs left is taken in (the map knows
    // the link now; links have no versions, so the memory is what shows
    // it).
    let mem = m.data.path().join("memories");
    fs::remove_file(mem.join("case-0/c")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while m.at("case-0/c").symlink_metadata().is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the removal of the link never reached the memory"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(m.at("case-1/c").symlink_metadata().is_ok());
}

/// One step of the property test: a program beside memfs, or the agent.
#[derive(Debug, Clone)]
enum Step {
    /// Written in place, in one `write`.
    Write(usize),
    /// Written in three `write` calls before the close.
    Pieces(usize),
    /// Written to a temporary file renamed into place (an editor's save).
    Save(usize),
    /// Truncated to nothing.
    Truncate(usize),
    /// Removed.
    Remove(usize),
    /// The agent's `create` (overwriting), `view` and `delete`.
    Create(usize),
    View(usize),
    Delete(usize),
}

const PATHS: [&str; 3] = ["a.md", "b.md", "d/c.md"];

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let p = 0..PATHS.len();
    prop_oneof![
        p.clone().prop_map(Step::Write),
        p.clone().prop_map(Step::Pieces),
        p.clone().prop_map(Step::Save),
        p.clone().prop_map(Step::Truncate),
        p.clone().prop_map(Step::Remove),
        p.clone().prop_map(Step::Create),
        p.clone().prop_map(Step::View),
        p.prop_map(Step::Delete),
    ]
}

/// What a path may hold: one content (or none), or, after a program
/// removed a file it had itself just written over an agent's change the
/// plain files did not show yet, either that change or nothing (whether
/// memfs took the program's file in before it went depends on when it
/// looked: both keep every version a call came after).
#[derive(Clone, Debug, Default)]
struct May {
    one: Option<String>,
    or: Option<Option<String>>,
}

impl May {
    fn is(text: Option<String>) -> May {
        May {
            one: text,
            or: None,
        }
    }

    fn allows(&self, got: &Option<String>) -> bool {
        self.one == *got || self.or.as_ref() == Some(got)
    }
}

/// The content a `view` answer shows (`None`: an error), as far as the
/// model's contents go (a first line `vN`, or nothing).
fn shown(v: &Value) -> Result<Option<String>, ()> {
    if v["is_error"] == true {
        return Ok(None);
    }
    let text = content(v);
    match text.lines().nth(1) {
        Some(line) => match line.split_once('\t') {
            Some((_, first)) if first.starts_with('v') => {
                Ok(Some(format!("{first}\nsecond line\n")))
            }
            _ => Err(()),
        },
        None => Ok(Some(String::new())),
    }
}

/// What the steps so far allow the memory to hold, and what it must keep.
#[derive(Default)]
struct Expect {
    now: [May; 3],
    /// Each path as the last call left it.
    at_call: [Option<String>; 3],
    /// What a path held, by an outside write, when a later call began:
    /// each must be a version (a write over it before any call need not).
    seen_before_a_call: Vec<String>,
    pending: std::collections::BTreeMap<usize, String>,
    /// Paths an outside program wrote since the last call.
    wrote: std::collections::BTreeSet<usize>,
}

impl Expect {
    /// A program's step beside memfs, on the plain file `at`.
    fn outside(&mut self, step: &Step, at: &Path, text: &str) {
        let i = match *step {
            Step::Write(i)
            | Step::Pieces(i)
            | Step::Save(i)
            | Step::Truncate(i)
            | Step::Remove(i) => i,
            _ => return,
        };
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        match step {
            Step::Write(_) => fs::write(at, text).unwrap(),
            Step::Pieces(_) => {
                let mut f = fs::File::create(at).unwrap();
                for piece in [&text[..2], &text[2..5], &text[5..]] {
                    f.write_all(piece.as_bytes()).unwrap();
                }
            }
            Step::Save(_) => {
                let tmp = at.with_extension("tmp-save");
                fs::write(&tmp, text).unwrap();
                fs::rename(&tmp, at).unwrap();
            }
            // (On a file the plain files show: an agent's new file may not
            // have reached them yet. An empty file truncated is a write
            // too: memfs never writes a plain file in place.)
            Step::Truncate(_) if at.exists() => {
                fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(at)
                    .unwrap();
                self.now[i] = May::is(Some(String::new()));
                self.pending.remove(&i);
                self.wrote.insert(i);
                return;
            }
            Step::Remove(_) if at.exists() => {
                fs::remove_file(at).unwrap();
                self.pending.remove(&i);
                let over = self.wrote.contains(&i) && self.at_call[i].is_some();
                self.now[i] = May {
                    one: None,
                    or: over.then(|| self.at_call[i].clone()),
                };
                return;
            }
            _ => return,
        }
        self.now[i] = May::is(Some(text.to_string()));
        self.pending.insert(i, text.to_string());
        self.wrote.insert(i);
    }

    /// The agent's call for `step` (at path `i`), checked.
    fn call(&mut self, s: &mut Server, step: &Step, i: usize, text: &str) -> Result<(), String> {
        self.seen_before_a_call
            .extend(std::mem::take(&mut self.pending).into_values());
        self.wrote.clear();
        let path = format!("/memories/{}", PATHS[i]);
        let input = match step {
            Step::Create(_) => {
                serde_json::json!({"command": "create", "path": path, "file_text": text})
            }
            Step::View(_) => serde_json::json!({"command": "view", "path": path}),
            _ => serde_json::json!({"command": "delete", "path": path}),
        };
        let v = s.call(&input.to_string());
        let done = v["is_error"] == false;
        let may = &self.now[i];
        let ok = match step {
            Step::Create(_) => done,
            Step::View(_) => shown(&v).is_ok_and(|got| may.allows(&got)),
            _ => match done {
                true => may.one.is_some() || may.or.as_ref().is_some_and(|o| o.is_some()),
                false => may.allows(&None),
            },
        };
        if !ok {
            return Err(format!("{step:?}: expected {may:?}, got {v}"));
        }
        self.now[i] = match step {
            Step::Create(_) => May::is(Some(text.to_string())),
            Step::View(_) => May::is(shown(&v).expect("checked")),
            _ => May::is(None),
        };
        for (j, may) in self.now.iter().enumerate() {
            if may.or.is_none() {
                self.at_call[j] = may.one.clone();
            }
        }
        Ok(())
    }
}

/// Runs `steps` beside a running memfs, checking each agent call against
/// what the steps before it left; then a clean stop and a restart: the
/// plain files equal the memory, nothing is `found`, and what a path held
/// (by an outside write) when a later call began is a version.
fn interleave(steps: &[Step]) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mem = dir.join("memories");
    let mut s = Server::start(&dir, &["--create-overwrites"]);
    let _ = s.call(r#"{"command":"view","path":"/memories"}"#);
    let mut expect = Expect::default();
    for (n, step) in steps.iter().enumerate() {
        let text = format!("v{n}\nsecond line\n");
        match *step {
            Step::Create(i) | Step::View(i) | Step::Delete(i) => expect
                .call(&mut s, step, i, &text)
                .map_err(|e| format!("step {n} {e}"))?,
            Step::Write(i)
            | Step::Pieces(i)
            | Step::Save(i)
            | Step::Truncate(i)
            | Step::Remove(i) => expect.outside(step, &mem.join(PATHS[i]), &text),
        }
    }
    let (now, seen_before_a_call) = (expect.now, expect.seen_before_a_call);
    if !s.finish().success() {
        return Err("memfs did not stop cleanly".into());
    }
    // A restart: the plain files are what the memory holds, and allowed.
    let mut s = Server::start(&dir, &[]);
    for (i, may) in now.iter().enumerate() {
        let on_disk = fs::read_to_string(mem.join(PATHS[i])).ok();
        let v = s.call(
            &serde_json::json!({"command": "view", "path": format!("/memories/{}", PATHS[i])})
                .to_string(),
        );
        let memory = shown(&v).map_err(|()| format!("{}: {v}", PATHS[i]))?;
        if on_disk != memory || !may.allows(&memory) {
            return Err(format!(
                "{}: on disk {on_disk:?}, memory {memory:?}, expected {may:?}",
                PATHS[i]
            ));
        }
    }
    s.finish();
    let rows = log_rows(&dir);
    if rows.iter().any(|r| r["op"] == "found") {
        return Err("the restart found changes the running memfs had not taken in".into());
    }
    let kept: std::collections::HashSet<&str> =
        rows.iter().filter_map(|r| r["sha256"].as_str()).collect();
    for text in seen_before_a_call.iter().filter(|t| !t.is_empty()) {
        let sha = memfs::digest::Sha::of(text.as_bytes()).hex();
        if !kept.contains(sha.as_str()) {
            return Err(format!(
                "{text:?}, written before a later call, is no version"
            ));
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: common::cases("MEMFS_FILES_CASES", 24),
        ..proptest::prelude::ProptestConfig::default()
    })]
    #[test]
    fn outside_writes_and_tool_calls_interleaved_lose_nothing(steps in proptest::collection::vec(step(), 1..24)) {
        interleave(&steps).map_err(proptest::test_runner::TestCaseError::fail)?;
    }
}
