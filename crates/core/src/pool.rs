//! Fixed sets of worker threads that every open memory in the process
//! shares. What each memory once kept a thread of its own for (committing
//! what nobody waits for, bringing the plain files up to date, compacting,
//! saving last reads, expiring idle files) is a job here, run at its time;
//! so a memory that is open and idle costs no thread at all, and ten
//! thousand open memories cost the same few threads as one. Threads start
//! on first use, up to each class's count.
//!
//! The classes wait on one another in one order only (DESIGN's "Waits under
//! locks"): a [`commit`] job may wait for the [`checkpoint`] class (a full
//! disk, bounded), a [`background`] job for both; a [`checkpoint`] job
//! waits on neither. A [`follow`] job may wait for the [`commit`] and
//! [`checkpoint`] classes (the journal taking what it applied), never the
//! other way. No job waits for a job of its own class.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::lock::{rank, Condvar, Mutex};

/// Work to run once.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// One class of worker threads and the jobs due on them.
pub struct Pool {
    name: &'static str,
    max: usize,
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    /// When each job is due, earliest first (then in the order given).
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    jobs: HashMap<u64, Job>,
    next: u64,
    threads: usize,
    idle: usize,
}

impl Pool {
    fn new(name: &'static str, max: usize) -> Pool {
        Pool {
            name,
            max: max.max(1),
            queue: Mutex::new(rank::POOL_QUEUE, Queue::default()),
            wake: Condvar::new(),
        }
    }

    /// Runs `job` at `when` (or as soon after as a thread is free).
    pub fn at(&'static self, when: Instant, job: Job) {
        let mut q = self.queue.lock();
        let id = q.next;
        q.next += 1;
        q.jobs.insert(id, job);
        q.due.push(Reverse((when, id)));
        if q.idle == 0 && q.threads < self.max {
            match std::thread::Builder::new()
                .name(format!("memfs-{}", self.name))
                .spawn(move || self.work())
            {
                Ok(_) => q.threads += 1,
                Err(e) => tracing::warn!("cannot start a {} thread: {e}", self.name),
            }
        }
        drop(q);
        self.wake.notify_one();
    }

    /// Runs `job` as soon as a thread is free.
    pub fn now(&'static self, job: Job) {
        self.at(Instant::now(), job)
    }

    /// Runs `f` on the value `of` every `period`, until that value is gone.
    pub fn every<T: Send + Sync + 'static>(
        &'static self,
        period: Duration,
        of: Weak<T>,
        f: fn(&T),
    ) {
        self.at(
            Instant::now() + period,
            Box::new(move || {
                if let Some(value) = of.upgrade() {
                    f(&value);
                    drop(value);
                    self.every(period, of, f);
                }
            }),
        );
    }

    /// One thread's loop: the earliest due job, run with no lock held.
    fn work(&'static self) {
        let mut q = self.queue.lock();
        loop {
            let now = Instant::now();
            match q.due.peek().copied() {
                Some(Reverse((when, id))) if when <= now => {
                    q.due.pop();
                    let Some(job) = q.jobs.remove(&id) else {
                        continue;
                    };
                    drop(q);
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                        tracing::error!("a {} job failed; its thread goes on", self.name);
                    }
                    q = self.queue.lock();
                }
                Some(Reverse((when, _))) => {
                    q.idle += 1;
                    self.wake.wait_until(&mut q, when);
                    q.idle -= 1;
                }
                None => {
                    q.idle += 1;
                    self.wake.wait(&mut q);
                    q.idle -= 1;
                }
            }
        }
    }

    /// How many threads this class has started.
    pub fn threads(&self) -> usize {
        self.queue.lock().threads
    }
}

fn class(cell: &'static OnceLock<Pool>, name: &'static str, max: usize) -> &'static Pool {
    cell.get_or_init(|| Pool::new(name, max))
}

/// Commits what nobody waits for, and flushes what a frame deferred.
pub fn commit() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    class(&P, "commit", 2)
}

/// Brings the plain files up to date.
pub fn checkpoint() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    class(&P, "checkpoint", 2)
}

/// Catching shared stores up with their database (other hosts' changes).
pub fn follow() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    class(&P, "follow", 4)
}

/// Keeping memories' search indexes current (one thread: a rebuild must
/// not hold up compaction or expiry).
pub fn search() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    class(&P, "search", 1)
}

/// Compaction, last reads, expiry, closing idle stores.
pub fn background() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    class(&P, "background", 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    fn pool() -> &'static Pool {
        Box::leak(Box::new(Pool::new("test", 2)))
    }

    #[test]
    fn jobs_run_in_the_order_they_are_due_on_at_most_max_threads() {
        let p = pool();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now() + Duration::from_millis(50);
        for i in (0..5u64).rev() {
            let tx = tx.clone();
            p.at(
                start + Duration::from_millis(20 * i),
                Box::new(move || tx.send(i).unwrap()),
            );
        }
        let got: Vec<u64> = (0..5)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(p.threads() <= 2);
        // A job that panics leaves its thread working.
        p.now(Box::new(|| panic!("a failing job")));
        let tx2 = tx.clone();
        p.now(Box::new(move || tx2.send(9).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 9);
    }

    #[test]
    fn every_runs_until_its_value_is_gone() {
        let p = pool();
        let count = Arc::new(AtomicUsize::new(0));
        p.every(Duration::from_millis(5), Arc::downgrade(&count), |c| {
            c.fetch_add(1, Ordering::SeqCst);
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while count.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(count.load(Ordering::SeqCst) >= 3);
        let weak = Arc::downgrade(&count);
        drop(count);
        std::thread::sleep(Duration::from_millis(50));
        assert!(weak.upgrade().is_none());
        // Nothing is left scheduled for it (its last run found it gone).
        assert!(p.queue.lock().jobs.is_empty());
    }
}
