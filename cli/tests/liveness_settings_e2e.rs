//! The nodes' liveness settings are the cluster's, end to end on real
//! processes: every controller that leads tells agents the same lease,
//! whatever its own file says, and `corral admin liveness set` changes them
//! for the whole cluster (agents attach again to hear them).
//!
//! Before, the lease and the down margin were each controller's own
//! `[liveness]`: a controller whose file said 30 s that won an election
//! welcomed agents with a 30 s lease while another leader had declared nodes
//! down after 15 s, so a job could run in two places.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::{LocalCluster, wait_until};

const PATIENCE: Duration = Duration::from_secs(90);

/// Per agent, its "attached to the leader" lines, and how many of them name
/// `lease_ms`.
fn attaches(cluster: &LocalCluster, lease_ms: u64) -> BTreeMap<String, (usize, usize)> {
    let mut per_agent: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for line in cluster.agent_log_lines("attached to the leader") {
        let agent = line.split(':').next().unwrap_or_default().to_string();
        let counts = per_agent.entry(agent).or_default();
        counts.0 += 1;
        if line.contains(&format!("lease_ms={lease_ms} ")) {
            counts.1 += 1;
        }
    }
    per_agent
}

/// True when both agents attached with `lease_ms` more than `before` times
/// each (`before`: their attaches so far, from [`attaches`]).
fn both_attached_with(
    cluster: &LocalCluster,
    lease_ms: u64,
    before: &BTreeMap<String, (usize, usize)>,
) -> bool {
    let now = attaches(cluster, lease_ms);
    now.len() == 2
        && now
            .iter()
            .all(|(agent, (_, with))| *with > before.get(agent).map_or(0, |(_, with)| *with))
}

/// True when both agents attached again since `before` (from [`attaches`]),
/// with whatever lease.
fn both_attached_again(cluster: &LocalCluster, before: &BTreeMap<String, (usize, usize)>) -> bool {
    let now = attaches(cluster, 0);
    now.len() == 2
        && now
            .iter()
            .all(|(agent, (all, _))| *all > before.get(agent).map_or(0, |(all, _)| *all))
}

/// Waits until every replica is a member at lag 0 (a restarted one caught up).
fn caught_up(cluster: &LocalCluster) {
    wait_until(PATIENCE, "every replica at lag 0", || {
        let status = cluster.status();
        let members = status["members"].as_array().cloned().unwrap_or_default();
        members.len() == 3 && members.iter().all(|m| m["lag"].as_u64() == Some(0))
    });
}

/// Waits until `scontrol show config` (any replica's answer) holds `line`.
fn shows(cluster: &LocalCluster, line: &str) {
    wait_until(PATIENCE, &format!("show config to say {line:?}"), || {
        show_config(cluster).contains(line)
    });
}

/// `corral admin liveness set` as `principal`: a 500 ms heartbeat, a 6 s
/// lease and the margin given.
fn liveness_set(cluster: &LocalCluster, principal: &str, margin_ms: &str) -> std::process::Output {
    let args = [
        "admin",
        "liveness",
        "set",
        "--heartbeat-ms",
        "500",
        "--lease-ms",
        "6000",
    ];
    let margin = ["--down-margin-ms", margin_ms];
    cluster.corral(principal, &[&args[..], &margin[..]].concat())
}

fn show_config(cluster: &LocalCluster) -> String {
    let out = support::slurm_link(cluster, "scontrol", &support::me(), &["show", "config"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_leader_uses_the_clusters_liveness_settings_and_admins_change_them() {
    let cluster = LocalCluster::start_with_agents(3, 2);
    let dir = cluster.dir.path().to_path_buf();
    wait_until(
        PATIENCE,
        "both agents attached with the default lease",
        || both_attached_with(&cluster, 10_000, &BTreeMap::new()),
    );
    shows(&cluster, "AgentLease              = 10000 ms");
    shows(&cluster, "SlurmdTimeout           = 15 sec");
    shows(&cluster, "NodeLivenessFrom        = cluster");

    // Both other controllers' files now say a 30 s lease and a 10 s margin;
    // one of them leads once the leader is gone.
    let old = cluster.leader();
    for id in (1..=3).filter(|id| *id != old) {
        cluster.kill(id);
        let file = dir.join(format!("controller-{id}/corral.toml"));
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str(
            "\n[liveness]\nagent_heartbeat_ms = 500\nagent_lease_ms = 30000\ndown_margin_ms = 10000\n",
        );
        std::fs::write(&file, text).unwrap();
        cluster.restart(&format!("controller-{id}"));
        caught_up(&cluster);
    }
    let before = attaches(&cluster, 10_000);
    let leader = cluster.leader();
    if leader == old {
        cluster.kill(old);
        wait_until(PATIENCE, "a leader with the edited file", || {
            cluster.status()["leader"]
                .as_u64()
                .is_some_and(|new| new != old)
        });
        cluster.restart(&format!("controller-{old}"));
    }
    // Agents attach to the new leader (before the kill, had leadership
    // already moved to an edited controller, they did then).
    wait_until(
        PATIENCE,
        "both agents attached to a leader with the edited file",
        || leader != old || both_attached_again(&cluster, &before),
    );
    let with_file = attaches(&cluster, 30_000);
    assert!(
        with_file.values().all(|(_, with)| *with == 0),
        "a leader welcomed agents with its own file's lease: {:?}",
        cluster.agent_log_lines("attached to the leader")
    );
    assert!(
        !cluster
            .controller_log_lines("differs from the cluster's")
            .is_empty(),
        "the new leader did not say its file differs"
    );
    shows(&cluster, "AgentLease              = 10000 ms");

    // An admin changes them for the whole cluster.
    let bad = liveness_set(&cluster, "user-corral-admin", "100");
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--down-margin-ms"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let refused = liveness_set(&cluster, &support::me(), "3000");
    assert!(!refused.status.success(), "a plain user changed the lease");
    let set = liveness_set(&cluster, "user-corral-admin", "3000");
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    wait_until(
        PATIENCE,
        "both agents attached again with the new lease",
        || both_attached_with(&cluster, 6_000, &BTreeMap::new()),
    );
    shows(&cluster, "AgentLease              = 6000 ms");
    shows(&cluster, "NodeDownMargin          = 3000 ms");
    shows(&cluster, "SlurmdTimeout           = 9 sec");
    assert!(
        cluster.agent_log_lines("lease lapsed").is_empty(),
        "an agent's lease lapsed: {:?}",
        cluster.agent_log_lines("lease lapsed")
    );
}
