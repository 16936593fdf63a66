//! Elections only when a leader is really gone, on real processes through the
//! loopback fault proxy.
//!
//! - A follower cut off from the other controllers for 10 s comes back to the
//!   same leader in the same term. Before pre-vote it stood for election at
//!   every timeout while cut off, and its higher term deposed the healthy
//!   leader at the heal.
//! - A leader cut off from everyone steps down by itself (it stops
//!   heartbeating and names no leader), the others elect one new leader, and
//!   after the heal the term is exactly one higher: no second election.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use support::{LocalCluster, logs, wait_until};

/// How long a fault lasts.
const CUT: Duration = Duration::from_secs(10);
/// Generous: only catches a cluster that never settles.
const PATIENCE: Duration = Duration::from_secs(60);

/// Leader and term, as the cluster answers once every replica has lag 0.
fn settled(cluster: &LocalCluster) -> (u64, u64) {
    wait_until(PATIENCE, "every replica with lag 0", || {
        let status = cluster.status();
        status["leader"].is_u64()
            && status["members"]
                .as_array()
                .is_some_and(|m| m.len() == 3 && m.iter().all(|r| r["lag"] == 0))
    });
    let status = cluster.status();
    (
        status["leader"].as_u64().unwrap(),
        status["term"].as_u64().unwrap(),
    )
}

fn controllers_but(cluster_size: u64, one: u64) -> Vec<String> {
    (1..=cluster_size)
        .filter(|c| *c != one)
        .map(|c| format!("controller-{c}"))
        .collect()
}

#[test]
fn a_follower_cut_off_and_healed_changes_neither_leader_nor_term() {
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "1", "--fault-proxy"]);
    let (leader, term) = settled(&cluster);
    let follower = (1..=3).find(|c| *c != leader).unwrap();
    cluster.cut(
        &format!("controller-{follower}"),
        &controllers_but(3, follower),
    );
    // The fault's own length: nothing to wait for but time.
    std::thread::sleep(CUT);
    cluster.heal();
    let (after_leader, after_term) = settled(&cluster);
    assert_eq!(
        (after_leader, after_term),
        (leader, term),
        "controller-{follower} was cut off for {CUT:?}: leader {leader} term {term} became leader {after_leader} term {after_term}\n{}",
        logs(cluster.dir.path())
    );
    let refused = cluster.controller_log_lines("not standing");
    eprintln!(
        "controller-{follower} cut off {CUT:?}: leader {leader} and term {term} unchanged; {} pre-vote rounds refused (rate-limited lines)",
        refused.len()
    );
}

#[test]
fn a_leader_cut_off_steps_down_and_the_term_grows_by_one() {
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "1", "--fault-proxy"]);
    let (old, term) = settled(&cluster);
    let mut everyone = controllers_but(3, old);
    everyone.push("agent-gpu01".into());
    let cut_at = Instant::now();
    cluster.cut(&format!("controller-{old}"), &everyone);
    let old_log = cluster
        .dir
        .path()
        .join(format!("logs/controller-{old}.log"));
    wait_until(PATIENCE, "the cut-off leader steps down", || {
        std::fs::read_to_string(&old_log).is_ok_and(|l| l.contains("stepping down"))
    });
    let stepped_down_after = cut_at.elapsed();
    wait_until(PATIENCE, "a new leader among the others", || {
        let status = cluster.status();
        status["leader"].as_u64().is_some_and(|l| l != old)
    });
    let elected_after = cut_at.elapsed();
    std::thread::sleep(CUT.saturating_sub(cut_at.elapsed()));
    cluster.heal();
    let (leader, after_term) = settled(&cluster);
    eprintln!(
        "controller-{old} cut off: stepped down within {:.2} s, a new leader within {:.2} s; term {term} -> {after_term}, leader {leader}",
        stepped_down_after.as_secs_f64(),
        elected_after.as_secs_f64()
    );
    assert_ne!(
        leader, old,
        "the old leader took leadership back at the heal"
    );
    assert_eq!(
        after_term,
        term + 1,
        "one leader loss must cost one term\n{}",
        logs(cluster.dir.path())
    );
}
