//! The engine spike of issue 36: builds an index of a corpus with one engine,
//! times the benchmark's queries, then times a change becoming searchable.
//!
//!     search_engines tantivy|fts5 CORPUS INDEX_DIR
//!
//! Prints one JSON object (figures in ms and bytes). Both engines get the same
//! analyzer (`analyze.rs`, in Rust) and the same query plan; FTS5 gets the
//! analyzed words as space-separated text, as it cannot take a tokenizer from
//! Rust without unsafe FFI.

// The analyzer memfs itself uses (its VERSION unused here).
#[allow(dead_code)]
#[path = "../../../crates/search/src/analyze.rs"]
mod analyze;
#[cfg(feature = "fts5")]
mod fts5;
#[cfg(feature = "tantivy")]
mod tv;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// One clause of a query: every clause must match.
#[derive(Debug, Clone)]
pub enum Clause {
    /// A word: its parts as a phrase, or (two parts or more) the identifier.
    Word(Vec<String>, Option<String>),
    Phrase(Vec<String>),
    /// A phrase whose last part is a prefix.
    Prefix(Vec<String>),
}

pub fn plan(query: &str) -> Vec<Clause> {
    let mut out = Vec::new();
    let mut rest = query.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap_or(r.len());
            let (b, _) = analyze::analyze(&r[..end]);
            out.push(Clause::Phrase(b.into_iter().map(|p| p.text).collect()));
            rest = r.get(end + 1..).unwrap_or("").trim_start();
            continue;
        }
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = rest[end..].trim_start();
        let (b, i) = analyze::analyze(word.trim_end_matches('*'));
        let parts: Vec<String> = b.into_iter().map(|p| p.text).collect();
        if parts.is_empty() {
            continue;
        }
        if word.ends_with('*') {
            out.push(Clause::Prefix(parts));
        } else {
            out.push(Clause::Word(parts, i.into_iter().next().map(|p| p.text)));
        }
    }
    out
}

pub trait Engine {
    fn add_all(&mut self, docs: &[(String, String)]);
    /// Replaces one document and makes the change searchable.
    fn update(&mut self, path: &str, text: &str);
    /// Paths of the best `limit` matches.
    fn search(&mut self, clauses: &[Clause], limit: usize) -> Vec<String>;
}

fn walk(root: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(root).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub const QUERIES: &[&str] = &[
    "deserializer",
    "the",
    "read_to_end",
    "HashMap",
    "serde_json::Value",
    "\"thread safe\"",
    "serial*",
    "mutex poison",
    "README",
    "unsafe impl Send",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: search_engines tantivy|fts5 CORPUS INDEX_DIR");
        std::process::exit(2);
    }
    let (corpus, dir) = (PathBuf::from(&args[2]), PathBuf::from(&args[3]));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    walk(&corpus, &mut files);
    let docs: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&corpus)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
            (rel, text)
        })
        .collect();
    let content: usize = docs.iter().map(|d| d.1.len()).sum();
    let rss_before = hwm_kib();

    let mut engine: Box<dyn Engine> = match args[1].as_str() {
        #[cfg(feature = "tantivy")]
        "tantivy" => Box::new(tv::Tantivy::create(&dir)),
        #[cfg(feature = "fts5")]
        "fts5" => Box::new(fts5::Fts5::create(&dir)),
        other => panic!("no engine {other}"),
    };
    let t = Instant::now();
    engine.add_all(&docs);
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let index_bytes = dir_bytes(&dir);
    let rss_build = hwm_kib();

    let mut queries = Vec::new();
    for q in QUERIES {
        let clauses = plan(q);
        let hits = engine.search(&clauses, 20);
        let mut times = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            let h = engine.search(&clauses, 20);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(h.len(), hits.len());
        }
        queries.push(format!(
            "{{\"q\":{:?},\"hits\":{},\"top\":{:?},\"p50\":{:.3},\"p99\":{:.3}}}",
            q,
            hits.len(),
            hits.first().cloned().unwrap_or_default(),
            pct(&mut times, 0.5),
            pct(&mut times, 0.99)
        ));
    }

    // A change becoming searchable: one file rewritten, committed, found.
    let mut lag = Vec::new();
    for i in 0..100 {
        let (path, text) = &docs[(i * 97) % docs.len()];
        let marker = format!("zqxmarker{i}");
        let t = Instant::now();
        engine.update(path, &format!("{text}\n{marker}\n"));
        let found = engine.search(&plan(&marker), 5);
        lag.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(found, vec![path.clone()], "{marker}");
    }
    let mut after = Vec::new();
    let clauses = plan("mutex poison");
    for _ in 0..200 {
        let t = Instant::now();
        engine.search(&clauses, 20);
        after.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "{{\"engine\":{:?},\"files\":{},\"content_bytes\":{},\"build_ms\":{:.0},\"index_bytes\":{},\
         \"index_ratio\":{:.3},\"rss_kib_docs\":{},\"rss_kib_build\":{},\"rss_kib_end\":{},\
         \"update_ms_p50\":{:.2},\"update_ms_p99\":{:.2},\"after_updates_p50\":{:.3},\
         \"index_bytes_after_updates\":{},\"queries\":[{}]}}",
        args[1],
        docs.len(),
        content,
        build_ms,
        index_bytes,
        index_bytes as f64 / content as f64,
        rss_before,
        rss_build,
        hwm_kib(),
        pct(&mut lag.clone(), 0.5),
        pct(&mut lag, 0.99),
        pct(&mut after, 0.5),
        dir_bytes(&dir),
        queries.join(",")
    );
}
