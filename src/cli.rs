//! The command line: parsing sizes and options into [`memfs::Options`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use memfs::store::Limits;
use memfs::units::parse_size;

use crate::cli_error::CliError;
use memfs::{Options, ToolConfig};

#[derive(Parser, Debug)]
#[command(
    name = "memfs",
    version,
    about = "A backend for Claude's memory tool: one durable in-process tree of /memories."
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Cmd,
}

impl Cli {
    /// Parses the command line. A subcommand's `--help` lists its own
    /// options and points to `memfs --help` for the global ones (data dir,
    /// limits, output, ...), which every subcommand takes but which would
    /// otherwise repeat some forty lines under each.
    pub fn parse_args() -> Cli {
        use clap::{CommandFactory, FromArgMatches};
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        match Cli::command().try_get_matches_from(&args) {
            Ok(matches) => Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()),
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
                // The same help from a command whose options are not global
                // (so a subcommand's lists only its own); if that cannot
                // read the line (a global option before --help), the full one.
                let short = Cli::command()
                    .mut_args(|a| match a.is_global_set() {
                        true => a.global(false),
                        false => a,
                    })
                    .mut_subcommands(|s| {
                        s.after_help(
                            "Global options (--data, --cache, --stores, limits, output, --as, ...): memfs --help",
                        )
                    });
                match short.try_get_matches_from(&args) {
                    Err(help) if help.kind() == clap::error::ErrorKind::DisplayHelp => help.exit(),
                    _ => e.exit(),
                }
            }
            Err(e) => e.exit(),
        }
    }
}

#[derive(Args, Debug)]
pub struct Common {
    /// Say more on stderr: -v what memfs does (mounts, recoveries, limits
    /// hit, prunes, expiries), -vv every failed request with its cause, -vvv
    /// every request. RUST_LOG (e.g. `memfs=debug`) overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Output")]
    pub verbose: u8,
    /// Say only errors on stderr.
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = "Output"
    )]
    pub quiet: bool,
    /// How log lines look: `text` for people, `json` (one object per line) for services.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT",
        help_heading = "Output"
    )]
    pub log_format: LogFormat,
    /// The data dir; the memory lives in DIR/memories, as the Python SDK lays it out.
    #[arg(
        long,
        global = true,
        env = "MEMFS_DATA",
        default_value = "./memory",
        value_name = "DIR",
        help_heading = "Data"
    )]
    pub data: PathBuf,
    /// This host's copy of a shared store, when --data is a
    /// `postgres://USER@HOST:PORT/DB?store=NAME` URL: a data dir of its own
    /// (default ./memory-shared/HOST_PORT_DB_NAME). Hosts on one machine
    /// each need their own.
    #[arg(
        long,
        global = true,
        env = "MEMFS_CACHE",
        value_name = "DIR",
        help_heading = "Data"
    )]
    pub cache: Option<PathBuf>,
    /// The shared store --data names (set by `resolve`).
    #[arg(skip)]
    pub shared: Option<memfs::shared::Target>,
    /// The store over HTTP --data names (set by `resolve`).
    #[arg(skip)]
    pub remote: Option<memfs::remote::Options>,
    /// When --data is a store over HTTP
    /// (`https://HOST/v1/memory_stores/ID`): the environment variable its
    /// API key is in (never on the command line).
    #[arg(
        long,
        global = true,
        default_value = "ANTHROPIC_API_KEY",
        value_name = "VAR",
        help_heading = "Data"
    )]
    pub store_key_env: String,
    /// When --data is a store over HTTP: a file its API key is in, instead
    /// of the environment (what `claude-code enable --shared URL` keeps).
    #[arg(long, global = true, value_name = "FILE", help_heading = "Data")]
    pub store_key_file: Option<PathBuf>,
    /// When --data is a store over HTTP: how often it is asked what changed
    /// (seconds).
    #[arg(
        long,
        global = true,
        default_value_t = 2.0,
        value_name = "SECONDS",
        help_heading = "Data"
    )]
    pub pull_every: f64,
    /// Take a store over plain http:// on another machine (the key then
    /// crosses the network in clear); http:// to this machine is always taken.
    #[arg(long, global = true, help_heading = "Data")]
    pub insecure_http: bool,
    /// A stores root for `serve --http` and `token`: one store per data dir
    /// ROOT/STORE_ID, and the server's tokens in ROOT/.memfs.
    #[arg(
        long,
        global = true,
        env = "MEMFS_STORES",
        value_name = "ROOT",
        help_heading = "Data"
    )]
    pub stores: Option<PathBuf>,
    /// Largest file a write may leave (bytes, or with K, M, G).
    #[arg(long, global = true, default_value = "1M", value_parser = parse_size, value_name = "SIZE", help_heading = "Limits")]
    pub max_file_size: u64,
    /// Most bytes all files together may hold (bytes, or with K, M, G).
    #[arg(long, global = true, default_value = "256M", value_parser = parse_size, value_name = "SIZE", help_heading = "Limits")]
    pub max_store_size: u64,
    /// Most levels of directories below /memories (a file at /memories/a is at level 1).
    #[arg(long, global = true, default_value_t = Limits::default().max_depth, value_name = "LEVELS", help_heading = "Limits")]
    pub max_depth: usize,
    /// Most files and directories the whole memory may hold.
    #[arg(long, global = true, default_value_t = Limits::default().max_entries, value_name = "COUNT", help_heading = "Limits")]
    pub max_entries: usize,
    /// Most entries any one directory may hold.
    #[arg(long, global = true, default_value_t = Limits::default().max_dir_entries, value_name = "COUNT", help_heading = "Limits")]
    pub max_dir_entries: usize,
    /// What to do with a credential (an API key, a token, a private key, a
    /// password) in an agent's write: refuse the write, redact it, or allow it.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "refuse",
        help_heading = "What the agent may write"
    )]
    pub secrets: Secrets,
    /// The session's name, recorded with each of its changes (who did what).
    #[arg(
        long = "as",
        global = true,
        value_name = "NAME",
        help_heading = "Sessions"
    )]
    pub session: Option<String>,
    /// Seconds a socket client may take to send a whole line once it has
    /// started one (idle time between lines is not limited).
    #[arg(
        long,
        global = true,
        default_value_t = 30,
        value_name = "SECONDS",
        help_heading = "Sessions"
    )]
    pub client_timeout: u64,
    /// `create` on an existing file overwrites it (Claude's tool description
    /// says "creates or overwrites") instead of the reference error.
    #[arg(long, global = true, help_heading = "What the agent may write")]
    pub create_overwrites: bool,
    /// Also leave names matching this glob (`*`, `?`) out of the agent's
    /// listings; repeatable. Hidden names and node_modules always are.
    #[arg(
        long,
        global = true,
        value_name = "GLOB",
        help_heading = "What the agent sees"
    )]
    pub hide: Vec<String>,
    /// List editor artifacts (vim's 4913 probe, `*~` backups, `#*#` autosaves),
    /// which are left out by default.
    #[arg(long, global = true, help_heading = "What the agent sees")]
    pub show_editor_files: bool,
    /// How much history to keep: an age, a size of kept content, or both
    /// (`30d,256MiB`); older versions are dropped first, and the drop is logged.
    #[arg(
        long,
        global = true,
        default_value = "90d,1GiB",
        value_name = "AGE,SIZE",
        help_heading = "History"
    )]
    pub history_keep: memfs::journal::Keep,
    /// Keep no history (no versions, no content copies); what changes
    /// meanwhile is recorded as `found` by the next memfs that keeps it.
    #[arg(long, global = true, help_heading = "History")]
    pub no_history: bool,
    /// While serving, remove files nobody read or wrote for this long
    /// (90d, 12h, 30m); each removal is in the history, `memfs revert` brings it back.
    #[arg(long, global = true, value_parser = memfs::units::parse_duration, value_name = "DURATION", help_heading = "History")]
    pub expire_idle: Option<std::time::Duration>,
    /// Keep no search index (`DIR/.memfs/search`): `memfs search` and the
    /// doors' search then answer that there is none.
    #[arg(long, global = true, help_heading = "Search")]
    pub no_search: bool,
    /// Offer MCP hosts a second tool, `memory_search` (full-text search,
    /// read-only), beside `memory` (`memfs mcp`, and /mcp of serve --http).
    #[arg(long, global = true, help_heading = "Search")]
    pub search_tool: bool,
    /// How long one search may take, in milliseconds: a search still
    /// running then stops and answers what it found, saying it was cut.
    #[arg(long, global = true, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=600_000), value_name = "MS", help_heading = "Search")]
    pub search_deadline_ms: u64,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Runs one tool command (JSON) and prints its result.
    ///
    /// Runs one memory-tool command (a JSON object, or `-` to read it from
    /// stdin) and prints {"content": ..., "is_error": ...}. Exits 1 when the
    /// result is an error.
    Exec {
        /// The tool input, e.g. '{"command":"view","path":"/memories"}', or `-`
        /// to read it from stdin. Use `-` for anything private: a command's
        /// arguments are visible to every local user (ps, /proc/PID/cmdline).
        input: String,
        /// Print the result's text as text (an image result as its JSON),
        /// for people at a terminal; an error goes to stderr. Exit codes are the same.
        #[arg(long)]
        raw: bool,
    },
    /// Serves tool calls on the socket, and on stdio with --stdio.
    ///
    /// Serves tool calls as JSON lines on the socket DIR/.memfs/sock, and
    /// with --stdio on stdin/stdout too (with --mount, mounts the memory too).
    /// Without --stdio it runs until a signal, or until it has been idle for
    /// --idle-exit seconds.
    Serve {
        /// Read commands from stdin, one JSON object per line; answer on stdout.
        #[arg(long)]
        stdio: bool,
        /// Without --stdio: exit (writing everything out, releasing the data
        /// dir) after this many seconds with no socket client, no mount and
        /// no call; 0 never. The next door on the data dir starts a new owner.
        #[arg(long, default_value_t = 600, value_name = "SECONDS")]
        idle_exit: u64,
        /// On exit, print to stderr how many changes and disk barriers there were.
        #[arg(long)]
        stats: bool,
        /// Also mount the memory at this empty directory while serving.
        #[arg(long, value_name = "PATH")]
        mount: Option<PathBuf>,
        #[command(flatten)]
        mount_options: MountArgs,
        /// With --stores: serve every store of ROOT over HTTP at this
        /// address (e.g. 127.0.0.1:8700): the memory stores API at
        /// /v1/memory_stores, the memory tool over MCP at /mcp.
        #[arg(long, value_name = "ADDR", conflicts_with_all = ["stdio", "mount"])]
        http: Option<String>,
        #[command(flatten)]
        http_options: HttpArgs,
    },
    /// Serves a page for people: files, history, review.
    ///
    /// Serves a page for people on loopback: the memory's files, every
    /// version with its diff, the agent's changes to review (keep or undo),
    /// live. Prints a login link on stdout (valid 15 minutes; --link prints a
    /// fresh one for a running page). Works beside a running
    /// memfs (a mount, a server) as well as alone.
    Web {
        /// Where to listen (loopback only; port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        listen: String,
        /// Print a fresh login link for the page already running on this
        /// data dir (each link works for 15 minutes, as often as opened).
        #[arg(long)]
        link: bool,
    },
    /// Claude Code's auto memory on memfs: enable, disable, status.
    ///
    /// Claude Code's auto memory for the project in this directory, on a
    /// memfs mount (enable), back to a plain directory (disable), or which
    /// it is (status). Its writes are then versions for review and undo.
    ClaudeCode {
        #[command(subcommand)]
        action: ClaudeCodeCmd,
    },
    /// Manages the tokens of a stores root (--stores).
    ///
    /// Manages the tokens of a stores root (--stores): each names the
    /// stores it reaches and whether it may write. Works while a server runs.
    Token {
        #[command(subcommand)]
        action: TokenCmd,
    },
    /// Adds to a stores root (--stores) a mirror of a store over HTTP
    ///
    /// Adds to the stores root a store of the same id as the memory store at
    /// URL (`https://HOST/v1/memory_stores/ID`, Anthropic's API or another
    /// memfs server): its data dir is a cache of that store, filled now, and
    /// while `serve --http` has it open, every change made through this
    /// server is pushed there and every change made there is pulled here, as
    /// for `--data URL`. The key comes from --store-key-env (default
    /// ANTHROPIC_API_KEY) or --store-key-file, now and for the server that
    /// serves it. Prints the store's id; make a token for it with `memfs
    /// --stores ROOT token create --store ID`. Works while a server runs.
    Mirror {
        /// The store over HTTP: `https://HOST/v1/memory_stores/ID`.
        url: String,
        /// Its name in this root (default: its id).
        #[arg(long)]
        name: Option<String>,
    },
    /// Serves the memory tool to an MCP host on stdio.
    ///
    /// Serves the memory tool as an MCP server on stdin/stdout (for Claude
    /// Code, Claude Desktop or any MCP host); with --mount, mounts it too.
    Mcp {
        /// Also mount the memory at this empty directory while serving.
        #[arg(long, value_name = "PATH")]
        mount: Option<PathBuf>,
        #[command(flatten)]
        mount_options: MountArgs,
    },
    /// Lists files that hold what looks like a credential.
    ///
    /// Lists every file that holds what looks like a credential, with its
    /// kind and line (read from the data dir on disk, whether or not a memfs
    /// runs). Exits 1 when it finds any, 0 when none.
    Scan {
        /// A file or directory under /memories (default: all of it).
        #[arg(default_value = "/memories")]
        path: String,
        /// One JSON object per line: {"path", "line", "kind"}.
        #[arg(long)]
        json: bool,
    },
    /// Finds files by their words (full-text search).
    ///
    /// Finds the files whose text or path has every word of QUERY, best
    /// first (BM25), with their matched lines as `path:line: snippet`.
    /// Words match identifiers in part or whole (`http_reply` finds
    /// `parse_http_reply`, `HashMap` finds `hash_map`); `"a phrase"`,
    /// `pref*`, `-word` (leave out), `path:notes/` (only below it). Works
    /// whether or not a memfs owns the data dir. Exits 0 when it finds any,
    /// 1 when none, 2 on an error.
    Search {
        /// The words to find (quote a phrase for the shell). A word that
        /// begins with `-` goes after `--`, or in quotes with another:
        /// `memfs search 'thread -draft'`.
        #[arg(required = true, num_args = 1.., value_name = "QUERY")]
        query: Vec<String>,
        /// At most N files (default 20, at most 100).
        #[arg(short = 'n', long, value_name = "N")]
        limit: Option<usize>,
        /// Only files below this path (`/memories/...` or relative to it).
        #[arg(long, value_name = "PATH")]
        path: Option<String>,
        /// One JSON object: {"results": [{"path", "score", "lines": [{"line", "snippet", "highlights"}]}]}.
        #[arg(long)]
        json: bool,
        /// Also editor scratch files and hidden names, which are left out by default.
        #[arg(long)]
        all: bool,
    },
    /// Lists the history: every version, who made it.
    ///
    /// Lists the history, newest first: every version of every file, who
    /// made it (agent, person or memfs) and what it did. Works whether or not
    /// a memfs owns the data dir.
    Log {
        /// A file (also one that no longer exists) or a directory (its whole
        /// subtree); `/memories/...` or relative to it. Default: everything.
        path: Option<String>,
        /// One JSON object per line: version, time, actor, op, path, sha256, ...
        #[arg(long)]
        json: bool,
        /// Also list editor scratch files (swap files, `*~` backups) and
        /// hidden names, which are left out by default.
        #[arg(long)]
        all: bool,
        /// Only the newest N versions.
        #[arg(short = 'n', long = "max-count", value_name = "N")]
        max_count: Option<usize>,
    },
    /// Prints a file's bytes at VERSION.
    Show { version: String },
    /// A diff from VERSION to the file now, or to a second VERSION.
    Diff {
        version: String,
        against: Option<String>,
    },
    /// Makes a file what it was at VERSION, as a new version.
    ///
    /// Makes the file at VERSION's path what it was at VERSION (for a delete,
    /// an expiry or an overwrite: what it took away), as a new version.
    Revert { version: String },
    /// Takes back everything one actor or session changed.
    ///
    /// Takes back everything one actor or session changed (since a time):
    /// each file it touched made what it was before, as new versions.
    /// Refused, with nothing changed, where someone else changed a file
    /// since, unless --force.
    Undo {
        /// The actor as `memfs log` shows it (agent:mount(claude)), or a
        /// session's name (claude-code).
        #[arg(long, value_name = "WHO")]
        by: String,
        /// Only changes since then: a time (2026-12-04T10:00:00Z) or a
        /// duration ago (2h, 30m).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Also take back later changes by others to the same files.
        #[arg(long)]
        force: bool,
        /// Say what would be undone; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Erases VERSION's content from the history.
    ///
    /// Erases VERSION's content everywhere the history keeps it (every
    /// version with the same content); the rows stay, marked redacted.
    Redact {
        version: String,
        /// Also erase the version's path text from every row that names it.
        #[arg(long)]
        path: bool,
    },
    /// Writes the memory out: a git history, a directory, a tar.
    ///
    /// Writes the memory out: its history as a git repository (--git: one
    /// commit per version, authored by its actor; `git log -p`, `git
    /// blame`), or its files as they are now, in the SDK's layout: a
    /// directory (--dir OUT: OUT/memories/...) or a tar archive (--tar
    /// FILE, `-` for stdout), which `memfs import` takes back. Other tools'
    /// state (.git and the like) is left out.
    Export {
        /// A new (or empty) directory for the repository.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["dir", "tar", "to"], required_unless_present_any = ["dir", "tar", "to"])]
        git: Option<PathBuf>,
        /// A new (or empty) directory for the files.
        #[arg(long, value_name = "OUT", conflicts_with = "tar")]
        dir: Option<PathBuf>,
        /// A tar archive of the files (`-`: stdout).
        #[arg(long, value_name = "FILE", conflicts_with = "to")]
        tar: Option<PathBuf>,
        /// A memory stores API (`https://api.anthropic.com`, or another
        /// memfs's `serve --http`): the files become memories of --store,
        /// which must be empty.
        #[arg(long, value_name = "URL", conflicts_with = "dir", requires = "store")]
        to: Option<String>,
        /// With --to: the memory store to write into.
        #[arg(long, value_name = "ID")]
        store: Option<String>,
        /// With --to: the environment variable that holds the API's key.
        #[arg(long, default_value = "ANTHROPIC_API_KEY", value_name = "NAME")]
        key_env: String,
    },
    /// Brings files in: a tree, an archive, git history, an API.
    ///
    /// Brings files into the memory from a directory tree (a folder of
    /// notes, an Obsidian vault, Claude Code's auto memory, the SDK's layout
    /// with its memories/), a tar, .tar.gz or zip archive (read as a
    /// stream, never unpacked), a git repository's history (--git) or a
    /// memory stores API (URL --store ID). Each file becomes a version of yours; a
    /// file the memory already holds the same is left as it is, so running
    /// it again adds nothing. What it leaves out it lists, with why (too
    /// big, not text, a name the tool cannot address, a link or device,
    /// `..`, what looks like a credential). Works whether or not a memfs
    /// owns the data dir.
    Import {
        /// A directory, or a .tar, .tar.gz or .zip file (`-`: a tar or
        /// .tar.gz on stdin); with --git, a repository; with --store, the
        /// API's base URL.
        source: PathBuf,
        /// Where the files go.
        #[arg(long, default_value = "/memories", value_name = "PATH")]
        to: String,
        /// A path that holds other content gets the imported one as a new
        /// version (default: it is left as it is, and listed). With --git,
        /// the history's changes and deletions also reach files the import
        /// did not bring in (default: only those it brought).
        #[arg(long)]
        overwrite: bool,
        /// Say what would be done; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// No progress on stderr.
        #[arg(short, long)]
        quiet: bool,
        /// The outcome as one JSON object: counts, and what was left out with why.
        #[arg(long)]
        json: bool,
        /// With SOURCE an API's URL (`https://api.anthropic.com`, or another
        /// memfs's `serve --http`): the memory store to read.
        #[arg(long, value_name = "ID")]
        store: Option<String>,
        /// The environment variable that holds the API's key.
        #[arg(long, default_value = "ANTHROPIC_API_KEY", value_name = "NAME")]
        key_env: String,
        /// SOURCE is a git repository: its history along the first parents,
        /// oldest first, each commit's files versions by its author at its
        /// time (a later run brings in only the commits since). A file the
        /// memory holds with other content is left as it is, and listed,
        /// with the history's later changes to it; a deletion removes only
        /// what the import brought in.
        #[arg(long)]
        git: bool,
    },
    /// Lists or removes files unused for DURATION.
    ///
    /// Lists (--dry-run) or removes every file not read or written for
    /// DURATION (90d, 12h, 30m, 2s); each removal is kept in the history.
    Expire {
        #[arg(long, value_parser = memfs::units::parse_duration, value_name = "DURATION")]
        idle: std::time::Duration,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Only files at or below this path (default: all of /memories).
        path: Option<String>,
    },
    /// Brings the plain files up to date with the journal now.
    ///
    /// Brings the plain files (DIR/memories) up to date with the journal now,
    /// and waits until they are on disk: before reading or copying them with
    /// other tools while a memfs runs (they are otherwise a moment behind).
    Checkpoint,
    /// Deletes everything under /memories, kept in the history.
    ///
    /// Deletes everything under /memories (the SDK's `clear_all_memory`),
    /// each delete kept in the history (`memfs log`, then `memfs revert`
    /// brings a file back). An application's or a person's act: no agent
    /// can clear a memory through the tool's doors.
    Clear {
        /// Says that everything is to go (memfs clear refuses without it).
        #[arg(long)]
        yes: bool,
    },
    /// Prints a shell completion script.
    ///
    /// Prints a shell completion script: `memfs completions bash >
    /// /etc/bash_completion.d/memfs` (also zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Prints the man page (roff).
    ///
    /// Prints the man page (roff): `memfs man > /usr/local/share/man/man1/memfs.1`.
    Man,
    /// Mounts the memory for people and their editors.
    ///
    /// Mounts the memory root at MOUNTPOINT for people and their editors, and
    /// serves tool calls on the socket DIR/.memfs/sock. Runs until Ctrl-C,
    /// SIGTERM or `umount MOUNTPOINT`, then writes everything out and exits 0.
    Mount {
        /// An existing, empty directory.
        mountpoint: PathBuf,
        #[command(flatten)]
        mount_options: MountArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClaudeCodeCmd {
    /// Moves what Claude Code keeps for this project into a memfs memory
    /// (its first versions) and mounts that memory where Claude Code looks,
    /// in the background. Changes nothing if it is on memfs already.
    Enable {
        /// A shared store: postgres://... (the memory is the store named
        /// after the repository's remote, or the URL's ?store=), or a
        /// memory store over HTTP, https://HOST/v1/memory_stores/ID (its
        /// key from ANTHROPIC_API_KEY, kept for later starts in
        /// ~/.config/memfs/keys), so this project meets it on every machine.
        #[arg(long, alias = "store", value_name = "URL")]
        shared: Option<String>,
        /// The memory's data dir (with --shared: this host's cache);
        /// default ~/.local/share/memfs/claude-code/PROJECT.
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
        /// No FUSE mount (a container without /dev/fuse): Claude Code's
        /// memory directory becomes a link to the memory's plain files,
        /// which a memfs in the background watches and takes in.
        #[arg(long)]
        no_mount: bool,
    },
    /// Unmounts it and puts the files back as a plain directory (the memory
    /// and its history stay in the data dir).
    Disable {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
    },
    /// Says whether this project's auto memory is on memfs.
    Status {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
    },
    /// What the SessionStart hook `enable` adds to Claude Code's settings
    /// runs: mounts this project's memory again if it is enabled and not
    /// mounted (after a reboot) or dead; prints nothing when all is well.
    Ensure {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
    },
    /// `memfs log` on this project's memory (what follows is log's).
    Log {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// `memfs undo` on this project's memory (what follows is undo's).
    Undo {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// `memfs web` on this project's memory (what follows is web's).
    Web {
        #[arg(long, value_name = "DIR")]
        memory: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Makes a token and prints it on stdout (the only time it is shown).
    Create {
        /// Its name: the actor of every version it makes (default token-N).
        #[arg(long)]
        name: Option<String>,
        /// It manages stores (create, update, archive, delete) and reaches all of them.
        #[arg(long)]
        admin: bool,
        /// A store it may reach (repeatable).
        #[arg(long = "store", id = "token_store", value_name = "ID")]
        stores: Vec<String>,
        /// It may read, not write.
        #[arg(long)]
        read_only: bool,
    },
    /// Lists the tokens (names, stores, access; never their secrets).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Revokes the token NAME at once (a running server refuses it from its next request).
    Revoke { name: String },
}

/// What bounds `serve --http`.
#[derive(Args, Debug, Clone, Copy)]
pub struct HttpArgs {
    /// Requests per second each token may make on average (then 429).
    #[arg(long, default_value_t = 200.0, value_name = "N", help_heading = "HTTP")]
    pub http_rate: f64,
    /// Requests each token may make at once, above its rate.
    #[arg(long, default_value_t = 400.0, value_name = "N", help_heading = "HTTP")]
    pub http_burst: f64,
    /// Requests served at once (more wait, their bodies unread).
    #[arg(long, default_value_t = 256, value_name = "N", help_heading = "HTTP")]
    pub http_max_connections: usize,
    /// Requests one token may have in flight at once (more get 429 from
    /// their head, their bodies unread).
    #[arg(long, default_value_t = 128, value_name = "N", help_heading = "HTTP")]
    pub http_max_per_token: usize,
    /// Connections still sending their first request head (over it, the
    /// oldest of them is closed; over half of it, a new one gets 2 s).
    #[arg(long, default_value_t = 1024, value_name = "N", help_heading = "HTTP")]
    pub http_max_pending: usize,
    /// Seconds a client may take to send a request's headers, and its body.
    #[arg(
        long,
        default_value_t = 10,
        value_name = "SECONDS",
        help_heading = "HTTP"
    )]
    pub http_timeout: u64,
    /// Stores held open at once (past it, the one unused longest closes;
    /// fewer when the limit on open files would not allow as many).
    #[arg(
        long,
        default_value_t = 10_000,
        value_name = "N",
        help_heading = "HTTP"
    )]
    pub max_open_stores: usize,
    /// Seconds an unused store stays open.
    #[arg(
        long,
        default_value_t = 60,
        value_name = "SECONDS",
        help_heading = "HTTP"
    )]
    pub store_idle: u64,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--secrets`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Refuse,
    Redact,
    Allow,
}

#[derive(Args, Debug, Clone, Copy)]
pub struct MountArgs {
    /// Let other users use the mount (needs user_allow_other in /etc/fuse.conf unless root).
    #[arg(long, help_heading = "Mount")]
    pub allow_other: bool,
    /// Mount read-only: people can read the memory, only the agent writes.
    #[arg(long, help_heading = "Mount")]
    pub read_only: bool,
    /// Show every file and directory as owned by this user id (for sharing
    /// the mount with --allow-other; what is stored is not changed).
    #[arg(long, value_name = "UID", help_heading = "Mount")]
    pub uid: Option<u32>,
    /// Show every file and directory as owned by this group id.
    #[arg(long, value_name = "GID", help_heading = "Mount")]
    pub gid: Option<u32>,
    /// Show every directory with this mode (octal, e.g. 0755); the kernel
    /// checks access against it.
    #[arg(long, value_parser = octal_mode, value_name = "MODE", help_heading = "Mount")]
    pub dir_mode: Option<u32>,
    /// Show every file with this mode (octal, e.g. 0644).
    #[arg(long, value_parser = octal_mode, value_name = "MODE", help_heading = "Mount")]
    pub file_mode: Option<u32>,
}

/// `0755`, `755`: a permission mode in octal.
fn octal_mode(text: &str) -> Result<u32, CliError> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| {
            CliError::Said(format!(
                "`{text}` is not a mode; write it in octal, like 0755"
            ))
        })
}

impl MountArgs {
    pub fn options(self) -> memfs::fuse::MountOptions {
        memfs::fuse::MountOptions {
            allow_other: self.allow_other,
            read_only: self.read_only,
            presented: memfs::fuse::Presented {
                uid: self.uid,
                gid: self.gid,
                dir_mode: self.dir_mode,
                file_mode: self.file_mode,
            },
        }
    }
}

impl Common {
    /// When --data is a shared store's URL: the store, and this host's
    /// copy of it as the data dir every door works on.
    /// Reads `--data` (a URL names a shared store, whose copy is
    /// `--cache`); `makes_data`: the command may make the data dir, so a
    /// missing parent is an error now (a typo, not a new tree).
    pub fn resolve(&mut self, makes_data: bool) -> Result<(), CliError> {
        let remote = (self.data.to_str())
            .filter(|t| memfs::remote::is_store_url(t))
            .map(str::to_string);
        if let Some(text) = remote {
            return self.resolve_remote(&text, makes_data);
        }
        let Some(text) = self.data.to_str().filter(|t| memfs::shared::is_url(t)) else {
            return match makes_data {
                true => parent_exists("--data", &self.data),
                false => Ok(()),
            };
        };
        let target = memfs::shared::Target::parse(text)?;
        self.data = match &self.cache {
            Some(dir) => {
                if makes_data {
                    parent_exists("--cache", dir)?;
                }
                dir.clone()
            }
            None => PathBuf::from("memory-shared").join(target.cache_name()),
        };
        self.shared = Some(target);
        Ok(())
    }

    /// --data names a store over HTTP: this machine's cache of it is the
    /// data dir (`--cache`, else ./memory-remote/HOST_PORT_ID), and the
    /// API's limits are the memory's (100 kB a memory, 20 segments).
    fn resolve_remote(&mut self, text: &str, makes_data: bool) -> Result<(), CliError> {
        let url = memfs::remote::StoreUrl::parse(text, self.insecure_http)
            .map_err(|e| CliError::Said(e.to_string()))?;
        if !(self.pull_every.is_finite() && self.pull_every >= 0.1) {
            return Err(CliError::Said("--pull-every is 0.1 seconds or more".into()));
        }
        self.data = match &self.cache {
            Some(dir) => {
                if makes_data {
                    parent_exists("--cache", dir)?;
                }
                dir.clone()
            }
            None => PathBuf::from("memory-remote").join(url.cache_name()),
        };
        self.max_file_size = self.max_file_size.min(memfs::remote::API_MEMORY_MOST);
        self.max_depth = self.max_depth.min(memfs::remote::API_SEGMENTS_MOST);
        self.remote = Some(self.store_keys().options_for(url));
        Ok(())
    }

    /// How a store over HTTP is reached: `--store-key-env`,
    /// `--store-key-file`, `--pull-every`.
    fn store_keys(&self) -> memfs::remote::Keys {
        memfs::remote::Keys {
            key_env: self.store_key_env.clone(),
            key_file: self.store_key_file.clone(),
            pull_every: std::time::Duration::from_secs_f64(self.pull_every),
        }
    }

    pub fn options(&self) -> Options {
        Options {
            limits: Limits {
                max_file_size: self.max_file_size,
                max_store_size: self.max_store_size,
                max_depth: self.max_depth,
                max_entries: self.max_entries,
                max_dir_entries: self.max_dir_entries,
            },
            history_keep: self.history_keep,
            shared: self.shared.clone(),
            remote: self.remote.clone(),
            mirror_keys: Some(self.store_keys()),
            checkpoint_delay: None,
            segment_bytes: None,
            no_history: self.no_history,
            no_search: self.no_search,
            expire_idle: self.expire_idle,
            tool: ToolConfig {
                create_overwrites: self.create_overwrites,
                secrets: match self.secrets {
                    Secrets::Refuse => memfs::guard::SecretsPolicy::Refuse,
                    Secrets::Redact => memfs::guard::SecretsPolicy::Redact,
                    Secrets::Allow => memfs::guard::SecretsPolicy::Allow,
                },
                search_tool: self.search_tool,
                hide: memfs::tool::Hide::new(
                    memfs::tool::EDITOR_ARTIFACTS
                        .iter()
                        .filter(|_| !self.show_editor_files)
                        .map(|p| p.to_string())
                        .chain(self.hide.iter().cloned()),
                ),
            },
        }
    }
}

/// A data dir the command line names is made if missing, but only its last
/// directory: a typo in a parent (`/nonexistent/x`) is an error, not a new
/// tree of directories holding an empty memory.
fn parent_exists(flag: &str, dir: &std::path::Path) -> Result<(), CliError> {
    if dir.exists() {
        return Ok(());
    }
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => Err(CliError::Said(format!(
            "{flag} {}: {} does not exist (memfs makes the memory's own directory, not its parents)",
            dir.display(),
            parent.display()
        ))),
        _ => Ok(()),
    }
}
