//! Helpers for driving the real `memfs` binary.
#![allow(dead_code)]

pub mod model;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use serde_json::{json, Value};

/// The binary under test: this build's, or the one `MEMFS_TEST_BIN` names
/// (to show that a test fails on an earlier binary).
pub fn memfs() -> Command {
    match std::env::var_os("MEMFS_TEST_BIN") {
        Some(bin) => Command::new(bin),
        None => Command::new(env!("CARGO_BIN_EXE_memfs")),
    }
}

/// `memfs --data DIR ARGS...`: exit code, stdout, stderr.
pub fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = memfs().arg("--data").arg(dir).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every row of the history, `memfs log --json --all`.
pub fn log_rows(dir: &Path) -> Vec<Value> {
    let (code, out, err) = run(dir, &["log", "--json", "--all"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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

/// `memfs --data DIR FLAGS exec -` with the command on stdin.
pub fn exec_stdin(dir: &Path, flags: &[&str], input: &Value) -> (i32, Value, String) {
    let mut child = memfs()
        .arg("--data")
        .arg(dir)
        .args(flags)
        .args(["exec", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        value,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
        Server::start_with_env(dir, flags, &[])
    }

    /// [`Server::start`] with these variables in memfs' environment.
    pub fn start_with_env(dir: &Path, flags: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = memfs()
            .envs(env.iter().copied())
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

/// `scripts/check.sh`, the quick check: nothing mounted, whoever runs it.
fn quick() -> bool {
    std::env::var("MEMFS_QUICK").is_ok_and(|v| v == "1")
}

/// Whether this process may mount filesystems (root, with `mount` present).
pub fn can_mount() -> bool {
    !quick() && rustix::process::geteuid().is_root() && Path::new("/bin/mount").exists()
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

/// Whether FUSE mounts can be made here (root or fusermount3, and /dev/fuse).
pub fn can_fuse() -> bool {
    !quick()
        && Path::new("/dev/fuse").exists()
        && (rustix::process::geteuid().is_root() || Path::new("/usr/bin/fusermount3").exists())
}

/// Prints why a mount test did not run; returns true when it must be skipped.
pub fn skip_without_fuse(test: &str) -> bool {
    if can_fuse() {
        return false;
    }
    skip(test, "/dev/fuse is not usable here")
}

/// Says that `test` cannot run here and returns true, so that it is skipped
/// on a developer's machine; under `CI=true` a test never passes by
/// skipping, so this fails it instead.
pub fn skip(test: &str, why: &str) -> bool {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} must run under CI=true, but {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// `memfs --data DIR checkpoint`, when a memfs owns DIR (its socket
/// answers): the plain files current and on disk when it returns.
pub fn checkpoint(dir: &Path) {
    if std::os::unix::net::UnixStream::connect(dir.join(".memfs/sock")).is_err() {
        return;
    }
    let out = memfs()
        .arg("--data")
        .arg(dir)
        .arg("checkpoint")
        .output()
        .expect("run memfs checkpoint");
    assert!(
        out.status.success(),
        "memfs checkpoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `memfs mount` running on a fresh data dir and mount point.
pub struct Mounted {
    pub data: tempfile::TempDir,
    pub mnt: tempfile::TempDir,
    pub child: Option<Child>,
}

impl Mounted {
    pub fn start(flags: &[&str]) -> Mounted {
        let data = tempfile::tempdir().unwrap();
        let mnt = tempfile::tempdir().unwrap();
        let mut m = Mounted {
            data,
            mnt,
            child: None,
        };
        m.spawn(flags);
        m
    }

    /// A fresh data dir and mount point, with nothing running yet.
    pub fn unstarted() -> Mounted {
        Mounted {
            data: tempfile::tempdir().unwrap(),
            mnt: tempfile::tempdir().unwrap(),
            child: None,
        }
    }

    /// (Re)starts memfs on this data dir and mount point; waits until mounted.
    pub fn spawn(&mut self, flags: &[&str]) {
        self.spawn_wrapped(&[] as &[String], flags)
    }

    /// [`Mounted::start`] with memfs' environment set as `env` says.
    pub fn start_with_env(flags: &[&str], env: &[(&str, &str)]) -> Mounted {
        let mut m = Mounted::unstarted();
        m.spawn_in(&[] as &[String], flags, env);
        m
    }

    /// Like [`Mounted::spawn`], with memfs run by `wrapper` (e.g. strace and
    /// its options; the memfs command line follows them).
    pub fn spawn_wrapped(&mut self, wrapper: &[impl AsRef<std::ffi::OsStr>], flags: &[&str]) {
        self.spawn_in(wrapper, flags, &[])
    }

    fn spawn_in(
        &mut self,
        wrapper: &[impl AsRef<std::ffi::OsStr>],
        flags: &[&str],
        env: &[(&str, &str)],
    ) {
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program.as_ref());
                c.args(args).arg(env!("CARGO_BIN_EXE_memfs"));
                c
            }
            None => memfs(),
        };
        let child = command
            .envs(env.iter().copied())
            .arg("--data")
            .arg(self.data.path())
            .arg("mount")
            .arg(self.mnt.path())
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memfs mount");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        // Ready: the socket answers (a stale socket file refuses) and the mount
        // point is a mount that answers (a stale mount says ENOTCONN). A stat
        // of a stale mount's root can still succeed from the kernel's
        // attribute cache, so the mount is asked to list itself.
        let ready = |m: &Mounted| {
            std::os::unix::net::UnixStream::connect(m.data.path().join(".memfs/sock")).is_ok()
                && std::fs::read_dir(m.mnt.path()).is_ok()
                && memfs::fuse::mountpoint::is_mount_point(m.mnt.path())
        };
        while !ready(self) {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(
                    self.child.as_mut().unwrap().stderr.as_mut().unwrap(),
                    &mut err,
                );
                panic!("memfs mount exited with {status}: {err}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the mount did not appear"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A path inside the mount.
    pub fn at(&self, rel: &str) -> std::path::PathBuf {
        self.mnt.path().join(rel)
    }

    /// The file as the data dir holds it on disk. The plain files are a
    /// checkpoint the journal runs ahead of: while memfs runs, they are
    /// brought up to date first (`memfs checkpoint`, as a person would).
    pub fn on_disk(&self, rel: &str) -> std::path::PathBuf {
        checkpoint(self.data.path());
        self.data.path().join("memories").join(rel)
    }

    /// A tool call through `memfs exec` (which reaches the daemon's socket).
    pub fn tool(&self, input: &str) -> Value {
        let (_, v) = exec(self.data.path(), input);
        v
    }

    /// The text of a tool `view`.
    pub fn view(&self, path: &str) -> String {
        let v = self.tool(&format!(r#"{{"command":"view","path":"{path}"}}"#));
        content(&v).to_string()
    }

    /// SIGTERM, then the exit status and stderr.
    pub fn stop(&mut self) -> (std::process::ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&child),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let status = child.wait().unwrap();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
        (status, err)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if memfs::fuse::mountpoint::is_mount_point(self.mnt.path()) {
            memfs::fuse::mountpoint::lazy_unmount(self.mnt.path());
        }
    }
}

/// How many cases a property test runs: `var` in the environment when set
/// (a longer run of that one test), else its CI size `ci` times
/// `MEMFS_PROPTEST_SCALE` (1 unless set: `MEMFS_PROPTEST_SCALE=10` runs
/// every property test at ten times its CI size). Which cases are drawn is
/// `PROPTEST_RNG_SEED` (`scripts/test.sh` fixes it; see README "Tests").
pub fn cases(var: &str, ci: u32) -> u32 {
    if let Some(n) = std::env::var(var).ok().and_then(|n| n.parse().ok()) {
        return n;
    }
    let scale: u32 = std::env::var("MEMFS_PROPTEST_SCALE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    ci.saturating_mul(scale.max(1))
}

/// The history after a restart tells exactly what is on disk: replaying
/// its rows gives every file with its content, and no change needed a
/// `found` row (every change memfs made has its own version, every version
/// its change).
pub fn history_matches_disk(dir: &Path) -> Result<(), String> {
    let out = memfs()
        .arg("--data")
        .arg(dir)
        .args(["log", "--json", "--all"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    rows.reverse();
    let mut live = std::collections::BTreeMap::new();
    for row in &rows {
        let path = row["path"].as_str().unwrap().to_string();
        match row["op"].as_str().unwrap() {
            "found" => return Err(format!("a change without its version: {row}")),
            // Retention's own row: no file's.
            "prune" => {}
            "delete" | "expire" => {
                live.remove(&path);
            }
            "rename" | "overwrite" if row["from"].is_string() => {
                live.remove(row["from"].as_str().unwrap());
                live.insert(path, row["sha256"].as_str().unwrap().to_string());
            }
            _ => {
                live.insert(path, row["sha256"].as_str().unwrap().to_string());
            }
        }
    }
    let on_disk: std::collections::BTreeMap<String, String> = disk_state(dir)
        .into_iter()
        .filter(|(_, text)| text != "<dir>")
        .map(|(rel, text)| {
            (
                format!("/memories/{rel}"),
                memfs::digest::sha256_hex(text.as_bytes()),
            )
        })
        .collect();
    if live != on_disk {
        return Err(format!(
            "the history says {live:?}, the disk holds {on_disk:?}"
        ));
    }
    Ok(())
}

/// Every file under `dir/memories` with its text, and every directory.
pub fn disk_state(dir: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = fs::read_dir(at)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.push((rel, "<dir>".into()));
                walk(root, &path, out);
            } else {
                out.push((rel, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let root = dir.join("memories");
    let mut out = Vec::new();
    if root.exists() {
        walk(&root, &root, &mut out);
    }
    out
}

/// A `memfs mcp` with its handshake done.
pub struct Mcp {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Mcp {
    pub fn start(dir: &Path, name: &str) -> Mcp {
        Mcp::start_with(dir, name, &[])
    }

    /// [`Mcp::start`] with memfs flags before `mcp`.
    pub fn start_with(dir: &Path, name: &str, flags: &[&str]) -> Mcp {
        let mut child = memfs()
            .arg("--data")
            .arg(dir)
            .args(flags)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut mcp = Mcp {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
        };
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": name, "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        writeln!(
            mcp.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        mcp
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{message}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// A memory-tool call: its text and whether it is an error.
    pub fn tool(&mut self, arguments: Value) -> (String, bool) {
        let answer = self.request(
            "tools/call",
            json!({"name": "memory", "arguments": arguments}),
        );
        let result = &answer["result"];
        (
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            result["isError"].as_bool().unwrap(),
        )
    }

    pub fn finish(self) -> std::process::ExitStatus {
        let Mcp {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        child.wait().unwrap()
    }
}

/// `memfs web` beside the owner of `dir`, logged in: its base URL's
/// address and the session's cookie.
pub struct Page {
    child: std::process::Child,
    addr: String,
    /// The instance's own path (`/p/KEY`), before every page's.
    base: String,
    cookie: String,
}

impl Page {
    pub fn start(dir: &Path) -> Page {
        let mut child = memfs()
            .arg("--data")
            .arg(dir)
            .arg("web")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
        let url = line.trim().strip_prefix("http://").expect("the page's URL");
        let (addr, rest) = url.split_once('/').unwrap();
        let (base, login) = rest.split_once("/login").expect("a login link");
        let mut page = Page {
            child,
            addr: addr.to_string(),
            base: format!("/{base}"),
            cookie: String::new(),
        };
        let (head, _) = page.get(&format!("/login{login}"));
        let cookie = head
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .expect("a session cookie");
        page.cookie = cookie.split(';').next().unwrap().to_string();
        page
    }

    /// POST a form (`application/x-www-form-urlencoded` `body`) to `path`:
    /// the response's head and body.
    pub fn post(&self, path: &str, body: &str) -> (String, String) {
        let head = format!(
            "POST {}{path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.base,
            self.addr,
            self.cookie,
            body.len()
        );
        self.send(&head)
    }

    /// GET `path`: the response's head and body.
    pub fn get(&self, path: &str) -> (String, String) {
        let request = format!(
            "GET {}{path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
            self.base, self.addr, self.cookie
        );
        self.send(&request)
    }

    fn send(&self, request: &str) -> (String, String) {
        let mut conn = std::net::TcpStream::connect(&self.addr).unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
        let (head, body) = got.split_once("\r\n\r\n").unwrap_or((&got, ""));
        (head.to_ascii_lowercase(), body.to_string())
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's resident memory, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A minimal HTTP/1.1 exchange with a server: the status and the body.
pub fn http(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    use std::io::Read;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// An admin token of the stores root `root` (`memfs token create --admin`).
pub fn admin_token(root: &Path) -> String {
    let out = memfs()
        .arg("--stores")
        .arg(root)
        .args(["token", "create", "--admin", "--name", "t"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `memfs --stores ROOT serve --http` on a free port, with `env` set: the
/// server and its address.
pub fn http_server(root: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut child = memfs()
        .arg("--stores")
        .arg(root)
        .args(["serve", "--http", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server said where it listens")
            .unwrap();
        if let Some(at) = line.find("on http://") {
            let rest = &line[at + "on http://".len()..];
            break rest
                .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
                .next()
                .unwrap()
                .to_string();
        }
    };
    // Keep reading its log, so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}
