//! The push half of a round: each path whose content differs from its
//! base sent as the API's create, update (a rename is an update of the
//! path) or delete, with the base's SHA-256 as the precondition and one
//! idempotency key per logical push. A 409 means another writer moved the
//! memory first: it is read, and taken in as a pull would (merged, or
//! kept as a conflict), and what is left to send goes in the next round.

use std::collections::BTreeSet;

use crate::digest::Sha;
use crate::transfer::api::RemoteError;

use super::local::{self, mem_path, Local};
use super::sync::{push_key, Round};

/// A path's side of a push.
struct Side {
    path: String,
    local: Local,
}

impl Round<'_> {
    /// Pushes every path of `dirty` (API paths) whose content is not its
    /// base; stops at the first error the server or network gives that is
    /// not about one memory.
    pub fn push(&mut self, dirty: &BTreeSet<String>) -> Result<(), RemoteError> {
        let sides: Vec<Side> = dirty
            .iter()
            .filter_map(|p| {
                let local = local::at(self.store, &mem_path(p)?);
                Some(Side {
                    path: p.clone(),
                    local,
                })
            })
            .collect();
        let (mut gone, mut new) = (Vec::new(), Vec::new());
        for side in sides {
            let base = self.state.memories.get(&side.path).cloned();
            match (&side.local, base) {
                (Local::File(data), None) => new.push((side.path, data.clone())),
                (Local::File(data), Some(b)) => {
                    let sha = Sha::of(data).to_string();
                    if sha != b.sha {
                        self.update(&side.path, &b.id, &b.sha, data)?;
                    }
                }
                (Local::Absent, Some(b)) => gone.push((side.path, b)),
                (Local::Absent, None) if self.state.sent.contains_key(&side.path) => {
                    self.unsend(&side.path)?
                }
                _ => {}
            }
        }
        for (path, data) in new {
            let sha = Sha::of(&data).to_string();
            let moved = gone.iter().position(|(_, b)| b.sha == sha);
            match moved {
                Some(i) => {
                    let (from, b) = gone.remove(i);
                    self.moved(&from, &path, &b.id, &b.sha)?;
                }
                None => self.create(&path, &data)?,
            }
        }
        for (path, b) in gone {
            self.delete(&path, &b.id, &b.sha)?;
        }
        Ok(())
    }

    /// Notes, on disk, that `sha` is about to be sent for `path` (its
    /// answer may never come).
    fn sending(&mut self, path: &str, sha: &str) {
        self.state.sent.insert(path.to_string(), sha.to_string());
        if let Err(e) = self.kept.save(self.state) {
            tracing::warn!("memfs could not save .memfs/remote/state.json: {e}");
        }
    }

    /// A file deleted here whose create went out unconfirmed: if the store
    /// holds what was sent, it is deleted there too.
    fn unsend(&mut self, path: &str) -> Result<(), RemoteError> {
        let sent = self.state.sent.get(path).cloned().unwrap_or_default();
        let there = self.api.items(false)?;
        if let Some(m) = there
            .iter()
            .find(|m| m.path == path && m.content_sha256 == sent)
        {
            let key = push_key(&self.state.store, "delete", path, &sent, "");
            match self.api.delete_item(&m.id, &sent, &key) {
                Ok(()) => {}
                // (Changed there since: theirs now, the pull takes it.)
                Err(e) if e.is_status(409) => {}
                Err(e) => return Err(e),
            }
        }
        self.state.sent.remove(path);
        Ok(())
    }

    /// `data` as UTF-8, or said once that it cannot be sent.
    fn text<'d>(&mut self, path: &str, data: &'d [u8]) -> Option<&'d str> {
        match std::str::from_utf8(data) {
            Ok(text) => {
                self.unsendable.remove(path);
                Some(text)
            }
            Err(_) => {
                if self.unsendable.insert(path.to_string()) {
                    tracing::warn!(
                        "{}: not UTF-8 text, which a memory store does not hold: kept here, not sent",
                        crate::text::label(path)
                    );
                }
                None
            }
        }
    }

    /// A 409 (or a lost memory) at `id`: what the server holds now, taken
    /// in; `None` if the memory is gone there. A memory still at `base`
    /// (the precondition held, yet the change was refused): the store
    /// refuses changes (archived), an error that halts the pushes.
    fn refresh(&mut self, id: &str, base: Option<&str>) -> Result<(), RemoteError> {
        match self.api.memory(id)? {
            Some(m) if base == Some(m.content_sha256.as_str()) => Err(self.refusing()),
            Some(m) => {
                self.take(&m);
                Ok(())
            }
            None => {
                self.gone(id);
                Ok(())
            }
        }
    }

    /// Why the store refused a change nothing else explains.
    fn refusing(&self) -> RemoteError {
        let archived = match self.api.check() {
            Ok(store) => !store["archived_at"].is_null(),
            Err(e) => return e,
        };
        RemoteError::Status {
            shown: self.api.shown().to_string(),
            status: 409,
            said: match archived {
                true => "the store is archived: it takes no change".into(),
                false => "the store refused a change whose precondition holds".into(),
            },
            retry_after: None,
        }
    }

    fn update(&mut self, path: &str, id: &str, base: &str, data: &[u8]) -> Result<(), RemoteError> {
        let Some(text) = self.text(path, data) else {
            return Ok(());
        };
        let sha = Sha::of(data).to_string();
        let key = push_key(&self.state.store, "update", path, base, &sha);
        self.sending(path, &sha);
        match self.api.update_item(id, None, Some(text), base, &key) {
            Ok(m) => {
                self.agree(path, &m.id, data);
                Ok(())
            }
            Err(e) if e.is_status(409) || e.is_status(404) => self.refresh(id, Some(base)),
            Err(e) => Err(e),
        }
    }

    fn moved(&mut self, from: &str, to: &str, id: &str, base: &str) -> Result<(), RemoteError> {
        let key = push_key(&self.state.store, "rename", to, base, from);
        match self.api.update_item(id, Some(to), None, base, &key) {
            Ok(_) => {
                if let Some(b) = self.state.memories.remove(from) {
                    self.state.memories.insert(to.to_string(), b);
                }
                Ok(())
            }
            Err(e) if e.is_status(409) || e.is_status(404) => {
                // Sent again as a delete and a create, once what the
                // server holds is known.
                self.refresh(id, None)?;
                self.again.insert(from.to_string());
                self.again.insert(to.to_string());
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn create(&mut self, path: &str, data: &[u8]) -> Result<(), RemoteError> {
        let Some(text) = self.text(path, data) else {
            return Ok(());
        };
        let sha = Sha::of(data).to_string();
        let key = push_key(&self.state.store, "create", path, "", &sha);
        self.sending(path, &sha);
        match self.api.create_item(path, text, &key) {
            Ok(m) => {
                self.agree(path, &m.id, data);
                Ok(())
            }
            Err(e) if e.is_status(409) => {
                // Made there first (by another machine, or by this push
                // whose answer was lost): found by its path and taken in.
                let there = self.api.items(false)?;
                match there.iter().find(|m| m.path == path) {
                    Some(m) => self.refresh(&m.id.clone(), None),
                    None => Err(self.refusing()),
                }
            }
            Err(e) => Err(e),
        }
    }

    fn delete(&mut self, path: &str, id: &str, base: &str) -> Result<(), RemoteError> {
        let key = push_key(&self.state.store, "delete", path, base, "");
        match self.api.delete_item(id, base, &key) {
            Ok(()) => {
                self.state.memories.remove(path);
                Ok(())
            }
            // (The store holds an update this cache sent unconfirmed: that
            // is what is deleted.)
            Err(e) if e.is_status(409) => match self.api.memory(id)? {
                Some(m) if self.state.sent.get(path) == Some(&m.content_sha256) => {
                    self.state.sent.remove(path);
                    self.delete(path, id, &m.content_sha256)
                }
                _ => self.refresh(id, Some(base)),
            },
            Err(e) => Err(e),
        }
    }
}
