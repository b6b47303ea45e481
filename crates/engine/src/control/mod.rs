//! The door-level commands beyond the memory tool: the history commands
//! (`memfs log`, `show`, `diff`, `revert`, `redact`, `export --git`,
//! `expire`) as requests an owner answers, and the key that control lines
//! acting beyond the tool must carry. Above the store and the journal:
//! it uses both, neither knows it.

pub mod clear;
pub mod expire;
pub mod export;
pub mod import;
pub mod reply;
pub mod request;
pub mod saves;
pub mod search;
pub mod undo_session;

use crate::journal::History;

/// What a door needs to answer control lines: the owner's key and the
/// memory's history.
#[derive(Clone, Default)]
pub struct Control {
    key: Option<String>,
    history: Option<History>,
    search: Option<std::sync::Arc<crate::search::Search>>,
    /// What the tool hides from the agent (its searches leave it out too).
    hide: crate::tool::Hide,
}

impl Control {
    pub fn new(key: Option<String>, history: Option<History>) -> Control {
        Control {
            key,
            history,
            search: None,
            hide: crate::tool::Hide::default(),
        }
    }

    /// The memory's search index, for `memfs search` and the doors, and
    /// what the tool hides from the agent (the agent's searches hide it).
    pub fn with_search(
        mut self,
        search: Option<std::sync::Arc<crate::search::Search>>,
        hide: crate::tool::Hide,
    ) -> Control {
        self.search = search;
        self.hide = hide;
        self
    }

    /// What the tool hides from the agent.
    pub fn agent_hide(&self) -> &crate::tool::Hide {
        &self.hide
    }

    pub fn search(&self) -> Option<&std::sync::Arc<crate::search::Search>> {
        self.search.as_ref()
    }

    /// Whether `key` is the owner's control key (never, when it has none).
    pub fn is_key(&self, key: Option<&str>) -> bool {
        matches!((self.key.as_deref(), key), (Some(k), Some(given)) if k == given)
    }

    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }
}
