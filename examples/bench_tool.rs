//! The tool-call benchmark's in-process door: the memfs library, called from
//! Rust on a data dir, with its real durability. Prints one JSON object.
//!
//!   cargo run --release --example bench_tool -- DATA_DIR ROUNDS THREADS
//!
//! Per round and thread: view a 4 KiB file, view a directory of 1,000 files,
//! create, str_replace, insert, rename, delete. THREADS = 1 is one call at a
//! time (how a single agent calls); more threads call at once (parallel tool
//! calls, several agents), sharing group commits.

use std::collections::BTreeMap;
use std::time::Instant;

use memfs::{Memory, Options};
use serde_json::{json, Value};

fn body() -> String {
    (0..110)
        .map(|i| format!("line {i:04} of a memory file, some words\n"))
        .collect::<String>()[..4096]
        .to_string()
}

fn setup(memory: &Memory) {
    let b = body();
    memory.call(&json!({"command": "create", "path": "/memories/seed.md", "file_text": b}));
    for i in 0..1000 {
        memory.call(&json!({"command": "create", "path": format!("/memories/dir/f{i:04}.md"), "file_text": "x\n"}));
    }
}

fn round(t: usize, r: usize) -> Vec<(&'static str, Value)> {
    let (p, q) = (
        format!("/memories/w{t}/f{r}.md"),
        format!("/memories/w{t}/g{r}.md"),
    );
    vec![
        (
            "view_file",
            json!({"command": "view", "path": "/memories/seed.md"}),
        ),
        (
            "view_dir",
            json!({"command": "view", "path": "/memories/dir"}),
        ),
        (
            "create",
            json!({"command": "create", "path": p, "file_text": body()}),
        ),
        (
            "str_replace",
            json!({"command": "str_replace", "path": p, "old_str": "line 0042", "new_str": "LINE 42"}),
        ),
        (
            "insert",
            json!({"command": "insert", "path": p, "insert_line": 3, "insert_text": "inserted\n"}),
        ),
        (
            "rename",
            json!({"command": "rename", "old_path": p, "new_path": q}),
        ),
        ("delete", json!({"command": "delete", "path": q})),
    ]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, rounds, threads] = args.as_slice() else {
        eprintln!("usage: bench_tool DATA_DIR ROUNDS THREADS");
        std::process::exit(2);
    };
    let (rounds, threads): (usize, usize) = (rounds.parse().unwrap(), threads.parse().unwrap());
    // MEMFS_BENCH_NO_HISTORY=1: the peer without history, for its cost.
    let options = Options {
        no_history: std::env::var("MEMFS_BENCH_NO_HISTORY").is_ok_and(|v| v == "1"),
        ..Options::default()
    };
    let memory = Memory::open(dir, options).expect("open the data dir");
    setup(&memory);
    let journal_bytes = || -> u64 {
        std::fs::read_dir(std::path::Path::new(dir).join(".memfs/journal"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    let journal_before = journal_bytes();
    let before = memory.persist_stats();
    let start = Instant::now();
    let samples: Vec<Vec<(&'static str, f64, u64)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let memory = &memory;
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut bytes = journal_bytes();
                    for r in 0..rounds {
                        for (kind, input) in round(t, r) {
                            let began = Instant::now();
                            let result = memory.call(&input);
                            let took = began.elapsed().as_secs_f64() * 1e6;
                            assert!(!result.is_error, "{kind}: {result:?}");
                            // (One call at a time: what the journal grew by is
                            // this call's frame.)
                            let now = journal_bytes();
                            out.push((kind, took, now.saturating_sub(bytes)));
                            bytes = now;
                        }
                    }
                    out
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let after = memory.persist_stats();
    let mut kinds: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut frames: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (kind, us, frame) in samples.into_iter().flatten() {
        kinds.entry(kind).or_default().push(us);
        frames.entry(kind).or_default().push(frame);
    }
    let ops: usize = kinds.values().map(Vec::len).sum();
    let per_kind: BTreeMap<&str, Value> = kinds
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            let mut f = frames.remove(k).unwrap_or_default();
            f.sort_unstable();
            let frame = f.get(f.len() / 2).copied().unwrap_or(0);
            (k, json!({"p50_us": percentile(&v, 0.5), "p99_us": percentile(&v, 0.99), "n": v.len(), "frame_bytes": frame}))
        })
        .collect();
    // What the journal wrote for the rounds' changes (its frames' bytes).
    let journal = journal_bytes().saturating_sub(journal_before);
    let out = json!({
        "door": "library", "threads": threads, "ops": ops, "seconds": seconds, "ops_per_s": ops as f64 / seconds,
        "changes": after.changes - before.changes, "barriers": after.barriers - before.barriers, "kinds": per_kind,
        "journal_bytes": journal,
    });
    println!("{out}");
}
