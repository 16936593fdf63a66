//! How fast the cluster came back after each kind of fault, from the history:
//! `elected_ms`, from the fault's beginning to the first leader of a newer
//! term before the next fault began (where the fault caused an election), and `served_ms`, from the
//! heal to the first client operation, invoked after it, that succeeded.
//! Figures, not a verdict: the liveness checker holds the bound.

use std::collections::BTreeMap;

use crate::history::{EventKind, History};

/// The figures of one kind of fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// The fault's kind (`kill-leader`).
    pub kind: String,
    /// Faults of this kind injected.
    pub faults: usize,
    /// Fault beginning → a leader of a newer term (faults that caused one).
    pub elected_ms: Vec<u64>,
    /// Heal → the first successful operation invoked after it.
    pub served_ms: Vec<u64>,
}

/// The figures per kind, in the order kinds first occurred.
pub fn recovery(history: &History) -> Vec<Recovery> {
    let mut by_kind: Vec<Recovery> = Vec::new();
    let mut kinds: BTreeMap<u64, usize> = BTreeMap::new();
    let mut term = 0u64;
    let mut invoked: BTreeMap<u64, u64> = BTreeMap::new();
    // (heal time, kind index) of heals whose first success is still awaited.
    let mut awaiting_service: Vec<(u64, usize)> = Vec::new();
    // (begin time, term then, kind index) of faults awaiting a newer leader.
    let mut awaiting_leader: Vec<(u64, u64, usize)> = Vec::new();
    for event in &history.events {
        match &event.kind {
            EventKind::FaultBegin { fault, kind, .. } => {
                let index = match by_kind.iter().position(|r| &r.kind == kind) {
                    Some(i) => i,
                    None => {
                        by_kind.push(Recovery {
                            kind: kind.clone(),
                            faults: 0,
                            elected_ms: Vec::new(),
                            served_ms: Vec::new(),
                        });
                        by_kind.len() - 1
                    }
                };
                by_kind[index].faults += 1;
                kinds.insert(*fault, index);
                // An election from here on is this fault's doing, not an
                // earlier one's (which may have caused none).
                awaiting_leader.clear();
                awaiting_leader.push((event.t, term, index));
            }
            EventKind::FaultHealed { fault } => {
                if let Some(index) = kinds.get(fault) {
                    awaiting_service.push((event.t, *index));
                }
            }
            EventKind::Leader { term: now, .. } if *now > term => {
                term = *now;
                for (began, before, index) in awaiting_leader.drain(..) {
                    if *now > before {
                        by_kind[index].elected_ms.push(event.t - began);
                    }
                }
            }
            EventKind::Invoke { op, .. } => {
                invoked.insert(*op, event.t);
            }
            EventKind::Ok { op, .. } => {
                if let Some(started) = invoked.remove(op) {
                    awaiting_service.retain(|(healed, index)| {
                        if started >= *healed {
                            by_kind[*index].served_ms.push(event.t - healed);
                            false
                        } else {
                            true
                        }
                    });
                }
            }
            _ => {}
        }
    }
    by_kind
}

/// The median and the largest of `samples`, if any.
pub fn median_and_max(samples: &[u64]) -> Option<(u64, u64)> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    Some((*sorted.get(sorted.len() / 2)?, *sorted.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    #[test]
    fn election_and_service_times_are_measured_per_kind() {
        let mut b = Builder::new();
        b.event(
            0,
            EventKind::Leader {
                replica: 1,
                term: 1,
            },
        )
        .event(
            1_000,
            EventKind::FaultBegin {
                fault: 1,
                kind: "kill-leader".into(),
                target: "controller-1".into(),
                cut_off: Vec::new(),
            },
        )
        .event(
            1_400,
            EventKind::Leader {
                replica: 2,
                term: 2,
            },
        )
        .event(3_000, EventKind::FaultHealed { fault: 1 })
        // Invoked before the heal: not counted.
        .read(1, 7, 2_900, 3_100, ("RUNNING", 1, 0))
        .read(2, 7, 3_200, 3_250, ("RUNNING", 1, 0))
        .event(
            5_000,
            EventKind::FaultBegin {
                fault: 2,
                kind: "kill-agent".into(),
                target: "agent-gpu01".into(),
                cut_off: Vec::new(),
            },
        )
        .event(8_000, EventKind::FaultHealed { fault: 2 })
        .read(3, 7, 8_100, 8_400, ("RUNNING", 1, 0))
        .event(
            9_000,
            EventKind::FaultBegin {
                fault: 3,
                kind: "pause-leader".into(),
                target: "controller-2".into(),
                cut_off: Vec::new(),
            },
        )
        // Caused by the pause, not by the agent's kill before it.
        .event(
            9_700,
            EventKind::Leader {
                replica: 3,
                term: 3,
            },
        )
        .event(12_000, EventKind::FaultHealed { fault: 3 });
        let figures = recovery(&b.history());
        assert_eq!(figures.len(), 3);
        assert_eq!(figures[2].elected_ms, vec![700]);
        assert_eq!(figures[0].kind, "kill-leader");
        assert_eq!(figures[0].elected_ms, vec![400]);
        assert_eq!(figures[0].served_ms, vec![250]);
        assert_eq!(figures[1].elected_ms, Vec::<u64>::new());
        assert_eq!(figures[1].served_ms, vec![400]);
        assert_eq!(median_and_max(&[5, 1, 9]), Some((5, 9)));
        assert_eq!(median_and_max(&[]), None);
    }
}
