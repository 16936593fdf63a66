//! Which liveness settings the gateway uses: the cluster's, replicated
//! through Raft (`Command::SetLiveness`), so that every controller that leads
//! tells agents the same lease and declares nodes down by the same timeout;
//! this controller's file only until the cluster has some (a new cluster's
//! first leader, or the first leader of a build that replicates them, sets
//! them from its file: see the leader loop).

use std::time::Duration;

use corral_state::ClusterState;
use corral_state::node::Node;
use corral_state::node_liveness::NodeLiveness;

/// The settings agents are told at their welcome: the cluster's current
/// ones, else `file`'s.
pub fn in_force(state: &ClusterState, file: &NodeLiveness) -> NodeLiveness {
    state.liveness().map_or(*file, |settings| settings.current)
}

/// When the leader marks a silent node not responding: a few missed
/// heartbeats (2 s at the default 500 ms), never after it would declare it
/// down.
pub fn not_responding_after(state: &ClusterState, file: &NodeLiveness) -> Duration {
    let current = in_force(state, file);
    Duration::from_millis(
        current
            .heartbeat_ms
            .saturating_mul(4)
            .max(2_000)
            .min(current.down_after_ms()),
    )
}

/// When the leader declares `node` down after its last heartbeat: lease and
/// margin, of the settings it may still hold (see
/// `corral_state::node_liveness`: the longest of those replaced since, for a
/// node that registered before the last change).
pub fn down_after(state: &ClusterState, file: &NodeLiveness, node: &Node) -> Duration {
    let registered = node.registration.as_ref().map(|r| r.at);
    Duration::from_millis(state.liveness().map_or(file.down_after_ms(), |settings| {
        settings.down_after_ms(registered)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::Command;
    use corral_state::testkit::{admin, at, cluster, register};

    fn liveness(lease_ms: u64, down_margin_ms: u64) -> NodeLiveness {
        NodeLiveness {
            heartbeat_ms: 500,
            lease_ms,
            down_margin_ms,
        }
    }

    fn set(state: &mut ClusterState, settings: NodeLiveness, t: u64) {
        let command = Command::SetLiveness {
            liveness: settings,
            by: admin(),
            at: at(t),
        };
        assert!(state.apply(command).is_ok());
    }

    #[test]
    fn the_file_counts_only_until_the_cluster_has_settings() {
        let file = liveness(20_000, 10_000);
        let mut state = cluster(1, 8);
        let node = |s: &ClusterState| s.nodes()["n1"].clone();
        assert_eq!(in_force(&state, &file), file);
        assert_eq!(not_responding_after(&state, &file), Duration::from_secs(2));
        assert_eq!(
            down_after(&state, &file, &node(&state)),
            Duration::from_secs(30)
        );
        set(&mut state, liveness(10_000, 5_000), 10);
        assert_eq!(in_force(&state, &file), liveness(10_000, 5_000));
        assert_eq!(
            down_after(&state, &file, &node(&state)),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn a_node_that_registered_before_a_shorter_lease_keeps_the_old_timeout_until_it_registers() {
        let file = NodeLiveness::default();
        let mut state = cluster(1, 8);
        set(&mut state, liveness(20_000, 10_000), 10);
        register(&mut state, "n1", 8, &[], at(20));
        set(&mut state, liveness(4_000, 2_000), 100);
        assert_eq!(in_force(&state, &file), liveness(4_000, 2_000));
        let node = |s: &ClusterState| s.nodes()["n1"].clone();
        // However long after the change (a controller outage holds time still).
        assert!(state.apply(Command::Tick { at: at(100_000) }).is_ok());
        assert_eq!(
            down_after(&state, &file, &node(&state)),
            Duration::from_secs(30)
        );
        register(&mut state, "n1", 8, &[], at(100_001));
        assert_eq!(
            down_after(&state, &file, &node(&state)),
            Duration::from_secs(6)
        );
    }
}
