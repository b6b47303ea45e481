//! Walking a directory tree on disk depth first, without recursion and with
//! a bounded number of open descriptors, however deep the tree is.
//!
//! The tree's depth is the user's to choose (a data dir may come from
//! anywhere, and older memfs versions set no depth limit), so neither the
//! call stack nor the descriptor table may grow with it. A [`DirStack`] holds
//! one frame per level of the walk, but keeps descriptors only for the
//! deepest [`OPEN_FRAMES`] of them; a frame whose descriptor was let go gets
//! one back from its child, through `..`, when the walk returns to it.

use std::ffi::OsStr;
use std::io;

use super::storage::{Dir, StorageDir};

/// Descriptors a walk keeps open at most.
pub const OPEN_FRAMES: usize = 32;

/// One level of a walk: the directory, if its descriptor is held, and what
/// the walker keeps about it.
pub struct Frame<T> {
    fd: Option<Dir>,
    pub state: T,
}

/// The directories from the walk's start down to where it is now.
pub struct DirStack<T> {
    frames: Vec<Frame<T>>,
}

impl<T> DirStack<T> {
    /// A walk that starts in `top`.
    pub fn new(top: Dir, state: T) -> Self {
        DirStack {
            frames: vec![Frame {
                fd: Some(top),
                state,
            }],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The innermost frame's state.
    pub fn top(&mut self) -> Option<&mut T> {
        self.frames.last_mut().map(|f| &mut f.state)
    }

    /// The innermost directory (held: only outer frames let go).
    pub fn dir(&self) -> &Dir {
        self.frames
            .last()
            .and_then(|f| f.fd.as_ref())
            .expect("the innermost frame holds its descriptor")
    }

    /// Enters `dir`, a directory opened from the innermost one.
    pub fn push(&mut self, dir: Dir, state: T) {
        self.frames.push(Frame {
            fd: Some(dir),
            state,
        });
        if self.frames.len() > OPEN_FRAMES {
            let outer = self.frames.len() - OPEN_FRAMES - 1;
            self.frames[outer].fd = None;
        }
    }

    /// Leaves the innermost directory and returns its state; the frame it
    /// returns to holds a descriptor again (reopened through `..` if it had
    /// let go of it).
    pub fn pop(&mut self) -> io::Result<T> {
        let inner = self.frames.pop().expect("a frame to leave");
        if let Some(outer) = self.frames.last_mut() {
            if outer.fd.is_none() {
                let inner_fd = inner
                    .fd
                    .as_ref()
                    .expect("the innermost frame holds its descriptor");
                outer.fd = Some(StorageDir::open_dir(inner_fd.as_ref(), OsStr::new(".."))?);
            }
        }
        Ok(inner.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_walk_holds_few_descriptors_and_finds_its_way_back() {
        let tmp = tempfile::tempdir().unwrap();
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
        let top = crate::persist::storage::real::dir(
            rustix::fs::open(tmp.path(), flags, rustix::fs::Mode::empty()).unwrap(),
        );
        let mut stack = DirStack::new(top, 0usize);
        for level in 1..=200 {
            stack.dir().mkdir(OsStr::new("d")).unwrap();
            let sub = stack.dir().open_dir(OsStr::new("d")).unwrap();
            stack.push(sub, level);
        }
        let held = stack.frames.iter().filter(|f| f.fd.is_some()).count();
        assert_eq!(held, OPEN_FRAMES);
        for level in (1..=200).rev() {
            assert_eq!(stack.pop().unwrap(), level);
            // Each directory we return to still has its child.
            assert!(stack.dir().stat(Some(OsStr::new("d"))).is_ok());
        }
        assert_eq!(stack.pop().unwrap(), 0);
    }
}
