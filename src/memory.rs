//! [`Memory`]: a store opened on a data dir, with its persister and tool.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use std::time::Duration;

use crate::history::{History, Keep};
use crate::persist::{load, usage, DataDir, OpenError, Persister, Stats};
use crate::store::{Limits, Store};
use crate::tool::{Pending, Tool, ToolConfig, ToolResult};

/// How a memory is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub limits: Limits,
    pub tool: ToolConfig,
    /// How much history to keep.
    pub history_keep: Keep,
    /// Keep no history at all (`--no-history`): changes made meanwhile are
    /// recorded as `found` by the next memfs that keeps history.
    pub no_history: bool,
    /// Expire files unused this long, on a schedule (`--expire-idle`).
    pub expire_idle: Option<Duration>,
}

/// The memory of one data dir, open and locked for this process.
pub struct Memory {
    tool: Tool,
    persister: Persister,
    skipped: load::Skipped,
    warnings: Vec<String>,
}

impl Memory {
    /// Opens the data dir `dir` (made if missing), loads `dir/memories`, and
    /// starts persisting. Fails if another process has it open.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Memory, OpenError> {
        let data_dir = DataDir::open(dir.as_ref())?;
        let mut progress = LoadProgress::new();
        let loaded = load::load_with_progress(&data_dir.memories, &mut |n| progress.at(n));
        progress.done();
        let (tree, skipped) = loaded.map_err(|err| OpenError::Io {
            dir: data_dir.shown().to_string(),
            doing: "loading memories",
            err,
        })?;
        let warnings = start_warnings(&skipped, &options.limits.exceeded(&tree));
        let shown = data_dir.shown().to_string();
        let history = match options.no_history {
            true => None,
            false => Some(Arc::new(
                History::open(&data_dir.state, &tree, options.history_keep).map_err(|err| {
                    OpenError::Io {
                        dir: shown.clone(),
                        doing: "opening its history (.memfs/history)",
                        err,
                    }
                })?,
            )),
        };
        let used = usage::load(&data_dir.state);
        let persister = Persister::start(data_dir).map_err(|err| OpenError::Io {
            dir: shown,
            doing: "starting its writer thread",
            err,
        })?;
        let store = Arc::new(Store::new(tree, options.limits, Some(persister.sink())));
        persister.attach(&store);
        store.set_control_key(persister.data_dir().key.clone());
        if let Some(history) = history {
            persister.keep_history(history.clone());
            store.set_history(history);
        }
        store.restore_usage(used);
        if let Some(idle) = options.expire_idle {
            crate::history::expire::schedule(&store, idle).map_err(|err| OpenError::Io {
                dir: persister.data_dir().shown().to_string(),
                doing: "starting its expiry thread",
                err,
            })?;
        }
        Ok(Memory {
            tool: Tool::new(store, options.tool.clone()),
            persister,
            skipped,
            warnings,
        })
    }

    /// Runs one tool input (a JSON object) to its durable result.
    pub fn call(&self, input: &Value) -> ToolResult {
        self.tool.call(input)
    }

    /// Applies one tool input; see [`Pending::finish`].
    pub fn start(&self, input: &Value) -> Pending {
        self.tool.start(input)
    }

    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    pub fn store(&self) -> &Arc<Store> {
        self.tool.store()
    }

    /// What the load passed over (non-UTF-8 names, special files).
    pub fn skipped(&self) -> &load::Skipped {
        &self.skipped
    }

    /// What the person starting memfs should hear about the data dir: names
    /// left out, and limits it already exceeds (it loads all the same).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Writes out whatever the disk has not taken yet (a refused or
    /// unconfirmed change kept in memory), once more; says whether all of
    /// the memory is now on disk. For the last moments of a process.
    pub fn write_out(&self) -> bool {
        self.save_usage();
        if self.store().unsaved_paths() == 0 {
            return true;
        }
        let written = self.store().sync(crate::store::Origin::Memfs);
        written.is_ok() && self.store().unsaved_paths() == 0
    }

    /// Keeps when each file was last read, for expiry after a restart
    /// (also done by the persister, at most once a minute).
    pub fn save_usage(&self) {
        let _ = usage::save(&self.data_dir().state, &self.store().usage());
    }

    pub fn persist_stats(&self) -> Stats {
        self.persister.stats()
    }

    pub fn data_dir(&self) -> &DataDir {
        self.persister.data_dir()
    }
}

/// Loading a large memory says how far it is, on a terminal only: every
/// 5,000 files and directories, on one line rewritten in place.
struct LoadProgress {
    terminal: bool,
    shown: usize,
    last: usize,
    started: std::time::Instant,
}

const PROGRESS_EVERY: usize = 5_000;

impl LoadProgress {
    fn new() -> Self {
        LoadProgress {
            terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            shown: 0,
            last: 0,
            started: std::time::Instant::now(),
        }
    }

    fn at(&mut self, nodes: usize) {
        self.last = nodes;
        if self.terminal && nodes / PROGRESS_EVERY > self.shown / PROGRESS_EVERY {
            self.shown = nodes;
            eprint!("\rmemfs: loading the memory: {nodes} files and directories");
        }
    }

    fn done(&self) {
        if self.shown > 0 {
            eprintln!(
                "\rmemfs: loaded {} files and directories in {:.1} s          ",
                self.last,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

impl Drop for Memory {
    /// Last reads are kept for the next start, however this process ends its
    /// use of the memory.
    fn drop(&mut self) {
        self.save_usage();
    }
}

fn start_warnings(skipped: &load::Skipped, exceeded: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let left_out = [
        (skipped.non_utf8_names, "name(s) that are not UTF-8"),
        (
            skipped.unaddressable_names,
            "name(s) the memory tool cannot address (control characters, backslashes, encoded `.` or `/`)",
        ),
        (skipped.special_files, "special file(s)"),
    ];
    for (count, what) in left_out {
        if count > 0 {
            out.push(format!("left out {count} {what} found in the data dir"));
        }
    }
    out.extend(exceeded.iter().map(|e| {
        format!("{e}; it loads, and only changes that would grow it further are refused")
    }));
    out
}
