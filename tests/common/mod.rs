//! Helpers for driving the real `memfs` binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use serde_json::Value;

pub fn memfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memfs"))
}

/// `memfs --data DIR exec JSON` with extra flags; returns exit code and stdout JSON.
pub fn exec_with(dir: &Path, flags: &[&str], input: &str) -> (i32, Value, String) {
    let out: Output = memfs()
        .arg("--data")
        .arg(dir)
        .args(flags)
        .arg("exec")
        .arg(input)
        .output()
        .expect("run memfs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), value, stderr)
}

pub fn exec(dir: &Path, input: &str) -> (i32, Value) {
    let (code, value, _) = exec_with(dir, &[], input);
    (code, value)
}

pub fn content(v: &Value) -> &str {
    v["content"]
        .as_str()
        .unwrap_or_else(|| panic!("text content in {v}"))
}

/// A running `memfs serve --stdio`.
pub struct Server {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    pub fn start(dir: &Path, flags: &[&str]) -> Server {
        let mut child = memfs()
            .arg("--data")
            .arg(dir)
            .args(flags)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memfs serve");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
        }
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next answer line, or `None` at end of output.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line).unwrap() {
            0 => None,
            _ => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad answer {line:?}: {e}")),
            ),
        }
    }

    pub fn call(&mut self, line: &str) -> Value {
        self.send(line);
        self.recv().expect("an answer")
    }

    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this process may mount filesystems (root, with `mount` present).
pub fn can_mount() -> bool {
    rustix::process::geteuid().is_root() && Path::new("/bin/mount").exists()
}

/// A small tmpfs mounted for a test, unmounted on drop.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs");
        Tmpfs { dir }
    }

    pub fn remount(&self, opts: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(self.dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount {opts}");
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
