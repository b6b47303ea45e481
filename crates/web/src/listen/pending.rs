//! Connections that have not yet sent a whole request head, kept apart from
//! the requests being served. At most `max` wait; a new connection over it
//! closes the oldest waiting one, and while more than half of `max` wait, a
//! new connection gets [`CROWDED`] for its first head instead of the usual
//! header timeout. So connections that trickle their heads a byte at a time
//! cost a socket each for a bounded while, and never a request's slot.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::lock::{rank, Mutex};

/// A new connection's time for its first head while the queue is crowded.
pub const CROWDED: Duration = Duration::from_secs(2);

/// The connections waiting for their first head, oldest first.
pub struct Pending {
    queue: Mutex<Queue>,
    max: usize,
}

struct Queue {
    next: u64,
    order: BTreeMap<u64, Arc<Mark>>,
}

/// One connection's state, shared with the queue.
#[derive(Default)]
struct Mark {
    head: AtomicBool,
    end: Notify,
}

/// A connection's place in the queue (left when it drops).
pub struct Waiting {
    pending: Arc<Pending>,
    id: u64,
    mark: Arc<Mark>,
    crowded: bool,
}

/// Told by the connection's service when a head has arrived.
pub struct Headed {
    pending: Arc<Pending>,
    id: u64,
    mark: Arc<Mark>,
}

impl Pending {
    pub fn new(max: usize) -> Pending {
        Pending {
            queue: Mutex::new(
                rank::HTTP_PENDING,
                Queue {
                    next: 0,
                    order: BTreeMap::new(),
                },
            ),
            max: max.max(1),
        }
    }

    /// Puts a new connection in the queue; over the cap, the oldest waiting
    /// connection is told to end.
    pub fn enter(self: &Arc<Self>) -> Waiting {
        let mark = Arc::new(Mark::default());
        let mut q = self.queue.lock();
        let id = q.next;
        q.next += 1;
        q.order.insert(id, mark.clone());
        let crowded = q.order.len() > self.max / 2;
        if q.order.len() > self.max {
            if let Some((_, oldest)) = q.order.pop_first() {
                oldest.end.notify_one();
                tracing::debug!("closing the oldest connection still sending its head");
            }
        }
        Waiting {
            pending: self.clone(),
            id,
            mark,
            crowded,
        }
    }

    fn leave(&self, id: u64) {
        self.queue.lock().order.remove(&id);
    }

    /// How many connections wait for their first head.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.lock().order.len()
    }
}

impl Waiting {
    /// The handle the connection's service tells of each head.
    pub fn headed(&self) -> Headed {
        Headed {
            pending: self.pending.clone(),
            id: self.id,
            mark: self.mark.clone(),
        }
    }

    /// How long the connection has for its first head.
    pub fn first_head_within(&self, usual: Duration) -> Duration {
        match self.crowded {
            true => usual.min(CROWDED),
            false => usual,
        }
    }

    /// Whether a whole head has arrived.
    pub fn has_head(&self) -> bool {
        self.mark.head.load(Ordering::SeqCst)
    }

    /// Resolves when the queue tells this connection to end.
    pub fn ended(&self) -> tokio::sync::futures::Notified<'_> {
        self.mark.end.notified()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.pending.leave(self.id);
    }
}

impl Headed {
    /// A head arrived: the connection leaves the queue (once).
    pub fn arrived(&self) {
        if !self.mark.head.swap(true, Ordering::SeqCst) {
            self.pending.leave(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_waiting_connection_is_ended_over_the_cap_and_a_headed_one_never() {
        let p = Arc::new(Pending::new(4));
        let first = p.enter();
        let second = p.enter();
        second.headed().arrived();
        let rest: Vec<Waiting> = (0..4).map(|_| p.enter()).collect();
        assert_eq!(p.len(), 4);
        // `first` was the oldest waiting one when the fifth arrived: told to
        // end (its stored permit resolves at once); `second` had its head.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), first.ended())
                .await
                .expect("the oldest waiting connection was told to end");
            assert!(
                tokio::time::timeout(Duration::from_millis(50), second.ended())
                    .await
                    .is_err(),
                "a connection that sent its head is never ended by the queue"
            );
        });
        assert!(
            !rest[0].crowded && rest[1].crowded,
            "over half of the cap is crowded"
        );
        assert!(rest[3].crowded);
        assert_eq!(rest[3].first_head_within(Duration::from_secs(10)), CROWDED);
        drop(rest);
        drop(first);
        assert_eq!(p.len(), 0);
    }
}
