//! Answering `fsync` once its change is durable, on a thread of its own,
//! so that no FUSE worker thread waits for the disk.

use fuser::ReplyEmpty;

use super::attr::empty;
use crate::store::Ticket;

/// Replies to `fsync` requests once their tickets are kept, on a thread of
/// its own: tickets are kept in the order they were taken (one persister,
/// in order), so one thread answering them in turn never waits longer than
/// the disk does.
pub(super) struct Syncer {
    waiting: std::sync::mpsc::Sender<(Ticket, ReplyEmpty)>,
}

impl Syncer {
    pub(super) fn start() -> Syncer {
        let (waiting, next) = std::sync::mpsc::channel::<(Ticket, ReplyEmpty)>();
        let started = std::thread::Builder::new()
            .name("memfs-fsync".into())
            .spawn(move || {
                for (ticket, reply) in next {
                    empty(ticket.wait(), reply);
                }
            });
        if let Err(e) = started {
            crate::say!(
                "memfs: cannot start the fsync thread ({e}); fsync answers on the request's thread"
            );
        }
        Syncer { waiting }
    }

    pub(super) fn answer_when_done(&self, ticket: Ticket, reply: ReplyEmpty) {
        if let Err(std::sync::mpsc::SendError((ticket, reply))) = self.waiting.send((ticket, reply))
        {
            empty(ticket.wait(), reply);
        }
    }
}
