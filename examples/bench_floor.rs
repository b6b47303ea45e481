//! The durability floor, as a peer for the tool-write benchmark: append a
//! record of a given size to one file and `fdatasync` it, one at a time, on
//! the disk of DIR. Nothing can make an append durable for less on that
//! disk; memfs' journal does this plus its own work. Prints one JSON object.
//!
//!   cargo run --release --example bench_floor -- DIR RECORD_BYTES COUNT

use std::io::Write;
use std::os::fd::AsFd;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, size, count] = args.as_slice() else {
        eprintln!("usage: bench_floor DIR RECORD_BYTES COUNT");
        std::process::exit(2);
    };
    let (size, count): (usize, usize) = (size.parse().unwrap(), count.parse().unwrap());
    std::fs::create_dir_all(dir).unwrap();
    let path = std::path::Path::new(dir).join("floor.log");
    let mut file = std::fs::File::create(&path).unwrap();
    let record = vec![b'r'; size];
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let began = Instant::now();
        file.write_all(&record).unwrap();
        rustix::fs::fdatasync(file.as_fd()).unwrap();
        samples.push(began.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{}",
        serde_json::json!({"record_bytes": size, "n": count, "p50_us": at(0.5), "p99_us": at(0.99)})
    );
    let _ = std::fs::remove_file(path);
}
