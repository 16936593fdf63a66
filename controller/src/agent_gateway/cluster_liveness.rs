//! Which liveness settings the gateway uses: the cluster's, replicated
//! through Raft (`Command::SetLiveness`), so that every controller that leads
//! tells agents the same lease and declares nodes down by the same timeout;
//! this controller's file only until the cluster has some (a new cluster's
//! first leader, or the first leader of a build that replicates them, sets
//! them from its file: see the leader loop).

use std::time::Duration;

use corral_state::ClusterState;
use corral_state::node_liveness::NodeLiveness;

/// The settings agents are told at their welcome: the cluster's current
/// ones, else `file`'s.
pub fn in_force(state: &ClusterState, file: &NodeLiveness) -> NodeLiveness {
    state.liveness().map_or(*file, |settings| settings.current)
}

/// When the leader marks a silent node not responding, and when it declares
/// it down, at the state's time: a few missed heartbeats (2 s at the default
/// 500 ms) for the first, lease and margin for the second (the longer of
/// the current and the replaced settings' while a change is recent).
pub fn timeouts(state: &ClusterState, file: &NodeLiveness) -> (Duration, Duration) {
    let current = in_force(state, file);
    let down_after_ms = state.liveness().map_or(file.down_after_ms(), |settings| {
        settings.down_after_ms(state.clock())
    });
    let down_after = Duration::from_millis(down_after_ms);
    let not_responding_after =
        Duration::from_millis(current.heartbeat_ms.saturating_mul(4).max(2_000)).min(down_after);
    (not_responding_after, down_after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::testkit::{admin, at};
    use corral_state::{Command, Timestamp};

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
        let mut state = ClusterState::default();
        assert_eq!(in_force(&state, &file), file);
        assert_eq!(
            timeouts(&state, &file),
            (Duration::from_secs(2), Duration::from_secs(30))
        );
        set(&mut state, liveness(10_000, 5_000), 10);
        assert_eq!(in_force(&state, &file), liveness(10_000, 5_000));
        assert_eq!(timeouts(&state, &file).1, Duration::from_secs(15));
    }

    #[test]
    fn a_shorter_lease_declares_by_the_old_timeout_through_the_transition() {
        let file = NodeLiveness::default();
        let mut state = ClusterState::default();
        set(&mut state, liveness(20_000, 10_000), 10);
        set(&mut state, liveness(4_000, 2_000), 100);
        assert_eq!(in_force(&state, &file), liveness(4_000, 2_000));
        assert_eq!(timeouts(&state, &file).1, Duration::from_secs(30));
        // 2 × 20 s + 10 s after the change, in state time.
        assert!(state.apply(Command::Tick { at: at(150) }).is_ok());
        assert_eq!(state.clock(), Timestamp(150_000));
        assert_eq!(timeouts(&state, &file).1, Duration::from_secs(6));
    }
}
