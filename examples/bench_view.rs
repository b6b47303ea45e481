//! Profiling aid: many views of a 4 KiB file and of a 1,000-entry directory
//! through the library, in memory only (no data dir), for perf or callgrind.
//!
//!   cargo run --release --example bench_view -- N
use std::sync::Arc;
use std::time::Instant;

use memfs::store::{Limits, Store, Tree};
use memfs::tool::{Tool, ToolConfig};
use serde_json::json;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let tool = Tool::new(
        Arc::new(Store::new(Tree::new(), Limits::default(), None)),
        ToolConfig::default(),
    );
    let body: String = (0..110)
        .map(|i| format!("line {i:04} of a memory file, some words\n"))
        .collect::<String>()[..4096]
        .to_string();
    tool.call(&json!({"command": "create", "path": "/memories/seed.md", "file_text": body}));
    for i in 0..1000 {
        tool.call(&json!({"command": "create", "path": format!("/memories/dir/f{i:04}.md"), "file_text": "x\n"}));
    }
    let file = json!({"command": "view", "path": "/memories/seed.md"});
    let dir = json!({"command": "view", "path": "/memories/dir"});
    let t = Instant::now();
    for _ in 0..n {
        assert!(!tool.call(&file).is_error);
    }
    let per_file = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for _ in 0..n / 10 {
        assert!(!tool.call(&dir).is_error);
    }
    let per_dir = t.elapsed().as_secs_f64() * 1e6 / (n / 10) as f64;
    println!("view 4 KiB file: {per_file:.2} us; view 1,000-entry dir: {per_dir:.1} us");
}
