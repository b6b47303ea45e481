//! What memfs says on stderr while it works: -v, -vv, -q, RUST_LOG and
//! `--log-format json`, through the real binary.

mod common;

use std::io::Read;

use common::*;

/// The log lines of a stderr (the person-facing `memfs: ...` lines aside).
fn log_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| !l.starts_with("memfs: "))
        .collect()
}

/// A copy through the mount that hits the file-size limit only sees EFBIG;
/// at -v the log names the limit and its flag, once however many copies hit it.
#[test]
fn a_limit_hit_through_the_mount_names_the_flag_once() {
    let test = "a_limit_hit_through_the_mount_names_the_flag_once";
    if skip_without_fuse(test) {
        return;
    }
    let mut m = Mounted::start(&["-v", "--max-file-size", "64K"]);
    let big = vec![b'x'; 200 << 10];
    for name in ["one.bin", "two.bin", "three.bin"] {
        let err = std::fs::write(m.at(name), &big).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
    }
    let (status, stderr) = m.stop();
    assert!(status.success(), "{stderr}");
    let said: Vec<&str> = log_lines(&stderr)
        .into_iter()
        .filter(|l| l.contains("--max-file-size"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("WARN") && said[0].contains("over the limit of 65536 bytes per file"),
        "{stderr}"
    );
}

/// `--log-format json -vv`: every log line is one JSON object, and a failed
/// request says its errno inside the request's span.
#[test]
fn json_log_lines_carry_level_errno_and_request() {
    let test = "json_log_lines_carry_level_errno_and_request";
    if skip_without_fuse(test) {
        return;
    }
    let mut m = Mounted::start(&["-vv", "--log-format", "json"]);
    assert!(std::fs::metadata(m.at("no-such-file")).is_err());
    let (status, stderr) = m.stop();
    assert!(status.success(), "{stderr}");
    let lines = log_lines(&stderr);
    assert!(!lines.is_empty(), "{stderr}");
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        events.iter().any(|e| e["level"] == "DEBUG"
            && e["fields"]["errno"] == libc::ENOENT
            && e["span"]["op"] == "lookup"),
        "{stderr}"
    );
}

/// Without -v nothing but warnings; with -q not even those; RUST_LOG wins.
#[test]
fn quiet_default_and_rust_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flags: &[&str], rust_log: Option<&str>| {
        let mut c = memfs();
        c.arg("--data").arg(dir.path()).args(flags);
        c.args(["exec", r#"{"command":"view","path":"/memories/missing"}"#]);
        match rust_log {
            Some(v) => c.env("RUST_LOG", v),
            None => c.env_remove("RUST_LOG"),
        };
        let out = c.output().unwrap();
        String::from_utf8(out.stderr).unwrap()
    };
    assert_eq!(run(&[], None), "");
    assert_eq!(run(&["-q"], None), "");
    let debug = run(&["-vv"], None);
    assert!(
        debug.contains("refused: The path /memories/missing does not exist"),
        "{debug}"
    );
    assert!(debug.contains("tool{command=\"view\""), "{debug}");
    assert_eq!(run(&["-vv"], Some("memfs=error")), "");
}

/// A disk that refuses every write is said once, not once per refused
/// change, and its recovery once.
#[test]
fn a_refusing_disk_is_logged_once_and_its_recovery_once() {
    if !can_mount() {
        skip(
            "a_refusing_disk_is_logged_once_and_its_recovery_once",
            "needs root to mount a tmpfs",
        );
        return;
    }
    let fs = Tmpfs::mount("4m");
    let data = fs.path().join("data");
    let mut s = Server::start(&data, &["-v"]);
    s.call(r#"{"command":"create","path":"/memories/a.md","file_text":"one\n"}"#);
    fs.remount("ro");
    for i in 0..20 {
        let r = s.call(&format!(
            r#"{{"command":"create","path":"/memories/b{i}.md","file_text":"two\n"}}"#
        ));
        assert_eq!(r["is_error"], true, "{r}");
    }
    fs.remount("rw");
    let r = s.call(r#"{"command":"create","path":"/memories/c.md","file_text":"three\n"}"#);
    assert_eq!(r["is_error"], false, "{r}");
    let mut stderr = String::new();
    let mut err = s.child.stderr.take().unwrap();
    assert!(s.finish().success());
    err.read_to_string(&mut stderr).unwrap();
    let refused = stderr.matches("the disk refuses writes").count();
    let again = stderr.matches("the disk takes writes again").count();
    assert_eq!((refused, again), (1, 1), "{stderr}");
}
