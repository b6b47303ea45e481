//! One round of a sync with a store over HTTP: push what changed here,
//! then pull what changed there.
//!
//! Per memory, three texts decide: the **base** (what the server and this
//! cache last agreed on), **ours** (the tree) and **theirs** (the server).
//! Ours moved alone: it is pushed, with the base's SHA-256 as the
//! precondition. Theirs moved alone: it is written here, only if the tree
//! still holds ours. Both moved: a three-way merge (`merge::three_way`);
//! clean, the merge is written here and pushed over theirs; overlapping,
//! theirs stays the file (other machines may already show it and build on
//! it) and ours is kept in this cache's history, the version before, and
//! listed as a conflict. An edit on one side and a delete on the other: the
//! edit wins (no text lost). A rename is an update of the path, keeping
//! the memory's id.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::digest::Sha;
use crate::merge::{three_way, Merged};
use crate::store::{Mark, Origin, Store};
use crate::transfer::api::{Api, Item, RemoteError};

use super::local::{self, mem_path, Local};
use super::state::{Base, Conflict, Kept, State, CONFLICTS_KEPT};

/// How far back each pull looks before the newest version it saw (a
/// version may be listed a little after the time it carries).
pub const OVERLAP: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Round<'a> {
    pub api: &'a Api,
    pub store: &'a Arc<Store>,
    pub kept: &'a Kept,
    pub state: &'a mut State,
    /// Who pulled changes are by (the endpoint's host).
    pub host: &'a Arc<str>,
    /// Paths to push again (a merge made here).
    pub again: BTreeSet<String>,
    /// Paths whose content cannot be sent (not UTF-8), said once.
    pub unsendable: &'a mut BTreeSet<String>,
    /// The store's version being taken in, when a pull of the versions
    /// listing names it: the rows it makes here carry its id (the second
    /// parent of a merge, whose first is this machine's version).
    pub version: Option<String>,
}

/// What one push or pull step did, for the log.
type Step = Result<(), RemoteError>;

impl Round<'_> {
    fn origin(&self) -> Origin {
        Origin::Remote {
            host: self.host.clone(),
            version: self.version.as_deref().map(Arc::from),
        }
    }

    fn by_id(&self, id: &str) -> Option<(String, Base)> {
        self.state
            .memories
            .iter()
            .find(|(_, b)| b.id == id)
            .map(|(p, b)| (p.clone(), b.clone()))
    }

    /// `content` as the base of `path`, memory `id`.
    pub(super) fn agree(&mut self, path: &str, id: &str, content: &[u8]) {
        self.state.sent.remove(path);
        match self.kept.keep_base(content) {
            Ok(sha) => {
                self.state.memories.insert(
                    path.to_string(),
                    Base {
                        id: id.to_string(),
                        sha,
                    },
                );
            }
            Err(e) => tracing::warn!("memfs could not keep a merge base in .memfs/remote: {e}"),
        }
    }

    // ---- pull ----

    /// The server's memory `m` (in full) taken in.
    pub fn take(&mut self, m: &Item) {
        let Some(path) = mem_path(&m.path).filter(|p| !crate::outside::ignored(p)) else {
            tracing::warn!(
                "memfs left out the store's memory {}: its path is not one a memory holds",
                crate::text::label(&m.path)
            );
            return;
        };
        let theirs = m.content.clone().unwrap_or_default().into_bytes();
        let theirs_sha = Sha::of(&theirs).to_string();
        if let Some((old, b)) = self.by_id(&m.id).filter(|(old, _)| *old != m.path) {
            self.moved_there(&old, &b, &m.path);
        }
        let base = self.state.memories.get(&m.path).cloned();
        if base
            .as_ref()
            .is_some_and(|b| b.sha == theirs_sha && b.id == m.id)
        {
            return;
        }
        let origin = self.origin();
        match local::at(self.store, &path) {
            Local::Other => {
                tracing::warn!(
                    "memfs left out the store's memory {}: a directory or link is at its path here",
                    crate::text::label(&m.path)
                );
            }
            // (What this cache sent of a file deleted here since, which no
            // answer confirmed: the push deletes it there, not the pull
            // bringing it back.)
            Local::Absent if self.state.sent.get(&m.path) == Some(&theirs_sha) => {
                self.again.insert(m.path.clone());
            }
            Local::Absent => {
                if local::put(self.store, &path, theirs.clone(), None, origin).is_ok() {
                    self.agree(&m.path, &m.id, &theirs);
                }
            }
            Local::File(ours) => {
                let ours_sha = Sha::of(&ours).to_string();
                if ours_sha == theirs_sha {
                    self.agree(&m.path, &m.id, &theirs);
                } else if base.as_ref().is_some_and(|b| b.sha == ours_sha) {
                    if local::put(self.store, &path, theirs.clone(), Some(&ours_sha), origin)
                        .is_ok()
                    {
                        self.agree(&m.path, &m.id, &theirs);
                    }
                } else {
                    self.diverged(m, &ours, &ours_sha, base.as_ref(), &theirs);
                }
            }
        }
    }

    /// Both sides changed `m` since the base: merged, or theirs kept as
    /// the file and ours listed as a conflict.
    fn diverged(
        &mut self,
        m: &Item,
        ours: &[u8],
        ours_sha: &str,
        base: Option<&Base>,
        theirs: &[u8],
    ) {
        let path = mem_path(&m.path).expect("checked");
        let base_text = match base {
            Some(b) => match self.kept.base(&b.sha) {
                Some(text) => text,
                None => return self.conflict(m, ours_sha, theirs),
            },
            None => Vec::new(),
        };
        match three_way(&base_text, ours, theirs) {
            Merged::Clean(merged) => {
                let origin = self.origin();
                if local::put_marked(self.store, &path, merged, ours_sha, origin, Mark::Merged)
                    .is_ok()
                {
                    self.agree(&m.path, &m.id, theirs);
                    self.again.insert(m.path.clone());
                }
            }
            Merged::Conflict => self.conflict(m, ours_sha, theirs),
        }
    }

    fn conflict(&mut self, m: &Item, ours_sha: &str, theirs: &[u8]) {
        let path = mem_path(&m.path).expect("checked");
        let origin = self.origin();
        if local::put_marked(
            self.store,
            &path,
            theirs.to_vec(),
            ours_sha,
            origin,
            Mark::Unread,
        )
        .is_err()
        {
            return;
        }
        tracing::warn!(
            "{}: this machine's edit and another's overlap; the store's version is the file, this one is the version before it in `memfs log {}`",
            crate::text::label(&m.path),
            crate::text::label(&m.path)
        );
        self.agree(&m.path, &m.id, theirs);
        self.store.note_for_view(
            &path,
            format!(
                "another machine changed {} on the same lines as this one; its version is the file, and this machine's is the version before it (`memfs log /memories{}`): apply your change again if it is still needed",
                crate::text::label(&m.path),
                crate::text::label(&m.path)
            ),
        );
        self.state.conflicts.push(Conflict {
            path: m.path.clone(),
            at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            ours: ours_sha.to_string(),
        });
        let over = self.state.conflicts.len().saturating_sub(CONFLICTS_KEPT);
        self.state.conflicts.drain(..over);
    }

    /// Memory `b` moved on the server from `old` to `new`: moved here too
    /// when the tree still holds it unchanged at `old` and nothing at
    /// `new`; its base follows either way.
    fn moved_there(&mut self, old: &str, b: &Base, new: &str) {
        if let (Some(from), Some(to)) = (mem_path(old), mem_path(new)) {
            if local::at(self.store, &from).sha().as_deref() == Some(b.sha.as_str()) {
                let origin = self.origin();
                let _ = local::rename(self.store, &from, &to, &b.sha, origin);
            }
        }
        self.state.memories.remove(old);
        self.state.memories.insert(new.to_string(), b.clone());
    }

    /// The server's memory `id` is gone: gone here too, unless it was
    /// edited here since (the edit wins: it is pushed as a new memory).
    pub fn gone(&mut self, id: &str) {
        let Some((p, b)) = self.by_id(id) else {
            return;
        };
        self.state.memories.remove(&p);
        let Some(path) = mem_path(&p) else {
            return;
        };
        if local::at(self.store, &path).sha().as_deref() == Some(b.sha.as_str()) {
            let origin = self.origin();
            if local::remove(self.store, &path, &b.sha, origin).is_err() {
                self.again.insert(p);
            }
        } else {
            self.again.insert(p);
        }
    }

    /// Everything the server holds compared with the bases: what differs
    /// read in full and taken in, what is gone removed.
    pub fn reconcile(&mut self) -> Step {
        let listed = self.api.items(false)?;
        let ids: BTreeSet<&str> = listed.iter().map(|m| m.id.as_str()).collect();
        let gone: Vec<String> = (self.state.memories.values())
            .filter(|b| !ids.contains(b.id.as_str()))
            .map(|b| b.id.clone())
            .collect();
        for id in gone {
            self.gone(&id);
        }
        for m in &listed {
            let same = self.state.memories.get(&m.path);
            if same.is_some_and(|b| b.id == m.id && b.sha == m.content_sha256) {
                continue;
            }
            match self.api.memory(&m.id)? {
                Some(full) => self.take(&full),
                None => self.gone(&m.id),
            }
        }
        Ok(())
    }

    /// The versions made since the watermark (less [`OVERLAP`]): each
    /// memory they name that differs from its base read and taken in.
    pub fn pull(&mut self) -> Step {
        let since = self.state.watermark.as_deref().and_then(|w| {
            let t = humantime::parse_rfc3339_weak(w).ok()? - OVERLAP;
            Some(humantime::format_rfc3339_millis(t).to_string())
        });
        let versions = self.api.versions_since(since.as_deref())?;
        let mut newest: BTreeMap<&str, &crate::transfer::api::Version> = BTreeMap::new();
        for v in &versions {
            newest.entry(v.memory_id.as_str()).or_insert(v);
        }
        for (id, v) in newest {
            let known = self.by_id(id);
            let same = known.as_ref().is_some_and(|(p, b)| {
                v.path.as_deref() == Some(p.as_str()) && v.content_sha256.as_deref() == Some(&b.sha)
            });
            if same {
                continue;
            }
            if v.operation == "deleted" {
                self.gone(id);
                continue;
            }
            self.version = Some(v.id.clone());
            let taken = self.api.memory(id).map(|full| match full {
                Some(full) => self.take(&full),
                None => self.gone(id),
            });
            self.version = None;
            taken?;
        }
        let latest = versions
            .iter()
            .filter_map(|v| {
                humantime::parse_rfc3339_weak(&v.created_at)
                    .ok()
                    .map(|t| (t, v))
            })
            .max_by_key(|(t, _)| *t);
        if let Some((_, v)) = latest {
            self.state.watermark = Some(v.created_at.clone());
        }
        Ok(())
    }
}

/// An idempotency key for one logical push: the same push retried (after
/// a lost answer, a restart) sends the same key, a different one another.
pub fn push_key(store: &str, what: &str, path: &str, base: &str, ours: &str) -> String {
    let sha = Sha::of_parts(&[
        store.as_bytes(),
        what.as_bytes(),
        path.as_bytes(),
        base.as_bytes(),
        ours.as_bytes(),
    ]);
    format!("memfs-{}", &sha.to_string()[..32])
}
