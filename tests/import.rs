//! `memfs import` and `memfs export --dir/--tar` through the CLI: a tree
//! with everything an import must leave out, hostile tar and zip archives
//! built entry by entry (names with `..`, absolute names, links, devices,
//! FIFOs, bombs), running it twice, a kill -9 midway, through a running
//! owner, and the round trip out and back in.

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// `memfs import --json SOURCE` with flags: the outcome.
fn import(dir: &Path, source: &Path, flags: &[&str]) -> Value {
    let mut args = vec!["import", "--json"];
    args.extend(flags);
    let source = source.to_str().unwrap();
    args.push(source);
    let (code, out, err) = run(dir, &args);
    assert_eq!(code, 0, "{out} {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn left_out(v: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Each file of the memory and its bytes, from `memfs export --dir`.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("x");
    let (code, _, err) = run(dir, &["export", "--dir", target.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut found = Vec::new();
    let root = target.join("memories");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    found.sort();
    found
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\nIDATx\x9cc\0\x01\0\0\x05\0\x01\r\n-\xb4\0\0\0\0IEND\xaeB`\x82";

#[test]
fn a_tree_is_imported_with_what_it_leaves_out_listed_and_a_second_run_adds_nothing() {
    let src = tempfile::tempdir().unwrap();
    let s = src.path();
    fs::create_dir_all(s.join("notes/deep")).unwrap();
    fs::create_dir_all(s.join(".git")).unwrap();
    fs::create_dir_all(s.join(".obsidian")).unwrap();
    fs::write(s.join("notes/a.md"), "alpha\n").unwrap();
    fs::write(s.join("notes/deep/b.md"), "beta ünïcode\n").unwrap();
    fs::write(s.join("picture.png"), PNG).unwrap();
    fs::write(s.join(".git/config"), "[core]\n").unwrap();
    fs::write(s.join(".obsidian/app.json"), "{}").unwrap();
    fs::write(s.join("blob.bin"), b"bin\0ary").unwrap();
    fs::write(s.join("latin1.txt"), b"caf\xe9\n").unwrap();
    fs::write(s.join("big.md"), "x".repeat(2 << 20)).unwrap();
    fs::write(
        s.join("keys.env"),
        "GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA3bC5\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", s.join("passwd.md")).unwrap();
    let fifo = std::ffi::CString::new(s.join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads the NUL-terminated path it is given, nothing else.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    fs::write(s.join("bad:name\u{7}.md"), "control character\n").unwrap();

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = import(d, s, &[]);
    assert_eq!(first["created"], 3, "{first}");
    let reasons = left_out(&first);
    let want = [
        (".git", "another tool's state"),
        (".obsidian", "another tool's state"),
        ("bad:name\\u{7}.md", "a name the tool cannot address"),
        (
            "big.md",
            "too big (2097152 bytes; --max-file-size is 1048576)",
        ),
        ("blob.bin", "not text"),
        ("keys.env", "looks like a credential (github_token, line 1"),
        ("latin1.txt", "not text"),
        ("passwd.md", "a symlink"),
        ("pipe", "a FIFO"),
    ];
    assert_eq!(reasons.len(), want.len(), "{reasons:?}");
    for ((name, reason), (want_name, says)) in reasons.iter().zip(want) {
        assert_eq!(name, want_name);
        assert!(reason.contains(says), "{name}: {reason}");
    }
    assert_eq!(
        files(d),
        [
            ("notes/a.md".to_string(), b"alpha\n".to_vec()),
            (
                "notes/deep/b.md".to_string(),
                "beta ünïcode\n".as_bytes().to_vec()
            ),
            ("picture.png".to_string(), PNG.to_vec()),
        ]
    );
    let made = log_rows(d).len();
    // Again: nothing is added.
    let again = import(d, s, &[]);
    assert_eq!(
        (again["created"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(log_rows(d).len(), made);
    // A changed file is left as the memory holds it, unless --overwrite.
    fs::write(s.join("notes/a.md"), "alpha, changed\n").unwrap();
    let kept = import(d, s, &[]);
    assert!(left_out(&kept)
        .iter()
        .any(|(n, r)| n == "/memories/notes/a.md" && r.contains("--overwrite")));
    let dry = import(d, s, &["--overwrite", "--dry-run"]);
    assert_eq!(dry["updated"], 1);
    assert_eq!(files(d)[0].1, b"alpha\n");
    let over = import(d, s, &["--overwrite"]);
    assert_eq!(over["updated"], 1);
    assert_eq!(files(d)[0].1, b"alpha, changed\n");
    // --to puts it below a path; the SDK's layout (SRC/memories) is found.
    let sdk = tempfile::tempdir().unwrap();
    fs::create_dir_all(sdk.path().join("memories/x")).unwrap();
    fs::write(sdk.path().join("memories/x/y.md"), "sdk\n").unwrap();
    fs::write(sdk.path().join("README.md"), "beside\n").unwrap();
    std::os::unix::fs::symlink("/etc", sdk.path().join("memories/x/etc")).unwrap();
    let from_sdk = import(d, sdk.path(), &["--to", "/memories/vault"]);
    assert_eq!(from_sdk["created"], 1, "{from_sdk}");
    let reasons = left_out(&from_sdk);
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0].0, "README.md");
    assert!(reasons[0].1.contains("beside memories/"), "{reasons:?}");
    assert_eq!(reasons[1], ("x/etc".to_string(), "a symlink".to_string()));
    assert!(files(d).iter().any(|(p, _)| p == "vault/x/y.md"));
    // The text form lists what was left out.
    let (code, out, _) = run(d, &["import", s.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("left out passwd.md: a symlink"), "{out}");
}

/// A tar entry with any name and type, written byte by byte (the `tar`
/// crate's own writer refuses names with `..`).
fn raw_entry(out: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, data: &[u8], link: &[u8]) {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn hostile_tar() -> Vec<u8> {
    use tar::EntryType as T;
    let mut t = Vec::new();
    raw_entry(&mut t, b"memories/", T::Directory, b"", b"");
    raw_entry(&mut t, b"memories/good.md", T::Regular, b"good\n", b"");
    raw_entry(&mut t, b"../escape.md", T::Regular, b"out\n", b"");
    raw_entry(&mut t, b"notes/../../escape2.md", T::Regular, b"out\n", b"");
    raw_entry(&mut t, b"/etc/abs.md", T::Regular, b"abs\n", b"");
    raw_entry(&mut t, b"link.md", T::Symlink, b"", b"/etc/passwd");
    raw_entry(&mut t, b"hard.md", T::Link, b"", b"memories/good.md");
    raw_entry(&mut t, b"tty", T::Char, b"", b"");
    raw_entry(&mut t, b"fifo", T::Fifo, b"", b"");
    raw_entry(&mut t, b"memories/good.md", T::Regular, b"second\n", b"");
    raw_entry(&mut t, b"bad\xffname.md", T::Regular, b"x\n", b"");
    // (Left unread by the check: the reader reads past it to the next.)
    raw_entry(&mut t, b"big.md", T::Regular, &[b'x'; 2 << 20], b"");
    raw_entry(&mut t, b"./ok/also.md", T::Regular, b"also\n", b"");
    t.extend_from_slice(&[0u8; 1024]);
    t
}

#[test]
fn a_hostile_tar_is_refused_entry_by_entry_and_nothing_lands_outside() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let plain = w.join("hostile.tar");
    fs::write(&plain, hostile_tar()).unwrap();
    let gz = w.join("hostile.tar.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&hostile_tar()).unwrap();
    fs::write(&gz, enc.finish().unwrap()).unwrap();
    for archive in [&plain, &gz] {
        let dir = w.join(format!(
            "d-{}",
            archive.file_name().unwrap().to_string_lossy()
        ));
        let v = import(&dir, archive, &[]);
        assert_eq!(v["created"], 2, "{v}");
        let reasons = left_out(&v);
        let says = |name: &str, what: &str| {
            assert!(
                reasons.iter().any(|(n, r)| n == name && r.contains(what)),
                "{name}: {what} in {reasons:?}"
            )
        };
        says("../escape.md", "leaves the source");
        says("notes/../../escape2.md", "leaves the source");
        says("/etc/abs.md", "an absolute path");
        says("link.md", "a symlink");
        says("hard.md", "a hard link");
        says("tty", "a device");
        says("fifo", "a FIFO");
        says("good.md", "a second entry of the same path");
        says("bad\u{fffd}name.md", "not UTF-8");
        says("big.md", "too big");
        assert_eq!(reasons.len(), 10, "{reasons:?}");
        assert_eq!(
            files(&dir),
            [
                ("good.md".to_string(), b"good\n".to_vec()),
                ("ok/also.md".to_string(), b"also\n".to_vec())
            ]
        );
    }
    // Nothing of it anywhere but in the memories.
    for name in ["escape.md", "escape2.md"] {
        assert!(!w.join(name).exists() && !w.parent().unwrap().join(name).exists());
    }
    // A tar through a pipe (`-`) is read the same.
    let dir = w.join("d-stdin");
    let mut child = memfs()
        .arg("--data")
        .arg(&dir)
        .args(["import", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&hostile_tar())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["created"], 2, "{v}");
}

/// A GNU long name is read whole into memory by the tar reader: one of a
/// sane length is taken, one of 16 MiB (a few KiB gzipped) ends the read
/// there and is never held.
#[test]
fn a_tar_entry_with_a_huge_long_name_ends_the_read_there() {
    use tar::EntryType as T;
    let long = format!("notes/{}/{}.md", "a".repeat(120), "b".repeat(120));
    let mut t = Vec::new();
    raw_entry(
        &mut t,
        b"././@LongLink",
        T::GNULongName,
        format!("{long}\0").as_bytes(),
        b"",
    );
    raw_entry(&mut t, b"notes/truncated", T::Regular, b"long\n", b"");
    raw_entry(&mut t, b"././@LongLink", T::GNULongName, &[b'z'; 5000], b"");
    raw_entry(&mut t, b"zzz", T::Regular, b"too long a name\n", b"");
    raw_entry(
        &mut t,
        b"././@LongLink",
        T::GNULongName,
        &vec![b'n'; 16 << 20],
        b"",
    );
    raw_entry(&mut t, b"huge-name.md", T::Regular, b"never\n", b"");
    raw_entry(&mut t, b"after.md", T::Regular, b"after\n", b"");
    t.extend_from_slice(&[0u8; 1024]);
    let work = tempfile::tempdir().unwrap();
    let gz = work.path().join("long.tar.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&t).unwrap();
    fs::write(&gz, enc.finish().unwrap()).unwrap();
    let dir = work.path().join("d");
    let v = import(&dir, &gz, &[]);
    assert_eq!(v["created"], 1, "{v}");
    let reasons = left_out(&v);
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0].0, "(the rest of the archive)");
    assert!(
        reasons[0].1.contains("extended headers are over"),
        "{reasons:?}"
    );
    // (A long name is shown cut.)
    assert_eq!(reasons[1].0, format!("{}… (5000 bytes)", "z".repeat(240)));
    assert!(reasons[1].1.contains("cannot address"), "{reasons:?}");
    assert_eq!(files(&dir), [(long, b"long\n".to_vec())]);
}

#[test]
fn a_zip_with_a_bomb_links_and_escaping_names_is_refused_entry_by_entry() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let path = w.join("hostile.zip");
    {
        let mut z = zip::ZipWriter::new(fs::File::create(&path).unwrap());
        let stored = zip::write::SimpleFileOptions::default();
        let deflated = stored.compression_method(zip::CompressionMethod::Deflated);
        z.start_file("memories/notes/ok.md", stored).unwrap();
        z.write_all(b"fine\n").unwrap();
        z.start_file("../../escape.md", stored).unwrap();
        z.write_all(b"out\n").unwrap();
        z.start_file("/abs.md", stored).unwrap();
        z.write_all(b"abs\n").unwrap();
        z.add_symlink("link.md", "/etc/passwd", stored).unwrap();
        // 64 MiB of one byte, deflated to about 64 KiB: over 100:1.
        z.start_file("bomb.md", deflated).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..64 {
            z.write_all(&chunk).unwrap();
        }
        z.start_file("memories/last.md", stored).unwrap();
        z.write_all(b"last\n").unwrap();
        z.finish().unwrap();
    }
    let dir = w.join("d");
    let v = import(&dir, &path, &[]);
    let reasons = left_out(&v);
    let says = |name: &str, what: &str| {
        assert!(
            reasons.iter().any(|(n, r)| n == name && r.contains(what)),
            "{name}: {what} in {reasons:?}"
        )
    };
    says("../../escape.md", "leaves the source");
    says("/abs.md", "an absolute path");
    says("link.md", "a symlink");
    says("bomb.md", "decompression bomb");
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert_eq!(
        files(&dir),
        [
            ("last.md".to_string(), b"last\n".to_vec()),
            ("notes/ok.md".to_string(), b"fine\n".to_vec())
        ]
    );
}

#[test]
fn a_gzip_bomb_stops_the_read_and_keeps_what_came_before() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // 1 MiB store: the archive may inflate to 4 MiB and 64 MiB; this one
    // holds a good file, then 200 MiB of zeros in one entry (about 200 KiB
    // packed), then another file that is never reached.
    let path = w.join("bomb.tar.gz");
    {
        let mut enc = flate2::write::GzEncoder::new(
            fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        let mut t = Vec::new();
        raw_entry(
            &mut t,
            b"first.md",
            tar::EntryType::Regular,
            b"first\n",
            b"",
        );
        enc.write_all(&t).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_path("zeros.md").unwrap();
        h.set_size(200 << 20);
        h.set_mode(0o644);
        h.set_cksum();
        enc.write_all(h.as_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..200 {
            enc.write_all(&zeros).unwrap();
        }
        let mut t = Vec::new();
        raw_entry(
            &mut t,
            b"after.md",
            tar::EntryType::Regular,
            b"after\n",
            b"",
        );
        t.extend_from_slice(&[0u8; 1024]);
        enc.write_all(&t).unwrap();
        enc.finish().unwrap();
    }
    let dir = w.join("d");
    let v = import(&dir, &path, &["--max-store-size", "1M"]);
    let reasons = left_out(&v);
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n == "(the rest of the archive)" && r.contains("decompression bomb")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n == "zeros.md" && r.contains("too big")),
        "{reasons:?}"
    );
    assert_eq!(files(&dir), [("first.md".to_string(), b"first\n".to_vec())]);
}

/// `memfs import FLAGS SOURCE` into `data`, killed (SIGKILL) once its
/// journal holds more than `bytes`: some of it in, not all.
fn import_killed_midway(data: &Path, source: &Path, flags: &[&str], bytes: u64) {
    let mut child = memfs()
        .arg("--data")
        .arg(data)
        .arg("import")
        .args(flags)
        .arg(source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = data.join(".memfs/journal");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: u64 = fs::read_dir(&journal)
            .map(|es| {
                es.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        if held > bytes {
            break;
        }
        assert!(Instant::now() < deadline, "the import never began");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_import_killed_midway_is_completed_by_the_next_run_with_nothing_twice() {
    let src = tempfile::tempdir().unwrap();
    let s = src.path();
    for i in 0..3000 {
        let sub = s.join(format!("d{:02}", i % 30));
        fs::create_dir_all(&sub).unwrap();
        fs::write(
            sub.join(format!("f{i:04}.md")),
            format!("file {i}\n{}\n", "text ".repeat(100)),
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    import_killed_midway(d, s, &["-q"], 200_000);
    let v = import(d, s, &["-q"]);
    let done = v["created"].as_u64().unwrap() + v["unchanged"].as_u64().unwrap();
    assert_eq!(done, 3000, "{v}");
    assert!(
        v["unchanged"].as_u64().unwrap() > 0,
        "the kill came after the end: {v}"
    );
    // One version of each file, and every file whole.
    let creates = log_rows(d)
        .into_iter()
        .filter(|r| r["op"] == "create")
        .count();
    assert_eq!(creates, 3000);
    let all = files(d);
    assert_eq!(all.len(), 3000);
    for (path, bytes) in &all {
        let i: usize = path[5..9].parse().unwrap();
        assert_eq!(
            bytes,
            format!("file {i}\n{}\n", "text ".repeat(100)).as_bytes(),
            "{path}"
        );
    }
}

#[test]
fn an_import_beside_a_running_mount_shows_there_at_once_with_progress_on_stderr() {
    if skip_without_fuse(
        "an_import_beside_a_running_mount_shows_there_at_once_with_progress_on_stderr",
    ) {
        return;
    }
    let m = Mounted::start(&[]);
    let work = tempfile::tempdir().unwrap();
    // A tar that arrives slowly through a FIFO: the import runs over a
    // second, so it says how far it is.
    let fifo = work.path().join("slow.tar");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads the NUL-terminated path it is given, nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let child = memfs()
        .arg("--data")
        .arg(m.data.path())
        .arg("import")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut t = Vec::new();
    for i in 0..40 {
        raw_entry(
            &mut t,
            format!("slow/{i}.md").as_bytes(),
            tar::EntryType::Regular,
            b"slow\n",
            b"",
        );
    }
    let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    for piece in t.chunks(t.len() / 4) {
        w.write_all(piece).unwrap();
        w.flush().unwrap();
        std::thread::sleep(Duration::from_millis(600));
    }
    w.write_all(&[0u8; 1024]).unwrap();
    drop(w);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout} {stderr}");
    assert!(stdout.starts_with("40 files read"), "{stdout}");
    assert!(
        stderr.contains("memfs: import: "),
        "no progress: {stderr:?}"
    );
    assert_eq!(fs::read_to_string(m.at("slow/39.md")).unwrap(), "slow\n");
    // -q: no progress.
    let quiet = Command::new(env!("CARGO_BIN_EXE_memfs"))
        .arg("--data")
        .arg(m.data.path())
        .args(["import", "-q"])
        .arg(work.path())
        .output()
        .unwrap();
    assert!(quiet.status.success());
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

#[test]
fn export_to_a_directory_or_a_tar_and_import_back_gives_the_same_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = tempfile::tempdir().unwrap();
    let s = src.path();
    fs::create_dir_all(s.join("a/b/c")).unwrap();
    fs::write(s.join("a/b/c/deep.md"), "deep\n").unwrap();
    fs::write(s.join("émoji 🎉.md"), "ünïcode ✓\n").unwrap();
    fs::write(s.join("empty.md"), "").unwrap();
    fs::write(s.join("img.png"), PNG).unwrap();
    fs::write(s.join(".hidden.md"), "hidden but kept\n").unwrap();
    assert_eq!(import(d, s, &[])["created"], 5);
    let before = files(d);
    assert_eq!(before.len(), 5);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let (code, _, err) = run(d, &["export", "--dir", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.join("memories/a/b/c/deep.md").is_file());
    // Not into a directory with something in it.
    let (code, _, err) = run(d, &["export", "--dir", out.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not empty"), "{err}");
    let tar = work.path().join("m.tar");
    let (code, _, err) = run(d, &["export", "--tar", tar.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let again = work.path().join("again.tar");
    run(d, &["export", "--tar", again.to_str().unwrap()]);
    assert_eq!(
        fs::read(&tar).unwrap(),
        fs::read(&again).unwrap(),
        "the same memory, the same archive"
    );
    for from in [out, tar] {
        let other = tempfile::tempdir().unwrap();
        assert_eq!(import(other.path(), &from, &[])["created"], 5);
        assert_eq!(files(other.path()), before, "{}", from.display());
    }
}

/// `git` in `repo`, with the author and date given.
fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_COMMITTER_NAME", "committer")
        .env("GIT_COMMITTER_EMAIL", "c@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn commit(repo: &Path, who: &str, date: &str, message: &str) {
    let (name, email) = who.split_once(' ').unwrap();
    git(
        repo,
        &[
            "-c",
            &format!("user.name={name}"),
            "-c",
            &format!("user.email={email}"),
            "commit",
            "-q",
            "--date",
            date,
            "-m",
            message,
        ],
    );
}

/// Each version as (op, path, author, authored, sha256), oldest first.
fn authored(dir: &Path) -> Vec<(String, String, String, String, String)> {
    let mut rows: Vec<_> = log_rows(dir)
        .into_iter()
        .map(|r| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&r["op"]),
                s(&r["path"]),
                s(&r["actor"]["author"]),
                s(&r["actor"]["authored"]),
                s(&r["sha256"]),
            )
        })
        .collect();
    rows.reverse();
    rows
}

#[test]
fn a_git_history_arrives_as_versions_by_its_authors_and_goes_back_out_the_same() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::create_dir(repo.join("notes")).unwrap();
    fs::write(repo.join("a.md"), "one\n").unwrap();
    fs::write(repo.join("notes/q.md"), "quokka\n").unwrap();
    fs::write(repo.join("blob.bin"), b"bin\0ary").unwrap();
    std::os::unix::fs::symlink("a.md", repo.join("link.md")).unwrap();
    // A name with the byte the log's commits are marked with, and more.
    fs::write(repo.join("odd\u{1}aéééééé.md"), "odd\n").unwrap();
    git(&repo, &["add", "-A"]);
    commit(
        &repo,
        "Ana ana@example.com",
        "2019-03-01T10:00:00Z",
        "first",
    );
    fs::write(repo.join("a.md"), "one\ntwo\n").unwrap();
    git(&repo, &["add", "-A"]);
    commit(&repo, "Bo bo@example.com", "2019-03-02T11:00:00Z", "second");
    git(&repo, &["rm", "-q", "notes/q.md"]);
    fs::write(repo.join("b.md"), "bee\n").unwrap();
    git(&repo, &["add", "-A"]);
    commit(
        &repo,
        "Ana ana@example.com",
        "2019-03-03T12:00:00Z",
        "third",
    );

    let dir = work.path().join("d");
    let v = import(&dir, &repo, &["--git"]);
    assert_eq!(
        (
            v["created"].as_u64(),
            v["updated"].as_u64(),
            v["deleted"].as_u64()
        ),
        (Some(3), Some(1), Some(1)),
        "{v}"
    );
    let reasons = left_out(&v);
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n.ends_with(":blob.bin") && r.contains("not text")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n.ends_with(":link.md") && r.contains("a symlink")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n.contains("odd") && r.contains("cannot address")),
        "{reasons:?}"
    );
    let history = authored(&dir);
    let brief: Vec<(&str, &str, &str, &str)> = history
        .iter()
        .map(|(op, path, author, when, _)| {
            (op.as_str(), path.as_str(), author.as_str(), when.as_str())
        })
        .collect();
    assert_eq!(
        brief,
        [
            (
                "create",
                "/memories/a.md",
                "Ana <ana@example.com>",
                "2019-03-01T10:00:00Z"
            ),
            (
                "create",
                "/memories/notes/q.md",
                "Ana <ana@example.com>",
                "2019-03-01T10:00:00Z"
            ),
            (
                "write",
                "/memories/a.md",
                "Bo <bo@example.com>",
                "2019-03-02T11:00:00Z"
            ),
            (
                "delete",
                "/memories/notes/q.md",
                "Ana <ana@example.com>",
                "2019-03-03T12:00:00Z"
            ),
            (
                "create",
                "/memories/b.md",
                "Ana <ana@example.com>",
                "2019-03-03T12:00:00Z"
            ),
        ]
    );
    // Again: nothing; a new commit: only it.
    assert_eq!(import(&dir, &repo, &["--git"])["read"], 0);
    fs::write(repo.join("b.md"), "bee\nsting\n").unwrap();
    git(&repo, &["add", "-A"]);
    commit(&repo, "Cy cy@example.com", "2019-03-04T13:00:00Z", "fourth");
    let v = import(&dir, &repo, &["--git"]);
    assert_eq!(
        (v["read"].as_u64(), v["updated"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    assert_eq!(authored(&dir).len(), 6);
    // Out to git and back in: the same versions, by the same authors, at
    // the same times, with the same contents.
    let out = work.path().join("out");
    let (code, _, err) = run(&dir, &["export", "--git", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let back = work.path().join("back");
    import(&back, &out, &["--git"]);
    assert_eq!(authored(&back), authored(&dir));
    assert_eq!(files(&back), files(&dir));
}

#[test]
fn a_git_import_killed_midway_is_completed_by_the_next_run_with_nothing_twice() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    // 400 commits through fast-import: each changes two of 50 files.
    let mut stream = String::new();
    for i in 0..400 {
        stream.push_str(&format!(
            "commit refs/heads/main\nauthor A{} <a@example.com> {} +0000\ncommitter c <c@example.com> {} +0000\ndata 2\nc\n",
            i % 3,
            1_500_000_000 + i * 60,
            1_500_000_000 + i * 60
        ));
        for f in [i % 50, (i * 7 + 3) % 50] {
            let body = format!("file {f} at commit {i}\n{}", "words ".repeat(200));
            stream.push_str(&format!(
                "M 100644 inline f{f:02}.md\ndata {}\n{body}\n",
                body.len()
            ));
        }
    }
    let mut fi = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    fi.stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(fi.wait().unwrap().success());
    git(&repo, &["reset", "-q", "--hard", "main"]);

    let d = work.path().join("d");
    import_killed_midway(&d, &repo, &["-q", "--git"], 150_000);
    let first = log_rows(&d).len();
    assert!(first > 0 && first < 800, "{first} versions before the kill");
    import(&d, &repo, &["-q", "--git"]);
    // Every commit's change to every file once, in order, and the files as
    // the last commit left them.
    let rows = authored(&d);
    let keys: std::collections::HashSet<_> = log_rows(&d)
        .iter()
        .map(|r| r["actor"]["request"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), rows.len(), "a change imported twice");
    let changes: usize = (0..400)
        .map(|i| if i % 50 == (i * 7 + 3) % 50 { 1 } else { 2 })
        .sum();
    assert_eq!(rows.len(), changes);
    let times: Vec<&str> = rows.iter().map(|r| r.3.as_str()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "out of order");
    for (path, bytes) in files(&d) {
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with(&format!(
                "file {} at commit ",
                path[1..3].parse::<usize>().unwrap()
            )),
            "{path}"
        );
    }
}
