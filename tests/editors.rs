//! Real editors and tools saving into a real mount, each followed by a tool
//! `view` that must show exactly the new content. A missing editor is a
//! skipped test, said loudly (CI installs them all).

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{memfs, skip, skip_without_fuse, Mounted};

const ORIGINAL: &str = "# Notes\nThe customer prefers email.\nSecond line.\n";
const EDITED: &str = "# Notes\nThe customer prefers phone.\nSecond line.\n";

/// A mount with notes.md created by the agent, or None (skipped) without FUSE
/// or without the program.
fn setup(test: &str, program: &str) -> Option<Mounted> {
    if skip_without_fuse(test) {
        return None;
    }
    if Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        skip(
            test,
            &format!("{program} is not installed (CI installs it)"),
        );
        return None;
    }
    let m = Mounted::start(&[]);
    let made = m.tool(&format!(
        r#"{{"command":"create","path":"/memories/notes.md","file_text":{}}}"#,
        serde_json::to_string(ORIGINAL).unwrap()
    ));
    assert_eq!(made["is_error"], false, "{made}");
    Some(m)
}

/// The tool's view of a file must be exactly `text`, numbered.
#[track_caller]
fn assert_view(m: &Mounted, path: &str, text: &str) {
    let numbered: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", i + 1))
        .collect();
    let want = format!(
        "Here's the content of {path} with line numbers:\n{}",
        numbered.join("\n")
    );
    assert_eq!(m.view(path), want);
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run the program");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn vim_ex_mode_with_backups() {
    let Some(m) = setup("vim_ex_mode_with_backups", "vim") else {
        return;
    };
    run(Command::new("vim")
        .args(["-Es", "-u", "NONE", "-i", "NONE", "-N"])
        // backupskip is emptied: by default vim makes no backups under /tmp.
        .args([
            "-c",
            "set backup writebackup backupskip= backupdir=. directory=. swapfile fsync",
        ])
        .args(["-c", "%s/email/phone/", "-c", "wq"])
        .arg(m.at("notes.md")));
    assert_view(&m, "/memories/notes.md", EDITED);
    assert_eq!(
        fs::read_to_string(m.at("notes.md~")).unwrap(),
        ORIGINAL,
        "vim's backup"
    );
    // The backup is in the mount but not in the agent's listing.
    assert!(!m.view("/memories").contains("notes.md~"));
}

#[test]
fn emacs_batch_with_backups() {
    let Some(m) = setup("emacs_batch_with_backups", "emacs") else {
        return;
    };
    let file = m.at("notes.md");
    let lisp = format!(
        // The predicate is widened: by default emacs makes no backups under /tmp.
        r#"(progn (setq make-backup-files t backup-by-copying nil create-lockfiles t backup-enable-predicate (lambda (_) t))
                  (find-file "{}") (goto-char (point-min)) (search-forward "email") (replace-match "phone")
                  (save-buffer) (kill-emacs 0))"#,
        file.display()
    );
    run(Command::new("emacs").args(["--batch", "-Q", "--eval", &lisp]));
    assert_view(&m, "/memories/notes.md", EDITED);
    assert_eq!(
        fs::read_to_string(m.at("notes.md~")).unwrap(),
        ORIGINAL,
        "emacs' backup (by rename)"
    );
}

#[test]
fn nano_through_tmux() {
    let Some(m) = setup("nano_through_tmux", "nano") else {
        return;
    };
    if Command::new("tmux").arg("-V").output().is_err() {
        skip(
            "nano_through_tmux",
            "tmux is not installed (CI installs it)",
        );
        return;
    }
    let session = format!("memfs-nano-{}", std::process::id());
    let file = m.at("notes.md");
    run(Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "100", "-y", "30"])
        .arg(format!("nano --ignorercfiles {}", file.display())));
    let tmux = |args: &[&str]| run(Command::new("tmux").args(args));
    // Wait for nano to draw, type at the top, write out (^O, Enter), exit (^X).
    wait_for(|| capture(&session).contains("^X"), "nano to start");
    tmux(&["send-keys", "-t", &session, "Typed in nano. "]);
    tmux(&["send-keys", "-t", &session, "C-o"]);
    wait_for(
        || capture(&session).contains("File Name to Write"),
        "nano's write prompt",
    );
    tmux(&["send-keys", "-t", &session, "Enter"]);
    wait_for(|| capture(&session).contains("Wrote"), "nano to write");
    tmux(&["send-keys", "-t", &session, "C-x"]);
    wait_for(
        || {
            Command::new("tmux")
                .args(["has-session", "-t", &session])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        },
        "nano to exit",
    );
    assert_view(
        &m,
        "/memories/notes.md",
        &format!("Typed in nano. {ORIGINAL}"),
    );
}

fn capture(session: &str) -> String {
    Command::new("tmux")
        .args(["capture-pane", "-p", "-t", session])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sed_in_place() {
    let Some(m) = setup("sed_in_place", "sed") else {
        return;
    };
    run(Command::new("sed")
        .args(["-i", "s/email/phone/"])
        .arg(m.at("notes.md")));
    assert_view(&m, "/memories/notes.md", EDITED);
}

#[test]
fn atomic_save_by_rename() {
    let Some(m) = setup("atomic_save_by_rename", "true") else {
        return;
    };
    let tmp = m.at(".notes.md.tmp");
    let mut f = fs::File::create(&tmp).unwrap();
    f.write_all(EDITED.as_bytes()).unwrap();
    f.sync_all().unwrap();
    drop(f);
    fs::rename(&tmp, m.at("notes.md")).unwrap();
    assert_view(&m, "/memories/notes.md", EDITED);
    assert_eq!(fs::read_to_string(m.on_disk("notes.md")).unwrap(), EDITED);
}

#[test]
fn truncate_and_write_in_place() {
    let Some(m) = setup("truncate_and_write_in_place", "true") else {
        return;
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.at("notes.md"))
        .unwrap();
    f.write_all(EDITED.as_bytes()).unwrap();
    drop(f);
    assert_view(&m, "/memories/notes.md", EDITED);
}

#[test]
fn git_in_the_mount() {
    let Some(m) = setup("git_in_the_mount", "git") else {
        return;
    };
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(m.mnt.path())
            .args([
                "-c",
                "user.name=Person",
                "-c",
                "user.email=person@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    git(&["add", "notes.md"]);
    git(&["commit", "-q", "-m", "first"]);
    m.tool(r#"{"command":"str_replace","path":"/memories/notes.md","old_str":"email","new_str":"phone"}"#);
    assert_eq!(git(&["status", "--porcelain"]), " M notes.md\n");
    git(&["commit", "-q", "-am", "agent's edit"]);
    assert_eq!(git(&["log", "--format=%s"]), "agent's edit\nfirst\n");
    assert_eq!(git(&["status", "--porcelain"]), "");
    assert_eq!(git(&["show", "HEAD~1:notes.md"]), ORIGINAL);
    assert_view(&m, "/memories/notes.md", EDITED);
    let view = m.view("/memories");
    assert!(!view.contains(".git"), "hidden from the agent: {view}");
    // The repository is the person's tool state: not the memory's size...
    let size = view.lines().nth(1).unwrap_or_default();
    assert!(
        size.starts_with(&format!("{}\t", EDITED.len())),
        "the memory's size counts notes.md only: {view}"
    );
    // ...not in the log (unless asked), not in an export, not scanned.
    let data = m.data.path().to_str().unwrap();
    let memfs_out = |args: &[&str]| {
        let out = memfs().args(["--data", data]).args(args).output().unwrap();
        assert!(out.status.success(), "memfs {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let log = memfs_out(&["log"]);
    assert!(!log.contains(".git"), "{log}");
    assert_eq!(log.lines().count(), 2, "the create and the edit: {log}");
    assert!(memfs_out(&["log", "--all"]).contains("/memories/.git/"));
    let export = tempfile::tempdir().unwrap();
    let into = export.path().join("repo");
    memfs_out(&["export", "--git", into.to_str().unwrap()]);
    let files = Command::new("git")
        .arg("-C")
        .arg(&into)
        .args(["ls-files"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&files.stdout), "notes.md\n");
}

fn make_tree(root: &Path) {
    fs::create_dir_all(root.join("src/deep")).unwrap();
    fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("src/deep/data.txt"), "x".repeat(70_000)).unwrap();
    fs::write(root.join("README"), "readme\n").unwrap();
    std::os::unix::fs::symlink("src/main.rs", root.join("link")).unwrap();
    fs::set_permissions(
        root.join("README"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
}

#[test]
fn cp_a_and_tar_x_into_the_mount() {
    let Some(m) = setup("cp_a_and_tar_x_into_the_mount", "tar") else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    make_tree(&src.path().join("tree"));
    run(Command::new("cp")
        .arg("-a")
        .arg(src.path().join("tree"))
        .arg(m.at("copied")));
    run(Command::new("diff")
        .arg("-r")
        .arg(src.path().join("tree"))
        .arg(m.at("copied")));
    let archive = src.path().join("tree.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(src.path())
        .arg("-cf")
        .arg(&archive)
        .arg("tree"));
    fs::create_dir(m.at("untarred")).unwrap();
    run(Command::new("tar")
        .arg("-C")
        .arg(m.at("untarred"))
        .arg("-xpf")
        .arg(&archive));
    run(Command::new("diff")
        .arg("-r")
        .arg(src.path().join("tree"))
        .arg(m.at("untarred/tree")));
    assert_eq!(
        fs::read_link(m.at("untarred/tree/link")).unwrap(),
        Path::new("src/main.rs")
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(m.at("copied/README")).unwrap().mode() & 0o777,
        0o640
    );
    assert_view(&m, "/memories/untarred/tree/src/main.rs", "fn main() {}\n");
}
