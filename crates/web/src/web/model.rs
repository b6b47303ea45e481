//! The page's picture of the memory, from the history's rows: every row
//! (newest last), which file each live path holds now and which row made
//! it, the files deleted, and which of the agent's changes a person has
//! reviewed. Brought up to date from the rows after the newest one seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::journal::{Op, Row};
use crate::tool::Hide;

#[derive(Default)]
pub struct Model {
    /// The number the next version will get.
    pub next: u64,
    /// Every row, oldest first.
    pub rows: Vec<Row>,
    /// Row index by version.
    by_version: BTreeMap<u64, usize>,
    /// Each live file's path, and the row that made its content.
    pub live: BTreeMap<String, usize>,
    /// Each deleted file's path, and the row that deleted it.
    pub gone: BTreeMap<String, usize>,
    /// The paths the plain files cannot hold now, with why (as the owner
    /// said at the last look).
    pub stuck: Vec<String>,
}

/// Editor scratch files and hidden names, left out of the page as they are
/// out of the tool's view and `memfs log`.
pub fn scratch() -> Hide {
    Hide::scratch()
}

/// Whether a row leaves content at its path ([`Row::leaves_content`]).
pub fn leaves_content(row: &Row) -> bool {
    row.leaves_content()
}

impl Model {
    pub fn row(&self, version: u64) -> Option<&Row> {
        self.by_version.get(&version).map(|&i| &self.rows[i])
    }

    /// Takes in rows newer than any seen (oldest first), a change at a time.
    pub fn take(&mut self, next: u64, rows: Vec<Row>) {
        self.next = self.next.max(next);
        let mut start = self.rows.len();
        for row in rows {
            let v = row.id();
            if self.by_version.contains_key(&v) {
                continue;
            }
            self.by_version.insert(v, self.rows.len());
            self.rows.push(row);
        }
        while start < self.rows.len() {
            let change = self.rows[start].change;
            let mut end = start + 1;
            while end < self.rows.len() && change.is_some() && self.rows[end].change == change {
                end += 1;
            }
            self.settle(start, end);
            start = end;
        }
    }

    /// Applies rows `start..end` (one change): what they take away first,
    /// then what they leave (an exchange swaps two paths).
    fn settle(&mut self, start: usize, end: usize) {
        let mut gone = Vec::new();
        let mut set = Vec::new();
        for i in start..end {
            let row = &self.rows[i];
            match row.op {
                Op::Prune | Op::Void => {}
                Op::Delete | Op::Expire => gone.push((row.path.clone(), Some(i))),
                _ if !leaves_content(row) => gone.push((row.path.clone(), Some(i))),
                _ => {
                    if let Some(from) = &row.from {
                        gone.push((from.clone(), None));
                    }
                    set.push((row.path.clone(), i));
                }
            }
        }
        for (path, deleted) in gone {
            if set.iter().any(|(p, _)| *p == path) {
                continue;
            }
            self.live.remove(&path);
            if let Some(i) = deleted {
                self.gone.insert(path, i);
            }
        }
        for (path, i) in set {
            self.gone.remove(&path);
            self.live.insert(path, i);
        }
    }

    /// The rows about one path, newest first, followed back through renames.
    pub fn file_rows(&self, path: &str) -> Vec<&Row> {
        let mut tracked = vec![path.to_string()];
        let mut out = Vec::new();
        for row in self.rows.iter().rev() {
            if matches!(row.op, Op::Prune | Op::Void) || !tracked.contains(&row.path) {
                continue;
            }
            if let Some(from) = &row.from {
                if !tracked.contains(from) {
                    tracked.push(from.clone());
                }
            }
            out.push(row);
        }
        out
    }
}

/// Which versions a person marked reviewed ("keep" or "undo" on the page),
/// kept in the data dir's `.memfs/reviewed.json`.
pub struct Reviewed {
    file: PathBuf,
    pub versions: BTreeSet<u64>,
}

impl Reviewed {
    pub fn load(state_dir: &std::path::Path) -> Reviewed {
        let file = state_dir.join("reviewed.json");
        let versions = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Reviewed { file, versions }
    }

    pub fn mark(&mut self, version: u64) -> Result<(), super::PageError> {
        self.mark_all(&[version])
    }

    /// Marks many at once (one write of the file).
    pub fn mark_all(&mut self, versions: &[u64]) -> Result<(), super::PageError> {
        self.versions.extend(versions.iter().copied());
        let text = serde_json::to_vec(&self.versions).expect("a set of numbers serializes");
        let tmp = self.file.with_extension("json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.file))
            .map_err(super::PageError::Reviewed)
    }
}

/// Whether a row is a change for a person to review: an agent's (through
/// the tool, on any door) or an application's (through the API).
pub fn is_agents_change(row: &Row) -> bool {
    matches!(row.actor.kind.as_str(), "agent" | "api")
        && !matches!(row.op, Op::Prune | Op::Void | Op::Found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::row::example as row;

    #[test]
    fn live_and_deleted_files_follow_the_rows() {
        let mut m = Model::default();
        m.take(
            5,
            vec![
                row(1, 1, Op::Create, "/memories/a", None),
                row(2, 2, Op::Create, "/memories/b", None),
                row(3, 3, Op::Rename, "/memories/c", Some("/memories/a")),
                row(4, 4, Op::Delete, "/memories/b", None),
            ],
        );
        assert_eq!(m.live.keys().collect::<Vec<_>>(), ["/memories/c"]);
        assert_eq!(m.gone.keys().collect::<Vec<_>>(), ["/memories/b"]);
        assert_eq!(
            m.file_rows("/memories/c")
                .iter()
                .map(|r| r.id())
                .collect::<Vec<_>>(),
            [3, 1]
        );
        // Rows seen before are not taken twice.
        m.take(5, vec![row(4, 4, Op::Delete, "/memories/b", None)]);
        assert_eq!(m.rows.len(), 4);
    }
}
