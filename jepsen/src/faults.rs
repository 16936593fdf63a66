//! The faults of a history as intervals: when each began, when it healed (or
//! the history's end), and which nodes it cut off from the leader. Checkers
//! ask it whether a node was cut off long enough for the cluster to declare
//! it down rightly.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{EventKind, History};

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What kind (`kill-leader`, `isolate-agent-20s`, ...), as its
    /// `FaultBegin` named it.
    pub kind: String,
    /// What it was aimed at, as its `FaultBegin` named it (`gpu04 GPU 5`,
    /// `controller-2`).
    pub target: String,
    /// When it began, ms.
    pub began: u64,
    /// When it healed, ms (the history's end when it never did).
    pub healed: u64,
    /// The nodes whose agents it cut off from the leader.
    pub cut_off: Vec<String>,
    /// The controllers it left without a majority (a partition's).
    pub minority: Vec<String>,
}

/// Every fault of `history`, in the order they began.
pub fn of(history: &History) -> Vec<Fault> {
    let mut faults: BTreeMap<u64, Fault> = BTreeMap::new();
    for event in &history.events {
        match &event.kind {
            EventKind::FaultBegin {
                fault,
                kind,
                target,
                cut_off,
            } => {
                faults.insert(
                    *fault,
                    Fault {
                        kind: kind.clone(),
                        target: target.clone(),
                        began: event.t,
                        healed: history.end(),
                        cut_off: cut_off.clone(),
                        minority: Vec::new(),
                    },
                );
            }
            EventKind::FaultHealed { fault } => {
                if let Some(f) = faults.get_mut(fault) {
                    f.healed = event.t;
                }
            }
            EventKind::Minority { fault, controllers } => {
                if let Some(f) = faults.get_mut(fault) {
                    f.minority = controllers.clone();
                }
            }
            _ => {}
        }
    }
    let mut list: Vec<Fault> = faults.into_values().collect();
    list.sort_by_key(|f| f.began);
    list
}

/// Whether `node` was, at `t`, inside a fault that cut it off from the
/// leader for at least `lease_ms`: long enough that the cluster may rightly
/// have declared it down, and lost what it did meanwhile.
pub fn cut_off_past_lease(faults: &[Fault], node: &str, t: u64, lease_ms: u64) -> bool {
    faults.iter().any(|f| {
        f.cut_off.iter().any(|n| n == node)
            && f.began <= t
            && t <= f.healed
            && f.healed - f.began >= lease_ms
    })
}

/// Every node the history names: where ranks started, and what faults cut off.
pub fn nodes_named(history: &History) -> BTreeSet<String> {
    let mut nodes = BTreeSet::new();
    for event in &history.events {
        match &event.kind {
            EventKind::AttemptStart { node, .. } => {
                nodes.insert(node.clone());
            }
            EventKind::FaultBegin { cut_off, .. } => nodes.extend(cut_off.iter().cloned()),
            _ => {}
        }
    }
    nodes
}

/// When `node`'s agent hears at the latest of an end the cluster decided at
/// `t`, beyond the lease, if at `t` it was inside a fault that cut a majority
/// of the cluster's `nodes` off from the leader: such agents reach no leader
/// and say so to each other, so they keep their jobs (a controller outage
/// is not a node failure) and the leader, hearing a minority, declares none
/// down; the end reaches them when the fault heals. `None` otherwise.
pub fn kept_by_majority_until(faults: &[Fault], node: &str, t: u64, nodes: usize) -> Option<u64> {
    faults
        .iter()
        .filter(|f| {
            f.began <= t
                && t <= f.healed
                && f.cut_off.len() > nodes / 2
                && f.cut_off.iter().any(|n| n == node)
        })
        .map(|f| f.healed)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    fn cut(b: &mut Builder, id: u64, (began, healed): (u64, u64), node: &str) {
        b.event(
            began,
            EventKind::FaultBegin {
                fault: id,
                kind: "isolate-agent".into(),
                target: format!("agent-{node}"),
                cut_off: vec![node.into()],
            },
        )
        .event(healed, EventKind::FaultHealed { fault: id });
    }

    #[test]
    fn only_a_cut_of_a_majority_keeps_a_node_until_the_heal() {
        let mut b = Builder::new();
        b.event(
            1_000,
            EventKind::FaultBegin {
                fault: 1,
                kind: "halves-12s".into(),
                target: "a | b".into(),
                cut_off: vec!["gpu01".into(), "gpu02".into(), "gpu03".into()],
            },
        )
        .event(13_000, EventKind::FaultHealed { fault: 1 });
        cut(&mut b, 2, (20_000, 40_000), "gpu04");
        let history = b.history();
        let faults = of(&history);
        assert_eq!(nodes_named(&history).len(), 4);
        assert_eq!(
            kept_by_majority_until(&faults, "gpu01", 5_000, 4),
            Some(13_000)
        );
        assert_eq!(
            kept_by_majority_until(&faults, "gpu01", 14_000, 4),
            None,
            "after the heal"
        );
        assert_eq!(
            kept_by_majority_until(&faults, "gpu04", 25_000, 4),
            None,
            "alone: fenced"
        );
        assert_eq!(
            kept_by_majority_until(&faults, "gpu01", 5_000, 6),
            None,
            "half of six"
        );
    }

    #[test]
    fn only_a_cut_of_that_node_longer_than_the_lease_and_spanning_the_moment_counts() {
        let mut b = Builder::new();
        cut(&mut b, 1, (1_000, 21_000), "gpu01");
        cut(&mut b, 2, (30_000, 35_000), "gpu02");
        let faults = of(&b.history());
        assert!(cut_off_past_lease(&faults, "gpu01", 5_000, 10_000));
        assert!(
            !cut_off_past_lease(&faults, "gpu01", 25_000, 10_000),
            "after the heal"
        );
        assert!(
            !cut_off_past_lease(&faults, "gpu03", 5_000, 10_000),
            "another node"
        );
        assert!(
            !cut_off_past_lease(&faults, "gpu02", 32_000, 10_000),
            "shorter than the lease"
        );
    }
}
