//! Whether the answers of the other nodes' agents let this agent keep its jobs
//! past its lease (pure): only when a majority of the roster it holds, itself
//! included, reaches no leader and holds the same roster.
//!
//! Why that is safe: a leader declares a node down only after it has heard,
//! for the lease and a margin without a break, from a majority of the same
//! roster whose heartbeats confirm the way back (`node_majority` in the
//! controller). Every one of those answers "I reach a leader" for all that
//! time, and two majorities of one roster share a member, so no check this
//! agent starts in that time can find a majority saying the opposite. Its
//! last successful check is then older than the leader's whole wait, and what
//! it granted (`peer_keep`: 8 s of the default 15 s wait) ran out before the node is
//! declared down.

use std::collections::BTreeSet;

use corral_proto::roster::{Roster, RosterDigest};

/// One agent's answer to "do you reach a leader?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The node that answered.
    pub node: String,
    /// A leader acknowledged it lately.
    pub reaches_leader: bool,
    /// The roster it holds.
    pub roster: Option<RosterDigest>,
}

/// What the answers allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A majority reaches no leader: the controllers are away, not this node.
    Keep {
        /// Members (this node included) that reach no leader and hold this roster.
        agreeing: usize,
        /// The roster's size.
        of: usize,
    },
    /// Too few agree: this node may be the one cut off, and a leader may
    /// give its GPUs away.
    Fence {
        /// Members that agreed.
        agreeing: usize,
        /// How many were needed.
        needed: usize,
        /// The roster's size.
        of: usize,
        /// Members that reach a leader.
        reaching_leader: Vec<String>,
    },
}

/// Judges `answers` for node `me`, which holds `roster` and reaches no leader.
pub fn judge(roster: &Roster, me: &str, answers: &[Answer]) -> Verdict {
    let mut agreeing: BTreeSet<&str> = BTreeSet::new();
    // A node outside the roster it holds was removed from the cluster: it
    // has no say, and keeps nothing.
    let member = roster.members.contains_key(me);
    if member {
        agreeing.insert(me);
    }
    let mut reaching_leader = BTreeSet::new();
    for answer in answers {
        if answer.node == me || !roster.members.contains_key(&answer.node) {
            continue;
        }
        if answer.reaches_leader {
            reaching_leader.insert(answer.node.clone());
        } else if answer.roster == Some(roster.digest) {
            agreeing.insert(&answer.node);
        }
    }
    let needed = roster.majority();
    let of = roster.members.len();
    if member && agreeing.len() >= needed {
        Verdict::Keep {
            agreeing: agreeing.len(),
            of,
        }
    } else {
        Verdict::Fence {
            agreeing: agreeing.len(),
            needed,
            of,
            reaching_leader: reaching_leader.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn roster(names: &[&str]) -> Roster {
        Roster::new(
            names
                .iter()
                .map(|n| (n.to_string(), Some(format!("{n}:6818"))))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    fn answer(node: &str, reaches_leader: bool, roster: &Roster) -> Answer {
        Answer {
            node: node.into(),
            reaches_leader,
            roster: Some(roster.digest),
        }
    }

    #[test]
    fn a_majority_without_a_leader_keeps_the_jobs() {
        let r = roster(&["a", "b", "c", "d", "e"]);
        let answers = [answer("b", false, &r), answer("c", false, &r)];
        assert_eq!(
            judge(&r, "a", &answers),
            Verdict::Keep { agreeing: 3, of: 5 }
        );
    }

    #[test]
    fn a_minority_fences_whatever_the_others_say() {
        let r = roster(&["a", "b", "c", "d", "e"]);
        // Alone with one other node: a leader may hear the other three.
        let answers = [answer("b", false, &r)];
        assert!(matches!(
            judge(&r, "a", &answers),
            Verdict::Fence {
                agreeing: 2,
                needed: 3,
                ..
            }
        ));
        // Nodes that reach a leader never count, and are named.
        let answers = [
            answer("b", false, &r),
            answer("c", true, &r),
            answer("d", true, &r),
        ];
        let Verdict::Fence {
            reaching_leader, ..
        } = judge(&r, "a", &answers)
        else {
            panic!("two of five cannot keep");
        };
        assert_eq!(reaching_leader, vec!["c", "d"]);
    }

    #[test]
    fn only_members_holding_the_same_roster_count_once_each() {
        let r = roster(&["a", "b", "c"]);
        let other = roster(&["a", "b", "c", "x"]);
        // b holds a newer roster: its majority is another one.
        let answers = [answer("b", false, &other), answer("x", false, &other)];
        assert!(matches!(
            judge(&r, "a", &answers),
            Verdict::Fence { agreeing: 1, .. }
        ));
        // The same node answering twice, or this node answering itself, counts once.
        let answers = [
            answer("a", false, &r),
            answer("b", false, &r),
            answer("b", false, &r),
        ];
        assert_eq!(
            judge(&r, "a", &answers),
            Verdict::Keep { agreeing: 2, of: 3 }
        );
        // A node without a roster yet never agrees.
        let answers = [Answer {
            node: "b".into(),
            reaches_leader: false,
            roster: None,
        }];
        assert!(matches!(judge(&r, "a", &answers), Verdict::Fence { .. }));
    }

    #[test]
    fn a_node_outside_its_own_roster_never_keeps() {
        let r = roster(&["b", "c", "d"]);
        let answers = [answer("b", false, &r), answer("c", false, &r)];
        // b and c are a majority, but this node is not a member: it was
        // removed from the cluster and has nothing to keep.
        assert!(matches!(
            judge(&r, "a", &answers),
            Verdict::Fence { agreeing: 2, .. }
        ));
    }

    #[test]
    fn a_two_node_roster_needs_both() {
        let r = roster(&["a", "b"]);
        assert!(matches!(
            judge(&r, "a", &[]),
            Verdict::Fence {
                agreeing: 1,
                needed: 2,
                ..
            }
        ));
        assert_eq!(
            judge(&r, "a", &[answer("b", false, &r)]),
            Verdict::Keep { agreeing: 2, of: 2 }
        );
    }
}
