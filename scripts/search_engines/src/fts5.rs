//! SQLite FTS5 (rusqlite, bundled) behind the spike's `Engine`: a contentless
//! table given the analyzed words, and a table of paths by rowid.

use crate::{analyze, Clause, Engine};
use rusqlite::{params, Connection};
use std::path::Path;

pub struct Fts5 {
    db: Connection,
}

fn columns(path: &str, text: &str) -> (String, String, String) {
    let join = |v: Vec<analyze::Part>| v.into_iter().map(|p| p.text).collect::<Vec<_>>().join(" ");
    let (pb, _) = analyze::analyze(path);
    let (b, i) = analyze::analyze(text);
    (join(pb), join(b), join(i))
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn expr(c: &Clause) -> String {
    match c {
        Clause::Word(parts, Some(i)) => {
            format!(
                "({{body path_text}} : {} OR idents : {})",
                quote(&parts.join(" ")),
                quote(i)
            )
        }
        Clause::Word(parts, None) | Clause::Phrase(parts) => {
            format!("{{body path_text}} : {}", quote(&parts.join(" ")))
        }
        Clause::Prefix(parts) => format!("{{body path_text}} : {} *", quote(&parts.join(" "))),
    }
}

impl Fts5 {
    pub fn create(dir: &Path) -> Self {
        let db = Connection::open(dir.join("index.sqlite")).unwrap();
        db.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             CREATE TABLE docs(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL);
             CREATE VIRTUAL TABLE t USING fts5(path_text, body, idents, content='',
               contentless_delete=1, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_./-:'\");",
        )
        .unwrap();
        Fts5 { db }
    }

    fn put(&self, path: &str, text: &str) {
        let (p, b, i) = columns(path, text);
        let id: Option<i64> = self
            .db
            .query_row("SELECT id FROM docs WHERE path = ?1", [path], |r| r.get(0))
            .ok();
        let id = match id {
            Some(id) => {
                self.db
                    .execute("DELETE FROM t WHERE rowid = ?1", [id])
                    .unwrap();
                id
            }
            None => {
                self.db
                    .execute("INSERT INTO docs(path) VALUES (?1)", [path])
                    .unwrap();
                self.db.last_insert_rowid()
            }
        };
        self.db
            .execute(
                "INSERT INTO t(rowid, path_text, body, idents) VALUES (?1, ?2, ?3, ?4)",
                params![id, p, b, i],
            )
            .unwrap();
    }
}

impl Engine for Fts5 {
    fn add_all(&mut self, docs: &[(String, String)]) {
        self.db.execute_batch("BEGIN").unwrap();
        for (p, t) in docs {
            self.put(p, t);
        }
        self.db.execute_batch("COMMIT").unwrap();
    }

    fn update(&mut self, path: &str, text: &str) {
        self.db.execute_batch("BEGIN").unwrap();
        self.put(path, text);
        self.db.execute_batch("COMMIT").unwrap();
    }

    fn search(&mut self, clauses: &[Clause], limit: usize) -> Vec<String> {
        let m: Vec<String> = clauses.iter().map(expr).collect();
        let mut st = self
            .db
            .prepare_cached(
                "SELECT docs.path FROM t JOIN docs ON docs.id = t.rowid WHERE t MATCH ?1
                 ORDER BY bm25(t, 2.0, 1.0, 2.0) LIMIT ?2",
            )
            .unwrap();
        let rows = st
            .query_map(params![m.join(" AND "), limit as i64], |r| {
                r.get::<_, String>(0)
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    }
}
