//! A leader's word for itself while its disk holds its Raft core: the beacon.
//!
//! openraft 0.9's core waits for the fsync of each of its appends, so a leader
//! whose sync takes 800 ms (a loaded disk) sends no heartbeat for 800 ms, and
//! its followers, whose lease is a few hundred milliseconds, elect another
//! leader: on a shared disk, one that is no faster. Likewise a follower's core
//! held by its own sync answers no AppendEntries, and a leader that hears
//! from no majority for a second steps down.
//!
//! So when openraft's own contact with a majority is late by more than a few
//! heartbeats, the leader's beacon task asks every voter "do you follow me, in
//! this term?", from outside the core. A follower answers from its last
//! published Raft metrics, also outside its core: yes when its committed vote
//! is for this leader and term, and its own core answered within
//! [`crate::RaftTiming::core_hold_limit`]; and a yes counts as contact with a
//! live leader for its [`super::elector`] and [`super::judge`]. A majority of
//! yeses counts as quorum contact for the leader's step-down
//! ([`crate::leadership`]).
//!
//! The beacon vouches only for a core that answered within the hold limit
//! ([`crate::core_watch`]): a leader whose disk holds a write for longer, or
//! whose core is stuck for any other reason, goes silent, and the replicas
//! with working disks elect a leader that can commit. Nothing here touches a
//! vote, a term or the log: safety stays with Raft's own vote.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ballot;
use crate::codec;
use crate::core_watch::CoreWatch;
use crate::leadership::Leadership;
use crate::network::{Method, PeerNetwork};
use crate::types::{Raft, ReplicaId, Vote};

/// Do you follow me, leader of `term`?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconRequest {
    /// The term it leads in.
    pub term: u64,
    /// The leader.
    pub leader: ReplicaId,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconAnswer {
    /// It follows the leader in that term, and its own core answers.
    pub follows: bool,
    /// Its current term.
    pub term: u64,
}

/// Whether a replica with `vote`, in the follower state (running, not
/// leading, not standing) or not, whose core answered within the hold limit
/// or not, follows the leader that asks.
pub fn follows(request: &BeaconRequest, vote: &Vote, follower: bool, core_answers: bool) -> bool {
    core_answers
        && follower
        && vote.is_committed()
        && vote.leader_id().term == request.term
        && vote.leader_id().voted_for() == Some(request.leader)
}

/// A follower's record of the last beacon it followed.
#[derive(Debug, Clone, Default)]
pub struct LeaderContact {
    last: Arc<Mutex<Option<(u64, ReplicaId, Instant)>>>,
}

impl LeaderContact {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, ReplicaId, Instant)>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that the leader of `request` was followed at `at`.
    pub fn heard(&self, request: &BeaconRequest, at: Instant) {
        let mut last = self.lock();
        if last.is_none_or(|(_, _, before)| before <= at) {
            *last = Some((request.term, request.leader, at));
        }
    }

    /// When the leader `vote` commits to was last followed through a beacon.
    pub fn last_for(&self, vote: &Vote) -> Option<Instant> {
        if !vote.is_committed() {
            return None;
        }
        let leader = vote.leader_id().voted_for()?;
        self.lock()
            .filter(|(term, by, _)| *term == vote.leader_id().term && *by == leader)
            .map(|(_, _, at)| at)
    }
}

/// When and for how long the leader sends beacons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeaconTiming {
    /// Between beacons while they are due: the heartbeat interval.
    pub every: Duration,
    /// Due once openraft's contact with a majority is older than this.
    pub after: Duration,
    /// The most a core may go without answering and still be vouched for.
    pub hold_limit: Duration,
    /// How long a beacon's answers are waited for: the followers' lease.
    pub answer_within: Duration,
}

impl BeaconTiming {
    /// For heartbeats every `heartbeat` and a followers' `lease`: due after
    /// three missed heartbeats, but within half the lease.
    pub fn new(heartbeat: Duration, lease: Duration, hold_limit: Duration) -> Self {
        BeaconTiming {
            every: heartbeat,
            after: (heartbeat * 3).min(lease / 2),
            hold_limit,
            answer_within: lease,
        }
    }
}

/// What the leader's beacon does at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// openraft's own contact is recent (or this replica does not lead).
    Quiet,
    /// Send a beacon.
    Send,
    /// Due, but openraft's contact (or the core) has been missing past the
    /// hold limit: the leader does not vouch for itself.
    Withheld(Withheld),
}

/// Why the beacon is withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withheld {
    /// The core has been silent for most of the time openraft's contact is
    /// missing: its disk holds it, or it is stuck.
    CoreHeld,
    /// The core answers, but openraft hears no majority: it cannot replicate.
    NoReplication,
}

/// The leader side, pure: what to do at `now`, given openraft's last
/// contact with a majority (`None`: not leading) and how long the core has
/// been silent. The beacon stands in for openraft for at most the hold
/// limit: a held core hears its majority again as soon as it is freed, so
/// openraft's own contact missing for longer means it cannot replicate
/// (a link too slow for AppendEntries, a replication that died), and the
/// leader must step down as it would without a beacon.
pub fn due(
    now: Instant,
    raft_contact: Option<Instant>,
    core_silent: Duration,
    timing: &BeaconTiming,
) -> Due {
    let Some(contact) = raft_contact else {
        return Due::Quiet;
    };
    let late = now.saturating_duration_since(contact);
    if late <= timing.after {
        Due::Quiet
    } else if core_silent > timing.hold_limit || late > timing.hold_limit {
        // The core's silence counts from its last answer to a probe, a few
        // tens of ms after openraft's last contact when the core is what
        // holds it up.
        Due::Withheld(if core_silent >= late / 2 {
            Withheld::CoreHeld
        } else {
            Withheld::NoReplication
        })
    } else {
        Due::Send
    }
}

/// The leader side of one replica.
pub struct LeaderBeacon {
    /// This replica.
    pub id: ReplicaId,
    /// Its Raft, for the membership.
    pub raft: Raft,
    /// Its peers.
    pub network: PeerNetwork,
    /// Its core's answers.
    pub core: CoreWatch,
    /// When beacons are due.
    pub timing: BeaconTiming,
}

impl LeaderBeacon {
    /// Runs until the replica's Raft stops. While this replica leads, sends a
    /// beacon every [`BeaconTiming::every`] that [`due`] says so, for the
    /// last instant openraft reported contact with a majority
    /// (`raft_contact`); publishes on `acks` the term and instant of the
    /// latest beacon a majority of every voter set followed.
    pub async fn run(
        self,
        mut leadership: watch::Receiver<Leadership>,
        raft_contact: watch::Receiver<Option<Instant>>,
        acks: watch::Sender<Option<(u64, Instant)>>,
    ) {
        let acks = Arc::new(acks);
        let timing = self.timing;
        let mut every = tokio::time::interval(timing.every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut rounds = JoinSet::new();
        let mut was = Due::Quiet;
        loop {
            while rounds.try_join_next().is_some() {}
            if !leadership.borrow().is_self {
                was = Due::Quiet;
                if leadership.changed().await.is_err() {
                    return;
                }
                continue;
            }
            every.tick().await;
            // Read after the wait: a leader that stepped down meanwhile
            // sends nothing.
            let leading = leadership.borrow().clone();
            if !leading.is_self {
                continue;
            }
            // Raft stopped (its metrics' sender is gone), or its core did.
            if leadership.has_changed().is_err() || self.core.stopped() {
                return;
            }
            let now = Instant::now();
            let silent = self.core.silent_for(now);
            let now_due = due(now, *raft_contact.borrow(), silent, &timing);
            say(was, now_due, silent, &timing);
            was = now_due;
            if now_due != Due::Send {
                continue;
            }
            let request = BeaconRequest {
                term: leading.term,
                leader: self.id,
            };
            let Some(round) = Round::of(&self.raft, self.id, request) else {
                continue;
            };
            let (network, acks) = (self.network.clone(), Arc::clone(&acks));
            rounds.spawn(async move {
                if round.ask(&network, timing.answer_within).await {
                    acks.send_if_modified(|latest| {
                        let newer =
                            latest.is_none_or(|(term, at)| (term, at) < (request.term, now));
                        if newer {
                            *latest = Some((request.term, now));
                        }
                        newer
                    });
                }
            });
        }
    }
}

/// Logs the beacon's changes of mind, not its every turn.
fn say(was: Due, now: Due, silent: Duration, timing: &BeaconTiming) {
    let limit_ms = timing.hold_limit.as_millis();
    match (was, now) {
        (Due::Quiet, Due::Send) => tracing::debug!(
            core_silent_ms = silent.as_millis() as u64,
            "openraft's heartbeats are late: the beacon speaks for this leader"
        ),
        (Due::Withheld(_), Due::Withheld(_)) => {}
        (_, Due::Withheld(Withheld::CoreHeld)) => tracing::warn!(
            core_silent_ms = silent.as_millis() as u64,
            "this leader's Raft core has not answered for over {limit_ms} ms (its disk holds the log's writes, or the core is stuck): it no longer vouches for itself, so replicas that can commit elect a leader"
        ),
        (_, Due::Withheld(Withheld::NoReplication)) => tracing::warn!(
            "no majority has acknowledged this leader's replication for over {limit_ms} ms although its core answers: the beacon no longer stands in for it, and it steps down"
        ),
        (Due::Withheld(_), Due::Send | Due::Quiet) => {
            tracing::info!("this leader's Raft core answers again")
        }
        _ => {}
    }
}

/// One beacon to every other voter.
struct Round {
    request: BeaconRequest,
    voter_sets: Vec<BTreeSet<ReplicaId>>,
    /// Every other voter and its peer address.
    peers: Vec<(ReplicaId, String)>,
    /// The leader itself: it follows itself.
    id: ReplicaId,
}

impl Round {
    /// The round for the membership openraft last published.
    fn of(raft: &Raft, id: ReplicaId, request: BeaconRequest) -> Option<Round> {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let (voter_sets, others) = ballot::voters_of(m.membership_config.membership(), id);
        let peers = others
            .into_iter()
            .map(|(voter, addr)| (voter, addr.peer))
            .collect();
        (!voter_sets.is_empty()).then_some(Round {
            request,
            voter_sets,
            peers,
            id,
        })
    }

    /// True once a majority of every voter set follows.
    async fn ask(self, network: &PeerNetwork, within: Duration) -> bool {
        let mut followed = BTreeSet::from([self.id]);
        if ballot::majority_of_each(&self.voter_sets, &followed) {
            return true;
        }
        let Ok(payload) = codec::encode(&self.request) else {
            return false;
        };
        let mut asks = JoinSet::new();
        for (peer, addr) in self.peers {
            let (network, payload) = (network.clone(), payload.clone());
            asks.spawn(async move {
                let reply = network
                    .call(peer, &addr, Method::Beacon, payload, within)
                    .await;
                (peer, reply)
            });
        }
        while let Some(joined) = asks.join_next().await {
            let Ok((peer, Ok(bytes))) = joined else {
                continue;
            };
            if codec::decode::<BeaconAnswer>(&bytes).is_ok_and(|a| a.follows) {
                followed.insert(peer);
                if ballot::majority_of_each(&self.voter_sets, &followed) {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: BeaconTiming = BeaconTiming {
        every: Duration::from_millis(30),
        after: Duration::from_millis(90),
        hold_limit: Duration::from_secs(3),
        answer_within: Duration::from_millis(200),
    };

    #[test]
    fn timing_is_three_heartbeats_within_half_the_lease() {
        let t = BeaconTiming::new(
            Duration::from_millis(30),
            Duration::from_millis(200),
            Duration::from_secs(3),
        );
        assert_eq!(t.after, Duration::from_millis(90));
        let tight = BeaconTiming::new(
            Duration::from_millis(50),
            Duration::from_millis(200),
            Duration::from_secs(3),
        );
        assert_eq!(tight.after, Duration::from_millis(100));
    }

    #[test]
    fn due_only_when_openrafts_contact_is_late_and_the_core_is_held_briefly() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let ms = Duration::from_millis;
        assert_eq!(
            due(at(1_000), None, ms(0), &TIMING),
            Due::Quiet,
            "not leading"
        );
        assert_eq!(due(at(90), Some(at(0)), ms(0), &TIMING), Due::Quiet);
        assert_eq!(due(at(91), Some(at(0)), ms(91), &TIMING), Due::Send);
        assert_eq!(due(at(3_000), Some(at(0)), ms(3_000), &TIMING), Due::Send);
        assert_eq!(
            due(at(3_001), Some(at(3_000)), ms(3_001), &TIMING),
            Due::Quiet,
            "openraft's contact is back: nothing to stand in for"
        );
        assert_eq!(
            due(at(3_091), Some(at(0)), ms(3_040), &TIMING),
            Due::Withheld(Withheld::CoreHeld),
            "a core held past the limit is not vouched for"
        );
        // The followers are held, not this core: sent, up to the limit.
        assert_eq!(due(at(2_500), Some(at(0)), ms(20), &TIMING), Due::Send);
        assert_eq!(
            due(at(3_001), Some(at(0)), ms(20), &TIMING),
            Due::Withheld(Withheld::NoReplication),
            "a core that answers but cannot replicate for longer steps down"
        );
        // Contact lapsed just before the core's silence reached the limit.
        assert_eq!(
            due(at(3_001), Some(at(0)), ms(2_960), &TIMING),
            Due::Withheld(Withheld::CoreHeld)
        );
    }

    #[test]
    fn a_follower_follows_only_its_committed_leader_while_its_core_answers() {
        let ask = BeaconRequest { term: 4, leader: 1 };
        let committed = Vote::new_committed(4, 1);
        let follower = |vote: &Vote| follows(&ask, vote, true, true);
        assert!(follower(&committed));
        assert!(!follows(&ask, &committed, true, false), "its core is held");
        assert!(
            !follows(&ask, &committed, false, true),
            "it leads, stands or stopped"
        );
        assert!(!follower(&Vote::new(4, 1)), "not committed");
        assert!(!follower(&Vote::new_committed(5, 2)), "a later term");
        assert!(!follower(&Vote::new_committed(4, 2)), "another leader");
        let later = BeaconRequest { term: 5, leader: 1 };
        assert!(!follows(&later, &committed, true, true));
    }

    #[test]
    fn contact_counts_only_for_the_vote_it_was_heard_under() {
        let contact = LeaderContact::default();
        let start = Instant::now();
        let vote = Vote::new_committed(4, 1);
        assert_eq!(contact.last_for(&vote), None);
        contact.heard(&BeaconRequest { term: 4, leader: 1 }, start);
        assert_eq!(contact.last_for(&vote), Some(start));
        assert_eq!(contact.last_for(&Vote::new_committed(5, 1)), None);
        assert_eq!(contact.last_for(&Vote::new(4, 1)), None);
        // An older hearing noted late keeps the newer one.
        contact.heard(
            &BeaconRequest { term: 4, leader: 1 },
            start.checked_sub(Duration::from_millis(5)).unwrap_or(start),
        );
        assert_eq!(contact.last_for(&vote), Some(start));
    }
}
