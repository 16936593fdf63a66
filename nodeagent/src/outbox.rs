//! Reports waiting for the leader's acknowledgement. Each report gets an id; it
//! is sent at once when connected, sent again after every reconnection, and
//! dropped only when the leader says it was committed (or refused as stale), so a
//! leader change never loses an exit, a release or a GPU failure.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use corral_proto::agent::AgentReport;
use tokio::sync::Notify;

/// The unacknowledged reports.
#[derive(Debug, Default, Clone)]
pub struct Outbox {
    inner: Arc<Mutex<Inner>>,
    added: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    pending: BTreeMap<u64, AgentReport>,
    /// Ids already handed to the current connection.
    sent: u64,
}

impl Outbox {
    /// Queues a report; returns its id.
    pub fn push(&self, report: AgentReport) -> u64 {
        let id = match self.inner.lock() {
            Ok(mut inner) => {
                inner.next_id += 1;
                let id = inner.next_id;
                inner.pending.insert(id, report);
                id
            }
            Err(_) => 0,
        };
        self.added.notify_one();
        id
    }

    /// Whether report `id` still waits for the leader's acknowledgement.
    pub fn is_pending(&self, id: u64) -> bool {
        self.inner
            .lock()
            .map_or(true, |inner| inner.pending.contains_key(&id))
    }

    /// Reports not yet handed to this connection, oldest first.
    pub fn unsent(&self) -> Vec<(u64, AgentReport)> {
        let Ok(mut inner) = self.inner.lock() else {
            return Vec::new();
        };
        let from = inner.sent;
        let out: Vec<(u64, AgentReport)> = inner
            .pending
            .range(from + 1..)
            .map(|(id, r)| (*id, r.clone()))
            .collect();
        if let Some((last, _)) = out.last() {
            inner.sent = *last;
        }
        out
    }

    /// A new connection: every pending report must be sent again.
    pub fn reconnected(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.sent = 0;
        }
    }

    /// The leader acknowledged `id`.
    pub fn done(&self, id: u64) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.pending.remove(&id);
        }
    }

    /// How many reports wait for acknowledgement.
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.pending.len())
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves when a report is pushed.
    pub async fn added(&self) {
        self.added.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::ids::JobId;

    fn started(job: u64) -> AgentReport {
        AgentReport::Started {
            job: JobId(job),
            attempt: 1,
        }
    }

    #[test]
    fn reports_are_resent_after_a_reconnection_until_acknowledged() {
        let outbox = Outbox::default();
        outbox.push(started(1));
        outbox.push(started(2));
        let first = outbox.unsent();
        assert_eq!(first.len(), 2);
        assert!(outbox.unsent().is_empty(), "sent twice on one connection");
        outbox.done(first[0].0);
        outbox.reconnected();
        let again = outbox.unsent();
        assert_eq!(again, vec![(first[1].0, started(2))]);
        assert!(outbox.is_pending(first[1].0));
        outbox.done(first[1].0);
        assert!(!outbox.is_pending(first[1].0));
        assert!(outbox.is_empty());
    }
}
