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

use std::time::Duration;

use support::{LocalCluster, wait_until};

const PATIENCE: Duration = Duration::from_secs(90);

/// Agents' "attached to the leader" lines that name `lease_ms`.
fn attached_with_lease(cluster: &LocalCluster, lease_ms: u64) -> usize {
    cluster
        .agent_log_lines("attached to the leader")
        .iter()
        .filter(|l| l.contains(&format!("lease_ms={lease_ms} ")))
        .count()
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
        || attached_with_lease(&cluster, 10_000) >= 2,
    );
    let config = show_config(&cluster);
    assert!(
        config.contains("AgentLease              = 10000 ms"),
        "{config}"
    );
    assert!(
        config.contains("SlurmdTimeout           = 15 sec"),
        "{config}"
    );
    assert!(
        config.contains("NodeLivenessFrom        = cluster"),
        "{config}"
    );

    // The two other controllers' files now say 30 s and 10 s; one of them
    // leads once the leader is killed.
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
    }
    let attached_before = cluster.agent_log_lines("attached to the leader").len();
    cluster.kill(old);
    wait_until(PATIENCE, "a leader with the edited file", || {
        cluster.status()["leader"]
            .as_u64()
            .is_some_and(|new| new != old)
    });
    wait_until(PATIENCE, "both agents attached to the new leader", || {
        cluster.agent_log_lines("attached to the leader").len() >= attached_before + 2
    });
    assert_eq!(
        attached_with_lease(&cluster, 30_000),
        0,
        "a leader welcomed agents with its own file's lease: {:?}",
        cluster.agent_log_lines("attached to the leader")
    );
    let differs = cluster.controller_log_lines("differs from the cluster's");
    assert!(
        !differs.is_empty(),
        "the new leader did not say its file differs"
    );
    cluster.restart(&format!("controller-{old}"));

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
        || attached_with_lease(&cluster, 6_000) >= 2,
    );
    let config = show_config(&cluster);
    assert!(
        config.contains("AgentLease              = 6000 ms"),
        "{config}"
    );
    assert!(
        config.contains("NodeDownMargin          = 3000 ms"),
        "{config}"
    );
    // The settings in force (for a while the leader still waits the longer
    // of the old and new timeouts before it declares a node down).
    assert!(
        config.contains("SlurmdTimeout           = 9 sec"),
        "{config}"
    );
    assert!(
        cluster.agent_log_lines("lease lapsed").is_empty(),
        "an agent's lease lapsed: {:?}",
        cluster.agent_log_lines("lease lapsed")
    );
}
