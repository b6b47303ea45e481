//! What credential screening costs an agent's write: the same creates and
//! edits with `--secrets allow` and `refuse`, in memory (the CPU cost alone)
//! and with the persister (the real write path, durable before answering).
//! usage: bench_secrets [ROUNDS]
use std::sync::Arc;
use std::time::Instant;

use memfs::guard::SecretsPolicy;
use memfs::store::{Limits, Store, Tree};
use memfs::tool::{Tool, ToolConfig};
use memfs::{Memory, Options};
use serde_json::json;

fn body() -> String {
    (0..110)
        .map(|i| {
            format!("line {i:04} of a memory file: the deploy uses the staging token bucket\n")
        })
        .collect()
}

fn round(call: &dyn Fn(&serde_json::Value), r: usize, body: &str) {
    let p = format!("/memories/w/f{r}.md");
    call(&json!({"command": "create", "path": p, "file_text": body}));
    call(
        &json!({"command": "str_replace", "path": p, "old_str": "line 0042", "new_str": "LINE 42"}),
    );
    call(&json!({"command": "insert", "path": p, "insert_line": 3, "insert_text": "inserted\n"}));
}

fn time(call: &dyn Fn(&serde_json::Value), rounds: usize) -> f64 {
    let body = body();
    let start = Instant::now();
    for r in 0..rounds {
        round(call, r, &body);
    }
    start.elapsed().as_secs_f64() / (rounds * 3) as f64 * 1e6
}

fn config(secrets: SecretsPolicy) -> ToolConfig {
    ToolConfig {
        secrets,
        ..ToolConfig::default()
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    println!("| write path | allow (µs/write) | refuse (µs/write) | refuse / allow |");
    println!("|---|---|---|---|");
    let in_memory = |secrets| {
        let store = Arc::new(Store::new(Tree::new(), Limits::default(), None));
        let tool = Tool::new(store, config(secrets));
        time(&|v| assert!(!tool.call(v).is_error), rounds)
    };
    let (a, r) = (
        in_memory(SecretsPolicy::Allow),
        in_memory(SecretsPolicy::Refuse),
    );
    println!(
        "| in memory (8 KiB files) | {a:.1} | {r:.1} | {:.3}x |",
        r / a
    );
    let durable = |secrets| {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            tool: config(secrets),
            ..Options::default()
        };
        let memory = Memory::open(dir.path(), options).unwrap();
        time(&|v| assert!(!memory.call(v).is_error), rounds / 10)
    };
    let (a, r) = (
        durable(SecretsPolicy::Allow),
        durable(SecretsPolicy::Refuse),
    );
    println!(
        "| durable, one at a time (8 KiB files) | {a:.1} | {r:.1} | {:.3}x |",
        r / a
    );
}
