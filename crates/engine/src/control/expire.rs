//! Expiry: removing files nobody read or wrote for a while, as changes of
//! memfs' own (so each stays in the history, and `memfs revert` brings it back).

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use super::reply::Reply;
use crate::error::Error;
use crate::journal::Refusal;
use crate::path::MemPath;
use crate::store::Store;

fn when(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Lists (`dry_run`) or removes every file at or below `at` unused for `idle`.
pub fn run(store: &Store, at: &MemPath, idle: Duration, dry_run: bool) -> Result<Reply, Refusal> {
    let cutoff = SystemTime::now()
        .checked_sub(idle)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut out = String::new();
    let mut failed = Vec::new();
    for (path, last) in store.idle_files(at, cutoff) {
        if dry_run {
            out.push_str(&format!("would expire {path} (last used {})\n", when(last)));
            continue;
        }
        match store.expire(&path, cutoff) {
            Ok(Some(ticket)) => match ticket.wait() {
                Ok(()) => {
                    tracing::info!("expired {path} (last used {})", when(last));
                    out.push_str(&format!("expired {path} (last used {})\n", when(last)))
                }
                Err(e) => failed.push(format!("{path}: {e}")),
            },
            // Used, or gone, meanwhile.
            Ok(None) | Err(Error::NotFound) => {}
            Err(e) => failed.push(format!("{path}: {e}")),
        }
    }
    if out.is_empty() && failed.is_empty() {
        out.push_str("nothing to expire: every file was used within that time\n");
    }
    Ok(Reply {
        code: u8::from(!failed.is_empty()),
        out: out.into_bytes(),
        err: failed.join("\n"),
        next: None,
    })
}

/// A store's expiry on a schedule, while its owner holds this.
pub struct Expiry {
    store: Weak<Store>,
    idle: Duration,
}

/// Expires idle files of `store` on a schedule (`--expire-idle`), checking
/// every tenth of `idle` (at least every second, at most every minute), on
/// the background pool, for as long as the returned value is held.
pub fn schedule(store: &Arc<Store>, idle: Duration) -> Arc<Expiry> {
    let expiry = Arc::new(Expiry {
        store: Arc::downgrade(store),
        idle,
    });
    let every = (idle / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    crate::pool::background().every(every, Arc::downgrade(&expiry), |e| {
        if let Some(store) = e.store.upgrade() {
            let _ = run(&store, &MemPath::root(), e.idle, false);
        }
    });
    expiry
}
