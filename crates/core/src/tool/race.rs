//! An agent's `create` that lost a race on a shared store: another host's
//! change to the same file was committed first, from the same version.
//! Run again as it was, the create would save over the winner's text
//! unread (last writer wins). Instead it is merged with it: the file as it
//! was before the create is the base, the create's text ours, the winner's
//! theirs (`merge::three_way`). Changes to other lines: the file holds
//! both, its version noted `merged:`. The same lines: the create's text is
//! the file, as the agent asked, and its version is an overwrite of the
//! winner's (flagged in `memfs log`, one click on the review page or one
//! revert from being the file again). Either way the agent's next `view`
//! of the file says so, once.
//!
//! Only a create that may overwrite (`--create-overwrites`) and has no
//! `expected_sha256` (a compare-and-set) is merged: one that may not
//! overwrite is refused on the winner's file, "already exists", as it
//! would have been a moment later. (`str_replace` and `insert` are run
//! again on the winner's text as they are: their text still applies, or
//! they fail as they would have.)

use std::sync::Arc;

use super::input::Command;
use super::{Again, Pending, Tool};
use crate::merge::{three_way, Merged};
use crate::path::MemPath;
use crate::store::{Mark, Snapshot, Window};

/// What [`Again::before`] keeps for `command`: a create's file now (none:
/// no file there), for a create that overwrites (`--create-overwrites`)
/// with no precondition. (A create that does not overwrite, run again on
/// the winner's file, is refused as "already exists", as it would have
/// been a moment later: nothing is lost, the agent is told.)
pub(super) fn before(
    tool: &Tool,
    command: &Command,
    expect: Option<&str>,
) -> Option<Option<Arc<Vec<u8>>>> {
    match (command, expect) {
        (Command::Create { path, .. }, None) if tool.config.create_overwrites => {
            Some(file(tool, &MemPath::parse(path).ok()?))
        }
        _ => None,
    }
}

fn file(tool: &Tool, path: &MemPath) -> Option<Arc<Vec<u8>>> {
    match tool
        .store
        .snapshot(path, 0, Window { skip: 0, take: 0 }, &|_| false)
    {
        Ok(Snapshot::File(data)) => Some(data),
        _ => None,
    }
}

impl Again {
    /// The command run again once this host has the winner's change.
    pub(super) fn run(self) -> Pending {
        let Again {
            tool,
            command,
            expect,
            before,
        } = self;
        let (Command::Create { path, file_text }, Some(before)) = (&command, &before) else {
            return tool.run_expecting(command, expect.as_deref());
        };
        let Some(at) = MemPath::parse(path).ok() else {
            return tool.run_expecting(command, expect.as_deref());
        };
        // The winner changed this file (not only another one the change
        // touched): merge with it.
        let theirs = match file(&tool, &at) {
            Some(now) if Some(&now) != before.as_ref() => now,
            _ => return tool.run_expecting(command, expect.as_deref()),
        };
        let base = before.as_deref().map_or(&[][..], Vec::as_slice);
        let merged = match three_way(base, file_text.as_bytes(), &theirs) {
            Merged::Clean(m) => String::from_utf8(m).ok(),
            Merged::Conflict => None,
        };
        let (text, mark, note) = match merged {
            Some(m) => (
                m,
                Mark::Merged,
                format!("another host changed {at} while this create was on its way, on other lines: the file holds both, merged"),
            ),
            None => (
                file_text.clone(),
                Mark::Unread,
                format!("another host changed {at} on the same lines while this create was on its way: this create's text is the file, and the other host's is the version before it (`memfs log {at}`)"),
            ),
        };
        tool.store.note_for_view(&at, note);
        let command = Command::Create {
            path: path.clone(),
            file_text: text,
        };
        tool.run_marked(command, None, mark)
    }
}
