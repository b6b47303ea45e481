//! Walking a directory tree on disk depth first, without recursion and with
//! a bounded number of open descriptors, however deep the tree is.
//!
//! The tree's depth is the user's to choose (a data dir may come from
//! anywhere, and older memfs versions set no depth limit), so neither the
//! call stack nor the descriptor table may grow with it. A [`DirStack`] holds
//! one frame per level of the walk, but keeps descriptors only for the
//! deepest [`OPEN_FRAMES`] of them; a frame whose descriptor was let go gets
//! one back from its child, through `..`, when the walk returns to it.

use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, Mode, OFlags};

/// Descriptors a walk keeps open at most.
pub const OPEN_FRAMES: usize = 32;

/// One level of a walk: the directory, if its descriptor is held, and what
/// the walker keeps about it.
pub struct Frame<T> {
    fd: Option<OwnedFd>,
    pub state: T,
}

/// The directories from the walk's start down to where it is now.
pub struct DirStack<T> {
    frames: Vec<Frame<T>>,
}

impl<T> DirStack<T> {
    /// A walk that starts in `top`.
    pub fn new(top: OwnedFd, state: T) -> Self {
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

    /// The innermost directory's descriptor (held: only outer frames let go).
    pub fn fd(&self) -> &OwnedFd {
        self.frames
            .last()
            .and_then(|f| f.fd.as_ref())
            .expect("the innermost frame holds its descriptor")
    }

    /// Enters `dir`, a directory opened from the innermost one.
    pub fn push(&mut self, dir: OwnedFd, state: T) {
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
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                outer.fd = Some(rfs::openat(inner_fd, "..", flags, Mode::empty())?);
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
        let top = crate::persist::fsops::open_dir(
            rfs::open(
                tmp.path(),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap(),
            ".",
        )
        .unwrap();
        let mut stack = DirStack::new(top, 0usize);
        for level in 1..=200 {
            rfs::mkdirat(stack.fd(), "d", Mode::from_raw_mode(0o700)).unwrap();
            let sub = crate::persist::fsops::open_dir(stack.fd(), "d").unwrap();
            stack.push(sub, level);
        }
        let held = stack.frames.iter().filter(|f| f.fd.is_some()).count();
        assert_eq!(held, OPEN_FRAMES);
        for level in (1..=200).rev() {
            assert_eq!(stack.pop().unwrap(), level);
            // Each directory we return to still has its child.
            assert!(rfs::statat(stack.fd(), "d", rfs::AtFlags::empty()).is_ok());
        }
        assert_eq!(stack.pop().unwrap(), 0);
        assert!(stack.is_empty());
    }
}
