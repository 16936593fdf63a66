//! A leader whose disk holds its writes (`corral_consensus::election::beacon`).
//!
//! openraft 0.9's core waits for the fsync of each append, so a leader whose
//! sync took 800 ms (the CI machine's disk under load) sent no heartbeat
//! for 800 ms: its followers elected another leader, twice over, and the
//! term grew by 3. A disk that holds a write for less than the core-hold
//! limit now costs no election; one that holds it for longer still does, so
//! that replicas that can commit take over.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use corral_consensus::RaftTiming;
use support::{TestCluster, mark, timing};

/// The tests' timing, with a leader's step-down at the production second
/// and a core-hold limit between the two holds tried.
fn held_timing() -> RaftTiming {
    RaftTiming {
        quorum_contact_timeout: Duration::from_secs(1),
        core_hold_limit: Duration::from_secs(4),
        ..timing()
    }
}

/// A hold of 2.5 s (four of the followers' leases, past the leader's
/// step-down second) while a proposal waits on it: no election, and the
/// proposal commits once the disk lets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_disk_holds_a_write_briefly_stays_leader() {
    let cluster = TestCluster::start_with(3, held_timing()).await;
    cluster.propose(mark("before")).await.unwrap();
    let leader = cluster.leader().await;
    let term = cluster.replicas[&leader].metrics().term;
    let hold = Duration::from_millis(2_500);
    assert!(hold > Duration::from_millis(cluster.timing.election_max_ms) * 4);
    assert!(hold > cluster.timing.quorum_contact_timeout);
    assert!(hold < cluster.timing.core_hold_limit);

    cluster.replicas[&leader].hold_log_syncs(hold);
    let started = tokio::time::Instant::now();
    let held = cluster.replicas[&leader].propose(mark("held")).await;
    assert!(held.is_ok_and(|r| r.is_ok()), "the held proposal failed");
    let waited = started.elapsed();
    assert!(
        waited >= hold - Duration::from_millis(100),
        "the proposal did not wait for the held sync ({waited:?}): the hold did not take"
    );

    cluster.propose(mark("after")).await.unwrap();
    assert_eq!(cluster.leader().await, leader, "leadership moved");
    for (id, replica) in &cluster.replicas {
        assert_eq!(replica.metrics().term, term, "replica {id}'s term moved");
    }
    cluster.converged_digests().await;
    cluster.shutdown().await;
}

/// A disk that holds the leader's write past the core-hold limit: the
/// others elect a leader that commits, by one election.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_disk_holds_a_write_past_the_limit_is_replaced() {
    let cluster = TestCluster::start_with(3, held_timing()).await;
    cluster.propose(mark("before")).await.unwrap();
    let leader = cluster.leader().await;
    let term = cluster.replicas[&leader].metrics().term;
    let hold = cluster.timing.core_hold_limit * 3;
    cluster.replicas[&leader].hold_log_syncs(hold);
    // The held leader's core takes this append and waits on its sync.
    let held = {
        let replica = &cluster.replicas[&leader];
        tokio::time::timeout(Duration::from_millis(200), replica.propose(mark("held"))).await
    };
    assert!(held.is_err(), "the held proposal did not wait: {held:?}");

    let deadline = tokio::time::Instant::now() + cluster.patience;
    let next = loop {
        let elected = cluster
            .replicas
            .iter()
            .filter(|(id, _)| **id != leader)
            .find(|(_, r)| r.leadership().borrow().is_self)
            .map(|(id, _)| *id);
        if let Some(next) = elected {
            break next;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no other replica took over from a leader held for {hold:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let replica = &cluster.replicas[&next];
    assert!(
        replica.propose(mark("elsewhere")).await.unwrap().is_ok(),
        "the new leader cannot commit"
    );
    assert_eq!(replica.metrics().term, term + 1, "more than one election");
    cluster.shutdown().await;
}
