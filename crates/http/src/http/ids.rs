//! Memory ids, derived from the history: a memory is a lineage of versions
//! that begins with a create and follows the file through its writes and
//! renames (whichever door made them: the API, the tool, the mount), so its
//! id stays the same when its path changes. The id is `mem_` and the number
//! of the version that began the lineage; a version's id is `memver_` and
//! its number.
//!
//! A rename onto an existing file (an editor saving through a temporary
//! file) keeps the lineage of the file it replaced: for the person it is a
//! save of that file. The index is rebuilt from the journal when a store
//! opens and brought up to date from the rows after the last one it saw.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::journal::{Cursor, History, Op, Refusal, Row};

/// A live memory as the index knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub lineage: u64,
    /// The version that holds its content now.
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    /// The sha256 of the content `version` recorded (none for a version
    /// whose content was redacted).
    pub sha256: Option<String>,
}

/// What an API request made, by its tag: the newest version it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub lineage: u64,
    pub version: u64,
    /// It deleted the memory.
    pub deleted: bool,
    /// When (RFC 3339).
    pub time: String,
}

/// The most request tags a store remembers (a retry comes within seconds
/// of its request; the oldest are forgotten first).
const REQUESTS_KEPT: usize = 1024;

#[derive(Debug, Default)]
pub struct IdIndex {
    /// What the latest API requests made, by their tags, and their order.
    requests: HashMap<String, Made>,
    request_order: VecDeque<String>,
    /// Where the journal was read up to.
    cursor: Option<Cursor>,
    /// Live memories by API path (`/notes/a.md`).
    live: BTreeMap<String, Entry>,
    /// Each live lineage's path.
    path_of: HashMap<u64, String>,
    /// Each version's lineage.
    lineage_of: HashMap<u64, u64>,
    /// When each lineage began.
    born: HashMap<u64, String>,
    /// The last rows applied (at most [`RECENT_KEPT`], in the journal's
    /// order), from which a listing of recent versions is answered (a
    /// cache's pull, a long poll) without reading the whole history.
    recent: VecDeque<Row>,
    /// Whether rows were let go from `recent` (else it holds all rows
    /// applied since the index was built).
    recent_cut: bool,
}

/// The most rows [`IdIndex::recent`] keeps.
const RECENT_KEPT: usize = 1024;

pub fn memory_id(lineage: u64) -> String {
    format!("mem_{lineage}")
}

pub fn version_id(version: u64) -> String {
    format!("memver_{version}")
}

fn number(text: &str, prefix: &str) -> Option<u64> {
    let digits = text.strip_prefix(prefix)?;
    (!digits.is_empty()
        && digits.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0')))
    .then(|| digits.parse().ok())
    .flatten()
}

/// The lineage a memory id names.
pub fn parse_memory_id(id: &str) -> Option<u64> {
    number(id, "mem_")
}

/// The version a version id names.
pub fn parse_version_id(id: &str) -> Option<u64> {
    number(id, "memver_")
}

/// A history path (`/memories/a.md`) as the API spells it (`/a.md`).
pub fn api_path(path: &str) -> Option<String> {
    path.strip_prefix("/memories")
        .filter(|rest| rest.starts_with('/') && rest.len() > 1)
        .map(str::to_string)
}

/// What one change does to the index: paths gone, paths set (path,
/// lineage or 0, version, row), each version's lineage, and the requests
/// that made versions (tag, version, a delete, time).
#[derive(Default)]
struct Planned<'r> {
    gone: Vec<String>,
    set: Vec<(String, u64, u64, &'r Row)>,
    lineages: Vec<(u64, Option<u64>)>,
    tagged: Vec<(&'r str, u64, bool, &'r str)>,
}

impl IdIndex {
    /// Applies the rows the history has past the newest one seen.
    pub fn sync(&mut self, history: &History) -> Result<(), Refusal> {
        let (rows, all) = history.rows_after(&mut self.cursor)?;
        if !all {
            // Each frame is read once: its rows are new, whatever their ids
            // (a batch can reach the journal after one with higher ids).
            self.apply(&rows);
            return Ok(());
        }
        // Everything the history has: start over (after a rewrite, the rows
        // are not the ones applied before), keeping the ids handed out.
        let cursor = self.cursor.take();
        let before = std::mem::take(self);
        self.cursor = cursor;
        self.apply(&rows);
        self.keep_ids_of(&before);
        Ok(())
    }

    /// After a rebuild: a memory keeps the id `before` gave it. A
    /// compaction that dropped a lineage's first versions would otherwise
    /// begin it at its oldest kept version, a new id for the same memory
    /// while clients hold the old one. A rebuilt lineage is a suffix of one
    /// `before` knew, so any version both hold names it.
    fn keep_ids_of(&mut self, before: &IdIndex) {
        let mut was: HashMap<u64, u64> = HashMap::new();
        for (version, lineage) in &self.lineage_of {
            match before.lineage_of.get(version) {
                Some(old) if old != lineage => {
                    was.entry(*lineage).or_insert(*old);
                }
                _ => {}
            }
        }
        if was.is_empty() {
            return;
        }
        for lineage in self.lineage_of.values_mut() {
            if let Some(old) = was.get(lineage) {
                *lineage = *old;
            }
        }
        for entry in self.live.values_mut() {
            if let Some(old) = was.get(&entry.lineage) {
                entry.lineage = *old;
                if let Some(born) = before.born.get(old) {
                    entry.created_at = born.clone();
                }
            }
        }
        for made in self.requests.values_mut() {
            if let Some(old) = was.get(&made.lineage) {
                made.lineage = *old;
            }
        }
        for (new, old) in &was {
            self.born.remove(new);
            if let Some(born) = before.born.get(old) {
                self.born.insert(*old, born.clone());
            }
        }
        self.path_of = self
            .live
            .iter()
            .map(|(path, e)| (e.lineage, path.clone()))
            .collect();
    }

    /// The rows applied lately, by id, if they hold every row newer than
    /// version `after`, or made at or after `since`: `None` when older
    /// rows may be needed (the whole history is read then).
    pub fn recent(
        &self,
        after: Option<u64>,
        since: Option<std::time::SystemTime>,
    ) -> Option<Vec<Row>> {
        let whole = match (self.recent_cut, self.recent.front()) {
            (false, _) => true,
            (true, None) => false,
            (true, Some(oldest)) => {
                after.is_some_and(|n| n >= oldest.id())
                    || since.is_some_and(|t| {
                        crate::http::metas::parse_time(&oldest.time).is_some_and(|o| o < t)
                    })
            }
        };
        if !whole {
            return None;
        }
        let mut rows: Vec<Row> = self.recent.iter().cloned().collect();
        rows.sort_by_key(Row::id);
        Some(rows)
    }

    /// Applies `rows` (oldest first), one change at a time.
    pub fn apply(&mut self, rows: &[Row]) {
        // (A rebuild applies the whole history: only its last rows are
        // copied.)
        let from = rows.len().saturating_sub(RECENT_KEPT);
        self.recent_cut |= from > 0;
        for row in &rows[from..] {
            self.recent.push_back(row.clone());
            if self.recent.len() > RECENT_KEPT {
                self.recent.pop_front();
                self.recent_cut = true;
            }
        }
        let mut start = 0;
        while start < rows.len() {
            let change = rows[start].change;
            let mut end = start + 1;
            while end < rows.len() && change.is_some() && rows[end].change == change {
                end += 1;
            }
            self.apply_change(&rows[start..end]);
            start = end;
        }
    }

    fn born(&mut self, version: u64, time: &str) -> u64 {
        self.born.insert(version, time.to_string());
        version
    }

    /// What one change (its rows) does to the index, worked out with every
    /// lookup seeing the index as it was before the change (an exchange
    /// swaps two lineages).
    fn plan<'r>(&self, rows: &'r [Row]) -> Planned<'r> {
        let before = |path: &str| self.live.get(path).map(|e| e.lineage);
        let mut plan = Planned::default();
        for row in rows {
            let v = row.id();
            if let Some(tag) = &row.actor.request {
                plan.tagged
                    .push((tag, v, matches!(row.op, Op::Delete), &row.time));
            }
            let Some(path) = api_path(&row.path) else {
                continue;
            };
            let from = row.from.as_deref().and_then(api_path);
            let lineage = match row.op {
                Op::Prune | Op::Void => continue,
                Op::Delete | Op::Expire => {
                    plan.gone.push(path.clone());
                    before(&path)
                }
                Op::Found if row.found_gone() => {
                    plan.gone.push(path.clone());
                    before(&path)
                }
                _ => {
                    let lineage = match &from {
                        Some(from) => {
                            plan.gone.push(from.clone());
                            let exchanged = row.is_exchanged();
                            match before(&path) {
                                Some(there) if !exchanged => Some(there),
                                _ => before(from),
                            }
                        }
                        None => before(&path),
                    };
                    plan.set.push((path, lineage.unwrap_or(0), v, row));
                    lineage
                }
            };
            plan.lineages.push((v, lineage));
        }
        plan
    }

    /// One change applied: its [`IdIndex::plan`] first, then paths gone,
    /// lineages, requests and paths set, in that order.
    fn apply_change(&mut self, rows: &[Row]) {
        let Planned {
            gone,
            set,
            lineages,
            tagged,
        } = self.plan(rows);
        let set_paths: Vec<String> = set.iter().map(|s| s.0.clone()).collect();
        for path in gone {
            if !set_paths.contains(&path) {
                if let Some(e) = self.live.remove(&path) {
                    self.path_of.remove(&e.lineage);
                }
            }
        }
        for (v, lineage) in &lineages {
            let lineage = lineage.unwrap_or(*v);
            self.lineage_of.insert(*v, lineage);
        }
        for (tag, version, deleted, time) in tagged {
            let lineage = self.lineage_of.get(&version).copied().unwrap_or(version);
            self.note_request(tag, lineage, version, deleted, time);
        }
        for (path, lineage, v, row) in set {
            self.set_live(path, lineage, v, row);
        }
    }

    /// `path` now holds version `v` of `lineage` (0: a new one, born now).
    fn set_live(&mut self, path: String, lineage: u64, v: u64, row: &Row) {
        let time = row.time.clone();
        let lineage = match lineage {
            0 => self.born(v, &time),
            l => l,
        };
        let created_at = self
            .born
            .get(&lineage)
            .cloned()
            .unwrap_or_else(|| time.clone());
        if let Some(old) = self.live.get(&path) {
            if old.lineage != lineage && self.path_of.get(&old.lineage) == Some(&path) {
                self.path_of.remove(&old.lineage);
            }
        }
        self.path_of.insert(lineage, path.clone());
        self.live.insert(
            path,
            Entry {
                lineage,
                version: v,
                created_at,
                updated_at: time,
                sha256: row.sha256.clone().filter(|_| !row.redacted),
            },
        );
    }

    fn note_request(&mut self, tag: &str, lineage: u64, version: u64, deleted: bool, time: &str) {
        let made = Made {
            lineage,
            version,
            deleted,
            time: time.to_string(),
        };
        if self.requests.insert(tag.to_string(), made).is_none() {
            self.request_order.push_back(tag.to_string());
            if self.request_order.len() > REQUESTS_KEPT {
                if let Some(oldest) = self.request_order.pop_front() {
                    self.requests.remove(&oldest);
                }
            }
        }
    }

    /// What the request tagged `tag` made (its newest version), if it is
    /// among the latest the store remembers.
    pub fn made_by(&self, tag: &str) -> Option<&Made> {
        self.requests.get(tag)
    }

    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.live.get(path)
    }

    /// The live path of lineage `lineage`.
    pub fn path_of(&self, lineage: u64) -> Option<&str> {
        self.path_of.get(&lineage).map(String::as_str)
    }

    pub fn lineage_of(&self, version: u64) -> Option<u64> {
        self.lineage_of.get(&version).copied()
    }

    /// Live memories at or after `from` (path order), for listings.
    pub fn live(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.live.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: u64, change: u64, op: Op, path: &str, from: Option<&str>) -> Row {
        let from = from.map(|f| format!("/memories{f}"));
        crate::journal::row::example(v, change, op, &format!("/memories{path}"), from.as_deref())
    }

    /// The last rows answer a listing of what is newer than a version they
    /// reach back to, and only that: past what they hold, `None` (the
    /// whole history is read).
    #[test]
    fn the_recent_rows_answer_only_for_what_they_hold_whole() {
        let mut ids = IdIndex::default();
        let rows: Vec<Row> = (1..=100)
            .map(|v| row(v, v, Op::Write, "/a.md", None))
            .collect();
        ids.apply(&rows);
        assert_eq!(
            ids.recent(Some(0), None).map(|r| r.len()),
            Some(100),
            "all kept: whole"
        );
        let more: Vec<Row> = (101..=1500)
            .map(|v| row(v, v, Op::Write, "/a.md", None))
            .collect();
        ids.apply(&more);
        let got = ids.recent(Some(1400), None).unwrap();
        assert_eq!(got.len(), RECENT_KEPT);
        assert!(got.iter().filter(|r| r.id() > 1400).count() == 100);
        assert_eq!(ids.recent(Some(10), None), None, "version 11 was let go");
        assert_eq!(ids.recent(None, None), None);
    }

    #[test]
    fn a_lineage_follows_writes_and_renames_and_ends_at_a_delete() {
        let mut ix = IdIndex::default();
        ix.apply(&[
            row(1, 1, Op::Create, "/a.md", None),
            row(2, 2, Op::Write, "/a.md", None),
            row(3, 3, Op::Rename, "/b/c.md", Some("/a.md")),
        ]);
        assert!(ix.entry("/a.md").is_none());
        let e = ix.entry("/b/c.md").unwrap();
        assert_eq!((e.lineage, e.version), (1, 3));
        assert_eq!(ix.path_of(1), Some("/b/c.md"));
        assert_eq!(e.created_at, "2026-12-02T00:00:01Z");
        ix.apply(&[row(4, 4, Op::Delete, "/b/c.md", None)]);
        assert!(ix.entry("/b/c.md").is_none());
        assert_eq!(ix.path_of(1), None);
        assert_eq!(ix.lineage_of(4), Some(1));
        // A new file at an old path is a new memory.
        ix.apply(&[row(5, 5, Op::Create, "/a.md", None)]);
        assert_eq!(ix.entry("/a.md").unwrap().lineage, 5);
    }

    #[test]
    fn a_save_through_a_temporary_file_keeps_the_saved_files_id() {
        let mut ix = IdIndex::default();
        ix.apply(&[
            row(1, 1, Op::Create, "/a.md", None),
            row(2, 2, Op::Create, "/.a.md.swp", None),
            row(3, 3, Op::Overwrite, "/a.md", Some("/.a.md.swp")),
        ]);
        assert_eq!(ix.entry("/a.md").unwrap().lineage, 1);
        assert!(ix.entry("/.a.md.swp").is_none());
        assert_eq!(ix.path_of(2), None);
    }

    #[test]
    fn an_exchange_swaps_two_ids() {
        let mut ix = IdIndex::default();
        ix.apply(&[
            row(1, 1, Op::Create, "/a", None),
            row(2, 2, Op::Create, "/b", None),
        ]);
        let mut x = row(3, 3, Op::Rename, "/b", Some("/a"));
        x.exchanged = true;
        let mut y = row(4, 3, Op::Rename, "/a", Some("/b"));
        y.exchanged = true;
        ix.apply(&[x, y]);
        assert_eq!(ix.entry("/b").unwrap().lineage, 1);
        assert_eq!(ix.entry("/a").unwrap().lineage, 2);
        assert_eq!(ix.path_of(1), Some("/b"));
    }

    #[test]
    fn a_rebuild_after_the_first_versions_were_dropped_keeps_every_id() {
        let created = [
            row(1, 1, Op::Create, "/a.md", None),
            row(2, 2, Op::Create, "/b.md", None),
        ];
        let later = [
            row(3, 3, Op::Write, "/a.md", None),
            row(4, 4, Op::Rename, "/c.md", Some("/b.md")),
        ];
        let mut before = IdIndex::default();
        before.apply(&created);
        before.apply(&later);
        // The compaction kept only each file's current version: rebuilt
        // from those, a.md would begin at 3 and c.md at 4.
        let mut rebuilt = IdIndex::default();
        let mut kept = later.clone();
        kept[1].op = Op::Create;
        kept[1].from = None;
        rebuilt.apply(&kept);
        assert_eq!(rebuilt.entry("/a.md").unwrap().lineage, 3);
        rebuilt.keep_ids_of(&before);
        let a = rebuilt.entry("/a.md").unwrap();
        assert_eq!((a.lineage, a.version), (1, 3));
        assert_eq!(a.created_at, "2026-12-02T00:00:01Z");
        assert_eq!(rebuilt.entry("/c.md").unwrap().lineage, 2);
        assert_eq!(rebuilt.path_of(1), Some("/a.md"));
        assert_eq!(rebuilt.path_of(2), Some("/c.md"));
        assert_eq!(rebuilt.path_of(3), None);
        assert_eq!(rebuilt.lineage_of(4), Some(2));
        // A memory made after the rebuild gets its own id.
        rebuilt.apply(&[row(5, 5, Op::Create, "/d.md", None)]);
        assert_eq!(rebuilt.entry("/d.md").unwrap().lineage, 5);
    }

    #[test]
    fn a_requests_tag_names_what_it_made_and_the_oldest_tags_are_forgotten() {
        let mut ix = IdIndex::default();
        let mut made = row(1, 1, Op::Create, "/a.md", None);
        made.actor.request = Some("t1".into());
        let mut moved = row(2, 2, Op::Rename, "/b.md", Some("/a.md"));
        moved.actor.request = Some("t2".into());
        let mut gone = row(3, 3, Op::Delete, "/b.md", None);
        gone.actor.request = Some("t3".into());
        ix.apply(&[made, moved]);
        assert_eq!(
            (
                ix.made_by("t1").unwrap().lineage,
                ix.made_by("t1").unwrap().version
            ),
            (1, 1)
        );
        assert_eq!(ix.made_by("t2").unwrap().version, 2);
        ix.apply(&[gone]);
        let d = ix.made_by("t3").unwrap();
        assert!(d.deleted && d.lineage == 1);
        for i in 0..REQUESTS_KEPT as u64 {
            let mut r = row(10 + i, 10 + i, Op::Create, &format!("/f{i}"), None);
            r.actor.request = Some(format!("x{i}"));
            ix.apply(&[r]);
        }
        assert!(
            ix.made_by("t1").is_none(),
            "the oldest tags are forgotten first"
        );
        assert!(ix.made_by("x0").is_some());
        assert_eq!(ix.requests.len(), REQUESTS_KEPT);
    }

    #[test]
    fn ids_parse_in_one_spelling_only() {
        assert_eq!(parse_memory_id("mem_12"), Some(12));
        assert_eq!(parse_memory_id("mem_012"), None);
        assert_eq!(parse_memory_id("mem_"), None);
        assert_eq!(parse_version_id("memver_7"), Some(7));
        assert_eq!(parse_version_id("mem_7"), None);
        assert_eq!(api_path("/memories/a/b"), Some("/a/b".into()));
        assert_eq!(api_path("/memories"), None);
    }
}
