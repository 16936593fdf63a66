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
    /// Woken whenever the leader settles a report.
    settled: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    pending: BTreeMap<u64, AgentReport>,
    /// Ids already handed to the current connection.
    sent: u64,
    /// Pending reports someone waits on ([`Outbox::push_awaited`]).
    awaited: std::collections::BTreeSet<u64>,
    /// How awaited reports were settled: committed, or refused (the newest
    /// [`MAX_OUTCOMES`]).
    outcomes: BTreeMap<u64, bool>,
}

/// Settled outcomes kept for waiters.
const MAX_OUTCOMES: usize = 1024;

impl Outbox {
    /// Queues a report; returns its id.
    pub fn push(&self, report: AgentReport) -> u64 {
        self.queue(report, false)
    }

    /// Queues a report whose outcome someone will wait on
    /// ([`Outbox::settled`]); returns its id.
    pub fn push_awaited(&self, report: AgentReport) -> u64 {
        self.queue(report, true)
    }

    fn queue(&self, report: AgentReport, awaited: bool) -> u64 {
        let id = match self.inner.lock() {
            Ok(mut inner) => {
                inner.next_id += 1;
                let id = inner.next_id;
                inner.pending.insert(id, report);
                if awaited {
                    inner.awaited.insert(id);
                }
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

    /// The leader settled `id`: committed, or refused (stale, too large).
    pub fn settle(&self, id: u64, committed: bool) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.pending.remove(&id);
            if inner.awaited.remove(&id) {
                inner.outcomes.insert(id, committed);
                while inner.outcomes.len() > MAX_OUTCOMES {
                    inner.outcomes.pop_first();
                }
            }
        }
        self.settled.notify_waiters();
    }

    /// Waits up to `patience` for the leader to settle report `id`: whether
    /// it was committed, or `None` when it is still pending.
    pub async fn settled(&self, id: u64, patience: std::time::Duration) -> Option<bool> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            // Registered before the check, so a settlement between the two
            // is not missed.
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome(id) {
                return Some(outcome);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.outcome(id);
            }
        }
    }

    /// How `id` was settled, if it was (one not awaited, or settled too long
    /// ago to be remembered, counts as committed).
    fn outcome(&self, id: u64) -> Option<bool> {
        let inner = self.inner.lock().ok()?;
        if inner.pending.contains_key(&id) {
            return None;
        }
        Some(inner.outcomes.get(&id).copied().unwrap_or(true))
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
        outbox.settle(first[0].0, true);
        outbox.reconnected();
        let again = outbox.unsent();
        assert_eq!(again, vec![(first[1].0, started(2))]);
        assert!(outbox.is_pending(first[1].0));
        outbox.settle(first[1].0, true);
        assert!(!outbox.is_pending(first[1].0));
        assert!(outbox.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_settlement_ends_when_the_leader_settles_or_patience_runs_out() {
        let outbox = Outbox::default();
        let id = outbox.push_awaited(started(1));
        let patience = std::time::Duration::from_millis(50);
        assert_eq!(
            outbox.settled(id, patience).await,
            None,
            "settled without the leader"
        );
        let waiter = {
            let outbox = outbox.clone();
            tokio::spawn(
                async move { outbox.settled(id, std::time::Duration::from_secs(60)).await },
            )
        };
        tokio::task::yield_now().await;
        outbox.settle(id, true);
        assert_eq!(waiter.await.expect("the waiter ran"), Some(true));
        assert_eq!(
            outbox.settled(id, patience).await,
            Some(true),
            "already settled"
        );
        // Refused (the attempt had ended): the waiter hears so.
        let refused = outbox.push_awaited(started(2));
        outbox.settle(refused, false);
        assert_eq!(outbox.settled(refused, patience).await, Some(false));
    }
}
