//! The floor a shared store's tool write is measured against: one bare
//! single-row `INSERT` and its `COMMIT`, one at a time, on one connection,
//! with the same client crate memfs uses. Prints the latencies (µs) as JSON.
//!
//! usage: pg_floor URL [N]
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: pg_floor URL [N]");
    let n: usize = args.next().map_or(500, |s| s.parse().expect("a count"));
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connects");
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS floor_rows (id BIGINT PRIMARY KEY, body TEXT)")
        .expect("table");
    let base: i64 = client
        .query_one("SELECT COALESCE(MAX(id), 0) FROM floor_rows", &[])
        .expect("max")
        .get(0);
    let mut us = Vec::with_capacity(n);
    for i in 0..n as i64 {
        let t = Instant::now();
        let mut tx = client.transaction().expect("begin");
        tx.execute(
            "INSERT INTO floor_rows (id, body) VALUES ($1, $2)",
            &[&(base + i + 1), &"count=1;"],
        )
        .expect("insert");
        tx.commit().expect("commit");
        us.push(t.elapsed().as_micros() as u64);
    }
    println!("{}", serde_json::json!({ "us": us }));
}
