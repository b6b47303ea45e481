//! Hostile inputs to `memfs import`, `memfs export` and `memfs search`,
//! each through the real command (issue 52): a repository whose config
//! names programs, an endpoint that redirects the key elsewhere, a git
//! history that would overwrite and delete the person's files, a sparse tar
//! entry of 2^62 bytes, API pages that never end, go round or repeat one
//! path, messages carrying terminal escapes or a password, and a search
//! over text made to make phrase matching slow.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// `memfs --data DIR ARGS` with `stdin`, killed after `most` (a hang is a
/// failure, never a wait): exit code, stdout, stderr.
fn bounded(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &[u8],
    most: Duration,
) -> (i32, String, String) {
    let mut child = memfs()
        .arg("--data")
        .arg(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    // (Read while it runs: a full pipe would stop it.)
    let drain = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let _ = from.read_to_end(&mut got);
            String::from_utf8_lossy(&got).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if began.elapsed() > most {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "memfs {args:?} still ran after {most:?}: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    feeder.join().unwrap();
    (
        status.code().unwrap_or(-1),
        out.join().unwrap(),
        err.join().unwrap(),
    )
}

const MINUTE: Duration = Duration::from_secs(60);

// ---- git -----------------------------------------------------------------

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ana")
        .env("GIT_AUTHOR_EMAIL", "ana@example.com")
        .env("GIT_COMMITTER_NAME", "Ana")
        .env("GIT_COMMITTER_EMAIL", "ana@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git hash-object` of `text` as a commit, made HEAD.
fn replace_head(repo: &Path, text: &str) {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "hash-object",
            "--literally",
            "-t",
            "commit",
            "-w",
            "--stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    git(repo, &["update-ref", "HEAD", &id]);
}

/// A repository of one signed-looking commit (a `gpgsig` header: `log`
/// then asks the configured program to check it) adding `a.md`, `b.md` and
/// `.gitattributes` (every file through the diff driver `x`).
fn signed_repo(at: &Path) {
    fs::create_dir_all(at).unwrap();
    git(at, &["init", "-q", "-b", "main"]);
    fs::write(at.join("a.md"), "alpha\n").unwrap();
    fs::write(at.join("b.md"), "beta\n").unwrap();
    fs::write(at.join(".gitattributes"), "* diff=x filter=x\n").unwrap();
    git(at, &["add", "-A"]);
    git(at, &["commit", "-q", "-m", "one"]);
    let commit = git(at, &["cat-file", "commit", "HEAD"]);
    let mut signed = String::new();
    for line in commit.lines() {
        signed.push_str(line);
        signed.push('\n');
        if line.starts_with("committer ") {
            signed.push_str(
                "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n",
            );
        }
    }
    replace_head(at, &signed);
}

#[test]
fn a_git_import_runs_no_program_a_repository_names_and_reads_it_the_same_whatever_its_config() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("ran");
    let program = work.path().join("program.sh");
    fs::write(
        &program,
        format!(
            "#!/bin/sh\necho \"$0 $*\" >> {}\nexit 1\n",
            marker.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    let p = program.to_str().unwrap();
    let hooks = work.path().join("hooks");
    fs::create_dir(&hooks).unwrap();
    for hook in [
        "post-checkout",
        "post-index-change",
        "reference-transaction",
        "pre-auto-gc",
    ] {
        fs::copy(&program, hooks.join(hook)).unwrap();
    }
    let included = work.path().join("included.cfg");
    fs::write(
        &included,
        format!("[gpg]\n\tprogram = {p}\n[log]\n\tshowSignature = true\n"),
    )
    .unwrap();
    // Each key that can run a program, or change what `log` prints.
    let cases: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "gpg.program",
            vec![
                ("log.showSignature".into(), "true".into()),
                ("gpg.program".into(), p.into()),
            ],
        ),
        (
            "gpg.openpgp.program",
            vec![
                ("log.showSignature".into(), "true".into()),
                ("gpg.openpgp.program".into(), p.into()),
            ],
        ),
        (
            "gpg.ssh.program",
            vec![
                ("log.showSignature".into(), "true".into()),
                ("gpg.format".into(), "ssh".into()),
                ("gpg.ssh.program".into(), p.into()),
                ("gpg.ssh.allowedSignersFile".into(), "/dev/null".into()),
            ],
        ),
        (
            "gpg.x509.program",
            vec![
                ("log.showSignature".into(), "true".into()),
                ("gpg.x509.program".into(), p.into()),
            ],
        ),
        (
            "include.path",
            vec![("include.path".into(), included.to_str().unwrap().into())],
        ),
        ("core.fsmonitor", vec![("core.fsmonitor".into(), p.into())]),
        (
            "core.pager",
            vec![
                ("core.pager".into(), p.into()),
                ("pager.log".into(), "true".into()),
                ("pager.cat-file".into(), "true".into()),
            ],
        ),
        ("diff.external", vec![("diff.external".into(), p.into())]),
        (
            "diff.x.textconv",
            vec![
                ("diff.x.textconv".into(), p.into()),
                ("diff.x.command".into(), p.into()),
            ],
        ),
        (
            "filter.x",
            vec![
                ("filter.x.smudge".into(), p.into()),
                ("filter.x.clean".into(), p.into()),
                ("filter.x.process".into(), p.into()),
            ],
        ),
        (
            "core.hooksPath",
            vec![("core.hooksPath".into(), hooks.to_str().unwrap().into())],
        ),
        (
            "core.sshCommand",
            vec![("core.sshCommand".into(), p.into())],
        ),
        (
            "core.alternateRefsCommand",
            vec![("core.alternateRefsCommand".into(), p.into())],
        ),
        (
            "credential.helper",
            vec![
                ("credential.helper".into(), p.into()),
                ("core.askPass".into(), p.into()),
            ],
        ),
        // What `log` prints.
        (
            "log.showRoot",
            vec![("log.showRoot".into(), "false".into())],
        ),
        (
            "i18n.logOutputEncoding",
            vec![("i18n.logOutputEncoding".into(), "UTF-16".into())],
        ),
        (
            "color.ui",
            vec![
                ("color.ui".into(), "always".into()),
                ("color.diff".into(), "always".into()),
            ],
        ),
        (
            "diff.relative",
            vec![("diff.relative".into(), "true".into())],
        ),
        ("core.abbrev", vec![("core.abbrev".into(), "7".into())]),
        ("log.decorate", vec![("log.decorate".into(), "full".into())]),
        (
            "diff.orderFile",
            vec![("diff.orderFile".into(), "/dev/zero".into())],
        ),
    ];
    for (name, settings) in cases {
        let repo = work.path().join(format!("repo-{name}"));
        signed_repo(&repo);
        for (key, value) in &settings {
            git(&repo, &["config", key, value]);
        }
        let dir = work.path().join(format!("d-{name}"));
        let (code, out, err) = bounded(
            &dir,
            &["import", "--json", "--git", repo.to_str().unwrap()],
            &[],
            b"",
            MINUTE,
        );
        assert_eq!(code, 0, "{name}: {out} {err}");
        assert!(
            !marker.exists(),
            "{name}: the repository's program ran: {}",
            fs::read_to_string(&marker).unwrap_or_default()
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["created"], 3, "{name}: {out}");
        let (_, a) = exec(&dir, r#"{"command":"view","path":"/memories/a.md"}"#);
        assert!(content(&a).contains("alpha"), "{name}: {a}");
        let authors: Vec<String> = log_rows(&dir)
            .iter()
            .map(|r| r["actor"]["author"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(
            authors.iter().all(|a| a == "Ana <ana@example.com>"),
            "{name}: {authors:?}"
        );
    }
}

#[test]
fn a_partial_clone_fetches_nothing_through_a_transport_its_config_names() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("fetched");
    let repo = work.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("a.md"), "alpha\n").unwrap();
    commit(&repo, "one");
    // The blob goes; a lazy fetch from `origin` would run the ext:: command.
    let blob = git(&repo, &["rev-parse", "HEAD:a.md"]);
    fs::remove_file(repo.join(".git/objects").join(&blob[..2]).join(&blob[2..])).unwrap();
    let command = format!("ext::sh -c touch% {}", marker.display());
    for (k, v) in [
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", command.as_str()),
        ("remote.origin.promisor", "true"),
        ("protocol.ext.allow", "always"),
        ("protocol.allow", "always"),
    ] {
        git(&repo, &["config", k, v]);
    }
    let dir = work.path().join("d");
    let _ = bounded(
        &dir,
        &["import", "--git", repo.to_str().unwrap()],
        &[],
        b"",
        MINUTE,
    );
    assert!(!marker.exists(), "the repository's transport ran");
}

#[test]
fn a_commit_whose_author_git_cannot_read_is_recorded_as_unknown_at_the_committers_time() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("a.md"), "alpha\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "commit",
            "-q",
            "-m",
            "one",
            "--date",
            "2020-01-02T03:04:05Z",
        ],
    );
    let commit = git(&repo, &["cat-file", "commit", "HEAD"]);
    let broken: String = commit
        .lines()
        .map(|l| match l.starts_with("author ") {
            true => "author a line git cannot read\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    replace_head(&repo, &broken);
    let dir = work.path().join("d");
    let (code, out, err) = run(&dir, &["import", "--json", "--git", repo.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    let rows = log_rows(&dir);
    let actor = &rows[0]["actor"];
    assert_eq!(actor["author"], "unknown", "{actor}");
    let at = actor["authored"].as_str().unwrap_or("");
    assert!(at.starts_with("20") && !at.contains('%'), "{actor}");
}

/// One commit by Ana at `date`.
fn commit(repo: &Path, message: &str) {
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "--allow-empty", "-m", message]);
}

fn view(dir: &Path, path: &str) -> String {
    let (_, v) = exec(dir, &json!({"command": "view", "path": path}).to_string());
    content(&v).to_string()
}

#[test]
fn a_git_import_leaves_the_persons_files_as_they_are_and_deletes_only_what_it_brought() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("notes.md"), "from the repository\n").unwrap();
    fs::write(repo.join("other.md"), "one\n").unwrap();
    commit(&repo, "add");
    fs::remove_file(repo.join("notes.md")).unwrap();
    fs::write(repo.join("other.md"), "one\ntwo\n").unwrap();
    commit(&repo, "remove notes, change other");
    for flags in [vec![], vec!["--no-history"]] {
        let dir = work.path().join(format!("d{}", flags.len()));
        let mut create = vec!["exec"];
        create.extend(&flags);
        create.push(
            r#"{"command":"create","path":"/memories/notes.md","file_text":"the person's own\n"}"#,
        );
        assert_eq!(run(&dir, &create).0, 0);
        let mut args = flags.clone();
        args.extend(["import", "--json", "--git", repo.to_str().unwrap()]);
        let (code, out, err) = run(&dir, &args);
        assert_eq!(code, 0, "{out} {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (
                v["created"].as_u64(),
                v["updated"].as_u64(),
                v["deleted"].as_u64()
            ),
            (Some(1), Some(1), Some(0)),
            "{out}"
        );
        assert!(
            view(&dir, "/memories/notes.md").contains("the person's own"),
            "{flags:?}"
        );
        let listed: Vec<&Value> = v["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["name"] == "/memories/notes.md")
            .collect();
        assert_eq!(
            listed.len(),
            2,
            "the add and the delete are both listed: {out}"
        );
        // A later commit deletes the file the import brought: it goes.
        if flags.is_empty() {
            // But not while a person's edit is on it: a commit changing a
            // file the person changed since is left out, and listed.
            let edit = r#"{"command":"str_replace","path":"/memories/other.md","old_str":"two","new_str":"mine"}"#;
            assert_eq!(run(&dir, &["exec", edit]).0, 0);
            fs::write(repo.join("other.md"), "one\ntwo\nthree\n").unwrap();
            commit(&repo, "change other");
            let (code, out, err) =
                run(&dir, &["import", "--json", "--git", repo.to_str().unwrap()]);
            assert_eq!(code, 0, "{out} {err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["updated"], 0, "{out}");
            assert!(view(&dir, "/memories/other.md").contains("mine"));
            // The person puts it back as the import left it: the history
            // goes on from there.
            let back = r#"{"command":"str_replace","path":"/memories/other.md","old_str":"mine","new_str":"two"}"#;
            assert_eq!(run(&dir, &["exec", back]).0, 0);
            fs::remove_file(repo.join("other.md")).unwrap();
            commit(&repo, "remove other");
            let (code, out, err) =
                run(&dir, &["import", "--json", "--git", repo.to_str().unwrap()]);
            assert_eq!(code, 0, "{out} {err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["deleted"], 1, "{out}");
            assert!(view(&dir, "/memories/other.md").contains("does not exist"));
            assert!(view(&dir, "/memories/notes.md").contains("the person's own"));
            git(&repo, &["reset", "-q", "--hard", "HEAD~2"]);
        }
    }
    // --overwrite: the history replaces and deletes it.
    let dir = work.path().join("over");
    run(
        &dir,
        &[
            "exec",
            r#"{"command":"create","path":"/memories/notes.md","file_text":"the person's own\n"}"#,
        ],
    );
    let (code, out, err) = run(
        &dir,
        &[
            "import",
            "--json",
            "--overwrite",
            "--git",
            repo.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out} {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["updated"].as_u64(), v["deleted"].as_u64()),
        (Some(2), Some(1)),
        "{out}"
    );
}

// ---- tar and zip ------------------------------------------------------------

/// A tar of one GNU sparse entry whose file is `size` bytes of holes.
fn sparse_tar(name: &str, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_path(name).unwrap();
    h.set_mode(0o644);
    h.set_size(0);
    h.set_entry_type(tar::EntryType::GNUSparse);
    {
        let gnu = h.as_gnu_mut().unwrap();
        gnu.set_real_size(size);
        gnu.sparse[0].set_offset(size);
        gnu.sparse[0].set_length(0);
    }
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

#[test]
fn a_sparse_tar_entry_of_2_62_bytes_is_refused_before_it_is_read() {
    let work = tempfile::tempdir().unwrap();
    let tar = sparse_tar("huge.md", 1 << 62);
    assert_eq!(tar.len(), 1536);
    let file = work.path().join("x.tar");
    fs::write(&file, &tar).unwrap();
    let f = file.to_str().unwrap();
    let cases: [(&str, Vec<&str>, &[u8]); 3] = [
        ("a file", vec!["import", "--json", f], b""),
        ("stdin", vec!["import", "--json", "-"], &tar),
        ("a dry run", vec!["import", "--json", "--dry-run", f], b""),
    ];
    for (what, args, stdin) in cases {
        let dir = work.path().join(what.replace(' ', "-"));
        let (code, out, err) = bounded(&dir, &args, &[], stdin, MINUTE);
        assert_eq!(code, 0, "{what}: {out} {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let left = v["left_out"].to_string();
        assert!(
            left.contains("huge.md") && left.contains("too big"),
            "{what}: {out}"
        );
    }
    // A small sparse entry is a file like any other (here its holes make
    // it not text).
    let dir = work.path().join("small");
    fs::write(&file, sparse_tar("small.md", 100)).unwrap();
    let (code, out, _) = bounded(&dir, &["import", "--json", f], &[], b"", MINUTE);
    assert_eq!(code, 0);
    assert!(out.contains("not text"), "{out}");
}

#[test]
fn a_zip_naming_one_path_twice_says_the_last_one_won_and_a_tar_name_with_escapes_prints_none() {
    let work = tempfile::tempdir().unwrap();
    let zip_path = work.path().join("d.zip");
    {
        let mut z = zip::ZipWriter::new(fs::File::create(&zip_path).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("a.md", o).unwrap();
        z.write_all(b"first\n").unwrap();
        // (The writer refuses a second entry of one name: its central
        // directory is patched below.)
        z.start_file("b.md", o).unwrap();
        z.write_all(b"second\n").unwrap();
        z.finish().unwrap();
    }
    let mut bytes = fs::read(&zip_path).unwrap();
    // Both the local header and the central directory name b.md a.md.
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(4).position(|w| w == b"b.md") {
        bytes[at + i] = b'a';
        at += i + 4;
    }
    fs::write(&zip_path, &bytes).unwrap();
    let dir = work.path().join("d");
    let (code, out, err) = run(&dir, &["import", "--json", zip_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("more than one entry of this name"), "{out}");
    assert!(view(&dir, "/memories/a.md").contains("second"));
    // A zip of more entries than the memory takes is refused before the
    // zip reader holds its directory.
    let many = work.path().join("many.zip");
    {
        let mut z = zip::ZipWriter::new(fs::File::create(&many).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for i in 0..1_011 {
            z.start_file(format!("{i}.md"), o).unwrap();
        }
        z.finish().unwrap();
    }
    let (code, _, err) = run(
        &work.path().join("m"),
        &["--max-entries", "10", "import", many.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the zip lists 1011 entries, more than memfs reads (1010"),
        "{err}"
    );
    // Not a tar: the error quotes no escape raw.
    let bad = work.path().join("bad.tar");
    let mut h = tar::Header::new_gnu();
    h.set_path("x\u{1b}[31mred.md").unwrap();
    h.set_size(5);
    h.set_cksum();
    let mut t = h.as_bytes().to_vec();
    t[148] = b'9'; // a checksum that does not match
    fs::write(&bad, &t).unwrap();
    let (_, out, err) = run(&work.path().join("e"), &["import", bad.to_str().unwrap()]);
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}'),
        "{out} {err}"
    );
}

#[test]
fn a_zip_whose_last_end_record_lies_is_not_read() {
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("z.zip");
    {
        let mut z = zip::ZipWriter::new(fs::File::create(&path).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for i in 0..20 {
            z.start_file(format!("{i}.md"), o).unwrap();
            z.write_all(b"x\n").unwrap();
        }
        z.finish().unwrap();
    }
    // A second end record after the real one: one entry, its directory past
    // the end of the file (the zip reader falls back to the real one).
    let mut bytes = fs::read(&path).unwrap();
    let len = bytes.len() as u32;
    let mut fake = vec![0x50, 0x4b, 5, 6, 0, 0, 0, 0, 1, 0, 1, 0];
    fake.extend_from_slice(&46u32.to_le_bytes());
    fake.extend_from_slice(&(len + 1000).to_le_bytes());
    fake.extend_from_slice(&[0, 0]);
    bytes.extend_from_slice(&fake);
    fs::write(&path, &bytes).unwrap();
    let (code, out, err) = run(&work.path().join("d"), &["import", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out} {err}");
    assert!(err.contains("memfs cannot find or count"), "{err}");
}

/// One raw tar header block.
fn raw_header(name: &[u8], kind: u8, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::new(kind));
    h.set_size(size);
    h.set_mode(0o644);
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_cksum();
    h.as_bytes().to_vec()
}

#[test]
fn a_tar_entry_declaring_gigabytes_it_does_not_hold_buys_no_room_for_headers() {
    let work = tempfile::tempdir().unwrap();
    // A PAX record says the next entry holds nothing, its header says 8
    // GiB; then a GNU long name of 2 MiB (held whole by the tar reader).
    let record = b"10 size=0\n";
    let mut t = raw_header(b"pax", b'x', record.len() as u64);
    t.extend_from_slice(record);
    t.resize(t.len().div_ceil(512) * 512, 0);
    t.extend(raw_header(b"big.md", b'0', 8 << 30));
    let long = vec![b'a'; 2 << 20];
    t.extend(raw_header(b"././@LongLink", b'L', long.len() as u64));
    t.extend_from_slice(&long);
    t.extend(raw_header(b"x", b'0', 0));
    t.extend_from_slice(&[0u8; 1024]);
    let path = work.path().join("t.tar");
    fs::write(&path, &t).unwrap();
    let (code, out, err) = bounded(
        &work.path().join("d"),
        &["import", "--json", path.to_str().unwrap()],
        &[],
        b"",
        MINUTE,
    );
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("extended headers are over"), "{out}");
}

// ---- the memory stores API -------------------------------------------------

/// What a fake endpoint answers: status, extra headers, body.
type Answer = (u16, Vec<(String, String)>, String);

/// A loopback HTTP server answering each request with `answer(path and
/// query)`; every request's head is kept.
struct Endpoint {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

fn endpoint(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (kept, answer) = (kept.clone(), answer.clone());
            std::thread::spawn(move || serve_one(conn, &kept, &*answer));
        }
    });
    Endpoint { url, heads }
}

fn serve_one(conn: TcpStream, kept: &Mutex<Vec<String>>, answer: &dyn Fn(&str) -> Answer) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    kept.lock().unwrap().push(head.clone());
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (status, headers, body) = answer(&target);
    let mut out = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    let mut conn = conn;
    let _ = conn.write_all(out.as_bytes());
}

const KEY: &str = "sk-test-the-secret-key-0123456789";

fn api_run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    bounded(dir, args, &[("MEMFS_TEST_KEY", KEY)], b"", MINUTE)
}

/// `memfs import [FLAGS] URL --store s` with the test's key.
fn api_import(dir: &Path, flags: &[&str], url: &str) -> (i32, String, String) {
    let mut args = vec!["import"];
    args.extend(flags);
    args.extend([url, "--store", "s", "--key-env", "MEMFS_TEST_KEY"]);
    api_run(dir, &args)
}

fn ok(body: Value) -> Answer {
    (200, vec![], body.to_string())
}

#[test]
fn the_key_never_follows_a_redirect_to_another_host_on_import_or_export() {
    let work = tempfile::tempdir().unwrap();
    let catcher = endpoint(|_| ok(json!({"id": "s", "data": [], "next_page": null})));
    let to = catcher.url.clone();
    let redirecting = endpoint(move |target| {
        (
            302,
            vec![("location".into(), format!("{to}{target}"))],
            String::new(),
        )
    });
    // Also one that redirects only the pages, after the store was found.
    let to = catcher.url.clone();
    let later = endpoint(move |target| match target.contains("/memories") {
        true => (
            307,
            vec![("location".into(), format!("{to}{target}"))],
            String::new(),
        ),
        false => ok(json!({"id": "s"})),
    });
    let src = work.path().join("src");
    run(
        &src,
        &[
            "exec",
            r#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#,
        ],
    );
    for url in [&redirecting.url, &later.url] {
        let (code, _, err) = api_import(&work.path().join("in"), &[], url);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("follows no redirect"), "{err}");
        let (code, _, err) = api_run(
            &src,
            &[
                "export",
                "--to",
                url,
                "--store",
                "s",
                "--key-env",
                "MEMFS_TEST_KEY",
            ],
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("follows no redirect"), "{err}");
    }
    let seen = catcher.heads.lock().unwrap().clone();
    assert!(seen.is_empty(), "the other host was asked: {seen:?}");
    assert!(!redirecting.heads.lock().unwrap().is_empty());
}

fn page(paths: &[String], next: Option<String>) -> Answer {
    let data: Vec<Value> = paths
        .iter()
        .map(|p| json!({"type": "memory", "path": p, "content": format!("{p}\n")}))
        .collect();
    ok(json!({"data": data, "next_page": next}))
}

/// The value of `page=` in a request's target.
fn cursor(target: &str) -> Option<String> {
    target
        .split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("page="))
        .map(str::to_string)
}

#[test]
fn api_pages_that_never_end_go_round_or_repeat_one_path_are_stopped_with_a_clear_error() {
    let work = tempfile::tempdir().unwrap();
    // A new cursor each time, the same memory on every page.
    let endless = endpoint(|target| match target.contains("/memories") {
        false => ok(json!({"id": "s"})),
        true => {
            let n: u64 = cursor(target).and_then(|c| c.parse().ok()).unwrap_or(0);
            page(&["/a.md".into()], Some((n + 1).to_string()))
        }
    });
    // A -> B -> A, each with a memory of its own.
    let circle = endpoint(|target| match target.contains("/memories") {
        false => ok(json!({"id": "s"})),
        true => match cursor(target).as_deref() {
            None => page(&["/0.md".into()], Some("A".into())),
            Some("A") => page(&["/a.md".into()], Some("B".into())),
            _ => page(&["/b.md".into()], Some("A".into())),
        },
    });
    for (what, url, says) in [
        ("endless", &endless, "without end"),
        ("circle", &circle, "go round"),
    ] {
        let dir = work.path().join(what);
        let (code, _, err) = api_import(&dir, &[], &url.url);
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
        let asked = url.heads.lock().unwrap().len();
        assert!(asked < 30, "{what}: {asked} requests");
    }
    // One page naming one path 50,000 times: one file, the rest counted.
    let repeats: Vec<String> = vec!["/same.md".to_string(); 50_000];
    let one = endpoint(move |target| match target.contains("/memories") {
        false => ok(json!({"id": "s"})),
        true => page(&repeats, None),
    });
    let dir = work.path().join("repeat");
    let (code, out, err) = api_import(&dir, &["--json"], &one.url);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["created"], 1);
    assert_eq!(
        v["left_out"].as_array().unwrap().len(),
        1000,
        "the list is bounded"
    );
    assert_eq!(v["left_out_unlisted"], 50_000 - 1 - 1000);
    let (_, text, _) = api_import(&work.path().join("repeat2"), &[], &one.url);
    assert!(
        text.contains("and 48999 more left out"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
}

#[test]
fn what_an_endpoint_says_and_a_password_in_the_url_reach_no_terminal_raw() {
    let work = tempfile::tempdir().unwrap();
    let hostile = endpoint(|_| {
        (
            500,
            vec![],
            json!({"error": {"message": "\u{1b}]0;owned\u{7}\u{1b}[2Jcleared"}}).to_string(),
        )
    });
    let (code, _, err) = api_import(&work.path().join("a"), &[], &hostile.url);
    assert_eq!(code, 2);
    assert!(
        err.contains("answered 500") && err.contains("cleared"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    let (code, _, err) = api_import(
        &work.path().join("b"),
        &[],
        "http://someone:hunter2secret@127.0.0.1:9/",
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot reach") && err.contains("http://***@127.0.0.1:9"),
        "{err}"
    );
    assert!(
        !err.contains("hunter2secret") && !err.contains(KEY),
        "{err}"
    );
}

// ---- search --------------------------------------------------------------

/// A memory of `files` files of one line of `a a a ...` (1 MB each) and one
/// ordinary file.
fn pathological(dir: &Path, files: usize) -> PathBuf {
    let src = dir.with_extension("src");
    fs::create_dir_all(&src).unwrap();
    let line = "a ".repeat(500_000);
    for i in 0..files {
        fs::write(src.join(format!("f{i}.md")), &line).unwrap();
    }
    fs::write(src.join("cheap.md"), "zebra quokka\n").unwrap();
    let (code, _, err) = run(dir, &["import", "-q", src.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    src
}

#[test]
fn a_search_made_to_be_slow_is_bounded_and_says_when_it_was_cut() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("d");
    pathological(&dir, 12);
    // A phrase longer than a phrase may be, and too many words in all.
    let long = format!("\"{}\"", "a ".repeat(500));
    let (code, _, err) = bounded(&dir, &["search", &long], &[], b"", MINUTE);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most 8"), "{err}");
    let many = "\"a a a a a a a a\" ".repeat(7);
    let (code, _, err) = bounded(&dir, &["search", &many], &[], b"", MINUTE);
    assert_eq!(code, 2);
    assert!(err.contains("too many words"), "{err}");
    // The longest phrase allowed, under a deadline of 1 ms: cut, and said.
    let phrase = format!("\"{}\"", "a ".repeat(8).trim_end());
    let (code, out, err) = bounded(
        &dir,
        &["search", "--search-deadline-ms", "1", &phrase],
        &[],
        b"",
        MINUTE,
    );
    assert!(code == 0 || code == 1, "{out} {err}");
    assert!(
        format!("{out}{err}").contains("the search was cut after 1 ms"),
        "{out} {err}"
    );
    let (code, out, err) = bounded(
        &dir,
        &["search", "--json", "--search-deadline-ms", "1", &phrase],
        &[],
        b"",
        MINUTE,
    );
    assert!(code == 0 || code == 1, "{out} {err}");
    assert!(
        serde_json::from_str::<Value>(&out).unwrap()["results"].is_array(),
        "{out}"
    );
    assert!(err.contains("was cut"), "{err}");
    // Given the time, the same search finds every file.
    let (code, out, err) = bounded(
        &dir,
        &[
            "search",
            "--limit",
            "100",
            "--search-deadline-ms",
            "600000",
            &phrase,
        ],
        &[],
        b"",
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("/memories/f")).count(),
        12,
        "{out}"
    );
    assert!(!out.contains("was cut"));
}
