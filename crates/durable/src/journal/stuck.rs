//! Paths the checkpoint cannot write, and their repair.
//!
//! A path is stuck when the plain files refuse it for a reason of its own:
//! a name in the way on disk that memfs did not make (a symlink planted
//! where a directory belongs), a permission, a name the file system will
//! not take. The disk as a whole refusing (EIO, ENOSPC, EROFS, EDQUOT, out
//! of memory or descriptors) is not that: then the pass stops and is tried
//! again, as before.
//!
//! A stuck path holds back nothing else. Later ops on it, below it, or
//! moving or removing what holds it wait (they become part of its repair);
//! every other op goes on; the checkpoint moves past the batches and says
//! which paths it left behind (`Header::stuck`), so that the journal keeps
//! their contents (compaction never drops them) and, at a start, decides
//! them. Each later pass first tries to bring the stuck paths to what the
//! journal says now (`startup::repair_ops`), taking a content the journal
//! no longer holds from wherever the plain files hold it.

use std::collections::BTreeMap;
use std::io;

use crate::path::MemPath;
use crate::store::ChangeOp;

/// Errors that say the disk as a whole refuses, not one path.
pub fn disk_wide(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EIO
                | libc::ENOSPC
                | libc::EDQUOT
                | libc::EROFS
                | libc::ENOMEM
                | libc::EMFILE
                | libc::ENFILE
                | libc::EBADF
                | libc::EINTR
                | libc::EAGAIN
        )
    ) || e.raw_os_error().is_none()
}

/// The stuck paths, each with why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stuck {
    paths: BTreeMap<MemPath, String>,
}

impl Stuck {
    /// The paths a journal says are stuck (after a start), reason unknown.
    pub fn from_paths(paths: &[String]) -> Stuck {
        let paths = paths
            .iter()
            .filter_map(|p| MemPath::parse(p).ok())
            .map(|p| {
                (
                    p,
                    "the plain file was behind when memfs stopped".to_string(),
                )
            })
            .collect();
        Stuck { paths }
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The paths, as the journal records them.
    pub fn list(&self) -> Vec<String> {
        self.paths.keys().map(MemPath::to_string).collect()
    }

    /// Each path with why, for reports.
    pub fn reasons(&self) -> impl Iterator<Item = (&MemPath, &str)> {
        self.paths.iter().map(|(p, why)| (p, why.as_str()))
    }

    pub fn paths(&self) -> Vec<MemPath> {
        self.paths.keys().cloned().collect()
    }

    /// Whether `p` is at or below a stuck path.
    pub fn holds(&self, p: &MemPath) -> bool {
        self.paths.keys().any(|s| p.starts_with(s))
    }

    /// Whether a stuck path is at or below `p`.
    fn under(&self, p: &MemPath) -> bool {
        self.paths.keys().any(|s| s.starts_with(p))
    }

    /// Whether `op` must wait for a stuck path: it acts on one (or below
    /// one), or moves or removes what holds one.
    pub fn blocks(&self, op: &ChangeOp) -> bool {
        if self.paths.is_empty() {
            return false;
        }
        let moved = |p: &MemPath| self.holds(p) || self.under(p);
        match op {
            ChangeOp::Write { path, .. }
            | ChangeOp::MakeDir { path, .. }
            | ChangeOp::Symlink { path, .. }
            | ChangeOp::SetMeta { path, .. }
            | ChangeOp::SetTimes { path, .. } => self.holds(path),
            ChangeOp::Remove { path } => moved(path),
            ChangeOp::Rename { from, to, .. } => moved(from) || moved(to),
            ChangeOp::Exchange { a, b } => moved(a) || moved(b),
        }
    }

    /// Marks the paths `op` acts on stuck, for `why`; says the new ones.
    pub fn add(&mut self, op: &ChangeOp, why: &str) -> Vec<MemPath> {
        let mut new = Vec::new();
        for p in paths_of(op) {
            if self.holds(p) {
                continue;
            }
            self.paths.retain(|s, _| !s.starts_with(p));
            self.paths.insert(p.clone(), why.to_string());
            new.push(p.clone());
        }
        new
    }
}

/// The paths an op acts on.
fn paths_of(op: &ChangeOp) -> Vec<&MemPath> {
    match op {
        ChangeOp::Write { path, .. }
        | ChangeOp::MakeDir { path, .. }
        | ChangeOp::Symlink { path, .. }
        | ChangeOp::SetMeta { path, .. }
        | ChangeOp::SetTimes { path, .. }
        | ChangeOp::Remove { path } => vec![path],
        ChangeOp::Rename { from, to, .. } => vec![from, to],
        ChangeOp::Exchange { a, b } => vec![a, b],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MemPath {
        MemPath::parse(s).unwrap()
    }

    #[test]
    fn a_stuck_path_blocks_what_acts_on_it_below_it_or_moves_it() {
        let mut stuck = Stuck::default();
        let new = stuck.add(
            &ChangeOp::Remove {
                path: p("/memories/a/x"),
            },
            "ELOOP",
        );
        assert_eq!(new, vec![p("/memories/a/x")]);
        let remove = |s: &str| ChangeOp::Remove { path: p(s) };
        assert!(stuck.blocks(&remove("/memories/a/x/y")));
        assert!(stuck.blocks(&remove("/memories/a")));
        assert!(!stuck.blocks(&remove("/memories/b")));
        let rename = |a: &str, b: &str| ChangeOp::Rename {
            from: p(a),
            to: p(b),
            replace: false,
        };
        assert!(stuck.blocks(&rename("/memories/a", "/memories/c")));
        assert!(stuck.blocks(&rename("/memories/c", "/memories/a/x")));
        assert!(!stuck.blocks(&rename("/memories/c", "/memories/d")));
        // A path above a stuck one takes its place.
        stuck.add(&remove("/memories/a"), "ENOTDIR");
        assert_eq!(stuck.list(), vec!["/memories/a".to_string()]);
        assert_eq!(
            Stuck::from_paths(&stuck.list()).paths(),
            vec![p("/memories/a")]
        );
    }

    #[test]
    fn the_whole_disk_refusing_is_not_one_path() {
        assert!(disk_wide(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(disk_wide(&io::Error::from_raw_os_error(libc::EIO)));
        assert!(!disk_wide(&io::Error::from_raw_os_error(libc::ELOOP)));
        assert!(!disk_wide(&io::Error::from_raw_os_error(libc::ENOTDIR)));
        assert!(!disk_wide(&io::Error::from_raw_os_error(libc::EACCES)));
    }
}
