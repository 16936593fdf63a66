//! How long a node may be silent: the agents' heartbeat period and lease,
//! and the margin after a lapsed lease before the leader declares the node
//! down. Replicated, so that every controller that leads judges nodes by the
//! same numbers the agents fence by (two controllers with different files,
//! or a margin shorter than the agent's watchdog, would let a job run in two
//! places).
//!
//! An agent holds the lease it was welcomed with, which is the one in force
//! when it registered (its registration commits before its welcome is
//! written), until it attaches again: the leader ends every session when a
//! change applies, but an agent cut off meanwhile, or kept through a
//! controller outage by its peers, still fences by its old lease, for as long
//! as the outage lasts. So a node that last registered before the last change
//! is declared down only after the longest timeout of the settings replaced
//! since every node that was up had registered again
//! ([`LivenessSettings::down_after_ms`]); no window of time ends this, only
//! the node's next registration.
//!
//! Not covered: before the first settings are replicated (a new cluster's
//! first leader, or an upgraded cluster's first leader of format 5), each
//! leader welcomed agents with its own file's values, and nothing in the
//! state says which; a node cut off since then is judged by the first
//! settings. Keep every controller's `[liveness]` the same until then.

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
}

/// The cluster's settings, what a node registered before their last change
/// may still hold, and when they changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LivenessSettings {
    /// In force.
    pub current: NodeLiveness,
    /// The longest lease + margin, ms, of the settings replaced since the
    /// last change at which every node that was up had registered after the
    /// change before it (0: none): a node that registered before the last
    /// change may hold a lease of any of them.
    pub replaced_down_after_ms: u64,
    /// Leader time of the last change (or of the first setting).
    pub changed_at: Timestamp,
}

impl LivenessSettings {
    /// The first settings of a cluster.
    pub fn first(current: NodeLiveness, at: Timestamp) -> LivenessSettings {
        LivenessSettings {
            current,
            replaced_down_after_ms: 0,
            changed_at: at,
        }
    }

    /// How long after its last heartbeat a node that last registered at
    /// `registered` is declared down: the current settings' timeout for one
    /// that registered after the last change (it was welcomed with them),
    /// else the longest of it and the replaced settings' timeouts.
    pub fn down_after_ms(&self, registered: Option<Timestamp>) -> u64 {
        let current = self.current.down_after_ms();
        match registered {
            Some(at) if at > self.changed_at => current,
            _ => current.max(self.replaced_down_after_ms),
        }
    }

    /// The settings after a change to `next` at `at`. `all_registered_since`:
    /// whether every node that is up registered after the last change, so
    /// that only the settings being replaced can still be held. The same
    /// settings again change nothing.
    pub fn changed(
        self,
        next: NodeLiveness,
        at: Timestamp,
        all_registered_since: bool,
    ) -> LivenessSettings {
        if next == self.current {
            return self;
        }
        let replaced = self.current.down_after_ms();
        let replaced_down_after_ms = if all_registered_since {
            replaced
        } else {
            replaced.max(self.replaced_down_after_ms)
        };
        LivenessSettings {
            current: next,
            replaced_down_after_ms,
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
    fn a_node_registered_before_a_change_keeps_the_longer_timeout_until_it_registers_again() {
        let long = liveness(500, 20_000, 10_000);
        let short = liveness(500, 4_000, 2_000);
        let set = LivenessSettings::first(long, Timestamp(0));
        assert_eq!(set.down_after_ms(Some(Timestamp(0))), 30_000);
        let changed = set.changed(short, Timestamp(100_000), true);
        // Registered before the change, or never: the old 30 s, however long ago.
        assert_eq!(changed.down_after_ms(Some(Timestamp(99_000))), 30_000);
        assert_eq!(changed.down_after_ms(Some(Timestamp(100_000))), 30_000);
        assert_eq!(changed.down_after_ms(None), 30_000);
        // Registered after it: welcomed with the new settings.
        assert_eq!(changed.down_after_ms(Some(Timestamp(100_001))), 6_000);
        // A third setting while a node still held the first: it is kept.
        let again = changed.changed(liveness(500, 2_000, 2_000), Timestamp(101_000), false);
        assert_eq!(again.down_after_ms(Some(Timestamp(50_000))), 30_000);
        // Once every node registered since, only the one replaced counts.
        let settled = changed.changed(liveness(500, 2_000, 2_000), Timestamp(101_000), true);
        assert_eq!(settled.down_after_ms(Some(Timestamp(100_500))), 6_000);
        // The same settings again change nothing.
        assert_eq!(
            settled.changed(settled.current, Timestamp(200_000), false),
            settled
        );
    }

    /// Agents register at random moments and hold the lease in force then;
    /// settings change at random. At every moment, each node's down timeout
    /// is at least the lease + margin of the settings it was welcomed with.
    #[test]
    fn every_node_is_declared_down_no_sooner_than_the_settings_it_holds_allow() {
        use proptest::prelude::*;
        #[derive(Debug, Clone)]
        enum Event {
            Register(usize),
            Change(u64, u64),
        }
        let event = prop_oneof![
            (0..4usize).prop_map(Event::Register),
            (1..60u64, 2..30u64).prop_map(|(lease_s, margin_s)| Event::Change(lease_s, margin_s)),
        ];
        proptest!(|(events in prop::collection::vec(event, 1..40))| {
            let mut settings = LivenessSettings::first(liveness(500, 10_000, 5_000), Timestamp(0));
            // Each node's registration time and the timeout it holds.
            let mut held: [Option<(Timestamp, u64)>; 4] = [None; 4];
            for (i, event) in events.into_iter().enumerate() {
                let now = Timestamp(1_000 * (i as u64 + 1));
                match event {
                    Event::Register(node) => {
                        held[node] = Some((now, settings.current.down_after_ms()));
                    }
                    Event::Change(lease_s, margin_s) => {
                        let next = liveness(500, lease_s * 1_000, margin_s * 1_000);
                        let all = held
                            .iter()
                            .flatten()
                            .all(|(registered, _)| *registered > settings.changed_at);
                        settings = settings.changed(next, now, all);
                    }
                }
                for (registered, holds) in held.iter().flatten() {
                    prop_assert!(settings.down_after_ms(Some(*registered)) >= *holds);
                }
            }
        });
    }
}
