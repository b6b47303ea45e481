//! The memory tool's six commands over a [`Store`], with the spec's exact texts.
//!
//! This module never locks anything: each command is one whole store
//! operation. A write returns a [`Pending`] result whose durability the
//! caller waits for ([`Pending::finish`]), so a server can apply pipelined
//! commands in order while their disk flushes are shared.

mod edit;
mod format;
pub mod hide;
mod image;
mod input;
mod race;
mod result;
mod view;

use std::sync::Arc;

use serde_json::Value;

pub use crate::path::{is_tool_state, TOOL_STATE};
use crate::text::clip as clip_text;
pub use format::human_size;
pub use hide::{Hide, EDITOR_ARTIFACTS};
pub use input::{Command, COMMANDS};
pub use result::{Content, ToolResult};

use crate::error::Error;
use crate::path::MemPath;
use crate::store::{Door, Mark, Origin, Snapshot, Store, Ticket, Window};
use edit::EditError;

/// Choices where the spec allows more than one behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolConfig {
    /// `create` on an existing file overwrites it instead of the reference error.
    pub create_overwrites: bool,
    /// What directory listings leave out.
    pub hide: Hide,
    /// What to do with a credential in an agent's write (`--secrets`).
    pub secrets: crate::guard::SecretsPolicy,
    /// MCP doors offer a second tool, `memory_search`, beside `memory`
    /// (`--search-tool`; the memory tool itself is unchanged).
    pub search_tool: bool,
}

/// A result that is ready once its change is durable.
#[must_use]
pub struct Pending {
    result: ToolResult,
    ticket: Option<Ticket>,
    /// On a shared store: the command, to run again if another host's
    /// change to its path came first.
    again: Option<Box<Again>>,
}

struct Again {
    tool: Tool,
    command: Command,
    expect: Option<String>,
    /// A create's file as it was before the create ran (none: no file),
    /// to merge the create with the text that won the race (`race.rs`).
    before: Option<Option<Arc<Vec<u8>>>>,
}

/// How many times a command lost to other hosts is run again.
const RUNS: usize = 16;
/// How long a command that lost waits for this host to have the winner.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Pending {
    fn ready(result: ToolResult) -> Self {
        Pending {
            result,
            ticket: None,
            again: None,
        }
    }

    /// About how many bytes the result holds until it is written.
    pub fn weight(&self) -> usize {
        self.result.weight()
    }

    /// Waits until the change is on disk; a disk that refused it turns the
    /// result into an error (and the store already agrees with the disk).
    pub fn finish(self) -> ToolResult {
        let mut pending = self;
        for _ in 0..RUNS {
            match (
                pending.ticket.as_ref().map(Ticket::wait),
                pending.again.take(),
            ) {
                // Another host changed the path first: the change was taken
                // back; once this host has the winner, the command runs
                // again on it (an agent never loses another's update, and
                // never hears of the race).
                (Some(Err(Error::Conflict { seq })), Some(again)) => {
                    let again = *again;
                    again.tool.store.wait_followed(seq, FOLLOW_WAIT);
                    pending = again.run();
                }
                _ => return pending.settled(),
            }
        }
        ToolResult::error(
            "Error: other hosts kept changing the same files first; the command did not take effect.",
        )
    }

    fn settled(self) -> ToolResult {
        match self.ticket.map(|t| t.wait()) {
            // Kept in memory: it did take effect, and memfs says so.
            Some(Err(err @ Error::Unsaved(_))) => ToolResult::error(format!("Error: {err}.")),
            Some(Err(err)) => {
                ToolResult::error(format!("Error: {err}. The command did not take effect."))
            }
            _ => self.result,
        }
    }
}

/// The memory tool over one store.
#[derive(Clone)]
pub struct Tool {
    store: Arc<Store>,
    config: ToolConfig,
    /// Who its changes are credited to.
    origin: Origin,
    /// Views only: every other command is refused (a read-only token).
    read_only: bool,
}

impl Tool {
    /// The tool, its changes credited to the library door.
    pub fn new(store: Arc<Store>, config: ToolConfig) -> Self {
        Tool {
            store,
            config,
            origin: Origin::agent(Door::Library),
            read_only: false,
        }
    }

    /// The same tool, refusing every command but `view`.
    pub fn read_only(&self) -> Tool {
        Tool {
            read_only: true,
            ..self.clone()
        }
    }

    /// The same tool, its changes credited to `origin` (a door, a session).
    pub fn with_origin(&self, origin: Origin) -> Tool {
        Tool {
            origin,
            ..self.clone()
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn config(&self) -> &ToolConfig {
        &self.config
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Runs one tool input to its final, durable result.
    pub fn call(&self, input: &Value) -> ToolResult {
        self.start(input).finish()
    }

    /// Applies one tool input; the change (if any) is visible at once and
    /// durable when [`Pending::finish`] returns.
    pub fn start(&self, input: &Value) -> Pending {
        let command = input.get("command").and_then(Value::as_str).unwrap_or("?");
        let _span = tracing::debug_span!("tool", command, origin = ?self.origin).entered();
        match input::parse(input).and_then(|c| Ok((c, input::expected_sha256(input)?))) {
            Ok((command, expect)) => self.run_expecting(command, expect.as_deref()),
            Err(text) => Pending::ready(ToolResult::error(text)),
        }
    }

    pub fn run(&self, command: Command) -> Pending {
        self.run_expecting(command, None)
    }

    /// Runs `command` only if the file it changes (`old_path` for a rename)
    /// has the sha256 `expect` (a program's precondition, not in the model's
    /// schema); a view ignores it.
    pub fn run_expecting(&self, command: Command, expect: Option<&str>) -> Pending {
        self.run_marked(command, expect, Mark::Plain)
    }

    /// [`Tool::run_expecting`], a create's version marked `mark` in the
    /// history.
    fn run_marked(&self, command: Command, expect: Option<&str>, mark: Mark) -> Pending {
        let again =
            (self.store.is_shared() && !matches!(command, Command::View { .. })).then(|| {
                Box::new(Again {
                    tool: self.clone(),
                    command: command.clone(),
                    expect: expect.map(str::to_string),
                    before: race::before(self, &command, expect),
                })
            });
        let mut pending = self.run_once(command, expect, mark);
        if pending.ticket.is_some() {
            pending.again = again;
        }
        pending
    }

    fn run_once(&self, command: Command, expect: Option<&str>, mark: Mark) -> Pending {
        if self.read_only && !matches!(command, Command::View { .. }) {
            return Pending::ready(ToolResult::error(
                "Error: this memory is read-only for this session; only view is allowed",
            ));
        }
        let outcome = match command {
            Command::View { path, view_range } => self.view(&path, view_range),
            Command::Create { path, file_text } => self.create(&path, file_text, expect, mark),
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(&path, &old_str, &new_str, expect),
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(&path, insert_line, &insert_text, expect),
            Command::Delete { path } => self.delete(&path, expect),
            Command::Rename { old_path, new_path } => self.rename(&old_path, &new_path, expect),
        };
        match outcome {
            Ok(pending) => pending,
            Err(text) => {
                tracing::debug!("refused: {text}");
                Pending::ready(ToolResult::error(text))
            }
        }
    }

    fn view(&self, raw: &str, range: Option<(i64, i64)>) -> Outcome {
        let path = parse_path(raw)?;
        let snapshot = self
            .store
            .snapshot(&path, view::LIST_DEPTH, view::window(range), &|name| {
                self.config.hide.hides(name)
            })
            .map_err(|e| match e {
                Error::Path(_) | Error::Disk(_) => format!("Error: {e}"),
                _ => format!("The path {path} does not exist. Please provide a valid path."),
            })?;
        let mut result = match &snapshot {
            Snapshot::Dir(listing) => view::directory(&path, listing, range),
            Snapshot::File(bytes) => view::file(&path, bytes, range),
            Snapshot::Other => view::other(&path, &snapshot),
        };
        if let (Some(since), Content::Text(text)) =
            (self.store.unreachable_since(), &mut result.content)
        {
            text.push_str(&view::stale_note(since, self.store.keeps_unsent()));
        }
        if let (Snapshot::File(_), Content::Text(text)) = (&snapshot, &mut result.content) {
            if let Some(note) = self.store.take_view_note(&path) {
                text.push_str(&format!("\n\n(memfs: {note})"));
            }
        }
        Ok(Pending::ready(result))
    }

    fn create(&self, raw: &str, text: String, expect: Option<&str>, mark: Mark) -> Outcome {
        let path = parse_path(raw)?;
        self.screen_name(None, &path)?;
        let (text, redacted) = self.screen(&path, "", text)?;
        // (A create merged with, or saved over, another host's that won a
        // race replaces it whatever the setting.)
        let overwrite = self.config.create_overwrites || expect.is_some() || mark != Mark::Plain;
        let ticket = self
            .store
            .create_file_marked(
                &path,
                text.into_bytes(),
                overwrite,
                self.origin.clone(),
                expect,
                mark,
            )
            .map_err(|e| match e {
                e @ Error::Changed { .. } => changed(&path, &e),
                Error::NotFound if expect.is_some() => format!("Error: {path} does not exist, so it cannot have the content expected_sha256 names; nothing was changed"),
                Error::Exists => format!("Error: File {path} already exists"),
                Error::IsDir | Error::Root => format!("Error: {path} is a directory; create writes files only"),
                Error::NotDir => format!("Error: Cannot create {path}: a component of its path is a file, not a directory"),
                Error::IsSymlink => match self.link_on_the_way(&path) {
                    Some(link) => format!("Error: Cannot create {path}: {link} is a symbolic link, which memfs does not follow"),
                    None => format!("Error: Cannot create {path}: {}", Error::IsSymlink),
                },
                other => format!("Error: Cannot create {path}: {other}"),
            })?;
        Ok(written(
            with_note(format!("File created successfully at: {path}"), redacted),
            ticket,
        ))
    }

    /// The first directory on the way to `path` that is a symbolic link
    /// (none: it is `path` itself, or nothing is).
    fn link_on_the_way(&self, path: &MemPath) -> Option<MemPath> {
        let mut above = Vec::new();
        let mut at = path.parent();
        while let Some(p) = at.filter(|p| !p.is_root()) {
            at = p.parent();
            above.push(p);
        }
        above.into_iter().rev().find(|p| {
            let seen = self
                .store
                .snapshot(p, 0, Window { skip: 0, take: 0 }, &|_| false);
            matches!(seen, Ok(Snapshot::Other))
        })
    }

    /// Credential screening of the path an agent's create or rename names
    /// (credentials that `old`, a rename's source, did not already hold).
    /// Refused under `refuse` and `redact` alike (a name with a hole in it
    /// is not the name the agent asked for), and the error never shows the
    /// path, since the path is what holds the credential.
    fn screen_name(&self, old: Option<&MemPath>, path: &MemPath) -> Result<(), String> {
        use crate::guard::secrets::{self, Policy};
        if self.config.secrets == Policy::Allow {
            return Ok(());
        }
        let old = old.map(MemPath::to_string).unwrap_or_default();
        let found = secrets::introduced(&old, &path.to_string());
        let Some(first) = found.first() else {
            return Ok(());
        };
        Err(format!(
            "Error: the path would hold what looks like a credential (a {} in a file or directory name); memfs does not store credentials, and nothing was changed. \
             Name the file for what it holds, and store a reference to where the credential lives instead.",
            first.kind
        ))
    }

    /// Credential screening of an agent's write (`--secrets`): the content
    /// to store and a note of what was redacted, or the error text. Only
    /// credentials `new` brings that `old` did not have count.
    fn screen(
        &self,
        path: &MemPath,
        old: &str,
        new: String,
    ) -> Result<(String, Option<String>), String> {
        use crate::guard::secrets::{self, Policy};
        if self.config.secrets == Policy::Allow {
            return Ok((new, None));
        }
        let found = secrets::introduced(old, &new);
        if found.is_empty() {
            return Ok((new, None));
        }
        let what = secrets::describe(&found);
        match self.config.secrets {
            Policy::Refuse => Err(format!(
                "Error: {path} would hold what looks like a credential ({what}); memfs does not store credentials, and nothing was changed. \
                 Store a reference to where it lives instead, such as the name of the environment variable or secret-manager entry that holds it."
            )),
            _ => Ok((
                secrets::redact(&new, &found),
                Some(format!(
                    "memfs redacted {} credential(s) before storing: {what}. Each is now [REDACTED:<kind>]; store a reference to where it lives instead.",
                    found.len()
                )),
            )),
        }
    }

    fn str_replace(&self, raw: &str, old: &str, new: &str, expect: Option<&str>) -> Outcome {
        let path = parse_path(raw)?;
        if old.is_empty() {
            return Err(
                "Error: `old_str` must not be empty: give the exact text to replace".into(),
            );
        }
        let missing =
            || format!("Error: The path {path} does not exist. Please provide a valid path.");
        let result = self.store.edit_file(&path, self.origin.clone(), |bytes| {
            expected(&path, bytes, expect)?;
            let text = utf8(bytes, &path)?;
            let (out, mut snippet) = edit::replace(text, old, new).map_err(|e| {
                let old = clip_text(old);
                match e {
                    EditError::Multiple { lines, more } => format!(
                        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}{}. Please ensure it is unique",
                        lines.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
                        if more { ", and more" } else { "" }
                    ),
                    _ => format!("No replacement was performed, old_str `{old}` did not appear verbatim in {path}."),
                }
            })?;
            let (out, redacted) = self.screen(&path, text, out)?;
            if let Some(note) = redacted {
                // The snippet would show the credential: say what happened instead.
                snippet = format!("[not shown: {note} View the file to see the result.]");
            }
            Ok::<_, EditFailure>((out.into_bytes(), snippet))
        });
        let (snippet, ticket) = result.map_err(|e| store_text(e, missing))?;
        let text = format!("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{snippet}");
        Ok(written(text, ticket))
    }

    fn insert(&self, raw: &str, line: i64, text: &str, expect: Option<&str>) -> Outcome {
        let path = parse_path(raw)?;
        let missing = || format!("Error: The path {path} does not exist");
        let result = self.store.edit_file(&path, self.origin.clone(), |bytes| {
            expected(&path, bytes, expect)?;
            let old = utf8(bytes, &path)?;
            let new = edit::insert(old, line, text).map_err(|e| match e {
                EditError::BadInsertLine { n_lines } => format!(
                    "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n_lines}]"
                ),
                _ => unreachable!("insert refuses only a bad line"),
            })?;
            let (new, redacted) = self.screen(&path, old, new)?;
            Ok::<_, EditFailure>((new.into_bytes(), redacted))
        });
        let (redacted, ticket) = result.map_err(|e| store_text(e, missing))?;
        Ok(written(
            with_note(format!("The file {path} has been edited."), redacted),
            ticket,
        ))
    }

    fn delete(&self, raw: &str, expect: Option<&str>) -> Outcome {
        let path = parse_path(raw)?;
        let ticket = self
            .store
            .remove_expecting(&path, self.origin.clone(), expect)
            .map_err(|e| match e {
                e @ Error::Changed { .. } => changed(&path, &e),
                Error::Root => "Error: Cannot delete the /memories directory itself".to_string(),
                Error::NotFound | Error::NotDir | Error::IsSymlink => {
                    format!("Error: The path {path} does not exist")
                }
                other => format!("Error: Cannot delete {path}: {other}"),
            })?;
        Ok(written(format!("Successfully deleted {path}"), ticket))
    }

    fn rename(&self, raw_old: &str, raw_new: &str, expect: Option<&str>) -> Outcome {
        let old = parse_path(raw_old)?;
        let new = parse_path(raw_new)?;
        self.screen_name(Some(&old), &new)?;
        let renamed = self
            .store
            .rename_expecting(&old, &new, self.origin.clone(), expect);
        let ticket = renamed.map_err(|e| match e {
            e @ Error::Changed { .. } => changed(&old, &e),
            Error::Root => "Error: Cannot rename the /memories directory itself".to_string(),
            Error::NotFound => format!("Error: The path {old} does not exist"),
            Error::Exists => format!("Error: The destination {new} already exists"),
            Error::IntoItself => format!("Error: Cannot move {old} into itself ({new})"),
            Error::NotDir => format!(
                "Error: Cannot move to {new}: a component of its path is a file, not a directory"
            ),
            other => format!("Error: Cannot rename {old} to {new}: {other}"),
        })?;
        Ok(written(
            format!("Successfully renamed {old} to {new}"),
            ticket,
        ))
    }
}

/// The error text of a failed `expected_sha256` precondition.
fn changed(path: &MemPath, e: &Error) -> String {
    format!("Error: {path} has changed: {e}; nothing was changed. View it and try again.")
}

/// Checks `expected_sha256` against the bytes an edit starts from.
fn expected(path: &MemPath, bytes: &[u8], expect: Option<&str>) -> Result<(), EditFailure> {
    match expect {
        Some(sha) if !crate::digest::sha256_hex(bytes).eq_ignore_ascii_case(sha) => {
            let e = Error::Changed {
                actual: crate::digest::sha256_hex(bytes),
            };
            Err(changed(path, &e).into())
        }
        _ => Ok(()),
    }
}

/// A result text, with a note after it when there is one.
fn with_note(text: String, note: Option<String>) -> String {
    match note {
        Some(note) => format!("{text}\n{note}"),
        None => text,
    }
}

/// A command's pending result, or the text of its error.
type Outcome = Result<Pending, String>;

fn written(text: String, ticket: Ticket) -> Pending {
    Pending {
        result: ToolResult::ok(text),
        ticket: Some(ticket),
        again: None,
    }
}

fn parse_path(raw: &str) -> Result<MemPath, String> {
    MemPath::parse(raw).map_err(|e| format!("Error: Invalid path `{}`: {e}", clip_text(raw)))
}

/// An error of an edit: a store error becomes "does not exist" (the spec's
/// answer for a directory too) unless it is a limit or the disk.
enum EditFailure {
    Store(Error),
    Text(String),
}

impl From<Error> for EditFailure {
    fn from(e: Error) -> Self {
        EditFailure::Store(e)
    }
}

impl From<String> for EditFailure {
    fn from(text: String) -> Self {
        EditFailure::Text(text)
    }
}

fn store_text(failure: EditFailure, missing: impl Fn() -> String) -> String {
    match failure {
        EditFailure::Text(text) => text,
        EditFailure::Store(
            e @ (Error::FileTooLarge { .. } | Error::StoreFull { .. } | Error::Disk(_)),
        ) => {
            format!("Error: {e}")
        }
        EditFailure::Store(_) => missing(),
    }
}

fn utf8<'a>(bytes: &'a [u8], path: &MemPath) -> Result<&'a str, EditFailure> {
    std::str::from_utf8(bytes).map_err(|_| {
        EditFailure::Text(format!(
            "Error: {path} is not a UTF-8 text file; memfs does not edit its bytes"
        ))
    })
}
