//! The targets of the one interpreter of a change agree: random op streams
//! applied to the store's tree, to the journal's view (through
//! `versions::record`, as the journal applies them), and to the plain files
//! (through the checkpoint), compared after every op. The history's rows
//! are replayed into the files they leave and compared with the view.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;

use super::checkpoint;
use super::versions::{self, Context, Ids};
use super::view::{self, VKind, View};
use crate::digest::Sha;
use crate::path::MemPath;
use crate::store::{Change, ChangeOp, Meta, NodeKind, Tree};

/// What a target holds at a path, as every target can say it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    File { sha: Sha, perm: u32, mtime: u64 },
    Dir { perm: u32 },
    Symlink(String),
}

type Image = BTreeMap<String, Seen>;

fn secs(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The tree's persistent nodes (FIFOs and the like live in memory only).
fn of_tree(tree: &Tree) -> Image {
    let mut out = Image::new();
    for (path, node) in tree.walk() {
        if path.is_root() {
            continue;
        }
        let seen = match &node.kind {
            NodeKind::File(data) => Seen::File {
                sha: Sha::of(data),
                perm: node.attr.perm,
                mtime: secs(node.attr.mtime),
            },
            NodeKind::Dir(_) => Seen::Dir {
                perm: node.attr.perm,
            },
            NodeKind::Symlink(to) => Seen::Symlink(to.clone()),
            NodeKind::Special { .. } => continue,
        };
        out.insert(path.to_string(), seen);
    }
    out
}

fn of_view(view: &View) -> Image {
    view.iter()
        .map(|(k, n)| {
            let seen = match &n.kind {
                VKind::File { sha, .. } => Seen::File {
                    sha: *sha,
                    perm: n.meta.perm,
                    mtime: secs(n.meta.mtime),
                },
                VKind::Dir => Seen::Dir { perm: n.meta.perm },
                VKind::Symlink(to) => Seen::Symlink(to.clone()),
            };
            (view::path(k).to_string(), seen)
        })
        .collect()
}

/// The plain files under `root`, as `/memories/...` paths.
fn of_disk(root: &Path) -> Image {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Image::new();
    let mut stack = vec![(root.to_path_buf(), "/memories".to_string())];
    while let Some((dir, at)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = format!("{at}/{name}");
            let md = entry.path().symlink_metadata().unwrap();
            let perm = md.permissions().mode() & 0o7777;
            let seen = if md.is_dir() {
                stack.push((entry.path(), path.clone()));
                Seen::Dir { perm }
            } else if md.file_type().is_symlink() {
                let to = std::fs::read_link(entry.path()).unwrap();
                Seen::Symlink(to.to_string_lossy().into_owned())
            } else {
                Seen::File {
                    sha: Sha::of(&std::fs::read(entry.path()).unwrap()),
                    perm,
                    mtime: secs(md.modified().unwrap()),
                }
            };
            out.insert(path, seen);
        }
    }
    out
}

/// The files the rows leave, path by path.
fn replay(rows: &[super::row::Row], live: &mut BTreeMap<String, Sha>) {
    use super::row::Op;
    for r in rows {
        if let Some(from) = &r.from {
            live.remove(from);
        }
        if matches!(r.op, Op::Delete | Op::Expire) {
            live.remove(&r.path);
        }
    }
    for r in rows.iter().filter(|r| r.leaves_content()) {
        let sha = Sha::parse(r.sha256.as_deref().unwrap()).unwrap();
        live.insert(r.path.clone(), sha);
    }
}

fn files_of(image: &Image) -> BTreeMap<String, Sha> {
    image
        .iter()
        .filter_map(|(p, s)| match s {
            Seen::File { sha, .. } => Some((p.clone(), *sha)),
            _ => None,
        })
        .collect()
}

/// Up to three levels of three names: small enough that ops collide.
fn a_path() -> impl Strategy<Value = MemPath> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..=3)
        .prop_map(|names| MemPath::from_names(names.into_iter().map(str::to_string)))
}

fn a_path_or_root() -> impl Strategy<Value = MemPath> {
    prop_oneof![1 => Just(MemPath::root()), 3 => a_path()]
}

fn a_meta() -> impl Strategy<Value = Meta> {
    (prop::sample::select(vec![0o600u32, 0o640, 0o755]), 0u64..4).prop_map(|(perm, t)| Meta {
        perm,
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        atime: UNIX_EPOCH + Duration::from_secs(1_700_000_000 + t),
        mtime: UNIX_EPOCH + Duration::from_secs(1_700_000_000 + t),
    })
}

fn an_op() -> impl Strategy<Value = ChangeOp> {
    prop_oneof![
        4 => (a_path(), 0u8..3, a_meta()).prop_map(|(path, d, meta)| ChangeOp::Write {
            path,
            data: Arc::new(vec![b'x'; usize::from(d)]),
            meta,
        }),
        2 => (a_path(), a_meta()).prop_map(|(path, meta)| ChangeOp::MakeDir { path, meta }),
        2 => a_path().prop_map(|path| ChangeOp::Remove { path }),
        3 => (a_path(), a_path(), any::<bool>())
            .prop_map(|(from, to, replace)| ChangeOp::Rename { from, to, replace }),
        1 => (a_path(), a_path()).prop_map(|(a, b)| ChangeOp::Exchange { a, b }),
        1 => (a_path(), a_meta()).prop_map(|(path, meta)| ChangeOp::Symlink {
            path,
            target: "b".into(),
            meta,
        }),
        1 => (a_path_or_root(), a_meta()).prop_map(|(path, meta)| ChangeOp::SetMeta { path, meta }),
        1 => (a_path_or_root(), a_meta()).prop_map(|(path, meta)| ChangeOp::SetTimes { path, meta }),
    ]
}

/// Whether a store could make `op` on `tree` (the disk refuses what only
/// replaying someone else's record makes: a node of another kind in the
/// way, which its repair then makes right).
fn as_a_store_makes_it(tree: &Tree, op: &ChangeOp) -> bool {
    let kind = |p: &MemPath| tree.resolve(p).ok().map(|ino| &tree.node(ino).kind);
    let is_dir = |p: &MemPath| matches!(kind(p), Some(NodeKind::Dir(_)));
    let room = |p: &MemPath| {
        let names = p.names();
        (1..names.len()).all(|n| {
            let up = MemPath::from_names(names[..n].iter().cloned());
            kind(&up).is_none() || is_dir(&up)
        })
    };
    let empty_dir = |p: &MemPath| matches!(kind(p), Some(NodeKind::Dir(e)) if e.is_empty());
    match op {
        ChangeOp::Write { path, .. } => {
            room(path) && matches!(kind(path), None | Some(NodeKind::File(_)))
        }
        ChangeOp::MakeDir { path, .. } => room(path) && (kind(path).is_none() || is_dir(path)),
        ChangeOp::Symlink { path, .. } => room(path) && kind(path).is_none(),
        ChangeOp::Rename { from, to, replace } => {
            let fits = match kind(from) {
                Some(NodeKind::Dir(_)) => kind(to).is_none() || empty_dir(to),
                Some(_) => !is_dir(to),
                None => false,
            };
            // (A store says whether the rename replaced something.)
            fits && room(to) && !from.overlaps(to) && *replace == kind(to).is_some()
        }
        ChangeOp::Exchange { a, b } => kind(a).is_some() && kind(b).is_some() && !a.overlaps(b),
        ChangeOp::Remove { .. } | ChangeOp::SetMeta { .. } | ChangeOp::SetTimes { .. } => true,
    }
}

/// Applies `ops` to every target, comparing them after each op; the plain
/// files take only the ops a store makes (and are compared only then).
fn agree(ops: &[ChangeOp]) -> Result<(), TestCaseError> {
    let mut tree = Tree::new();
    let mut view = View::default();
    let mut ids = Ids {
        next_version: 1,
        next_change: 1,
    };
    let mut live = BTreeMap::new();
    let (tmp, _dir, files) = checkpoint::test_files();
    let mut disk_follows = true;
    let mut root_moded = false;
    for (i, op) in ops.iter().enumerate() {
        let valid = as_a_store_makes_it(&tree, op);
        // (A change of the root's times carries the mode memory holds.)
        root_moded |= matches!(op, ChangeOp::SetMeta { path, .. } if path.is_root());
        tree.apply_ops(std::slice::from_ref(op));
        let cx = Context {
            time: "2026-12-06T00:00:00Z",
            batch: 1,
            read_plain: &|_| None,
        };
        let rec = versions::record(
            &mut view,
            &Change::of_memfs(vec![op.clone()]),
            &mut ids,
            &cx,
            &mut Vec::new(),
            &mut Vec::new(),
        );
        replay(&rec.rows, &mut live);
        let (t, v) = (of_tree(&tree), of_view(&view));
        prop_assert_eq!(&t, &v, "tree and view after op {} {:?}", i, op);
        prop_assert_eq!(
            &live,
            &files_of(&v),
            "rows and view after op {} {:?}",
            i,
            op
        );
        disk_follows &= valid;
        if disk_follows {
            checkpoint::apply_now(&files, vec![op.clone()])
                .map_err(|e| TestCaseError::fail(format!("the disk refused op {i} {op:?}: {e}")))?;
            let d = of_disk(&tmp.path().join("memories"));
            prop_assert_eq!(&d, &t, "disk and tree after op {} {:?}", i, op);
            if let (Some(root), true) = (view.root_meta, root_moded) {
                let on_disk = std::fs::metadata(tmp.path().join("memories")).unwrap();
                let perm = std::os::unix::fs::PermissionsExt::mode(&on_disk.permissions());
                prop_assert_eq!(perm & 0o7777, root.perm, "the root's mode on disk");
            }
        }
        // (A directory's times move with its entries: not compared.)
        if let (Some(root), true) = (view.root_meta, root_moded) {
            let attr = &tree.node(crate::store::ROOT_INO).attr;
            prop_assert_eq!(attr.perm, root.perm, "the root's mode");
        }
    }
    Ok(())
}

/// 256 cases in `cargo test`; `MEMFS_INTERPRET_CASES=N` runs more.
fn cases() -> u32 {
    std::env::var("MEMFS_INTERPRET_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        .. ProptestConfig::default()
    })]

    #[test]
    fn every_target_makes_the_same_of_a_change(ops in prop::collection::vec(an_op(), 1..24)) {
        agree(&ops)?;
    }
}

/// A directory the plain files cannot make (a file stands there: only a
/// record replayed from someone else makes that) is refused, and the file
/// keeps its mode; it was once taken as made and chmod-ed.
#[test]
fn a_directory_over_a_plain_file_is_refused_not_taken_as_made() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, _dir, files) = checkpoint::test_files();
    let meta = |perm| Meta {
        perm,
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
    };
    let path = MemPath::from_names(["a".to_string()]);
    let write = ChangeOp::Write {
        path: path.clone(),
        data: Arc::new(b"text".to_vec()),
        meta: meta(0o600),
    };
    checkpoint::apply_now(&files, vec![write]).unwrap();
    let make = ChangeOp::MakeDir {
        path,
        meta: meta(0o755),
    };
    assert!(checkpoint::apply_now(&files, vec![make]).is_err());
    let file = tmp.path().join("memories/a");
    assert_eq!(std::fs::read(&file).unwrap(), b"text");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o600);
}
