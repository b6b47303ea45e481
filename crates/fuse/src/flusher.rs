//! Writing out files closed through the mount, "soon after close": closed
//! files gather here for up to [`DELAY`] and are handed to the persister
//! together, so a burst of small files (an untar, a `cp -a`) costs one disk
//! barrier, not one per file. `fsync` does not come here: it waits.

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::lock::{rank, Condvar, Mutex};

use crate::store::{Ino, Store};

/// How long a closed file waits at most before it is handed to the persister.
pub const DELAY: Duration = Duration::from_millis(50);
/// This many waiting files are handed over at once without waiting.
const BATCH: usize = 1024;

pub struct Flusher {
    state: Mutex<State>,
    wake: Condvar,
    store: Arc<Store>,
}

#[derive(Default)]
struct State {
    pending: HashSet<Ino>,
    stop: bool,
}

impl Flusher {
    pub fn start(store: Arc<Store>) -> std::io::Result<(Arc<Flusher>, JoinHandle<()>)> {
        let this = Arc::new(Flusher {
            state: Mutex::new(rank::FLUSHER, State::default()),
            wake: Condvar::new(),
            store,
        });
        let worker = this.clone();
        let thread = std::thread::Builder::new()
            .name("memfs-flush".into())
            .spawn(move || worker.run())?;
        Ok((this, thread))
    }

    /// A file was closed: write it out soon (credited to whoever wrote it,
    /// not to whoever closed it: see `Store::persist_files`).
    pub fn soon(&self, ino: Ino) {
        let mut state = self.state.lock();
        state.pending.insert(ino);
        if state.pending.len() >= BATCH {
            self.wake.notify_one();
        }
    }

    /// Hands over what is waiting, then ends the thread.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_one();
    }

    fn run(&self) {
        loop {
            let (batch, stop) = {
                let mut state = self.state.lock();
                if !state.stop && state.pending.len() < BATCH {
                    self.wake.wait_for(&mut state, DELAY);
                }
                (std::mem::take(&mut state.pending), state.stop)
            };
            if !batch.is_empty() {
                let inos: Vec<Ino> = batch.into_iter().collect();
                let _ = self.store.persist_files(&inos);
            }
            if stop {
                return;
            }
        }
    }
}
