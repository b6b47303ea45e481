//! The bounds on what the memory may hold, checked before any change applies.
//!
//! Every limit guards a resource a hostile or runaway client could otherwise
//! drive without end: bytes (per file and in all), tree depth (the data dir
//! is walked and made on disk level by level), entries in the whole store and
//! in one directory (each is a node in memory and an inode on disk).

use super::tree::{Ino, Tree};
use crate::error::Error;

/// The limits, each with its command-line flag (named in every refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `--max-file-size`.
    pub max_file_size: u64,
    /// `--max-store-size`.
    pub max_store_size: u64,
    /// `--max-depth`: most levels below the root (a file at `/memories/a` is at 1).
    pub max_depth: usize,
    /// `--max-entries`: files, directories and other nodes in the whole memory.
    pub max_entries: usize,
    /// `--max-dir-entries`: entries in any one directory.
    pub max_dir_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_size: 1 << 20,
            max_store_size: 256 << 20,
            max_depth: 64,
            max_entries: 250_000,
            max_dir_entries: 100_000,
        }
    }
}

/// What a change adds: checked by [`Limits::check_growth`] before it applies.
#[derive(Debug, Clone, Copy, Default)]
pub struct Growth {
    /// An existing directory that gains a name.
    pub dir: Option<Ino>,
    /// New nodes in the whole memory.
    pub entries: usize,
    /// The depth of the deepest node the change places.
    pub depth: usize,
}

impl Limits {
    /// Refuses a write that would leave a file of `new_len` bytes (it held
    /// `old_len`, in `copies` names on disk), or the memory over its total.
    /// Shrinking is always allowed.
    pub fn check_size(
        &self,
        tree: &Tree,
        old_len: u64,
        new_len: u64,
        copies: u64,
    ) -> Result<(), Error> {
        if new_len > self.max_file_size {
            return Err(Error::FileTooLarge {
                size: new_len,
                limit: self.max_file_size,
            });
        }
        let held = (old_len * copies).min(tree.total_bytes());
        let total = tree.total_bytes() - held + new_len * copies;
        if new_len > old_len && total > self.max_store_size {
            return Err(Error::StoreFull {
                size: total,
                limit: self.max_store_size,
            });
        }
        Ok(())
    }

    /// Refuses one more copy of `len` bytes (a hard link, which the data dir
    /// holds as a file of its own) past the memory's total.
    pub fn check_copy(&self, tree: &Tree, len: u64) -> Result<(), Error> {
        let total = tree.total_bytes() + len;
        if len > 0 && total > self.max_store_size {
            return Err(Error::StoreFull {
                size: total,
                limit: self.max_store_size,
            });
        }
        Ok(())
    }

    /// Refuses a change that adds entries past a count or nodes past the depth limit.
    pub fn check_growth(&self, tree: &Tree, growth: Growth) -> Result<(), Error> {
        if growth.depth > self.max_depth {
            return Err(Error::TooDeep {
                limit: self.max_depth,
            });
        }
        if growth.entries > 0 && tree.entry_count() + growth.entries > self.max_entries {
            return Err(Error::TooManyEntries {
                limit: self.max_entries,
            });
        }
        let in_dir = growth
            .dir
            .and_then(|d| tree.children(d))
            .map_or(0, |c| c.len());
        if growth.dir.is_some() && in_dir >= self.max_dir_entries {
            return Err(Error::DirFull {
                limit: self.max_dir_entries,
            });
        }
        Ok(())
    }

    /// What a loaded tree already exceeds, for a warning at start-up: such a
    /// data dir still loads, and only growth past the limits is refused.
    pub fn exceeded(&self, tree: &Tree) -> Vec<String> {
        let mut out = Vec::new();
        let (depth, widest) = tree.shape();
        if depth > self.max_depth {
            out.push(format!(
                "the memory is {depth} levels deep, over --max-depth {}",
                self.max_depth
            ));
        }
        if tree.entry_count() > self.max_entries {
            out.push(format!(
                "the memory holds {} entries, over --max-entries {}",
                tree.entry_count(),
                self.max_entries
            ));
        }
        if widest > self.max_dir_entries {
            out.push(format!(
                "a directory holds {widest} entries, over --max-dir-entries {}",
                self.max_dir_entries
            ));
        }
        if tree.total_bytes() > self.max_store_size {
            out.push(format!(
                "the memory holds {} bytes, over --max-store-size {}",
                tree.total_bytes(),
                self.max_store_size
            ));
        }
        out
    }
}
