//! Agents and people at once: threads of tool calls on persistent socket
//! connections and processes writing through the mount, on the same file and
//! on their own. No update is lost, nothing deadlocks, and the final state is
//! exactly what the operations imply, in memory, through the mount and on disk.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use common::{skip_without_fuse, Mounted};
use serde_json::{json, Value};

const TOOL_THREADS: usize = 4;
const PEOPLE: usize = 4;
/// Operations per thread or process per round; CI runs `ROUNDS` rounds.
const OPS: usize = 40;
const ROUNDS: usize = 3;

fn tool_worker(sock: std::path::PathBuf, t: usize, round: usize) {
    let conn = UnixStream::connect(sock).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    let mut call = |input: Value| -> Value {
        conn.write_all(format!("{input}\n").as_bytes()).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let own = format!("/memories/r{round}/tool-{t}.md");
    let r = call(json!({"command": "create", "path": own, "file_text": "count: 0\n"}));
    assert_eq!(r["is_error"], false, "{r}");
    for k in 0..OPS {
        // The shared file: an insert at the top from every thread.
        let r = call(
            json!({"command": "insert", "path": format!("/memories/r{round}/shared.md"), "insert_line": 0, "insert_text": format!("tool-{t}-{k}\n")}),
        );
        assert_eq!(r["is_error"], false, "{r}");
        // Its own file: a read-modify-write chain that must never skip a step.
        let r = call(
            json!({"command": "str_replace", "path": own, "old_str": format!("count: {k}\n"), "new_str": format!("count: {}\n", k + 1)}),
        );
        assert_eq!(r["is_error"], false, "{r}");
    }
}

#[test]
fn agents_and_people_at_once() {
    if skip_without_fuse("agents_and_people_at_once") {
        return;
    }
    let mut m = Mounted::start(&[]);
    for round in 0..ROUNDS {
        let dir = m.at(&format!("r{round}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("shared.md"), "").unwrap();
        let (done, finished) = mpsc::channel();
        let sock = m.data.path().join(".memfs/sock");
        let mut workers = Vec::new();
        for t in 0..TOOL_THREADS {
            let (sock, done) = (sock.clone(), done.clone());
            workers.push(std::thread::spawn(move || {
                tool_worker(sock, t, round);
                done.send(()).unwrap();
            }));
        }
        let mut people = Vec::new();
        for p in 0..PEOPLE {
            // Appends to the shared file (O_APPEND) and rewrites of its own file.
            let script = format!(
                "for k in $(seq 0 {last}); do echo person-{p}-$k >> shared.md; printf 'person %s wrote %s\\n' {p} $k > person-{p}.txt; done",
                last = OPS - 1
            );
            people.push(
                Command::new("sh")
                    .arg("-c")
                    .arg(script)
                    .current_dir(&dir)
                    .spawn()
                    .unwrap(),
            );
        }
        // A hang is a failure, not a stuck CI run.
        for _ in 0..TOOL_THREADS {
            finished
                .recv_timeout(Duration::from_secs(120))
                .expect("a tool thread is stuck: deadlock?");
        }
        for w in workers {
            w.join().unwrap();
        }
        for mut p in people {
            assert!(p.wait().unwrap().success());
        }

        let shared = std::fs::read_to_string(dir.join("shared.md")).unwrap();
        let lines: Vec<&str> = shared.lines().collect();
        let want: BTreeSet<String> = (0..TOOL_THREADS)
            .flat_map(|t| (0..OPS).map(move |k| format!("tool-{t}-{k}")))
            .chain((0..PEOPLE).flat_map(|p| (0..OPS).map(move |k| format!("person-{p}-{k}"))))
            .collect();
        assert_eq!(
            lines.len(),
            want.len(),
            "no line lost or doubled:\n{shared}"
        );
        assert_eq!(
            lines.iter().map(|l| l.to_string()).collect::<BTreeSet<_>>(),
            want
        );
        for t in 0..TOOL_THREADS {
            let own = std::fs::read_to_string(dir.join(format!("tool-{t}.md"))).unwrap();
            assert_eq!(own, format!("count: {OPS}\n"));
        }
        for p in 0..PEOPLE {
            let own = std::fs::read_to_string(dir.join(format!("person-{p}.txt"))).unwrap();
            assert_eq!(own, format!("person {p} wrote {}\n", OPS - 1));
        }
        // The agent sees the same shared file as the people do.
        let view = m.view(&format!("/memories/r{round}/shared.md"));
        assert_eq!(view.lines().count(), want.len() + 1);
    }
    let (status, err) = m.stop();
    assert!(status.success(), "{err}");
    for round in 0..ROUNDS {
        let on_disk = std::fs::read_to_string(m.on_disk(&format!("r{round}/shared.md"))).unwrap();
        assert_eq!(on_disk.lines().count(), (TOOL_THREADS + PEOPLE) * OPS);
    }
}
