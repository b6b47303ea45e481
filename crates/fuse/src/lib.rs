//! The FUSE door: the memory root mounted at a path, for people and their tools.
//!
//! `adapter.rs` turns kernel requests into store operations; `invalidate.rs`
//! keeps the kernel's caches honest after tool-side changes; `mountpoint.rs`
//! checks the mount point and unmounts robustly.
//!
//! A crate of its own (docs/DESIGN.md, "Crates"): it uses `memfs-core` only
//! (the store and its one lock), so the mount never reaches the journal,
//! the search index or another door.

mod adapter;
mod attr;
mod flusher;
mod invalidate;
mod listings;
pub mod mountpoint;
mod request;
mod syncer;
mod tuning;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

// The core's modules under the names the rest of memfs knows them by.
use memfs_core::{error, lock, path, say, store};

use crate::store::{Origin, Store};
pub use adapter::MemFs;
use flusher::Flusher;
use invalidate::Invalidator;
pub use mountpoint::MountError;

/// Threads serving kernel requests; at least 2, so an `fsync` waiting for the
/// disk never stalls every other request.
const THREADS: usize = 4;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// Let users other than the one who mounted use the mount (`allow_other`).
    pub allow_other: bool,
    /// Mount read-only: people read, only the agent writes.
    pub read_only: bool,
    /// Owner and modes the mount shows instead of each node's own.
    pub presented: Presented,
}

pub use attr::Presented;

/// A live mount. Dropping it unmounts (see [`Mounted::unmount`]).
pub struct Mounted {
    session: Option<BackgroundSession>,
    flusher: Arc<Flusher>,
    flusher_thread: Option<JoinHandle<()>>,
    invalidator: Arc<Invalidator>,
    invalidator_thread: Option<JoinHandle<()>>,
    store: Arc<Store>,
    mountpoint: PathBuf,
}

/// Mounts `store`'s root at `mountpoint`.
pub fn mount(
    store: Arc<Store>,
    mountpoint: &Path,
    options: MountOptions,
) -> Result<Mounted, MountError> {
    mountpoint::check(mountpoint)?;
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("memfs".into()),
        MountOption::Subtype("memfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
        if options.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    config.acl = if options.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(THREADS);
    config.clone_fd = true;
    let shown = mountpoint.display().to_string();
    let (flusher, flusher_thread) =
        Flusher::start(store.clone()).map_err(|e| MountError::Io(shown.clone(), e))?;
    let id = request::new_mount_id();
    let tuning = tuning::Tuning::from_env();
    let session = fuser::spawn_mount(
        MemFs::new(
            store.clone(),
            flusher.clone(),
            options.presented,
            id,
            tuning,
        ),
        mountpoint,
        &config,
    )
    .map_err(|e| MountError::Io(shown.clone(), e))?;
    let (invalidator, thread) =
        Invalidator::start(session.notifier(), id).map_err(|e| MountError::Io(shown, e))?;
    store.observe(invalidator.clone());
    tuning.apply_read_ahead(mountpoint);
    Ok(Mounted {
        session: Some(session),
        flusher,
        flusher_thread: Some(flusher_thread),
        invalidator,
        invalidator_thread: Some(thread),
        store,
        mountpoint: mountpoint.to_path_buf(),
    })
}

impl Mounted {
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// True once the mount is gone from outside (`umount`, `fusermount3 -u`).
    pub fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmounts (lazily, if files are still open), then writes out every
    /// file changed through the mount and waits until it is durable.
    pub fn unmount(mut self) -> Result<(), crate::error::Error> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), crate::error::Error> {
        self.store.clear_observers();
        self.invalidator.stop();
        if let Some(thread) = self.invalidator_thread.take() {
            let _ = thread.join();
        }
        if let Some(session) = self.session.take() {
            if session.guard.is_finished() {
                let _ = session.join();
            } else if session.umount_and_join().is_err() {
                // Busy (a file is still open): detach now; the kernel lets go
                // of the connection when the last file closes or we exit.
                if !mountpoint::lazy_unmount(&self.mountpoint) {
                    crate::say!(
                        "memfs: could not unmount {}; run: fusermount3 -u -z {}",
                        self.mountpoint.display(),
                        self.mountpoint.display()
                    );
                }
            }
        }
        self.flusher.stop();
        if let Some(thread) = self.flusher_thread.take() {
            let _ = thread.join();
        }
        // What is still unsaved is credited to whoever wrote it (see Store::persist).
        let me = Origin::Memfs;
        let written = self.store.sync(me);
        self.store.unpin_all();
        written
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.session.is_some() {
            let _ = self.shut_down();
        }
    }
}

/// Mounts this process serves for other memfs processes: a `memfs mount`
/// started while this one owns the data dir asks it (over the socket) to
/// mount the memory at its mount point, and to unmount it when it stops.
pub struct Hosted {
    mounts: crate::lock::Mutex<Vec<Mounted>>,
}

impl Default for Hosted {
    fn default() -> Self {
        Hosted {
            mounts: crate::lock::Mutex::new(crate::lock::rank::HOSTED_MOUNTS, Vec::new()),
        }
    }
}

/// Why a mount served for another process was not made or not ended.
#[derive(Debug, thiserror::Error)]
pub enum HostedError {
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error("no mount at {} is served here", .0.display())]
    NotServed(std::path::PathBuf),
    #[error("writing out failed: {0}")]
    WriteOut(#[source] crate::error::Error),
}

impl Hosted {
    /// Mounts `store` at `at` for another process.
    pub fn mount(
        &self,
        store: Arc<Store>,
        at: &Path,
        options: MountOptions,
    ) -> Result<(), HostedError> {
        let mounted = mount(store, at, options)?;
        self.mounts.lock().push(mounted);
        Ok(())
    }

    /// Unmounts the mount at `at` and writes out what it changed.
    pub fn unmount(&self, at: &Path) -> Result<(), HostedError> {
        let mut mounts = self.mounts.lock();
        let Some(i) = mounts.iter().position(|m| m.mountpoint() == at) else {
            return Err(HostedError::NotServed(at.to_path_buf()));
        };
        let mounted = mounts.swap_remove(i);
        drop(mounts);
        mounted.unmount().map_err(HostedError::WriteOut)
    }

    pub fn is_empty(&self) -> bool {
        self.mounts.lock().is_empty()
    }

    /// Drops mounts unmounted from outside (writing out what they changed).
    pub fn reap(&self) {
        let finished: Vec<Mounted> = {
            let mut mounts = self.mounts.lock();
            let (gone, live) = std::mem::take(&mut *mounts)
                .into_iter()
                .partition(Mounted::is_finished);
            *mounts = live;
            gone
        };
        for mounted in finished {
            let _ = mounted.unmount();
        }
    }

    /// Unmounts everything (shutdown); says whether all was written out.
    pub fn unmount_all(&self) -> bool {
        let mounts = std::mem::take(&mut *self.mounts.lock());
        mounts.into_iter().all(|m| m.unmount().is_ok())
    }
}
