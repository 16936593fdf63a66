//! Whether this leader hears from enough nodes to tell a lost node from an
//! outage of its own (pure). A node *reaches* the leader when its latest
//! heartbeat arrived within [`HEARD_WITHIN`], echoes an acknowledgement the
//! leader sent within [`ACK_ECHO_WITHIN`] (so the way back works too, and the
//! agent answers other agents "I reach a leader" for a while yet), and names
//! the roster the leader holds now. The leader declares a silent node down
//! only while a majority of the roster has reached it without a break for
//! the whole wait (the lease and a margin): then no majority of agents can
//! have said "no leader reaches us" in that time, so no agent kept its jobs
//! on the other nodes' word (the agent's `outage::verdict` gives the other
//! half of the argument).
//!
//! A leader that hears from less than a majority declares nothing, however
//! long: half the nodes silent at once looks, from here, the same as this
//! leader's own network failing (Kubernetes' node lifecycle controller stops
//! evicting from a fully disrupted zone for the same reason). An operator
//! declares such nodes down by hand.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use corral_proto::roster::{RosterDigest, majority_of};
use tokio::time::Instant;

/// A heartbeat counts this long after it arrived (heartbeats come every
/// 500 ms; a loaded machine delays some).
pub const HEARD_WITHIN: Duration = Duration::from_secs(2);

/// The acknowledgement a heartbeat echoes must have left this recently. The
/// agent counts itself led for `outage::REACH_WINDOW` (5 s) after it received
/// one, so it says "I reach a leader" for at least 2 s after this leader last
/// counted it: past the next look ([`LONGEST_GAP`]).
pub const ACK_ECHO_WITHIN: Duration = Duration::from_secs(3);

/// Evaluations further apart than this break every node's run (a run is
/// only as continuous as the evaluations that saw it).
pub const LONGEST_GAP: Duration = Duration::from_secs(1);

/// The latest heartbeat of a node that confirmed the way back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    /// When the heartbeat arrived.
    pub heard: Instant,
    /// When the leader sent the acknowledgement it echoes.
    pub ack_sent: Instant,
    /// The roster the agent holds.
    pub roster: Option<RosterDigest>,
}

/// The nodes that reach the leader at `now`, holding roster `digest`.
pub fn reaching(
    echoes: &HashMap<String, Echo>,
    digest: RosterDigest,
    now: Instant,
) -> BTreeSet<String> {
    echoes
        .iter()
        .filter(|(_, echo)| {
            echo.roster == Some(digest)
                && now.saturating_duration_since(echo.heard) <= HEARD_WITHIN
                && now.saturating_duration_since(echo.ack_sent) <= ACK_ECHO_WITHIN
        })
        .map(|(node, _)| node.clone())
        .collect()
}

/// Since when each node has reached the leader without a break.
#[derive(Debug, Default, Clone)]
pub struct Runs {
    since: HashMap<String, Instant>,
    last_look: Option<Instant>,
}

impl Runs {
    /// At `now`, exactly `reached` reach the leader.
    pub fn observe(&mut self, now: Instant, reached: &BTreeSet<String>) {
        if self
            .last_look
            .is_some_and(|last| now.saturating_duration_since(last) > LONGEST_GAP)
        {
            self.since.clear();
        }
        self.since.retain(|node, _| reached.contains(node));
        for node in reached {
            self.since.entry(node.clone()).or_insert(now);
        }
        self.last_look = Some(now);
    }

    /// Forgets every run (a new term, or a term without quorum).
    pub fn clear(&mut self) {
        self.since.clear();
        self.last_look = None;
    }

    /// How many nodes have reached the leader without a break for `held` by
    /// `now` (the last look must be `now`'s: an old look proves nothing).
    pub fn held(&self, now: Instant, held: Duration) -> usize {
        if self
            .last_look
            .is_none_or(|last| now.saturating_duration_since(last) > LONGEST_GAP)
        {
            return 0;
        }
        self.since
            .values()
            .filter(|since| now.saturating_duration_since(**since) >= held)
            .count()
    }
}

/// Whether silent nodes may be declared down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// A majority has reached the leader for the whole wait.
    Open,
    /// Too few: `held` of `of` nodes (`needed` needed).
    Closed {
        /// Nodes reached for the whole wait.
        held: usize,
        /// A majority of the roster.
        needed: usize,
        /// The roster's size.
        of: usize,
    },
}

/// The gate for a roster of `of` nodes of which `held` reached the leader
/// for the whole wait.
pub fn gate(held: usize, of: usize) -> Gate {
    let needed = majority_of(of);
    if of > 0 && held >= needed {
        Gate::Open
    } else {
        Gate::Closed { held, needed, of }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_node_reaches_the_leader_only_with_a_fresh_echo_of_the_current_roster() {
        let t0 = Instant::now();
        let current = RosterDigest::of(["a", "b", "c"]);
        let older = RosterDigest::of(["a", "b"]);
        let ms = Duration::from_millis;
        let echo = |heard: u64, ack_sent: u64, roster| Echo {
            heard: t0 + ms(heard),
            ack_sent: t0 + ms(ack_sent),
            roster: Some(roster),
        };
        let echoes = HashMap::from([
            ("a".to_string(), echo(3_500, 1_000, current)),
            // The way back is broken: its echo is of an old acknowledgement.
            ("b".to_string(), echo(3_900, 900, current)),
            ("c".to_string(), echo(3_900, 3_500, older)),
            // Silent for over two seconds.
            ("d".to_string(), echo(1_900, 1_800, current)),
        ]);
        assert_eq!(reaching(&echoes, current, t0 + ms(4_000)), names(&["a"]));
    }

    #[test]
    fn a_run_breaks_when_the_node_misses_a_look_or_the_looks_stop() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_millis(n * 250);
        let mut runs = Runs::default();
        let hold = Duration::from_secs(2);
        for i in 0..=8 {
            let reached = if i == 4 {
                names(&["a"])
            } else {
                names(&["a", "b"])
            };
            runs.observe(s(i), &reached);
        }
        // a since 0 (2 s), b since look 5 (0.75 s).
        assert_eq!(runs.held(s(8), hold), 1);
        // Looks that stop for over a second prove nothing any more.
        assert_eq!(runs.held(s(13), hold), 0);
        runs.observe(s(13), &names(&["a", "b"]));
        assert_eq!(runs.held(s(13), Duration::ZERO), 2);
        assert_eq!(runs.held(s(13), hold), 0, "the gap broke a's run");
        runs.clear();
        assert_eq!(runs.held(s(13), Duration::ZERO), 0);
    }

    #[test]
    fn the_gate_needs_a_majority_of_the_roster() {
        assert_eq!(gate(2, 3), Gate::Open);
        assert_eq!(
            gate(1, 3),
            Gate::Closed {
                held: 1,
                needed: 2,
                of: 3
            }
        );
        assert_eq!(
            gate(1, 2),
            Gate::Closed {
                held: 1,
                needed: 2,
                of: 2
            }
        );
        assert_eq!(gate(3, 4), Gate::Open);
        assert_eq!(
            gate(0, 0),
            Gate::Closed {
                held: 0,
                needed: 1,
                of: 0
            }
        );
    }
}
