//! The stores' records in memory: by id, and in the order a listing walks
//! them (newest first: creation time, then id), all stores and the ones not
//! archived apart. A page of a listing costs what it returns (plus what its
//! filters skip), never a pass over every store: with 100,000 stores, a
//! token that reaches one pays for one.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// A store's own record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMeta {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub archived_at: Option<String>,
    /// Versions the API redacted: when, and with which token (the journal
    /// marks a version redacted; it does not say when or by whom).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redactions: BTreeMap<u64, (String, String)>,
    /// The tag of the API request that made it (a retry of that request
    /// is answered with this store, not a second one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// A store's place in a listing: `(created_at, id)`, newest first.
type Key = (Reverse<String>, Reverse<String>);

fn key_of(created_at: &str, id: &str) -> Key {
    (Reverse(created_at.to_string()), Reverse(id.to_string()))
}

/// One page of stores to list.
pub struct Query<'a> {
    /// Start after this `(created_at, id)` (a page's cursor).
    pub after: Option<(String, String)>,
    pub include_archived: bool,
    pub created_gte: Option<SystemTime>,
    pub created_lte: Option<SystemTime>,
    pub limit: usize,
    /// Only these stores (a token's own), or every store (an admin's).
    pub only: Option<&'a [String]>,
}

#[derive(Default)]
pub struct Metas {
    by_id: BTreeMap<String, StoreMeta>,
    all: BTreeSet<Key>,
    unarchived: BTreeSet<Key>,
}

impl Metas {
    pub fn get(&self, id: &str) -> Option<&StoreMeta> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Adds or replaces a store's record.
    pub fn insert(&mut self, meta: StoreMeta) {
        self.remove(&meta.id);
        let key = key_of(&meta.created_at, &meta.id);
        if meta.archived_at.is_none() {
            self.unarchived.insert(key.clone());
        }
        self.all.insert(key);
        self.by_id.insert(meta.id.clone(), meta);
    }

    pub fn remove(&mut self, id: &str) -> Option<StoreMeta> {
        let old = self.by_id.remove(id)?;
        let key = key_of(&old.created_at, &old.id);
        self.all.remove(&key);
        self.unarchived.remove(&key);
        Some(old)
    }

    /// The store the API request tagged `tag` made, if any.
    pub fn made_by(&self, tag: &str) -> Option<&StoreMeta> {
        self.by_id
            .values()
            .find(|m| m.request.as_deref() == Some(tag))
    }

    /// The `(created_at, id)` a page cursor that is a store's id stands for.
    pub fn position_of(&self, id: &str) -> Option<(String, String)> {
        self.by_id
            .get(id)
            .map(|m| (m.created_at.clone(), m.id.clone()))
    }

    /// One page, and whether more follow.
    pub fn page(&self, q: &Query) -> (Vec<StoreMeta>, bool) {
        let fits = |m: &StoreMeta| {
            (q.include_archived || m.archived_at.is_none())
                && q.created_lte
                    .is_none_or(|l| parse_time(&m.created_at).is_some_and(|t| t <= l))
        };
        let too_old = |m: &StoreMeta| {
            q.created_gte
                .is_some_and(|g| parse_time(&m.created_at).is_none_or(|t| t < g))
        };
        let mut page = Vec::new();
        let mut more = false;
        let mut take = |m: &StoreMeta| -> bool {
            if !fits(m) {
                return true;
            }
            if page.len() == q.limit {
                more = true;
                return false;
            }
            page.push(m.clone());
            true
        };
        match q.only {
            Some(ids) => {
                let mut mine: Vec<(Key, &StoreMeta)> = ids
                    .iter()
                    .filter_map(|id| self.by_id.get(id))
                    .map(|m| (key_of(&m.created_at, &m.id), m))
                    .filter(|(k, _)| after(q, k))
                    .collect();
                mine.sort_by(|a, b| a.0.cmp(&b.0));
                mine.dedup_by(|a, b| a.0 == b.0);
                for (_, m) in mine {
                    if too_old(m) || !take(m) {
                        break;
                    }
                }
            }
            None => {
                let index = match q.include_archived {
                    true => &self.all,
                    false => &self.unarchived,
                };
                let start = match &q.after {
                    Some((c, id)) => Bound::Excluded(key_of(c, id)),
                    None => Bound::Unbounded,
                };
                for (_, Reverse(id)) in index.range((start, Bound::Unbounded)) {
                    let Some(m) = self.by_id.get(id) else {
                        continue;
                    };
                    if too_old(m) || !take(m) {
                        break;
                    }
                }
            }
        }
        (page, more)
    }
}

/// Whether `key` comes after the query's cursor.
fn after(q: &Query, key: &Key) -> bool {
    match &q.after {
        None => true,
        Some((c, id)) => *key > key_of(c, id),
    }
}

/// An RFC 3339 time in UTC, as the API takes it.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let utc = text
        .strip_suffix("+00:00")
        .map(|t| format!("{t}Z"))
        .unwrap_or_else(|| text.to_string());
    humantime::parse_rfc3339_weak(utc.trim_end_matches('Z')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str, created: &str, archived: bool) -> StoreMeta {
        StoreMeta {
            id: id.into(),
            name: id.into(),
            description: String::new(),
            metadata: BTreeMap::new(),
            created_at: created.into(),
            updated_at: created.into(),
            archived_at: archived.then(|| created.to_string()),
            redactions: BTreeMap::new(),
            request: None,
        }
    }

    fn ids(page: &[StoreMeta]) -> Vec<&str> {
        page.iter().map(|m| m.id.as_str()).collect()
    }

    fn query(limit: usize) -> Query<'static> {
        Query {
            after: None,
            include_archived: false,
            created_gte: None,
            created_lte: None,
            limit,
            only: None,
        }
    }

    #[test]
    fn pages_walk_newest_first_each_store_once_archived_apart() {
        let mut m = Metas::default();
        for i in 0..50 {
            let t = format!("2026-12-04T10:{:02}:00.000Z", i % 30);
            m.insert(meta(&format!("s{i:02}"), &t, i % 7 == 0));
        }
        m.insert(meta("s03", "2026-12-04T11:00:00.000Z", false)); // replaced: newest now
        assert_eq!(m.len(), 50);
        let mut seen = Vec::new();
        let mut q = query(7);
        loop {
            let (page, more) = m.page(&q);
            seen.extend(page.iter().map(|p| p.id.clone()));
            if !more {
                break;
            }
            let last = page.last().unwrap();
            q.after = Some((last.created_at.clone(), last.id.clone()));
        }
        let live: Vec<&StoreMeta> = {
            let mut v: Vec<&StoreMeta> = m
                .by_id
                .values()
                .filter(|s| s.archived_at.is_none())
                .collect();
            v.sort_by(|a, b| (&b.created_at, &b.id).cmp(&(&a.created_at, &a.id)));
            v
        };
        assert_eq!(seen, live.iter().map(|s| s.id.clone()).collect::<Vec<_>>());
        assert_eq!(seen[0], "s03");
        q = query(100);
        q.include_archived = true;
        assert_eq!(m.page(&q).0.len(), 50);
        m.remove("s03");
        assert_eq!(m.page(&q).0.len(), 49);
    }

    #[test]
    fn a_tokens_own_stores_and_the_time_filters_page_the_same_way() {
        let mut m = Metas::default();
        for i in 0..10 {
            m.insert(meta(
                &format!("s{i}"),
                &format!("2026-12-04T10:0{i}:00.000Z"),
                false,
            ));
        }
        let mine = vec!["s2".to_string(), "s7".into(), "s5".into(), "gone".into()];
        let mut q = query(2);
        q.only = Some(&mine);
        let (page, more) = m.page(&q);
        assert_eq!((ids(&page), more), (vec!["s7", "s5"], true));
        q.after = m.position_of("s5");
        let (page, more) = m.page(&q);
        assert_eq!((ids(&page), more), (vec!["s2"], false));
        let mut q = query(100);
        q.created_gte = parse_time("2026-12-04T10:03:00Z");
        q.created_lte = parse_time("2026-12-04T10:06:00+00:00");
        assert_eq!(ids(&m.page(&q).0), vec!["s6", "s5", "s4", "s3"]);
    }
}
