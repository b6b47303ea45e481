//! `memfs import --git REPO`: a git repository's history, oldest first
//! along the first parents (a merge is the change it brought to the main
//! line), read with the `git` program: one `git log` for the commits and
//! what each changed, one `git cat-file --batch` for the contents.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// One file a commit changed.
pub struct Change {
    /// `A`, `M`, `T` or `D` (renames come as a delete and an add).
    pub status: char,
    /// The new mode (`100644`, `120000` for a symlink, `160000` for a submodule).
    pub mode: String,
    pub blob: String,
    /// Relative to the repository's top (a name that is not UTF-8: its
    /// bytes, in the error).
    pub path: Result<String, std::string::FromUtf8Error>,
}

/// Why a repository's history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Run(#[source] std::io::Error),
    #[error("{} is not a git repository with history memfs can read: {said}", .repo.display())]
    NotARepository {
        repo: std::path::PathBuf,
        said: String,
    },
    #[error("git log said something memfs cannot read")]
    Log,
    #[error("git's {0}")]
    Pipe(&'static str),
    #[error("git cat-file: {0}")]
    CatFile(#[source] std::io::Error),
    #[error("git cat-file said {0}")]
    CatFileSaid(String),
}

pub struct GitCommit {
    pub id: String,
    /// `Name <email>`.
    pub author: String,
    /// RFC 3339 (the author's date).
    pub authored: String,
    pub changes: Vec<Change>,
}

/// Settings a repository's own config (or one it includes) could use to
/// run a program, or to change what `log` and `cat-file` print: each is
/// set on the command line, which wins over every config file. A
/// repository someone hands over runs no code of its own here.
const NEUTRAL: &[&str] = &[
    // Programs git may start.
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "pager.log=false",
    "pager.cat-file=false",
    "core.sshCommand=false",
    "core.alternateRefsCommand=",
    "core.askPass=",
    "credential.helper=",
    "diff.external=",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "gpg.ssh.defaultKeyCommand=",
    "log.showSignature=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "maintenance.auto=false",
    "gc.auto=0",
    // What `log` prints.
    "log.showRoot=true",
    "log.decorate=false",
    "log.mailmap=false",
    "log.follow=false",
    "i18n.logOutputEncoding=UTF-8",
    "color.ui=false",
    "color.diff=false",
    "diff.relative=false",
    "diff.renames=false",
    "diff.orderFile=/dev/null",
    "diff.ignoreSubmodules=none",
    "core.abbrev=no",
];

/// Variables of memfs' own environment that would steer git elsewhere.
const UNSET: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_TRACE",
    "GIT_GRAFT_FILE",
];

/// `git -C repo` with the repository's config neutralised ([`NEUTRAL`]),
/// no system or global config, no pager, no prompt, no lazy fetch of a
/// partial clone's objects and no replace refs.
fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    for name in UNSET {
        c.env_remove(name);
    }
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_NO_LAZY_FETCH", "1")
        // (Over every protocol setting a repository's config may make, as
        // `protocol.ext.allow`; and for a git older than 2.45, which does
        // not know GIT_NO_LAZY_FETCH, a partial clone's fetch of a missing
        // object then reaches no transport.)
        .env("GIT_ALLOW_PROTOCOL", "none")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .arg("--no-pager");
    for setting in NEUTRAL {
        c.arg("-c").arg(setting);
    }
    c.arg("-C").arg(repo);
    c
}

/// The commits of `rev` along its first parents, oldest first, each with
/// what it changed against its first parent.
pub fn commits(repo: &Path, rev: &str) -> Result<Vec<GitCommit>, GitError> {
    let out = git(repo)
        .args([
            "log",
            "--first-parent",
            "--reverse",
            "--no-renames",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-show-signature",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-mailmap",
            "--root",
            "--encoding=UTF-8",
            "--format=%x01%H%x00%an <%ae>%x00%aI%x00%cI%x00",
            rev,
            "--",
        ])
        .output()
        .map_err(GitError::Run)?;
    if !out.status.success() {
        return Err(GitError::NotARepository {
            repo: repo.to_path_buf(),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    parse(&out.stdout)
}

/// `git log -z --raw` with the format above, read field by field in
/// order (a path is whatever follows a change's `:` field, so a path
/// holding any byte is never taken for the next commit).
fn parse(out: &[u8]) -> Result<Vec<GitCommit>, GitError> {
    let mut fields = out.split(|&b| b == 0).map(|f| {
        let start = f.iter().position(|&b| b != b'\n').unwrap_or(f.len());
        &f[start..]
    });
    let mut commits: Vec<GitCommit> = Vec::new();
    while let Some(field) = fields.next() {
        if let Some(id) = field.strip_prefix(b"\x01") {
            let text =
                |f: Option<&[u8]>| String::from_utf8_lossy(f.unwrap_or_default()).into_owned();
            let (author, authored) = (text(fields.next()), text(fields.next()));
            let committed = text(fields.next());
            commits.push(GitCommit {
                id: String::from_utf8_lossy(id).into_owned(),
                author: known_author(author),
                authored: known_time(authored, committed),
                changes: Vec::new(),
            });
            continue;
        }
        let Some(meta) = field.strip_prefix(b":") else {
            continue;
        };
        let path = fields.next().unwrap_or_default();
        let meta = String::from_utf8_lossy(meta);
        let parts: Vec<&str> = meta.split(' ').collect();
        let (Some(commit), [_, mode, _, blob, status]) = (commits.last_mut(), &parts[..]) else {
            return Err(GitError::Log);
        };
        commit.changes.push(Change {
            status: status.chars().next().unwrap_or('?'),
            mode: mode.to_string(),
            blob: blob.to_string(),
            path: String::from_utf8(path.to_vec()),
        });
    }
    Ok(commits)
}

/// The author as git printed it, or `unknown` for an author line git
/// could not read (it prints ` <>`).
fn known_author(author: String) -> String {
    match author.trim() {
        "" | "<>" => UNKNOWN.to_string(),
        _ => author,
    }
}

/// Who a commit's author line that git cannot read is recorded as.
pub const UNKNOWN: &str = "unknown";

/// The author's time, or, when git could not read it (it prints the
/// placeholder itself), the committer's; empty when neither is a time.
fn known_time(authored: String, committed: String) -> String {
    let is_time = |t: &str| t.len() >= 20 && t.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    if is_time(&authored) {
        authored
    } else if is_time(&committed) {
        committed
    } else {
        String::new()
    }
}

/// `git cat-file --batch`, one content at a time.
pub struct Blobs {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Blobs {
    pub fn open(repo: &Path) -> Result<Blobs, GitError> {
        let mut child = git(repo)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(GitError::Run)?;
        let input = child.stdin.take().ok_or(GitError::Pipe("stdin"))?;
        let output = BufReader::new(child.stdout.take().ok_or(GitError::Pipe("stdout"))?);
        Ok(Blobs {
            child,
            input,
            output,
        })
    }

    /// The content `blob`, read through `most + 1` bytes at most (a bigger
    /// one is read past, and said too big by its length).
    pub fn get(&mut self, blob: &str, most: u64) -> Result<(u64, Vec<u8>), GitError> {
        let fail = GitError::CatFile;
        writeln!(self.input, "{blob}").map_err(fail)?;
        self.input.flush().map_err(fail)?;
        let mut head = String::new();
        self.output.read_line(&mut head).map_err(fail)?;
        let size: u64 = head
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| GitError::CatFileSaid(head.trim().to_string()))?;
        let mut data = Vec::new();
        (&mut self.output)
            .take(size.min(most.saturating_add(1)))
            .read_to_end(&mut data)
            .map_err(fail)?;
        // The rest of a big one, and the newline after every content.
        std::io::copy(
            &mut (&mut self.output).take((size - data.len() as u64).saturating_add(1)),
            &mut std::io::sink(),
        )
        .map_err(fail)?;
        Ok((size, data))
    }
}

impl Drop for Blobs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
