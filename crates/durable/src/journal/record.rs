//! What a frame's header says (JSON), and how store changes are written in it.
//!
//! Every frame's header is one [`Header`]. A batch frame holds the changes
//! of one group commit: for each change, the ops that say what the files
//! become (enough to apply it to any storage without reading anything
//! else but the contents it names) and the versions it makes (the history).
//! A content is named by its sha256: the frame's `contents` place the new
//! ones in its body; one already in the journal is only named.
//!
//! The first frame of a segment also says which segment it is (`segment`).
//! A snapshot frame (written by compaction) holds the whole state at a
//! batch instead of changes; `kept` carries old versions a compaction kept.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::row::Row;
use crate::path::MemPath;
use crate::store::{ChangeOp, Meta};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The plain files were current, and durable, through this batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u64>,
    /// With `checkpoint` (or a snapshot): the paths, with all below them,
    /// the plain files were NOT brought up to date for (the checkpoint
    /// could not write them: see `stuck::Stuck`). The whole set each
    /// time (none when empty): at start the journal decides them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck: Vec<String>,
    /// A shared store's versions this journal holds every one of, through
    /// this one (its own and other hosts'): where following resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow: Option<u64>,
    /// Batches of this host's that a shared store holds, whose frames this
    /// journal holds (this one or one before it), and that lie past
    /// `follow`: the follower skips exactly these (see `OwnBatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own: Vec<OwnBatch>,
    /// This host's batches numbered below this were written before the
    /// journal said which of them it holds (`own`): judged by number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_since: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeRec>,
    /// A snapshot: every node as it was after `batch` (replaces all state
    /// before it when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Vec<NodeRec>>,
    /// Versions kept from compacted segments: history only, no effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<Row>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contents: Vec<ContentRec>,
}

/// A batch of this host's committed to a shared store: its number, the
/// store's head it found, and its last id (no other host committed
/// between the two: once the journal holds every version through `head`,
/// it holds every one through `last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnBatch {
    pub batch: u64,
    pub head: u64,
    pub last: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentInfo {
    pub number: u64,
    /// This journal's origin id (random, made with the journal).
    pub origin: String,
    /// A compacted segment stands for segments `number..=covers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers: Option<u64>,
    /// The segment before ends here: bytes of it past `end` were never
    /// confirmed durable and are not read (see `append::Core::append_deferring`, which begins a new segment sealing the one before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<Seal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    pub segment: u64,
    pub end: u64,
}

/// One store change: its id, its effects, its versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRec {
    pub change: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpRec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<Row>,
}

/// A store op as the journal keeps it (a write names its content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum OpRec {
    Write {
        path: String,
        sha256: String,
        size: u64,
        meta: MetaRec,
        /// The content is not in the journal, only in the plain file (a
        /// file found when the journal began, not copied).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        in_file: bool,
    },
    Mkdir {
        path: String,
        meta: MetaRec,
    },
    Remove {
        path: String,
    },
    Rename {
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replace: bool,
    },
    Exchange {
        a: String,
        b: String,
    },
    Symlink {
        path: String,
        target: String,
        meta: MetaRec,
    },
    Meta {
        path: String,
        meta: MetaRec,
    },
    Times {
        path: String,
        meta: MetaRec,
    },
}

/// A node of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRec {
    pub path: String,
    #[serde(flatten)]
    pub kind: NodeRecKind,
    pub meta: MetaRec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum NodeRecKind {
    File {
        sha256: String,
        size: u64,
        version: u64,
        /// Its content is not in the journal but in the plain file (found
        /// when the journal began, not copied).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        in_file: bool,
    },
    Dir,
    Symlink {
        target: String,
    },
}

/// Where a new content sits in the frame's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentRec {
    pub sha256: String,
    pub at: u64,
    pub len: u64,
}

/// A node's attributes: mode bits, owner, times as `[seconds, nanoseconds]`
/// since the epoch (seconds may be negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaRec {
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: (i64, u32),
    pub mtime: (i64, u32),
}

fn time_of(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            // Before the epoch: whole seconds down, nanoseconds up.
            match d.subsec_nanos() {
                0 => (-(d.as_secs() as i64), 0),
                n => (-(d.as_secs() as i64) - 1, 1_000_000_000 - n),
            }
        }
    }
}

fn system_time((secs, nanos): (i64, u32)) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(nanos.min(999_999_999)));
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

impl From<&Meta> for MetaRec {
    fn from(m: &Meta) -> Self {
        MetaRec {
            perm: m.perm,
            uid: m.uid,
            gid: m.gid,
            atime: time_of(m.atime),
            mtime: time_of(m.mtime),
        }
    }
}

impl From<&MetaRec> for Meta {
    fn from(m: &MetaRec) -> Self {
        Meta {
            perm: m.perm,
            uid: m.uid,
            gid: m.gid,
            atime: system_time(m.atime),
            mtime: system_time(m.mtime),
        }
    }
}

/// The op record of a store op; `sha` names a write's content.
pub fn op_rec(op: &ChangeOp, sha: Option<&str>) -> OpRec {
    let p = |path: &MemPath| path.to_string();
    match op {
        ChangeOp::Write { path, data, meta } => OpRec::Write {
            path: p(path),
            sha256: sha.map(str::to_string).unwrap_or_default(),
            size: data.len() as u64,
            meta: meta.into(),
            in_file: false,
        },
        ChangeOp::MakeDir { path, meta } => OpRec::Mkdir {
            path: p(path),
            meta: meta.into(),
        },
        ChangeOp::Remove { path } => OpRec::Remove { path: p(path) },
        ChangeOp::Rename { from, to, replace } => OpRec::Rename {
            from: p(from),
            to: p(to),
            replace: *replace,
        },
        ChangeOp::Exchange { a, b } => OpRec::Exchange { a: p(a), b: p(b) },
        ChangeOp::Symlink { path, target, meta } => OpRec::Symlink {
            path: p(path),
            target: target.clone(),
            meta: meta.into(),
        },
        ChangeOp::SetMeta { path, meta } => OpRec::Meta {
            path: p(path),
            meta: meta.into(),
        },
        ChangeOp::SetTimes { path, meta } => OpRec::Times {
            path: p(path),
            meta: meta.into(),
        },
    }
}

impl OpRec {
    /// The store op this record stands for, with `data` for a write's
    /// content; `None` when a path in it is not one memfs can hold.
    pub fn to_op(&self, data: impl FnOnce() -> std::sync::Arc<Vec<u8>>) -> Option<ChangeOp> {
        let p = |text: &str| MemPath::parse(text).ok();
        Some(match self {
            OpRec::Write { path, meta, .. } => ChangeOp::Write {
                path: p(path)?,
                data: data(),
                meta: meta.into(),
            },
            OpRec::Mkdir { path, meta } => ChangeOp::MakeDir {
                path: p(path)?,
                meta: meta.into(),
            },
            OpRec::Remove { path } => ChangeOp::Remove { path: p(path)? },
            OpRec::Rename { from, to, replace } => ChangeOp::Rename {
                from: p(from)?,
                to: p(to)?,
                replace: *replace,
            },
            OpRec::Exchange { a, b } => ChangeOp::Exchange { a: p(a)?, b: p(b)? },
            OpRec::Symlink { path, target, meta } => ChangeOp::Symlink {
                path: p(path)?,
                target: target.clone(),
                meta: meta.into(),
            },
            OpRec::Meta { path, meta } => ChangeOp::SetMeta {
                path: p(path)?,
                meta: meta.into(),
            },
            OpRec::Times { path, meta } => ChangeOp::SetTimes {
                path: p(path)?,
                meta: meta.into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_before_and_after_the_epoch() {
        for t in [
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789),
            UNIX_EPOCH - Duration::new(5, 250_000_000),
            UNIX_EPOCH - Duration::from_secs(3),
        ] {
            assert_eq!(system_time(time_of(t)), t);
        }
    }

    #[test]
    fn a_header_round_trips_through_json() {
        let meta = MetaRec {
            perm: 0o600,
            uid: 1,
            gid: 2,
            atime: (1, 2),
            mtime: (3, 4),
        };
        let header = Header {
            batch: Some(7),
            changes: vec![ChangeRec {
                change: 3,
                ops: vec![
                    OpRec::Write {
                        path: "/memories/a".into(),
                        sha256: "ab".into(),
                        size: 2,
                        meta,
                        in_file: false,
                    },
                    OpRec::Rename {
                        from: "/memories/a".into(),
                        to: "/memories/b".into(),
                        replace: false,
                    },
                ],
                rows: Vec::new(),
            }],
            snapshot: Some(vec![NodeRec {
                path: "/memories/d".into(),
                kind: NodeRecKind::Dir,
                meta,
            }]),
            ..Header::default()
        };
        let text = serde_json::to_string(&header).unwrap();
        assert_eq!(serde_json::from_str::<Header>(&text).unwrap(), header);
    }
}
