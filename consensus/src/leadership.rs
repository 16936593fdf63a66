//! Who leads, as this replica sees it, and whether this replica, when it leads,
//! still hears from a majority.
//!
//! openraft 0.9 has no check-quorum: a leader cut off from the majority goes on
//! believing it leads while the others elect a new one. Its metrics say how long
//! ago a quorum last acknowledged it (`millis_since_quorum_ack`, refreshed on
//! every turn of its core loop). A leader out of contact for longer than
//! [`crate::RaftTiming::quorum_contact_timeout`] is *stale* and steps down: it
//! refuses new proposals at once and gives up on those it holds (see the
//! proposer), stops heartbeating, and is published as not leading, so clients
//! and agents go elsewhere instead of waiting out a timeout, and the replicas
//! that reach each other elect a new leader.
//!
//! A majority that followed the leader's [`crate::election::beacon`] counts
//! as contact too: while the leader's own disk holds its core, openraft reads
//! no answers, but the majority is there.

use std::time::Duration;

use openraft::ServerState;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::election::STEPPED_DOWN_PROBE;
use crate::types::{Raft, ReplicaAddr, ReplicaId};

/// Who leads, as this replica sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leadership {
    /// The current term.
    pub term: u64,
    /// The leader, if known.
    pub leader: Option<(ReplicaId, ReplicaAddr)>,
    /// True when this replica leads.
    pub is_self: bool,
}

/// How often staleness is looked at when Raft's metrics are quiet.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// When this replica last heard from a quorum while leading: a pure tracker fed
/// with Raft's metrics, the beacon's answers and the time.
#[derive(Debug, Clone, Default)]
pub struct QuorumContact {
    /// The term this replica leads in, and the latest instant a quorum is known
    /// to have acknowledged it through openraft (its election counts: a
    /// majority voted for it).
    leading: Option<(u64, Instant)>,
    /// The term and instant of the latest beacon a majority followed.
    beacon: Option<(u64, Instant)>,
}

impl QuorumContact {
    /// Takes in one reading: whether this replica leads (in which term), and
    /// how long ago a quorum last acknowledged it, as Raft reported at `now`.
    pub fn observe(&mut self, now: Instant, leads_in: Option<u64>, millis_since_ack: Option<u64>) {
        let Some(term) = leads_in else {
            self.leading = None;
            return;
        };
        let contact = match self.leading {
            Some((led, contact)) if led == term => contact,
            _ => now,
        };
        let acked = millis_since_ack
            .and_then(|ms| now.checked_sub(Duration::from_millis(ms)))
            .filter(|acked| *acked > contact)
            .unwrap_or(contact);
        self.leading = Some((term, acked));
    }

    /// Takes in the latest beacon a majority followed, and in which term.
    pub fn observe_beacon(&mut self, followed: Option<(u64, Instant)>) {
        if followed > self.beacon {
            self.beacon = followed;
        }
    }

    /// The latest instant openraft reported a quorum's acknowledgement, while
    /// leading (the beacon speaks when this is late).
    pub fn raft_contact(&self) -> Option<Instant> {
        self.leading.map(|(_, contact)| contact)
    }

    /// True when this replica leads but no quorum has acknowledged it, through
    /// openraft or a beacon of this term, for more than `limit` by `now`.
    pub fn stale(&self, now: Instant, limit: Duration) -> bool {
        self.leading.is_some_and(|(term, contact)| {
            let latest = match self.beacon {
                Some((followed_in, at)) if followed_in == term => contact.max(at),
                _ => contact,
            };
            now.saturating_duration_since(latest) > limit
        })
    }
}

/// What [`follow`] publishes.
pub struct Followed {
    /// Who leads, as this replica sees it (a stepped-down leader: nobody).
    pub leadership: watch::Receiver<Leadership>,
    /// True while this replica leads without a majority's contact (stepped down).
    pub stale: watch::Receiver<bool>,
    /// While it leads: when openraft last reported a quorum's acknowledgement.
    pub raft_contact: watch::Receiver<Option<Instant>>,
}

/// Follows Raft's metrics and the beacon's majorities (`beacon_acks`);
/// publishes leadership changes, and whether this replica leads without
/// contact with a quorum for over `limit` (both only when they change).
///
/// Past `limit` without a quorum, the leader steps down: it is published as
/// not leading and knowing no leader, and its heartbeats stop, so the replicas
/// that still reach each other stop hearing from it and elect another (see
/// [`crate::election`]). Every [`STEPPED_DOWN_PROBE`] it sends one heartbeat:
/// an answer from a majority takes it back.
pub fn follow(
    raft: &Raft,
    id: ReplicaId,
    limit: Duration,
    beacon_acks: watch::Receiver<Option<(u64, Instant)>>,
) -> Followed {
    let (publish, leadership) = watch::channel(Leadership::default());
    let (publish_stale, stale) = watch::channel(false);
    let (publish_contact, raft_contact) = watch::channel(None);
    let mut metrics = raft.metrics();
    let raft = raft.clone();
    tokio::spawn(async move {
        let mut contact = QuorumContact::default();
        let mut seen = Leadership::default();
        let mut last_probe: Option<Instant> = None;
        // One timer for the task's life: metrics change thousands of times a
        // second under load, and a new timer per change would cost each time.
        let mut look = tokio::time::interval(LOOK_EVERY);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut metrics_changed = true;
        loop {
            let now = Instant::now();
            if metrics_changed {
                // Observed only when Raft reports: a reading re-read later
                // would make an old acknowledgement look recent.
                let m = metrics.borrow_and_update();
                let leader = m.current_leader.and_then(|l| {
                    m.membership_config
                        .membership()
                        .get_node(&l)
                        .map(|addr| (l, addr.clone()))
                });
                let is_self = m.state == ServerState::Leader && m.current_leader == Some(id);
                contact.observe(
                    now,
                    is_self.then_some(m.current_term),
                    m.millis_since_quorum_ack,
                );
                publish_contact.send_if_modified(|published| {
                    let changed = *published != contact.raft_contact();
                    if changed {
                        *published = contact.raft_contact();
                    }
                    changed
                });
                seen = Leadership {
                    term: m.current_term,
                    leader,
                    is_self,
                };
            }
            contact.observe_beacon(*beacon_acks.borrow());
            let is_stale = contact.stale(now, limit);
            let became = publish_stale.send_if_modified(|published| {
                let changed = *published != is_stale;
                if changed {
                    *published = is_stale;
                }
                changed
            });
            if became {
                step(&raft, is_stale, limit);
                last_probe = is_stale.then_some(now);
            } else if is_stale
                && last_probe
                    .is_none_or(|at| now.saturating_duration_since(at) >= STEPPED_DOWN_PROBE)
            {
                last_probe = Some(now);
                let _ = raft.trigger().heartbeat().await;
            }
            let current = stepped(&seen, is_stale);
            publish.send_if_modified(|published| {
                let changed = *published != current;
                if changed {
                    *published = current;
                }
                changed
            });
            tokio::select! {
                changed = metrics.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    metrics_changed = true;
                }
                _ = look.tick() => metrics_changed = false,
            }
        }
    });
    Followed {
        leadership,
        stale,
        raft_contact,
    }
}

/// Steps down (`stale`) or back: heartbeats stop while stepped down.
fn step(raft: &Raft, stale: bool, limit: Duration) {
    raft.runtime_config().heartbeat(!stale);
    if stale {
        tracing::warn!(
            "stepping down: this replica leads but no majority has answered it for over {} ms (it may be cut off); it stops heartbeating and refuses proposals so the others elect a new leader, and probes every {} s",
            limit.as_millis(),
            STEPPED_DOWN_PROBE.as_secs()
        );
    } else {
        tracing::info!(
            "a majority answers this replica again (or it no longer leads): heartbeats resume"
        );
    }
}

/// What is published for what Raft reports: a leader that stepped down
/// leads no more, and knows no leader.
pub fn stepped(seen: &Leadership, stale: bool) -> Leadership {
    if stale && seen.is_self {
        Leadership {
            term: seen.term,
            leader: None,
            is_self: false,
        }
    } else {
        seen.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_millis(1000);

    #[test]
    fn a_leader_is_stale_only_after_the_limit_without_a_quorum_acknowledgement() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut contact = QuorumContact::default();
        assert!(!contact.stale(at(5_000), LIMIT), "not leading: never stale");
        // Elected at 0; no acknowledgement reported yet: the election counts.
        contact.observe(at(0), Some(3), None);
        assert!(!contact.stale(at(1_000), LIMIT));
        assert!(contact.stale(at(1_001), LIMIT));
        // Acknowledged 10 ms before a reading at 900.
        contact.observe(at(900), Some(3), Some(10));
        assert!(!contact.stale(at(1_890), LIMIT));
        assert!(contact.stale(at(1_891), LIMIT));
        // A later reading that reports an older acknowledgement changes nothing.
        contact.observe(at(1_000), Some(3), Some(500));
        assert!(contact.stale(at(1_891), LIMIT));
    }

    #[test]
    fn a_majority_that_followed_a_beacon_of_this_term_is_contact() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut contact = QuorumContact::default();
        contact.observe(at(0), Some(3), Some(0));
        // openraft reads no answers (its core is held); the beacon's do.
        contact.observe_beacon(Some((3, at(1_500))));
        assert!(!contact.stale(at(2_400), LIMIT));
        assert!(contact.stale(at(2_501), LIMIT));
        assert_eq!(
            contact.raft_contact(),
            Some(at(0)),
            "the beacon's own trigger"
        );
        // An older beacon changes nothing; one of an earlier term counts for nothing.
        contact.observe_beacon(Some((3, at(100))));
        assert!(contact.stale(at(2_501), LIMIT));
        let mut next_term = QuorumContact::default();
        next_term.observe(at(0), Some(4), Some(0));
        next_term.observe_beacon(Some((3, at(1_500))));
        assert!(next_term.stale(at(1_001), LIMIT));
    }

    #[test]
    fn a_stale_leader_is_published_as_knowing_no_leader() {
        let addr = ReplicaAddr::default();
        let leading = Leadership {
            term: 4,
            leader: Some((1, addr.clone())),
            is_self: true,
        };
        assert_eq!(stepped(&leading, false), leading);
        assert_eq!(
            stepped(&leading, true),
            Leadership {
                term: 4,
                leader: None,
                is_self: false
            }
        );
        let following = Leadership {
            term: 4,
            leader: Some((2, addr)),
            is_self: false,
        };
        assert_eq!(
            stepped(&following, true),
            following,
            "only a leader steps down"
        );
    }

    #[test]
    fn a_new_term_or_losing_leadership_starts_afresh() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut contact = QuorumContact::default();
        contact.observe(at(0), Some(3), Some(0));
        assert!(contact.stale(at(2_000), LIMIT));
        contact.observe(at(2_000), None, None);
        assert!(
            !contact.stale(at(9_000), LIMIT),
            "a follower is never stale"
        );
        contact.observe(at(9_000), Some(5), None);
        assert!(!contact.stale(at(9_500), LIMIT));
    }
}
