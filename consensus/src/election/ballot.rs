//! Counting a pre-vote round: granted when a majority of every voter set
//! (two during a joint membership change) would vote for the candidate.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{ReplicaAddr, ReplicaId};

/// Every voter set of `membership` (two during a joint change), and every
/// voter but `me` with its addresses.
pub fn voters_of(
    membership: &openraft::Membership<ReplicaId, ReplicaAddr>,
    me: ReplicaId,
) -> (Vec<BTreeSet<ReplicaId>>, BTreeMap<ReplicaId, ReplicaAddr>) {
    let voter_sets: Vec<BTreeSet<ReplicaId>> = membership
        .get_joint_config()
        .iter()
        .map(|set| set.iter().copied().collect())
        .collect();
    let others = voter_sets
        .iter()
        .flatten()
        .filter(|voter| **voter != me)
        .filter_map(|voter| {
            membership
                .get_node(voter)
                .map(|addr| (*voter, addr.clone()))
        })
        .collect();
    (voter_sets, others)
}

/// True when `granted` holds a majority of each of `voter_sets`. No voter
/// set, or an empty one, is never a majority.
pub fn majority_of_each(voter_sets: &[BTreeSet<ReplicaId>], granted: &BTreeSet<ReplicaId>) -> bool {
    !voter_sets.is_empty()
        && voter_sets.iter().all(|set| {
            let yes = set.intersection(granted).count();
            !set.is_empty() && yes * 2 > set.len()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[ReplicaId]) -> BTreeSet<ReplicaId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_majority_of_one_set() {
        let voters = [set(&[1, 2, 3])];
        assert!(!majority_of_each(&voters, &set(&[1])));
        assert!(majority_of_each(&voters, &set(&[1, 3])));
        assert!(
            !majority_of_each(&voters, &set(&[1, 4, 5])),
            "non-voters do not count"
        );
        assert!(
            majority_of_each(&[set(&[7])], &set(&[7])),
            "a single voter elects itself"
        );
    }

    #[test]
    fn a_joint_change_needs_both_majorities() {
        let voters = [set(&[1, 2, 3]), set(&[3, 4, 5])];
        assert!(!majority_of_each(&voters, &set(&[1, 2])));
        assert!(!majority_of_each(&voters, &set(&[4, 5])));
        assert!(majority_of_each(&voters, &set(&[1, 3, 4])));
    }

    #[test]
    fn no_voters_no_majority() {
        assert!(!majority_of_each(&[], &set(&[1])));
        assert!(!majority_of_each(&[set(&[])], &set(&[1])));
    }
}
