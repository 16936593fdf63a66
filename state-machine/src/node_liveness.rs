//! How long a node may be silent: the agents' heartbeat period and lease,
//! and the margin after a lapsed lease before the leader declares the node
//! down. Replicated, so that every controller that leads judges nodes by the
//! same numbers the agents fence by (two controllers with different files,
//! or a margin shorter than the agent's watchdog, would let a job run in two
//! places).
//!
//! A change keeps the settings it replaced for a while: agents attached
//! before it hold the old lease until they attach again (the leader ends
//! their sessions when it applies the change), and one cut off meanwhile
//! fences by the old lease. So while [`NodeLiveness::transition_ms`] has not
//! passed since the change, a node is declared down only after the longer of
//! the two settings' timeouts.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The shortest down margin: the agent's fencing watchdog kills a hung
/// agent's jobs up to one second after its lease, and SIGKILLed processes
/// take a moment to be gone.
pub const MIN_DOWN_MARGIN_MS: u64 = 2_000;
/// The shortest heartbeat period an agent accepts.
pub const MIN_HEARTBEAT_MS: u64 = 10;
/// The longest heartbeat period an agent accepts.
pub const MAX_HEARTBEAT_MS: u64 = 60_000;
/// The longest lease an agent accepts (an hour).
pub const MAX_LEASE_MS: u64 = 3_600_000;

/// The agents' heartbeat and lease, and the leader's down margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLiveness {
    /// An agent heartbeats every this many ms.
    pub heartbeat_ms: u64,
    /// An agent whose heartbeats no leader acknowledged for this long kills
    /// its jobs (unless the controllers are the ones away).
    pub lease_ms: u64,
    /// After a lapsed lease, the leader waits this long before it declares
    /// the node down and runs its jobs elsewhere.
    pub down_margin_ms: u64,
}

impl Default for NodeLiveness {
    fn default() -> Self {
        NodeLiveness {
            heartbeat_ms: 500,
            lease_ms: 10_000,
            down_margin_ms: 5_000,
        }
    }
}

/// Settings that cannot be used together, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct LivenessRefusal {
    /// The setting at fault (`lease_ms`).
    pub setting: &'static str,
    /// Why, and what would do.
    pub reason: String,
}

impl NodeLiveness {
    /// How long after its last heartbeat a node is declared down, ms.
    pub fn down_after_ms(&self) -> u64 {
        self.lease_ms.saturating_add(self.down_margin_ms)
    }

    /// Checks the settings against each other: a lease spans at least four
    /// heartbeats (an agent looks for a new leader after two unacknowledged
    /// ones and must reattach before its lease runs out), and the margin is
    /// at least [`MIN_DOWN_MARGIN_MS`]; all within what agents accept.
    pub fn check(&self) -> Result<(), LivenessRefusal> {
        let refuse = |setting, reason: String| Err(LivenessRefusal { setting, reason });
        if !(MIN_HEARTBEAT_MS..=MAX_HEARTBEAT_MS).contains(&self.heartbeat_ms) {
            return refuse(
                "heartbeat_ms",
                format!(
                    "{} ms is outside what agents accept; give {MIN_HEARTBEAT_MS} to {MAX_HEARTBEAT_MS} ms",
                    self.heartbeat_ms
                ),
            );
        }
        let four = self.heartbeat_ms.saturating_mul(4);
        if self.lease_ms < four {
            return refuse(
                "lease_ms",
                format!(
                    "{} ms must be at least four heartbeats ({four} ms): an agent looks for a new leader after two unacknowledged heartbeats and must reattach before its lease runs out",
                    self.lease_ms
                ),
            );
        }
        if self.lease_ms > MAX_LEASE_MS {
            return refuse(
                "lease_ms",
                format!(
                    "{} ms is longer than agents accept; give at most {MAX_LEASE_MS} ms",
                    self.lease_ms
                ),
            );
        }
        if self.down_margin_ms < MIN_DOWN_MARGIN_MS {
            return refuse(
                "down_margin_ms",
                format!(
                    "{} ms is too short: a node's jobs are run elsewhere this long after its lease ran out, and a hung agent's watchdog kills them up to 1 s after the lease, so a shorter margin could run a job in two places; give at least {MIN_DOWN_MARGIN_MS} ms",
                    self.down_margin_ms
                ),
            );
        }
        if self.down_margin_ms > MAX_LEASE_MS {
            return refuse(
                "down_margin_ms",
                format!("{} ms is longer than an hour", self.down_margin_ms),
            );
        }
        Ok(())
    }

    /// How long after a change from `self` the settings it replaced still
    /// count: twice the longer lease (the leader ends the sessions of agents
    /// that attached before the change; one it cannot reach fences by its old
    /// lease), plus the old margin.
    pub fn transition_ms(&self, next: &NodeLiveness) -> u64 {
        self.lease_ms
            .max(next.lease_ms)
            .saturating_mul(2)
            .saturating_add(self.down_margin_ms)
    }
}

/// The cluster's settings, the ones they replaced, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LivenessSettings {
    /// In force.
    pub current: NodeLiveness,
    /// What the last change replaced (none: set once, at bootstrap or the
    /// first leader of a build that replicates them).
    pub previous: Option<NodeLiveness>,
    /// Leader time of the last change.
    pub changed_at: Timestamp,
}

impl LivenessSettings {
    /// How long after its last heartbeat a node is declared down at state
    /// time `now`: the current settings' timeout, or the longer of it and
    /// the replaced one's while the change is recent.
    pub fn down_after_ms(&self, now: Timestamp) -> u64 {
        let current = self.current.down_after_ms();
        match self.previous {
            Some(previous)
                if now.0
                    < self
                        .changed_at
                        .0
                        .saturating_add(previous.transition_ms(&self.current)) =>
            {
                current.max(previous.down_after_ms())
            }
            _ => current,
        }
    }

    /// The settings after a change to `next` at `at` (the same settings
    /// again change nothing, so that proposing them twice does not restart
    /// a transition).
    pub fn changed(self, next: NodeLiveness, at: Timestamp) -> LivenessSettings {
        if next == self.current {
            return self;
        }
        LivenessSettings {
            current: next,
            previous: Some(self.current),
            changed_at: at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn liveness(heartbeat_ms: u64, lease_ms: u64, down_margin_ms: u64) -> NodeLiveness {
        NodeLiveness {
            heartbeat_ms,
            lease_ms,
            down_margin_ms,
        }
    }

    #[test]
    fn the_defaults_hold_and_each_rule_names_its_setting() {
        assert_eq!(NodeLiveness::default().check(), Ok(()));
        let setting = |l: NodeLiveness| l.check().map_err(|r| r.setting);
        assert_eq!(setting(liveness(0, 10_000, 5_000)), Err("heartbeat_ms"));
        assert_eq!(setting(liveness(500, 1_999, 5_000)), Err("lease_ms"));
        assert_eq!(setting(liveness(500, 2_000, 5_000)), Ok(()));
        assert_eq!(setting(liveness(500, 10_000, 1_999)), Err("down_margin_ms"));
        assert_eq!(setting(liveness(500, 10_000, 0)), Err("down_margin_ms"));
        assert_eq!(
            setting(liveness(500, MAX_LEASE_MS + 1, 5_000)),
            Err("lease_ms")
        );
    }

    #[test]
    fn a_change_keeps_the_longer_timeout_through_its_transition() {
        let long = liveness(500, 20_000, 10_000);
        let short = liveness(500, 4_000, 2_000);
        let set = LivenessSettings {
            current: long,
            previous: None,
            changed_at: Timestamp(0),
        };
        assert_eq!(set.down_after_ms(Timestamp(1)), 30_000);
        let changed = set.changed(short, Timestamp(100_000));
        // 2 × 20 s + 10 s after the change, the old 30 s still counts.
        assert_eq!(changed.down_after_ms(Timestamp(100_000)), 30_000);
        assert_eq!(changed.down_after_ms(Timestamp(149_999)), 30_000);
        assert_eq!(changed.down_after_ms(Timestamp(150_000)), 6_000);
        // Longer settings count at once.
        let back = changed.changed(long, Timestamp(200_000));
        assert_eq!(back.down_after_ms(Timestamp(200_000)), 30_000);
        assert_eq!(back.previous, Some(short));
        // The same settings again change nothing.
        assert_eq!(back.changed(long, Timestamp(300_000)), back);
    }
}
