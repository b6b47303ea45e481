//! Differential test of the mount: random sequences of file-system calls run
//! on the memfs mount and on a plain directory of the host; every result (the
//! value, or the errno) and the final trees must match.

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{skip_without_fuse, Mounted};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write(String, Vec<u8>),
    Append(String, Vec<u8>),
    WriteAt(String, u64, Vec<u8>),
    Truncate(String, u64),
    Read(String),
    Mkdir(String),
    Rmdir(String),
    Unlink(String),
    Rename(String, String),
    RenameNoReplace(String, String),
    Exchange(String, String),
    Link(String, String),
    Symlink(String, String),
    Readlink(String),
    Chmod(String, u32),
    Stat(String),
    List(String),
}

/// What an operation returned, comparable across file systems.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Bytes(Vec<u8>),
    Names(Vec<String>),
    /// kind, size (files and links only), link count, permission bits
    Stat(char, u64, u64, u32),
    Errno(i32),
}

fn io<T>(r: std::io::Result<T>, f: impl FnOnce(T) -> Outcome) -> Outcome {
    match r {
        Ok(v) => f(v),
        Err(e) => Outcome::Errno(e.raw_os_error().unwrap_or(-1)),
    }
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> std::io::Result<()> {
    let (a, b) = (
        CString::new(from.as_os_str().as_bytes()).unwrap(),
        CString::new(to.as_os_str().as_bytes()).unwrap(),
    );
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn apply(root: &Path, op: &Op) -> Outcome {
    let p = |rel: &str| root.join(rel);
    match op {
        Op::Write(f, data) => io(fs::write(p(f), data), |_| Outcome::Done),
        Op::Append(f, data) => io(
            fs::OpenOptions::new()
                .append(true)
                .open(p(f))
                .and_then(|mut h| h.write_all(data)),
            |_| Outcome::Done,
        ),
        Op::WriteAt(f, at, data) => io(
            fs::OpenOptions::new()
                .write(true)
                .open(p(f))
                .and_then(|mut h| {
                    h.seek(SeekFrom::Start(*at))?;
                    h.write_all(data)
                }),
            |_| Outcome::Done,
        ),
        Op::Truncate(f, len) => io(
            fs::OpenOptions::new()
                .write(true)
                .open(p(f))
                .and_then(|h| h.set_len(*len)),
            |_| Outcome::Done,
        ),
        Op::Read(f) => io(
            fs::File::open(p(f)).and_then(|mut h| {
                let mut v = Vec::new();
                h.read_to_end(&mut v).map(|_| v)
            }),
            Outcome::Bytes,
        ),
        Op::Mkdir(d) => io(fs::create_dir(p(d)), |_| Outcome::Done),
        Op::Rmdir(d) => io(fs::remove_dir(p(d)), |_| Outcome::Done),
        Op::Unlink(f) => io(fs::remove_file(p(f)), |_| Outcome::Done),
        Op::Rename(a, b) => io(fs::rename(p(a), p(b)), |_| Outcome::Done),
        Op::RenameNoReplace(a, b) => io(renameat2(&p(a), &p(b), libc::RENAME_NOREPLACE), |_| {
            Outcome::Done
        }),
        Op::Exchange(a, b) => io(renameat2(&p(a), &p(b), libc::RENAME_EXCHANGE), |_| {
            Outcome::Done
        }),
        Op::Link(a, b) => io(fs::hard_link(p(a), p(b)), |_| Outcome::Done),
        Op::Symlink(target, at) => io(std::os::unix::fs::symlink(target, p(at)), |_| Outcome::Done),
        Op::Readlink(l) => io(fs::read_link(p(l)), |t| {
            Outcome::Bytes(t.as_os_str().as_bytes().to_vec())
        }),
        Op::Chmod(f, mode) => io(
            fs::set_permissions(p(f), fs::Permissions::from_mode(*mode)),
            |_| Outcome::Done,
        ),
        Op::Stat(f) => io(fs::symlink_metadata(p(f)), |m| {
            let kind = if m.is_dir() {
                'd'
            } else if m.file_type().is_symlink() {
                'l'
            } else {
                'f'
            };
            let size = if m.is_dir() { 0 } else { m.len() };
            Outcome::Stat(kind, size, m.nlink(), m.mode() & 0o7777)
        }),
        Op::List(d) => io(fs::read_dir(p(d)), |entries| {
            let mut names: Vec<String> = entries
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            Outcome::Names(names)
        }),
    }
}

/// Everything below `root`: kind, permission bits, and content or link target.
fn tree(root: &Path) -> BTreeMap<PathBuf, (char, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let m = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let perm = m.mode() & 0o7777;
            if m.is_dir() {
                out.insert(rel, ('d', perm, Vec::new()));
                stack.push(path);
            } else if m.file_type().is_symlink() {
                out.insert(
                    rel,
                    (
                        'l',
                        0,
                        fs::read_link(&path)
                            .unwrap()
                            .as_os_str()
                            .as_bytes()
                            .to_vec(),
                    ),
                );
            } else {
                out.insert(rel, ('f', perm, fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..3).prop_map(|n| n.join("/"))
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![b'x', b'y', b'\n', 0u8]), 0..40)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (name(), bytes()).prop_map(|(f, d)| Op::Write(f, d)),
        1 => (name(), bytes()).prop_map(|(f, d)| Op::Append(f, d)),
        1 => (name(), 0u64..60, bytes()).prop_map(|(f, at, d)| Op::WriteAt(f, at, d)),
        1 => (name(), 0u64..60).prop_map(|(f, n)| Op::Truncate(f, n)),
        2 => name().prop_map(Op::Read),
        3 => name().prop_map(Op::Mkdir),
        1 => name().prop_map(Op::Rmdir),
        1 => name().prop_map(Op::Unlink),
        2 => (name(), name()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (name(), name()).prop_map(|(a, b)| Op::RenameNoReplace(a, b)),
        1 => (name(), name()).prop_map(|(a, b)| Op::Exchange(a, b)),
        1 => (name(), name()).prop_map(|(a, b)| Op::Link(a, b)),
        1 => (name(), name()).prop_map(|(t, a)| Op::Symlink(t, a)),
        1 => name().prop_map(Op::Readlink),
        1 => (name(), prop::sample::select(vec![0o600u32, 0o644, 0o755, 0o700])).prop_map(|(f, m)| Op::Chmod(f, m)),
        2 => name().prop_map(Op::Stat),
        1 => prop::option::of(name()).prop_map(|d| Op::List(d.unwrap_or_default())),
    ]
}

static CASE: AtomicUsize = AtomicUsize::new(0);

#[test]
fn mount_behaves_like_a_local_file_system() {
    if skip_without_fuse("mount_behaves_like_a_local_file_system") {
        return;
    }
    let m = Mounted::start(&["--max-file-size", "16M"]);
    let reference = tempfile::tempdir().unwrap();
    let config = ProptestConfig {
        cases: common::cases("MEMFS_MOUNT_MODEL_CASES", 128),
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in prop::collection::vec(op(), 1..40))| {
        let case = format!("case-{}", CASE.fetch_add(1, Ordering::Relaxed));
        let (ours, theirs) = (m.at(&case), reference.path().join(&case));
        fs::create_dir(&ours).unwrap();
        fs::create_dir(&theirs).unwrap();
        for op in &ops {
            prop_assert_eq!(apply(&ours, op), apply(&theirs, op), "{:?}", op);
        }
        prop_assert_eq!(tree(&ours), tree(&theirs));
    });
    // And the agent sees what the calls left, file by file.
    for (rel, (kind, _, bytes)) in tree(m.mnt.path()) {
        if kind == 'f'
            && std::str::from_utf8(&bytes).is_ok()
            && !bytes.contains(&0)
            && !rel.to_str().unwrap().contains("/.")
        {
            let seen = m.view(&format!("/memories/{}", rel.display()));
            assert!(
                seen.starts_with(&format!(
                    "Here's the content of /memories/{} with line numbers:",
                    rel.display()
                )),
                "{seen}"
            );
        }
    }
}
