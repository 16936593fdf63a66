//! The candidate side: one task per replica that stands for election only
//! after a majority said, in a pre-vote round, that it would vote for it.
//!
//! It sleeps until the pure [`super::timer`] says a round is due (the leader
//! lease plus a random share of the election timeout since it last heard from
//! a leader or last tried), then reads its Raft state again: heartbeats move
//! the due time on, so a follower of a live leader only ever wakes to find it
//! is not due yet. A round asks every other voter at once, and ends when a
//! majority of every voter set (itself included) would vote for it, which
//! starts openraft's election, or at a deadline. A replica that said it would
//! vote for another candidate waits a whole timeout before it asks itself,
//! and gives up a round during which it said so ([`super::judge`]). A leader, a learner and a replica
//! removed from the voters never stand.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::ServerState;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ballot;
use super::judge::Judge;
use super::pre_vote::{PreVoteAnswer, PreVoteRequest};
use super::timer::ElectionTiming;
use crate::codec;
use crate::leadership::Leadership;
use crate::network::{Method, PeerNetwork};
use crate::types::{Raft, ReplicaAddr, ReplicaId, Vote};

/// What a round needs from the Raft state, read at one moment.
struct Standing {
    /// This replica may stand: a voter, and not the leader.
    eligible: bool,
    /// Its current term.
    term: u64,
    /// Its vote when read.
    vote: Vote,
    /// When it last heard from a leader (through openraft) or changed its vote.
    contact: Option<Instant>,
    /// Every voter set (two during a joint change).
    voter_sets: Vec<BTreeSet<ReplicaId>>,
    /// The other voters' addresses.
    peers: BTreeMap<ReplicaId, ReplicaAddr>,
}

/// Runs until the replica's Raft stops.
pub async fn run(
    id: ReplicaId,
    raft: Raft,
    network: PeerNetwork,
    judge: Judge,
    timing: ElectionTiming,
    mut leadership: watch::Receiver<Leadership>,
) {
    let started = Instant::now();
    let mut last_attempt: Option<Instant> = None;
    let mut jitter = timing.jitter(rand::random());
    loop {
        let Ok(standing) = read_standing(&raft, id).await else {
            return;
        };
        if !standing.eligible {
            // A leader or non-voter: look again when leadership changes, or
            // after a lease (a learner may be promoted meanwhile).
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(timing.lease) => {}
            }
            last_attempt = None;
            continue;
        }
        // A candidate this replica just said it would vote for goes first:
        // a whole timeout from that grant, as from a leader's message.
        // A leader's beacon counts as its message (its core may be held by
        // its disk: see super::beacon).
        let contact = standing
            .contact
            .max(judge.beacon_contact(&standing.vote))
            .unwrap_or(started);
        let contact = judge
            .granted_other_at()
            .map_or(contact, |granted| granted.max(contact));
        let due = timing.due_at(contact, last_attempt, jitter);
        let now = Instant::now();
        if now < due {
            tokio::time::sleep_until(due).await;
            continue;
        }
        if !judge.begin_round(now) {
            continue;
        }
        let began = Instant::now();
        last_attempt = Some(began);
        jitter = timing.jitter(rand::random());
        // Long enough to open a call stream to a peer no leader's traffic
        // kept open (followers do not talk to each other), short enough
        // to leave the round before the next one is due; a round ends as
        // soon as a majority grants.
        let within = timing.lease + timing.timeout_max;
        let granted = ask_voters(id, &network, &judge, &standing, within).await;
        if judge.gave_way_since(began) {
            judge.round_over();
            tracing::info!(
                term = standing.term + 1,
                "another candidate (a lower id, or a longer log) asked while this replica did: it goes first"
            );
            continue;
        }
        // A vote cast meanwhile (another voter's election, a leader's first
        // message) makes the answers stale: standing now would raise the term
        // past that election and depose its winner.
        let unchanged = raft
            .with_raft_state({
                let vote = standing.vote;
                move |st| *st.vote_ref() == vote
            })
            .await;
        let Ok(unchanged) = unchanged else {
            judge.round_over();
            return;
        };
        if !unchanged {
            judge.round_over();
            continue;
        }
        if ballot::majority_of_each(&standing.voter_sets, &granted) {
            tracing::info!(
                term = standing.term + 1,
                granted = ?granted,
                "no leader heard for over {} ms and a majority would vote for this replica: standing for election",
                timing.lease.as_millis()
            );
            // The round stays open (higher ids refused) until openraft's
            // vote for itself speaks for it.
            let elected = raft.trigger().elect().await;
            judge.round_over();
            if elected.is_err() {
                return;
            }
        } else {
            judge.round_over();
            tracing::info!(
                term = standing.term + 1,
                granted = ?granted,
                "no leader heard, but no majority would vote for this replica: not standing (its term stays {})",
                standing.term
            );
        }
    }
}

async fn read_standing(
    raft: &Raft,
    id: ReplicaId,
) -> Result<Standing, openraft::error::Fatal<ReplicaId>> {
    raft.with_raft_state(move |st| {
        let (voter_sets, peers) =
            ballot::voters_of(st.membership_state.effective().membership(), id);
        let is_voter = voter_sets.iter().any(|set| set.contains(&id));
        Standing {
            eligible: is_voter && st.server_state != ServerState::Leader,
            term: st.vote_ref().leader_id.term,
            vote: *st.vote_ref(),
            contact: st.vote_last_modified(),
            voter_sets,
            peers,
        }
    })
    .await
}

/// One pre-vote round: who would vote for this replica (itself included,
/// judged by the same rules).
async fn ask_voters(
    id: ReplicaId,
    network: &PeerNetwork,
    judge: &Judge,
    standing: &Standing,
    within: Duration,
) -> BTreeSet<ReplicaId> {
    let mut granted = BTreeSet::new();
    let Ok(last_log_id) = judge.view().await.map(|v| v.last_log_id) else {
        return granted;
    };
    let request = PreVoteRequest {
        candidate: id,
        term: standing.term + 1,
        last_log_id,
    };
    if judge.answer(&request).await.is_ok_and(|a| a.granted()) {
        granted.insert(id);
    }
    let Ok(payload) = codec::encode(&request) else {
        return granted;
    };
    let mut asks = JoinSet::new();
    for (peer, addr) in &standing.peers {
        let (network, payload, peer, addr) =
            (network.clone(), payload.clone(), *peer, addr.peer.clone());
        asks.spawn(async move {
            let reply = network
                .call(peer, &addr, Method::PreVote, payload, within)
                .await;
            (peer, reply)
        });
    }
    let mut waiting: BTreeSet<ReplicaId> = standing.peers.keys().copied().collect();
    while !ballot::majority_of_each(&standing.voter_sets, &granted) {
        // Over as soon as the answers still out cannot make a majority (a
        // peer that is gone would hold the round to its deadline).
        let could: BTreeSet<ReplicaId> = granted.union(&waiting).copied().collect();
        if !ballot::majority_of_each(&standing.voter_sets, &could) {
            break;
        }
        let Some(joined) = asks.join_next().await else {
            break;
        };
        let Ok((peer, reply)) = joined else { continue };
        waiting.remove(&peer);
        match reply {
            Ok(bytes) => match codec::decode::<PreVoteAnswer>(&bytes) {
                Ok(answer) if answer.granted() => {
                    granted.insert(peer);
                }
                Ok(answer) => {
                    tracing::debug!(peer, refusal = ?answer.refusal, term = answer.term, "pre-vote refused");
                }
                Err(e) => tracing::debug!(peer, "undecodable pre-vote answer: {e}"),
            },
            // A peer of an earlier build has no pre-vote: its real vote decides,
            // under openraft's leader lease, as it did before.
            Err(status) if crate::peer_service::is_unknown_method(&status) => {
                granted.insert(peer);
            }
            Err(status) => tracing::debug!(peer, "no pre-vote answer: {}", status.message()),
        }
    }
    asks.abort_all();
    granted
}
