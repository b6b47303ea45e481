//! A batch in flight to a shared store, through a fake store whose COMMIT
//! waits at a gate the test opens: the journal's state is free meanwhile
//! (a history read answers), a rewrite waits for the answer and judges
//! the memory as it settled, and a refused batch gives the view back
//! exactly and goes once when it is sent again. No PostgreSQL: the fake
//! is the `Upstream` interface the journal knows the store by.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use super::test_support::write;
use super::upstream::{Outgoing, Transaction, Upstream, UpstreamError};
use super::Options;
use crate::store::{Change, Ticket};

/// Long enough for anything that is to happen; a wait that must not end
/// is given [`NOT_YET`] (it can only pass wrongly, never fail wrongly).
const LONG: Duration = Duration::from_secs(10);
const NOT_YET: Duration = Duration::from_millis(300);

/// A ticket's answer, and the way a test answers a held COMMIT.
type Answer = Result<(), crate::error::Error>;
type Release = SyncSender<Result<(), UpstreamError>>;

/// One COMMIT held: it says which batch came, then waits for its answer.
struct Gate {
    entered: SyncSender<Outgoing>,
    release: Receiver<Result<(), UpstreamError>>,
}

/// A shared store in memory: a head, what it committed, and gates.
/// (Test-only std mutexes, never held across a wait or a journal lock.)
#[derive(Default)]
struct Fake {
    head: AtomicU64,
    committed: std::sync::Mutex<Vec<Outgoing>>,
    gates: std::sync::Mutex<VecDeque<Gate>>,
    /// Each COMMIT waits this long (a store's round trip).
    delay: Duration,
    /// Transactions begun (each holds the store's head until it ends).
    begun: AtomicU64,
}

impl Fake {
    /// The next COMMIT waits: returns where it says it came, and where
    /// the test answers it.
    fn gate(&self) -> (Receiver<Outgoing>, Release) {
        let (entered, came) = mpsc::sync_channel(1);
        let (answer, release) = mpsc::sync_channel(1);
        self.gates
            .lock()
            .unwrap()
            .push_back(Gate { entered, release });
        (came, answer)
    }

    fn committed_batches(&self) -> Vec<u64> {
        let c = self.committed.lock().unwrap();
        c.iter().map(|o| o.batch).collect()
    }
}

struct FakeTx<'a> {
    fake: &'a Fake,
    head: u64,
}

impl Upstream for Fake {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, UpstreamError> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        let head = self.head.load(Ordering::SeqCst);
        Ok(Box::new(FakeTx { fake: self, head }))
    }
}

impl Transaction for FakeTx<'_> {
    fn head(&self) -> u64 {
        self.head
    }
    fn conflicts(
        &mut self,
        asks: &[(u64, Vec<String>)],
    ) -> Result<Vec<Option<u64>>, UpstreamError> {
        Ok(vec![None; asks.len()])
    }
    fn commit(self: Box<Self>, batch: Outgoing) -> Result<(), UpstreamError> {
        let gate = self.fake.gates.lock().unwrap().pop_front();
        if let Some(g) = gate {
            g.entered.send(batch.clone()).unwrap();
            g.release.recv_timeout(LONG).expect("the test answers")?;
        }
        std::thread::sleep(self.fake.delay);
        self.fake.head.store(batch.last, Ordering::SeqCst);
        self.fake.committed.lock().unwrap().push(batch);
        Ok(())
    }
}

/// A shared journal and its fake store.
struct Shared {
    o: super::test_support::Opened,
    fake: Arc<Fake>,
}

fn open(delay: Duration) -> Shared {
    let opts = Options {
        shared: true,
        checkpoint_delay: Duration::from_millis(10),
        ..Options::default()
    };
    let o = super::test_support::open(opts);
    let fake = Arc::new(Fake {
        delay,
        ..Fake::default()
    });
    o.journal.share(fake.clone());
    Shared { o, fake }
}

impl Shared {
    fn submit(&self, change: Change) -> Ticket {
        self.o.journal.sink().submit(&change)
    }

    /// Submits on a thread of its own; the answer comes on the receiver.
    fn submit_away(&self, change: Change) -> Receiver<Answer> {
        let ticket = self.submit(change);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(ticket.wait()).unwrap());
        rx
    }

    fn content_at(&self, path: &str) -> Option<crate::digest::Sha> {
        super::test_support::content_at(&self.o.journal, path)
    }

    fn view(&self) -> Vec<(String, super::view::VNode)> {
        let st = self.o.journal.shared.state.lock();
        st.view
            .iter()
            .map(|(k, n)| (k.to_string(), n.clone()))
            .collect()
    }

    /// The versions the history holds at `path`.
    fn versions_at(&self, path: &str) -> Vec<u64> {
        let rows = self.o.journal.history().all().unwrap();
        rows.iter()
            .filter(|r| r.path == path)
            .map(|r| r.id())
            .collect()
    }
}

/// Runs `f` on a thread of its own; its answer comes on the receiver.
fn away<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Receiver<R> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

#[test]
fn a_history_read_does_not_wait_for_a_commit_in_flight() {
    let o = open(Duration::ZERO);
    o.submit(write("/memories/a.md", "one")).wait().unwrap();
    let (came, answer) = o.fake.gate();
    let w = o.submit_away(write("/memories/b.md", "two"));
    let sent = came.recv_timeout(LONG).expect("the batch reaches COMMIT");
    // The committer waits for the store: the state is not held.
    assert!(o.o.journal.shared.state.try_lock().is_some());
    let history = o.o.journal.history();
    let read = away(move || history.all().map(|rows| rows.len()));
    let rows = read.recv_timeout(LONG).expect("a read answers meanwhile");
    assert_eq!(rows.unwrap(), 1, "only what is committed: a.md's version");
    assert!(o.versions_at("/memories/b.md").is_empty());
    assert_eq!(o.content_at("/memories/b.md"), Some(sha(b"two")), "ahead");
    assert_eq!(o.o.journal.shared.state.lock().in_flight, Some(sent.batch));
    answer.send(Ok(())).unwrap();
    w.recv_timeout(LONG).unwrap().expect("committed");
    assert_eq!(o.versions_at("/memories/b.md").len(), 1);
    assert_eq!(o.o.journal.shared.state.lock().in_flight, None);
}

fn sha(bytes: &[u8]) -> crate::digest::Sha {
    crate::digest::Sha::of(bytes)
}

#[test]
fn a_refused_commit_gives_the_view_back_exactly() {
    let o = open(Duration::ZERO);
    o.submit(write("/memories/a.md", "one")).wait().unwrap();
    let before = o.view();
    let next_batch = o.o.journal.shared.state.lock().next_batch;
    let (came, answer) = o.fake.gate();
    let w = o.submit_away(write("/memories/a.md", "two"));
    came.recv_timeout(LONG).unwrap();
    assert_eq!(o.content_at("/memories/a.md"), Some(sha(b"two")));
    let down = UpstreamError::Unreachable("cut".into());
    answer.send(Err(down)).unwrap();
    let e = w.recv_timeout(LONG).unwrap().expect_err("not committed");
    assert!(e.to_string().contains("shared store"), "{e}");
    assert_eq!(o.view(), before, "the view as it was before the batch");
    let st = o.o.journal.shared.state.lock();
    assert_eq!((st.next_batch, st.in_flight), (next_batch, None));
    drop(st);
    assert_eq!(o.fake.committed_batches().len(), 1, "a.md's first only");
    assert_eq!(o.versions_at("/memories/a.md").len(), 1);
}

#[test]
fn a_batch_refused_for_now_goes_again_and_is_applied_once() {
    let o = open(Duration::ZERO);
    let (came, answer) = o.fake.gate();
    let (came2, answer2) = o.fake.gate();
    let w = o.submit_away(write("/memories/a.md", "one"));
    let first = came.recv_timeout(LONG).unwrap();
    answer.send(Err(UpstreamError::Again)).unwrap();
    let second = came2.recv_timeout(LONG).expect("sent again");
    assert_eq!(first.batch, second.batch, "the same batch, not a new one");
    answer2.send(Ok(())).unwrap();
    w.recv_timeout(LONG).unwrap().expect("committed");
    assert_eq!(o.fake.committed_batches(), vec![second.batch]);
    assert_eq!(o.versions_at("/memories/a.md").len(), 1, "one version");
    assert_eq!(o.content_at("/memories/a.md"), Some(sha(b"one")));
    // Taken: the batch goes again under the number the store gives.
    let (came, answer) = o.fake.gate();
    let w = o.submit_away(write("/memories/a.md", "two"));
    came.recv_timeout(LONG).unwrap();
    answer.send(Err(UpstreamError::Taken(40))).unwrap();
    w.recv_timeout(LONG)
        .unwrap()
        .expect("committed as batch 40");
    assert_eq!(o.fake.committed_batches(), vec![second.batch, 40]);
    assert_eq!(o.o.journal.shared.state.lock().next_batch, 41);
}

/// a.md held "secret" (its first version), and holds "other" now; a batch
/// in flight writes "secret" to c.md. Returns the first version.
fn a_secret_and_c_in_flight(o: &Shared) -> (u64, Receiver<Answer>, Release) {
    o.submit(write("/memories/a.md", "secret")).wait().unwrap();
    let secret = o.versions_at("/memories/a.md")[0];
    o.submit(write("/memories/a.md", "other")).wait().unwrap();
    let (came, answer) = o.fake.gate();
    let w = o.submit_away(write("/memories/c.md", "secret"));
    came.recv_timeout(LONG).unwrap();
    (secret, w, answer)
}

#[test]
fn a_redaction_waits_for_a_commit_in_flight_and_judges_what_it_became() {
    // Refused: c.md never held the secret, so it can be erased.
    let o = open(Duration::ZERO);
    let (secret, w, answer) = a_secret_and_c_in_flight(&o);
    let history = o.o.journal.history();
    let redact = away(move || history.redact(secret, false));
    assert!(redact.recv_timeout(NOT_YET).is_err(), "it waits");
    answer
        .send(Err(UpstreamError::Unreachable("cut".into())))
        .unwrap();
    w.recv_timeout(LONG).unwrap().expect_err("not committed");
    let said = redact.recv_timeout(LONG).unwrap().expect("erased");
    assert!(said.contains("content erased"), "{said}");
    assert_eq!(o.content_at("/memories/c.md"), None);
    // Committed: c.md holds it now, and the redaction is refused.
    let o = open(Duration::ZERO);
    let (secret, w, answer) = a_secret_and_c_in_flight(&o);
    let history = o.o.journal.history();
    let redact = away(move || history.redact(secret, false));
    assert!(redact.recv_timeout(NOT_YET).is_err(), "it waits");
    answer.send(Ok(())).unwrap();
    w.recv_timeout(LONG).unwrap().expect("committed");
    let refused = redact.recv_timeout(LONG).unwrap().expect_err("in use");
    assert!(refused.to_string().contains("holds"), "{refused}");
}

#[test]
fn a_rewrite_is_not_starved_by_commits_in_a_row() {
    let o = Arc::new(open(Duration::from_millis(2)));
    o.submit(write("/memories/old.md", "old")).wait().unwrap();
    let old = o.versions_at("/memories/old.md")[0];
    o.submit(write("/memories/old.md", "new")).wait().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (o, stop) = (o.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let change = write(&format!("/memories/t{t}.md"), &format!("{n}"));
                    o.submit(change).wait().expect("committed");
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let history = o.o.journal.history();
    let redact = away(move || history.redact(old, false));
    let said = redact.recv_timeout(LONG).expect("done under load");
    assert!(said.expect("erased").contains("content erased"));
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        assert!(w.join().unwrap() > 0, "each writer got through");
    }
}

#[test]
fn no_shared_batch_begins_while_a_rewrite_holds_the_state() {
    // (Else the batch would hold the store's head, and so every other
    // host's commits, while it waits for the state.)
    let o = open(Duration::ZERO);
    let core = o.o.journal.shared.clone();
    let held = core.settled_state();
    let w = o.submit_away(write("/memories/a.md", "one"));
    assert!(w.recv_timeout(NOT_YET).is_err(), "it waits for the rewrite");
    assert_eq!(
        o.fake.begun.load(Ordering::SeqCst),
        0,
        "no transaction open"
    );
    drop(held);
    w.recv_timeout(LONG)
        .unwrap()
        .expect("committed once the rewrite is done");
    assert_eq!(o.fake.begun.load(Ordering::SeqCst), 1);
}
