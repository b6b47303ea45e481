//! A memory store over HTTP as the data dir (`--data
//! https://HOST/v1/memory_stores/ID`): the data dir is this machine's
//! cache of the store, an ordinary local memory (journal, plain files,
//! history) that every door serves at local speed; a thread keeps it and
//! the store in step. A change made here is acknowledged once the local
//! journal has it (as for any memory), then pushed; a change made there is
//! pulled from the versions listing (only what changed since the last
//! pull) and applied here as a change by `remote:HOST`. While the store
//! cannot be reached, changes are kept (they are in the journal, and what
//! is not yet sent is found again at the next start from the bases) and
//! sent when it answers; a view says the copy may be stale.
//!
//! - [`target`]: the URL, checked;
//! - [`state`]: the bases, kept in `.memfs/remote`;
//! - [`local`]: the tree's side;
//! - [`sync`] and [`push`]: one round;
//! - [`status`]: what `memfs log` says of it.

pub mod local;
mod push;
pub mod state;
pub mod status;
pub mod sync;
pub mod target;

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::lock::{rank, Condvar, Mutex};
use crate::store::{Change, ChangeSink, Store, Ticket};
use crate::transfer::api::{Api, RemoteError};

use state::{Kept, State};
use sync::Round;
pub use target::{is_store_url, StoreUrl, UrlError};

/// How a store over HTTP is kept in step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub url: StoreUrl,
    /// The environment variable the API key is in.
    pub key_env: String,
    /// A file the API key is in instead (`--store-key-file`: what
    /// `claude-code enable --shared URL` keeps for the memfs it starts
    /// later, from a hook whose environment holds another key).
    pub key_file: Option<std::path::PathBuf>,
    /// How often the store is asked what changed.
    pub pull_every: Duration,
}

/// How the caches of a stores root that mirror stores over HTTP (`memfs
/// --stores ROOT mirror URL`) get their key and pull: the server's own
/// `--store-key-env`, `--store-key-file` and `--pull-every`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pub key_env: String,
    pub key_file: Option<std::path::PathBuf>,
    pub pull_every: Duration,
}

impl Keys {
    /// The options of a cache of the store at `url`.
    pub fn options_for(&self, url: StoreUrl) -> Options {
        Options {
            url,
            key_env: self.key_env.clone(),
            key_file: self.key_file.clone(),
            pull_every: self.pull_every,
        }
    }
}

/// The API's largest memory (bytes) and deepest path (segments): a cache
/// refuses more at the tool, before anything is accepted.
pub const API_MEMORY_MOST: u64 = 102_400;
pub const API_SEGMENTS_MOST: usize = 20;

/// The store over HTTP the data dir `data` is a cache of, if it is one
/// (the URL its state names; it was taken when the cache was made).
pub fn cached_store(data: &std::path::Path) -> Option<StoreUrl> {
    let kept = Kept::at(&data.join(".memfs"))?;
    let state = kept.load().ok()?;
    StoreUrl::parse(&state.store, true).ok()
}

/// Every this long, everything the store holds is compared with the bases
/// (what a window of versions may have missed).
const RECONCILE_EVERY: Duration = Duration::from_secs(300);
/// How often the key file is looked at while the store refuses the key.
const KEY_LOOK: Duration = Duration::from_millis(500);
/// The longest wait between tries while the store cannot be reached.
const BACKOFF_MOST: Duration = Duration::from_secs(30);
/// How long one request may take.
const REQUEST_MOST: Duration = Duration::from_secs(15);

#[derive(Default)]
struct Dirty {
    paths: BTreeSet<String>,
    /// Compare every path (a directory removed or moved, a start).
    rescan: bool,
    /// The store has new versions (its long poll said so): pull now.
    pull_now: bool,
    stop: bool,
}

/// The least wait a store's `Retry-After` gets (one that says 0 is not a
/// loop).
const ASKED_LEAST: Duration = Duration::from_millis(100);

/// After a round that failed with `e`, with `backoff` the wait it was
/// due: how long to wait now, and the wait due after the next failure. A
/// store that said how long (a 429's or 503's `Retry-After`) is waited for
/// that long, and the backoff starts again: a burst of 429s while the
/// store's rate is spent would otherwise double the wait up to
/// [`BACKOFF_MOST`] (the fault trials' storm saw a cache wait 30 s to send
/// what the store would have taken a second later). Otherwise a transient
/// failure waits `backoff`, doubling; a refusal waits [`BACKOFF_MOST`].
fn after_failure(e: &RemoteError, backoff: Duration) -> (Duration, Duration) {
    match (e.retry_after(), e.is_transient()) {
        (Some(asked), true) => (
            asked.clamp(ASKED_LEAST, BACKOFF_MOST),
            Duration::from_millis(500),
        ),
        (_, true) => (backoff, (backoff * 2).min(BACKOFF_MOST)),
        (_, false) => (BACKOFF_MOST, BACKOFF_MOST),
    }
}

/// How long memfs's long poll of a memfs server waits for a version.
const POLL_WAIT_S: u64 = 10;

struct Inner {
    api: Api,
    /// The file the key came from (`--store-key-file`), looked at again
    /// while the store refuses the key.
    key_file: Option<std::path::PathBuf>,
    store: Arc<Store>,
    kept: Kept,
    host: Arc<str>,
    every: Duration,
    dirty: Mutex<Dirty>,
    wake: Condvar,
}

/// The sync of one open memory with its store; stopped when dropped.
pub struct Remote {
    inner: Arc<Inner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Why a store over HTTP cannot be opened as the data dir.
#[derive(Debug, thiserror::Error)]
pub enum OpenRemoteError {
    #[error("{0}")]
    Remote(#[from] RemoteError),
    #[error("the cache's state (.memfs/remote) cannot be read or written: {0}")]
    Io(#[from] std::io::Error),
    #[error("this cache is of another store ({0}): give it its own --cache")]
    OtherStore(String),
}

/// The key kept in `file`.
fn key_in(file: &std::path::Path) -> Result<String, RemoteError> {
    match std::fs::read_to_string(file) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_string()),
        _ => Err(RemoteError::Given(format!(
            "no API key in {} (--store-key-file): run `memfs claude-code enable` again with the key in ANTHROPIC_API_KEY",
            file.display()
        ))),
    }
}

/// Where the key of the store `url` is kept for memfs processes started
/// later (`~/.config/memfs/keys/HOST_PORT_ID`, or under
/// `$XDG_CONFIG_HOME`).
pub fn key_file(url: &StoreUrl) -> Option<std::path::PathBuf> {
    let config = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(config.join("memfs/keys").join(url.cache_name()))
}

/// `key` kept at `file`, readable by this user only (the directory too).
pub fn keep_key(file: &std::path::Path, key: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let tmp = file.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(key.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, file)
}

/// Marks what each change touched, for the next push.
struct Observer(Weak<Inner>);

impl ChangeSink for Observer {
    fn submit(&self, change: &Change) -> Ticket {
        if let Some(inner) = self.0.upgrade() {
            let mut dirty = inner.dirty.lock();
            for op in &change.ops {
                // (A directory's paths are what is below it: the round
                // looks, see `Inner::below`.)
                for p in op.paths() {
                    dirty.paths.insert(local::api_path(p));
                }
            }
            drop(dirty);
            inner.wake.notify_one();
        }
        Ticket::done()
    }
}

impl Remote {
    /// Starts keeping `store` (the cache in the data dir whose state dir is
    /// `state_dir`) in step with the store `options` names. A cache never
    /// synced is filled now, and an error if the store cannot be reached;
    /// one synced before is served at once, and caught up in the
    /// background.
    pub fn start(
        options: &Options,
        store: &Arc<Store>,
        state_dir: &std::path::Path,
    ) -> Result<Remote, OpenRemoteError> {
        let key = match &options.key_file {
            Some(file) => key_in(file)?,
            None => crate::transfer::api::key_from(&options.key_env)?,
        };
        let url = &options.url;
        let api = Api::timing_out(&url.base, key, &url.store, REQUEST_MOST)?;
        let kept = Kept::new(state_dir)?;
        let mut state = kept.load()?;
        if !state.store.is_empty() && state.store != url.shown() {
            return Err(OpenRemoteError::OtherStore(state.store));
        }
        let inner = Arc::new(Inner {
            api,
            key_file: options.key_file.clone(),
            store: store.clone(),
            kept,
            host: Arc::from(url.host()),
            every: options.pull_every,
            dirty: Mutex::new(
                rank::REMOTE_DIRTY,
                Dirty {
                    rescan: true,
                    ..Dirty::default()
                },
            ),
            wake: Condvar::new(),
        });
        store.mark_keeps_unsent();
        store.observe(Arc::new(Observer(Arc::downgrade(&inner))));
        let reconciled = match state.store.is_empty() {
            true => Some(inner.fill(&mut state, url)?),
            // A cache: caught up before the doors serve it (a command run
            // once, an agent's new session, sees the store as it is), or
            // served as it is, with the note, when the store does not answer.
            false => inner.catch_up(&mut state),
        };
        // A memfs server offers a long poll: a change there is here in
        // milliseconds, not at the next pull.
        let poller = inner.clone();
        std::thread::Builder::new()
            .name("memfs-remote-poll".into())
            .spawn(move || poller.poll())?;
        let run = inner.clone();
        let thread = std::thread::Builder::new()
            .name("memfs-remote".into())
            .spawn(move || run.run(state, reconciled))?;
        Ok(Remote {
            inner,
            thread: Some(thread),
        })
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.inner.dirty.lock().stop = true;
        self.inner.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Inner {
    fn round<'a>(
        &'a self,
        state: &'a mut State,
        unsendable: &'a mut BTreeSet<String>,
    ) -> Round<'a> {
        Round {
            api: &self.api,
            store: &self.store,
            kept: &self.kept,
            state,
            host: &self.host,
            again: BTreeSet::new(),
            unsendable,
            version: None,
        }
    }

    /// What to push next, once there is something or `until`; `None`
    /// when stopped.
    fn next(&self, until: Instant) -> Option<(BTreeSet<String>, bool, bool)> {
        let mut dirty = self.dirty.lock();
        loop {
            if dirty.stop {
                return None;
            }
            let now = Instant::now();
            if !dirty.paths.is_empty() || dirty.rescan || dirty.pull_now || now >= until {
                let paths = std::mem::take(&mut dirty.paths);
                let rescan = std::mem::take(&mut dirty.rescan);
                return Some((paths, rescan, std::mem::take(&mut dirty.pull_now)));
            }
            self.wake.wait_until(&mut dirty, until);
        }
    }

    fn again(&self, paths: BTreeSet<String>, rescan: bool) {
        let mut dirty = self.dirty.lock();
        dirty.paths.extend(paths);
        dirty.rescan |= rescan;
    }

    /// A cache never synced filled from the store (an error if it cannot
    /// be reached: an empty answer would tell an agent its memory is empty).
    fn fill(&self, state: &mut State, url: &StoreUrl) -> Result<Instant, OpenRemoteError> {
        self.api.check()?;
        state.store = url.shown();
        state.watermark = self.api.newest_version()?;
        let mut unsendable = BTreeSet::new();
        self.round(state, &mut unsendable).reconcile()?;
        self.kept.save(state)?;
        Ok(Instant::now())
    }

    /// What waits here pushed and what changed there taken in, once, at a
    /// start; when, if it went well.
    fn catch_up(&self, state: &mut State) -> Option<Instant> {
        let mut unsendable = BTreeSet::new();
        let (done, again) =
            self.one_round(state, &mut unsendable, &BTreeSet::new(), true, (true, true));
        self.again(again, false);
        match done {
            Ok(()) => {
                self.dirty.lock().rescan = false;
                if let Err(e) = self.kept.save(state) {
                    tracing::warn!("memfs could not save .memfs/remote/state.json: {e}");
                }
                Some(Instant::now())
            }
            Err(e) => {
                self.failed(state, &e);
                None
            }
        }
    }

    /// One round: `paths` (every path, with `rescan`) pushed, then a pull
    /// or a reconcile if `(pull, reconcile)` say so; its outcome, and the
    /// paths it asks to push again.
    fn one_round(
        &self,
        state: &mut State,
        unsendable: &mut BTreeSet<String>,
        paths: &BTreeSet<String>,
        rescan: bool,
        (pull, reconcile): (bool, bool),
    ) -> (Result<(), RemoteError>, BTreeSet<String>) {
        let mut dirty = self.below(state, paths);
        if rescan {
            dirty.extend(local::files(&self.store));
            dirty.extend(state.memories.keys().cloned());
        }
        let mut round = self.round(state, unsendable);
        let done = round.push(&dirty).and_then(|()| match (pull, reconcile) {
            (true, true) => round.reconcile(),
            (true, false) => round.pull(),
            _ => Ok(()),
        });
        (done, std::mem::take(&mut round.again))
    }

    fn run(&self, mut state: State, reconciled: Option<Instant>) {
        let mut unsendable = BTreeSet::new();
        let mut reconciled = reconciled;
        let mut next_pull = match reconciled {
            Some(t) => t + self.every,
            None => Instant::now(),
        };
        let mut backoff = Duration::from_millis(500);
        let mut saved = serde_json::to_vec(&state).ok();
        let mut pause = None;
        while let Some((paths, rescan, pull_now)) = self.next(next_pull) {
            let pull = pull_now || Instant::now() >= next_pull;
            let reconcile = reconciled.is_none_or(|t| t.elapsed() >= RECONCILE_EVERY);
            let (done, again) = self.one_round(
                &mut state,
                &mut unsendable,
                &paths,
                rescan,
                (pull, reconcile),
            );
            match done {
                Ok(()) => {
                    if pull && reconcile {
                        reconciled = Some(Instant::now());
                    }
                    self.store.set_unreachable(None);
                    state.unsent_since = None;
                    state.halted = None;
                    backoff = Duration::from_millis(500);
                    if pull {
                        next_pull = Instant::now() + self.every;
                    }
                    self.again(again, false);
                }
                Err(e) => {
                    self.again(paths, true);
                    self.again(again, false);
                    self.failed(&mut state, &e);
                    let wait;
                    (wait, backoff) = after_failure(&e, backoff);
                    next_pull = Instant::now() + wait;
                    pause = Some((wait, !e.is_transient()));
                }
            }
            self.save_changed(&state, &mut saved);
            match pause.take() {
                Some((d, true)) => self.wait_for_a_key(d),
                Some((d, false)) => {
                    self.sleep(d);
                }
                None => {}
            }
        }
        self.last_push(&mut state, &mut unsendable);
    }

    /// `paths` with, for each that is or was a directory, the files below
    /// it here and the bases below it (a directory removed or moved is one
    /// op naming it alone).
    fn below(&self, state: &State, paths: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = paths.clone();
        for p in paths {
            let prefix = format!("{p}/");
            out.extend(
                (state.memories.range(prefix.clone()..))
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, _)| k.clone()),
            );
            // (Nothing for a file or a path not there.)
            out.extend(local::files_below(&self.store, p));
        }
        out
    }

    /// At a stop: what changed since the last round is pushed once (a
    /// `memfs exec` is one change and a stop), unless the store was
    /// failing; what is not sent is found again at the next start.
    fn last_push(&self, state: &mut State, unsendable: &mut BTreeSet<String>) {
        let (paths, rescan) = {
            let mut dirty = self.dirty.lock();
            (
                std::mem::take(&mut dirty.paths),
                std::mem::take(&mut dirty.rescan),
            )
        };
        if (paths.is_empty() && !rescan) || state.unsent_since.is_some() {
            return;
        }
        let (done, _) = self.one_round(state, unsendable, &paths, rescan, (false, false));
        if let Err(e) = done {
            tracing::info!("the last changes are kept here and sent at the next start: {e}");
        }
        if let Err(e) = self.kept.save(state) {
            tracing::warn!("memfs could not save .memfs/remote/state.json: {e}");
        }
    }

    /// memfs's long poll of a memfs server's versions: each time it
    /// answers with a version, a pull now (the main loop's). Ends at once
    /// on a store that does not offer it, else when stopped; not joined (it
    /// only marks, and ends at its next answer).
    fn poll(&self) {
        let mut after = None;
        let mut offered = false;
        loop {
            if self.dirty.lock().stop {
                return;
            }
            if !offered {
                match self.api.offers_wait() {
                    Ok((false, _)) => return,
                    Ok((true, newest)) => {
                        (offered, after) = (true, newest);
                        // (What came meanwhile is pulled the usual way.)
                        self.dirty.lock().pull_now = true;
                        self.wake.notify_all();
                    }
                    Err(_) => {
                        self.sleep(self.every.max(Duration::from_secs(1)));
                        continue;
                    }
                }
            }
            match self.api.versions_after(after.as_deref(), POLL_WAIT_S) {
                Ok(versions) => {
                    if let Some(newest) = versions.first() {
                        after = Some(newest.id.clone());
                        self.dirty.lock().pull_now = true;
                        self.wake.notify_all();
                    }
                }
                Err(_) => {
                    offered = false;
                    self.sleep(self.every.max(Duration::from_secs(1)));
                }
            }
        }
    }

    /// What went wrong said, and kept in the state for `memfs log`.
    fn failed(&self, state: &mut State, e: &RemoteError) {
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        state.unsent_since.get_or_insert(now);
        if e.is_transient() {
            if self.store.unreachable_since().is_none() {
                tracing::warn!(
                    "the memory store cannot be reached; changes are kept and sent later: {e}"
                );
            }
            self.store
                .set_unreachable(Some(std::time::SystemTime::now()));
        } else {
            if state.halted.is_none() {
                tracing::error!(
                    "the memory store refuses this cache's changes (they are kept here): {e}"
                );
            }
            state.halted = Some(e.to_string());
        }
    }

    /// `state` saved in `state.json` if it differs from what was `saved`.
    fn save_changed(&self, state: &State, saved: &mut Option<Vec<u8>>) {
        let now = serde_json::to_vec(state).ok();
        if now != *saved {
            match self.kept.save(state) {
                Ok(()) => *saved = now,
                Err(e) => tracing::warn!("memfs could not save .memfs/remote/state.json: {e}"),
            }
        }
    }

    /// While the store refuses: waits `d` (the next try), looking at the
    /// key file every [`KEY_LOOK`] and ending the wait when it holds a new
    /// key (a revoked key replaced: no restart needed), as [`Inner::sleep`]
    /// ends it: when a change here wakes the round, or when stopped.
    fn wait_for_a_key(&self, d: Duration) {
        let Some(file) = &self.key_file else {
            self.sleep(d);
            return;
        };
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.sleep(left.min(KEY_LOOK)) {
                return;
            }
            if let Ok(key) = key_in(file) {
                if !self.api.has_key(&key) {
                    tracing::warn!(
                        "a new key in --store-key-file: sending the changes kept here with it"
                    );
                    self.api.set_key(key);
                    return;
                }
            }
        }
    }

    /// Waits `d`, or less when woken (a change here, a stop); whether it
    /// waited all of `d`.
    fn sleep(&self, d: Duration) -> bool {
        let mut dirty = self.dirty.lock();
        !dirty.stop && self.wake.wait_for(&mut dirty, d).timed_out()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, retry_after: Option<Duration>) -> RemoteError {
        RemoteError::Status {
            shown: "http://store".into(),
            status,
            said: String::new(),
            retry_after,
        }
    }

    #[test]
    fn a_store_that_says_how_long_is_waited_for_that_long_however_many_429s_came() {
        let mut backoff = Duration::from_millis(500);
        for _ in 0..10 {
            let wait;
            (wait, backoff) = after_failure(&answered(429, None), backoff);
            assert!(wait <= BACKOFF_MOST);
        }
        assert_eq!(backoff, BACKOFF_MOST);
        let (wait, next) = after_failure(&answered(429, Some(Duration::from_secs(1))), backoff);
        assert_eq!(wait, Duration::from_secs(1));
        assert_eq!(next, Duration::from_millis(500));
        // (An absurd ask is bounded, both ways.)
        let (wait, _) = after_failure(&answered(503, Some(Duration::from_secs(600))), backoff);
        assert_eq!(wait, BACKOFF_MOST);
        let (wait, _) = after_failure(&answered(429, Some(Duration::ZERO)), backoff);
        assert_eq!(wait, ASKED_LEAST);
    }

    #[test]
    fn without_a_word_a_transient_failure_doubles_and_a_refusal_waits_longest() {
        let half = Duration::from_millis(500);
        assert_eq!(
            after_failure(&answered(502, None), half),
            (half, Duration::from_secs(1))
        );
        let unreachable = RemoteError::Unreachable {
            shown: "http://store".into(),
            why: "refused".into(),
        };
        assert_eq!(
            after_failure(&unreachable, Duration::from_secs(20)),
            (Duration::from_secs(20), BACKOFF_MOST)
        );
        assert_eq!(
            after_failure(&answered(409, Some(Duration::from_secs(1))), half),
            (BACKOFF_MOST, BACKOFF_MOST)
        );
    }
}
